//! Interned atoms.
//!
//! An atom is a symbolic constant such as `jump_if_a` or `'x y'`. Atoms are interned once, in
//! a process-wide table, so that an atom is a 32-bit id: comparing two atoms is comparing two
//! integers, in the interpreter and in machine code alike.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};

/// An interned atom: an index into the process-wide atom table.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Atom(u32);

#[derive(Default)]
struct Interner {
    names: Vec<&'static str>,
    ids: HashMap<&'static str, u32>,
}

fn interner() -> &'static Mutex<Interner> {
    static INTERNER: OnceLock<Mutex<Interner>> = OnceLock::new();
    INTERNER.get_or_init(Default::default)
}

impl Atom {
    /// Returns the atom named `name`, interning it on first use.
    pub fn intern(name: &str) -> Atom {
        let mut table = interner()
            .lock()
            .expect("atom table lock is never poisoned");
        if let Some(&id) = table.ids.get(name) {
            return Atom(id);
        }
        let id = u32::try_from(table.names.len()).expect("fewer than 2^32 distinct atoms");
        let name: &'static str = Box::leak(name.to_owned().into_boxed_str());
        table.names.push(name);
        table.ids.insert(name, id);
        Atom(id)
    }

    /// The atom's name, without quotes.
    pub fn name(self) -> &'static str {
        let table = interner()
            .lock()
            .expect("atom table lock is never poisoned");
        table.names[self.0 as usize]
    }

    /// The atom's id, as machine code sees it.
    pub fn id(self) -> u32 {
        self.0
    }

    /// The atom with id `id`, which must come from [`Atom::id`] (machine code hands ids
    /// back to the runtime this way).
    ///
    /// # Panics
    /// Naming the atom panics if `id` was never handed out.
    pub const fn from_id(id: u32) -> Atom {
        Atom(id)
    }

    /// Whether the atom prints bare (`[a-z][A-Za-z0-9_]*`) rather than quoted.
    pub fn is_bare(name: &str) -> bool {
        let mut chars = name.chars();
        matches!(chars.next(), Some('a'..='z'))
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    }
}

impl fmt::Display for Atom {
    /// Prints the atom bare when it is `[a-z][A-Za-z0-9_]*`, quoted with `'` otherwise
    /// (a quote or backslash inside is escaped with a backslash).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name();
        if Atom::is_bare(name) {
            return f.write_str(name);
        }
        f.write_str("'")?;
        for c in name.chars() {
            match c {
                '\'' => f.write_str("\\'")?,
                '\\' => f.write_str("\\\\")?,
                '\n' => f.write_str("\\n")?,
                c => write!(f, "{c}")?,
            }
        }
        f.write_str("'")
    }
}

impl fmt::Debug for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Atom({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_gives_one_id_per_name() {
        assert_eq!(Atom::intern("jump_if_a"), Atom::intern("jump_if_a"));
        assert_ne!(Atom::intern("jump_if_a"), Atom::intern("mov_a_r0"));
        assert_eq!(Atom::intern("decr_a").name(), "decr_a");
    }

    #[test]
    fn atoms_print_bare_or_quoted() {
        assert_eq!(Atom::intern("mov_a_r0").to_string(), "mov_a_r0");
        assert_eq!(Atom::intern("x y").to_string(), "'x y'");
        assert_eq!(Atom::intern("Foo").to_string(), "'Foo'");
        assert_eq!(Atom::intern("_x").to_string(), "'_x'");
        assert_eq!(Atom::intern("it's").to_string(), "'it\\'s'");
        assert_eq!(Atom::intern("").to_string(), "''");
    }
}
