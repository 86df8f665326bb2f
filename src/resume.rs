//! Resume data: what an exit from compiled code writes back so that the interpreter goes on
//! exactly as if it had run all along (the articles' resume variables; LuaJIT's snapshots,
//! PyPy's resume data).
//!
//! A [`Snapshot`] gives the position to resume at, how many flowgraph operations the exit
//! counts as done, and an entry per variable that differs from the frame the compiled code
//! was entered with: the variable's value as an operand, an SSA value (a [`Ref`]) or a
//! constant. A snapshot is complete: an exit writes back its own snapshot and nothing else.
//! A bridge reads each variable the snapshot of the guard it leaves from gives (its
//! `input`s of them are the guard's values), so its own snapshots hold them too.
//!
//! An exit inside a call that the trace inlined resumes inside it: the snapshot then also
//! lists the calls entered and not yet left ([`Inlined`], outermost first), each with where
//! its caller goes on, the caller's variable that receives the result, and every variable
//! of the callee's frame (a callee's frame starts empty, so its entries are all it holds).
//! The exit rebuilds those frames as the interpreter's calls would have made them
//! (PyPy's resume data for inlined frames, LuaJIT's snapshot frames).
//!
//! [`restore`] is the one write-back, used by every executor that exits: the trace
//! interpreter (values in its registers), machine code (unboxed values in its register
//! buffer) and compiled residual programs (each variable in the register of its slot).

use flowjit_runtime::Value;

use crate::lang::Slot;
use crate::state::{Frame, Position, State};
use crate::trace::{Opnd, Ref};

/// Where the interpreter resumes when an instruction exits, and what it finds in the frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Where the interpreter continues (in the innermost inlined call, if any).
    pub pos: Position,
    /// How many flowgraph operations of the iteration the exit counts as done.
    pub cost: u64,
    /// The resume variables of the frame the trace runs in, sorted by slot: each variable's
    /// value at the exit.
    pub entries: Vec<(Slot, Opnd)>,
    /// The calls the trace entered and has not left at the exit, outermost first.
    pub frames: Vec<Inlined>,
}

/// A call a trace inlined, as a snapshot inside it sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inlined {
    /// Where the caller goes on when the call returns: the statement after the call.
    pub ret: Position,
    /// The caller's variable that receives the result.
    pub dst: Slot,
    /// Every variable of the callee's frame, sorted by slot.
    pub entries: Vec<(Slot, Opnd)>,
}

impl Snapshot {
    /// A snapshot of the trace's own frame alone.
    pub fn new(pos: Position, cost: u64, entries: Vec<(Slot, Opnd)>) -> Snapshot {
        Snapshot {
            pos,
            cost,
            entries,
            frames: Vec::new(),
        }
    }

    /// Every operand the snapshot holds, of every frame.
    pub fn operands(&self) -> impl Iterator<Item = &Opnd> {
        self.entries
            .iter()
            .chain(self.frames.iter().flat_map(|f| f.entries.iter()))
            .map(|(_, o)| o)
    }

    /// The same snapshot with each operand replaced by `f` of it.
    pub fn map(&self, mut f: impl FnMut(&Opnd) -> Opnd) -> Snapshot {
        let mut entries = |es: &[(Slot, Opnd)]| es.iter().map(|(s, o)| (*s, f(o))).collect();
        Snapshot {
            pos: self.pos,
            cost: self.cost,
            entries: entries(&self.entries),
            frames: self
                .frames
                .iter()
                .map(|fr| Inlined {
                    ret: fr.ret,
                    dst: fr.dst,
                    entries: entries(&fr.entries),
                })
                .collect(),
        }
    }

    /// The operand `slot` has at the exit, if the snapshot gives it one.
    pub fn get(&self, slot: Slot) -> Option<&Opnd> {
        self.entries
            .binary_search_by_key(&slot, |(s, _)| *s)
            .ok()
            .map(|k| &self.entries[k].1)
    }
}

/// Writes `snap`'s resume variables into `frame`, reading each SSA value with `value`: for
/// code that inlines no call (residual programs). Returns the operations the exit counts as
/// done.
pub fn restore_frame(snap: &Snapshot, value: impl Fn(Ref) -> Value, frame: &mut Frame) -> u64 {
    debug_assert!(snap.frames.is_empty(), "a snapshot of one frame");
    write(&snap.entries, &value, frame);
    snap.cost
}

fn write(entries: &[(Slot, Opnd)], value: &impl Fn(Ref) -> Value, frame: &mut Frame) {
    for (slot, o) in entries {
        frame[slot.index()] = Some(match o {
            Opnd::Ref(r) => value(*r),
            Opnd::Const(v) => v.clone(),
        });
    }
}

/// Writes `snap`'s resume variables into `state`'s frame, reading each SSA value with
/// `value`, and enters the calls it lists, each with its frame. Returns the operations the
/// exit counts as done. The caller made sure the calls fit under the depth limit (a tree is
/// entered only where they do).
pub fn restore(snap: &Snapshot, value: impl Fn(Ref) -> Value, state: &mut State) -> u64 {
    write(&snap.entries, &value, &mut state.frame);
    for call in &snap.frames {
        let size = state.frame.len();
        state
            .enter(size, &[], Vec::new(), call.ret, call.dst)
            .expect("the calls of a trace fit under the depth limit");
        write(&call.entries, &value, &mut state.frame);
    }
    snap.cost
}
