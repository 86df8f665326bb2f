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
//! `record` (a root trace at a hot key becomes a tree), `run` (running trees, and what
//! each exit leads to), `bridges` (recording and attaching them), `compile` (trees'
//! functions and bridges to machine code, on the compiler thread too, and linking them),
//! `tree` ([`Tree`] and [`Bridge`]), `stats` ([`Stats`] and the `--stats` report),
//! `events` and `listing` (the event log and the code listings); this one holds the run
//! loop.

mod bridges;
mod compile;
pub mod events;
pub mod listing;
mod payoff;
mod policy;
mod profile;
mod record;
mod run;
mod stats;
mod tree;

use rustc_hash::FxHashMap as HashMap;
use std::time::Instant;

use flowjit_runtime::Value;

use crate::backend::{self, Backend, TreeInst};
use crate::interp::{self, Exit, NoMonitor, RuntimeError};
use crate::lang::{BlockId, Program, Slot};
use crate::opt;
use crate::state::{Frame, Position, State, Steps};
use crate::trace;
use compile::Job;
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
    pub passes: Vec<opt::Pass>,
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
    /// How many calls a recording made are running ([`Jit::run_call`]).
    nested: usize,
    /// Whether code was ever compiled that may not be entered while it runs (it holds
    /// integers of any size in boxes of its own): a loop's code is then never run inside
    /// a call that machine code made (`Calls::run_loop`), where the code that made the
    /// call, or code its exits are linked to, may be that code.
    unenterable: bool,
    /// The guards whose bridges are being recorded (one is not recorded again meanwhile,
    /// in a call the recording makes).
    bridging: Vec<(usize, TreeInst)>,
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
    /// How the program ended inside a call that a trace or its machine code made
    /// (`print_and_stop`, or an error), if it did: the run of trees ends with it.
    ended: Option<Result<Value, RuntimeError>>,
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
type SegmentExit = (usize, Position, Option<TreeInst>);

/// What the interpreter does after a tree has run.
enum Next {
    /// Interpret from here.
    Resume(Position),
    /// The program stopped (while a bridge was recorded).
    Stopped(Value),
}

impl<'p> Jit<'p> {
    /// A driver for `program`. Fails only when machine code is asked for on a host that
    /// flowjit cannot emit it for, or when the policy's limits do not fit the code
    /// ([`Policy::check`]).
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
            nested: 0,
            unenterable: false,
            bridging: Vec::new(),
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
            ended: None,
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
    fn recording_failed(&mut self, key: &Key) {
        if self.profile.failed(key) {
            let anchor = describe(self.program, key);
            self.event(EventKind::Blacklisted { anchor });
        }
    }

    /// Notes that a limit was reached (once each, in `--stats` and the log).
    fn limit_reached(&mut self, what: String) {
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
        match self.drive(state, Position::start(entry))? {
            Exit::Stop(v) => Ok(v),
            _ => unreachable!("a run's state does not return out"),
        }
    }

    /// How deep calls that recordings make nest in the driver ([`Jit::run_call`]): deeper,
    /// the plain interpreter makes them (each level holds a recording on the native stack).
    const MAX_NESTED: usize = 4;

    /// Makes a call of `func` on `args` that a recording does not inline, on `state`,
    /// `depth` calls waiting for it, as `interp::call_in` does but with the driver: its
    /// loops and calls run in their traces' code, and what is hot in it is recorded (a
    /// recording waits for the call, its own key not traced meanwhile). `steps` is the
    /// recording's budget, the run's.
    pub(super) fn run_call(
        &mut self,
        state: &mut State,
        func: crate::lang::FuncId,
        args: Vec<Value>,
        depth: usize,
        steps: &mut Steps,
    ) -> Result<Exit, RuntimeError> {
        if self.nested >= Self::MAX_NESTED {
            return interp::call_in(
                self.program,
                state,
                func,
                args,
                depth,
                steps,
                &mut NoMonitor,
            );
        }
        let program = self.program;
        std::mem::swap(&mut self.steps, steps);
        self.nested += 1;
        let exit = interp::in_call_frame(program, state, func, args, depth, |state, entry| {
            self.drive(state, entry)
        });
        self.nested -= 1;
        std::mem::swap(&mut self.steps, steps);
        exit
    }

    /// The driver's loop, from `pos`: until the program stops ([`Exit::Stop`]) or, in a
    /// call ([`Jit::run_call`]), the call's frame returns ([`Exit::Return`]).
    fn drive(&mut self, state: &mut State, mut pos: Position) -> Result<Exit, RuntimeError> {
        loop {
            self.collect();
            let start = Instant::now();
            let exit = interp::run(self.program, state, pos, &mut self.steps, &mut self.profile);
            self.stats.interp_time += start.elapsed();
            let (anchor, key) = match exit? {
                Exit::Stop(v) => return Ok(Exit::Stop(v)),
                Exit::Return(v) => return Ok(Exit::Return(v)),
                Exit::Hot(anchor) => (anchor, self.profile.take_key(anchor, &state.frame)),
                Exit::Called(entry) => (entry, self.profile.function_key(entry, &state.frame)),
            };
            let Some(key) = key else {
                pos = Position::start(anchor);
                continue;
            };
            let tree = match self.profile.trace(&key) {
                Some(index) => index,
                None if let payoff::Verdict::Later(n) =
                    self.worth_compiling(&key, &state.frame) =>
                {
                    self.stats.not_worth += 1;
                    self.profile.postpone(&key, n);
                    pos = Position::start(anchor);
                    continue;
                }
                None => match self.record(state, key.clone())? {
                    // Recording ran the call to its `return`, where the interpreter goes on.
                    Recording::Tree(index) if self.trees[index].root.function.is_some() => {
                        pos = self.trees[index].root.end();
                        continue;
                    }
                    Recording::Tree(index) => index,
                    Recording::Stopped(v) => return Ok(Exit::Stop(v)),
                    Recording::Resume(at) => {
                        pos = at;
                        continue;
                    }
                },
            };
            if key.function {
                let waiting = self.trees[tree].compiling && self.trees[tree].code.is_none();
                if self.config.native && waiting {
                    // Its code is on its way from the compiler thread: the interpreter makes
                    // the next calls without stopping at each.
                    let calls =
                        self.config.policy.threshold * self.config.policy.function_threshold_factor;
                    self.profile.postpone(&key, calls);
                    pos = Position::start(anchor);
                    continue;
                }
                // Every call enters it again.
                self.profile.set_trace(&key, tree);
            }
            match self.run_tree(tree, state, false)? {
                Next::Resume(at) => pos = at,
                Next::Stopped(v) => return Ok(Exit::Stop(v)),
            }
        }
    }

    /// Whether the loop at `key`, hot with `frame`, is worth recording and compiling now
    /// (`payoff`): a loop of the program itself (an interpreted program's loops, found by
    /// their greens, have no counter to read) that is not a counted loop near its end.
    fn worth_compiling(&mut self, key: &Key, frame: &Frame) -> payoff::Verdict {
        match &mut self.payoff {
            Some(p) if key.greens.is_empty() => {
                let since = self.profile.arrivals(key);
                p.worth_compiling(self.program, key.anchor, frame, since)
            }
            _ => payoff::Verdict::Now,
        }
    }

    /// The articles' `do_trace`: records at once from `from`, runs the trace until it
    /// exits, and lets the interpreter finish without tracing again.
    pub fn do_trace(&mut self, state: &mut State, from: BlockId) -> Result<Value, RuntimeError> {
        let key = Key {
            anchor: from,
            greens: Vec::new(),
            function: false,
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
            Exit::Hot(_) | Exit::Called(_) => unreachable!("NoMonitor never takes over"),
            Exit::Return(_) => unreachable!("a run's state does not return out"),
        }
    }
}

/// The variables of `frame` that hold integers past 64 bits.
fn wide_slots(frame: &Frame) -> Vec<Slot> {
    frame
        .iter()
        .enumerate()
        .filter(|(_, v)| matches!(v, Some(Value::Big(_))))
        .map(|(k, _)| Slot(k as u32))
        .collect()
}

/// A trace's anchor as dumps and statistics show it: the label, and the green values.
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

    /// Runs `program` from `start` on `inputs` in machine code compiled on the compiler
    /// thread; the driver, and what the run gave.
    fn in_the_background<'p>(
        program: &'p Program,
        inputs: &[(Slot, Value)],
    ) -> (Jit<'p>, Result<Value, RuntimeError>) {
        let entry = program.block_id("start").expect("a start block");
        let config = Config {
            native: true,
            background: true,
            ..Config::default()
        };
        let mut jit = Jit::new(program, config).expect("a driver");
        let mut state = State::new(program, inputs, Io::captured(b""));
        let got = jit.run(&mut state, entry);
        (jit, got)
    }

    /// A loop whose variable leaves 64 bits after 1,000 iterations, its function compiled
    /// on the compiler thread: the entry its code refuses then has the tree compiled again
    /// holding the variable boxed, and the entries refused while that code is on its way do
    /// not count towards leaving the loop to the interpreter for good (they reached
    /// `Policy::max_refusals` before it came back, and the loop ran interpreted).
    #[test]
    fn entries_refused_while_the_wider_code_is_compiled_do_not_count() {
        let text = "start:\n    s = 9223372036854774807\n    i = 0\n    goto loop\n\
            loop:\n    s = s + 1\n    i = i + 1\n    c = i < 200000\n    if c goto loop else goto done\n\
            done:\n    print_and_stop(s)\n";
        let (_, program) = lang::load(text, Syntax::Fg).expect("a valid program");
        let (jit, got) = in_the_background(&program, &[]);
        assert_eq!(format!("{got:?}"), "Ok(9223372036854974807)");
        let tree = &jit.trees[0];
        assert!(!tree.wide.is_empty(), "compiled again holding s boxed");
        assert!(
            tree.refusals < Policy::DEFAULT.max_refusals,
            "{} entries refused",
            tree.refusals
        );
    }

    /// A recursion that walks a tree of arrays, its function trace recorded where the
    /// inlined child's first element is the integer 0 (a leaf), elsewhere an array: the read
    /// exits past the bridge threshold for an element of another type, which its bridge
    /// takes. That held its result as an integer of any size too, though none was ever past
    /// 64 bits, and code holding one is not entered again while it runs: every recursive
    /// call of `sum` below the first ran in the interpreter.
    #[test]
    fn a_read_exiting_for_an_element_of_another_type_is_not_held_wide() {
        let text = include_str!("../../benches/recursion/tree.fg");
        let (_, program) = lang::load(text, Syntax::Fg).expect("a valid program");
        let (d, k) = (program.slot("d").unwrap(), program.slot("k").unwrap());
        let entry = program.block_id("start").expect("a start block");
        let config = Config {
            native: true,
            ..Config::default()
        };
        let mut jit = Jit::new(&program, config).expect("a driver");
        let inputs = [(d, Value::Int(12)), (k, Value::Int(3))];
        let mut state = State::new(&program, &inputs, Io::captured(b""));
        let got = jit.run(&mut state, entry);
        assert_eq!(format!("{got:?}"), "Ok(100651008)");
        assert_eq!(jit.trees.len(), 2, "build's and sum's function traces");
        for tree in &mut jit.trees {
            let label = describe(&program, &tree.key);
            let code = tree.code_of(0).expect("machine code");
            assert!(code.enterable(), "{label}: entered again while it runs");
            for seg in 0..=tree.bridges.len() {
                assert!(
                    tree.wide_results(seg).is_empty(),
                    "{label}: {seg} holds one wide"
                );
            }
        }
    }

    /// A loop of eight ways, each a bridge on its own (two hang from another bridge's
    /// guards), whose sum leaves 64 bits, compiled on the compiler thread: each bridge
    /// compiled again is linked to, or compiles again, the bridges that hang from its own
    /// guards, whose entries assumed a 64-bit sum; before, they refused every entry until
    /// the loop was left to the interpreter for good.
    #[test]
    fn bridges_of_bridges_are_compiled_again_when_the_sum_grows() {
        let text = include_str!("../../benches/cliffs/wide8.fg");
        let (_, program) = lang::load(text, Syntax::Fg).expect("a valid program");
        let n = program.slot("n").expect("an input n");
        let (jit, got) = in_the_background(&program, &[(n, Value::Int(300_000))]);
        assert_eq!(format!("{got:?}"), "Ok(9223372036855775807)");
        assert!(jit.stats.limits.is_empty(), "{:?}", jit.stats.limits);
        assert!(jit.trees[0].refusals < Policy::DEFAULT.max_refusals);
    }

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
