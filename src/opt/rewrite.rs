//! The rewriter every pass is built on: it walks the old trace once, forwards, and emits a
//! new one. Each old ref maps to an operand of the new trace (a new ref, or a constant the
//! pass has folded it to); snapshots are rewritten through the same map when an instruction
//! that keeps its snapshot is emitted.
//!
//! The rewriter also holds what the pass has *learnt*: a new ref known to hold a constant
//! (after `guard_value(v, 5)`, `v` is 5) reads as that constant from then on, in operands and
//! in snapshots alike. Known values thus live in snapshots and are written back only when a
//! guard exits.

use std::collections::HashMap;

use flowjit_runtime::Value;

use crate::trace::{Inst, Opnd, Ref, SnapId, Snapshot, Trace};

/// A forward rewrite of a trace.
pub struct Rewriter<'t> {
    /// The trace being rewritten.
    pub old: &'t Trace,
    insts: Vec<Inst>,
    snaps: Vec<Snapshot>,
    map: Vec<Option<Opnd>>,
    known: HashMap<Ref, Value>,
}

impl<'t> Rewriter<'t> {
    /// A rewrite of `old`.
    pub fn new(old: &'t Trace) -> Rewriter<'t> {
        Rewriter {
            old,
            insts: Vec::with_capacity(old.insts.len()),
            snaps: Vec::new(),
            map: vec![None; old.insts.len()],
            known: HashMap::new(),
        }
    }

    /// An old operand in terms of the new trace.
    pub fn opnd(&self, o: &Opnd) -> Opnd {
        match o {
            Opnd::Ref(r) => {
                let new = self.map[r.index()]
                    .clone()
                    .expect("a ref is mapped before it is used (SSA order)");
                self.resolve(new)
            }
            Opnd::Const(v) => Opnd::Const(v.clone()),
        }
    }

    /// A new operand with what has been learnt applied.
    pub fn resolve(&self, o: Opnd) -> Opnd {
        match o {
            Opnd::Ref(r) => match self.known.get(&r) {
                Some(v) => Opnd::Const(v.clone()),
                None => Opnd::Ref(r),
            },
            c => c,
        }
    }

    /// The old instruction's operands in terms of the new trace.
    pub fn args(&self, inst: &Inst) -> Vec<Opnd> {
        inst.args.iter().map(|a| self.opnd(a)).collect()
    }

    /// Records that new ref `r` holds `value` from here on.
    pub fn learn(&mut self, r: Ref, value: Value) {
        self.known.insert(r, value);
    }

    /// Old ref `old` now stands for `to`.
    pub fn set(&mut self, old: usize, to: Opnd) {
        self.map[old] = Some(to);
    }

    /// Rewrites old snapshot `id` through the map, sharing the last snapshot when equal.
    pub fn snapshot(&mut self, id: SnapId) -> SnapId {
        self.snapshot_knowing(id, None)
    }

    /// Rewrites old snapshot `id`, with new ref `known.0` read as the constant `known.1`
    /// in it (what a guard's own snapshot knows of the value it tested, having failed).
    pub fn snapshot_knowing(&mut self, id: SnapId, known: Option<(Ref, &Value)>) -> SnapId {
        let old = &self.old.snaps[id.index()];
        let snap = Snapshot {
            pos: old.pos,
            cost: old.cost,
            entries: old
                .entries
                .iter()
                .map(|(slot, o)| {
                    let o = self.opnd(o);
                    match (&o, known) {
                        (Opnd::Ref(r), Some((k, v))) if *r == k => (*slot, Opnd::Const(v.clone())),
                        _ => (*slot, o),
                    }
                })
                .collect(),
        };
        self.add_snapshot(snap)
    }

    /// Emits old guard `i` with operands `args`, its snapshot knowing that new ref
    /// `known.0` holds `known.1` whenever the guard fails.
    pub fn keep_guard(&mut self, i: usize, args: Vec<Opnd>, known: (Ref, &Value)) -> Ref {
        let snap = self.old.insts[i]
            .snap
            .map(|s| self.snapshot_knowing(s, Some(known)));
        let r = self.push(i, args, snap);
        self.map[i] = Some(Opnd::Ref(r));
        r
    }

    /// Adds a new snapshot, sharing the last one when equal.
    pub fn add_snapshot(&mut self, snap: Snapshot) -> SnapId {
        if self.snaps.last() == Some(&snap) {
            return SnapId(self.snaps.len() as u32 - 1);
        }
        self.snaps.push(snap);
        SnapId(self.snaps.len() as u32 - 1)
    }

    /// Emits a copy of old instruction `i` with new operands and snapshot.
    fn push(&mut self, i: usize, args: Vec<Opnd>, snap: Option<SnapId>) -> Ref {
        let old = &self.old.insts[i];
        self.insts.push(Inst {
            kind: old.kind,
            args,
            snap,
            origin: old.origin,
            ty: old.ty,
        });
        Ref(self.insts.len() as u32 - 1)
    }

    /// Emits old instruction `i` with operands `args` and its snapshot rewritten; old ref
    /// `i` maps to the result.
    pub fn keep_with(&mut self, i: usize, args: Vec<Opnd>) -> Ref {
        let snap = self.old.insts[i].snap.map(|s| self.snapshot(s));
        let r = self.push(i, args, snap);
        self.map[i] = Some(Opnd::Ref(r));
        r
    }

    /// Emits old instruction `i` rewritten.
    pub fn keep(&mut self, i: usize) -> Ref {
        let args = self.args(&self.old.insts[i]);
        self.keep_with(i, args)
    }

    /// Emits old instruction `i` rewritten, without its snapshot (it cannot exit any more).
    pub fn keep_without_snapshot(&mut self, i: usize) -> Ref {
        let args = self.args(&self.old.insts[i]);
        let r = self.push(i, args, None);
        self.map[i] = Some(Opnd::Ref(r));
        r
    }

    /// The instruction that defines new ref `r`.
    pub fn def(&self, r: Ref) -> &Inst {
        &self.insts[r.index()]
    }

    /// The new trace.
    pub fn finish(self) -> Trace {
        Trace {
            anchor: self.old.anchor,
            insts: self.insts,
            snaps: self.snaps,
        }
    }
}
