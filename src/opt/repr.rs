//! Representation: how machine code holds each value of a trace tree (LuaJIT's IR types).
//!
//! A value of type `int` is held as a 64-bit integer ([`Repr::Int`]) unless it may be past
//! 64 bits: then it is an integer of any size, boxed ([`Repr::Num`]), and its arithmetic
//! goes through helpers. A value is `Num` where it comes from one:
//! - a variable the tree holds wide (`wide`, those found past 64 bits where the tree was
//!   recorded or entered), where the tree reads it from the frame;
//! - a bridge's `input` of a value its guard's snapshot holds as `Num`;
//! - a big integer constant;
//! - arithmetic on a `Num` (a comparison of one, or `not`, is a 64-bit integer again);
//! - a loop parameter the preamble gives a `Num`, or the loop's end does: such a parameter
//!   is found when the loop's end gives it a `Num` where the preamble gave a 64-bit
//!   integer (`s = 0` before a loop that adds big integers to it), and the representations
//!   are worked out again with it held wide, until none changes.
//!
//! Atoms, lists and arrays are held as their id or address, as their type says. The pass
//! decides the representations and nothing else: whether machine code can compute with
//! them (a `Num` index, a type error to report) is the backend's to say.
//!
//! The representations belong to a compilation unit: a tree's function (its root and the
//! bridges compiled in it), or a bridge compiled on its own, whose inputs then arrive from
//! the frame rather than from its guard's registers. `--dump opt` prints a value held
//! boxed as `:num`.

use rustc_hash::FxHashMap as HashMap;

pub use flowjit_runtime::abi::Repr;
use flowjit_runtime::{Op, Value};

use crate::lang::Slot;
use crate::trace::tree::{guard_gives, is_virtual, Segment};
use crate::trace::{Inst, Kind, Opnd, Trace, Ty};

/// Where a bridge's `input` of a variable finds its value.
#[derive(Clone, Debug)]
pub enum Source {
    /// An operand of segment `.0`, from the snapshot of a guard the bridge hangs from.
    Chain(usize, Opnd),
    /// Tree input number `.0`.
    Input(usize),
}

/// The representations of a compilation unit's values ([`infer`]).
#[derive(Clone, Debug, Default)]
pub struct Reprs {
    /// Per segment and instruction: how its result is held; `None` for an instruction
    /// without a result, a virtual array, a segment compiled elsewhere, and an `input` that
    /// arrives as another type than it reads (the backend refuses that unit).
    pub values: Vec<Vec<Option<Repr>>>,
    /// The unit's inputs, read from the frame: each variable in the order first read, and
    /// how it is held (`None` for a constant machine code cannot hold).
    pub inputs: Vec<(Slot, Option<Repr>)>,
    /// Per segment: where each of its `input`s finds its value.
    pub sources: Vec<HashMap<Slot, Source>>,
    /// Whether bridges end at the tree's own anchor: then every variable a segment's end
    /// writes is an input too, the state carried from one iteration to the next.
    pub carry: bool,
}

/// How machine code holds a value of type `ty`.
pub fn of_type(ty: Ty) -> Repr {
    match ty {
        Ty::Int => Repr::Int,
        Ty::Atom => Repr::Atom,
        Ty::List => Repr::List,
        Ty::Array => Repr::Array,
        Ty::None => unreachable!("only values are held"),
    }
}

/// Whether an instruction of `kind` of type `int` may give an integer past 64 bits where
/// its operands are 64-bit ones, or none: a read of an element, a call, arithmetic that can
/// overflow. Its code may then hold its result as an integer of any size
/// ([`Segment::wide`]).
pub fn may_hold_wide(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::GetItem
            | Kind::Call(_)
            | Kind::CallPure(_)
            | Kind::Op(Op::Readlist | Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Shl | Op::Neg)
    )
}

/// How machine code holds constant `v`; `None` for none it can hold.
pub fn of_const(v: &Value) -> Option<Repr> {
    match v {
        Value::Big(_) => Some(Repr::Num),
        v => Repr::of(v),
    }
}

/// How the unit `segments` holds its values, `wide` being the variables the tree holds as
/// integers of any size where it reads them from the frame. `root` is whether the unit's
/// first segment is the tree's root loop (a tree's function, as opposed to a bridge
/// compiled on its own); segments marked `separate` are compiled elsewhere and left out.
pub fn infer(segments: &[Segment], wide: &[Slot], root: bool) -> Reprs {
    let mut wide_params = Vec::new();
    loop {
        if let Some(reprs) = infer_with(segments, wide, root, &mut wide_params) {
            return reprs;
        }
    }
}

/// [`infer`], with the loop's parameters in `wide_params` held as `Num`; `None` when the
/// loop's end gives another parameter a `Num` (added to `wide_params`).
fn infer_with(
    segments: &[Segment],
    wide: &[Slot],
    root: bool,
    wide_params: &mut Vec<usize>,
) -> Option<Reprs> {
    let mut inf = Inference {
        segments,
        wide,
        wide_params,
        reprs: Reprs::default(),
    };
    for (seg, s) in segments.iter().enumerate() {
        let mut k: Vec<Option<Repr>> = vec![None; s.trace.insts.len()];
        let mut src: HashMap<Slot, Source> = HashMap::default();
        if !s.separate {
            for i in 0..s.trace.insts.len() {
                k[i] = inf.inst(seg, i, &k, &mut src);
            }
            if seg == 0 && root && inf.widens_a_param(s.trace, &k) {
                return None;
            }
        }
        inf.reprs.values.push(k);
        inf.reprs.sources.push(src);
    }
    inf.reprs.carry = segments.iter().any(|s| s.returns && !s.separate);
    if inf.reprs.carry {
        inf.carried_inputs();
    }
    Some(inf.reprs)
}

/// The representations as [`infer_with`] works them out, segment after segment.
struct Inference<'s, 'a> {
    segments: &'s [Segment<'a>],
    wide: &'s [Slot],
    wide_params: &'s mut Vec<usize>,
    reprs: Reprs,
}

/// How operand `o` is held, given the representations `k` of the segment's values so far.
fn of_opnd(k: &[Option<Repr>], o: &Opnd) -> Option<Repr> {
    match o {
        Opnd::Ref(r) => k[r.index()],
        Opnd::Const(v) => of_const(v),
    }
}

impl Inference<'_, '_> {
    /// How the result of instruction `i` of segment `seg` is held, its earlier values held
    /// as `k`; `src` takes where its `input`s find their values.
    fn inst(
        &mut self,
        seg: usize,
        i: usize,
        k: &[Option<Repr>],
        src: &mut HashMap<Slot, Source>,
    ) -> Option<Repr> {
        let trace = self.segments[seg].trace;
        let inst = &trace.insts[i];
        match inst.kind {
            Kind::Input(slot) => self.input(seg, inst, slot, src),
            Kind::Param(_) | Kind::ParamItem => {
                // A parameter is as wide as the value the preamble gives it, or as its
                // loop's end found it must be.
                let start = trace.loop_start().expect("params follow loop_start");
                let p = i - start - 1;
                let first = of_opnd(k, &trace.insts[start].args[p]);
                if first == Some(Repr::Num) || self.wide_params.contains(&p) {
                    Some(Repr::Num)
                } else {
                    Some(of_type(inst.ty))
                }
            }
            // An integer read from an array or a list, given by a call or computed, that was
            // found past 64 bits where the code ran is held boxed (`Segment::wide`).
            kind if may_hold_wide(kind)
                && inst.ty == Ty::Int
                && self.segments[seg].wide.contains(&i) =>
            {
                Some(Repr::Num)
            }
            Kind::GetItem | Kind::CallPure(_) | Kind::Call(_) => Some(of_type(inst.ty)),
            Kind::Getchar => Some(Repr::Int),
            Kind::Op(op) if op.allocates() || op == Op::ToList => Some(of_type(inst.ty)),
            Kind::Op(Op::Same) => of_opnd(k, &inst.args[0]),
            // An array no executor makes: an exit that needs it builds it from the elements
            // its snapshot lists.
            Kind::Virtual => None,
            Kind::Op(op) => Some(op_result(op, inst, k)),
            _ => None,
        }
    }

    /// How `input` `inst` of `slot` in segment `seg` is held: as what arrives, from the
    /// unit's inputs or from the guard the bridge hangs from; `None` if that is another type.
    fn input(
        &mut self,
        seg: usize,
        inst: &Inst,
        slot: Slot,
        src: &mut HashMap<Slot, Source>,
    ) -> Option<Repr> {
        let segments = self.segments;
        let found = source(segments, seg, slot, &mut self.reprs.inputs);
        let reads = of_type(inst.ty);
        let arrives = match &found {
            // A virtual array of the guard's snapshot: the bridge builds it.
            Source::Chain(ps, Opnd::Ref(r)) if is_virtual(segments, *ps, *r) => Some(Repr::Array),
            Source::Chain(ps, Opnd::Ref(r)) => self.reprs.values[*ps][r.index()],
            Source::Chain(_, Opnd::Const(v)) => of_const(v),
            Source::Input(k) => {
                let (_, held) = &mut self.reprs.inputs[*k];
                // A variable the tree holds wide is read boxed.
                Some(*held.get_or_insert(match reads {
                    Repr::Int if self.wide.contains(&slot) => Repr::Num,
                    reads => reads,
                }))
            }
        };
        src.insert(slot, found);
        // An integer of any size that arrives where a 64-bit one was expected stays boxed.
        match (arrives?, reads) {
            (a, r) if a == r => Some(r),
            (Repr::Num, Repr::Int) => Some(Repr::Num),
            _ => None,
        }
    }

    /// Whether the root loop's end gives a parameter a `Num` where the parameter is a
    /// 64-bit integer (`k` the representations): then it is added to the wide parameters,
    /// and the representations must be worked out again.
    fn widens_a_param(&mut self, trace: &Trace, k: &[Option<Repr>]) -> bool {
        let Some(start) = trace.loop_start() else {
            return false;
        };
        let end = trace.insts.last().expect("a trace ends in loop");
        for (p, a) in end.args.iter().enumerate() {
            if of_opnd(k, a) == Some(Repr::Num) && k[start + 1 + p] != Some(Repr::Num) {
                self.wide_params.push(p);
                return true;
            }
        }
        false
    }

    /// With bridges that go back to the start, the unit's inputs are the state between
    /// iterations: a variable no `input` reads is of the type the first segment that
    /// writes it gives it.
    fn carried_inputs(&mut self) {
        for (seg, s) in self.segments.iter().enumerate() {
            if s.separate {
                continue;
            }
            let last = s.trace.insts.last().expect("a trace ends in loop");
            let end = s.trace.snap_of(last).expect("a loop has a snapshot");
            for (slot, o) in &end.entries {
                if self.reprs.inputs.iter().any(|(s, _)| s == slot) {
                    continue;
                }
                let held = match o {
                    // A virtual array (`opt::virtuals`) has no register of its own: the
                    // exit builds it after it writes the inputs back, so the input keeps
                    // what it held, an array.
                    Opnd::Ref(r) => self.reprs.values[seg][r.index()]
                        .or(Some(of_type(s.trace.insts[r.index()].ty))),
                    Opnd::Const(v) => of_const(v),
                };
                self.reprs.inputs.push((*slot, held));
            }
        }
    }
}

/// Where `slot`'s value comes from at the start of segment `seg`: for a bridge, the
/// snapshot of the guard it leaves from, which is complete; otherwise (and for the root) an
/// input of the unit, added to `inputs` if new (not yet held as anything).
fn source(
    segments: &[Segment],
    seg: usize,
    slot: Slot,
    inputs: &mut Vec<(Slot, Option<Repr>)>,
) -> Source {
    if let Some((ps, o)) = guard_gives(segments, seg, slot) {
        return Source::Chain(ps, o);
    }
    let index = inputs
        .iter()
        .position(|(s, _)| *s == slot)
        .unwrap_or_else(|| {
            inputs.push((slot, None));
            inputs.len() - 1
        });
    Source::Input(index)
}

/// How the result of operation `inst` (`op`, neither allocating nor `same`) is held, its
/// operands held as `k` says: an integer of any size for arithmetic on one, a 64-bit
/// integer for a comparison of one or `not`, otherwise as its type says.
fn op_result(op: Op, inst: &Inst, k: &[Option<Repr>]) -> Repr {
    let on_num = inst.args.iter().any(|a| of_opnd(k, a) == Some(Repr::Num));
    match op {
        _ if !on_num => of_type(inst.ty),
        Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Not => Repr::Int,
        _ => Repr::Num,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::parse::parse_ssa;

    fn root_reprs(text: &str) -> Vec<Option<Repr>> {
        let (trace, _) = parse_ssa(text).unwrap_or_else(|e| panic!("{e}"));
        let mut reprs = infer(&[Segment::root(&trace)], &[], true);
        reprs.values.remove(0)
    }

    /// `s = 0` before a loop that adds a big integer to `s`: the parameter is found wide
    /// at the loop's end, and what is computed from it is held boxed; the counter and the
    /// comparison stay 64-bit.
    #[test]
    fn a_parameter_the_loop_end_makes_wide_is_held_boxed() {
        let reprs = root_reprs(
            "[i:int]
             v0:int = input i  @l:0 #0 []
             loop_start 0, v0  @l:0 #0 [s=0, i=v0]
             v2:int = param s
             v3:int = param i
             v4:int = add v2, 100000000000000000000  @l:1 #1 [s=v2, i=v3]
             v5:int = sub v3, 1  @l:2 #2 [s=v4, i=v3]
             v6:int = lt v4, v5
             loop v4, v5  @l:0 #3 [s=v4, i=v5]",
        );
        assert_eq!(reprs[2], Some(Repr::Num));
        assert_eq!(reprs[3], Some(Repr::Int));
        assert_eq!(reprs[4], Some(Repr::Num));
        assert_eq!(reprs[5], Some(Repr::Int));
        assert_eq!(reprs[6], Some(Repr::Int));
    }
}
