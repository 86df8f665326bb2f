//! What is known of a whole program before machine code is made of it (a residual program
//! of the partial evaluator, compiled by `backend::cfg`): how each variable is held (its
//! representation, one for the whole program), which are certainly written where, the
//! lengths of its arrays, the intervals of its integers where each block starts, and where
//! its bounds checks go ([`bounds`]). The analysis of a trace's values is `opt::repr`'s.

pub mod bounds;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use flowjit_runtime::abi::Repr;
use flowjit_runtime::{Op, Value};

use crate::lang::{BlockId, Inst, Operand, Program, Slot};
use crate::opt::interval::Range;
use crate::resume::Snapshot;
use crate::state::Frame;

/// Why a program's variables have no representation machine code holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unrepresentable {
    /// A big integer constant.
    BigConstant,
    /// A big integer written where the program starts.
    BigInput,
    /// `readlist` of a list whose elements' kind is not known.
    UnknownElements,
    /// A variable assigned values of two kinds.
    TwoKinds(String),
}

/// What is known of a program before it is lowered.
pub struct ProgramAnalysis {
    /// Per slot: the kind of its values, if it ever holds one.
    pub kinds: Vec<Option<Repr>>,
    /// Per block: the slots certainly written when the block starts.
    pub defined: Vec<Slots>,
    /// Whether every array the program reads holds only integers: those of the frame do,
    /// it makes arrays only with `array(n, v)` of an integer `v`, and it stores only
    /// integers. Elements are then read and written without their tags.
    pub ints: bool,
    /// With `ints`, the interval every element lies in, when the program's stores keep
    /// them in one (`element_range`): a sum of an element and a small constant then needs
    /// no overflow check.
    pub elements: Option<Range>,
    /// Per slot: the length of every array the variable holds, when known (`lengths`).
    pub lengths: Vec<Option<i64>>,
    /// Per block: the interval of each variable's integer wherever the block starts, when
    /// known (`entry_ranges`).
    pub entry_ranges: Vec<Vec<Option<Range>>>,
    /// Where the bounds checks of indexes relative to a variable go ([`bounds::plan`]).
    pub bounds: bounds::Plan,
    /// The deoptimization points: where the interpreter resumes, and the variables written
    /// there, each in the register of its slot (entry `Ref(k)` is register `k`).
    pub points: Vec<Snapshot>,
    /// Per block, per statement: what machine code checks there ([`checks_of`]).
    pub checked: Vec<Vec<Checked>>,
}

/// What machine code checks at a statement of the program ([`ProgramAnalysis::checked`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// An access of an array (`setitem`, `readlist`): whether its index is checked against
    /// the array's length, because neither the block's check of a span of indexes
    /// ([`bounds::Plan::covered`]) nor what is known of the index holds it within.
    pub bounds: bool,
    /// An operation: whether its result is checked for overflow, which a sum or difference
    /// of integers whose intervals keep it within 64 bits is not.
    pub overflow: bool,
}

/// [`ProgramAnalysis::checked`]: per block, what is known of its values at each statement
/// (`Facts`, from the block's entry), and from it what machine code checks there.
fn checks_of(program: &Program, an: &ProgramAnalysis) -> Vec<Vec<Checked>> {
    (program.blocks.iter().enumerate())
        .map(|(bi, block)| {
            let mut facts = an.facts(bi);
            (block.insts.iter().enumerate())
                .map(|(k, inst)| {
                    let covered = an.bounds.covered[bi].contains(&k);
                    let operands = inst.operands();
                    let bounds = match inst {
                        Inst::SetItem { array, index, .. } => {
                            !covered && !facts.in_bounds(&Operand::Var(*array), index)
                        }
                        Inst::Op2 {
                            op: Op::Readlist, ..
                        } => !covered && !facts.in_bounds(&operands[0], &operands[1]),
                        _ => false,
                    };
                    let overflow = match inst {
                        Inst::Op1 { op, .. } | Inst::Op2 { op, .. }
                            if matches!(op, Op::Add | Op::Sub) =>
                        {
                            facts.result(*op, &operands, an.elements).is_none()
                        }
                        _ => true,
                    };
                    facts.step(inst, an.elements);
                    Checked { bounds, overflow }
                })
                .collect()
        })
        .collect()
}

/// How operand `o` is held, given how the variables are (`kinds`): `None` for a variable
/// never written.
pub fn operand_kind(kinds: &[Option<Repr>], o: &Operand) -> Result<Option<Repr>, Unrepresentable> {
    match o {
        Operand::Var(s) => Ok(kinds[s.index()]),
        Operand::Const(v) => Repr::of(v).map(Some).ok_or(Unrepresentable::BigConstant),
    }
}

/// The kind of a list's elements, when they all have one: the list is a constant, or a
/// variable holding a list in `frame` (compiled right before it runs) that the program
/// never assigns. The code checks each element's tag anyway, and deoptimizes on another.
fn element_kind(program: &Program, frame: &Frame, list: &Operand) -> Result<Repr, Unrepresentable> {
    let assigned = |slot: Slot| {
        program
            .blocks
            .iter()
            .flat_map(|b| &b.insts)
            .any(|i| i.operation().is_some_and(|(dst, _, _)| dst == slot))
    };
    let value = match list {
        Operand::Const(v) => Some(v),
        Operand::Var(s) if !assigned(*s) => frame[s.index()].as_ref(),
        Operand::Var(_) => None,
    };
    let kinds: Option<Vec<Repr>> = match value {
        Some(Value::List(items)) => items.iter().map(Repr::of).collect(),
        _ => None,
    };
    match kinds.as_deref() {
        Some([first, rest @ ..]) if rest.iter().all(|k| k == first) && *first != Repr::List => {
            Ok(*first)
        }
        _ => Err(Unrepresentable::UnknownElements),
    }
}

/// Kinds of every variable (from `frame` for those written there, and from what is assigned
/// them) and which variables are certainly written where.
pub fn analyze(
    program: &Program,
    entry: BlockId,
    frame: &Frame,
) -> Result<ProgramAnalysis, Unrepresentable> {
    let n = program.frame_size();
    let mut kinds: Vec<Option<Repr>> = vec![None; n];
    let mut at_entry = Slots::none(n);
    for s in (0..n).filter(|&s| frame[s].is_some()) {
        at_entry.insert(Slot(s as u32));
    }
    for s in at_entry.iter() {
        let v = frame[s.index()].as_ref().expect("written");
        kinds[s.index()] = Some(Repr::of(v).ok_or(Unrepresentable::BigInput)?);
    }
    kinds_of_assignments(program, frame, &mut kinds)?;
    let kind_of = |o: &Operand| operand_kind(&kinds, o).ok().flatten();
    // An array inside an input list would be read through the list: inputs hold arrays
    // only at the top, of integers.
    let ints = frame.iter().all(|v| match v {
        Some(Value::Array(a)) => a.only_ints(),
        Some(v) => !v.holds_array(),
        None => true,
    }) && program
        .blocks
        .iter()
        .flat_map(|b| &b.insts)
        .all(|inst| match inst {
            Inst::SetItem { value, .. } => kind_of(value) == Some(Repr::Int),
            Inst::Op2 {
                op: Op::Array, b, ..
            } => kind_of(b) == Some(Repr::Int),
            Inst::Op1 {
                op: Op::ToArray, ..
            } => false,
            _ => true,
        });
    let defined = certainly_written(program, entry, &at_entry);
    let lengths = lengths(program, frame);
    let elements = if ints {
        element_range(program, frame, &kinds, &lengths)
    } else {
        None
    };
    let entry_ranges = entry_ranges(program, entry, &kinds, &lengths, elements);
    let bounds = bounds::plan(program, entry, &kinds, &defined, ints);
    let mut an = ProgramAnalysis {
        kinds,
        defined,
        elements,
        lengths,
        entry_ranges,
        bounds,
        ints,
        points: Vec::new(),
        checked: Vec::new(),
    };
    an.checked = checks_of(program, &an);
    Ok(an)
}

/// The kind of each variable, to a fixpoint: an assignment gives its variable the kind of
/// its result. `kinds` holds those of the variables written where the code starts.
fn kinds_of_assignments(
    program: &Program,
    frame: &Frame,
    kinds: &mut [Option<Repr>],
) -> Result<(), Unrepresentable> {
    loop {
        let mut changed = false;
        for block in &program.blocks {
            for inst in &block.insts {
                if let Inst::Getchar(dst) = inst {
                    changed |= kinds[dst.index()].is_none();
                    match kinds[dst.index()].get_or_insert(Repr::Int) {
                        Repr::Int => continue,
                        _ => return Err(Unrepresentable::TwoKinds(program.var(*dst).to_string())),
                    }
                }
                let Some((dst, op, args)) = inst.operation() else {
                    continue;
                };
                let arg_kinds = args
                    .iter()
                    .map(|a| operand_kind(kinds, a))
                    .collect::<Result<Vec<_>, _>>()?;
                let kind = match op {
                    Op::Same => match arg_kinds[0] {
                        Some(k) => k,
                        None => continue,
                    },
                    // An element of an array is expected to be an integer (the code checks).
                    Op::Readlist if arg_kinds[0] == Some(Repr::Array) => Repr::Int,
                    Op::Readlist => element_kind(program, frame, args[0])?,
                    Op::Array | Op::ToArray => Repr::Array,
                    Op::ToList => Repr::List,
                    _ => Repr::Int,
                };
                match kinds[dst.index()] {
                    None => {
                        kinds[dst.index()] = Some(kind);
                        changed = true;
                    }
                    Some(k) if k != kind => {
                        return Err(Unrepresentable::TwoKinds(program.var(dst).to_string()))
                    }
                    Some(_) => {}
                }
            }
        }
        if !changed {
            break;
        }
    }
    Ok(())
}

/// The variables certainly written at the start of each block (a must-analysis), from
/// those written at `entry`'s.
fn certainly_written(program: &Program, entry: BlockId, at_entry: &Slots) -> Vec<Slots> {
    let n = program.frame_size();
    let mut defined: Vec<Slots> = vec![Slots::all(n); program.blocks.len()];
    defined[entry.index()] = at_entry.clone();
    // A worklist: a block goes back on it when what is certainly written at its start
    // shrank.
    let mut work: Vec<usize> = (0..program.blocks.len()).rev().collect();
    let mut queued = vec![true; program.blocks.len()];
    while let Some(b) = work.pop() {
        queued[b] = false;
        let block = &program.blocks[b];
        let mut out = defined[b].clone();
        for s in block.insts.iter().filter_map(Inst::written) {
            out.insert(s);
        }
        for j in block.term.jumps() {
            let t = j.target.index();
            if defined[t].meet(&out) && !std::mem::replace(&mut queued[t], true) {
                work.push(t);
            }
        }
    }
    defined
}

/// A set of slots, as bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slots(Vec<u64>);

impl Slots {
    /// No slot of `n`.
    pub fn none(n: usize) -> Slots {
        Slots(vec![0; n.div_ceil(64)])
    }

    /// Every slot of `n`.
    pub fn all(n: usize) -> Slots {
        let mut all = Slots::none(n);
        for s in 0..n {
            all.insert(Slot(s as u32));
        }
        all
    }

    /// Whether it holds `s`.
    pub fn contains(&self, s: Slot) -> bool {
        self.0[s.index() / 64] >> (s.index() % 64) & 1 == 1
    }

    /// Adds `s`.
    pub fn insert(&mut self, s: Slot) {
        self.0[s.index() / 64] |= 1 << (s.index() % 64);
    }

    /// Keeps only the slots `other` has too; whether that removed any.
    pub fn meet(&mut self, other: &Slots) -> bool {
        let mut changed = false;
        for (w, o) in self.0.iter_mut().zip(&other.0) {
            changed |= *w & !o != 0;
            *w &= o;
        }
        changed
    }

    /// The slots it holds, in order.
    pub fn iter(&self) -> impl Iterator<Item = Slot> + '_ {
        (0..self.0.len() * 64)
            .map(|s| Slot(s as u32))
            .filter(|s| self.contains(*s))
    }
}

/// What a block knows, statement by statement from its start (nothing is known there): the
/// interval of each variable that holds an integer of a known one (`opt::interval`, both
/// ends bounded within 64 bits), and the indexes already
/// used on each array, which are in bounds from then on (arrays do not change length).
struct Facts<'a> {
    /// Per slot: the kind of the variable's values (a list's elements are not bounded by
    /// what arrays hold).
    kinds: &'a [Option<Repr>],
    /// Per slot: the length of every array the variable ever holds, when the program
    /// knows it (`lengths`).
    lengths: &'a [Option<i64>],
    ranges: Vec<Option<Range>>,
    /// Per array variable: the highest constant index used (every one from 0 is in bounds).
    consts: HashMap<Slot, i64>,
    /// Array variables and index variables used together.
    vars: HashSet<(Slot, Slot)>,
}

impl<'a> Facts<'a> {
    fn new(kinds: &'a [Option<Repr>], lengths: &'a [Option<i64>]) -> Facts<'a> {
        Facts {
            kinds,
            lengths,
            ranges: vec![None; kinds.len()],
            consts: HashMap::default(),
            vars: HashSet::default(),
        }
    }

    /// The interval `o`'s integer is known to lie in.
    pub fn range(&self, o: &Operand) -> Option<Range> {
        match o {
            Operand::Var(s) => self.ranges[s.index()],
            Operand::Const(Value::Int(c)) => Some(Range::exactly((*c).into())),
            Operand::Const(_) => None,
        }
    }

    /// Whether `array[index]` is known to be in bounds.
    pub fn in_bounds(&self, array: &Operand, index: &Operand) -> bool {
        let Operand::Var(a) = array else { return false };
        match index {
            Operand::Const(Value::Int(i)) => {
                self.lengths[a.index()].is_some_and(|len| (0..len).contains(i))
                    || self.consts.get(a).is_some_and(|top| (0..=*top).contains(i))
            }
            Operand::Var(i) => self.vars.contains(&(*a, *i)),
            Operand::Const(_) => false,
        }
    }

    /// The interval of `op` on `args`, when known: with `elements` the interval of every
    /// array element, when known.
    pub fn result(&self, op: Op, args: &[Operand], elements: Option<Range>) -> Option<Range> {
        // The optimizer's interval arithmetic, on bounds that must fit in 64 bits.
        let range = |o: &Operand| self.range(o);
        let fits = |r: Range| Some(r).filter(|r| r.fits_i64());
        match (op, args) {
            (Op::Same, [a]) => self.range(a),
            (Op::Readlist, [Operand::Var(a), _]) if self.kinds[a.index()] == Some(Repr::Array) => {
                elements
            }
            (Op::Add, [a, b]) => fits(range(a)? + range(b)?),
            (Op::Sub, [a, b]) => fits(range(a)? - range(b)?),
            (Op::And, [a, b]) => fits(Range::mask(&[range(a), range(b)])?),
            _ => None,
        }
    }

    /// Goes past `inst`, which ran without leaving: what it assigned and the index it used.
    pub fn step(&mut self, inst: &Inst, elements: Option<Range>) {
        let used = match inst {
            Inst::SetItem { array, index, .. } => Some((*array, index.clone())),
            Inst::Op2 {
                op: Op::Readlist,
                a: Operand::Var(array),
                b: index,
                ..
            } => Some((*array, index.clone())),
            _ => None,
        };
        let assigned = match inst {
            Inst::Op1 { dst, op, .. } | Inst::Op2 { dst, op, .. } => {
                Some((*dst, self.result(*op, &inst.operands(), elements)))
            }
            Inst::Getchar(dst) => Some((*dst, None)),
            _ => None,
        };
        if let Some((array, index)) = used {
            match index {
                Operand::Const(Value::Int(i)) if i >= 0 => {
                    let top = self.consts.entry(array).or_insert(i);
                    *top = (*top).max(i);
                }
                Operand::Var(i) => {
                    self.vars.insert((array, i));
                    // An index used is one of an array's: far from the ends of 64 bits.
                    let index = Range::new(0, flowjit_runtime::value::MAX_INDEX.into());
                    let r = &mut self.ranges[i.index()];
                    *r = Some(r.unwrap_or(index).meet(index));
                }
                Operand::Const(_) => {}
            }
        }
        if let Some((dst, range)) = assigned {
            self.ranges[dst.index()] = range;
            self.consts.remove(&dst);
            self.vars.retain(|(a, i)| *a != dst && *i != dst);
        }
    }
}

/// Per slot: the length of every array the variable ever holds, when the program assigns it
/// only `array(n, v)` with the same constant `n` and the frame does not hold it at the start
/// (arrays never change length). A constant index is then checked once, here.
fn lengths(program: &Program, frame: &Frame) -> Vec<Option<i64>> {
    let mut lengths: Vec<Option<Option<i64>>> = vec![None; program.frame_size()];
    for inst in program.blocks.iter().flat_map(|b| &b.insts) {
        let Some(dst) = inst.written() else { continue };
        let n = match inst {
            Inst::Op2 {
                op: Op::Array,
                a: Operand::Const(Value::Int(n)),
                ..
            } => Some(*n),
            _ => None,
        };
        let known = lengths[dst.index()].get_or_insert(n);
        if *known != n {
            *known = None;
        }
    }
    lengths
        .into_iter()
        .enumerate()
        .map(|(s, n)| n.flatten().filter(|_| frame[s].is_none()))
        .collect()
}

/// The interval of every element of every array `program` can read, when `ints` holds
/// ([`ProgramAnalysis::ints`]) and each block's facts bound what it stores: the elements of the
/// frame's arrays, the values `array(n, v)` fills with, and what `setitem` stores, taken to
/// a fixpoint (a load gives the interval found so far).
fn element_range(
    program: &Program,
    frame: &Frame,
    kinds: &[Option<Repr>],
    lengths: &[Option<i64>],
) -> Option<Range> {
    let mut initial: Option<Range> = Some(Range::exactly(0));
    for v in frame.iter().flatten() {
        if let Value::Array(a) = v {
            for k in 0..a.len() {
                let x = match a.get(k) {
                    Some(Value::Int(x)) => x,
                    _ => return None,
                };
                initial = join(initial, Some(Range::exactly(x.into())));
            }
        }
    }
    let mut hull = initial;
    // Each round can only widen the hull; a few rounds settle what programs store.
    for _ in 0..4 {
        let mut found = initial;
        for block in &program.blocks {
            let mut facts = Facts::new(kinds, lengths);
            for inst in &block.insts {
                match inst {
                    Inst::SetItem { value, .. } => found = join(found, facts.range(value)),
                    Inst::Op2 {
                        op: Op::Array, b, ..
                    } => found = join(found, facts.range(b)),
                    _ => {}
                }
                found?;
                facts.step(inst, hull);
            }
        }
        if found == hull {
            return hull;
        }
        hull = found;
    }
    None
}

/// The smallest interval holding both, when both are known.
fn join(a: Option<Range>, b: Option<Range>) -> Option<Range> {
    Some(a?.hull(b?))
}

/// How many times a block's entry intervals may widen before the variables still
/// changing are given up as unknown there (the join of a loop's entries climbs one
/// iteration at a time).
const WIDEN_AFTER: usize = 4;

/// Per block: what every way into it knows of each variable's integer, the join (the
/// hull) of the intervals at the end of each predecessor, [`Facts`] run through it from
/// what its own entry knows; nothing at `entry`, where the frame comes from the caller. A
/// Brainfuck pointer moved by a constant and then used as an index ends each block
/// within an array's bounds, so the next block's `ptr - 11` needs no overflow check. A
/// block that nothing reaches knows nothing (its intervals are never used). A block
/// whose intervals still grow after [`WIDEN_AFTER`] joins gives up those that grow.
fn entry_ranges(
    program: &Program,
    entry: BlockId,
    kinds: &[Option<Repr>],
    lengths: &[Option<i64>],
    elements: Option<Range>,
) -> Vec<Vec<Option<Range>>> {
    let n = program.frame_size();
    let unknown = vec![None; n];
    let mut at: Vec<Option<Vec<Option<Range>>>> = vec![None; program.blocks.len()];
    let mut joins = vec![0usize; program.blocks.len()];
    at[entry.index()] = Some(unknown.clone());
    let mut work = vec![entry.index()];
    while let Some(bi) = work.pop() {
        let Some(start) = at[bi].clone() else {
            continue;
        };
        let block = &program.blocks[bi];
        let mut facts = Facts::new(kinds, lengths);
        facts.ranges = start;
        for inst in &block.insts {
            facts.step(inst, elements);
        }
        for jump in block.term.jumps() {
            let ti = jump.target.index();
            let joined: Vec<Option<Range>> = match &at[ti] {
                None => facts.ranges.clone(),
                Some(old) => old
                    .iter()
                    .zip(&facts.ranges)
                    .map(|(a, b)| join(*a, *b))
                    .collect(),
            };
            if at[ti].as_ref() == Some(&joined) {
                continue;
            }
            joins[ti] += 1;
            let joined = match &at[ti] {
                // Still growing: what grows is unknown from now on.
                Some(old) if joins[ti] > WIDEN_AFTER => old
                    .iter()
                    .zip(joined)
                    .map(|(a, b)| if *a == b { b } else { None })
                    .collect(),
                _ => joined,
            };
            at[ti] = Some(joined);
            work.push(ti);
        }
    }
    at.into_iter()
        .map(|r| r.unwrap_or_else(|| unknown.clone()))
        .collect()
}

impl ProgramAnalysis {
    /// What is known where block `bi` starts of the variables' intervals, with what its
    /// checks found: `base + k` is an index, so `base` is no further from the array's ends.
    fn facts(&self, bi: usize) -> Facts<'_> {
        let an = self;
        let mut facts = Facts::new(&an.kinds, &an.lengths);
        facts.ranges.clone_from(&an.entry_ranges[bi]);
        for (&(array, base), &(lo, hi)) in &an.bounds.known[bi] {
            let top = an.lengths[array.index()].map_or(flowjit_runtime::value::MAX_INDEX, |len| {
                len.saturating_sub(1)
            });
            let base_range = Range::new(lo.saturating_neg().into(), top.saturating_sub(hi).into());
            let r = &mut facts.ranges[base.index()];
            let met = r.map_or(base_range, |r| r.meet(base_range));
            if met.lo <= met.hi {
                *r = Some(met);
            }
        }
        facts
    }
}
