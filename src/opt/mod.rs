//! The trace optimizer: an ordered list of named passes, each in its own file.
//!
//! "The trace recorder expands the IR and the optimizer shrinks it." Every pass takes a
//! trace and returns a new one that does the same: the same outputs, the same exits with
//! the same resume variables, or it rejects the trace when some guard must always fail.
//! Passes can be switched off by name (`--passes`, `--no-opt`), which changes how much a
//! trace does but never what a program prints.
//!
//! | pass | does |
//! | --- | --- |
//! | `fold` | constant folding, guard removal, constants learnt from guards |
//! | `cse` | common-subexpression elimination (loop-invariant code motion after `peel`) |
//! | `guards` | redundant and implied guards |
//! | `bounds` | integer intervals; operations that cannot fail lose their snapshot |
//! | `peel` | preamble + loop; carried constants are not carried; re-runs the passes above |
//! | `dce` | removes operations that cannot exit and are not used |

pub mod bounds;
pub mod cse;
pub mod dce;
pub mod fold;
pub mod guards;
pub mod interval;
pub mod peel;
pub mod rewrite;
pub mod state;

use crate::trace::{verify::verify, Trace};

/// Why a trace was rejected: a guard in it must always fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected(pub String);

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "trace rejected: {}", self.0)
    }
}

/// A pass that rewrites a trace on its own.
pub type Pass = fn(&Trace) -> Result<Trace, Rejected>;

/// The passes peeling runs again over the peeled trace, in order.
const LOCAL: &[(&str, Pass)] = &[
    ("fold", fold::run),
    ("cse", cse::run),
    ("guards", guards::run),
    ("bounds", bounds::run),
];

/// Every pass, in pipeline order.
pub const PIPELINE: &[&str] = &["fold", "cse", "guards", "bounds", "peel", "dce"];

/// Checks a list of pass names; the error names the unknown one.
pub fn check_passes(names: &[String]) -> Result<Vec<&'static str>, String> {
    names
        .iter()
        .map(|n| {
            PIPELINE
                .iter()
                .find(|p| *p == n)
                .copied()
                .ok_or_else(|| format!("unknown pass `{n}` (passes: {})", PIPELINE.join(", ")))
        })
        .collect()
}

fn local(trace: &Trace, enabled: &[&str]) -> Result<Trace, Rejected> {
    let mut t = trace.clone();
    for (name, pass) in LOCAL {
        if enabled.contains(name) {
            t = pass(&t)?;
            debug_assert_eq!(verify(&t), Ok(()), "after {name}");
        }
    }
    Ok(t)
}

/// `trace` with the `input`s of the variables in `known` replaced by their constants: a
/// bridge starts where a guard's snapshot gave those variables these values.
pub fn specialize_inputs(
    trace: &Trace,
    known: &[(crate::lang::Slot, flowjit_runtime::Value)],
) -> Trace {
    let mut rw = rewrite::Rewriter::new(trace);
    for (i, inst) in trace.insts.iter().enumerate() {
        let constant = match inst.kind {
            crate::trace::Kind::Input(slot) => known.iter().find(|(s, _)| *s == slot),
            _ => None,
        };
        match constant {
            Some((_, v)) => rw.set(i, crate::trace::Opnd::Const(v.clone())),
            None => {
                rw.keep(i);
            }
        }
    }
    rw.finish()
}

/// Runs the enabled passes, in pipeline order, over `trace`.
pub fn optimize(trace: &Trace, enabled: &[&str]) -> Result<Trace, Rejected> {
    let mut t = local(trace, enabled)?;
    if enabled.contains(&"peel") {
        t = peel::run(&t, &|t| local(t, enabled))?;
        debug_assert_eq!(verify(&t), Ok(()), "after peel");
    }
    if enabled.contains(&"dce") {
        t = dce::run(&t)?;
        debug_assert_eq!(verify(&t), Ok(()), "after dce");
    }
    Ok(t)
}
