//! The trace IR: a linear list of instructions in SSA form, with snapshots.
//!
//! A trace is what one iteration of a hot loop did, as straight-line code. Each instruction
//! that produces a value defines the SSA value named by its index ([`Ref`]); operands are
//! such refs or constants ([`Opnd`]). Control flow has become guards: a guard checks that
//! the path recorded is the path taken, and when it is not, the trace *exits*.
//!
//! ## Snapshots and resume variables
//!
//! Every instruction that can exit (the guards, and every operation that can fail or, in
//! machine code, overflow) refers to a [`Snapshot`]: the position to resume the interpreter
//! at (a block and a statement index) and, for every variable the iteration has written (or
//! the optimizer knows), the operand that holds its value. These are the articles' *resume
//! variables*. An exit writes them into the frame and the interpreter continues at the
//! position, exactly as if it had run all along. A variable not in a snapshot still holds,
//! in the frame, the value it had when the iteration began.
//!
//! An operation that would fail exits *before* itself: the interpreter then executes it and
//! raises the error, with its message and block, so no executor needs to know how to report
//! an error.
//!
//! ## Iterations
//!
//! In the trace as recorded, the frame is the state between iterations: [`Kind::Input`]
//! reads a variable's value at the start of the iteration, and [`Kind::Loop`], the last
//! instruction, writes the iteration's changed variables back (its snapshot) and starts the
//! next iteration. The optimizer's loop peeling later turns these into loop-carried SSA
//! values.
//!
//! ```text
//! # trace 0: loop at power_rec
//! [res:int, x:int, y:int]
//! v0:int = input res  @power_rec:0 #0 []
//! v1:int = input x  @power_rec:0 #0 []
//! v2:int = mul v0, v1  @power_rec:0 #0 []
//! v3:int = input y  @power_rec:1 #1 [res=v2]
//! v4:int = sub v3, 1  @power_rec:1 #1 [res=v2]
//! g5: guard_true v4  @power_done:0 #3 [res=v2, y=v4]
//! loop  @power_rec:0 #3 [res=v2, y=v4]
//! ```
//!
//! The first line lists the trace's inputs with their types; each value states its type
//! ([`Ty`]). `@L:i` is the resume position, `#n` how many flowgraph operations of the
//! iteration precede it (so that `--max-steps` counts exactly as the interpreter does), and
//! the brackets the resume variables ([`crate::resume`]).

use std::fmt;

use flowjit_runtime::{Op, Value};

use crate::lang::{BlockId, FuncId, Slot};
pub use crate::resume::Snapshot;
use crate::state::Position;

/// An SSA value: the index of the instruction that defines it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ref(pub u32);

impl Ref {
    /// The defining instruction's index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

/// A snapshot, as an index into [`Trace::snaps`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SnapId(pub u32);

impl SnapId {
    /// The snapshot's index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// An operand: an SSA value or a constant.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Opnd {
    /// The value defined by this instruction.
    Ref(Ref),
    /// A constant.
    Const(Value),
}

impl Opnd {
    /// The operand's type, its defining instruction's among `insts` (`none` for a ref
    /// past them).
    pub fn ty(&self, insts: &[Inst]) -> Ty {
        match self {
            Opnd::Ref(r) => insts.get(r.index()).map_or(Ty::None, |d| d.ty),
            Opnd::Const(v) => Ty::of(v),
        }
    }

    /// The ref, if the operand is one.
    pub fn as_ref(&self) -> Option<Ref> {
        match self {
            Opnd::Ref(r) => Some(*r),
            Opnd::Const(_) => None,
        }
    }

    /// The constant, if the operand is one.
    pub fn as_const(&self) -> Option<&Value> {
        match self {
            Opnd::Const(v) => Some(v),
            Opnd::Ref(_) => None,
        }
    }
}

/// What an instruction does. Every property of an instruction kind (its name, operands,
/// result type, effect, whether it needs a snapshot, whether it commutes) is answered by
/// [`Kind::info`], one table that printers, the parser, the verifier, the trace interpreter,
/// the passes and the backend all ask: a kind cannot be added without saying its effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The value of a variable at the start of the iteration. Exits (to let the
    /// interpreter raise `key_not_found`) when the variable was never written.
    Input(Slot),
    /// A primitive operation on its operands.
    Op(Op),
    /// Exits unless its operand is not the integer 0.
    GuardTrue,
    /// Exits unless its operand is the integer 0.
    GuardFalse,
    /// Exits unless its first operand equals its second (a constant): a promotion.
    GuardValue,
    /// The end of the iteration. In a trace as recorded (no `loop_start`), it writes its
    /// snapshot's variables back and starts over. In a peeled trace, its operands are the
    /// next values of the `param`s, and the loop goes on after `loop_start`.
    Loop,
    /// The end of the preamble of a peeled trace: its operands are the first values of the
    /// `param`s that follow it. Its snapshot is the state at the end of the preamble.
    LoopStart,
    /// A loop-carried value of a peeled trace: the value of a variable at the start of each
    /// iteration of the loop. The `param`s follow `loop_start` directly.
    Param(Slot),
    /// `param_item(a, i)`: a loop-carried value of a peeled trace that is no variable's:
    /// element `i` of array `a` at the start of each iteration, which the loop keeps in a
    /// register instead of loading it (`opt::heap::carry`). Its operands are defined before
    /// `loop_start` (they do not change), and it follows the `param`s. Reads nothing: at
    /// `loop_start` and at `loop` the element holds its operand there.
    ParamItem,
    /// `getitem(a, i)`: element `i` of array `a`, a load from memory (`readlist` of an
    /// array). Exits before itself when `i` is not an index of `a`, and checks the type of
    /// the element it reads.
    GetItem,
    /// `setitem(a, i, v)`: stores `v` as element `i` of array `a`. Exits before itself when
    /// `i` is not an index of `a`.
    SetItem,
    /// `print(v)`: writes `v` and a newline to the output.
    Print,
    /// `putchar(v)`: writes the byte `v`. Exits before itself when `v` is not a byte.
    Putchar,
    /// `getchar()`: the next byte of input, -1 at its end.
    Getchar,
    /// A call of an `@elidable` function: its operands are the arguments and, last, the
    /// result the call gave when recorded and the operations it took (two constants, see
    /// [`call_pure_parts`]). By the function's promise, the same arguments give the same
    /// result: with constant arguments the call *is* that result. The operations count in
    /// the snapshots after it as if the call were made; a call that is made takes from the
    /// budget what it used beyond them (or gives back what it did not use).
    /// Exits before itself when the call fails (the interpreter then makes it, and raises
    /// the error) or when `--max-steps` cannot hold it.
    CallPure(FuncId),
    /// A call the trace does not inline (a recursive call, or one nested deeper than the
    /// recorder inlines): its operands are the arguments and, last, the operations the call
    /// took when recorded (a constant, see [`call_parts`]). The callee runs in a frame of
    /// its own, as the interpreter runs it, and may read and write arrays and do input and
    /// output; the trace goes on with its result. Its snapshot is the state *after* the
    /// call, but for the caller's variable receiving the result: the trace exits there,
    /// that variable set to the result, when the result is not of the type recorded or the
    /// call took more operations than the budget holds for the rest of the iteration. An
    /// error inside the call, or `print_and_stop`, ends the run as it ends the interpreter's.
    Call(FuncId),
    /// `virtual(n, init)`: an array of `n` elements, each `init`, that the trace makes and
    /// never lets escape, so that no executor allocates it (allocation removal,
    /// `opt::virtuals`). Nothing reads it: its elements became the operands that were
    /// stored into it, and its length a constant. A snapshot that holds it lists its
    /// elements at that point ([`crate::resume::Virtual`]); an exit through that snapshot
    /// builds it (LuaJIT's sunk allocations, PyPy's virtuals).
    Virtual,
}

/// What an instruction does besides computing its result: what the optimizer may do with
/// it (LuaJIT's IR modes, PyPy's effect info).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Nothing: the same operands give the same result (or the same exit), so it may be
    /// folded when its operands are known, merged with an equal one, and removed when
    /// unused and unable to exit.
    Pure,
    /// Reads the state the trace runs in (a variable of the frame, a loop parameter): not
    /// folded or merged by operands, removed by nobody.
    Read,
    /// Reads mutable memory: merged with an equal load only while no store, call or
    /// output can have changed what it reads.
    Load,
    /// Writes mutable memory: never removed, and it ends what earlier loads tell.
    Store,
    /// Allocates a new object: two are never merged; one nothing uses and nothing lets
    /// escape may be removed.
    Alloc,
    /// Calls a function, which may read and write memory and do input or output.
    Call,
    /// Reads input or writes output: never removed, merged or moved.
    Io,
    /// Checks that the path recorded is the path taken, and exits when not.
    Guard,
    /// Divides or ends the trace (`loop_start`, `loop`).
    Control,
}

/// The type of a value in a trace. Every value has one, known when the trace is recorded:
/// the optimizer and the backends read types from the trace alone, never from a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    /// No value (guards, `loop`, `loop_start`).
    None,
    /// An integer, of any size (machine code holds one that fits in 64 bits, and exits
    /// before an operation that would leave them).
    Int,
    /// An atom.
    Atom,
    /// A list.
    List,
    /// An array.
    Array,
}

impl Ty {
    /// The type of `value`.
    pub fn of(value: &Value) -> Ty {
        match value {
            Value::Int(_) | Value::Big(_) => Ty::Int,
            Value::Atom(_) => Ty::Atom,
            Value::List(_) => Ty::List,
            Value::Array(_) => Ty::Array,
        }
    }

    /// Whether `value` is of this type.
    pub fn admits(self, value: &Value) -> bool {
        Ty::of(value) == self
    }

    /// The name in the SSA text form (`int`, `atom`, `list`).
    pub fn name(self) -> &'static str {
        match self {
            Ty::None => "none",
            Ty::Int => "int",
            Ty::Atom => "atom",
            Ty::List => "list",
            Ty::Array => "array",
        }
    }

    /// The type named `name` in the SSA text form; `num`, an integer that machine code
    /// holds boxed (`print::ssa_held`), is an `int`.
    pub fn from_name(name: &str) -> Option<Ty> {
        if name == "num" {
            return Some(Ty::Int);
        }
        [Ty::Int, Ty::Atom, Ty::List, Ty::Array]
            .into_iter()
            .find(|t| t.name() == name)
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How an instruction kind types its result: one column of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Res {
    /// No result.
    None,
    /// Always of this type.
    Fixed(Ty),
    /// The type of its operand (`same`).
    Operand,
    /// The type of the value it read when recorded, which it checks: it exits when it
    /// reads a value of another type (`input` reads a variable of the frame, `readlist` an
    /// element of a list). These are the trace's type guards, as LuaJIT's guarded loads:
    /// what a trace cannot know about the state it reads, it checks where it reads it.
    Checked,
    /// The type of its first value, given by `loop_start`, which `loop` keeps (`param`).
    Carried,
}

/// When an instruction needs a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Snap {
    /// Never: it cannot exit.
    Never,
    /// When recorded: it can fail on some operands (the optimizer removes the snapshot where
    /// it proves the operands are not such).
    CanFail,
    /// Always: it exits, or (`loop`, `loop_start`) its snapshot is the state it stands for.
    Always,
}

/// The properties of an instruction kind: one row of the table of trace operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info {
    /// The mnemonic in the SSA text form.
    pub name: &'static str,
    /// How many operands it takes; `None` for one per `param` (`loop`, `loop_start`) or
    /// one per argument and one more (`call_pure`).
    pub arity: Option<usize>,
    /// How it types its result.
    pub result: Res,
    /// What it does besides computing its result.
    pub effect: Effect,
    /// When it needs a snapshot.
    pub snapshot: Snap,
    /// Whether its two operands may be swapped.
    pub commutative: bool,
}

impl Kind {
    /// The row of the table for this kind.
    pub fn info(self) -> Info {
        let row = |name, arity, result, effect, snapshot| Info {
            name,
            arity,
            result,
            effect,
            snapshot,
            commutative: false,
        };
        use Effect::*;
        match self {
            // row(name, operands, result type, effect, snapshot)
            Kind::Input(_) => row("input", Some(0), Res::Checked, Read, Snap::Always),
            Kind::Param(_) => row("param", Some(0), Res::Carried, Read, Snap::Never),
            Kind::ParamItem => row("param_item", Some(2), Res::Carried, Read, Snap::Never),
            Kind::GuardTrue => row("guard_true", Some(1), Res::None, Guard, Snap::Always),
            Kind::GuardFalse => row("guard_false", Some(1), Res::None, Guard, Snap::Always),
            Kind::GuardValue => row("guard_value", Some(2), Res::None, Guard, Snap::Always),
            Kind::LoopStart => row("loop_start", None, Res::None, Control, Snap::Always),
            Kind::Loop => row("loop", None, Res::None, Control, Snap::Always),
            Kind::GetItem => row("getitem", Some(2), Res::Checked, Load, Snap::CanFail),
            Kind::SetItem => row("setitem", Some(3), Res::None, Store, Snap::CanFail),
            Kind::Print => row("print", Some(1), Res::None, Io, Snap::Never),
            Kind::Putchar => row("putchar", Some(1), Res::None, Io, Snap::CanFail),
            Kind::Getchar => row("getchar", Some(0), Res::Fixed(Ty::Int), Io, Snap::Never),
            // Pure by the function's promise (SPEC.md §2.3): folded by its recorded result,
            // merged with an equal call, and it changes nothing the optimizer knows.
            Kind::CallPure(_) => row("call_pure", None, Res::Checked, Pure, Snap::CanFail),
            // It may read and write any array and do input and output: the optimizer
            // forgets what it knows of memory, and never moves, merges or removes it.
            Kind::Call(_) => row("call", None, Res::Checked, Call, Snap::Always),
            Kind::Virtual => row(
                "virtual",
                Some(2),
                Res::Fixed(Ty::Array),
                Alloc,
                Snap::Never,
            ),
            Kind::Op(op) => Info {
                name: op.name(),
                arity: Some(op.arity()),
                result: match op {
                    Op::Same => Res::Operand,
                    Op::Readlist => Res::Checked,
                    Op::ToList => Res::Fixed(Ty::List),
                    Op::Array | Op::ToArray => Res::Fixed(Ty::Array),
                    _ => Res::Fixed(Ty::Int),
                },
                // The operations on integers, atoms and lists are pure; some can fail.
                // `readlist` of an array is `getitem`, a load; `len` of an array is pure (an
                // array's length never changes); `array` and `toarray` allocate, and
                // `tolist` reads an array's elements.
                effect: if op.allocates() {
                    Alloc
                } else if op == Op::ToList {
                    Load
                } else {
                    Pure
                },
                snapshot: if can_fail(op) {
                    Snap::CanFail
                } else {
                    Snap::Never
                },
                commutative: op.is_commutative(),
            },
        }
    }

    /// The mnemonic in the SSA text form.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// The kind spelled `name` in the SSA text form (`input`, `param` and `call_pure` need
    /// their slot or function separately).
    pub fn from_name(name: &str) -> Option<Kind> {
        Some(match name {
            "getitem" => Kind::GetItem,
            "setitem" => Kind::SetItem,
            "print" => Kind::Print,
            "putchar" => Kind::Putchar,
            "getchar" => Kind::Getchar,
            "guard_true" => Kind::GuardTrue,
            "guard_false" => Kind::GuardFalse,
            "guard_value" => Kind::GuardValue,
            "loop" => Kind::Loop,
            "loop_start" => Kind::LoopStart,
            "virtual" => Kind::Virtual,
            "param_item" => Kind::ParamItem,
            _ => Kind::Op(Op::from_name(name)?),
        })
    }

    /// How many operands the instruction takes; `None` for `loop` and `loop_start`, which
    /// take one per `param`, and for `call_pure`, one per argument and one more.
    pub fn arity(self) -> Option<usize> {
        self.info().arity
    }

    /// Whether the instruction defines an SSA value.
    pub fn has_result(self) -> bool {
        self.info().result != Res::None
    }

    /// What the instruction does besides computing its result.
    pub fn effect(self) -> Effect {
        self.info().effect
    }

    /// Whether the instruction is pure (see [`Effect::Pure`]).
    pub fn is_pure(self) -> bool {
        self.effect() == Effect::Pure
    }

    /// Whether the instruction is a loop-carried value of a peeled trace (`param` or
    /// `param_item`): one of those that follow `loop_start`, one per operand of
    /// `loop_start` and of `loop`.
    pub fn is_param(self) -> bool {
        matches!(self, Kind::Param(_) | Kind::ParamItem)
    }

    /// Whether the instruction is a guard.
    pub fn is_guard(self) -> bool {
        self.effect() == Effect::Guard
    }

    /// Whether the instruction needs a snapshot when recorded: guards, `loop` and
    /// `loop_start`, inputs (which may find a variable never written) and operations that
    /// can fail. The optimizer removes the snapshot of an operation it proves cannot fail.
    pub fn needs_snapshot(self) -> bool {
        self.info().snapshot != Snap::Never
    }

    /// Whether the instruction must always keep its snapshot (it is not one that only can
    /// fail).
    pub fn always_has_snapshot(self) -> bool {
        self.info().snapshot == Snap::Always
    }
}

/// A `call_pure`'s operands in their parts: the arguments, the result the call gave when
/// recorded, and how many operations it took then (the verifier checks the form).
pub fn call_pure_parts(args: &[Opnd]) -> (&[Opnd], &Opnd, u64) {
    let [args @ .., result, cost] = args else {
        unreachable!("the verifier checks call_pure's operands")
    };
    let cost = match cost {
        Opnd::Const(Value::Int(n)) => *n as u64,
        _ => unreachable!("the verifier checks call_pure's operands"),
    };
    (args, result, cost)
}

/// A `call`'s operands in their parts: the arguments, and how many operations the call
/// took when recorded (the verifier checks the form).
pub fn call_parts(args: &[Opnd]) -> (&[Opnd], u64) {
    match args {
        [args @ .., Opnd::Const(Value::Int(n))] => (args, *n as u64),
        _ => unreachable!("the verifier checks call's operands"),
    }
}

/// Whether an operation can fail (or, in machine code, leave 64 bits) on some arguments.
/// `same`, `eq` and `ne` accept anything.
pub fn can_fail(op: Op) -> bool {
    !matches!(op, Op::Same | Op::Eq | Op::Ne)
}

/// One instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inst {
    /// What it does.
    pub kind: Kind,
    /// Its operands (`kind.arity()` of them).
    pub args: Vec<Opnd>,
    /// Where to resume if it exits.
    pub snap: Option<SnapId>,
    /// The flowgraph statement or terminator it was recorded from, for the articles'
    /// notation.
    pub origin: Option<Position>,
    /// The type of its result ([`Ty::None`] for none), as [`Info::result`] says.
    pub ty: Ty,
}

/// A trace: one iteration of a loop, from its anchor back to its anchor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// The label the trace starts at and loops back to.
    pub anchor: BlockId,
    /// The instructions; the last is [`Kind::Loop`].
    pub insts: Vec<Inst>,
    /// The snapshots the instructions refer to.
    pub snaps: Vec<Snapshot>,
    /// How deep the calls it inlined nest (0 for none): a trace is entered only where that
    /// many more calls fit under the depth limit, as the interpreter's calls would.
    pub calls: usize,
    /// What is known of variables where the trace starts: each holds an integer in its
    /// interval. A bridge learns it from its guard (the intervals the parent trace knew
    /// there for the values the guard's snapshot gives); a root trace knows nothing.
    pub known: Vec<(Slot, KnownRange)>,
    /// The merge points (`jit_merge_point`) the recording passed, with the greens' values
    /// there: where each instruction of the interpreted program begins (PyPy's
    /// `debug_merge_point`), which `flowjit report` marks. Only a recording has them: the
    /// optimizer's traces have none.
    pub merges: Vec<Merge>,
    /// Whether the peeled loop carries array elements from one iteration to the next
    /// (`opt::heap::carry`, `opt::sink`): its body assumes at its header that each such
    /// element holds a value it has, which may be a `param_item`, another `param` whose
    /// value it always shares, or a constant once the optimizer finds it fixed. Only the
    /// preamble establishes that, so no other jump enters the header (`opt::header`).
    pub carries_elements: bool,
    /// Whether the peeled loop's body found an array element where the preamble left it
    /// (`opt::heap`: a load of the loop became the preamble's value, or a store of the
    /// loop was dropped as storing what the element already held). The loop then counts
    /// on the element holding that value at its header, whether or not it reads the value
    /// afterwards (a guard on it may have gone as the preamble's repeated): a way into the
    /// header that stores into an array must go through the preamble, which loads again.
    pub heap_from_preamble: bool,
    /// For a *function trace* (and each bridge of one): the function whose call it runs,
    /// from the function's entry (the trace's anchor) to its `return`. Its `loop` is that
    /// `return`, in the trace's own frame: the trace does not go round, and exits there, its
    /// snapshot at the `return`, whose value is the call's result.
    pub function: Option<FuncId>,
}

/// A merge point a recording passed ([`Trace::merges`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merge {
    /// The block it starts.
    pub block: crate::lang::BlockId,
    /// The index of the first instruction recorded after it.
    pub at: usize,
    /// The green variables' values there, in the order `jit_merge_point` names them.
    pub greens: Vec<flowjit_runtime::Value>,
}

/// An interval of integers, `lo..=hi` (`None`: unbounded on that side), that a variable is
/// known to lie in where a trace starts ([`Trace::known`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownRange {
    /// The least value, if bounded below.
    pub lo: Option<i64>,
    /// The greatest value, if bounded above.
    pub hi: Option<i64>,
}

impl Trace {
    /// Where the trace ends: the position of its `loop`'s snapshot (the start of the anchor
    /// it goes to, or a function trace's `return`).
    pub fn end(&self) -> crate::state::Position {
        let last = self.insts.last().expect("a trace ends in loop");
        self.snap_of(last).expect("a loop has a snapshot").pos
    }

    /// What the trace is, as dumps, statistics and the report name it: a `loop`, or a
    /// `function` trace.
    pub fn what(&self) -> &'static str {
        match self.function {
            Some(_) => "function",
            None => "loop",
        }
    }

    /// The snapshot of instruction `inst`.
    pub fn snap_of(&self, inst: &Inst) -> Option<&Snapshot> {
        inst.snap.map(|s| &self.snaps[s.index()])
    }

    /// The index of the `loop_start` of a peeled trace.
    pub fn loop_start(&self) -> Option<usize> {
        self.insts.iter().position(|i| i.kind == Kind::LoopStart)
    }

    /// How many flowgraph operations one whole iteration stands for.
    pub fn iteration_cost(&self) -> u64 {
        self.insts
            .last()
            .and_then(|i| self.snap_of(i))
            .map_or(0, |s| s.cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kind() -> Vec<Kind> {
        let mut kinds = vec![
            Kind::Input(Slot(0)),
            Kind::Param(Slot(0)),
            Kind::ParamItem,
            Kind::GuardTrue,
            Kind::GuardFalse,
            Kind::GuardValue,
            Kind::LoopStart,
            Kind::Loop,
            Kind::GetItem,
            Kind::SetItem,
            Kind::Print,
            Kind::Putchar,
            Kind::Getchar,
            Kind::CallPure(FuncId(0)),
        ];
        kinds.extend(Op::ALL.iter().map(|op| Kind::Op(*op)));
        kinds
    }

    #[test]
    fn the_table_is_consistent() {
        for kind in every_kind() {
            let info = kind.info();
            // What exits needs a snapshot; only guards, control, stores and output have no
            // result.
            if kind.is_guard() || info.effect == Effect::Control {
                assert_eq!(info.snapshot, Snap::Always, "{kind:?}");
                assert_eq!(info.result, Res::None, "{kind:?}");
            } else if !matches!(info.effect, Effect::Store | Effect::Io) {
                assert_ne!(info.result, Res::None, "{kind:?}");
            }
            // Only what reads memory the trace cannot know checks what it reads.
            if info.result == Res::Checked {
                assert!(matches!(
                    info.effect,
                    Effect::Read | Effect::Load | Effect::Pure
                ));
            }
            // Only two-operand kinds commute.
            assert!(!info.commutative || info.arity == Some(2), "{kind:?}");
            // Names read back (`input`, `param` and `call_pure` are parsed apart).
            if !matches!(kind, Kind::Input(_) | Kind::Param(_) | Kind::CallPure(_)) {
                assert_eq!(Kind::from_name(info.name), Some(kind));
            }
        }
    }

    #[test]
    fn only_operations_that_cannot_fail_go_without_a_snapshot() {
        let never: Vec<&str> = every_kind()
            .into_iter()
            .filter(|k| !k.needs_snapshot())
            .map(Kind::name)
            .collect();
        assert_eq!(
            never,
            [
                "param",
                "param_item",
                "print",
                "getchar",
                "same",
                "eq",
                "ne"
            ]
        );
    }
}
