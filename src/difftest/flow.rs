//! Structured programs: five integer variables, a constant list, straight-line code, loops
//! with bounded counters and variables that change type in them, printed in the readable
//! syntax.
//!
//! A loop counts its counter down to zero (its head tests `i > 0` or `i != 0`). Its body
//! is straight-line pieces and inner loops, then (often) a branch whose two ways write
//! variables: either `counter < at`, which changes direction once, or `counter % m`, whose
//! else-way is a rare path taken every `m`-th iteration, again and again, so that a guard
//! fails often enough to get a bridge and the bridge goes back into the loop. Loops run up
//! to 80 times; an outermost loop, often up to 1,500 (fewer when its inner loops would make
//! it more than 4,000 iterations in all), enough for the default thresholds (a trace after
//! 50 back edges, a bridge after 20 exits) to be passed.
//!
//! Statements come as single operations of every kind and, more often, as integer
//! operations that cannot fail, in chunks that make loop-carried variables copies of each
//! other (`xa = xb`, `xa = e; xb = xa`, or `xa = e; xb = e` with the same `e`), or a
//! constant. A branch of the new kind reads `xb`, then makes `xa` and `xb` equal on its
//! then-way; its else-way (the rare path) usually writes only those two, with constants,
//! the counter or other values, so that for one iteration they differ. Such a loop, as it
//! is printed (blocks reordered, `goto`s left out):
//!
//! ```text
//! loop1:   i4 = 700
//! head2:   c5 = i4 > 0                 if c5 goto s9 else goto end
//! s9:      x2 = x2 // 3
//! fork6:   w8 = i4 % 12                if w8 goto then10 else goto else11
//! then10:  x4 = x4 - x1                x0 = i4 + 3              x1 = x0
//! else11:  x1 = 0
//! step3:   i4 = i4 - 1
//! ```
//!
//! A path taken every time may mask a variable (`xa = xa & 255`), keeping it in an interval,
//! and a rare path may write a large 64-bit constant (2^62) into it: machine code that
//! proved `xa * 3` cannot overflow, assuming the interval at the loop's header, must not
//! jump there from the rare path's bridge with such a value.
//!
//! A value that only a mask reads on the path taken every time (`y = x1 * 2^62; y = y &
//! 255`), which machine code computes wrapping, may be read whole on a rare path
//! ([`Wrapped`]): the guard before the mask must hand the exact value to it.
//!
//! A loop may also promote a value at the start of each iteration: `counter // k` (changes
//! every `k` iterations), `counter % m` (few or many distinct values), or a variable.
//!
//! A loop's body may hold, less often, a mixed piece ([`Mixed`]): a variable `v` of its own
//! that changes type between iterations. Either a fork on the counter assigns it an integer
//! on the path taken every time and the atom `'a'` or a list `[k, 'a']` on the rare path
//! (every `m`-th iteration, every other one, or from some iteration on), or `v = ys[k]`
//! reads a list of integers and atoms at an index that varies, so that `readlist`'s type
//! check fails now and then. Copies carry it across iterations (`old = prev`, `prev = v`,
//! before `v` is written): the loop as recorded may end with another type than it started
//! with, which peeling rejects, and bridges from the rare path carry the atom or list back
//! into the loop. One of the three is compared with the odd value (usually), and added into
//! an `x` variable when an integer; when the odd value, its length (a list) or the counter
//! (an atom) is used instead:
//!
//! ```text
//! mix7:     old7 = prev7       prev7 = v7      w7 = i4 % 2     if w7 goto hot7 else goto rare7
//! hot7:     v7 = i4 + x2
//! rare7:    v7 = 'a'
//! use7:     t7 = old7 == 'a'   if t7 goto oddway7 else goto int7
//! oddway7:  x3 = x3 - i4
//! int7:     x3 = x3 + old7
//! ```
//! Half the programs print one variable; the others print a number that every variable
//! changes. Pieces of heap statements, calls and input and output ([`Seg::Heap`]) and the
//! program's functions are in `heap.rs`.

use std::fmt::Write as _;

use flowjit_runtime::Op;
use proptest::prelude::*;

use super::heap::{self, funcs, heap_ops, GenFunc, HeapOp};

/// An argument of a generated operation.
#[derive(Clone, Debug)]
pub enum GenArg {
    /// Variable `x{n}`.
    Var(usize),
    /// An integer literal.
    Int(i64),
    /// 2^70, past 64 bits.
    Big,
    /// The atom `'a'`.
    Atom,
    /// The innermost loop counter (or `x0` outside loops).
    Counter,
}

/// A generated statement `x{dst} = op(args)`.
#[derive(Clone, Debug)]
pub struct GenOp {
    /// The variable assigned.
    pub dst: usize,
    /// The operation.
    pub op: Op,
    /// Its arguments (as many as it takes are used).
    pub args: [GenArg; 2],
}

/// The condition of a loop's branch, on its counter `i` (which counts down to 1).
#[derive(Clone, Debug)]
pub enum Cond {
    /// `i < at`: the else-way first, then the then-way from some iteration on.
    Below(i64),
    /// `i % m`: the then-way, except every `m`-th iteration, which takes the else-way (the
    /// rare path).
    Every(i64),
    /// A flag of the branch's own that the then-way clears and the else-way sets, as
    /// constants: the two ways alternate, and a body peeled after one of them cannot take
    /// it again (`opt::optimize_generic`).
    Flip,
}

/// The value a loop promotes at the start of each iteration.
#[derive(Clone, Debug)]
pub enum Promoted {
    /// `i // k`: a value that changes every `k` iterations.
    Div(i64),
    /// `i % m`: `m` values, cycling.
    Mod(i64),
    /// Variable `x{n}` itself.
    Var(usize),
}

/// A branch at the end of a loop's body.
#[derive(Clone, Debug)]
pub struct Branch {
    /// Its condition.
    pub cond: Cond,
    /// The statements of its then-way.
    pub yes: Vec<GenOp>,
    /// The statements of its else-way.
    pub no: Vec<GenOp>,
    /// `Some((a, b))`: the else-way writes only `x{a}` and `x{b}`, which the then-way makes
    /// equal (each statement's `dst` picks one of the two). A bridge from the else-way may
    /// then jump straight back into the loop, which needs every variable it writes to be
    /// one the loop carries, and the two variables differ for one iteration.
    pub tied: Option<(usize, usize)>,
}

/// The value a mixed piece assigns on its rare path, other than an integer.
#[derive(Clone, Debug)]
pub enum Odd {
    /// The atom `'a'`.
    Atom,
    /// The list `[k, 'a']`.
    List(i64),
}

/// Where a mixed piece's variable `v` gets its value each iteration.
#[derive(Clone, Debug)]
pub enum Source {
    /// A fork on the counter: its then-way assigns an integer operation (`dst` unused, often
    /// reading the counter), its else-way (the rare path) `odd`.
    Fork {
        /// The fork's condition.
        cond: Cond,
        /// The integer operation of the then-way.
        hot: GenOp,
        /// The value of the else-way.
        odd: Odd,
    },
    /// `v = ys[k]` from the piece's own list of integers and atoms `'a'` (`None`), with
    /// `k = i % len` or, when `Some(d)`, `k = (i // d) % len` (one element for `d`
    /// iterations): `readlist` meets an atom where it met integers.
    Read {
        /// The list's elements.
        list: Vec<Option<i64>>,
        /// `Some(d)`: the index changes every `d` iterations.
        every: Option<i64>,
    },
}

/// A piece of a loop's body whose variable changes type between iterations: `v` is an
/// integer on the path taken every time and an atom or a list on a rare one (or every
/// other iteration), and is carried to the next iterations by copies (`old = prev`,
/// `prev = v`, before `v` is written). Its variables are its own (`v{n}`, `prev{n}`, ...,
/// all 0 at the start); what it computes reaches `x{acc}`.
#[derive(Clone, Debug)]
pub struct Mixed {
    /// Where `v` comes from.
    pub source: Source,
    /// How many copies carry `v` across iterations: 0, `prev = v` (1), or also
    /// `old = prev` (2).
    pub carry: usize,
    /// The variable read: `v` (0), `prev` (1) or `old` (2); at most `carry`.
    pub subject: usize,
    /// The variable that the subject changes.
    pub acc: usize,
    /// How it changes `x{acc}` when an integer: `x{acc} = x{acc} op subject`.
    pub op: Op,
    /// Whether the subject is compared with the odd value first (`t = subject == odd`),
    /// the odd value taking another way; without, the rare path ends in a type error.
    pub guarded: bool,
    /// Whether the subject is promoted first (only from a list: few values).
    pub promote: bool,
}

/// A variable `r` of its own (0 at the start) that a loop keeps in an interval on the path
/// taken every time (`r = r + i`, `r = r & mask`) and sets to a large 64-bit constant on a
/// rare path (every `every`-th iteration). Each iteration first computes `y = r * k` and
/// adds `y < 0` to `x{acc}`: from the large value, `y` leaves 64 bits (and is not negative).
/// Machine code that proved `r * k` cannot overflow, assuming `r` in the interval at the
/// loop's header, must not jump there from the rare path's bridge with the large value.
///
/// ```text
/// rng7:   y7 = r7 * 3      t7 = y7 < 0      x2 = x2 + t7
///         w7 = i4 % 9      if w7 goto hot7 else goto rare7
/// hot7:   r7 = r7 + i4     r7 = r7 & 255
/// rare7:  r7 = 4611686018427387904
/// ```
#[derive(Clone, Debug)]
pub struct Ranged {
    /// The mask of the path taken every time.
    pub mask: i64,
    /// The large constant of the rare path.
    pub large: i64,
    /// The factor of `y = r * k`.
    pub k: i64,
    /// The rare path is taken every `every`-th iteration.
    pub every: i64,
    /// The variable `y < 0` is added to.
    pub acc: usize,
}

/// A value `y = s op k` (a sum, difference or product of a variable or the counter and a
/// large constant, often past 64 bits) that only a mask reads on the path taken every
/// time, and that a rare path (every `every`-th iteration) reads whole. On the first,
/// machine code may compute it wrapping, without an overflow check; but the guard before
/// the mask holds it for the rare path, which must find the exact value.
///
/// ```text
/// wrp7:   y7 = x1 * 4611686018427387904     w7 = i4 % 9    if w7 goto hot7 else goto rare7
/// hot7:   y7 = y7 & 255      x2 = x2 + y7
/// rare7:  x2 = x2 + y7
/// ```
#[derive(Clone, Debug)]
pub struct Wrapped {
    /// The operation.
    pub op: Op,
    /// Its first operand.
    pub from: GenArg,
    /// Its second operand, a constant.
    pub k: i64,
    /// The mask of the path taken every time.
    pub mask: i64,
    /// The rare path is taken every `every`-th iteration.
    pub every: i64,
    /// The variable `y` is added to.
    pub acc: usize,
}

/// An array `h` of its own (made before the program's first statement) that a loop reads
/// at a constant index on every iteration. Where only a rare path (every `every`-th
/// iteration) writes there, storing the counter, the optimizer loads the element once, in
/// the preamble, and the loop keeps it. Each iteration mixes the element into `x{acc}`
/// through a mask, so that the loop accumulates nothing a jump to its header would have to
/// check again. A bridge from the rare path that jumped straight to the header would leave
/// the loop with the old element (`lower::holds_loads` sends it through the preamble;
/// without that check, `flowjit difftest --seed 18001` finds such a loop).
///
/// The hot way may write the element too (`hot`): a constant, the counter, or `x{acc}`
/// once mixed (then through a prime modulus, since `x * 3 + x` under a power-of-two mask
/// soon leaves 0). The loop then carries the element from one iteration to the next, and
/// the optimizer may find it always equal to a constant or to a variable the loop carries
/// (`h7[2] = x2` on the recorded way, merged with `x2`). A bridge of the rare way that
/// went straight to the header would break that (`Trace::carries_elements`). Without that
/// check, `flowjit difftest --seed 41001 --count 1000` finds a merged one; without it and
/// with `param_item`s never merged, `--seed 44001 --count 1200` finds a constant one, in a
/// piece whose element decides a branch (`branch`).
///
/// ```text
/// hld7:   z7 = h7[2]    t7 = x2 * 3    t7 = t7 + z7    x2 = t7 & 65535
///         w7 = i4 % 9      if w7 goto hot7 else goto rare7
/// hot7:   (or: h7[2] = 0, h7[2] = i4, h7[2] = x2)
/// rare7:  h7[2] = i4       (or: h7[2] = 5, nothing)
/// ```
#[derive(Clone, Debug)]
pub struct Held {
    /// The index read and, on the rare path, written.
    pub index: i64,
    /// The rare path is taken every `every`-th iteration.
    pub every: i64,
    /// The variable the element is mixed into.
    pub acc: usize,
    /// What the hot way writes there. The rare way then writes the counter, or a
    /// constant where the hot way writes the counter, or nothing where it writes `acc`.
    pub hot: HeldWrite,
    /// The element decides a branch (`z < 3`: `acc` times 3, or times 5 plus 1) instead of
    /// being added to `acc`: what the loop computes then holds no value loaded in its
    /// preamble, and a bridge that stores may go straight to the header.
    pub branch: bool,
}

/// What a way of a [`Held`] piece writes into its element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeldWrite {
    /// Nothing.
    Nothing,
    /// A constant.
    Const(i64),
    /// The loop's counter.
    Counter,
    /// The variable the element is mixed into, once mixed.
    Acc,
}

/// A variable `s` of its own that swings across 2^63 and back (from `i64::MAX - start`,
/// by `step`, turning past `i64::MAX + span` and below `i64::MAX - span`): machine code
/// holds it boxed once it has been past 64 bits, and does arithmetic and comparisons on it
/// itself while it is within them (`lower::num_small`), through the helpers while it is
/// not. Each iteration adds `(s op k) cmp bound` for each comparison, whether the loop's
/// counter less one as a boxed integer (`(s - c) - (s - c) + i - 1`) equals the atom
/// `swing` (its bits sweep the atoms' numbers, 0 the last time round, the number
/// [`super::run`] gives `swing`), and `(s op k) % 1009`, to `x{acc}`.
///
/// ```text
/// swg7:   s7 = s7 + d7    y7 = s7 * 3    t7 = y7 < s7    x2 = x2 + t7    t7 = y7 <= s7 ...
///         r7 = y7 % 1009    x2 = x2 + r7    u7 = s7 > 9223372036854775827    if u7 goto sdn7 else goto slo7
/// sdn7:   d7 = 0 - 2
/// slo7:   u7 = s7 < 9223372036854775787    if u7 goto sup7 else goto ...
/// sup7:   d7 = 2
/// ```
#[derive(Clone, Debug)]
pub struct Swing {
    /// How far below `i64::MAX` it starts.
    pub start: i64,
    /// How far past `i64::MAX` either way it turns.
    pub span: i64,
    /// What an iteration adds to it (or takes from it).
    pub step: i64,
    /// The operation `y = s op k`.
    pub op: Op,
    /// Its constant.
    pub k: i64,
    /// The bound: `i64::MAX`, `s` itself, 0, `i64::MAX + 1` or `i64::MAX - 1`.
    pub bound: u8,
    /// The variable the comparison is added to.
    pub acc: usize,
}

/// A piece of a generated program.
#[derive(Clone, Debug)]
pub enum Seg {
    /// Straight-line statements.
    Ops(Vec<GenOp>),
    /// A loop running `count` times.
    Loop {
        /// Iterations.
        count: i64,
        /// Its body.
        body: Vec<Seg>,
        /// A branch at the end of the body.
        branch: Option<Branch>,
        /// A value promoted at the start of the body; `Some((value, n))` adds a derived
        /// value to `x{n}` (`promote(p)`, `x{n} = x{n} + p`).
        promote: Option<(Promoted, usize)>,
        /// The head tests `counter != 0` rather than `counter > 0`: a counter moving
        /// towards the value an equality leaves the loop at, whose overflow check machine
        /// code drops once it proves the counter at least 0 at the header, checking the
        /// value the loop is entered with (`opt::bounds::induction`).
        until_zero: bool,
    },
    /// A variable whose type changes between iterations (only in loop bodies).
    Mixed(Mixed),
    /// A variable kept in an interval but on a rare path (only in loop bodies).
    Ranged(Ranged),
    /// A value only a mask reads but on a rare path (only in loop bodies).
    Wrapped(Wrapped),
    /// An array element the loop holds but a rare path writes (only in loop bodies).
    Held(Held),
    /// A variable swinging across 2^63 and back (only in loop bodies).
    Swing(Swing),
    /// Statements on the array, calls, and input and output.
    Heap(Vec<HeapOp>),
}

/// A generated program.
#[derive(Clone, Debug)]
pub struct GenProgram {
    /// Initial values of `x0..x4`.
    pub inits: [i64; 5],
    /// The constant list `lst`.
    pub list: Vec<i64>,
    /// Its pieces, in order.
    pub segs: Vec<Seg>,
    /// The variable printed at the end, or (`None`) a number that every variable changes:
    /// `((x0 * P + x1) * P + x2) ...` with `P = 1000003`.
    pub result: Option<usize>,
    /// Its functions.
    pub funcs: Vec<GenFunc>,
}

/// How many variables the generated statements use.
pub(super) const VARS: usize = 5;

/// The iterations a loop nest may run in all (the outer count times one plus the inner
/// loops' iterations); a longer nest has its outer count cut. About 15 operations an
/// iteration, three nests a program: within the oracle's step limit.
const NEST_ITERATIONS: i64 = 4_000;

/// An argument: a variable, an integer (some past 64 bits), the counter or an atom.
pub(super) fn arg() -> impl Strategy<Value = GenArg> {
    prop_oneof![
        6 => (0..VARS).prop_map(GenArg::Var),
        3 => prop_oneof![-3i64..10, Just(i64::MAX), Just(i64::MIN), Just(1 << 40)].prop_map(GenArg::Int),
        3 => Just(GenArg::Counter),
        1 => Just(GenArg::Big),
        1 => Just(GenArg::Atom),
    ]
}

/// Any operation on any arguments: errors, big integers and atoms included.
pub(super) fn op() -> impl Strategy<Value = GenOp> {
    (
        0..VARS,
        prop::sample::select(Op::ALL.to_vec()),
        arg(),
        arg(),
    )
        .prop_map(|(dst, op, a, b)| GenOp {
            dst,
            op,
            args: [a, b],
        })
}

fn ops() -> impl Strategy<Value = Vec<GenOp>> {
    prop::collection::vec(op(), 0..5)
}

/// An integer operation that raises no error on integers: a division or a remainder is
/// by a constant other than 0, a product by a constant. Its operands may be past 64 bits.
fn int_op() -> impl Strategy<Value = GenOp> {
    let safe = [
        Op::Add,
        Op::Sub,
        Op::Xor,
        Op::And,
        Op::Or,
        Op::Lt,
        Op::Eq,
        Op::Mod,
        Op::Div,
        Op::Mul,
    ];
    // Constants at the ends of 64 bits too: an addition or subtraction of one is checked
    // against the bound it leaves its operand (`backend::ops`), and its offset is far from
    // any that `opt::bounds` widens (`x + i64::MIN` once took its absolute value).
    let operand = prop_oneof![
        4 => (0..VARS).prop_map(GenArg::Var),
        3 => Just(GenArg::Counter),
        2 => (-3i64..10).prop_map(GenArg::Int),
        1 => prop::sample::select(vec![i64::MIN, i64::MIN + 1, i64::MAX, i64::MAX - 1])
            .prop_map(GenArg::Int),
        // Past 64 bits: loop-carried variables that machine code holds boxed (`Num`),
        // copied into each other and exchanged at the back edge.
        1 => Just(GenArg::Big),
    ];
    (
        0..VARS,
        prop::sample::select(safe.to_vec()),
        operand.clone(),
        operand,
        // Powers of two too, up to 2^62, and negative divisors: machine code shifts and
        // masks by a power of two, and must round towards minus infinity as `//` does.
        prop_oneof![
            8 => 1i64..10,
            1 => prop::sample::select(vec![-8, -2, -1, 1 << 40, 1 << 62, -(1 << 62)]),
        ],
    )
        .prop_map(|(dst, op, a, b, k)| {
            let b = match op {
                Op::Mod | Op::Div | Op::Mul => GenArg::Int(k),
                _ => b,
            };
            GenOp {
                dst,
                op,
                args: [a, b],
            }
        })
}

fn copy(dst: usize, from: usize) -> GenOp {
    GenOp {
        dst,
        op: Op::Same,
        args: [GenArg::Var(from), GenArg::Int(0)],
    }
}

/// `xa = xa & k`: the variable stays in `0..=k` on the path that masks it, so machine code
/// may prove what it computes from it cannot overflow, assuming so at the loop's header.
fn mask() -> impl Strategy<Value = GenOp> {
    (0..VARS, prop::sample::select(vec![1i64, 7, 255, 1023])).prop_map(|(a, k)| GenOp {
        dst: a,
        op: Op::And,
        args: [GenArg::Var(a), GenArg::Int(k)],
    })
}

/// A large 64-bit constant into a variable (for a rare path): outside any interval a hot
/// path keeps it in, and what is computed from it (`x * 3`) leaves 64 bits.
fn large_constant() -> impl Strategy<Value = GenOp> {
    let values = vec![1i64 << 62, -(1i64 << 62), i64::MAX, (1i64 << 40) + 7];
    (0..VARS, prop::sample::select(values)).prop_map(|(dst, n)| GenOp {
        dst,
        op: Op::Same,
        args: [GenArg::Int(n), GenArg::Int(0)],
    })
}

fn constant() -> impl Strategy<Value = GenOp> {
    (0..VARS, -3i64..10).prop_map(|(dst, n)| GenOp {
        dst,
        op: Op::Same,
        args: [GenArg::Int(n), GenArg::Int(0)],
    })
}

/// Two variables made equal: `xa = xb`, `xa = e; xb = e`, or `xa = e; xb = xa`, where `e`
/// often reads the counter (so that the two vary from one iteration to the next).
fn alias() -> impl Strategy<Value = Vec<GenOp>> {
    prop_oneof![
        1 => (0..VARS, 0..VARS).prop_map(|(a, b)| vec![copy(a, b)]),
        1 => (varying(), 0..VARS).prop_map(|(e, b)| vec![e.clone(), GenOp { dst: b, ..e }]),
        1 => (varying(), 0..VARS).prop_map(|(e, b)| {
            let a = e.dst;
            vec![e, copy(b, a)]
        }),
    ]
}

/// An integer operation that often reads the counter.
fn varying() -> impl Strategy<Value = GenOp> {
    (int_op(), any::<bool>()).prop_map(|(mut e, counter)| {
        if counter {
            e.args[0] = GenArg::Counter;
        }
        e
    })
}

/// The then-way of a loop's branch, and the two variables it makes equal: some reads,
/// `xc = xc + xb` (or `-`), then `xa = e; xb = e` or `xa = e; xb = xa`. On the path taken
/// every time, `xb` is read as a copy of `xa`; when the else-way has written it, not.
fn then_way() -> impl Strategy<Value = (Vec<GenOp>, (usize, usize))> {
    (reads(), accumulate(), varying(), 0..VARS, any::<bool>()).prop_map(
        |(mut yes, mut acc, e, b, twice)| {
            let a = e.dst;
            acc.args[1] = GenArg::Var(b);
            yes.push(acc);
            yes.push(e.clone());
            yes.push(match twice {
                true => GenOp { dst: b, ..e },
                false => copy(b, a),
            });
            (yes, (a, b))
        },
    )
}

/// Statements for a path taken every time: copies between variables, one expression
/// assigned to two variables, constants, sums that read variables before they are
/// written again, integer operations, masks and, less often, any operation.
pub(super) fn hot_ops() -> impl Strategy<Value = Vec<GenOp>> {
    let chunk = prop_oneof![
        5 => alias(),
        2 => constant().prop_map(|c| vec![c]),
        3 => accumulate().prop_map(|o| vec![o]),
        3 => int_op().prop_map(|o| vec![o]),
        1 => mask().prop_map(|o| vec![o]),
        2 => large_step().prop_map(|o| vec![o]),
        1 => wrapped(),
        1 => op().prop_map(|o| vec![o]),
    ];
    prop::collection::vec(chunk, 0..4).prop_map(|chunks| chunks.concat())
}

/// `xa = xa + k` (or `-`) with a large `k`: a sum that leaves 64 bits after about a
/// thousand iterations, or a few hundred from a large start. Machine code checks, as a
/// counted loop is entered, that its accumulators stay within 64 bits for as many
/// iterations as the counter allows (`opt::bounds::Sum`), and drops their checks: the
/// check must fail where the loop would leave 64 bits, and hold where it would not.
fn large_step() -> impl Strategy<Value = GenOp> {
    let steps = vec![1i64 << 53, -(1i64 << 53), 1 << 62, 3 << 50];
    (
        0..VARS,
        prop::sample::select(vec![Op::Add, Op::Sub]),
        prop::sample::select(steps),
    )
        .prop_map(|(a, op, k)| GenOp {
            dst: a,
            op,
            args: [GenArg::Var(a), GenArg::Int(k)],
        })
}

/// `xa = y OP z; xa = xa & k` with `OP` a sum, difference or product whose operands may be
/// near the ends of 64 bits or past them: only the mask reads what `OP` computes, which
/// machine code computes wrapping, without an overflow check (`opt::bounds::wrapping`).
/// The low bits must be the interpreter's, whether the exact result fits in 64 bits or not
/// (and where `xa` is read before the mask, `OP` is checked as any other).
fn wrapped() -> impl Strategy<Value = Vec<GenOp>> {
    let operand = prop_oneof![
        3 => (0..VARS).prop_map(GenArg::Var),
        2 => Just(GenArg::Counter),
        2 => prop::sample::select(vec![i64::MIN, i64::MAX - 2, 1 << 62, -(1 << 62), 3037000500])
            .prop_map(GenArg::Int),
        1 => Just(GenArg::Big),
    ];
    (
        0..VARS,
        prop::sample::select(vec![Op::Add, Op::Sub, Op::Mul]),
        operand.clone(),
        operand,
        prop::sample::select(vec![1i64, 255, 65535, i64::MAX]),
    )
        .prop_map(|(dst, op, a, b, k)| {
            vec![
                GenOp {
                    dst,
                    op,
                    args: [a, b],
                },
                GenOp {
                    dst,
                    op: Op::And,
                    args: [GenArg::Var(dst), GenArg::Int(k)],
                },
            ]
        })
}

/// Statements that read variables into others: sums, integer operations, and constants.
fn reads() -> impl Strategy<Value = Vec<GenOp>> {
    let one = prop_oneof![
        3 => accumulate(),
        2 => int_op(),
        1 => constant(),
    ];
    prop::collection::vec(one, 0..3)
}

/// `xa = xa + xb` or `xa = xa - xb`.
fn accumulate() -> impl Strategy<Value = GenOp> {
    (
        0..VARS,
        0..VARS,
        prop::sample::select(vec![Op::Add, Op::Sub]),
    )
        .prop_map(|(a, b, op)| GenOp {
            dst: a,
            op,
            args: [GenArg::Var(a), GenArg::Var(b)],
        })
}

/// Statements for a rare path: constants (some large) and the counter into variables,
/// integer operations and, less often, any operation.
fn rare_ops() -> impl Strategy<Value = Vec<GenOp>> {
    let counter = (0..VARS).prop_map(|dst| GenOp {
        dst,
        op: Op::Same,
        args: [GenArg::Counter, GenArg::Int(0)],
    });
    let one = prop_oneof![
        2 => constant(),
        1 => large_constant(),
        2 => counter,
        2 => int_op(),
        1 => op(),
    ];
    prop::collection::vec(one, 1..3)
}

fn branch() -> impl Strategy<Value = Branch> {
    let old = (0i64..80, ops(), ops()).prop_map(|(at, yes, no)| Branch {
        cond: Cond::Below(at),
        yes,
        no,
        tied: None,
    });
    let cond = prop_oneof![
        1 => (0i64..1500).prop_map(Cond::Below),
        2 => (2i64..8).prop_map(Cond::Every),
        2 => (8i64..60).prop_map(Cond::Every),
        1 => Just(Cond::Flip),
    ];
    let new = (cond, then_way(), rare_ops(), prop::bool::weighted(0.75)).prop_map(
        |(cond, (yes, pair), no, tied)| Branch {
            cond,
            yes,
            no,
            tied: tied.then_some(pair),
        },
    );
    prop_oneof![1 => old, 4 => new]
}

fn promotion() -> impl Strategy<Value = Option<(Promoted, usize)>> {
    let value = prop_oneof![
        2 => (1i64..30).prop_map(Promoted::Div),
        1 => (2i64..4).prop_map(Promoted::Mod),
        1 => (4i64..100).prop_map(Promoted::Mod),
        1 => (0..VARS).prop_map(Promoted::Var),
    ];
    prop_oneof![
        2 => Just(None),
        1 => Just(Some((Promoted::Div(7), 0))),
        2 => (value, 0..VARS).prop_map(Some),
    ]
}

/// A mixed piece: a fork that alternates (`i % 2`), takes its rare path every few or many
/// iterations, or changes direction once; or a read from a list of integers and atoms.
fn mixed() -> impl Strategy<Value = Mixed> {
    let cond = prop_oneof![
        2 => Just(Cond::Every(2)),
        2 => (3i64..8).prop_map(Cond::Every),
        2 => (8i64..60).prop_map(Cond::Every),
        1 => (0i64..1500).prop_map(Cond::Below),
    ];
    let odd = prop_oneof![3 => Just(Odd::Atom), 1 => (-3i64..9).prop_map(Odd::List)];
    let fork = (cond, varying(), odd).prop_map(|(cond, hot, odd)| Source::Fork { cond, hot, odd });
    let read = (
        prop::collection::vec(
            prop_oneof![3 => (-3i64..9).prop_map(Some), 1 => Just(None)],
            1..5,
        ),
        0usize..5,
        prop_oneof![2 => Just(None), 1 => (2i64..20).prop_map(Some)],
    )
        .prop_map(|(mut list, at, every)| {
            // At least one atom.
            list.insert(at % (list.len() + 1), None);
            Source::Read { list, every }
        });
    (
        prop_oneof![2 => fork, 1 => read],
        prop_oneof![1 => Just(0usize), 2 => Just(1), 3 => Just(2)],
        0usize..3,
        0..VARS,
        prop::sample::select(vec![Op::Add, Op::Sub, Op::Xor]),
        prop::bool::weighted(0.85),
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(source, carry, subject, acc, op, guarded, promote)| Mixed {
                promote: promote && matches!(source, Source::Read { .. }),
                source,
                carry,
                subject: subject % (carry + 1),
                acc,
                op,
                guarded,
            },
        )
}

/// The iterations a piece runs, its inner loops' included.
fn iterations(seg: &Seg) -> i64 {
    match seg {
        Seg::Ops(_)
        | Seg::Mixed(_)
        | Seg::Ranged(_)
        | Seg::Wrapped(_)
        | Seg::Held(_)
        | Seg::Swing(_)
        | Seg::Heap(_) => 0,
        Seg::Loop { count, body, .. } => {
            count.saturating_mul(1 + body.iter().map(iterations).sum::<i64>())
        }
    }
}

fn ranged() -> impl Strategy<Value = Ranged> {
    (
        prop::sample::select(vec![7i64, 255, 1023]),
        prop::sample::select(vec![
            1i64 << 62,
            (1i64 << 62) + 5,
            i64::MAX - 1,
            -(1i64 << 62),
        ]),
        2i64..6,
        prop_oneof![1 => 2i64..8, 1 => 8i64..40],
        0..VARS,
    )
        .prop_map(|(mask, large, k, every, acc)| Ranged {
            mask,
            large,
            k,
            every,
            acc,
        })
}

fn wrapped_piece() -> impl Strategy<Value = Wrapped> {
    (
        prop::sample::select(vec![Op::Add, Op::Sub, Op::Mul]),
        prop_oneof![2 => (0..VARS).prop_map(GenArg::Var), 1 => Just(GenArg::Counter)],
        prop::sample::select(vec![i64::MAX - 2, i64::MIN, 1i64 << 62, 3037000500]),
        prop::sample::select(vec![1i64, 255, 65535]),
        prop_oneof![1 => 2i64..8, 1 => 8i64..40],
        0..VARS,
    )
        .prop_map(|(op, from, k, mask, every, acc)| Wrapped {
            op,
            from,
            k,
            mask,
            every,
            acc,
        })
}

fn held() -> impl Strategy<Value = Held> {
    let hot = prop_oneof![
        2 => Just(HeldWrite::Nothing),
        1 => (0i64..3).prop_map(HeldWrite::Const),
        1 => Just(HeldWrite::Counter),
        2 => Just(HeldWrite::Acc),
    ];
    (
        0i64..4,
        prop_oneof![1 => 2i64..8, 1 => 8i64..40],
        0..VARS,
        hot,
        any::<bool>(),
    )
        .prop_map(|(index, every, acc, hot, branch)| Held {
            index,
            every,
            acc,
            hot,
            branch,
        })
}

fn swing() -> impl Strategy<Value = Swing> {
    (
        (
            0i64..40,
            prop::sample::select(vec![3i64, 20, 100]),
            prop_oneof![3 => Just(1i64), 1 => 2i64..8],
        ),
        prop::sample::select(vec![Op::Add, Op::Sub, Op::Mul]),
        prop::sample::select(vec![0i64, 1, 3, -2, i64::MAX]),
        0u8..5,
        0..VARS,
    )
        .prop_map(|((start, span, step), op, k, bound, acc)| Swing {
            start,
            span,
            step,
            op,
            k,
            bound,
            acc,
        })
}

fn seg(depth: u32) -> BoxedStrategy<Seg> {
    let straight = prop_oneof![1 => ops(), 2 => hot_ops()].prop_map(Seg::Ops);
    // Depths 0 and 1 are loop bodies (a program's pieces are of depth 2).
    let mixed = mixed().prop_map(Seg::Mixed);
    let ranged = ranged().prop_map(Seg::Ranged);
    let wrapped = wrapped_piece().prop_map(Seg::Wrapped);
    let held = held().prop_map(Seg::Held);
    let swing = swing().prop_map(Seg::Swing);
    let heap = heap_ops().prop_map(Seg::Heap);
    // A call alone in an outer loop's body: the trace inlines it, and a function's branch
    // on the counter fails inside it (`heap::Fork`).
    let call = heap::call().prop_map(|c| Seg::Heap(vec![c]));
    if depth == 0 {
        return prop_oneof![
            5 => straight,
            1 => mixed,
            1 => ranged,
            1 => wrapped,
            1 => held,
            1 => swing,
            5 => heap
        ]
        .boxed();
    }
    // Only outermost loops run long: a trace from an outer loop unrolls its inner loops,
    // and one of thousands of instructions is slow to compile (again for each bridge).
    let count = match depth {
        1 => (0i64..80).boxed(),
        _ => prop_oneof![2 => 0i64..80, 3 => 80i64..1500].boxed(),
    };
    let looped = (
        count,
        prop::collection::vec(seg(depth - 1), 0..3),
        prop_oneof![1 => Just(None), 3 => branch().prop_map(Some)],
        promotion(),
        any::<bool>(),
    )
        .prop_map(|(count, body, branch, promote, until_zero)| {
            let inner: i64 = body.iter().map(iterations).sum();
            Seg::Loop {
                count: count.min(NEST_ITERATIONS / (1 + inner)),
                body,
                branch,
                promote,
                until_zero,
            }
        });
    // An outer loop's body holds straight-line pieces more often than loops, so that long
    // loops with rare paths are common.
    match depth {
        1 => prop_oneof![
            3 => straight,
            2 => looped,
            1 => mixed,
            1 => ranged,
            1 => wrapped,
            1 => held,
            1 => swing,
            3 => heap,
            4 => call
        ]
        .boxed(),
        _ => prop_oneof![2 => straight, 4 => looped, 2 => heap, 1 => between()].boxed(),
    }
}

/// An outer loop whose body is two inner loops with a walk on the tape between them
/// ([`HeapOp::Walk`]), as a Brainfuck program's code between two of its loops: the bridge
/// from the first loop's exit ends at the second's anchor, so it is compiled on its own,
/// by the quick backend on x86-64 (`backend::quick`), and it reads and writes the tape
/// around a pointer that leaves it in the end.
fn between() -> impl Strategy<Value = Seg> {
    let inner = |ops| Seg::Loop {
        count: 12,
        body: vec![Seg::Ops(ops)],
        branch: None,
        promote: None,
        until_zero: false,
    };
    (hot_ops(), heap::walk(), hot_ops(), 40i64..400).prop_map(move |(a, walk, b, count)| {
        Seg::Loop {
            count,
            body: vec![inner(a), Seg::Heap(vec![walk]), inner(b)],
            branch: None,
            promote: None,
            until_zero: false,
        }
    })
}

/// The strategy that generates programs.
pub fn programs() -> impl Strategy<Value = GenProgram> {
    (
        prop::array::uniform5(prop_oneof![9 => -5i64..20, 1 => Just(i64::MAX - 3)]),
        prop::collection::vec(-3i64..9, 1..6),
        prop::collection::vec(seg(2), 1..4),
        prop_oneof![1 => (0..VARS).prop_map(Some), 1 => Just(None)],
        funcs(),
    )
        .prop_map(|(inits, list, segs, result, funcs)| GenProgram {
            inits,
            list,
            segs,
            result,
            funcs,
        })
}

/// Writes generated programs: blocks, with fresh labels.
pub(super) struct Emitter {
    /// The blocks written so far.
    pub(super) out: String,
    /// Statements for the first block: the initial values of the variables that mixed
    /// pieces introduce.
    pub(super) inits: String,
    labels: usize,
    /// The program's functions, which calls name.
    pub(super) funcs: Vec<GenFunc>,
}

impl Emitter {
    pub(super) fn new() -> Emitter {
        Emitter {
            out: String::new(),
            inits: String::new(),
            labels: 0,
            funcs: Vec::new(),
        }
    }

    /// A fresh label starting with `base`.
    pub(super) fn label(&mut self, base: &str) -> String {
        self.labels += 1;
        format!("{base}{}", self.labels)
    }

    /// The argument `a` as written, with `counter` for [`GenArg::Counter`].
    pub(super) fn arg(a: &GenArg, counter: &str) -> String {
        match a {
            GenArg::Var(i) => format!("x{i}"),
            GenArg::Int(n) => n.to_string(),
            GenArg::Big => "1180591620717411303424".to_string(),
            GenArg::Atom => "'a'".to_string(),
            GenArg::Counter => counter.to_string(),
        }
    }

    /// The right-hand side of the statement `o`, with `counter` for [`GenArg::Counter`].
    fn rhs(o: &GenOp, counter: &str) -> String {
        let a = Self::arg(&o.args[0], counter);
        let b = Self::arg(&o.args[1], counter);
        match o.op {
            Op::Same => a,
            Op::Readlist => format!("lst[{b}]"),
            Op::Len => "len(lst)".to_string(),
            op if op.arity() == 1 => format!("{}({a})", op.name()),
            op => match op.infix() {
                Some(infix) => format!("{a} {infix} {b}"),
                None => format!("{}({a}, {b})", op.name()),
            },
        }
    }

    /// Writes the statement `o`, with `counter` for [`GenArg::Counter`].
    pub(super) fn stmt(&mut self, o: &GenOp, counter: &str) {
        let rhs = Self::rhs(o, counter);
        let _ = writeln!(self.out, "    x{} = {rhs}", o.dst);
    }

    /// Emits the mixed piece `m`, continuing at `next`; returns the label it starts at.
    /// Its variables and labels are numbered `n`; the variables start as 0 (the list as
    /// itself), in [`Emitter::inits`].
    fn ranged(&mut self, g: &Ranged, next: &str, counter: &str) -> String {
        self.labels += 1;
        let n = self.labels;
        let (r, acc) = (format!("r{n}"), format!("x{}", g.acc));
        let _ = writeln!(self.inits, "    {r} = 0");
        let _ = writeln!(
            self.out,
            "rng{n}:\n    y{n} = {r} * {k}\n    t{n} = y{n} < 0\n    {acc} = {acc} + t{n}",
            k = g.k,
        );
        let hot = format!("    {r} = {r} + {counter}\n    {r} = {r} & {}\n", g.mask);
        let rare = format!("    {r} = {}\n", g.large);
        self.rare_way(n, (counter, g.every), &hot, &rare, next);
        format!("rng{n}")
    }

    /// Emits the wrapped piece `g`, continuing at `next`; returns the label it starts at.
    fn wrapped(&mut self, g: &Wrapped, next: &str, counter: &str) -> String {
        self.labels += 1;
        let n = self.labels;
        let (y, acc) = (format!("y{n}"), format!("x{}", g.acc));
        let op = GenOp {
            dst: 0,
            op: g.op,
            args: [g.from.clone(), GenArg::Int(g.k)],
        };
        let _ = writeln!(self.out, "wrp{n}:\n    {y} = {}", Self::rhs(&op, counter));
        let hot = format!("    {y} = {y} & {}\n    {acc} = {acc} + {y}\n", g.mask);
        let rare = format!("    {acc} = {acc} + {y}\n");
        self.rare_way(n, (counter, g.every), &hot, &rare, next);
        format!("wrp{n}")
    }

    /// Emits the swinging piece `g`, continuing at `next`; returns the label it starts at.
    fn swing(&mut self, g: &Swing, next: &str, counter: &str) -> String {
        self.labels += 1;
        let n = self.labels;
        let (s, d, acc) = (format!("s{n}"), format!("d{n}"), format!("x{}", g.acc));
        let max = i128::from(i64::MAX);
        let _ = writeln!(
            self.inits,
            "    {s} = {}\n    {d} = {}",
            max - i128::from(g.start),
            g.step
        );
        let bound = match g.bound {
            0 => max.to_string(),
            1 => s.clone(),
            2 => "0".to_string(),
            3 => (max + 1).to_string(),
            _ => (max - 1).to_string(),
        };
        let op = g.op.infix().expect("infix");
        let tests: String = [Op::Lt, Op::Le, Op::Gt, Op::Ge, Op::Eq, Op::Ne]
            .iter()
            .map(|cmp| {
                let cmp = cmp.infix().expect("infix");
                format!("    t{n} = y{n} {cmp} {bound}\n    {acc} = {acc} + t{n}\n")
            })
            .collect();
        let (hi, lo) = (max + i128::from(g.span), max - i128::from(g.span));
        let _ = write!(
            self.out,
            "swg{n}:\n    {s} = {s} + {d}\n    y{n} = {s} {op} {k}\n{tests}    q{n} = {s} - {max}\n    p{n} = {s} - {max}\n    q{n} = q{n} - p{n}\n    \
             q{n} = q{n} + {counter}\n    q{n} = q{n} - 1\n    t{n} = q{n} == 'swing'\n    {acc} = {acc} + t{n}\n    \
             t{n} = q{n} != 'swing'\n    {acc} = {acc} + t{n}\n    r{n} = y{n} % 1009\n    \
             {acc} = {acc} + r{n}\n    u{n} = {s} > {hi}\n    if u{n} goto sdn{n} else goto slo{n}\n\
             sdn{n}:\n    {d} = 0 - {step}\n    goto {next}\n\
             slo{n}:\n    u{n} = {s} < {lo}\n    if u{n} goto sup{n} else goto {next}\n\
             sup{n}:\n    {d} = {step}\n    goto {next}\n",
            k = g.k,
            step = g.step,
        );
        format!("swg{n}")
    }

    /// Emits the held piece `g`, continuing at `next`; returns the label it starts at.
    fn held(&mut self, g: &Held, next: &str, counter: &str) -> String {
        self.labels += 1;
        let n = self.labels;
        let (h, acc, k) = (format!("h{n}"), format!("x{}", g.acc), g.index);
        let _ = writeln!(self.inits, "    {h} = array(4, 1)");
        // Written back into the element, `acc * 3 + acc` under a power-of-two mask would
        // be 0 within 16 iterations: a prime modulus keeps it moving.
        let bound = match g.hot {
            HeldWrite::Acc => "% 65521",
            _ => "& 65535",
        };
        if g.branch {
            let _ = writeln!(
                self.out,
                "hld{n}:\n    z{n} = {h}[{k}]\n    b{n} = z{n} < 3\n    \
                 if b{n} goto hsm{n} else goto hbg{n}\n\
                 hsm{n}:\n    {acc} = {acc} * 3\n    {acc} = {acc} {bound}\n    goto hrw{n}\n\
                 hbg{n}:\n    {acc} = {acc} * 5\n    {acc} = {acc} + 1\n    {acc} = {acc} {bound}\n    \
                 goto hrw{n}\nhrw{n}:",
            );
        } else {
            let _ = writeln!(
                self.out,
                "hld{n}:\n    z{n} = {h}[{k}]\n    t{n} = {acc} * 3\n    t{n} = t{n} + z{n}\n    \
                 {acc} = t{n} {bound}",
            );
        }
        let write = |w: &HeldWrite| match w {
            HeldWrite::Nothing => String::new(),
            HeldWrite::Const(c) => format!("    {h}[{k}] = {c}\n"),
            HeldWrite::Counter => format!("    {h}[{k}] = {counter}\n"),
            HeldWrite::Acc => format!("    {h}[{k}] = {acc}\n"),
        };
        let rare = match g.hot {
            HeldWrite::Counter => HeldWrite::Const(5),
            HeldWrite::Acc => HeldWrite::Nothing,
            _ => HeldWrite::Counter,
        };
        self.rare_way(n, (counter, g.every), &write(&g.hot), &write(&rare), next);
        format!("hld{n}")
    }

    /// Ends a piece numbered `n` with a branch to a rare way every `every`-th iteration of
    /// `counter`: the statements `hot` on the way taken otherwise (block `hot{n}`), `rare`
    /// on the other (`rare{n}`), both going on at `next`.
    fn rare_way(
        &mut self,
        n: usize,
        (counter, every): (&str, i64),
        hot: &str,
        rare: &str,
        next: &str,
    ) {
        let _ = write!(
            self.out,
            "    w{n} = {counter} % {every}\n    if w{n} goto hot{n} else goto rare{n}\n\
             hot{n}:\n{hot}    goto {next}\nrare{n}:\n{rare}    goto {next}\n"
        );
    }

    /// Writes where mixed segment `n`'s `v` comes from, `source`, going on to `use_`;
    /// returns the odd value it may hold, as written.
    fn mixed_source(
        &mut self,
        source: &Source,
        n: usize,
        v: &str,
        use_: &str,
        counter: &str,
    ) -> String {
        match source {
            Source::Fork { cond, hot, odd } => {
                let test = match cond {
                    Cond::Below(at) => format!("{counter} < {at}"),
                    Cond::Every(m) => format!("{counter} % {m}"),
                    Cond::Flip => format!("{counter} % 2"),
                };
                let odd = match odd {
                    Odd::Atom => "'a'".to_string(),
                    Odd::List(k) => format!("[{k}, 'a']"),
                };
                let (hot_way, rare_way) = (format!("hot{n}"), format!("rare{n}"));
                let _ = writeln!(
                    self.out,
                    "    w{n} = {test}\n    if w{n} goto {hot_way} else goto {rare_way}"
                );
                let _ = writeln!(
                    self.out,
                    "{hot_way}:\n    {v} = {}\n    goto {use_}",
                    Self::rhs(hot, counter)
                );
                let _ = writeln!(self.out, "{rare_way}:\n    {v} = {odd}\n    goto {use_}");
                odd
            }
            Source::Read { list, every } => {
                let items: Vec<String> = list
                    .iter()
                    .map(|e| e.map_or("'a'".to_string(), |k| k.to_string()))
                    .collect();
                let _ = writeln!(self.inits, "    ys{n} = [{}]", items.join(", "));
                let len = list.len();
                let _ = match every {
                    None => writeln!(self.out, "    k{n} = {counter} % {len}"),
                    Some(d) => writeln!(
                        self.out,
                        "    k{n} = {counter} // {d}\n    k{n} = k{n} % {len}"
                    ),
                };
                let _ = writeln!(self.out, "    {v} = ys{n}[k{n}]\n    goto {use_}");
                "'a'".to_string()
            }
        }
    }

    fn mixed(&mut self, m: &Mixed, next: &str, counter: &str) -> String {
        self.labels += 1;
        let n = self.labels;
        let (v, prev, old) = (format!("v{n}"), format!("prev{n}"), format!("old{n}"));
        let subject = [&v, &prev, &old][m.subject];
        let acc = format!("x{}", m.acc);
        let (mix, use_, odd_way, int_way) = (
            format!("mix{n}"),
            format!("use{n}"),
            format!("oddway{n}"),
            format!("int{n}"),
        );
        let _ = writeln!(self.inits, "    {v} = 0\n    {prev} = 0\n    {old} = 0");
        // The copies, then where `v` comes from.
        let _ = writeln!(self.out, "{mix}:");
        if m.carry >= 2 {
            let _ = writeln!(self.out, "    {old} = {prev}");
        }
        if m.carry >= 1 {
            let _ = writeln!(self.out, "    {prev} = {v}");
        }
        let odd = self.mixed_source(&m.source, n, &v, &use_, counter);
        // The subject, compared with the odd value (or not), and the two ways that use it.
        let _ = writeln!(self.out, "{use_}:");
        if m.promote {
            let _ = writeln!(self.out, "    promote({subject})");
        }
        if m.guarded {
            let _ = writeln!(
                self.out,
                "    t{n} = {subject} == {odd}\n    if t{n} goto {odd_way} else goto {int_way}"
            );
            let _ = writeln!(self.out, "{odd_way}:");
            let _ = match &m.source {
                Source::Fork {
                    odd: Odd::List(_), ..
                } => writeln!(
                    self.out,
                    "    n{n} = len({subject})\n    {acc} = {acc} + n{n}"
                ),
                _ => writeln!(self.out, "    {acc} = {acc} - {counter}"),
            };
            let _ = writeln!(self.out, "    goto {next}");
        } else {
            let _ = writeln!(self.out, "    goto {int_way}");
        }
        let _ = writeln!(
            self.out,
            "{int_way}:\n    {acc} = {acc} {} {subject}\n    goto {next}",
            m.op.infix().unwrap_or("?")
        );
        mix
    }

    /// Writes a block `label` of `ops` that goes on to `next`.
    fn block(&mut self, label: &str, ops: &[GenOp], counter: &str, next: &str) {
        let _ = writeln!(self.out, "{label}:");
        for o in ops {
            self.stmt(o, counter);
        }
        let _ = writeln!(self.out, "    goto {next}");
    }

    /// Emits `seg`, continuing at `next`; returns the label it starts at.
    fn seg(&mut self, seg: &Seg, next: &str, counter: &str) -> String {
        match seg {
            Seg::Ops(ops) => {
                let l = self.label("s");
                self.block(&l, ops, counter, next);
                l
            }
            Seg::Mixed(m) => self.mixed(m, next, counter),
            Seg::Ranged(r) => self.ranged(r, next, counter),
            Seg::Wrapped(w) => self.wrapped(w, next, counter),
            Seg::Held(g) => self.held(g, next, counter),
            Seg::Swing(g) => self.swing(g, next, counter),
            Seg::Heap(ops) => {
                let l = self.label("h");
                let _ = writeln!(self.out, "{l}:");
                let funcs = self.funcs.clone();
                self.heap(ops, counter, &funcs);
                let _ = writeln!(self.out, "    goto {next}");
                l
            }
            Seg::Loop {
                count,
                body,
                branch,
                promote,
                until_zero,
            } => self.counted_loop(*count, body, branch.as_ref(), promote, *until_zero, next),
        }
    }

    /// Emits a loop of `count` iterations (or until its counter is 0, with `until_zero`)
    /// of `body` (then `branch`, after `promote`), continuing at `next`; returns the label
    /// it starts at.
    fn counted_loop(
        &mut self,
        count: i64,
        body: &[Seg],
        branch: Option<&Branch>,
        promote: &Option<(Promoted, usize)>,
        until_zero: bool,
        next: &str,
    ) -> String {
        let setup = self.label("loop");
        let head = self.label("head");
        let step = self.label("step");
        let i = self.label("i");
        let c = self.label("c");
        // The body's pieces, last first, so that each knows where it goes on.
        let mut after_body = step.clone();
        if let Some(branch) = branch {
            after_body = self.loop_branch(branch, &i, &step);
        }
        for s in body.iter().rev() {
            after_body = self.seg(s, &after_body, &i);
        }
        let first = match promote {
            None => after_body,
            Some((value, into)) => self.loop_promotion(value, *into, &i, &after_body),
        };
        let _ = writeln!(self.out, "{setup}:\n    {i} = {count}\n    goto {head}");
        let test = if until_zero { "!=" } else { ">" };
        let _ = writeln!(
            self.out,
            "{head}:\n    {c} = {i} {test} 0\n    if {c} goto {first} else goto {next}"
        );
        let _ = writeln!(self.out, "{step}:\n    {i} = {i} - 1\n    goto {head}");
        setup
    }

    /// Emits a loop's `branch` on its counter `i`, whose ways go on to `step`; returns the
    /// label of the fork.
    fn loop_branch(&mut self, branch: &Branch, i: &str, step: &str) -> String {
        let Branch {
            cond,
            yes,
            no,
            tied,
        } = branch;
        let fork = self.label("fork");
        let then = self.label("then");
        let els = self.label("else");
        let w = self.label("w");
        // A flag's ways each set it, then go on to the step.
        let flag = matches!(cond, Cond::Flip).then(|| {
            let (f, clear, set) = (self.label("f"), self.label("clear"), self.label("set"));
            let _ = writeln!(self.inits, "    {f} = 0");
            let _ = writeln!(self.out, "{clear}:\n    {f} = 0\n    goto {step}");
            let _ = writeln!(self.out, "{set}:\n    {f} = 1\n    goto {step}");
            (f, clear, set)
        });
        let (then_next, else_next) = match &flag {
            Some((_, clear, set)) => (clear.clone(), set.clone()),
            None => (step.to_string(), step.to_string()),
        };
        self.block(&then, yes, i, &then_next);
        let no: Vec<GenOp> = match tied {
            Some((a, b)) => no
                .iter()
                .map(|o| GenOp {
                    dst: if o.dst % 2 == 0 { *a } else { *b },
                    ..o.clone()
                })
                .collect(),
            None => no.clone(),
        };
        self.block(&els, &no, i, &else_next);
        let test = match (cond, &flag) {
            (_, Some((f, _, _))) => f.clone(),
            (Cond::Below(at), None) => format!("{i} < {at}"),
            (Cond::Every(m), None) => format!("{i} % {m}"),
            (Cond::Flip, None) => format!("{i} % 2"),
        };
        let _ = writeln!(
            self.out,
            "{fork}:\n    {w} = {test}\n    if {w} goto {then} else goto {els}"
        );
        fork
    }

    /// Emits a loop's promotion of `value` (into `x{into}`) on its counter `i`, going on to
    /// `after`; returns its label.
    fn loop_promotion(&mut self, value: &Promoted, into: usize, i: &str, after: &str) -> String {
        let p = self.label("promote");
        let _ = writeln!(self.out, "{p}:");
        let _ = match value {
            Promoted::Div(k) => writeln!(
                self.out,
                "    p = {i} // {k}\n    promote(p)\n    x{into} = x{into} + p"
            ),
            Promoted::Mod(m) => writeln!(
                self.out,
                "    p = {i} % {m}\n    promote(p)\n    x{into} = x{into} + p"
            ),
            Promoted::Var(v) => writeln!(self.out, "    promote(x{v})"),
        };
        let _ = writeln!(self.out, "    goto {after}");
        p
    }
}

/// The statements of the first block: `x0..x4` and `lst`.
pub(super) fn prologue(inits: &[i64; 5], list: &[i64]) -> String {
    let mut start = String::new();
    for (k, v) in inits.iter().enumerate() {
        let _ = writeln!(start, "    x{k} = {v}");
    }
    let items: Vec<String> = list.iter().map(i64::to_string).collect();
    let _ = writeln!(start, "    lst = [{}]", items.join(", "));
    start
}

/// The statements of the last block: prints `x{result}`, or the digest of every variable.
pub(super) fn epilogue(result: Option<usize>) -> String {
    match result {
        Some(n) => format!("    print_and_stop(x{n})"),
        None => {
            let mut s = String::from("    r = x0\n");
            for k in 1..VARS {
                let _ = writeln!(s, "    r = r * 1000003\n    r = r + x{k}");
            }
            s + "    print_and_stop(r)"
        }
    }
}

impl GenProgram {
    /// The program in the readable syntax; its first block is the entry.
    pub fn text(&self) -> String {
        let mut e = Emitter::new();
        e.funcs = self.funcs.clone();
        let mut next = "end".to_string();
        for s in self.segs.iter().rev() {
            next = e.seg(s, &next, "x0");
        }
        let start = format!(
            "start:\n{}{}{}    goto {next}\n",
            prologue(&self.inits, &self.list),
            heap::prologue(&self.funcs),
            e.inits
        );
        let _ = writeln!(e.out, "end:\n{}", epilogue(self.result));
        e.funcs(&self.funcs);
        start + &e.out
    }
}
