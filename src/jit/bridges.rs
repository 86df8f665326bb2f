//! Bridges: whether a guard that exits gets one, recording it from the guard's exit to an
//! anchor, and attaching it to its tree, compiled on its own or in the tree's function.

use std::fmt::Write as _;
use std::time::Instant;

use flowjit_runtime::Value;

use crate::backend::{self, Segment, TreeInst};
use crate::interp::RuntimeError;
use crate::lang::{Inst as Stmt, Slot, Terminator};
use crate::resume::Snapshot;
use crate::state::{Position, State};
use crate::trace::{self, print, Kind, Opnd, Recorded, Ref};

use super::{events, Bridge, EventKind, GuardRef, Jit, Next};

impl Jit<'_> {
    /// The variable a `guard_value` promotes (from the `promote` statement it was recorded
    /// from); `None` for any other guard, and for a `guard_value` on a merge point's green.
    pub(super) fn promoted_var(&self, inst: &trace::Inst) -> Option<Slot> {
        if inst.kind != Kind::GuardValue {
            return None;
        }
        let origin = inst.origin?;
        let block = self.program.block(origin.block);
        match (block.insts.get(origin.inst), &block.term) {
            (Some(Stmt::Promote(slot)), _) => Some(*slot),
            (None, Terminator::Promote { var, .. }) => Some(*var),
            _ => None,
        }
    }

    /// Whether tree `t` has few ways out: at most [`super::Policy::max_tree_ways`] of its
    /// guards have exited so far. Only such a tree gets a bridge compiled in its function:
    /// the other way of a loop whose two ways alternate, or a Brainfuck loop's end, not the
    /// first of many ways (`benches/cliffs/branchy400.fg`), each of which costs an exit and
    /// an entry whether or not that one is in the tree's function.
    fn few_ways(&self, t: usize) -> bool {
        self.trees[t].ways <= self.config.policy.max_tree_ways
    }

    /// Whether a bridge should be recorded now from guard `from` of tree `t`, whose exit
    /// found the promoted variable holding `value` (for a promotion), and for which value:
    /// `Some(Some(v))` for a bridge specialized on `v`, `Some(None)` for a bridge that is
    /// not specialized (from a `guard_true` or `guard_false`, or from a promotion that has
    /// seen more values than it specializes on: PyPy's and LuaJIT's answer to a megamorphic
    /// site, one generic path that costs about what no promotion costs).
    pub(super) fn bridge_wanted(
        &self,
        t: usize,
        from: TreeInst,
        value: Option<Value>,
    ) -> Option<Option<Value>> {
        let tree = &self.trees[t];
        let exits = self
            .stats
            .exits
            .get(&(t, from.segment, from.inst))
            .copied()
            .unwrap_or(0);
        let policy = &self.config.policy;
        let threshold = if self.profile.by_greens() {
            policy.merge_bridge_threshold
        } else {
            policy.bridge_threshold
        };
        let wanted = exits > threshold && tree.may_get_bridge(from, policy);
        let from_here = || tree.bridges.iter().filter(|b| b.from == from);
        let generic = from_here().any(|b| b.value.is_none());
        match value {
            _ if !wanted || generic => None,
            Some(v) if from_here().count() < policy.max_specializations => Some(Some(v)),
            _ => Some(None),
        }
    }

    /// Records a bridge from guard `from` of tree `t`, whose exit left the frame at `pos`;
    /// for a `guard_value`, specialized on `value`. Recording runs the program to the
    /// bridge's end (an anchor): the result says where the interpreter (or a tree) goes on.
    pub(super) fn record_bridge(
        &mut self,
        t: usize,
        from: TreeInst,
        value: Option<Value>,
        pos: Position,
        state: &mut State,
    ) -> Result<Next, RuntimeError> {
        // A call its recording makes came back to the guard: the interpreter goes on.
        if self.bridging.contains(&(t, from)) {
            return Ok(Next::Resume(pos));
        }
        let fixed = self.bridge_constants(t, from, value.as_ref());
        let snap = self.trees[t].guard_snapshot(from);
        let (inherited, rebuilt) = bridge_inputs(snap);
        let calls = snap.frames.clone();
        let guard = guard_ref(t, from);
        self.event(EventKind::TraceStarted {
            anchor: self.program.label(pos.block).to_string(),
            from: Some(guard),
        });
        let start = Instant::now();
        let fold = self.folds_while_recording();
        let policy = &self.config.policy;
        let max_len = policy.max_trace_len * policy.bridge_length_factor;
        let (program, function) = (self.program, self.trees[t].root.function);
        let mut steps = std::mem::replace(&mut self.steps, crate::state::Steps::new(None));
        self.bridging.push((t, from));
        let mut host = super::record::Driving {
            jit: self,
            key: None,
        };
        let recorded = trace::record_bridge(
            program,
            state,
            pos,
            &fixed,
            (&inherited, &rebuilt, &calls),
            &mut host,
            &mut steps,
            max_len,
            fold,
            function,
        );
        self.bridging.pop();
        self.steps = steps;
        self.stats.record_time += start.elapsed();
        match recorded? {
            Recorded::Stopped(v) => Ok(Next::Stopped(v)),
            Recorded::Aborted { reason, at } => {
                self.bridge_failed(t, from);
                let label = format!("a bridge from {guard}");
                self.event(EventKind::TraceAborted {
                    at: label.clone(),
                    reason: reason.to_string(),
                });
                self.stats.aborts.push((label, reason));
                Ok(Next::Resume(at))
            }
            Recorded::Loop(trace) => {
                // Whether it comes back to its own tree's anchor.
                let key = self.profile.key_at(trace.anchor, &state.frame);
                let returns = key.as_ref() == Some(&self.trees[t].key);
                Ok(self.bridge_recorded(t, from, value, trace, returns))
            }
        }
    }

    /// The variables a bridge from guard `from` of tree `t` holds as constants from its
    /// recording on (the recorder's fixed values): the promoted variable, for a bridge
    /// specialized on `value`; the guard's snapshot's constants; and the greens.
    fn bridge_constants(
        &self,
        t: usize,
        from: TreeInst,
        value: Option<&Value>,
    ) -> Vec<(Slot, Value)> {
        let tree = &self.trees[t];
        let guard = &tree.segment(from.segment).insts[from.inst];
        let mut fixed: Vec<(Slot, Value)> = match (value, self.promoted_var(guard)) {
            (Some(v), Some(slot)) => vec![(slot, v.clone())],
            _ => Vec::new(),
        };
        // The guard's snapshot is complete: the bridge reads every variable it gives (so
        // that the bridge's snapshots are complete too), and those it gives as constants
        // are constants in the bridge from its recording on.
        let snap = tree.guard_snapshot(from);
        let given = snap
            .entries
            .iter()
            .filter_map(|(slot, o)| o.as_const().map(|v| (*slot, v)));
        // A green variable the snapshot does not give still holds the value the tree was
        // entered with, its key's: a constant in the bridge too (the bytecode of an
        // interpreter written in the flowgraph language, so that the bridge's dispatch
        // folds away as the root's does).
        let greens = (self.profile.greens_at(tree.key.anchor).iter())
            .zip(&tree.key.greens)
            .filter(|(g, _)| snap.get(**g).is_none())
            .map(|(g, v)| (*g, v));
        for (slot, v) in given.chain(greens) {
            if fixed.iter().all(|(s, _)| *s != slot) {
                fixed.push((slot, v.clone()));
            }
        }
        fixed
    }

    /// Counts a failed recording of a bridge from guard `from` of tree `t`.
    pub(super) fn bridge_failed(&mut self, t: usize, from: TreeInst) {
        *self.trees[t].failures.entry(from).or_default() += 1;
    }

    /// A bridge from guard `from` of tree `t` reached an anchor with `trace` (its tree's
    /// own, if it `returns`): optimized, it is attached to the tree and compiled. The
    /// interpreter goes on at its end.
    pub(super) fn bridge_recorded(
        &mut self,
        t: usize,
        from: TreeInst,
        value: Option<Value>,
        mut trace: trace::Trace,
        returns: bool,
    ) -> Next {
        // Where the bridge ends: the start of an anchor, or a function trace's `return`.
        let end = trace.end();
        let guard = guard_ref(t, from);
        let label = format!("a bridge from {guard}");
        // What the tree knew at the guard of the values its snapshot gives holds where the
        // bridge starts.
        trace.known =
            crate::opt::bounds::known_at_guard(self.trees[t].segment(from.segment), from.inst);
        let passes: Vec<crate::opt::Pass> = (self.config.passes.iter().copied())
            .filter(|p| *p != crate::opt::Pass::Peel)
            .collect();
        let start = Instant::now();
        let optimized = self.optimize(&trace, &passes);
        let took = start.elapsed();
        self.stats.opt_time += took;
        let recorded = trace;
        let trace = match optimized {
            Ok(t) => t,
            Err(rejected) => {
                self.bridge_failed(t, from);
                self.event(EventKind::Rejected {
                    at: label.clone(),
                    reason: rejected.reason().to_string(),
                });
                self.stats.rejected.push((label, rejected));
                return Next::Resume(end);
            }
        };
        self.stats.count_heap(&recorded, &trace);
        let number = self.trees[t].bridges.len();
        if self.config.keep {
            (self.kept.recorded).insert((t, Some(number)), recorded.clone());
        }
        self.event(EventKind::Optimized {
            tree: t,
            bridge: Some(number),
            recorded: recorded.insts.len(),
            optimized: trace.insts.len(),
            micros: events::micros(took),
        });
        let separate = self.compiles_alone(t, from, value.is_none(), returns);
        let segment = Segment {
            trace: &trace,
            parent: Some(from),
            value: value.as_ref(),
            returns,
            cost: 0,
            separate: false,
            wide: &[],
        };
        self.dump_bridge(number, guard, segment, separate);
        if !separate && self.function_full(t, from, trace.insts.len()) {
            return Next::Resume(end);
        }
        let bridge = Bridge {
            from,
            value,
            trace,
            returns,
            separate,
            code: None,
            moving_in: false,
            wide: Vec::new(),
        };
        self.attach_bridge(t, bridge);
        Next::Resume(end)
    }

    /// Prints bridge `number`, from `guard`, for `--dump trace` and `--dump opt`: its
    /// `segment` of the tree, compiled on its own (`separate`) or in the tree's function.
    fn dump_bridge(&mut self, number: usize, guard: GuardRef, segment: Segment, separate: bool) {
        if !self.config.dumps.trace && !self.config.dumps.opt {
            return;
        }
        let (trace, value) = (segment.trace, segment.value);
        let tree = &self.trees[guard.tree];
        let promotion = self
            .promoted_var(&tree.segment(guard.segment).insts[guard.inst])
            .is_some();
        let header = format!(
            "# bridge {number} from {guard} to {}{}",
            self.program.label(trace.anchor),
            match value {
                Some(v) => format!(", for {}", flowjit_runtime::ops::shown_within(v, 24)),
                None if promotion => ", unspecialized".to_string(),
                None => String::new(),
            },
        );
        if self.config.dumps.trace {
            let _ = writeln!(self.dump, "{header}");
            self.dump.push_str(&print::articles(self.program, trace));
        }
        if self.config.dumps.opt {
            let _ = writeln!(self.dump, "{header}");
            // As it is compiled first: on its own (also a bridge that moves into its tree's
            // function once that is compiled on the compiler thread), its inputs read from
            // the frame; or with the segments of the tree's function, where its inputs are
            // its guard's values.
            let tree = &self.trees[guard.tree];
            let listing = if separate || self.config.background {
                self.optimized_listing(&[segment.on_its_own()], tree.machine(), false, 0)
            } else {
                let mut segments = tree.next_segments();
                segments.push(segment);
                self.optimized_listing(&segments, tree.machine(), true, segments.len() - 1)
            };
            self.dump.push_str(&listing);
        }
    }

    /// Whether a new bridge from guard `from` of tree `t` (`generic`: not specialized on a
    /// value; `returns`: ending at the tree's own anchor) is compiled on its own. It is
    /// where its guard's exit can go there (`backend::lower::linkable`) and it is generic,
    /// unless it comes back to its own anchor as one of the first such bridges of a tree
    /// with few ways out ([`super::Policy::max_tree_bridges`], `few_ways`); and always where
    /// its guard is in a bridge compiled on its own. Otherwise it is compiled in the tree's
    /// function, compiled again.
    fn compiles_alone(&self, t: usize, from: TreeInst, generic: bool, returns: bool) -> bool {
        let tree = &self.trees[t];
        let in_function = tree.bridges.iter().filter(|b| b.in_function()).count();
        let leaves_function =
            !returns || in_function >= self.config.policy.max_tree_bridges || !self.few_ways(t);
        // A function trace's bridges are in its function: a call enters that alone
        // (`backend::nested`).
        self.config.native
            && tree.root.function.is_none()
            && !tree.inside_calls(from)
            && (tree.unit_of(from.segment) != 0
                || (generic
                    && leaves_function
                    && backend::lower::linkable(tree.segment(from.segment), from.inst)))
    }

    /// Whether tree `t`'s function is too full to take a bridge of `size` instructions from
    /// guard `from`: a tree's function compiled again for each bridge in it costs what the
    /// whole function does, so past [`super::Policy::max_tree_function`] it takes no more,
    /// and the guard gets no more attempts (its exits stay exits).
    fn function_full(&mut self, t: usize, from: TreeInst, size: usize) -> bool {
        let tree = &self.trees[t];
        let in_tree: usize = (tree.next_segments().iter())
            .filter(|s| !s.separate)
            .map(|s| s.trace.insts.len())
            .sum();
        let policy = self.config.policy;
        let full = policy.max_tree_function;
        if !self.config.native || in_tree + size <= full {
            return false;
        }
        self.trees[t]
            .failures
            .insert(from, policy.max_bridge_failures);
        self.limit_reached(format!(
            "trace {t}'s function is full ({full} instructions): \
             bridges that would be compiled in it are left out"
        ));
        true
    }

    /// Attaches `bridge` to tree `t` and compiles it: on its own when it is `separate`,
    /// else in the tree's function, compiled again. With the compiler thread, a bridge for
    /// the tree's function stays out of it (its guard exits to the interpreter) until the
    /// function is compiled with it ([`Bridge::moving_in`]).
    fn attach_bridge(&mut self, t: usize, mut bridge: Bridge) {
        let separate = bridge.separate;
        self.event(EventKind::BridgeAttached {
            bridge: self.trees[t].bridges.len(),
            from: guard_ref(t, bridge.from),
            // Shortened: a promoted array may print as gigabytes.
            value: bridge.value.as_ref().map(flowjit_runtime::ops::shown),
            to: self.program.label(bridge.trace.anchor).to_string(),
            separate,
        });
        bridge.moving_in = !separate && self.config.background;
        bridge.separate = separate || bridge.moving_in;
        self.trees[t].bridges.push(bridge);
        let seg = self.trees[t].bridges.len();
        let max_bridges = self.config.policy.max_bridges;
        if seg == max_bridges {
            let what = format!("bridge limit reached at trace {t} ({max_bridges} bridges)");
            self.event(EventKind::Limit { what });
        }
        if separate {
            self.compile_bridge(t, seg);
        } else {
            self.compile(t, Some(seg));
        }
    }
}

/// Guard `at` (segment, instruction) of tree `t`, as events name it.
pub(super) fn guard_ref(t: usize, at: TreeInst) -> GuardRef {
    GuardRef {
        tree: t,
        segment: at.segment,
        inst: at.inst,
    }
}

/// What a bridge from a guard whose snapshot is `snap` starts from: the variables it reads
/// (those the snapshot gives), and the arrays it makes again itself (`trace::Rebuilt`):
/// each virtual array that only variables hold (no pending store, no other array, no
/// inlined call's frame), whose elements are constants or values that variables hold.
/// An array held otherwise is read, as the exit builds it.
pub(super) fn bridge_inputs(snap: &Snapshot) -> (Vec<Slot>, Vec<trace::Rebuilt>) {
    let virtual_at = |o: &Opnd| match o {
        Opnd::Ref(r) => snap.virtuals.iter().any(|v| v.at == *r),
        Opnd::Const(_) => false,
    };
    let elsewhere = |at: Ref| {
        let here = |o: &Opnd| *o == Opnd::Ref(at);
        (snap.stores.iter()).any(|st| here(&st.array) || here(&st.index) || here(&st.value))
            || (snap.virtuals.iter()).any(|v| v.fields.iter().any(here))
            || (snap.frames.iter()).any(|f| f.entries.iter().any(|(_, o)| here(o)))
    };
    let mut rebuilt = Vec::new();
    for v in snap.virtuals.iter().filter(|v| !elsewhere(v.at)) {
        let fields: Option<Vec<trace::Element>> = (v.fields.iter())
            .map(|f| match f {
                Opnd::Const(c) => Some(trace::Element::Const(c.clone())),
                f if virtual_at(f) => None,
                f => (snap.entries.iter())
                    .find(|(_, o)| o == f)
                    .map(|(s, _)| trace::Element::Var(*s)),
            })
            .collect();
        let slots: Vec<Slot> = (snap.entries.iter())
            .filter(|(_, o)| *o == Opnd::Ref(v.at))
            .map(|(s, _)| *s)
            .collect();
        if let Some(fields) = fields.filter(|_| !slots.is_empty()) {
            rebuilt.push(trace::Rebuilt { slots, fields });
        }
    }
    let inherited = (snap.entries.iter())
        .map(|(slot, _)| *slot)
        .filter(|s| !rebuilt.iter().any(|r| r.slots.contains(s)))
        .collect();
    (inherited, rebuilt)
}
