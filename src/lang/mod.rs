//! The flowgraph language: syntax trees with spans, the two parsers, the checker, the
//! printers and the bytecode assembler.

pub mod ast;
pub mod brainfuck;
pub mod bytecode;
pub mod check;
pub mod comment;
pub mod diag;
pub mod lexer;
pub mod literal;
pub mod liveness;
pub mod parse_fg;
pub mod parse_pl;
pub mod print;
pub mod program;

pub use ast::Ast;
pub use diag::{Diagnostic, Source};
pub use program::{BlockId, Func, FuncId, Inst, Jump, Operand, Program, Slot, Terminator};

use flowjit_runtime::Value;

/// Which of the two syntaxes a program is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Syntax {
    /// The readable syntax (`.fg`).
    Fg,
    /// The Prolog-term syntax of the articles (`.pl`).
    Pl,
}

impl Syntax {
    /// The syntax a file's extension implies: `.pl` is Prolog, anything else readable.
    pub fn from_path(path: &str) -> Syntax {
        if path.ends_with(".pl") {
            Syntax::Pl
        } else {
            Syntax::Fg
        }
    }
}

/// Parses `text` in the given syntax.
pub fn parse(text: &str, syntax: Syntax) -> Result<Ast, Diagnostic> {
    match syntax {
        Syntax::Fg => parse_fg::parse_fg(text),
        Syntax::Pl => parse_pl::parse_pl(text),
    }
}

/// Parses and checks a program: the syntax tree and the checked program, or every problem.
pub fn load(text: &str, syntax: Syntax) -> Result<(Ast, Program), Vec<Diagnostic>> {
    let ast = parse(text, syntax).map_err(|d| vec![d])?;
    let program = check::check(&ast)?;
    Ok((ast, program))
}

/// Parses an input value in Prolog-term form (`10`, `jump_if_a`, `[mov_a_r0,2]`).
pub fn parse_value(text: &str) -> Result<Value, Diagnostic> {
    parse_pl::parse_pl_value(text)
}
