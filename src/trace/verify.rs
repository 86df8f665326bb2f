//! The trace verifier: the invariants every pass must keep.
//!
//! - the last instruction, and only it, is `loop`;
//! - at most one `loop_start`; the `param`s follow it directly, and it and `loop` have one
//!   operand per `param`;
//! - every instruction has as many operands as its kind takes; a `call_pure` ends with the
//!   result it gave when recorded, a constant of its type, and the operations it took, a
//!   `call` with the operations it took;
//! - every ref names an earlier instruction that defines a value;
//! - guards, `input`, `loop` and `loop_start` have a snapshot (an operation has one unless
//!   the optimizer proved it cannot fail), and every ref in a snapshot names an instruction
//!   before the one that uses it;
//! - a snapshot's entries (of each frame) are sorted by slot, each slot once; `loop` and
//!   `loop_start` are not inside an inlined call;
//! - every instruction's type is what its kind gives ([`Res`]): an integer operation's is
//!   `int`, `same`'s its operand's, a `param`'s its first value's (which `loop` keeps);
//!   `input` and `readlist` have a value type.

use super::ir::{Kind, Opnd, Res, Trace, Ty};

/// Checks `trace`'s invariants; the error says which instruction breaks which, named as the
/// SSA form names it (`v3`, or `g3` for a guard).
pub fn verify(trace: &Trace) -> Result<(), String> {
    check(trace).map_err(|e| named(trace, e))
}

/// `e` (which starts `vN: ` for the instruction at fault) with a guard named `gN`.
fn named(trace: &Trace, e: String) -> String {
    let Some(rest) = e.strip_prefix('v') else {
        return e;
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let guard = rest[digits..].starts_with(':')
        && rest[..digits]
            .parse::<usize>()
            .ok()
            .and_then(|i| trace.insts.get(i))
            .is_some_and(|inst| super::print::named_guard(inst.kind));
    if guard {
        format!("g{rest}")
    } else {
        e
    }
}

fn check(trace: &Trace) -> Result<(), String> {
    let n = trace.insts.len();
    match trace.insts.last() {
        Some(last) if last.kind == Kind::Loop => {}
        _ => return Err("the trace does not end in `loop`".to_string()),
    }
    let starts: Vec<usize> = (0..n)
        .filter(|&i| trace.insts[i].kind == Kind::LoopStart)
        .collect();
    if starts.len() > 1 {
        return Err(format!("v{}: a second loop_start", starts[1]));
    }
    let params = trace.insts.iter().filter(|i| i.kind.is_param()).count();
    for (i, inst) in trace.insts.iter().enumerate() {
        check_shape(trace, i, params)?;
        for a in &inst.args {
            check_ref(trace, a, i, "an operand")?;
        }
        check_type(trace, i)?;
        check_snapshot(trace, i)?;
    }
    Ok(())
}

/// Checks that operand `o`, used by instruction `at` (in `what`), is a value defined before
/// it.
fn check_ref(trace: &Trace, o: &Opnd, at: usize, what: &str) -> Result<(), String> {
    if let Opnd::Ref(r) = o {
        if r.index() >= at {
            return Err(format!(
                "v{at}: {what} uses {r}, which is not defined before it"
            ));
        }
        if !trace.insts[r.index()].kind.has_result() {
            return Err(format!("v{at}: {what} uses {r}, which defines no value"));
        }
    }
    Ok(())
}

/// Checks that instruction `i` stands where it may and has its operands: `loop` last, a
/// `param` right after `loop_start` (and its fellow params), as many operands as its kind
/// takes (where that number varies, as for `loop_start` and `loop`, one per `param` of the
/// trace, of which there are `params`), and a `call_pure` its recorded result and
/// operations last.
fn check_shape(trace: &Trace, i: usize, params: usize) -> Result<(), String> {
    let inst = &trace.insts[i];
    if inst.kind == Kind::Loop && i != trace.insts.len() - 1 {
        return Err(format!("v{i}: `loop` before the end of the trace"));
    }
    if let Kind::CallPure(_) = inst.kind {
        // The arguments, then the result seen when recorded (a constant of the call's
        // type) and the operations it took.
        match inst.args.as_slice() {
            [.., Opnd::Const(v), Opnd::Const(flowjit_runtime::Value::Int(n))]
                if inst.ty.admits(v) && *n >= 0 => {}
            _ => {
                return Err(format!(
                    "v{i}: call_pure ends with the recorded result, a constant of its \
                     type, and the operations the call took"
                ))
            }
        }
    }
    if let Kind::Call(_) = inst.kind {
        // The arguments, then the operations the call took when recorded.
        if !matches!(
            inst.args.as_slice(),
            [.., Opnd::Const(flowjit_runtime::Value::Int(n))] if *n >= 0
        ) {
            return Err(format!(
                "v{i}: call ends with the operations the call took when recorded"
            ));
        }
    }
    let arity = match inst.kind {
        Kind::CallPure(_) | Kind::Call(_) => inst.args.len(),
        kind => kind.arity().unwrap_or(params),
    };
    if inst.args.len() != arity {
        return Err(format!(
            "v{i}: {} takes {arity} operands, has {}",
            inst.kind.name(),
            inst.args.len()
        ));
    }
    if inst.kind.is_param() {
        let before = trace.insts[..i].iter().rev().find(|p| !p.kind.is_param());
        if before.map(|p| p.kind) != Some(Kind::LoopStart) {
            return Err(format!("v{i}: a param must follow loop_start directly"));
        }
    }
    Ok(())
}

/// Checks that instruction `i` is of the type its kind gives it (`Kind::info`): a `param`
/// that of its value at `loop_start`, which the loop keeps.
fn check_type(trace: &Trace, i: usize) -> Result<(), String> {
    let inst = &trace.insts[i];
    let ty_of = |o: &Opnd| o.ty(&trace.insts);
    let want = match inst.kind.info().result {
        Res::None => Some(Ty::None),
        Res::Fixed(ty) => Some(ty),
        Res::Operand => Some(ty_of(&inst.args[0])),
        Res::Carried => {
            let start = trace.loop_start().expect("a param follows loop_start");
            let k = i - start - 1;
            let first = ty_of(&trace.insts[start].args[k]);
            let next = trace.insts[trace.insts.len() - 1].args.get(k).map(ty_of);
            if next.is_some_and(|t| t != first) {
                return Err(format!("v{i}: the loop changes the type of this param"));
            }
            Some(first)
        }
        Res::Checked => (inst.ty == Ty::None).then_some(Ty::Int),
    };
    if let Some(want) = want.filter(|w| *w != inst.ty) {
        return Err(format!(
            "v{i}: {} is of type {}, not {}",
            inst.kind.name(),
            want,
            inst.ty
        ));
    }
    Ok(())
}

/// Checks the snapshot of instruction `i`: there where the instruction needs one (an
/// operation may have lost its own to the optimizer, which proved it cannot fail), its
/// values defined before, its entries sorted, no frames of calls at `loop` or
/// `loop_start`, and its virtual arrays and pending stores well formed.
fn check_snapshot(trace: &Trace, i: usize) -> Result<(), String> {
    let inst = &trace.insts[i];
    let must = inst.kind.always_has_snapshot();
    let s = match (must, inst.snap) {
        (true, None) => return Err(format!("v{i}: {} needs a snapshot", inst.kind.name())),
        (false, None) => return Ok(()),
        (_, Some(s)) => s,
    };
    let snap = trace
        .snaps
        .get(s.index())
        .ok_or_else(|| format!("v{i}: no snapshot {}", s.0))?;
    for o in snap.operands() {
        check_ref(trace, o, i, "its snapshot")?;
    }
    let frames = std::iter::once(&snap.entries).chain(snap.frames.iter().map(|f| &f.entries));
    for entries in frames {
        if !entries.windows(2).all(|w| w[0].0 < w[1].0) {
            return Err(format!("v{i}: snapshot entries not sorted by slot"));
        }
    }
    if matches!(inst.kind, Kind::Loop | Kind::LoopStart) && !snap.frames.is_empty() {
        return Err(format!("v{i}: {} inside a call", inst.kind.name()));
    }
    check_virtuals(trace, snap).map_err(|e| format!("v{i}: {e}"))?;
    check_stores(trace, snap).map_err(|e| format!("v{i}: {e}"))?;
    Ok(())
}

/// A snapshot's stores not made yet: each into an array at an integer index, no two into
/// the same element by the same operands.
fn check_stores(trace: &Trace, snap: &crate::resume::Snapshot) -> Result<(), String> {
    for (k, s) in snap.stores.iter().enumerate() {
        if s.array.ty(&trace.insts) != Ty::Array || s.index.ty(&trace.insts) != Ty::Int {
            return Err("a store not made yet must be into an array at an integer".into());
        }
        let same = |t: &crate::resume::Store| t.array == s.array && t.index == s.index;
        if snap.stores[..k].iter().any(same) {
            return Err("two stores not made yet into one element".into());
        }
    }
    Ok(())
}

/// A snapshot's virtual arrays: sorted, each a `virtual` instruction with one operand per
/// element, and every `virtual` it refers to listed.
fn check_virtuals(trace: &Trace, snap: &crate::resume::Snapshot) -> Result<(), String> {
    if !snap.virtuals.windows(2).all(|w| w[0].at < w[1].at) {
        return Err("snapshot's virtual arrays not sorted".into());
    }
    for v in &snap.virtuals {
        let def = &trace.insts[v.at.index()];
        if def.kind != Kind::Virtual {
            return Err(format!(
                "{} in the snapshot's virtual arrays is not virtual",
                v.at
            ));
        }
        if def.args[0].as_const() != Some(&flowjit_runtime::Value::Int(v.fields.len() as i64)) {
            return Err(format!("{} has not one element per its length", v.at));
        }
    }
    for o in snap.operands() {
        if let Some(r) = o.as_ref() {
            let virtual_ = trace.insts[r.index()].kind == Kind::Virtual;
            if virtual_ && snap.virtual_at(r).is_none() {
                return Err(format!("{r} is virtual but the snapshot lists no elements"));
            }
        }
    }
    Ok(())
}
