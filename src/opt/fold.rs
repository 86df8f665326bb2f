//! Constant folding and guard removal.
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

use flowjit_runtime::{ops, Op, Value};

use super::interval::is_comparison;
use super::rewrite::Rewriter;
use super::Rejected;
use crate::trace::{Kind, Opnd, Trace};

fn known(args: &[Opnd]) -> Option<Vec<Value>> {
    args.iter().map(|a| a.as_const().cloned()).collect()
}

/// Runs constant folding and guard removal.
pub fn run(trace: &Trace) -> Result<Trace, Rejected> {
    let mut rw = Rewriter::new(trace);
    for (i, inst) in trace.insts.iter().enumerate() {
        let args = rw.args(inst);
        match inst.kind {
            Kind::Op(Op::Same) => rw.set(i, args[0].clone()),
            Kind::Op(op) if inst.kind.is_pure() => {
                match known(&args).map(|vals| ops::apply(op, &vals)) {
                    Some(Ok(v)) => rw.set(i, Opnd::Const(v)),
                    // Fails every time: keep it, so that it exits and the interpreter raises.
                    Some(Err(_)) | None => {
                        rw.keep_with(i, args);
                    }
                }
            }
            Kind::GuardTrue | Kind::GuardFalse => {
                let want_true = inst.kind == Kind::GuardTrue;
                match &args[0] {
                    Opnd::Const(v) if v.is_false() != want_true => {}
                    Opnd::Const(v) => {
                        return Err(Rejected(format!(
                            "{} on {v} always fails",
                            inst.kind.name()
                        )))
                    }
                    Opnd::Ref(c) => {
                        let c = *c;
                        // A comparison gives 0 or 1: when its guard fails, its value is the
                        // other one, and the guard's own snapshot can say so.
                        let boolean = matches!(rw.def(c).kind, Kind::Op(op) if is_comparison(op) || op == Op::Not);
                        if boolean {
                            let failing = Value::Int(!want_true as i64);
                            rw.keep_guard(i, args, (c, &failing));
                        } else {
                            rw.keep_with(i, args);
                        }
                        if want_true {
                            let def = rw.def(c);
                            // A comparison gives 0 or 1: guard_true means it gave 1.
                            if let Kind::Op(op) = def.kind {
                                if is_comparison(op) || op == Op::Not {
                                    rw.learn(c, Value::Int(1));
                                }
                            }
                            // guard_true(eq(v, k)): v is k.
                            let def = rw.def(c);
                            if def.kind == Kind::Op(Op::Eq) {
                                if let [Opnd::Ref(v), Opnd::Const(k)]
                                | [Opnd::Const(k), Opnd::Ref(v)] = def.args.as_slice()
                                {
                                    let (v, k) = (*v, k.clone());
                                    rw.learn(v, k);
                                }
                            }
                        } else {
                            rw.learn(c, Value::Int(0));
                        }
                    }
                }
            }
            Kind::GuardValue => match (&args[0], &args[1]) {
                (Opnd::Const(a), Opnd::Const(b)) if a == b => {}
                (Opnd::Const(a), Opnd::Const(b)) => {
                    return Err(Rejected(format!("guard_value({a}, {b}) always fails")))
                }
                (Opnd::Ref(v), Opnd::Const(k)) => {
                    let (v, k) = (*v, k.clone());
                    rw.keep_with(i, args);
                    rw.learn(v, k);
                }
                _ => {
                    rw.keep_with(i, args);
                }
            },
            Kind::Op(_) | Kind::Input(_) | Kind::Param(_) | Kind::Loop | Kind::LoopStart => {
                rw.keep_with(i, args);
            }
        }
    }
    Ok(rw.finish())
}
