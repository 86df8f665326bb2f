//! Heap forwarding: a stage of the forward optimizer (`forward`), after `cse` (PyPy's
//! `OptHeap`, LuaJIT's `lj_opt_mem.c` for loads and stores).
//!
//! The stage keeps what the trace knows of array elements: for an (array, index) pair of
//! operands, the operand the element holds. A `getitem` of a known element *becomes* that
//! operand (a value stored and read back, or read twice, is read once), and its bounds and
//! type checks go with it: the access that made the element known passed them. A `setitem`
//! of the value the element already holds is dropped. A `setitem` makes its element known
//! and forgets every other element it may have changed: one of an array that may be the same
//! (two different constant arrays are known apart, and two that a guard told apart: the
//! recorder guards `guard_false(eq(a, b))` for the arrays a trace uses, see
//! `trace::record::MAX_APART`) at an index that may be the same
//! (two different constants are known apart, and so are `x + c1` and `x + c2` with `c1` and
//! `c2` different, as a stack pointer and the one above it). Elidable calls change nothing the stage knows
//! (their promise); output and input touch no array. A `call` not inlined may store into
//! any array: the stage forgets every element (but which indices are in bounds).
//!
//! Across a peeled loop's `loop_start` the stage keeps what no store of the loop can change:
//! a load in the loop then finds the preamble's value, and leaves the loop. Where a store
//! may change an element, the loop's first iteration would otherwise read what the
//! preamble's stores left, which later iterations change (`Heap::keep_invariant`).
//!
//! ```text
//! setitem v0, v1, v5  @l:1 #1 []            setitem v0, v1, v5  @l:1 #1 []
//! v3:int = getitem v0, v1  @l:2 #2 []  =>   (v3 is v5)
//! setitem v0, 2, 9  @l:3 #3 [x=v3]          setitem v0, 2, 9  @l:3 #3 [x=v5]
//! v5:int = getitem v0, v1  @l:4 #4 [x=v3]   v5:int = getitem v0, v1  ...  (index 2 may be v1)
//! ```

use flowjit_runtime::{Op, Value};

use super::forward::{Optimizer, Pending, Stage, Verdict};
use super::rewrite::Rewriter;
use super::Rejected;
use crate::trace::{Inst, Kind, Opnd, Ref, Trace, Ty};

/// The heap stage: the elements known, as ((array, index), value).
#[derive(Default)]
pub struct Heap {
    known: Vec<((Opnd, Opnd), Opnd)>,
    /// In a peeled trace, the new `loop_start`, once emitted.
    start: Option<Ref>,
    /// The elements known at the end of the preamble, before `keep_invariant`.
    at_start: Vec<((Opnd, Opnd), Opnd)>,
    /// The (array, index) of every store in the loop so far.
    loop_stores: Vec<(Opnd, Opnd)>,
    /// The loads of the loop that may carry their element (see [`Carry`]): each, its array
    /// and its index.
    loop_loads: Vec<(Ref, Opnd, Opnd)>,
    /// Whether the trace has stored into an array so far.
    stored: bool,
    /// Pairs of array operands a guard has told apart (`guard_false(eq(a, b))`).
    apart: Vec<(Opnd, Opnd)>,
    /// The (array, index) of every store so far.
    stores: Vec<(Opnd, Opnd)>,
    /// Every (array, index) read or written so far: an index of its array for good (an
    /// array's length never changes), so a store there cannot fail.
    checked: Vec<(Opnd, Opnd)>,
    /// Whether the loop's body found an element as the preamble left it
    /// (`Trace::heap_from_preamble`), told to the optimizer at the loop's end.
    from_preamble: bool,
    /// Whether the trace has made a `call` so far: the loop's body, which makes it again,
    /// keeps nothing of the preamble's elements.
    called: bool,
}

/// Whether two array operands are surely different arrays: two different constants, or
/// two that a guard has told apart.
pub(super) fn distinct_arrays(apart: &[(Opnd, Opnd)], a: &Opnd, b: &Opnd) -> bool {
    match (a, b) {
        (Opnd::Const(Value::Array(x)), Opnd::Const(Value::Array(y))) => !std::rc::Rc::ptr_eq(x, y),
        _ => apart
            .iter()
            .any(|(p, q)| (p == a && q == b) || (p == b && q == a)),
    }
}

/// An index as a base and a constant offset: `x + 2` is (`x`, 2), `x - 1` (`x`, -1), a
/// constant `k` (none, `k`).
fn split(insts: &[Inst], i: &Opnd) -> Option<(Option<Ref>, i64)> {
    match i {
        Opnd::Const(Value::Int(k)) => Some((None, *k)),
        Opnd::Const(_) => None,
        Opnd::Ref(r) => {
            let def = &insts[r.index()];
            Some(match (def.kind, def.args.as_slice()) {
                (Kind::Op(Op::Add), [Opnd::Ref(x), Opnd::Const(Value::Int(c))])
                | (Kind::Op(Op::Add), [Opnd::Const(Value::Int(c)), Opnd::Ref(x)]) => (Some(*x), *c),
                (Kind::Op(Op::Sub), [Opnd::Ref(x), Opnd::Const(Value::Int(c))])
                    if *c != i64::MIN =>
                {
                    (Some(*x), -c)
                }
                _ => (Some(*r), 0),
            })
        }
    }
}

/// Whether two index operands are surely different indices: two different constants, or
/// the same value plus two different constants (a stack pointer and the one above it).
pub(super) fn distinct_indices(insts: &[Inst], i: &Opnd, j: &Opnd) -> bool {
    match (split(insts, i), split(insts, j)) {
        (Some((a, x)), Some((b, y))) => a == b && x != y,
        _ => false,
    }
}

fn lookup<'k>(known: &'k [((Opnd, Opnd), Opnd)], array: &Opnd, index: &Opnd) -> Option<&'k Opnd> {
    known
        .iter()
        .find(|((a, i), _)| a == array && i == index)
        .map(|(_, v)| v)
}

impl Heap {
    fn lookup(&self, array: &Opnd, index: &Opnd) -> Option<&Opnd> {
        lookup(&self.known, array, index)
    }

    fn check(&mut self, array: &Opnd, index: &Opnd) {
        let key = (array.clone(), index.clone());
        if !self.checked.contains(&key) {
            self.checked.push(key);
        }
    }
}

/// An element a peeled loop carries in a register from one iteration to the next instead of
/// loading it (PyPy's short preamble, for array elements): the loop's `load` reads it
/// before any store of the loop may have changed it, its array and index are defined
/// before `loop_start`, and the stage knows what the element holds at `loop_start`
/// (`first`) and at `loop` (`next`), both of the load's type. The load becomes a
/// `param_item` that receives `first` and `next` ([`carry`]).
///
/// ```text
/// setitem v0, 0, v5  ...                    setitem v0, 0, v5  ...
/// loop_start v5  ...                        loop_start v5, v5  ...
/// v7:int = param i                          v7:int = param i
/// v8:int = getitem v0, 0  ...        =>     v8:int = param_item v0, 0
/// v9:int = add v8, v7  ...                  v9:int = add v8, v7  ...
/// setitem v0, 0, v9  ...                    setitem v0, 0, v9  ...
/// loop v9  ...                              loop v9, v9  ...
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Carry {
    /// The load in the loop.
    pub load: Ref,
    /// The array it reads.
    pub array: Opnd,
    /// The index it reads.
    pub index: Opnd,
    /// What the element holds at `loop_start`.
    pub first: Opnd,
    /// What the element holds at `loop`.
    pub next: Opnd,
}

/// `trace` (as the forward optimizer emitted it, which found `carries`) with each carried
/// load replaced by a `param_item` after the `param`s.
pub fn carry(trace: &Trace, carries: &[Carry]) -> Trace {
    let start = trace.loop_start().expect("a peeled trace");
    let last_param = start + trace.insts[start].args.len();
    let mut rw = Rewriter::new(trace);
    let mut items: Vec<Ref> = Vec::with_capacity(carries.len());
    for (i, inst) in trace.insts.iter().enumerate() {
        match inst.kind {
            Kind::LoopStart | Kind::Loop => {
                let mut args = rw.args(inst);
                args.extend(carries.iter().map(|c| {
                    rw.opnd(if inst.kind == Kind::Loop {
                        &c.next
                    } else {
                        &c.first
                    })
                }));
                rw.keep_with(i, args);
            }
            Kind::GetItem => match carries.iter().position(|c| c.load.index() == i) {
                Some(k) => rw.set(i, Opnd::Ref(items[k])),
                None => {
                    rw.keep(i);
                }
            },
            _ => {
                rw.keep(i);
            }
        }
        if i == last_param {
            for c in carries {
                let args = vec![rw.opnd(&c.array), rw.opnd(&c.index)];
                items.push(rw.push_new(Inst {
                    kind: Kind::ParamItem,
                    args,
                    snap: None,
                    origin: None,
                    ty: trace.insts[c.load.index()].ty,
                }));
            }
        }
    }
    let mut carried = rw.finish();
    carried.carries_elements |= !carries.is_empty();
    carried
}

impl Heap {
    /// At `loop_start` of a trace that stores: keeps only the elements that no store of the
    /// loop can change. The loop's stores are the preamble's again, each through the same
    /// array operand where that is a constant or a variable the loop does not carry (its
    /// `input`), and through a `param` or a new value otherwise. An element is kept when its
    /// array is such an invariant operand too, and every store is through an invariant array
    /// told apart from it, or at a different constant index.
    fn keep_invariant(&mut self, opt: &Optimizer) {
        let old = opt.out.old;
        let carried: Vec<crate::lang::Slot> = old
            .loop_start()
            .map(|s| {
                old.insts[s + 1..]
                    .iter()
                    .map_while(|i| match i.kind {
                        Kind::Param(slot) => Some(slot),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let invariant = |o: &Opnd| match o {
            Opnd::Const(_) => true,
            Opnd::Ref(r) => {
                matches!(opt.out.def(*r).kind, Kind::Input(slot) if !carried.contains(&slot))
            }
        };
        let (stores, apart) = (&self.stores, &self.apart);
        self.known.retain(|((a, i), _)| {
            invariant(a)
                && stores.iter().all(|(b, j)| {
                    let indices = matches!((i, j), (Opnd::Const(x), Opnd::Const(y)) if x != y);
                    indices || (invariant(b) && distinct_arrays(apart, a, b))
                })
        });
    }
}

impl Stage for Heap {
    fn visit(&mut self, opt: &Optimizer, inst: &mut Pending) -> Result<Verdict, Rejected> {
        // An element found in the loop's body as the preamble left it.
        let preamble = |heap: &Heap, v: &Opnd| {
            heap.start.is_some() && lookup(&heap.at_start, &inst.args[0], &inst.args[1]) == Some(v)
        };
        Ok(match inst.kind {
            Kind::GetItem => match self.lookup(&inst.args[0], &inst.args[1]) {
                Some(v) => {
                    let v = v.clone();
                    self.from_preamble |= preamble(self, &v);
                    Verdict::Becomes(v)
                }
                None => Verdict::Pass,
            },
            Kind::SetItem => match self.lookup(&inst.args[0], &inst.args[1]) {
                Some(v) if *v == inst.args[2] => {
                    let v = v.clone();
                    self.from_preamble |= preamble(self, &v);
                    Verdict::Holds
                }
                _ => {
                    let key = (inst.args[0].clone(), inst.args[1].clone());
                    if self.checked.contains(&key) {
                        inst.snapshot = false;
                    }
                    Verdict::Pass
                }
            },
            Kind::LoopStart => {
                self.at_start = self.known.clone();
                if self.called {
                    self.known.clear();
                } else if self.stored {
                    self.keep_invariant(opt);
                }
                Verdict::Pass
            }
            _ => Verdict::Pass,
        })
    }

    fn learn(&mut self, opt: &mut Optimizer, r: Ref) {
        let inst = opt.out.def(r);
        match inst.kind {
            Kind::GetItem => {
                let (a, i) = (&inst.args[0], &inst.args[1]);
                if let Some(s) = self.start {
                    let invariant = |o: &Opnd| o.as_ref().is_none_or(|x| x < s);
                    let unchanged = self.loop_stores.iter().all(|(b, j)| {
                        distinct_arrays(&self.apart, a, b)
                            || distinct_indices(opt.out.insts(), i, j)
                    });
                    if invariant(a) && invariant(i) && unchanged {
                        self.loop_loads.push((r, a.clone(), i.clone()));
                    }
                }
                self.check(a, i);
                self.known.push(((a.clone(), i.clone()), Opnd::Ref(r)));
            }
            Kind::ParamItem => {
                let (a, i) = (&inst.args[0], &inst.args[1]);
                self.known.push(((a.clone(), i.clone()), Opnd::Ref(r)));
            }
            Kind::LoopStart => self.start = Some(r),
            Kind::Loop => {
                opt.heap_from_preamble |= self.from_preamble;
                let insts = opt.out.insts();
                for (load, a, i) in &self.loop_loads {
                    let ty = insts[load.index()].ty;
                    let first = lookup(&self.at_start, a, i).filter(|o| o.ty(insts) == ty);
                    let next = self.lookup(a, i).filter(|o| o.ty(insts) == ty);
                    if let (Some(first), Some(next)) = (first, next) {
                        opt.carries.push(Carry {
                            load: *load,
                            array: a.clone(),
                            index: i.clone(),
                            first: first.clone(),
                            next: next.clone(),
                        });
                    }
                }
            }
            Kind::GuardFalse => {
                if let Opnd::Ref(t) = &inst.args[0] {
                    let test = opt.out.def(*t);
                    let arrays = test.args.iter().all(|o| o.ty(opt.out.insts()) == Ty::Array);
                    if test.kind == Kind::Op(Op::Eq) && arrays {
                        self.apart
                            .push((test.args[0].clone(), test.args[1].clone()));
                    }
                }
            }
            Kind::SetItem => {
                let (a, i) = (&inst.args[0], &inst.args[1]);
                self.stored = true;
                self.stores.push((a.clone(), i.clone()));
                if self.start.is_some() {
                    self.loop_stores.push((a.clone(), i.clone()));
                }
                let opt = &*opt;
                let apart = &self.apart;
                self.known.retain(|((b, j), _)| {
                    distinct_arrays(apart, a, b) || distinct_indices(opt.out.insts(), i, j)
                });
                self.known
                    .push(((a.clone(), i.clone()), inst.args[2].clone()));
                let (a, i) = (a.clone(), i.clone());
                self.check(&a, &i);
            }
            // The function may store anything into any array.
            Kind::Call(_) => {
                self.called = true;
                self.stored = true;
                self.known.clear();
            }
            _ => {}
        }
    }
}
