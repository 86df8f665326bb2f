//! Integer bounds, the last stage of the forward optimizer (`forward`): intervals carried
//! through arithmetic into the intervals all stages share, so that an operation proved unable
//! to fail (its operands are integers in known intervals and its result fits in 64 bits)
//! loses its snapshot. In machine code that is an overflow check and a type check gone;
//! dead-code elimination can then remove the operation if nothing uses it.
//!
//! Intervals come from integer constants, from operations whose results are bounded
//! (comparisons and `not` give 0 or 1, `and` with a non-negative constant `c` gives
//! `0..=c`, `mod` by a positive constant `c` gives `0..c`, `len` is not negative), and from
//! guards on comparisons with constants.
//!
//! The backend asks the same intervals a question of its own, which only it may ask:
//! [`machine_no_overflow`], where every integer is 64-bit.
//!
//! ```text
//! v1 = lt v0, 100  @l:0 #0 []              v1 = lt v0, 100  @l:0 #0 []
//! guard_true v1  @d:0 #1 []                guard_true v1  @d:0 #1 []
//! v3 = ge v0, 0  @m:0 #1 []          =>    v3 = ge v0, 0  @m:0 #1 []
//! guard_true v3  @e:0 #2 []                guard_true v3  @e:0 #2 []
//! v5 = add v0, 1  @m:1 #2 []               v5 = add v0, 1        (0..=99 + 1 cannot overflow)
//! ```

use flowjit_runtime::{Op, Value};

use super::forward::{Optimizer, Pending, Stage, Verdict};
use super::interval::{is_comparison, Facts, Range};
use super::Rejected;
use crate::trace::{Kind, Opnd, Ref, Trace};

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
            (_, Opnd::Const(Value::Int(c))) | (Opnd::Const(Value::Int(c)), _) if *c >= 0 => {
                Range::new(0, *c as i128)
            }
            _ => return None,
        },
        Op::Mod => match &args[1] {
            Opnd::Const(Value::Int(c)) if *c > 0 => Range::new(0, *c as i128 - 1),
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

/// The bounds stage: it carries intervals through operations (into the optimizer's shared
/// intervals) and drops the snapshots of operations that cannot fail.
pub struct Bounds;

impl Stage for Bounds {
    fn visit(&mut self, opt: &Optimizer, inst: &mut Pending) -> Result<Verdict, Rejected> {
        if let Kind::Op(op) = inst.kind {
            let facts = &opt.intervals;
            let out = result(op, &inst.args, facts);
            if inst.snapshot && cannot_fail(op, &inst.args, facts, out) {
                inst.snapshot = false;
            }
        }
        Ok(Verdict::Pass)
    }

    fn learn(&mut self, opt: &mut Optimizer, r: Ref) {
        let inst = opt.out.def(r);
        match (inst.kind, inst.args.as_slice()) {
            (Kind::Op(op), args) => {
                if let Some(out) = result(op, args, &opt.intervals) {
                    opt.intervals.narrow(r, out);
                }
            }
            // Learnt by `guards` too when it runs: learning a fact twice changes nothing.
            (Kind::GuardTrue | Kind::GuardFalse, [Opnd::Ref(c)]) => {
                let cond = opt.out.def(*c);
                opt.intervals.learn(cond, inst.kind == Kind::GuardTrue);
            }
            _ => {}
        }
    }
}

/// Which operations of a peeled trace cannot overflow in machine code, where every integer
/// is 64-bit; `is_int(r)` says whether value `r` is an integer there. Integer `input`s hold
/// any `i64`; guards on comparisons with constants narrow values; a loop parameter holds the
/// hull of what enters the loop and what comes back (the latter computed with the
/// parameters taken as any `i64`, which makes the hull sound). An addition, subtraction,
/// multiplication or negation whose result interval fits in 64 bits needs no overflow exit.
/// (The optimizer proper cannot know this: in the trace interpreter an integer may be a big
/// one, so only the backend, which knows its integers are `i64`, asks.)
pub fn machine_no_overflow(trace: &Trace, is_int: impl Fn(Ref) -> bool) -> Vec<bool> {
    let start = trace.loop_start().expect("a peeled trace");
    let params = trace.insts[start].args.len();
    let pass = |param_ranges: &[Range]| {
        let mut facts = Facts::default();
        let mut safe = vec![false; trace.insts.len()];
        let mut ends: Vec<Vec<Range>> = Vec::new();
        for (i, inst) in trace.insts.iter().enumerate() {
            let r = Ref(i as u32);
            let int = is_int(r);
            match inst.kind {
                Kind::Input(_) if int => facts.narrow(r, Range::i64()),
                Kind::Param(_) | Kind::ParamItem if int => {
                    facts.narrow(r, param_ranges[i - start - 1])
                }
                Kind::Op(op) if int => {
                    let all_int = inst.args.iter().all(|a| match a {
                        Opnd::Ref(x) => is_int(*x),
                        Opnd::Const(v) => matches!(v, Value::Int(_)),
                    });
                    let out = if all_int {
                        result(op, &inst.args, &facts)
                    } else {
                        None
                    };
                    let arith = matches!(op, Op::Add | Op::Sub | Op::Mul | Op::Neg);
                    safe[i] = arith && out.is_some_and(Range::fits_i64);
                    // Whatever it computes, a value in machine code is an i64 (an overflow
                    // exits).
                    facts.narrow(r, out.map_or(Range::i64(), |o| o.meet(Range::i64())));
                }
                Kind::GuardTrue | Kind::GuardFalse => {
                    if let Opnd::Ref(c) = inst.args[0] {
                        facts.learn(&trace.insts[c.index()], inst.kind == Kind::GuardTrue);
                    }
                }
                Kind::LoopStart | Kind::Loop => ends.push(
                    inst.args
                        .iter()
                        .map(|a| facts.of(a).unwrap_or(Range::i64()).meet(Range::i64()))
                        .collect(),
                ),
                _ => {}
            }
        }
        (safe, ends)
    };
    let (_, ends) = pass(&vec![Range::i64(); params]);
    let hull: Vec<Range> = (0..params)
        .map(|k| {
            ends.iter()
                .map(|e| e[k])
                .reduce(Range::hull)
                .unwrap_or(Range::i64())
        })
        .collect();
    pass(&hull).0
}
