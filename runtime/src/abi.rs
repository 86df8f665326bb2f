//! The contract between the runtime and machine code: how values look in registers and in
//! memory. The backend reads these constants instead of hard-coding numbers, and the
//! assertions below check them when the crate compiles.
//!
//! **In registers** (unboxed), by kind: an integer that fits in 64 bits is an `i64`; an atom
//! is its 32-bit id ([`Atom::id`]), zero-extended; a list is the address of its [`List`] and
//! an array that of its [`Array`] (as [`std::rc::Rc::as_ptr`] gives them). An integer of
//! any size (kind [`Repr::Num`]) stays boxed: the register holds the address of a [`Value`]
//! that is an `Int` or a `Big`, which the code reads and writes only through helpers.
//!
//! **In memory**: a [`Value`] is 16 bytes, a 64-bit tag at [`VALUE_TAG_OFFSET`] and the
//! payload at [`VALUE_PAYLOAD_OFFSET`] (an `i64`, an atom id in the low 32 bits, or an `Rc`
//! pointer, [`RC_VALUE_OFFSET`] before the list's or the array's address). A [`List`] is the address of its first element at [`LIST_ITEMS_OFFSET`] and its
//! length at [`LIST_LEN_OFFSET`]; elements are [`VALUE_SIZE`] bytes apart. An [`Array`] has
//! the same layout, then at [`ARRAY_INTS_OFFSET`] whether it holds only 64-bit integers.

use std::mem::{offset_of, size_of};
use std::rc::Rc;

use crate::{Array, Atom, List, Value};

/// The tag of [`Value::Int`].
pub const TAG_INT: u64 = 0;
/// The tag of [`Value::Big`].
pub const TAG_BIG: u64 = 1;
/// The tag of [`Value::Atom`].
pub const TAG_ATOM: u64 = 2;
/// The tag of [`Value::List`].
pub const TAG_LIST: u64 = 3;
/// The tag of [`Value::Array`].
pub const TAG_ARRAY: u64 = 4;

/// The size of a [`Value`] in memory.
pub const VALUE_SIZE: usize = 16;
/// Where a [`Value`]'s tag is.
pub const VALUE_TAG_OFFSET: usize = 0;
/// Where a [`Value`]'s payload is.
pub const VALUE_PAYLOAD_OFFSET: usize = 8;
/// How far past the pointer an `Rc` keeps (to its reference counts) its value is: the
/// payload of a list or an array in memory is that pointer, and machine code holds the
/// value's address ([`unbox`]), this much further.
pub const RC_VALUE_OFFSET: usize = 2 * size_of::<usize>();
/// Where a [`List`] keeps the address of its first element.
pub const LIST_ITEMS_OFFSET: usize = offset_of!(List, items);
/// Where a [`List`] keeps its length.
pub const LIST_LEN_OFFSET: usize = offset_of!(List, len);
/// Where an [`Array`] says whether it holds only 64-bit integers (1) or not (0), after the
/// layout it shares with a [`List`].
pub const ARRAY_INTS_OFFSET: usize = 16;

const _: () = {
    assert!(size_of::<Value>() == VALUE_SIZE);
    assert!(
        size_of::<Option<Value>>() == VALUE_SIZE,
        "frames stay 16 bytes a slot"
    );
    assert!(LIST_ITEMS_OFFSET == 0 && LIST_LEN_OFFSET == 8);
    assert!(offset_of!(Array, items) == LIST_ITEMS_OFFSET);
    assert!(offset_of!(Array, len) == LIST_LEN_OFFSET);
    assert!(offset_of!(Array, ints) == ARRAY_INTS_OFFSET);
    // `repr(C, u64)`: the tag is the first 8 bytes, the payload the next 8.
    let words: [u64; 2] = unsafe { std::mem::transmute(Value::Int(-7)) };
    assert!(words[0] == TAG_INT && words[1] == -7i64 as u64);
    // An atom's payload is its id in the low 32 bits; the upper 32 are not initialized, so
    // machine code loads 32 bits.
    let halves: [u32; 3] = {
        let v = std::mem::ManuallyDrop::new(Value::Atom(Atom::from_id(42)));
        let p = &v as *const std::mem::ManuallyDrop<Value> as *const u32;
        unsafe { [*p, *p.add(1), *p.add(2)] }
    };
    assert!(halves[0] as u64 == TAG_ATOM && halves[1] == 0 && halves[2] == 42);
};

/// How machine code holds a value of some kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Repr {
    /// A 64-bit integer.
    Int,
    /// An atom id.
    Atom,
    /// A list's address.
    List,
    /// An array's address.
    Array,
    /// An integer of any size, boxed: the address of a [`Value`] holding an `Int` or a
    /// `Big` (a frame's slot, or a box machine code owns). Where an integer has left 64
    /// bits, or may, machine code holds it so, and does its arithmetic through helpers.
    Num,
}

impl Repr {
    /// The tag of values of this kind in memory.
    pub const fn tag(self) -> u64 {
        match self {
            Repr::Int => TAG_INT,
            Repr::Atom => TAG_ATOM,
            Repr::List => TAG_LIST,
            Repr::Array => TAG_ARRAY,
            // Never asked: an element read out of a list or an array is of a kind with one
            // tag. A `Num` past 64 bits is a `Big`.
            Repr::Num => TAG_BIG,
        }
    }

    /// The kind of `v`, if machine code can hold it unboxed (a big integer only boxed, as
    /// a [`Repr::Num`]).
    pub fn of(v: &Value) -> Option<Repr> {
        match v {
            Value::Int(_) => Some(Repr::Int),
            Value::Atom(_) => Some(Repr::Atom),
            Value::List(_) => Some(Repr::List),
            Value::Array(_) => Some(Repr::Array),
            // Machine code does not hold big integers.
            Value::Big(_) => None,
        }
    }
}

/// `v` as machine code holds it, if it is of kind `kind`. A list's or an array's address is
/// borrowed: it stays valid while `v` (or another reference to the same object) is alive.
pub fn unbox(v: &Value, kind: Repr) -> Option<i64> {
    match (v, kind) {
        (Value::Int(n), Repr::Int) => Some(*n),
        (Value::Atom(a), Repr::Atom) => Some(a.id() as i64),
        (Value::List(l), Repr::List) => Some(Rc::as_ptr(l) as i64),
        (Value::Array(a), Repr::Array) => Some(Rc::as_ptr(a) as i64),
        (Value::Int(_) | Value::Big(_), Repr::Num) => Some(v as *const Value as i64),
        _ => None,
    }
}

/// The value machine code holds as `bits` of kind `kind`.
///
/// # Safety
/// For [`Repr::List`] and [`Repr::Array`], `bits` must be the address of a `List` or an
/// `Array` inside a live `Rc` (as [`unbox`] gives it), and for [`Repr::Num`] the address of
/// a live `Value` holding an integer; the value returned owns a new reference to it.
pub unsafe fn rebox(bits: i64, kind: Repr) -> Value {
    match kind {
        Repr::Int => Value::Int(bits),
        Repr::Atom => Value::Atom(Atom::from_id(bits as u32)),
        Repr::List => {
            let p = bits as *const List;
            // SAFETY: the caller guarantees `p` is in a live Rc; the count taken here
            // belongs to the new value.
            unsafe {
                Rc::increment_strong_count(p);
                Value::List(Rc::from_raw(p))
            }
        }
        Repr::Array => {
            let p = bits as *const Array;
            // SAFETY: as for a list.
            unsafe {
                Rc::increment_strong_count(p);
                Value::Array(Rc::from_raw(p))
            }
        }
        // SAFETY: the caller guarantees a live integer there.
        Repr::Num => unsafe { (*(bits as *const Value)).clone() },
    }
}

/// Runs `f` on the value machine code holds as `bits` of kind `kind`, without taking a
/// reference to it (for a helper that only looks at the value: printing it, passing it on).
///
/// # Safety
/// As for [`rebox`].
pub unsafe fn with_boxed<R>(bits: i64, kind: Repr, f: impl FnOnce(&Value) -> R) -> R {
    if kind == Repr::Num {
        // SAFETY: the caller guarantees a live integer there, borrowed for the call.
        return f(unsafe { &*(bits as *const Value) });
    }
    // SAFETY: the caller's guarantee; the reference taken by `rebox` is given back by
    // dropping the value.
    let v = unsafe { rebox(bits, kind) };
    f(&v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_element_that_is_an_array_holds_its_address_rc_value_offset_before() {
        let inner = Array::new(vec![Value::Int(1)]);
        let v = Value::Array(inner.clone());
        // SAFETY: a Value is 16 bytes; the payload word is initialized for an array.
        let payload = unsafe {
            *((&v as *const Value as *const u8).add(VALUE_PAYLOAD_OFFSET) as *const usize)
        };
        assert_eq!(payload + RC_VALUE_OFFSET, Rc::as_ptr(&inner) as usize);
        let list = Rc::new(List::new(vec![Value::Int(2)]));
        let v = Value::List(list.clone());
        // SAFETY: as above.
        let payload = unsafe {
            *((&v as *const Value as *const u8).add(VALUE_PAYLOAD_OFFSET) as *const usize)
        };
        assert_eq!(payload + RC_VALUE_OFFSET, Rc::as_ptr(&list) as usize);
    }

    #[test]
    fn values_round_trip_through_machine_words() {
        let list = Value::list(vec![Value::Int(1)]);
        for (v, k) in [
            (Value::Int(i64::MIN), Repr::Int),
            (Value::atom("jump_if_a"), Repr::Atom),
            (list.clone(), Repr::List),
            (Value::array(vec![Value::Int(2)]), Repr::Array),
        ] {
            let bits = unbox(&v, k).unwrap();
            assert_eq!(unsafe { rebox(bits, k) }, v);
        }
        assert_eq!(unbox(&Value::Int(1), Repr::Atom), None);
        // The list's elements are where the layout says.
        let Value::List(l) = &list else {
            unreachable!()
        };
        let base = Rc::as_ptr(l) as *const u8;
        unsafe {
            let items = *(base.add(LIST_ITEMS_OFFSET) as *const *const u8);
            let len = *(base.add(LIST_LEN_OFFSET) as *const usize);
            assert_eq!(len, 1);
            assert_eq!(*(items.add(VALUE_TAG_OFFSET) as *const u64), TAG_INT);
            assert_eq!(*(items.add(VALUE_PAYLOAD_OFFSET) as *const i64), 1);
        }
    }
}
