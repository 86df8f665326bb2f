//! Recording a root trace at a hot key and optimizing it into a new tree.

use std::fmt::Write as _;
use std::time::Instant;

use crate::backend::{Segment, Tuning};
use crate::interp::RuntimeError;
use crate::lang::{BlockId, Slot};
use crate::opt;
use crate::state::{Frame, Position, State};
use crate::trace::{self, print, AbortReason, Recorded};

use super::{describe, events, wide_slots, EventKind, Jit, Key, Recording, Tree};

/// The host of a recording the driver makes ([`trace::Host`]): what is traced is what
/// the profile says, and a call not inlined is made by the driver itself
/// ([`Jit::run_call`]), whose traces run and record as they would outside: the rest of a
/// recursion below a function trace's recording runs in machine code too.
pub(super) struct Driving<'j, 'p> {
    /// The driver.
    pub(super) jit: &'j mut Jit<'p>,
    /// The key recorded, for a root trace.
    pub(super) key: Option<&'j Key>,
}

impl trace::Host for Driving<'_, '_> {
    fn traced(&self, block: BlockId, frame: &Frame) -> bool {
        self.jit.profile.traced_besides(block, frame, self.key)
    }

    fn ends(&self, target: BlockId, frame: &Frame) -> Option<Vec<Slot>> {
        self.jit.profile.bridge_end(target, frame)
    }

    fn call(
        &mut self,
        state: &mut State,
        func: crate::lang::FuncId,
        args: Vec<flowjit_runtime::Value>,
        depth: usize,
        steps: &mut crate::state::Steps,
    ) -> Result<crate::interp::Exit, RuntimeError> {
        self.jit.run_call(state, func, args, depth, steps)
    }
}

impl Jit<'_> {
    /// Records a root trace at `key` (the frame is at its anchor) and, when its loop closes
    /// and the optimizer accepts it, makes it a tree and compiles it.
    pub(super) fn record(
        &mut self,
        state: &mut State,
        key: Key,
    ) -> Result<Recording, RuntimeError> {
        let max_trees = self.config.policy.max_trees;
        if self.trees.len() >= max_trees {
            self.limit_reached(format!(
                "trace limit reached ({max_trees} traces): no more are recorded"
            ));
            self.recording_failed(&key);
            return Ok(Recording::Resume(Position::start(key.anchor)));
        }
        let label = describe(self.program, &key);
        self.event(EventKind::TraceStarted {
            anchor: label.clone(),
            from: None,
        });
        let start = Instant::now();
        // The variables past 64 bits where the loop is entered: its code holds them boxed.
        let wide = wide_slots(&state.frame);
        let greens: Vec<Slot> = self.profile.greens_at(key.anchor).to_vec();
        let fold = self.folds_while_recording();
        let max_len = self.config.policy.max_trace_len;
        let program = self.program;
        // Its key is not traced again while it records (a call it makes may come to it).
        let arrivals = self.profile.arrivals(&key);
        self.profile.postpone(&key, u64::MAX);
        let mut steps = std::mem::replace(&mut self.steps, crate::state::Steps::new(None));
        let mut host = Driving {
            jit: self,
            key: Some(&key),
        };
        let recorded = match program.func_entered_at(key.anchor) {
            Some(func) if key.function => trace::record_function(
                program, state, func, &greens, &mut host, &mut steps, max_len, fold,
            ),
            _ => trace::record(
                program, state, key.anchor, &greens, &mut host, &mut steps, max_len, fold,
            ),
        };
        self.steps = steps;
        self.profile.postpone(&key, arrivals);
        self.stats.record_time += start.elapsed();
        match recorded? {
            Recorded::Stopped(v) => Ok(Recording::Stopped(v)),
            Recorded::Aborted { reason, at } => Ok(self.root_aborted(&key, label, reason, at)),
            Recorded::Loop(trace) => Ok(self.root_recorded(key, label, trace, wide)),
        }
    }

    /// A root trace's recording at `key` was abandoned; interpretation goes on at `at`.
    pub(super) fn root_aborted(
        &mut self,
        key: &Key,
        label: String,
        reason: AbortReason,
        at: Position,
    ) -> Recording {
        if self.config.dumps.trace {
            let _ = writeln!(self.dump, "# trace aborted at {label}: {reason}");
        }
        self.event(EventKind::TraceAborted {
            at: label.clone(),
            reason: reason.to_string(),
        });
        self.recording_failed(key);
        self.stats.aborts.push((label, reason));
        Recording::Resume(at)
    }

    /// The loop at `key` closed with `trace`: optimized, it becomes the root of a new tree,
    /// compiled; rejected, the key counts a failed recording.
    pub(super) fn root_recorded(
        &mut self,
        key: Key,
        label: String,
        trace: trace::Trace,
        wide: Vec<Slot>,
    ) -> Recording {
        debug_assert_eq!(trace::verify::verify(&trace), Ok(()));
        let index = self.trees.len();
        if self.config.keep {
            self.kept.recorded.insert((index, None), trace.clone());
        }
        if self.config.dumps.trace {
            let what = trace.what();
            let _ = writeln!(self.dump, "# trace {index}: {what} at {label}");
            self.dump.push_str(&print::articles(self.program, &trace));
        }
        let start = Instant::now();
        let optimized = self.optimize_root(&trace);
        let took = start.elapsed();
        self.stats.opt_time += took;
        let (root, generic) = match optimized {
            Ok(optimized) => optimized,
            Err(rejected) => {
                // The loop closed, so the frame is at the anchor: interpret on, and treat
                // the key as a failed recording.
                if self.config.dumps.opt {
                    let _ = writeln!(self.dump, "# opt {index}: {rejected}");
                }
                self.event(EventKind::Rejected {
                    at: label.clone(),
                    reason: rejected.reason().to_string(),
                });
                self.recording_failed(&key);
                self.stats.rejected.push((label, rejected));
                return Recording::Resume(Position::start(key.anchor));
            }
        };
        if self.config.dumps.opt {
            let what = trace.what();
            let _ = writeln!(self.dump, "# opt {index}: {what} at {label}");
            if let Some(why) = &generic {
                let _ = writeln!(
                    self.dump,
                    "# (its body assumes nothing of the preamble: peeled, {})",
                    why.reason()
                );
            }
            let listing =
                self.optimized_listing(&[Segment::root(&root)], (&wide, Tuning::DEFAULT), true, 0);
            self.dump.push_str(&listing);
        }
        if let Some(why) = generic {
            self.stats.generic.push((label, why));
        }
        self.event(EventKind::Optimized {
            tree: index,
            bridge: None,
            recorded: trace.insts.len(),
            optimized: root.insts.len(),
            micros: events::micros(took),
        });
        self.stats.count_heap(&trace, &root);
        self.profile.set_trace(&key, index);
        self.trees.push(Tree::new(key, root, wide));
        self.compile(index, None);
        Recording::Tree(index)
    }

    /// Whether the recorder folds operations on constants as it records
    /// (`trace::record`'s `fold`): when the optimizer's `fold` pass runs, which would fold
    /// them anyway; `--no-opt` records everything.
    pub(super) fn folds_while_recording(&self) -> bool {
        self.config.passes.contains(&opt::Pass::Fold)
    }

    /// Optimizes a recorded loop: its root trace, and the rejection that made its body
    /// assume nothing of the preamble, if one did. A loop whose recorded iteration cannot
    /// follow itself (two ways that alternate: what the first iteration leaves contradicts
    /// a guard of the peeled second) is still a loop: its body is then optimized again
    /// assuming nothing of what the preamble leaves (`opt::optimize_generic`), and its
    /// other way becomes a bridge. A `guard_value` that fails is the articles' case
    /// instead: a promoted value (an interpreter's pc without a merge point) that is
    /// another in each iteration, so that no loop exists at this key.
    fn optimize_root(
        &self,
        trace: &trace::Trace,
    ) -> Result<(trace::Trace, Option<opt::Rejected>), opt::Rejected> {
        let passes = &self.config.passes;
        if trace.function.is_some() {
            // No loop to peel: a function trace is optimized as a bridge is.
            let passes: Vec<opt::Pass> = (passes.iter().copied())
                .filter(|p| *p != opt::Pass::Peel)
                .collect();
            return Ok((self.optimize(trace, &passes)?, None));
        }
        let rejected = match self.optimize(trace, passes) {
            Ok(t) => return Ok((t, None)),
            Err(rejected) => rejected,
        };
        let alternates = matches!(
            rejected,
            opt::Rejected::GuardOnConstant { .. } | opt::Rejected::Contradiction { .. }
        );
        if !alternates || !passes.contains(&opt::Pass::Peel) {
            return Err(rejected);
        }
        let counted = self.config.max_steps.is_some();
        let t = opt::optimize_generic(trace, passes, counted)?;
        Ok((self.finish_optimizing(t, passes)?, Some(rejected)))
    }

    /// Optimizes `trace` with `passes`, counting operations exactly under `--max-steps`.
    pub(super) fn optimize(
        &self,
        trace: &trace::Trace,
        passes: &[opt::Pass],
    ) -> Result<trace::Trace, opt::Rejected> {
        let t = if self.config.max_steps.is_some() {
            opt::optimize_counted(trace, passes)?
        } else {
            opt::optimize(trace, passes)?
        };
        self.finish_optimizing(t, passes)
    }

    /// What [`Jit::optimize`] does after the passes: the snapshots' dead variables go, and
    /// what only they used.
    fn finish_optimizing(
        &self,
        t: trace::Trace,
        passes: &[opt::Pass],
    ) -> Result<trace::Trace, opt::Rejected> {
        // What only dead variables of the snapshots used goes too.
        let program = self.program;
        let t = opt::prune_dead_entries(t, &|pos| program.live_at(pos.block, pos.inst));
        if passes.contains(&opt::Pass::Dce) {
            opt::dce::run(t)
        } else {
            Ok(t)
        }
    }
}
