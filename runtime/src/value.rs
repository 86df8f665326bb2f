//! The values of the flowgraph language.

use std::borrow::Cow;
use std::fmt;
use std::rc::Rc;

use num_bigint::BigInt;
use num_traits::ToPrimitive;

use crate::{Atom, List};

/// A value: an integer of unbounded size, an atom, or an immutable list.
///
/// Integers have a 64-bit fast path: an integer that fits in an `i64` is always
/// [`Value::Int`], and [`Value::Big`] only ever holds integers outside that range. Two equal
/// integers therefore always have the same representation, and the derived structural
/// equality is the language's `eq`.
///
/// The layout is fixed (`repr(C, u64)`), because machine code reads list elements: a 64-bit
/// tag ([`crate::abi`]'s `TAG_*`) at offset 0, the payload at offset 8. See [`crate::abi`].
#[derive(Clone, PartialEq, Eq, Hash)]
#[repr(C, u64)]
pub enum Value {
    /// An integer that fits in 64 bits.
    Int(i64) = 0,
    /// An integer that does not fit in 64 bits (never one that does).
    Big(Rc<BigInt>) = 1,
    /// An interned atom.
    Atom(Atom) = 2,
    /// An immutable list.
    List(Rc<List>) = 3,
}

impl Value {
    /// The integer `n`, in its canonical representation (64-bit when it fits).
    pub fn from_bigint(n: BigInt) -> Value {
        match n.to_i64() {
            Some(small) => Value::Int(small),
            None => Value::Big(Rc::new(n)),
        }
    }

    /// The atom named `name`.
    pub fn atom(name: &str) -> Value {
        Value::Atom(Atom::intern(name))
    }

    /// A list holding `items`.
    pub fn list(items: Vec<Value>) -> Value {
        Value::List(Rc::new(List::new(items)))
    }

    /// Whether the value is an integer (of either representation).
    pub fn is_int(&self) -> bool {
        matches!(self, Value::Int(_) | Value::Big(_))
    }

    /// The value as a big integer, if it is an integer.
    pub fn to_bigint(&self) -> Option<Cow<'_, BigInt>> {
        match self {
            Value::Int(n) => Some(Cow::Owned(BigInt::from(*n))),
            Value::Big(n) => Some(Cow::Borrowed(n)),
            _ => None,
        }
    }

    /// Whether `if` takes its else branch on this value: only the integer 0 is false.
    pub fn is_false(&self) -> bool {
        matches!(self, Value::Int(0))
    }

    /// The name of the value's kind, for error messages: `integer`, `atom` or `list`.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Int(_) | Value::Big(_) => "integer",
            Value::Atom(_) => "atom",
            Value::List(_) => "list",
        }
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Int(n)
    }
}

impl From<BigInt> for Value {
    fn from(n: BigInt) -> Value {
        Value::from_bigint(n)
    }
}

impl fmt::Display for Value {
    /// Prints the value as `print_and_stop` does: integers in decimal, atoms bare or quoted,
    /// lists as `[a,b,1]` with no spaces.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(n) => write!(f, "{n}"),
            Value::Big(n) => write!(f, "{n}"),
            Value::Atom(a) => write!(f, "{a}"),
            Value::List(l) => write!(f, "{l}"),
        }
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_canonical() {
        assert_eq!(Value::from_bigint(BigInt::from(5)), Value::Int(5));
        let big = BigInt::from(i64::MAX) + 1;
        assert!(matches!(Value::from_bigint(big), Value::Big(_)));
    }

    #[test]
    fn values_print_as_the_spec_says() {
        let v = Value::list(vec![
            Value::atom("a"),
            Value::atom("x y"),
            Value::Int(-1),
            Value::list(vec![]),
            Value::from_bigint(BigInt::from(10).pow(20)),
        ]);
        assert_eq!(v.to_string(), "[a,'x y',-1,[],100000000000000000000]");
    }
}
