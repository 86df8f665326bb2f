//! Arrays, calls and output in generated programs.
//!
//! A structured program ([`super::GenProgram`]) has one array, `arr`, of [`ARRAY_LEN`]
//! elements, and a second name for it, `ali`: a piece of heap statements ([`HeapOp`]) stores
//! into one and reads through the other, makes `arr` a fresh array (so that the two differ
//! from then on) or makes them the same again, stores the array into itself (which prints as
//! `[...]`), compares them, and reads and writes at indexes that leave the array now and
//! then (`k = i % 6` on five elements), or at constant indexes. A small array, `box`, is made
//! anew ([`HeapOp::Box`]), read at constant indexes, made to hold `arr`, printed or aliased
//! by `ali` (so that allocation removal keeps it virtual, across iterations too, or lets it
//! escape, in one branch or every time). A pointer `wp` walks `tape` the way a Brainfuck
//! program's does, between loops ([`HeapOp::Walk`]) and in a loop of its own
//! ([`HeapOp::Sweep`]), off its ends now and then. It prints variables and the array, writes bytes
//! (some of which are not bytes: `x & 511`), and reads its input; so output comes before
//! errors, and each executor must have written all of it.
//!
//! The program's functions ([`GenFunc`]) are straight-line code on their own `x0..x4`,
//! a recursion as deep as an argument says (once or twice per level, taking its value past
//! 64 bits, returning an atom, dividing by zero or printing where it reaches a depth only
//! some calls reach), or an `@elidable` function that memoizes a computation in a table the
//! caller gives it and nobody else writes:
//!
//! ```text
//! @elidable
//! func f2(k, t):
//!     v = t[k]             c = v == 'none'      if c goto f2_compute else goto f2_known
//! f2_known:    return v
//! f2_compute:  x0 = k ...  x3 = x1 * 3  ...     t[k] = x3     pad = k + 1 ...   return x3
//! ```
//!
//! A few statements that cannot fail may follow the store, and the result may be taken past
//! 64 bits before it (`x3 = x3 ^ 1180591620717411303424`); the key may stay the same for a
//! few calls in a row (`k = i // 2`). Then a loop's trace may be recorded on a call that
//! finds its entry and later make calls that compute: an executor that makes the call on
//! the interpreter's behalf and gives up after the store (it would need more of
//! `--max-steps` than it can spare) must leave the table as it found it, or the
//! interpreter, making the call after it, takes the shorter path (`interp::call_undoable`).

use std::fmt::Write as _;

use flowjit_runtime::Op;
use proptest::prelude::*;

use super::flow::{Emitter, GenArg, GenOp, VARS};

/// How many elements `arr` has.
pub const ARRAY_LEN: i64 = 5;

/// The length of `tape`, which [`HeapOp::Walk`] walks.
pub const TAPE_LEN: i64 = 48;

/// The deepest recursion a generated recursive function makes.
const MAX_DEPTH: i64 = 12;

/// An index into the array.
#[derive(Clone, Debug)]
pub enum Index {
    /// `counter % m`: in range when `m` is at most [`ARRAY_LEN`], out of it now and then
    /// when larger.
    Counter(i64),
    /// `x{n} % m` (a type error when `x{n}` is an atom).
    Var(usize, i64),
    /// The argument itself: negative, huge, an atom...
    Raw(GenArg),
    /// A constant: an element a trace knows (allocation removal keeps an array whose every
    /// index is one out of memory); out of range when not below [`ARRAY_LEN`].
    Const(i64),
}

/// One heap, call or input/output statement.
#[derive(Clone, Debug)]
pub enum HeapOp {
    /// `arr[k] = value` (through `ali` when `alias`).
    Store {
        /// Where.
        index: Index,
        /// What.
        value: GenArg,
        /// Whether it stores through `ali`.
        alias: bool,
    },
    /// `x{dst} = ali[k]` (through `arr` when not `alias`).
    Load {
        /// The variable assigned.
        dst: usize,
        /// Where.
        index: Index,
        /// Whether it reads through `ali`.
        alias: bool,
    },
    /// `arr = array(ARRAY_LEN, init)`: from now on `ali` is another array.
    Fresh(GenArg),
    /// `ali = arr`.
    Realias,
    /// `arr[k] = ali`: the array holds itself when the two are the same.
    SelfStore(Index),
    /// `x{dst} = arr == ali`.
    Identity(usize),
    /// `x{dst} = len(tolist(ali))`, or `len(ali)`.
    Length(usize, bool),
    /// `t = arr[k]`, `t = t + delta`, `t = t & 255`, `arr[k] = t`: a Brainfuck cell's
    /// step, whose elements stay bytes when every store is one (the whole-program compiler
    /// then drops the overflow checks it proves needless).
    Step {
        /// Where.
        index: Index,
        /// By how much.
        delta: i64,
    },
    /// `t = arr[k]` (or, with `list`, `l = tolist(arr)`, `t = l[k]`), `t = (t +
    /// 6148914691236517205) % (2^64 + 13)`, `arr[k] = t`, `x{dst} = t % 1000003`: an
    /// element that goes past 64 bits and back, up and down, every few passes, which
    /// machine code reads, computes and stores boxed once it is compiled again for it
    /// (`Segment::wide`), and a variable that stays small.
    Wrap {
        /// The variable assigned.
        dst: usize,
        /// Where.
        index: Index,
        /// Whether the element is read from a list of the array's elements.
        list: bool,
    },
    /// `k = counter % m`, `x{dst} = arr[k]`, `e = k + c`, `t = arr[e]`, `arr[e] = x{dst}`,
    /// `x{dst} = x{dst} + t`: elements around one index (a Brainfuck tape's cells around
    /// its pointer), whose bounds machine code checks once for both, at the first access
    /// (`backend::lower`, `check_index`). With `m + c` past the array's length or `c`
    /// negative, the second access leaves the array, maybe in machine code already.
    Neighbors {
        /// The variable assigned.
        dst: usize,
        /// The modulus of the index.
        m: i64,
        /// The offset of the second access.
        c: i64,
    },
    /// `k = counter % (ARRAY_LEN - 2)`, `x{dst} = x{dst} + arr[k] + arr[k + 2]`, then
    /// `arr = array(len, 1)` on the pass where the counter is `at` (a branch): the array
    /// becomes shorter than the offsets the loop reads around `k`, and the machine code
    /// entered again at the next pass must find it so (`backend::lower`, `check_index`,
    /// whose one comparison covers both ends).
    Shrink {
        /// The variable assigned.
        dst: usize,
        /// On which pass.
        at: i64,
        /// The new length.
        len: i64,
    },
    /// `q = wp + c`, `t = tape[q]`, `x{dst} = tape[wp]`, `tape[q] = (t + x{dst}) & 255`,
    /// then `wp = wp + step` on one pass in `every`: a pointer that walks a tape of
    /// integers ([`TAPE_LEN`], `wp` starts in its middle) the way a Brainfuck program's
    /// does, and leaves it at the end its farther offset looks towards (`c` and `step` of
    /// one sign). Between two loops such a piece is a bridge compiled on its own, which
    /// the quick backend emits on x86-64 (`backend::quick`): its one bounds check for both
    /// offsets must check each end.
    Walk {
        /// The variable assigned.
        dst: usize,
        /// The farther offset.
        c: i64,
        /// 1 or -1.
        step: i64,
        /// How often the pointer moves.
        every: i64,
    },
    /// A loop of its own, as a Brainfuck loop at a pointer only the run knows: up to eight
    /// times (`n = (getchar() + counter % times) & 7`, plus one: a byte of input, so that
    /// the partial evaluator counts neither the times round nor, after them, `wp`),
    /// `x{dst} = tape[wp]` (printed when `print`),
    /// `tape[wp + c] = (tape[wp + c] + x{dst} + 1) & 255`, `wp = wp + step`. The loop's block is its own back edge's target, where a
    /// whole program's compiler checks both offsets once on the way in and nothing round
    /// the loop when `step` is 0 (`opt::program::bounds`), and each time round otherwise,
    /// until the walk leaves the tape in the middle of an iteration, after its output.
    Sweep {
        /// The variable the first read assigns.
        dst: usize,
        /// The other cell's offset.
        c: i64,
        /// How far the pointer moves each time round.
        step: i64,
        /// Bounds how many times round.
        times: i64,
        /// Whether each time round prints what it read first.
        print: bool,
    },
    /// `x{dst} = tolist(arr) == tolist(ali)`: two lists compared by their elements, equal
    /// when the arrays hold the same, whether or not they are the same array.
    SameElements(usize),
    /// `print(x{n})`, or `print(arr)` for `None`.
    Print(Option<usize>),
    /// `t = x{n} & mask`, `putchar(t)`: not a byte when `mask` lets more through.
    Putchar(usize, i64),
    /// `a = wp + 2c`, `b = wp + c`, `x{dst} = tape[a] + tape[b]` (`c` negative when not
    /// `high`), then `wp = ...` near an end of 64 bits (`i64::MAX - 1`, or `i64::MIN + 1`)
    /// on the pass where `counter == at`: the next pass computes the offsets past 64 bits
    /// and reads the tape there, an error whose message holds the index. Machine code
    /// checks the bounds of the first read in place of the overflow check of the run of
    /// offsets (`Lower::checked_by_access`): an exit that showed a sum that wrapped would
    /// make the message another index.
    FarPointer {
        /// The variable assigned.
        dst: usize,
        /// The nearer offset, 1 to 3 (negated when not `high`).
        c: i64,
        /// On which pass.
        at: i64,
        /// Near the greatest integer, or the least.
        high: bool,
    },
    /// `x{dst} = getchar()`.
    Getchar(usize),
    /// `arr[k] = value` at a constant `k`, on one pass in `every` (`w = counter % every`,
    /// a branch): a store on a rare path that writes no variable, so that its bridge may
    /// jump straight back into a loop whose common path only loads from `arr`.
    RareStore {
        /// Where.
        k: i64,
        /// What.
        value: GenArg,
        /// How rare.
        every: i64,
    },
    /// `sp = sp + 1`, `arr[sp] = value`, `x{dst} = arr[sp]`, `sp = sp - 1` (then `ali[sp]`
    /// when `under`): a push and a pop, as a stack machine's, around a stack pointer
    /// every iteration gives back unchanged (`sp` starts at 1). The optimizer then keeps
    /// the elements in registers across iterations and stores them only when the loop
    /// exits (`opt::sink`).
    Push {
        /// The variable the pop assigns.
        dst: usize,
        /// What is pushed.
        value: GenArg,
        /// Whether the element under the pushed one is read through `ali` too.
        under: bool,
    },
    /// `box = array(2, init)`, `box[1] = value`: a new small array, as a dynamic
    /// language's boxed value, which allocation removal keeps out of memory while nothing
    /// lets it escape (and carries across the back edge as its elements).
    Box {
        /// Both elements at first.
        init: GenArg,
        /// The second element.
        value: GenArg,
    },
    /// `x{dst} = box[k]`, `k` a constant (2 is out of range).
    Unbox(usize, i64),
    /// `box = array(2, 0)`, `box[1] = x{v}`, then on the passes where the counter is a
    /// multiple of `every` (a branch) `x{dst} = box[k] + x{v}`: the bridge from the guard
    /// that fails there starts with the box virtual in its snapshot, its element the value
    /// of a variable, and makes it again itself (`trace::Rebuilt`).
    RareUnbox {
        /// The variable assigned.
        dst: usize,
        /// The variable stored.
        v: usize,
        /// The element read.
        k: i64,
        /// How often.
        every: i64,
    },
    /// `box[k] = arr`: the box holds the array (an array in an array; out of range at 2).
    BoxHolds(i64),
    /// `arr[k] = box`: the array holds the box, which may hold it (a cycle, which a new
    /// box or a new array then drops: the cycle collector must reclaim it, and only it).
    Knot(Index),
    /// `print(box)`, or `ali = box` (then `ali` is the box: loads, stores and comparisons
    /// through it let the box escape, or not).
    BoxEscapes(bool),
    /// `x{dst} = call` function number `func` (modulo how many there are) with two
    /// arguments.
    Call {
        /// The variable assigned.
        dst: usize,
        /// Which function.
        func: usize,
        /// Its arguments (a memoizing function takes the first and its table).
        args: [GenArg; 2],
        /// Whether the arguments of an elidable call are promoted first: a trace then
        /// knows them as constants and the call becomes the result it gave when recorded
        /// (which must still count the operations the call takes).
        promote: bool,
        /// Whether a function with a [`Fork`], if there is one, is called instead.
        forked: bool,
    },
}

/// The branch a [`GenFunc::Plain`] starts with: on `x0 < at` (which changes once in a
/// loop counting down) or on `x0 % at` (a rare way every `at`-th call), to the function's
/// statements or to `ops`, which return `x{result}`.
#[derive(Clone, Debug)]
pub struct Fork {
    /// The bound or the modulus.
    pub at: i64,
    /// Whether the branch is on `x0 % at` (else on `x0 < at`).
    pub modulo: bool,
    /// The other way's statements.
    pub ops: Vec<GenOp>,
    /// The variable the other way returns.
    pub result: usize,
}

/// A generated function, called with two arguments.
#[derive(Clone, Debug)]
pub enum GenFunc {
    /// `func fN(x0, x1)`: `x2..x4` set to constants, straight-line statements (the
    /// counter is `x0`), then `return x{result}`; or, with a `fork`, a branch on `x0`
    /// first, to those statements or to others: a loop's trace inlines the call, and the
    /// guard inside it that starts failing gets a bridge that starts in the call's frame.
    Plain {
        /// The statements.
        ops: Vec<GenOp>,
        /// The variable returned.
        result: usize,
        /// The branch, if any.
        fork: Option<Fork>,
    },
    /// `func fN(n, acc)`: `acc op n` down to `n = 0`, by recursion (a trace makes the
    /// recursive call as a `call`); called with `n = arg % depth`.
    Recursive {
        /// The bound on the depth.
        depth: i64,
        /// How `acc` changes.
        op: Op,
        /// Whether each level calls itself a second time, on `n // 2`, with the first
        /// call's result (a tree of calls).
        twice: bool,
        /// What happens where `n` reaches `depth - 2` on its way down: only in calls
        /// started deep enough.
        rare: Rare,
        /// Whether each level makes its call in a loop, twice, adding each result to `acc`
        /// (instead of `twice`): the loop's trace makes the recursive call, and the calls
        /// machine code makes run that loop's code inside it, past 64 bits after a
        /// `Rare::Big` (code that holds them cannot be entered again while it runs).
        looped: bool,
    },
    /// `func fN(n, acc)`: builds a tree of arrays `[first, second, value]` by recursion
    /// (`fN_b`), a chain `depth` deep at most whose nodes have a leaf beside every third,
    /// then sums it by recursion (`fN_w`), reading the first and second elements, which
    /// are the integer 0 at a leaf and arrays elsewhere: a function trace's read finds
    /// another type than it was recorded with. Called with `n = arg % depth`.
    Walk {
        /// The bound on the depth.
        depth: i64,
        /// How the walk combines a node's value with its first child's sum.
        op: Op,
    },
    /// `func fN(n, acc)`: runs guest function 0 of `guest` on a stack-less interpreter,
    /// `fN_x(code, pc, a, d)`, whose guest calls are calls of itself (its merge point's
    /// greens, `code` and `pc`, are its parameters: a dispatch function, with a function
    /// trace per guest function, `Program::portal`), `n` calls deep at most; returns the
    /// guest's `a` plus `acc`. Called with `n = arg % depth`.
    Guest {
        /// The bound on the depth.
        depth: i64,
        /// The guest functions, each a list of operations, `ret` after them.
        guest: Vec<Vec<GuestOp>>,
    },
    /// `@elidable func fN(k, t)`: a computation on `k` memoized in `t` (`size` entries, all
    /// `'none'` at the start), called with `k = arg % size` and its own table.
    Memo {
        /// The table's size.
        size: i64,
        /// The computation (the counter is `k`).
        ops: Vec<GenOp>,
        /// The variable returned.
        result: usize,
        /// How many statements follow the store (`pad = k + 1`, which cannot fail and leaves
        /// the result alone).
        after: usize,
        /// Whether the result is taken past 64 bits before the store (machine code then holds
        /// it boxed and makes the call through its helper).
        wide: bool,
    },
}

/// An operation of a guest function ([`GenFunc::Guest`]) on its accumulator `a`.
#[derive(Clone, Copy, Debug)]
pub enum GuestOp {
    /// `call T` (guest function `T`, modulo their number): `a = a + T(a, d - 1)` while the
    /// depth `d` left is positive.
    Call(usize),
    /// `add K`.
    Add(i64),
    /// `mul K` (past 64 bits after a few).
    Mul(i64),
    /// `div K` (by 0: an error deep in the recursion).
    Div(i64),
}

/// What a recursive function does now and then ([`GenFunc::Recursive`]).
#[derive(Clone, Copy, Debug)]
pub enum Rare {
    /// Nothing.
    Nothing,
    /// `acc` leaves 64 bits (and the result with it).
    Big,
    /// The call returns an atom, which its callers return and compute with.
    Atom,
    /// A division by zero.
    Error,
    /// `print(acc)`.
    Print,
}

fn index() -> impl Strategy<Value = Index> {
    prop_oneof![
        6 => prop_oneof![3 => 1..=ARRAY_LEN, 1 => ARRAY_LEN + 1..ARRAY_LEN + 3].prop_map(Index::Counter),
        3 => (0..VARS, 1..=ARRAY_LEN + 1).prop_map(|(v, m)| Index::Var(v, m)),
        1 => super::flow::arg().prop_map(Index::Raw),
        4 => prop_oneof![6 => 0..ARRAY_LEN, 1 => Just(ARRAY_LEN)].prop_map(Index::Const),
    ]
}

fn value() -> impl Strategy<Value = GenArg> {
    prop_oneof![
        5 => (0..VARS).prop_map(GenArg::Var),
        2 => Just(GenArg::Counter),
        1 => super::flow::arg(),
    ]
}

/// A call of one of the program's functions (none when it has none).
pub fn call() -> impl Strategy<Value = HeapOp> {
    (
        0..VARS,
        0usize..3,
        value(),
        value(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(dst, func, a, b, promote, forked)| HeapOp::Call {
            dst,
            func,
            args: [a, b],
            promote,
            forked,
        })
}

/// Heap, call and input/output statements, as a piece of straight-line code.
pub fn heap_ops() -> impl Strategy<Value = Vec<HeapOp>> {
    let one = prop_oneof![
        5 => (index(), value(), any::<bool>())
            .prop_map(|(index, value, alias)| HeapOp::Store { index, value, alias }),
        5 => (0..VARS, index(), any::<bool>())
            .prop_map(|(dst, index, alias)| HeapOp::Load { dst, index, alias }),
        1 => value().prop_map(HeapOp::Fresh),
        1 => Just(HeapOp::Realias),
        1 => index().prop_map(HeapOp::SelfStore),
        1 => (0..VARS).prop_map(HeapOp::Identity),
        1 => (0..VARS, any::<bool>()).prop_map(|(d, l)| HeapOp::Length(d, l)),
        1 => (0..VARS).prop_map(HeapOp::SameElements),
        3 => (index(), prop_oneof![-3i64..4, Just(255), Just(-256)])
            .prop_map(|(index, delta)| HeapOp::Step { index, delta }),
        1 => (0..VARS, index(), any::<bool>())
            .prop_map(|(dst, index, list)| HeapOp::Wrap { dst, index, list }),
        5 => (0..VARS, 2..=ARRAY_LEN, prop_oneof![3 => 1i64..3, 1 => Just(-1)])
            .prop_map(|(dst, m, c)| HeapOp::Neighbors { dst, m, c }),
        1 => (0..VARS, prop_oneof![Just(60i64), Just(150), Just(400)], 0i64..3)
            .prop_map(|(dst, at, len)| HeapOp::Shrink { dst, at, len }),
        2 => walk(),
        1 => (0..VARS, 1i64..4, prop_oneof![Just(10i64), Just(40), Just(150)], any::<bool>())
            .prop_map(|(dst, c, at, high)| HeapOp::FarPointer { dst, c, at, high }),
        2 => (
            0..VARS,
            -3i64..4,
            prop_oneof![2 => Just(0i64), 1 => Just(1), 1 => Just(-1), 1 => Just(2)],
            1i64..9,
            any::<bool>()
        )
            .prop_map(|(dst, c, step, times, print)| HeapOp::Sweep { dst, c, step, times, print }),
        3 => prop_oneof![4 => (0..VARS).prop_map(Some), 1 => Just(None)].prop_map(HeapOp::Print),
        2 => (0..VARS, prop_oneof![4 => Just(127i64), 1 => Just(511)])
            .prop_map(|(v, m)| HeapOp::Putchar(v, m)),
        1 => (0..VARS).prop_map(HeapOp::Getchar),
        2 => (value(), value()).prop_map(|(init, value)| HeapOp::Box { init, value }),
        2 => (0..VARS, prop_oneof![6 => 0i64..2, 1 => Just(2)]).prop_map(|(d, k)| HeapOp::Unbox(d, k)),
        2 => (0..VARS, 0..VARS, 0i64..2, 2i64..9)
            .prop_map(|(dst, v, k, every)| HeapOp::RareUnbox { dst, v, k, every }),
        1 => prop_oneof![6 => 0i64..2, 1 => Just(2)].prop_map(HeapOp::BoxHolds),
        1 => any::<bool>().prop_map(HeapOp::BoxEscapes),
        3 => index().prop_map(HeapOp::Knot),
        3 => (0..VARS, value(), any::<bool>())
            .prop_map(|(dst, value, under)| HeapOp::Push { dst, value, under }),
        2 => (0..ARRAY_LEN, value(), 3i64..40)
            .prop_map(|(k, value, every)| HeapOp::RareStore { k, value, every }),
        5 => call(),
    ];
    // Reads and writes around an index alone: between two loops, such a piece is a
    // bridge of integer arithmetic and array accesses, which the quick backend emits
    // (`backend::quick`, its widened bounds checks).
    let alone = prop_oneof![
        (
            0..VARS,
            2..=ARRAY_LEN,
            prop_oneof![3 => 1i64..3, 1 => Just(-1)]
        )
            .prop_map(|(dst, m, c)| HeapOp::Neighbors { dst, m, c }),
        walk(),
    ];
    prop_oneof![
        4 => prop::collection::vec(one, 1..4),
        1 => alone.prop_map(|op| vec![op]),
    ]
}

/// A [`HeapOp::Walk`].
pub(super) fn walk() -> impl Strategy<Value = HeapOp> {
    (
        0..VARS,
        1i64..4,
        any::<bool>(),
        prop_oneof![1 => 1i64..3, 1 => 3i64..40],
    )
        .prop_map(|(dst, c, up, every)| {
            let step = if up { 1 } else { -1 };
            HeapOp::Walk {
                dst,
                c: c * step,
                step,
                every,
            }
        })
}

/// The functions of a program: none, or up to three.
pub fn funcs() -> impl Strategy<Value = Vec<GenFunc>> {
    let fork = (1i64..300, any::<bool>(), super::flow::hot_ops(), 0..VARS).prop_map(
        |(at, modulo, ops, result)| Fork {
            at: if modulo { at % 40 + 2 } else { at },
            modulo,
            ops,
            result,
        },
    );
    let plain = (
        super::flow::hot_ops(),
        0..VARS,
        prop::option::weighted(0.7, fork),
    )
        .prop_map(|(ops, result, fork)| GenFunc::Plain { ops, result, fork });
    let rare = prop_oneof![
        4 => Just(Rare::Nothing),
        1 => Just(Rare::Big),
        1 => Just(Rare::Atom),
        1 => Just(Rare::Error),
        1 => Just(Rare::Print),
    ];
    let recursive = (
        2..=MAX_DEPTH,
        prop::sample::select(vec![Op::Add, Op::Sub, Op::Xor]),
        any::<bool>(),
        rare,
        any::<bool>(),
    )
        .prop_map(|(depth, op, twice, rare, looped)| GenFunc::Recursive {
            // Two calls a level: 2^depth calls.
            depth: if looped { depth.min(7) } else { depth },
            op,
            twice,
            rare,
            looped,
        });
    // Small tables fill while the loop is interpreted and recorded; larger ones go on
    // filling in its trace and machine code, which then make the calls that compute.
    let size = prop_oneof![3 => 1i64..8, 1 => 8i64..48];
    let memo = (
        size,
        super::flow::hot_ops(),
        0..VARS,
        0..4usize,
        any::<bool>(),
    )
        .prop_map(|(size, ops, result, after, wide)| GenFunc::Memo {
            size,
            ops,
            result,
            after,
            wide,
        });
    let walk = (
        2..=MAX_DEPTH,
        prop::sample::select(vec![Op::Add, Op::Sub, Op::Xor]),
    )
        .prop_map(|(depth, op)| GenFunc::Walk { depth, op });
    let guest_op = prop_oneof![
        3 => (0..3usize).prop_map(GuestOp::Call),
        3 => (-5i64..6).prop_map(GuestOp::Add),
        1 => prop_oneof![3 => -3i64..4, 1 => Just(1i64 << 40)].prop_map(GuestOp::Mul),
        1 => prop_oneof![4 => 1i64..4, 1 => Just(0)].prop_map(GuestOp::Div),
    ];
    let guest = (
        2..=8i64,
        prop::collection::vec(prop::collection::vec(guest_op, 1..5), 1..4),
    )
        .prop_map(|(depth, guest)| GenFunc::Guest { depth, guest });
    prop_oneof![
        1 => Just(Vec::new()),
        3 => prop::collection::vec(
            prop_oneof![2 => plain, 1 => recursive, 1 => walk, 2 => memo, 2 => guest],
            1..4
        ),
    ]
}

/// The statements that make the array and the memo tables, for the first block.
pub fn prologue(funcs: &[GenFunc]) -> String {
    let mut s = format!(
        "    arr = array({ARRAY_LEN}, 0)\n    ali = arr\n    box = array(2, 0)\n    sp = 1\n    \
         tape = array({TAPE_LEN}, 0)\n    wp = {}\n",
        TAPE_LEN / 2
    );
    for (m, f) in funcs.iter().enumerate() {
        if let GenFunc::Memo { size, .. } = f {
            let _ = writeln!(s, "    memo{m} = array({size}, 'none')");
        }
    }
    s
}

impl Emitter {
    /// `name[k]` for index `index`, writing the statement that computes `k` first.
    /// A constant index is written as it is, so that a store at one writes no variable: a
    /// bridge that only stores can then jump straight into the loop (which must not rely on
    /// what it loaded before the bridge stored).
    fn index(&mut self, index: &Index, counter: &str) -> String {
        if let Index::Const(c) = index {
            return c.to_string();
        }
        let k = self.label("k");
        let _ = match index {
            Index::Counter(m) => writeln!(self.out, "    {k} = {counter} % {m}"),
            Index::Var(v, m) => writeln!(self.out, "    {k} = x{v} % {m}"),
            Index::Raw(a) => writeln!(self.out, "    {k} = {}", Self::arg(a, counter)),
            Index::Const(_) => unreachable!("written above"),
        };
        k
    }

    /// Writes the heap statements `ops` (the block is open), with `counter` for
    /// [`GenArg::Counter`]; `funcs` are the program's functions.
    pub(super) fn heap(&mut self, ops: &[HeapOp], counter: &str, funcs: &[GenFunc]) {
        for op in ops {
            match op {
                HeapOp::Store { .. }
                | HeapOp::Load { .. }
                | HeapOp::Step { .. }
                | HeapOp::Wrap { .. }
                | HeapOp::Neighbors { .. }
                | HeapOp::Shrink { .. }
                | HeapOp::RareStore { .. }
                | HeapOp::Push { .. } => self.element_op(op, counter),
                HeapOp::Fresh(_)
                | HeapOp::Realias
                | HeapOp::SelfStore(_)
                | HeapOp::Identity(_)
                | HeapOp::Length(..)
                | HeapOp::SameElements(_) => self.identity_op(op, counter),
                HeapOp::Walk { .. } | HeapOp::FarPointer { .. } | HeapOp::Sweep { .. } => {
                    self.tape_op(op, counter)
                }
                HeapOp::Box { .. }
                | HeapOp::Unbox(..)
                | HeapOp::RareUnbox { .. }
                | HeapOp::BoxHolds(_)
                | HeapOp::Knot(_)
                | HeapOp::BoxEscapes(_) => self.box_op(op, counter),
                HeapOp::Print(_) | HeapOp::Putchar(..) | HeapOp::Getchar(_) => self.io_op(op),
                HeapOp::Call {
                    dst,
                    func,
                    args,
                    promote,
                    forked,
                } => {
                    let forks = |f: &GenFunc| matches!(f, GenFunc::Plain { fork: Some(_), .. });
                    let func = (funcs.iter().position(forks))
                        .filter(|_| *forked)
                        .unwrap_or(*func);
                    self.call(*dst, func, args, *promote, counter, funcs)
                }
            }
        }
    }

    /// The loads and stores of elements of `arr` (or `ali`, the same array or not).
    fn element_op(&mut self, op: &HeapOp, counter: &str) {
        let array = |alias: bool| if alias { "ali" } else { "arr" };
        match op {
            HeapOp::Store {
                index,
                value,
                alias,
            } => {
                let k = self.index(index, counter);
                let v = Self::arg(value, counter);
                let _ = writeln!(self.out, "    {}[{k}] = {v}", array(*alias));
            }
            HeapOp::Load { dst, index, alias } => {
                let k = self.index(index, counter);
                let _ = writeln!(self.out, "    x{dst} = {}[{k}]", array(*alias));
            }
            HeapOp::Step { index, delta } => {
                let k = self.index(index, counter);
                let t = self.label("t");
                let _ = writeln!(
                    self.out,
                    "    {t} = arr[{k}]\n    {t} = {t} + {delta}\n    {t} = {t} & 255\n    arr[{k}] = {t}"
                );
            }
            HeapOp::Wrap { dst, index, list } => {
                let k = self.index(index, counter);
                let t = self.label("t");
                if *list {
                    let l = self.label("l");
                    let _ = writeln!(self.out, "    {l} = tolist(arr)\n    {t} = {l}[{k}]");
                } else {
                    let _ = writeln!(self.out, "    {t} = arr[{k}]");
                }
                let _ = writeln!(
                    self.out,
                    "    {t} = {t} + 6148914691236517205\n    {t} = {t} % 18446744073709551629\n    \
                     arr[{k}] = {t}\n    x{dst} = {t} % 1000003"
                );
            }
            HeapOp::Neighbors { dst, m, c } => {
                let (k, e, t) = (self.label("k"), self.label("k"), self.label("t"));
                let _ = writeln!(
                    self.out,
                    "    {k} = {counter} % {m}\n    x{dst} = arr[{k}]\n    {e} = {k} + {c}\n    \
                     {t} = arr[{e}]\n    arr[{e}] = x{dst}\n    x{dst} = x{dst} + {t}"
                );
            }
            HeapOp::Shrink { dst, at, len } => {
                let (k, e, t) = (self.label("k"), self.label("k"), self.label("t"));
                let (w, shrink, skip) = (self.label("w"), self.label("shrink"), self.label("skip"));
                let _ = writeln!(
                    self.out,
                    "    {k} = {counter} % {}\n    {t} = arr[{k}]\n    x{dst} = x{dst} + {t}\n    \
                     {e} = {k} + 2\n    {t} = arr[{e}]\n    x{dst} = x{dst} + {t}\n    \
                     {w} = {counter} == {at}\n    if {w} goto {shrink} else goto {skip}\n\
                     {shrink}:\n    arr = array({len}, 1)\n    goto {skip}\n{skip}:",
                    ARRAY_LEN - 2
                );
            }
            HeapOp::RareStore { k, value, every } => {
                let (w, store, skip) = (self.label("w"), self.label("store"), self.label("skip"));
                let v = Self::arg(value, counter);
                let _ = writeln!(
                    self.out,
                    "    {w} = {counter} % {every}\n    if {w} goto {skip} else goto {store}\n\
                     {store}:\n    arr[{k}] = {v}\n    goto {skip}\n{skip}:"
                );
            }
            HeapOp::Push { dst, value, under } => {
                let v = Self::arg(value, counter);
                let _ = writeln!(
                    self.out,
                    "    sp = sp + 1\n    arr[sp] = {v}\n    x{dst} = arr[sp]\n    sp = sp - 1"
                );
                if *under {
                    let _ = writeln!(self.out, "    x{dst} = ali[sp]");
                }
            }
            _ => unreachable!("element_op writes only its own operations"),
        }
    }

    /// The statements that make `arr` anew, alias it as `ali`, or compare the two.
    fn identity_op(&mut self, op: &HeapOp, counter: &str) {
        match op {
            HeapOp::Fresh(init) => {
                let init = Self::arg(init, counter);
                let _ = writeln!(self.out, "    arr = array({ARRAY_LEN}, {init})");
            }
            HeapOp::Realias => {
                let _ = writeln!(self.out, "    ali = arr");
            }
            HeapOp::SelfStore(index) => {
                let k = self.index(index, counter);
                let _ = writeln!(self.out, "    arr[{k}] = ali");
            }
            HeapOp::Identity(dst) => {
                let _ = writeln!(self.out, "    x{dst} = arr == ali");
            }
            HeapOp::Length(dst, through_list) => {
                if *through_list {
                    let l = self.label("l");
                    let _ = writeln!(self.out, "    {l} = tolist(ali)\n    x{dst} = len({l})");
                } else {
                    let _ = writeln!(self.out, "    x{dst} = len(ali)");
                }
            }
            HeapOp::SameElements(dst) => {
                let (l, m) = (self.label("l"), self.label("l"));
                let _ = writeln!(
                    self.out,
                    "    {l} = tolist(arr)\n    {m} = tolist(ali)\n    x{dst} = {l} == {m}"
                );
            }
            _ => unreachable!("identity_op writes only its own operations"),
        }
    }

    /// The walks of `wp` over `tape`, a pointer that moves as a Brainfuck interpreter's does.
    fn tape_op(&mut self, op: &HeapOp, counter: &str) {
        match op {
            HeapOp::Walk {
                dst,
                c,
                step,
                every,
            } => {
                let (q, t) = (self.label("q"), self.label("t"));
                let (w, go, skip) = (self.label("w"), self.label("go"), self.label("skip"));
                let _ = writeln!(
                    self.out,
                    "    {q} = wp + {c}\n    {t} = tape[{q}]\n    x{dst} = tape[wp]\n    \
                     {t} = {t} + x{dst}\n    {t} = {t} & 255\n    tape[{q}] = {t}\n    \
                     {w} = {counter} % {every}\n    if {w} goto {skip} else goto {go}\n\
                     {go}:\n    wp = wp + {step}\n    goto {skip}\n{skip}:"
                );
            }
            HeapOp::FarPointer { dst, c, at, high } => {
                let (a, b, t) = (self.label("q"), self.label("q"), self.label("t"));
                let (w, far, skip) = (self.label("w"), self.label("far"), self.label("skip"));
                let (c, to) = if *high {
                    (*c, i64::MAX - 1)
                } else {
                    (-c, i64::MIN + 1)
                };
                let _ = writeln!(
                    self.out,
                    "    {a} = wp + {}\n    {b} = wp + {c}\n    x{dst} = tape[{a}]\n    \
                     {t} = tape[{b}]\n    x{dst} = x{dst} + {t}\n    \
                     {w} = {counter} == {at}\n    if {w} goto {far} else goto {skip}\n\
                     {far}:\n    wp = {to}\n    goto {skip}\n{skip}:",
                    2 * c
                );
            }
            HeapOp::Sweep {
                dst,
                c,
                step,
                times,
                print,
            } => {
                let (n, q, t) = (self.label("n"), self.label("q"), self.label("t"));
                let (sweep, out) = (self.label("sweep"), self.label("swept"));
                let print = if *print {
                    format!("    print(x{dst})\n")
                } else {
                    String::new()
                };
                let _ = writeln!(
                    self.out,
                    "    {n} = getchar()\n    {q} = {counter} % {times}\n    {n} = {n} + {q}\n    \
                     {n} = {n} & 7\n    {n} = {n} + 1\n    \
                     goto {sweep}\n\
                     {sweep}:\n    x{dst} = tape[wp]\n{print}    {q} = wp + {c}\n    \
                     {t} = tape[{q}]\n    {t} = {t} + x{dst}\n    {t} = {t} + 1\n    \
                     {t} = {t} & 255\n    tape[{q}] = {t}\n    wp = wp + {step}\n    \
                     {n} = {n} - 1\n    if {n} goto {sweep} else goto {out}\n{out}:"
                );
            }
            _ => unreachable!("tape_op writes only its own operations"),
        }
    }

    /// The statements on `box`, a small array that may stay virtual.
    fn box_op(&mut self, op: &HeapOp, counter: &str) {
        match op {
            HeapOp::Box { init, value } => {
                let init = Self::arg(init, counter);
                let v = Self::arg(value, counter);
                let _ = writeln!(self.out, "    box = array(2, {init})\n    box[1] = {v}");
            }
            HeapOp::Unbox(dst, k) => {
                let _ = writeln!(self.out, "    x{dst} = box[{k}]");
            }
            HeapOp::RareUnbox { dst, v, k, every } => {
                let (w, take, skip) = (self.label("w"), self.label("take"), self.label("skip"));
                let _ = writeln!(
                    self.out,
                    "    box = array(2, 0)\n    box[1] = x{v}\n    {w} = {counter} % {every}\n    \
                     if {w} goto {skip} else goto {take}\n\
                     {take}:\n    x{dst} = box[{k}]\n    x{dst} = x{dst} + x{v}\n    goto {skip}\n\
                     {skip}:"
                );
            }
            HeapOp::BoxHolds(k) => {
                let _ = writeln!(self.out, "    box[{k}] = arr");
            }
            HeapOp::Knot(index) => {
                let k = self.index(index, counter);
                let _ = writeln!(self.out, "    arr[{k}] = box");
            }
            HeapOp::BoxEscapes(print) => {
                let _ = if *print {
                    writeln!(self.out, "    print(box)")
                } else {
                    writeln!(self.out, "    ali = box")
                };
            }
            _ => unreachable!("box_op writes only its own operations"),
        }
    }

    /// Output and input.
    fn io_op(&mut self, op: &HeapOp) {
        match op {
            HeapOp::Print(Some(v)) => {
                let _ = writeln!(self.out, "    print(x{v})");
            }
            HeapOp::Print(None) => {
                let _ = writeln!(self.out, "    print(arr)");
            }
            HeapOp::Putchar(v, mask) => {
                let t = self.label("t");
                let _ = writeln!(self.out, "    {t} = x{v} & {mask}\n    putchar({t})");
            }
            HeapOp::Getchar(dst) => {
                let _ = writeln!(self.out, "    x{dst} = getchar()");
            }
            _ => unreachable!("io_op writes only its own operations"),
        }
    }

    /// `x{dst} = call f{m}(...)` of function `func` (modulo the number of `funcs`, none if
    /// there are none), on `args` (a recursive function's first argument bounded by its
    /// depth, a memo function's a key into its table, promoted with `promote`).
    fn call(
        &mut self,
        dst: usize,
        func: usize,
        args: &[GenArg],
        promote: bool,
        counter: &str,
        funcs: &[GenFunc],
    ) {
        if funcs.is_empty() {
            return;
        }
        let m = func % funcs.len();
        let a = Self::arg(&args[0], counter);
        let b = Self::arg(&args[1], counter);
        let _ = match &funcs[m] {
            // A fork is on the loop's counter, which turns it once, or every so often.
            GenFunc::Plain { fork: Some(_), .. } => {
                writeln!(self.out, "    x{dst} = call f{m}({counter}, {b})")
            }
            GenFunc::Plain { .. } => writeln!(self.out, "    x{dst} = call f{m}({a}, {b})"),
            GenFunc::Recursive { depth, .. }
            | GenFunc::Walk { depth, .. }
            | GenFunc::Guest { depth, .. } => {
                let n = self.label("n");
                writeln!(
                    self.out,
                    "    {n} = {a} % {depth}\n    x{dst} = call f{m}({n}, {b})"
                )
            }
            GenFunc::Memo { size, .. } => {
                let k = self.label("k");
                let promoted = if promote {
                    format!("    promote({k})\n    promote(memo{m})\n")
                } else {
                    String::new()
                };
                // A key that stays the same for a few calls in a row (with the counter as
                // `a`): the loop may be recorded on a call that finds its entry, and its
                // trace then makes the calls that compute, which take more operations than
                // it recorded.
                let key = match 1 + dst % 3 {
                    1 => format!("    {k} = {a} % {size}\n"),
                    d => format!("    {k} = {a} // {d}\n    {k} = {k} % {size}\n"),
                };
                writeln!(
                    self.out,
                    "{key}{promoted}    x{dst} = call f{m}({k}, memo{m})"
                )
            }
        };
    }

    /// Writes `f` of [`GenFunc::Guest`], and its dispatch function `f_x`: guest code
    /// `0 T` (call), `1 K` (add), `2 K` (mul), `4 K` (div), `3` (ret).
    fn guest(&mut self, f: &str, guest: &[Vec<GuestOp>]) {
        let mut starts = Vec::new();
        let mut len = 0;
        for g in guest {
            starts.push(len);
            len += 2 * g.len() + 1;
        }
        let mut code = Vec::new();
        for g in guest {
            for op in g {
                let (o, k) = match *op {
                    GuestOp::Call(t) => (0, starts[t % starts.len()] as i64),
                    GuestOp::Add(k) => (1, k),
                    GuestOp::Mul(k) => (2, k),
                    GuestOp::Div(k) => (4, k),
                };
                code.push(o.to_string());
                code.push(k.to_string());
            }
            code.push("3".to_string());
        }
        let code = code.join(", ");
        let lines = [
            format!("func {f}(n, acc):"),
            format!("    code = [{code}]"),
            format!("    r = call {f}_x(code, 0, n, n)"),
            "    r = r + acc".to_string(),
            "    return r".to_string(),
            format!("func {f}_x(code, pc, a, d):"),
            format!("    goto {f}_d"),
            format!("{f}_d:"),
            "    jit_merge_point(code, pc)".to_string(),
            "    op = code[pc]".to_string(),
            "    pc = pc + 1".to_string(),
            "    c = op == 3".to_string(),
            format!("    if c goto {f}_ret else goto {f}_arg"),
            format!("{f}_ret:"),
            "    return a".to_string(),
            format!("{f}_arg:"),
            "    k = code[pc]".to_string(),
            "    pc = pc + 1".to_string(),
            "    c = op == 0".to_string(),
            format!("    if c goto {f}_call else goto {f}_o1"),
            format!("{f}_o1:"),
            "    c = op == 1".to_string(),
            format!("    if c goto {f}_add else goto {f}_o2"),
            format!("{f}_o2:"),
            "    c = op == 2".to_string(),
            format!("    if c goto {f}_mul else goto {f}_div"),
            format!("{f}_add:"),
            "    a = a + k".to_string(),
            format!("    goto {f}_d"),
            format!("{f}_mul:"),
            "    a = a * k".to_string(),
            format!("    goto {f}_d"),
            format!("{f}_div:"),
            "    a = a // k".to_string(),
            format!("    goto {f}_d"),
            format!("{f}_call:"),
            "    c = d > 0".to_string(),
            format!("    if c goto {f}_rec else goto {f}_d"),
            format!("{f}_rec:"),
            "    e = d - 1".to_string(),
            format!("    r = call {f}_x(code, k, a, e)"),
            "    a = a + r".to_string(),
            format!("    goto {f}_d"),
        ];
        let _ = writeln!(self.out, "{}", lines.join("\n"));
    }

    /// Writes the program's functions.
    pub(super) fn funcs(&mut self, funcs: &[GenFunc]) {
        for (m, f) in funcs.iter().enumerate() {
            let f_ = format!("f{m}");
            let consts = "    x2 = 3\n    x3 = -1\n    x4 = 7\n";
            match f {
                GenFunc::Plain { ops, result, fork } => {
                    let _ = write!(self.out, "func {f_}(x0, x1):\n{consts}");
                    if let Some(fork) = fork {
                        let (at, op) = (fork.at, if fork.modulo { "%" } else { "<" });
                        let _ = write!(
                            self.out,
                            "    c = x0 {op} {at}\n    if c goto {f_}_one else goto {f_}_other\n\
                             {f_}_other:\n"
                        );
                        for o in &fork.ops {
                            self.stmt(o, "x0");
                        }
                        let _ = write!(self.out, "    return x{}\n{f_}_one:\n", fork.result);
                    }
                    for o in ops {
                        self.stmt(o, "x0");
                    }
                    let _ = writeln!(self.out, "    return x{result}");
                }
                GenFunc::Recursive {
                    op,
                    twice,
                    rare,
                    depth,
                    looped,
                } => {
                    let (big, kind) = (matches!(rare, Rare::Big), rare);
                    let _ = writeln!(
                        self.out,
                        "func {f_}(n, acc):\n    c = n > 0\n    if c goto {f_}_rec else goto {f_}_base\n\
                         {f_}_rec:\n    n = n - 1\n    acc = acc {} n",
                        op.infix().unwrap_or("+")
                    );
                    let rare = match rare {
                        Rare::Nothing => None,
                        Rare::Big => {
                            Some(format!("    acc = acc * {}\n    goto {f_}_go", 1i128 << 70))
                        }
                        Rare::Atom => Some("    return 'odd'".to_string()),
                        Rare::Error => Some(format!(
                            "    z = n - {}\n    z = acc // z\n    goto {f_}_go",
                            depth - 2
                        )),
                        Rare::Print => Some(format!("    print(acc)\n    goto {f_}_go")),
                    };
                    if let Some(rare) = rare {
                        let _ = writeln!(
                            self.out,
                            "    c = n == {}\n    if c goto {f_}_rare else goto {f_}_go\n{f_}_rare:\n{rare}\n{f_}_go:",
                            depth - 2
                        );
                    }
                    if *looped {
                        if big {
                            // Past 64 bits at every level: the loop's code holds it boxed.
                            let _ = writeln!(self.out, "    acc = acc + {}", 1i128 << 70);
                        }
                        // The rare path again in the loop, after the call: an exit of the
                        // loop's code that the function's entry trace went on in, inside a
                        // call machine code made.
                        let in_loop = match kind {
                            Rare::Nothing => String::new(),
                            Rare::Big => format!("    acc = acc * {}\n", 1i128 << 70),
                            Rare::Atom => "    acc = 'odd'\n".to_string(),
                            Rare::Error => "    z = j - 1\n    z = acc // z\n".to_string(),
                            Rare::Print => "    print(acc)\n".to_string(),
                        };
                        let rare_in_loop = if in_loop.is_empty() {
                            String::new()
                        } else {
                            format!(
                                "    c = n == {}\n    if c goto {f_}_lrare else goto {f_}_lgo\n\
                                 {f_}_lrare:\n{in_loop}    goto {f_}_lgo\n{f_}_lgo:\n",
                                depth - 2
                            )
                        };
                        let _ = writeln!(
                            self.out,
                            "    j = 0\n    goto {f_}_loop\n{f_}_loop:\n    c = j < 2\n    \
                             if c goto {f_}_step else goto {f_}_end\n{f_}_step:\n    \
                             r = call {f_}(n, acc)\n    acc = acc + r\n{rare_in_loop}    j = j + 1\n    \
                             goto {f_}_loop\n{f_}_end:\n    return acc\n{f_}_base:\n    return acc"
                        );
                        continue;
                    }
                    let _ = writeln!(self.out, "    r = call {f_}(n, acc)");
                    if *twice {
                        let _ = writeln!(self.out, "    m = n // 2\n    r = call {f_}(m, r)");
                    }
                    let _ = writeln!(self.out, "    return r\n{f_}_base:\n    return acc");
                }
                GenFunc::Walk { op, .. } => {
                    let op = op.infix().unwrap_or("+");
                    let _ = writeln!(
                        self.out,
                        "func {f_}(n, acc):\n    t = call {f_}_b(n, acc)\n    r = call {f_}_w(t)\n    return r\n\
                         func {f_}_b(n, acc):\n    node = array(3, 0)\n    node[2] = acc\n    c = n > 0\n    \
                         if c goto {f_}_bk else goto {f_}_bl\n{f_}_bl:\n    return node\n\
                         {f_}_bk:\n    n = n - 1\n    k = call {f_}_b(n, acc)\n    node[0] = k\n    \
                         m = n % 3\n    c = m == 0\n    if c goto {f_}_bs else goto {f_}_bd\n\
                         {f_}_bs:\n    k = call {f_}_b(0, n)\n    node[1] = k\n    goto {f_}_bd\n{f_}_bd:\n    return node\n\
                         func {f_}_w(t):\n    v = t[2]\n    l = t[0]\n    c = l == 0\n    \
                         if c goto {f_}_wl else goto {f_}_wk\n{f_}_wl:\n    return v\n\
                         {f_}_wk:\n    x = call {f_}_w(l)\n    v = v {op} x\n    r = t[1]\n    c = r == 0\n    \
                         if c goto {f_}_wd else goto {f_}_wr\n{f_}_wr:\n    y = call {f_}_w(r)\n    v = v - y\n    goto {f_}_wd\n\
                         {f_}_wd:\n    return v"
                    );
                }
                GenFunc::Guest { guest, .. } => self.guest(&f_, guest),
                GenFunc::Memo {
                    ops,
                    result,
                    after,
                    wide,
                    ..
                } => {
                    let _ = writeln!(
                        self.out,
                        "@elidable\nfunc {f_}(k, t):\n    v = t[k]\n    c = v == 'none'\n    if c goto {f_}_compute else goto {f_}_known\n\
                         {f_}_known:\n    return v\n\
                         {f_}_compute:\n    x0 = k\n    x1 = k\n{consts}"
                    );
                    for o in ops {
                        self.stmt(o, "k");
                    }
                    if *wide {
                        let _ = writeln!(self.out, "    x{result} = x{result} ^ {}", 1i128 << 70);
                    }
                    let _ = writeln!(self.out, "    t[k] = x{result}");
                    for _ in 0..*after {
                        let _ = writeln!(self.out, "    pad = k + 1");
                    }
                    let _ = writeln!(self.out, "    return x{result}");
                }
            }
        }
    }
}
