//! Allocation removal: an array that the trace makes and that does not escape it is never
//! allocated (PyPy's virtuals, LuaJIT's allocation sinking, `lj_opt_sink.c`).
//!
//! A candidate is an `array(n, init)` of a constant length `n` up to [`MAX_LEN`]. It stays
//! *virtual* while every use of it is one this pass can do without memory: a `getitem` or
//! `setitem` at a constant index in range, `len`, `==` or `!=` (a new array is no other
//! value: the comparison is a constant), a snapshot, or being stored into another virtual
//! array. Any other use lets it escape: an operand of any other instruction (`print`, a
//! call, a store into an array that is real), a loop-carried value that cannot stay
//! virtual (below), a use in the loop of an array the preamble made, or the end of a trace
//! that is not peeled (a bridge's state goes on in registers). An array stored into
//! one that escapes escapes with it; an array read back out of another escapes too, so that
//! no operand of an instruction is ever virtual.
//!
//! A virtual array becomes a `virtual` instruction, which no executor runs: its `setitem`s
//! go, a `getitem` becomes the operand last stored at its index (or `init`), `len` the
//! constant `n`. Each snapshot lists the virtual arrays it holds with their elements at that
//! point (`{v4=[v2, 7]}`), so that an exit builds them, with their contents, before the
//! interpreter goes on (`resume::restore`).
//!
//! **Across the back edge.** In a peeled loop, a variable that holds, at `loop_start`, an
//! array the preamble made and, at `loop`, one the iteration made (a box that each iteration
//! replaces by a new one) stays virtual across iterations if both do: its `param` becomes
//! one `param` per element (none for an element that is the same constant at both ends, as
//! a box's tag) and a `virtual` whose elements they are. Each iteration's array is then never
//! allocated either. A loop whose header holds such a variable is entered only through its
//! preamble (`opt::header::LoopState`).
//!
//! ```text
//! v3:array = array 2, 0                      v3:array = virtual 2, 0
//! setitem v3, 1, v1                          (gone)
//! v5:int = getitem v3, 1              =>     (v5 is v1)
//! guard_true v6  @l:1 #4 [b=v3, x=v5]        guard_true v6  @l:1 #4 [b=v3, x=v1] {v3=[0, v1]}
//! ```

use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;

use flowjit_runtime::{Op, Value};

use super::rewrite::Rewriter;
use crate::resume::Virtual;
use crate::trace::{Inst, Kind, Opnd, Ref, Snapshot, Trace};

/// The longest array the pass keeps virtual: each element is an operand of every snapshot
/// that holds it.
pub const MAX_LEN: usize = 16;

/// A candidate's length, if instruction `i` is an `array` of a constant length up to
/// [`MAX_LEN`].
fn candidate(inst: &Inst) -> Option<usize> {
    match (inst.kind, inst.args.first()) {
        (Kind::Op(Op::Array), Some(Opnd::Const(Value::Int(n))))
            if (0..=MAX_LEN as i64).contains(n) =>
        {
            Some(*n as usize)
        }
        _ => None,
    }
}

/// A constant index in `0..len`.
fn index(o: &Opnd, len: usize) -> Option<usize> {
    match o {
        Opnd::Const(Value::Int(k)) if (0..len as i64).contains(k) => Some(*k as usize),
        _ => None,
    }
}

/// What the analysis finds: which instructions stand for arrays that stay virtual, and which
/// loop-carried variables are carried as their elements.
struct Plan {
    /// Per instruction, the length of the virtual array it makes (an `array` or an exploded
    /// `param`), if it stays virtual.
    virtual_len: Vec<Option<usize>>,
    /// Per `param` (by its position after `loop_start`), whether it is carried as elements,
    /// and for each element, the constant it always holds, if it does.
    exploded: Vec<Option<Vec<Option<Value>>>>,
}

/// The groups of candidates that are virtual together or not at all (the arrays a carried
/// variable holds at `loop_start`, in the loop and at `loop`), as a union-find.
struct Groups(Vec<usize>);

impl Groups {
    fn root(&mut self, i: usize) -> usize {
        let mut r = i;
        while self.0[r] != r {
            r = self.0[r];
        }
        self.0[i] = r;
        r
    }

    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.root(a), self.root(b));
        self.0[ra] = rb;
    }
}

/// Finds the arrays that stay virtual in `trace`.
fn analyze(trace: &Trace) -> Plan {
    let mut e = Escapes::new(trace);
    for (i, inst) in trace.insts.iter().enumerate() {
        e.visit(i, inst);
    }
    let exploded = e.explode();
    e.spread();
    e.plan(exploded)
}

/// The analysis as it walks the trace: the candidates, which of them escape, and what they
/// hold.
struct Escapes<'t> {
    trace: &'t Trace,
    /// The trace's `loop_start`, if it is peeled.
    start: Option<usize>,
    /// Per instruction, the length of the candidate it makes (an `array`, or a `param` of a
    /// carried variable that may stay virtual), if it is one.
    len: Vec<Option<usize>>,
    groups: Groups,
    /// Per instruction, whether the candidate it makes escapes.
    escaped: Vec<bool>,
    /// Each array stored into a candidate, with the candidate.
    edges: Vec<(usize, usize)>,
    /// Per `param`: the candidates of the preamble and of the loop that its variable holds at
    /// `loop_start` and at `loop`, if it may stay virtual.
    carried: Vec<Option<(usize, usize)>>,
    /// The elements of each candidate as the trace goes, in operands of the old trace (a
    /// carried variable's as the preamble's array holds them at `loop_start`): for the type
    /// a `getitem` reads, and the arrays they hold.
    fields: HashMap<usize, Vec<Opnd>>,
    /// The elements of each carried variable's preamble array at `loop_start`.
    at_start: HashMap<usize, Vec<Opnd>>,
    /// The elements of each carried variable's loop array at `loop`.
    at_end: HashMap<usize, Vec<Opnd>>,
}

impl<'t> Escapes<'t> {
    fn new(trace: &'t Trace) -> Escapes<'t> {
        let n = trace.insts.len();
        let start = trace.loop_start();
        let params = start.map_or(0, |s| trace.insts[s].args.len());
        let mut e = Escapes {
            trace,
            start,
            len: trace.insts.iter().map(candidate).collect(),
            groups: Groups((0..n).collect()),
            escaped: vec![false; n],
            edges: Vec::new(),
            carried: vec![None; params],
            fields: HashMap::default(),
            at_start: HashMap::default(),
            at_end: HashMap::default(),
        };
        e.pair_carried();
        e
    }

    /// The candidate operand `o` is, if it is one.
    fn cand(&self, o: &Opnd) -> Option<usize> {
        o.as_ref()
            .map(Ref::index)
            .filter(|r| self.len[*r].is_some())
    }

    /// Lets the candidate `o` is, if it is one, escape.
    fn escape(&mut self, o: &Opnd) {
        if let Some(c) = self.cand(o) {
            self.escaped[c] = true;
        }
    }

    /// Whether a use by instruction `i` of candidate `r` is one in the loop of an array the
    /// preamble made: such a use lets it escape.
    fn crosses(&self, i: usize, r: usize) -> bool {
        self.start.is_some_and(|s| i > s && r < s)
    }

    /// A carried variable may stay virtual when it holds an `array` candidate of the
    /// preamble at `loop_start` and one of the loop at `loop`, of the same length: its
    /// `param` becomes a candidate too, in one group with both.
    fn pair_carried(&mut self) {
        let trace = self.trace;
        let (Some(s), Some(last)) = (self.start, trace.insts.last()) else {
            return;
        };
        for j in 0..self.carried.len() {
            let (a, b) = (&trace.insts[s].args[j], &last.args[j]);
            let (Some(a), Some(b)) = (self.cand(a), self.cand(b)) else {
                continue;
            };
            let variable = matches!(trace.insts[s + 1 + j].kind, Kind::Param(_));
            if variable && a < s && b > s && self.len[a] == self.len[b] {
                self.carried[j] = Some((a, b));
                let p = s + 1 + j;
                self.len[p] = self.len[a];
                self.groups.union(a, p);
                self.groups.union(b, p);
            }
        }
    }

    /// Learns from instruction `i`: the uses of candidates it makes, and what they hold.
    fn visit(&mut self, i: usize, inst: &Inst) {
        match inst.kind {
            Kind::Op(Op::Array) if self.len[i].is_some() => self.visit_array(i, inst),
            Kind::Param(_) if self.len[i].is_some() => {
                let s = self.start.expect("a param follows loop_start");
                let (a, _) = self.carried[i - s - 1].expect("an exploded param is carried");
                self.fields.insert(i, self.at_start[&a].clone());
                return;
            }
            Kind::GetItem => self.visit_getitem(i, inst),
            Kind::SetItem => self.visit_setitem(i, inst),
            Kind::Op(Op::Len) => {
                if let Some(c) = self.cand(&inst.args[0]).filter(|c| self.crosses(i, *c)) {
                    self.escaped[c] = true;
                }
            }
            // A comparison by identity: a virtual array is no other value (nothing else can
            // hold it), so the comparison is a constant (`run`).
            Kind::Op(Op::Eq | Op::Ne) => {
                for a in &inst.args {
                    if let Some(c) = self.cand(a).filter(|c| self.crosses(i, *c)) {
                        self.escaped[c] = true;
                    }
                }
            }
            Kind::LoopStart | Kind::Loop => self.visit_loop_end(inst),
            _ => {
                for a in &inst.args {
                    self.escape(a);
                }
            }
        }
        self.visit_snapshot(i, inst);
    }

    /// A candidate `array(n, init)`: its elements are `init`; an array it holds is stored
    /// into it.
    fn visit_array(&mut self, i: usize, inst: &Inst) {
        let l = self.len[i].expect("a candidate");
        self.fields.insert(i, vec![inst.args[1].clone(); l]);
        if let Some(d) = self.cand(&inst.args[1]) {
            self.edges.push((d, i));
        }
    }

    /// A `getitem` from a candidate stays virtual where it reads a known element of the type
    /// it reads, at a constant index in range; an array read back out of another escapes.
    fn visit_getitem(&mut self, i: usize, inst: &Inst) {
        let Some(c) = self.cand(&inst.args[0]) else {
            return;
        };
        let read = index(&inst.args[1], self.len[c].unwrap_or(0))
            .and_then(|k| self.fields.get(&c).map(|f| f[k].clone()));
        match read {
            Some(o) if o.ty(&self.trace.insts) == inst.ty && !self.crosses(i, c) => self.escape(&o),
            _ => self.escaped[c] = true,
        }
    }

    /// A `setitem` into a candidate at a constant index in range sets its element (an array
    /// stored into it escapes with it); any other lets the array escape, and what it
    /// stores. An array used as an index escapes.
    fn visit_setitem(&mut self, i: usize, inst: &Inst) {
        if let Some(c) = self.cand(&inst.args[0]) {
            match index(&inst.args[1], self.len[c].unwrap_or(0)) {
                Some(k) if !self.crosses(i, c) => {
                    if let Some(f) = self.fields.get_mut(&c) {
                        f[k] = inst.args[2].clone();
                    }
                    if let Some(d) = self.cand(&inst.args[2]) {
                        self.edges.push((d, c));
                    }
                }
                _ => {
                    self.escaped[c] = true;
                    self.escape(&inst.args[2]);
                }
            }
        } else {
            self.escape(&inst.args[2]);
        }
        self.escape(&inst.args[1]);
    }

    /// `loop_start` or `loop`: a carried array stays virtual only as the variable's own
    /// elements, once. Notes what each carried variable's array holds there.
    fn visit_loop_end(&mut self, inst: &Inst) {
        let mut seen: Vec<usize> = Vec::new();
        for (j, a) in inst.args.iter().enumerate() {
            let Some(c) = self.cand(a) else { continue };
            let own = self
                .carried
                .get(j)
                .copied()
                .flatten()
                .is_some_and(|(x, y)| x == c || y == c);
            if !own || seen.contains(&c) {
                self.escaped[c] = true;
            }
            seen.push(c);
        }
        for &(a, b) in self.carried.iter().flatten() {
            if inst.kind == Kind::LoopStart {
                self.at_start.insert(a, self.fields[&a].clone());
            } else {
                self.at_end.insert(b, self.fields[&b].clone());
            }
        }
    }

    /// The snapshot of instruction `i`, if any, holds its candidates as virtual arrays,
    /// except where a use crosses into the loop and at the end of a trace that is not
    /// peeled (a bridge), which writes its state into the registers of the code it goes
    /// on in, one value each.
    fn visit_snapshot(&mut self, i: usize, inst: &Inst) {
        let Some(snap) = self.trace.snap_of(inst) else {
            return;
        };
        let end = inst.kind == Kind::Loop && self.start.is_none();
        for o in snap.operands() {
            if let Some(c) = self.cand(o).filter(|c| end || self.crosses(i, *c)) {
                self.escaped[c] = true;
            }
        }
    }

    /// Per `param`, whether its variable is carried as elements, with the constant each
    /// element always holds: where each element keeps its type and holds no candidate at
    /// either end (an array in an array is carried as a real one). Where not, the
    /// preamble's array escapes.
    fn explode(&mut self) -> Vec<Option<Vec<Option<Value>>>> {
        let insts = &self.trace.insts;
        let mut exploded: Vec<Option<Vec<Option<Value>>>> = vec![None; self.carried.len()];
        for (j, pair) in self.carried.iter().enumerate() {
            let Some((a, b)) = *pair else { continue };
            let (first, next) = (&self.at_start[&a], &self.at_end[&b]);
            let mut consts = Vec::with_capacity(first.len());
            let mut ok = true;
            for (x, y) in first.iter().zip(next) {
                let same_ty = x.ty(insts) == y.ty(insts);
                if !same_ty || self.cand(x).is_some() || self.cand(y).is_some() {
                    ok = false;
                }
                consts.push(match (x, y) {
                    (Opnd::Const(u), Opnd::Const(v)) if u == v => Some(u.clone()),
                    _ => None,
                });
            }
            if ok {
                exploded[j] = Some(consts);
            } else {
                self.escaped[a] = true;
            }
        }
        exploded
    }

    /// Escape spreads to a whole group, and from an array to what it holds.
    fn spread(&mut self) {
        let n = self.escaped.len();
        let escaped = &mut self.escaped;
        loop {
            let mut changed = false;
            for i in 0..n {
                if escaped[i] {
                    let r = self.groups.root(i);
                    if !escaped[r] {
                        escaped[r] = true;
                        changed = true;
                    }
                }
            }
            for i in 0..n {
                let r = self.groups.root(i);
                if escaped[r] && !escaped[i] {
                    escaped[i] = true;
                    changed = true;
                }
            }
            for &(d, c) in &self.edges {
                if escaped[c] && !escaped[d] {
                    escaped[d] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// The plan, with `exploded` (see [`Escapes::explode`]) less the params that escape.
    fn plan(self, mut exploded: Vec<Option<Vec<Option<Value>>>>) -> Plan {
        if let Some(s) = self.start {
            for (j, e) in exploded.iter_mut().enumerate() {
                if self.escaped[s + 1 + j] {
                    *e = None;
                }
            }
        }
        let virtual_len = (0..self.len.len())
            .map(|i| self.len[i].filter(|_| !self.escaped[i]))
            .collect();
        Plan {
            virtual_len,
            exploded,
        }
    }
}

/// Removes the allocations of the arrays that do not escape `trace`; `None` when it has
/// none such.
pub fn run(trace: &Trace) -> Option<Trace> {
    if !trace.insts.iter().any(|i| candidate(i).is_some()) {
        return None;
    }
    let plan = analyze(trace);
    if plan.virtual_len.iter().all(Option::is_none) {
        return None;
    }
    let is_virtual = |o: &Opnd| {
        o.as_ref()
            .map(Ref::index)
            .filter(|r| plan.virtual_len[*r].is_some())
    };
    let mut rw = Rewriter::new(trace);
    // The elements of each virtual array, by its `virtual` in the new trace.
    let mut fields: BTreeMap<Ref, Vec<Opnd>> = BTreeMap::new();
    let start = trace.loop_start();
    let mut i = 0;
    while i < trace.insts.len() {
        let inst = &trace.insts[i];
        let args = rw.args(inst);
        match inst.kind {
            Kind::Op(Op::Array) if plan.virtual_len[i].is_some() => {
                let n = plan.virtual_len[i].expect("checked");
                let r = rw.push_as(i, Kind::Virtual, args.clone(), None);
                fields.insert(r, vec![args[1].clone(); n]);
            }
            Kind::GetItem if is_virtual(&inst.args[0]).is_some() => {
                let r = args[0].as_ref().expect("a virtual array is a ref");
                let k = index(&args[1], fields[&r].len()).expect("checked");
                rw.set(i, fields[&r][k].clone());
            }
            Kind::SetItem if is_virtual(&inst.args[0]).is_some() => {
                let r = args[0].as_ref().expect("a virtual array is a ref");
                let k = index(&args[1], fields[&r].len()).expect("checked");
                fields.get_mut(&r).expect("virtual")[k] = args[2].clone();
            }
            Kind::Op(op @ (Op::Eq | Op::Ne))
                if inst.args.iter().any(|a| is_virtual(a).is_some()) =>
            {
                let same = (args[0] == args[1]) == (op == Op::Eq);
                rw.set(i, Opnd::Const(Value::Int(same as i64)));
            }
            Kind::Op(Op::Len) if is_virtual(&inst.args[0]).is_some() => {
                let r = args[0].as_ref().expect("a virtual array is a ref");
                rw.set(i, Opnd::Const(Value::Int(fields[&r].len() as i64)));
            }
            Kind::LoopStart | Kind::Loop => {
                let next = carried_elements(&plan, &fields, &args);
                let snap = snapshot(&mut rw, inst, &fields);
                rw.push_as(i, inst.kind, next, snap);
                if inst.kind == Kind::LoopStart {
                    i = params(trace, &plan, &mut rw, &mut fields, &args);
                    continue;
                }
            }
            _ => {
                let snap = snapshot(&mut rw, inst, &fields);
                rw.push_as(i, inst.kind, args, snap);
            }
        }
        i += 1;
    }
    debug_assert!(start.is_none() || rw.old.loop_start() == start);
    Some(rw.finish())
}

/// The operands `args` of `loop_start` or `loop`, a carried virtual array replaced by its
/// elements that are not constant.
fn carried_elements(plan: &Plan, fields: &BTreeMap<Ref, Vec<Opnd>>, args: &[Opnd]) -> Vec<Opnd> {
    let mut next = Vec::with_capacity(args.len());
    for (j, a) in args.iter().enumerate() {
        match plan.exploded.get(j).and_then(Option::as_ref) {
            Some(consts) => {
                let r = a.as_ref().expect("a virtual array is a ref");
                next.extend(
                    fields[&r]
                        .iter()
                        .zip(consts)
                        .filter(|(_, c)| c.is_none())
                        .map(|(f, _)| f.clone()),
                );
            }
            None => next.push(a.clone()),
        }
    }
    next
}

/// Emits the `param`s that follow `loop_start` (whose operands in the new trace, before a
/// carried virtual array was replaced by its elements, are `first`): one per element of a
/// carried virtual array that is not a constant, then a `virtual` for each such array.
/// Returns the index of the first old instruction after the params.
fn params(
    trace: &Trace,
    plan: &Plan,
    rw: &mut Rewriter,
    fields: &mut BTreeMap<Ref, Vec<Opnd>>,
    first: &[Opnd],
) -> usize {
    let start = trace.loop_start().expect("a peeled trace");
    let mut carried: Vec<(usize, Vec<Opnd>)> = Vec::new();
    for (j, consts) in plan.exploded.iter().enumerate() {
        let p = start + 1 + j;
        let old = &trace.insts[p];
        let Some(consts) = consts else {
            let args = rw.args(old);
            rw.push_as(p, old.kind, args, None);
            continue;
        };
        let r = first[j].as_ref().expect("a virtual array is a ref");
        let mut elements = Vec::with_capacity(consts.len());
        for (f, c) in fields[&r].clone().iter().zip(consts) {
            elements.push(match c {
                Some(v) => Opnd::Const(v.clone()),
                None => Opnd::Ref(rw.push_new(Inst {
                    kind: old.kind,
                    args: Vec::new(),
                    snap: None,
                    origin: old.origin,
                    ty: f.ty(rw.insts()),
                })),
            });
        }
        carried.push((p, elements));
    }
    for (p, elements) in carried {
        let n = Opnd::Const(Value::Int(elements.len() as i64));
        let r = rw.push_as(p, Kind::Virtual, vec![n, Opnd::Const(Value::Int(0))], None);
        fields.insert(r, elements);
    }
    start + 1 + plan.exploded.len()
}

/// Old instruction `inst`'s snapshot in terms of the new trace, with the virtual arrays it
/// holds (and those they hold) and their elements now.
fn snapshot(
    rw: &mut Rewriter,
    inst: &Inst,
    fields: &BTreeMap<Ref, Vec<Opnd>>,
) -> Option<crate::trace::SnapId> {
    let mut snap: Snapshot = rw.mapped_snapshot(inst.snap?);
    let mut held: BTreeMap<Ref, Vec<Opnd>> = BTreeMap::new();
    let mut work: Vec<Ref> = snap.operands().filter_map(Opnd::as_ref).collect();
    while let Some(r) = work.pop() {
        if held.contains_key(&r) {
            continue;
        }
        if let Some(f) = fields.get(&r) {
            work.extend(f.iter().filter_map(Opnd::as_ref));
            held.insert(r, f.clone());
        }
    }
    snap.virtuals = held
        .into_iter()
        .map(|(at, fields)| Virtual { at, fields })
        .collect();
    Some(rw.add_snapshot(snap))
}
