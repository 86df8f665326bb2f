//! Loop peeling: the trace becomes a preamble (one iteration) and a loop (the next ones).
//!
//! Why peel rather than hoist (as LuaJIT's `lj_opt_loop.c` explains for the same choice):
//! the loop body is a copy of the iteration re-emitted *after* the preamble, so the other
//! passes, run again over the whole, do loop-invariant code motion for free. What the
//! preamble computed from values that do not change (a `guard_value` on `bytecode`, a
//! `readlist` of a constant list) the body finds already known or already computed, and CSE
//! and folding remove it from the loop. No separate invariance analysis is needed.
//!
//! The variables an iteration writes are *carried* to the next. A carried variable whose
//! value at the end of the preamble is a constant is assumed to stay that constant: it is
//! not carried at all, and the body sees the constant. The other carried variables become
//! `param`s: `loop_start` gives their first values, `loop` their next. After the passes have
//! run over the peeled trace, each assumption is checked (the body must end with the same
//! constant); a variable for which it fails becomes a `param` and the body is built again.
//!
//! ```text
//! v0 = input x  @b:0 #0 []                 v0 = input x ...  (preamble)
//! guard_value v0, 5  @b2:0 #1 []           guard_value v0, 5 ...
//! v3 = input i  @b2:2 #3 [...]             v3 = input i ...
//! v4 = sub v3, 11  @b2:2 #3 [...]          v4 = sub v3, 11 ...
//! v5 = ge v4, 0  @l:0 #5 [...]      =>     v5 = ge v4, 0 ...
//! guard_true v5  @l_done:0 #6 [...]        guard_true v5 ...
//! loop  @b:0 #6 [i=v4, c=v5, ...]          loop_start v4  @b:0 #6 [i=v4, c=1, ...]
//!                                          v8 = param i
//!                                          v9 = sub v8, 11 ...
//!                                          v10 = ge v9, 0 ...
//!                                          guard_true v10 ...
//!                                          loop v9  @b:0 #6 [i=v9, c=1, ...]
//! ```

use std::collections::BTreeSet;

use super::Rejected;
use crate::lang::Slot;
use crate::trace::{Inst, Kind, Opnd, Ref, Res, SnapId, Snapshot, Trace, Ty};

/// Which `param`s hold one value in every iteration, so that the body reads that value
/// instead ([`drop_fixed_params`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fixed {
    /// Those that `loop` gives back unchanged: true whatever the guards of the body.
    Unchanged,
    /// Those too that receive the same constant from `loop_start` and from `loop`, and the
    /// variables whose value is a constant at the end of the preamble (assumed to stay it,
    /// and checked): the body is specialized for what the first iteration leaves.
    UnchangedOrConstant,
}

/// Peels `trace`, running `local` (the other passes) over the peeled trace until the
/// constants assumed carried hold. With [`Fixed::Unchanged`] no constant is assumed: every
/// variable the loop carries is a `param`.
pub fn run(
    trace: &Trace,
    fixed: Fixed,
    local: &dyn Fn(&Trace) -> Result<Trace, Rejected>,
) -> Result<Trace, Rejected> {
    if trace.loop_start().is_some() {
        return Ok(trace.clone());
    }
    let last = trace.insts.last().expect("a trace ends in loop");
    let carried = &trace.snap_of(last).expect("a loop has a snapshot").entries;
    let mut params: BTreeSet<Slot> = carried
        .iter()
        .filter(|(_, o)| o.as_const().is_none() || fixed == Fixed::Unchanged)
        .map(|(s, _)| *s)
        .collect();
    loop {
        let built = build(trace, &params);
        if !keeps_types(&built) {
            // A variable whose type changes from one iteration to the next cannot be one
            // typed loop-carried value.
            return Err(Rejected::TypeChange);
        }
        let peeled = local(&built)?;
        let start = peeled.loop_start().expect("build adds loop_start");
        let first = &peeled.snaps[peeled.insts[start].snap.expect("snapshot").index()];
        let last = peeled
            .snap_of(peeled.insts.last().expect("loop"))
            .expect("snapshot");
        let broken: Vec<Slot> = first
            .entries
            .iter()
            .filter(|(slot, o)| {
                !params.contains(slot)
                    && last.entries.iter().find(|(s, _)| s == slot).map(|(_, e)| e) != Some(o)
            })
            .map(|(s, _)| *s)
            .collect();
        if broken.is_empty() {
            let merged = merge_params(&peeled);
            let merged = if merged.insts.len() == peeled.insts.len() {
                peeled
            } else {
                local(&merged)?
            };
            return match drop_fixed_params(&merged, fixed) {
                Some(fewer) => local(&fewer),
                None => Ok(merged),
            };
        }
        params.extend(broken);
    }
}

/// Whether each value `loop` carries is of its `param`'s type (that of its first value).
fn keeps_types(trace: &Trace) -> bool {
    let start = trace.loop_start().expect("a peeled trace");
    let next = &trace.insts.last().expect("a loop").args;
    next.iter()
        .enumerate()
        .all(|(k, o)| o.ty(&trace.insts) == trace.insts[start + 1 + k].ty)
}

/// Merges `param`s that receive the same operand from `loop_start` and from `loop`: they
/// always hold the same value (two variables copied from each other, as a register machine
/// does), and one loop-carried value is cheaper than two.
pub fn merge_params(trace: &Trace) -> Trace {
    let start = trace.loop_start().expect("a peeled trace");
    let first = &trace.insts[start].args;
    let next = &trace.insts.last().expect("a loop").args;
    let n = first.len();
    // same[j] = i: param j is param i.
    let same: Vec<usize> = (0..n)
        .map(|j| {
            (0..j)
                .find(|&i| first[i] == first[j] && next[i] == next[j])
                .unwrap_or(j)
        })
        .collect();
    let mut rw = super::rewrite::Rewriter::new(trace);
    let mut params: Vec<Ref> = Vec::new();
    for (idx, inst) in trace.insts.iter().enumerate() {
        match inst.kind {
            kind if kind.is_param() => {
                let j = idx - start - 1;
                if same[j] == j {
                    params.push(rw.keep(idx));
                } else {
                    let kept = same[..same[j]]
                        .iter()
                        .enumerate()
                        .filter(|(k, s)| **s == *k)
                        .count();
                    rw.set(idx, Opnd::Ref(params[kept]));
                }
            }
            Kind::LoopStart | Kind::Loop => {
                let args = rw
                    .args(inst)
                    .into_iter()
                    .enumerate()
                    .filter(|(j, _)| same[*j] == *j)
                    .map(|(_, a)| a)
                    .collect();
                rw.keep_with(idx, args);
            }
            _ => {
                rw.keep(idx);
            }
        }
    }
    rw.finish()
}

/// The trace without its *fixed* `param`s, if it has any: those that receive the same
/// constant from `loop_start` and from `loop`, and those that `loop` gives back unchanged
/// (a stack pointer that an iteration moves up and down again). Such a param holds its first
/// value in every iteration: the body reads that value instead. Peeling carries no variable
/// whose value is a constant, but `virtuals` may carry an element of a virtual array that
/// only the optimizer's later walk finds constant at both ends; and only the walk over the
/// peeled trace finds that a variable comes back to the value it started from.
pub fn drop_fixed_params(trace: &Trace, fixed: Fixed) -> Option<Trace> {
    let start = trace.loop_start()?;
    let first = &trace.insts[start].args;
    let next = &trace.insts.last()?.args;
    let constant: Vec<bool> = first
        .iter()
        .zip(next)
        .enumerate()
        .map(|(k, (a, b))| {
            let constant = fixed == Fixed::UnchangedOrConstant && a.as_const().is_some() && a == b;
            constant || *b == Opnd::Ref(Ref((start + 1 + k) as u32))
        })
        .collect();
    if !constant.contains(&true) {
        return None;
    }
    let mut rw = super::rewrite::Rewriter::new(trace);
    for (idx, inst) in trace.insts.iter().enumerate() {
        match inst.kind {
            kind if kind.is_param() && constant[idx - start - 1] => {
                let value = rw.opnd(&first[idx - start - 1]);
                rw.set(idx, value);
            }
            Kind::LoopStart | Kind::Loop => {
                let args = rw
                    .args(inst)
                    .into_iter()
                    .zip(&constant)
                    .filter(|(_, c)| !**c)
                    .map(|(a, _)| a)
                    .collect();
                rw.keep_with(idx, args);
            }
            _ => {
                rw.keep(idx);
            }
        }
    }
    Some(rw.finish())
}

/// The end of the preamble, pushed onto `insts` (with its snapshot onto `snaps`):
/// `loop_start` of the variables in `params` as the preamble's end, `end`, has them, and a
/// `param` for each. Returns the state at the start of each iteration of the loop: each
/// variable of `end`, a carried one as its param.
fn loop_start(
    insts: &mut Vec<Inst>,
    snaps: &mut Vec<Snapshot>,
    end: &Snapshot,
    params: &BTreeSet<Slot>,
) -> Vec<(Slot, Opnd)> {
    let first_values: Vec<Opnd> = params
        .iter()
        .map(|p| {
            end.entries
                .iter()
                .find(|(s, _)| s == p)
                .expect("a param is carried")
                .1
                .clone()
        })
        .collect();
    snaps.push(end.clone());
    insts.push(Inst {
        kind: Kind::LoopStart,
        args: first_values,
        snap: Some(SnapId(snaps.len() as u32 - 1)),
        origin: None,
        ty: Ty::None,
    });
    // The state at the start of each iteration of the loop.
    let mut state: Vec<(Slot, Opnd)> = Vec::new();
    for (slot, o) in &end.entries {
        if params.contains(slot) {
            let ty = o.ty(insts);
            insts.push(Inst {
                kind: Kind::Param(*slot),
                args: vec![],
                snap: None,
                origin: None,
                ty,
            });
            state.push((*slot, Opnd::Ref(Ref(insts.len() as u32 - 1))));
        } else {
            state.push((*slot, o.clone()));
        }
    }
    state
}

/// Operand `o` of the preamble as the body has it (`map`, per instruction of the preamble).
fn remap(map: &[Opnd], o: &Opnd) -> Opnd {
    match o {
        Opnd::Ref(r) => map[r.index()].clone(),
        c => c.clone(),
    }
}

/// Snapshot `id` of the preamble as the body's, pushed onto `snaps`: its values mapped by
/// `map`, with every variable of `state` (the state at the start of the iteration) that it
/// does not hold.
fn body_snapshot(
    trace: &Trace,
    state: &[(Slot, Opnd)],
    snaps: &mut Vec<Snapshot>,
    map: &[Opnd],
    id: SnapId,
) -> SnapId {
    let old = &trace.snaps[id.index()];
    let mut entries = state.to_vec();
    for (slot, o) in &old.entries {
        let o = remap(map, o);
        match entries.iter_mut().find(|(s, _)| s == slot) {
            Some(e) => e.1 = o,
            None => entries.push((*slot, o)),
        }
    }
    entries.sort_by_key(|(s, _)| *s);
    let mapped = old.map(|o| remap(map, o));
    snaps.push(Snapshot {
        pos: old.pos,
        cost: old.cost,
        entries,
        frames: mapped.frames,
        virtuals: mapped.virtuals,
        stores: mapped.stores,
    });
    SnapId(snaps.len() as u32 - 1)
}

/// The peeled trace: the iteration, `loop_start`, the `param`s, the iteration again with the
/// carried variables read from the params (or the assumed constants), and `loop`.
fn build(trace: &Trace, params: &BTreeSet<Slot>) -> Trace {
    let n = trace.insts.len() - 1;
    let last = &trace.insts[n];
    let end = trace.snap_of(last).expect("a loop has a snapshot").clone();
    let mut insts: Vec<Inst> = trace.insts[..n].to_vec();
    let mut snaps: Vec<Snapshot> = trace.snaps.clone();

    let state = loop_start(&mut insts, &mut snaps, &end, params);

    // The body: the iteration again, reading carried variables from `state`.
    let mut map: Vec<Opnd> = Vec::with_capacity(n);
    for (i, inst) in trace.insts[..n].iter().enumerate() {
        if let Kind::Input(slot) = inst.kind {
            let carried = state
                .iter()
                .find(|(s, _)| *s == slot)
                .map(|(_, o)| o.clone());
            // A variable the iteration does not write keeps its value: the preamble's input.
            map.push(carried.unwrap_or(Opnd::Ref(Ref(i as u32))));
            continue;
        }
        let args: Vec<Opnd> = inst.args.iter().map(|a| remap(&map, a)).collect();
        let snap = inst
            .snap
            .map(|s| body_snapshot(trace, &state, &mut snaps, &map, s));
        // A copy has the type of what it copies, which a param may have changed.
        let ty = match inst.kind.info().result {
            Res::Operand => args[0].ty(&insts),
            _ => inst.ty,
        };
        insts.push(Inst {
            kind: inst.kind,
            args,
            snap,
            origin: inst.origin,
            ty,
        });
        map.push(Opnd::Ref(Ref(insts.len() as u32 - 1)));
    }
    let next: Vec<Opnd> = params
        .iter()
        .map(|p| {
            let o = &end
                .entries
                .iter()
                .find(|(s, _)| s == p)
                .expect("a param is carried")
                .1;
            remap(&map, o)
        })
        .collect();
    let snap = body_snapshot(
        trace,
        &state,
        &mut snaps,
        &map,
        last.snap.expect("a loop has a snapshot"),
    );
    insts.push(Inst {
        kind: Kind::Loop,
        args: next,
        snap: Some(snap),
        origin: None,
        ty: Ty::None,
    });
    Trace {
        anchor: trace.anchor,
        insts,
        snaps,
        calls: trace.calls,
        known: trace.known.clone(),
        merges: Vec::new(),
        carries_elements: trace.carries_elements,
        heap_from_preamble: trace.heap_from_preamble,
        function: trace.function,
    }
}
