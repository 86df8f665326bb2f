//! Bounds checks planned for machine code (LuaJIT's ABC widening, `fold_abc_k` in
//! `lj_opt_fold.c`): which array accesses of a segment one check covers, and which overflow
//! checks a bounds check stands for. Both code generators emit what the plan says.
//!
//! An access is a `getitem` or `setitem`, with a snapshot, of an array of integers at an
//! index `base + c` (`opt::bounds::offset_of`, `base` a 64-bit integer). The accesses of a
//! segment to one array around one base are a group, and the group's offsets a span: the
//! first access of the group checks the least and the greatest offset, and the later ones
//! check nothing. Exiting before an access that would not fail is correct: the interpreter
//! goes on from there.
//!
//! An addition `x + c` whose overflow check is widened to a run of offsets of `x`
//! (`MachineBounds::widen`) needs no check of its own when the next access checks the
//! bounds of an index `x + d`, with nothing between the two that can exit or send a value
//! elsewhere: an index within an array (of at most `MAX_INDEX` elements) leaves `x` far
//! enough from either end of 64 bits for every offset of the run, offsets of at most 2^32
//! either way; and where the check fails (an index out of the array, or a sum that
//! wrapped), it exits where the overflow check would, before the run, whose values no exit
//! has seen.

use rustc_hash::FxHashMap as HashMap;

use flowjit_runtime::abi::Repr;
use flowjit_runtime::Op;

use super::bounds::{offset_of, MachineBounds};
use super::interval::near;
use crate::trace::{Kind, Opnd, Ref, Trace};

/// A segment's bounds checks, planned ([`plan`]).
#[derive(Clone, Debug, Default)]
pub struct CheckPlan {
    /// Per instruction: for an access, (array, base, offset).
    pub access: Vec<Option<(Ref, Ref, i64)>>,
    /// Per (array, base): the least and the greatest offset its accesses use.
    pub spans: HashMap<(Ref, Ref), (i64, i64)>,
    /// The accesses whose bounds check stands for the overflow check of a run of offsets:
    /// per access, the run's widened operation, where the check exits.
    pub by_access: HashMap<usize, usize>,
}

/// The plan of `trace`'s bounds checks, its values held as `held` says (`opt::repr`),
/// `bounds` what is known of its arithmetic. `ints`: whether the code reads the elements of
/// arrays that say they hold only integers without their tags (`backend::Tuning::ints`);
/// otherwise a `getitem` is not an access of the plan.
pub fn plan(trace: &Trace, held: &[Option<Repr>], ints: bool, bounds: &MachineBounds) -> CheckPlan {
    let access: Vec<_> = (0..trace.insts.len())
        .map(|i| access(trace, held, ints, i))
        .collect();
    let mut spans: HashMap<(Ref, Ref), (i64, i64)> = HashMap::default();
    for &(array, base, c) in access.iter().flatten() {
        let e = spans.entry((array, base)).or_insert((c, c));
        *e = (e.0.min(c), e.1.max(c));
    }
    let by_access = (0..trace.insts.len())
        .filter_map(|i| Some((checked_by_access(trace, held, bounds, &access, i)?, i)))
        .collect();
    CheckPlan {
        access,
        spans,
        by_access,
    }
}

/// An index of `trace` as `base + c`: the operand of an addition or subtraction of a
/// constant that computes it (`bounds::offset_of`), a 64-bit integer, or itself and 0.
pub fn index_parts(trace: &Trace, held: &[Option<Repr>], r: Ref) -> (Ref, i64) {
    offset_of(&trace.insts[r.index()])
        .filter(|(x, _)| held[x.index()] == Some(Repr::Int))
        .unwrap_or((r, 0))
}

/// Instruction `i` as an access: (array, base, offset).
fn access(trace: &Trace, held: &[Option<Repr>], ints: bool, i: usize) -> Option<(Ref, Ref, i64)> {
    let inst = &trace.insts[i];
    inst.snap?;
    let repr = |o: &Opnd| o.as_ref().and_then(|r| held[r.index()]);
    let ok = match inst.kind {
        Kind::GetItem => ints && held[i] == Some(Repr::Int),
        Kind::SetItem => true,
        _ => false,
    };
    if !ok || repr(&inst.args[0]) != Some(Repr::Array) || repr(&inst.args[1]) != Some(Repr::Int) {
        return None;
    }
    let (Opnd::Ref(array), Opnd::Ref(index)) = (&inst.args[0], &inst.args[1]) else {
        return None;
    };
    let (base, c) = index_parts(trace, held, *index);
    Some((*array, base, c))
}

/// For operation `i`, `x + c` whose overflow check is widened to a run of offsets of `x`:
/// the access that checks the bounds of an index `x + d` next, if nothing between the two
/// can exit or send a value elsewhere.
fn checked_by_access(
    trace: &Trace,
    held: &[Option<Repr>],
    bounds: &MachineBounds,
    access: &[Option<(Ref, Ref, i64)>],
    i: usize,
) -> Option<usize> {
    let (lo, hi) = bounds.widen[i]?;
    if !near(lo) || !near(hi) {
        return None;
    }
    let x = trace.insts[i].args.iter().find_map(Opnd::as_ref)?;
    for (j, inst) in trace.insts.iter().enumerate().skip(i + 1) {
        if let Some((_, base, d)) = access[j] {
            return (base == x && near(d)).then_some(j);
        }
        let quiet = match inst.kind {
            Kind::Input(_) => true,
            Kind::Op(op) => {
                held[j] == Some(Repr::Int)
                    && (inst.snap.is_none()
                        || (matches!(op, Op::Add | Op::Sub | Op::Mul | Op::Neg)
                            && bounds.safe[j]
                            && bounds.widen[j].is_none()))
            }
            _ => false,
        };
        if !quiet {
            return None;
        }
    }
    None
}
