//! flowjit as a library (SPEC §7): a program parsed and checked from text, run with inputs
//! in a mode, its standard input and output the caller's, and what it gave back as values:
//! its final value or its error (with the command line's messages), what it printed, and
//! the JIT's statistics.
//!
//! ```
//! use flowjit::embed::{Mode, Program, Syntax, Value};
//!
//! let source = "\
//! sum:
//!     s = 0
//!     i = 0
//!     goto head
//! head:
//!     c = i < n
//!     if c goto body else goto done
//! body:
//!     s = s + i
//!     i = i + 1
//!     goto head
//! done:
//!     print(s)
//!     print_and_stop(s)
//! ";
//! let program = Program::parse("sum.fg", source, Syntax::Fg).expect("a valid program");
//! let run = program.run().input("n", Value::Int(100_000)).mode(Mode::Jit).go();
//! assert_eq!(run.result, Ok(Value::Int(4_999_950_000)));
//! assert_eq!(run.output, b"4999950000\n");
//! let stats = run.stats.expect("a JIT run has statistics");
//! assert!(stats.entries > 0, "the loop ran as a trace");
//!
//! // An error is the command line's message; what was printed before it is kept.
//! let bad = program.run().input("n", Value::atom("ten")).go();
//! assert_eq!(
//!     bad.result.unwrap_err().to_string(),
//!     "error: type error: lt expects integers, got the atom ten (in block head)"
//! );
//! ```
//!
//! Values nest as deep as programs make them, and printing or dropping one recurses: the
//! command line runs on a thread with a stack of 512 MiB, and a caller running programs
//! that build deep structures should do the same.

use std::fmt;
use std::io::{BufRead, Write};

pub use crate::jit::Stats;
pub use crate::lang::Syntax;
pub use flowjit_runtime::Value;

use crate::interp;
use crate::jit;
use crate::lang::{self, BlockId, Slot, Source};
use crate::state::{Io, State};

/// How a program runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// The plain interpreter: the reference.
    Interp,
    /// Hot loops traced and optimized, their traces run on the trace interpreter.
    Trace,
    /// Hot loops compiled to machine code (the command line's default).
    #[default]
    Jit,
}

/// Why a program did not give a value: the messages are the command line's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The program does not parse or check: its diagnostics, rendered as the command line
    /// prints them (`NAME:LINE:COL: error: MESSAGE`, the line and a caret).
    Invalid(String),
    /// The run was asked for wrongly: an input that is not a variable of the program, an
    /// entry label it does not have.
    Usage(String),
    /// The program failed while it ran (what it printed before is in
    /// [`Outcome::output`] or was written to the caller's writer).
    Runtime(String),
}

impl Error {
    /// The command line's exit status for this error: 2 for bad usage or an invalid
    /// program, 1 for a runtime error.
    pub fn exit_status(&self) -> u8 {
        match self {
            Error::Invalid(_) | Error::Usage(_) => 2,
            Error::Runtime(_) => 1,
        }
    }
}

impl fmt::Display for Error {
    /// What the command line prints on standard error (without the last newline).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Invalid(rendered) => f.write_str(rendered.trim_end()),
            Error::Usage(m) | Error::Runtime(m) => write!(f, "error: {m}"),
        }
    }
}

impl std::error::Error for Error {}

/// A checked program, ready to run any number of times.
pub struct Program {
    program: lang::Program,
}

impl Program {
    /// Parses and checks `text` in `syntax`; `name` names it in diagnostics.
    pub fn parse(name: &str, text: &str, syntax: Syntax) -> Result<Program, Error> {
        match lang::load(text, syntax) {
            Ok((_, program)) => Ok(Program { program }),
            Err(diags) => Err(Error::Invalid(
                Source::new(name, text).render(&diags, false),
            )),
        }
    }

    /// A run of the program, to set up and then [`Run::go`]: from its first block, no
    /// inputs, in [`Mode::Jit`] with the default thresholds, reading no input, its output
    /// kept in [`Outcome::output`].
    pub fn run(&self) -> Run<'_> {
        Run {
            program: self,
            entry: None,
            inputs: Vec::new(),
            mode: Mode::default(),
            threshold: None,
            max_steps: None,
            stdin: None,
            stdout: None,
        }
    }
}

/// A run being set up ([`Program::run`]).
pub struct Run<'p> {
    program: &'p Program,
    entry: Option<String>,
    inputs: Vec<(String, Value)>,
    mode: Mode,
    threshold: Option<u64>,
    max_steps: Option<u64>,
    stdin: Option<Box<dyn BufRead>>,
    stdout: Option<Box<dyn Write>>,
}

impl Run<'_> {
    /// Starts at the block labelled `label` (`--entry`).
    pub fn entry(mut self, label: &str) -> Self {
        self.entry = Some(label.to_string());
        self
    }

    /// Gives variable `name` the value `value` when the run starts (`NAME=VALUE`).
    pub fn input(mut self, name: &str, value: Value) -> Self {
        self.inputs.push((name.to_string(), value));
        self
    }

    /// Runs in `mode` (`--mode`).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Traces a loop after `n` back edges, and a guard after `n` failures (`--threshold`
    /// and `--bridge-threshold`), compiling what is hot even where it may not pay.
    pub fn threshold(mut self, n: u64) -> Self {
        self.threshold = Some(n);
        self
    }

    /// Stops with an error after `n` interpreted operations (`--max-steps`).
    pub fn max_steps(mut self, n: u64) -> Self {
        self.max_steps = Some(n);
        self
    }

    /// Reads the program's input (`getchar`) from `input`; without it, the input is empty.
    pub fn stdin(mut self, input: impl BufRead + 'static) -> Self {
        self.stdin = Some(Box::new(input));
        self
    }

    /// Writes the program's output to `output` as it prints; without it, the output is
    /// kept in [`Outcome::output`].
    pub fn stdout(mut self, output: impl Write + 'static) -> Self {
        self.stdout = Some(Box::new(output));
        self
    }

    /// Runs the program.
    pub fn go(self) -> Outcome {
        let program = &self.program.program;
        let setup = (self.entry_block(), self.slots());
        let (entry, inputs) = match setup {
            (Ok(entry), Ok(inputs)) => (entry, inputs),
            (Err(e), _) | (_, Err(e)) => return Outcome::failed(e),
        };
        let input = self.stdin.unwrap_or_else(|| Box::new(std::io::empty()));
        let mut state = State::new(program, &inputs, Io::new(input, self.stdout));
        let (result, stats) = match self.mode {
            Mode::Interp => {
                let result = interp::run_program(program, entry, &mut state, self.max_steps);
                (result, None)
            }
            Mode::Trace | Mode::Jit => {
                let config = config(self.mode, self.threshold, self.max_steps);
                let mut driver = match jit::Jit::new(program, config) {
                    Ok(driver) => driver,
                    Err(why) => return Outcome::failed(Error::Usage(why)),
                };
                let result = driver.run(&mut state, entry);
                (result, Some(driver.stats.clone()))
            }
        };
        state.io.flush();
        Outcome {
            result: result.map_err(|e| Error::Runtime(e.to_string())),
            output: state.io.output().to_vec(),
            stats,
        }
    }

    /// The block the run starts at.
    fn entry_block(&self) -> Result<BlockId, Error> {
        match &self.entry {
            None => Ok(BlockId(0)),
            Some(label) => (self.program.program.block_id(label))
                .ok_or_else(|| Error::Usage(format!("no block is labelled `{label}`"))),
        }
    }

    /// The inputs by slot: each a variable of the program, none given twice.
    fn slots(&self) -> Result<Vec<(Slot, Value)>, Error> {
        let mut inputs: Vec<(Slot, Value)> = Vec::new();
        for (name, value) in &self.inputs {
            let slot = self.program.program.slot(name).ok_or_else(|| {
                Error::Usage(format!("input `{name}` is not a variable of the program"))
            })?;
            if inputs.iter().any(|(s, _)| *s == slot) {
                return Err(Error::Usage(format!("input `{name}` is given twice")));
            }
            inputs.push((slot, value.clone()));
        }
        Ok(inputs)
    }
}

/// The driver's configuration for `mode`, as the command line makes it: thresholds given
/// are obeyed as given, the default ones compile only what can pay for itself; Cranelift
/// compiles on a thread of its own unless steps are counted.
fn config(mode: Mode, threshold: Option<u64>, max_steps: Option<u64>) -> jit::Config {
    let default = jit::Policy::DEFAULT;
    let policy = match threshold {
        Some(n) => jit::Policy {
            threshold: n,
            merge_threshold: n,
            bridge_threshold: n,
            merge_bridge_threshold: n,
            ..default
        },
        None => default,
    };
    jit::Config {
        policy,
        max_steps,
        native: mode == Mode::Jit,
        pay_off: threshold.is_none(),
        background: max_steps.is_none(),
        ..jit::Config::default()
    }
}

/// What a run gave.
#[derive(Debug)]
pub struct Outcome {
    /// The program's final value (`print_and_stop`'s or `return`'s), or why there is none.
    pub result: Result<Value, Error>,
    /// What the program printed, when it had no writer of the caller's ([`Run::stdout`]).
    pub output: Vec<u8>,
    /// The JIT's statistics (`--stats`), in [`Mode::Trace`] and [`Mode::Jit`].
    pub stats: Option<Stats>,
}

impl Outcome {
    /// A run that did not start.
    fn failed(error: Error) -> Outcome {
        Outcome {
            result: Err(error),
            output: Vec::new(),
            stats: None,
        }
    }
}
