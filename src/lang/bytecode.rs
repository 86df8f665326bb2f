//! The assembler of register-machine bytecode (`.bc` files) and the bundled interpreter
//! that runs it.
//!
//! A `.bc` file holds one instruction per line (or several separated by spaces), `#`
//! comments, and optional `name:` labels that a `jump_if_a` may name instead of an index. It
//! assembles to the flat list the articles use: `jump_if_a 2` takes two cells.

use std::collections::HashMap;

use flowjit_runtime::Value;
use num_traits::ToPrimitive;

use super::ast::Span;
use super::diag::Diagnostic;
use super::lexer::{tokenize, Tok};

/// The register-machine interpreter of the articles, written in the flowgraph language.
pub const REGMACHINE_SOURCE: &str = include_str!("../../examples/regmachine.fg");

/// The file name the bundled interpreter's diagnostics and dumps refer to.
pub const REGMACHINE_NAME: &str = "examples/regmachine.fg";

/// The label the bundled interpreter starts at.
pub const REGMACHINE_ENTRY: &str = "bytecode_loop";

/// The registers of the machine, each 0 unless given.
pub const REGISTERS: &[&str] = &["a", "r0", "r1", "r2"];

/// The opcodes of the machine.
pub const OPCODES: &[&str] = &[
    "jump_if_a",
    "mov_a_r0",
    "mov_a_r1",
    "mov_a_r2",
    "mov_r0_a",
    "mov_r1_a",
    "mov_r2_a",
    "add_r0_to_a",
    "add_r1_to_a",
    "add_r2_to_a",
    "decr_a",
    "return_a",
];

enum Target {
    Index(i64, Span),
    Label(String, Span),
}

/// Assembles a `.bc` program into the list of cells the bundled interpreter reads.
pub fn assemble(text: &str) -> Result<Vec<Value>, Vec<Diagnostic>> {
    let toks = tokenize(text).map_err(|d| vec![d])?;
    let mut cells: Vec<Option<Value>> = Vec::new();
    let mut starts = Vec::new();
    let mut labels: HashMap<String, (usize, Span)> = HashMap::new();
    let mut fixups: Vec<(usize, Target)> = Vec::new();
    let mut diags = Vec::new();
    let mut i = 0;
    while toks[i].0 != Tok::Eof {
        let (tok, span) = &toks[i];
        let (tok, span) = (tok.clone(), *span);
        i += 1;
        let Tok::Ident(word) = tok else {
            diags.push(Diagnostic::new(
                span,
                format!(
                    "expected an instruction or a label, found {}",
                    tok.describe()
                ),
            ));
            continue;
        };
        if toks[i].0 == Tok::Punct(":") {
            i += 1;
            if let Some((_, first)) = labels.get(&word) {
                diags.push(
                    Diagnostic::new(span, format!("label `{word}` is defined twice"))
                        .with_note(*first, "first defined here"),
                );
            } else {
                labels.insert(word, (cells.len(), span));
            }
            continue;
        }
        if !OPCODES.contains(&word.as_str()) {
            diags.push(Diagnostic::new(
                span,
                format!(
                    "unknown instruction `{word}` (the machine has {})",
                    OPCODES.join(", ")
                ),
            ));
            continue;
        }
        starts.push(cells.len());
        cells.push(Some(Value::atom(&word)));
        if word == "jump_if_a" {
            let (target, tspan) = toks[i].clone();
            let target = match target {
                Tok::Int(n) => Target::Index(n.to_i64().unwrap_or(i64::MAX), tspan),
                Tok::Ident(l) if toks[i + 1].0 != Tok::Punct(":") => Target::Label(l, tspan),
                other => {
                    diags.push(Diagnostic::new(
                        tspan,
                        format!(
                            "`jump_if_a` needs a target (an index or a label), found {}",
                            other.describe()
                        ),
                    ));
                    continue;
                }
            };
            i += 1;
            fixups.push((cells.len(), target));
            cells.push(None);
        }
    }
    resolve(&mut cells, &starts, &labels, fixups, &mut diags);
    if diags.is_empty() {
        Ok(cells
            .into_iter()
            .map(|c| c.expect("every fixup resolved"))
            .collect())
    } else {
        diags.sort_by_key(|d| d.span.start);
        Err(diags)
    }
}

/// Fills in the jump targets: each of `fixups` is a cell of `cells` and the index or label
/// it holds, which must be the start of an instruction (one of `starts`); a label is looked
/// up in `labels`. What does not resolve is told in `diags`.
fn resolve(
    cells: &mut [Option<Value>],
    starts: &[usize],
    labels: &HashMap<String, (usize, Span)>,
    fixups: Vec<(usize, Target)>,
    diags: &mut Vec<Diagnostic>,
) {
    for (cell, target) in fixups {
        let (index, span) = match target {
            Target::Index(n, span) => (usize::try_from(n).unwrap_or(usize::MAX), span),
            Target::Label(l, span) => match labels.get(&l) {
                Some(&(at, _)) => (at, span),
                None => {
                    diags.push(Diagnostic::new(
                        span,
                        format!("no label `{l}` in the program"),
                    ));
                    continue;
                }
            },
        };
        if !starts.contains(&index) {
            diags.push(Diagnostic::new(
                span,
                format!(
                    "jump target {index} is not the start of an instruction (the program has {} cells)",
                    cells.len()
                ),
            ));
            continue;
        }
        cells[cell] = Some(Value::Int(index as i64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn square_assembles_to_the_articles_list() {
        let text = include_str!("../../examples/square.bc");
        let cells = assemble(text).unwrap();
        assert_eq!(
            Value::list(cells).to_string(),
            "[mov_a_r0,mov_a_r1,mov_r0_a,decr_a,mov_a_r0,mov_r2_a,add_r1_to_a,mov_a_r2,mov_r0_a,jump_if_a,2,mov_r2_a,return_a]"
        );
    }

    #[test]
    fn bad_programs_are_reported() {
        let errs = assemble("mov_a_r0 jump_if_a 2\nfrob").unwrap_err();
        assert_eq!(errs.len(), 2);
        assert!(errs[0].message.contains("jump target 2 is not the start"));
        assert!(errs[1].message.contains("unknown instruction `frob`"));
        let errs = assemble("jump_if_a nowhere").unwrap_err();
        assert_eq!(errs[0].message, "no label `nowhere` in the program");
    }
}
