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
//! preamble (`opt::state::LoopState`).
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

fn analyze(trace: &Trace) -> Plan {
    let n = trace.insts.len();
    let mut len: Vec<Option<usize>> = trace.insts.iter().map(candidate).collect();
    let start = trace.loop_start();
    let params = start.map_or(0, |s| trace.insts[s].args.len());
    let mut groups = Groups((0..n).collect());
    let mut escaped = vec![false; n];
    // Each array stored into a candidate, with the candidate.
    let mut edges: Vec<(usize, usize)> = Vec::new();
    let cand =
        |len: &[Option<usize>], o: &Opnd| o.as_ref().map(Ref::index).filter(|r| len[*r].is_some());

    // A carried variable may stay virtual when it holds an `array` candidate of the preamble
    // at `loop_start` and one of the loop at `loop`, of the same length.
    let mut carried: Vec<Option<(usize, usize)>> = vec![None; params];
    if let (Some(s), Some(last)) = (start, trace.insts.last()) {
        for (j, slot) in carried.iter_mut().enumerate() {
            let (a, b) = (&trace.insts[s].args[j], &last.args[j]);
            if let (Some(a), Some(b)) = (cand(&len, a), cand(&len, b)) {
                let variable = matches!(trace.insts[s + 1 + j].kind, Kind::Param(_));
                if variable && a < s && b > s && len[a] == len[b] {
                    *slot = Some((a, b));
                    let p = s + 1 + j;
                    len[p] = len[a];
                    groups.union(a, p);
                    groups.union(b, p);
                }
            }
        }
    }

    // The elements of each candidate as the trace goes, in operands of the old trace (a
    // carried variable's as the preamble's array holds them at `loop_start`): for the type
    // a `getitem` reads, and the arrays they hold.
    let mut fields: HashMap<usize, Vec<Opnd>> = HashMap::default();
    let mut at_start: HashMap<usize, Vec<Opnd>> = HashMap::default();
    let mut at_end: HashMap<usize, Vec<Opnd>> = HashMap::default();
    for (i, inst) in trace.insts.iter().enumerate() {
        let in_loop = start.is_some_and(|s| i > s);
        // Uses in the loop of an array the preamble made escape it.
        let crosses = |r: usize| in_loop && start.is_some_and(|s| r < s);
        match inst.kind {
            Kind::Op(Op::Array) if len[i].is_some() => {
                let l = len[i].expect("a candidate");
                fields.insert(i, vec![inst.args[1].clone(); l]);
                if let Some(d) = cand(&len, &inst.args[1]) {
                    edges.push((d, i));
                }
            }
            Kind::Param(_) if len[i].is_some() => {
                let s = start.expect("a param follows loop_start");
                let (a, _) = carried[i - s - 1].expect("an exploded param is carried");
                fields.insert(i, at_start[&a].clone());
                continue;
            }
            Kind::GetItem => {
                if let Some(c) = cand(&len, &inst.args[0]) {
                    let read = index(&inst.args[1], len[c].unwrap_or(0))
                        .and_then(|k| fields.get(&c).map(|f| f[k].clone()));
                    match read {
                        Some(o) if o.ty(&trace.insts) == inst.ty && !crosses(c) => {
                            // An array read back out of another escapes.
                            if let Some(d) = cand(&len, &o) {
                                escaped[d] = true;
                            }
                        }
                        _ => escaped[c] = true,
                    }
                }
            }
            Kind::SetItem => {
                if let Some(c) = cand(&len, &inst.args[0]) {
                    match index(&inst.args[1], len[c].unwrap_or(0)) {
                        Some(k) if !crosses(c) => {
                            if let Some(f) = fields.get_mut(&c) {
                                f[k] = inst.args[2].clone();
                            }
                            if let Some(d) = cand(&len, &inst.args[2]) {
                                edges.push((d, c));
                            }
                        }
                        _ => {
                            escaped[c] = true;
                            if let Some(d) = cand(&len, &inst.args[2]) {
                                escaped[d] = true;
                            }
                        }
                    }
                } else if let Some(d) = cand(&len, &inst.args[2]) {
                    escaped[d] = true;
                }
                if let Some(k) = cand(&len, &inst.args[1]) {
                    escaped[k] = true;
                }
            }
            Kind::Op(Op::Len) => {
                if let Some(c) = cand(&len, &inst.args[0]).filter(|c| crosses(*c)) {
                    escaped[c] = true;
                }
            }
            // A comparison by identity: a virtual array is no other value (nothing else can
            // hold it), so the comparison is a constant (below).
            Kind::Op(Op::Eq | Op::Ne) => {
                for a in &inst.args {
                    if let Some(c) = cand(&len, a).filter(|c| crosses(*c)) {
                        escaped[c] = true;
                    }
                }
            }
            Kind::LoopStart | Kind::Loop => {
                // A carried array stays virtual only as the variable's own elements, once.
                let mut seen: Vec<usize> = Vec::new();
                for (j, a) in inst.args.iter().enumerate() {
                    let Some(c) = cand(&len, a) else { continue };
                    let own = carried
                        .get(j)
                        .copied()
                        .flatten()
                        .is_some_and(|(x, y)| x == c || y == c);
                    if !own || seen.contains(&c) {
                        escaped[c] = true;
                    }
                    seen.push(c);
                }
                if inst.kind == Kind::LoopStart {
                    for (a, _) in carried.iter().flatten() {
                        at_start.insert(*a, fields[a].clone());
                    }
                } else {
                    for (_, b) in carried.iter().flatten() {
                        at_end.insert(*b, fields[b].clone());
                    }
                }
            }
            _ => {
                for a in &inst.args {
                    if let Some(c) = cand(&len, a) {
                        escaped[c] = true;
                    }
                }
            }
        }
        if let Some(snap) = trace.snap_of(inst) {
            // The end of a trace that is not peeled (a bridge) writes its state into the
            // registers of the code it goes on in, one value each: it holds no virtual array.
            let end = inst.kind == Kind::Loop && start.is_none();
            for o in snap.operands() {
                if let Some(c) = cand(&len, o).filter(|c| end || crosses(*c)) {
                    escaped[c] = true;
                }
            }
        }
    }

    // A carried variable stays virtual when each element keeps its type and holds no
    // candidate at either end (an array in an array is carried as a real one).
    let mut exploded: Vec<Option<Vec<Option<Value>>>> = vec![None; params];
    for (j, pair) in carried.iter().enumerate() {
        let Some((a, b)) = *pair else { continue };
        let (first, next) = (&at_start[&a], &at_end[&b]);
        let mut consts = Vec::with_capacity(first.len());
        let mut ok = true;
        for (x, y) in first.iter().zip(next) {
            let same_ty = x.ty(&trace.insts) == y.ty(&trace.insts);
            if !same_ty || cand(&len, x).is_some() || cand(&len, y).is_some() {
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
            escaped[a] = true;
        }
    }

    // Escape spreads to a whole group, and from an array to what it holds.
    loop {
        let mut changed = false;
        for i in 0..n {
            if escaped[i] {
                let r = groups.root(i);
                if !escaped[r] {
                    escaped[r] = true;
                    changed = true;
                }
            }
        }
        for i in 0..n {
            let r = groups.root(i);
            if escaped[r] && !escaped[i] {
                escaped[i] = true;
                changed = true;
            }
        }
        for &(d, c) in &edges {
            if escaped[c] && !escaped[d] {
                escaped[d] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    if let Some(s) = start {
        for (j, e) in exploded.iter_mut().enumerate() {
            if escaped[s + 1 + j] {
                *e = None;
            }
        }
    }
    let virtual_len = (0..n).map(|i| len[i].filter(|_| !escaped[i])).collect();
    Plan {
        virtual_len,
        exploded,
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
                // A carried virtual array passes its elements that are not constant.
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
