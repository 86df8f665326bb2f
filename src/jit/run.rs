//! Running trees: a segment at a time, in machine code or on the trace interpreter, and
//! what each exit leads to (a bridge, another tree, a link between them, code compiled
//! again with fewer assumptions, or the interpreter).

use std::fmt::Write as _;
use std::time::Instant;

use crate::backend::{self, TreeCode, TreeInst};
use crate::interp::RuntimeError;
use crate::lang::{BlockId, FuncId, Slot};
use crate::state::{Frame, Position, State, MAX_CALL_DEPTH};
use crate::trace::{self, Kind};
use flowjit_runtime::abi::Repr;

use super::bridges::guard_ref;
use super::{describe, EventKind, Jit, Next, SegmentExit, Tree};

/// Where the run of a tree goes on after an exit.
enum Then {
    /// In segment `seg` of tree `tree`, from `at`.
    Run {
        tree: usize,
        seg: usize,
        at: Position,
    },
    /// Out of the trees.
    Leave(Next),
}

/// The interpreter goes on at `pos`.
fn leave(pos: Position) -> Then {
    Then::Leave(Next::Resume(pos))
}

impl Jit<'_> {
    /// The tree anchored at the start of `block`, for the frame's greens.
    fn tree_at(&self, block: BlockId, frame: &Frame) -> Option<usize> {
        self.profile.lookup(&self.profile.key_at(block, frame)?)
    }

    /// Runs tree `t` (the frame is at its anchor) and the trees its bridges lead to, until
    /// an exit without a bridge. With `only`, no bridge is recorded and no other tree is
    /// entered (the articles' `do_trace`).
    pub(super) fn run_tree(
        &mut self,
        mut t: usize,
        state: &mut State,
        only: bool,
    ) -> Result<Next, RuntimeError> {
        let mut seg = 0;
        let mut here = Position::start(self.trees[t].key.anchor);
        loop {
            self.collect();
            let Some((exited, pos, at)) = self.run_segment(t, seg, state) else {
                return Ok(Next::Resume(here));
            };
            // The program ended inside a call the trace made.
            if let Some(end) = self.ended.take() {
                return end.map(Next::Stopped);
            }
            // Machine code may have gone on from tree to tree (`backend::lower::linkable`):
            // `exited` is the tree whose instruction `at` exited.
            let Some(at) = at else {
                return Ok(Next::Resume(pos));
            };
            match self.after_exit(exited, at, pos, state, only)? {
                Then::Run { tree, seg: s, at } => (t, seg, here) = (tree, s, at),
                Then::Leave(next) => return Ok(next),
            }
        }
    }

    /// Where the run goes on after instruction `at` (segment, instruction) of tree `t`
    /// exited, the frame at `pos`.
    fn after_exit(
        &mut self,
        t: usize,
        at: TreeInst,
        pos: Position,
        state: &mut State,
        only: bool,
    ) -> Result<Then, RuntimeError> {
        let exits = self.count_exit(t, at);
        let kind = self.trees[t].segment(at.segment).insts[at.inst].kind;
        self.exits_without_bridge(t, at, exits);
        let big = big_result(self.program, &self.trees[t], at, &state.frame, Some(pos));
        if self.stop_assuming_ints(t, kind, exits) || self.hold_wide(t, at, exits, big) {
            return Ok(leave(pos));
        }
        let function = self.trees[t].root.function.is_some();
        match kind {
            // A bridge, or a function's entry trace, ended at an anchor: enter the tree there.
            Kind::Loop if at.segment > 0 || function => {
                // (Not at a `return` its bridge ended at.)
                let next =
                    (self.tree_at(pos.block, &state.frame)).filter(|_| !only && pos.inst == 0);
                Ok(self.enter_linked(t, at, next, pos))
            }
            _ if !only && self.trees[t].bridges_from(at) => self.guard_failed(t, at, pos, state),
            _ => Ok(leave(pos)),
        }
    }

    /// An instruction of tree `t` has exited `exits` times: past
    /// [`super::Policy::max_function_exits`], a function trace's instruction that no bridge
    /// takes (not a guard, nor the trace's end: at a `return`, the code ran the whole call,
    /// and the code of a loop's tree goes on at an entry trace's) leaves the function to
    /// the interpreter. Exits of a bridge that its tree's function does not hold yet, run
    /// on the trace interpreter meanwhile, do not count.
    fn exits_without_bridge(&mut self, t: usize, at: TreeInst, exits: u64) {
        let tree = &self.trees[t];
        let policy = &self.config.policy;
        let guard = tree.bridges_from(at) && tree.may_get_bridge(at, policy);
        let end = tree.segment(at.segment).insts[at.inst].kind == Kind::Loop;
        let limit = self.config.policy.max_function_exits;
        // Once left, its key has no trace.
        let left = self.profile.lookup(&tree.key) != Some(t);
        let compiled =
            (tree.code_of(at.segment)).is_some_and(|c| c.global(at.segment, at.inst).is_some());
        // Code on its way from the compiler thread may take them (held wide, a bridge).
        if tree.root.function.is_none()
            || !compiled
            || guard
            || end
            || left
            || tree.compiling
            || exits <= limit
        {
            return;
        }
        self.leave_to_interpreter(
            t,
            format!("a function trace's instruction exited {limit} times where no bridge can go on: its function left to the interpreter"),
        );
    }

    /// Makes tree `t`'s code, if it is a function trace's, what machine code's calls of
    /// its function enter directly (`backend::nested::FnCell`): when every exit of its
    /// code is its function's (no bridge has code of its own), and its key is still traced
    /// (`Calls::call` asks the same); otherwise nothing.
    pub(super) fn publish(&mut self, t: usize) {
        let tree = &self.trees[t];
        let (Some(func), Some(backend)) = (tree.root.function, self.backend.as_mut()) else {
            return;
        };
        let traced = self.profile.lookup(&tree.key) == Some(t);
        let alone =
            (1..=tree.bridges.len()).any(|s| tree.unit_of(s) != 0 && tree.code_of(s).is_some());
        let code = tree.code_of(0).filter(|_| traced && !alone);
        backend.publish(self.program, func, &tree.key.greens, code, tree.calls());
    }

    /// Tree `t`'s key is never entered or traced again, for the reason `why` (`--stats`).
    fn leave_to_interpreter(&mut self, t: usize, why: String) {
        let key = self.trees[t].key.clone();
        self.profile.forget(&key);
        self.publish(t);
        let anchor = describe(self.program, &key);
        self.event(EventKind::Blacklisted { anchor });
        self.limit_reached(why);
    }

    /// Counts an exit of instruction `at` of tree `t`, and a way out of the tree at its
    /// first; the exits so far.
    fn count_exit(&mut self, t: usize, at: TreeInst) -> u64 {
        let exits = self
            .stats
            .exits
            .entry((t, at.segment, at.inst))
            .or_default();
        *exits += 1;
        if *exits == 1 {
            self.trees[t].ways += 1;
        }
        *exits
    }

    /// A read that exits again and again (an instruction of `kind` that has exited `exits`
    /// times): its array may have stopped holding only integers (an atom stored in it),
    /// which the code assumed (`backend::Tuning::ints`), or the one bounds check of all the offsets
    /// the segment reads around a pointer (`Lower::check_index`) fails where the pointer is
    /// near an end of the array, though the access it is made at would not. Likewise an
    /// addition or subtraction whose overflow check that bounds check stands for
    /// (`Lower::checked_by_access`), whose exit it takes. Compiles tree `t`'s code again
    /// (its function and its bridges on their own), checking tags instead, and each read's
    /// own index; whether it did.
    fn stop_assuming_ints(&mut self, t: usize, kind: Kind, exits: u64) -> bool {
        let read = matches!(
            kind,
            Kind::GetItem | Kind::Op(flowjit_runtime::Op::Add | flowjit_runtime::Op::Sub)
        );
        if !(read && exits > self.config.policy.bridge_threshold && self.trees[t].tuning.ints) {
            return false;
        }
        self.trees[t].tuning.ints = false;
        self.compile(t, None);
        for seg in 1..=self.trees[t].bridges.len() {
            // Not those on their way into the function (`Bridge::moving_in`): their old code
            // stays correct until then, its checks exiting.
            let b = &self.trees[t].bridges[seg - 1];
            if b.separate && !b.moving_in {
                self.compile_bridge(t, seg);
            }
        }
        true
    }

    /// A read of an element, a call or arithmetic, of a 64-bit integer in tree `t`'s code,
    /// that exits again and again (`exits` times, instruction `at`), this time having met an
    /// integer past 64 bits (`big`, [`big_result`]): as for a variable (`Jit::widen`), the
    /// code is compiled again holding that result as an integer of any size
    /// (`Segment::wide`), once per instruction; whether it was. Code holding one may not be
    /// entered again while it runs (`Compiled::reentrant`), which direct calls and loops
    /// inside calls need: an exit for another cause (an element of another type, an index
    /// outside, a division by zero, a call's exit for the driver's sake) holds nothing wide.
    /// Reads first stop assuming that arrays hold only integers
    /// (`Jit::stop_assuming_ints`), and no exit counts for this while that code is compiled.
    fn hold_wide(&mut self, t: usize, at: TreeInst, exits: u64, big: bool) -> bool {
        let tree = &mut self.trees[t];
        let (kind, ty) = {
            let inst = &tree.segment(at.segment).insts[at.inst];
            (inst.kind, inst.ty)
        };
        let (compiling, ints) = (tree.compiling, tree.tuning.ints);
        let wide = tree.wide_results(at.segment);
        // Not while the tree's new code is on its way from the compiler thread: its exits
        // are the old code's, whose assumptions (`Tuning::ints`) the new one may have dropped.
        if !(crate::opt::repr::may_hold_wide(kind)
            && big
            && !compiling
            && ty == trace::Ty::Int
            && exits > self.config.policy.bridge_threshold
            && self.config.native
            && !(kind == Kind::GetItem && ints)
            && !wide.contains(&at.inst))
        {
            return false;
        }
        wide.push(at.inst);
        if at.segment > 0 && self.trees[t].bridges[at.segment - 1].separate {
            self.compile_bridge(t, at.segment);
        } else {
            self.compile(t, None);
        }
        true
    }

    /// Guard `at` of tree `t` failed, the frame at `pos`: the run goes on in its bridge
    /// for the value it found, or in a bridge recorded now, or in the tree where that
    /// bridge ends; otherwise in the interpreter.
    fn guard_failed(
        &mut self,
        t: usize,
        at: TreeInst,
        pos: Position,
        state: &mut State,
    ) -> Result<Then, RuntimeError> {
        let inst = &self.trees[t].segment(at.segment).insts[at.inst];
        // A guard inside inlined calls gets one bridge, for every value: it starts in their
        // frames (`trace::record_bridge`), which only the tree's function holds.
        let framed = self.trees[t].inside_calls(at);
        let promoted = self.promoted_var(inst);
        let value = promoted
            .filter(|_| !framed)
            .and_then(|slot| state.frame[slot.index()].clone());
        if inst.kind == Kind::GuardValue && value.is_none() && !(framed && promoted.is_some()) {
            // Not a promotion: a green checked at a merge point. The frame is there, with
            // other greens: enter their tree, if any.
            let next = (self.tree_at(pos.block, &state.frame)).filter(|_| pos.inst == 0);
            return Ok(self.enter_linked(t, at, next, pos));
        }
        // A value with a bridge of its own goes there; any other value of a promotion goes
        // to its unspecialized bridge, if it has one.
        let tree = &self.trees[t];
        let bridge = tree
            .bridge(at, value.as_ref())
            .or_else(|| value.as_ref().and(tree.bridge(at, None)));
        if let Some(b) = bridge {
            if framed {
                // Its code is in the tree's function, compiled again (or failing to be).
                return Ok(leave(pos));
            }
            return Ok(Then::Run {
                tree: t,
                seg: b,
                at: pos,
            });
        }
        let Some(value) = self.bridge_wanted(t, at, value) else {
            return Ok(leave(pos));
        };
        match self.record_bridge(t, at, value, pos, state)? {
            Next::Resume(end) => {
                let next = (self.tree_at(end.block, &state.frame)).filter(|_| end.inst == 0);
                Ok(match next {
                    Some(next) => Then::Run {
                        tree: next,
                        seg: 0,
                        at: end,
                    },
                    None => leave(end),
                })
            }
            stopped => Ok(Then::Leave(stopped)),
        }
    }

    /// Goes on in tree `next`, if there is one, from `pos`, where the exit `at` of tree `t`
    /// left the frame: linked, so that next time the exit goes there directly.
    fn enter_linked(&mut self, t: usize, at: TreeInst, next: Option<usize>, pos: Position) -> Then {
        match next {
            Some(next) => {
                self.link(t, at, next);
                Then::Run {
                    tree: next,
                    seg: 0,
                    at: pos,
                }
            }
            None => leave(pos),
        }
    }

    /// Makes the exit at instruction `at` of tree `t`, after which the driver entered tree
    /// `next` right where it resumed, go on in `next`'s machine code directly next time:
    /// when both are machine code, the exit can ([`backend::lower::linkable`]), and `next`
    /// inlines calls no deeper than `t` (so that where `t` may run, `next` may too).
    fn link(&mut self, t: usize, at: TreeInst, next: usize) {
        let (from, to) = (&self.trees[t], &self.trees[next]);
        let (Some(code), Some(target)) = (from.code_of(at.segment), &to.code) else {
            return;
        };
        let trace = from.segment(at.segment);
        // A function trace's exits return to whoever called its code (`backend::nested`),
        // but for an entry trace's end, which may go on in its loop's tree when that code
        // may run inside a call (`Jit::enters_from_calls`).
        let function = to.root.function.is_some()
            || from
                .root
                .function
                .is_some_and(|f| !self.enters_from_calls(f, target));
        if function || !backend::lower::linkable(trace, at.inst) || to.calls() > from.calls() {
            return;
        }
        // `next` holds its greens as constants: the exit must give them those values every
        // time, as constants in its snapshot, or by leaving them as they were where `t`
        // was entered, its own key's.
        let snap = trace
            .snap_of(&trace.insts[at.inst])
            .expect("an exit has a snapshot");
        let greens = self.profile.greens_at(to.key.anchor);
        let same = |k: usize| match snap.get(greens[k]) {
            Some(o) => o.as_const() == Some(&to.key.greens[k]),
            // Of the same merge point, they are the same variables.
            None => {
                from.key.anchor == to.key.anchor
                    && from.key.greens.get(k) == Some(&to.key.greens[k])
            }
        };
        if !(0..to.key.greens.len()).all(same) {
            return;
        }
        let Some(g) = code.global(at.segment, at.inst) else {
            return;
        };
        // `next` does not check its inputs' kinds: the exit must leave them so.
        let Some(kinds) = code.exit_kinds(trace, at.segment, at.inst) else {
            return;
        };
        // What `next` counts on of the parameters an entry trace leaves as the call gave
        // them: its calls check it (`Jit::assume_params`).
        let params = self.params_assumed(t, at, target, &kinds);
        if !target.admits(&kinds) && params.is_empty() {
            // An integer the exit holds at any size where `next` holds a 64-bit one: `next`
            // holds it so too from now on, and the exit links to that code next time.
            let grown: Vec<Slot> = (kinds.iter())
                .filter(|&&(slot, kind)| kind == Repr::Num && target.assumes(slot, Repr::Int))
                .map(|&(slot, _)| slot)
                .filter(|slot| !to.wide.contains(slot))
                .collect();
            if !grown.is_empty() {
                self.hold_boxed(next, grown);
            }
            return;
        }
        code.link(g, target);
        let unit = from.unit_of(at.segment);
        self.trees[next].incoming.push((t, unit, g));
        self.stats.links += 1;
        if !params.is_empty() {
            if let Some(code) = self.trees[t].code.as_mut() {
                code.assume(&params);
            }
            self.publish(t);
        }
        let from = guard_ref(t, at);
        self.event(EventKind::Linked { from, to: next });
    }

    /// The kinds of parameters that `target`, the code a linkable exit `at` of function
    /// trace `t` leaving `kinds` in the mirror goes on in, counts on and which the exit
    /// does not write: the code of `t`'s function (unit 0) checks them at its calls from
    /// then on (`Compiled::assume`). Empty unless `target` admits the exit so and no more.
    fn params_assumed(
        &self,
        t: usize,
        at: TreeInst,
        target: &backend::Compiled,
        kinds: &[(Slot, Repr)],
    ) -> Vec<(Slot, Repr)> {
        let tree = &self.trees[t];
        let Some(func) = tree.root.function.filter(|_| tree.unit_of(at.segment) == 0) else {
            return Vec::new();
        };
        let params = &self.program.func(func).params;
        let missing: Vec<(Slot, Repr)> = (target.assumptions().iter())
            .filter(|k| !kinds.contains(k))
            .copied()
            .collect();
        let checkable = |&(slot, _): &(Slot, Repr)| {
            params.contains(&slot) && !kinds.iter().any(|(s, _)| *s == slot)
        };
        if missing.iter().all(checkable) {
            missing
        } else {
            Vec::new()
        }
    }

    /// Whether the code of function `func`'s trace, which calls enter, may go on in
    /// `code`, a loop's: calls of `func` prepare for it (`nested::goes_on_in_loops`: not a
    /// dispatch function), and `code` is code that calls may enter (Cranelift's,
    /// reentrant, counting no steps), of a program's own loop (found without greens),
    /// while every loop's code may run inside calls (`Calls::loop_tree`).
    pub(super) fn enters_from_calls(&self, func: FuncId, code: &backend::Compiled) -> bool {
        backend::nested::goes_on_in_loops(self.program, func)
            && !code.quick
            && code.enterable()
            && !self.unenterable
            && !self.profile.by_greens()
    }

    /// Runs segment `seg` of tree `t` (machine code runs the whole tree from the root, and
    /// may go on in other trees). Returns the tree that exited, where the interpreter
    /// continues and which instruction exited (`None` for a stop at the `--max-steps`
    /// budget or a refused entry); `None` if the segment cannot run here: the calls it
    /// inlined too deep, its code not yet back from the compiler thread, its code refusing
    /// the frame, or the budget too small for a bridge.
    fn run_segment(&mut self, t: usize, seg: usize, state: &mut State) -> Option<SegmentExit> {
        let tree = &self.trees[t];
        // The calls the tree inlined must fit under the depth limit here, as the
        // interpreter's would; where they do not, the interpreter runs (and raises the
        // error at the call that is one too many).
        let depth = state.depth + state.calls.len();
        if depth + tree.calls() > MAX_CALL_DEPTH {
            return None;
        }
        if seg == 0 {
            self.stats.entries += 1;
            *self.stats.tree_entries.entry(t).or_default() += 1;
        }
        let unit = tree.unit_of(seg);
        // Code on its way from the compiler thread: the interpreter goes on meanwhile.
        if self.config.native && tree.compiling && tree.code_of(seg).is_none() {
            return None;
        }
        if seg == unit {
            // In --mode jit a trace runs as machine code or not at all: where its code does
            // not accept the frame (an integer that left 64 bits), the interpreter goes on,
            // and after `Policy::max_refusals` such entries the tree's loop is left to it
            // for good.
            if let (Some(code), true) = (tree.code_of(seg), self.config.native) {
                if !code.accepts(&state.frame) {
                    // Code on its way from the compiler thread may be the code that accepts
                    // it (compiled holding boxed what grew): no refusal counts meanwhile.
                    if !self.widen(t, seg, &state.frame) && !self.trees[t].compiling {
                        self.refused(t);
                    }
                    return None;
                }
            }
            if let Some(exit) = self.run_native(t, unit, state) {
                return Some(exit);
            }
        }
        self.run_on_trace_interpreter(t, seg, state)
    }

    /// Runs unit `unit` of tree `t` (its function, or a bridge compiled on its own) in
    /// machine code, if it has code; `None` if it has none, or the code did not run.
    fn run_native(&mut self, t: usize, unit: usize, state: &mut State) -> Option<SegmentExit> {
        self.trees[t].code_of(unit)?;
        let backend = self.backend.as_mut()?;
        let start = Instant::now();
        let trees = &self.trees;
        let find = |at: (usize, usize)| tree_code(trees, at);
        let calls = Calls {
            program: self.program,
            profile: &self.profile,
            trees,
            entry: backend.entry(),
            policy: &self.config.policy,
            fold: self.config.passes.contains(&crate::opt::Pass::Fold),
            exits: Default::default(),
            seen: &self.stats.exits,
            bridges: Default::default(),
            attention: Default::default(),
            counts: Default::default(),
            room: trees.len() < self.config.policy.max_trees,
            functions: Default::default(),
            recording: Default::default(),
            finishes: backend.finishes(),
            loops: !self.unenterable,
            native: Default::default(),
            big: Default::default(),
            links: Default::default(),
        };
        let exit = backend.run(
            (t, unit),
            &find,
            self.program,
            state,
            &mut self.steps,
            Some(&calls),
        );
        self.stats.native_time += start.elapsed();
        self.stats.record_time += calls.recording.get();
        let exits = (calls.exits.into_inner(), calls.big.into_inner());
        let bridges = calls.bridges.into_inner();
        let (counts, functions) = (calls.counts.into_inner(), calls.functions.into_inner());
        let (native, links) = (calls.native.into_inner(), calls.links.into_inner());
        for (t, at, next) in links {
            self.link(t, at, next);
        }
        self.after_calls(exits, bridges);
        self.after_function_calls(counts, functions);
        for (t, at, hot) in native {
            self.after_native_exit(t, at, hot);
        }
        let mut exit = exit?;
        self.ended = exit.ended.take();
        self.stats.native_entries += 1;
        self.stats.native_allocations += exit.allocated;
        self.stats.calls_made += exit.calls;
        self.stats.calls_entered += exit.entered;
        self.stats.calls_helped += exit.helped;
        if self.stats.first_native.is_none() {
            self.stats.first_native = Some(start.duration_since(self.started));
        }
        let at = exit.at.filter(
            |&TreeInst {
                 segment: s,
                 inst: i,
             }| {
                let inst = &self.trees[exit.tree].segment(s).insts[i];
                // A stop at the budget, or the loop's entry check failing.
                !(matches!(inst.kind, Kind::Loop | Kind::LoopStart) && s == 0)
            },
        );
        self.after_native_exit(exit.tree, exit.at, exit.hot);
        Some((exit.tree, exit.pos, at))
    }

    /// What the calls machine code made into function traces leave the driver: their
    /// exits, counted, and the bridges recorded from their guards, attached.
    fn after_calls(
        &mut self,
        (exits, big_calls): (CallExits, rustc_hash::FxHashSet<(usize, TreeInst)>),
        bridges: Vec<(usize, TreeInst, Option<trace::Trace>)>,
    ) {
        for ((t, at), n) in exits {
            let counted = self
                .stats
                .exits
                .entry((t, at.segment, at.inst))
                .or_default();
            *counted += n;
            let exits = *counted;
            // As for an exit the driver sees (`Jit::after_exit`).
            let kind = self.trees[t].segment(at.segment).insts[at.inst].kind;
            if !self.stop_assuming_ints(t, kind, exits) {
                let big = big_calls.contains(&(t, at));
                self.hold_wide(t, at, exits, big);
            }
            self.exits_without_bridge(t, at, exits);
        }
        for (t, from, recorded) in bridges {
            match recorded {
                Some(trace) => {
                    self.bridge_recorded(t, from, None, trace, false);
                }
                None => self.bridge_failed(t, from),
            }
        }
    }

    /// What the calls machine code made of functions whose traces had no code leave the
    /// driver: their counts, added to the profile's, and the function traces recorded at
    /// them, each made a tree as the driver's own recordings are ([`Jit::record`]).
    fn after_function_calls(
        &mut self,
        counts: impl IntoIterator<Item = (super::Key, u64)>,
        functions: Vec<(super::Key, FunctionRecording)>,
    ) {
        for (key, n) in counts {
            self.profile.count_calls(&key, n);
        }
        for (key, recorded) in functions {
            let label = describe(self.program, &key);
            self.event(EventKind::TraceStarted {
                anchor: label.clone(),
                from: None,
            });
            match recorded {
                Ok((trace, wide)) => {
                    self.root_recorded(key, label, trace, wide);
                }
                Err(reason) => {
                    let at = Position::start(key.anchor);
                    self.root_aborted(&key, label, reason, at);
                }
            }
        }
    }

    /// What an exit of machine code asks of the driver: a loop whose entry check failed
    /// counts it, a loop that ran its count in the quick backend's code is compiled by
    /// Cranelift, and a bridge on its own entered often moves into its tree's function.
    fn after_native_exit(&mut self, t: usize, at: Option<TreeInst>, hot: Option<usize>) {
        if let Some(TreeInst {
            segment: 0,
            inst: i,
        }) = at
        {
            let tree = &self.trees[t];
            let entry_check = tree.root.insts[i].kind == Kind::LoopStart
                && tree.code.as_ref().is_some_and(|c| c.checks_entry());
            // The quick backend's loop ran its count: Cranelift's code now.
            let hot = tree.root.insts[i].kind == Kind::Loop
                && tree.code.as_ref().is_some_and(|c| c.quick)
                && tree.tuning.quick;
            if entry_check {
                self.entry_failed(t);
            }
            if hot {
                self.trees[t].tuning.quick = false;
                self.stats.tiered += 1;
                self.compile(t, None);
            }
        }
        if let Some(unit) = hot {
            self.absorb_bridge(t, unit);
        }
    }

    /// Runs segment `seg` of tree `t` on the trace interpreter; `None` for a bridge the
    /// `--max-steps` budget cannot hold.
    fn run_on_trace_interpreter(
        &mut self,
        t: usize,
        seg: usize,
        state: &mut State,
    ) -> Option<SegmentExit> {
        let tree = &self.trees[t];
        // A function trace runs once, to its `return`, as a bridge does.
        if seg == 0 && tree.root.function.is_none() {
            let start = Instant::now();
            let mut env = trace::Env::new(self.program, state, &mut self.steps);
            let exit = trace::run_trace(&tree.root, &mut env);
            self.ended = env.ended;
            self.stats.calls_made += env.calls;
            self.stats.trace_time += start.elapsed();
            return Some((t, exit.pos, exit.inst.map(|i| TreeInst::new(0, i))));
        }
        let bridge = match seg {
            0 => &tree.root,
            _ => &tree.bridges[seg - 1].trace,
        };
        if self.steps.left < bridge.iteration_cost() {
            return None;
        }
        let start = Instant::now();
        let mut env = trace::Env::new(self.program, state, &mut self.steps);
        let exit = trace::run_bridge(bridge, &mut env);
        self.ended = env.ended;
        self.stats.calls_made += env.calls;
        self.stats.trace_time += start.elapsed();
        Some((t, exit.pos, exit.inst.map(|i| TreeInst::new(seg, i))))
    }

    /// Counts an entry into tree `t`'s loop that failed the check of what its proofs
    /// assume (`backend::Tuning::induction`). Past the bridge threshold, the tree's code
    /// is compiled again without those assumptions: the loop is entered with values
    /// outside them too often.
    fn entry_failed(&mut self, t: usize) {
        let tree = &mut self.trees[t];
        tree.entry_failures += 1;
        if tree.entry_failures > self.config.policy.bridge_threshold && tree.tuning.induction {
            tree.tuning.induction = false;
            self.compile(t, None);
        }
    }

    /// Where tree `t`'s code refused `frame` because a variable it holds as a 64-bit
    /// integer has left 64 bits: holds that variable boxed from now on (`Tree::wide`), and
    /// compiles the tree and its bridges again. Whether it did.
    fn widen(&mut self, t: usize, seg: usize, frame: &Frame) -> bool {
        let tree = &self.trees[t];
        // Not those it was widened for already: its code compiled so may have been
        // refused (an operation on them that machine code does not run), and it kept its
        // old code.
        let found: Vec<Slot> = tree
            .code_of(seg)
            .map_or(Vec::new(), |c| c.grown(frame))
            .into_iter()
            .filter(|s| !tree.wide.contains(s))
            .collect();
        if found.is_empty() {
            return false;
        }
        self.hold_boxed(t, found);
        true
    }

    /// Holds the variables `found` boxed in tree `t` from now on (`Tree::wide`), and
    /// compiles the tree and its bridges on their own again.
    fn hold_boxed(&mut self, t: usize, found: Vec<Slot>) {
        if self.config.dumps.opt {
            let names: Vec<&str> = found.iter().map(|s| self.program.var(*s)).collect();
            let _ = writeln!(
                self.dump,
                "# opt {t} again: holding {} as {} of any size",
                names.join(", "),
                if names.len() == 1 {
                    "an integer"
                } else {
                    "integers"
                }
            );
        }
        self.trees[t].wide.extend(found);
        if self.config.dumps.opt {
            let tree = &self.trees[t];
            let listing = self.optimized_listing(&tree.next_segments(), tree.machine(), true, 0);
            self.dump.push_str(&listing);
        }
        self.compile(t, None);
        let separate: Vec<usize> = (0..self.trees[t].bridges.len())
            .filter(|&k| self.trees[t].bridges[k].separate && !self.trees[t].bridges[k].moving_in)
            .collect();
        for k in separate {
            self.compile_bridge(t, k + 1);
        }
    }

    /// Counts an entry into tree `t` that its machine code refused; at
    /// [`super::Policy::max_refusals`], the tree's key is never entered or traced again
    /// (its loop is left to the interpreter).
    fn refused(&mut self, t: usize) {
        let tree = &mut self.trees[t];
        tree.refusals += 1;
        let max_refusals = self.config.policy.max_refusals;
        if tree.refusals == max_refusals {
            self.leave_to_interpreter(
                t,
                format!("machine code refused {max_refusals} entries (values it was not compiled for, such as big integers): loops left to the interpreter"),
            );
        }
    }
}

/// Unit `unit` of tree `k`'s code, as machine code finds it when an exit goes on there:
/// the tree's function from its anchor, or a bridge compiled on its own from its start.
fn tree_code(trees: &[Tree], (k, unit): (usize, usize)) -> TreeCode<'_> {
    let tree = &trees[k];
    let code = tree.code_of(unit).expect("only compiled code is linked");
    if unit == 0 {
        return TreeCode {
            code,
            tree,
            alone: None,
            start: Position::start(tree.key.anchor),
        };
    }
    TreeCode {
        code,
        tree,
        alone: Some(unit),
        start: tree.guard_snapshot(tree.bridges[unit - 1].from).pos,
    }
}

/// An exit of machine code that asks something of the driver: the tree, the instruction
/// that exited, the bridge unit entered often (`Jit::after_native_exit`).
type NativeExit = (usize, Option<TreeInst>, Option<usize>);

/// Per function trace and instruction, the exits calls from machine code took.
type CallExits = rustc_hash::FxHashMap<(usize, TreeInst), u64>;

/// The function traces' code, as the `call`s machine code makes enter it
/// ([`backend::nested`]), and what those calls leave the driver.
struct Calls<'j> {
    program: &'j crate::lang::Program,
    profile: &'j super::profile::Profile,
    trees: &'j [Tree],
    entry: backend::nested::Entry,
    /// For bridges from the guards of function traces entered so: the policy, and whether
    /// recording folds (`Jit::folds_while_recording`).
    policy: &'j super::Policy,
    fold: bool,
    /// The exits taken in this run.
    exits: std::cell::RefCell<CallExits>,
    /// The exits taken before it, the driver's count (`Stats::exits`).
    seen: &'j std::collections::BTreeMap<(usize, usize, usize), u64>,
    /// The bridges recorded (`None`: a recording abandoned), for the driver to attach.
    bridges: std::cell::RefCell<Vec<(usize, TreeInst, Option<trace::Trace>)>>,
    /// Whether an exit has been taken more than the bridge threshold (seen first in this
    /// run): the driver may compile its code again (`Jit::hold_wide`).
    attention: std::cell::Cell<bool>,
    /// The calls made of functions whose traces have no code to enter, per key, beyond
    /// those the profile counted: the driver adds them.
    counts: std::cell::RefCell<rustc_hash::FxHashMap<super::Key, u64>>,
    /// Whether a function trace may be recorded (the trees are not at their limit).
    room: bool,
    /// The function traces recorded at calls (or why their recording was abandoned), for
    /// the driver to optimize and compile.
    functions: std::cell::RefCell<Vec<(super::Key, FunctionRecording)>>,
    /// The time those recordings took.
    recording: std::cell::Cell<std::time::Duration>,
    /// Whether a loop's code may run inside a call (no code ever compiled holds integers
    /// of any size: code is reentrant, `Jit::unenterable`).
    loops: bool,
    /// Whether the compiler thread has handed back code (that the calls may enter, once
    /// the driver has placed it).
    finishes: Option<backend::Finishes>,
    /// The exits of loops' code run inside calls that ask something of the driver (a
    /// quick backend's loop that ran its count, an entry check failing, a bridge on its own
    /// entered often: `Jit::after_native_exit`), once each.
    native: std::cell::RefCell<Vec<NativeExit>>,
    /// The `call`s among the exits whose result was an integer past 64 bits ([`big_result`]).
    big: std::cell::RefCell<rustc_hash::FxHashSet<(usize, TreeInst)>>,
    /// The entry traces' ends that went on in their loops' trees, with those trees: the
    /// driver links them (`Jit::link`).
    links: std::cell::RefCell<Vec<(usize, TreeInst, usize)>>,
}

/// Whether exit `at` of `tree`, the frame written back to `frame` (at `pos`, where known),
/// of an instruction whose result may be held wide ([`crate::opt::repr::may_hold_wide`]),
/// met an integer past 64 bits: a `call`'s, in the variable receiving its result; an
/// elidable call's, always (it exits before the call); an operation's (a read of an
/// element, arithmetic), as the interpreter is about to compute it at `pos`, its statement.
/// An exit for any other cause (an element of another type, which a bridge takes; an index
/// outside, a division by zero) is not one: holding the result wide would change nothing
/// but make the code not reentrant. An operation exiting elsewhere than at its statement
/// (an exit moved earlier) counts as one.
fn big_result(
    program: &crate::lang::Program,
    tree: &Tree,
    at: TreeInst,
    frame: &Frame,
    pos: Option<Position>,
) -> bool {
    let inst = &tree.segment(at.segment).insts[at.inst];
    if !crate::opt::repr::may_hold_wide(inst.kind) {
        // (Nor is an allocation's `array(n, x)` made again to see.)
        return false;
    }
    let call = matches!(inst.kind, Kind::Call(_));
    // (An origin past the statements is the block's branch.)
    let Some((origin, stmt)) = inst
        .origin
        .and_then(|o| Some((o, program.block(o.block).insts.get(o.inst)?)))
    else {
        return !call;
    };
    let big =
        |v: &Option<flowjit_runtime::Value>| matches!(v, Some(flowjit_runtime::Value::Big(_)));
    match stmt {
        crate::lang::Inst::Call { dst, .. } if call => big(&frame[dst.index()]),
        _ if call => false,
        // An elidable call's exit is before it (the interpreter makes the call).
        crate::lang::Inst::Call { .. } => true,
        _ if pos != Some(origin) => true,
        _ => match stmt.operation() {
            Some((_, op, args)) => {
                let values: Option<Vec<&flowjit_runtime::Value>> = args
                    .iter()
                    .map(|a| crate::interp::operand(program, frame, a).ok())
                    .collect();
                let made = match values.as_deref() {
                    Some([a]) => flowjit_runtime::ops::apply1(op, a).ok(),
                    Some([a, b]) => flowjit_runtime::ops::apply2(op, a, b).ok(),
                    _ => None,
                };
                big(&made)
            }
            None => true,
        },
    }
}

/// A function trace recorded at a call machine code made: the trace and the variables
/// past 64 bits at its entry, or why its recording was abandoned.
type FunctionRecording = Result<(trace::Trace, Vec<Slot>), trace::AbortReason>;

impl Calls<'_> {
    /// `with` the code of the function trace at `key`, as a call enters it, if it has code
    /// a call may enter: the tree's function, with no bridge compiled on its own (each exit
    /// is the function's).
    fn callee<R>(
        &self,
        key: Option<super::Key>,
        with: impl FnOnce(&backend::nested::Callee) -> R,
    ) -> Option<R> {
        let t = self.profile.lookup(&key?)?;
        let tree = &self.trees[t];
        let code = tree.code_of(0)?;
        if (1..=tree.bridges.len()).any(|s| tree.unit_of(s) != 0 && tree.code_of(s).is_some()) {
            return None;
        }
        let segments = |seg: usize| tree.segment(seg);
        let exited =
            |state: &mut State, at: TreeInst, pos: Position| self.exited(t, state, at, pos);
        let func = tree.root.function.expect("a function trace");
        let (trees, told) = (|at| tree_code(self.trees, at), self.told());
        let callee = backend::nested::Callee {
            func,
            tree: t,
            code,
            segments: &segments,
            calls: tree.calls(),
            exited: &exited,
            linked: backend::nested::Linked {
                func,
                trees: &trees,
                told: &told,
            },
        };
        Some(with(&callee))
    }

    /// What hears of the exits of loops' code inside calls ([`Calls::loop_exited`]).
    fn told(&self) -> impl Fn(&State, usize, Option<TreeInst>, Option<usize>) + '_ {
        |state, tree, at, hot| self.loop_exited(&state.frame, tree, at, hot)
    }

    /// Exit `at` (`None`: an entry refused) of tree `t`, a loop's, taken inside a call, the
    /// frame written back to `frame`, or its bridge unit `hot` entered often: counted with
    /// the driver's, as the exits of function traces are, and handed to the driver if it
    /// asks something of it ([`Jit::after_native_exit`]).
    fn loop_exited(&self, frame: &Frame, t: usize, at: Option<TreeInst>, hot: Option<usize>) {
        let tree = &self.trees[t];
        if let Some(at) = at {
            *self.exits.borrow_mut().entry((t, at)).or_default() += 1;
            if big_result(self.program, tree, at, frame, None) {
                self.big.borrow_mut().insert((t, at));
            }
        }
        let asks = hot.is_some()
            || at.is_some_and(|at| {
                let kind = tree.segment(at.segment).insts[at.inst].kind;
                let code = tree.code.as_ref();
                at.segment == 0
                    && ((kind == Kind::Loop && code.is_some_and(|c| c.quick))
                        || (kind == Kind::LoopStart && code.is_some_and(|c| c.checks_entry())))
            });
        let asked = (t, at, hot);
        if asks && !self.native.borrow().contains(&asked) {
            self.native.borrow_mut().push(asked);
        }
    }

    /// Guard or operation `at` of tree `t` exited inside a call, the state there (at
    /// `pos`): counted, and past the bridge threshold a bridge is recorded from a guard, as
    /// the driver records one ([`Jit::record_bridge`]), running the call to its `return`,
    /// where the interpreter goes on.
    fn exited(
        &self,
        t: usize,
        state: &mut State,
        at: TreeInst,
        pos: Position,
    ) -> Result<Position, backend::nested::End> {
        let tree = &self.trees[t];
        if big_result(self.program, tree, at, &state.frame, Some(pos)) {
            self.big.borrow_mut().insert((t, at));
        }
        // An entry trace's end, at its loop's anchor: linked there, its code goes on in
        // the loop's next time.
        let kind = tree.segment(at.segment).insts[at.inst].kind;
        if let (Kind::Loop, 0) = (kind, pos.inst) {
            let next = self.loop_tree(pos.block).map(|next| (t, at, next));
            let mut links = self.links.borrow_mut();
            if let Some(link) = next.filter(|l| !links.contains(l)) {
                links.push(link);
            }
        }
        let (first, exits) = {
            let mut counts = self.exits.borrow_mut();
            let n = counts.entry((t, at)).or_default();
            *n += 1;
            // With those of the runs before.
            let before = self.seen.get(&(t, at.segment, at.inst)).copied();
            (*n == 1, *n + before.unwrap_or(0))
        };
        let threshold = self.policy.bridge_threshold;
        if exits > threshold && first {
            self.attention.set(true);
        }
        let inst = &tree.segment(at.segment).insts[at.inst];
        let snap = tree.guard_snapshot(at);
        let asked = self.bridges.borrow().iter().any(|b| (b.0, b.1) == (t, at));
        let wanted = (tree.bridges_from(at) && inst.kind != Kind::GuardValue)
            && exits > threshold
            && tree.may_get_bridge(at, self.policy)
            && tree.bridge(at, None).is_none()
            && !asked;
        if !wanted {
            return Ok(pos);
        }
        // As `Jit::bridge_constants` gives them for an unspecialized bridge: the snapshot's
        // constants, and the greens of a dispatch function's trace it does not give.
        let greens = (self.profile.greens_at(tree.key.anchor).iter())
            .zip(&tree.key.greens)
            .filter(|(g, _)| snap.get(**g).is_none())
            .map(|(g, v)| (*g, v.clone()));
        let fixed: Vec<(Slot, flowjit_runtime::Value)> = (snap.entries.iter())
            .filter_map(|(slot, o)| o.as_const().map(|v| (*slot, v.clone())))
            .chain(greens)
            .collect();
        let (inherited, rebuilt) = super::bridges::bridge_inputs(snap);
        let calls = snap.frames.clone();
        let profile = self.profile;
        let ends = |target: BlockId, frame: &Frame| profile.bridge_end(target, frame);
        let mut host = trace::Interpreted {
            ends: &ends,
            ..trace::Interpreted::new(self.program)
        };
        let recorded = trace::record_bridge(
            self.program,
            state,
            pos,
            &fixed,
            (&inherited, &rebuilt, &calls),
            &mut host,
            &mut crate::state::Steps::new(None),
            self.policy.max_trace_len * self.policy.bridge_length_factor,
            self.fold,
            tree.root.function,
        );
        let (trace, go_on) = match recorded {
            Ok(trace::Recorded::Loop(trace)) => {
                let end = trace.end();
                (Some(trace), end)
            }
            Ok(trace::Recorded::Aborted { at, .. }) => (None, at),
            Ok(trace::Recorded::Stopped(v)) => return Err(Ok(v)),
            Err(e) => return Err(Err(e)),
        };
        self.bridges.borrow_mut().push((t, at, trace));
        Ok(go_on)
    }
}

impl Calls<'_> {
    /// The key of the function trace the call of `site` on `args` runs: a dispatch
    /// function's is found by its green arguments (`None` if one is an array).
    ///
    /// # Safety
    /// As [`backend::helpers::call`]'s.
    unsafe fn key(&self, site: &backend::helpers::CallSite, args: *mut i64) -> Option<super::Key> {
        let func = self.program.func(site.func);
        let greens = match self.program.portal(site.func) {
            Some(greens) => {
                // SAFETY: the caller's guarantee.
                let values = unsafe { site.arguments(args) };
                (greens.iter())
                    .map(|g| {
                        let k = func.params.iter().position(|p| p == g)?;
                        Some(values[k].clone()).filter(|v| !v.holds_array())
                    })
                    .collect::<Option<Vec<_>>>()?
            }
            None => Vec::new(),
        };
        Some(super::Key::function(func.entry, greens))
    }

    /// Counts a call at `key`, whose trace has no code to enter: whether its trace is to
    /// be recorded now (the profile's count and this run's pass the function's threshold,
    /// and none was recorded at it in this run).
    fn hot(&self, key: &super::Key) -> bool {
        let mut counts = self.counts.borrow_mut();
        let n = match counts.get_mut(key) {
            Some(n) => n,
            None => counts.entry(key.clone()).or_default(),
        };
        *n += 1;
        self.room
            && self.profile.hot_after(key, *n)
            && !self.functions.borrow().iter().any(|(k, _)| k == key)
    }

    /// Records the function trace at `key` from the call whose frame `state` holds (at
    /// `pos`, the function's entry), as the driver records one ([`Jit::record`]) but with
    /// the interpreter making the calls it does not inline; where the interpreter goes on
    /// (the `return`, or where the recording was abandoned), or how the program ended.
    fn record_function(
        &self,
        state: &mut State,
        key: super::Key,
        pos: Position,
    ) -> Result<Position, backend::nested::End> {
        let start = Instant::now();
        let program = self.program;
        let func = program
            .func_entered_at(key.anchor)
            .expect("a function's entry");
        debug_assert_eq!(pos, Position::start(key.anchor));
        let wide = super::wide_slots(&state.frame);
        let profile = self.profile;
        let traced =
            |block: BlockId, frame: &Frame| profile.traced_besides(block, frame, Some(&key));
        let ends = |target: BlockId, frame: &Frame| profile.bridge_end(target, frame);
        let mut host = trace::Interpreted {
            program,
            traced: &traced,
            ends: &ends,
        };
        let recorded = trace::record_function(
            program,
            state,
            func,
            profile.greens_at(key.anchor),
            &mut host,
            &mut crate::state::Steps::new(None),
            self.policy.max_trace_len,
            self.fold,
        );
        self.recording.set(self.recording.get() + start.elapsed());
        let (made, go_on) = match recorded {
            Ok(trace::Recorded::Loop(trace)) => {
                let end = trace.end();
                (Ok((trace, wide)), end)
            }
            Ok(trace::Recorded::Aborted { reason, at }) => (Err(reason), at),
            Ok(trace::Recorded::Stopped(v)) => return Err(Ok(v)),
            Err(e) => return Err(Err(e)),
        };
        self.functions.borrow_mut().push((key, made));
        Ok(go_on)
    }
}

impl Calls<'_> {
    /// The loop's tree anchored at `block` (a program's own loop, found without greens)
    /// whose function has code.
    fn loop_tree(&self, block: BlockId) -> Option<usize> {
        if self.profile.by_greens() {
            return None;
        }
        let key = super::Key {
            anchor: block,
            greens: Vec::new(),
            function: false,
        };
        let t = self.profile.lookup(&key)?;
        let tree = &self.trees[t];
        (self.loops && tree.root.function.is_none() && tree.code.is_some()).then_some(t)
    }
}

impl backend::nested::Functions for Calls<'_> {
    unsafe fn call(
        &self,
        ctx: &mut backend::helpers::Ctx,
        site: &backend::helpers::CallSite,
        args: *mut i64,
    ) -> i64 {
        // SAFETY: the caller's guarantee.
        let key = unsafe { self.key(site, args) };
        // SAFETY: the caller's guarantee, which `Entry::call` asks.
        let entered = self.callee(key.clone(), |callee| unsafe {
            self.entry.call(ctx, site, args, callee)
        });
        if let Some(Some(made)) = entered {
            return made;
        }
        // The interpreter makes it, recording the function's trace if it is now hot.
        let record = key.filter(|k| self.hot(k));
        let program = self.program;
        // SAFETY: the caller's guarantee.
        unsafe {
            backend::nested::call_with(ctx, site, args, |ctx, pos| {
                let pos = match record {
                    Some(key) => self.record_function(ctx.state, key, pos)?,
                    None => pos,
                };
                backend::nested::run_calling(program, ctx, pos)
            })
        }
    }

    fn enters(&self, entry: BlockId, frame: &Frame) -> bool {
        // Asked at every call the interpreter makes inside machine code's calls: code that
        // may not be entered (holding integers past 64 bits) is seen first, cheaply.
        let t = self.profile.function_tree(entry, frame);
        t.is_some_and(|t| self.trees[t].code.as_ref().is_some_and(|c| c.enterable()))
            && self.callee(self.profile.function_key(entry, frame), |c| c.enterable()) == Some(true)
    }

    fn call_frame(
        &self,
        ctx: &mut backend::helpers::Ctx,
        entry: BlockId,
    ) -> Option<Result<flowjit_runtime::Value, backend::nested::End>> {
        let key = self.profile.function_key(entry, &ctx.state.frame);
        self.callee(key, |callee| self.entry.call_frame(ctx, callee))?
    }

    unsafe fn finish(
        &self,
        ctx: &mut backend::helpers::Ctx,
        site: &backend::helpers::CallSite,
        args: *mut i64,
        regs: *const i64,
        returned: i64,
    ) -> i64 {
        let (trees, told) = (|at| tree_code(self.trees, at), self.told());
        let linked = backend::nested::Linked {
            func: site.func,
            trees: &trees,
            told: &told,
        };
        // The code that returned is the function of the tree its code names, published,
        // or a loop's tree its entry trace's end went on in.
        let (t, unit, _) = backend::lower::decode_exit(returned);
        let tree = &self.trees[t];
        if tree.root.function.is_none() {
            // SAFETY: the caller's guarantee, which `finish_linked` asks.
            return unsafe {
                backend::nested::Entry::finish_linked(ctx, site, args, regs, returned, &linked)
            };
        }
        debug_assert_eq!(unit, 0, "a function trace's cell holds its tree's function");
        let code = tree.code_of(0).expect("published code");
        let segments = |seg: usize| tree.segment(seg);
        let exited =
            |state: &mut State, at: TreeInst, pos: Position| self.exited(t, state, at, pos);
        let callee = backend::nested::Callee {
            func: site.func,
            tree: t,
            code,
            segments: &segments,
            calls: tree.calls(),
            exited: &exited,
            linked,
        };
        // SAFETY: the caller's guarantee, which `finish_direct` asks.
        unsafe { backend::nested::Entry::finish_direct(ctx, site, args, regs, returned, &callee) }
    }

    fn enters_loop(&self, block: BlockId) -> bool {
        self.loop_tree(block).is_some()
    }

    fn run_loop(
        &self,
        ctx: &mut backend::helpers::Ctx,
        block: BlockId,
    ) -> Option<Result<Position, backend::nested::End>> {
        let t = self.loop_tree(block)?;
        let find = |at: (usize, usize)| tree_code(self.trees, at);
        let exit = self.entry.run_tree(ctx, (t, 0), &find)?;
        if let Some(end) = exit.ended {
            return Some(Err(end));
        }
        // Counted with the driver's, as the exits of function traces are.
        self.loop_exited(&ctx.state.frame, exit.tree, exit.at, exit.hot);
        Some(Ok(exit.pos))
    }

    fn pending(&self) -> bool {
        self.attention.get()
            || !self.native.borrow().is_empty()
            || !self.bridges.borrow().is_empty()
            || !self.functions.borrow().is_empty()
            || self.finishes.as_ref().is_some_and(|f| f.any())
    }
}
