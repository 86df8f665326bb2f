//! Immutable lists.

use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;

use crate::Value;

/// An immutable list of values. Shared by reference count inside [`Value::List`].
///
/// The layout is fixed (`repr(C)`), because machine code reads it: the address of the first
/// element at offset 0, the number of elements at offset 8 (see [`crate::abi`]).
#[repr(C)]
pub struct List {
    pub(crate) items: NonNull<Value>,
    pub(crate) len: usize,
}

impl List {
    /// A list holding `items`.
    pub fn new(items: Vec<Value>) -> List {
        let boxed: Box<[Value]> = items.into_boxed_slice();
        let len = boxed.len();
        // SAFETY: `Box::into_raw` never returns null; `drop` rebuilds the box.
        let items = unsafe { NonNull::new_unchecked(Box::into_raw(boxed) as *mut Value) };
        List { items, len }
    }

    /// The elements, in order.
    pub fn items(&self) -> &[Value] {
        // SAFETY: `items` and `len` come from a boxed slice this list owns.
        unsafe { std::slice::from_raw_parts(self.items.as_ptr(), self.len) }
    }
}

impl Drop for List {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.items.as_ptr(), self.len);
        // SAFETY: `items` and `len` are the raw parts of the boxed slice made in `new`.
        drop(unsafe { Box::from_raw(slice) });
    }
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
        self.items() == other.items()
    }
}

impl Eq for List {}

impl std::hash::Hash for List {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.items().hash(state)
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
        f.write_str("[")?;
        for (i, item) in self.items().iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{item}")?;
        }
        f.write_str("]")
    }
}

impl fmt::Debug for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}
