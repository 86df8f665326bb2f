//! The parser of the readable syntax (`.fg`).
//!
//! ```text
//! program  := block*
//! block    := header stmt* term
//! header   := NAME ':' | ['@' 'elidable'] 'func' NAME '(' NAME,* ')' ':'
//! stmt     := NAME '=' rhs | NAME '+=' arg | NAME '-=' arg | NAME '[' arg ']' '=' arg
//!           | 'print' '(' arg ')' | 'putchar' '(' arg ')'
//!           | 'promote' '(' NAME ')' | 'jit_merge_point' '(' NAME,* ')' | 'can_enter_jit'
//! rhs      := NAME '(' arg,* ')' | 'getchar' '(' ')' | 'call' NAME '(' arg,* ')'
//!           | arg '[' arg ']' | arg INFIX arg | arg
//! term     := 'goto' NAME | 'if' NAME 'goto' NAME 'else' 'goto' NAME
//!           | 'print_and_stop' '(' arg ')' | 'promote' '(' NAME ',' NAME ')' | 'return' arg
//! arg      := NAME | INT | '-' INT | ATOM | list | 'var' '(' NAME ')' | 'const' '(' const ')'
//! const    := NAME | INT | '-' INT | ATOM | list        (a bare NAME here is an atom)
//! list     := '[' const,* ']'
//! ```
//!
//! Line breaks mean nothing: a statement ends where the next one (or a label, or a
//! terminator) begins, so the articles' one-line programs parse as they are. `var(x)` and
//! `const(c)` are accepted as arguments too, as the articles sometimes write them.

use super::ast::{Arg, Ast, Block, Func, Name, Span, Stmt, Term, KEYWORDS, MAX_LIST_NESTING};
use super::diag::Diagnostic;
use super::lexer::{tokenize, Tok};
use flowjit_runtime::Value;

/// Parses a program in the readable syntax.
pub fn parse_fg(text: &str) -> Result<Ast, Diagnostic> {
    let mut p = Parser {
        toks: tokenize(text)?,
        pos: 0,
        depth: 0,
    };
    let mut blocks = Vec::new();
    while p.peek() != &Tok::Eof {
        blocks.push(p.block()?);
    }
    Ok(Ast { blocks })
}

/// Parses one constant written as in a list literal (`5`, `-3`, `foo`, `'x y'`, `[a,1]`),
/// the whole text and nothing else.
pub fn parse_fg_const(text: &str) -> Result<Value, Diagnostic> {
    let mut p = Parser {
        toks: tokenize(text)?,
        pos: 0,
        depth: 0,
    };
    let (v, _) = p.constant()?;
    p.expect_eof()?;
    Ok(v)
}

/// What `promote` is: a statement (`promote(v)`) or a terminator (`promote(v, l)`, with its
/// span).
enum Promotion {
    Stmt(Stmt),
    Term(Term, Span),
}

struct Parser {
    toks: Vec<(Tok, Span)>,
    pos: usize,
    /// How deep in list literals the parser is.
    depth: usize,
}

type PResult<T> = Result<T, Diagnostic>;

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].0
    }

    fn peek_at(&self, ahead: usize) -> &Tok {
        let i = (self.pos + ahead).min(self.toks.len() - 1);
        &self.toks[i].0
    }

    fn span(&self) -> Span {
        self.toks[self.pos].1
    }

    fn bump(&mut self) -> (Tok, Span) {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn error<T>(&self, expected: &str) -> PResult<T> {
        Err(Diagnostic::new(
            self.span(),
            format!("expected {expected}, found {}", self.peek().describe()),
        ))
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(q) if *q == p)
    }

    fn is_keyword(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s == kw)
    }

    fn expect_punct(&mut self, p: &str) -> PResult<Span> {
        if self.is_punct(p) {
            Ok(self.bump().1)
        } else {
            self.error(&format!("`{p}`"))
        }
    }

    fn expect_keyword(&mut self, kw: &str) -> PResult<Span> {
        if self.is_keyword(kw) {
            Ok(self.bump().1)
        } else {
            self.error(&format!("`{kw}`"))
        }
    }

    fn expect_eof(&mut self) -> PResult<()> {
        match self.peek() {
            Tok::Eof => Ok(()),
            _ => self.error("the end of the input"),
        }
    }

    /// A variable or label name: an identifier that is not a keyword.
    fn name(&mut self, what: &str) -> PResult<Name> {
        match self.peek().clone() {
            Tok::Ident(s) if KEYWORDS.contains(&s.as_str()) => Err(Diagnostic::new(
                self.span(),
                format!("expected {what}, found the keyword `{s}`"),
            )),
            Tok::Ident(s) => Ok(Name::new(s, self.bump().1)),
            _ => self.error(what),
        }
    }

    /// `@elidable`, if it is there, and `func NAME(params)`, if it is there: the
    /// function a block declares.
    fn func_header(&mut self) -> PResult<Option<(Name, Func)>> {
        let start = self.span();
        let elidable = self.is_punct("@");
        if elidable {
            self.bump();
            if !self.is_keyword("elidable") {
                return self.error("`elidable` after `@`");
            }
            self.bump();
            if !self.is_keyword("func") {
                return self.error("`func` after `@elidable`");
            }
        }
        if !self.is_keyword("func") {
            return Ok(None);
        }
        self.bump();
        let name = self.name("a function name after `func`")?;
        self.expect_punct("(")?;
        let params = self.names_until(")", "a parameter")?;
        let end = self.expect_punct(")")?;
        Ok(Some((
            name,
            Func {
                params,
                elidable,
                span: start.to(end),
            },
        )))
    }

    /// Names separated by commas, up to (not including) `close`.
    fn names_until(&mut self, close: &str, what: &str) -> PResult<Vec<Name>> {
        let mut names = Vec::new();
        while !self.is_punct(close) {
            names.push(self.name(what)?);
            if !self.is_punct(close) {
                self.expect_punct(",")?;
            }
        }
        Ok(names)
    }

    /// Arguments separated by commas, up to and including `)`.
    fn args_until_close(&mut self) -> PResult<(Vec<Arg>, Span)> {
        let mut args = Vec::new();
        while !self.is_punct(")") {
            args.push(self.arg()?);
            if !self.is_punct(")") {
                self.expect_punct(",")?;
            }
        }
        Ok((args, self.expect_punct(")")?))
    }

    /// Whether the next tokens begin a block: a label and `:`, or a function's header.
    fn at_block_start(&self) -> bool {
        self.peek_at(1) == &Tok::Punct(":")
            || self.is_keyword("func")
            || self.is_punct("@")
            || self.peek() == &Tok::Eof
    }

    fn block(&mut self) -> PResult<Block> {
        let (label, func) = match self.func_header()? {
            Some((name, func)) => (name, Some(func)),
            None => (self.name("a block label")?, None),
        };
        self.expect_punct(":")?;
        let mut stmts = Vec::new();
        let finish = |stmts, term, term_span| {
            Ok(Block {
                label: label.clone(),
                stmts,
                term,
                term_span,
                func: func.clone(),
            })
        };
        loop {
            let start = self.span();
            match self.peek().clone() {
                Tok::Ident(kw) if kw == "return" => {
                    self.bump();
                    let arg = self.arg()?;
                    let span = start.to(arg.span());
                    return finish(stmts, Term::Return(arg), span);
                }
                Tok::Ident(kw) if (kw == "print" || kw == "putchar") => {
                    self.bump();
                    self.expect_punct("(")?;
                    let arg = self.arg()?;
                    let span = start.to(self.expect_punct(")")?);
                    stmts.push(if kw == "print" {
                        Stmt::Print(arg, span)
                    } else {
                        Stmt::Putchar(arg, span)
                    });
                }
                Tok::Ident(kw) if kw == "goto" => {
                    self.bump();
                    let target = self.name("a label after `goto`")?;
                    let span = start.to(target.span);
                    return finish(stmts, Term::Goto(target), span);
                }
                Tok::Ident(kw) if kw == "if" => {
                    let (term, span) = self.if_terminator(start)?;
                    return finish(stmts, term, span);
                }
                Tok::Ident(kw) if kw == "print_and_stop" => {
                    self.bump();
                    self.expect_punct("(")?;
                    let arg = self.arg()?;
                    let end = self.expect_punct(")")?;
                    return finish(stmts, Term::PrintAndStop(arg), start.to(end));
                }
                Tok::Ident(kw) if kw == "promote" => match self.promotion(start)? {
                    Promotion::Stmt(stmt) => stmts.push(stmt),
                    Promotion::Term(term, span) => return finish(stmts, term, span),
                },
                Tok::Ident(kw) if kw == "jit_merge_point" || kw == "can_enter_jit" => {
                    stmts.push(self.hint(&kw, start)?)
                }
                _ if self.at_block_start() => {
                    return Err(Diagnostic::new(
                        label.span,
                        format!(
                            "block `{}` has no terminator (it must end in goto, if, print_and_stop, promote or return)",
                            label.text
                        ),
                    ));
                }
                _ => stmts.push(self.assignment()?),
            }
        }
    }

    /// `if v goto l1 else goto l2`, from `start`, and its span.
    fn if_terminator(&mut self, start: Span) -> PResult<(Term, Span)> {
        self.bump();
        let cond = match self.name("a variable after `if`") {
            Ok(c) => c,
            Err(mut d) => {
                d.message
                    .push_str(" (`if` tests a variable: compute the condition into one first)");
                return Err(d);
            }
        };
        if !self.is_keyword("goto") {
            return self
                .error("`goto` (`if` tests a variable: compute the condition into one first)");
        }
        self.bump();
        let then = self.name("a label after `goto`")?;
        self.expect_keyword("else")?;
        self.expect_keyword("goto")?;
        let els = self.name("a label after `goto`")?;
        let span = start.to(els.span);
        Ok((Term::If { cond, then, els }, span))
    }

    /// `promote(v)`, a statement, or `promote(v, l)`, a terminator, from `start`.
    fn promotion(&mut self, start: Span) -> PResult<Promotion> {
        self.bump();
        self.expect_punct("(")?;
        let var = self.name("a variable to promote")?;
        if self.is_punct(",") {
            self.bump();
            let target = self.name("a label")?;
            let end = self.expect_punct(")")?;
            return Ok(Promotion::Term(
                Term::Promote { var, target },
                start.to(end),
            ));
        }
        self.expect_punct(")")?;
        Ok(Promotion::Stmt(Stmt::Promote(var)))
    }

    /// The hint `jit_merge_point(greens...)` or `can_enter_jit` (`kw`), from `start`.
    fn hint(&mut self, kw: &str, start: Span) -> PResult<Stmt> {
        if kw == "jit_merge_point" {
            self.bump();
            self.expect_punct("(")?;
            let greens = self.names_until(")", "a green variable")?;
            let end = self.expect_punct(")")?;
            return Ok(Stmt::MergePoint {
                greens,
                span: start.to(end),
            });
        }
        let mut span = self.bump().1;
        if self.is_punct("(") && self.peek_at(1) == &Tok::Punct(")") {
            self.bump();
            span = span.to(self.bump().1);
        }
        Ok(Stmt::CanEnterJit(span))
    }

    fn assignment(&mut self) -> PResult<Stmt> {
        let dst = self.name("a statement, a terminator or a label")?;
        let mut stmt = match self.peek() {
            Tok::Punct("=") => {
                self.bump();
                self.rhs(dst.clone())?
            }
            Tok::Punct(p @ ("+=" | "-=")) => {
                let op = if *p == "+=" { "add" } else { "sub" };
                let span = self.bump().1;
                let arg = self.arg()?;
                Stmt::Op {
                    dst: dst.clone(),
                    op: Name::new(op, span),
                    args: vec![Arg::Var(dst.clone()), arg],
                    span,
                }
            }
            Tok::Punct("[") => {
                self.bump();
                let index = self.arg()?;
                self.expect_punct("]")?;
                self.expect_punct("=")?;
                let value = self.arg()?;
                Stmt::SetItem {
                    span: dst.span.to(value.span()),
                    array: dst.clone(),
                    index,
                    value,
                }
            }
            _ => return self.error(&format!("`=`, `+=`, `-=` or `[` after `{}`", dst.text)),
        };
        let end = self.toks[self.pos - 1].1;
        match &mut stmt {
            Stmt::Op { span, .. } | Stmt::Getchar { span, .. } | Stmt::Call { span, .. } => {
                *span = dst.span.to(end)
            }
            _ => {}
        }
        Ok(stmt)
    }

    fn rhs(&mut self, dst: Name) -> PResult<Stmt> {
        if self.is_keyword("getchar") {
            self.bump();
            self.expect_punct("(")?;
            self.expect_punct(")")?;
            return Ok(Stmt::Getchar {
                dst,
                span: Span::default(),
            });
        }
        if self.is_keyword("call") {
            self.bump();
            let func = self.name("a function name after `call`")?;
            self.expect_punct("(")?;
            let (args, _) = self.args_until_close()?;
            return Ok(Stmt::Call {
                dst,
                func,
                args,
                span: Span::default(),
            });
        }
        if let Tok::Ident(name) = self.peek().clone() {
            let is_call = self.peek_at(1) == &Tok::Punct("(")
                && name != "var"
                && name != "const"
                && !KEYWORDS.contains(&name.as_str());
            if is_call {
                let op = Name::new(name, self.bump().1);
                self.bump();
                let (args, _) = self.args_until_close()?;
                return Ok(Stmt::Op {
                    dst,
                    op,
                    args,
                    span: Span::default(),
                });
            }
        }
        let a = self.arg()?;
        if self.is_punct("[") {
            let open = self.bump().1;
            let index = self.arg()?;
            self.expect_punct("]")?;
            return Ok(Stmt::Op {
                dst,
                op: Name::new("readlist", open),
                args: vec![a, index],
                span: Span::default(),
            });
        }
        if let Tok::Punct(p) = self.peek() {
            if let Some(op) = flowjit_runtime::Op::from_infix(p) {
                let span = self.bump().1;
                let b = self.arg()?;
                return Ok(Stmt::Op {
                    dst,
                    op: Name::new(op.name(), span),
                    args: vec![a, b],
                    span: Span::default(),
                });
            }
        }
        Ok(Stmt::Op {
            op: Name::new("same", dst.span),
            dst,
            args: vec![a],
            span: Span::default(),
        })
    }

    fn arg(&mut self) -> PResult<Arg> {
        match self.peek().clone() {
            Tok::Ident(w)
                if (w == "var" || w == "const") && self.peek_at(1) == &Tok::Punct("(") =>
            {
                let start = self.bump().1;
                self.bump();
                let arg = if w == "var" {
                    Arg::Var(self.name("a variable")?)
                } else {
                    let (v, _) = self.constant()?;
                    Arg::Const(v, start)
                };
                let end = self.expect_punct(")")?;
                Ok(match arg {
                    Arg::Const(v, _) => Arg::Const(v, start.to(end)),
                    var => var,
                })
            }
            Tok::Ident(_) => Ok(Arg::Var(self.name("an argument")?)),
            Tok::Int(_) | Tok::Atom(_) | Tok::Punct("-") | Tok::Punct("[") => {
                let (v, span) = self.constant()?;
                Ok(Arg::Const(v, span))
            }
            _ => self.error("an argument (a variable, an integer, a quoted atom or a list)"),
        }
    }

    /// A constant as written inside a list: bare names are atoms.
    fn constant(&mut self) -> PResult<(Value, Span)> {
        let start = self.span();
        match self.peek().clone() {
            Tok::Int(n) => {
                self.bump();
                Ok((Value::from_bigint(n), start))
            }
            Tok::Punct("-") if matches!(self.peek_at(1), Tok::Int(_)) => {
                self.bump();
                let (tok, end) = self.bump();
                let Tok::Int(n) = tok else {
                    unreachable!("checked above")
                };
                Ok((Value::from_bigint(-n), start.to(end)))
            }
            Tok::Atom(a) | Tok::Ident(a) => {
                self.bump();
                Ok((Value::atom(&a), start))
            }
            Tok::Punct("[") => {
                if self.depth >= MAX_LIST_NESTING {
                    return Err(Diagnostic::new(
                        start,
                        format!("lists nested more than {MAX_LIST_NESTING} deep"),
                    ));
                }
                self.bump();
                self.depth += 1;
                let mut items = Vec::new();
                while !self.is_punct("]") {
                    items.push(self.constant()?.0);
                    if !self.is_punct("]") {
                        self.expect_punct(",")?;
                    }
                }
                self.depth -= 1;
                let end = self.bump().1;
                Ok((Value::list(items), start.to(end)))
            }
            _ => self.error("a constant (an integer, an atom or a list)"),
        }
    }
}
