//! What machine code checks, decided per compilation unit ([`of_unit`]): the overflow
//! checks of its arithmetic (`opt::bounds::machine_no_overflow`), and its bounds checks
//! (LuaJIT's ABC widening, `fold_abc_k` in `lj_opt_fold.c`): which array accesses of a
//! segment one check covers, in which form ([`Bounds`]), and which overflow checks a
//! bounds check stands for. Both code generators emit what the plan says, and `--dump opt`
//! prints it ([`Checks::notes`]).
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

use super::bounds::{machine_no_overflow, offset_of, MachineBounds};
use super::interval::near;
use crate::trace::print::opnd;
use crate::trace::tree::Segment;
use crate::trace::{Kind, Opnd, Ref, Trace};

/// What machine code checks in a compilation unit, per segment: the overflow checks of its
/// arithmetic ([`MachineBounds`]) and the bounds checks of its accesses ([`CheckPlan`]).
pub struct Checks {
    /// Per segment: what its arithmetic needs checked.
    pub overflow: Vec<MachineBounds>,
    /// Per segment: its bounds checks.
    pub bounds: Vec<CheckPlan>,
}

/// The checks of the unit `segments`, whose values are held as `held` says (`opt::repr`,
/// per segment). `ints`: whether the code reads integer arrays' elements without their
/// tags (`plan`); `induction`: whether the proofs of the first segment's loop may assume
/// an induction variable in the interval it moves in (`bounds::machine_no_overflow`). A
/// segment compiled elsewhere (`separate`) gets no plan.
pub fn of_unit(
    segments: &[Segment],
    held: &[Vec<Option<Repr>>],
    ints: bool,
    induction: bool,
) -> Checks {
    let overflow: Vec<MachineBounds> = (segments.iter().enumerate())
        .map(|(seg, s)| {
            let is_int = |r: Ref| held[seg][r.index()] == Some(Repr::Int);
            match s.separate {
                true => MachineBounds::none(s.trace, is_int),
                false => machine_no_overflow(s.trace, is_int, induction && seg == 0),
            }
        })
        .collect();
    let bounds = (segments.iter().enumerate())
        .map(|(seg, s)| match s.separate {
            true => CheckPlan::default(),
            false => plan(s.trace, &held[seg], ints, &overflow[seg]),
        })
        .collect();
    Checks { overflow, bounds }
}

/// A segment's bounds checks, planned ([`plan`]).
#[derive(Clone, Debug, Default)]
pub struct CheckPlan {
    /// Per instruction: for an access, (array, base, offset).
    pub access: Vec<Option<(Ref, Ref, i64)>>,
    /// Per access: the bounds check it makes ([`CheckPlan::bounds`]).
    pub check: HashMap<usize, Bounds>,
    /// Per (array, base): the least and the greatest offset its accesses use.
    pub spans: HashMap<(Ref, Ref), (i64, i64)>,
    /// The accesses whose bounds check stands for the overflow check of a run of offsets:
    /// per access, the run's widened operation, where the check exits.
    pub by_access: HashMap<usize, usize>,
}

/// The bounds check an access of an array makes, before it reads or writes: exiting
/// where it fails, at the access or before the run it stands for ([`CheckPlan::exit_at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bounds {
    /// Its own index, against the array's length (an access of no group, or a group whose
    /// accesses all use one index).
    Index,
    /// None: an earlier access of the segment checked a span holding its index.
    Covered,
    /// Every offset `lo..=hi` of `base` (the access's own is `at`): both `base + lo` and
    /// `base + hi` within the array, computed wrapping (a sum that leaves 64 bits wraps
    /// outside the array), and so every offset between. `floor`: the loop's proofs hold `base`, one
    /// of its parameters, at or above 0 and `-lo`, and `hi` is not negative: `base + hi`
    /// below the length is all there is to check.
    Span {
        /// The value the offsets are added to.
        base: Ref,
        /// The least offset.
        lo: i64,
        /// The greatest offset.
        hi: i64,
        /// The access's own offset.
        at: i64,
        /// Whether `base + lo` is known not to be negative.
        floor: bool,
    },
}

impl CheckPlan {
    /// The bounds check instruction `i` makes, when it accesses an array: [`Bounds::Index`]
    /// for an access the plan holds no group for (a constant index, an array of any values).
    pub fn bounds(&self, i: usize) -> Bounds {
        self.check.get(&i).copied().unwrap_or(Bounds::Index)
    }

    /// Where access `i`'s bounds check exits: before the run of offsets whose overflow
    /// check it stands for, if any, else at the access.
    pub fn exit_at(&self, i: usize) -> usize {
        self.by_access.get(&i).copied().unwrap_or(i)
    }

    /// The access whose bounds check stands for the overflow check of the run widened at
    /// operation `run`.
    pub fn standing_for(&self, run: usize) -> Option<usize> {
        self.by_access
            .iter()
            .find_map(|(&access, &r)| (r == run).then_some(access))
    }
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
    let check = group_checks(trace, bounds, &access, &spans);
    CheckPlan {
        access,
        check,
        spans,
        by_access,
    }
}

/// Each access's bounds check: the first access of a group checks its span (one index
/// when the span is a single offset, or one too wide to compute), the later ones nothing.
fn group_checks(
    trace: &Trace,
    bounds: &MachineBounds,
    access: &[Option<(Ref, Ref, i64)>],
    spans: &HashMap<(Ref, Ref), (i64, i64)>,
) -> HashMap<usize, Bounds> {
    let mut check = HashMap::default();
    let mut covered: Vec<(Ref, Ref)> = Vec::new();
    for (i, a) in access.iter().enumerate() {
        let Some((array, base, at)) = *a else {
            continue;
        };
        if covered.contains(&(array, base)) {
            check.insert(i, Bounds::Covered);
            continue;
        }
        let (lo, hi) = spans[&(array, base)];
        let floor = param_floor(trace, bounds, base)
            .is_some_and(|f| f >= 0 && f + i128::from(lo) >= 0 && hi >= 0);
        let bounds = if floor || hi.checked_sub(lo).is_some_and(|s| s > 0) {
            Bounds::Span {
                base,
                lo,
                hi,
                at,
                floor,
            }
        } else {
            Bounds::Index
        };
        // A single offset: the later accesses use this very index.
        if bounds != Bounds::Index || lo == hi {
            covered.push((array, base));
        }
        check.insert(i, bounds);
    }
    check
}

/// The least value the loop's proofs hold `r` at, when `r` is one of the parameters of
/// `trace`'s loop (its body sees each as it came round, [`MachineBounds::hull`]).
fn param_floor(trace: &Trace, bounds: &MachineBounds, r: Ref) -> Option<i128> {
    if !matches!(trace.insts[r.index()].kind, Kind::Param(_)) {
        return None;
    }
    let k = r.index().checked_sub(trace.loop_start()? + 1)?;
    bounds.hull.get(k)?.lo
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

impl Checks {
    /// What machine code checks at instruction `i` of segment `seg` (`trace`), as `--dump
    /// opt` prints it above the instruction, a line each: the loop's entry checks of what
    /// its proofs assume, a widened overflow check, an access's bounds check.
    pub fn notes(&self, seg: usize, trace: &Trace, i: usize) -> Vec<String> {
        let (overflow, plan) = (&self.overflow[seg], &self.bounds[seg]);
        let inst = &trace.insts[i];
        let mut notes = Vec::new();
        if inst.kind == Kind::LoopStart {
            for (k, range) in overflow.entry.iter().enumerate() {
                if let Some(range) = range {
                    notes.push(format!("entry: {} in {}", opnd(&inst.args[k]), span(range)));
                }
            }
            for sum in &overflow.sums {
                notes.push(format!(
                    "entry: {} stays within 64 bits for the iterations {} allows",
                    opnd(&inst.args[sum.acc]),
                    opnd(&inst.args[sum.counter]),
                ));
            }
        }
        if let Some((lo, hi)) = overflow.widen[i] {
            let x = inst
                .args
                .iter()
                .find(|a| a.as_ref().is_some())
                .map_or(String::new(), opnd);
            let by = match plan.standing_for(i) {
                Some(j) => format!(": the bounds check of {}'s index", Ref(j as u32)),
                None => String::new(),
            };
            let (lo, hi) = (plus(&x, lo), plus(&x, hi));
            notes.push(format!("overflow: {lo} .. {hi} within 64 bits{by}"));
        }
        if let Some((array, _, _)) = plan.access[i] {
            let exit = match plan.exit_at(i) {
                at if at != i => format!(", exiting at {}", Ref(at as u32)),
                _ => String::new(),
            };
            let text = match plan.bounds(i) {
                Bounds::Covered => "within what was checked above".to_string(),
                Bounds::Index => format!("{} < len {array}", opnd(&inst.args[1])),
                Bounds::Span {
                    base,
                    lo,
                    hi,
                    floor,
                    ..
                } => {
                    let x = base.to_string();
                    let (lo, hi) = (plus(&x, lo), plus(&x, hi));
                    let floor = match floor {
                        true => format!(" ({lo} >= 0 by the loop's proofs)"),
                        false => String::new(),
                    };
                    let span = if lo == hi {
                        lo.clone()
                    } else {
                        format!("{lo} .. {hi}")
                    };
                    format!("{span} < len {array}{floor}")
                }
            };
            notes.push(format!("bounds: {text}{exit}"));
        }
        notes
    }
}

/// `x` plus the offset `c`, as `v1+4`, `v1-1` or `v1`.
fn plus(x: &str, c: i64) -> String {
    match c {
        0 => x.to_string(),
        _ => format!("{x}{c:+}"),
    }
}

/// An interval as `[lo, hi]`, an unbounded end as `..`.
fn span(r: &super::interval::Range) -> String {
    let end = |e: Option<i128>| e.map_or("..".to_string(), |n| n.to_string());
    format!("[{}, {}]", end(r.lo), end(r.hi))
}
