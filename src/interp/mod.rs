//! The interpreter: the reference semantics every other executor is tested against.
//!
//! Variables live in a frame of slots, resolved when the program was checked, so running a
//! program never looks a name up. The interpreter is built from two step functions, [`step`]
//! (one statement) and [`branch`] (one terminator), which the trace recorder calls too: a
//! trace records exactly what the interpreter does. The statements that need more of the
//! state than the frame (input, output, a call) are run by [`effect`].
//!
//! A call pushes the caller's frame on the state's stack of calls and goes on at the
//! callee's entry in a new frame; `return` pops it: the stack is data, so a program may
//! recurse 100,000 deep (the limit, [`MAX_CALL_DEPTH`](crate::state::MAX_CALL_DEPTH)) on flowjit's own small stack.
//!
//! [`run`] interprets from a position until the program stops, an error happens, or the
//! [`Monitor`] asks to take over at a back edge. It never recurses: the JIT driver calls it
//! in a loop, alternating with machine code.

use flowjit_runtime::{ops, Op, OpError, Value};

use crate::lang::{BlockId, FuncId, Inst, Jump, Operand, Program, Slot, Terminator};
use crate::state::{Frame, Position, State, Steps, UndoLog};

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
    /// `putchar` of something that is not an integer 0..255 (as it prints, shortened).
    #[error("putchar: {0} is not a byte")]
    NotAByte(String),
    /// `return` with no call to return from.
    #[error("return outside a function")]
    ReturnOutside,
    /// A call nested more than [`crate::state::MAX_CALL_DEPTH`] deep.
    #[error("call depth limit reached")]
    CallDepth,
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
    /// A function run by [`call_function`] returned this value.
    Return(Value),
    /// The monitor took over at the entry of a call ([`Monitor::call`]): the frame is the
    /// callee's, at the start of this block (the function's entry), its caller waiting.
    Called(BlockId),
}

/// Watches the interpreter's back edges and may take control there.
pub trait Monitor {
    /// A back edge from block `from` to `target` is about to be taken. Returning `true` ends
    /// [`run`] with [`Exit::Hot`].
    fn back_edge(&mut self, from: BlockId, target: BlockId) -> bool;

    /// A block holding `can_enter_jit` has run its statements (the hint takes effect at the
    /// end of its block, where the green variables are read); it counts for merge point
    /// `merge` ([`Program::merge_of_can_enter`]).
    fn can_enter_jit(&mut self, _merge: usize, _frame: &Frame) {}

    /// A jump to `target` that [`Monitor::back_edge`] did not take over is about to be
    /// taken, with `frame`'s values. Returning `true` ends [`run`] with [`Exit::Hot`].
    fn jump(&mut self, _target: BlockId, _frame: &Frame) -> bool {
        false
    }

    /// A call of the function whose entry is `entry` was entered: the frame is the
    /// callee's, holding its arguments. Returning `true` ends [`run`] with [`Exit::Called`].
    #[inline(always)]
    fn call(&mut self, _entry: BlockId, _frame: &Frame) -> bool {
        false
    }

    /// A store of `array[index]` is about to run (it may still fail). Only the undo log of
    /// an elidable call made on the interpreter's behalf ([`call_undoable`]) looks.
    #[inline(always)]
    fn storing(&mut self, _array: &Value, _index: &Value) {}
}

impl Monitor for UndoLog {
    fn back_edge(&mut self, _from: BlockId, _target: BlockId) -> bool {
        false
    }

    fn storing(&mut self, array: &Value, index: &Value) {
        self.note(array, index);
    }
}

/// A monitor that never takes over: plain interpretation.
pub struct NoMonitor;

impl Monitor for NoMonitor {
    #[inline(always)]
    fn back_edge(&mut self, _from: BlockId, _target: BlockId) -> bool {
        false
    }
}

/// A frame's variables, as the step functions see them: a frame (or a part of one) cannot
/// change its size while they run, and held as a slice its address and length stay in
/// registers through the interpreter's loop.
pub type Slots = [Option<Value>];

/// Reads a variable: its value, or `key_not_found`.
#[inline(always)]
pub fn read<'f>(program: &Program, frame: &'f Slots, slot: Slot) -> Result<&'f Value, ErrorKind> {
    match &frame[slot.index()] {
        Some(v) => Ok(v),
        None => Err(ErrorKind::KeyNotFound(program.var(slot).to_string())),
    }
}

/// The value of an operand.
#[inline(always)]
pub fn operand<'a>(
    program: &Program,
    frame: &'a Slots,
    arg: &'a Operand,
) -> Result<&'a Value, ErrorKind> {
    match arg {
        Operand::Var(slot) => read(program, frame, *slot),
        Operand::Const(v) => Ok(v),
    }
}

/// Why [`step`] did not run a statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Interrupt {
    /// It failed.
    Error(ErrorKind),
    /// It needs more of the state than the frame (input, output, a call): [`effect`] runs
    /// it. (One result for both keeps the interpreter's inner loop to one test a statement.)
    Effect,
}

impl From<ErrorKind> for Interrupt {
    fn from(e: ErrorKind) -> Interrupt {
        Interrupt::Error(e)
    }
}

impl From<OpError> for Interrupt {
    fn from(e: OpError) -> Interrupt {
        Interrupt::Error(ErrorKind::Op(e))
    }
}

/// Executes one statement on the frame; a statement that needs more of the state is left
/// to [`effect`].
#[inline(always)]
pub fn step(program: &Program, frame: &mut Slots, inst: &Inst) -> Result<(), Interrupt> {
    step_noting(program, frame, inst, &mut NoMonitor)
}

/// [`step`], telling `monitor` of each array store before it runs.
#[inline(always)]
fn step_noting<M: Monitor>(
    program: &Program,
    frame: &mut Slots,
    inst: &Inst,
    monitor: &mut M,
) -> Result<(), Interrupt> {
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
        Inst::SetItem {
            array,
            index,
            value,
        } => setitem(program, frame, *array, index, value, monitor)?,
        Inst::Promote(_) | Inst::MergePoint(_) | Inst::CanEnterJit => {}
        Inst::Print(_) | Inst::Putchar(_) | Inst::Getchar(_) | Inst::Call { .. } => {
            return Err(Interrupt::Effect)
        }
    }
    Ok(())
}

/// `array[index] = value`, out of line, so that the inner loop stays small.
#[inline(never)]
fn setitem<M: Monitor>(
    program: &Program,
    frame: &Slots,
    array: Slot,
    index: &Operand,
    value: &Operand,
    monitor: &mut M,
) -> Result<(), ErrorKind> {
    let a = read(program, frame, array)?;
    let i = operand(program, frame, index)?;
    let v = operand(program, frame, value)?.clone();
    monitor.storing(a, i);
    Ok(ops::setitem(a, i, v)?)
}

/// What [`effect`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effected {
    /// The statement ran; the block goes on.
    Done,
    /// A call was entered: run the callee from its entry.
    Enter(BlockId),
}

/// Runs a statement that [`step`] leaves: input, output or a call. `at` is the statement's
/// position, where a call returns to (the statement after it).
#[inline(never)]
pub fn effect(
    program: &Program,
    state: &mut State,
    inst: &Inst,
    at: Position,
) -> Result<Effected, ErrorKind> {
    let frame = &mut state.frame;
    match inst {
        Inst::Print(a) => {
            let v = operand(program, frame, a)?;
            state.io.print(v);
        }
        Inst::Putchar(a) => match operand(program, frame, a)? {
            Value::Int(b @ 0..=255) => state.io.putchar(*b as u8),
            other => return Err(ErrorKind::NotAByte(ops::shown(other))),
        },
        Inst::Getchar(dst) => {
            let b = state.io.getchar();
            frame[dst.index()] = Some(Value::Int(b));
        }
        Inst::Call { dst, func, args } => {
            let ret = Position {
                block: at.block,
                inst: at.inst + 1,
            };
            state.enter_call(program, *func, args, ret, *dst)?;
            return Ok(Effected::Enter(program.func(*func).entry));
        }
        _ => unreachable!("step runs every other statement"),
    }
    Ok(Effected::Done)
}

/// Stores an integer into a slot. When the slot already holds an integer, only the payload
/// is written: nothing to drop, and no whole `Value` built on the stack and copied.
#[inline(always)]
fn store_int(frame: &mut Slots, dst: Slot, r: i64) {
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
    /// The current call returns this value.
    Return(Value),
}

/// Evaluates a terminator.
#[inline(always)]
pub fn branch(program: &Program, frame: &Slots, term: &Terminator) -> Result<Flow, ErrorKind> {
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
        Terminator::Return(arg) => Flow::Return(operand(program, frame, arg)?.clone()),
    })
}

/// Interprets from `at` until the program stops, fails, or `monitor` takes over.
pub fn run<M: Monitor>(
    program: &Program,
    state: &mut State,
    at: Position,
    steps: &mut Steps,
    monitor: &mut M,
) -> Result<Exit, RuntimeError> {
    // The current frame is held apart from the rest of the state while the loop runs, so
    // that nothing else can alias it and its address and length stay in registers; it is
    // handed back for an effect (which may change frames), and at the end.
    let mut frame = std::mem::take(&mut state.frame);
    let exit = interpret(program, &mut frame, state, at, steps, monitor);
    state.frame = frame;
    exit
}

/// Hands the current `frame` back to `state` for `f`, and takes the current one then.
#[inline(always)]
fn with_state<T>(frame: &mut Frame, state: &mut State, f: impl FnOnce(&mut State) -> T) -> T {
    std::mem::swap(frame, &mut state.frame);
    let r = f(state);
    std::mem::swap(frame, &mut state.frame);
    r
}

/// [`run`]'s loop: `frame` is the current frame, `state` the rest.
#[inline(never)]
fn interpret<M: Monitor>(
    program: &Program,
    frame: &mut Frame,
    state: &mut State,
    at: Position,
    steps: &mut Steps,
    monitor: &mut M,
) -> Result<Exit, RuntimeError> {
    let mut id = at.block;
    let mut first = at.inst;
    // The calls of `@elidable` functions entered in this run whose results the memo will
    // keep (`State::memo`): each call's depth, function and arguments, and the budget left
    // at its entry. A call that does not return here (the JIT took over, or an error) keeps
    // nothing.
    let mut pending: Vec<(usize, (FuncId, Vec<Value>), u64)> = Vec::new();
    'blocks: loop {
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
            cost_from(&block.insts, first)
        };
        if steps.left >= cost {
            steps.left -= cost;
            let mut slots: &mut Slots = frame;
            for inst in rest {
                if let Err(stop) = step_noting(program, slots, inst, monitor) {
                    // The statement's index is needed only here: found from its address.
                    let at = Position {
                        block: id,
                        inst: index_of(&block.insts, inst),
                    };
                    let entered = interrupted(program, frame, state, stop, inst, at, steps);
                    if let Interrupted::Enter(entry, key) = entered.map_err(fail(at.inst))? {
                        // What is left of the block runs (and is counted) on return.
                        steps.left += cost_from(&block.insts, at.inst + 1);
                        match key {
                            Some(key) => pending.push((state.calls.len(), key, steps.left)),
                            None if monitor.call(entry, frame) => return Ok(Exit::Called(entry)),
                            None => {}
                        }
                        id = entry;
                        first = 0;
                        continue 'blocks;
                    }
                    slots = frame;
                }
            }
        } else {
            // Not enough budget for the whole block: go one operation at a time, so that the
            // limit stops the program exactly after the last allowed operation.
            for (k, inst) in rest.iter().enumerate() {
                let k = first + k;
                if !inst.is_hint() {
                    if steps.left == 0 {
                        return Err(fail(k)(ErrorKind::MaxSteps(steps.limit.unwrap_or(0))));
                    }
                    steps.left -= 1;
                }
                if let Err(stop) = step_noting(program, frame, inst, monitor) {
                    let at = Position { block: id, inst: k };
                    let entered = interrupted(program, frame, state, stop, inst, at, steps);
                    if let Interrupted::Enter(entry, key) = entered.map_err(fail(k))? {
                        match key {
                            Some(key) => pending.push((state.calls.len(), key, steps.left)),
                            None if monitor.call(entry, frame) => return Ok(Exit::Called(entry)),
                            None => {}
                        }
                        id = entry;
                        first = 0;
                        continue 'blocks;
                    }
                }
            }
            if steps.left == 0 {
                return Err(fail(term)(ErrorKind::MaxSteps(steps.limit.unwrap_or(0))));
            }
            steps.left -= 1;
        }
        first = 0;
        if block.enters_jit {
            monitor.can_enter_jit(program.merge_of_can_enter(id), frame);
        }
        match branch(program, frame, &block.term).map_err(fail(term))? {
            Flow::Jump(j) => {
                if j.back_edge && monitor.back_edge(id, j.target) || monitor.jump(j.target, frame) {
                    return Ok(Exit::Hot(j.target));
                }
                id = j.target;
            }
            Flow::Stop(v) => return Ok(Exit::Stop(v)),
            Flow::Return(v) if state.calls.is_empty() => {
                if state.returns_out {
                    return Ok(Exit::Return(v));
                }
                return Err(fail(term)(ErrorKind::ReturnOutside));
            }
            Flow::Return(v) => {
                if pending.last().is_some_and(|p| p.0 == state.calls.len()) {
                    let (_, (func, args), entry) = pending.pop().expect("just seen");
                    if let Some(memo) = state.memo(steps) {
                        memo.insert(func, args, v.clone(), entry.saturating_sub(steps.left));
                    }
                }
                let ret = with_state(frame, state, |s| s.leave(v)).expect("a call is waiting");
                id = ret.block;
                first = ret.inst;
            }
        }
    }
}

/// Finishes statement `inst` at `at`, which [`step`] stopped at with `stop`: its error, or
/// its effect run (on the current `frame` and the rest of the `state`), which may enter a
/// call ([`Interrupted`]). Without a step limit, a call of an `@elidable` function whose
/// result the memo holds (`State::memo`) is not made: the result is stored.
#[cold]
#[inline(never)]
fn interrupted(
    program: &Program,
    frame: &mut Frame,
    state: &mut State,
    stop: Interrupt,
    inst: &Inst,
    at: Position,
    steps: &mut Steps,
) -> Result<Interrupted, ErrorKind> {
    if let Interrupt::Error(e) = stop {
        return Err(e);
    }
    let mut key = None;
    if let (Inst::Call { dst, func, args }, Some(memo)) = (inst, state.memo(steps)) {
        if program.func(*func).elidable {
            let values = args
                .iter()
                .map(|a| operand(program, frame, a).cloned())
                .collect::<Result<Vec<_>, _>>()?;
            if let Some((v, took)) = memo.get(*func, values.clone(), steps.left) {
                steps.left -= took;
                frame[dst.index()] = Some(v);
                return Ok(Interrupted::Done);
            }
            key = Some((*func, values));
        }
    }
    Ok(
        match with_state(frame, state, |s| effect(program, s, inst, at))? {
            Effected::Done => Interrupted::Done,
            Effected::Enter(entry) => Interrupted::Enter(entry, key),
        },
    )
}

/// What [`interrupted`] did.
enum Interrupted {
    /// The statement ran (or its call's result was found).
    Done,
    /// A call was entered, to run from this block; of an `@elidable` function, with the
    /// function and arguments the memo is to keep its result under.
    Enter(BlockId, Option<(FuncId, Vec<Value>)>),
}

/// What running `insts` from statement `k` and then the terminator costs.
fn cost_from(insts: &[Inst], k: usize) -> u64 {
    insts[k..].iter().filter(|i| !i.is_hint()).count() as u64 + 1
}

/// The index of `inst` in `insts` (it is one of them).
fn index_of(insts: &[Inst], inst: &Inst) -> usize {
    (inst as *const Inst as usize - insts.as_ptr() as usize) / std::mem::size_of::<Inst>()
}

/// Runs `program` from `entry` on `state` and returns the value it prints.
pub fn run_program(
    program: &Program,
    entry: BlockId,
    state: &mut State,
    max_steps: Option<u64>,
) -> Result<Value, RuntimeError> {
    let mut steps = Steps::new(max_steps);
    match run(
        program,
        state,
        Position::start(entry),
        &mut steps,
        &mut NoMonitor,
    )? {
        Exit::Stop(v) => Ok(v),
        Exit::Hot(_) | Exit::Called(_) => unreachable!("NoMonitor never takes over"),
        Exit::Return(_) => unreachable!("only a state made by call_function returns out"),
    }
}

/// Runs function `func` of `program` on `args` by itself, as a call would, within the
/// `steps` budget: its result, or its runtime error (which is the budget's when it runs
/// out). `None` when it stops the program instead (with `print_and_stop`). Its output, if
/// it writes any, is dropped: the partial evaluator runs `@elidable` functions, which the
/// checker makes sure write none. `depth` is how many calls wait for this one, as
/// [`MAX_CALL_DEPTH`](crate::state::MAX_CALL_DEPTH) counts them: its own calls nest inside
/// those.
pub fn call_function(
    program: &Program,
    func: crate::lang::FuncId,
    args: Vec<Value>,
    depth: usize,
    steps: &mut Steps,
) -> Result<Option<Value>, RuntimeError> {
    call_monitored(program, func, args, depth, steps, &mut NoMonitor)
}

/// Makes a call of `func` on `args` for an executor that did not inline it (a trace's
/// `call`), on `state` itself: in a frame of its own, with the state's input, output and
/// memo, `depth` calls waiting for it (the current frame's and those inlined into the trace
/// that makes it), until it returns ([`Exit::Return`]) or stops the program
/// ([`Exit::Stop`]). The state's frames are as they were when it ends, in an error too.
/// The caller has counted the call's own operation; `steps` counts the rest, its `return`
/// among them.
pub fn call_in<M: Monitor>(
    program: &Program,
    state: &mut State,
    func: crate::lang::FuncId,
    args: Vec<Value>,
    depth: usize,
    steps: &mut Steps,
    monitor: &mut M,
) -> Result<Exit, RuntimeError> {
    in_call_frame(program, state, func, args, depth, |state, entry| {
        run(program, state, entry, steps, monitor)
    })
}

/// Runs `body` on `state` set up for a call of `func` on `args` made apart from the
/// state's frames ([`call_in`]): in a frame of its own, at the function's entry (`body`'s
/// position), `depth` calls waiting for it, a `return` from that frame returning out
/// ([`Exit::Return`]); the state's frames are as they were when it ends.
pub fn in_call_frame<T>(
    program: &Program,
    state: &mut State,
    func: crate::lang::FuncId,
    args: Vec<Value>,
    depth: usize,
    body: impl FnOnce(&mut State, Position) -> T,
) -> T {
    let f = program.func(func);
    let mut frame = vec![None; program.frame_size()];
    for (p, v) in f.params.iter().zip(args) {
        frame[p.index()] = Some(v);
    }
    let frame = std::mem::replace(&mut state.frame, frame);
    let calls = std::mem::take(&mut state.calls);
    let (outer, returns_out) = (state.depth, state.returns_out);
    state.depth = depth + 1;
    state.returns_out = true;
    let result = body(state, Position::start(f.entry));
    state.frame = frame;
    state.calls = calls;
    state.depth = outer;
    state.returns_out = returns_out;
    result
}

/// Makes an elidable call on the interpreter's behalf, as one transaction: its result, when
/// the call returns one that `accept`s; otherwise (it failed, ran out of `steps`, stopped the
/// program or returned what the caller cannot use) `None`, and every store into an array
/// that it made is undone ([`UndoLog`]), so that the interpreter, which then makes the call
/// itself, finds the arrays as they were and the frame where a trace exits is the
/// interpreter's. The cost is a note per store the call makes, kept until it ends; the
/// interpreter's own stores are not noted.
pub fn call_undoable(
    program: &Program,
    func: crate::lang::FuncId,
    args: Vec<Value>,
    depth: usize,
    steps: &mut Steps,
    accept: impl FnOnce(&Value) -> bool,
) -> Option<Value> {
    let mut log = UndoLog::default();
    let made = call_monitored(program, func, args, depth, steps, &mut log);
    let made = made.ok().flatten().filter(accept);
    if made.is_none() {
        log.undo();
    }
    made
}

/// [`call_function`] under `monitor`, which never takes over.
fn call_monitored<M: Monitor>(
    program: &Program,
    func: crate::lang::FuncId,
    args: Vec<Value>,
    depth: usize,
    steps: &mut Steps,
    monitor: &mut M,
) -> Result<Option<Value>, RuntimeError> {
    let mut state = State::with_frame(Vec::new());
    match call_in(program, &mut state, func, args, depth, steps, monitor)? {
        Exit::Return(v) => Ok(Some(v)),
        Exit::Stop(_) => Ok(None),
        Exit::Hot(_) | Exit::Called(_) => {
            unreachable!("the monitor of a function run by itself never takes over")
        }
    }
}
