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

use rustc_hash::FxHashMap as HashMap;

use flowjit_runtime::abi::Repr;
use flowjit_runtime::{Op, Value};

use super::forward::{Optimizer, Pending, Stage, Verdict};
use super::interval::{is_comparison, Facts, Range};
use super::Rejected;
use crate::trace::{Kind, KnownRange, Opnd, Ref, Trace};

/// The interval of `op`'s result, when it succeeds, given its operands' intervals.
pub fn result(op: Op, args: &[Opnd], facts: &Facts) -> Option<Range> {
    let r = |i: usize| facts.of(&args[i]);
    Some(match op {
        _ if is_comparison(op) => Range::new(0, 1),
        Op::Not => Range::new(0, 1),
        Op::Len => Range::new(0, i64::MAX as i128),
        Op::Same => r(0)?,
        Op::And => Range::mask(&[r(0), r(1)])?,
        Op::Mod => match &args[1] {
            Opnd::Const(Value::Int(c)) if *c > 0 => Range::new(0, *c as i128 - 1),
            Opnd::Const(Value::Int(c)) if *c < 0 => Range::new(*c as i128 + 1, 0),
            _ => return None,
        },
        Op::Div => match &args[1] {
            // Floor division by a positive constant keeps the order of its operand.
            Opnd::Const(Value::Int(c)) if *c > 0 => {
                let a = r(0)?;
                let c = *c as i128;
                Range {
                    lo: a.lo.map(|lo| lo.div_euclid(c)),
                    hi: a.hi.map(|hi| hi.div_euclid(c)),
                }
            }
            _ => return None,
        },
        Op::Add => r(0)? + r(1)?,
        Op::Sub => r(0)? - r(1)?,
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

/// Whether floor division or remainder of a 64-bit integer by the constant `k` cannot
/// fail: no division by zero, and a quotient that fits in 64 bits (`MIN / -1` does not).
/// The optimizer drops such a division's snapshot, and the backends emit no check.
pub fn safe_divisor(k: i64) -> bool {
    k != 0 && k != -1
}

/// Whether `op` cannot fail on operands in these intervals with a result in `out`.
fn cannot_fail(op: Op, args: &[Opnd], facts: &Facts, out: Option<Range>) -> bool {
    let ints = args
        .iter()
        .all(|a| facts.of(a).is_some_and(Range::fits_i64));
    match op {
        Op::Add | Op::Sub | Op::Mul | Op::Neg => ints && out.is_some_and(Range::fits_i64),
        Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Not | Op::And | Op::Or | Op::Xor => ints,
        // By a constant other than 0 and -1: no division by zero, and a quotient that
        // fits in 64 bits.
        Op::Div | Op::Mod => {
            ints && matches!(&args[1], Opnd::Const(Value::Int(c)) if safe_divisor(*c))
        }
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
                if op == Op::Readlist {
                    let out = &opt.out;
                    opt.intervals.learn_index(&args[1], |x| out.def(x));
                }
            }
            (Kind::GetItem | Kind::SetItem, [_, index, ..]) => {
                let out = &opt.out;
                opt.intervals.learn_index(index, |x| out.def(x));
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

/// The intervals the optimizer knows of the values of the optimized trace `trace` just
/// before its instruction `at`: those its `input`s are known to lie in ([`Trace::known`]),
/// then what operations, guards and accesses teach, as the `bounds` stage learns them. In
/// the loop of a peeled trace, a parameter holds the hull of what enters the loop and what
/// comes back (the latter computed knowing nothing of the parameters, which makes the hull
/// sound). A bridge from a guard at `at` starts knowing these of the values the guard's
/// snapshot gives.
pub fn facts_before(trace: &Trace, at: usize) -> Facts {
    facts_before_seeded(trace, at, &|_| None)
}

/// Whether a jump to the header of a peeled loop from instruction `at` of `trace` (a
/// bridge's end), bringing `brought[k]` for parameter `k` (`None`: the value the header
/// has), keeps what the loop's proofs assume: each parameter whose `hull` is narrower than
/// 64 bits gets a value known to lie in it, from what `trace` knows before `at` (its
/// inputs held as 64-bit integers where `held` says so) or from what `before` knows of it
/// where it was computed (for a value the bridge only passes on).
pub fn admits_at_header(
    (trace, at, held): (&Trace, usize, &[Option<Repr>]),
    hull: &[Range],
    brought: &[Option<Opnd>],
    before: impl Fn(&Opnd) -> Option<Range>,
) -> bool {
    // An input held as a 64-bit integer lies in 64 bits (and an operation on it that went
    // on did not overflow).
    let int64 = |k: usize| (held[k] == Some(Repr::Int)).then(Range::i64);
    let facts = facts_before_seeded(trace, at, &int64);
    brought.iter().enumerate().all(|(k, o)| {
        let (Some(&hull), Some(o)) = (hull.get(k), o) else {
            return true;
        };
        let within = |r: Option<Range>| r.is_some_and(|r| r.within(hull));
        Range::i64().within(hull) || within(facts.of(o)) || within(before(o))
    })
}

/// [`facts_before`], knowing besides that `input` instruction `i` lies in `seed(i)`: the
/// backend knows which inputs it holds as 64-bit integers.
pub fn facts_before_seeded(
    trace: &Trace,
    at: usize,
    seed: &dyn Fn(usize) -> Option<Range>,
) -> Facts {
    let start = trace.loop_start();
    let pass = |params: &[Option<Range>], stop: usize| {
        let mut facts = Facts::default();
        let mut ends: Vec<Vec<Option<Range>>> = Vec::new();
        for (i, inst) in trace.insts.iter().enumerate().take(stop) {
            let r = Ref(i as u32);
            match inst.kind {
                Kind::Input(slot) => {
                    if let Some((_, k)) = trace.known.iter().find(|(s, _)| *s == slot) {
                        facts.narrow(r, Range::from_known(*k));
                    }
                    if let Some(range) = seed(i) {
                        facts.narrow(r, range);
                    }
                }
                Kind::Param(_) | Kind::ParamItem => {
                    let k = i - start.expect("params follow loop_start") - 1;
                    if let Some(Some(p)) = params.get(k) {
                        facts.narrow(r, *p);
                    }
                }
                Kind::Op(op) => {
                    if let Some(out) = result(op, &inst.args, &facts) {
                        facts.narrow(r, out);
                    }
                }
                Kind::GuardTrue | Kind::GuardFalse => {
                    if let Opnd::Ref(c) = inst.args[0] {
                        facts.learn(&trace.insts[c.index()], inst.kind == Kind::GuardTrue);
                    }
                }
                Kind::LoopStart | Kind::Loop => {
                    ends.push(inst.args.iter().map(|a| facts.of(a)).collect())
                }
                _ => {}
            }
            if let Some(index) = Facts::index_of(inst) {
                facts.learn_index(index, |x| &trace.insts[x.index()]);
            }
        }
        (facts, ends)
    };
    let Some(start) = start.filter(|s| at > *s) else {
        return pass(&[], at).0;
    };
    let params = trace.insts[start].args.len();
    let (_, ends) = pass(&vec![None; params], trace.insts.len());
    let hull: Vec<Option<Range>> = (0..params)
        .map(|k| {
            ends.iter()
                .map(|e| e[k])
                .reduce(|a, b| Some(a?.hull(b?)))
                .flatten()
        })
        .collect();
    pass(&hull, at).0
}

/// What a bridge from guard `at` of the optimized trace `trace` knows of the variables the
/// guard's snapshot gives: the intervals of their values there ([`facts_before`]), and, as
/// the guard failed, the opposite of what it tests.
pub fn known_at_guard(trace: &Trace, at: usize) -> Vec<(crate::lang::Slot, KnownRange)> {
    let mut facts = facts_before(trace, at);
    let guard = &trace.insts[at];
    if let (Kind::GuardTrue | Kind::GuardFalse, [Opnd::Ref(c)]) = (guard.kind, &guard.args[..]) {
        facts.learn(&trace.insts[c.index()], guard.kind != Kind::GuardTrue);
    }
    let Some(snap) = trace.snap_of(guard) else {
        return Vec::new();
    };
    snap.entries
        .iter()
        .filter_map(|(slot, o)| match o {
            Opnd::Ref(_) => facts.of(o).map(|r| (*slot, r.known())),
            Opnd::Const(_) => None,
        })
        .collect()
}

/// What the backend knows of a peeled trace's integer arithmetic in machine code
/// ([`machine_no_overflow`]).
pub struct MachineBounds {
    /// Per instruction: an addition, subtraction, multiplication or negation that cannot
    /// overflow, and needs no overflow exit.
    pub safe: Vec<bool>,
    /// Per instruction: `x + c` (or `x - c`) whose overflow check is widened to the whole run
    /// of constant offsets `lo..=hi` that the trace adds to `x`: it exits (before itself)
    /// unless `x + lo` and `x + hi` fit in 64 bits, and is then itself safe, and so is every
    /// other offset of `x` in the run. One check instead of one per `>` of a Brainfuck run
    /// `>>>>>>>>>`. Exiting earlier than needed is always correct: the interpreter goes on
    /// from there.
    pub widen: Vec<Option<(i64, i64)>>,
    /// Per parameter of the loop: the interval the proofs assume it in at the header.
    pub hull: Vec<Range>,
    /// Per parameter of the loop: the interval its value from the preamble is checked to lie
    /// in as the loop is entered (an exit at `loop_start` otherwise), when the proofs assume
    /// one that the preamble's value is not known to lie in (an induction, `induction`).
    pub entry: Vec<Option<Range>>,
    /// The loop's accumulators whose additions cannot overflow because the loop runs at
    /// most so many times, checked as it is entered (`sums`).
    pub sums: Vec<Sum>,
}

/// A loop parameter to which each iteration adds the same amount (an accumulator), and the
/// counter that bounds how many iterations the loop makes from its entry: the counter moves
/// by `by` towards `end`, the end of the interval the proofs assume it in at the header, so
/// the loop's header is reached at most `(c0 - end) / -by + 1` times (for `by < 0`; `(end -
/// c0) / by + 1` otherwise) from the value `c0` it is entered with. Where the accumulator's
/// value `a0` there plus that many steps fits in 64 bits, so does every value in between:
/// its addition needs no overflow check. The backend checks it as the loop is entered.
#[derive(Clone, Debug, PartialEq)]
pub struct Sum {
    /// The accumulator: its index among the loop's parameters.
    pub acc: usize,
    /// The addition (or subtraction) that computes its next value.
    pub at: usize,
    /// What the addition adds: a constant, or a value the loop does not change (defined
    /// before `loop_start`, or a parameter the loop passes on unchanged, by its index).
    pub step: Opnd,
    /// Whether it subtracts `step`.
    pub minus: bool,
    /// The counter: its index among the loop's parameters.
    pub counter: usize,
    /// What each iteration adds to the counter.
    pub by: i64,
    /// The end of the counter's interval at the header that it moves towards.
    pub end: i64,
}

impl MachineBounds {
    /// Nothing known: every check stays (a segment not lowered here).
    pub fn none(trace: &Trace, is_int: impl Fn(Ref) -> bool) -> MachineBounds {
        MachineBounds {
            safe: wrapping(trace, &is_int),
            widen: vec![None; trace.insts.len()],
            hull: Vec::new(),
            entry: Vec::new(),
            sums: Vec::new(),
        }
    }
}

/// Per instruction: an addition, subtraction, multiplication or negation of 64-bit
/// integers whose result only a mask `and(_, 2^k - 1)` reads (`fold::masked_only`; a
/// Brainfuck cell's `(v + 1) & 255`). The mask keeps the low `k` bits, which wrapping
/// arithmetic computes exactly whether or not the exact result fits in 64 bits, and no
/// exit can hand the unmasked value to the interpreter: it needs no overflow check.
fn wrapping(trace: &Trace, is_int: &impl Fn(Ref) -> bool) -> Vec<bool> {
    let masked = crate::opt::fold::masked_only(trace);
    trace
        .insts
        .iter()
        .enumerate()
        .map(|(i, inst)| {
            matches!(inst.kind, Kind::Op(Op::Add | Op::Sub | Op::Mul | Op::Neg))
                && is_int(Ref(i as u32))
                && masked.contains_key(&Ref(i as u32))
                && inst.args.iter().all(|a| match a {
                    Opnd::Ref(x) => is_int(*x),
                    Opnd::Const(v) => matches!(v, Value::Int(_)),
                })
        })
        .collect()
}

/// `x + c` as (x, c), for an addition or subtraction of a constant (of at most
/// [`MAX_OFFSET`](super::interval::MAX_OFFSET)).
pub(crate) fn offset_of(inst: &crate::trace::Inst) -> Option<(Ref, i64)> {
    let c = match (inst.kind, inst.args.as_slice()) {
        (Kind::Op(Op::Add), [Opnd::Ref(x), Opnd::Const(Value::Int(c))])
        | (Kind::Op(Op::Add), [Opnd::Const(Value::Int(c)), Opnd::Ref(x)]) => (*x, *c),
        (Kind::Op(Op::Sub), [Opnd::Ref(x), Opnd::Const(Value::Int(c))]) => (*x, c.checked_neg()?),
        _ => return None,
    };
    super::interval::near(c.1).then_some(c)
}

/// Which operations of a trace (a peeled root, or a bridge) cannot overflow in machine code, where every integer
/// is 64-bit; `is_int(r)` says whether value `r` is an integer there. Integer `input`s hold
/// any `i64` (or what the trace knows of them); guards on comparisons with constants,
/// accesses and overflow checks that passed narrow values; a loop parameter holds the hull
/// of what enters the loop and what comes back (the latter computed with the parameters
/// taken as any `i64`, which makes the hull sound), and a bridge that jumps into the loop
/// must bring values in it (`backend::lower`), or the loop's proofs do not hold. An
/// addition, subtraction, multiplication or negation whose result interval fits in 64 bits
/// needs no overflow exit, and runs of constant offsets share one check
/// ([`MachineBounds::widen`]). (The optimizer proper cannot know this: in the trace
/// interpreter an integer may be a big one, so only the backend, which knows its integers
/// are `i64`, asks.)
///
/// With `induction`, a loop parameter may be assumed in a tighter interval that an
/// induction proves (`induction`), which the loop's entry then checks.
pub fn machine_no_overflow(
    trace: &Trace,
    is_int: impl Fn(Ref) -> bool,
    induction: bool,
) -> MachineBounds {
    // A bridge has no loop of its own: no parameters.
    let params = trace.loop_start().map_or(0, |s| trace.insts[s].args.len());
    // Per value, the least and greatest constant the trace adds to it.
    let mut offsets: HashMap<Ref, (i64, i64)> = HashMap::default();
    for (i, inst) in trace.insts.iter().enumerate() {
        if let Some((x, c)) = offset_of(inst).filter(|(x, _)| is_int(*x) && is_int(Ref(i as u32))) {
            let e = offsets.entry(x).or_insert((c, c));
            *e = (e.0.min(c), e.1.max(c));
        }
    }
    let walk = MachineWalk {
        trace,
        start: trace.loop_start().unwrap_or(0),
        wraps: wrapping(trace, &is_int),
        is_int,
        offsets,
    };
    let Passed {
        safe,
        widen: first,
        ends,
    } = walk.pass(&vec![Range::i64(); params], &vec![None; trace.insts.len()]);
    if trace.loop_start().is_none() {
        // No loop (a bridge): no parameters to know better, and the first pass is the last.
        return MachineBounds {
            safe,
            widen: first,
            hull: Vec::new(),
            entry: Vec::new(),
            sums: Vec::new(),
        };
    }
    let hull = hull(&ends, params);
    let hull = match trace.loop_start().filter(|_| induction) {
        Some(start) => self::induction(trace, start, hull, |h| walk.pass(h, &first).ends),
        None => hull,
    };
    // The checks the first pass widened were needed to compute the hull knowing nothing
    // of the parameters; knowing the hull, they may not be: where the loop keeps its
    // parameters in the hull without them, they go (a Brainfuck loop `[<<<<<<<<<]`, whose
    // pointer every read proves an index, needs no check of `p - 9`).
    let none = vec![None; trace.insts.len()];
    let unforced = walk.pass(&hull, &none);
    let Passed {
        mut safe,
        widen,
        ends,
    } = if keeps(&unforced.ends, &hull) {
        unforced
    } else {
        walk.pass(&hull, &first)
    };
    // What enters the loop from the preamble (the first end) and does not lie in the
    // interval the proofs assume is checked there.
    let entry = match ends.first() {
        Some(e) => e
            .iter()
            .zip(&hull)
            .map(|(e, h)| (!e.within(*h)).then_some(*h))
            .collect(),
        None => Vec::new(),
    };
    let sums = match trace.loop_start().filter(|_| induction) {
        Some(start) => self::sums(trace, start, &hull, &safe, &walk.is_int),
        None => Vec::new(),
    };
    for sum in &sums {
        safe[sum.at] = true;
    }
    MachineBounds {
        safe,
        widen,
        hull,
        entry,
        sums,
    }
}

/// Per loop parameter (of `params`), the hull of its intervals at the `ends`.
fn hull(ends: &[Vec<Range>], params: usize) -> Vec<Range> {
    (0..params)
        .map(|k| {
            ends.iter()
                .map(|e| e[k])
                .reduce(Range::hull)
                .unwrap_or(Range::i64())
        })
        .collect()
}

/// What a pass of [`machine_no_overflow`] over the trace finds.
struct Passed {
    /// Per instruction, whether it cannot overflow.
    safe: Vec<bool>,
    /// Per instruction, the offsets its widened check covers ([`MachineBounds::widen`]).
    widen: Vec<Option<(i64, i64)>>,
    /// At `loop_start` and at `loop`, the interval of each value the loop carries.
    ends: Vec<Vec<Range>>,
}

/// What every pass of [`machine_no_overflow`] reads.
struct MachineWalk<'t, F> {
    trace: &'t Trace,
    /// Whether a value is an integer in machine code.
    is_int: F,
    /// The trace's `loop_start` (0 in a bridge).
    start: usize,
    /// Per value, the least and greatest constant the trace adds to it.
    offsets: HashMap<Ref, (i64, i64)>,
    /// Per instruction, whether its value is known only modulo 2^64 (`wrapping`).
    wraps: Vec<bool>,
}

impl<F: Fn(Ref) -> bool> MachineWalk<'_, F> {
    /// One pass over the trace, the loop's parameters taken in `param_ranges`, the checks
    /// `force` says widened at least as far. The second pass widens (at least) where the
    /// first did: the hull it is given was computed knowing what those checks teach.
    fn pass(&self, param_ranges: &[Range], force: &[Option<(i64, i64)>]) -> Passed {
        let trace = self.trace;
        let def = |x: Ref| &trace.insts[x.index()];
        let mut facts = Facts::default();
        let mut out = Passed {
            safe: vec![false; trace.insts.len()],
            widen: vec![None; trace.insts.len()],
            ends: Vec::new(),
        };
        for (i, inst) in trace.insts.iter().enumerate() {
            let r = Ref(i as u32);
            let int = (self.is_int)(r);
            match inst.kind {
                Kind::Input(slot) if int => {
                    let known = trace.known.iter().find(|(s, _)| *s == slot);
                    let range = known.map_or(Range::ANY, |(_, k)| Range::from_known(*k));
                    facts.narrow(r, range.meet(Range::i64()))
                }
                Kind::Param(_) | Kind::ParamItem if int => {
                    facts.narrow(r, param_ranges[i - self.start - 1])
                }
                Kind::Op(_) if int && self.wraps[i] => {
                    // Its value is known only modulo 2^64: nothing is learnt of it, nor
                    // of its operands.
                    out.safe[i] = true;
                    facts.narrow(r, Range::i64());
                    continue;
                }
                Kind::Op(op) if int => self.operation(i, op, &mut facts, &mut out, force),
                Kind::GuardTrue | Kind::GuardFalse => {
                    if let Opnd::Ref(c) = inst.args[0] {
                        facts.learn(&trace.insts[c.index()], inst.kind == Kind::GuardTrue);
                    }
                }
                Kind::LoopStart | Kind::Loop => out.ends.push(
                    inst.args
                        .iter()
                        .map(|a| facts.of(a).unwrap_or(Range::i64()).meet(Range::i64()))
                        .collect(),
                ),
                _ => {}
            }
            if let Some(index) = Facts::index_of(inst) {
                facts.learn_index(index, def);
            }
        }
        out
    }

    /// Operation `i` (`op`, on integers, not wrapping): safe where an addition,
    /// subtraction, multiplication or negation's result fits in 64 bits, or where its
    /// check widens to cover a run of constant offsets of one value (as `force` says at
    /// least). Its result, whatever it computes, is an i64 in machine code (an overflow
    /// exits), and so are the values it was computed from by an offset.
    fn operation(
        &self,
        i: usize,
        op: Op,
        facts: &mut Facts,
        out: &mut Passed,
        force: &[Option<(i64, i64)>],
    ) {
        let inst = &self.trace.insts[i];
        let all_int = inst.args.iter().all(|a| match a {
            Opnd::Ref(x) => (self.is_int)(*x),
            Opnd::Const(v) => matches!(v, Value::Int(_)),
        });
        let result_of = |facts: &Facts| {
            if all_int {
                result(op, &inst.args, facts)
            } else {
                None
            }
        };
        let arith = matches!(op, Op::Add | Op::Sub | Op::Mul | Op::Neg);
        out.safe[i] = arith && result_of(facts).is_some_and(Range::fits_i64);
        let run = offset_of(inst)
            .and_then(|(x, c)| self.offsets.get(&x).map(|o| (x, c, *o)))
            .filter(|(_, c, o)| all_int && *o != (*c, *c));
        let wanted = force[i].is_some() || (!out.safe[i] && inst.snap.is_some());
        if let Some((x, _, (lo, hi))) = run.filter(|_| wanted) {
            let (lo, hi) = force[i].unwrap_or((lo, hi));
            let at_least = (i64::MIN as i128 - lo as i128).max(i64::MIN as i128);
            let at_most = (i64::MAX as i128 - hi as i128).min(i64::MAX as i128);
            facts.narrow(x, Range::new(at_least, at_most));
            out.widen[i] = Some((lo, hi));
            out.safe[i] = true;
        }
        let now = result_of(facts).map_or(Range::i64(), |o| o.meet(Range::i64()));
        facts.narrow_back(Ref(i as u32), now, |x: Ref| &self.trace.insts[x.index()]);
    }
}

/// The loop's accumulators whose checked additions a bound on its iterations makes safe
/// ([`Sum`]): a parameter whose next value is itself plus (or minus) a value the loop does
/// not change, in a loop with a counter, a parameter whose next value is itself plus a
/// constant, that moves towards an end of its interval at the header other than an end of
/// 64 bits.
///
/// ```text
/// v8 = param a                  a in 1..=MAX (induction): at most a0 iterations
/// v9 = param r2
/// v10 = sub v8, 1
/// v11 = add v9, v3              v3 defined before the loop: r2 + a0 * v3 fits, checked
/// v12 = eq v10, 0                                           at loop_start
/// guard_false v12
/// loop v10, v11
/// ```
fn sums(
    trace: &Trace,
    start: usize,
    hull: &[Range],
    safe: &[bool],
    is_int: impl Fn(Ref) -> bool,
) -> Vec<Sum> {
    let Some(back) = trace.insts.last().filter(|i| i.kind == Kind::Loop) else {
        return Vec::new();
    };
    let param = |k: usize| Ref((start + 1 + k) as u32);
    let def = |x: Ref| &trace.insts[x.index()];
    // The counter, and the end of its interval it moves towards.
    let counter = back.args.iter().enumerate().find_map(|(k, next)| {
        let (x, by) = offset_of(def(next.as_ref()?))?;
        let h = hull.get(k)?;
        let end = match by.signum() {
            -1 => h.lo?,
            1 => h.hi?,
            _ => return None,
        };
        let end = i64::try_from(end)
            .ok()
            .filter(|e| *e != i64::MIN && *e != i64::MAX)?;
        (x == param(k) && is_int(x)).then_some((k, by, end))
    });
    let Some((counter, by, end)) = counter else {
        return Vec::new();
    };
    // A value the loop does not change: a constant, a value of the preamble, or a
    // parameter the loop passes on as it is.
    let invariant = |o: &Opnd| match o {
        Opnd::Const(v) => matches!(v, Value::Int(_)),
        Opnd::Ref(x) if x.index() < start => is_int(*x),
        Opnd::Ref(x) => {
            let k = x.index().wrapping_sub(start + 1);
            back.args.get(k) == Some(o) && is_int(*x) && def(*x).kind != Kind::ParamItem
        }
    };
    let mut sums = Vec::new();
    for (acc, next) in back.args.iter().enumerate() {
        let Opnd::Ref(at) = next else { continue };
        let p = Opnd::Ref(param(acc));
        let add = def(*at);
        if acc == counter || at.index() <= start || safe[at.index()] || !is_int(*at) {
            continue;
        }
        let (step, minus) = match (add.kind, add.args.as_slice()) {
            (Kind::Op(Op::Add), [x, s]) | (Kind::Op(Op::Add), [s, x]) if *x == p => (s, false),
            (Kind::Op(Op::Sub), [x, s]) if *x == p => (s, true),
            _ => continue,
        };
        if *step == p || !invariant(step) || def(param(acc)).kind == Kind::ParamItem {
            continue;
        }
        sums.push(Sum {
            acc,
            at: at.index(),
            step: step.clone(),
            minus,
            counter,
            by,
            end,
        });
    }
    sums
}

/// Whether a loop whose ends (`loop_start`'s first, the preamble's, then the back edges')
/// are `ends` brings every parameter back in the interval `hull` gives it at the header.
fn keeps(ends: &[Vec<Range>], hull: &[Range]) -> bool {
    ends.iter()
        .skip(1)
        .all(|e| e.iter().zip(hull).all(|(v, h)| v.within(*h)))
}

/// Tighter intervals for the loop's parameters than the hull of what enters and what comes
/// back computed knowing nothing of them, where an induction proves one: a counter moving
/// towards a bound that a guard compares it with. For a parameter whose value at the back
/// edge is itself plus a constant `c`, and each constant `K` a guard of the loop compares
/// it (or its next value) with, the candidates are `K..=MAX` (and `K+1..=MAX`) for `c < 0`,
/// `MIN..=K` (and `MIN..=K-1`) for `c > 0`. A candidate holds when the loop, assuming every
/// parameter in its interval, brings each back in it (`run` gives the ends of the loop
/// computed under such assumptions). The preamble's values need not lie in it: the
/// backend checks them as the loop is entered ([`MachineBounds::entry`]).
///
/// ```text
/// v8 = param a                  a in 1..=MAX (assumed)
/// v10 = sub v8, 1               0..=MAX-1: cannot overflow
/// v12 = eq v10, 0
/// guard_false v12               1..=MAX-1 (not 0)
/// loop v10                      within 1..=MAX: the assumption holds
/// ```
fn induction(
    trace: &Trace,
    start: usize,
    hull: Vec<Range>,
    run: impl Fn(&[Range]) -> Vec<Vec<Range>>,
) -> Vec<Range> {
    let def = |x: Ref| &trace.insts[x.index()];
    let Some(back) = trace.insts[start..]
        .iter()
        .rev()
        .find(|i| i.kind == Kind::Loop)
    else {
        return hull;
    };
    let mut best = hull.clone();
    for (k, next) in back.args.iter().enumerate() {
        let p = Ref((start + 1 + k) as u32);
        let Opnd::Ref(next) = next else { continue };
        let Some((x, c)) = offset_of(def(*next)) else {
            continue;
        };
        if x != p || c == 0 {
            continue;
        }
        let mut bounds = Vec::new();
        for inst in &trace.insts[start..] {
            let (Kind::GuardTrue | Kind::GuardFalse, [Opnd::Ref(cond)]) =
                (inst.kind, inst.args.as_slice())
            else {
                continue;
            };
            let cond = def(*cond);
            let (Kind::Op(op), [a, b]) = (cond.kind, cond.args.as_slice()) else {
                continue;
            };
            if !is_comparison(op) {
                continue;
            }
            let compared = |o: &Opnd| matches!(o, Opnd::Ref(r) if *r == p || r == next);
            match (a, b) {
                (o, Opnd::Const(Value::Int(n))) | (Opnd::Const(Value::Int(n)), o)
                    if compared(o) =>
                {
                    bounds.push(*n as i128)
                }
                _ => {}
            }
        }
        let (min, max) = (i64::MIN as i128, i64::MAX as i128);
        let candidates = bounds.iter().flat_map(|&n| {
            let (near, far) = if c < 0 {
                (Range::new(n + 1, max), Range::new(n, max))
            } else {
                (Range::new(min, n - 1), Range::new(min, n))
            };
            [near, far]
        });
        for candidate in candidates {
            let candidate = candidate.meet(Range::i64());
            if candidate.lo > candidate.hi || best[k].within(candidate) {
                continue;
            }
            let mut h = best.clone();
            h[k] = candidate;
            if keeps(&run(&h), &h) {
                best = h;
                break;
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::parse::parse_ssa;

    /// The register machine's square loop, as optimized: `r2 + r1` while `a` runs down to 0.
    const SQUARE: &str = "[a:int, r2:int, r1:int]
        v0:int = input a  @l:0 #0 []
        v1:int = input r2  @l:0 #0 []
        v2:int = input r1  @l:0 #0 []
        v3:int = sub v0, 1  @l:0 #0 []
        v4:int = add v1, v2  @l:0 #1 [a=v3]
        v5:int = eq v3, 0
        guard_false v5  @d:0 #2 [a=v3, r2=v4]
        loop_start v3, v4  @l:0 #3 [a=v3, r2=v4]
        v8:int = param a
        v9:int = param r2
        v10:int = sub v8, 1  @l:0 #0 [a=v8, r2=v9]
        v11:int = add v9, v2  @l:0 #1 [a=v10, r2=v9]
        v12:int = eq v10, 0
        guard_false v12  @d:0 #2 [a=v10, r2=v11]
        loop v10, v11  @l:0 #3 [a=v10, r2=v11]";

    fn bounds(text: &str, induction: bool) -> MachineBounds {
        let (trace, _) = parse_ssa(text).expect("a valid trace");
        machine_no_overflow(&trace, |_| true, induction)
    }

    #[test]
    fn an_accumulator_of_a_counted_loop_is_checked_once_as_the_loop_is_entered() {
        let b = bounds(SQUARE, true);
        let sum = Sum {
            acc: 1,
            at: 11,
            step: Opnd::Ref(Ref(2)),
            minus: false,
            counter: 0,
            by: -1,
            end: 1,
        };
        assert_eq!(b.sums, vec![sum]);
        assert!(b.safe[11], "the accumulator's addition");
        assert!(b.safe[10], "the counter's subtraction (induction)");
        // Without induction, no interval bounds the counter, nor the iterations.
        let b = bounds(SQUARE, false);
        assert!(b.sums.is_empty() && !b.safe[11]);
    }

    #[test]
    fn arithmetic_only_a_mask_reads_wraps_unchecked_and_teaches_nothing() {
        // A Brainfuck cell: `(c - 1) & 255`, and a product only a mask reads.
        let text = "[c:int, p:int]
            v0:int = input c  @l:0 #0 []
            v1:int = input p  @l:0 #0 []
            v2:int = sub v0, 1  @l:1 #1 [c=v0]
            v3:int = and v2, 255  @l:2 #2 [c=v2]
            v4:int = mul v1, v1  @l:3 #3 [c=v3]
            v5:int = and v4, 65535
            v6:int = add v0, 7  @l:4 #4 [c=v3, p=v5]
            v7:int = sub v0, 2  @l:5 #5 [c=v6, p=v5]
            loop  @l:0 #6 [c=v7, p=v5]";
        let b = bounds(text, false);
        assert!(
            b.safe[2] && b.widen[2].is_none() && b.safe[4],
            "masked: no check"
        );
        // Nothing was learnt of `c` from its wrapped difference: `c + 7` and `c - 2` keep
        // their checks (one check widened to the run of offsets of `c`, at the first).
        assert_eq!(b.widen[6], Some((-2, 7)));
        assert!(b.safe[7]);
        // A value a snapshot also holds is not masked only: it keeps its check (the
        // run's, widened, now at the first offset).
        let escapes = text.replace("@l:3 #3 [c=v3]", "@l:3 #3 [c=v2]");
        let b = bounds(&escapes, false);
        assert_eq!(b.widen[2], Some((-2, 7)));
        assert!(b.safe[4]);
        // Nor is a value masked by a negative constant, which keeps its high bits.
        let negative = text.replace("and v2, 255", "and v2, -256");
        assert_eq!(bounds(&negative, false).widen[2], Some((-2, 7)));
    }

    #[test]
    fn an_accumulator_needs_a_step_the_loop_does_not_change_and_a_counter_with_an_end() {
        // The step is the counter itself: it changes.
        let varying = SQUARE.replace("v11:int = add v9, v2", "v11:int = add v9, v8");
        let b = bounds(&varying, true);
        assert!(b.sums.is_empty() && !b.safe[11]);
        // A counter tested against a variable: no end to its interval.
        let unbounded = SQUARE
            .replace("v5:int = eq v3, 0", "v5:int = eq v3, v2")
            .replace("v12:int = eq v10, 0", "v12:int = eq v10, v2");
        let b = bounds(&unbounded, true);
        assert!(b.sums.is_empty() && !b.safe[11]);
    }
}
