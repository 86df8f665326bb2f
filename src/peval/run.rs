//! Running what partial evaluation leaves: the one sequence that `flowjit pe --run`,
//! `flowjit bench` and the differential tests share.
//!
//! ```text
//! program, static inputs ──specialize──► raw Residual ──clean (unless raw)──► Residual
//!   ──Residual::runnable (dynamic inputs)──► Runnable: a Program and its inputs
//!   ──Runnable::run──► compiled whole: machine code until it stops or deoptimizes, then
//!                      the interpreter from where the code left off;
//!                      not compiled (not asked, or it cannot be): the interpreter
//! ```
//!
//! [`specialize_and_run`] is the whole sequence. A caller that does something between the
//! steps (`flowjit pe` prints the residual program, or runs it on the JIT) calls
//! [`residual`], [`Residual::runnable`] and [`Runnable::run`] itself; a caller that wants
//! the listings of the compiled program, or to say why it was not compiled, is told before
//! the code runs.

use flowjit_runtime::Value;

use crate::backend::{self, cfg::ProgramExit, Backend, CompiledProgram, Listings, Unsupported};
use crate::interp::{self, Exit, NoMonitor, RuntimeError};
use crate::lang::{BlockId, Program, Slot};
use crate::state::{Io, Position, State, Steps};

use super::{cleanup, specialize, PeError, Residual};

/// Where a residual program made by [`Residual::to_program`] starts: its first block.
pub const ENTRY: BlockId = BlockId(0);

/// The residual program of `program` from `entry` with the `statics` known: cleaned up if
/// `clean`, raw (as the partial evaluator made it) otherwise.
pub fn residual(
    program: &Program,
    entry: BlockId,
    statics: &[(Slot, Value)],
    clean: bool,
) -> Result<Residual, PeError> {
    let raw = specialize(program, entry, statics)?;
    Ok(if clean { cleanup::clean(raw) } else { raw })
}

/// A residual program ready to run from [`ENTRY`], with its inputs.
#[derive(Clone, Debug)]
pub struct Runnable {
    /// The residual program, checked.
    pub program: Program,
    /// The dynamic inputs, as slots of the residual program.
    pub inputs: Vec<(Slot, Value)>,
}

impl Residual {
    /// The residual program as a program to run, with the `dynamic` inputs (slots of the
    /// original `program`) given to it; an input the residual program never reads is
    /// dropped.
    pub fn runnable(&self, program: &Program, dynamic: &[(Slot, Value)]) -> Runnable {
        let residual = self.to_program(program);
        let inputs = dynamic
            .iter()
            .filter_map(|(slot, v)| Some((residual.slot(program.var(*slot))?, v.clone())))
            .collect();
        Runnable {
            program: residual,
            inputs,
        }
    }
}

/// How [`Runnable::run`] runs a residual program.
#[derive(Default)]
pub struct Execution<'b> {
    /// Compile the whole program to one function with this backend first; the interpreter
    /// takes over where the machine code deoptimizes, and runs it all when it cannot be
    /// compiled. `None`: the interpreter runs it all.
    pub backend: Option<&'b mut Backend>,
    /// The listings the compilation makes.
    pub listings: Listings,
    /// The most operations the interpreter may run (machine code is not counted).
    pub max_steps: Option<u64>,
}

impl Runnable {
    /// Runs the program as `how` says, with input and output `io`, and returns the value
    /// it prints. When it is compiled, `compiled` is told the result (the code, with its
    /// listings, or why it was not compiled) before the code runs.
    pub fn run(
        &self,
        how: Execution<'_>,
        io: &mut Io,
        compiled: impl FnOnce(Result<&CompiledProgram, &Unsupported>),
    ) -> Result<Value, RuntimeError> {
        let mut state = State::new(&self.program, &self.inputs, std::mem::take(io));
        let result = self.run_on(how, &mut state, compiled);
        *io = state.io;
        result
    }

    fn run_on(
        &self,
        how: Execution<'_>,
        state: &mut State,
        compiled: impl FnOnce(Result<&CompiledProgram, &Unsupported>),
    ) -> Result<Value, RuntimeError> {
        let mut pos = Position::start(ENTRY);
        if let Some(backend) = how.backend {
            let code = backend.compile_program(&self.program, ENTRY, &state.frame, how.listings);
            compiled(code.as_ref());
            if let Ok(code) = code {
                match backend::run_program(&code, &self.program, state) {
                    Some(ProgramExit::Stop(v)) => return Ok(v),
                    Some(ProgramExit::Resume(at)) => pos = at,
                    None => {}
                }
            }
        }
        let mut steps = Steps::new(how.max_steps);
        match interp::run(&self.program, state, pos, &mut steps, &mut NoMonitor)? {
            Exit::Stop(v) => Ok(v),
            Exit::Hot(_) | Exit::Called(_) => unreachable!("NoMonitor never takes over"),
            Exit::Return(_) => unreachable!("a run's state does not return out"),
        }
    }
}

/// The whole sequence: specializes `program` from `entry` with the `statics` known, cleans
/// the residual program up, and runs it on the `dynamic` inputs as `how` says, with input
/// and output `io`. The outer error: partial evaluation stopped; the inner result: what
/// the residual program printed, or its runtime error.
pub fn specialize_and_run(
    program: &Program,
    entry: BlockId,
    statics: &[(Slot, Value)],
    dynamic: &[(Slot, Value)],
    how: Execution<'_>,
    io: &mut Io,
) -> Result<Result<Value, RuntimeError>, PeError> {
    let runnable = residual(program, entry, statics, true)?.runnable(program, dynamic);
    Ok(runnable.run(how, io, |_| {}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::{self, Syntax};

    const POWER: &str = "power:
    res = 1
    if y goto power_rec else goto power_done
power_rec:
    res = res * x
    y = y - 1
    if y goto power_rec else goto power_done
power_done:
    print_and_stop(res)
";

    fn power() -> Program {
        lang::load(POWER, Syntax::Fg).expect("a valid program").1
    }

    #[test]
    fn the_residual_program_runs_interpreted_and_compiled_alike() {
        let program = power();
        let y = program.slot("y").expect("y");
        let x = program.slot("x").expect("x");
        let statics = [(y, Value::Int(5))];
        let dynamic = [(x, Value::Int(3))];
        let mut io = Io::default();
        let interpreted = specialize_and_run(
            &program,
            ENTRY,
            &statics,
            &dynamic,
            Execution::default(),
            &mut io,
        );
        assert_eq!(interpreted, Ok(Ok(Value::Int(243))));
        let mut backend = Backend::new(None, crate::jit::Policy::DEFAULT.backend_limits())
            .expect("the host emits machine code");
        let mut told = false;
        let runnable = residual(&program, ENTRY, &statics, true)
            .expect("specializes")
            .runnable(&program, &dynamic);
        let how = Execution {
            backend: Some(&mut backend),
            ..Execution::default()
        };
        let compiled = runnable.run(how, &mut io, |code| told = code.is_ok());
        assert_eq!(compiled, Ok(Value::Int(243)));
        assert!(told, "the whole residual program of power compiles");
    }

    #[test]
    fn an_input_the_residual_program_never_reads_is_dropped() {
        let program = power();
        let y = program.slot("y").expect("y");
        let res = program.slot("res").expect("res");
        let runnable = residual(&program, ENTRY, &[(y, Value::Int(0))], true)
            .expect("specializes")
            .runnable(&program, &[(res, Value::Int(7))]);
        assert!(runnable.inputs.is_empty());
        assert_eq!(
            runnable.run(Execution::default(), &mut Io::default(), |_| {}),
            Ok(Value::Int(1))
        );
    }
}
