//! The trace interpreter: the articles' `runtrace`.
//!
//! It runs a trace's instructions over values held per SSA ref, one iteration after another,
//! until an instruction exits. An exit writes the snapshot's resume variables into the frame
//! and returns the position where the interpreter continues. Nothing here raises a runtime
//! error: an operation that would fail exits before itself, and the interpreter, running it
//! again, raises the error exactly as it would have without the trace.

use flowjit_runtime::{ops, Op, Value};

use super::ir::{Kind, Opnd, Ref, SnapId, Trace};
use crate::interp::{self, RuntimeError};
use crate::lang::Program;
use crate::resume;
use crate::state::{Position, State, Steps};

/// What a trace reaches besides its values: the program (whose elidable functions it
/// calls), the running state (the frame it reads and writes back, the input and output)
/// and the `--max-steps` budget.
pub struct Env<'a> {
    /// The program the trace was recorded from.
    pub program: &'a Program,
    /// The state the trace runs in.
    pub state: &'a mut State,
    /// The budget.
    pub steps: &'a mut Steps,
    /// How the program ended inside a `call` the trace made (`print_and_stop` of a value,
    /// or an error), if it did: the trace exited there, and the run ends.
    pub ended: Option<Result<Value, RuntimeError>>,
    /// How many `call`s the trace made.
    pub calls: u64,
}

impl<'a> Env<'a> {
    /// The environment of a trace running on `state` within `steps`.
    pub fn new(program: &'a Program, state: &'a mut State, steps: &'a mut Steps) -> Env<'a> {
        Env {
            program,
            state,
            steps,
            ended: None,
            calls: 0,
        }
    }
}

/// How a trace's `call` ended.
#[derive(Debug)]
pub enum Called {
    /// It returned this value, and the trace goes on with it.
    Returned(Value),
    /// It returned this value, and the trace exits after the call with it (the value is not
    /// of the type recorded, or the budget no longer holds the rest of the iteration).
    Exits(Value),
    /// The program ended inside the call: `print_and_stop` of a value, or an error.
    Ended(Result<Value, RuntimeError>),
}

/// Makes a trace's `call` of `func` on `args`, recorded at `origin` (the call statement),
/// `inlined` calls deep in the trace's own frames, as the interpreter makes it: in a frame
/// of its own on the state's input and output, each of its operations counted. `done` is
/// what the iteration has taken of `steps` up to and with the call statement, beyond what
/// `steps` counts already; the call may take all the rest. `steps` is then charged what the
/// call used beyond the `recorded` operations it took when recorded (which the iteration's
/// cost counts), or given back what it did not use; the trace goes on if the budget still
/// holds `reserve` (the iteration's cost) and `accept` takes the result.
#[allow(clippy::too_many_arguments)]
pub fn call(
    program: &Program,
    state: &mut State,
    func: crate::lang::FuncId,
    args: Vec<Value>,
    origin: Position,
    inlined: usize,
    steps: &mut Steps,
    done: u64,
    reserve: u64,
    recorded: u64,
    accept: impl FnOnce(&Value) -> bool,
) -> Called {
    let depth = state.depth + state.calls.len() + inlined;
    if depth >= crate::state::MAX_CALL_DEPTH {
        return Called::Ended(Err(call_depth_error(program, origin)));
    }
    let budget = steps.left.saturating_sub(done);
    let mut inner = Steps {
        limit: steps.limit,
        left: budget,
    };
    let monitor = &mut interp::NoMonitor;
    match interp::call_in(program, state, func, args, depth, &mut inner, monitor) {
        Err(e) => Called::Ended(Err(e)),
        Ok(interp::Exit::Stop(v)) => Called::Ended(Ok(v)),
        Ok(interp::Exit::Return(v)) => {
            let used = budget - inner.left;
            steps.left = steps.left.saturating_add(recorded).saturating_sub(used);
            if steps.left >= reserve && accept(&v) {
                Called::Returned(v)
            } else {
                Called::Exits(v)
            }
        }
        Ok(interp::Exit::Hot(_) | interp::Exit::Called(_)) => {
            unreachable!("a call's monitor never takes over")
        }
    }
}

/// The interpreter's error for the call statement at `origin`, which no call more fits
/// under the depth limit.
pub fn call_depth_error(program: &Program, origin: Position) -> RuntimeError {
    RuntimeError {
        kind: interp::ErrorKind::CallDepth,
        block: program
            .block(origin.block)
            .label_at(origin.inst)
            .to_string(),
    }
}

/// After an exit at `call` `inst` that could not go on with the call's result `v`, the
/// frame written back: the caller's variable receives `v` ([`Kind::Call`]'s snapshot leaves
/// it out).
pub fn give_result(program: &Program, inst: &super::ir::Inst, state: &mut State, v: Value) {
    let at = inst.origin.expect("a call is recorded from a statement");
    match &program.block(at.block).insts[at.inst] {
        crate::lang::Inst::Call { dst, .. } => state.frame[dst.index()] = Some(v),
        _ => unreachable!("a `call` is recorded from a call statement"),
    }
}

/// Makes an elidable call for a compiled trace: its result, or `None` when it fails, when
/// it would need more operations than the budget holds beyond `reserve` (the rest of the
/// iteration, which counts the `recorded` operations the call took when recorded), or when
/// its result is not one the code can `accept` (the trace's: of the type recorded). The
/// trace then exits before the call, and the interpreter makes it on the arrays as they
/// were: what the call stored is undone ([`interp::call_undoable`]). `steps` is charged what
/// the call used beyond `recorded`, or given back what it did not use.
#[allow(clippy::too_many_arguments)]
pub fn call_elidable(
    program: &Program,
    state: &State,
    func: crate::lang::FuncId,
    args: Vec<Value>,
    steps: &mut Steps,
    reserve: u64,
    recorded: u64,
    accept: impl FnOnce(&Value) -> bool,
) -> Option<Value> {
    let depth = state.depth + state.calls.len();
    if depth >= crate::state::MAX_CALL_DEPTH {
        return None;
    }
    let budget = steps.left.checked_sub(reserve)?.saturating_add(recorded);
    let mut inner = Steps {
        limit: steps.limit,
        left: budget,
    };
    let v = interp::call_undoable(program, func, args, depth, &mut inner, accept)?;
    let used = budget - inner.left;
    steps.left = steps.left.saturating_add(recorded).saturating_sub(used);
    Some(v)
}

/// How a run of a trace ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceExit {
    /// Where the interpreter continues.
    pub pos: Position,
    /// The instruction that exited, or `None` when the trace was not entered because fewer
    /// than one iteration's worth of `--max-steps` remained.
    pub inst: Option<usize>,
    /// Whole iterations completed.
    pub iterations: u64,
}

fn value(regs: &[Option<Value>], o: &Opnd) -> Value {
    match o {
        Opnd::Ref(r) => regs[r.index()]
            .clone()
            .expect("the verifier checks that refs are defined before use"),
        Opnd::Const(v) => v.clone(),
    }
}

fn write_back(trace: &Trace, snap: SnapId, regs: &[Option<Value>], state: &mut State) -> u64 {
    let read = |r: Ref| value(regs, &Opnd::Ref(r));
    resume::restore(&trace.snaps[snap.index()], read, state)
}

/// Exits at instruction `i`: its snapshot written back, its operations counted.
fn exit_at(
    trace: &Trace,
    i: usize,
    regs: &[Option<Value>],
    env: &mut Env,
    iterations: u64,
) -> TraceExit {
    let inst = &trace.insts[i];
    let snap = inst
        .snap
        .expect("an instruction that can exit has a snapshot");
    if env.ended.is_some() {
        // The program ended inside a call: nothing goes on.
        return TraceExit {
            pos: trace.snaps[snap.index()].pos,
            inst: Some(i),
            iterations,
        };
    }
    env.steps.left -= write_back(trace, snap, regs, env.state);
    if let (Kind::Call(_), Some(v)) = (inst.kind, &regs[i]) {
        give_result(env.program, inst, env.state, v.clone());
    }
    TraceExit {
        pos: trace.snaps[snap.index()].pos,
        inst: Some(i),
        iterations,
    }
}

/// Executes instruction `i` (an input, an operation or a guard); whether it did not exit.
/// `reserve` is what the rest of the iteration needs of the budget.
fn exec(trace: &Trace, i: usize, regs: &mut [Option<Value>], env: &mut Env, reserve: u64) -> bool {
    let inst = &trace.insts[i];
    match inst.kind {
        // A read of a value the trace cannot know checks its type (`Res::Checked`).
        Kind::Input(slot) => {
            regs[i] = env.state.frame[slot.index()]
                .clone()
                .filter(|v| inst.ty.admits(v));
            regs[i].is_some()
        }
        Kind::GetItem => {
            let element = ops::apply2(
                Op::Readlist,
                &value(regs, &inst.args[0]),
                &value(regs, &inst.args[1]),
            );
            regs[i] = element.ok().filter(|v| inst.ty.admits(v));
            regs[i].is_some()
        }
        Kind::SetItem => {
            let [a, k, v] = &inst.args[..] else {
                unreachable!("the verifier checks arities")
            };
            ops::setitem(&value(regs, a), &value(regs, k), value(regs, v)).is_ok()
        }
        Kind::Print => {
            env.state.io.print(&value(regs, &inst.args[0]));
            true
        }
        Kind::Putchar => match value(regs, &inst.args[0]) {
            Value::Int(b @ 0..=255) => {
                env.state.io.putchar(b as u8);
                true
            }
            _ => false,
        },
        Kind::Getchar => {
            regs[i] = Some(Value::Int(env.state.io.getchar()));
            true
        }
        Kind::CallPure(func) => {
            let (args, _, recorded) = super::ir::call_pure_parts(&inst.args);
            let args = args.iter().map(|a| value(regs, a)).collect();
            let (program, steps) = (env.program, &mut *env.steps);
            let ty = inst.ty;
            let accept = |v: &Value| ty.admits(v);
            regs[i] = call_elidable(
                program, env.state, func, args, steps, reserve, recorded, accept,
            );
            regs[i].is_some()
        }
        Kind::Call(func) => {
            let (args, recorded) = super::ir::call_parts(&inst.args);
            let args = args.iter().map(|a| value(regs, a)).collect();
            let snap = trace.snap_of(inst).expect("a call has a snapshot");
            let origin = inst.origin.expect("a call is recorded from a statement");
            let done = snap.cost - recorded;
            let inlined = snap.frames.len();
            let ty = inst.ty;
            let (program, state, steps) = (env.program, &mut *env.state, &mut *env.steps);
            env.calls += 1;
            let called = call(
                program,
                state,
                func,
                args,
                origin,
                inlined,
                steps,
                done,
                reserve,
                recorded,
                |v| ty.admits(v),
            );
            match called {
                Called::Returned(v) => {
                    regs[i] = Some(v);
                    true
                }
                Called::Exits(v) => {
                    regs[i] = Some(v);
                    false
                }
                Called::Ended(end) => {
                    env.ended = Some(end);
                    false
                }
            }
        }
        Kind::Op(op) => {
            let result = match inst.args.as_slice() {
                [a] => ops::apply1(op, &value(regs, a)),
                [a, b] => ops::apply2(op, &value(regs, a), &value(regs, b)),
                _ => unreachable!("the verifier checks arities"),
            };
            regs[i] = result.ok();
            if op == Op::Readlist {
                regs[i] = regs[i].take().filter(|v| inst.ty.admits(v));
            }
            regs[i].is_some()
        }
        Kind::GuardTrue => !value(regs, &inst.args[0]).is_false(),
        Kind::GuardFalse => value(regs, &inst.args[0]).is_false(),
        Kind::GuardValue => value(regs, &inst.args[0]) == value(regs, &inst.args[1]),
        // Never allocated: an exit whose snapshot holds it builds it.
        Kind::Param(_) | Kind::ParamItem | Kind::Loop | Kind::LoopStart | Kind::Virtual => true,
    }
}

/// Runs a bridge once, from its start (the frame holds what the guard it leaves from wrote
/// back) to its end or an exit. The caller checks that the budget holds the whole bridge
/// (`trace.iteration_cost()`). At its `loop` the bridge writes its state back and exits
/// there (with `inst` the loop's index): the driver then enters the trace anchored there.
pub fn run_bridge(trace: &Trace, env: &mut Env) -> TraceExit {
    let mut regs: Vec<Option<Value>> = vec![None; trace.insts.len()];
    let cost = trace.iteration_cost();
    for i in 0..trace.insts.len() {
        if !exec(trace, i, &mut regs, env, cost) || trace.insts[i].kind == Kind::Loop {
            return exit_at(trace, i, &regs, env, 0);
        }
    }
    unreachable!("a bridge ends in loop")
}

/// Runs `trace` on `frame`, which must be at the start of the trace's anchor, until it exits.
///
/// Each whole iteration counts `trace.iteration_cost()` operations against `steps`, an exit
/// the count in its snapshot. An iteration starts only if the budget holds a whole one, so
/// that the interpreter runs the last steps and stops at exactly the operation it would have
/// stopped at.
pub fn run_trace(trace: &Trace, env: &mut Env) -> TraceExit {
    let cost = trace.iteration_cost();
    let start = trace.loop_start();
    let params = trace.insts.iter().filter(|i| i.kind.is_param()).count();
    let mut regs: Vec<Option<Value>> = vec![None; trace.insts.len()];
    let mut iterations = 0;
    let budget_stop = |iterations| TraceExit {
        pos: Position::start(trace.anchor),
        inst: None,
        iterations,
    };
    if env.steps.left < cost {
        return budget_stop(iterations);
    }
    let mut i = 0;
    loop {
        let inst = &trace.insts[i];
        let ok = match inst.kind {
            Kind::Param(_) | Kind::ParamItem => true,
            Kind::LoopStart | Kind::Loop if start.is_some() => {
                // The end of an iteration of a peeled trace: go round again if the budget
                // holds this iteration and the next.
                let snap = inst.snap.expect("loop and loop_start have snapshots");
                if env.steps.left < cost.saturating_mul(2) {
                    env.steps.left -= write_back(trace, snap, &regs, env.state);
                    return budget_stop(iterations + 1);
                }
                env.steps.left -= cost;
                iterations += 1;
                let next: Vec<Value> = inst.args.iter().map(|a| value(&regs, a)).collect();
                let first = start.expect("checked above") + 1;
                for (k, v) in next.into_iter().enumerate() {
                    regs[first + k] = Some(v);
                }
                i = first + params;
                continue;
            }
            Kind::Loop | Kind::LoopStart => {
                let snap = inst.snap.expect("a loop has a snapshot");
                env.steps.left -= write_back(trace, snap, &regs, env.state);
                iterations += 1;
                if env.steps.left < cost {
                    return budget_stop(iterations);
                }
                i = 0;
                continue;
            }
            _ => exec(trace, i, &mut regs, env, cost),
        };
        if !ok {
            return exit_at(trace, i, &regs, env, iterations);
        }
        i += 1;
    }
}
