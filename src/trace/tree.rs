//! Trace trees: a peeled root trace and the bridges attached to its guards, as the
//! representation pass (`opt::repr`) and the backend see them.

use flowjit_runtime::Value;

use super::{Kind, Opnd, Ref, Trace};
use crate::lang::Slot;

/// An instruction of a trace tree: its segment (0 for the root, `k + 1` for bridge `k`) and
/// its index there. A guard's address, the instruction a bridge leaves from, an exit's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TreeInst {
    /// The segment.
    pub segment: usize,
    /// The instruction's index in the segment.
    pub inst: usize,
}

impl TreeInst {
    /// Instruction `inst` of segment `segment`.
    pub fn new(segment: usize, inst: usize) -> TreeInst {
        TreeInst { segment, inst }
    }
}

/// A segment of a trace tree.
#[derive(Clone, Copy)]
pub struct Segment<'a> {
    /// Its instructions.
    pub trace: &'a Trace,
    /// The guard it leaves from; `None` for the root.
    pub parent: Option<TreeInst>,
    /// For a bridge from a `guard_value`: the value it is specialized on.
    pub value: Option<&'a Value>,
    /// For a bridge: whether it ends at the tree's own anchor (then it jumps to `start`);
    /// otherwise it exits there and the driver enters the trace anchored there.
    pub returns: bool,
    /// How many flowgraph operations the path to its start stands for: the counts of the
    /// snapshots of the guards its chain leaves from (0 for the root).
    pub cost: u64,
    /// For a bridge: whether it is compiled in a function of its own (a *bridge unit*)
    /// rather than in the tree's: its guard's exit then goes on in that function through
    /// its link (`backend::lower::linkable`).
    pub separate: bool,
    /// The instructions whose results machine code holds as integers of any size (boxed,
    /// `Repr::Num`) though their type is a 64-bit one's: reads of elements and calls found
    /// to give integers past 64 bits where the code ran (`Jit::hold_wide`).
    pub wide: &'a [usize],
}

impl<'a> Segment<'a> {
    /// The root segment of `trace`.
    pub fn root(trace: &'a Trace) -> Segment<'a> {
        Segment {
            trace,
            parent: None,
            value: None,
            returns: false,
            cost: 0,
            separate: false,
            wide: &[],
        }
    }
}

impl Segment<'_> {
    /// The segment as a bridge compiled on its own sees it: no parent guard to read from,
    /// its end, even at its own tree's anchor, an exit (that goes on in the tree's
    /// function), and its path to its start counted already, by the exit of its guard.
    pub fn on_its_own(self) -> Self {
        Segment {
            parent: None,
            value: None,
            returns: false,
            cost: 0,
            separate: false,
            ..self
        }
    }
}

/// The operand the guard bridge `seg` leaves from gives `slot`, if any: its snapshot is
/// complete, so this is the variable's value at the bridge's start, unless unchanged since
/// the tree was entered.
pub fn guard_gives(segments: &[Segment], seg: usize, slot: Slot) -> Option<(usize, Opnd)> {
    let TreeInst {
        segment: ps,
        inst: pi,
    } = segments[seg].parent?;
    let trace = segments[ps].trace;
    let snap = trace
        .snap_of(&trace.insts[pi])
        .expect("a guard has a snapshot");
    snap.get(slot).map(|o| (ps, o.clone()))
}

/// Whether ref `r` of segment `seg` is a virtual array (`opt::virtuals`), which the code
/// never holds in a register.
pub fn is_virtual(segments: &[Segment], seg: usize, r: Ref) -> bool {
    segments[seg].trace.insts[r.index()].kind == Kind::Virtual
}
