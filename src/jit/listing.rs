//! Listings of compiled code, each line with the trace instruction it comes from: the
//! `ir` and `asm` dumps interleave the instructions as comments (in the manner of PyPy's
//! jitviewer and LuaJIT's `-jdump`), and `flowjit report` links them to the traces.
//!
//! The origin of a line is the source location Cranelift carries from the IR to the machine
//! code ([`crate::backend::lower::Origin`]): Cranelift's IR printer writes it before an instruction
//! as `@hex`, and the compiled code reports, for each range of machine code, the one it came
//! from.

use std::fmt::Write as _;

use crate::backend::lower::Origin;
use crate::backend::{Compiled, TreeInst};

/// One line of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// The text, as Cranelift or the disassembler prints it (without the `@hex` prefix).
    pub text: String,
    /// Where it comes from, if from a trace instruction.
    pub origin: Option<Origin>,
}

/// The lines of Cranelift IR as its printer writes it, each instruction's `@hex` source
/// location taken off its line and made its origin.
pub fn ir_lines(ir: &str) -> Vec<Line> {
    ir.lines()
        .map(|line| {
            let trimmed = line.trim_start();
            let located = trimmed.strip_prefix('@').and_then(|rest| {
                let (hex, text) = rest.split_once(' ')?;
                let bits = u32::from_str_radix(hex, 16).ok()?;
                let origin = Origin::of(cranelift_codegen::ir::SourceLoc::new(bits))?;
                Some((origin, text.trim_start()))
            });
            match located {
                Some((origin, text)) => Line {
                    text: format!("    {text}"),
                    origin: Some(origin),
                },
                // With source locations, the printer indents every line as far as the
                // widest location: back to the usual indentation.
                None if trimmed.is_empty()
                    || trimmed.starts_with("block")
                    || trimmed.starts_with("function")
                    || trimmed == "}" =>
                {
                    Line {
                        text: trimmed.to_string(),
                        origin: None,
                    }
                }
                None => Line {
                    text: format!("    {trimmed}"),
                    origin: None,
                },
            }
        })
        .collect()
}

/// The lines of a disassembly (`  0x…: mnemonic operands`), each instruction's origin found
/// by its address in `code`'s ranges.
pub fn asm_lines(asm: &str, code: &Compiled) -> Vec<Line> {
    asm.lines()
        .map(|line| {
            let addr = line
                .trim_start()
                .strip_prefix("0x")
                .and_then(|rest| rest.split_once(':'))
                .and_then(|(hex, _)| u64::from_str_radix(hex, 16).ok());
            let origin = addr
                .and_then(|a| a.checked_sub(code.base))
                .and_then(|offset| origin_at(&code.origins, offset));
            Line {
                text: line.to_string(),
                origin,
            }
        })
        .collect()
}

/// The origin of the code at `offset`, in ranges sorted by start.
fn origin_at(ranges: &[(u32, u32, Origin)], offset: u64) -> Option<Origin> {
    let k = ranges.partition_point(|&(start, _, _)| u64::from(start) <= offset);
    let &(start, end, origin) = ranges.get(k.checked_sub(1)?)?;
    (u64::from(start) <= offset && offset < u64::from(end)).then_some(origin)
}

/// A listing as text: where the origin changes, a comment line (`; …`, with `indent`)
/// names it as `describe` says. With `only`, just the lines of that segment (a bridge
/// compiled into its tree's function): for IR, the blocks that hold any of them.
pub fn render(
    lines: &[Line],
    indent: &str,
    only: Option<Only>,
    describe: &dyn Fn(Origin) -> String,
) -> String {
    let keep = keep_lines(lines, only);
    let mut out = String::new();
    let mut last = None;
    for (line, _) in lines.iter().zip(&keep).filter(|(_, k)| **k) {
        if let Some(o) = line.origin {
            if Some(o) != last {
                let _ = writeln!(out, "{indent}; {}", describe(o));
            }
            last = Some(o);
        }
        out.push_str(&line.text);
        out.push('\n');
    }
    out
}

/// The part of a tree's function that shows a bridge compiled into it: the bridge's code,
/// and the guard it hangs from (where its dispatch on a promoted value is, a jump table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Only {
    /// The bridge's segment.
    pub segment: usize,
    /// The guard it hangs from: (segment, instruction).
    pub parent: TreeInst,
}

impl Only {
    fn holds(&self, o: Option<Origin>) -> bool {
        o.is_some_and(|o| {
            o.segment == self.segment
                || (!o.exit && TreeInst::new(o.segment, o.inst) == self.parent)
        })
    }
}

/// Which of `lines` a listing of `only` shows: its lines and the data right after them (a
/// jump table), and in IR the lines of the blocks that hold them (a block starts at an
/// unindented `blockN` line).
pub fn keep_lines(lines: &[Line], only: Option<Only>) -> Vec<bool> {
    let Some(only) = only else {
        return vec![true; lines.len()];
    };
    let ir = lines.iter().any(|l| l.text.starts_with("block"));
    if !ir {
        let mut keep = Vec::with_capacity(lines.len());
        let mut after_kept = false;
        for l in lines {
            let k = only.holds(l.origin) || (l.origin.is_none() && after_kept);
            after_kept = k;
            keep.push(k);
        }
        return keep;
    }
    let mut keep = vec![false; lines.len()];
    let mut start = 0;
    let flush = |from: usize, to: usize, keep: &mut Vec<bool>| {
        let mine = lines[from..to].iter().any(|l| only.holds(l.origin));
        if mine {
            keep[from..to].iter_mut().for_each(|k| *k = true);
        }
    };
    for (i, l) in lines.iter().enumerate() {
        if l.text.starts_with("block") || l.text == "}" {
            flush(start, i, &mut keep);
            start = i;
        }
    }
    flush(start, lines.len(), &mut keep);
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(segment: usize, inst: usize, exit: bool) -> Origin {
        Origin {
            segment,
            inst,
            exit,
        }
    }

    #[test]
    fn an_origin_survives_the_source_location() {
        for o in [at(0, 0, false), at(3, 65535, true), at(32, 12, false)] {
            assert_eq!(Origin::of(o.srcloc()), Some(o));
        }
        assert_eq!(Origin::of(Default::default()), None);
    }

    #[test]
    fn ir_lines_take_the_location_off_the_line() {
        let ir = "function u0:0(i64) tail {\nblock0(v0: i64):\n@0001 v1 = iconst.i64 1\n@10002 return v1\n}";
        let lines = ir_lines(ir);
        assert_eq!(lines[2].text, "    v1 = iconst.i64 1");
        assert_eq!(lines[2].origin, Some(at(0, 1, false)));
        assert_eq!(lines[3].origin, Some(at(1, 2, false)));
        assert_eq!(lines[1].origin, None);
        // Only bridge 0's (segment 1's) block, and a comment where its instruction starts.
        let only = |segment| {
            Some(Only {
                segment,
                parent: TreeInst::new(0, 7),
            })
        };
        let shown = render(&lines, "    ", only(1), &|o| format!("inst {}", o.inst));
        assert_eq!(
            shown,
            "block0(v0: i64):\n    ; inst 1\n    v1 = iconst.i64 1\n    ; inst 2\n    return v1\n"
        );
        let none = render(&lines, "", only(2), &|_| String::new());
        assert_eq!(none, "");
    }

    #[test]
    fn the_origin_of_code_is_the_range_that_holds_it() {
        let ranges = [(0, 4, at(0, 1, false)), (8, 12, at(0, 2, true))];
        assert_eq!(origin_at(&ranges, 0), Some(at(0, 1, false)));
        assert_eq!(origin_at(&ranges, 3), Some(at(0, 1, false)));
        assert_eq!(origin_at(&ranges, 5), None);
        assert_eq!(origin_at(&ranges, 11), Some(at(0, 2, true)));
        assert_eq!(origin_at(&ranges, 12), None);
    }
}
