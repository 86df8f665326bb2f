//! Immutable lists.
//!
//! Printing, comparing, hashing and dropping a list never recurse (see [`crate::value`]): a
//! list nested a million deep, which `tolist` can build, is no danger to the stack.

use std::cell::Cell;
use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;

use crate::Value;

/// An immutable list of values. Shared by reference count inside [`Value::List`].
///
/// The layout is fixed (`repr(C)`), because machine code reads it: the address of the first
/// element at offset 0, the number of elements at offset 8 (see [`crate::abi`]).
///
/// A list remembers the fingerprint of its contents once it has been hashed: the green
/// values of a meta-tracing interpreter hold its whole bytecode (a Brainfuck program is a
/// list of 11,451 commands), and the JIT looks them up in a hash map at every loop of the
/// interpreted program. The contents never change, so the fingerprint stays true.
#[repr(C)]
pub struct List {
    pub(crate) items: NonNull<Value>,
    pub(crate) len: usize,
    /// The fingerprint of the contents (`value::fingerprint`), 0 until it is computed.
    pub(crate) hash: Cell<u64>,
    /// Whether the list holds an array, at any depth: 0 until known, then 1 (no) or 2.
    pub(crate) arrays: Cell<u8>,
}

impl List {
    /// A list holding `items`.
    pub fn new(items: Vec<Value>) -> List {
        let (items, len) = into_raw(items);
        List {
            items,
            len,
            hash: Cell::new(0),
            arrays: Cell::new(0),
        }
    }

    /// Whether the list holds an array, at any depth (computed once: the JIT asks it of
    /// the green values at every loop of an interpreted program).
    pub fn holds_array(&self) -> bool {
        if self.arrays.get() == 0 {
            let holds = crate::value::list_holds_array(self);
            self.arrays.set(1 + holds as u8);
        }
        self.arrays.get() == 2
    }

    /// A 64-bit hash of the contents, computed the first time it is asked for: equal lists
    /// have equal fingerprints.
    pub fn fingerprint(&self) -> u64 {
        match self.hash.get() {
            0 => {
                // 0 means "not computed": a list whose hash is 0 is given 1.
                let h = crate::value::fingerprint(self).max(1);
                self.hash.set(h);
                h
            }
            h => h,
        }
    }

    /// The elements, in order.
    pub fn items(&self) -> &[Value] {
        // SAFETY: `items` and `len` come from a boxed slice this list owns.
        unsafe { std::slice::from_raw_parts(self.items.as_ptr(), self.len) }
    }
}

impl List {
    /// Takes the elements out, leaving no elements.
    pub(crate) fn take_items(&mut self) -> Box<[Value]> {
        let (items, len) = (self.items, self.len);
        self.items = NonNull::dangling();
        self.len = 0;
        self.hash.set(0);
        self.arrays.set(0);
        // SAFETY: the raw parts of the slice made in `new`, taken back once: the list now
        // holds an empty slice (a dangling pointer and no length, which is what an empty
        // boxed slice is).
        unsafe { from_raw(items, len) }
    }
}

impl Drop for List {
    fn drop(&mut self) {
        // SAFETY: `items` and `len` are the raw parts of the boxed slice made in `new`.
        let items = unsafe { from_raw(self.items, self.len) };
        crate::value::drop_items(items);
    }
}

/// The raw parts of a boxed slice of `items`, which [`from_raw`] takes back.
pub(crate) fn into_raw(items: Vec<Value>) -> (NonNull<Value>, usize) {
    let boxed: Box<[Value]> = items.into_boxed_slice();
    let len = boxed.len();
    // SAFETY: `Box::into_raw` never returns null.
    let items = unsafe { NonNull::new_unchecked(Box::into_raw(boxed) as *mut Value) };
    (items, len)
}

/// The boxed slice whose raw parts [`into_raw`] gave.
///
/// # Safety
/// `items` and `len` must come from [`into_raw`], and be taken back once.
pub(crate) unsafe fn from_raw(items: NonNull<Value>, len: usize) -> Box<[Value]> {
    let slice = std::ptr::slice_from_raw_parts_mut(items.as_ptr(), len);
    // SAFETY: the caller's promise.
    unsafe { Box::from_raw(slice) }
}

impl Default for List {
    fn default() -> List {
        List::new(Vec::new())
    }
}

impl Clone for List {
    fn clone(&self) -> List {
        List::new(self.items().to_vec())
    }
}

impl PartialEq for List {
    fn eq(&self, other: &List) -> bool {
        crate::value::lists_equal(self, other)
    }
}

impl Eq for List {}

impl std::hash::Hash for List {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.fingerprint().hash(state)
    }
}

impl Deref for List {
    type Target = [Value];
    fn deref(&self) -> &[Value] {
        self.items()
    }
}

impl fmt::Display for List {
    /// `[a,b,1]`: elements separated by commas, no spaces.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::value::write_list(self, f)
    }
}

impl fmt::Debug for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}
