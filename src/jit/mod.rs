//! The driver: decides who runs next, the interpreter or a trace tree.
//!
//! ```text
//!            hot key (see `profile`)                        loop closes
//!  interpret ────────────────────────► record root trace ──────────────► tree for the key
//!      ▲  ▲                                  │ too long / rejected:            │ run it
//!      │  └──────────────────────────────────┘ back off, blacklist after 4      ▼
//!      │                                                               ┌── run tree ◄──┐
//!      │   guard exit, no bridge (yet): resume variables written back  │               │
//!      └───────────────────────────────────────────────────────────────┘  exit count > │
//!                                                  --bridge-threshold: record a bridge ┘
//! ```
//!
//! A *tree* is a root trace (a peeled loop) and the *bridges* attached to its guards: a
//! bridge is a trace from a guard that fails often to the anchor of a trace. Machine code
//! holds a whole tree in one function (see `backend::lower`), recompiled when a bridge is
//! added; the trace interpreter runs a bridge after the exit of its guard. When an exit of
//! machine code is followed by an entry into another tree right where it resumed, the driver
//! links the two (`Jit::link`): next time the exit goes on in that tree's machine code. A bridge from a
//! `guard_value` is specialized on one value of the promoted variable (up to
//! [`Policy::max_specializations`] per guard), and machine code dispatches on the value.
//!
//! Interpreter → tree → interpreter is a loop in [`Jit::run`], never a recursion: each
//! executor returns the position where the next one continues.
//!
//! The modules: `policy` ([`Policy`], every threshold and limit the driver decides by),
//! `profile` (hot counting, the trace cache), `payoff` (whether compiling a loop pays),
//! `tree` ([`Tree`] and [`Bridge`]), `stats` ([`Stats`] and the `--stats` report); this one
//! holds the run loop.

pub mod events;
pub mod listing;
mod payoff;
mod policy;
mod profile;
mod stats;
mod tree;

use rustc_hash::FxHashMap as HashMap;
use std::fmt::Write as _;
use std::time::Instant;

use flowjit_runtime::Value;

use crate::backend::lower::Origin;
use crate::backend::{self, Backend, Listings, Lowered};
use crate::interp::{self, Exit, NoMonitor, RuntimeError};
use crate::lang::{BlockId, Inst as Stmt, Program, Slot, Terminator};
use crate::opt;
use crate::state::{Frame, Position, State, Steps, MAX_CALL_DEPTH};
use crate::trace::{self, print, Kind, Recorded};
pub use events::{Event, EventKind, GuardRef};
pub use policy::Policy;
pub use profile::Key;
use profile::Profile;
pub use stats::Stats;
pub use tree::{Bridge, Tree};

/// What to print while running.
#[derive(Clone, Copy, Debug, Default)]
pub struct Dumps {
    /// Each recorded trace, in the articles' notation.
    pub trace: bool,
    /// Each trace as optimized, in the SSA form.
    pub opt: bool,
    /// Each compiled trace's Cranelift IR.
    pub ir: bool,
    /// Each compiled trace's machine code, disassembled.
    pub asm: bool,
}

/// How the driver behaves.
#[derive(Clone, Debug)]
pub struct Config {
    /// The thresholds and limits ([`Policy::DEFAULT`] unless the command line overrides
    /// them).
    pub policy: Policy,
    /// `--max-steps`.
    pub max_steps: Option<u64>,
    /// What to print to standard error.
    pub dumps: Dumps,
    /// The optimizer passes to run, by name, in pipeline order.
    pub passes: Vec<&'static str>,
    /// Whether traces become machine code (`--mode jit`) or run on the trace interpreter.
    pub native: bool,
    /// The ISA of the `ir` and `asm` listings, when not the host's.
    pub target: Option<backend::Target>,
    /// Keep each trace as recorded and each function's listings for `flowjit report`
    /// ([`Jit::kept`]); listings are made as for `--dump ir,asm`.
    pub keep: bool,
    /// Leave a counted loop that becomes hot with too few iterations left for compiling it
    /// to pay for itself to the interpreter (`payoff`); false compiles every loop at its
    /// threshold. The command line sets it in `--mode jit` unless `--threshold` is given.
    pub pay_off: bool,
    /// Whether Cranelift compiles trees' functions on a thread of its own while the
    /// program runs on (docs/ARCHITECTURE.md, *Compiling in the background*). The command
    /// line sets it unless a dump, the event log, the statistics, `flowjit report` or
    /// `--max-steps` is asked for, whose output would then depend on timing.
    pub background: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            policy: Policy::DEFAULT,
            max_steps: None,
            dumps: Dumps::default(),
            passes: opt::PIPELINE.to_vec(),
            native: false,
            target: None,
            keep: false,
            pay_off: false,
            background: false,
        }
    }
}

/// The tracing JIT: an interpreter that records hot loops and runs their trace trees.
pub struct Jit<'p> {
    program: &'p Program,
    config: Config,
    profile: Profile,
    /// With [`Config::pay_off`] in machine code: the counted loops, to judge whether
    /// compiling one pays.
    payoff: Option<payoff::Payoff>,
    trees: Vec<Tree>,
    backend: Option<Backend>,
    steps: Steps,
    /// Statistics of the run so far.
    pub stats: Stats,
    dump: String,
    started: Instant,
    /// The event log so far (`events`).
    log: Vec<Event>,
    /// What `flowjit report` shows, kept when `Config::keep` is set.
    kept: Kept,
    /// The trees' functions on the compiler thread ([`Config::background`]).
    jobs: Vec<Job>,
    /// The number of the next job.
    next_job: u64,
}

/// A tree's function on the compiler thread: lowered to Cranelift's IR by the driver,
/// which places its code and puts it to use when the thread is done (`Jit::collect`).
/// Until then the tree's old code runs, and what the new one adds waits: the bridges to
/// put in the function ([`tree::Bridge`]'s `wanted`) run on their own, or their guards
/// exit to the interpreter.
struct Job {
    id: u64,
    tree: usize,
    /// The bridge it was compiled for, as `Jit::compile`'s `new`.
    new: Option<usize>,
    /// The bridges on their own (or without code) that the function holds.
    moved: Vec<usize>,
    prepared: Box<backend::Prepared>,
}

/// What a run keeps for `flowjit report` ([`Config::keep`]).
#[derive(Clone, Debug, Default)]
pub struct Kept {
    /// Each trace as recorded, by (tree, bridge): `None` for the root.
    pub recorded: HashMap<(usize, Option<usize>), trace::Trace>,
    /// The newest code of each tree's function and of each bridge compiled on its own.
    pub code: Vec<KeptCode>,
}

/// The listings of one function of machine code.
#[derive(Clone, Debug)]
pub struct KeptCode {
    /// The tree.
    pub tree: usize,
    /// The bridge compiled on its own, or `None` for the tree's function.
    pub bridge: Option<usize>,
    /// The Cranelift IR.
    pub ir: Vec<listing::Line>,
    /// The machine code.
    pub asm: Vec<listing::Line>,
    /// Its size, in bytes.
    pub size: usize,
}

/// How an attempt to record ended.
enum Recording {
    /// A tree, by index; the frame is at the start of its anchor.
    Tree(usize),
    /// The program stopped during the recording.
    Stopped(Value),
    /// The recording was abandoned; interpretation continues here.
    Resume(Position),
}

/// How a run of a segment ended: the tree that exited (machine code may have gone on in
/// another), where the interpreter continues, and the (segment, instruction) that exited.
type SegmentExit = (usize, Position, Option<(usize, usize)>);

/// What the interpreter does after a tree has run.
enum Next {
    /// Interpret from here.
    Resume(Position),
    /// The program stopped (while a bridge was recorded).
    Stopped(Value),
}

impl<'p> Jit<'p> {
    /// A driver for `program`. Fails only when machine code is asked for on a host that
    /// flowjit cannot emit it for.
    pub fn new(program: &'p Program, config: Config) -> Result<Jit<'p>, String> {
        if config.native {
            backend::Target::native()?;
        }
        config.policy.check()?;
        let profile = Profile::new(program, &config.policy);
        let payoff =
            (config.pay_off && config.native).then(|| payoff::Payoff::new(program, &config.policy));
        Ok(Jit {
            program,
            steps: Steps::new(config.max_steps),
            config,
            profile,
            payoff,
            trees: Vec::new(),
            backend: None,
            stats: Stats::default(),
            dump: String::new(),
            started: Instant::now(),
            log: Vec::new(),
            kept: Kept::default(),
            jobs: Vec::new(),
            next_job: 0,
        })
    }

    /// The trees recorded so far, in order.
    pub fn trees(&self) -> &[Tree] {
        &self.trees
    }

    /// Logs `kind` now.
    fn event(&mut self, kind: EventKind) {
        self.log.push(Event {
            at: self.started.elapsed(),
            kind,
        });
    }

    /// Notes that recording at `key` failed; logs when the key is blacklisted for it.
    fn failed(&mut self, key: &Key) {
        if self.profile.failed(key) {
            let anchor = describe(self.program, key);
            self.event(EventKind::Blacklisted { anchor });
        }
    }

    /// Notes that a limit was reached (once each, in `--stats` and the log).
    fn limit(&mut self, what: String) {
        if !self.stats.limits.contains(&what) {
            self.event(EventKind::Limit { what: what.clone() });
            self.stats.limit(what);
        }
    }

    /// The run's events so far, in order, then, as of now, each guard's exits and the
    /// totals (`--log`, `flowjit report`).
    pub fn events(&self) -> Vec<Event> {
        let mut log = self.log.clone();
        let at = self.started.elapsed();
        for (&(tree, segment, inst), &count) in &self.stats.exits {
            let guard = GuardRef {
                tree,
                segment,
                inst,
            };
            log.push(Event {
                at,
                kind: EventKind::GuardExits { guard, count },
            });
        }
        let s = &self.stats;
        let micros = [
            s.interp_time,
            s.record_time,
            s.opt_time,
            s.compile_time,
            s.trace_time,
            s.native_time,
        ]
        .map(events::micros);
        log.push(Event {
            at,
            kind: EventKind::RunEnded {
                traces: self.trees.len(),
                bridges: self.trees.iter().map(|t| t.bridges.len()).sum(),
                aborts: s.aborts.len(),
                entries: s.entries,
                native_entries: s.native_entries,
                exits: s.exits.values().sum(),
                links: s.links,
                micros,
            },
        });
        log
    }

    /// What the run kept for the report (empty unless [`Config::keep`]).
    pub fn kept(&self) -> &Kept {
        &self.kept
    }

    /// Tree `t`'s anchor as dumps and statistics show it: the label, and the green values.
    pub fn label(&self, t: usize) -> String {
        describe(self.program, &self.trees[t].key)
    }

    /// The program the driver runs.
    pub fn program(&self) -> &Program {
        self.program
    }

    /// Takes what the dumps have printed so far.
    pub fn take_dump(&mut self) -> String {
        std::mem::take(&mut self.dump)
    }

    /// Runs the program from `entry` on `state` and returns the value it prints.
    pub fn run(&mut self, state: &mut State, entry: BlockId) -> Result<Value, RuntimeError> {
        self.started = Instant::now();
        // The interpreter and the recorder reuse the results of elidable calls.
        state.memo.get_or_insert_with(Default::default);
        let mut pos = Position::start(entry);
        loop {
            self.collect();
            let start = Instant::now();
            let exit = interp::run(self.program, state, pos, &mut self.steps, &mut self.profile);
            self.stats.interp_time += start.elapsed();
            let anchor = match exit? {
                Exit::Stop(v) => return Ok(v),
                Exit::Hot(anchor) => anchor,
                Exit::Return(_) => unreachable!("a run's state does not return out"),
            };
            let Some(key) = self.profile.take_key(anchor, &state.frame) else {
                pos = Position::start(anchor);
                continue;
            };
            let tree = match self.profile.trace(&key) {
                Some(index) => index,
                None if !self.worth_compiling(&key, &state.frame) => {
                    self.stats.not_worth += 1;
                    self.profile.postpone(&key);
                    pos = Position::start(anchor);
                    continue;
                }
                None => match self.record(state, key)? {
                    Recording::Tree(index) => index,
                    Recording::Stopped(v) => return Ok(v),
                    Recording::Resume(at) => {
                        pos = at;
                        continue;
                    }
                },
            };
            match self.run_tree(tree, state, false)? {
                Next::Resume(at) => pos = at,
                Next::Stopped(v) => return Ok(v),
            }
        }
    }

    /// Whether the recorder folds operations on constants as it records
    /// (`trace::record`'s `fold`): when the optimizer's `fold` pass runs, which would fold
    /// them anyway; `--no-opt` records everything.
    fn folds_while_recording(&self) -> bool {
        self.config.passes.contains(&"fold")
    }

    /// Makes the backend when first needed in `--mode jit` (a run that compiles nothing
    /// does not pay for making it). When it cannot be made, nothing is compiled, and the
    /// error is kept in `--stats`.
    fn make_backend(&mut self) {
        if self.config.native && self.backend.is_none() {
            match Backend::new(self.config.target) {
                Ok(mut b) => {
                    b.set_tier_iterations(self.config.policy.tier_iterations);
                    b.set_bridge_entries(self.config.policy.bridge_entries);
                    self.backend = Some(b);
                }
                Err(why) => {
                    self.limit(format!("no machine code: {why}"));
                    self.config.native = false;
                }
            }
        }
    }

    /// Whether the loop at `key`, hot with `frame`, is worth recording and compiling now
    /// (`payoff`): a loop of the program itself (an interpreted program's loops, found by
    /// their greens, have no counter to read) that is not a counted loop near its end.
    fn worth_compiling(&mut self, key: &Key, frame: &Frame) -> bool {
        match &mut self.payoff {
            Some(p) if key.greens.is_empty() => p.worth_compiling(
                self.program,
                key.anchor,
                frame,
                self.config.policy.threshold + 1,
            ),
            _ => true,
        }
    }

    /// The articles' `do_trace`: records at once from `from`, runs the trace until it
    /// exits, and lets the interpreter finish without tracing again.
    pub fn do_trace(&mut self, state: &mut State, from: BlockId) -> Result<Value, RuntimeError> {
        let key = Key {
            anchor: from,
            greens: Vec::new(),
        };
        let pos = match self.record(state, key)? {
            Recording::Tree(index) => match self.run_tree(index, state, true)? {
                Next::Resume(at) => at,
                Next::Stopped(v) => return Ok(v),
            },
            Recording::Stopped(v) => return Ok(v),
            Recording::Resume(at) => at,
        };
        let start = Instant::now();
        let exit = interp::run(self.program, state, pos, &mut self.steps, &mut NoMonitor);
        self.stats.interp_time += start.elapsed();
        match exit? {
            Exit::Stop(v) => Ok(v),
            Exit::Hot(_) => unreachable!("NoMonitor never takes over"),
            Exit::Return(_) => unreachable!("a run's state does not return out"),
        }
    }

    fn record(&mut self, state: &mut State, key: Key) -> Result<Recording, RuntimeError> {
        let max_trees = self.config.policy.max_trees;
        if self.trees.len() >= max_trees {
            self.limit(format!(
                "trace limit reached ({max_trees} traces): no more are recorded"
            ));
            self.failed(&key);
            return Ok(Recording::Resume(Position::start(key.anchor)));
        }
        let label = describe(self.program, &key);
        self.event(EventKind::TraceStarted {
            anchor: label.clone(),
            from: None,
        });
        let start = Instant::now();
        let anchor = key.anchor;
        // The variables past 64 bits where the loop is entered: its code holds them boxed.
        let wide = wide_slots(&state.frame);
        let greens: Vec<Slot> = if key.greens.is_empty() {
            Vec::new()
        } else {
            self.profile.greens().to_vec()
        };
        let profile = &self.profile;
        let traced = |block: BlockId, frame: &Frame| {
            profile
                .key_at(block, frame)
                .is_some_and(|k| k != key && profile.lookup(&k).is_some())
        };
        let fold = self.folds_while_recording();
        let recorded = trace::record(
            self.program,
            state,
            anchor,
            &greens,
            &traced,
            &mut self.steps,
            self.config.policy.max_trace_len,
            fold,
        );
        self.stats.record_time += start.elapsed();
        match recorded? {
            Recorded::Stopped(v) => Ok(Recording::Stopped(v)),
            Recorded::Aborted { reason, at } => {
                if self.config.dumps.trace {
                    let _ = writeln!(self.dump, "# trace aborted at {label}: {reason}");
                }
                self.event(EventKind::TraceAborted {
                    at: label.clone(),
                    reason: reason.to_string(),
                });
                self.failed(&key);
                self.stats.aborts.push((label, reason));
                Ok(Recording::Resume(at))
            }
            Recorded::Loop(trace) => {
                debug_assert_eq!(trace::verify::verify(&trace), Ok(()));
                let index = self.trees.len();
                if self.config.keep {
                    self.kept.recorded.insert((index, None), trace.clone());
                }
                if self.config.dumps.trace {
                    let _ = writeln!(self.dump, "# trace {index}: loop at {label}");
                    self.dump.push_str(&print::articles(self.program, &trace));
                }
                let start = Instant::now();
                let optimized = self.optimize_root(&trace);
                let took = start.elapsed();
                self.stats.opt_time += took;
                let (root, generic) = match optimized {
                    Ok(optimized) => optimized,
                    Err(rejected) => {
                        // The loop closed, so the frame is at the anchor: interpret on, and
                        // treat the key as a failed recording.
                        if self.config.dumps.opt {
                            let _ = writeln!(self.dump, "# opt {index}: {rejected}");
                        }
                        self.event(EventKind::Rejected {
                            at: label.clone(),
                            reason: rejected.reason().to_string(),
                        });
                        self.failed(&key);
                        self.stats.rejected.push((label, rejected));
                        return Ok(Recording::Resume(Position::start(anchor)));
                    }
                };
                if self.config.dumps.opt {
                    let _ = writeln!(self.dump, "# opt {index}: loop at {label}");
                    if let Some(why) = &generic {
                        let _ = writeln!(
                            self.dump,
                            "# (its body assumes nothing of the preamble: peeled, {})",
                            why.reason()
                        );
                    }
                    self.dump.push_str(&print::ssa(self.program, &root));
                }
                if let Some(why) = generic {
                    self.stats.generic.push((label.clone(), why));
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
                self.trees.push(Tree {
                    key,
                    root,
                    bridges: Vec::new(),
                    code: None,
                    failures: HashMap::default(),
                    incoming: Vec::new(),
                    assume_ints: true,
                    assume_induction: true,
                    entry_failures: 0,
                    refusals: 0,
                    wide,
                    ways: 0,
                    quick: true,
                    promoted: 0,
                    compiling: false,
                    again: false,
                });
                self.compile(index, None);
                Ok(Recording::Tree(index))
            }
        }
    }

    /// Compiles tree `t` (again) to machine code, if the backend is on and can; on failure
    /// the tree keeps the code it had (its new bridges then run on the trace interpreter).
    /// `new` is the segment of the bridge it is compiled again for, whose code alone the
    /// `ir` and `asm` dumps show.
    fn compile(&mut self, t: usize, new: Option<usize>) -> bool {
        self.make_backend();
        let background = self.config.background;
        if background && self.trees[t].compiling {
            self.trees[t].again = true;
            return true;
        }
        let Some(backend) = self.backend.as_mut() else {
            return false;
        };
        let listings = Listings {
            ir: self.config.dumps.ir || self.config.keep,
            asm: self.config.dumps.asm || self.config.keep,
        };
        let counting = self.config.max_steps.is_some();
        let tree = &self.trees[t];
        let start = Instant::now();
        let frame_size = self.program.frame_size();
        let moved: Vec<usize> = (1..=tree.bridges.len())
            .filter(|&k| tree.bridges[k - 1].separate && tree.bridges[k - 1].wanted)
            .collect();
        let prepared = backend.prepare(
            &tree.next_segments(),
            listings,
            counting,
            (t, 0),
            frame_size,
            &[],
        );
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
        self.compiled(t, new, &moved, compiled, took)
    }

    /// Puts tree `t`'s function, compiled (for its bridge `new`, and with the bridges
    /// `moved` that were on their own), to use; or, when it could not be, says why. Whether
    /// it was.
    fn compiled(
        &mut self,
        t: usize,
        new: Option<usize>,
        moved: &[usize],
        compiled: Result<backend::Compiled, backend::Unsupported>,
        took: std::time::Duration,
    ) -> bool {
        let Some(backend) = self.backend.as_ref() else {
            return false;
        };
        let tree = &self.trees[t];
        let label = describe(self.program, &tree.key);
        let inside = (1..=tree.bridges.len())
            .filter(|k| !tree.bridges[k - 1].separate || moved.contains(k))
            .count();
        let target = backend.listing_target();
        let what = match new {
            None if inside == 0 => format!("{t}: loop at {label}"),
            None => format!("{t}: loop at {label}, with {inside} bridge(s), compiled again"),
            Some(seg) => format!("{t}: bridge {} at {label}, in the tree's function", seg - 1),
        };
        match compiled {
            Ok(code) => {
                // The bridges that move in: their old code stays alive until the new
                // function, whose guards no longer go there, has replaced the old one,
                // which linked to it. The exits of their old code that went on in trees
                // (this one's too, which the relinking below would take for the new
                // function's) go with it: their numbers are the old code's.
                let mut retired = Vec::new();
                for &k in moved {
                    let bridge = &mut self.trees[t].bridges[k - 1];
                    retired.push(bridge.code.take());
                    bridge.separate = false;
                    bridge.wanted = false;
                }
                if !moved.is_empty() {
                    for tree in &mut self.trees {
                        tree.incoming
                            .retain(|&(from, unit, _)| !(from == t && moved.contains(&unit)));
                    }
                }
                self.show_code(t, 0, new, &code, &what, target);
                self.event(EventKind::Compiled {
                    tree: t,
                    bridge: None,
                    bridges: inside,
                    bytes: code.size,
                    micros: events::micros(took),
                });
                // The exits that went on in this tree's old code go on in the new; those
                // of its old code are forgotten (its new code returns until linked again).
                let old = (t, 0);
                let incoming = std::mem::take(&mut self.trees[t].incoming);
                for &(from, unit, g) in &incoming {
                    if (from, unit) != old {
                        let source = &self.trees[from];
                        if let Some(c) = source.code_of(unit) {
                            let kinds = c.exit_kinds_at(g, unit, |seg| source.segment(seg));
                            c.relink(g, &code, kinds.as_deref());
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
                // The guards of the new code whose bridges are compiled on their own go
                // there again.
                let tree = &self.trees[t];
                let mut again = Vec::new();
                for (k, b) in tree.bridges.iter().enumerate() {
                    let (ps, pi) = b.from;
                    if let (Some(bc), 0, None) = (&b.code, tree.unit_of(ps), &b.value) {
                        // Unless the new code's exit leaves other kinds than the bridge
                        // assumes: the tree now holds a variable as an integer of any size,
                        // or the guard was in a bridge on its own that has moved in, whose
                        // exit said more (the kinds its own entry assumed: in the tree's
                        // function that bridge reads nothing from the mirror). Such a
                        // bridge is compiled again for the new exit, as its guard's
                        // first exit had it compiled: left unlinked, each time its guard
                        // failed the code returned to the runtime, which entered the bridge
                        // (`benches/cliffs/dispatch64.fg`, n=20000000: 2.2 million
                        // returns and 1.12 s, against 0.16 s with no bridge moving).
                        let kinds = code.exit_kinds(tree.segment(ps), ps, pi);
                        if let (Some(g), Some(kinds)) = (code.global(ps, pi), kinds) {
                            if bc.admits(&kinds) {
                                code.link(g, bc);
                            } else if !b.wanted {
                                again.push(k + 1);
                            }
                        }
                    }
                }
                self.trees[t].code = Some(code);
                drop(retired);
                for seg in again {
                    self.compile_bridge(t, seg);
                }
                true
            }
            Err(why) => {
                // Bridges that were to move in and have code of their own stay there, and
                // stop asking to move (as `Jit::promote` does when compiling fails).
                for &k in moved {
                    let bridge = &mut self.trees[t].bridges[k - 1];
                    if let Some(code) = &bridge.code {
                        code.stop_counting();
                        bridge.wanted = false;
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
                self.stats.not_compiled.push((label, why));
                // A tree without machine code is not run (the trace interpreter is slower
                // than the interpreter): its loop is left to the interpreter.
                if self.trees[t].code.is_none() {
                    let key = self.trees[t].key.clone();
                    self.profile.forget(&key);
                }
                false
            }
        }
    }

    /// Puts to use the trees' functions the compiler thread has finished, and compiles
    /// again those asked for meanwhile ([`Tree::again`](tree::Tree)).
    fn collect(&mut self) {
        if self.jobs.is_empty() {
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
            match backend.finished() {
                Ok(None) => break,
                Ok(Some((id, machine))) => {
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
            self.compiled(t, job.new, &job.moved, compiled, took);
            if std::mem::take(&mut self.trees[t].again) {
                self.compile(t, None);
            }
        }
        for job in lost {
            let t = job.tree;
            self.trees[t].compiling = false;
            self.trees[t].again = false;
            self.compile(t, job.new);
        }
    }

    /// Bridge `seg` of tree `t`, compiled on its own, returned [`backend::lower::HOT`]: it
    /// was entered [`backend::BRIDGE_ENTRIES`] times, each through its guard's exit (the
    /// snapshot written into the mirror, the epilogue, a jump through a link, the prologue,
    /// the inputs loaded). It moves into the tree's function, compiled again, where its
    /// guard branches to it with every value in a register, as LuaJIT and PyPy give a
    /// side exit that runs often a trace of its own and then patch the guard to jump there.
    /// Only a bridge whose guard is in that function (the root's, or a bridge's there), while
    /// the function has room ([`Policy::max_tree_function`]) and fewer than
    /// [`Policy::max_promoted`] bridges
    /// came in so; any other stops counting. The tree's other bridges on their own that
    /// have spent a quarter of their count come in with it, in the same compilation. Their
    /// own bridges stay on their own, linked from the new function's exits of their guards.
    fn promote(&mut self, t: usize, seg: usize) {
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
                && !bridge.wanted
                && bridge.code.is_some()
                && bridge.value.is_none()
                && tree.unit_of(bridge.from.0) == 0
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
            if movable(k) && tree.promoted + chosen.len() < policy.max_promoted && size <= room {
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
        // They move in with the function's next compilation (`Jit::compiled`, which
        // retires their code), and their code runs until then: on the compiler thread,
        // until it is done.
        for &k in &chosen {
            self.trees[t].bridges[k - 1].wanted = true;
        }
        if self.compile(t, Some(seg)) {
            self.trees[t].promoted += chosen.len();
            self.stats.promoted += chosen.len() as u64;
        } else {
            for &k in &chosen {
                self.trees[t].bridges[k - 1].wanted = false;
            }
        }
    }

    /// Compiles bridge `seg` of tree `t` in a function of its own (its `separate` is set),
    /// and makes its guard's exit go there when the bridge is not specialized on a value.
    /// On failure the bridge runs on the trace interpreter.
    fn compile_bridge(&mut self, t: usize, seg: usize) {
        self.make_backend();
        let Some(backend) = self.backend.as_mut() else {
            return;
        };
        let listings = Listings {
            ir: self.config.dumps.ir || self.config.keep,
            asm: self.config.dumps.asm || self.config.keep,
        };
        let tree = &self.trees[t];
        // Alone in its function: no parent guard to read from, and its end, even at its
        // own tree's anchor, is an exit that goes on in the tree's function. Its path to its
        // start was counted (`--max-steps`) by the exit of its guard.
        let segment = backend::Segment {
            parent: None,
            value: None,
            returns: false,
            separate: false,
            cost: 0,
            ..tree.segment_alone(seg)
        };
        let start = Instant::now();
        let frame_size = self.program.frame_size();
        let counting = self.config.max_steps.is_some();
        // Entered only from its guard's exit (when not specialized on a value), it need not
        // check the kinds that exit leaves in the mirror.
        let bridge = &tree.bridges[seg - 1];
        let (ps, pi) = bridge.from;
        let assumed = match (&bridge.value, tree.code_of(ps)) {
            (None, Some(parent)) => parent
                .exit_kinds(tree.segment(ps), ps, pi)
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let compiled = backend.compile(
            &[segment],
            listings,
            counting,
            (t, seg),
            frame_size,
            &assumed,
        );
        let took = start.elapsed();
        self.stats.compile_time += took;
        let what = format!(
            "{t}: bridge {} at {}",
            seg - 1,
            describe(self.program, &tree.key)
        );
        let target = backend.listing_target();
        match compiled {
            Ok(code) => {
                self.show_code(t, seg, None, &code, &what, target);
                let tree = &self.trees[t];
                let size = code.size;
                let bridge = &tree.bridges[seg - 1];
                let (ps, pi) = bridge.from;
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
                self.trees[t].bridges[seg - 1].code = Some(code);
                self.event(EventKind::Compiled {
                    tree: t,
                    bridge: Some(seg - 1),
                    bridges: 0,
                    bytes: size,
                    micros: events::micros(took),
                });
            }
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

    /// The tree anchored at the start of `block`, for the frame's greens.
    fn tree_at(&self, block: BlockId, frame: &Frame) -> Option<usize> {
        self.profile.lookup(&self.profile.key_at(block, frame)?)
    }

    /// Runs tree `t` (the frame is at its anchor) and the trees its bridges lead to, until
    /// an exit without a bridge. With `only`, no bridge is recorded and no other tree is
    /// entered (the articles' `do_trace`).
    fn run_tree(
        &mut self,
        mut t: usize,
        state: &mut State,
        only: bool,
    ) -> Result<Next, RuntimeError> {
        let mut seg = 0;
        let mut here = Position::start(self.trees[t].key.anchor);
        loop {
            self.collect();
            let (exited, pos, at) = match self.run_segment(t, seg, here, state) {
                Some(exit) => exit,
                None => return Ok(Next::Resume(here)),
            };
            // Machine code may have gone on from tree to tree (`backend::lower::linkable`).
            t = exited;
            let Some((eseg, einst)) = at else {
                return Ok(Next::Resume(pos));
            };
            let exits = self.stats.exits.entry((t, eseg, einst)).or_default();
            *exits += 1;
            if *exits == 1 {
                self.trees[t].ways += 1;
            }
            let inst = &self.trees[t].segment(eseg).insts[einst];
            // A read that exits again and again: its array may have stopped holding only
            // integers (an atom stored in it), which the code assumed (`Segment::ints`), or
            // the one bounds check of all the offsets the segment reads around a pointer
            // (`Lower::check_index`) fails where the pointer is near an end of the array,
            // though the access it is made at would not. Likewise an addition or subtraction
            // whose overflow check that bounds check stands for (`Lower::checked_by_access`),
            // whose exit it takes. Compile the tree's code again (its function and its
            // bridges on their own), checking tags instead, and each read's own index.
            let read = matches!(
                inst.kind,
                Kind::GetItem | Kind::Op(flowjit_runtime::Op::Add | flowjit_runtime::Op::Sub)
            );
            if read && *exits > self.config.policy.bridge_threshold && self.trees[t].assume_ints {
                self.trees[t].assume_ints = false;
                self.compile(t, None);
                for seg in 1..=self.trees[t].bridges.len() {
                    // Not those on their way into the function (`Bridge::wanted`): their
                    // old code stays correct until then, its checks exiting.
                    let b = &self.trees[t].bridges[seg - 1];
                    if b.separate && !b.wanted {
                        self.compile_bridge(t, seg);
                    }
                }
                return Ok(Next::Resume(pos));
            }
            match inst.kind {
                Kind::Loop if eseg > 0 => {
                    // A bridge ended at an anchor: enter the tree there.
                    match self.tree_at(pos.block, &state.frame).filter(|_| !only) {
                        Some(next) => {
                            self.link(t, (eseg, einst), next);
                            t = next;
                            seg = 0;
                            here = pos;
                        }
                        None => return Ok(Next::Resume(pos)),
                    }
                }
                Kind::GuardTrue | Kind::GuardFalse | Kind::GuardValue if !only => {
                    let value = self
                        .promoted(inst)
                        .and_then(|slot| state.frame[slot.index()].clone());
                    let value = if inst.kind == Kind::GuardValue {
                        match value {
                            Some(v) => Some(v),
                            // Not a promotion: a green checked at a merge point. The frame
                            // is there, with other greens: enter their tree, if any.
                            None => {
                                match self
                                    .tree_at(pos.block, &state.frame)
                                    .filter(|_| pos.inst == 0)
                                {
                                    Some(next) => {
                                        self.link(t, (eseg, einst), next);
                                        t = next;
                                        seg = 0;
                                        here = pos;
                                        continue;
                                    }
                                    None => return Ok(Next::Resume(pos)),
                                }
                            }
                        }
                    } else {
                        None
                    };
                    // A value with a bridge of its own goes there; any other value of a
                    // promotion goes to its unspecialized bridge, if it has one.
                    let tree = &self.trees[t];
                    let bridge = tree
                        .bridge((eseg, einst), value.as_ref())
                        .or_else(|| value.as_ref().and(tree.bridge((eseg, einst), None)));
                    if let Some(b) = bridge {
                        seg = b;
                        here = pos;
                        continue;
                    }
                    let Some(value) = self.bridge_wanted(t, (eseg, einst), value) else {
                        return Ok(Next::Resume(pos));
                    };
                    match self.record_bridge(t, (eseg, einst), value, pos, state)? {
                        Next::Resume(end) => {
                            match self
                                .tree_at(end.block, &state.frame)
                                .filter(|_| end.inst == 0)
                            {
                                Some(next) => {
                                    t = next;
                                    seg = 0;
                                    here = end;
                                }
                                None => return Ok(Next::Resume(end)),
                            }
                        }
                        stopped => return Ok(stopped),
                    }
                }
                _ => return Ok(Next::Resume(pos)),
            }
        }
    }

    /// Makes the exit at instruction `at` of tree `t`, after which the driver entered tree
    /// `next` right where it resumed, go on in `next`'s machine code directly next time:
    /// when both are machine code, the exit can ([`backend::lower::linkable`]), and `next`
    /// inlines calls no deeper than `t` (so that where `t` may run, `next` may too).
    fn link(&mut self, t: usize, at: (usize, usize), next: usize) {
        let (from, to) = (&self.trees[t], &self.trees[next]);
        let (Some(code), Some(target)) = (from.code_of(at.0), &to.code) else {
            return;
        };
        let trace = from.segment(at.0);
        if !backend::lower::linkable(trace, at.1) || to.calls() > from.calls() {
            return;
        }
        // `next` holds its greens as constants: the exit must give them those values every
        // time, as constants in its snapshot, or by leaving them as they were where `t`
        // was entered, its own key's.
        let snap = trace
            .snap_of(&trace.insts[at.1])
            .expect("an exit has a snapshot");
        let greens = self.profile.greens();
        let same = |k: usize| match snap.get(greens[k]) {
            Some(o) => o.as_const() == Some(&to.key.greens[k]),
            None => from.key.greens.get(k) == Some(&to.key.greens[k]),
        };
        if !(0..to.key.greens.len()).all(same) {
            return;
        }
        let Some(g) = code.global(at.0, at.1) else {
            return;
        };
        // `next` does not check its inputs' kinds: the exit must leave them so.
        if !code
            .exit_kinds(trace, at.0, at.1)
            .is_some_and(|kinds| target.admits(&kinds))
        {
            return;
        }
        code.link(g, target);
        let unit = from.unit_of(at.0);
        self.trees[next].incoming.push((t, unit, g));
        self.stats.links += 1;
        let from = GuardRef {
            tree: t,
            segment: at.0,
            inst: at.1,
        };
        self.event(EventKind::Linked { from, to: next });
    }

    /// Runs segment `seg` of tree `t` from `here` (machine code runs the whole tree from the
    /// root, and may go on in other trees). Returns the tree that exited, where the
    /// interpreter continues and which instruction exited (`None` for a stop at the
    /// `--max-steps` budget or a refused entry); `None` if the budget cannot hold a bridge.
    fn run_segment(
        &mut self,
        t: usize,
        seg: usize,
        here: Position,
        state: &mut State,
    ) -> Option<SegmentExit> {
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
            // and after `Policy::max_refusals` such entries the tree's loop is left to it for good.
            if let (Some(code), true) = (tree.code_of(seg), self.config.native) {
                if !code.accepts(&state.frame) {
                    if !self.widen(t, seg, &state.frame) {
                        self.refused(t);
                    }
                    return None;
                }
            }
            if let (Some(_), Some(backend)) = (tree.code_of(seg), self.backend.as_mut()) {
                let start = Instant::now();
                let trees = &self.trees;
                let find = |(k, unit): (usize, usize)| {
                    let tree = &trees[k];
                    let code = tree.code_of(unit).expect("only compiled code is linked");
                    if unit == 0 {
                        return backend::TreeCode {
                            code,
                            segments: tree.segments(),
                            start: Position::start(tree.key.anchor),
                        };
                    }
                    let (ps, pi) = tree.bridges[unit - 1].from;
                    backend::TreeCode {
                        code,
                        // As compiled (`Jit::compile_bridge`): its guard's exit counted
                        // the path to it.
                        segments: vec![backend::Segment {
                            cost: 0,
                            ..tree.segment_alone(unit)
                        }],
                        start: tree.guard_snapshot((ps, pi)).pos,
                    }
                };
                let exit = backend.run((t, unit), &find, self.program, state, &mut self.steps);
                self.stats.native_time += start.elapsed();
                if let Some(exit) = exit {
                    self.stats.native_entries += 1;
                    self.stats.native_allocations += exit.allocated;
                    if self.stats.first_native.is_none() {
                        self.stats.first_native = Some(start.duration_since(self.started));
                    }
                    let at = exit.at.filter(|&(s, i)| {
                        let inst = &self.trees[exit.tree].segment(s).insts[i];
                        // A stop at the budget, or the loop's entry check failing.
                        !(matches!(inst.kind, Kind::Loop | Kind::LoopStart) && s == 0)
                    });
                    if let Some((0, i)) = exit.at {
                        let tree = &self.trees[exit.tree];
                        let entry_check = tree.root.insts[i].kind == Kind::LoopStart
                            && tree.code.as_ref().is_some_and(|c| c.checks_entry());
                        // The quick backend's loop ran its count: Cranelift's code now.
                        let hot = tree.root.insts[i].kind == Kind::Loop
                            && tree.code.as_ref().is_some_and(|c| c.quick);
                        if entry_check {
                            self.entry_failed(exit.tree);
                        }
                        if hot {
                            self.trees[exit.tree].quick = false;
                            self.stats.tiered += 1;
                            self.compile(exit.tree, None);
                        }
                    }
                    if let Some(unit) = exit.hot {
                        self.promote(exit.tree, unit);
                    }
                    return Some((exit.tree, exit.pos, at));
                }
            }
        }
        let tree = &self.trees[t];
        if seg == 0 {
            let start = Instant::now();
            let mut env = trace::Env {
                program: self.program,
                state,
                steps: &mut self.steps,
            };
            let exit = trace::run_trace(&tree.root, &mut env);
            self.stats.trace_time += start.elapsed();
            return Some((t, exit.pos, exit.inst.map(|i| (0, i))));
        }
        let bridge = &tree.bridges[seg - 1].trace;
        if self.steps.left < bridge.iteration_cost() {
            let _ = here;
            return None;
        }
        let start = Instant::now();
        let mut env = trace::Env {
            program: self.program,
            state,
            steps: &mut self.steps,
        };
        let exit = trace::run_bridge(bridge, &mut env);
        self.stats.trace_time += start.elapsed();
        Some((t, exit.pos, exit.inst.map(|i| (seg, i))))
    }

    /// Counts an entry into tree `t` that its machine code refused; at
    /// [`Policy::max_refusals`], the
    /// tree's key is never entered or traced again (its loop is left to the interpreter).
    /// Counts an entry into tree `t`'s loop that failed the check of what its proofs
    /// assume (`backend::Segment::induction`). Past the bridge threshold, the tree's code
    /// is compiled again without those assumptions: the loop is entered with values
    /// outside them too often.
    fn entry_failed(&mut self, t: usize) {
        let tree = &mut self.trees[t];
        tree.entry_failures += 1;
        if tree.entry_failures > self.config.policy.bridge_threshold && tree.assume_induction {
            tree.assume_induction = false;
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
        self.trees[t].wide.extend(found);
        self.compile(t, None);
        let separate: Vec<usize> = (0..self.trees[t].bridges.len())
            .filter(|&k| self.trees[t].bridges[k].separate && !self.trees[t].bridges[k].wanted)
            .collect();
        for k in separate {
            self.compile_bridge(t, k + 1);
        }
        true
    }

    fn refused(&mut self, t: usize) {
        let tree = &mut self.trees[t];
        tree.refusals += 1;
        let max_refusals = self.config.policy.max_refusals;
        if tree.refusals == max_refusals {
            let key = tree.key.clone();
            self.profile.forget(&key);
            let anchor = describe(self.program, &key);
            self.event(EventKind::Blacklisted { anchor });
            self.limit(format!(
                "machine code refused {max_refusals} entries (values it was not compiled for, such as big integers): loops left to the interpreter"
            ));
        }
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
        let rejected = match self.optimize(trace, passes) {
            Ok(t) => return Ok((t, None)),
            Err(rejected) => rejected,
        };
        let alternates = matches!(
            rejected,
            opt::Rejected::GuardOnConstant { .. } | opt::Rejected::Contradiction { .. }
        );
        if !alternates || !passes.contains(&"peel") {
            return Err(rejected);
        }
        let counted = self.config.max_steps.is_some();
        let t = opt::optimize_generic(trace, passes, counted)?;
        Ok((self.finish_optimizing(t, passes)?, Some(rejected)))
    }

    /// Optimizes `trace` with `passes`, counting operations exactly under `--max-steps`.
    fn optimize(
        &self,
        trace: &trace::Trace,
        passes: &[&str],
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
        passes: &[&str],
    ) -> Result<trace::Trace, opt::Rejected> {
        // What only dead variables of the snapshots used goes too.
        let program = self.program;
        let t = opt::prune_dead_entries(t, &|pos| program.live_at(pos.block, pos.inst));
        if passes.contains(&"dce") {
            opt::dce::run(t)
        } else {
            Ok(t)
        }
    }

    /// The variable a `guard_value` promotes (from the statement it was recorded from).
    fn promoted(&self, inst: &trace::Inst) -> Option<Slot> {
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

    /// Whether tree `t` has few ways out: at most [`Policy::max_tree_ways`] of its guards have
    /// exited so far. Only such a tree gets a bridge compiled in its function: the other
    /// way of a loop whose two ways alternate, or a Brainfuck loop's end, not the first of
    /// many ways. A loop of 32 ways (`benches/cliffs/branchy400.fg`) compiled each of its
    /// trees twice for its first bridge, a sixth of its instructions; each of its other
    /// ways costs an exit and an entry whether or not that one is in the tree's function.
    fn few_ways(&self, t: usize) -> bool {
        self.trees[t].ways <= self.config.policy.max_tree_ways
    }

    /// Whether a bridge should be recorded now from guard `from` of tree `t`, whose exit
    /// found the promoted variable holding `value` (for a promotion), and for which value:
    /// `Some(Some(v))` for a bridge specialized on `v`, `Some(None)` for a bridge that is
    /// not specialized (from a `guard_true` or `guard_false`, or from a promotion that has
    /// seen more values than it specializes on: PyPy's and LuaJIT's answer to a megamorphic
    /// site, one generic path that costs about what no promotion costs).
    fn bridge_wanted(
        &self,
        t: usize,
        from: (usize, usize),
        value: Option<Value>,
    ) -> Option<Option<Value>> {
        let tree = &self.trees[t];
        let exits = self
            .stats
            .exits
            .get(&(t, from.0, from.1))
            .copied()
            .unwrap_or(0);
        // A guard inside an inlined call resumes inside the call: a bridge from it would
        // start in a frame the tree's own code does not hold (bridges start in the tree's
        // frame), so it gets none.
        let inside_call = !tree.guard_snapshot(from).frames.is_empty();
        let policy = &self.config.policy;
        let threshold = if self.profile.by_greens() {
            policy.merge_bridge_threshold
        } else {
            policy.bridge_threshold
        };
        let wanted = exits > threshold
            && !inside_call
            && tree.bridges.len() < policy.max_bridges
            && tree.failures.get(&from).copied().unwrap_or(0) < policy.max_bridge_failures;
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
    fn record_bridge(
        &mut self,
        t: usize,
        from: (usize, usize),
        value: Option<Value>,
        pos: Position,
        state: &mut State,
    ) -> Result<Next, RuntimeError> {
        let tree = &self.trees[t];
        let guard = &tree.segment(from.0).insts[from.1];
        let promotion = self.promoted(guard).is_some();
        let mut fixed: Vec<(Slot, Value)> = match (&value, self.promoted(guard)) {
            (Some(v), Some(slot)) => vec![(slot, v.clone())],
            _ => Vec::new(),
        };
        // The guard's snapshot is complete: the bridge reads every variable it gives (so
        // that the bridge's snapshots are complete too), and those it gives as constants
        // are constants in the bridge from its recording on (the recorder's fixed values).
        let snap = tree.guard_snapshot(from);
        let given = snap
            .entries
            .iter()
            .filter_map(|(slot, o)| o.as_const().map(|v| (*slot, v)));
        // A green variable the snapshot does not give still holds the value the tree was
        // entered with, its key's: a constant in the bridge too (the bytecode of an
        // interpreter written in the flowgraph language, so that the bridge's dispatch
        // folds away as the root's does).
        let greens = (self.profile.greens().iter().zip(&tree.key.greens))
            .filter(|(g, _)| snap.get(**g).is_none())
            .map(|(g, v)| (*g, v));
        for (slot, v) in given.chain(greens) {
            if fixed.iter().all(|(s, _)| *s != slot) {
                fixed.push((slot, v.clone()));
            }
        }
        let inherited: Vec<Slot> = snap.entries.iter().map(|(slot, _)| *slot).collect();
        let guard_ref = GuardRef {
            tree: t,
            segment: from.0,
            inst: from.1,
        };
        self.event(EventKind::TraceStarted {
            anchor: self.program.label(pos.block).to_string(),
            from: Some(guard_ref),
        });
        let start = Instant::now();
        let fold = self.folds_while_recording();
        let profile = &self.profile;
        let ends = |target: BlockId, frame: &Frame| {
            let key = profile.key_at(target, frame)?;
            profile.lookup(&key)?;
            Some(if key.greens.is_empty() {
                Vec::new()
            } else {
                profile.greens().to_vec()
            })
        };
        let recorded = trace::record_bridge(
            self.program,
            state,
            pos,
            &fixed,
            &inherited,
            &ends,
            &mut self.steps,
            self.config.policy.max_trace_len * self.config.policy.bridge_length_factor,
            fold,
        );
        self.stats.record_time += start.elapsed();
        let label = format!("a bridge from {guard_ref}");
        let failed = |jit: &mut Jit| *jit.trees[t].failures.entry(from).or_default() += 1;
        match recorded? {
            Recorded::Stopped(v) => Ok(Next::Stopped(v)),
            Recorded::Aborted { reason, at } => {
                failed(self);
                self.event(EventKind::TraceAborted {
                    at: label.clone(),
                    reason: reason.to_string(),
                });
                self.stats.aborts.push((label, reason));
                Ok(Next::Resume(at))
            }
            Recorded::Loop(mut trace) => {
                let end = Position::start(trace.anchor);
                // What the tree knew at the guard of the values its snapshot gives holds
                // where the bridge starts.
                trace.known = opt::bounds::known_at_guard(self.trees[t].segment(from.0), from.1);
                let passes: Vec<&str> = self
                    .config
                    .passes
                    .iter()
                    .copied()
                    .filter(|p| *p != "peel")
                    .collect();
                let start = Instant::now();
                let optimized = self.optimize(&trace, &passes);
                let took = start.elapsed();
                self.stats.opt_time += took;
                let recorded = trace;
                let trace = match optimized {
                    Ok(t) => t,
                    Err(rejected) => {
                        failed(self);
                        self.event(EventKind::Rejected {
                            at: label.clone(),
                            reason: rejected.reason().to_string(),
                        });
                        self.stats.rejected.push((label, rejected));
                        return Ok(Next::Resume(end));
                    }
                };
                self.stats.count_heap(&recorded, &trace);
                let returns = self.profile.key_at(trace.anchor, &state.frame).as_ref()
                    == Some(&self.trees[t].key);
                let number = self.trees[t].bridges.len();
                if self.config.keep {
                    self.kept
                        .recorded
                        .insert((t, Some(number)), recorded.clone());
                }
                self.event(EventKind::Optimized {
                    tree: t,
                    bridge: Some(number),
                    recorded: recorded.insts.len(),
                    optimized: trace.insts.len(),
                    micros: events::micros(took),
                });
                let header = format!(
                    "# bridge {number} from {guard_ref} to {}{}",
                    self.program.label(trace.anchor),
                    match &value {
                        Some(v) => {
                            format!(", for {}", flowjit_runtime::ops::shown_within(v, 24))
                        }
                        None if promotion => ", unspecialized".to_string(),
                        None => String::new(),
                    },
                );
                if self.config.dumps.trace {
                    let _ = writeln!(self.dump, "{header}");
                    self.dump.push_str(&print::articles(self.program, &trace));
                }
                if self.config.dumps.opt {
                    let _ = writeln!(self.dump, "{header}");
                    self.dump.push_str(&print::ssa(self.program, &trace));
                }
                // A bridge is compiled on its own where its guard's exit can go there
                // (`backend::lower::linkable`) and it is not specialized on a value, unless
                // it comes back to its own anchor as one of the first such bridges of a tree
                // with few ways out (`Policy::max_tree_bridges`, `few_ways`); and always where its guard is in
                // a bridge compiled on its own. Otherwise it is compiled in the tree's
                // function, compiled again.
                let tree = &self.trees[t];
                let in_tree: usize = tree
                    .next_segments()
                    .iter()
                    .filter(|s| !s.separate)
                    .map(|s| s.trace.insts.len())
                    .sum();
                let separate = self.config.native
                    && (tree.unit_of(from.0) != 0
                        || (value.is_none()
                            && (!returns
                                || tree.bridges.iter().filter(|b| b.in_function()).count()
                                    >= self.config.policy.max_tree_bridges
                                || !self.few_ways(t))
                            && backend::lower::linkable(tree.segment(from.0), from.1)));
                // A tree's function compiled again for each bridge in it costs what the
                // whole function does: past `Policy::max_tree_function` it takes no more, and the
                // guard's exits stay exits.
                let policy = self.config.policy;
                let full = policy.max_tree_function;
                if self.config.native && !separate && in_tree + trace.insts.len() > full {
                    self.trees[t]
                        .failures
                        .insert(from, policy.max_bridge_failures);
                    self.limit(format!(
                        "trace {t}'s function is full ({full} instructions): \
                         bridges that would be compiled in it are left out"
                    ));
                    return Ok(Next::Resume(end));
                }
                self.event(EventKind::BridgeAttached {
                    bridge: number,
                    from: guard_ref,
                    value: value.as_ref().map(|v| v.to_string()),
                    to: self.program.label(trace.anchor).to_string(),
                    separate,
                });
                // With the compiler thread, a bridge for the tree's function stays out of
                // it (its guard exits to the interpreter) until the function is compiled
                // with it.
                let wanted = !separate && self.config.background;
                self.trees[t].bridges.push(Bridge {
                    from,
                    value,
                    trace,
                    returns,
                    separate: separate || wanted,
                    code: None,
                    wanted,
                });
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
                Ok(Next::Resume(end))
            }
        }
    }
}

/// A trace's anchor as dumps and statistics show it: the label, and the green values.
/// The variables of `frame` that hold integers past 64 bits.
fn wide_slots(frame: &Frame) -> Vec<Slot> {
    frame
        .iter()
        .enumerate()
        .filter(|(_, v)| matches!(v, Some(Value::Big(_))))
        .map(|(k, _)| Slot(k as u32))
        .collect()
}

fn describe(program: &Program, key: &Key) -> String {
    let label = program.label(key.anchor);
    if key.greens.is_empty() {
        return label.to_string();
    }
    // Only what is shown is formatted: a green may be a whole program.
    let greens: Vec<String> = key
        .greens
        .iter()
        .map(|v| flowjit_runtime::ops::shown_within(v, 24))
        .collect();
    format!("{label} with greens ({})", greens.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::{self, Syntax};
    use crate::state::Io;

    /// Loops nested in a loop, whose trees move from the quick backend to Cranelift after
    /// two iterations: their functions go to the compiler thread.
    const NESTED: &str = "start:\n    i = 0\n    s = 0\n    goto outer\n\
        outer:\n    c = i < 3000\n    if c goto init else goto done\n\
        init:\n    j = 0\n    goto inner\n\
        inner:\n    d = j < 50\n    if d goto body else goto next\n\
        body:\n    s = s + j\n    s = s & 1048575\n    j = j + 1\n    goto inner\n\
        next:\n    i = i + 1\n    goto outer\n\
        done:\n    print_and_stop(s)\n";

    /// The compiler thread stops (as when Cranelift panics on a function) with a function
    /// it took: the driver finds it gone, compiles the functions it held again on its own
    /// thread, as everything after, and the program's answer is the interpreter's, in that
    /// run and the next, in which every tree runs Cranelift's code.
    #[test]
    fn the_compiler_thread_stops_with_a_function_it_took() {
        let (_, program) = lang::load(NESTED, Syntax::Fg).expect("a valid program");
        let entry = program.block_id("start").expect("a start block");
        let mut state = State::new(&program, &[], Io::captured(b""));
        let expected = interp::run_program(&program, entry, &mut state, None);
        let config = Config {
            native: true,
            background: true,
            policy: Policy {
                tier_iterations: 2,
                ..Policy::DEFAULT
            },
            ..Config::default()
        };
        let mut jit = Jit::new(&program, config).expect("a driver");
        jit.make_backend();
        let backend = jit.backend.as_mut().expect("machine code on this host");
        backend.stop_worker_after(1);
        let mut state = State::new(&program, &[], Io::captured(b""));
        let got = jit.run(&mut state, entry);
        assert_eq!(format!("{got:?}"), format!("{expected:?}"));
        // The run may end before the driver looks again; it finds the thread gone then.
        let gone = |jit: &Jit| jit.backend.as_ref().is_some_and(|b| b.worker_gone());
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while !gone(&jit) && Instant::now() < deadline {
            jit.collect();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(gone(&jit), "the driver found the thread gone");
        assert!(jit.jobs.is_empty(), "no function waits for it");
        // Run again, everything compiled on the driver's thread now.
        let mut state = State::new(&program, &[], Io::captured(b""));
        let again = jit.run(&mut state, entry);
        assert_eq!(format!("{again:?}"), format!("{expected:?}"));
        assert!(
            jit.trees
                .iter()
                .all(|t| t.code.as_ref().is_some_and(|c| !c.quick)),
            "every tree compiled by Cranelift"
        );
    }
}
