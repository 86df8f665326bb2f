//! Lowering a whole program (a residual program of the partial evaluator: blocks and jumps,
//! not a trace) to one Cranelift function.
//!
//! Each block becomes a Cranelift block and each variable a `cranelift_frontend::Variable`,
//! so the frontend builds the SSA form. Operations are lowered by [`super::ops`], as in
//! traces; what differs is an exit: here it *deoptimizes*, storing every variable written so
//! far into the register buffer and returning the position of the statement, where the
//! interpreter, with those values written into the frame, runs the statement again (and
//! raises its error, or computes with big integers) and goes on.
//!
//! The function is `extern "C" fn(regs: *mut i64) -> u32`: `regs[slot]` holds the variables,
//! and one more slot the printed value. The return value is a deoptimization point's number,
//! or [`STOP`] minus the kind of the printed value.
//!
//! Arrays, input and output are compiled as in traces: `array` and `toarray` call the
//! runtime, which keeps what they make alive in the context until the code returns
//! (registers only borrow), `getitem` and `setitem` check their index and deoptimize
//! outside the array, and an element read out of an array is expected to be an integer
//! (another kind deoptimizes). A program that has made [`helpers::MAX_OWNED`] elements'
//! worth deoptimizes before its next allocation, and the interpreter runs the rest.
//!
//! What it cannot lower it declines ([`Unsupported`]): a variable that holds values of two
//! kinds, a read that may come before the variable is written on some path, `readlist` of
//! a list whose element kind is not known, big integer constants, calls.

mod bounds;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I32, I64};
use cranelift_codegen::ir::{
    Block, Function, InstBuilder, InstructionData, MemFlagsData, Opcode, UserFuncName,
    Value as ClifValue,
};
use cranelift_codegen::isa::TargetIsa;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use flowjit_runtime::abi::{self, Repr};
use flowjit_runtime::{Op, Value};

use super::helpers::{self, Ctx};
use super::ops::{self, Exits, Outcome};
use super::Unsupported;
use crate::lang::{BlockId, Inst, Operand, Program, Slot, Terminator};
use crate::opt::interval::Range as Interval;
use crate::resume::Snapshot;
use crate::state::{Frame, Position};
use crate::trace::{Opnd, Ref};

/// What of a residual program machine code does not hold yet: calls. Such a program runs
/// on the interpreter.
fn declined(program: &Program) -> Result<(), Unsupported> {
    for block in &program.blocks {
        if let Some(what) = block.insts.iter().find_map(Inst::not_compiled) {
            return Err(Unsupported::NotCompiled(what));
        }
        if let Terminator::Return(_) = block.term {
            return Err(Unsupported::NotCompiled("`return`"));
        }
    }
    Ok(())
}

/// The return value that means the program stopped, printing a value of kind `Int`;
/// `STOP - 1` an atom, `STOP - 2` a list.
pub const STOP: u32 = u32::MAX;

fn stop_code(kind: Repr) -> u32 {
    STOP - match kind {
        Repr::Int => 0,
        Repr::Atom => 1,
        Repr::List => 2,
        Repr::Array => 3,
        Repr::Num => unreachable!("whole programs hold no boxed integers"),
    }
}

/// The kind of the value printed, from a return value.
pub fn stopped(code: u32) -> Option<Repr> {
    match STOP - code {
        0 => Some(Repr::Int),
        1 => Some(Repr::Atom),
        2 => Some(Repr::List),
        3 => Some(Repr::Array),
        _ => None,
    }
}

/// What is known of a program before it is lowered.
pub struct ProgramAnalysis {
    /// Per slot: the kind of its values, if it ever holds one.
    pub kinds: Vec<Option<Repr>>,
    /// Per block: the slots certainly written when the block starts.
    defined: Vec<Slots>,
    /// Whether every array the program reads holds only integers: those of the frame do,
    /// it makes arrays only with `array(n, v)` of an integer `v`, and it stores only
    /// integers. Elements are then read and written without their tags.
    ints: bool,
    /// With `ints`, the interval every element lies in, when the program's stores keep
    /// them in one ([`element_range`]): a sum of an element and a small constant then needs
    /// no overflow check.
    elements: Option<Range>,
    /// Per slot: the length of every array the variable holds, when known ([`lengths`]).
    lengths: Vec<Option<i64>>,
    /// Per block: the interval of each variable's integer wherever the block starts, when
    /// known ([`entry_ranges`]).
    entry_ranges: Vec<Vec<Option<Range>>>,
    /// Where the bounds checks of indexes relative to a variable go ([`bounds::plan`]).
    bounds: bounds::Plan,
    /// The deoptimization points: where the interpreter resumes, and the variables written
    /// there, each in the register of its slot (entry `Ref(k)` is register `k`).
    pub points: Vec<Snapshot>,
}

fn operand_kind(kinds: &[Option<Repr>], o: &Operand) -> Result<Option<Repr>, Unsupported> {
    match o {
        Operand::Var(s) => Ok(kinds[s.index()]),
        Operand::Const(v) => Repr::of(v).map(Some).ok_or(Unsupported::BigConstant),
    }
}

/// The kind of a list's elements, when they all have one: the list is a constant, or a
/// variable holding a list in `frame` (compiled right before it runs) that the program
/// never assigns. The code checks each element's tag anyway, and deoptimizes on another.
fn element_kind(program: &Program, frame: &Frame, list: &Operand) -> Result<Repr, Unsupported> {
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
        _ => Err(Unsupported::UnknownElements),
    }
}

/// Kinds of every variable (from `frame` for those written there, and from what is assigned
/// them) and which variables are certainly written where.
pub fn analyze(
    program: &Program,
    entry: BlockId,
    frame: &Frame,
) -> Result<ProgramAnalysis, Unsupported> {
    declined(program)?;
    let n = program.frame_size();
    let mut kinds: Vec<Option<Repr>> = vec![None; n];
    let mut at_entry = Slots::none(n);
    for s in (0..n).filter(|&s| frame[s].is_some()) {
        at_entry.insert(Slot(s as u32));
    }
    for s in at_entry.iter() {
        let v = frame[s.index()].as_ref().expect("written");
        kinds[s.index()] = Some(Repr::of(v).ok_or(Unsupported::BigInput)?);
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
    check_reads(program, &kinds, &defined)?;
    let lengths = lengths(program, frame);
    let elements = if ints {
        element_range(program, frame, &kinds, &lengths)
    } else {
        None
    };
    let entry_ranges = entry_ranges(program, entry, &kinds, &lengths, elements);
    let bounds = bounds::plan(program, entry, &kinds, &defined, ints);
    Ok(ProgramAnalysis {
        kinds,
        defined,
        elements,
        lengths,
        entry_ranges,
        bounds,
        ints,
        points: Vec::new(),
    })
}

/// The kind of each variable, to a fixpoint: an assignment gives its variable the kind of
/// its result. `kinds` holds those of the variables written where the code starts.
fn kinds_of_assignments(
    program: &Program,
    frame: &Frame,
    kinds: &mut [Option<Repr>],
) -> Result<(), Unsupported> {
    loop {
        let mut changed = false;
        for block in &program.blocks {
            for inst in &block.insts {
                if let Inst::Getchar(dst) = inst {
                    changed |= kinds[dst.index()].is_none();
                    match kinds[dst.index()].get_or_insert(Repr::Int) {
                        Repr::Int => continue,
                        _ => return Err(Unsupported::TwoKinds(program.var(*dst).to_string())),
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
                        return Err(Unsupported::TwoKinds(program.var(dst).to_string()))
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

/// Checks that every read is of a variable certainly written by then (`defined` at each
/// block's start), and that every constant and printed value is one machine code holds.
fn check_reads(
    program: &Program,
    kinds: &[Option<Repr>],
    defined: &[Slots],
) -> Result<(), Unsupported> {
    for (b, block) in program.blocks.iter().enumerate() {
        let mut now = defined[b].clone();
        let check = |now: &Slots, o: &Operand| match o {
            Operand::Var(s) if !now.contains(*s) => {
                Err(Unsupported::ReadBeforeWrite(program.var(*s).to_string()))
            }
            _ => Ok(()),
        };
        for inst in &block.insts {
            let mut arg_kinds = Vec::new();
            for a in &inst.operands() {
                check(&now, a)?;
                // A constant must be one machine code can hold.
                arg_kinds.extend(operand_kind(kinds, a)?);
            }
            if let Some((_, op, args)) = inst.operation() {
                if arg_kinds.len() == args.len() {
                    // Lists compared by their elements, which machine code does not do.
                    ops::supported(op, &arg_kinds)?;
                }
            }
            if let Some(s) = inst.written() {
                now.insert(s);
            }
        }
        match &block.term {
            Terminator::If { cond, .. } => check(&now, &Operand::Var(*cond))?,
            Terminator::PrintAndStop(a) => {
                check(&now, a)?;
                // The printed value must be one machine code can hold.
                operand_kind(kinds, a)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// A set of slots, as bits.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Slots(Vec<u64>);

impl Slots {
    fn none(n: usize) -> Slots {
        Slots(vec![0; n.div_ceil(64)])
    }

    fn all(n: usize) -> Slots {
        let mut all = Slots::none(n);
        for s in 0..n {
            all.insert(Slot(s as u32));
        }
        all
    }

    fn contains(&self, s: Slot) -> bool {
        self.0[s.index() / 64] >> (s.index() % 64) & 1 == 1
    }

    fn insert(&mut self, s: Slot) {
        self.0[s.index() / 64] |= 1 << (s.index() % 64);
    }

    /// Keeps only the slots `other` has too; whether that removed any.
    fn meet(&mut self, other: &Slots) -> bool {
        let mut changed = false;
        for (w, o) in self.0.iter_mut().zip(&other.0) {
            changed |= *w & !o != 0;
            *w &= o;
        }
        changed
    }

    fn iter(&self) -> impl Iterator<Item = Slot> + '_ {
        (0..self.0.len() * 64)
            .map(|s| Slot(s as u32))
            .filter(|s| self.contains(*s))
    }
}

/// An interval of integers, both ends included.
type Range = (i64, i64);

/// What a block knows, statement by statement from its start (nothing is known there): the
/// interval of each variable that holds an integer of a known one, and the indexes already
/// used on each array, which are in bounds from then on (arrays do not change length).
struct Facts<'a> {
    /// Per slot: the kind of the variable's values (a list's elements are not bounded by
    /// what arrays hold).
    kinds: &'a [Option<Repr>],
    /// Per slot: the length of every array the variable ever holds, when the program
    /// knows it ([`lengths`]).
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

    fn range(&self, o: &Operand) -> Option<Range> {
        match o {
            Operand::Var(s) => self.ranges[s.index()],
            Operand::Const(Value::Int(c)) => Some((*c, *c)),
            Operand::Const(_) => None,
        }
    }

    /// Whether `array[index]` is known to be in bounds.
    fn in_bounds(&self, array: &Operand, index: &Operand) -> bool {
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
    fn result(&self, op: Op, args: &[Operand], elements: Option<Range>) -> Option<Range> {
        // The optimizer's interval arithmetic, on bounds that must fit in 64 bits.
        let range = |o: &Operand| {
            self.range(o)
                .map(|(lo, hi)| Interval::new(lo.into(), hi.into()))
        };
        let fits = |r: Interval| {
            let (lo, hi) = (i64::try_from(r.lo?).ok()?, i64::try_from(r.hi?).ok()?);
            Some((lo, hi))
        };
        match (op, args) {
            (Op::Same, [a]) => self.range(a),
            (Op::Readlist, [Operand::Var(a), _]) if self.kinds[a.index()] == Some(Repr::Array) => {
                elements
            }
            (Op::Add, [a, b]) => fits(range(a)? + range(b)?),
            (Op::Sub, [a, b]) => fits(range(a)? - range(b)?),
            (Op::And, [a, b]) => fits(Interval::mask(&[range(a), range(b)])?),
            _ => None,
        }
    }

    /// Goes past `inst`, which ran without leaving: what it assigned and the index it used.
    fn step(&mut self, inst: &Inst, elements: Option<Range>) {
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
                    let r = &mut self.ranges[i.index()];
                    let (lo, hi) = r.unwrap_or((0, flowjit_runtime::value::MAX_INDEX));
                    *r = Some((lo.max(0), hi.min(flowjit_runtime::value::MAX_INDEX)));
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
    let mut initial: Option<Range> = Some((0, 0));
    for v in frame.iter().flatten() {
        if let Value::Array(a) = v {
            for k in 0..a.len() {
                let x = match a.get(k) {
                    Some(Value::Int(x)) => x,
                    _ => return None,
                };
                initial = join(initial, Some((x, x)));
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
    let ((a0, a1), (b0, b1)) = (a?, b?);
    Some((a0.min(b0), a1.max(b1)))
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

struct Deopts<'a> {
    /// Exit blocks to fill: (block, point number).
    pending: &'a mut Vec<(Block, usize)>,
    points: &'a mut Vec<Snapshot>,
    pos: Position,
    written: Vec<Slot>,
}

impl Deopts<'_> {
    fn block(&mut self, b: &mut FunctionBuilder) -> Block {
        let exit = b.create_block();
        b.set_cold_block(exit);
        let mut entries: Vec<(Slot, Opnd)> = self
            .written
            .iter()
            .map(|s| (*s, Opnd::Ref(Ref(s.0))))
            .collect();
        entries.sort_by_key(|(s, _)| *s);
        self.points.push(Snapshot::new(self.pos, 0, entries));
        self.pending.push((exit, self.points.len() - 1));
        exit
    }
}

impl Exits for Deopts<'_> {
    fn exit_if(&mut self, b: &mut FunctionBuilder, fail: ClifValue) {
        let exit = self.block(b);
        let cont = b.create_block();
        b.ins().brif(fail, exit, &[], cont, &[]);
        b.seal_block(cont);
        b.switch_to_block(cont);
    }

    fn exit_now(&mut self, b: &mut FunctionBuilder) {
        let exit = self.block(b);
        b.ins().jump(exit, &[]);
    }
}

/// Lowers `program` from `entry` (see [`analyze`]) to a Cranelift function for `isa`.
pub fn lower(
    program: &Program,
    entry: BlockId,
    an: &mut ProgramAnalysis,
    isa: &dyn TargetIsa,
    fctx: &mut FunctionBuilderContext,
) -> Function {
    let mut func =
        Function::with_name_signature(UserFuncName::user(1, 0), super::lower::signature(isa));
    let mf = MemFlagsData::trusted();
    let n = program.frame_size();
    let mut b = FunctionBuilder::new(&mut func, fctx);
    let start = b.create_block();
    b.append_block_params_for_function_params(start);
    b.switch_to_block(start);
    b.seal_block(start);
    let regs = b.block_params(start)[0];
    let ctx = b.block_params(start)[1];
    let vars: Vec<Variable> = (0..n).map(|_| b.declare_var(I64)).collect();
    for s in an.defined[entry.index()].iter() {
        let v = b.ins().load(I64, mf, regs, (8 * s.index()) as i32);
        b.def_var(vars[s.index()], v);
    }
    let blocks: Vec<Block> = program.blocks.iter().map(|_| b.create_block()).collect();
    // A block with checks on the way in from before its loop starts with a block of them.
    let pre: Vec<Option<Block>> = an
        .bounds
        .entry
        .iter()
        .map(|checks| (!checks.is_empty()).then(|| b.create_block()))
        .collect();
    let way_in = pre[entry.index()].unwrap_or(blocks[entry.index()]);
    b.ins().jump(way_in, &[]);
    let points = std::mem::take(&mut an.points);
    let mut l = ProgramLower {
        program,
        an,
        isa,
        regs,
        ctx,
        vars,
        blocks,
        pre,
        pending: Vec::new(),
        points,
    };
    for bi in 0..program.blocks.len() {
        l.block(&mut b, bi);
    }
    let ProgramLower {
        pending,
        points,
        vars,
        ..
    } = l;
    for (exit, point) in pending {
        b.switch_to_block(exit);
        for (s, _) in &points[point].entries {
            let v = b.use_var(vars[s.index()]);
            b.ins().store(mf, v, regs, (8 * s.index()) as i32);
        }
        let code = b.ins().iconst(I32, point as i64);
        b.ins().return_(&[code]);
    }
    an.points = points;
    b.seal_all_blocks();
    b.finalize(isa.frontend_config());
    func
}

/// What [`lower`] holds while it lowers a program's blocks, one after another.
struct ProgramLower<'p, 'a> {
    program: &'p Program,
    an: &'a ProgramAnalysis,
    isa: &'p dyn TargetIsa,
    /// The register buffer, and the context helpers take.
    regs: ClifValue,
    ctx: ClifValue,
    /// Per slot: its variable.
    vars: Vec<Variable>,
    /// Per block: its Cranelift block, and the block of its checks on the way in, if any.
    blocks: Vec<Block>,
    pre: Vec<Option<Block>>,
    /// Exit blocks to fill: (block, point number).
    pending: Vec<(Block, usize)>,
    /// The deoptimization points made so far ([`ProgramAnalysis::points`] once lowered).
    points: Vec<Snapshot>,
}

/// The deoptimization exits of statement `k` of block `bi`, which add to `pending` and
/// `points`: what the interpreter reads after resuming there, of the variables `written` (a
/// variable that is not live is overwritten before it is read again, and its exit need not
/// store it).
fn deopts<'d>(
    program: &Program,
    (pending, points): (&'d mut Vec<(Block, usize)>, &'d mut Vec<Snapshot>),
    (bi, k): (usize, usize),
    written: &[Slot],
) -> Deopts<'d> {
    let at = BlockId(bi as u32);
    let live = program.live_at(at, k);
    Deopts {
        pending,
        points,
        pos: Position { block: at, inst: k },
        written: written
            .iter()
            .copied()
            .filter(|s| live.contains(*s))
            .collect(),
    }
}

/// What lowering a statement gave.
enum Stmt {
    /// It assigned this variable this value.
    Assigned(Slot, ClifValue),
    /// It assigned nothing.
    Done,
    /// It always deoptimizes: the rest of the block is not lowered.
    Dead,
}

impl<'a> ProgramLower<'_, 'a> {
    /// Where a jump to `to` from before its loop goes: through its checks on the way in.
    fn way_in(&self, to: BlockId) -> Block {
        self.pre[to.index()].unwrap_or(self.blocks[to.index()])
    }

    /// The value of `o` and its kind. Constants are made once in the block (`made`).
    fn value(&self, b: &mut FunctionBuilder, made: &mut Made, o: &Operand) -> (ClifValue, Repr) {
        match o {
            Operand::Var(s) => (
                b.use_var(self.vars[s.index()]),
                self.an.kinds[s.index()].expect("analyzed"),
            ),
            Operand::Const(v) => {
                let kind = Repr::of(v).expect("analyze() rejects big constants");
                (
                    made.constant(b, abi::unbox(v, kind).expect("its own kind")),
                    kind,
                )
            }
        }
    }

    /// The deoptimization exits of statement `k` of block `bi` ([`deopts`]).
    fn deopts(&mut self, bi: usize, k: usize, written: &[Slot]) -> Deopts<'_> {
        deopts(
            self.program,
            (&mut self.pending, &mut self.points),
            (bi, k),
            written,
        )
    }

    /// Lowers block `bi`: its checks, its statements, its terminator.
    fn block(&mut self, b: &mut FunctionBuilder, bi: usize) {
        let mut written: Vec<Slot> = self.an.defined[bi].iter().collect();
        written.sort();
        self.checks(b, bi, &written);
        // Constants and the addresses of arrays' elements, made once in the block (each
        // of the block's Cranelift blocks follows the ones before it): a smaller function
        // for Cranelift to compile.
        let mut made = Made::default();
        // The elements of arrays of integers this block has read or stored, while nothing
        // else could have written them: a read of one is its value, not a load. Cranelift
        // cannot tell `a[p + 9]` from `a[p]`, and loaded `a[p]` again after a store to
        // `a[p + 9]` (`[->>>>>>>>>+<<<<<<<<<]`).
        let mut seen = Elements::default();
        let mut facts = self.facts(bi);
        let program = self.program;
        for (k, inst) in program.blocks[bi].insts.iter().enumerate() {
            let lowered =
                self.statement(b, (bi, k), inst, &written, (&mut made, &mut seen, &facts));
            facts.step(inst, self.an.elements);
            match lowered {
                Stmt::Dead => return,
                Stmt::Done => {}
                Stmt::Assigned(dst, v) => {
                    b.def_var(self.vars[dst.index()], v);
                    if let Err(at) = written.binary_search(&dst) {
                        written.insert(at, dst);
                    }
                }
            }
        }
        self.terminator(b, bi, &mut made);
    }

    /// The checks of block `bi`, which deoptimize at its first statement: on the way in
    /// from before its loop (in a block of their own), and on every way in. `written` holds
    /// the variables written where the block starts.
    fn checks(&mut self, b: &mut FunctionBuilder, bi: usize, written: &[Slot]) {
        let an = self.an;
        let ways = [
            (self.pre[bi], &an.bounds.entry[bi]),
            (Some(self.blocks[bi]), &an.bounds.body[bi]),
        ];
        for (pre, checks) in ways {
            let Some(pre) = pre else { continue };
            b.switch_to_block(pre);
            let pending = (&mut self.pending, &mut self.points);
            let mut exits = deopts(self.program, pending, (bi, 0), written);
            for c in checks {
                check_span(b, c, &self.vars, &an.lengths, &mut exits);
            }
            if pre != self.blocks[bi] {
                b.ins().jump(self.blocks[bi], &[]);
            }
        }
    }

    /// What is known where block `bi` starts of the variables' intervals, with what its
    /// checks found: `base + k` is an index, so `base` is no further from the array's ends.
    fn facts(&self, bi: usize) -> Facts<'a> {
        let an = self.an;
        let mut facts = Facts::new(&an.kinds, &an.lengths);
        facts.ranges.clone_from(&an.entry_ranges[bi]);
        for (&(array, base), &(lo, hi)) in &an.bounds.known[bi] {
            let top = an.lengths[array.index()].map_or(flowjit_runtime::value::MAX_INDEX, |len| {
                len.saturating_sub(1)
            });
            let (lo, hi) = (lo.saturating_neg(), top.saturating_sub(hi));
            let r = &mut facts.ranges[base.index()];
            let (lo, hi) = match *r {
                Some((a, b)) => (lo.max(a), hi.min(b)),
                None => (lo, hi),
            };
            if lo <= hi {
                *r = Some((lo, hi));
            }
        }
        facts
    }

    /// Lowers statement `k` of block `bi`, the variables `written` before it.
    fn statement(
        &mut self,
        b: &mut FunctionBuilder,
        (bi, k): (usize, usize),
        inst: &Inst,
        written: &[Slot],
        (made, seen, facts): (&mut Made, &mut Elements, &Facts),
    ) -> Stmt {
        let covered = self.an.bounds.covered[bi].contains(&k);
        match inst {
            Inst::Op1 { dst, op, .. } | Inst::Op2 { dst, op, .. } => {
                let at = (bi, k, covered);
                self.operation(b, at, (*dst, *op), inst, written, (made, seen, facts))
            }
            Inst::SetItem {
                array,
                index,
                value: item,
            } => {
                let (a, ka) = self.value(b, made, &Operand::Var(*array));
                let (i, ki) = self.value(b, made, index);
                let (v, kv) = self.value(b, made, item);
                let (ints, isa) = (self.an.ints, self.isa);
                let mut exits = self.deopts(bi, k, written);
                if ka != Repr::Array || ki != Repr::Int {
                    // Fails every time (a type error): the interpreter raises it.
                    exits.exit_now(b);
                    return Stmt::Dead;
                }
                if !covered && !facts.in_bounds(&Operand::Var(*array), index) {
                    let len = b.ins().load(I64, HEADER, a, abi::LIST_LEN_OFFSET as i32);
                    let outside = b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, len);
                    exits.exit_if(b, outside);
                }
                if ints {
                    // Only the payload: the tag stays the integer's.
                    let (addr, at) = made.payload(b, a, i);
                    b.ins().store(MemFlagsData::trusted(), v, addr, at);
                    seen.stored(a, index_parts(b, i), v);
                } else {
                    ops::store_item(b, isa, (a, i, v, kv), false);
                }
                Stmt::Done
            }
            Inst::Print(a) => {
                let (v, kind) = self.value(b, made, a);
                let kind = b.ins().iconst(I64, helpers::kind_code(kind));
                let f = helpers::print as *const u8;
                ops::call_helper(b, self.isa, f, &[self.ctx, v, kind], false);
                Stmt::Done
            }
            Inst::Putchar(a) => {
                let (v, kind) = self.value(b, made, a);
                let (ctx, isa) = (self.ctx, self.isa);
                let mut exits = self.deopts(bi, k, written);
                if kind != Repr::Int {
                    exits.exit_now(b);
                    return Stmt::Dead;
                }
                // Not a byte (a negative one is a huge unsigned number): deoptimize.
                let wide = b.ins().icmp_imm_u(IntCC::UnsignedGreaterThan, v, 255);
                exits.exit_if(b, wide);
                let f = helpers::putchar as *const u8;
                ops::call_helper(b, isa, f, &[ctx, v], false);
                Stmt::Done
            }
            Inst::Getchar(dst) => {
                let f = helpers::getchar as *const u8;
                let v = ops::call_helper(b, self.isa, f, &[self.ctx], true).expect("a result");
                Stmt::Assigned(*dst, v)
            }
            Inst::Call { .. } => unreachable!("`declined` refuses programs that call"),
            Inst::Promote(_) | Inst::MergePoint(_) | Inst::CanEnterJit => Stmt::Done,
        }
    }

    /// Lowers operation `op` assigning `dst`, statement `k` of block `bi` (`covered` when a
    /// check of the block stands for its bounds check).
    #[allow(clippy::too_many_arguments)]
    fn operation(
        &mut self,
        b: &mut FunctionBuilder,
        (bi, k, covered): (usize, usize, bool),
        (dst, op): (Slot, Op),
        inst: &Inst,
        written: &[Slot],
        (made, seen, facts): (&mut Made, &mut Elements, &Facts),
    ) -> Stmt {
        let operands = inst.operands();
        if op == Op::Same
            && !self
                .program
                .live_at(BlockId(bi as u32), k + 1)
                .contains(dst)
        {
            // A copy nothing reads (the partial evaluator assigns what it generalized
            // before a jump, read or not): it cannot fail.
            return Stmt::Done;
        }
        let args: Vec<(ClifValue, Repr)> =
            operands.iter().map(|a| self.value(b, made, a)).collect();
        let (ints, isa, ctx) = (self.an.ints, self.isa, self.ctx);
        let result = match op {
            Op::Readlist => self.an.kinds[dst.index()],
            _ => None,
        };
        let elements = self.an.elements;
        let mut exits = self.deopts(bi, k, written);
        if op.allocates() || op == Op::ToList {
            return Stmt::Assigned(dst, alloc(b, isa, ctx, op, &args, &mut exits));
        }
        if let (Op::Readlist, true, [(a, Repr::Array), (i, Repr::Int)]) =
            (op, ints, args.as_slice())
        {
            let at = index_parts(b, *i);
            let v = seen.get(*a, at).unwrap_or_else(|| {
                let check = !covered && !facts.in_bounds(&operands[0], &operands[1]);
                int_item(b, made, *a, *i, check, &mut exits)
            });
            seen.put(*a, at, v);
            return Stmt::Assigned(dst, v);
        }
        // A sum or difference of integers whose intervals keep it within 64 bits is not
        // checked.
        let checked =
            !matches!(op, Op::Add | Op::Sub) || facts.result(op, &operands, elements).is_none();
        match ops::lower_op(b, op, &args, checked, result, &mut exits) {
            Outcome::Value(v) => Stmt::Assigned(dst, v),
            Outcome::AlwaysExits => Stmt::Dead,
        }
    }

    /// Lowers block `bi`'s terminator. A jump round a loop goes past the checks on the way
    /// in.
    fn terminator(&mut self, b: &mut FunctionBuilder, bi: usize, made: &mut Made) {
        let block = &self.program.blocks[bi];
        let to = |l: &Self, target: BlockId| {
            if l.an.bounds.round(BlockId(bi as u32), target) {
                l.blocks[target.index()]
            } else {
                l.way_in(target)
            }
        };
        match &block.term {
            Terminator::Goto(j) | Terminator::Promote { target: j, .. } => {
                b.ins().jump(to(self, j.target), &[]);
            }
            Terminator::Return(_) => unreachable!("`declined` refuses programs that return"),
            Terminator::If { cond, then, els } => {
                let (c, kind) = self.value(b, made, &Operand::Var(*cond));
                if kind == Repr::Int {
                    let (t, e) = (to(self, then.target), to(self, els.target));
                    b.ins().brif(c, t, &[], e, &[]);
                } else {
                    // An atom or a list is never the integer 0.
                    b.ins().jump(to(self, then.target), &[]);
                }
            }
            Terminator::PrintAndStop(a) => {
                let (v, kind) = self.value(b, made, a);
                let n = self.program.frame_size();
                b.ins()
                    .store(MemFlagsData::trusted(), v, self.regs, (8 * n) as i32);
                let code = b.ins().iconst(I32, stop_code(kind) as i64);
                b.ins().return_(&[code]);
            }
        }
    }
}

/// Deoptimizes at the block's first statement unless `base + k` is an index of `array`
/// for every `k` of the check: one unsigned comparison of the lowest, `base + lo`, with the
/// length less the span. Wrapped round 64 bits, a sum of a base and an offset (both far
/// smaller than 2^63, see [`bounds`]) is a huge unsigned number, and fails it.
fn check_span(
    b: &mut FunctionBuilder,
    check: &bounds::Check,
    vars: &[Variable],
    lengths: &[Option<i64>],
    exits: &mut Deopts,
) {
    let base = b.use_var(vars[check.base.index()]);
    let lowest = b.ins().iadd_imm_s(base, check.lo);
    let span = check.hi - check.lo;
    let limit = match lengths[check.array.index()] {
        Some(len) => b.ins().iconst(I64, len.saturating_sub(span).max(0)),
        None => {
            let array = b.use_var(vars[check.array.index()]);
            let len = b
                .ins()
                .load(I64, HEADER, array, abi::LIST_LEN_OFFSET as i32);
            let room = b.ins().iadd_imm_s(len, -span);
            let zero = b.ins().iconst(I64, 0);
            b.ins().smax(room, zero)
        }
    };
    let outside = b
        .ins()
        .icmp(IntCC::UnsignedGreaterThanOrEqual, lowest, limit);
    exits.exit_if(b, outside);
}

/// The element at `index` of array `a`, which holds only integers: the index is checked
/// (unless `check` is false: the block has used it on `a` already), the tag is not.
fn int_item(
    b: &mut FunctionBuilder,
    made: &mut Made,
    a: ClifValue,
    index: ClifValue,
    check: bool,
    exits: &mut Deopts,
) -> ClifValue {
    if check {
        let len = b.ins().load(I64, HEADER, a, abi::LIST_LEN_OFFSET as i32);
        let outside = b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, index, len);
        exits.exit_if(b, outside);
    }
    let (addr, at) = made.payload(b, a, index);
    b.ins().load(I64, MemFlagsData::trusted(), addr, at)
}

/// An index as a value and a constant added to it (wrapping), through the additions and
/// subtractions of constants that made it: `p + 9 - 9` is `p` and 0, and a constant `k`
/// no value and `k`.
fn index_parts(b: &FunctionBuilder, mut index: ClifValue) -> (Option<ClifValue>, i64) {
    let mut offset = 0i64;
    let constant = |v: ClifValue| ops::constant(b, v);
    if let Some(k) = constant(index) {
        return (None, k);
    }
    let dfg = &b.func.dfg;
    while let Some(inst) = dfg.value_def(index).inst() {
        let InstructionData::Binary { opcode, args } = dfg.insts[inst] else {
            break;
        };
        let (x, k) = match (opcode, constant(args[1]), constant(args[0])) {
            (Opcode::Iadd, Some(k), _) => (args[0], k),
            (Opcode::Iadd, None, Some(k)) => (args[1], k),
            (Opcode::Isub, Some(k), _) => (args[0], k.wrapping_neg()),
            _ => break,
        };
        offset = offset.wrapping_add(k);
        index = x;
    }
    (Some(index), offset)
}

/// The elements of arrays of integers a block knows: (array, index as
/// [`index_parts`], value).
#[derive(Default)]
struct Elements(Vec<(ClifValue, Index, ClifValue)>);

/// An index as [`index_parts`] gives it.
type Index = (Option<ClifValue>, i64);

impl Elements {
    /// The value of element `at` of `array`, if known.
    fn get(&self, array: ClifValue, at: Index) -> Option<ClifValue> {
        self.0
            .iter()
            .find(|(a, i, _)| (*a, *i) == (array, at))
            .map(|e| e.2)
    }

    /// Notes that element `at` of `array` holds `v` (read).
    fn put(&mut self, array: ClifValue, at: Index, v: ClifValue) {
        if self.get(array, at).is_none() {
            self.0.push((array, at, v));
        }
    }

    /// Notes a store of `v` into element `at` of `array`: what is known of other elements
    /// stays only where they cannot be that one, the same array around the same value (or
    /// none, constants) at another offset (another array value may be the same array).
    fn stored(&mut self, array: ClifValue, at: Index, v: ClifValue) {
        self.0
            .retain(|(a, (base, c), _)| *a == array && *base == at.0 && *c != at.1);
        self.0.push((array, at, v));
    }
}

/// The flags of a load of an array's length or elements' address in a whole program: as
/// [`ops::HEADER`], and free to move, so that Cranelift loads each once where the array is
/// known. Every array variable holds a live array wherever it is defined: one of the
/// frame's, or one the code made, kept alive by the context.
const HEADER: MemFlagsData = ops::HEADER.with_can_move();

/// What a block has made once for all its statements: constants, and the addresses of
/// arrays' elements (and of their first elements).
#[derive(Default)]
struct Made {
    constants: HashMap<i64, ClifValue>,
    /// (array, base index or none) to the address of element `base` (the first with none).
    addresses: HashMap<(ClifValue, Option<ClifValue>), ClifValue>,
}

impl Made {
    /// The constant `k`.
    fn constant(&mut self, b: &mut FunctionBuilder, k: i64) -> ClifValue {
        *self
            .constants
            .entry(k)
            .or_insert_with(|| b.ins().iconst(I64, k))
    }

    /// The address of the payload of element `index` of array `a`, as an address and a
    /// displacement: the elements at `p + 1` and `p + 9` share the address of `p`'s, and
    /// those at constant indices the address of the first. (In wrapping arithmetic, as the
    /// sum the index is.)
    fn payload(
        &mut self,
        b: &mut FunctionBuilder,
        a: ClifValue,
        index: ClifValue,
    ) -> (ClifValue, i32) {
        const SIZE: i64 = abi::VALUE_SIZE as i64;
        const PAYLOAD: i64 = abi::VALUE_PAYLOAD_OFFSET as i64;
        let (base, k) = index_parts(b, index);
        let at = k
            .checked_mul(SIZE)
            .and_then(|d| d.checked_add(PAYLOAD))
            .and_then(|d| i32::try_from(d).ok());
        let (base, at) = match at {
            Some(at) => (base, at),
            None => (Some(index), PAYLOAD as i32),
        };
        let items = *self
            .addresses
            .entry((a, None))
            .or_insert_with(|| b.ins().load(I64, HEADER, a, abi::LIST_ITEMS_OFFSET as i32));
        let address = match base {
            Some(x) => *self.addresses.entry((a, base)).or_insert_with(|| {
                let offset = ops::element_offset(b, x);
                b.ins().iadd(items, offset)
            }),
            None => items,
        };
        (address, at)
    }
}

/// Lowers `op` (one that makes a list or an array) on `args`: the runtime makes it and
/// keeps it alive in the context. The code deoptimizes before it when it fails, and when
/// what the context keeps has reached [`helpers::MAX_OWNED`] elements (the interpreter,
/// which lets go of what it no longer uses, then runs the rest of the program).
fn alloc(
    b: &mut FunctionBuilder,
    isa: &dyn TargetIsa,
    ctx: ClifValue,
    op: Op,
    args: &[(ClifValue, Repr)],
    exits: &mut Deopts,
) -> ClifValue {
    let at = std::mem::offset_of!(Ctx, made) as i32;
    let made = b.ins().load(I64, MemFlagsData::trusted(), ctx, at);
    let full = b.ins().icmp_imm_u(
        IntCC::UnsignedGreaterThanOrEqual,
        made,
        helpers::MAX_OWNED as i64,
    );
    exits.exit_if(b, full);
    let mut words = vec![ctx, b.ins().iconst(I64, helpers::op_code(op))];
    for k in 0..2 {
        let (v, kind) = match args.get(k) {
            Some(a) => *a,
            None => (b.ins().iconst(I64, 0), Repr::Int),
        };
        words.push(v);
        words.push(b.ins().iconst(I64, helpers::kind_code(kind)));
    }
    let f = helpers::alloc as *const u8;
    let made = ops::call_helper(b, isa, f, &words, true).expect("a result");
    let failed = b.ins().icmp_imm_s(IntCC::Equal, made, 0);
    exits.exit_if(b, failed);
    made
}

/// How a run of a compiled program ended.
pub enum ProgramExit {
    /// It printed this value and stopped.
    Stop(Value),
    /// It deoptimized: the interpreter goes on here (the frame holds the variables).
    Resume(Position),
}
