//! Redundant guards: a guard the path already checked, or one implied by what earlier guards
//! established about integer intervals.
//!
//! - The same guard on the same value twice: the second goes.
//! - A comparison whose outcome the known intervals decide becomes a constant, and the guard
//!   on it goes (or the trace is rejected, if it must fail).
//!
//! ```text
//! v1 = lt v0, 4  @l:0 #0 []                v1 = lt v0, 4  @l:0 #0 []
//! guard_true v1  @d:0 #1 []          =>    guard_true v1  @d:0 #1 []
//! v3 = lt v0, 5  @m:0 #1 []                (v0 <= 3, so v3 is 1 and its guard holds)
//! guard_true v3  @e:0 #2 []
//! ```

use std::collections::HashSet;

use flowjit_runtime::Value;

use super::interval::{is_comparison, Facts};
use super::rewrite::Rewriter;
use super::Rejected;
use crate::trace::{Kind, Opnd, Trace};

/// Runs redundant-guard removal.
pub fn run(trace: &Trace) -> Result<Trace, Rejected> {
    let mut rw = Rewriter::new(trace);
    let mut facts = Facts::default();
    let mut seen: HashSet<(Kind, Vec<Opnd>)> = HashSet::new();
    for (i, inst) in trace.insts.iter().enumerate() {
        let args = rw.args(inst);
        match inst.kind {
            Kind::Op(op) if is_comparison(op) => match facts.decide(op, &args[0], &args[1]) {
                Some(outcome) => rw.set(i, Opnd::Const(Value::Int(outcome as i64))),
                None => {
                    rw.keep_with(i, args);
                }
            },
            Kind::GuardTrue | Kind::GuardFalse => {
                let holds = inst.kind == Kind::GuardTrue;
                match &args[0] {
                    Opnd::Const(v) if v.is_false() != holds => continue,
                    Opnd::Const(v) => {
                        return Err(Rejected(format!(
                            "{} on {v} always fails",
                            inst.kind.name()
                        )))
                    }
                    Opnd::Ref(c) => {
                        let opposite = if holds {
                            Kind::GuardFalse
                        } else {
                            Kind::GuardTrue
                        };
                        if seen.contains(&(opposite, args.clone())) {
                            return Err(Rejected(format!(
                                "{} contradicts an earlier guard",
                                inst.kind.name()
                            )));
                        }
                        if !seen.insert((inst.kind, args.clone())) {
                            continue;
                        }
                        let c = *c;
                        rw.keep_with(i, args);
                        let cond = rw.def(c).clone();
                        facts.learn(&cond, holds);
                    }
                }
            }
            Kind::GuardValue => {
                if seen.insert((inst.kind, args.clone())) {
                    rw.keep_with(i, args);
                }
            }
            _ => {
                rw.keep_with(i, args);
            }
        }
    }
    Ok(rw.finish())
}
