//! Redundant guards: a guard the path already checked, or one implied by the integer
//! intervals known (from earlier guards, and from what operations produce when `bounds` is
//! on). A stage of the forward optimizer (`forward`), after `cse`.
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

use rustc_hash::FxHashSet as HashSet;

use flowjit_runtime::Value;

use super::forward::{Optimizer, Pending, Stage, Verdict};
use super::interval::is_comparison;
use super::Rejected;
use crate::trace::{Kind, Opnd, Ref};

/// The redundant-guard stage: the guards emitted so far, by kind and operands.
#[derive(Default)]
pub struct Guards {
    seen: HashSet<(Kind, Vec<Opnd>)>,
}

impl Stage for Guards {
    fn visit(&mut self, opt: &Optimizer, inst: &mut Pending) -> Result<Verdict, Rejected> {
        let args = &inst.args;
        Ok(match inst.kind {
            Kind::Op(op) if is_comparison(op) => {
                match opt.intervals.decide(op, &args[0], &args[1]) {
                    Some(outcome) => Verdict::Becomes(Opnd::Const(Value::Int(outcome as i64))),
                    None => Verdict::Pass,
                }
            }
            Kind::GuardTrue | Kind::GuardFalse => {
                let holds = inst.kind == Kind::GuardTrue;
                match &args[0] {
                    Opnd::Const(v) if v.is_false() != holds => Verdict::Holds,
                    Opnd::Const(v) => {
                        return Err(Rejected::GuardOnConstant {
                            guard: inst.kind,
                            value: v.clone(),
                        })
                    }
                    Opnd::Ref(_) => {
                        let opposite = if holds {
                            Kind::GuardFalse
                        } else {
                            Kind::GuardTrue
                        };
                        let mut key = (opposite, args.clone());
                        if self.seen.contains(&key) {
                            return Err(Rejected::Contradiction { guard: inst.kind });
                        }
                        key.0 = inst.kind;
                        if self.seen.contains(&key) {
                            Verdict::Holds
                        } else {
                            Verdict::Pass
                        }
                    }
                }
            }
            Kind::GuardValue if self.seen.contains(&(inst.kind, args.clone())) => Verdict::Holds,
            _ => Verdict::Pass,
        })
    }

    fn learn(&mut self, opt: &mut Optimizer, r: Ref) {
        let inst = opt.out.def(r);
        if !inst.kind.is_guard() {
            return;
        }
        if let (Kind::GuardTrue | Kind::GuardFalse, [Opnd::Ref(c)]) =
            (inst.kind, inst.args.as_slice())
        {
            let cond = opt.out.def(*c);
            opt.intervals.learn(cond, inst.kind == Kind::GuardTrue);
        }
        self.seen.insert((inst.kind, inst.args.clone()));
    }
}
