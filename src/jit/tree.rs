//! Trace trees: a root trace and the bridges attached to its guards.

use std::collections::HashMap;

use flowjit_runtime::Value;

use crate::backend::{Compiled, Segment};
use crate::lang::Slot;
use crate::trace::Trace;

use super::Key;

/// A bridge: a trace from a guard that fails often to the anchor of a trace.
pub struct Bridge {
    /// The guard it leaves from: (segment, instruction); segment 0 is the root, `k` is
    /// bridge `k - 1`.
    pub from: (usize, usize),
    /// For a bridge from a `guard_value`: the value it is specialized on.
    pub value: Option<Value>,
    /// Its instructions (ending in `loop`, whose snapshot is the state at the anchor).
    pub trace: Trace,
    /// Whether it ends at its own tree's anchor.
    pub returns: bool,
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
    pub(super) failures: HashMap<(usize, usize), u32>,
}

impl Tree {
    /// Segment `seg`: the root (0) or bridge `seg - 1`.
    pub fn segment(&self, seg: usize) -> &Trace {
        if seg == 0 {
            &self.root
        } else {
            &self.bridges[seg - 1].trace
        }
    }

    pub(super) fn segments(&self) -> Vec<Segment<'_>> {
        std::iter::once(Segment {
            trace: &self.root,
            parent: None,
            value: None,
            returns: false,
        })
        .chain(self.bridges.iter().map(|b| Segment {
            trace: &b.trace,
            parent: Some(b.from),
            value: b.value.as_ref(),
            returns: b.returns,
        }))
        .collect()
    }

    /// The bridge (as a segment) from guard `from` for `value`.
    pub(super) fn bridge(&self, from: (usize, usize), value: Option<&Value>) -> Option<usize> {
        self.bridges
            .iter()
            .position(|b| b.from == from && b.value.as_ref() == value)
            .map(|k| k + 1)
    }
}

/// The constants a guard's chain of snapshots gives variables where a bridge from it
/// starts (nearest guard first).
pub(super) fn chain_constants(tree: &Tree, from: (usize, usize)) -> Vec<(Slot, Value)> {
    let mut known: Vec<(Slot, Value)> = Vec::new();
    let mut seen: Vec<Slot> = Vec::new();
    let mut at = Some(from);
    while let Some((seg, i)) = at {
        let trace = tree.segment(seg);
        if let Some(snap) = trace.snap_of(&trace.insts[i]) {
            for (slot, o) in &snap.entries {
                if !seen.contains(slot) {
                    seen.push(*slot);
                    if let Some(v) = o.as_const() {
                        known.push((*slot, v.clone()));
                    }
                }
            }
        }
        at = (seg > 0).then(|| tree.bridges[seg - 1].from);
    }
    known
}
