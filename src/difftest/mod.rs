//! Differential testing: random well-formed programs, run by every executor; any difference
//! from the interpreter (in what is printed, or in the error) is a bug.
//!
//! Three kinds of program ([`Case`]), each printed as a file that `flowjit` runs:
//!
//! - **Structured programs** ([`GenProgram`], `flow.rs`): five integer variables and a
//!   constant list; straight-line code and loops with bounded counters, nested up to two
//!   deep, so they terminate. Operations of every kind, on values that may leave 64 bits,
//!   index outside the list, divide by zero, shift by a negative count or meet an atom, so
//!   that errors happen after a loop is hot. Outermost loops often run hundreds of times; a
//!   loop may end in a branch that changes direction once (`counter < at`) or takes a rare
//!   path every `m`-th iteration (`counter % m`, `m` from 2 to 59), again and again, so that
//!   bridges form and go back into the loop; on the path taken every time, variables are
//!   made copies of each other or constants, which the rare path breaks for one iteration;
//!   a loop may promote `counter // k`, `counter % m` (few or many values) or a variable;
//!   less often, a loop's body has a variable of its own that changes type between
//!   iterations (an integer on the path taken every time, the atom `'a'` or a list on a rare
//!   path or every other iteration, or read from a list of integers and atoms at a varying
//!   index), carried to the next iterations by copies (`old = prev; prev = v`), so that
//!   peeling rejects loops for changing types and bridges carry the other type back in.
//!   Pieces of heap statements (`heap.rs`) store into an array through one of its two names
//!   and read through the other, make a fresh array that parts them, store the array into
//!   itself, index past its end now and then, walk a tape with a pointer as Brainfuck does
//!   (between loops, and in a loop of its own: three deep then), print values and the array, write bytes (and
//!   values that are not bytes), read input, and call the program's functions: straight-line
//!   ones (or ones that first branch on the loop's counter, which turns inside the inlined
//!   call), recursive ones, and `@elidable` ones that memoize in a table of their own.
//! - **Interpreters** ([`GenDispatch`], `dispatch.rs`): a dispatch loop with
//!   `jit_merge_point(pc)` (or `(lst, pc)`) and `can_enter_jit`, whose handlers compute the
//!   next `pc` from itself, a constant, a variable or the loop's fuel: greens that change
//!   inside the loop.
//! - **Bytecode** ([`GenBytecode`], `regs.rs`): register-machine programs, nested
//!   counting loops with register copies, run on the bundled interpreter with `bytecode`
//!   and `pc` as `flowjit bytecode` sets them: the JIT traces the interpreter (meta-tracing).
//!
//! [`check`] runs a program under the interpreter (the oracle) and under the JIT (machine
//! code) and the trace interpreter with several thresholds and optimizer pass sets (see
//! `configurations`), and partially evaluated (its residual program interpreted, and
//! compiled whole); [`check_bytecode`] does the same for bytecode, the partial evaluator
//! specializing the interpreter to the bytecode.
//!
//! A panic in an executor is reported as a difference, naming the executor.
//!
//! What it does not reach: lists other than the one constant list and the constant lists
//! of the variables that change type, arrays other than one (and the memo tables), calls
//! from functions other than a recursion to itself, loops inside functions, atoms other
//! than `'a'`, loops nested more than two deep (but for a heap piece's own loop), loops whose counter is not a plain countdown, more than two dispatch loops in a
//! program, and bytecode with more than two loops (its inner loop always starts from the
//! outer counter).
//!
//! The generator is a proptest [`Strategy`] ([`cases`]), so a failing program is shrunk
//! before it is reported. `flowjit difftest --seed S --count N` runs it at length.

use std::time::{Duration, Instant};

use flowjit_runtime::Value;
use proptest::prelude::*;

use crate::backend::Backend;
use crate::interp::{self, ErrorKind, Monitor};
use crate::jit::{Config, Jit, Policy};
use crate::lang::{self, bytecode, BlockId, Program, Slot, Syntax};
use crate::opt;
use crate::peval::{self, run::Execution};
use crate::state::{Io, Position, State, Steps};

mod dispatch;
mod flow;
mod heap;
mod regs;

pub use dispatch::{dispatchers, GenDispatch, Handler, NextPc, Second};
pub use flow::{
    programs, Branch, Cond, GenArg, GenOp, GenProgram, Mixed, Odd, Promoted, Seg, Source,
};
pub use heap::{Fork, GenFunc, HeapOp, Index, ARRAY_LEN};
pub use regs::{bytecodes, GenBytecode, Inner, Instr, Piece};

/// How many operations the oracle may run; a program that needs more is discarded.
pub const STEP_LIMIT: u64 = 200_000;

/// `--tier-iterations` at the lowest thresholds without a step limit: loops move from the
/// quick backend's code to Cranelift's (`Policy::DEFAULT.tier_iterations`) within the short runs
/// of generated programs.
pub const TIER_ITERATIONS: i64 = 3;

/// `--bridge-entries` where [`TIER_ITERATIONS`] is given: bridges compiled on their own
/// move into their tree's function (`Jit::promote`) within the short runs of generated
/// programs.
pub const BRIDGE_ENTRIES: i64 = 3;

/// How long the oracle may run; a program that needs longer is discarded. Only arithmetic
/// on integers of millions of bits takes that long within [`STEP_LIMIT`] operations, and
/// every executor would spend as long on it.
pub const TIME_LIMIT: Duration = Duration::from_secs(2);

/// The most output a run may write: a program that writes more (a `print` of an array
/// holding the same array many times over, nested deep) is discarded, as one that takes
/// too long is.
pub const OUTPUT_LIMIT: usize = 1 << 20;

/// What a generated program's `getchar` reads: some bytes, then the end of the input.
pub const STDIN: &[u8] = b"flow\n\x00\xff7";

/// A generated case: a program of one of the three kinds.
#[derive(Clone, Debug)]
pub enum Case {
    /// A structured program.
    Flow(GenProgram),
    /// An interpreter with the meta-tracing hints.
    Dispatch(GenDispatch),
    /// Register-machine bytecode, run on the bundled interpreter.
    Bytecode(GenBytecode),
}

impl Case {
    /// Runs the case under every executor, as [`check`] and [`check_bytecode`] do.
    pub fn check(&self) -> Result<bool, String> {
        match self {
            Case::Flow(p) => check(&p.text()),
            Case::Dispatch(p) => check(&p.text()),
            Case::Bytecode(p) => check_bytecode(&p.text(), &p.registers()),
        }
    }

    /// The program: in the readable syntax, or a `.bc` file whose first line is the command
    /// that runs it.
    pub fn text(&self) -> String {
        match self {
            Case::Flow(p) => p.text(),
            Case::Dispatch(p) => p.text(),
            Case::Bytecode(p) => p.text(),
        }
    }
}

/// The strategy that generates cases: structured programs most often, then interpreters
/// with hints and bytecode programs.
pub fn cases() -> impl Strategy<Value = Case> {
    prop_oneof![
        5 => programs().prop_map(Case::Flow),
        3 => dispatchers().prop_map(Case::Dispatch),
        2 => bytecodes().prop_map(Case::Bytecode),
    ]
}

/// What a run printed, as the command line shows it: its output, then its last line or
/// its error.
/// The last line is cut at [`OUTPUT_LIMIT`] bytes (and then ends in `...`), as the output
/// is.
fn describe(outcome: Result<Value, interp::RuntimeError>, io: &Io) -> String {
    let written = io.output().escape_ascii().to_string();
    match outcome {
        Ok(v) => format!("{written}{}", bounded(&v)),
        Err(e) => format!("{written}error: {e}"),
    }
}

/// `v` as it prints, cut at [`OUTPUT_LIMIT`] bytes (then ending in `...`): printing an
/// array that holds another many times over, nested deep, can take gigabytes.
fn bounded(v: &Value) -> String {
    struct Capped(String);
    impl std::fmt::Write for Capped {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            if self.0.len() + s.len() > OUTPUT_LIMIT {
                return Err(std::fmt::Error);
            }
            self.0.push_str(s);
            Ok(())
        }
    }
    let mut out = Capped(String::new());
    match std::fmt::Write::write_fmt(&mut out, format_args!("{v}")) {
        Ok(()) => out.0,
        Err(_) => out.0 + "...",
    }
}

/// How a configuration of [`configurations`] runs: under a step limit (the compiler on
/// the driver's thread, code counting its steps and making no calls), as the command line
/// runs by default (Cranelift on the compiler thread, its code put to use whenever it
/// comes, which a short program may never see), or with `--compile-on-driver` (each
/// function's code in use at once: loops compiled before the functions they call are hot,
/// whose traces calls from machine code then record).
#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    Limited,
    Background,
    OnDriver,
}

/// Every JIT configuration a program is run under: (native, threshold, bridge threshold,
/// passes, how). `turn` picks the pass left out in machine code.
///
/// Machine code runs with thresholds 0, 1, 3 and the defaults, and bridge thresholds 0,
/// 1 and 20; the trace interpreter with all passes, none, and each pass left out in turn.
/// Leaving a pass out in machine code costs a compilation per trace and per bridge, the
/// costliest part of a check: each program leaves out one (`turn`), so that a run of many
/// programs covers every pass. (`peel` is not among them: without it nothing becomes
/// machine code, and the trace interpreter's runs cover that.)
///
/// The machine-code runs under a step limit come first: a bug that loops forever in
/// machine code then shows as a difference (the limit stops it) before the runs without a
/// limit, as a user's run has none, at thresholds 0, 1 and the defaults. The program stopped
/// within the limit in the interpreter, so it stops without one. (The quick backend,
/// `backend::quick`, emits code only where nothing is counted, and the trees and bridges of
/// threshold 1 are not those of threshold 0.)
fn configurations(turn: usize) -> Vec<(bool, u64, u64, Vec<opt::Pass>, How)> {
    let all = opt::PIPELINE.to_vec();
    let without =
        |off: opt::Pass| -> Vec<opt::Pass> { all.iter().copied().filter(|p| *p != off).collect() };
    let native: Vec<opt::Pass> = all
        .iter()
        .copied()
        .filter(|p| *p != opt::Pass::Peel)
        .collect();
    let limited = How::Limited;
    let mut configs = vec![
        (true, 0, 0, all.clone(), limited),
        (true, 1, 1, all.clone(), limited),
        (true, 3, 20, all.clone(), limited),
        (true, 0, 1, without(native[turn % native.len()]), limited),
        (false, 0, 0, all.clone(), limited),
        (false, 1, 1, Vec::new(), limited),
    ];
    for off in opt::PIPELINE {
        configs.push((false, 0, 1, without(*off), limited));
    }
    configs.push((true, 0, 0, all.clone(), How::Background));
    configs.push((true, 1, 1, all.clone(), How::Background));
    configs.push((true, 1, 1, all.clone(), How::OnDriver));
    configs.push((
        true,
        Policy::DEFAULT.threshold,
        Policy::DEFAULT.bridge_threshold,
        all.clone(),
        How::Background,
    ));
    configs
}

/// A number that picks a program's turn among the configurations: the FNV-1a hash of its
/// text (the same on every machine).
fn turn(text: &str) -> usize {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    hash as usize
}

/// A loaded program to check: where it starts, its inputs, and how many of them (the
/// first ones) the partial evaluator gets as static; the others are the residual
/// program's inputs.
struct Subject<'a> {
    program: &'a Program,
    entry: BlockId,
    inputs: Vec<(Slot, Value)>,
    statics: usize,
    /// What `getchar` reads.
    stdin: Vec<u8>,
}

impl Subject<'_> {
    /// The state a run starts from.
    fn state(&self) -> State {
        State::new(self.program, &self.inputs, self.io())
    }

    /// Input and output of a run: output kept up to [`OUTPUT_LIMIT`].
    fn io(&self) -> Io {
        Io::captured(&self.stdin).with_limit(OUTPUT_LIMIT)
    }
}

fn run_pe(s: &Subject, compile: bool) -> String {
    let mut backend = compile.then(|| {
        Backend::new(None, Policy::DEFAULT.backend_limits()).expect("the host emits machine code")
    });
    let how = Execution {
        backend: backend.as_mut(),
        // The residual program does fewer operations than the original: twice the limit is
        // ample for one that the oracle ran within it.
        max_steps: Some(2 * STEP_LIMIT),
        ..Execution::default()
    };
    let (statics, dynamic) = s.inputs.split_at(s.statics);
    let mut io = s.io();
    match peval::run::specialize_and_run(s.program, s.entry, statics, dynamic, how, &mut io) {
        Ok(outcome) => describe(outcome, &io),
        Err(e) => format!("pe: {e}"),
    }
}

/// Takes over at the first back edge after a deadline, to stop a run.
struct Deadline(Instant);

impl Monitor for Deadline {
    fn back_edge(&mut self, _from: BlockId, _target: BlockId) -> bool {
        Instant::now() > self.0
    }
}

/// Compares what `run` prints with what the interpreter printed, `want`; `who` names the
/// executor in a difference. A panic in an executor is a difference too, named (proptest
/// would report its message alone).
fn differ(want: &str, who: String, run: &mut dyn FnMut() -> String) -> Result<(), String> {
    let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).map_err(|p| {
        let why = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        format!("{who} panicked ({why}), the interpreter printed {want:?}")
    })?;
    if got == want {
        Ok(())
    } else {
        Err(format!("{who} printed {got:?}, the interpreter {want:?}"))
    }
}

/// The JIT's configuration for one of [`configurations`], with the command line's flags
/// that ask for it.
fn configured(
    native: bool,
    threshold: u64,
    bridge_threshold: u64,
    passes: Vec<opt::Pass>,
    how: How,
) -> (Config, String) {
    let limited = how == How::Limited;
    // The defaults are the command line's: a counted loop hot too near its end is left
    // to the interpreter, and counted again (`jit::payoff`).
    let defaults = threshold == Policy::DEFAULT.threshold
        && bridge_threshold == Policy::DEFAULT.bridge_threshold
        && !limited;
    // At the lowest thresholds, loops leave the quick backend's code for Cranelift's
    // after a few iterations.
    let tier = if threshold == 0 && !limited {
        TIER_ITERATIONS
    } else {
        Policy::DEFAULT.tier_iterations
    };
    // Bridges move into their tree's function there too.
    let entries = if tier == TIER_ITERATIONS {
        BRIDGE_ENTRIES
    } else {
        Policy::DEFAULT.bridge_entries
    };
    let config = Config {
        native,
        policy: Policy {
            threshold,
            // As the command line's: a threshold given is both.
            merge_threshold: if defaults {
                Policy::DEFAULT.merge_threshold
            } else {
                threshold
            },
            bridge_threshold,
            merge_bridge_threshold: if defaults {
                Policy::DEFAULT.merge_bridge_threshold
            } else {
                bridge_threshold
            },
            tier_iterations: tier,
            bridge_entries: entries,
            ..Policy::DEFAULT
        },
        passes: passes.clone(),
        max_steps: limited.then_some(STEP_LIMIT),
        pay_off: defaults,
        // As the command line runs (without `--max-steps`): Cranelift's work on the
        // compiler thread, its code put to use whenever it comes.
        background: native && how == How::Background,
        ..Config::default()
    };
    let flags = format!(
        "--mode {}{}{} --passes {}{}",
        if native { "jit" } else { "trace" },
        if defaults {
            String::new()
        } else {
            format!(" --threshold {threshold} --bridge-threshold {bridge_threshold}")
        },
        if tier == Policy::DEFAULT.tier_iterations {
            String::new()
        } else {
            format!(" --tier-iterations {tier} --bridge-entries {entries}")
        },
        passes
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(","),
        match how {
            How::Limited => format!(" --max-steps {STEP_LIMIT}"),
            How::Background => String::new(),
            How::OnDriver => " --compile-on-driver".to_string(),
        }
    );
    (config, flags)
}

/// Runs `s` under every executor and compares each with the interpreter; `pe` names the
/// partial evaluation in a difference's description, `turn` is as for [`configurations`].
fn check_subject(s: &Subject, pe: &str, turn: usize) -> Result<bool, String> {
    collector_for(true);
    let mut state = s.state();
    let mut steps = Steps::new(Some(STEP_LIMIT));
    let mut deadline = Deadline(Instant::now() + TIME_LIMIT);
    let oracle = match interp::run(
        s.program,
        &mut state,
        Position::start(s.entry),
        &mut steps,
        &mut deadline,
    ) {
        Ok(interp::Exit::Stop(v)) => Ok(v),
        Ok(interp::Exit::Hot(_) | interp::Exit::Called(_)) => return Ok(false),
        Ok(interp::Exit::Return(_)) => unreachable!("a run's state does not return out"),
        Err(e) if matches!(e.kind, ErrorKind::MaxSteps(_)) => return Ok(false),
        Err(e) => Err(e),
    };
    collector_for(false);
    let used = steps.used();
    let want = describe(oracle, &state.io);
    if state.io.overflowed() || want.ends_with("...") {
        return Ok(false);
    }
    for (native, threshold, bridge_threshold, passes, how) in configurations(turn) {
        let (config, flags) = configured(native, threshold, bridge_threshold, passes, how);
        let mut jit = Jit::new(s.program, config).map_err(|e| e.to_string())?;
        let mut state = s.state();
        differ(&want, flags, &mut || {
            let outcome = jit.run(&mut state, s.entry);
            describe(outcome, &state.io)
        })?;
    }
    differ(&want, format!("{pe} --run"), &mut || run_pe(s, false))?;
    differ(&want, format!("{pe} --compile --run"), &mut || {
        run_pe(s, true)
    })?;
    // Three limits: one at an eighth of the way or more, two anywhere. A limit exposes a
    // miscount only where it falls in the few operations the miscounted instruction spans
    // (an elidable call the trace gives up part of the way through: the interpreter must
    // find the arrays as the call found them, `interp::call_undoable`).
    let turn = turn as u64;
    for limit in [
        used * (1 + turn % 7) / 8,
        used * (1 + (turn >> 8) % 97) / 98,
        used * (1 + (turn >> 16) % 89) / 90,
    ] {
        cut_short(s, limit.max(1))?;
    }
    Ok(true)
}

/// Runs `s` again under `--max-steps limit`, a limit that stops it part of the way, under
/// the interpreter and under traces and machine code: each must stop at the same
/// operation, with the same output before the error. (Counting is part of every compiled
/// instruction's contract: a folded elidable call, an inlined call, an exit must all count
/// the operations the interpreter would have done.)
fn cut_short(s: &Subject, limit: u64) -> Result<bool, String> {
    let run = |jit: Option<Config>| -> String {
        let mut state = s.state();
        collector_for(jit.is_none());
        match jit {
            None => {
                let mut steps = Steps::new(Some(limit));
                let outcome = interp::run(
                    s.program,
                    &mut state,
                    Position::start(s.entry),
                    &mut steps,
                    &mut interp::NoMonitor,
                )
                .map(|exit| match exit {
                    interp::Exit::Stop(v) => v,
                    _ => unreachable!("NoMonitor never takes over; a run does not return out"),
                });
                describe(outcome, &state.io)
            }
            Some(config) => match Jit::new(s.program, config) {
                Ok(mut jit) => describe(jit.run(&mut state, s.entry), &state.io),
                Err(e) => e,
            },
        }
    };
    let want = run(None);
    for native in [false, true] {
        let config = Config {
            native,
            policy: Policy {
                threshold: 1,
                merge_threshold: 1,
                bridge_threshold: 1,
                merge_bridge_threshold: 1,
                ..Policy::DEFAULT
            },
            max_steps: Some(limit),
            ..Config::default()
        };
        let got = run(Some(config));
        if got != want {
            return Err(format!(
                "--mode {} --threshold 1 --bridge-threshold 1 --max-steps {limit} printed \
                 {got:?}, the interpreter {want:?}",
                if native { "jit" } else { "trace" }
            ));
        }
    }
    Ok(true)
}

/// Sets the cycle collector up for the next run: none for the oracle, and one every few
/// arrays made for every other executor, so that a live array it took for garbage is a
/// difference.
fn collector_for(oracle: bool) {
    /// The work between two collections (`flowjit_runtime::cycles::set_min_budget`).
    const EVERY: usize = 24;
    flowjit_runtime::cycles::set_min_budget(if oracle { usize::MAX } else { EVERY });
}

/// Runs `text` under every executor and compares each with the interpreter. `Ok(false)`:
/// the program was discarded (it needs more than [`STEP_LIMIT`] operations, more than
/// [`TIME_LIMIT`], or writes more than [`OUTPUT_LIMIT`]).
pub fn check(text: &str) -> Result<bool, String> {
    with_program(text, |subject| check_subject(subject, "pe", turn(text)))
}

/// Runs the program `text` under `--max-steps limit` in the interpreter, the trace
/// interpreter and machine code (thresholds 1), and compares the two with the first, as the
/// differential test does with a limit of its choosing.
pub fn check_cut_short(text: &str, limit: u64) -> Result<bool, String> {
    with_program(text, |subject| cut_short(subject, limit))
}

/// Loads the program `text` and runs `f` on it, from its first block, with no inputs.
fn with_program(
    text: &str,
    f: impl FnOnce(&Subject) -> Result<bool, String>,
) -> Result<bool, String> {
    let (_, program) = lang::load(text, Syntax::Fg)
        .map_err(|d| format!("generated an invalid program: {d:?}\n{text}"))?;
    f(&Subject {
        program: &program,
        entry: BlockId(0),
        inputs: Vec::new(),
        statics: 0,
        stdin: STDIN.to_vec(),
    })
}

/// Runs the bytecode program `text` (a `.bc` file) on the bundled interpreter, with
/// `registers` (`a r0 r1 r2`), under every executor, as `flowjit bytecode` does, and
/// compares each with the interpreter; the partial evaluator gets `bytecode` and `pc` as
/// static, the registers as the residual program's inputs. `Ok(false)` as for [`check`].
pub fn check_bytecode(text: &str, registers: &[(&str, i64)]) -> Result<bool, String> {
    let cells = bytecode::assemble(text)
        .map_err(|d| format!("generated invalid bytecode: {d:?}\n{text}"))?;
    let (_, program) = lang::load(bytecode::REGMACHINE_SOURCE, Syntax::Fg)
        .map_err(|d| format!("the bundled interpreter does not load: {d:?}"))?;
    let slot = |name: &str| {
        program
            .slot(name)
            .ok_or_else(|| format!("the bundled interpreter has no variable `{name}`"))
    };
    let mut inputs = vec![
        (slot("bytecode")?, Value::list(cells)),
        (slot("pc")?, Value::Int(0)),
    ];
    for (name, v) in registers {
        inputs.push((slot(name)?, Value::Int(*v)));
    }
    let entry = program
        .block_id(bytecode::REGMACHINE_ENTRY)
        .ok_or("the bundled interpreter has no entry block")?;
    let subject = Subject {
        program: &program,
        entry,
        inputs,
        statics: 2,
        stdin: Vec::new(),
    };
    check_subject(&subject, "pe (bytecode and pc static)", turn(text))
}

/// How long the checks of one program may take before [`run`] gives up on it as stuck.
/// Each executor's run stops at [`TIME_LIMIT`], but compiling cannot be interrupted: a
/// program that makes the compiler take minutes (a trace whose code grew quadratically
/// did) is a defect to report, not a run to wait for.
pub const STUCK_LIMIT: Duration = Duration::from_secs(120);

/// The program being checked and since when, watched by a thread that ends the process
/// (exit status 3, as a difference) with the program printed when one takes more than
/// [`STUCK_LIMIT`].
fn watchdog() -> std::sync::Arc<std::sync::Mutex<Option<(Instant, String)>>> {
    let running = std::sync::Arc::new(std::sync::Mutex::new(None::<(Instant, String)>));
    let watched = std::sync::Arc::clone(&running);
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        if std::sync::Arc::strong_count(&watched) == 1 {
            return; // The run is over.
        }
        let guard = watched.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((since, text)) = &*guard {
            if since.elapsed() > STUCK_LIMIT {
                eprintln!(
                    "stuck: the executors took more than {} s on one program (a compilation \
                     that does not end?):\n{text}",
                    STUCK_LIMIT.as_secs()
                );
                std::process::exit(3);
            }
        }
    });
    running
}

/// What a run of [`run`] found.
#[derive(Debug)]
pub enum Outcome {
    /// Every program agreed with the interpreter.
    Agreed {
        /// How long the run took.
        seconds: f64,
        /// Programs discarded as needing more than [`STEP_LIMIT`] operations or
        /// [`TIME_LIMIT`] (not counted).
        discarded: u32,
    },
    /// A program that differs, shrunk.
    Differs {
        /// How it differs.
        why: String,
        /// The program, in the readable syntax (or a `.bc` file, see [`Case::text`]).
        program: String,
    },
}

/// Checks `count` programs generated from `seed` (the same seed generates the same
/// programs); a difference is shrunk. An error says why the run stopped early (too many
/// programs discarded).
pub fn run(seed: u64, count: u32) -> Result<Outcome, String> {
    use proptest::test_runner::{Config, RngAlgorithm, TestError, TestRng, TestRunner};
    // The first atom of the process has the number 0, which boxed integers the swinging
    // pieces compare with it hold (`flow::Swing`).
    let _ = flowjit_runtime::Atom::intern("swing");
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases: count,
        failure_persistence: None,
        max_global_rejects: count.saturating_mul(4),
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    let start = std::time::Instant::now();
    let discarded = std::cell::Cell::new(0u32);
    // A crash (of machine code) ends the process before a difference can be shrunk: with
    // `FLOWJIT_DIFFTEST_LAST` set to a path, each program is written there before it runs,
    // so that the one that crashed is left.
    let last = std::env::var_os("FLOWJIT_DIFFTEST_LAST");
    let running = watchdog();
    let result = runner.run(&cases(), |p| {
        let text = p.text();
        if let Some(path) = &last {
            let _ = std::fs::write(path, &text);
        }
        *running.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), text));
        let checked = p.check();
        *running.lock().unwrap_or_else(|e| e.into_inner()) = None;
        match checked {
            Ok(true) => Ok(()),
            Ok(false) => {
                discarded.set(discarded.get() + 1);
                Err(TestCaseError::reject("needs too many steps or too long"))
            }
            Err(e) => Err(TestCaseError::fail(e)),
        }
    });
    match result {
        Ok(()) => Ok(Outcome::Agreed {
            seconds: start.elapsed().as_secs_f64(),
            discarded: discarded.get(),
        }),
        Err(TestError::Fail(why, program)) => Ok(Outcome::Differs {
            why: why.to_string(),
            program: program.text(),
        }),
        Err(TestError::Abort(why)) => Err(format!("difftest stopped: {why}")),
    }
}
