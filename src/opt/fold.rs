//! Constant folding and guard removal: the first stage of the forward optimizer
//! (`forward`).
//!
//! An operation whose operands are all known is computed now and vanishes: uses of its
//! result read the constant, and snapshots hold the constant instead of a computed value.
//! `same` is a copy and always vanishes. A guard on a known value is dropped when it must
//! hold, and the trace is rejected when it must fail. Guards also teach: after
//! `guard_value(v, k)` and after `guard_true(eq(v, k))`, `v` is `k`; after `guard_false(c)`,
//! `c` is 0.
//!
//! An operation on known values that fails (`readlist` out of range, say) is kept: it exits
//! every time, and the interpreter raises the error.
//!
//! ```text
//! v0 = input x  @b:0 #0 []                 v0 = input x  @b:0 #0 []
//! guard_value v0, 5  @b2:0 #1 []           guard_value v0, 5  @b2:0 #1 []
//! v2 = mul v0, 2  @b2:0 #1 []        =>    (gone: 10)
//! v3 = add v2, 1  @b2:1 #2 [x2=v2]         (gone: 11)
//! ```

use rustc_hash::FxHashMap as HashMap;

use flowjit_runtime::{ops, Op, Value};

use super::forward::{Optimizer, Pending, Stage, Verdict};
use super::interval::is_comparison;
use super::Rejected;
use crate::trace::{call_pure_parts, Inst, Kind, Opnd, Ref, Ty};

fn known(args: &[Opnd]) -> Option<Vec<Value>> {
    args.iter().map(|a| a.as_const().cloned()).collect()
}

/// Whether `inst` gives 0 or 1: a comparison, or `not`.
fn is_boolean(inst: &Inst) -> bool {
    matches!(inst.kind, Kind::Op(op) if is_comparison(op) || op == Op::Not)
}

/// `(x + c1) + c2` and the like, with `c1` and `c2` constant integers, become `x + (c1 +
/// c2)` (in the operation's own kind: `x - (-(c1 + c2))` for a `sub`), or `x` itself when the
/// constants cancel: a stack pointer moved up and down again is the same value, so that
/// what is stored at it is found again (`heap`). The inner operation was made (and checked)
/// before, so `x + c1` fits in 64 bits, and `x + c1 + c2` is the same number either way: the
/// outer operation keeps its own check.
fn reassociate(opt: &Optimizer, op: Op, args: &mut [Opnd]) -> Verdict {
    let offset = |op: Op, c: i64| match op {
        Op::Add => Some(c),
        Op::Sub => c.checked_neg(),
        _ => None,
    };
    let (x, c2) = match (op, &*args) {
        (Op::Add | Op::Sub, [Opnd::Ref(x), Opnd::Const(Value::Int(c))]) => (*x, *c),
        (Op::Add, [Opnd::Const(Value::Int(c)), Opnd::Ref(x)]) => (*x, *c),
        _ => return Verdict::Pass,
    };
    let def = opt.out.def(x);
    let (inner, c1) = match (def.kind, def.args.as_slice()) {
        (Kind::Op(inner @ (Op::Add | Op::Sub)), [Opnd::Ref(y), Opnd::Const(Value::Int(c))]) => {
            (*y, offset(inner, *c))
        }
        (Kind::Op(Op::Add), [Opnd::Const(Value::Int(c)), Opnd::Ref(y)]) => (*y, Some(*c)),
        _ => return Verdict::Pass,
    };
    if opt.out.def(inner).ty != Ty::Int {
        // The inner operation always fails (on an atom, say): leave it all to exit there.
        return Verdict::Pass;
    }
    let total = c1.zip(offset(op, c2)).and_then(|(a, b)| a.checked_add(b));
    match total {
        Some(0) => Verdict::Becomes(Opnd::Ref(inner)),
        Some(t) => {
            let Some(k) = (if op == Op::Add {
                Some(t)
            } else {
                t.checked_neg()
            }) else {
                return Verdict::Pass;
            };
            args[0] = Opnd::Ref(inner);
            args[1] = Opnd::Const(Value::Int(k));
            Verdict::Pass
        }
        None => Verdict::Pass,
    }
}

/// What `op` on an integer and a constant that changes nothing, or gives a constant
/// whatever the integer, is: `x + 0`, `x - 0`, `x * 1`, `x // 1`, `x | 0`, `x ^ 0` and
/// `x & -1` are `x`; `x % 1` and `x * 0` are 0. Only for an `x` the trace knows to be an
/// integer: on an atom the operation fails, and must stay to exit there.
fn identity(opt: &Optimizer, op: Op, args: &[Opnd]) -> Option<Opnd> {
    let (x, c, x_first) = match args {
        [Opnd::Ref(x), Opnd::Const(Value::Int(c))] => (*x, *c, true),
        [Opnd::Const(Value::Int(c)), Opnd::Ref(x)] => (*x, *c, false),
        _ => return None,
    };
    if opt.out.def(x).ty != Ty::Int {
        return None;
    }
    let commutes = matches!(op, Op::Add | Op::Mul | Op::Or | Op::Xor | Op::And);
    if !x_first && !commutes {
        return None;
    }
    let same = Some(Opnd::Ref(x));
    let zero = Some(Opnd::Const(Value::Int(0)));
    match (op, c) {
        (Op::Add | Op::Sub | Op::Or | Op::Xor, 0) | (Op::Mul | Op::Div, 1) | (Op::And, -1) => same,
        (Op::Mod, 1) | (Op::Mul, 0) => zero,
        _ => None,
    }
}

/// The constant-folding stage.
pub struct Fold;

impl Stage for Fold {
    fn visit(&mut self, opt: &Optimizer, inst: &mut Pending) -> Result<Verdict, Rejected> {
        let args = &inst.args;
        Ok(match inst.kind {
            Kind::Op(Op::Same) => Verdict::Becomes(args[0].clone()),
            Kind::Op(op) if inst.kind.is_pure() => {
                match known(args).map(|vals| ops::apply(op, &vals)) {
                    Some(Ok(v)) => Verdict::Becomes(Opnd::Const(v)),
                    // Fails every time: keep it, so that it exits and the interpreter raises.
                    Some(Err(_)) => Verdict::Pass,
                    None => {
                        if let Some(same) = identity(opt, op, args) {
                            return Ok(Verdict::Becomes(same));
                        }
                        if matches!(op, Op::Add | Op::Sub) {
                            merge_wrapping(opt, inst);
                        }
                        reassociate(opt, op, &mut inst.args)
                    }
                }
            }
            Kind::GuardTrue | Kind::GuardFalse => {
                let want_true = inst.kind == Kind::GuardTrue;
                match &args[0] {
                    Opnd::Const(v) if v.is_false() != want_true => Verdict::Holds,
                    Opnd::Const(v) => {
                        return Err(Rejected::GuardOnConstant {
                            guard: inst.kind,
                            value: v.clone(),
                        })
                    }
                    Opnd::Ref(c) => {
                        // A comparison gives 0 or 1: when its guard fails, its value is the
                        // other one, and the guard's own snapshot can say so.
                        if is_boolean(opt.out.def(*c)) {
                            inst.failing = Some((*c, Value::Int(!want_true as i64)));
                        }
                        Verdict::Pass
                    }
                }
            }
            Kind::GuardValue => match (&args[0], &args[1]) {
                (Opnd::Const(a), Opnd::Const(b)) if a == b => Verdict::Holds,
                (Opnd::Const(a), Opnd::Const(b)) => {
                    return Err(Rejected::OtherValue {
                        value: a.clone(),
                        expected: b.clone(),
                    })
                }
                _ => Verdict::Pass,
            },
            // An elidable call on known arguments is the result it gave when recorded.
            Kind::CallPure(_) => {
                let (call_args, result, _) = call_pure_parts(args);
                if !opt.counted && call_args.iter().all(|a| a.as_const().is_some()) {
                    Verdict::Becomes(result.clone())
                } else {
                    Verdict::Pass
                }
            }
            Kind::Op(_)
            | Kind::Input(_)
            | Kind::Param(_)
            | Kind::ParamItem
            | Kind::Loop
            | Kind::LoopStart
            | Kind::GetItem
            | Kind::SetItem
            | Kind::Print
            | Kind::Putchar
            | Kind::Getchar
            | Kind::Call(_)
            | Kind::Virtual => Verdict::Pass,
        })
    }

    fn learn(&mut self, opt: &mut Optimizer, r: Ref) {
        let out = &mut opt.out;
        let inst = out.def(r);
        match (inst.kind, inst.args.as_slice()) {
            (Kind::GuardTrue, [Opnd::Ref(c)]) => {
                let c = *c;
                let def = out.def(c);
                // guard_true(eq(v, k)): v is k.
                let eq = match (def.kind, def.args.as_slice()) {
                    (
                        Kind::Op(Op::Eq),
                        [Opnd::Ref(v), Opnd::Const(k)] | [Opnd::Const(k), Opnd::Ref(v)],
                    ) => Some((*v, k.clone())),
                    _ => None,
                };
                // A comparison gives 0 or 1: guard_true means it gave 1.
                if is_boolean(def) {
                    out.learn(c, Value::Int(1));
                }
                if let Some((v, k)) = eq {
                    out.learn(v, k);
                }
            }
            (Kind::GuardFalse, [Opnd::Ref(c)]) => {
                let c = *c;
                out.learn(c, Value::Int(0));
            }
            (Kind::GuardValue, [Opnd::Ref(v), Opnd::Const(k)]) => {
                let (v, k) = (*v, k.clone());
                out.learn(v, k);
            }
            _ => {}
        }
    }
}

/// `and(x, M)` as `(x, M)`, for a mask `M` of the form `2^k - 1`.
fn mask_of(inst: &Inst) -> Option<(Ref, i64)> {
    match (inst.kind, inst.args.as_slice()) {
        (Kind::Op(Op::And), [Opnd::Ref(x), Opnd::Const(Value::Int(m))])
            if *m > 0 && (*m & m.wrapping_add(1)) == 0 =>
        {
            Some((*x, *m))
        }
        _ => None,
    }
}

/// The values of `trace` that only a mask reads (`and(_, M)`, with `M` of the form
/// `2^k - 1`: as its operand, or in its own snapshot), with that mask: where a run of
/// wrapping additions can be merged (`merge_wrapping`).
pub fn masked_only(trace: &crate::trace::Trace) -> HashMap<Ref, i64> {
    // Per operand of a mask: the mask of every use so far, or `None` once another use is
    // seen. Only those can qualify; the other values are not followed.
    let mut uses: HashMap<Ref, Option<i64>> = trace
        .insts
        .iter()
        .filter_map(mask_of)
        .map(|(x, m)| (x, Some(m)))
        .collect();
    if uses.is_empty() {
        return HashMap::default();
    }
    for inst in &trace.insts {
        let mask = mask_of(inst);
        let by = |r: &Ref| mask.filter(|(x, _)| x == r).map(|(_, m)| m);
        let snap = trace.snap_of(inst).into_iter().flat_map(|s| s.operands());
        for o in inst.args.iter().chain(snap) {
            if let Opnd::Ref(r) = o {
                if let Some(e) = uses.get_mut(r) {
                    if *e != by(r) {
                        *e = None;
                    }
                }
            }
        }
    }
    uses.into_iter()
        .filter_map(|(r, m)| m.map(|m| (r, m)))
        .collect()
}

/// Runs of wrapping arithmetic: `v = v + 1; v = v & 255`, again and again (a Brainfuck
/// `+++` on an 8-bit cell), become one addition and one mask. An addition of a constant to
/// `and(a, M)`, where `a` is itself an addition of a constant and `M` is `2^k - 1`, whose
/// result only that mask reads ([`masked_only`]), adds to `a` instead: `((y + 1) & M) +
/// 1) & M` is `((y + 1) + 1) & M`, and `reassociate` then makes `y + 2` of it. The addition
/// keeps its snapshot (one without is left alone): where it overflows 64 bits and the old
/// one did not, it exits there,
/// and the interpreter goes on exactly (in machine code one check serves the whole run of
/// offsets of `y`, `MachineBounds::widen`).
///
/// ```text
/// v1 = add v0, 1  @inc:1 #1 []             v1 = add v0, 1  @inc:1 #1 []
/// v2 = and v1, 255                         v2 = and v1, 255
/// v3 = add v2, 1  @inc:1 #3 [v=v2]   =>    v3 = add v0, 2  @inc:1 #3 [v=v2]
/// v4 = and v3, 255  @inc:2 #4 [v=v3]       v4 = and v3, 255  @inc:2 #4 [v=v3]
/// ```
///
/// (The mask's snapshot then holds the unmasked sum, which it never gives: a mask of two
/// integers cannot fail.)
fn merge_wrapping(opt: &Optimizer, inst: &mut Pending) {
    // Without its snapshot (a later walk, after `bounds` proved the old addition safe),
    // nothing would check the new one.
    let Some(&m) = opt
        .masked
        .get(&Ref(inst.at as u32))
        .filter(|_| inst.snapshot)
    else {
        return;
    };
    let Opnd::Ref(x) = inst.args[0] else { return };
    let Some((a, m2)) = mask_of(opt.out.def(x)) else {
        return;
    };
    let offset = matches!(
        (opt.out.def(a).kind, opt.out.def(a).args.as_slice()),
        (
            Kind::Op(Op::Add | Op::Sub),
            [Opnd::Ref(_), Opnd::Const(Value::Int(_))]
        )
    );
    if m2 == m && offset {
        inst.args[0] = Opnd::Ref(a);
    }
}
