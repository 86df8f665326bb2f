//! Whether compiling a loop can pay for itself, judged when it becomes hot.
//!
//! A loop is hot after [`Policy::threshold`] iterations, but what compiling it is
//! worth depends on the iterations still to come, which a counted loop tells: when its exit
//! test compares a counter that the loop steps by a constant with a bound it does not
//! change (`i = i + 1; c = i < m; if c goto body else goto done`), the frame at the hot
//! back edge gives the iterations left. A loop whose remaining iterations cost less to
//! interpret than compiling costs is left to the interpreter for now; it is asked again
//! once it has run what it would have to run for its cost to reach compiling's, or its
//! iterations left, whichever is fewer (never fewer than the threshold's), so a loop entered
//! again with a larger bound is compiled then, and one that is not costs no more asking
//! than one question each time it is entered.
//!
//! The cost model (measured, see docs/ARCHITECTURE.md *Compiling pays for itself*): an
//! interpreted operation costs about [`Policy::interp_ns_per_op`]; compiling a loop costs
//! about [`Policy::compile_ns`] plus [`Policy::compile_ns_per_op`] per operation of its body. An iteration is
//! taken to run the operations of the shortest way around the loop, so that the estimate
//! of what interpreting costs is low: a loop in doubt is compiled later rather than
//! sooner. A loop whose shape is not this one (an interpreted program's loop, found by its
//! greens, a loop whose exit test is not a counter's, or one that calls a function, whose
//! operations its blocks do not tell) is compiled at its threshold as before: the
//! iterations left, or what they cost, are not known.

use std::collections::VecDeque;

use rustc_hash::FxHashSet;

use flowjit_runtime::{Op, Value};

use crate::lang::{BlockId, Inst, Operand, Program, Slot, Terminator};
use crate::state::Frame;

use super::Policy;

/// The exit test of a counted loop.
#[derive(Clone, Debug)]
struct Counted {
    /// The counter.
    counter: Slot,
    /// What one iteration adds to it.
    step: i64,
    /// The bound: a constant or a variable the loop does not write.
    bound: Operand,
    /// The comparison `counter CMP bound` under which the loop goes on.
    stays: Op,
    /// Operations on the shortest way around the loop.
    ops: u64,
}

/// Whether compiling a loop pays ([`Payoff::worth_compiling`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Compile it now.
    Now,
    /// Not before it has run this many more iterations.
    Later(u64),
}

/// The counted loops of a program, found when first asked.
pub struct Payoff {
    shapes: Vec<Option<Option<Counted>>>,
    preds: Vec<Vec<BlockId>>,
    /// Per loop, what interpreting it has cost since it was first found hot (estimated,
    /// in nanoseconds).
    spent: Vec<u64>,
    /// The cost model and the largest loop examined.
    policy: Policy,
}

impl Payoff {
    /// No loop examined yet; loops are judged by `policy`'s cost model.
    pub fn new(program: &Program, policy: &Policy) -> Payoff {
        let mut preds = vec![Vec::new(); program.blocks.len()];
        for (b, block) in program.blocks.iter().enumerate() {
            for j in block.term.jumps() {
                preds[j.target.index()].push(BlockId(b as u32));
            }
        }
        Payoff {
            shapes: vec![None; program.blocks.len()],
            preds,
            spent: vec![0; program.blocks.len()],
            policy: *policy,
        }
    }

    /// Whether compiling the loop at `anchor` now, with `frame`, can pay for itself, the
    /// loop having run `since` iterations since it was last asked: not yet only for a
    /// counted loop with too few iterations left, while what it has cost in the interpreter
    /// since it was first hot is less than compiling it costs (a loop entered again and
    /// again, each time too near its end, is compiled once its iterations add up: an inner
    /// loop). Then not before the fewer of its iterations left and those that would bring
    /// what it has cost to what compiling costs.
    pub fn worth_compiling(
        &mut self,
        program: &Program,
        anchor: BlockId,
        frame: &Frame,
        since: u64,
    ) -> Verdict {
        let slot = &mut self.shapes[anchor.index()];
        if slot.is_none() {
            *slot = Some(counted(
                program,
                &self.preds,
                anchor,
                self.policy.max_loop_blocks,
            ));
        }
        let Some(Some(shape)) = slot else {
            return Verdict::Now;
        };
        let Some(left) = remaining(shape, frame) else {
            return Verdict::Now;
        };
        let per_iteration = (shape.ops * self.policy.interp_ns_per_op).max(1);
        let compiling = self.policy.compile_ns + self.policy.compile_ns_per_op * shape.ops;
        let spent = &mut self.spent[anchor.index()];
        *spent = spent.saturating_add(since.saturating_mul(per_iteration));
        if left.saturating_mul(per_iteration) >= compiling || *spent >= compiling {
            return Verdict::Now;
        }
        Verdict::Later(left.min((compiling - *spent).div_ceil(per_iteration)))
    }
}

/// The exit test of the loop at `anchor`, if it is a counted loop of at most `max_blocks`
/// blocks.
fn counted(
    program: &Program,
    preds: &[Vec<BlockId>],
    anchor: BlockId,
    max_blocks: usize,
) -> Option<Counted> {
    let block = |b: BlockId| &program.blocks[b.index()];
    let body = natural_loop(program, preds, anchor, max_blocks)?;
    let inside = |b: BlockId| body.contains(&b);
    let mut region: Vec<BlockId> = body.iter().copied().collect();
    region.sort_unstable();
    // A call takes operations the loop's blocks do not tell: what an iteration costs is
    // not known.
    let calls = |b: &BlockId| {
        block(*b)
            .insts
            .iter()
            .any(|i| matches!(i, Inst::Call { .. }))
    };
    if region.iter().any(calls) {
        return None;
    }
    // The one test that leaves the loop.
    let mut exits = region.iter().filter_map(|b| match &block(*b).term {
        Terminator::If { cond, then, els } if inside(then.target) != inside(els.target) => {
            Some((*b, *cond, inside(then.target)))
        }
        _ => None,
    });
    let (at, cond, stays_when_true) = exits.next()?;
    if exits.next().is_some() {
        return None;
    }
    // `cond = a CMP b`, the last write of `cond` in the testing block.
    let (op, a, b) = block(at)
        .insts
        .iter()
        .rev()
        .find(|i| i.written() == Some(cond))
        .and_then(|i| match i {
            Inst::Op2 { op, a, b, .. } => Some((*op, a.clone(), b.clone())),
            _ => None,
        })?;
    let unchanged = |o: &Operand| match o {
        Operand::Const(Value::Int(_)) => true,
        Operand::Var(s) => writes(program, &region, *s).is_empty(),
        Operand::Const(_) => false,
    };
    let step_of = |o: &Operand| step_of(program, &region, o);
    let ((counter, step), bound, op) = match (step_of(&a), step_of(&b)) {
        (Some(c), None) if unchanged(&b) => (c, b, op),
        (None, Some(c)) if unchanged(&a) => (c, a, op.flipped()?),
        _ => return None,
    };
    let stays = if stays_when_true { op } else { op.negated()? };
    Some(Counted {
        counter,
        step,
        bound,
        stays,
        ops: shortest_round(program, anchor, &inside)?,
    })
}

/// The natural loop at `anchor`: the anchor and what reaches a back edge to it without
/// passing through it; `None` past `max_blocks` blocks.
fn natural_loop(
    program: &Program,
    preds: &[Vec<BlockId>],
    anchor: BlockId,
    max_blocks: usize,
) -> Option<FxHashSet<BlockId>> {
    let mut body: FxHashSet<BlockId> = FxHashSet::default();
    body.insert(anchor);
    let mut work: Vec<BlockId> = preds[anchor.index()]
        .iter()
        .copied()
        .filter(|p| {
            program.blocks[p.index()]
                .term
                .jumps()
                .any(|j| j.target == anchor && j.back_edge)
        })
        .collect();
    while let Some(b) = work.pop() {
        if body.insert(b) {
            if body.len() > max_blocks {
                return None;
            }
            work.extend(preds[b.index()].iter().copied());
        }
    }
    Some(body)
}

/// The statements of the blocks `region` that write `s`.
fn writes<'p>(program: &'p Program, region: &[BlockId], s: Slot) -> Vec<&'p Inst> {
    region
        .iter()
        .flat_map(|b| &program.blocks[b.index()].insts)
        .filter(|i| i.written() == Some(s))
        .collect()
}

/// The counter `o` is and what each iteration adds to it, if the loop `region` writes it
/// once, stepping it by a constant (`i = i + k`, `i = k + i`, `i = i - k`).
fn step_of(program: &Program, region: &[BlockId], o: &Operand) -> Option<(Slot, i64)> {
    let Operand::Var(s) = o else { return None };
    let [Inst::Op2 { op, a, b, dst }] = writes(program, region, *s)[..] else {
        return None;
    };
    match (op, a, b) {
        (Op::Add, Operand::Var(x), Operand::Const(Value::Int(k)))
        | (Op::Add, Operand::Const(Value::Int(k)), Operand::Var(x))
            if x == dst =>
        {
            Some((*dst, *k))
        }
        (Op::Sub, Operand::Var(x), Operand::Const(Value::Int(k))) if x == dst => {
            Some((*dst, k.checked_neg()?))
        }
        _ => None,
    }
}

/// The fewest operations (statements and the jump that ends each block) from `anchor`
/// around the loop back to it.
fn shortest_round(
    program: &Program,
    anchor: BlockId,
    inside: &impl Fn(BlockId) -> bool,
) -> Option<u64> {
    let cost = |b: BlockId| program.blocks[b.index()].insts.len() as u64 + 1;
    // Blocks are few and costs small: a breadth-first relaxation is enough.
    let mut best: rustc_hash::FxHashMap<BlockId, u64> = Default::default();
    let mut round: Option<u64> = None;
    let mut work = VecDeque::from([(anchor, cost(anchor))]);
    while let Some((b, so_far)) = work.pop_front() {
        for s in program.blocks[b.index()].term.jumps().map(|j| j.target) {
            if s == anchor {
                round = Some(round.map_or(so_far, |r| r.min(so_far)));
            } else if inside(s) && best.get(&s).is_none_or(|c| so_far + cost(s) < *c) {
                best.insert(s, so_far + cost(s));
                work.push_back((s, so_far + cost(s)));
            }
        }
    }
    round
}

/// The iterations the loop has left, from the counter's and the bound's values in `frame`;
/// `None` when they are not integers of 64 bits, or the counter never reaches the bound.
fn remaining(shape: &Counted, frame: &Frame) -> Option<u64> {
    let int = |v: Option<&Value>| match v {
        Some(Value::Int(n)) => Some(i128::from(*n)),
        _ => None,
    };
    let x = int(frame[shape.counter.index()].as_ref())?;
    let y = match &shape.bound {
        Operand::Const(v) => int(Some(v))?,
        Operand::Var(s) => int(frame[s.index()].as_ref())?,
    };
    let k = i128::from(shape.step);
    let left = match shape.stays {
        Op::Lt if k > 0 => (y - x).max(0) / k,
        Op::Le if k > 0 => (y - x + 1).max(0) / k,
        Op::Gt if k < 0 => (x - y).max(0) / -k,
        Op::Ge if k < 0 => (x - y + 1).max(0) / -k,
        Op::Ne if k != 0 && (y - x) % k == 0 && (y - x) / k >= 0 => (y - x) / k,
        _ => return None,
    };
    u64::try_from(left).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::{self, Syntax};

    fn judge(text: &str, anchor: &str, inputs: &[(&str, i64)]) -> bool {
        let (_, program) = lang::load(text, Syntax::Fg).expect("a valid program");
        let mut frame: Frame = vec![None; program.frame_size()];
        for (name, v) in inputs {
            frame[program.slot(name).unwrap().index()] = Some(Value::Int(*v));
        }
        let anchor = program.block_id(anchor).unwrap();
        let verdict =
            Payoff::new(&program, &Policy::DEFAULT).worth_compiling(&program, anchor, &frame, 50);
        verdict == Verdict::Now
    }

    const COUNTED: &str = "start:\n    i = 0\n    s = 0\n    goto loop\nloop:\n    s = s + i\n    i = i + 1\n    c = i < n\n    if c goto loop else goto done\ndone:\n    print_and_stop(s)\n";

    #[test]
    fn a_counted_loop_near_its_end_is_not_worth_compiling() {
        assert!(!judge(COUNTED, "loop", &[("i", 50), ("n", 60)]));
        assert!(judge(COUNTED, "loop", &[("i", 50), ("n", 10_000_000)]));
    }

    /// `COUNTED` at its loop, `i` and `n` as given, with no loop judged yet.
    fn counted_at(i: i64, n: i64) -> (Program, BlockId, Frame, Payoff) {
        let (_, program) = lang::load(COUNTED, Syntax::Fg).expect("a valid program");
        let mut frame: Frame = vec![None; program.frame_size()];
        frame[program.slot("i").unwrap().index()] = Some(Value::Int(i));
        frame[program.slot("n").unwrap().index()] = Some(Value::Int(n));
        let anchor = program.block_id("loop").unwrap();
        let payoff = Payoff::new(&program, &Policy::DEFAULT);
        (program, anchor, frame, payoff)
    }

    /// A loop left to the interpreter is asked again only once it has run its iterations
    /// left (here 10), or, when fewer, those that bring what it has cost to what compiling
    /// costs.
    #[test]
    fn a_loop_not_worth_compiling_is_asked_again_when_it_might_be() {
        let (program, anchor, frame, mut payoff) = counted_at(50, 60);
        let first = payoff.worth_compiling(&program, anchor, &frame, 50);
        assert_eq!(first, Verdict::Later(10));
        let ops = payoff.shapes[anchor.index()]
            .as_ref()
            .and_then(|s| s.as_ref())
            .unwrap()
            .ops;
        let per = ops * Policy::DEFAULT.interp_ns_per_op;
        let compiling = Policy::DEFAULT.compile_ns + ops * Policy::DEFAULT.compile_ns_per_op;
        // Asked again 4 iterations short of what compiling costs, with 10 left.
        let since = (compiling / per) - 50 - 4;
        let again = payoff.worth_compiling(&program, anchor, &frame, since);
        assert_eq!(
            again,
            Verdict::Later((compiling - (50 + since) * per).div_ceil(per))
        );
        assert!(matches!(again, Verdict::Later(n) if n < 10));
    }

    #[test]
    fn a_loop_hot_again_and_again_near_its_end_is_compiled_once_it_has_cost_enough() {
        // An inner loop: each entry runs 60 iterations, hot (with its count carried from
        // entry to entry) every 50.
        let (program, anchor, frame, mut payoff) = counted_at(50, 60);
        let asked = (1..10_000)
            .find(|_| payoff.worth_compiling(&program, anchor, &frame, 50) == Verdict::Now)
            .expect("compiled in the end");
        assert!(asked > 10, "not at once: {asked}");
    }

    #[test]
    fn a_loop_counting_down_or_left_on_a_false_test_is_counted_too() {
        let down = "start:\n    goto loop\nloop:\n    n = n - 2\n    c = n <= 0\n    if c goto done else goto loop\ndone:\n    print_and_stop(n)\n";
        assert!(!judge(down, "loop", &[("n", 100)]));
        assert!(judge(down, "loop", &[("n", 100_000_000)]));
    }

    #[test]
    fn a_loop_whose_bound_moves_or_whose_counter_is_not_stepped_is_compiled() {
        let moving = COUNTED.replace("    s = s + i\n", "    n = n + 1\n");
        assert!(judge(&moving, "loop", &[("i", 50), ("n", 60)]));
        let doubling = COUNTED.replace("i = i + 1", "i = i * 2");
        assert!(judge(&doubling, "loop", &[("i", 50), ("n", 60)]));
    }
}
