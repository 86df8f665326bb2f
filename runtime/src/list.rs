//! Immutable lists.

use std::fmt;
use std::ops::Deref;

use crate::Value;

/// An immutable list of values. Shared by reference count inside [`Value::List`].
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct List {
    items: Box<[Value]>,
}

impl List {
    /// A list holding `items`.
    pub fn new(items: Vec<Value>) -> List {
        List {
            items: items.into_boxed_slice(),
        }
    }

    /// The elements, in order.
    pub fn items(&self) -> &[Value] {
        &self.items
    }
}

impl Deref for List {
    type Target = [Value];
    fn deref(&self) -> &[Value] {
        &self.items
    }
}

impl fmt::Display for List {
    /// `[a,b,1]`: elements separated by commas, no spaces.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, item) in self.items.iter().enumerate() {
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
