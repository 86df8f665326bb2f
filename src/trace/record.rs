//! The trace recorder: the articles' `trace` predicate.
//!
//! Recording *is* interpretation: each statement and terminator is executed by the
//! interpreter's own [`step`] and [`branch`] on the real frame, and what was done is logged
//! as trace instructions. So when a trace closes, the frame holds exactly what the
//! interpreter alone would have computed, and when recording is abandoned (the trace grows
//! too long, the program stops, an error happens) the run simply continues in the
//! interpreter from where recording stood.
//!
//! - An operation becomes the same operation on SSA values.
//! - `if v` becomes `guard_true(v)` or `guard_false(v)`, resuming at the branch not taken.
//! - `promote(v, L)` and `promote(v)` become `guard_value(v, value)`, freezing the value
//!   seen now; the guard resumes after the promotion.
//! - `readlist` of an array becomes `getitem`, a load; `a[i] = v` becomes `setitem`.
//! - `print`, `putchar` and `getchar` become instructions of their own: recording does
//!   them (the output appears as the interpreter would write it), and so does every run of
//!   the trace.
//! - A call of an `@elidable` function is made by the interpreter, at once, and becomes
//!   `call_pure` holding the result it gave. A call of any other function is inlined: the
//!   callee's statements are recorded where the call is, and its `return` becomes nothing
//!   but the caller's variable taking the result. A recursive call (of a function whose
//!   call the trace is in, its own frame's included), or a call nested more than
//!   [`MAX_INLINE_DEPTH`] deep, is made at once by the recording's host and becomes
//!   `call`, after which the trace goes on with its result (the function's trace, or the
//!   traces of the loops it runs, make it). A `return` from the function the trace runs in
//!   ends a function trace or a bridge there, and abandons a loop's recording.
//! - A jump to the trace anchor closes the loop.

use std::ops::ControlFlow;

use flowjit_runtime::{Op, Value};

use super::ir::{Inst, Kind, Merge, Opnd, Ref, SnapId, Snapshot, Trace, Ty};
use crate::interp::{self, branch, step, ErrorKind, Flow, Interrupt, RuntimeError};
use crate::lang::{BlockId, FuncId, Inst as Stmt, Operand, Program, Slot, Terminator};
use crate::resume::Inlined;
use crate::state::{Frame, Position, State, Steps, MAX_CALL_DEPTH};

/// Why a recording was abandoned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AbortReason {
    /// The trace grew past the length limit before the loop closed.
    TooLong(usize),
    /// The recording met what traces do not hold yet: a `return` from the frame the trace
    /// runs in, a branch on an array.
    NotTraced(&'static str),
    /// The recording of a loop reached the anchor of another loop's trace: the trace of
    /// the outer loop is left to the bridges of the inner one (LuaJIT's and PyPy's nested
    /// loops), instead of copying the inner loop's iterations.
    InnerLoop,
    /// The trace of a function that loops itself went round its loop, which has no trace
    /// yet to end at.
    UntracedLoop,
}

impl std::fmt::Display for AbortReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AbortReason::TooLong(n) => write!(f, "trace too long (more than {n} instructions)"),
            AbortReason::NotTraced(what) => write!(f, "{what} is not traced yet"),
            AbortReason::InnerLoop => write!(f, "reached the anchor of another trace"),
            AbortReason::UntracedLoop => write!(f, "went round a loop that has no trace yet"),
        }
    }
}

/// A virtual array of the snapshot a bridge starts from (one the trace it hangs from never
/// allocated), which the bridge makes again itself, so that it stays virtual in the bridge
/// too (PyPy's bridges inheriting virtuals): the variables holding it, and its elements.
#[derive(Clone, Debug)]
pub struct Rebuilt {
    /// The variables that hold it.
    pub slots: Vec<Slot>,
    /// Its elements.
    pub fields: Vec<Element>,
}

/// An element of a [`Rebuilt`] array.
#[derive(Clone, Debug)]
pub enum Element {
    /// A constant.
    Const(Value),
    /// The value of a variable the snapshot gives.
    Var(Slot),
}

/// Where a recording ends, jumping to a block with a frame: the variables the trace
/// there takes as constants ([`Host::ends`]).
type Ends<'a> = &'a dyn Fn(BlockId, &Frame) -> Option<Vec<Slot>>;

/// How deep a trace inlines calls: a call nested deeper stays a `call`.
pub const MAX_INLINE_DEPTH: usize = 8;

/// How many frames of one function a trace holds before a call of it stays a `call`: a
/// recursive call of a function that runs no loop and is not a dispatch function is
/// inlined once (LuaJIT's `recunroll`), so that half its calls are made in the trace.
pub const RECURSION_UNROLL: usize = 2;

/// What a recording asks of the executor it runs in.
pub trait Host {
    /// Whether another trace is anchored at the start of `block`, with `frame`'s values:
    /// a recording jumping there ends ([`AbortReason::InnerLoop`]).
    fn traced(&self, block: BlockId, frame: &Frame) -> bool;

    /// Makes a call not inlined (`call`) of `func` on `args` on `state`, `depth` calls
    /// waiting for it, as [`interp::call_in`] does: until it returns or stops the program,
    /// `steps` counting what it takes.
    fn call(
        &mut self,
        state: &mut State,
        func: FuncId,
        args: Vec<Value>,
        depth: usize,
        steps: &mut Steps,
    ) -> Result<interp::Exit, RuntimeError>;

    /// Where a bridge's recording ends, jumping to `target` with `frame`: at a trace's
    /// anchor, the variables that trace takes as constants ([`record_bridge`]).
    fn ends(&self, target: BlockId, frame: &Frame) -> Option<Vec<Slot>>;
}

/// The host of a recording with nothing but the interpreter: `traced` and `ends` as
/// their functions say, calls made by the plain interpreter.
pub struct Interpreted<'a> {
    /// The program recorded.
    pub program: &'a Program,
    /// [`Host::traced`].
    pub traced: &'a dyn Fn(BlockId, &Frame) -> bool,
    /// [`Host::ends`].
    pub ends: &'a dyn Fn(BlockId, &Frame) -> Option<Vec<Slot>>,
}

impl<'a> Interpreted<'a> {
    /// A host for `program` where nothing else is traced and no bridge ends.
    pub fn new(program: &'a Program) -> Interpreted<'a> {
        fn never(_: BlockId, _: &Frame) -> bool {
            false
        }
        fn nowhere(_: BlockId, _: &Frame) -> Option<Vec<Slot>> {
            None
        }
        Interpreted {
            program,
            traced: &never,
            ends: &nowhere,
        }
    }
}

impl Host for Interpreted<'_> {
    fn traced(&self, block: BlockId, frame: &Frame) -> bool {
        (self.traced)(block, frame)
    }

    fn ends(&self, target: BlockId, frame: &Frame) -> Option<Vec<Slot>> {
        (self.ends)(target, frame)
    }

    fn call(
        &mut self,
        state: &mut State,
        func: FuncId,
        args: Vec<Value>,
        depth: usize,
        steps: &mut Steps,
    ) -> Result<interp::Exit, RuntimeError> {
        interp::call_in(
            self.program,
            state,
            func,
            args,
            depth,
            steps,
            &mut interp::NoMonitor,
        )
    }
}

/// Whether a value a trace would read or hold is an array.
fn is_array(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Array(_)))
}

/// How a recording ended.
#[derive(Debug)]
pub enum Recorded {
    /// The loop closed: the frame is at the start of the anchor again.
    Loop(Trace),
    /// Recording was abandoned; the interpreter continues at `at`.
    Aborted {
        /// Why.
        reason: AbortReason,
        /// Where the interpreter continues.
        at: Position,
    },
    /// The program stopped while being recorded, printing this value.
    Stopped(Value),
}

/// A frame of the recording that waits for an inlined call to return.
struct Caller {
    /// Its variables written so far (see [`Recorder::written`]).
    written: Vec<Option<Opnd>>,
    /// Where it goes on when the call returns.
    ret: Position,
    /// Its variable that receives the result.
    dst: Slot,
    /// The function called.
    func: FuncId,
}

struct Recorder<'p> {
    program: &'p Program,
    insts: Vec<Inst>,
    snaps: Vec<Snapshot>,
    /// Per slot of the frame the recording is in now: the operand holding the variable's
    /// value written in this iteration (in the trace's own frame) or since the call (in an
    /// inlined call's frame, which holds nothing else).
    written: Vec<Option<Opnd>>,
    /// The frames waiting for inlined calls to return, the trace's own frame first.
    callers: Vec<Caller>,
    /// The deepest the recording's inlined calls have nested.
    deepest: usize,
    /// Per slot: the `input` instruction already reading the variable, if any.
    inputs: Vec<Option<Ref>>,
    /// Per slot: the value of a green variable at the anchor, a constant in the trace.
    greens: Vec<Option<Value>>,
    /// Flowgraph operations done so far in this iteration.
    cost: u64,
    /// The arrays the trace has loaded from or stored into, by operand (at most
    /// [`MAX_APART`]), with the array each held when recorded.
    arrays: Vec<(Opnd, Value)>,
    /// The pairs of those that a guard has told apart.
    apart: Vec<(Opnd, Opnd)>,
    /// The merge points passed ([`Trace::merges`]).
    merges: Vec<Merge>,
    /// Whether what the recording knows as constants is folded as it goes (in a program
    /// with the meta-tracing hints, see [`Recorder::folds`]).
    fold: bool,
    /// The operations and guards folded so far: they count towards the trace's length
    /// limit as if recorded, so that folding changes what a trace costs to record and
    /// optimize, not which paths are traced.
    folded: usize,
    /// For a function trace or a bridge of one ([`Trace::function`]): the function whose
    /// call the trace's own frame runs. A call of it is recursive (a `call`), and its
    /// `return` in that frame ends the trace.
    function: Option<FuncId>,
    /// The function whose call the trace's own frame runs, if any: a call of it is
    /// recursive (a `call`, never inlined), and in a bridge its `return` in that frame ends
    /// the trace, which then says so ([`Trace::function`]).
    frame_func: Option<FuncId>,
    /// Whether the trace may end at the `return` of its own frame: a function trace or a
    /// bridge (a loop's trace ends where its loop closes).
    returns: bool,
    /// For the trace of a function that loops itself: a backward jump of its own frame to
    /// a block where no trace is anchored abandons the recording
    /// ([`AbortReason::UntracedLoop`]) instead of copying the loop's iterations.
    stops_at_loops: bool,
}

/// How many arrays a trace tells apart by guards: a store into one then leaves what the
/// optimizer knows of the others (`opt::heap`).
pub const MAX_APART: usize = 4;

impl Recorder<'_> {
    fn snapshot(&mut self, pos: Position) -> SnapId {
        // The variables written, those `keep` accepts.
        let entries = |written: &[Option<Opnd>], keep: &dyn Fn(Slot) -> bool| {
            written
                .iter()
                .enumerate()
                .filter_map(|(slot, w)| {
                    let slot = Slot(slot as u32);
                    w.as_ref().filter(|_| keep(slot)).map(|o| (slot, o.clone()))
                })
                .collect::<Vec<_>>()
        };
        let own = self.callers.first().map_or(&self.written, |c| &c.written);
        // The trace's own frame resumes at `pos`, or where the outermost inlined call
        // returns to: a variable not live there is never read again before it is written,
        // and the exit leaves it as it is (`lang::liveness`).
        let resumes = self.callers.first().map_or(pos, |c| c.ret);
        let live = self.program.live_at(resumes.block, resumes.inst);
        let frames = self
            .callers
            .iter()
            .enumerate()
            .map(|(k, c)| Inlined {
                ret: c.ret,
                dst: c.dst,
                entries: entries(
                    self.callers
                        .get(k + 1)
                        .map_or(&self.written, |n| &n.written),
                    &|_| true,
                ),
            })
            .collect();
        let own = entries(own, &|slot| live.contains(slot));
        self.snaps.push(Snapshot {
            pos,
            cost: self.cost,
            entries: own,
            frames,
            virtuals: Vec::new(),
            stores: Vec::new(),
        });
        SnapId(self.snaps.len() as u32 - 1)
    }

    /// Before a load from or a store into array operand `a` (holding `value`), at `at`: a
    /// guard that it is not any other array the trace has loaded from
    /// or stored into, where it was not when recorded (`guard_false(eq(a, b))`, arrays
    /// compared by identity). A store through one then does not make the optimizer forget
    /// what it knows of the other (an interpreter's operand stack and its locals, say);
    /// where they are in fact the same, the guard exits and the interpreter goes on.
    fn tell_apart(&mut self, a: &Opnd, value: Option<&Value>, at: Position) {
        let Some(Value::Array(x)) = value else {
            return;
        };
        let others: Vec<Opnd> = self
            .arrays
            .iter()
            .filter(|(b, v)| b != a && !matches!(v, Value::Array(y) if std::rc::Rc::ptr_eq(x, y)))
            .map(|(b, _)| b.clone())
            .collect();
        for b in others {
            let both_constant = a.as_const().is_some() && b.as_const().is_some();
            let done = self
                .apart
                .iter()
                .any(|(p, q)| (p == a && *q == b) || (*p == b && q == a));
            if both_constant || done {
                continue;
            }
            let t = self.emit(
                Kind::Op(Op::Eq),
                vec![a.clone(), b.clone()],
                None,
                at,
                Ty::Int,
            );
            let own = self.snapshot(at);
            self.emit(
                Kind::GuardFalse,
                vec![Opnd::Ref(t)],
                Some(own),
                at,
                Ty::None,
            );
            self.apart.push((a.clone(), b));
        }
        if self.arrays.len() < MAX_APART && !self.arrays.iter().any(|(b, _)| b == a) {
            self.arrays.push((a.clone(), Value::Array(x.clone())));
        }
    }

    fn emit(
        &mut self,
        kind: Kind,
        args: Vec<Opnd>,
        snap: Option<SnapId>,
        origin: Position,
        ty: Ty,
    ) -> Ref {
        self.insts.push(Inst {
            kind,
            args,
            snap,
            origin: Some(origin),
            ty,
        });
        Ref(self.insts.len() as u32 - 1)
    }

    /// Whether an operation on `args` is done now, its result a constant of the trace, rather
    /// than recorded (RPython's tracer does the same): in a program with the meta-tracing
    /// hints, whose greens are constants, an operation on constants alone (the dispatch of
    /// an interpreter on its program's position) that neither makes an array nor reads one.
    /// The optimizer would fold it (`opt::fold`) to the same value; recorded, a Brainfuck
    /// interpreter's trace was fifteen times as long as what was left of it. Without the
    /// hints the recording is the articles' (their traces keep `same` of a constant). An
    /// `@elidable` call on constants is still recorded, one operation, but its result is
    /// the constant it returned.
    fn folds(&self, kind: Kind, args: &[Opnd]) -> bool {
        let pure = match kind {
            Kind::Op(op) => !op.allocates(),
            Kind::CallPure(_) => true,
            _ => false,
        };
        pure && args.iter().all(|a| self.constant(a))
    }

    /// Whether `o` is a constant the recording folds on (see [`Recorder::folds`]).
    fn constant(&self, o: &Opnd) -> bool {
        self.fold && o.as_const().is_some()
    }

    /// The trace's length, for its limit: what it holds and what was folded.
    fn len(&self) -> usize {
        self.insts.len() + self.folded
    }

    /// The operand holding variable `slot` now, reading it with an `input` at `pos` if the
    /// iteration has neither written nor read it yet. The input is of the type of the
    /// variable's value in `frame`, and checks it.
    fn var(&mut self, frame: &Frame, slot: Slot, pos: Position) -> Opnd {
        if let Some(w) = &self.written[slot.index()] {
            return w.clone();
        }
        if !self.callers.is_empty() {
            // An inlined call's frame holds only what it set: the statement reading this
            // variable fails with `key_not_found`, and the recording ends with that error.
            return Opnd::Const(Value::Int(0));
        }
        if let Some(r) = self.inputs[slot.index()] {
            return Opnd::Ref(r);
        }
        if let Some(v) = &self.greens[slot.index()] {
            return Opnd::Const(v.clone());
        }
        // A variable never written has no type: the interpreter raises `key_not_found` on
        // reading it, and the recording ends with that error (the trace is never kept).
        let v = self.input(slot, frame[slot.index()].as_ref(), pos);
        if let Opnd::Ref(r) = v {
            self.inputs[slot.index()] = Some(r);
        }
        v
    }

    fn operand(&mut self, frame: &Frame, arg: &Operand, pos: Position) -> Opnd {
        match arg {
            Operand::Var(slot) => self.var(frame, *slot, pos),
            Operand::Const(v) => Opnd::Const(v.clone()),
        }
    }
}

/// Records a trace from the start of `anchor`, executing the program on `frame` as it goes.
/// `max_len` bounds the number of instructions. Errors are the interpreter's: the same
/// error, raised at the same place, as interpreting would have raised. With `fold`, in a
/// program with the meta-tracing hints, an operation on constants alone is done as it is
/// recorded, its result a constant of the trace, and a guard on a constant is left out
/// (the optimizer's `fold` pass, done early: see [`Recorder::folds`]).
///
/// With `greens` (the merge point's green variables, when `anchor` is the merge point), the
/// greens' values now are constants in the trace, and the loop closes only when the
/// recording reaches the anchor again with the same green values: the trace is for one
/// position of the interpreted program, and is entered only there.
///
/// A jump to a position where `host` says another trace is anchored ends the recording
/// ([`AbortReason::InnerLoop`]); `host` makes the calls not inlined.
#[allow(clippy::too_many_arguments)]
pub fn record(
    program: &Program,
    state: &mut State,
    anchor: BlockId,
    greens: &[Slot],
    host: &mut dyn Host,
    steps: &mut Steps,
    max_len: usize,
    fold: bool,
) -> Result<Recorded, RuntimeError> {
    let fixed: Vec<(Slot, Value)> = greens
        .iter()
        .filter_map(|g| state.frame[g.index()].clone().map(|v| (*g, v)))
        .collect();
    let key = fixed.clone();
    let closes = move |target: BlockId, frame: &Frame| {
        (target == anchor
            && key
                .iter()
                .all(|(g, v)| frame[g.index()].as_ref() == Some(v)))
        .then(|| greens.to_vec())
    };
    record_from(
        program,
        state,
        Position::start(anchor),
        Start::fixed(&fixed),
        Some(&closes),
        (host, true),
        steps,
        (max_len, fold),
        None,
    )
}

/// Records a *function trace*: from the entry of `func` (the frame is the callee's, at the
/// start of its entry block, holding the arguments) to its `return` in that frame, which
/// ends the trace in `loop`, its snapshot the state at the `return` (the interpreter makes
/// the `return` when the trace exits there). A call of `func` inside is recursive: it stays
/// a `call`. `host`, `max_len` and `fold` are as for [`record`].
///
/// A function that loops itself ([`Program::loops_itself`]), not a dispatch function
/// ([`Program::portal`]), has an *entry trace*, as PyPy's
/// entry bridges: it ends, as a bridge does, at the first jump of its frame to the anchor
/// of a loop's trace ([`Host::ends`]), and the call goes on in that loop's code; going round
/// a loop that has no trace yet abandons it.
///
/// The parameters in `greens` (a dispatch function's, [`Program::portal`]) are constants
/// in the trace, as a loop's greens are: the trace is that of one function of the
/// interpreted program.
#[allow(clippy::too_many_arguments)]
pub fn record_function(
    program: &Program,
    state: &mut State,
    func: FuncId,
    greens: &[Slot],
    host: &mut dyn Host,
    steps: &mut Steps,
    max_len: usize,
    fold: bool,
) -> Result<Recorded, RuntimeError> {
    let fixed: Vec<(Slot, Value)> = greens
        .iter()
        .filter_map(|g| state.frame[g.index()].clone().map(|v| (*g, v)))
        .collect();
    // A dispatch function's loop is its trace's: it runs to the `return`.
    let entry = program.loops_itself(func) && program.portal(func).is_none();
    let ends: Option<Ends> = match entry {
        true => None,
        false => Some(&|_, _| None),
    };
    record_from(
        program,
        state,
        Position::start(program.func(func).entry),
        Start::fixed(&fixed),
        ends,
        (host, true),
        steps,
        (max_len, fold),
        Some(func),
    )
}

/// Records a *bridge*: a trace from `start` (where a guard that fails often resumes) to
/// the first jump whose target `host` accepts ([`Host::ends`]: the anchor of a trace,
/// which the bridge then enters). The variables in `fixed` are constants in the bridge (for
/// a bridge specialized on one value of a promoted variable). The trace ends in `loop`,
/// whose snapshot is the state at the target; a bridge does not loop by itself. `ends`
/// names the variables whose values the target's trace takes as constants (its greens):
/// the bridge guards them. `host` makes the calls not inlined (what it says is traced is
/// not asked).
///
/// The bridge starts by reading the variables in `inherited` (those the guard's snapshot
/// gives), then makes the arrays of `rebuilt` (those the guard's snapshot holds virtual,
/// which the bridge makes again as the trace made them): they count as written, so that
/// every snapshot of the bridge is complete, as the guard's is (`crate::resume`). `max_len`
/// and `fold` are as for [`record`].
///
/// A guard inside calls the trace inlined resumes inside them: `calls` are those of its
/// snapshot, whose frames `state` holds (the innermost is `state.frame`). The bridge
/// starts inside them as the trace was: it reads every variable of their frames
/// (`input`s of [`crate::resume::in_call`] slots), `inherited` being its own frame's,
/// and goes on in its own frame when they return.
#[allow(clippy::too_many_arguments)]
pub fn record_bridge(
    program: &Program,
    state: &mut State,
    start: Position,
    fixed: &[(Slot, Value)],
    (inherited, rebuilt, calls): (&[Slot], &[Rebuilt], &[Inlined]),
    host: &mut dyn Host,
    steps: &mut Steps,
    max_len: usize,
    fold: bool,
    function: Option<FuncId>,
) -> Result<Recorded, RuntimeError> {
    record_from(
        program,
        state,
        start,
        Start {
            fixed,
            inherited,
            rebuilt,
            calls,
        },
        None,
        (host, false),
        steps,
        (max_len, fold),
        function,
    )
}

/// What recording a statement leaves to the walk through the blocks.
enum Then {
    /// On to the next statement, once the trace's length is checked.
    Next,
    /// On to the next statement without checking the length: a promotion of a constant,
    /// left out, counts towards it (in [`Recorder::folded`]) from the next check on.
    NextUnchecked,
    /// On at the start of this block: the entry of an inlined call.
    Enter(BlockId),
    /// The program stopped inside a call not inlined, printing this value.
    Stopped(Value),
}

/// The error `kind` raised by the statement or terminator at `at`, as the interpreter
/// raises it there.
fn fail(program: &Program, at: Position) -> impl Fn(ErrorKind) -> RuntimeError + '_ {
    move |kind| RuntimeError {
        kind,
        block: program.block(at.block).label_at(at.inst).to_string(),
    }
}

/// The position after the statement at `at`.
fn after(at: Position) -> Position {
    Position {
        block: at.block,
        inst: at.inst + 1,
    }
}

/// What a recording starts with besides its position: the variables it holds as constants,
/// and for a bridge those it reads (of its own frame), the arrays it makes again and the
/// inlined calls it starts in ([`record_bridge`]).
struct Start<'a> {
    fixed: &'a [(Slot, Value)],
    inherited: &'a [Slot],
    rebuilt: &'a [Rebuilt],
    calls: &'a [Inlined],
}

impl<'a> Start<'a> {
    /// A loop's or a function's trace, `fixed` constants.
    fn fixed(fixed: &'a [(Slot, Value)]) -> Start<'a> {
        Start {
            fixed,
            inherited: &[],
            rebuilt: &[],
            calls: &[],
        }
    }
}

/// Records from `start` until a jump that `ends` accepts, or (for a trace of `function`) its
/// `return` ([`record`], [`record_bridge`], [`record_function`]): each statement by
/// [`Recorder::record_stmt`], each terminator by [`Recorder::record_terminator`].
#[allow(clippy::too_many_arguments)]
fn record_from(
    program: &Program,
    state: &mut State,
    start: Position,
    Start {
        fixed,
        inherited,
        rebuilt,
        calls,
    }: Start,
    ends: Option<Ends>,
    (host, asks): (&mut dyn Host, bool),
    steps: &mut Steps,
    (max_len, fold): (usize, bool),
    function: Option<FuncId>,
) -> Result<Recorded, RuntimeError> {
    let mut r = Recorder::new(program, fixed, fold);
    r.function = function;
    let own = calls.first().map_or(start, |c| c.ret);
    r.frame_func = function.or_else(|| program.func_of(own.block));
    r.returns = function.is_some() || ends.is_none();
    r.stops_at_loops = asks && function.is_some() && ends.is_none();
    // The trace's own frame, below the inlined calls' in the state.
    let frame = match calls.len() {
        0 => &state.frame,
        n => &state.calls[state.calls.len() - n].frame,
    };
    for slot in inherited {
        let v = r.var(frame, *slot, start);
        r.written[slot.index()] = Some(v);
    }
    for v in rebuilt {
        r.rebuild(v, start);
    }
    if !calls.is_empty() {
        r.enter_calls(state, calls, start);
    }
    let mut from = start;
    'blocks: loop {
        let block = program.block(from.block);
        for (i, stmt) in block.insts.iter().enumerate().skip(from.inst) {
            let at = Position {
                block: from.block,
                inst: i,
            };
            match r.record_stmt(state, steps, &mut *host, stmt, at)? {
                Then::Next if r.len() > max_len => {
                    return Ok(Recorded::Aborted {
                        reason: AbortReason::TooLong(max_len),
                        at: after(at),
                    })
                }
                Then::Next | Then::NextUnchecked => {}
                Then::Enter(entry) => {
                    from = Position::start(entry);
                    continue 'blocks;
                }
                Then::Stopped(v) => return Ok(Recorded::Stopped(v)),
            }
        }
        // A bridge's end is the host's to say.
        let host = &*host;
        let traced = |block: BlockId, frame: &Frame| asks && host.traced(block, frame);
        let hosted = |target: BlockId, frame: &Frame| host.ends(target, frame);
        let ends = ends.unwrap_or(&hosted);
        match r.record_terminator(state, steps, from.block, ends, &traced)? {
            ControlFlow::Continue(next) => from = next,
            ControlFlow::Break(recorded) => return Ok(recorded),
        }
    }
}

impl<'p> Recorder<'p> {
    /// Starts a bridge inside the inlined `calls` of its guard's snapshot, which `state`
    /// holds, at `start`: each call's frame is read whole (`input`s of
    /// [`crate::resume::in_call`] slots), and the recording goes on in the innermost one.
    fn enter_calls(&mut self, state: &State, calls: &[Inlined], start: Position) {
        let n = calls.len();
        let below = state.calls.len() - n;
        // Per depth, the variables written: the trace's own frame's so far, then each
        // call's, read whole.
        let mut frames = vec![std::mem::take(&mut self.written)];
        for (k, call) in calls.iter().enumerate() {
            let depth = k + 1;
            let frame = match state.calls.get(below + depth) {
                Some(c) => &c.frame,
                None => &state.frame,
            };
            let mut written = vec![None; self.program.frame_size()];
            for (slot, _) in &call.entries {
                let value = frame[slot.index()].as_ref();
                let v = self.input(crate::resume::in_call(depth, *slot), value, start);
                written[slot.index()] = Some(v);
            }
            frames.push(written);
        }
        self.written = frames.pop().expect("at least one call");
        // The caller at each depth: it goes on where the call it made returns, in the
        // function of the frame above (the innermost's is where the bridge starts).
        for ((k, call), written) in calls.iter().enumerate().zip(frames) {
            let callee = calls.get(k + 1).map_or(start, |c| c.ret);
            let func = self
                .program
                .func_of(callee.block)
                .expect("a call's frame is a function's");
            self.callers.push(Caller {
                written,
                ret: call.ret,
                dst: call.dst,
                func,
            });
        }
        self.deepest = n;
    }

    /// An `input` of `slot` at `pos`, of the type of `value` (none: the variable was never
    /// written, and reading it fails).
    fn input(&mut self, slot: Slot, value: Option<&Value>, pos: Position) -> Opnd {
        let snap = self.snapshot(pos);
        let ty = value.map_or(Ty::Int, Ty::of);
        self.insts.push(Inst {
            kind: Kind::Input(slot),
            args: vec![],
            snap: Some(snap),
            origin: None,
            ty,
        });
        Opnd::Ref(Ref(self.insts.len() as u32 - 1))
    }

    /// Makes the array `v` at the start of a bridge, at `start`: an `array` of its length,
    /// and a `setitem` per element that is not 0 (none of them takes an operation of the
    /// program, and none can fail: the length is a constant within
    /// [`crate::opt::virtuals::MAX_LEN`], each index one within it), which the variables
    /// holding it then hold.
    fn rebuild(&mut self, v: &Rebuilt, start: Position) {
        let len = Opnd::Const(Value::Int(v.fields.len() as i64));
        let snap = self.snapshot(start);
        let zero = Opnd::Const(Value::Int(0));
        let args = vec![len, zero.clone()];
        let a = Opnd::Ref(self.emit(Kind::Op(Op::Array), args, Some(snap), start, Ty::Array));
        for (k, field) in v.fields.iter().enumerate() {
            let value = match field {
                Element::Const(c) => Opnd::Const(c.clone()),
                Element::Var(slot) => self.written[slot.index()]
                    .clone()
                    .expect("an element's variable is given"),
            };
            if value == zero {
                continue;
            }
            let snap = self.snapshot(start);
            let args = vec![a.clone(), Opnd::Const(Value::Int(k as i64)), value];
            self.emit(Kind::SetItem, args, Some(snap), start, Ty::None);
        }
        for slot in &v.slots {
            self.written[slot.index()] = Some(a.clone());
        }
    }

    /// A recorder at the start of a trace of `program`, the variables in `fixed` constants.
    fn new(program: &'p Program, fixed: &[(Slot, Value)], fold: bool) -> Recorder<'p> {
        let n = program.frame_size();
        let mut greens = vec![None; n];
        for (slot, v) in fixed {
            greens[slot.index()] = Some(v.clone());
        }
        Recorder {
            program,
            insts: Vec::new(),
            snaps: Vec::new(),
            written: vec![None; n],
            callers: Vec::new(),
            deepest: 0,
            inputs: vec![None; n],
            greens,
            cost: 0,
            arrays: Vec::new(),
            apart: Vec::new(),
            merges: Vec::new(),
            fold: fold && program.has_jit_hints(),
            folded: 0,
            function: None,
            frame_func: None,
            returns: false,
            stops_at_loops: false,
        }
    }

    /// Counts one step of the program, the statement or terminator at `at`, as the
    /// interpreter does: where none is left, the interpreter's `MaxSteps` error there.
    #[inline]
    fn charge(&self, steps: &mut Steps, at: Position) -> Result<(), RuntimeError> {
        if steps.left == 0 {
            let limit = steps.limit.unwrap_or(0);
            return Err(fail(self.program, at)(ErrorKind::MaxSteps(limit)));
        }
        steps.left -= 1;
        Ok(())
    }

    /// Executes statement `stmt`, at `at`, and records what it did.
    fn record_stmt(
        &mut self,
        state: &mut State,
        steps: &mut Steps,
        host: &mut dyn Host,
        stmt: &Stmt,
        at: Position,
    ) -> Result<Then, RuntimeError> {
        match stmt {
            Stmt::Call { func, .. } if !self.program.func(*func).elidable => {
                return self.record_inlined_call(state, steps, host, stmt, at);
            }
            Stmt::Call { dst, func, args } => {
                self.record_elidable_call(state, steps, *dst, *func, args, at)?
            }
            Stmt::Op1 { .. } | Stmt::Op2 { .. } => self.record_operation(state, steps, stmt, at)?,
            Stmt::SetItem { .. } => self.record_array_store(state, steps, stmt, at)?,
            Stmt::Print(a) => self.record_output(state, steps, stmt, Kind::Print, a, at)?,
            Stmt::Putchar(a) => self.record_output(state, steps, stmt, Kind::Putchar, a, at)?,
            Stmt::Getchar(dst) => self.record_getchar(state, steps, stmt, *dst, at)?,
            Stmt::Promote(slot) => return Ok(self.record_promote(state, *slot, at)),
            Stmt::MergePoint(greens) => self.record_merge_point(state, greens, at.block),
            Stmt::CanEnterJit => {}
        }
        Ok(Then::Next)
    }

    /// A call of a function that is not `@elidable`, inlined: the callee's statements are
    /// recorded where the call is, in a frame of their own, and its `return` goes back to
    /// the caller's ([`Caller`]). A recursive call, or one nested deeper than
    /// [`MAX_INLINE_DEPTH`], is recorded as a `call` instead ([`Recorder::record_call`]).
    fn record_inlined_call(
        &mut self,
        state: &mut State,
        steps: &mut Steps,
        host: &mut dyn Host,
        stmt: &Stmt,
        at: Position,
    ) -> Result<Then, RuntimeError> {
        let Stmt::Call { dst, func, args } = stmt else {
            unreachable!("an inlined call is a call")
        };
        // A recursive call, or one nested too deep, stays a call: its function's trace, or
        // the traces of the loops it runs, make it.
        let frames = (self.frame_func == Some(*func)) as usize
            + self.callers.iter().filter(|c| c.func == *func).count();
        let unrolls = self.program.portal(*func).is_none() && !self.program.runs_loops(*func);
        let kept = frames >= if unrolls { RECURSION_UNROLL } else { 1 }
            || self.callers.len() >= MAX_INLINE_DEPTH;
        if kept {
            return self.record_call(state, (steps, host), *dst, *func, args, at);
        }
        self.charge(steps, at)?;
        let operands: Vec<Opnd> = args
            .iter()
            .map(|a| self.operand(&state.frame, a, at))
            .collect();
        let entry =
            match interp::effect(self.program, state, stmt, at).map_err(fail(self.program, at))? {
                interp::Effected::Enter(entry) => entry,
                interp::Effected::Done => unreachable!("a call enters its function"),
            };
        self.cost += 1;
        let mut callee = vec![None; self.program.frame_size()];
        for (p, o) in self.program.func(*func).params.iter().zip(operands) {
            callee[p.index()] = Some(o);
        }
        self.callers.push(Caller {
            written: std::mem::replace(&mut self.written, callee),
            ret: after(at),
            dst: *dst,
            func: *func,
        });
        self.deepest = self.deepest.max(self.callers.len());
        Ok(Then::Enter(entry))
    }

    /// A call not inlined: made here, by the interpreter, on the state's frames, input and
    /// output, and recorded as one instruction, `call`, with the operations it took. Its
    /// snapshot is the state after the call, its variable aside (`Kind::Call`). A
    /// `print_and_stop` inside it ends the recording with the program.
    fn record_call(
        &mut self,
        state: &mut State,
        (steps, host): (&mut Steps, &mut dyn Host),
        dst: Slot,
        func: FuncId,
        args: &[Operand],
        at: Position,
    ) -> Result<Then, RuntimeError> {
        let (values, mut opnds, depth) = self.call_arguments(state, steps, args, at)?;
        let before = steps.left;
        let result = match host.call(state, func, values, depth, steps)? {
            interp::Exit::Return(v) => v,
            interp::Exit::Stop(v) => return Ok(Then::Stopped(v)),
            interp::Exit::Hot(_) | interp::Exit::Called(_) => {
                unreachable!("a call's monitor never takes over")
            }
        };
        let took = before - steps.left;
        self.cost += 1 + took;
        let snap = self.snapshot(after(at));
        opnds.push(Opnd::Const(Value::Int(took as i64)));
        let ty = Ty::of(&result);
        state.frame[dst.index()] = Some(result);
        let v = self.emit(Kind::Call(func), opnds, Some(snap), at, ty);
        self.written[dst.index()] = Some(Opnd::Ref(v));
        Ok(Then::Next)
    }

    /// The call statement at `at`, of `args`, counted as one step: the arguments' values
    /// and operands, and how many calls wait for the one it makes; the interpreter's error
    /// where an argument was never written or no call more fits under the depth limit.
    fn call_arguments(
        &mut self,
        state: &State,
        steps: &mut Steps,
        args: &[Operand],
        at: Position,
    ) -> Result<(Vec<Value>, Vec<Opnd>, usize), RuntimeError> {
        self.charge(steps, at)?;
        let values = args
            .iter()
            .map(|a| interp::operand(self.program, &state.frame, a).cloned())
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail(self.program, at))?;
        let opnds: Vec<Opnd> = args
            .iter()
            .map(|a| self.operand(&state.frame, a, at))
            .collect();
        let depth = state.depth + state.calls.len();
        if depth >= MAX_CALL_DEPTH {
            return Err(fail(self.program, at)(ErrorKind::CallDepth));
        }
        Ok((values, opnds, depth))
    }

    /// A call of an `@elidable` function: made here, by the interpreter (or found in the
    /// memo), and recorded as one operation, `call_pure`, holding the result it gave and the
    /// steps it took (SPEC §4). Its result is a constant where its arguments are (the
    /// optimizer then drops the call).
    fn record_elidable_call(
        &mut self,
        state: &mut State,
        steps: &mut Steps,
        dst: Slot,
        func: FuncId,
        args: &[Operand],
        at: Position,
    ) -> Result<(), RuntimeError> {
        let (values, mut opnds, depth) = self.call_arguments(state, steps, args, at)?;
        let folds = self.folds(Kind::CallPure(func), &opnds);
        let snap = self.snapshot(at);
        let (result, took) = self.call_elidable(state, steps, func, values, depth)?;
        let ty = Ty::of(&result);
        opnds.push(Opnd::Const(result.clone()));
        opnds.push(Opnd::Const(Value::Int(took as i64)));
        state.frame[dst.index()] = Some(result.clone());
        let v = self.emit(Kind::CallPure(func), opnds, Some(snap), at, ty);
        self.written[dst.index()] = Some(if folds {
            Opnd::Const(result)
        } else {
            Opnd::Ref(v)
        });
        self.cost += 1 + took;
        Ok(())
    }

    /// The result of elidable function `func` on `values`, called from `depth` calls deep,
    /// and the steps the call took, now charged: the memo's, if it holds the call
    /// (`State::memo`), or the interpreter's, then noted in the memo.
    fn call_elidable(
        &self,
        state: &mut State,
        steps: &mut Steps,
        func: FuncId,
        values: Vec<Value>,
        depth: usize,
    ) -> Result<(Value, u64), RuntimeError> {
        let known = state
            .memo(steps)
            .and_then(|m| m.get(func, values.clone(), steps.left));
        if let Some((result, took)) = known {
            steps.left -= took;
            return Ok((result, took));
        }
        let before = steps.left;
        let result = interp::call_function(self.program, func, values.clone(), depth, steps)?
            .expect("an elidable function returns");
        let took = before - steps.left;
        if let Some(memo) = state.memo(steps) {
            memo.insert(func, values, result.clone(), took);
        }
        Ok((result, took))
    }

    /// An operation (`readlist` of an array is a load of its own kind, `getitem`), done now
    /// and recorded, or only done where [`Recorder::folds`] says so, its result a constant.
    fn record_operation(
        &mut self,
        state: &mut State,
        steps: &mut Steps,
        stmt: &Stmt,
        at: Position,
    ) -> Result<(), RuntimeError> {
        let (dst, op, operands) = stmt.operation().expect("an operation");
        self.charge(steps, at)?;
        let kind = match operands[0] {
            Operand::Var(a) if op == Op::Readlist && is_array(state.frame[a.index()].as_ref()) => {
                Kind::GetItem
            }
            _ => Kind::Op(op),
        };
        let args: Vec<Opnd> = operands
            .iter()
            .map(|o| self.operand(&state.frame, o, at))
            .collect();
        if let (Kind::GetItem, Operand::Var(a)) = (kind, &operands[0]) {
            self.tell_apart(&args[0], state.frame[a.index()].as_ref(), at);
        }
        let folds = self.folds(kind, &args);
        let snap = (kind.needs_snapshot() && !folds).then(|| self.snapshot(at));
        step(self.program, &mut state.frame, stmt).map_err(|stop| match stop {
            Interrupt::Error(e) => fail(self.program, at)(e),
            Interrupt::Effect => unreachable!("an operation has no effect"),
        })?;
        let result = state.frame[dst.index()]
            .as_ref()
            .expect("a result was written");
        self.folded += usize::from(folds);
        self.written[dst.index()] = Some(if folds {
            Opnd::Const(result.clone())
        } else {
            let ty = Ty::of(result);
            Opnd::Ref(self.emit(kind, args, snap, at, ty))
        });
        self.cost += 1;
        Ok(())
    }

    /// A store into an array, `a[i] = v`: `setitem`.
    fn record_array_store(
        &mut self,
        state: &mut State,
        steps: &mut Steps,
        stmt: &Stmt,
        at: Position,
    ) -> Result<(), RuntimeError> {
        let Stmt::SetItem {
            array,
            index,
            value,
        } = stmt
        else {
            unreachable!("an array store is a `SetItem`")
        };
        self.charge(steps, at)?;
        let args = vec![
            self.var(&state.frame, *array, at),
            self.operand(&state.frame, index, at),
            self.operand(&state.frame, value, at),
        ];
        self.tell_apart(&args[0], state.frame[array.index()].as_ref(), at);
        let snap = self.snapshot(at);
        step(self.program, &mut state.frame, stmt).map_err(|stop| match stop {
            Interrupt::Error(e) => fail(self.program, at)(e),
            Interrupt::Effect => unreachable!("a store has no effect"),
        })?;
        self.emit(Kind::SetItem, args, Some(snap), at, Ty::None);
        self.cost += 1;
        Ok(())
    }

    /// `print` or `putchar` of operand `a`, instruction `kind`: done now, and by every run of
    /// the trace.
    fn record_output(
        &mut self,
        state: &mut State,
        steps: &mut Steps,
        stmt: &Stmt,
        kind: Kind,
        a: &Operand,
        at: Position,
    ) -> Result<(), RuntimeError> {
        self.charge(steps, at)?;
        let args = vec![self.operand(&state.frame, a, at)];
        let snap = kind.needs_snapshot().then(|| self.snapshot(at));
        interp::effect(self.program, state, stmt, at).map_err(fail(self.program, at))?;
        self.emit(kind, args, snap, at, Ty::None);
        self.cost += 1;
        Ok(())
    }

    /// `getchar` into `dst`: done now, and by every run of the trace.
    fn record_getchar(
        &mut self,
        state: &mut State,
        steps: &mut Steps,
        stmt: &Stmt,
        dst: Slot,
        at: Position,
    ) -> Result<(), RuntimeError> {
        self.charge(steps, at)?;
        interp::effect(self.program, state, stmt, at).map_err(fail(self.program, at))?;
        let v = self.emit(Kind::Getchar, vec![], None, at, Ty::Int);
        self.written[dst.index()] = Some(Opnd::Ref(v));
        self.cost += 1;
        Ok(())
    }

    /// `promote(slot)`: `guard_value` of the value it holds now, resuming after the
    /// promotion. A variable never written has no value to freeze: the interpreter ignores
    /// the promotion, and so does the recorder. A constant (in a program with the hints) is
    /// what it is: no guard.
    fn record_promote(&mut self, state: &State, slot: Slot, at: Position) -> Then {
        let Some(value) = state.frame[slot.index()].clone() else {
            return Then::Next;
        };
        let v = self.var(&state.frame, slot, at);
        if self.constant(&v) {
            self.folded += 1;
            return Then::NextUnchecked;
        }
        self.guard_value(v, value, after(at), at);
        Then::Next
    }

    /// `jit_merge_point` in the trace's own frame: the green variables' values now, where
    /// the trace has come ([`Trace::merges`]).
    fn record_merge_point(&mut self, state: &State, greens: &[Slot], block: BlockId) {
        if !self.callers.is_empty() {
            return;
        }
        let greens = greens
            .iter()
            .map(|g| state.frame[g.index()].clone().unwrap_or(Value::Int(0)))
            .collect();
        let at = self.insts.len();
        self.merges.push(Merge { block, at, greens });
    }

    /// `guard_value(v, value)` at `at`, resuming at `resume`.
    fn guard_value(&mut self, v: Opnd, value: Value, resume: Position, at: Position) {
        let snap = self.snapshot(resume);
        self.emit(
            Kind::GuardValue,
            vec![v, Opnd::Const(value)],
            Some(snap),
            at,
            Ty::None,
        );
    }

    /// Executes the terminator of block `id` and records it: a `return` from an inlined
    /// call goes back to its caller; a branch becomes a guard that the same way is taken;
    /// a jump that `ends` accepts closes the trace ([`Recorder::close`]), and one to where
    /// `traced` says another trace is anchored ends the recording. Where the recording goes
    /// on, the position it goes on at.
    fn record_terminator(
        &mut self,
        state: &mut State,
        steps: &mut Steps,
        id: BlockId,
        ends: &dyn Fn(BlockId, &Frame) -> Option<Vec<Slot>>,
        traced: &dyn Fn(BlockId, &Frame) -> bool,
    ) -> Result<ControlFlow<Recorded, Position>, RuntimeError> {
        let program = self.program;
        let block = program.block(id);
        let at = Position {
            block: id,
            inst: block.insts.len(),
        };
        if let (Terminator::Return(_), true, true, Some(_)) = (
            &block.term,
            self.callers.is_empty(),
            self.returns,
            self.frame_func,
        ) {
            return Ok(ControlFlow::Break(self.finish(state, at)));
        }
        let untraced = match &block.term {
            Terminator::Return(_) if self.callers.is_empty() => {
                Some("a `return` from the function the trace runs in")
            }
            Terminator::If { cond, .. } if is_array(state.frame[cond.index()].as_ref()) => {
                Some("a branch on an array")
            }
            _ => None,
        };
        if let Some(what) = untraced {
            let reason = AbortReason::NotTraced(what);
            return Ok(ControlFlow::Break(Recorded::Aborted { reason, at }));
        }
        self.charge(steps, at)?;
        if let Terminator::Return(arg) = &block.term {
            return self
                .record_return(state, arg, at)
                .map(ControlFlow::Continue);
        }
        // The guard's operand is read before the terminator counts as done: an `input`
        // exiting here resumes at the terminator, which the interpreter then runs itself.
        let guarded = match &block.term {
            Terminator::If { cond, then, els } if then.target != els.target => {
                Some((self.var(&state.frame, *cond, at), None))
            }
            Terminator::Promote { var, .. } => state.frame[var.index()]
                .clone()
                .map(|value| (self.var(&state.frame, *var, at), Some(value))),
            _ => None,
        };
        let flow = branch(program, &state.frame, &block.term).map_err(fail(program, at))?;
        self.cost += 1;
        let (next, back_edge) = match flow {
            Flow::Stop(v) => return Ok(ControlFlow::Break(Recorded::Stopped(v))),
            Flow::Jump(j) => (j.target, j.back_edge),
            Flow::Return(_) => unreachable!("a `return` stops the recording before it runs"),
        };
        self.guard_branch(&block.term, guarded, next, at);
        if let Some(greens) = ends(next, &state.frame).filter(|_| self.callers.is_empty()) {
            return Ok(ControlFlow::Break(self.close(state, next, greens)));
        }
        if self.callers.is_empty() && traced(next, &state.frame) {
            return Ok(ControlFlow::Break(Recorded::Aborted {
                reason: AbortReason::InnerLoop,
                at: Position::start(next),
            }));
        }
        if self.callers.is_empty() && self.stops_at_loops && back_edge {
            return Ok(ControlFlow::Break(Recorded::Aborted {
                reason: AbortReason::UntracedLoop,
                at: Position::start(next),
            }));
        }
        Ok(ControlFlow::Continue(Position::start(next)))
    }

    /// `return arg` at `at`, the end of an inlined call: its caller's variable holds the
    /// result, and the recording goes on where the caller does.
    fn record_return(
        &mut self,
        state: &mut State,
        arg: &Operand,
        at: Position,
    ) -> Result<Position, RuntimeError> {
        let result = self.operand(&state.frame, arg, at);
        let term = &self.program.block(at.block).term;
        let value =
            match branch(self.program, &state.frame, term).map_err(fail(self.program, at))? {
                Flow::Return(v) => v,
                _ => unreachable!("`return` returns"),
            };
        let ret = state.leave(value).expect("an inlined call has a caller");
        let caller = self.callers.pop().expect("checked by the caller");
        self.written = caller.written;
        self.written[caller.dst.index()] = Some(result);
        self.cost += 1;
        Ok(ret)
    }

    /// The guard that the branch `term` at `at` takes the way to `next` it took now: for
    /// `if`, `guard_true` or `guard_false` of its condition, resuming at the way not taken;
    /// for `promote`, `guard_value` of its variable, resuming at its target. `guarded` is
    /// the operand read (with the value promoted); a constant one (in a program with the
    /// hints) holds in every run of the trace: no guard.
    fn guard_branch(
        &mut self,
        term: &Terminator,
        guarded: Option<(Opnd, Option<Value>)>,
        next: BlockId,
        at: Position,
    ) {
        let guarded = match guarded {
            Some((v, _)) if self.constant(&v) => {
                self.folded += 1;
                None
            }
            guarded => guarded,
        };
        match (term, guarded) {
            (Terminator::If { then, els, .. }, Some((c, None))) => {
                let (kind, other) = if next == then.target {
                    (Kind::GuardTrue, els.target)
                } else {
                    (Kind::GuardFalse, then.target)
                };
                let snap = self.snapshot(Position::start(other));
                self.emit(kind, vec![c], Some(snap), at, Ty::None);
            }
            (Terminator::Promote { target, .. }, Some((v, Some(value)))) => {
                self.guard_value(v, value, Position::start(target.target), at);
            }
            _ => {}
        }
    }

    /// A function trace (or a bridge of one) at the `return` at `at` of its own frame: it
    /// ends in `loop`, its snapshot the state there, where the interpreter makes the
    /// `return` (not counted here). Its anchor is the function's entry.
    fn finish(&mut self, state: &State, at: Position) -> Recorded {
        // The value returned is in the end's snapshot, read if the trace never did: the
        // code returns it from a register (`backend::lower`'s `function_end`).
        if let Terminator::Return(Operand::Var(slot)) = &self.program.block(at.block).term {
            let v = self.var(&state.frame, *slot, at);
            self.written[slot.index()] = Some(v);
        }
        let snap = self.snapshot(at);
        let func = self.frame_func.expect("only a function's frame returns");
        // A loop's bridge that ends so says, as a function trace's does.
        self.function = Some(func);
        self.end(snap, self.program.func(func).entry)
    }

    /// The trace, closed by a jump to `next`, whose trace takes the variables `greens` as
    /// the constants they are now: the loop (or the bridge) goes there only while they
    /// still have these values (the articles' `jit_merge_point` promotes its greens). The
    /// checker puts the merge point first in its block: the guards stand for it.
    fn close(&mut self, state: &State, next: BlockId, greens: Vec<Slot>) -> Recorded {
        let at = Position::start(next);
        for g in greens {
            let Some(value) = state.frame[g.index()].clone() else {
                continue;
            };
            let v = self.var(&state.frame, g, at);
            if v.as_const() != Some(&value) {
                self.guard_value(v, value, at, at);
            }
        }
        let snap = self.snapshot(at);
        self.end(snap, next)
    }

    /// The trace, ending in `loop` with snapshot `snap`, anchored at `anchor`.
    fn end(&mut self, snap: SnapId, anchor: BlockId) -> Recorded {
        self.insts.push(Inst {
            kind: Kind::Loop,
            args: vec![],
            snap: Some(snap),
            origin: None,
            ty: Ty::None,
        });
        Recorded::Loop(Trace {
            anchor,
            insts: std::mem::take(&mut self.insts),
            snaps: std::mem::take(&mut self.snaps),
            calls: self.deepest,
            known: Vec::new(),
            merges: std::mem::take(&mut self.merges),
            carries_elements: false,
            heap_from_preamble: false,
            function: self.function,
        })
    }
}
