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
//! [`restore`] is the one write-back, used by every executor that exits: the trace
//! interpreter (values in its registers), machine code (unboxed values in its register
//! buffer) and compiled residual programs (each variable in the register of its slot).

use flowjit_runtime::Value;

use crate::lang::Slot;
use crate::state::{Frame, Position};
use crate::trace::{Opnd, Ref};

/// Where the interpreter resumes when an instruction exits, and what it finds in the frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Where the interpreter continues.
    pub pos: Position,
    /// How many flowgraph operations of the iteration the exit counts as done.
    pub cost: u64,
    /// The resume variables, sorted by slot: each variable's value at the exit.
    pub entries: Vec<(Slot, Opnd)>,
}

impl Snapshot {
    /// The operand `slot` has at the exit, if the snapshot gives it one.
    pub fn get(&self, slot: Slot) -> Option<&Opnd> {
        self.entries
            .binary_search_by_key(&slot, |(s, _)| *s)
            .ok()
            .map(|k| &self.entries[k].1)
    }
}

/// Writes `snap`'s resume variables into `frame`, reading each SSA value with `value`.
/// Returns the operations the exit counts as done.
pub fn restore(snap: &Snapshot, value: impl Fn(Ref) -> Value, frame: &mut Frame) -> u64 {
    for (slot, o) in &snap.entries {
        frame[slot.index()] = Some(match o {
            Opnd::Ref(r) => value(*r),
            Opnd::Const(v) => v.clone(),
        });
    }
    snap.cost
}
