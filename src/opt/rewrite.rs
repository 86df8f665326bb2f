//! The rewriter every pass is built on (the forward optimizer's stages, peeling's merge of
//! parameters, dead-code elimination): it walks the old trace once, forwards, and emits a
//! new one. Each old ref maps to an operand of the new trace (a new ref, or a constant the
//! pass has folded it to); snapshots are rewritten through the same map when an instruction
//! that keeps its snapshot is emitted.
//!
//! The rewriter also holds what has been *learnt*: a new ref known to hold a constant
//! (after `guard_value(v, 5)`, `v` is 5) reads as that constant from then on, in operands and
//! in snapshots alike. Known values thus live in snapshots and are written back only when a
//! guard exits.

use flowjit_runtime::Value;

use crate::trace::{Inst, Kind, Opnd, Ref, SnapId, Snapshot, Trace};

/// A forward rewrite of a trace.
pub struct Rewriter<'t> {
    /// The trace being rewritten.
    pub old: &'t Trace,
    insts: Vec<Inst>,
    snaps: Vec<Snapshot>,
    map: Vec<Option<Opnd>>,
    /// Per new ref, the constant it is known to hold.
    constants: Vec<Option<Value>>,
}

impl<'t> Rewriter<'t> {
    /// A rewrite of `old`.
    pub fn new(old: &'t Trace) -> Rewriter<'t> {
        Rewriter {
            old,
            insts: Vec::with_capacity(old.insts.len()),
            snaps: Vec::new(),
            map: vec![None; old.insts.len()],
            constants: Vec::with_capacity(old.insts.len()),
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
            Opnd::Ref(r) => match &self.constants[r.index()] {
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
        self.constants[r.index()] = Some(value);
    }

    /// Old ref `old` now stands for `to`.
    pub fn set(&mut self, old: usize, to: Opnd) {
        self.map[old] = Some(to);
    }

    /// Rewrites old snapshot `id` through the map, sharing the last snapshot when equal,
    /// with new ref `known.0` read as the constant `known.1` in it (what a guard's own snapshot knows of the value it tested, having failed).
    pub fn snapshot_knowing(&mut self, id: SnapId, known: Option<(Ref, &Value)>) -> SnapId {
        let old = &self.old.snaps[id.index()];
        let snap = old.map(|o| {
            let o = self.opnd(o);
            match (&o, known) {
                (Opnd::Ref(r), Some((k, v))) if *r == k => Opnd::Const(v.clone()),
                _ => o,
            }
        });
        self.add_snapshot(snap)
    }

    /// Adds a new snapshot, sharing the last one when equal.
    pub fn add_snapshot(&mut self, snap: Snapshot) -> SnapId {
        if self.snaps.last() == Some(&snap) {
            return SnapId(self.snaps.len() as u32 - 1);
        }
        self.snaps.push(snap);
        SnapId(self.snaps.len() as u32 - 1)
    }

    /// Old snapshot `id` in terms of the new trace, not yet added.
    pub fn mapped_snapshot(&self, id: SnapId) -> Snapshot {
        self.old.snaps[id.index()].map(|o| self.opnd(o))
    }

    /// Emits a copy of old instruction `i` with new operands and snapshot.
    fn push(&mut self, i: usize, args: Vec<Opnd>, snap: Option<SnapId>) -> Ref {
        self.push_as(i, self.old.insts[i].kind, args, snap)
    }

    /// Emits a new instruction that stands for no old one (map old refs to it with
    /// [`Rewriter::set`]).
    pub fn push_new(&mut self, inst: Inst) -> Ref {
        self.insts.push(inst);
        self.constants.push(None);
        Ref(self.insts.len() as u32 - 1)
    }

    /// Emits old instruction `i` as a `kind` with operands `args` and snapshot `snap` (one
    /// of the new trace's); old ref `i` maps to the result.
    pub fn push_as(&mut self, i: usize, kind: Kind, args: Vec<Opnd>, snap: Option<SnapId>) -> Ref {
        let old = &self.old.insts[i];
        self.insts.push(Inst {
            kind,
            args,
            snap,
            origin: old.origin,
            ty: old.ty,
        });
        self.constants.push(None);
        let r = Ref(self.insts.len() as u32 - 1);
        self.map[i] = Some(Opnd::Ref(r));
        r
    }

    /// Emits old instruction `i` with operands `args`; old ref `i` maps to the result. Its
    /// snapshot is rewritten if `snapshot` (else it cannot exit any more), knowing that new
    /// ref `failing.0` holds `failing.1` (what a guard's failure tells of the value it tested).
    pub fn emit(
        &mut self,
        i: usize,
        args: Vec<Opnd>,
        snapshot: bool,
        failing: Option<(Ref, &Value)>,
    ) -> Ref {
        let snap = match self.old.insts[i].snap {
            Some(s) if snapshot => Some(self.snapshot_knowing(s, failing)),
            _ => None,
        };
        let r = self.push(i, args, snap);
        self.map[i] = Some(Opnd::Ref(r));
        r
    }

    /// Emits old instruction `i` with operands `args` and its snapshot rewritten; old ref
    /// `i` maps to the result.
    pub fn keep_with(&mut self, i: usize, args: Vec<Opnd>) -> Ref {
        self.emit(i, args, true, None)
    }

    /// Emits old instruction `i` rewritten.
    pub fn keep(&mut self, i: usize) -> Ref {
        let args = self.args(&self.old.insts[i]);
        self.keep_with(i, args)
    }

    /// The new trace's instructions so far.
    pub fn insts(&self) -> &[Inst] {
        &self.insts
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
            calls: self.old.calls,
            known: self.old.known.clone(),
            merges: Vec::new(),
            carries_elements: self.old.carries_elements,
            heap_from_preamble: self.old.heap_from_preamble,
            function: self.old.function,
        }
    }
}
