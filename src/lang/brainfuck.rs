//! Brainfuck programs (`.b` files, SPEC.md §6) and the bundled interpreter that runs them.
//!
//! A file becomes the list of its commands, one atom each (`'+'`, `'['`, ...); every other
//! character is a comment. Brackets must balance: an unmatched one is reported at its
//! position before anything runs. The interpreter, `examples/bf.fg`, is written in the
//! flowgraph language and finds a bracket's partner itself (an `@elidable` function).

use flowjit_runtime::Value;

use super::ast::Span;
use super::diag::Diagnostic;

/// The Brainfuck interpreter, written in the flowgraph language.
pub const BF_SOURCE: &str = include_str!("../../examples/bf.fg");

/// The file name the bundled interpreter's diagnostics and dumps refer to.
pub const BF_NAME: &str = "examples/bf.fg";

/// The label the bundled interpreter starts at.
pub const BF_ENTRY: &str = "start";

/// The variable that holds the program's commands.
pub const BF_PROGRAM: &str = "program";

/// The eight commands.
pub const COMMANDS: &str = "><+-.,[]";

/// The commands of a Brainfuck program, each an atom, or the unmatched brackets.
pub fn parse(text: &str) -> Result<Vec<Value>, Vec<Diagnostic>> {
    let mut commands = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    let mut diags = Vec::new();
    for (at, c) in text.char_indices() {
        if !COMMANDS.contains(c) {
            continue;
        }
        match c {
            '[' => open.push(at),
            ']' if open.pop().is_none() => {
                diags.push(Diagnostic::new(
                    Span::new(at, at + 1),
                    "this `]` has no `[` before it",
                ));
            }
            _ => {}
        }
        commands.push(Value::atom(&c.to_string()));
    }
    for at in open {
        diags.push(Diagnostic::new(
            Span::new(at, at + 1),
            "this `[` has no `]` after it",
        ));
    }
    if diags.is_empty() {
        Ok(commands)
    } else {
        diags.sort_by_key(|d| d.span.start);
        Err(diags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_become_atoms_and_everything_else_is_a_comment() {
        let program = parse("+[-> x <]. done,").expect("balanced");
        let text: Vec<String> = program.iter().map(|v| v.to_string()).collect();
        assert_eq!(
            text,
            ["'+'", "'['", "'-'", "'>'", "'<'", "']'", "'.'", "','"]
        );
    }

    #[test]
    fn an_unmatched_bracket_is_reported_where_it_is() {
        let diags = parse("+[[]\n]]").expect_err("unbalanced");
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].span, Span::new(6, 7));
        let diags = parse("[ [ ]").expect_err("unbalanced");
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].span, Span::new(0, 1));
        assert!(diags[0].message.contains("no `]`"));
    }
}
