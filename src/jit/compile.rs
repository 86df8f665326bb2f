//! Compiling trees' functions and bridges on their own, on the driver's thread or the
//! compiler thread, and putting the code to use: linking the exits that go on in it,
//! taking bridges entered often into their tree's function, and the listings.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use flowjit_runtime::abi;

use crate::backend::lower::Origin;
use crate::backend::{self, Backend, Listings, Lowered, TreeInst};
use crate::lang::Slot;
use crate::opt::repr;
use crate::trace::print;

use super::{describe, events, listing, EventKind, Jit, KeptCode};

/// A tree's function on the compiler thread: lowered to Cranelift's IR by the driver,
/// which places its code and puts it to use when the thread is done (`Jit::collect`).
/// Until then the tree's old code runs, and what the new one adds waits: the bridges to
/// put in the function ([`super::Bridge`]'s `moving_in`) run on their own, or their guards
/// exit to the interpreter.
pub(super) struct Job {
    id: u64,
    tree: usize,
    /// The bridge it was compiled for, as `Jit::compile`'s `new`.
    new: Option<usize>,
    /// The bridges on their own (or without code) that the function holds.
    moved: Vec<usize>,
    prepared: Box<backend::Prepared>,
}

impl Jit<'_> {
    /// Makes the backend when first needed in `--mode jit` (a run that compiles nothing
    /// does not pay for making it). When it cannot be made, nothing is compiled, and the
    /// error is kept in `--stats`.
    pub(super) fn make_backend(&mut self) {
        if self.config.native && self.backend.is_none() {
            match Backend::new(self.config.target, self.config.policy.backend_limits()) {
                Ok(b) => self.backend = Some(b),
                Err(why) => {
                    self.limit_reached(format!("no machine code: {why}"));
                    self.config.native = false;
                }
            }
        }
    }

    /// Segment `seg` of the unit `segments` in the SSA form, for `--dump opt`: when it is
    /// to be compiled, with how machine code holds its values (`opt::repr`, `wide` the
    /// variables its tree holds as integers of any size, `root` whether the unit is a
    /// tree's function) and what it checks (`opt::checks`, with the tree's `tuning`).
    pub(super) fn optimized_listing(
        &self,
        segments: &[backend::Segment],
        (wide, tuning): (&[Slot], backend::Tuning),
        root: bool,
        seg: usize,
    ) -> String {
        let trace = segments[seg].trace;
        if !self.config.native {
            return print::ssa(self.program, trace);
        }
        let reprs = repr::infer(segments, wide, root);
        let checks = tuning.checks(segments, &reprs, root);
        let notes = |i: usize| checks.notes(seg, trace, i);
        print::ssa_held(self.program, trace, &reprs.values[seg], &notes)
    }

    /// The listings the backend makes: those the dumps print or the report keeps.
    fn listings(&self) -> Listings {
        Listings {
            ir: self.config.dumps.ir || self.config.keep,
            asm: self.config.dumps.asm || self.config.keep,
        }
    }

    /// Compiles tree `t` (again) to machine code, if the backend is on and can; on failure
    /// the tree keeps the code it had (its new bridges then run on the trace interpreter).
    /// `new` is the segment of the bridge it is compiled again for, whose code alone the
    /// `ir` and `asm` dumps show.
    pub(super) fn compile(&mut self, t: usize, new: Option<usize>) -> bool {
        self.make_backend();
        let background = self.config.background;
        if background && self.trees[t].compiling {
            self.trees[t].compile_again = true;
            return true;
        }
        let listings = self.listings();
        let Some(backend) = self.backend.as_mut() else {
            return false;
        };
        let counting = self.config.max_steps.is_some();
        let tree = &self.trees[t];
        let start = Instant::now();
        let frame_size = self.program.frame_size();
        let moved: Vec<usize> = (1..=tree.bridges.len())
            .filter(|&k| tree.bridges[k - 1].separate && tree.bridges[k - 1].moving_in)
            .collect();
        let segments = tree.next_segments();
        let reprs = repr::infer(&segments, &tree.wide, true);
        let unit = backend::Unit {
            checks: tree.tuning.checks(&segments, &reprs, true),
            reprs,
            segments: &segments,
            at: (t, 0),
            frame_size,
            counting,
            assumed: &[],
            tuning: tree.tuning,
            program: Some(self.program),
        };
        let prepared = backend.prepare(unit, listings);
        let compiled = match prepared {
            Ok(Lowered::Ready(code)) => Ok(*code),
            Ok(Lowered::Pending(mut p)) => {
                let id = self.next_job;
                if background && backend.submit(id, &mut p) {
                    self.next_job += 1;
                    self.stats.compile_time += start.elapsed();
                    self.jobs.push(Job {
                        id,
                        tree: t,
                        new,
                        moved,
                        prepared: p,
                    });
                    self.trees[t].compiling = true;
                    return true;
                }
                backend.emit(&mut p).and_then(|m| backend.finish(p, m))
            }
            Err(why) => Err(why),
        };
        let took = start.elapsed();
        self.stats.compile_time += took;
        self.function_compiled(t, new, &moved, compiled, took)
    }

    /// Puts tree `t`'s function, compiled (for its bridge `new`, and with the bridges
    /// `moved` that were on their own), to use; or, when it could not be, says why. Whether
    /// it was.
    fn function_compiled(
        &mut self,
        t: usize,
        new: Option<usize>,
        moved: &[usize],
        compiled: Result<backend::Compiled, backend::Unsupported>,
        took: Duration,
    ) -> bool {
        if self.backend.is_none() {
            return false;
        }
        match compiled {
            Ok(code) => {
                self.install_function(t, new, moved, code, took);
                true
            }
            Err(why) => {
                self.function_not_compiled(t, new, moved, why);
                false
            }
        }
    }

    /// How the dumps and the statistics name tree `t`'s function compiled for its bridge
    /// `new` with the bridges `moved`, and how many bridges it holds.
    fn function_title(&self, t: usize, new: Option<usize>, moved: &[usize]) -> (String, usize) {
        let tree = &self.trees[t];
        let label = describe(self.program, &tree.key);
        let inside = (1..=tree.bridges.len())
            .filter(|k| !tree.bridges[k - 1].separate || moved.contains(k))
            .count();
        let what = match new {
            None if inside == 0 => format!("{t}: {} at {label}", tree.root.what()),
            None => format!(
                "{t}: {} at {label}, with {inside} bridge(s), compiled again",
                tree.root.what()
            ),
            Some(seg) => format!("{t}: bridge {} at {label}, in the tree's function", seg - 1),
        };
        (what, inside)
    }

    /// Makes `code` tree `t`'s function: the bridges `moved` are in it now, the exits that
    /// went on in the old function go on in it, and its guards whose bridges are compiled
    /// on their own go there.
    fn install_function(
        &mut self,
        t: usize,
        new: Option<usize>,
        moved: &[usize],
        code: backend::Compiled,
        took: Duration,
    ) {
        let (what, inside) = self.function_title(t, new, moved);
        let target = self.backend.as_ref().map_or("", Backend::listing_target);
        let retired = self.retire_moved(t, moved);
        self.show_code(t, 0, new, &code, &what, target);
        self.event(EventKind::Compiled {
            tree: t,
            bridge: None,
            bridges: inside,
            bytes: code.size,
            micros: events::micros(took),
        });
        self.relink_incoming(t, &code);
        let again = self.link_bridges_alone(t, 0, &code);
        self.not_enterable(&code);
        self.trees[t].code = Some(code);
        self.publish(t);
        drop(retired);
        for seg in again {
            self.compile_bridge(t, seg);
        }
    }

    /// Notes `code`, new, if calls may not enter it (`Compiled::enterable`): from then on no
    /// loop's code runs inside a call, and no entry trace's end goes on in a loop's
    /// tree (`Jit::enters_from_calls`).
    fn not_enterable(&mut self, code: &backend::Compiled) {
        if code.enterable() || self.unenterable {
            return;
        }
        self.unenterable = true;
        for to in 0..self.trees.len() {
            let incoming = std::mem::take(&mut self.trees[to].incoming);
            let (ends, kept): (Vec<_>, Vec<_>) = (incoming.into_iter())
                .partition(|&(from, _, _)| self.trees[from].root.function.is_some());
            for (from, unit, g) in ends {
                if let Some(c) = self.trees[from].code_of(unit) {
                    c.unlink(g);
                }
            }
            self.trees[to].incoming = kept;
        }
    }

    /// Takes the bridges `moved` into tree `t`'s function, and returns their old code: it
    /// stays alive until the new function, whose guards no longer go there, has replaced
    /// the old one, which linked to it. The exits of their old code that went on in trees
    /// (this one's too, which `relink_incoming` would take for the new function's) go with
    /// it: their numbers are the old code's.
    fn retire_moved(&mut self, t: usize, moved: &[usize]) -> Vec<Option<backend::Compiled>> {
        let mut retired = Vec::new();
        for &k in moved {
            let bridge = &mut self.trees[t].bridges[k - 1];
            retired.push(bridge.code.take());
            bridge.separate = false;
            bridge.moving_in = false;
        }
        if !moved.is_empty() {
            for tree in &mut self.trees {
                tree.incoming
                    .retain(|&(from, unit, _)| !(from == t && moved.contains(&unit)));
            }
        }
        retired
    }

    /// The exits that went on in tree `t`'s old function go on in `code`, its new one;
    /// those of its old function are forgotten (its new code returns until linked again).
    fn relink_incoming(&mut self, t: usize, code: &backend::Compiled) {
        let old = (t, 0);
        let incoming = std::mem::take(&mut self.trees[t].incoming);
        for &(from, unit, g) in &incoming {
            if (from, unit) != old {
                let source = &self.trees[from];
                if let Some(c) = source.code_of(unit) {
                    let kinds = c.exit_kinds_at(g, unit, |seg| source.segment(seg));
                    // An entry trace's end goes on only in code that calls may enter.
                    let enters = |f| self.enters_from_calls(f, code);
                    let kinds = kinds.filter(|_| source.root.function.is_none_or(enters));
                    c.relink(g, code, kinds.as_deref());
                }
            }
        }
        for tree in &mut self.trees {
            tree.incoming.retain(|&(from, unit, _)| (from, unit) != old);
        }
        self.trees[t].incoming = incoming
            .into_iter()
            .filter(|&(from, unit, _)| (from, unit) != old)
            .collect();
    }

    /// Links the guards of `code`, the new code of unit `unit` of tree `t` (its function,
    /// or a bridge on its own), whose bridges are compiled on their own, to those bridges;
    /// returns the bridges to compile again for it.
    ///
    /// A bridge is compiled again when the new code's exit leaves other kinds than the
    /// bridge assumes: the tree now holds a variable as an integer of any size, or the
    /// guard was in a bridge on its own that has moved in, whose exit said more (the kinds
    /// its own entry assumed: in the tree's function that bridge reads nothing from the
    /// mirror). Left unlinked, each time its guard failed the code would return to the
    /// runtime, which entered the bridge (`benches/cliffs/dispatch64.fg`), and the bridge
    /// would refuse the entry where it assumed a 64-bit integer that has grown
    /// (`benches/cliffs/wide8.fg`, compiling in the background).
    fn link_bridges_alone(&self, t: usize, unit: usize, code: &backend::Compiled) -> Vec<usize> {
        let tree = &self.trees[t];
        let mut again = Vec::new();
        for (k, b) in tree.bridges.iter().enumerate() {
            let TreeInst {
                segment: ps,
                inst: pi,
            } = b.from;
            if let (Some(bc), true, None) = (&b.code, tree.unit_of(ps) == unit, &b.value) {
                let kinds = code.exit_kinds(tree.segment(ps), ps, pi);
                if let (Some(g), Some(kinds)) = (code.global(ps, pi), kinds) {
                    if bc.admits(&kinds) {
                        code.link(g, bc);
                    } else if !b.moving_in {
                        again.push(k + 1);
                    }
                }
            }
        }
        again
    }

    /// Tree `t`'s function, compiled for its bridge `new` with the bridges `moved`, could
    /// not be (`why`): says so, and leaves the tree's loop to the interpreter if the tree
    /// has no code at all (the trace interpreter is slower than the interpreter).
    fn function_not_compiled(
        &mut self,
        t: usize,
        new: Option<usize>,
        moved: &[usize],
        why: backend::Unsupported,
    ) {
        let (what, _) = self.function_title(t, new, moved);
        // Bridges that were to move in and have code of their own stay there, and stop
        // asking to move (as `Jit::absorb_bridge` does when compiling fails).
        for &k in moved {
            let bridge = &mut self.trees[t].bridges[k - 1];
            if let Some(code) = &bridge.code {
                code.stop_counting();
                bridge.moving_in = false;
            }
        }
        if self.config.dumps.ir || self.config.dumps.asm {
            let _ = writeln!(
                self.dump,
                "# tree {what} stays on the trace interpreter: {why}"
            );
        }
        self.event(EventKind::NotCompiled {
            what: format!("trace {what}"),
            reason: why.to_string(),
        });
        let label = describe(self.program, &self.trees[t].key);
        self.stats.not_compiled.push((label, why));
        // A bridge from inside inlined calls that the function cannot hold leaves it, or
        // every compilation of the function after it would fail too: its guard's exits
        // resume the interpreter.
        if let Some(seg) = new {
            let tree = &mut self.trees[t];
            if tree.inside_calls(tree.bridges[seg - 1].from) {
                tree.bridges[seg - 1].separate = true;
            }
        }
        if self.trees[t].code.is_none() {
            let key = self.trees[t].key.clone();
            self.profile.forget(&key);
        }
    }

    /// Puts to use the trees' functions the compiler thread has finished, and compiles
    /// again those asked for meanwhile ([`Tree::compile_again`](super::Tree)).
    pub(super) fn collect(&mut self) {
        self.collect_finished(false);
    }

    /// After the run: waits for the functions still on the compiler thread, for the
    /// listings `--dump ir` and `--dump asm` print (what the run decided is done; the
    /// statistics still say how many were compiling when it ended).
    pub fn await_listings(&mut self) {
        let s = &mut self.stats;
        s.thread_at_end = Some((s.thread_functions, s.thread_time, self.jobs.len()));
        if self.config.dumps.ir || self.config.dumps.asm {
            while !self.jobs.is_empty() {
                self.collect_finished(true);
            }
        }
    }

    /// As [`Jit::collect`], waiting for one function at least when `wait`.
    fn collect_finished(&mut self, mut wait: bool) {
        // Asked before each run of code: nothing queued, or nothing handed back yet.
        let handed = self.backend.as_ref().is_some_and(|b| b.waiting());
        if self.jobs.is_empty() || !(wait || handed) {
            return;
        }
        let Some(backend) = self.backend.as_mut() else {
            return;
        };
        let mut done = Vec::new();
        // The thread has gone, and the functions it held with it: each is compiled again
        // here (as everything after), below.
        let mut lost = Vec::new();
        loop {
            match backend.finished(std::mem::take(&mut wait)) {
                Ok(None) => break,
                Ok(Some((id, machine, took))) => {
                    self.stats.thread_time += took;
                    self.stats.thread_functions += 1;
                    if let Some(at) = self.jobs.iter().position(|j| j.id == id) {
                        done.push((self.jobs.swap_remove(at), machine));
                    }
                }
                Err(backend::Gone) => {
                    lost = std::mem::take(&mut self.jobs);
                    break;
                }
            }
        }
        for (job, machine) in done {
            let t = job.tree;
            self.trees[t].compiling = false;
            let start = Instant::now();
            let Some(backend) = self.backend.as_mut() else {
                return;
            };
            let compiled = machine.and_then(|m| backend.finish(job.prepared, m));
            let took = start.elapsed();
            self.stats.compile_time += took;
            self.function_compiled(t, job.new, &job.moved, compiled, took);
            if std::mem::take(&mut self.trees[t].compile_again) {
                self.compile(t, None);
            }
        }
        for job in lost {
            let t = job.tree;
            self.trees[t].compiling = false;
            self.trees[t].compile_again = false;
            self.compile(t, job.new);
        }
    }

    /// Moves bridge `seg` of tree `t` into the tree's function. The bridge, compiled on
    /// its own, returned [`backend::lower::HOT`]: it
    /// was entered [`super::Policy::bridge_entries`] times, each through its guard's exit
    /// (the snapshot written into the mirror, the epilogue, a jump through a link, the
    /// prologue, the inputs loaded). It moves into the tree's function, compiled again,
    /// where its guard branches to it with every value in a register, as LuaJIT and PyPy
    /// give a side exit that runs often a trace of its own and then patch the guard to jump
    /// there. Only a bridge whose guard is in that function (the root's, or a bridge's
    /// there), while the function has room ([`super::Policy::max_tree_function`]) and fewer
    /// than [`super::Policy::max_absorbed`] bridges came in so; any other stops counting.
    /// The tree's other bridges on their own that have spent a quarter of their count come
    /// in with it, in the same compilation. Their own bridges stay on their own, linked
    /// from the new function's exits of their guards.
    ///
    /// Named for what the tree's function does to the bridge, absorbing it: "promote" in
    /// this crate is the hint that makes a `guard_value` ([`Jit::promoted_var`]), and
    /// "moving in" is the bridge's state until the function is compiled with it
    /// ([`super::Bridge`]'s `moving_in`).
    pub(super) fn absorb_bridge(&mut self, t: usize, seg: usize) {
        let count = self.backend.as_ref().map_or(0, |b| b.bridge_entries());
        let tree = &self.trees[t];
        let policy = &self.config.policy;
        let mut room = policy.max_tree_function.saturating_sub(
            tree.next_segments()
                .iter()
                .filter(|s| !s.separate)
                .map(|s| s.trace.insts.len())
                .sum(),
        );
        let movable = |k: usize| {
            let bridge = &tree.bridges[k - 1];
            bridge.separate
                && !bridge.moving_in
                && bridge.code.is_some()
                && bridge.value.is_none()
                && tree.unit_of(bridge.from.segment) == 0
                && tree.code.is_some()
        };
        // With it, the tree's other bridges that have spent a quarter of their count: one
        // compilation for them all.
        let mut chosen = Vec::new();
        let spent = |k: usize| {
            let left = tree.bridges[k - 1]
                .code
                .as_ref()
                .and_then(|c| c.entries_left());
            left.is_some_and(|left| left <= count - count / 4)
        };
        let others = (1..=tree.bridges.len()).filter(|&k| k != seg && spent(k));
        for k in std::iter::once(seg).chain(others) {
            let size = tree.bridges[k - 1].trace.insts.len();
            if movable(k) && tree.absorbed + chosen.len() < policy.max_absorbed && size <= room {
                room -= size;
                chosen.push(k);
            }
        }
        if chosen.first() != Some(&seg) {
            if let Some(code) = &tree.bridges[seg - 1].code {
                code.stop_counting();
            }
            return;
        }
        // They move in with the function's next compilation (`Jit::function_compiled`, which
        // retires their code), and their code runs until then: on the compiler thread,
        // until it is done.
        for &k in &chosen {
            self.trees[t].bridges[k - 1].moving_in = true;
        }
        if self.compile(t, Some(seg)) {
            self.trees[t].absorbed += chosen.len();
            self.stats.absorbed += chosen.len() as u64;
        } else {
            for &k in &chosen {
                self.trees[t].bridges[k - 1].moving_in = false;
            }
        }
    }

    /// Compiles bridge `seg` of tree `t` in a function of its own (its `separate` is set),
    /// and makes its guard's exit go there when the bridge is not specialized on a value.
    /// On failure the bridge runs on the trace interpreter.
    pub(super) fn compile_bridge(&mut self, t: usize, seg: usize) {
        self.make_backend();
        let listings = self.listings();
        // Entered only from its guard's exit (when not specialized on a value), it need not
        // check the kinds that exit leaves in the mirror.
        let assumed = self.guard_exit_kinds(t, seg);
        let Some(backend) = self.backend.as_mut() else {
            return;
        };
        let tree = &self.trees[t];
        let segment = tree.segment_alone(seg).on_its_own();
        let start = Instant::now();
        let frame_size = self.program.frame_size();
        let counting = self.config.max_steps.is_some();
        let reprs = repr::infer(&[segment], &tree.wide, false);
        let unit = backend::Unit {
            checks: tree.tuning.checks(&[segment], &reprs, false),
            reprs,
            segments: &[segment],
            at: (t, seg),
            frame_size,
            counting,
            assumed: &assumed,
            tuning: tree.tuning,
            program: Some(self.program),
        };
        let compiled = backend.compile(unit, listings);
        let took = start.elapsed();
        self.stats.compile_time += took;
        let what = format!(
            "{t}: bridge {} at {}",
            seg - 1,
            describe(self.program, &tree.key)
        );
        match compiled {
            Ok(code) => self.install_bridge(t, seg, code, &what, took),
            Err(why) => {
                if self.config.dumps.ir || self.config.dumps.asm {
                    let _ = writeln!(self.dump, "# {what} stays on the trace interpreter: {why}");
                }
                self.event(EventKind::NotCompiled {
                    what: format!("trace {what}"),
                    reason: why.to_string(),
                });
                self.stats.not_compiled.push((what, why));
            }
        }
    }

    /// The kinds of the values the exit of bridge `seg`'s guard, in tree `t`'s code, leaves
    /// in the mirror; none for a bridge specialized on a value or a guard without code.
    fn guard_exit_kinds(&self, t: usize, seg: usize) -> Vec<(Slot, abi::Repr)> {
        let tree = &self.trees[t];
        let bridge = &tree.bridges[seg - 1];
        let TreeInst {
            segment: ps,
            inst: pi,
        } = bridge.from;
        match (&bridge.value, tree.code_of(ps)) {
            (None, Some(parent)) => parent
                .exit_kinds(tree.segment(ps), ps, pi)
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// Makes `code` the code of bridge `seg` of tree `t`, its guard's exit going there
    /// when the bridge is not specialized on a value and the exit leaves what it admits.
    fn install_bridge(
        &mut self,
        t: usize,
        seg: usize,
        code: backend::Compiled,
        what: &str,
        took: Duration,
    ) {
        let target = self.backend.as_ref().map_or("", Backend::listing_target);
        self.show_code(t, seg, None, &code, what, target);
        let tree = &self.trees[t];
        let size = code.size;
        let bridge = &tree.bridges[seg - 1];
        let TreeInst {
            segment: ps,
            inst: pi,
        } = bridge.from;
        if bridge.value.is_none() {
            if let Some(parent) = tree.code_of(ps) {
                if let Some(g) = parent.global(ps, pi) {
                    let kinds = parent.exit_kinds(tree.segment(ps), ps, pi);
                    if kinds.is_some_and(|k| code.admits(&k)) {
                        parent.link(g, &code);
                    }
                }
            }
        }
        let again = self.link_bridges_alone(t, seg, &code);
        self.not_enterable(&code);
        self.trees[t].bridges[seg - 1].code = Some(code);
        self.event(EventKind::Compiled {
            tree: t,
            bridge: Some(seg - 1),
            bridges: 0,
            bytes: size,
            micros: events::micros(took),
        });
        for seg in again {
            self.compile_bridge(t, seg);
        }
    }

    /// Prints the listings of `code`, unit `unit` of tree `t` (0 for the tree's function,
    /// else the bridge segment compiled on its own), under the headers `# ir {what}` and
    /// `# asm {what}`; with `new`, only that segment's code. Keeps them for the report.
    fn show_code(
        &mut self,
        t: usize,
        unit: usize,
        new: Option<usize>,
        code: &backend::Compiled,
        what: &str,
        target: &str,
    ) {
        let ir = code.ir.as_deref().map(listing::ir_lines);
        let new = new.map(|segment| listing::Only {
            segment,
            parent: self.trees[t].bridges[segment - 1].from,
        });
        let asm = code.asm.as_deref().map(|a| listing::asm_lines(a, code));
        let describe = |o: Origin| self.describe_origin(t, o);
        let dumps = self.config.dumps;
        let ir_text = ir
            .as_ref()
            .filter(|_| dumps.ir)
            .map(|ir| listing::render(ir, "    ", new, &describe));
        let asm_text = asm
            .as_ref()
            .filter(|_| dumps.asm)
            .map(|asm| listing::render(asm, "  ", new, &describe));
        if let Some(text) = ir_text {
            let _ = writeln!(self.dump, "# ir {what} ({target})");
            self.dump.push_str(&text);
        }
        if let Some(text) = asm_text {
            let _ = writeln!(self.dump, "# asm {what} ({target})");
            self.dump.push_str(&text);
        }
        if self.config.keep {
            let bridge = unit.checked_sub(1);
            self.kept.code.retain(|c| (c.tree, c.bridge) != (t, bridge));
            self.kept.code.push(KeptCode {
                tree: t,
                bridge,
                ir: ir.unwrap_or_default(),
                asm: asm.unwrap_or_default(),
                size: code.size,
            });
        }
    }

    /// What an origin of compiled code is, as listings name it: the instruction
    /// (`v10:int = sub v8, 1`, `g12: guard_false v11`), or the exit of one, and where it
    /// resumes.
    pub fn describe_origin(&self, t: usize, o: Origin) -> String {
        let tree = &self.trees[t];
        let place = match o.segment {
            0 => String::new(),
            s => format!("bridge {}: ", s - 1),
        };
        let Some(trace) = (o.segment <= tree.bridges.len()).then(|| tree.segment(o.segment)) else {
            return format!("segment {} #{}", o.segment, o.inst);
        };
        let Some(inst) = trace.insts.get(o.inst) else {
            return format!("{place}#{}", o.inst);
        };
        if o.exit {
            let name = if inst.kind.has_result() {
                format!("v{}", o.inst)
            } else if print::named_guard(inst.kind) {
                format!("g{}", o.inst)
            } else {
                // A `loop_start` whose entry check failed, a `setitem`, a `print`...
                format!("{} #{}", inst.kind.name(), o.inst)
            };
            let resume = trace.snap_of(inst).map_or(String::new(), |s| {
                format!(
                    ", resume at @{}:{}",
                    self.program.label(s.pos.block),
                    s.pos.inst
                )
            });
            return format!("{place}exit of {name}{resume}");
        }
        let text = print::ssa_inst(self.program, trace, o.inst);
        // The snapshot shows in the trace's dump; here, the operation.
        let op = text.split("  @").next().unwrap_or(&text);
        format!("{place}{op}")
    }
}
