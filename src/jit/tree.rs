//! Trace trees: a root trace and the bridges attached to its guards.

use rustc_hash::FxHashMap as HashMap;

use flowjit_runtime::Value;

use crate::backend::{Compiled, Segment, TreeInst, Tuning};
use crate::trace::{Snapshot, Trace};

use super::Key;

/// A bridge: a trace from a guard that fails often to the anchor of a trace.
pub struct Bridge {
    /// The guard it leaves from: (segment, instruction); segment 0 is the root, `k` is
    /// bridge `k - 1`.
    pub from: TreeInst,
    /// For a bridge from a `guard_value`: the value it is specialized on.
    pub value: Option<Value>,
    /// Its instructions (ending in `loop`, whose snapshot is the state at the anchor).
    pub trace: Trace,
    /// Whether it ends at its own tree's anchor.
    pub returns: bool,
    /// Whether it is compiled in a function of its own (a bridge unit), not in the tree's:
    /// see [`crate::backend::lower`]. The tree's function is then not compiled again for it.
    pub separate: bool,
    /// Its machine code, when it is compiled on its own.
    pub(super) code: Option<Compiled>,
    /// Whether it is moving into the tree's function (which then holds it) with the next
    /// compilation of that function (`Jit::absorb_bridge`, or on the compiler thread a
    /// bridge attached for the function): until that is done, it stays on its own
    /// (`separate`), with its code if it has any.
    pub(super) moving_in: bool,
    /// Its instructions whose results its code holds as integers of any size
    /// ([`Segment::wide`]).
    pub(super) wide: Vec<usize>,
}

impl Bridge {
    /// Whether the tree's function holds it, or is to ([`Bridge::moving_in`]).
    pub(super) fn in_function(&self) -> bool {
        !self.separate || self.moving_in
    }
}

/// A root trace and its bridges.
pub struct Tree {
    /// Where the root is anchored.
    pub key: Key,
    /// The root trace, a peeled loop (or, without the peel pass, an iteration).
    pub root: Trace,
    /// The bridges, in the order they were attached.
    pub bridges: Vec<Bridge>,
    pub(super) code: Option<Compiled>,
    /// Per guard: failed recordings of a bridge from it.
    pub(super) failures: HashMap<TreeInst, u32>,
    /// The exits of machine code that go on in this tree's: (tree, unit, global instruction
    /// index), to go on in its new code when it is compiled again.
    pub(super) incoming: Vec<(usize, usize, usize)>,
    /// What its code may assume (`backend::Tuning`), each turned off once it runs badly,
    /// and its code compiled again: arrays which say they hold only integers still do
    /// (off once its reads exit too often); its loop's induction proofs hold, checking the
    /// values the loop is entered with (off once those checks fail too often); its function
    /// may be the quick backend's (until its loop has run `Policy::tier_iterations` there).
    pub(super) tuning: Tuning,
    /// Entries into its loop that failed that check.
    pub(super) entry_failures: u64,
    /// Entries its machine code refused (`Jit::refused`).
    pub(super) refusals: u32,
    /// The variables its code holds as integers of any size (`opt::repr`): those past
    /// 64 bits where it was recorded, and those its code was later entered with past 64
    /// bits (`Jit::widen`), each of which compiled it again.
    pub(super) wide: Vec<crate::lang::Slot>,
    /// The root's instructions whose results its code holds as integers of any size
    /// ([`Segment::wide`]).
    pub(super) root_wide: Vec<usize>,
    /// How many of its guards have exited (`Jit::few_ways`).
    pub(super) ways: usize,
    /// How many bridges compiled on their own moved into its function once entered often
    /// (`Jit::absorb_bridge`).
    pub(super) absorbed: usize,
    /// Whether a job on the compiler thread is compiling its function.
    pub(super) compiling: bool,
    /// Whether its function is to be compiled again once that job is done (it was asked
    /// for while the job ran).
    pub(super) compile_again: bool,
}

impl Tree {
    /// A tree of the root trace `root`, anchored at `key`, holding the variables `wide` as
    /// integers of any size: no bridges yet, no code, assuming all it may.
    pub(super) fn new(key: Key, root: Trace, wide: Vec<crate::lang::Slot>) -> Tree {
        Tree {
            key,
            root,
            bridges: Vec::new(),
            code: None,
            failures: HashMap::default(),
            incoming: Vec::new(),
            tuning: Tuning::DEFAULT,
            entry_failures: 0,
            refusals: 0,
            wide,
            root_wide: Vec::new(),
            ways: 0,
            absorbed: 0,
            compiling: false,
            compile_again: false,
        }
    }

    /// The instructions of segment `seg` whose results its code holds as integers of any
    /// size ([`Segment::wide`]).
    pub(super) fn wide_results(&mut self, seg: usize) -> &mut Vec<usize> {
        match seg {
            0 => &mut self.root_wide,
            s => &mut self.bridges[s - 1].wide,
        }
    }

    /// Segment `seg`: the root (0) or bridge `seg - 1`.
    pub fn segment(&self, seg: usize) -> &Trace {
        if seg == 0 {
            &self.root
        } else {
            &self.bridges[seg - 1].trace
        }
    }

    pub(super) fn segments(&self) -> Vec<Segment<'_>> {
        (0..=self.bridges.len())
            .map(|seg| self.segment_alone(seg))
            .collect()
    }

    /// What its code is compiled with besides its segments: the variables it holds as
    /// integers of any size, and the driver's choices.
    pub(super) fn machine(&self) -> (&[crate::lang::Slot], Tuning) {
        (&self.wide, self.tuning)
    }

    /// The segments as the tree's function is next compiled: with the bridges
    /// [`Bridge::moving_in`] in it.
    pub(super) fn next_segments(&self) -> Vec<Segment<'_>> {
        let mut segments = self.segments();
        for (k, b) in self.bridges.iter().enumerate() {
            segments[k + 1].separate = !b.in_function();
        }
        segments
    }

    /// Segment `seg` alone, as [`Tree::segments`] gives it, without making the others.
    pub(super) fn segment_alone(&self, seg: usize) -> Segment<'_> {
        if seg == 0 {
            return self.root_segment();
        }
        // The path's cost: the guards' snapshots' up the chain of parents.
        let (mut cost, mut at) = (0, Some(self.bridges[seg - 1].from));
        while let Some(guard) = at {
            cost += self.guard_snapshot(guard).cost;
            let ps = guard.segment;
            at = (ps > 0).then(|| self.bridges[ps - 1].from);
        }
        self.bridge_segment(seg - 1, cost)
    }

    fn root_segment(&self) -> Segment<'_> {
        Segment {
            trace: &self.root,
            parent: None,
            value: None,
            returns: false,
            cost: 0,
            separate: false,
            wide: &self.root_wide,
        }
    }

    /// Bridge `k`'s segment, its path to its start costing `cost`.
    fn bridge_segment(&self, k: usize, cost: u64) -> Segment<'_> {
        let b = &self.bridges[k];
        Segment {
            trace: &b.trace,
            parent: Some(b.from),
            value: b.value.as_ref(),
            returns: b.returns,
            cost,
            separate: b.separate,
            wide: &b.wide,
        }
    }

    /// How deep the calls inlined by any of the tree's traces nest.
    pub(super) fn calls(&self) -> usize {
        self.bridges
            .iter()
            .map(|b| b.trace.calls)
            .fold(self.root.calls, usize::max)
    }

    /// The code that holds segment `seg`: its bridge unit, or the tree's function.
    pub(super) fn code_of(&self, seg: usize) -> Option<&Compiled> {
        match self.unit_of(seg) {
            0 => self.code.as_ref(),
            s => self.bridges[s - 1].code.as_ref(),
        }
    }

    /// The unit of segment `seg`: itself for a bridge compiled on its own, 0 (the tree's
    /// function) otherwise.
    pub(super) fn unit_of(&self, seg: usize) -> usize {
        if seg > 0 && self.bridges[seg - 1].separate {
            seg
        } else {
            0
        }
    }

    /// Whether guard `from` is inside calls the trace inlined: its bridge starts in their
    /// frames (`trace::record_bridge`), which only the tree's function holds.
    pub(super) fn inside_calls(&self, from: TreeInst) -> bool {
        !self.guard_snapshot(from).frames.is_empty()
    }

    /// Whether guard `from` may get a bridge (once its exits are many): the tree has room
    /// for one, and recordings from it have not failed too often (one inside inlined
    /// calls too, [`Tree::inside_calls`]).
    pub(super) fn may_get_bridge(&self, from: TreeInst, policy: &super::Policy) -> bool {
        self.bridges.len() < policy.max_bridges
            && self.failures.get(&from).copied().unwrap_or(0) < policy.max_bridge_failures
    }

    /// Whether an exit of instruction `at` may get a bridge (when it takes it often): a
    /// guard's, and in a function trace a read's (`getitem`) that found another type or
    /// no element, whose bridge starts again at the read. In a function trace the bridges
    /// are compiled in the function, whose read branches to the bridge where it would exit.
    pub(super) fn bridges_from(&self, at: TreeInst) -> bool {
        use crate::trace::Kind;
        match self.segment(at.segment).insts[at.inst].kind {
            Kind::GuardTrue | Kind::GuardFalse | Kind::GuardValue => true,
            Kind::GetItem => self.root.function.is_some(),
            _ => false,
        }
    }

    /// The snapshot of guard `from`: complete, it gives every variable the path to it
    /// wrote.
    pub(super) fn guard_snapshot(&self, from: TreeInst) -> &Snapshot {
        let trace = self.segment(from.segment);
        trace
            .snap_of(&trace.insts[from.inst])
            .expect("a guard has a snapshot")
    }

    pub(super) fn bridge(&self, from: TreeInst, value: Option<&Value>) -> Option<usize> {
        self.bridges
            .iter()
            .position(|b| b.from == from && b.value.as_ref() == value)
            .map(|k| k + 1)
    }
}

impl crate::backend::Segments for Tree {
    fn segment(&self, seg: usize) -> Segment<'_> {
        self.segment_alone(seg)
    }
}
