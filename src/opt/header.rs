//! The state a peeled loop assumes at its header, and whether a jump may enter it there.
//!
//! After peeling (see `peel`), the loop body is specialized to what the preamble left
//! behind: a carried variable whose value stayed constant is not carried at all (the body
//! reads the constant), and two variables that always hold the same value share one `param`.
//! A jump from elsewhere (a bridge that comes back to its tree) may go straight to the
//! header only if the state it brings satisfies every such assumption; otherwise it must go
//! through the preamble, which establishes them again. This is PyPy's *virtual state* for
//! our values: for each variable the loop carries, either a constant or a parameter.
//!
//! ```text
//! loop_start v3, v5  @loop:0 [cur=v3, prev=v3, i=v5, k=7]
//! v8 = param cur           header state: cur → param 0, prev → param 0,
//! v9 = param i                           i → param 1,   k = 7
//! ...
//! loop v12, v13  @loop:0 [cur=v12, prev=v12, i=v13, k=7]
//! ```
//!
//! A jump that arrives with `prev = 0` and `cur = v20` breaks `prev → param 0` (two different
//! values for one parameter) and must enter through the preamble; so must one that writes a
//! variable the loop does not carry (the preamble read it once, and the body may use what it
//! computed from it), or arrives with `k` other than 7. A variable every iteration gives
//! back unchanged has no `param` at all (`peel::drop_fixed_params`): a jump must leave it
//! alone.

use flowjit_runtime::Value;

use crate::lang::Slot;
use crate::trace::{Kind, Opnd, Ref, Trace};

/// What the loop assumes of one carried variable at its header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assumed {
    /// It holds this constant.
    Const(Value),
    /// It holds the value of parameter `k` (the `k`-th `param`); several variables may.
    Param(usize),
    /// It holds the value the preamble left in it, which every iteration gives back (a
    /// stack pointer moved up and down again): a jump that writes it must go through the
    /// preamble.
    Fixed,
}

/// What a jump brings for one variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// A constant.
    Const(Value),
    /// A value computed by the jumping code, named by the segment of the tree it is defined
    /// in and its ref there: two arrivals hold the same value when their names are equal.
    Value(usize, Ref),
    /// The variable is not written on the jump's path: it holds what it held in the loop.
    Unchanged,
}

/// The state a peeled loop assumes at its header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopState {
    /// Each carried variable (sorted by slot) and what the loop assumes of it.
    pub vars: Vec<(Slot, Assumed)>,
    /// How many parameters the header has.
    pub params: usize,
}

impl LoopState {
    /// The header state of a peeled trace; `None` if the trace is not peeled, or a carried
    /// variable is neither a constant nor a parameter at the header, or is a virtual array,
    /// or the loop carries array elements (then no jump enters the loop but through the
    /// preamble).
    pub fn of(trace: &Trace) -> Option<LoopState> {
        // What an element holds at the header is not a variable a jump brings: the loop
        // may have merged it with a variable's param (`a[0] = i` on the recorded way) or
        // taken it for a constant, and a jump whose way stored otherwise, or not at all,
        // would break that.
        if trace.carries_elements {
            return None;
        }
        let start = trace.loop_start()?;
        let first = &trace.insts[start];
        let last = trace.insts.last()?;
        if last.kind != Kind::Loop {
            return None;
        }
        // A variable carried as the elements of a virtual array (`opt::virtuals`) has no
        // param of its own: a jump cannot bring it.
        if !trace.snap_of(first)?.virtuals.is_empty() {
            return None;
        }
        let before = &trace.snap_of(first)?.entries;
        let after = &trace.snap_of(last)?.entries;
        let params = first.args.len();
        let named: Vec<Option<Slot>> = (0..params)
            .map(|k| match trace.insts.get(start + 1 + k).map(|i| i.kind) {
                Some(Kind::Param(slot)) => Some(slot),
                _ => None,
            })
            .collect();
        let mut vars = Vec::with_capacity(before.len());
        for (slot, o) in before {
            let next = after.iter().find(|(s, _)| s == slot).map(|(_, e)| e);
            let assumed = if let Some(k) = named.iter().position(|n| *n == Some(*slot)) {
                Assumed::Param(k)
            } else if let (Opnd::Const(c), Some(Opnd::Const(d))) = (o, next) {
                if c != d {
                    return None;
                }
                Assumed::Const(c.clone())
            } else if let Some(k) =
                // A variable without a param of its own shares one (`peel` merged them):
                // the param that receives the same operand from `loop_start` and `loop`.
                (0..params)
                    .find(|&k| &first.args[k] == o && Some(&last.args[k]) == next)
            {
                Assumed::Param(k)
            } else if Some(o) == next {
                // Its param was fixed (`peel::drop_fixed_params`).
                Assumed::Fixed
            } else {
                return None;
            };
            vars.push((*slot, assumed));
        }
        Some(LoopState { vars, params })
    }

    /// The variables the loop carries, with what it assumes of each.
    pub fn assumed(&self, slot: Slot) -> Option<&Assumed> {
        self.vars.iter().find(|(s, _)| *s == slot).map(|(_, a)| a)
    }

    /// Whether a jump may enter the header, given what it brings for each variable
    /// (`arrival`) and the variables its path writes (`written`). If it may, the answer is,
    /// per parameter, the variable whose arrival gives it its value (`None`: unchanged, the
    /// parameter keeps its value). Kinds are the caller's to compare.
    pub fn admits(
        &self,
        written: &[Slot],
        arrival: &dyn Fn(Slot) -> Arrival,
    ) -> Option<Vec<Option<Slot>>> {
        // A variable the loop does not carry is an invariant: the preamble read it once.
        if written.iter().any(|s| self.assumed(*s).is_none()) {
            return None;
        }
        let mut per_param: Vec<Option<(Slot, Arrival)>> = vec![None; self.params];
        for (slot, assumed) in &self.vars {
            let a = arrival(*slot);
            match assumed {
                Assumed::Const(c) => match &a {
                    Arrival::Unchanged => {}
                    Arrival::Const(v) if v == c => {}
                    _ => return None,
                },
                Assumed::Fixed => {
                    if a != Arrival::Unchanged {
                        return None;
                    }
                }
                Assumed::Param(k) => match &per_param[*k] {
                    None => per_param[*k] = Some((*slot, a)),
                    // Variables sharing a parameter must arrive as one value.
                    Some((_, seen)) if *seen == a => {}
                    Some(_) => return None,
                },
            }
        }
        per_param
            .into_iter()
            .map(|p| match p {
                Some((_, Arrival::Unchanged)) => Some(None),
                Some((slot, _)) => Some(Some(slot)),
                // A parameter no variable names: what would it receive?
                None => None,
            })
            .collect()
    }
}
