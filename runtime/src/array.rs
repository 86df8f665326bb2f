//! Mutable arrays.

use std::cell::Cell;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::rc::Rc;

use crate::Value;

/// The most elements an array may have: `array(n, x)` with a larger `n` is refused.
pub const MAX_ARRAY_LEN: usize = 1 << 24;

/// A mutable sequence of values of a fixed length, shared by reference inside
/// [`Value::Array`]: two values holding the same `Rc<Array>` are the same array, and a store
/// through one is seen through the other.
///
/// The layout is List's (`repr(C)`: the address of the first element at offset 0, the
/// number of elements at offset 8), so that machine code can read and write elements where
/// it reads a list's. Mutation goes through a shared reference, as with a `Cell`: [`get`]
/// returns a copy of an element and [`set`] replaces one; no reference to an element ever
/// escapes, so a store can never invalidate one. An array is not `Sync` (nor is anything
/// holding an `Rc`).
///
/// [`get`]: Array::get
/// [`set`]: Array::set
#[repr(C)]
pub struct Array {
    pub(crate) items: NonNull<Value>,
    pub(crate) len: usize,
    /// 1 while every element is a 64-bit integer ([`Value::Int`]), 0 from the first store of
    /// anything else on (it never comes back): machine code that checked it once reads and
    /// writes elements without their tags (`abi::ARRAY_INTS_OFFSET`).
    pub(crate) ints: Cell<u64>,
    /// Its index in the cycle collector's registry of marked arrays, plus one; 0 while
    /// it is not marked (`crate::cycles`).
    pub(crate) slot: Cell<usize>,
    /// Its sequence number, in the order its thread made arrays (`crate::cycles`).
    pub(crate) seq: u64,
    /// Interior mutability: not `Sync`, not `Send`.
    _cell: PhantomData<Cell<Value>>,
}

impl Array {
    /// A new array holding `items`. Arrays live only inside an `Rc`, where the cycle
    /// collector (`crate::cycles`) finds a marked one at its address.
    #[inline]
    pub fn new(items: Vec<Value>) -> Rc<Array> {
        let ints = items.iter().all(|v| matches!(v, Value::Int(_)));
        Array::holding(items, ints)
    }

    /// A new array of `n` elements, each the integer `k`: `array(n, k)`.
    pub fn ints(n: usize, k: i64) -> Rc<Array> {
        let mut items = Vec::with_capacity(n);
        // (`repeat_n` and `vec!` clone through `Value::clone`, several times as long.)
        items.extend((0..n).map(|_| Value::Int(k)));
        Array::holding(items, true)
    }

    /// A new array holding `items`, which are all 64-bit integers if `ints`.
    #[inline]
    fn holding(items: Vec<Value>, ints: bool) -> Rc<Array> {
        let (items, len) = crate::list::into_raw(items);
        let (seq, collect) = crate::cycles::made(len);
        let array = Rc::new(Array {
            items,
            len,
            ints: Cell::new(ints as u64),
            slot: Cell::new(0),
            seq,
            _cell: PhantomData,
        });
        if collect {
            crate::cycles::collect_due();
        }
        array
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A copy of the element at `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<Value> {
        if index >= self.len {
            return None;
        }
        // SAFETY: in bounds; the clone only touches the element's own reference count.
        Some(unsafe { (*self.items.as_ptr().add(index)).clone() })
    }

    /// Stores `value` at `index`; `false` (and nothing stored) if the index is out of range.
    #[inline]
    pub fn set(&self, index: usize, value: Value) -> bool {
        if index >= self.len {
            return false;
        }
        let mark = !matches!(value, Value::Int(_)) && self.other_stored(&value);
        // SAFETY: in bounds, and no reference to an element is ever handed out, so nothing
        // aliases the slot written. The old value is dropped after the store, so whatever
        // its drop does sees the array in a consistent state.
        let old = unsafe { std::ptr::replace(self.items.as_ptr().add(index), value) };
        drop(old);
        if mark {
            crate::cycles::mark(self);
        }
        true
    }

    /// Notes that `value`, not a 64-bit integer, is being stored: the array no longer holds
    /// only integers. Whether the store marks the array for the cycle collector.
    fn other_stored(&self, value: &Value) -> bool {
        self.ints.set(0);
        self.slot.get() == 0 && crate::cycles::marks(value, self.seq)
    }

    /// Whether every element is a 64-bit integer, as far as the array knows: once anything
    /// else was stored, it says no for good.
    pub fn only_ints(&self) -> bool {
        self.ints.get() != 0
    }

    /// A copy of the elements, in order.
    pub fn to_vec(&self) -> Vec<Value> {
        // SAFETY: cloning the elements only touches their reference counts.
        unsafe { self.items() }.to_vec()
    }

    /// The elements, borrowed.
    ///
    /// # Safety
    /// No element may be stored (with [`Array::set`], through any reference to this array)
    /// while the slice is alive. Printing, comparing and hashing never store.
    pub(crate) unsafe fn items(&self) -> &[Value] {
        // SAFETY: `items` and `len` come from a boxed slice this array owns.
        unsafe { std::slice::from_raw_parts(self.items.as_ptr(), self.len) }
    }
}

impl Array {
    /// Takes the elements out, leaving 0 in their place: what the cycle collector does to
    /// an array nothing can reach any more.
    pub(crate) fn clear(&self) -> Vec<Value> {
        (0..self.len)
            // SAFETY: in bounds, and nothing borrows the elements, as in `set`.
            .map(|i| unsafe { std::ptr::replace(self.items.as_ptr().add(i), Value::Int(0)) })
            .collect()
    }

    /// Takes the elements out, leaving no elements.
    pub(crate) fn take_items(&mut self) -> Box<[Value]> {
        let (items, len) = (self.items, self.len);
        self.items = NonNull::dangling();
        self.len = 0;
        // SAFETY: the raw parts of the slice made in `new`, taken back once: the array now
        // holds an empty slice (a dangling pointer and no length, which is what an empty
        // boxed slice is).
        unsafe { crate::list::from_raw(items, len) }
    }
}

impl Drop for Array {
    #[inline]
    fn drop(&mut self) {
        if self.slot.get() != 0 {
            crate::cycles::unmark(self.slot.get());
        }
        // SAFETY: `items` and `len` are the raw parts of the boxed slice made in `new`.
        let items = unsafe { crate::list::from_raw(self.items, self.len) };
        crate::value::drop_items(items);
    }
}

impl std::fmt::Debug for Array {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::value::write_array(self, f)
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;

    #[test]
    fn a_store_through_one_reference_is_seen_through_another() {
        let a = Array::new(vec![Value::Int(0); 3]);
        let b = Rc::clone(&a);
        assert!(b.set(1, Value::Int(7)));
        assert_eq!(a.get(1), Some(Value::Int(7)));
        assert!(!a.set(3, Value::Int(1)));
        assert_eq!(a.get(3), None);
        assert_eq!(
            a.to_vec(),
            vec![Value::Int(0), Value::Int(7), Value::Int(0)]
        );
    }

    #[test]
    fn an_array_knows_whether_it_holds_only_integers() {
        let a = Array::new(vec![Value::Int(1), Value::Int(2)]);
        assert!(a.only_ints());
        assert!(a.set(0, Value::Int(7)));
        assert!(a.only_ints(), "an integer stored keeps it");
        assert!(!a.set(2, Value::atom("a")), "out of range: nothing stored");
        assert!(a.only_ints());
        assert!(a.set(1, Value::atom("a")));
        assert!(!a.only_ints(), "an atom stored clears it");
        assert!(a.set(1, Value::Int(3)));
        assert!(!a.only_ints(), "and it stays clear");
        let big = Value::from_bigint(num_bigint::BigInt::from(1) << 70);
        assert!(!Array::new(vec![Value::Int(1), big]).only_ints());
        assert!(Array::new(Vec::new()).only_ints());
    }
}
