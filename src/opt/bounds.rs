//! Integer bounds: intervals carried through arithmetic, so that an operation proved unable
//! to fail (its operands are integers in known intervals and its result fits in 64 bits)
//! loses its snapshot. In machine code that is an overflow check and a type check gone;
//! dead-code elimination can then remove the operation if nothing uses it.
//!
//! Intervals come from integer constants, from operations whose results are bounded
//! (comparisons and `not` give 0 or 1, `and` with a non-negative constant `c` gives
//! `0..=c`, `mod` by a positive constant `c` gives `0..c`, `len` is not negative), and from
//! guards on comparisons with constants.
//!
//! ```text
//! v1 = lt v0, 100  @l:0 #0 []              v1 = lt v0, 100  @l:0 #0 []
//! guard_true v1  @d:0 #1 []                guard_true v1  @d:0 #1 []
//! v3 = ge v0, 0  @m:0 #1 []          =>    v3 = ge v0, 0  @m:0 #1 []
//! guard_true v3  @e:0 #2 []                guard_true v3  @e:0 #2 []
//! v5 = add v0, 1  @m:1 #2 []               v5 = add v0, 1        (0..=99 + 1 cannot overflow)
//! ```

use flowjit_runtime::Op;

use super::interval::{is_comparison, Facts, Range};
use super::rewrite::Rewriter;
use super::Rejected;
use crate::trace::{Kind, Opnd, Trace};

fn add(a: Option<i128>, b: Option<i128>) -> Option<i128> {
    a?.checked_add(b?)
}

/// The interval of `op`'s result, when it succeeds, given its operands' intervals.
pub fn result(op: Op, args: &[Opnd], facts: &Facts) -> Option<Range> {
    let r = |i: usize| facts.of(&args[i]);
    Some(match op {
        _ if is_comparison(op) => Range::new(0, 1),
        Op::Not => Range::new(0, 1),
        Op::Len => Range::new(0, i64::MAX as i128),
        Op::Same => r(0)?,
        Op::And => match (&args[0], &args[1]) {
            (_, Opnd::Const(flowjit_runtime::Value::Int(c)))
            | (Opnd::Const(flowjit_runtime::Value::Int(c)), _)
                if *c >= 0 =>
            {
                Range::new(0, *c as i128)
            }
            _ => return None,
        },
        Op::Mod => match &args[1] {
            Opnd::Const(flowjit_runtime::Value::Int(c)) if *c > 0 => Range::new(0, *c as i128 - 1),
            _ => return None,
        },
        Op::Add => {
            let (a, b) = (r(0)?, r(1)?);
            Range {
                lo: add(a.lo, b.lo),
                hi: add(a.hi, b.hi),
            }
        }
        Op::Sub => {
            let (a, b) = (r(0)?, r(1)?);
            Range {
                lo: add(a.lo, b.hi.and_then(i128::checked_neg)),
                hi: add(a.hi, b.lo.and_then(i128::checked_neg)),
            }
        }
        Op::Neg => {
            let a = r(0)?;
            Range {
                lo: a.hi.and_then(i128::checked_neg),
                hi: a.lo.and_then(i128::checked_neg),
            }
        }
        Op::Mul => {
            let (a, b) = (r(0)?, r(1)?);
            let (Some(al), Some(ah), Some(bl), Some(bh)) = (a.lo, a.hi, b.lo, b.hi) else {
                return None;
            };
            // Bounds are i128 so that products of 64-bit bounds are exact; bounds that have
            // already grown past 64 bits may overflow even that, and then nothing is known.
            let products = [
                al.checked_mul(bl)?,
                al.checked_mul(bh)?,
                ah.checked_mul(bl)?,
                ah.checked_mul(bh)?,
            ];
            Range::new(
                *products.iter().min().expect("four products"),
                *products.iter().max().expect("four products"),
            )
        }
        _ => return None,
    })
}

/// Whether `op` cannot fail on operands in these intervals with a result in `out`.
fn cannot_fail(op: Op, args: &[Opnd], facts: &Facts, out: Option<Range>) -> bool {
    let ints = args
        .iter()
        .all(|a| facts.of(a).is_some_and(Range::fits_i64));
    match op {
        Op::Add | Op::Sub | Op::Mul | Op::Neg => ints && out.is_some_and(Range::fits_i64),
        Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Not | Op::And | Op::Or | Op::Xor => ints,
        _ => false,
    }
}

/// Runs the bounds analysis.
pub fn run(trace: &Trace) -> Result<Trace, Rejected> {
    let mut rw = Rewriter::new(trace);
    let mut facts = Facts::default();
    for (i, inst) in trace.insts.iter().enumerate() {
        let args = rw.args(inst);
        match inst.kind {
            Kind::Op(op) => {
                let out = result(op, &args, &facts);
                let r = if inst.snap.is_some() && cannot_fail(op, &args, &facts, out) {
                    rw.keep_without_snapshot(i)
                } else {
                    rw.keep_with(i, args)
                };
                if let Some(out) = out {
                    facts.narrow(r, out);
                }
            }
            Kind::GuardTrue | Kind::GuardFalse => {
                if let Opnd::Ref(c) = args[0] {
                    let cond = rw.def(c).clone();
                    facts.learn(&cond, inst.kind == Kind::GuardTrue);
                }
                rw.keep_with(i, args);
            }
            _ => {
                rw.keep_with(i, args);
            }
        }
    }
    Ok(rw.finish())
}
