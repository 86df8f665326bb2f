//! Store sinking: a store that cannot fail is not made where the trace made it, but where
//! something needs it made; every exit before that point makes it instead (PyPy's lazy
//! `setarrayitem` in `OptHeap`, whose pending stores go into the resume data of guards).
//!
//! The pass walks the trace with the stores not made yet (*pending*), at most one per
//! element: a later store into the same element replaces the pending one, which is then
//! never made. Every snapshot lists the pending stores ([`crate::resume::Store`]), and an
//! exit makes them before the interpreter goes on (`resume::restore`; a bridge in machine
//! code makes them where it starts). A pending store is made, just before it:
//! - a load or a store that can fail of an element it may write (same array and index, or
//!   arrays or indices not known apart, as in `heap`);
//! - a store that may write its element by other operands (so that the later one wins);
//! - anything that may read array contents: an operation on an array other than `len`
//!   and `==`, output or an elidable call of a list or an array, any `call`;
//! - the end of the trace.
//!
//! A store that can fail (an index not checked before) is made where it is: its exit must
//! come before it, with the state before it.
//!
//! **Across the back edge.** The stores pending at `loop_start` whose elements are still
//! written, not made, at `loop` are not made at all: the loop carries each such element's
//! value in a `param_item`, which its snapshots store. A loop that keeps an operand stack or
//! local variables in an array (a stack machine written in the flowgraph language) then
//! neither loads nor stores them, but only writes them back when it exits (PyPy's
//! virtualizables, for any array the trace told apart). When an element the loop started
//! with is not pending at its end, the pass runs again without carrying it.
//!
//! ```text
//! setitem v0, 0, v4  @l:1 #1 []                   (pending: v0[0]=v4)
//! v5:int = add v4, 1  @l:2 #2 [x=v4]        =>    v5:int = add v4, 1  @l:2 #2 [x=v4] | v0[0]=v4
//! setitem v0, 0, v5  @l:3 #3 [x=v5]               (pending: v0[0]=v5; the first is never made)
//! loop  @l:0 #4 [x=v5]                            setitem v0, 0, v5
//!                                                 loop  @l:0 #4 [x=v5]
//! ```

use flowjit_runtime::Op;

use super::heap::{distinct_arrays, distinct_indices};
use super::rewrite::Rewriter;
use crate::resume::Store;
use crate::trace::{Inst, Kind, Opnd, Ref, Trace, Ty};

/// A store not made yet, with the instruction it came from (for dumps).
struct Pending {
    store: Store,
    origin: Option<crate::state::Position>,
}

/// Whether `trace` stores into an array: store sinking leaves any other as it is.
pub fn applies(trace: &Trace) -> bool {
    trace.insts.iter().any(|i| i.kind == Kind::SetItem)
}

/// Runs store sinking over `trace`.
pub fn run(trace: &Trace) -> Trace {
    let mut excluded: Vec<(Opnd, Opnd)> = Vec::new();
    loop {
        match attempt(trace, &excluded) {
            Ok(t) => return t,
            // Elements the loop could not carry: not again.
            Err(lost) => excluded.extend(lost),
        }
    }
}

/// Makes the pending stores that `must` says must be made now, in their order.
fn flush(
    rw: &mut Rewriter,
    pending: &mut Vec<Pending>,
    must: impl Fn(&Store, &[Inst]) -> bool,
) -> Vec<Store> {
    let now: Vec<bool> = pending.iter().map(|p| must(&p.store, rw.insts())).collect();
    let mut made: Vec<Pending> = Vec::new();
    for (p, m) in std::mem::take(pending).into_iter().zip(now) {
        if m {
            made.push(p);
        } else {
            pending.push(p);
        }
    }
    made.into_iter()
        .map(|p| {
            let s = p.store;
            rw.push_new(Inst {
                kind: Kind::SetItem,
                args: vec![s.array.clone(), s.index.clone(), s.value.clone()],
                snap: None,
                origin: p.origin,
                ty: Ty::None,
            });
            s
        })
        .collect()
}

/// Whether an instruction may read what arrays hold, other than through `getitem`.
fn reads_arrays(inst: &Inst, args: &[Opnd], insts: &[Inst]) -> bool {
    let deep = |o: &Opnd| matches!(o.ty(insts), Ty::Array | Ty::List);
    match inst.kind {
        Kind::Op(Op::Len) => false,
        // Arrays compare by identity; lists by their elements, which may be arrays.
        Kind::Op(Op::Eq | Op::Ne) => args.iter().any(|a| a.ty(insts) == Ty::List),
        Kind::Op(_) | Kind::Print | Kind::CallPure(_) => args.iter().any(deep),
        _ => false,
    }
}

/// One walk over `trace`, carrying across the back edge the pending elements not in
/// `excluded`; the elements it could not carry if there are any.
fn attempt(trace: &Trace, excluded: &[(Opnd, Opnd)]) -> Result<Trace, Vec<(Opnd, Opnd)>> {
    let mut rw = Rewriter::new(trace);
    let mut pending: Vec<Pending> = Vec::new();
    // Pairs of arrays a guard told apart.
    let mut apart: Vec<(Opnd, Opnd)> = Vec::new();
    let start = trace.loop_start();
    let last_param = start.map(|s| s + trace.insts[s].args.len());
    // The elements the loop carries, with their values at `loop_start`.
    let mut carried: Vec<Store> = Vec::new();
    // The stores made so far whose elements still hold what they stored (no store since
    // may have changed them), no two into one element.
    let mut made: Vec<Store> = Vec::new();

    for (i, inst) in trace.insts.iter().enumerate() {
        let args = rw.args(inst);
        let told = &apart;
        let may_alias = move |s: &Store, a: &Opnd, k: &Opnd, insts: &[Inst]| {
            !distinct_arrays(told, &s.array, a) && !distinct_indices(insts, &s.index, k)
        };
        // Remembers stores just made, forgetting those they may overwrite.
        let remember = |made: &mut Vec<Store>, now: Vec<Store>, insts: &[Inst]| {
            for s in now {
                made.retain(|m| !may_alias(m, &s.array, &s.index, insts));
                made.push(s);
            }
        };
        match inst.kind {
            Kind::SetItem if inst.snap.is_none() => {
                let (a, k) = (&args[0], &args[1]);
                pending.retain(|p| !(p.store.array == *a && p.store.index == *k));
                let now = flush(&mut rw, &mut pending, |s, insts| may_alias(s, a, k, insts));
                remember(&mut made, now, rw.insts());
                made.retain(|m| !may_alias(m, a, k, rw.insts()));
                pending.push(Pending {
                    store: Store {
                        array: a.clone(),
                        index: k.clone(),
                        value: args[2].clone(),
                    },
                    origin: inst.origin,
                });
                continue;
            }
            Kind::SetItem | Kind::GetItem => {
                let (a, k) = (&args[0], &args[1]);
                let now = flush(&mut rw, &mut pending, |s, insts| may_alias(s, a, k, insts));
                remember(&mut made, now, rw.insts());
                if inst.kind == Kind::SetItem {
                    let store = Store {
                        array: a.clone(),
                        index: k.clone(),
                        value: args[2].clone(),
                    };
                    remember(&mut made, vec![store], rw.insts());
                }
            }
            Kind::LoopStart => {
                carried = at_loop_start(&mut rw, i, inst, args, excluded, &mut made, &mut pending);
                if Some(i) == last_param {
                    carry_params(&mut rw, &carried, &mut pending);
                }
                continue;
            }
            Kind::Loop => {
                at_loop(&mut rw, i, inst, args, &carried, &mut pending)?;
                continue;
            }
            // The function may read and write any array: every pending store is made
            // before it, and none made is known to hold its value after it.
            Kind::Call(_) => {
                flush(&mut rw, &mut pending, |_, _| true);
                made.clear();
            }
            _ if reads_arrays(inst, &args, rw.insts()) => {
                let now = flush(&mut rw, &mut pending, |_, _| true);
                remember(&mut made, now, rw.insts());
            }
            _ => {}
        }
        let snap = snapshot(&mut rw, inst, &pending);
        let r = rw.push_as(i, inst.kind, args, snap);
        learn_apart(&rw, r, &mut apart);
        if Some(i) == last_param {
            carry_params(&mut rw, &carried, &mut pending);
        }
    }
    let mut t = rw.finish();
    t.carries_elements |= !carried.is_empty();
    Ok(t)
}

/// At `loop_start` (instruction `i`, `args` its operands in the new trace): the pending
/// stores of elements not `excluded` stay pending, carried by the loop, and so do the
/// elements stores of the preamble `made` that still hold what they stored; the others
/// are made. Emits `loop_start` carrying their values; returns the elements carried, with
/// their values at `loop_start`. Nothing is pending after it.
fn at_loop_start(
    rw: &mut Rewriter,
    i: usize,
    inst: &Inst,
    mut args: Vec<Opnd>,
    excluded: &[(Opnd, Opnd)],
    made: &mut Vec<Store>,
    pending: &mut Vec<Pending>,
) -> Vec<Store> {
    let keep = |s: &Store| !excluded.iter().any(|(a, k)| *a == s.array && *k == s.index);
    flush(rw, pending, |s, _| !keep(s));
    // An element a store of the preamble made holds its value: the loop may
    // carry it too (an exit stores the value it already holds).
    for m in made.drain(..) {
        let listed = pending
            .iter()
            .any(|p| p.store.array == m.array && p.store.index == m.index);
        if keep(&m) && !listed {
            pending.push(Pending {
                store: m,
                origin: None,
            });
        }
    }
    let carried: Vec<Store> = pending.iter().map(|p| p.store.clone()).collect();
    args.extend(carried.iter().map(|s| s.value.clone()));
    let snap = snapshot(rw, inst, pending);
    rw.push_as(i, inst.kind, args, snap);
    pending.clear();
    carried
}

/// At `loop` (instruction `i`, `args` its operands in the new trace): the pending stores of
/// the elements `carried` are not made but passed to the next iteration, and the others are
/// made. Emits `loop`; the elements carried but not pending (or pending with a value of
/// another type) when there are any.
fn at_loop(
    rw: &mut Rewriter,
    i: usize,
    inst: &Inst,
    args: Vec<Opnd>,
    carried: &[Store],
    pending: &mut Vec<Pending>,
) -> Result<(), Vec<(Opnd, Opnd)>> {
    let in_loop = |s: &Store| {
        carried
            .iter()
            .any(|c| c.array == s.array && c.index == s.index)
    };
    flush(rw, pending, |s, _| !in_loop(s));
    let mut next = args;
    let mut lost: Vec<(Opnd, Opnd)> = Vec::new();
    for c in carried {
        let insts = rw.insts();
        match pending
            .iter()
            .find(|p| p.store.array == c.array && p.store.index == c.index)
        {
            // Of the type it had at `loop_start`, as a param's value must be.
            Some(p) if p.store.value.ty(insts) == c.value.ty(insts) => {
                next.push(p.store.value.clone())
            }
            _ => lost.push((c.array.clone(), c.index.clone())),
        }
    }
    if !lost.is_empty() {
        return Err(lost);
    }
    // In the order `carried` has them, as `next`.
    pending.sort_by_key(|p| {
        carried
            .iter()
            .position(|c| c.array == p.store.array && c.index == p.store.index)
    });
    let snap = snapshot(rw, inst, pending);
    rw.push_as(i, inst.kind, next, snap);
    Ok(())
}

/// After the last `param`: a `param_item` for each element the loop carries, which is then
/// pending with it as its value.
fn carry_params(rw: &mut Rewriter, carried: &[Store], pending: &mut Vec<Pending>) {
    for c in carried {
        let ty = c.value.ty(rw.insts());
        let r = rw.push_new(Inst {
            kind: Kind::ParamItem,
            args: vec![c.array.clone(), c.index.clone()],
            snap: None,
            origin: None,
            ty,
        });
        pending.push(Pending {
            store: Store {
                value: Opnd::Ref(r),
                ..c.clone()
            },
            origin: None,
        });
    }
}

/// `guard_false(eq(a, b))` of two arrays tells them apart.
fn learn_apart(rw: &Rewriter, r: Ref, apart: &mut Vec<(Opnd, Opnd)>) {
    let inst = rw.def(r);
    if inst.kind != Kind::GuardFalse {
        return;
    }
    if let Opnd::Ref(t) = &inst.args[0] {
        let test = rw.def(*t);
        let arrays = test.args.iter().all(|o| o.ty(rw.insts()) == Ty::Array);
        if test.kind == Kind::Op(Op::Eq) && arrays {
            apart.push((test.args[0].clone(), test.args[1].clone()));
        }
    }
}

/// Old instruction `inst`'s snapshot in terms of the new trace, with the stores pending.
fn snapshot(rw: &mut Rewriter, inst: &Inst, pending: &[Pending]) -> Option<crate::trace::SnapId> {
    let mut snap = rw.mapped_snapshot(inst.snap?);
    snap.stores = pending.iter().map(|p| p.store.clone()).collect();
    Some(rw.add_snapshot(snap))
}
