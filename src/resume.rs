//! Resume data: what an exit from compiled code writes back so that the interpreter goes on
//! exactly as if it had run all along (the articles' resume variables; LuaJIT's snapshots,
//! PyPy's resume data).
//!
//! A [`Snapshot`] gives the position to resume at, how many flowgraph operations the exit
//! counts as done, and an entry per variable that differs from the frame the compiled code
//! was entered with: the variable's value as an operand, an SSA value (a [`Ref`]) or a
//! constant. A snapshot is complete: an exit writes back its own snapshot and nothing else.
//! A bridge reads each variable the snapshot of the guard it leaves from gives (its
//! `input`s of them are the guard's values), so its own snapshots hold them too.
//!
//! An exit inside a call that the trace inlined resumes inside it: the snapshot then also
//! lists the calls entered and not yet left ([`Inlined`], outermost first), each with where
//! its caller goes on, the caller's variable that receives the result, and every variable
//! of the callee's frame (a callee's frame starts empty, so its entries are all it holds).
//! The exit rebuilds those frames as the interpreter's calls would have made them
//! (PyPy's resume data for inlined frames, LuaJIT's snapshot frames).
//!
//! A snapshot may also hold stores into real arrays that the trace delays ([`Store`],
//! `opt::sink`): an exit makes them before the interpreter goes on.
//!
//! [`restore`] is the one write-back, used by every executor that exits: the trace
//! interpreter (values in its registers), machine code (unboxed values in its register
//! buffer) and compiled residual programs (each variable in the register of its slot).

use flowjit_runtime::{ops, Value};

use crate::lang::Slot;
use crate::state::{Frame, Position, State};
use crate::trace::{Opnd, Ref};

/// Where the interpreter resumes when an instruction exits, and what it finds in the frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Where the interpreter continues (in the innermost inlined call, if any).
    pub pos: Position,
    /// How many flowgraph operations of the iteration the exit counts as done.
    pub cost: u64,
    /// The resume variables of the frame the trace runs in, sorted by slot: each variable's
    /// value at the exit.
    pub entries: Vec<(Slot, Opnd)>,
    /// The calls the trace entered and has not left at the exit, outermost first.
    pub frames: Vec<Inlined>,
    /// The arrays the trace never allocated (`virtual`) that the operands above hold, or
    /// that those hold in turn: each with its elements at the exit, sorted by ref.
    pub virtuals: Vec<Virtual>,
    /// The stores the trace has not made yet (`opt::sink`): the exit makes them. No two
    /// write the same element, so their order does not matter.
    pub stores: Vec<Store>,
}

/// A store into a real array that the trace delays (PyPy's lazy `setarrayitem`): every exit
/// until it is made makes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Store {
    /// The array.
    pub array: Opnd,
    /// The index, checked before: the store cannot fail.
    pub index: Opnd,
    /// The value stored.
    pub value: Opnd,
}

/// An array the trace never allocated, as a snapshot sees it: the exit builds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Virtual {
    /// The `virtual` instruction that stands for it.
    pub at: Ref,
    /// Its elements at the exit. One may be another virtual array's `at` (or its own).
    pub fields: Vec<Opnd>,
}

/// A call a trace inlined, as a snapshot inside it sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inlined {
    /// Where the caller goes on when the call returns: the statement after the call.
    pub ret: Position,
    /// The caller's variable that receives the result.
    pub dst: Slot,
    /// Every variable of the callee's frame, sorted by slot.
    pub entries: Vec<(Slot, Opnd)>,
}

impl Snapshot {
    /// A snapshot of the trace's own frame alone.
    pub fn new(pos: Position, cost: u64, entries: Vec<(Slot, Opnd)>) -> Snapshot {
        Snapshot {
            pos,
            cost,
            entries,
            frames: Vec::new(),
            virtuals: Vec::new(),
            stores: Vec::new(),
        }
    }

    /// Every operand the snapshot holds, of every frame, every virtual array (whose
    /// `virtual` instructions are among them) and every store not made yet.
    pub fn operands(&self) -> impl Iterator<Item = &Opnd> {
        self.entries
            .iter()
            .chain(self.frames.iter().flat_map(|f| f.entries.iter()))
            .map(|(_, o)| o)
            .chain(self.virtuals.iter().flat_map(|v| v.fields.iter()))
            .chain(
                self.stores
                    .iter()
                    .flat_map(|s| [&s.array, &s.index, &s.value]),
            )
    }

    /// Calls `f` with each instruction whose value an exit reads ([`Snapshot::exit_values`]
    /// that are not constants), in the same order: one loop per part, which code
    /// generators walking every snapshot of a trace find cheaper than the chained iterator.
    pub fn for_each_exit_ref(&self, mut f: impl FnMut(Ref)) {
        let mut take = |o: &Opnd| {
            if let Opnd::Ref(r) = o {
                if self.virtuals.is_empty() || self.virtual_at(*r).is_none() {
                    f(*r);
                }
            }
        };
        self.entries.iter().for_each(|(_, o)| take(o));
        for frame in &self.frames {
            frame.entries.iter().for_each(|(_, o)| take(o));
        }
        for v in &self.virtuals {
            v.fields.iter().for_each(&mut take);
        }
        for s in &self.stores {
            take(&s.array);
            take(&s.index);
            take(&s.value);
        }
    }

    /// The operands whose values an exit reads: all but the virtual arrays, which it builds.
    pub fn exit_values(&self) -> impl Iterator<Item = &Opnd> {
        self.operands()
            .filter(|o| o.as_ref().is_none_or(|r| self.virtual_at(r).is_none()))
    }

    /// The virtual array that `r` stands for in this snapshot, if it is one.
    pub fn virtual_at(&self, r: Ref) -> Option<&Virtual> {
        self.virtuals
            .binary_search_by_key(&r, |v| v.at)
            .ok()
            .map(|k| &self.virtuals[k])
    }

    /// The same snapshot with each operand replaced by `f` of it.
    pub fn map(&self, mut f: impl FnMut(&Opnd) -> Opnd) -> Snapshot {
        let mut entries = |es: &[(Slot, Opnd)]| es.iter().map(|(s, o)| (*s, f(o))).collect();
        Snapshot {
            pos: self.pos,
            cost: self.cost,
            entries: entries(&self.entries),
            frames: self
                .frames
                .iter()
                .map(|fr| Inlined {
                    ret: fr.ret,
                    dst: fr.dst,
                    entries: entries(&fr.entries),
                })
                .collect(),
            virtuals: self
                .virtuals
                .iter()
                .map(|v| Virtual {
                    at: f(&Opnd::Ref(v.at))
                        .as_ref()
                        .expect("a virtual array stays an instruction"),
                    fields: v.fields.iter().map(&mut f).collect(),
                })
                .collect(),
            stores: self
                .stores
                .iter()
                .map(|s| Store {
                    array: f(&s.array),
                    index: f(&s.index),
                    value: f(&s.value),
                })
                .collect(),
        }
    }

    /// The operand `slot` has at the exit, if the snapshot gives it one: a variable of the
    /// trace's own frame, or of an inlined call's ([`in_call`]).
    pub fn get(&self, slot: Slot) -> Option<&Opnd> {
        let (depth, slot) = call_of(slot);
        let entries = match depth {
            0 => &self.entries,
            d => &self.frames.get(d - 1)?.entries,
        };
        entries
            .binary_search_by_key(&slot, |(s, _)| *s)
            .ok()
            .map(|k| &entries[k].1)
    }
}

/// How slots of inlined calls' frames are numbered apart from the trace's own (see
/// [`in_call`]): above every slot a program has.
const CALL_STRIDE: u32 = 1 << 24;

/// Variable `slot` of the frame of the `depth`th inlined call of a snapshot (1 for the
/// outermost, [`Snapshot::frames`]`[0]`; 0 for the trace's own frame, `slot` itself), as a
/// bridge from a guard inside inlined calls names what it reads of their frames
/// (`input`): the bridge starts inside those calls, and goes on in its tree's frame
/// when they return.
pub fn in_call(depth: usize, slot: Slot) -> Slot {
    debug_assert!(slot.0 < CALL_STRIDE);
    Slot(slot.0 + depth as u32 * CALL_STRIDE)
}

/// The inlined call and the variable of its frame that `slot` names ([`in_call`]).
pub fn call_of(slot: Slot) -> (usize, Slot) {
    ((slot.0 / CALL_STRIDE) as usize, Slot(slot.0 % CALL_STRIDE))
}

/// Writes `snap`'s resume variables into `frame`, reading each SSA value with `value`: for
/// code that inlines no call and removes no allocation (residual programs). Returns the
/// operations the exit counts as done.
pub fn restore_frame(snap: &Snapshot, value: impl Fn(Ref) -> Value, frame: &mut Frame) -> u64 {
    debug_assert!(snap.frames.is_empty(), "a snapshot of one frame");
    debug_assert!(snap.virtuals.is_empty(), "a snapshot of no virtual array");
    debug_assert!(snap.stores.is_empty(), "a snapshot of no delayed store");
    let mut exit = Exit::new(snap, value);
    exit.write(&snap.entries, frame);
    snap.cost
}

/// Writes `snap`'s resume variables into `state`'s frame, reading each SSA value with
/// `value`, and enters the calls it lists, each with its frame. The virtual arrays it holds
/// are built first, each once (two variables that held the same array hold the same new
/// one). Returns the operations the exit counts as done. The caller made sure the calls fit
/// under the depth limit (a tree is entered only where they do).
pub fn restore(snap: &Snapshot, value: impl Fn(Ref) -> Value, state: &mut State) -> u64 {
    let mut exit = Exit::new(snap, value);
    for s in &snap.stores {
        let stored = ops::setitem(&exit.get(&s.array), &exit.get(&s.index), exit.get(&s.value));
        debug_assert!(stored.is_ok(), "a delayed store cannot fail");
    }
    exit.write(&snap.entries, &mut state.frame);
    for call in &snap.frames {
        let size = state.frame.len();
        state
            .enter(size, &[], Vec::new(), call.ret, call.dst)
            .expect("the calls of a trace fit under the depth limit");
        exit.write(&call.entries, &mut state.frame);
    }
    snap.cost
}

/// One exit's write-back: the values it reads, and the virtual arrays it has built.
struct Exit<'s, F> {
    snap: &'s Snapshot,
    value: F,
    built: Vec<Option<Value>>,
}

impl<'s, F: Fn(Ref) -> Value> Exit<'s, F> {
    fn new(snap: &'s Snapshot, value: F) -> Self {
        let mut exit = Exit {
            snap,
            value,
            built: vec![None; snap.virtuals.len()],
        };
        // Every array first, then their elements: an element may be any of them, itself
        // included.
        for (k, v) in snap.virtuals.iter().enumerate() {
            let init = vec![Value::Int(0); v.fields.len()];
            exit.built[k] = Some(Value::array(init));
        }
        for (k, v) in snap.virtuals.iter().enumerate() {
            let Some(Value::Array(array)) = exit.built[k].clone() else {
                unreachable!("built above")
            };
            for (i, o) in v.fields.iter().enumerate() {
                array.set(i, exit.get(o));
            }
        }
        exit
    }

    fn get(&self, o: &Opnd) -> Value {
        match o {
            Opnd::Ref(r) => match self.snap.virtuals.binary_search_by_key(r, |v| v.at) {
                Ok(k) => self.built[k].clone().expect("built first"),
                Err(_) => (self.value)(*r),
            },
            Opnd::Const(v) => v.clone(),
        }
    }

    fn write(&mut self, entries: &[(Slot, Opnd)], frame: &mut Frame) {
        for (slot, o) in entries {
            frame[slot.index()] = Some(self.get(o));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::BlockId;

    /// `for_each_exit_ref` lists its own parts of a snapshot: it must give what
    /// `exit_values` gives, in the same order, for every part (frames, virtual arrays,
    /// stores), leaving out constants and the virtual arrays.
    #[test]
    fn each_exit_ref_is_an_exit_value_in_the_same_order() {
        let r = |k: u32| Opnd::Ref(Ref(k));
        let c = |k: i64| Opnd::Const(Value::Int(k));
        let pos = Position {
            block: BlockId(0),
            inst: 1,
        };
        let mut snap = Snapshot::new(
            pos,
            0,
            vec![(Slot(0), r(1)), (Slot(1), c(5)), (Slot(2), r(9))],
        );
        snap.frames.push(Inlined {
            ret: pos,
            dst: Slot(3),
            entries: vec![(Slot(0), r(2)), (Slot(1), r(9))],
        });
        snap.virtuals.push(Virtual {
            at: Ref(9),
            fields: vec![r(3), c(7), r(9)],
        });
        snap.stores.push(Store {
            array: r(4),
            index: c(0),
            value: r(5),
        });
        let want: Vec<Ref> = snap.exit_values().filter_map(Opnd::as_ref).collect();
        let mut got = Vec::new();
        snap.for_each_exit_ref(|x| got.push(x));
        assert_eq!(got, want);
        assert_eq!(got, [1, 2, 3, 4, 5].map(Ref));
    }
}
