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
//! A collection finds the garbage among what a set of marked arrays reaches, by trial
//! deletion, as CPython's collector does:
//!
//! 1. Each array and list reachable from those marked arrays (a *node*) starts with its
//!    reference count; each reference from one node to another takes one off the other's.
//!    What is left counts the references from outside the nodes: from the interpreter's
//!    frames, from what machine code keeps alive (its context holds a reference to
//!    everything it made or copied out of an array, the backend's `Ctx::owned`), from
//!    constants in traces, from values no node is, and from arrays the collection does not
//!    look into (below).
//! 2. Whatever has references from outside is alive, and so is everything it reaches.
//! 3. The marked arrays left are garbage: the collector stores 0 over their elements, which
//!    drops them and breaks every cycle among the garbage (every cycle holds a marked
//!    array); reference counting frees the rest.
//!
//! Whatever the set of marked arrays, nothing alive is taken for garbage: a reference from
//! what the collection does not look into counts as one from outside, and keeps what it
//! refers to alive.
//!
//! The collector is generational, as CPython's is, so that a structure that stays alive is
//! not looked at again at every collection while it grows. The arrays marked since the
//! last collection are the *young* generation, the others the *old* one (the registry
//! keeps the old ones first). An unmarked array is young if it was made since the last
//! collection, old otherwise. It refers only to arrays older than itself, and to lists
//! that hold none or only older ones: what an old one refers to was made before the last
//! collection too.
//!
//! - A *young* collection takes as nodes the young marked arrays and what they reach, but
//!   does not enter an old array, marked or not: what an old array refers to counts as
//!   referred to from outside. So it finds every garbage cycle of young arrays (and lists)
//!   that no old array refers to, and never looks into an old structure, however large.
//!   It runs when the arrays made and marked since the last collection, in elements (one
//!   more for each array), reach what the last young collection found alive
//!   ([`MIN_BUDGET`] at least, and just that after a full collection): its work is about
//!   what it finds alive and what it reclaims, so it stays proportional to what the
//!   program makes. What it finds alive becomes old.
//! - A *full* collection takes every marked array, and finds every garbage cycle. It runs
//!   instead of a young one when what young collections found alive since the last full
//!   one (what became old) reaches what that one found alive ([`MIN_BUDGET`] at least), or
//!   what was made and marked since reaches four times that. Its work, about what the last
//!   one found alive and what became old since, is then paid for by what became old or
//!   was made; and a garbage cycle through an old array waits no longer than that.
//!   [`collect`] is a full collection.
//!
//! The collector runs only where an array is made or stored into ([`Array::new`],
//! [`Array::set`]), after the operation, never inside a drop: every value anyone can still
//! use has a reference counted outside the garbage, so no executor can tell that it ran.
//! The counters and the registry are per thread, as arrays are.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::{Array, List, Value};

/// The least work, in elements (one more for each array), between collections; full
/// collections wait for at least as much to become old, or four times as much to be made.
pub const MIN_BUDGET: usize = 1 << 16;

/// What the collector has done on this thread, for `--stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// How many collections ran, young and full ones.
    pub collections: u64,
    /// How many of them were full collections ([`collect`] among them).
    pub full: u64,
    /// How many marked arrays they found to be garbage and cleared.
    pub reclaimed: u64,
    /// How many arrays are marked now, in both generations.
    pub marked: usize,
}

/// A full collection runs at the latest when the work made and marked since the last one
/// reaches this many times what it found alive ([`MIN_BUDGET`] at least), even if little
/// became old since: an old structure that became a garbage cycle waits no longer.
const MADE_PER_FULL: usize = 4;

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
    /// The marked arrays, by address: the old generation (`old` of them), then the young
    /// one. An array knows its index here (`Array::slot`).
    arrays: Vec<*const Array>,
    /// How many of `arrays`, at the front, are old.
    old: usize,
    /// The sequence number of the first array made since the last collection: an unmarked
    /// array with a smaller one is old.
    young_from: u64,
    /// The work young collections found alive (and made old) since the last full one.
    promoted: usize,
    /// The work made and marked before the last collection, since the last full one.
    made: usize,
    /// The work the last full collection found alive.
    long_lived: usize,
    collections: u64,
    full: u64,
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
        RefCell::new(Registry {
            arrays: Vec::new(),
            old: 0,
            young_from: 0,
            promoted: 0,
            made: 0,
            long_lived: 0,
            collections: 0,
            full: 0,
            reclaimed: 0,
        })
    };
}

/// The sequence number of an array of `len` elements being made, and whether a
/// collection is due once it is (then [`collect_due`] runs it).
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

/// Marks `array`, which joins the young generation, and collects if the budget is spent.
///
/// `array` is inside an `Rc` (as every array is, [`Array::new`]) and stays at its address.
pub(crate) fn mark(array: &Array) {
    REGISTRY.with_borrow_mut(|r| {
        array.slot.set(r.arrays.len() + 1);
        r.arrays.push(array as *const Array);
    });
    if CLOCK.with(|c| spend(c, 1 + array.len())) {
        collect_due();
    }
}

/// Forgets the marked array whose index in the registry is `slot - 1`, which is being
/// freed.
pub(crate) fn unmark(slot: usize) {
    // At the thread's end the registry may be gone already: nothing is collected then.
    let _ = REGISTRY.try_with(|r| r.borrow_mut().remove(slot - 1));
}

impl Registry {
    /// Takes the array at `index` out, keeping the old generation first: an old one's
    /// place goes to the last old array, whose place goes to the last array. The array
    /// taken out is never touched: it may have left its `Rc` already (`value::drop_items`).
    fn remove(&mut self, index: usize) {
        let mut hole = index;
        if index < self.old {
            self.old -= 1;
            self.arrays.swap(index, self.old);
            hole = self.old;
        }
        let last = self.arrays.len() - 1;
        self.arrays.swap(hole, last);
        self.arrays.pop();
        for at in [index, hole] {
            if let Some(&a) = self.arrays.get(at) {
                // SAFETY: every array in the registry is alive (it leaves it when dropped).
                unsafe { (*a).slot.set(at + 1) };
            }
        }
    }
}

/// Sets the least work between collections (at least 1), and makes it the next budget: a
/// small one makes collections frequent (full ones too), so that tests and the
/// differential tester run the collector under every executor.
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
        full: r.full,
        reclaimed: r.reclaimed,
        marked: r.arrays.len(),
    })
}

/// A full collection: finds every marked array that nothing outside what they reach
/// refers to, and clears it.
pub fn collect() {
    run(true);
}

/// The collection that is due: a full one if what became old since the last full one
/// reaches what that one found alive ([`MIN_BUDGET`] at least), or what was made and
/// marked since reaches [`MADE_PER_FULL`] times that; a young one otherwise.
pub(crate) fn collect_due() {
    let (least, since) = CLOCK.with(|c| (c.min_budget.get(), c.since.get()));
    let full = REGISTRY.with_borrow(|r| {
        let old = r.long_lived.max(least);
        r.promoted >= old || (r.made + since) / MADE_PER_FULL >= old
    });
    run(full);
}

/// Runs a full collection, or a young one: finds the garbage among what the marked
/// arrays (the young ones) reach and clears it; what is left becomes old.
fn run(full: bool) {
    let (seq, since) = CLOCK.with(|c| (c.seq.get(), c.since.get()));
    let (garbage, live) = REGISTRY.with_borrow_mut(|r| {
        r.collections += 1;
        r.full += full as u64;
        let (from, young_from) = if full { (0, 0) } else { (r.old, r.young_from) };
        let (garbage, live) = if r.arrays.len() == from {
            (Vec::new(), 0)
        } else {
            // SAFETY: every array in the registry is alive, at its slot, and nothing is
            // dropped or stored while the registry is borrowed: `find_garbage` only reads.
            unsafe { find_garbage(&r.arrays, from, young_from) }
        };
        r.reclaimed += garbage.len() as u64;
        // The survivors, and the garbage until it is freed, are old now.
        r.old = r.arrays.len();
        r.young_from = seq;
        if full {
            r.long_lived = live;
            r.promoted = 0;
            r.made = 0;
        } else {
            r.promoted += live;
            r.made += since;
        }
        (garbage, live)
    });
    CLOCK.with(|c| {
        c.since.set(0);
        let least = c.min_budget.get();
        // What a full collection found alive is old: no young collection looks at it.
        c.budget.set(if full { least } else { live.max(least) });
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

/// The state of a collection: per node (the marked arrays looked at, then the arrays and
/// lists met from them), its references from outside the nodes, as far as counted yet.
struct Scan<'a> {
    /// The marked arrays looked at: the registry from index `from` on.
    marked: &'a [*const Array],
    /// The index in the registry of `marked[0]`: marked arrays before it are old, and not
    /// entered.
    from: usize,
    /// Unmarked arrays with a smaller sequence number are old, and not entered.
    young_from: u64,
    /// The nodes past the marked arrays: node `marked.len() + k` is `others[k]`.
    others: Vec<Node>,
    /// Their nodes, by address.
    index: FxHashMap<usize, usize>,
    outside: Vec<isize>,
}

impl Scan<'_> {
    /// The node that `item` refers to, if it refers to one that may reach an array the
    /// collection enters: a marked array it looks at (at its slot), or an unmarked array
    /// that is not old (any, in a full collection) or a list that holds an array, made a
    /// node when met first.
    fn node_of(&mut self, item: &Value) -> Option<usize> {
        let (node, at, count) = match item {
            Value::Array(a) => match a.slot.get() {
                // An array of integers refers to nothing; an old one is not entered.
                0 if a.only_ints() || a.seq < self.young_from => return None,
                0 => (
                    Node::Array(Rc::as_ptr(a)),
                    Rc::as_ptr(a) as usize,
                    Rc::strong_count(a),
                ),
                slot => return (slot - 1).checked_sub(self.from),
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

/// The marked arrays among `registry[from..]` that nothing outside what they reach refers
/// to, each with a new reference; and the work of the nodes left alive (their elements,
/// and one more for each). The marked arrays before `from`, and the unmarked arrays whose
/// sequence number is below `young_from`, are not entered: for a full collection both
/// are 0.
///
/// # Safety
/// Every pointer in `registry` is a live array inside an `Rc`, whose `slot` is its index
/// there plus one.
unsafe fn find_garbage(
    registry: &[*const Array],
    from: usize,
    young_from: u64,
) -> (Vec<Rc<Array>>, usize) {
    let marked = &registry[from..];
    let mut scan = Scan {
        marked,
        from,
        young_from,
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

    /// The array `v` is.
    fn as_array(v: &Value) -> Rc<Array> {
        match v {
            Value::Array(a) => a.clone(),
            _ => panic!("{v:?} is not an array"),
        }
    }

    /// The arrays of the registry know their places, and the old ones come first.
    fn check_registry() {
        REGISTRY.with_borrow(|r| {
            assert!(r.old <= r.arrays.len());
            for (i, &a) in r.arrays.iter().enumerate() {
                // SAFETY: every array in the registry is alive.
                assert_eq!(unsafe { (*a).slot.get() }, i + 1, "slot of registry[{i}]");
            }
        });
    }

    /// Whether `a` is in the old generation.
    fn is_old(a: &Array) -> bool {
        REGISTRY.with_borrow(|r| a.slot.get() != 0 && a.slot.get() <= r.old)
    }

    /// An array marked by holding a newer array of integers: freed by its count alone.
    fn marked_array() -> Rc<Array> {
        let a = array_of(vec![Value::Int(0)]);
        assert!(a.set(0, Value::array(vec![Value::Int(1)])));
        assert_ne!(a.slot.get(), 0);
        a
    }

    #[test]
    fn a_young_cycle_is_found_by_a_young_collection() {
        let keep = marked_array();
        run(false);
        assert!(is_old(&keep));
        let before = counts();
        let a = array_of(vec![Value::Int(0)]);
        let b = array_of(vec![Value::Array(a.clone()), Value::Array(keep.clone())]);
        assert!(a.set(0, Value::Array(b.clone())));
        assert!(!is_old(&a));
        let (wa, wb) = (Rc::downgrade(&a), Rc::downgrade(&b));
        drop((a, b));
        run(false);
        assert!(wa.upgrade().is_none() && wb.upgrade().is_none());
        let after = counts();
        assert_eq!(after.reclaimed, before.reclaimed + 1);
        assert_eq!(
            (after.collections, after.full),
            (before.collections + 1, before.full)
        );
        assert_eq!(after.marked, before.marked);
        assert_eq!(
            format!("{:?}", keep.get(0).unwrap()),
            "[1]",
            "the old array it referred to is untouched"
        );
        check_registry();
    }

    #[test]
    fn a_cycle_through_an_old_marked_array_is_found_by_a_full_collection() {
        let before = counts();
        let a = marked_array();
        run(false);
        assert!(is_old(&a), "a survived a young collection");
        // b is young and unmarked (it refers to an older array); a, marked already, now
        // refers to b.
        let b = array_of(vec![Value::Array(a.clone())]);
        assert!(a.set(0, Value::Array(b.clone())));
        assert_eq!(counts().marked, before.marked + 1);
        let (wa, wb) = (Rc::downgrade(&a), Rc::downgrade(&b));
        drop((a, b));
        let young = marked_array();
        run(false);
        assert!(
            wa.upgrade().is_some() && wb.upgrade().is_some(),
            "a young collection does not enter a"
        );
        collect();
        assert!(wa.upgrade().is_none() && wb.upgrade().is_none());
        assert_eq!(counts().reclaimed, before.reclaimed + 1);
        assert_eq!(counts().marked, before.marked + 1, "young is left");
        drop(young);
        assert_eq!(counts().marked, before.marked);
        check_registry();
    }

    #[test]
    fn a_full_collection_runs_by_itself_as_the_old_generation_grows() {
        set_min_budget(64);
        let a = marked_array();
        let b = array_of(vec![Value::Array(a.clone())]);
        assert!(a.set(0, Value::Array(b)));
        let weak = Rc::downgrade(&a);
        // Collect until a is old, then drop the cycle.
        while !is_old(&a) {
            drop(array_of(vec![Value::Int(0); 8]));
        }
        drop(a);
        let before = counts();
        // Arrays that stay alive become old, until a full collection runs: for each, more
        // becomes old than a quarter of what is made.
        let mut kept = Vec::new();
        while weak.upgrade().is_some() {
            let a = array_of(vec![Value::Int(0); 50]);
            assert!(a.set(0, Value::Array(a.clone())));
            kept.push(a);
            assert!(kept.len() < 10_000, "the cycle is never found");
            assert!(REGISTRY.with_borrow(|r| r.made / MADE_PER_FULL < r.promoted.max(64)));
        }
        let after = counts();
        assert!(after.full > before.full);
        assert!(after.collections > after.full - before.full + before.collections);
        assert_eq!(after.reclaimed, before.reclaimed + 1);
        check_registry();
        drop(kept);
        collect();
        assert_eq!(counts().marked, before.marked - 1, "a is freed");
        set_min_budget(MIN_BUDGET);
    }

    #[test]
    fn an_old_garbage_cycle_is_found_when_only_young_garbage_is_made_after_it() {
        set_min_budget(64);
        // A chain of old arrays, each holding the next, and the last the first.
        let first = marked_array();
        let mut last = first.clone();
        for _ in 0..100 {
            let next = array_of(vec![Value::Int(0)]);
            assert!(last.set(0, Value::Array(next.clone())));
            last = next;
        }
        assert!(last.set(0, Value::Array(first.clone())));
        collect();
        let weak = Rc::downgrade(&first);
        drop((first, last));
        let before = counts();
        // Young cycles, found by young collections: nothing becomes old.
        let mut made = 0;
        while weak.upgrade().is_some() {
            let a = array_of(vec![Value::Int(0)]);
            assert!(a.set(0, Value::Array(a.clone())));
            made += 1;
            assert!(made < 100_000, "the old cycle is never found");
        }
        let after = counts();
        assert_eq!(after.full, before.full + 1);
        assert!(after.collections > before.collections + 10);
        assert!(after.reclaimed >= before.reclaimed + 101);
        check_registry();
        set_min_budget(MIN_BUDGET);
    }

    #[test]
    fn a_young_array_referred_to_only_by_an_old_one_is_kept() {
        // An old marked array refers to a young cycle y <-> z.
        let old = marked_array();
        run(false);
        assert!(is_old(&old));
        let y = array_of(vec![Value::Int(0)]);
        let z = array_of(vec![Value::Array(y.clone()), Value::atom("z")]);
        assert!(y.set(0, Value::Array(z.clone())));
        assert!(!is_old(&y));
        assert!(old.set(0, Value::Array(y.clone())));
        drop((y, z));
        run(false);
        let y = old.get(0).unwrap();
        let Value::Array(y) = &y else { unreachable!() };
        assert!(is_old(y), "y survived, and is old now");
        let z = y.get(0).unwrap();
        let Value::Array(z) = &z else { unreachable!() };
        assert_eq!(format!("{:?}", z.get(1).unwrap()), "z");
        assert!(Rc::ptr_eq(&as_array(&z.get(0).unwrap()), y));

        // An old unmarked array (made before the last collection) refers to v, which a
        // store marks afterwards.
        let v = array_of(vec![Value::Int(0)]);
        let u = array_of(vec![Value::Array(v.clone())]);
        assert_eq!(u.slot.get(), 0);
        let wv = Rc::downgrade(&v);
        drop(v);
        run(false);
        let v = wv.upgrade().unwrap();
        let w = array_of(vec![Value::Array(v.clone()), Value::Int(7)]);
        assert!(v.set(0, Value::Array(w)));
        assert!(!is_old(&v));
        drop(v);
        run(false);
        let v = wv.upgrade().expect("u keeps v alive");
        let w = v.get(0).unwrap();
        assert_eq!(format!("{:?}", as_array(&w).get(1).unwrap()), "7");
        drop((v, w));
        // Without u, v <-> w is garbage; v is old now, so the full collection finds it.
        drop(u);
        run(false);
        assert!(wv.upgrade().is_some());
        collect();
        assert!(wv.upgrade().is_none());
        check_registry();
    }

    #[test]
    fn slots_stay_right_across_promotions_and_unmarks() {
        let before = counts();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut alive: Vec<Rc<Array>> = Vec::new();
        let mut weak = Vec::new();
        for step in 0..4000 {
            match rng.below(10) {
                0..=3 => {
                    let a = marked_array();
                    weak.push(Rc::downgrade(&a));
                    alive.push(a);
                }
                4 => {
                    // An array holding itself: freed only by a collection.
                    let a = array_of(vec![Value::Int(0)]);
                    assert!(a.set(0, Value::Array(a.clone())));
                    weak.push(Rc::downgrade(&a));
                    alive.push(a);
                }
                5..=7 if !alive.is_empty() => {
                    let i = rng.below(alive.len());
                    drop(alive.swap_remove(i));
                }
                8 => run(false),
                9 if step % 7 == 0 => collect(),
                _ => {}
            }
            check_registry();
            let marked = counts().marked - before.marked;
            assert!(marked >= alive.len(), "step {step}");
        }
        collect();
        assert_eq!(counts().marked, before.marked + alive.len());
        drop(alive);
        collect();
        assert_eq!(counts().marked, before.marked);
        assert!(weak.iter().all(|w| w.upgrade().is_none()));
        check_registry();
    }

    /// A value of the random graph: an array by number, or a list.
    #[derive(Clone, Debug)]
    enum Shape {
        Int,
        Array(usize),
        List(Vec<Shape>),
    }

    #[test]
    fn random_graphs_keep_what_is_reachable_and_lose_the_rest() {
        set_min_budget(16);
        let before = counts();
        let mut by_young = 0;
        for seed in 1..=24 {
            by_young += random_graph(seed);
        }
        let after = counts();
        assert!(after.collections > before.collections + 2000);
        assert!(after.full > before.full + 200);
        assert!(after.reclaimed > before.reclaimed + 200);
        assert!(by_young > 20, "young collections reclaimed {by_young}");
        assert_eq!(counts().marked, before.marked);
        set_min_budget(MIN_BUDGET);
    }

    /// Runs random operations on a graph of arrays and lists, collecting (young and full
    /// collections) now and then and by itself, and checks that every array the program
    /// can reach holds what it stored, and that a full collection leaves no other one.
    /// How many arrays the young collections it asked for reclaimed.
    fn random_graph(seed: u64) -> u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut by_young = 0;
        // Array k holds Int(k + 1), then three values whose shapes are model[k].
        let mut model: Vec<[Shape; 3]> = Vec::new();
        let mut weak: Vec<std::rc::Weak<Array>> = Vec::new();
        let mut roots: Vec<Rc<Array>> = Vec::new();
        let reachable = |model: &[[Shape; 3]], roots: &[Rc<Array>]| {
            let mut seen = vec![false; model.len()];
            let mut work: Vec<usize> = roots.iter().map(id_of).collect();
            while let Some(k) = work.pop() {
                if !std::mem::replace(&mut seen[k], true) {
                    let mut shapes: Vec<&Shape> = model[k].iter().collect();
                    while let Some(s) = shapes.pop() {
                        match s {
                            Shape::Int => {}
                            Shape::Array(j) => work.push(*j),
                            Shape::List(items) => shapes.extend(items),
                        }
                    }
                }
            }
            seen
        };
        for round in 0..2000 {
            let seen = reachable(&model, &roots);
            let live: Vec<usize> = (0..model.len()).filter(|&k| seen[k]).collect();
            let pick = |rng: &mut Rng| -> (Shape, Value) {
                if live.is_empty() || rng.below(5) == 0 {
                    return (Shape::Int, Value::Int(0));
                }
                let k = live[rng.below(live.len())];
                let a = Value::Array(weak[k].upgrade().expect("a reachable array is alive"));
                if rng.below(3) == 0 {
                    let shape = Shape::List(vec![Shape::Int, Shape::Array(k)]);
                    (shape, Value::list(vec![Value::Int(0), a]))
                } else {
                    (Shape::Array(k), a)
                }
            };
            match rng.below(8) {
                0..=1 => {
                    let (s0, v0) = pick(&mut rng);
                    let (s1, v1) = pick(&mut rng);
                    let k = model.len();
                    let a = array_of(vec![Value::Int(k as i64 + 1), v0, v1, Value::Int(0)]);
                    model.push([s0, s1, Shape::Int]);
                    weak.push(Rc::downgrade(&a));
                    roots.push(a);
                }
                2..=4 if !live.is_empty() => {
                    let k = live[rng.below(live.len())];
                    let (s, v) = pick(&mut rng);
                    let i = rng.below(3);
                    assert!(weak[k].upgrade().unwrap().set(1 + i, v));
                    model[k][i] = s;
                }
                5 | 6 if !roots.is_empty() => {
                    let i = rng.below(roots.len());
                    drop(roots.swap_remove(i));
                }
                7 if rng.below(4) == 0 => collect(),
                7 => {
                    let reclaimed = counts().reclaimed;
                    run(false);
                    by_young += counts().reclaimed - reclaimed;
                }
                _ => {}
            }
            if round % 10 == 0 || round == 1999 {
                // Every reachable array holds what the model says.
                let seen = reachable(&model, &roots);
                for (k, &seen) in seen.iter().enumerate() {
                    if !seen {
                        continue;
                    }
                    let a = weak[k].upgrade().expect("a reachable array is alive");
                    let at = format!("seed {seed}, round {round}: array {k}");
                    assert_eq!(a.get(0), Some(Value::Int(k as i64 + 1)), "{at}");
                    for (i, shape) in model[k].iter().enumerate() {
                        assert!(fits(&a.get(1 + i).unwrap(), shape), "{at}, {i}");
                    }
                }
                check_registry();
                if round % 100 == 0 {
                    // A full collection frees every array the program cannot reach.
                    collect();
                    for (k, &seen) in seen.iter().enumerate() {
                        let at = format!("seed {seed}, round {round}: array {k}");
                        assert_eq!(weak[k].upgrade().is_some(), seen, "{at}");
                    }
                }
            }
        }
        drop(roots);
        collect();
        assert!(weak.iter().all(|w| w.upgrade().is_none()));
        by_young
    }

    /// The number of the random graph's array `a`.
    fn id_of(a: &Rc<Array>) -> usize {
        match a.get(0) {
            Some(Value::Int(k)) if k > 0 => k as usize - 1,
            other => panic!("an array of the graph holds {other:?} first"),
        }
    }

    /// Whether `v` is of the shape `shape`, an array's being its number.
    fn fits(v: &Value, shape: &Shape) -> bool {
        match (v, shape) {
            (Value::Int(0), Shape::Int) => true,
            (Value::Array(a), Shape::Array(k)) => id_of(a) == *k,
            (Value::List(l), Shape::List(items)) => {
                l.items().len() == items.len()
                    && l.items().iter().zip(items).all(|(v, s)| fits(v, s))
            }
            _ => false,
        }
    }

    /// A small random number generator (xorshift).
    struct Rng(u64);

    impl Rng {
        /// A number below `n`.
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }
}
