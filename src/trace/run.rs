//! The trace interpreter: the articles' `runtrace`.
//!
//! It runs a trace's instructions over values held per SSA ref, one iteration after another,
//! until an instruction exits. An exit writes the snapshot's resume variables into the frame
//! and returns the position where the interpreter continues. Nothing here raises a runtime
//! error: an operation that would fail exits before itself, and the interpreter, running it
//! again, raises the error exactly as it would have without the trace.

use flowjit_runtime::{ops, Op, Value};

use super::ir::{Kind, Opnd, Ref, SnapId, Trace};
use crate::resume;
use crate::state::{Frame, Position, Steps};

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

fn write_back(trace: &Trace, snap: SnapId, regs: &[Option<Value>], frame: &mut Frame) -> u64 {
    let read = |r: Ref| value(regs, &Opnd::Ref(r));
    resume::restore(&trace.snaps[snap.index()], read, frame)
}

/// Exits at instruction `i`: its snapshot written back, its operations counted.
fn exit_at(
    trace: &Trace,
    i: usize,
    regs: &[Option<Value>],
    frame: &mut Frame,
    steps: &mut Steps,
    iterations: u64,
) -> TraceExit {
    let snap = trace.insts[i]
        .snap
        .expect("an instruction that can exit has a snapshot");
    steps.left -= write_back(trace, snap, regs, frame);
    TraceExit {
        pos: trace.snaps[snap.index()].pos,
        inst: Some(i),
        iterations,
    }
}

/// Executes instruction `i` (an input, an operation or a guard); whether it did not exit.
fn exec(trace: &Trace, i: usize, regs: &mut [Option<Value>], frame: &Frame) -> bool {
    let inst = &trace.insts[i];
    match inst.kind {
        // A read of a value the trace cannot know checks its type (`Res::Checked`).
        Kind::Input(slot) => {
            regs[i] = frame[slot.index()].clone().filter(|v| inst.ty.admits(v));
            regs[i].is_some()
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
        Kind::Param(_) | Kind::Loop | Kind::LoopStart => true,
    }
}

/// Runs a bridge once, from its start (the frame holds what the guard it leaves from wrote
/// back) to its end or an exit. The caller checks that the budget holds the whole bridge
/// (`trace.iteration_cost()`). At its `loop` the bridge writes its state back and exits
/// there (with `inst` the loop's index): the driver then enters the trace anchored there.
pub fn run_bridge(trace: &Trace, frame: &mut Frame, steps: &mut Steps) -> TraceExit {
    let mut regs: Vec<Option<Value>> = vec![None; trace.insts.len()];
    for i in 0..trace.insts.len() {
        if !exec(trace, i, &mut regs, frame) || trace.insts[i].kind == Kind::Loop {
            return exit_at(trace, i, &regs, frame, steps, 0);
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
pub fn run_trace(trace: &Trace, frame: &mut Frame, steps: &mut Steps) -> TraceExit {
    let cost = trace.iteration_cost();
    let start = trace.loop_start();
    let params = trace
        .insts
        .iter()
        .filter(|i| matches!(i.kind, Kind::Param(_)))
        .count();
    let mut regs: Vec<Option<Value>> = vec![None; trace.insts.len()];
    let mut iterations = 0;
    let budget_stop = |iterations| TraceExit {
        pos: Position::start(trace.anchor),
        inst: None,
        iterations,
    };
    if steps.left < cost {
        return budget_stop(iterations);
    }
    let mut i = 0;
    loop {
        let inst = &trace.insts[i];
        let ok = match inst.kind {
            Kind::Input(_)
            | Kind::Op(_)
            | Kind::GuardTrue
            | Kind::GuardFalse
            | Kind::GuardValue => exec(trace, i, &mut regs, frame),
            Kind::Param(_) => true,
            Kind::LoopStart | Kind::Loop if start.is_some() => {
                // The end of an iteration of a peeled trace: go round again if the budget
                // holds this iteration and the next.
                let snap = inst.snap.expect("loop and loop_start have snapshots");
                if steps.left < cost.saturating_mul(2) {
                    steps.left -= write_back(trace, snap, &regs, frame);
                    return budget_stop(iterations + 1);
                }
                steps.left -= cost;
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
                steps.left -= write_back(trace, snap, &regs, frame);
                iterations += 1;
                if steps.left < cost {
                    return budget_stop(iterations);
                }
                i = 0;
                continue;
            }
        };
        if !ok {
            return exit_at(trace, i, &regs, frame, steps, iterations);
        }
        i += 1;
    }
}
