//! The state of a running program, shared by every executor: the interpreter, the trace
//! recorder and interpreter, machine code and compiled residual programs.
//!
//! Today a program's state is one frame of variables, a position in the program and the
//! `--max-steps` budget. The state of calls (a stack of frames) and of input and output
//! (the output sink, the input source) belongs here too: every executor reads and writes
//! them through this module, never through another executor's types.

use flowjit_runtime::Value;

use crate::lang::{BlockId, Program, Slot};

/// The variables of a running program, indexed by slot; `None` for never written.
pub type Frame = Vec<Option<Value>>;

/// A position in a program: a block and the index of a statement in it (the block's length
/// means its terminator).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Position {
    /// The block.
    pub block: BlockId,
    /// The statement's index.
    pub inst: usize,
}

impl Position {
    /// The start of `block`.
    pub fn start(block: BlockId) -> Position {
        Position { block, inst: 0 }
    }
}

/// The `--max-steps` budget: how many more operations may be interpreted.
#[derive(Clone, Copy, Debug)]
pub struct Steps {
    /// The limit given, if any.
    pub limit: Option<u64>,
    /// Operations left.
    pub left: u64,
}

impl Steps {
    /// A budget of `limit` operations, or none.
    pub fn new(limit: Option<u64>) -> Steps {
        Steps {
            limit,
            left: limit.unwrap_or(u64::MAX),
        }
    }

    /// How many operations have been used.
    pub fn used(&self) -> u64 {
        self.limit.unwrap_or(u64::MAX) - self.left
    }
}

/// A fresh frame for `program` with the given inputs set.
pub fn frame_with(program: &Program, inputs: &[(Slot, Value)]) -> Frame {
    let mut frame = vec![None; program.frame_size()];
    for (slot, v) in inputs {
        frame[slot.index()] = Some(v.clone());
    }
    frame
}
