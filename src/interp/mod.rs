//! The interpreter: the reference semantics every other executor is tested against.
//!
//! Variables live in a frame of slots, resolved when the program was checked, so running a
//! program never looks a name up. The interpreter is built from two step functions, [`step`]
//! (one statement) and [`branch`] (one terminator), which the trace recorder calls too: a
//! trace records exactly what the interpreter does.
//!
//! [`run`] interprets from a position until the program stops, an error happens, or the
//! [`Monitor`] asks to take over at a back edge. It never recurses: the JIT driver calls it
//! in a loop, alternating with machine code.

use flowjit_runtime::{ops, Op, OpError, Value};

use crate::lang::{BlockId, Inst, Jump, Operand, Program, Slot, Terminator};
use crate::state::{frame_with, Frame, Position, Steps};

/// What went wrong, without where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// A variable was read before it was ever written.
    #[error("key_not_found({0})")]
    KeyNotFound(String),
    /// An operation failed.
    #[error(transparent)]
    Op(#[from] OpError),
    /// `--max-steps` operations were interpreted and the program wanted more.
    #[error("step limit reached: the program did not stop within {0} operations")]
    MaxSteps(u64),
}

/// A runtime error: what went wrong and in which block.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind} (in block {block})")]
pub struct RuntimeError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// The label of the block it went wrong in.
    pub block: String,
}

/// How a call of [`run`] ended, when it did not end in an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    /// `print_and_stop` ran with this value.
    Stop(Value),
    /// The monitor took over at a back edge to this block; the frame is as it is on entry
    /// to the block.
    Hot(BlockId),
}

/// Watches the interpreter's back edges and may take control there.
pub trait Monitor {
    /// A back edge from block `from` to `target` is about to be taken. Returning `true` ends
    /// [`run`] with [`Exit::Hot`].
    fn back_edge(&mut self, from: BlockId, target: BlockId) -> bool;

    /// A block holding `can_enter_jit` has run its statements (the hint takes effect at the
    /// end of its block, where the green variables are read).
    fn can_enter_jit(&mut self, _frame: &Frame) {}
}

/// A monitor that never takes over: plain interpretation.
pub struct NoMonitor;

impl Monitor for NoMonitor {
    #[inline(always)]
    fn back_edge(&mut self, _from: BlockId, _target: BlockId) -> bool {
        false
    }
}

/// Reads a variable: its value, or `key_not_found`.
#[inline(always)]
pub fn read<'f>(program: &Program, frame: &'f Frame, slot: Slot) -> Result<&'f Value, ErrorKind> {
    match &frame[slot.index()] {
        Some(v) => Ok(v),
        None => Err(ErrorKind::KeyNotFound(program.var(slot).to_string())),
    }
}

/// The value of an operand.
#[inline(always)]
pub fn operand<'a>(
    program: &Program,
    frame: &'a Frame,
    arg: &'a Operand,
) -> Result<&'a Value, ErrorKind> {
    match arg {
        Operand::Var(slot) => read(program, frame, *slot),
        Operand::Const(v) => Ok(v),
    }
}

/// Executes one statement.
#[inline(always)]
pub fn step(program: &Program, frame: &mut Frame, inst: &Inst) -> Result<(), ErrorKind> {
    match inst {
        Inst::Op2 { dst, op, a, b } => {
            let (x, y) = (operand(program, frame, a)?, operand(program, frame, b)?);
            let fast = match (x, y) {
                (Value::Int(x), Value::Int(y)) => ops::apply2_int(*op, *x, *y),
                _ if *op == Op::Eq => Some((x == y) as i64),
                _ if *op == Op::Ne => Some((x != y) as i64),
                (Value::List(list), Value::Int(i)) if *op == Op::Readlist => {
                    if let Some(item) = usize::try_from(*i).ok().and_then(|i| list.get(i)) {
                        let item = item.clone();
                        frame[dst.index()] = Some(item);
                        return Ok(());
                    }
                    None
                }
                _ => None,
            };
            match fast {
                Some(r) => store_int(frame, *dst, r),
                None => frame[dst.index()] = Some(apply2_general(*op, x, y)?),
            }
        }
        Inst::Op1 { dst, op, a } => {
            let v = ops::apply1(*op, operand(program, frame, a)?)?;
            frame[dst.index()] = Some(v);
        }
        Inst::Promote(_) | Inst::MergePoint(_) | Inst::CanEnterJit => {}
    }
    Ok(())
}

/// Stores an integer into a slot. When the slot already holds an integer, only the payload
/// is written: nothing to drop, and no whole `Value` built on the stack and copied.
#[inline(always)]
fn store_int(frame: &mut Frame, dst: Slot, r: i64) {
    match &mut frame[dst.index()] {
        Some(Value::Int(old)) => *old = r,
        slot => *slot = Some(Value::Int(r)),
    }
}

/// Everything but the 64-bit integer fast path, out of line so that the inner loop stays
/// small.
#[inline(never)]
fn apply2_general(op: Op, x: &Value, y: &Value) -> Result<Value, ErrorKind> {
    Ok(ops::apply2(op, x, y)?)
}

/// Where a terminator goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Flow {
    /// On to another block.
    Jump(Jump),
    /// The program stops, printing this value.
    Stop(Value),
}

/// Evaluates a terminator.
#[inline(always)]
pub fn branch(program: &Program, frame: &Frame, term: &Terminator) -> Result<Flow, ErrorKind> {
    Ok(match term {
        Terminator::Goto(j) | Terminator::Promote { target: j, .. } => Flow::Jump(*j),
        Terminator::If { cond, then, els } => {
            if read(program, frame, *cond)?.is_false() {
                Flow::Jump(*els)
            } else {
                Flow::Jump(*then)
            }
        }
        Terminator::PrintAndStop(arg) => Flow::Stop(operand(program, frame, arg)?.clone()),
    })
}

/// Interprets from `at` until the program stops, fails, or `monitor` takes over.
pub fn run<M: Monitor>(
    program: &Program,
    frame: &mut Frame,
    at: Position,
    steps: &mut Steps,
    monitor: &mut M,
) -> Result<Exit, RuntimeError> {
    let mut id = at.block;
    let mut first = at.inst;
    loop {
        let block = &program.blocks[id.index()];
        let fail = |k: usize| {
            move |kind| RuntimeError {
                kind,
                block: block.label_at(k).to_string(),
            }
        };
        let term = block.insts.len();
        let rest = &block.insts[first..];
        let cost = if first == 0 {
            block.cost
        } else {
            rest.iter().filter(|i| !i.is_hint()).count() as u64 + 1
        };
        if steps.left >= cost {
            steps.left -= cost;
            for inst in rest {
                // The statement's index is needed only for an error: found from its address.
                step(program, frame, inst).map_err(|e| fail(index_of(&block.insts, inst))(e))?;
            }
        } else {
            // Not enough budget for the whole block: go one operation at a time, so that the
            // limit stops the program exactly after the last allowed operation.
            for (k, inst) in rest.iter().enumerate() {
                if !inst.is_hint() {
                    if steps.left == 0 {
                        return Err(fail(first + k)(ErrorKind::MaxSteps(
                            steps.limit.unwrap_or(0),
                        )));
                    }
                    steps.left -= 1;
                }
                step(program, frame, inst).map_err(fail(first + k))?;
            }
            if steps.left == 0 {
                return Err(fail(term)(ErrorKind::MaxSteps(steps.limit.unwrap_or(0))));
            }
            steps.left -= 1;
        }
        first = 0;
        if block.enters_jit {
            monitor.can_enter_jit(frame);
        }
        match branch(program, frame, &block.term).map_err(fail(term))? {
            Flow::Jump(j) => {
                if j.back_edge && monitor.back_edge(id, j.target) {
                    return Ok(Exit::Hot(j.target));
                }
                id = j.target;
            }
            Flow::Stop(v) => return Ok(Exit::Stop(v)),
        }
    }
}

/// The index of `inst` in `insts` (it is one of them).
fn index_of(insts: &[Inst], inst: &Inst) -> usize {
    (inst as *const Inst as usize - insts.as_ptr() as usize) / std::mem::size_of::<Inst>()
}

/// Runs `program` from `entry` with `inputs` and returns the value it prints.
pub fn run_program(
    program: &Program,
    entry: BlockId,
    inputs: &[(Slot, Value)],
    max_steps: Option<u64>,
) -> Result<Value, RuntimeError> {
    let mut frame = frame_with(program, inputs);
    let mut steps = Steps::new(max_steps);
    match run(
        program,
        &mut frame,
        Position::start(entry),
        &mut steps,
        &mut NoMonitor,
    )? {
        Exit::Stop(v) => Ok(v),
        Exit::Hot(_) => unreachable!("NoMonitor never takes over"),
    }
}
