//! The forward optimizer: one walk over the trace that emits the optimized trace once, its
//! stages (`fold`, `cse`, `heap`, `guards`, `bounds`, in that order) sharing what is known of each
//! value (as PyPy's `optimizeopt` chain of optimizations over one `Optimizer`).
//!
//! Each old instruction, its operands already in terms of the new trace (and read as
//! constants where one is known), is offered to each enabled stage in turn. A stage may let
//! it pass, perhaps changed (a snapshot dropped, a guard's snapshot told what its failure
//! means), or finish it: it *becomes* an operand (a constant, an earlier equal value) or,
//! a guard, it *holds* and vanishes. Stages after the one that finished it never see it.
//! What passes every stage is emitted, and then every stage learns from it: a guard teaches
//! a constant (`fold`) or an interval (`guards`, `bounds`), a comparison is remembered for
//! the next equal one (`cse`).
//!
//! Why one walk rather than a pass per stage: every pass would copy the trace and learn again
//! what the one before knew; and stages that feed each other (a constant makes an interval,
//! an interval decides a comparison, the comparison's constant folds what uses it) would need
//! the passes iterated. Here each fact is learnt once, where it becomes true, and known to
//! every stage from there on. The heap stage joined the same way: what it knows of array
//! elements is learnt in the walk, from the stores and loads emitted. Virtual arrays are not
//! a stage: `virtuals` is a pass of its own, after `peel`, that runs the stages again on what
//! it leaves.
//!
//! ```text
//! v0 = input x  @l:0 #0 []                 v0 = input x  @l:0 #0 []
//! v1 = lt v0, 4  @l:0 #0 []                v1 = lt v0, 4  @l:0 #0 []
//! guard_true v1  @d:0 #1 []          =>    guard_true v1  @d:0 #1 []
//! v3 = lt v0, 4  @d:0 #1 []                (cse: v3 is v1; fold: v1 is 1 after its guard,
//! guard_true v3  @e:0 #2 []                 so guard_true 1 holds)
//! ```

use rustc_hash::FxHashMap as HashMap;

use flowjit_runtime::Value;

use super::interval::{Facts, Range};
use super::rewrite::Rewriter;
use super::{bounds, cse, fold, guards, heap, Pass, Rejected};
use crate::trace::{Kind, Opnd, Ref, Trace};

/// What every stage sees and learns into: the trace emitted so far, with what is known of
/// each of its values.
pub struct Optimizer<'t> {
    /// The new trace, and the constant known for each of its values.
    pub out: Rewriter<'t>,
    /// The interval known for each value of the new trace.
    pub intervals: Facts,
    /// The values of the trace walked (its refs) that only a mask reads, with the mask
    /// (`fold::masked_only`).
    pub masked: HashMap<Ref, i64>,
    /// Whether the code counts operations (`--max-steps`): then every elidable call is
    /// made, so that the operations it takes are counted (see [`super::optimize_counted`]).
    pub counted: bool,
    /// The loads of a peeled loop that could carry their element instead (`heap`).
    pub carries: Vec<heap::Carry>,
    /// Whether the loop's body found an element where the preamble left it
    /// (`Trace::heap_from_preamble`).
    pub heap_from_preamble: bool,
}

/// An old instruction on its way through the stages, in terms of the new trace.
pub struct Pending {
    /// What it does.
    pub kind: Kind,
    /// Its operands in the new trace.
    pub args: Vec<Opnd>,
    /// Whether it keeps its snapshot (if it has one): a stage may prove it cannot exit.
    pub snapshot: bool,
    /// A value that its snapshot reads as a constant: what a guard's failure tells of the
    /// value it tested.
    pub failing: Option<(Ref, Value)>,
    /// Its index in the trace walked.
    pub at: usize,
}

/// What a stage decides for an instruction.
pub enum Verdict {
    /// It goes on to the next stage, and is emitted after the last.
    Pass,
    /// It is not emitted: uses of its result read this operand instead.
    Becomes(Opnd),
    /// A guard that must hold: it is not emitted.
    Holds,
}

/// One stage of the forward optimizer.
pub trait Stage {
    /// Decides for instruction `inst` (which it may change), given what is known so far;
    /// rejects the trace when the instruction is a guard that must fail.
    fn visit(&mut self, opt: &Optimizer, inst: &mut Pending) -> Result<Verdict, Rejected>;

    /// Learns from new instruction `r`, just emitted.
    fn learn(&mut self, opt: &mut Optimizer, r: Ref);
}

/// Makes a stage, fresh for one walk.
type MakeStage = fn() -> Box<dyn Stage>;

/// The stages, in the order they see an instruction, with the pass that switches each on.
const STAGES: &[(Pass, MakeStage)] = &[
    (Pass::Fold, || Box::new(fold::Fold)),
    (Pass::Cse, || Box::<cse::Cse>::default()),
    (Pass::Heap, || Box::<heap::Heap>::default()),
    (Pass::Guards, || Box::<guards::Guards>::default()),
    (Pass::Bounds, || Box::new(bounds::Bounds)),
];

/// Runs the forward optimizer over `trace` with the stages named in `enabled`.
pub fn run(trace: &Trace, enabled: &[Pass], counted: bool) -> Result<Trace, Rejected> {
    walk(trace, enabled, counted).map(|(t, _)| t)
}

/// [`run`], with the loads of the peeled loop that could carry their element instead (see
/// [`heap::Carry`]).
pub fn run_carrying(
    trace: &Trace,
    enabled: &[Pass],
    counted: bool,
) -> Result<(Trace, Vec<heap::Carry>), Rejected> {
    walk(trace, enabled, counted)
}

fn walk(
    trace: &Trace,
    enabled: &[Pass],
    counted: bool,
) -> Result<(Trace, Vec<heap::Carry>), Rejected> {
    let mut stages: Vec<Box<dyn Stage>> = STAGES
        .iter()
        .filter(|(name, _)| enabled.contains(name))
        .map(|(_, make)| make())
        .collect();
    if stages.is_empty() {
        return Ok((trace.clone(), Vec::new()));
    }
    let mut opt = Optimizer {
        out: Rewriter::new(trace),
        intervals: Facts::default(),
        masked: if enabled.contains(&Pass::Fold) {
            fold::masked_only(trace)
        } else {
            HashMap::default()
        },
        counted,
        carries: Vec::new(),
        heap_from_preamble: false,
    };
    'insts: for (i, old) in trace.insts.iter().enumerate() {
        let mut inst = Pending {
            kind: old.kind,
            args: opt.out.args(old),
            snapshot: old.snap.is_some(),
            failing: None,
            at: i,
        };
        for stage in &mut stages {
            match stage.visit(&opt, &mut inst)? {
                Verdict::Pass => {}
                Verdict::Becomes(o) => {
                    opt.out.set(i, o);
                    continue 'insts;
                }
                Verdict::Holds => continue 'insts,
            }
        }
        let failing = inst.failing.as_ref().map(|(r, v)| (*r, v));
        let r = opt.out.emit(i, inst.args, inst.snapshot, failing);
        if let Kind::Input(slot) = old.kind {
            if let Some((_, k)) = trace.known.iter().find(|(s, _)| *s == slot) {
                opt.intervals.narrow(r, Range::from_known(*k));
            }
        }
        for stage in &mut stages {
            stage.learn(&mut opt, r);
        }
    }
    let carries = std::mem::take(&mut opt.carries);
    let from_preamble = opt.heap_from_preamble;
    let mut t = opt.out.finish();
    t.heap_from_preamble |= from_preamble;
    Ok((t, carries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::parse::parse_ssa;

    #[test]
    fn a_rejection_says_which_guard_fails_and_why() {
        let (trace, _) = parse_ssa(
            "[x:int]
             v0:int = input x  @l:0 #0 []
             v1:int = lt v0, 4  @l:0 #0 []
             guard_true v1  @d:0 #1 []
             guard_false v1  @e:0 #2 []
             loop  @l:0 #3 []",
        )
        .expect("a valid trace");
        let r = run(&trace, &[Pass::Guards], false).map(|_| ());
        let guard = Kind::GuardFalse;
        assert_eq!(r, Err(Rejected::Contradiction { guard }));
        assert_eq!(
            r.expect_err("rejected").to_string(),
            "trace rejected: guard_false contradicts an earlier guard"
        );
    }
}
