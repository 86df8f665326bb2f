//! The values of the flowgraph language.

//!
//! Values nest (a list holds lists; an array holds arrays, itself among them), and a
//! program can nest them as deep as memory allows: `a[0] = b` in a loop builds a chain a
//! million long. So nothing here recurses on the nesting: printing, comparing, hashing and
//! dropping a value keep their own stacks, on the heap. Printing notes the arrays it is
//! inside of, to print `[...]` where an array contains itself.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::rc::Rc;

use num_bigint::BigInt;
use num_traits::ToPrimitive;

use crate::{Array, Atom, List};

/// An upper bound on the length of every list and array: an index that a `readlist` or a
/// `setitem` accepted lies in `0..MAX_INDEX`. (Their elements are values of 16 bytes, and no
/// allocation holds more than `isize::MAX` bytes.) The optimizer relies on it: a pointer
/// that indexed an array can move by a small amount without overflowing 64 bits.
pub const MAX_INDEX: i64 = (isize::MAX as usize / std::mem::size_of::<Value>()) as i64;

/// A value: an integer of unbounded size, an atom, an immutable list or a mutable array.
///
/// Integers have a 64-bit fast path: an integer that fits in an `i64` is always
/// [`Value::Int`], and [`Value::Big`] only ever holds integers outside that range. Two equal
/// integers therefore always have the same representation, and equality ([`PartialEq`]) is
/// the language's `eq`: structural, except that an array equals only itself.
///
/// The layout is fixed (`repr(C, u64)`), because machine code reads list elements: a 64-bit
/// tag ([`crate::abi`]'s `TAG_*`) at offset 0, the payload at offset 8. See [`crate::abi`].
#[derive(Clone)]
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
    /// A mutable array, compared by identity.
    Array(Rc<Array>) = 4,
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

    /// A new array holding `items`.
    pub fn array(items: Vec<Value>) -> Value {
        Value::Array(Array::new(items))
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

    /// The name of the value's kind, for error messages: `integer`, `atom`, `list` or
    /// `array`.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Int(_) | Value::Big(_) => "integer",
            Value::Atom(_) => "atom",
            Value::List(_) => "list",
            Value::Array(_) => "array",
        }
    }

    /// Whether the value is, or holds somewhere inside its lists, an array. Arrays never
    /// hide inside an array without the array itself being found first, so this looks
    /// through lists only.
    pub fn holds_array(&self) -> bool {
        match self {
            Value::Array(_) => true,
            Value::List(l) => l.holds_array(),
            _ => false,
        }
    }

    /// Whether this value holds the only reference to a list or an array, which dropping it
    /// drops.
    fn owns_container_alone(&self) -> bool {
        match self {
            Value::List(l) => Rc::strong_count(l) == 1,
            Value::Array(a) => Rc::strong_count(a) == 1,
            _ => false,
        }
    }
}

impl PartialEq for Value {
    #[inline]
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Big(a), Value::Big(b)) => a == b,
            (Value::Atom(a), Value::Atom(b)) => a == b,
            (Value::List(a), Value::List(b)) => Rc::ptr_eq(a, b) || lists_equal(a, b),
            (Value::Array(a), Value::Array(b)) => Rc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Value {}

impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            Value::List(l) => l.fingerprint().hash(state),
            other => hash_shallow(other, state),
        }
    }
}

/// Hashes a value that is not a list (a list hashes as its fingerprint, `List::fingerprint`).
fn hash_shallow<H: Hasher>(v: &Value, state: &mut H) {
    match v {
        Value::Int(n) => (0u8, n).hash(state),
        Value::Big(n) => (1u8, n).hash(state),
        Value::Atom(a) => (2u8, a).hash(state),
        Value::List(l) => (3u8, l.len()).hash(state),
        Value::Array(a) => (4u8, Rc::as_ptr(a)).hash(state),
    }
}

/// The fingerprint of a list's elements in order, lists inside it included, computed
/// without recursion by a hasher with fixed keys ([`List::fingerprint`] keeps it).
pub(crate) fn fingerprint(list: &List) -> u64 {
    let mut state = std::hash::DefaultHasher::new();
    let state = &mut state;
    let mut stack: Vec<&[Value]> = vec![list.items()];
    (3u8, list.len()).hash(state);
    while let Some(items) = stack.pop() {
        for item in items {
            hash_shallow(item, state);
            if let Value::List(l) = item {
                stack.push(l.items());
            }
        }
    }
    state.finish()
}

/// Whether `list` holds an array, at any depth, found without recursion.
pub(crate) fn list_holds_array(list: &List) -> bool {
    let mut stack: Vec<&[Value]> = vec![list.items()];
    while let Some(items) = stack.pop() {
        for item in items {
            match item {
                Value::Array(_) => return true,
                Value::List(l) => stack.push(l.items()),
                _ => {}
            }
        }
    }
    false
}

/// Whether two lists are structurally equal (arrays inside them by identity), without
/// recursion.
pub(crate) fn lists_equal(a: &List, b: &List) -> bool {
    let (ha, hb) = (a.hash.get(), b.hash.get());
    if ha != 0 && hb != 0 && ha != hb {
        return false;
    }
    let mut stack: Vec<(&[Value], &[Value])> = vec![(a.items(), b.items())];
    while let Some((xs, ys)) = stack.pop() {
        if xs.len() != ys.len() {
            return false;
        }
        for (x, y) in xs.iter().zip(ys) {
            match (x, y) {
                (Value::List(l), Value::List(m)) if !Rc::ptr_eq(l, m) => {
                    stack.push((l.items(), m.items()));
                }
                (Value::List(_), Value::List(_)) => {}
                _ if x != y => return false,
                _ => {}
            }
        }
    }
    true
}

/// Drops the elements of a list or an array. A list or an array among them that nothing
/// else refers to is taken apart here, its elements added to the work, instead of being
/// dropped recursively.
pub(crate) fn drop_items(items: Box<[Value]>) {
    if !items.iter().any(Value::owns_container_alone) {
        return;
    }
    let mut work: Vec<Value> = items.into_vec();
    while let Some(v) = work.pop() {
        match v {
            Value::List(l) => {
                if let Ok(mut list) = Rc::try_unwrap(l) {
                    work.extend(list.take_items().into_vec());
                }
            }
            Value::Array(a) => {
                if let Ok(mut array) = Rc::try_unwrap(a) {
                    work.extend(array.take_items().into_vec());
                }
            }
            _ => {}
        }
    }
}

/// One piece of work of the printer.
enum Print<'a> {
    Value(&'a Value),
    Text(&'static str),
    /// The elements of a sequence from this index on: a printer stopped early (a value
    /// shown within a width) has not gone through the ones it did not print.
    Items(&'a [Value], usize),
    /// The end of the elements of this array, which is no longer being printed.
    Leave(*const Array),
}

/// Prints `v` as `print` does, without recursion; an array inside itself prints `[...]`.
fn write_value(v: &Value, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match v {
        Value::Int(n) => write!(f, "{n}"),
        Value::Big(n) => write!(f, "{n}"),
        Value::Atom(a) => write!(f, "{a}"),
        Value::List(l) => write_list(l, f),
        Value::Array(a) => write_array(a, f),
    }
}

/// Prints a list as `[a,b,1]`.
pub(crate) fn write_list(list: &List, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    Printer::default().print(list.items(), f)
}

/// Prints an array as a list of its elements.
pub(crate) fn write_array(array: &Array, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let mut printer = Printer::default();
    printer.open.insert(array);
    printer.stack.push(Print::Leave(array));
    // SAFETY: printing stores into no array.
    printer.print(unsafe { array.items() }, f)
}

/// A printer's state: what is left to print, and the arrays whose elements are being
/// printed.
#[derive(Default)]
struct Printer<'a> {
    stack: Vec<Print<'a>>,
    open: HashSet<*const Array>,
}

impl<'a> Printer<'a> {
    /// Prints `[items]` and then the rest of the stack.
    fn print(mut self, items: &'a [Value], f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.open_sequence(items, f)?;
        while let Some(work) = self.stack.pop() {
            let items: &[Value] = match work {
                Print::Text(s) => {
                    f.write_str(s)?;
                    continue;
                }
                Print::Leave(p) => {
                    self.open.remove(&p);
                    continue;
                }
                Print::Items(items, i) => {
                    if let Some(item) = items.get(i) {
                        self.stack.push(Print::Items(items, i + 1));
                        if i > 0 {
                            f.write_str(",")?;
                        }
                        self.stack.push(Print::Value(item));
                    }
                    continue;
                }
                Print::Value(Value::List(l)) => l.items(),
                Print::Value(Value::Array(a)) => {
                    let p = Rc::as_ptr(a);
                    if !self.open.insert(p) {
                        f.write_str("[...]")?;
                        continue;
                    }
                    self.stack.push(Print::Leave(p));
                    // SAFETY: printing stores into no array.
                    unsafe { a.items() }
                }
                Print::Value(v) => {
                    write_value(v, f)?;
                    continue;
                }
            };
            self.open_sequence(items, f)?;
        }
        Ok(())
    }

    /// Prints `[` and leaves the elements and the `]` to print.
    fn open_sequence(&mut self, items: &'a [Value], f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        self.stack.push(Print::Text("]"));
        self.stack.push(Print::Items(items, 0));
        Ok(())
    }
}

impl fmt::Display for Value {
    /// Prints the value as `print_and_stop` does: integers in decimal, atoms bare or quoted,
    /// lists as `[a,b,1]` with no spaces.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_value(self, f)
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

    #[test]
    fn arrays_compare_by_identity_and_print_their_elements() {
        let a = Value::array(vec![Value::Int(1), Value::Int(2)]);
        let b = Value::array(vec![Value::Int(1), Value::Int(2)]);
        assert_eq!(a, a.clone());
        assert_ne!(a, b);
        assert_eq!(a.to_string(), "[1,2]");
        // A list holding an array compares that element by identity.
        let la = Value::list(vec![a.clone()]);
        assert_eq!(la, Value::list(vec![a.clone()]));
        assert_ne!(la, Value::list(vec![b.clone()]));
        assert_eq!(la.to_string(), "[[1,2]]");
    }

    #[test]
    fn an_array_that_contains_itself_prints_dots_where_it_recurs() {
        let a = Value::array(vec![Value::Int(0), Value::Int(1)]);
        let Value::Array(rc) = &a else { unreachable!() };
        rc.set(0, a.clone());
        assert_eq!(a.to_string(), "[[...],1]");
        // Twice in one list, not inside itself: printed in full both times.
        let b = Value::array(vec![Value::Int(5)]);
        assert_eq!(
            Value::list(vec![b.clone(), b.clone()]).to_string(),
            "[[5],[5]]"
        );
        // Break the cycle, so that the test does not leak.
        rc.set(0, Value::Int(0));
    }

    #[test]
    fn values_nested_a_million_deep_print_compare_and_drop_without_recursion() {
        let depth = 1_000_000;
        let mut v = Value::Int(7);
        for k in 0..depth {
            v = if k % 2 == 0 {
                Value::list(vec![v])
            } else {
                Value::array(vec![v])
            };
        }
        let text = v.to_string();
        assert_eq!(text.len(), 2 * depth + 1);
        assert!(text.starts_with("[[[") && text.contains('7'));
        let nest = |leaf: i64| {
            let mut w = Value::Int(leaf);
            for _ in 0..depth {
                w = Value::list(vec![w]);
            }
            w
        };
        let w = nest(7);
        assert_eq!(w, nest(7));
        assert_ne!(w, nest(8));
        let mut h = std::collections::hash_map::DefaultHasher::new();
        w.hash(&mut h);
        drop(v);
        drop(w);
    }
}
