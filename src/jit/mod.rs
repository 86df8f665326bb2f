//! The driver: decides who runs next, the interpreter or a trace.
//!
//! ```text
//!            back edge to L, count(L) > threshold          loop closes at L
//!  interpret ───────────────────────────────────► record ─────────────────► trace cached for L
//!      ▲  ▲                                          │ too long: back off,        │
//!      │  └──────────────────────────────────────────┘ blacklist after 4         │ run it
//!      │                 guard exit: resume variables written back               ▼
//!      └──────────────────────────────────────────────────────────────────── run trace
//! ```
//!
//! Interpreter → trace → interpreter is a loop in [`Jit::run`], never a recursion: each
//! executor returns the position where the next one continues.

mod profile;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use flowjit_runtime::Value;

use crate::backend::{self, Backend, Compiled, Listings};
use crate::interp::{self, Exit, Frame, NoMonitor, Position, RuntimeError, Steps};
use crate::lang::{BlockId, Program};
use crate::opt;
use crate::trace::{self, print, AbortReason, Recorded, Trace};
use profile::Profile;
pub use profile::{Key, MAX_ABORTS};

/// The default hot-loop threshold: back edges to a label before it is traced.
pub const DEFAULT_THRESHOLD: u64 = 50;

/// The default limit on a recorded trace's length, in instructions.
pub const DEFAULT_MAX_TRACE_LEN: usize = 4000;

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
    /// Back edges to a label before it is traced: it is traced when the count exceeds this.
    pub threshold: u64,
    /// The longest trace recorded, in instructions.
    pub max_trace_len: usize,
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
}

impl Default for Config {
    fn default() -> Config {
        Config {
            threshold: DEFAULT_THRESHOLD,
            max_trace_len: DEFAULT_MAX_TRACE_LEN,
            max_steps: None,
            dumps: Dumps::default(),
            passes: opt::PIPELINE.to_vec(),
            native: false,
            target: None,
        }
    }
}

/// What happened during a run, for `--stats`.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Recordings abandoned, with the label and the reason.
    pub aborts: Vec<(String, AbortReason)>,
    /// Traces the optimizer rejected, with the label and the reason.
    pub rejected: Vec<(String, opt::Rejected)>,
    /// Time optimizing.
    pub opt_time: Duration,
    /// Traces left on the trace interpreter, with the label and the reason.
    pub not_compiled: Vec<(String, backend::Unsupported)>,
    /// Time compiling to machine code.
    pub compile_time: Duration,
    /// Time in machine code.
    pub native_time: Duration,
    /// Entries into machine code.
    pub native_entries: u64,
    /// Times a trace was entered.
    pub entries: u64,
    /// Whole trace iterations run.
    pub iterations: u64,
    /// Exits per (trace, instruction).
    pub exits: BTreeMap<(usize, usize), u64>,
    /// Time interpreting.
    pub interp_time: Duration,
    /// Time recording (which interprets too).
    pub record_time: Duration,
    /// Time running traces.
    pub trace_time: Duration,
}

/// The tracing JIT: an interpreter that records hot loops and runs their traces.
pub struct Jit<'p> {
    program: &'p Program,
    config: Config,
    profile: Profile,
    traces: Vec<Trace>,
    /// Per trace: where it is anchored.
    keys: Vec<Key>,
    /// Per trace: its machine code, if it has some.
    compiled: Vec<Option<Compiled>>,
    backend: Option<Backend>,
    steps: Steps,
    /// Statistics of the run so far.
    pub stats: Stats,
    dump: String,
}

/// How an attempt to record ended.
enum Recording {
    /// A trace, by index; the frame is at the start of its anchor.
    Trace(usize),
    /// The program stopped during the recording.
    Stopped(Value),
    /// The recording was abandoned; interpretation continues here.
    Resume(Position),
}

impl<'p> Jit<'p> {
    /// A driver for `program`. Fails only when machine code is asked for on a host that
    /// flowjit cannot emit it for.
    pub fn new(program: &'p Program, config: Config) -> Result<Jit<'p>, String> {
        let backend = if config.native {
            Some(Backend::new(config.target)?)
        } else {
            None
        };
        let profile = Profile::new(program, config.threshold);
        Ok(Jit {
            program,
            steps: Steps::new(config.max_steps),
            config,
            profile,
            traces: Vec::new(),
            keys: Vec::new(),
            compiled: Vec::new(),
            backend,
            stats: Stats::default(),
            dump: String::new(),
        })
    }

    /// The traces recorded so far, in order.
    pub fn traces(&self) -> &[Trace] {
        &self.traces
    }

    /// Takes what the dumps have printed so far.
    pub fn take_dump(&mut self) -> String {
        std::mem::take(&mut self.dump)
    }

    /// Runs the program from `entry` on `frame` and returns the value it prints.
    pub fn run(&mut self, frame: &mut Frame, entry: BlockId) -> Result<Value, RuntimeError> {
        let mut pos = Position::start(entry);
        loop {
            let start = Instant::now();
            let exit = interp::run(self.program, frame, pos, &mut self.steps, &mut self.profile);
            self.stats.interp_time += start.elapsed();
            let anchor = match exit? {
                Exit::Stop(v) => return Ok(v),
                Exit::Hot(anchor) => anchor,
            };
            let Some(key) = self.profile.take_key(anchor, frame) else {
                pos = Position::start(anchor);
                continue;
            };
            let index = match self.profile.trace(&key) {
                Some(index) => index,
                None => match self.record(frame, key)? {
                    Recording::Trace(index) => index,
                    Recording::Stopped(v) => return Ok(v),
                    Recording::Resume(at) => {
                        pos = at;
                        continue;
                    }
                },
            };
            pos = self.run_trace(index, frame);
        }
    }

    /// The articles' `do_trace`: records at once from `from`, runs the trace until it
    /// exits, and lets the interpreter finish without tracing again.
    pub fn do_trace(&mut self, frame: &mut Frame, from: BlockId) -> Result<Value, RuntimeError> {
        let key = Key {
            anchor: from,
            greens: Vec::new(),
        };
        let pos = match self.record(frame, key)? {
            Recording::Trace(index) => self.run_trace(index, frame),
            Recording::Stopped(v) => return Ok(v),
            Recording::Resume(at) => at,
        };
        let start = Instant::now();
        let exit = interp::run(self.program, frame, pos, &mut self.steps, &mut NoMonitor);
        self.stats.interp_time += start.elapsed();
        match exit? {
            Exit::Stop(v) => Ok(v),
            Exit::Hot(_) => unreachable!("NoMonitor never takes over"),
        }
    }

    fn record(&mut self, frame: &mut Frame, key: Key) -> Result<Recording, RuntimeError> {
        let start = Instant::now();
        let anchor = key.anchor;
        let greens: Vec<_> = if key.greens.is_empty() {
            Vec::new()
        } else {
            self.profile.greens().to_vec()
        };
        let recorded = trace::record(
            self.program,
            frame,
            anchor,
            &greens,
            &mut self.steps,
            self.config.max_trace_len,
        );
        self.stats.record_time += start.elapsed();
        let label = describe(self.program, &key);
        let label = label.as_str();
        match recorded? {
            Recorded::Stopped(v) => Ok(Recording::Stopped(v)),
            Recorded::Aborted { reason, at } => {
                self.profile.failed(&key);
                if self.config.dumps.trace {
                    let _ = writeln!(self.dump, "# trace aborted at {label}: {reason}");
                }
                self.stats.aborts.push((label.to_string(), reason));
                Ok(Recording::Resume(at))
            }
            Recorded::Loop(trace) => {
                debug_assert_eq!(trace::verify::verify(&trace), Ok(()));
                let index = self.traces.len();
                if self.config.dumps.trace {
                    let _ = writeln!(self.dump, "# trace {index}: loop at {label}");
                    self.dump.push_str(&print::articles(self.program, &trace));
                }
                let start = Instant::now();
                let optimized = opt::optimize(&trace, &self.config.passes);
                self.stats.opt_time += start.elapsed();
                let trace = match optimized {
                    Ok(t) => t,
                    Err(rejected) => {
                        // The loop closed, so the frame is at the anchor: interpret on, and
                        // treat the label as a failed recording.
                        self.profile.failed(&key);
                        if self.config.dumps.opt {
                            let _ = writeln!(self.dump, "# opt {index}: {rejected}");
                        }
                        self.stats.rejected.push((label.to_string(), rejected));
                        return Ok(Recording::Resume(Position::start(anchor)));
                    }
                };
                if self.config.dumps.opt {
                    let _ = writeln!(self.dump, "# opt {index}: loop at {label}");
                    self.dump.push_str(&print::ssa(self.program, &trace));
                }
                let compiled = self.compile(index, label, &trace, frame);
                self.compiled.push(compiled);
                self.traces.push(trace);
                self.profile.set_trace(&key, index);
                self.keys.push(key);
                Ok(Recording::Trace(index))
            }
        }
    }

    /// Compiles trace `index` to machine code, if the backend is on and can.
    fn compile(
        &mut self,
        index: usize,
        label: &str,
        trace: &Trace,
        frame: &Frame,
    ) -> Option<Compiled> {
        let backend = self.backend.as_mut()?;
        let listings = Listings {
            ir: self.config.dumps.ir,
            asm: self.config.dumps.asm,
        };
        let start = Instant::now();
        let counting = self.config.max_steps.is_some();
        let compiled = backend.compile(trace, frame, listings, counting);
        self.stats.compile_time += start.elapsed();
        match compiled {
            Ok(code) => {
                let target = backend.listing_target();
                if let Some(ir) = &code.ir {
                    let _ = writeln!(self.dump, "# ir {index}: loop at {label} ({target})");
                    self.dump.push_str(ir);
                }
                if let Some(asm) = &code.asm {
                    let _ = writeln!(self.dump, "# asm {index}: loop at {label} ({target})");
                    self.dump.push_str(asm);
                }
                Some(code)
            }
            Err(why) => {
                if self.config.dumps.ir || self.config.dumps.asm {
                    let _ = writeln!(
                        self.dump,
                        "# trace {index} stays on the trace interpreter: {why}"
                    );
                }
                self.stats.not_compiled.push((label.to_string(), why));
                None
            }
        }
    }

    /// Runs trace `index` until it exits; returns where the interpreter continues.
    fn run_trace(&mut self, index: usize, frame: &mut Frame) -> Position {
        if let Some(code) = &self.compiled[index] {
            let start = Instant::now();
            let exit = backend::run_compiled(code, &self.traces[index], frame, &mut self.steps);
            self.stats.native_time += start.elapsed();
            if let Some(exit) = exit {
                self.stats.native_entries += 1;
                return self.count_exit(index, exit);
            }
        }
        let start = Instant::now();
        let exit = trace::run_trace(&self.traces[index], frame, &mut self.steps);
        self.stats.trace_time += start.elapsed();
        self.count_exit(index, exit)
    }

    fn count_exit(&mut self, index: usize, exit: trace::TraceExit) -> Position {
        self.stats.entries += 1;
        self.stats.iterations += exit.iterations;
        if let Some(inst) = exit.inst {
            *self.stats.exits.entry((index, inst)).or_default() += 1;
        }
        exit.pos
    }

    /// The statistics, as `--stats` prints them.
    pub fn stats_report(&self) -> String {
        let s = &self.stats;
        let mut out = String::from("# stats\n");
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let _ = writeln!(out, "traces recorded: {}", self.traces.len());
        for (i, t) in self.traces.iter().enumerate() {
            let _ = writeln!(
                out,
                "  trace {i}: loop at {}, {} instructions",
                describe(self.program, &self.keys[i]),
                t.insts.len()
            );
        }
        let _ = writeln!(out, "trace aborts: {}", s.aborts.len());
        for (label, reason) in &s.aborts {
            let _ = writeln!(out, "  at {label}: {reason}");
        }
        if self.backend.is_some() {
            let compiled = self.compiled.iter().filter(|c| c.is_some()).count();
            let bytes: usize = self.compiled.iter().flatten().map(|c| c.size).sum();
            let _ = writeln!(
                out,
                "traces compiled to machine code: {compiled} ({bytes} bytes)"
            );
            for (label, why) in &s.not_compiled {
                let _ = writeln!(out, "  not compiled, at {label}: {why}");
            }
        }
        let _ = writeln!(
            out,
            "traces rejected by the optimizer: {}",
            s.rejected.len()
        );
        for (label, why) in &s.rejected {
            let _ = writeln!(out, "  at {label}: {}", why.0);
        }
        let _ = writeln!(
            out,
            "trace entries: {} ({} in machine code)",
            s.entries, s.native_entries
        );
        let _ = writeln!(
            out,
            "trace iterations: {} (machine code counts them only under --max-steps)",
            s.iterations
        );
        let _ = writeln!(out, "guard exits: {}", s.exits.values().sum::<u64>());
        for ((t, i), n) in &s.exits {
            let trace = &self.traces[*t];
            let _ = writeln!(
                out,
                "  trace {t} {}: {n}",
                print::ssa_inst(self.program, trace, *i)
            );
        }
        let _ = writeln!(
            out,
            "time: interpreting {:.3} ms, recording {:.3} ms, optimizing {:.3} ms, compiling {:.3} ms, trace interpreter {:.3} ms, machine code {:.3} ms",
            ms(s.interp_time),
            ms(s.record_time),
            ms(s.opt_time),
            ms(s.compile_time),
            ms(s.trace_time),
            ms(s.native_time)
        );
        out
    }
}

/// A trace's anchor as dumps and statistics show it: the label, and the green values.
fn describe(program: &Program, key: &Key) -> String {
    let label = program.label(key.anchor);
    if key.greens.is_empty() {
        return label.to_string();
    }
    let greens: Vec<String> = key
        .greens
        .iter()
        .map(|v| {
            let text = v.to_string();
            if text.len() > 24 {
                format!("{}...", &text[..text.floor_char_boundary(21)])
            } else {
                text
            }
        })
        .collect();
    format!("{label} with greens ({})", greens.join(", "))
}
