//! The primitive operations of the flowgraph language, defined once.
//!
//! [`Op`] is generated from one table (name, arity, infix spelling, commutativity), in the
//! manner of LuaJIT's `lj_ir.h`: parsers, printers, the checker, the trace recorder and the
//! constant folder all read the same table. [`apply1`] and [`apply2`] are the exact semantics:
//! integers are unbounded, with a 64-bit fast path that falls back to big integers when a
//! result does not fit.

use std::fmt;

use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::{Signed, ToPrimitive, Zero};

use crate::Value;

/// The largest left shift flowjit performs: a result of more than 2^24 bits (2 MiB) is
/// refused with [`OpError::ShiftTooLarge`] instead of exhausting memory.
pub const MAX_SHIFT: u64 = 1 << 24;

/// The most bits an integer may have (of its magnitude, as `BigInt::bits` counts them): an
/// operation whose result is larger fails with [`OpError::TooLarge`] instead of exhausting
/// memory, refused before it is computed when its size must pass the limit. 2^24 bits is an
/// integer of about five million decimal digits (5,050,446 at most).
pub const MAX_BITS: u64 = 1 << 24;

macro_rules! ops {
    ($($(#[$doc:meta])* $variant:ident = $name:literal, $arity:literal, $infix:expr, $commutative:literal;)*) => {
        /// A primitive operation.
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
        pub enum Op {
            $($(#[$doc])* $variant,)*
        }

        impl Op {
            /// Every operation, in table order.
            pub const ALL: &'static [Op] = &[$(Op::$variant,)*];

            /// The operation's name, as the Prolog syntax and `name(args)` spell it.
            pub const fn name(self) -> &'static str {
                match self { $(Op::$variant => $name,)* }
            }

            /// How many arguments the operation takes.
            pub const fn arity(self) -> usize {
                match self { $(Op::$variant => $arity,)* }
            }

            /// The infix operator of the readable syntax, if the operation has one.
            pub const fn infix(self) -> Option<&'static str> {
                match self { $(Op::$variant => $infix,)* }
            }

            /// Whether `op(a, b) == op(b, a)` for all arguments.
            pub const fn is_commutative(self) -> bool {
                match self { $(Op::$variant => $commutative,)* }
            }

            /// The operation called `name`, if there is one.
            pub fn from_name(name: &str) -> Option<Op> {
                match name { $($name => Some(Op::$variant),)* _ => None }
            }

            /// The operation spelled `symbol` as an infix operator, if there is one.
            pub fn from_infix(symbol: &str) -> Option<Op> {
                Op::ALL.iter().copied().find(|op| op.infix() == Some(symbol))
            }
        }
    };
}

ops! {
    /// `same(x)`: `x`.
    Same = "same", 1, None, false;
    /// `add(a, b)`: `a + b`.
    Add = "add", 2, Some("+"), true;
    /// `sub(a, b)`: `a - b`.
    Sub = "sub", 2, Some("-"), false;
    /// `mul(a, b)`: `a * b`.
    Mul = "mul", 2, Some("*"), true;
    /// `eq(a, b)`: 1 if structurally equal, else 0; any values.
    Eq = "eq", 2, Some("=="), true;
    /// `ge(a, b)`: 1 if `a >= b`, else 0.
    Ge = "ge", 2, Some(">="), false;
    /// `readlist(list, i)`: the element at 0-based index `i`.
    Readlist = "readlist", 2, None, false;
    /// `ne(a, b)`: 1 if not structurally equal, else 0.
    Ne = "ne", 2, Some("!="), true;
    /// `lt(a, b)`: 1 if `a < b`, else 0.
    Lt = "lt", 2, Some("<"), false;
    /// `le(a, b)`: 1 if `a <= b`, else 0.
    Le = "le", 2, Some("<="), false;
    /// `gt(a, b)`: 1 if `a > b`, else 0.
    Gt = "gt", 2, Some(">"), false;
    /// `div(a, b)`: floor division (Python's `//`).
    Div = "div", 2, Some("//"), false;
    /// `mod(a, b)`: the remainder of floor division (Python's `%`); its sign is `b`'s.
    Mod = "mod", 2, Some("%"), false;
    /// `and(a, b)`: bitwise and, two's complement, unbounded.
    And = "and", 2, Some("&"), true;
    /// `or(a, b)`: bitwise or.
    Or = "or", 2, Some("|"), true;
    /// `xor(a, b)`: bitwise exclusive or.
    Xor = "xor", 2, Some("^"), true;
    /// `shl(a, n)`: `a * 2^n`; `n` must not be negative.
    Shl = "shl", 2, Some("<<"), false;
    /// `shr(a, n)`: `floor(a / 2^n)`; `n` must not be negative.
    Shr = "shr", 2, Some(">>"), false;
    /// `neg(a)`: `-a`.
    Neg = "neg", 1, None, false;
    /// `not(a)`: 1 if `a == 0`, else 0.
    Not = "not", 1, None, false;
    /// `len(x)`: the number of elements of a list or an array.
    Len = "len", 1, None, false;
    /// `array(n, init)`: a new array of `n` elements, each `init`.
    Array = "array", 2, None, false;
    /// `tolist(a)`: a new list holding an array's elements.
    ToList = "tolist", 1, None, false;
    /// `toarray(x)`: a new array holding a list's or an array's elements.
    ToArray = "toarray", 1, None, false;
}

impl Op {
    /// Whether the operation makes a new array: its result is a new identity each time, so
    /// two of them with the same arguments are not the same value, and it is never
    /// computed ahead of time.
    pub const fn allocates(self) -> bool {
        matches!(self, Op::Array | Op::ToArray)
    }

    /// For a comparison `a OP b`, the one that says the same of `b` and `a` (`<` for `>`).
    pub const fn flipped(self) -> Option<Op> {
        Some(match self {
            Op::Lt => Op::Gt,
            Op::Le => Op::Ge,
            Op::Gt => Op::Lt,
            Op::Ge => Op::Le,
            Op::Eq | Op::Ne => self,
            _ => return None,
        })
    }

    /// For a comparison, the one that holds when it does not (`>=` for `<`).
    pub const fn negated(self) -> Option<Op> {
        Some(match self {
            Op::Lt => Op::Ge,
            Op::Le => Op::Gt,
            Op::Gt => Op::Le,
            Op::Ge => Op::Lt,
            Op::Eq => Op::Ne,
            Op::Ne => Op::Eq,
            _ => return None,
        })
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why an operation failed. The `Display` form is the message after `error: `.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    /// An argument of the wrong kind.
    #[error("type error: {op} expects {expected}, got {}", describe(.got))]
    Type {
        /// The operation.
        op: Op,
        /// What it expects, such as `an integer` or `a list`.
        expected: &'static str,
        /// What it got.
        got: Value,
    },
    /// `readlist` or `setitem` with an index outside the list or array.
    #[error("{}: index {index} out of range for {} of length {len}", access.op(), access.what())]
    IndexOutOfRange {
        /// What was accessed, how.
        access: Access,
        /// The index.
        index: Value,
        /// The list's or array's length.
        len: usize,
    },
    /// `setitem` of something that is not an array, or with an index that is not an
    /// integer.
    #[error("type error: setitem expects {expected}, got {}{}", describe(.got), if matches!(.got, Value::List(_)) { " (lists are immutable)" } else { "" })]
    StoreType {
        /// What it expects.
        expected: &'static str,
        /// What it got.
        got: Value,
    },
    /// `array` with a negative size.
    #[error("array: negative size {size}")]
    NegativeSize {
        /// The size asked for.
        size: Value,
    },
    /// `array` with more than [`MAX_ARRAY_LEN`](crate::array::MAX_ARRAY_LEN) elements.
    #[error(
        "array: size {size} too large (at most {} elements)",
        crate::array::MAX_ARRAY_LEN
    )]
    SizeTooLarge {
        /// The size asked for.
        size: Value,
    },
    /// `div` or `mod` by zero.
    #[error("division by zero in {op}")]
    DivisionByZero {
        /// The operation.
        op: Op,
    },
    /// `shl` or `shr` by a negative count.
    #[error("negative shift count {count} in {op}")]
    NegativeShift {
        /// The operation.
        op: Op,
        /// The count.
        count: Value,
    },
    /// `shl` by more than [`MAX_SHIFT`] bits.
    #[error("shift count {count} too large in shl (at most {MAX_SHIFT})")]
    ShiftTooLarge {
        /// The count.
        count: Value,
    },
    /// A result with more than [`MAX_BITS`] bits.
    #[error("integer result of {op} too large (more than {MAX_BITS} bits)")]
    TooLarge {
        /// The operation.
        op: Op,
    },
}

/// An access by index, for [`OpError::IndexOutOfRange`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// `readlist` of a list.
    ReadList,
    /// `readlist` of an array.
    ReadArray,
    /// `setitem` of an array.
    StoreArray,
}

impl Access {
    /// The operation: `readlist` or `setitem`.
    pub const fn op(self) -> &'static str {
        match self {
            Access::ReadList | Access::ReadArray => "readlist",
            Access::StoreArray => "setitem",
        }
    }

    /// What it accessed: `a list` or `an array`.
    pub const fn what(self) -> &'static str {
        match self {
            Access::ReadList => "a list",
            Access::ReadArray | Access::StoreArray => "an array",
        }
    }
}

/// `the atom foo`, `the list [1,2]`, `the integer 3`; long values are shortened.
fn describe(v: &Value) -> String {
    format!("the {} {}", v.kind(), shown(v))
}

/// `v` as it prints, for an error message: shortened to 60 characters (`...` at the end)
/// when longer. Only what is shown is formatted: a value that prints as gigabytes costs no
/// more than a short one.
pub fn shown(v: &Value) -> String {
    shown_within(v, 60)
}

/// `v` as it prints, shortened to `limit` characters (at least 4; `...` at the end) when
/// longer, formatting only what is shown.
pub fn shown_within(v: &Value, limit: usize) -> String {
    let limit = limit.max(4);
    /// Keeps the first `room` bytes written, then refuses the rest.
    struct Prefix {
        text: String,
        room: usize,
    }
    impl fmt::Write for Prefix {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            if s.len() > self.room {
                let mut cut = self.room;
                while !s.is_char_boundary(cut) {
                    cut -= 1;
                }
                self.text.push_str(&s[..cut]);
                self.room = 0;
                return Err(fmt::Error);
            }
            self.text.push_str(s);
            self.room -= s.len();
            Ok(())
        }
    }
    let mut prefix = Prefix {
        text: String::new(),
        room: limit + 1,
    };
    let cut_short = fmt::Write::write_fmt(&mut prefix, format_args!("{v}")).is_err();
    let mut text = prefix.text;
    if cut_short || text.len() > limit {
        let mut cut = limit - 3;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

fn type_error(op: Op, expected: &'static str, got: &Value) -> OpError {
    OpError::Type {
        op,
        expected,
        got: got.clone(),
    }
}

fn bool_value(b: bool) -> Value {
    Value::Int(b as i64)
}

/// Applies a one-argument operation.
///
/// # Panics
/// If `op` does not take one argument; the checker rejects such programs before they run.
#[inline]
pub fn apply1(op: Op, a: &Value) -> Result<Value, OpError> {
    match (op, a) {
        (Op::Same, _) => Ok(a.clone()),
        (Op::Neg, Value::Int(x)) => Ok(match x.checked_neg() {
            Some(r) => Value::Int(r),
            None => Value::from_bigint(-BigInt::from(*x)),
        }),
        (Op::Neg, Value::Big(x)) => Ok(Value::from_bigint(-(**x).clone())),
        (Op::Not, Value::Int(x)) => Ok(bool_value(*x == 0)),
        (Op::Not, Value::Big(_)) => Ok(Value::Int(0)),
        (Op::Neg | Op::Not, _) => Err(type_error(op, "an integer", a)),
        (Op::Len, Value::List(l)) => Ok(Value::Int(l.len() as i64)),
        (Op::Len, Value::Array(x)) => Ok(Value::Int(x.len() as i64)),
        (Op::Len, _) => Err(type_error(op, "a list or an array", a)),
        (Op::ToList, Value::Array(x)) => Ok(Value::list(x.to_vec())),
        (Op::ToList, _) => Err(type_error(op, "an array", a)),
        (Op::ToArray, Value::Array(x)) => Ok(Value::array(x.to_vec())),
        (Op::ToArray, Value::List(l)) => Ok(Value::array(l.to_vec())),
        (Op::ToArray, _) => Err(type_error(op, "a list or an array", a)),
        _ => panic!("{op} does not take one argument"),
    }
}

/// The 64-bit fast path of a two-argument operation: its result when both arguments are
/// 64-bit integers and the result is one too, `None` when the full [`apply2`] is needed
/// (overflow, division by zero, a negative or large shift count, `readlist`). The result
/// stays in registers, which keeps the interpreter's inner loop free of stores and reloads
/// of a `Result`. Division and remainder round towards negative infinity, and `>>` too, as
/// [`apply2`] does on integers of any size.
#[inline(always)]
pub fn apply2_int(op: Op, x: i64, y: i64) -> Option<i64> {
    match op {
        Op::Add => x.checked_add(y),
        Op::Sub => x.checked_sub(y),
        Op::Mul => x.checked_mul(y),
        Op::Eq => Some((x == y) as i64),
        Op::Ne => Some((x != y) as i64),
        Op::Ge => Some((x >= y) as i64),
        Op::Lt => Some((x < y) as i64),
        Op::Le => Some((x <= y) as i64),
        Op::Gt => Some((x > y) as i64),
        Op::And => Some(x & y),
        Op::Or => Some(x | y),
        Op::Xor => Some(x ^ y),
        Op::Div => {
            // `checked_div` refuses a zero divisor and `i64::MIN / -1`.
            let q = x.checked_div(y)?;
            Some(if x % y != 0 && (x < 0) != (y < 0) {
                q - 1
            } else {
                q
            })
        }
        Op::Mod => {
            let r = x.checked_rem(y)?;
            Some(if r != 0 && (r < 0) != (y < 0) {
                r + y
            } else {
                r
            })
        }
        Op::Shr => match y {
            0..=63 => Some(x >> y),
            64.. => Some(if x < 0 { -1 } else { 0 }),
            _ => None,
        },
        Op::Shl => match y {
            0..=63 => {
                let r = x << y;
                (r >> y == x).then_some(r)
            }
            _ => None,
        },
        _ => None,
    }
}

/// Applies a two-argument operation.
///
/// # Panics
/// If `op` does not take two arguments; the checker rejects such programs before they run.
#[inline]
pub fn apply2(op: Op, a: &Value, b: &Value) -> Result<Value, OpError> {
    if let (Value::Int(x), Value::Int(y)) = (a, b) {
        if let Some(r) = apply2_int(op, *x, *y) {
            return Ok(Value::Int(r));
        }
    }
    apply2_slow(op, a, b)
}

#[cold]
fn apply2_slow(op: Op, a: &Value, b: &Value) -> Result<Value, OpError> {
    match op {
        Op::Eq => return Ok(bool_value(a == b)),
        Op::Ne => return Ok(bool_value(a != b)),
        Op::Readlist => return readlist(a, b),
        Op::Array => return new_array(a, b),
        _ => {}
    }
    let (Some(x), Some(y)) = (a.to_bigint(), b.to_bigint()) else {
        let culprit = if a.is_int() { b } else { a };
        return Err(type_error(op, "integers", culprit));
    };
    let (x, y) = (x.as_ref(), y.as_ref());
    refuse_past_the_limit(op, x, y, b)?;
    let result = match op {
        Op::Add => x + y,
        Op::Sub => x - y,
        Op::Mul => x * y,
        Op::Ge => return Ok(bool_value(x >= y)),
        Op::Lt => return Ok(bool_value(x < y)),
        Op::Le => return Ok(bool_value(x <= y)),
        Op::Gt => return Ok(bool_value(x > y)),
        Op::Div | Op::Mod if y.is_zero() => return Err(OpError::DivisionByZero { op }),
        Op::Div => x.div_floor(y),
        Op::Mod => x.mod_floor(y),
        Op::And => x & y,
        Op::Or => x | y,
        Op::Xor => x ^ y,
        Op::Shl | Op::Shr if y.is_negative() => {
            return Err(OpError::NegativeShift {
                op,
                count: b.clone(),
            })
        }
        Op::Shl => match y.to_u64() {
            _ if x.is_zero() => BigInt::zero(),
            Some(n) if n <= MAX_SHIFT => x << n,
            _ => return Err(OpError::ShiftTooLarge { count: b.clone() }),
        },
        // `>>` on a BigInt rounds towards negative infinity, like Python's.
        Op::Shr => match y.to_u64() {
            Some(n) => x >> n,
            None if x.is_negative() => BigInt::from(-1),
            None => BigInt::zero(),
        },
        _ => panic!("{op} does not take two arguments"),
    };
    // What the bound lets through may still be one bit past the limit.
    if result.bits() > MAX_BITS {
        return Err(OpError::TooLarge { op });
    }
    Ok(Value::from_bigint(result))
}

/// Refuses, before it is computed, a result of `op` that must have more than [`MAX_BITS`]
/// bits; what is left is computed and its size checked. `count` is `y` as a value, for the
/// message of a shift count too large.
///
/// The bound is the result's *least* possible size, so that a small result of large
/// operands (`x - 1`, `x & 255`, `x ^ x` for `x` of 2^24 bits) is never refused. Whatever is
/// computed then has at most one bit past the limit, for operands within it: `add`, `sub`,
/// `and`, `or` and `xor` give at most one bit more than their larger operand, `div`, `mod`
/// and `shr` never more; a product of `a` and `b` bits has `a + b - 1` or `a + b` bits, and
/// `x << n` exactly `n` more than `x`.
fn refuse_past_the_limit(op: Op, x: &BigInt, y: &BigInt, count: &Value) -> Result<(), OpError> {
    if x.is_zero() {
        return Ok(());
    }
    match op {
        Op::Mul if !y.is_zero() && x.bits() + y.bits() - 1 > MAX_BITS => {
            Err(OpError::TooLarge { op })
        }
        Op::Shl if !y.is_negative() => match y.to_u64() {
            Some(n) if n <= MAX_SHIFT && x.bits() + n <= MAX_BITS => Ok(()),
            Some(n) if n <= MAX_SHIFT => Err(OpError::TooLarge { op }),
            _ => Err(OpError::ShiftTooLarge {
                count: count.clone(),
            }),
        },
        _ => Ok(()),
    }
}

fn readlist(seq: &Value, index: &Value) -> Result<Value, OpError> {
    if !matches!(seq, Value::List(_) | Value::Array(_)) {
        return Err(type_error(
            Op::Readlist,
            "a list or an array as its first argument",
            seq,
        ));
    }
    if !index.is_int() {
        return Err(type_error(
            Op::Readlist,
            "an integer index as its second argument",
            index,
        ));
    }
    let i = match index {
        Value::Int(i) => usize::try_from(*i).ok(),
        _ => None,
    };
    let (found, access, len) = match seq {
        Value::List(l) => (i.and_then(|i| l.get(i)).cloned(), Access::ReadList, l.len()),
        Value::Array(a) => (i.and_then(|i| a.get(i)), Access::ReadArray, a.len()),
        _ => unreachable!("checked above"),
    };
    found.ok_or_else(|| OpError::IndexOutOfRange {
        access,
        index: index.clone(),
        len,
    })
}

/// `array(n, init)`.
fn new_array(size: &Value, init: &Value) -> Result<Value, OpError> {
    let n = match size {
        Value::Int(n) if *n < 0 => return Err(OpError::NegativeSize { size: size.clone() }),
        Value::Big(n) if n.sign() == num_bigint::Sign::Minus => {
            return Err(OpError::NegativeSize { size: size.clone() })
        }
        Value::Int(n) => *n as u64,
        Value::Big(_) => u64::MAX,
        _ => return Err(type_error(Op::Array, "an integer size", size)),
    };
    if n > crate::array::MAX_ARRAY_LEN as u64 {
        return Err(OpError::SizeTooLarge { size: size.clone() });
    }
    Ok(match *init {
        Value::Int(k) => Value::Array(crate::Array::ints(n as usize, k)),
        _ => Value::array(vec![init.clone(); n as usize]),
    })
}

/// `setitem(a, i, v)`: stores `v` at index `i` of array `a`.
pub fn setitem(array: &Value, index: &Value, value: Value) -> Result<(), OpError> {
    let Value::Array(a) = array else {
        return Err(OpError::StoreType {
            expected: "an array as its first argument",
            got: array.clone(),
        });
    };
    let stored = match index {
        Value::Int(i) => usize::try_from(*i).is_ok_and(|i| a.set(i, value)),
        Value::Big(_) => false,
        _ => {
            return Err(OpError::StoreType {
                expected: "an integer index as its second argument",
                got: index.clone(),
            })
        }
    };
    if stored {
        Ok(())
    } else {
        Err(OpError::IndexOutOfRange {
            access: Access::StoreArray,
            index: index.clone(),
            len: a.len(),
        })
    }
}

/// Applies `op` to `args`, which must have `op.arity()` elements.
pub fn apply(op: Op, args: &[Value]) -> Result<Value, OpError> {
    match args {
        [a] => apply1(op, a),
        [a, b] => apply2(op, a, b),
        _ => panic!("{op} given {} arguments", args.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(n: i64) -> Value {
        Value::Int(n)
    }

    fn big(s: &str) -> Value {
        Value::from_bigint(s.parse().unwrap())
    }

    #[test]
    fn table_round_trips_names_and_symbols() {
        for &op in Op::ALL {
            assert_eq!(Op::from_name(op.name()), Some(op));
            if let Some(sym) = op.infix() {
                assert_eq!(Op::from_infix(sym), Some(op));
            }
        }
    }

    #[test]
    fn arithmetic_leaves_64_bits_exactly() {
        assert_eq!(
            apply2(Op::Add, &int(i64::MAX), &int(1)),
            Ok(big("9223372036854775808"))
        );
        assert_eq!(
            apply2(Op::Sub, &int(i64::MIN), &int(1)),
            Ok(big("-9223372036854775809"))
        );
        assert_eq!(
            apply2(Op::Mul, &int(10_000_000_000), &int(10_000_000_000)),
            Ok(big("100000000000000000000"))
        );
        // ...and comes back to the fast path when the result fits again.
        assert_eq!(
            apply2(Op::Sub, &big("9223372036854775808"), &int(1)),
            Ok(int(i64::MAX))
        );
        assert_eq!(
            apply1(Op::Neg, &int(i64::MIN)),
            Ok(big("9223372036854775808"))
        );
    }

    #[test]
    fn division_floors_like_python() {
        let cases = [
            (7, 2, 3, 1),
            (-7, 2, -4, 1),
            (7, -2, -4, -1),
            (-7, -2, 3, -1),
            (6, 3, 2, 0),
        ];
        for (a, b, q, r) in cases {
            assert_eq!(apply2(Op::Div, &int(a), &int(b)), Ok(int(q)), "{a} // {b}");
            assert_eq!(apply2(Op::Mod, &int(a), &int(b)), Ok(int(r)), "{a} % {b}");
        }
        assert_eq!(
            apply2(Op::Div, &int(i64::MIN), &int(-1)),
            Ok(big("9223372036854775808"))
        );
        assert_eq!(apply2(Op::Mod, &int(i64::MIN), &int(-1)), Ok(int(0)));
        assert_eq!(
            apply2(Op::Div, &int(1), &int(0)),
            Err(OpError::DivisionByZero { op: Op::Div })
        );
    }

    #[test]
    fn the_64_bit_fast_path_agrees_with_integers_of_any_size() {
        let edges = [
            i64::MIN,
            i64::MIN + 1,
            -(1 << 32),
            -65,
            -64,
            -63,
            -7,
            -2,
            -1,
            0,
            1,
            2,
            3,
            7,
            62,
            63,
            64,
            65,
            1 << 32,
            i64::MAX - 1,
            i64::MAX,
        ];
        for &op in Op::ALL {
            for &x in &edges {
                for &y in &edges {
                    if let Some(r) = apply2_int(op, x, y) {
                        assert_eq!(
                            apply2_slow(op, &int(x), &int(y)),
                            Ok(int(r)),
                            "{x} {op} {y}"
                        );
                    }
                }
            }
        }
        // Where the result leaves 64 bits or is an error, the fast path leaves it.
        assert_eq!(apply2_int(Op::Div, i64::MIN, -1), None);
        assert_eq!(apply2_int(Op::Mod, 1, 0), None);
        assert_eq!(apply2_int(Op::Shl, 1, 63), None);
        assert_eq!(apply2_int(Op::Shr, 1, -1), None);
    }

    #[test]
    fn bitwise_is_twos_complement_and_unbounded() {
        assert_eq!(apply2(Op::And, &int(-1), &int(12)), Ok(int(12)));
        assert_eq!(
            apply2(Op::Shl, &int(1), &int(64)),
            Ok(big("18446744073709551616"))
        );
        assert_eq!(apply2(Op::Shl, &int(-3), &int(2)), Ok(int(-12)));
        assert_eq!(apply2(Op::Shr, &int(-7), &int(1)), Ok(int(-4)));
        assert_eq!(apply2(Op::Shr, &int(-7), &int(100)), Ok(int(-1)));
        assert_eq!(
            apply2(Op::Shr, &big("-18446744073709551617"), &int(64)),
            Ok(int(-2))
        );
        assert_eq!(
            apply2(Op::Xor, &big("18446744073709551616"), &int(1)),
            Ok(big("18446744073709551617"))
        );
        assert!(matches!(
            apply2(Op::Shl, &int(1), &int(-1)),
            Err(OpError::NegativeShift { .. })
        ));
        assert!(matches!(
            apply2(Op::Shl, &int(1), &big("100000000000000000000")),
            Err(OpError::ShiftTooLarge { .. })
        ));
        assert_eq!(
            apply2(Op::Shl, &int(0), &big("100000000000000000000")),
            Ok(int(0))
        );
    }

    #[test]
    fn results_past_the_size_limit_are_refused_before_they_are_computed() {
        let huge = apply2(Op::Shl, &int(1), &int(MAX_BITS as i64 - 2)).unwrap();
        assert!(apply2(Op::Add, &huge, &huge).is_ok());
        assert_eq!(
            apply2(Op::Mul, &huge, &huge),
            Err(OpError::TooLarge { op: Op::Mul })
        );
        assert_eq!(
            apply2(Op::Mul, &huge, &huge).unwrap_err().to_string(),
            "integer result of mul too large (more than 16777216 bits)"
        );
        assert_eq!(
            apply2(Op::Shl, &huge, &int(10)),
            Err(OpError::TooLarge { op: Op::Shl })
        );
    }

    #[test]
    fn small_results_of_operands_at_the_size_limit_are_not_refused() {
        // x has exactly MAX_BITS bits, the most an integer may have.
        let x = apply2(Op::Shl, &int(1), &int(MAX_BITS as i64 - 1)).unwrap();
        let y = apply2(Op::Sub, &x, &int(1)).unwrap();
        assert_eq!(apply2(Op::Add, &y, &int(1)), Ok(x.clone()));
        assert_eq!(apply2(Op::And, &x, &int(255)), Ok(int(0)));
        assert_eq!(apply2(Op::And, &y, &int(255)), Ok(int(255)));
        assert_eq!(apply2(Op::Xor, &x, &x), Ok(int(0)));
        assert_eq!(apply2(Op::Sub, &x, &x), Ok(int(0)));
        let x_or_1 = apply2(Op::Or, &x, &int(1)).unwrap();
        assert_eq!(apply2(Op::Sub, &x_or_1, &x), Ok(int(1)));
        assert_eq!(apply2(Op::Mul, &x, &int(1)), Ok(x.clone()));
        assert_eq!(apply2(Op::Mul, &x, &int(-1)), apply1(Op::Neg, &x));
        assert_eq!(apply2(Op::Div, &x, &x), Ok(int(1)));
        assert_eq!(
            apply2(Op::Shl, &int(-1), &int(MAX_BITS as i64 - 1)),
            apply1(Op::Neg, &x)
        );
        // One bit more is refused, with the message of a result too large.
        for (op, a, b) in [
            (Op::Add, &x, &x),
            (Op::Sub, &apply1(Op::Neg, &x).unwrap(), &x),
            (Op::Mul, &x, &int(2)),
            (Op::Shl, &x, &int(1)),
        ] {
            let err = apply2(op, a, b).unwrap_err();
            assert_eq!(err, OpError::TooLarge { op });
            assert_eq!(
                err.to_string(),
                format!("integer result of {op} too large (more than 16777216 bits)")
            );
        }
        // Two's complement: the and of two negative numbers can grow by a bit.
        let minus_x = apply1(Op::Neg, &x).unwrap();
        let r = apply2(
            Op::And,
            &minus_x,
            &apply2(Op::Sub, &minus_x, &int(1)).unwrap(),
        );
        assert_eq!(r, Err(OpError::TooLarge { op: Op::And }));
    }

    #[test]
    fn products_that_must_pass_the_size_limit_are_refused_before_they_are_computed() {
        // Two numbers of 2^23 bits: a product of 2^24 - 1 or 2^24 bits, which fits.
        let half = apply2(Op::Shl, &int(1), &int(MAX_BITS as i64 / 2 - 1)).unwrap();
        assert!(apply2(Op::Mul, &half, &half).is_ok());
        // Of 2^23 + 1 bits each: at least 2^24 + 1 bits, refused without multiplying.
        let more = apply2(Op::Shl, &int(1), &int(MAX_BITS as i64 / 2)).unwrap();
        assert_eq!(
            apply2(Op::Mul, &more, &more),
            Err(OpError::TooLarge { op: Op::Mul })
        );
        let x = apply2(Op::Shl, &int(1), &int(MAX_BITS as i64 - 1)).unwrap();
        assert_eq!(
            apply2(Op::Mul, &x, &x),
            Err(OpError::TooLarge { op: Op::Mul })
        );
    }

    #[test]
    fn comparisons_and_equality() {
        assert_eq!(
            apply2(Op::Ge, &big("100000000000000000000"), &int(5)),
            Ok(int(1))
        );
        assert_eq!(
            apply2(Op::Eq, &Value::atom("a"), &Value::atom("a")),
            Ok(int(1))
        );
        assert_eq!(apply2(Op::Eq, &Value::atom("a"), &int(1)), Ok(int(0)));
        let l = Value::list(vec![int(1), Value::atom("x")]);
        assert_eq!(apply2(Op::Eq, &l, &l.clone()), Ok(int(1)));
        let err = apply2(Op::Ge, &Value::atom("a"), &int(1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "type error: ge expects integers, got the atom a"
        );
    }

    #[test]
    fn readlist_checks_its_index() {
        let l = Value::list(vec![int(10), int(20)]);
        assert_eq!(apply2(Op::Readlist, &l, &int(1)), Ok(int(20)));
        let err = apply2(Op::Readlist, &l, &int(2)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "readlist: index 2 out of range for a list of length 2"
        );
        assert!(apply2(Op::Readlist, &l, &int(-1)).is_err());
        assert!(matches!(
            apply2(Op::Readlist, &int(1), &int(0)),
            Err(OpError::Type { .. })
        ));
        assert_eq!(apply1(Op::Len, &l), Ok(int(2)));
        assert_eq!(apply1(Op::Not, &int(0)), Ok(int(1)));
    }

    #[test]
    fn arrays_are_made_read_and_stored_into_with_their_errors() {
        let a = apply2(Op::Array, &int(3), &int(0)).unwrap();
        assert_eq!(a.to_string(), "[0,0,0]");
        setitem(&a, &int(1), int(9)).unwrap();
        assert_eq!(apply2(Op::Readlist, &a, &int(1)), Ok(int(9)));
        assert_eq!(apply1(Op::Len, &a), Ok(int(3)));
        let l = apply1(Op::ToList, &a).unwrap();
        assert_eq!(l, Value::list(vec![int(0), int(9), int(0)]));
        let b = apply1(Op::ToArray, &l).unwrap();
        assert_ne!(a, b, "a new array is a new identity");
        let message = |r: Result<Value, OpError>| r.unwrap_err().to_string();
        assert_eq!(
            message(apply2(Op::Array, &int(-1), &int(0))),
            "array: negative size -1"
        );
        assert_eq!(
            message(apply2(Op::Array, &int(1 << 24 | 1), &int(0))),
            "array: size 16777217 too large (at most 16777216 elements)"
        );
        assert_eq!(
            message(apply2(Op::Readlist, &a, &int(3))),
            "readlist: index 3 out of range for an array of length 3"
        );
        let store = |x: &Value, i: i64| setitem(x, &int(i), int(0)).unwrap_err().to_string();
        assert_eq!(
            store(&a, -1),
            "setitem: index -1 out of range for an array of length 3"
        );
        assert_eq!(
            store(&l, 0),
            "type error: setitem expects an array as its first argument, got the list [0,9,0] (lists are immutable)"
        );
        assert_eq!(
            message(apply1(Op::ToList, &l)),
            "type error: tolist expects an array, got the list [0,9,0]"
        );
    }
}
