//! The trace optimizer: one forward optimizer whose stages are switched on by name, then
//! loop peeling and dead-code elimination.
//!
//! "The trace recorder expands the IR and the optimizer shrinks it." Every pass takes a
//! trace and returns a new one that does the same: the same outputs, the same exits with
//! the same resume variables, or it rejects the trace when some guard must always fail.
//! Passes can be switched off by name (`--passes`, `--no-opt`), which changes how much a
//! trace does but never what a program prints.
//!
//! `fold`, `cse`, `heap`, `guards` and `bounds` are not passes of their own but stages of the
//! forward optimizer (`forward`): one walk over the trace offers each instruction to the
//! enabled stages in that order, emits it once, and lets every stage learn from it. What a
//! stage learns of a value (its constant, its interval) is known to all of them at once.
//!
//! | pass | does |
//! | --- | --- |
//! | `fold` | constant folding, guard removal, constants learnt from guards, runs of wrapping additions merged |
//! | `cse` | common-subexpression elimination (loop-invariant code motion after `peel`) |
//! | `heap` | array elements stored and read back, or read twice, are read once |
//! | `guards` | redundant and implied guards |
//! | `bounds` | integer intervals; operations that cannot fail lose their snapshot |
//! | `peel` | preamble + loop; carried constants are not carried; re-runs the stages above |
//! | `virtuals` | arrays that do not escape are never allocated; re-runs the stages above |
//! | `sink` | stores that cannot fail are made late, or never (exits make them) |
//! | `dce` | removes operations that cannot exit and are not used |

pub mod bounds;
pub mod checks;
pub mod cse;
pub mod dce;
pub mod fold;
pub mod forward;
pub mod guards;
pub mod header;
pub mod heap;
pub mod interval;
pub mod peel;
pub mod program;
pub mod repr;
pub mod rewrite;
pub mod sink;
pub mod virtuals;

use std::fmt;

use flowjit_runtime::Value;

use crate::trace::{verify::verify, Kind, Trace};

/// Why a trace was rejected: a guard in it must always fail, or its loop cannot be typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejected {
    /// A `guard_true` or `guard_false` on a constant that fails it.
    GuardOnConstant {
        /// The guard.
        guard: Kind,
        /// The constant it tests.
        value: Value,
    },
    /// A `guard_value` on a constant other than the one it expects.
    OtherValue {
        /// The constant the guard tests.
        value: Value,
        /// The constant it expects.
        expected: Value,
    },
    /// A guard that must fail where an earlier one on the same value held.
    Contradiction {
        /// The guard.
        guard: Kind,
    },
    /// A variable the loop carries changes type from one iteration to the next, so no typed
    /// `param` can hold it (`peel`). A recording at another iteration may see stable types.
    TypeChange,
}

impl Rejected {
    /// Why, in words: `guard_value(5, 6) always fails`.
    pub fn reason(&self) -> impl fmt::Display + '_ {
        Reason(self)
    }
}

struct Reason<'r>(&'r Rejected);

impl fmt::Display for Reason<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Rejected::GuardOnConstant { guard, value } => {
                write!(f, "{} on {value} always fails", guard.name())
            }
            Rejected::OtherValue { value, expected } => {
                write!(f, "guard_value({value}, {expected}) always fails")
            }
            Rejected::Contradiction { guard } => {
                write!(f, "{} contradicts an earlier guard", guard.name())
            }
            Rejected::TypeChange => {
                write!(f, "a variable changes type from one iteration to the next")
            }
        }
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "trace rejected: {}", self.reason())
    }
}

impl std::error::Error for Rejected {}

/// An optimizer pass, as `--passes` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pass {
    /// Constant folding and algebraic rules (`fold`), a stage of the forward optimizer.
    Fold,
    /// Common subexpressions (`cse`), a stage.
    Cse,
    /// Heap forwarding: loads and stores of array elements (`heap`), a stage.
    Heap,
    /// Guards implied by earlier ones (`guards`), a stage.
    Guards,
    /// Intervals: overflow checks and guards they decide (`bounds`), a stage.
    Bounds,
    /// Loop peeling (`peel`).
    Peel,
    /// Allocation removal (`virtuals`).
    Virtuals,
    /// Stores sunk out of the loop (`sink`).
    Sink,
    /// Dead code (`dce`).
    Dce,
}

impl Pass {
    /// Its name on the command line and in the optimizer's file tests.
    pub const fn name(self) -> &'static str {
        match self {
            Pass::Fold => "fold",
            Pass::Cse => "cse",
            Pass::Heap => "heap",
            Pass::Guards => "guards",
            Pass::Bounds => "bounds",
            Pass::Peel => "peel",
            Pass::Virtuals => "virtuals",
            Pass::Sink => "sink",
            Pass::Dce => "dce",
        }
    }
}

impl fmt::Display for Pass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The passes, in pipeline order: the stages of the forward optimizer, then `peel`,
/// `virtuals`, `sink` and `dce`.
pub const PIPELINE: &[Pass] = &[
    Pass::Fold,
    Pass::Cse,
    Pass::Heap,
    Pass::Guards,
    Pass::Bounds,
    Pass::Peel,
    Pass::Virtuals,
    Pass::Sink,
    Pass::Dce,
];

/// The passes named `names`; the error names the unknown one.
pub fn check_passes(names: &[String]) -> Result<Vec<Pass>, String> {
    names
        .iter()
        .map(|n| {
            PIPELINE
                .iter()
                .find(|p| p.name() == n)
                .copied()
                .ok_or_else(|| {
                    let all: Vec<&str> = PIPELINE.iter().map(|p| p.name()).collect();
                    format!("unknown pass `{n}` (passes: {})", all.join(", "))
                })
        })
        .collect()
}

fn local(trace: &Trace, enabled: &[Pass], counted: bool) -> Result<Trace, Rejected> {
    local_carrying(trace, enabled, counted).map(|(t, _)| t)
}

/// [`local`], with the loads of the peeled loop that could carry their element instead.
fn local_carrying(trace: &Trace, enabled: &[Pass], counted: bool) -> Result<Walked, Rejected> {
    let walked = forward::run_carrying(trace, enabled, counted)?;
    debug_assert_eq!(verify(&walked.0), Ok(()), "after the forward optimizer");
    Ok(walked)
}

/// A trace the forward optimizer emitted, and the elements its loop could carry.
type Walked = (Trace, Vec<heap::Carry>);

/// How many times `carry_elements` looks for more elements to carry: once an element is
/// carried, a load that read through it may become one too.
const CARRY_ROUNDS: usize = 3;

/// The peeled trace `t` (which the forward optimizer emitted, finding `carries`) with the
/// array elements its loop can carry in registers carried (`heap::Carry`), and the passes
/// run again.
fn carry_elements(
    (mut t, mut carries): Walked,
    enabled: &[Pass],
    counted: bool,
) -> Result<Trace, Rejected> {
    for _ in 0..CARRY_ROUNDS {
        if carries.is_empty() {
            break;
        }
        let carried = heap::carry(&t, &carries);
        debug_assert_eq!(verify(&carried), Ok(()), "after carrying elements");
        (t, carries) = local_carrying(&carried, enabled, counted)?;
        if let Some(fewer) = peel::drop_fixed_params(&t, peel::Fixed::UnchangedOrConstant) {
            (t, carries) = local_carrying(&fewer, enabled, counted)?;
        }
    }
    Ok(t)
}

/// Drops from every snapshot the variables of the trace's own frame that `live` says are not
/// live where that frame resumes (at the snapshot's position, or where its outermost inlined
/// call returns): they are never read again before they are written (`lang::liveness`), so
/// an exit need not write them back. The recorder keeps only live variables already; peeling
/// adds the variables the loop carries to every snapshot of its body, which this takes out
/// again where they are dead. A snapshot that holds virtual arrays is left as it is.
pub fn prune_dead_entries<'a>(
    mut t: Trace,
    live: &dyn Fn(crate::state::Position) -> &'a crate::lang::liveness::Vars,
) -> Trace {
    for snap in &mut t.snaps {
        if !snap.virtuals.is_empty() {
            continue;
        }
        let resumes = snap.frames.first().map_or(snap.pos, |f| f.ret);
        let vars = live(resumes);
        snap.entries.retain(|(slot, _)| vars.contains(*slot));
    }
    t
}

/// Runs the enabled passes, in pipeline order, over `trace`.
pub fn optimize(trace: &Trace, enabled: &[Pass]) -> Result<Trace, Rejected> {
    optimize_for(trace, enabled, false, false)
}

/// [`optimize`], for code that counts the operations it does (`--max-steps`): elidable calls
/// are neither folded nor merged, because the operations a call takes may differ from one
/// call to the next with the same arguments (a function that memoizes takes fewer once it
/// has the answer), and only a call that is made can count them.
pub fn optimize_counted(trace: &Trace, enabled: &[Pass]) -> Result<Trace, Rejected> {
    optimize_for(trace, enabled, true, false)
}

/// [`optimize`] (or [`optimize_counted`], as `counted` says) for a loop whose peeled
/// iteration [`optimize`] rejected: one whose recorded way cannot follow itself, because what
/// an iteration leaves (a flag it flips, a cell it clears) sends the next one the other way.
/// The loop body assumes nothing of what the preamble leaves: every variable the loop
/// carries is a `param`, even one that ends the preamble as a constant, no array element is
/// carried, and only a `param` that `loop` gives back unchanged is dropped (see
/// [`peel::drop_fixed_params`]). Its guards then hold as often as they did in the recording,
/// and the other way becomes a bridge.
pub fn optimize_generic(trace: &Trace, enabled: &[Pass], counted: bool) -> Result<Trace, Rejected> {
    optimize_for(trace, enabled, counted, true)
}

fn optimize_for(
    trace: &Trace,
    enabled: &[Pass],
    counted: bool,
    generic: bool,
) -> Result<Trace, Rejected> {
    let fixed = if generic {
        peel::Fixed::Unchanged
    } else {
        peel::Fixed::UnchangedOrConstant
    };
    let mut t = local(trace, enabled, counted)?;
    if enabled.contains(&Pass::Peel) {
        // What the last walk found to carry is that of the trace peeling returns: it
        // returns the last walk's trace.
        let found = std::cell::RefCell::new(Vec::new());
        t = peel::run(&t, fixed, &|t| {
            let (t, carries) = local_carrying(t, enabled, counted)?;
            *found.borrow_mut() = carries;
            Ok(t)
        })?;
        debug_assert_eq!(verify(&t), Ok(()), "after peel");
        if enabled.contains(&Pass::Heap) && t.loop_start().is_some() && !generic {
            t = carry_elements((t, found.into_inner()), enabled, counted)?;
        }
    }
    if enabled.contains(&Pass::Virtuals) {
        if let Some(v) = virtuals::run(&t) {
            debug_assert_eq!(verify(&v), Ok(()), "after virtuals");
            // What the arrays held is now known where it was read: fold it. An element
            // the loop carries may then turn out to be the same constant at both ends.
            t = local(&v, enabled, counted)?;
            if let Some(fewer) = peel::drop_fixed_params(&t, fixed) {
                t = local(&fewer, enabled, counted)?;
            }
        }
    }
    if enabled.contains(&Pass::Sink) && sink::applies(&t) {
        t = sink::run(&t);
        debug_assert_eq!(verify(&t), Ok(()), "after sink");
        if t.loop_start().is_some() {
            // An element carried may be another param's value, or a constant, at both ends.
            t = peel::merge_params(&t);
            if let Some(fewer) = peel::drop_fixed_params(&t, fixed) {
                t = fewer;
            }
        }
    }
    if enabled.contains(&Pass::Dce) {
        t = dce::run(t)?;
        debug_assert_eq!(verify(&t), Ok(()), "after dce");
    }
    Ok(t)
}
