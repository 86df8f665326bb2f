//! Reclaiming arrays that refer to each other in a cycle, which reference counting alone
//! never frees.
//!
//! Every array has a sequence number, from a counter of the thread that made it. Lists are
//! immutable and made of values that exist already, and an array is made from elements
//! that exist already (`array(n, x)`, `toarray`): so a reference from a list, or from what
//! an array was made with, always goes to something older. A cycle cannot go to older
//! things all the way round; somewhere on it, a store `a[i] = v` made an array refer to
//! something not older than itself: `v` an array made after `a` (or `a` itself), or a list
//! holding an array (whose age is not kept). Such a store *marks* `a`, and the collector
//! keeps the marked arrays in a registry until they are freed. Every cycle of references
//! holds a marked array, so the garbage the collector must find is reachable from the
//! marked arrays; everything else reference counting frees. A program that builds its
//! structures from the bottom up (a node made from its children, a chain each link made
//! from the one before) marks nothing, and an array of integers, such as a Brainfuck tape,
//! is never marked.
//!
//! When the arrays made and marked since the last collection, in elements (one more for
//! each array), reach what the last one found alive ([`MIN_BUDGET`] at least), a collection
//! finds the garbage among what the marked arrays reach, by trial deletion, as CPython's
//! collector does:
//!
//! 1. Each array and list reachable from a marked array (a *node*) starts with its
//!    reference count; each reference from one node to another takes one off the other's.
//!    What is left counts the references from outside the nodes: from the interpreter's
//!    frames, from what machine code keeps alive (its context holds a reference to
//!    everything it made or copied out of an array, the backend's `Ctx::owned`), from
//!    constants in traces, from values no marked array reaches.
//! 2. Whatever has references from outside is alive, and so is everything it reaches.
//! 3. The marked arrays left are garbage: the collector stores 0 over their elements, which
//!    drops them and breaks every cycle among the garbage; reference counting frees the
//!    rest.
//!
//! The collector runs only where an array is made or stored into ([`Array::new`],
//! [`Array::set`]), after the operation, never inside a drop: every value anyone can still
//! use has a reference counted outside the garbage, so no executor can tell that it ran.
//! The counters and the registry are per thread, as arrays are.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::{Array, List, Value};

/// The least work, in elements (one more for each array), between collections.
pub const MIN_BUDGET: usize = 1 << 16;

/// What the collector has done on this thread, for `--stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// How many collections ran.
    pub collections: u64,
    /// How many marked arrays they found to be garbage and cleared.
    pub reclaimed: u64,
    /// How many arrays are marked now.
    pub marked: usize,
}

/// The counters every array's making touches.
struct Clock {
    /// The sequence number of the next array.
    seq: Cell<u64>,
    /// The work made and marked since the last collection.
    since: Cell<usize>,
    /// The work after which the next collection runs.
    budget: Cell<usize>,
    /// The least budget (see [`set_min_budget`]).
    min_budget: Cell<usize>,
}

/// The marked arrays of a thread, and what became of them.
struct Registry {
    /// The marked arrays, by address; an array knows its index here (`Array::slot`).
    arrays: Vec<*const Array>,
    collections: u64,
    reclaimed: u64,
}

thread_local! {
    static CLOCK: Clock = const {
        Clock {
            seq: Cell::new(0),
            since: Cell::new(0),
            budget: Cell::new(MIN_BUDGET),
            min_budget: Cell::new(MIN_BUDGET),
        }
    };
    static REGISTRY: RefCell<Registry> = const {
        RefCell::new(Registry { arrays: Vec::new(), collections: 0, reclaimed: 0 })
    };
}

/// The sequence number of an array of `len` elements being made, and whether a
/// collection is due once it is.
#[inline]
pub(crate) fn made(len: usize) -> (u64, bool) {
    CLOCK.with(|c| {
        let seq = c.seq.get();
        c.seq.set(seq + 1);
        (seq, spend(c, 1 + len))
    })
}

/// Adds `work` to what was spent since the last collection; whether one is due.
fn spend(c: &Clock, work: usize) -> bool {
    let since = c.since.get() + work;
    c.since.set(since);
    since >= c.budget.get()
}

/// Whether storing `v` into an array whose sequence number is `seq` marks it: `v` is an
/// array not older than it, or a list holding an array.
#[inline]
pub(crate) fn marks(v: &Value, seq: u64) -> bool {
    match v {
        Value::Array(a) => a.seq >= seq,
        Value::List(l) => l.holds_array(),
        _ => false,
    }
}

/// Marks `array`, and collects if the budget is spent.
///
/// `array` is inside an `Rc` (as every array is, [`Array::new`]) and stays at its address.
pub(crate) fn mark(array: &Array) {
    REGISTRY.with_borrow_mut(|r| {
        array.slot.set(r.arrays.len() + 1);
        r.arrays.push(array as *const Array);
    });
    if CLOCK.with(|c| spend(c, 1 + array.len())) {
        collect();
    }
}

/// Forgets the marked array whose index in the registry is `slot - 1`, which is being
/// freed.
pub(crate) fn unmark(slot: usize) {
    // At the thread's end the registry may be gone already: nothing is collected then.
    let _ = REGISTRY.try_with(|r| {
        let mut r = r.borrow_mut();
        let moved = *r.arrays.last().expect("a marked array is in the registry");
        r.arrays.swap_remove(slot - 1);
        if slot - 1 < r.arrays.len() {
            // SAFETY: every array in the registry is alive (it leaves it when dropped).
            unsafe { (*moved).slot.set(slot) };
        }
    });
}

/// Sets the least work between collections (at least 1), and makes it the next budget: a
/// small one makes collections frequent, so that tests and the differential tester run the
/// collector under every executor.
pub fn set_min_budget(work: usize) {
    CLOCK.with(|c| {
        c.min_budget.set(work.max(1));
        c.budget.set(work.max(1));
    });
}

/// What the collector has done on this thread so far.
pub fn counts() -> Counts {
    REGISTRY.with_borrow(|r| Counts {
        collections: r.collections,
        reclaimed: r.reclaimed,
        marked: r.arrays.len(),
    })
}

/// Finds the marked arrays that nothing outside what they reach refers to, and clears
/// them.
pub fn collect() {
    let (garbage, live) = REGISTRY.with_borrow_mut(|r| {
        r.collections += 1;
        if r.arrays.is_empty() {
            return (Vec::new(), 0);
        }
        // SAFETY: every array in the registry is alive, and nothing is dropped or stored
        // while the registry is borrowed: `find_garbage` only reads.
        let (garbage, live) = unsafe { find_garbage(&r.arrays) };
        r.reclaimed += garbage.len() as u64;
        (garbage, live)
    });
    CLOCK.with(|c| {
        c.since.set(0);
        c.budget.set(live.max(c.min_budget.get()));
    });
    // Empty every garbage array before any is freed (the references in `garbage` keep
    // them alive): dropping one's elements frees others, and they leave the registry.
    let items: Vec<Vec<Value>> = garbage.iter().map(|a| a.clear()).collect();
    for items in items {
        crate::value::drop_items(items.into_boxed_slice());
    }
    drop(garbage);
}

/// A node of a collection that is not a marked array.
#[derive(Clone, Copy)]
enum Node {
    Array(*const Array),
    List(*const List),
}

/// The state of a collection: per node (the marked arrays, then the arrays and lists met
/// from them), its references from outside the nodes, as far as counted yet.
struct Scan<'a> {
    marked: &'a [*const Array],
    /// The nodes past the marked arrays: node `marked.len() + k` is `others[k]`.
    others: Vec<Node>,
    /// Their nodes, by address.
    index: FxHashMap<usize, usize>,
    outside: Vec<isize>,
}

impl Scan<'_> {
    /// The node that `item` refers to, if it refers to one that may reach an array: a
    /// marked array (at its slot), or another array or a list that holds one, made a node
    /// when met first.
    fn node_of(&mut self, item: &Value) -> Option<usize> {
        let (node, at, count) = match item {
            Value::Array(a) => match a.slot.get() {
                // An array of integers refers to nothing.
                0 if a.only_ints() => return None,
                0 => (
                    Node::Array(Rc::as_ptr(a)),
                    Rc::as_ptr(a) as usize,
                    Rc::strong_count(a),
                ),
                slot => return Some(slot - 1),
            },
            Value::List(l) if l.holds_array() => (
                Node::List(Rc::as_ptr(l)),
                Rc::as_ptr(l) as usize,
                Rc::strong_count(l),
            ),
            _ => return None,
        };
        let n = *self.index.entry(at).or_insert_with(|| {
            self.others.push(node);
            self.outside.push(count as isize);
            self.outside.len() - 1
        });
        Some(n)
    }

    /// The elements of node `n`.
    ///
    /// # Safety
    /// The node is alive (every node is, while the collection runs), and nothing is
    /// stored into it while the slice is used.
    unsafe fn items<'b>(&self, n: usize) -> &'b [Value] {
        let node = match n.checked_sub(self.marked.len()) {
            None => Node::Array(self.marked[n]),
            Some(k) => self.others[k],
        };
        match node {
            // SAFETY: the caller's guarantee.
            Node::Array(a) => unsafe { (*a).items() },
            // SAFETY: the caller's guarantee.
            Node::List(l) => unsafe { (*l).items() },
        }
    }
}

/// The marked arrays among `marked` that nothing outside what they reach refers to, each
/// with a new reference; and the work of the nodes left alive (their elements, and one
/// more for each), which the next collection will look at again.
///
/// # Safety
/// Every pointer in `marked` is a live array inside an `Rc`, whose `slot` is its index
/// there plus one.
unsafe fn find_garbage(marked: &[*const Array]) -> (Vec<Rc<Array>>, usize) {
    let mut scan = Scan {
        marked,
        others: Vec::new(),
        index: FxHashMap::default(),
        // SAFETY: the caller's guarantee.
        outside: marked.iter().map(|&a| unsafe { strong_count(a) }).collect(),
    };
    // Step 1: meet the nodes, taking off the references between them.
    let mut n = 0;
    while n < scan.outside.len() {
        // SAFETY: every node is alive: a marked array, or what an alive node holds.
        for item in unsafe { scan.items(n) } {
            if let Some(target) = scan.node_of(item) {
                scan.outside[target] -= 1;
            }
        }
        n += 1;
    }
    // Step 2: what is referred to from outside is alive, and so is what it reaches.
    let mut alive: Vec<bool> = scan.outside.iter().map(|&refs| refs > 0).collect();
    let mut work: Vec<usize> = (0..alive.len()).filter(|&n| alive[n]).collect();
    let mut live = 0;
    while let Some(n) = work.pop() {
        // SAFETY: as above.
        let items = unsafe { scan.items(n) };
        live += 1 + items.len();
        for item in items {
            // Every node reached here was met in step 1: what a node holds is one.
            if let Some(target) = scan.node_of(item) {
                if !alive[target] {
                    alive[target] = true;
                    work.push(target);
                }
            }
        }
    }
    // Step 3: the marked arrays left.
    let garbage = marked
        .iter()
        .zip(&alive)
        .filter(|&(_, &alive)| !alive)
        .map(|(&a, _)| {
            // SAFETY: the caller's guarantee; the count taken belongs to the new `Rc`.
            unsafe {
                Rc::increment_strong_count(a);
                Rc::from_raw(a)
            }
        })
        .collect();
    (garbage, live)
}

/// The reference count of the array at `a`.
///
/// # Safety
/// `a` is a live array inside an `Rc`.
unsafe fn strong_count(a: *const Array) -> isize {
    // SAFETY: the caller's guarantee: borrowing the `Rc` without taking a count.
    let rc = std::mem::ManuallyDrop::new(unsafe { Rc::from_raw(a) });
    Rc::strong_count(&rc) as isize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array_of(items: Vec<Value>) -> Rc<Array> {
        match Value::array(items) {
            Value::Array(a) => a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn two_arrays_referring_to_each_other_are_reclaimed_once_dropped() {
        let before = counts();
        let a = array_of(vec![Value::Int(0)]);
        let b = array_of(vec![Value::Array(a.clone())]);
        assert_eq!(counts().marked, before.marked, "b refers to an older array");
        assert!(a.set(0, Value::Array(b.clone())));
        assert_eq!(
            counts().marked,
            before.marked + 1,
            "a refers to a newer one"
        );
        collect();
        assert_eq!(
            counts().reclaimed,
            before.reclaimed,
            "both are still referred to"
        );
        let weak = Rc::downgrade(&b);
        drop((a, b));
        assert!(
            weak.upgrade().is_some(),
            "a cycle outlives its last reference"
        );
        collect();
        assert!(weak.upgrade().is_none());
        assert_eq!(counts().reclaimed, before.reclaimed + 1);
        assert_eq!(counts().marked, before.marked);
    }

    #[test]
    fn what_a_live_value_reaches_through_lists_is_kept() {
        let a = array_of(vec![Value::Int(0)]);
        // a -> list -> a, and the list is referred to from outside too.
        let list = Value::list(vec![Value::Int(1), Value::Array(a.clone())]);
        assert!(a.set(0, list.clone()));
        let weak = Rc::downgrade(&a);
        drop(a);
        collect();
        let Value::List(l) = &list else {
            unreachable!()
        };
        assert!(weak.upgrade().is_some(), "the list keeps the array alive");
        assert_eq!(l.items()[1].kind(), "array");
        // An array alive only through a garbage cycle's list goes with it.
        drop(list);
        collect();
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn a_cycle_reached_from_an_array_referred_to_from_outside_keeps_its_elements() {
        // outer (alive) -> a <-> b, and b holds an array of integers.
        let a = array_of(vec![Value::Int(0)]);
        let ints = Value::array(vec![Value::Int(5)]);
        let b = array_of(vec![Value::Array(a.clone()), ints]);
        assert!(a.set(0, Value::Array(b.clone())));
        let outer = Value::array(vec![Value::Array(a.clone())]);
        drop((a, b));
        collect();
        let Value::Array(outer) = &outer else {
            unreachable!()
        };
        let a = outer.get(0).unwrap();
        let Value::Array(a) = &a else { unreachable!() };
        let b = a.get(0).unwrap();
        let Value::Array(b) = &b else { unreachable!() };
        assert_eq!(b.len(), 2);
        assert_eq!(format!("{:?}", b.get(1).unwrap()), "[5]");
    }

    #[test]
    fn a_cycle_through_arrays_never_marked_is_found_from_its_marked_one() {
        // a -> b -> c -> a: b and c were made holding older arrays; only a's store of c,
        // newer than it, marks.
        let before = counts();
        let a = array_of(vec![Value::Int(0)]);
        let b = array_of(vec![Value::Array(a.clone())]);
        let c = array_of(vec![Value::Array(b.clone()), Value::atom("x")]);
        assert!(a.set(0, Value::Array(c.clone())));
        assert_eq!(counts().marked, before.marked + 1);
        let (wb, wc) = (Rc::downgrade(&b), Rc::downgrade(&c));
        drop((b, c));
        collect();
        assert!(
            wb.upgrade().is_some() && wc.upgrade().is_some(),
            "a is alive"
        );
        drop(a);
        collect();
        assert!(wb.upgrade().is_none() && wc.upgrade().is_none());
    }

    #[test]
    fn an_array_holding_itself_is_reclaimed_and_one_of_integers_is_never_marked() {
        let before = counts();
        let Value::Array(ints) = Value::array(vec![Value::Int(1); 10]) else {
            unreachable!()
        };
        assert!(ints.set(3, Value::Int(4)));
        let chain = Value::array(vec![Value::Array(ints)]);
        let _chain = Value::array(vec![chain]);
        assert_eq!(counts().marked, before.marked, "no store of a newer array");
        let me = array_of(vec![Value::Int(0)]);
        assert!(me.set(0, Value::Array(me.clone())));
        assert_eq!(counts().marked, before.marked + 1);
        let weak = Rc::downgrade(&me);
        drop(me);
        collect();
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn collections_run_by_themselves_as_cycles_are_made() {
        set_min_budget(64);
        let before = counts();
        for _ in 0..10_000 {
            let a = array_of(vec![Value::Int(0); 2]);
            let b = array_of(vec![Value::Array(a.clone())]);
            assert!(a.set(1, Value::Array(b)));
        }
        let after = counts();
        assert!(after.collections > before.collections + 10);
        assert!(after.marked < 100, "{} arrays still marked", after.marked);
        set_min_budget(MIN_BUDGET);
    }
}
