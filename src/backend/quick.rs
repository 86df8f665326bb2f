//! The quick backend: a bridge compiled on its own, or a tree's function that holds its
//! root alone, that only computes with 64-bit integers and reads and writes them in arrays
//! that hold only integers, emitted as x86-64 machine code directly rather than through
//! Cranelift.
//!
//! Cranelift costs about 400,000 instructions for a function however small: a bridge of
//! ten operations (`v = i + 3`, a comparison, a guard, the loop's end) took 80 µs to
//! compile, a root of 32 guards about a millisecond, and a program of many loops with many
//! ways compiles thousands of them (`benches/cliffs/branchy400.fg`: 400 roots and 12,400
//! bridges). LuaJIT and PyPy emit machine code straight from their traces; so does this,
//! for the traces that need no more than a template per operation, in a few microseconds.
//! Anything else (other arrays, loops that carry elements, calls, integers of any size,
//! shifts, `--max-steps`, a tree's function with bridges in it) goes to Cranelift, as does a trace whose values do not fit
//! in the registers below. A root's loop runs `Limits::tier_iterations` iterations in this code,
//! then exits so that the driver has Cranelift compile the tree: the loops that run long
//! get the better code.
//!
//! The code keeps the contract of [`super::lower::lower`], so that the driver and the
//! other functions cannot tell the two apart: `tail fn(regs, ctx) -> i64`, entered by a
//! call from the trampoline or by a jump from another function's exit; it checks the kinds
//! of the inputs it is not sure of (returning [`REFUSED`]: for a tree, only those held as
//! integers of any size), reads its inputs from the mirror, and each exit, as its
//! [`ExitPlan`] says, either writes its snapshot into the mirror and jumps through its slot
//! of the link table (a linked exit), or stores its snapshot's values in their slots of the
//! register buffer and returns the exit's code. Cranelift's `tail` convention passes `regs`, `ctx` (which no code
//! reads) and the code in `rdi`, `rsi` and `rdx`, returns in `rax`, and has the System V
//! callee-saved registers, which the code saves on entry and restores before it leaves
//! when it uses them; the stack holds nothing else.
//!
//! Each value gets a register of its own from its definition to its last use, by its
//! operands or by the snapshot of an instruction that may exit (in a root, what the loop
//! reads of the preamble and the loop's parameters to the loop's end): an operation writes
//! a register that none of its operands is in, so that an exit before it (an overflow)
//! finds them intact. Arithmetic is the interpreter's: an overflow exits before the
//! operation (`jo`), unless the optimizer proved it cannot happen
//! ([`MachineBounds`](crate::opt::bounds::MachineBounds)).

// dynasm's macros take a register's number through `.into()`, a conversion of a `u8` to
// itself here.
#![allow(clippy::useless_conversion)]

use dynasmrt::{dynasm, x64::X64Relocation, DynamicLabel, DynasmApi, DynasmLabelApi, VecAssembler};
use flowjit_runtime::abi::{self, Repr};
use flowjit_runtime::{Op, Value};

use super::exit::{exit_code, mirror_tag, ExitPlan, HOT, REFUSED};
use super::lower::{Origin, Segment, TreeAnalysis};
use crate::lang::Slot;
use crate::opt::bounds::safe_divisor;
use crate::opt::checks::Bounds;
use crate::trace::{Kind, Opnd, Ref};
use rustc_hash::FxHashMap as HashMap;

/// The registers values live in, in the order they are taken: `rax`, `rcx`, `rdx`, `r8`,
/// `r9`, `r10`, `rsi` (the context the trampoline passes, which no code reads:
/// `lower::Layout::context`), then the callee-saved `rbx`, `r12` to `r15`, which the code
/// saves on entry and restores at every exit when it uses them (`rdi` holds the register
/// buffer throughout).
const POOL: [u8; 12] = [0, 1, 2, 8, 9, 10, 6, 3, 12, 13, 14, 15];

/// Whether register `r` is one the `tail` convention's callee preserves.
fn callee_saved(r: u8) -> bool {
    matches!(r, 3 | 12..=15)
}

const RAX: u8 = 0;
const RDX: u8 = 2;

/// Whether `trace` divides (`div`, `mod`) by anything but a power of two, which takes
/// `idiv`.
fn divides(trace: &crate::trace::Trace) -> bool {
    trace.insts.iter().any(|i| {
        matches!(i.kind, Kind::Op(Op::Div | Op::Mod)) && power_of_two(&i.args[1]).is_none()
    })
}

/// The exponent of a divisor that is a constant positive power of two: floor division by
/// it is an arithmetic shift, the floor remainder a mask, and neither can fail.
fn power_of_two(divisor: &Opnd) -> Option<u32> {
    match divisor {
        Opnd::Const(Value::Int(k)) if *k > 0 && k.count_ones() == 1 => Some(k.trailing_zeros()),
        _ => None,
    }
}

/// The scratch register (`r11`): a constant too wide for an instruction's immediate, an
/// address.
const SCRATCH: u8 = 11;

/// A bridge as machine code, not yet placed: position-independent (every address in it is
/// absolute, every jump within it relative).
pub(super) struct Emitted {
    /// The code.
    pub bytes: Vec<u8>,
    /// Where each trace instruction's code (or its exit's) is ([`super::Compiled::origins`]).
    pub origins: Vec<(u32, u32, Origin)>,
}

/// The address of an element's payload: a register and a displacement, plus the scratch
/// register times 8 (`Scaled`, the scratch register holding twice the index).
#[derive(Clone, Copy, Debug)]
enum Address {
    Scaled(u8, i32),
    Plain(u8, i32),
}

/// Where an array's items are, how many, and whether it holds only integers.
const ITEMS: i32 = abi::LIST_ITEMS_OFFSET as i32;
const LEN: i32 = abi::LIST_LEN_OFFSET as i32;
const INTS: i32 = abi::ARRAY_INTS_OFFSET as i32;

/// Where an operand is while the code runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Loc {
    Reg(u8),
    Imm(i64),
}

/// A condition an instruction tests: signed comparisons and equality.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Cond {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Cond {
    fn of(op: Op) -> Option<Cond> {
        Some(match op {
            Op::Lt => Cond::Lt,
            Op::Le => Cond::Le,
            Op::Gt => Cond::Gt,
            Op::Ge => Cond::Ge,
            Op::Eq => Cond::Eq,
            Op::Ne => Cond::Ne,
            _ => return None,
        })
    }

    /// The condition that holds where this one does not.
    fn negated(self) -> Cond {
        match self {
            Cond::Lt => Cond::Ge,
            Cond::Le => Cond::Gt,
            Cond::Gt => Cond::Le,
            Cond::Ge => Cond::Lt,
            Cond::Eq => Cond::Ne,
            Cond::Ne => Cond::Eq,
        }
    }
}

/// An exit to write after the code: its label, the instruction it exits at, and the
/// registers the values of its snapshot are in there.
struct Exit {
    label: DynamicLabel,
    inst: usize,
    regs: Vec<(Ref, u8)>,
    /// Whether it returns even where it could go on in another tree (the loop's exit when
    /// its count is spent: the driver compiles the tree again).
    returns: bool,
    /// How many of the arrays the code checked holding only integers were checked before
    /// it (the first of [`Quick::checked`]): its stores into them are plain stores.
    checked: usize,
}

/// The operations on integers the quick backend emits.
fn supported_op(op: Op) -> bool {
    matches!(
        op,
        Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Neg
            | Op::Not
            | Op::And
            | Op::Or
            | Op::Xor
            | Op::Lt
            | Op::Le
            | Op::Gt
            | Op::Ge
            | Op::Eq
            | Op::Ne
            | Op::Same
            | Op::Div
            | Op::Mod
    )
}

/// A constant the code holds: an integer, or an atom (its id) in a snapshot.
fn constant(v: &Value) -> Option<(i64, Repr)> {
    let kind = Repr::of(v).filter(|k| matches!(k, Repr::Int | Repr::Atom))?;
    Some((abi::unbox(v, kind)?, kind))
}

/// Whether the quick backend can emit bridge unit `segment` as `an` analyzed it: every
/// value a 64-bit integer, every instruction one it has a template for, every snapshot
/// of the variables of one frame with no array in it.
fn supported(segment: &Segment, an: &TreeAnalysis) -> bool {
    let trace = segment.trace;
    if an.layout.carry || an.owns || !an.sites.is_empty() || trace.function.is_some() {
        return false;
    }
    // A root: its loop's accumulators are checked as it is entered (`bounds::Sum`), which
    // only Cranelift's code does.
    if an.unit == 0 && (trace.loop_start().is_none() || !an.bounds[0].sums.is_empty()) {
        return false;
    }
    let held_kind = |k: Repr| k == Repr::Int || k == Repr::Array;
    if !an.input_kinds.iter().all(|k| held_kind(*k)) {
        return false;
    }
    let kinds = &an.kinds[0];
    let int = |o: &Opnd| match o {
        Opnd::Ref(r) => kinds[r.index()] == Some(Repr::Int),
        Opnd::Const(v) => matches!(v, Value::Int(_)),
    };
    let array = |o: &Opnd| matches!(o, Opnd::Ref(r) if kinds[r.index()] == Some(Repr::Array));
    // An index the code can address: a value, or a constant from 0 whose element's
    // displacement fits an instruction.
    let index = |o: &Opnd| match o {
        Opnd::Ref(_) => int(o),
        Opnd::Const(Value::Int(k)) => (0..1 << 26).contains(k),
        Opnd::Const(_) => false,
    };
    let stored = |o: &Opnd| match o {
        Opnd::Ref(_) => int(o),
        Opnd::Const(Value::Int(k)) => i32::try_from(*k).is_ok(),
        Opnd::Const(_) => false,
    };
    for (i, inst) in trace.insts.iter().enumerate() {
        let ok = match inst.kind {
            Kind::Input(_) => kinds[i].is_some_and(held_kind),
            // An integer read from an array that says it holds only integers, checked.
            Kind::GetItem => {
                an.ints
                    && inst.snap.is_some()
                    && kinds[i] == Some(Repr::Int)
                    && array(&inst.args[0])
                    && index(&inst.args[1])
            }
            Kind::SetItem => {
                an.ints && array(&inst.args[0]) && index(&inst.args[1]) && stored(&inst.args[2])
            }
            Kind::Op(op) => {
                supported_op(op) && kinds[i] == Some(Repr::Int) && inst.args.iter().all(int)
            }
            Kind::GuardTrue | Kind::GuardFalse => int(&inst.args[0]),
            Kind::GuardValue => matches!(inst.args[0], Opnd::Ref(_)) && inst.args.iter().all(int),
            Kind::Loop => i + 1 == trace.insts.len() && inst.args.iter().all(int),
            Kind::LoopStart => an.unit == 0 && inst.args.iter().all(int),
            Kind::Param(_) => kinds[i] == Some(Repr::Int),
            _ => false,
        };
        if !ok {
            return false;
        }
        if let Some(snap) = trace.snap_of(inst) {
            if !snap.virtuals.is_empty() {
                return false;
            }
            let stores_ok = snap
                .stores
                .iter()
                .all(|st| array(&st.array) && index(&st.index) && stored(&st.value));
            if !stores_ok {
                return false;
            }
            let held = |o: &Opnd| match o {
                Opnd::Ref(r) => kinds[r.index()].is_some_and(held_kind),
                Opnd::Const(v) => constant(v).is_some(),
            };
            if !snap.exit_values().all(held) {
                return false;
            }
        }
    }
    true
}

/// Bridge unit `segment` of tree `tree`, or its root (for a tree's function without
/// bridges in it), as x86-64 machine code, if the quick backend can emit it (otherwise
/// Cranelift compiles it). `table` is the unit's link table; the code checks the kind of
/// each input not in `sure` on entry. A root's loop counts its iterations down in the
/// `i64` at `counter`, and exits at its `loop` when the count reaches 0 (the driver then
/// has Cranelift compile the tree, `Limits::tier_iterations`).
pub(super) fn emit(
    segment: &Segment,
    an: &TreeAnalysis,
    tree: usize,
    table: u64,
    sure: &[(Slot, Repr)],
    counter: Option<u64>,
) -> Option<Emitted> {
    if !supported(segment, an) {
        return None;
    }
    let trace = segment.trace;
    let n = trace.insts.len();
    // Each value's last use: by an operand, or by the snapshot of an instruction that may
    // exit with it.
    let mut last_use: Vec<usize> = (0..n).collect();
    // A root's loop: what it reads of the preamble, and its parameters, keep their
    // registers to the loop's end, for the next iteration reads them again.
    let carried = trace
        .loop_start()
        .map(|h| (h, h + trace.insts[h].args.len()));
    for (j, inst) in trace.insts.iter().enumerate() {
        let mut used = |r: Ref| {
            let k = r.index();
            last_use[k] = match carried {
                Some((h, last_param)) if j > h && k <= last_param => n - 1,
                _ => last_use[k].max(j),
            };
        };
        inst.args
            .iter()
            .filter_map(Opnd::as_ref)
            .for_each(&mut used);
        if let Some(snap) = trace.snap_of(inst).filter(|_| may_exit(an, trace, j)) {
            snap.for_each_exit_ref(used);
        }
    }
    if let Some((h, last_param)) = carried {
        for p in last_use.iter_mut().take(last_param + 1).skip(h + 1) {
            *p = n - 1;
        }
    }
    // The accesses whose bounds checks stand for the overflow checks of runs before them
    // (`opt::checks`): what the run's snapshot holds lives to the access, whose check exits
    // with it.
    for (&j, &i) in &an.checks[0].by_access {
        let snap = trace.snap_of(&trace.insts[i])?;
        snap.for_each_exit_ref(|r| last_use[r.index()] = last_use[r.index()].max(j));
    }
    // Once to learn which callee-saved registers the code uses, again to save them: the
    // allocation is the same both times.
    let args = (an, trace, tree, table, sure, counter, &last_use[..]);
    let (emitted, used) = assemble(args, &[])?;
    if used.is_empty() {
        return Some(emitted);
    }
    assemble(args, &used).map(|(emitted, _)| emitted)
}

/// Whether instruction `i`, which has a snapshot, may exit in this code. Arithmetic that
/// the backend proved cannot overflow ([`MachineBounds`](crate::opt::bounds::MachineBounds):
/// safe, and not the one check of a widened run) never does, so what its snapshot holds
/// need not live to it: in a Brainfuck run `<<<<<<<<<`, each `sub` of the pointer has the
/// one before in its snapshot, and all but the last are then dead.
fn may_exit(an: &TreeAnalysis, trace: &crate::trace::Trace, i: usize) -> bool {
    let bounds = &an.bounds[0];
    !matches!(
        trace.insts[i].kind,
        Kind::Op(Op::Add | Op::Sub | Op::Mul | Op::Neg)
            if bounds.safe[i] && bounds.widen[i].is_none()
    )
}

/// What [`assemble`] works from: the analysis, the trace, the tree's number, the link
/// table, the inputs whose kinds are sure, the counter's address, and each value's last
/// use.
type Parts<'a> = (
    &'a TreeAnalysis,
    &'a crate::trace::Trace,
    usize,
    u64,
    &'a [(Slot, Repr)],
    Option<u64>,
    &'a [usize],
);

/// The code, saving the callee-saved registers `saved` on entry and restoring them at
/// every exit; and the callee-saved registers it uses.
fn assemble(
    (an, trace, tree, table, sure, counter, last_use): Parts,
    saved: &[u8],
) -> Option<(Emitted, Vec<u8>)> {
    let n = trace.insts.len();
    let mut q = Quick {
        pending: HashMap::default(),
        saved: saved.to_vec(),
        used: Vec::new(),
        counter,
        header: None,
        ops: VecAssembler::new(0),
        reg_of: vec![None; n],
        // `idiv` divides `rdx:rax`: a trace that divides keeps no value in either.
        free: POOL
            .iter()
            .rev()
            .copied()
            .filter(|r| !divides(trace) || ![RAX, RDX].contains(r))
            .collect(),
        exits: Vec::new(),
        origins: Vec::new(),
        flags: None,
        checked: Vec::new(),
        items: HashMap::default(),
    };
    for &r in saved {
        dynasm!(q.ops ; .arch x64 ; push Rq(r));
    }
    let refused = q.ops.new_dynamic_label();
    // The inputs whose kinds the exit that entered may not have left.
    for ((slot, at), kind) in an.layout.inputs.iter().zip(&an.input_kinds) {
        if sure.contains(&(*slot, *kind)) {
            continue;
        }
        let tag_at = disp(at + 1)?;
        let tag = mirror_tag(*kind) as i32;
        dynasm!(q.ops
            ; .arch x64
            ; cmp QWORD [rdi + tag_at], tag
            ; jne =>refused
        );
    }
    // The register buffer must hold the code's slots: it keeps no budget, and the counter's
    // slot holds the buffer's size (`lower::refuse_entries`).
    if an.sized {
        let (room_at, size) = (
            disp(an.layout.counter)?,
            i32::try_from(an.layout.size).ok()?,
        );
        dynasm!(q.ops
            ; .arch x64
            ; cmp QWORD [rdi + room_at], size
            ; jl =>refused
        );
    }
    // A bridge unit counts its entries down; the one that spends the count returns.
    let hot = q.ops.new_dynamic_label();
    if let Some(counter) = q.counter.filter(|_| an.unit != 0) {
        dynasm!(q.ops
            ; .arch x64
            ; mov r11, QWORD counter as i64
            ; sub QWORD [r11], 1
            ; jz =>hot
        );
    }
    for (i, inst) in trace.insts.iter().enumerate() {
        let start = q.ops.offset().0 as u32;
        let goes_on = q.inst(an, trace, i, last_use)?;
        let origin = Origin {
            segment: an.unit,
            inst: i,
            exit: false,
        };
        q.origins.push((start, q.ops.offset().0 as u32, origin));
        if !goes_on {
            break;
        }
        // The registers of values used for the last time here are free again.
        for r in inst.args.iter().filter_map(Opnd::as_ref) {
            q.release(r, i, last_use);
        }
        if let Some(snap) = trace.snap_of(inst) {
            snap.for_each_exit_ref(|r| q.release(r, i, last_use));
        }
        q.release(Ref(i as u32), i, last_use);
    }
    // The exits, after the code that goes on.
    for exit in std::mem::take(&mut q.exits) {
        let start = q.ops.offset().0 as u32;
        // This code keeps no budget: its plan charges none.
        let table = (!exit.returns).then_some(table);
        let plan = ExitPlan::new(an, trace, 0, exit.inst, (tree, 0), table);
        q.write_exit(&plan, &exit)?;
        let origin = Origin {
            segment: an.unit,
            inst: exit.inst,
            exit: true,
        };
        q.origins.push((start, q.ops.offset().0 as u32, origin));
    }
    for (label, what) in [(refused, REFUSED), (hot, HOT)] {
        let code = exit_code(tree, an.unit, what);
        dynasm!(q.ops ; .arch x64 ; =>label);
        q.restore();
        dynasm!(q.ops
            ; .arch x64
            ; mov rax, QWORD code
            ; ret
        );
    }
    let used = std::mem::take(&mut q.used);
    let bytes = q.ops.finalize().ok()?;
    let emitted = Emitted {
        bytes,
        origins: q.origins,
    };
    Some((emitted, used))
}

/// The displacement of slot `at` of the register buffer, if an instruction can hold it.
fn disp(at: usize) -> Option<i32> {
    i32::try_from(8 * at).ok()
}

/// The state of an emission.
struct Quick {
    /// The callee-saved registers saved on entry.
    saved: Vec<u8>,
    /// The callee-saved registers the code uses, in the order of `POOL`.
    used: Vec<u8>,
    /// The address of a root's count of iterations left before Cranelift compiles it, or
    /// of a bridge unit's count of entries left before it returns [`HOT`].
    counter: Option<u64>,
    /// A root's loop header.
    header: Option<DynamicLabel>,
    ops: VecAssembler<X64Relocation>,
    /// Per instruction: the register its value is in, while it lives.
    reg_of: Vec<Option<u8>>,
    /// The free registers (taken from the end).
    free: Vec<u8>,
    exits: Vec<Exit>,
    origins: Vec<(u32, u32, Origin)>,
    /// A comparison whose result only the guard after it reads, and only from the flags
    /// (its instruction and condition): the guard is one conditional jump.
    flags: Option<(usize, Cond)>,
    /// The arrays checked holding only integers, in order: the code stores nothing else,
    /// so they go on doing so.
    checked: Vec<Ref>,
    /// Per array checked, the register that holds the address of its first element from
    /// its first access on, while one was free then: an array's elements never move, and
    /// the register is free again where the array dies (the loop's own arrays live to its
    /// back edge).
    items: HashMap<Ref, u8>,
    /// Per such access: the exit of its run, made where the run starts.
    pending: HashMap<usize, DynamicLabel>,
}

/// `x + y` (`op` an addition) or `x - y` (a subtraction) as one `lea`: `x` a register
/// and `y` a constant whose displacement fits in 32 bits; the register and the
/// displacement.
fn lea_of(op: Op, x: Loc, y: Loc) -> Option<(u8, i32)> {
    let (Loc::Reg(x), Loc::Imm(k)) = (x, y) else {
        return None;
    };
    let k = match op {
        Op::Add => k,
        Op::Sub => k.checked_neg()?,
        _ => return None,
    };
    Some((x, i32::try_from(k).ok()?))
}

impl Quick {
    /// A register for the value of instruction `i`.
    fn define(&mut self, i: usize) -> Option<u8> {
        let r = self.temp()?;
        self.reg_of[i] = Some(r);
        Some(r)
    }

    /// Frees the register of `r` if instruction `i` was its last use (and that of its
    /// items, for an array).
    fn release(&mut self, r: Ref, i: usize, last_use: &[usize]) {
        if last_use[r.index()] == i {
            if let Some(reg) = self.reg_of[r.index()].take() {
                self.free.push(reg);
            }
            if let Some(items) = self.items.remove(&r) {
                self.free.push(items);
            }
        }
    }

    /// The register holding the address of the first element of `array` (in register
    /// `a`), checked to hold only integers: the one loaded at its first access, or loaded
    /// now into one kept while the array lives. `None` when few registers are free: the
    /// caller loads the address into a register of its own.
    fn items_of(&mut self, array: Ref, a: u8) -> Option<u8> {
        if let Some(&r) = self.items.get(&array) {
            return Some(r);
        }
        // Not the last registers: the values to come need them more.
        if self.free.len() <= 3 {
            return None;
        }
        let r = self.temp()?;
        dynasm!(self.ops ; .arch x64 ; mov Rq(r), QWORD [Rq(a) + ITEMS]);
        self.items.insert(array, r);
        Some(r)
    }

    fn loc(&self, o: &Opnd) -> Option<Loc> {
        Some(match o {
            Opnd::Ref(r) => Loc::Reg(self.reg_of[r.index()]?),
            Opnd::Const(Value::Int(n)) => Loc::Imm(*n),
            Opnd::Const(_) => return None,
        })
    }

    /// An exit at instruction `i` with its snapshot's values where they are now: its label.
    fn exit(&mut self, trace: &crate::trace::Trace, i: usize) -> Option<DynamicLabel> {
        let snap = trace.snap_of(&trace.insts[i])?;
        let mut regs = Vec::new();
        let mut all = true;
        snap.for_each_exit_ref(|r| match self.reg_of[r.index()] {
            Some(reg) => regs.push((r, reg)),
            None => all = false,
        });
        if !all {
            return None;
        }
        let label = self.ops.new_dynamic_label();
        self.exits.push(Exit {
            label,
            inst: i,
            regs,
            returns: false,
            checked: self.checked.len(),
        });
        Some(label)
    }

    /// Restores the callee-saved registers saved on entry (before an exit leaves).
    fn restore(&mut self) {
        for &r in self.saved.clone().iter().rev() {
            dynasm!(self.ops ; .arch x64 ; pop Rq(r));
        }
    }

    /// `mov d, imm`.
    fn mov_imm(&mut self, d: u8, imm: i64) {
        match i32::try_from(imm) {
            Ok(k) => dynasm!(self.ops ; .arch x64 ; mov Rq(d), k),
            Err(_) => dynasm!(self.ops ; .arch x64 ; mov Rq(d), QWORD imm),
        }
    }

    /// `mov d, x` (nothing where `x` is `d`).
    fn mov(&mut self, d: u8, x: Loc) {
        match x {
            Loc::Reg(s) if s == d => {}
            Loc::Reg(s) => dynasm!(self.ops ; .arch x64 ; mov Rq(d), Rq(s)),
            Loc::Imm(k) => self.mov_imm(d, k),
        }
    }

    /// `y` as a register or a 32-bit immediate: a wider constant goes into the scratch
    /// register.
    fn narrow(&mut self, y: Loc) -> Loc {
        match y {
            Loc::Imm(k) if i32::try_from(k).is_err() => {
                self.mov_imm(SCRATCH, k);
                Loc::Reg(SCRATCH)
            }
            y => y,
        }
    }

    /// `cmp x, y` (a constant `x` goes into the scratch register; `y` may not then be a
    /// constant too wide for an immediate).
    fn cmp(&mut self, x: Loc, y: Loc) -> Option<()> {
        let x = match x {
            Loc::Reg(r) => r,
            Loc::Imm(k) => {
                if matches!(y, Loc::Imm(m) if i32::try_from(m).is_err()) {
                    return None;
                }
                self.mov_imm(SCRATCH, k);
                SCRATCH
            }
        };
        match self.narrow(y) {
            Loc::Reg(s) => dynasm!(self.ops ; .arch x64 ; cmp Rq(x), Rq(s)),
            Loc::Imm(k) => dynasm!(self.ops ; .arch x64 ; cmp Rq(x), k as i32),
        }
        Some(())
    }

    /// Sets the low byte of `d` where the flags say `cond` (`d` is 0 before).
    fn set(&mut self, cond: Cond, d: u8) {
        match cond {
            Cond::Lt => dynasm!(self.ops ; .arch x64 ; setl Rb(d)),
            Cond::Le => dynasm!(self.ops ; .arch x64 ; setle Rb(d)),
            Cond::Gt => dynasm!(self.ops ; .arch x64 ; setg Rb(d)),
            Cond::Ge => dynasm!(self.ops ; .arch x64 ; setge Rb(d)),
            Cond::Eq => dynasm!(self.ops ; .arch x64 ; sete Rb(d)),
            Cond::Ne => dynasm!(self.ops ; .arch x64 ; setne Rb(d)),
        }
    }

    /// Jumps to `to` where the flags say `cond`.
    fn jump_if(&mut self, cond: Cond, to: DynamicLabel) {
        match cond {
            Cond::Lt => dynasm!(self.ops ; .arch x64 ; jl =>to),
            Cond::Le => dynasm!(self.ops ; .arch x64 ; jle =>to),
            Cond::Gt => dynasm!(self.ops ; .arch x64 ; jg =>to),
            Cond::Ge => dynasm!(self.ops ; .arch x64 ; jge =>to),
            Cond::Eq => dynasm!(self.ops ; .arch x64 ; je =>to),
            Cond::Ne => dynasm!(self.ops ; .arch x64 ; jne =>to),
        }
    }

    /// Whether comparison `i` need only set the flags: the instruction after it is a
    /// `guard_true` or `guard_false` on it, the last to read it, and not with it in its
    /// snapshot.
    fn only_guarded(trace: &crate::trace::Trace, i: usize, last_use: &[usize]) -> bool {
        let Some(next) = trace.insts.get(i + 1) else {
            return false;
        };
        let me = Opnd::Ref(Ref(i as u32));
        matches!(next.kind, Kind::GuardTrue | Kind::GuardFalse)
            && next.args[0] == me
            && last_use[i] == i + 1
            && !trace
                .snap_of(next)
                .is_some_and(|s| s.exit_values().any(|o| *o == me))
    }

    /// `jo` to `to`, the exit of an operation that overflowed.
    fn jo(&mut self, to: DynamicLabel) {
        dynasm!(self.ops ; .arch x64 ; jo =>to);
    }

    /// Emits instruction `i`; false when it always exits (nothing after it runs). `None`
    /// when it needs a register and none is free.
    fn inst(
        &mut self,
        an: &TreeAnalysis,
        trace: &crate::trace::Trace,
        i: usize,
        last_use: &[usize],
    ) -> Option<bool> {
        let inst = &trace.insts[i];
        match inst.kind {
            Kind::Input(slot) => {
                let at = disp(an.layout.inputs.iter().find(|(s, _)| *s == slot)?.1)?;
                let d = self.define(i)?;
                dynasm!(self.ops ; .arch x64 ; mov Rq(d), QWORD [rdi + at]);
            }
            Kind::GuardTrue | Kind::GuardFalse => return self.guard_bool(trace, i),
            Kind::GuardValue => {
                let fail = self.exit(trace, i)?;
                let v = self.loc(&inst.args[0])?;
                let k = self.loc(&inst.args[1])?;
                self.cmp(v, k)?;
                dynasm!(self.ops ; .arch x64 ; jne =>fail);
            }
            Kind::Loop if an.unit == 0 => return self.root_loop(trace, i),
            Kind::Loop => {
                // The end of a bridge compiled on its own is an exit at the anchor.
                let exit = self.exit(trace, i)?;
                dynasm!(self.ops ; .arch x64 ; jmp =>exit);
                return Some(false);
            }
            Kind::LoopStart => return self.loop_start(an, trace, i, last_use),
            Kind::Param(_) => {}
            Kind::GetItem => return self.getitem(an, trace, i),
            Kind::SetItem => return self.setitem(an, trace, i),
            Kind::Op(op) => self.op(an, trace, i, op, last_use)?,
            _ => return None,
        }
        Some(true)
    }

    /// Emits `guard_true` or `guard_false` `i`: whether the code goes on past it; `None`
    /// when this backend cannot emit it.
    fn guard_bool(&mut self, trace: &crate::trace::Trace, i: usize) -> Option<bool> {
        let inst = &trace.insts[i];
        let fail = self.exit(trace, i)?;
        let holds_on_nonzero = inst.kind == Kind::GuardTrue;
        if let Some((c, cond)) = self.flags.take() {
            if inst.args[0] == Opnd::Ref(Ref(c as u32)) {
                let fails = if holds_on_nonzero {
                    cond.negated()
                } else {
                    cond
                };
                self.jump_if(fails, fail);
                return Some(true);
            }
        }
        match self.loc(&inst.args[0])? {
            Loc::Imm(k) => {
                if (k != 0) != holds_on_nonzero {
                    dynasm!(self.ops ; .arch x64 ; jmp =>fail);
                    return Some(false);
                }
            }
            Loc::Reg(c) => {
                dynasm!(self.ops ; .arch x64 ; test Rq(c), Rq(c));
                if holds_on_nonzero {
                    dynasm!(self.ops ; .arch x64 ; jz =>fail);
                } else {
                    dynasm!(self.ops ; .arch x64 ; jnz =>fail);
                }
            }
        }
        Some(true)
    }

    /// Emits the root's `loop` `i`, its back edge: whether the code goes on past it; `None`
    /// when this backend cannot emit it.
    fn root_loop(&mut self, trace: &crate::trace::Trace, i: usize) -> Option<bool> {
        let inst = &trace.insts[i];
        // The root's back edge: once the loop has run its count here, it exits to
        // be compiled by Cranelift.
        let hot = self.exit(trace, i)?;
        if let Some(e) = self.exits.last_mut() {
            e.returns = true;
        }
        let counter = self.counter? as i64;
        dynasm!(self.ops
            ; .arch x64
            ; mov r11, QWORD counter
            ; sub QWORD [r11], 1
            ; jz =>hot
        );
        let from = self.locs(&inst.args)?;
        self.parallel_move(trace, from)?;
        let header = self.header?;
        dynasm!(self.ops ; .arch x64 ; jmp =>header);
        Some(false)
    }

    /// Emits the root's `loop_start` `i`: whether the code goes on past it; `None`
    /// when this backend cannot emit it.
    fn loop_start(
        &mut self,
        an: &TreeAnalysis,
        trace: &crate::trace::Trace,
        i: usize,
        last_use: &[usize],
    ) -> Option<bool> {
        let inst = &trace.insts[i];
        // The loop's proofs may assume a parameter in an interval the preamble's
        // value is not known to lie in (`bounds::induction`): checked here.
        for (k, range) in an.bounds[0].entry.iter().enumerate() {
            let Some(range) = range else { continue };
            let v = self.loc(&inst.args[k])?;
            let bounds = [(range.lo, i64::MIN, true), (range.hi, i64::MAX, false)];
            for (bound, end, below) in bounds {
                let bound = bound.and_then(|b| i64::try_from(b).ok());
                let Some(bound) = bound.filter(|b| *b != end) else {
                    continue;
                };
                let fail = self.exit(trace, i)?;
                self.cmp(v, Loc::Imm(bound))?;
                if below {
                    dynasm!(self.ops ; .arch x64 ; jl =>fail);
                } else {
                    dynasm!(self.ops ; .arch x64 ; jg =>fail);
                }
            }
        }
        // The preamble's values that die here give their registers to the
        // parameters they become.
        let from = self.locs(&inst.args)?;
        for r in inst.args.iter().filter_map(Opnd::as_ref) {
            self.release(r, i, last_use);
        }
        for k in 0..inst.args.len() {
            self.define(i + 1 + k)?;
        }
        self.parallel_move(trace, from)?;
        let header = self.ops.new_dynamic_label();
        dynasm!(self.ops ; .arch x64 ; =>header);
        self.header = Some(header);
        Some(true)
    }

    /// Emits `getitem` `i`: whether the code goes on past it; `None`
    /// when this backend cannot emit it.
    fn getitem(
        &mut self,
        an: &TreeAnalysis,
        trace: &crate::trace::Trace,
        i: usize,
    ) -> Option<bool> {
        let inst = &trace.insts[i];
        let fail = self.exit(trace, i)?;
        let a = self.array_reg(&inst.args[0])?;
        self.check_access(an, trace, i, a, fail)?;
        let items = self.items_of(inst.args[0].as_ref()?, a);
        let d = self.define(i)?;
        let items = items.unwrap_or_else(|| {
            dynasm!(self.ops ; .arch x64 ; mov Rq(d), QWORD [Rq(a) + ITEMS]);
            d
        });
        self.element(items, self.loc(&inst.args[1])?, |q, at| q.load_at(d, at));
        Some(true)
    }

    /// Emits `setitem` `i`: whether the code goes on past it; `None`
    /// when this backend cannot emit it.
    fn setitem(
        &mut self,
        an: &TreeAnalysis,
        trace: &crate::trace::Trace,
        i: usize,
    ) -> Option<bool> {
        let inst = &trace.insts[i];
        // Only into an array a read checked holding only integers: into another,
        // Cranelift's code stores through the element's tag, where this code's
        // check would exit at every pass.
        if !self.checked.contains(&inst.args[0].as_ref()?) {
            return None;
        }
        let a = self.array_reg(&inst.args[0])?;
        if inst.snap.is_some() {
            let fail = self.exit(trace, i)?;
            self.check_access(an, trace, i, a, fail)?;
        }
        let index = self.loc(&inst.args[1])?;
        let v = self.loc(&inst.args[2])?;
        if let Some(items) = self.items_of(inst.args[0].as_ref()?, a) {
            self.element(items, index, |q, at| q.store_at(at, v));
        } else {
            let t = self.temp()?;
            dynasm!(self.ops ; .arch x64 ; mov Rq(t), QWORD [Rq(a) + ITEMS]);
            self.element(t, index, |q, at| q.store_at(at, v));
            self.free.push(t);
        }
        Some(true)
    }

    /// Emits operation `i`.
    fn op(
        &mut self,
        an: &TreeAnalysis,
        trace: &crate::trace::Trace,
        i: usize,
        op: Op,
        last_use: &[usize],
    ) -> Option<()> {
        let inst = &trace.insts[i];
        let args: Vec<Loc> = inst
            .args
            .iter()
            .map(|a| self.loc(a))
            .collect::<Option<_>>()?;
        self.run_check(an, trace, i, &args)?;
        let bounds = &an.bounds[0];
        let checked = inst.snap.is_some() && !bounds.safe[i];
        // A value nothing reads is not computed.
        if last_use[i] == i && !checked {
            return Some(());
        }
        if let Some(cond) = Cond::of(op).filter(|_| Quick::only_guarded(trace, i, last_use)) {
            self.cmp(args[0], args[1])?;
            self.flags = Some((i, cond));
            return Some(());
        }
        // Two-operand arithmetic that cannot exit after it writes its result takes the
        // register of its first operand where that dies here: the `mov` before it goes
        // (a cell's `and 255` after its `+`).
        let reuse = match (inst.args.first(), args.first()) {
            (Some(Opnd::Ref(x)), Some(&Loc::Reg(r)))
                if !(checked && matches!(op, Op::Add | Op::Sub | Op::Mul))
                    && last_use[x.index()] == i
                    && inst.args[1..].iter().all(|a| a.as_ref() != Some(*x))
                    && matches!(op, Op::Add | Op::Sub | Op::Mul | Op::And | Op::Or | Op::Xor) =>
            {
                self.reg_of[x.index()] = None;
                self.reg_of[i] = Some(r);
                Some(r)
            }
            _ => None,
        };
        let d = match reuse {
            Some(r) => r,
            None => self.define(i)?,
        };
        // A sum with a constant that no overflow check follows (below).
        let lea = match args.as_slice() {
            [x, y] if !checked => lea_of(op, *x, *y),
            _ => None,
        };
        if let Some(cond) = Cond::of(op) {
            dynasm!(self.ops ; .arch x64 ; xor Rd(d), Rd(d));
            self.cmp(args[0], args[1])?;
            self.set(cond, d);
            return Some(());
        }
        match op {
            Op::Same => self.mov(d, args[0]),
            Op::Not => {
                dynasm!(self.ops ; .arch x64 ; xor Rd(d), Rd(d));
                self.cmp(args[0], Loc::Imm(0))?;
                self.set(Cond::Eq, d);
            }
            Op::Neg => {
                self.mov(d, args[0]);
                dynasm!(self.ops ; .arch x64 ; neg Rq(d));
                if checked {
                    let fail = self.exit(trace, i)?;
                    self.jo(fail);
                }
            }
            Op::Div | Op::Mod if power_of_two(&inst.args[1]).is_some() => {
                let m = power_of_two(&inst.args[1])?;
                self.mov(d, args[0]);
                if op == Op::Div {
                    dynasm!(self.ops ; .arch x64 ; sar Rq(d), m as i8);
                } else {
                    match self.narrow(Loc::Imm((1i64 << m) - 1)) {
                        Loc::Reg(s) => dynasm!(self.ops ; .arch x64 ; and Rq(d), Rq(s)),
                        Loc::Imm(k) => dynasm!(self.ops ; .arch x64 ; and Rq(d), k as i32),
                    }
                }
            }
            Op::Div | Op::Mod => self.floor_divide(trace, i, op, d, &args)?,
            // A sum with a constant that no overflow check follows: one `lea`, where a
            // `mov` and an `add` were two (a pointer's step, a cell's `+` or `-` that
            // cannot leave its range).
            Op::Add | Op::Sub if lea.is_some() => {
                let (x, k) = lea?;
                dynasm!(self.ops ; .arch x64 ; lea Rq(d), [Rq(x) + k]);
            }
            Op::Add | Op::Sub | Op::Mul | Op::And | Op::Or | Op::Xor => {
                self.arith(trace, i, op, d, &args, checked)?
            }
            _ => return None,
        }
        Some(())
    }

    /// The one overflow check of a run of constant offsets of the same value that
    /// instruction `i` stands for ([`MachineBounds`](crate::opt::bounds::MachineBounds)), or
    /// where an access's bounds check stands for it, that access's exit.
    fn run_check(
        &mut self,
        an: &TreeAnalysis,
        trace: &crate::trace::Trace,
        i: usize,
        args: &[Loc],
    ) -> Option<()> {
        let inst = &trace.insts[i];
        let bounds = &an.bounds[0];
        let access = an.checks[0].standing_for(i);
        if let (Some(j), Some(_)) = (access, bounds.widen[i]) {
            // The access's bounds check stands for this one, and exits here.
            let fail = self.exit(trace, i)?;
            self.pending.insert(j, fail);
        } else if let Some((lo, hi)) = bounds.widen[i] {
            // One check for a run of constant offsets of the same value.
            let x = match (inst.args.as_slice(), args) {
                ([Opnd::Ref(_), _], [x, _]) | (_, [_, x]) => *x,
                _ => return None,
            };
            let fail = self.exit(trace, i)?;
            if hi > 0 {
                self.cmp(x, Loc::Imm(i64::MAX - hi))?;
                dynasm!(self.ops ; .arch x64 ; jg =>fail);
            }
            if lo < 0 {
                self.cmp(x, Loc::Imm(i64::MIN - lo))?;
                dynasm!(self.ops ; .arch x64 ; jl =>fail);
            }
        }
        Some(())
    }

    /// `d = x / y` or `d = x % y` (`args`), as the interpreter's floor division: exit on
    /// a zero divisor and on MIN / -1 (the result leaves 64 bits); `idiv` truncates, so where
    /// the remainder is not 0 and its sign is not the divisor's, q - 1 and r + y.
    fn floor_divide(
        &mut self,
        trace: &crate::trace::Trace,
        i: usize,
        op: Op,
        d: u8,
        args: &[Loc],
    ) -> Option<()> {
        let (ok, done) = (self.ops.new_dynamic_label(), self.ops.new_dynamic_label());
        self.mov(SCRATCH, args[1]);
        // By a constant other than 0 and -1, neither can happen (and the optimizer
        // may have dropped the snapshot: `opt::bounds`).
        if !matches!(args[1], Loc::Imm(k) if safe_divisor(k)) {
            let fail = self.exit(trace, i)?;
            let min = i64::MIN;
            dynasm!(self.ops
                ; .arch x64
                ; test r11, r11
                ; jz =>fail
                ; cmp r11, -1
                ; jne =>ok
                ; mov rax, QWORD min
            );
            match args[0] {
                Loc::Reg(x) => dynasm!(self.ops ; .arch x64 ; cmp Rq(x), rax ; je =>fail),
                Loc::Imm(k) if k == min => dynasm!(self.ops ; .arch x64 ; jmp =>fail),
                Loc::Imm(_) => {}
            }
        }
        dynasm!(self.ops ; .arch x64 ; =>ok);
        self.mov(RAX, args[0]);
        dynasm!(self.ops ; .arch x64 ; cqo ; idiv r11);
        if op == Op::Div {
            dynasm!(self.ops
                ; .arch x64
                ; mov Rq(d), rax
                ; test rdx, rdx
                ; jz =>done
                ; xor rdx, r11
                ; jns =>done
                ; sub Rq(d), 1
                ; =>done
            );
        } else {
            dynasm!(self.ops
                ; .arch x64
                ; mov Rq(d), rdx
                ; test rdx, rdx
                ; jz =>done
                ; xor rdx, r11
                ; jns =>done
                ; add Rq(d), r11
                ; =>done
            );
        }
        Some(())
    }

    /// `d = x op y` (`args`) for the two-operand arithmetic and bitwise operations, with
    /// an overflow check where `checked`.
    fn arith(
        &mut self,
        trace: &crate::trace::Trace,
        i: usize,
        op: Op,
        d: u8,
        args: &[Loc],
        checked: bool,
    ) -> Option<()> {
        self.mov(d, args[0]);
        match (op, self.narrow(args[1])) {
            (Op::Add, Loc::Reg(s)) => dynasm!(self.ops ; .arch x64 ; add Rq(d), Rq(s)),
            (Op::Add, Loc::Imm(k)) => dynasm!(self.ops ; .arch x64 ; add Rq(d), k as i32),
            (Op::Sub, Loc::Reg(s)) => dynasm!(self.ops ; .arch x64 ; sub Rq(d), Rq(s)),
            (Op::Sub, Loc::Imm(k)) => dynasm!(self.ops ; .arch x64 ; sub Rq(d), k as i32),
            (Op::Mul, Loc::Reg(s)) => dynasm!(self.ops ; .arch x64 ; imul Rq(d), Rq(s)),
            (Op::Mul, Loc::Imm(k)) => {
                dynasm!(self.ops ; .arch x64 ; imul Rq(d), Rq(d), k as i32)
            }
            (Op::And, Loc::Reg(s)) => dynasm!(self.ops ; .arch x64 ; and Rq(d), Rq(s)),
            (Op::And, Loc::Imm(k)) => dynasm!(self.ops ; .arch x64 ; and Rq(d), k as i32),
            (Op::Or, Loc::Reg(s)) => dynasm!(self.ops ; .arch x64 ; or Rq(d), Rq(s)),
            (Op::Or, Loc::Imm(k)) => dynasm!(self.ops ; .arch x64 ; or Rq(d), k as i32),
            (Op::Xor, Loc::Reg(s)) => dynasm!(self.ops ; .arch x64 ; xor Rq(d), Rq(s)),
            (Op::Xor, Loc::Imm(k)) => dynasm!(self.ops ; .arch x64 ; xor Rq(d), k as i32),
            _ => return None,
        }
        if checked && matches!(op, Op::Add | Op::Sub | Op::Mul) {
            let fail = self.exit(trace, i)?;
            self.jo(fail);
        }
        Some(())
    }

    /// The register of an operand that is an array.
    fn array_reg(&self, o: &Opnd) -> Option<u8> {
        self.reg_of[o.as_ref()?.index()]
    }

    /// A free register for the length of one instruction's code (given back by pushing
    /// it onto `free`).
    fn temp(&mut self) -> Option<u8> {
        let r = self.free.pop()?;
        self.uses(r);
        Some(r)
    }

    /// Notes that the code writes register `r`: a callee-saved one is saved on entry.
    fn uses(&mut self, r: u8) {
        if callee_saved(r) && !self.used.contains(&r) {
            self.used.push(r);
        }
    }

    /// Checks access `i` of the array in register `a` (a `getitem`, or a `setitem` with a
    /// snapshot), exiting at `fail`: that the array holds only integers, once per array,
    /// and that the index is within it. The first access around a base checks the least
    /// and the greatest offsets the code accesses around it, as `Lower::check_index` does,
    /// and the later ones nothing: exiting before an access that would not fail is
    /// correct, the interpreter goes on from there.
    fn check_access(
        &mut self,
        an: &TreeAnalysis,
        trace: &crate::trace::Trace,
        i: usize,
        a: u8,
        fail: DynamicLabel,
    ) -> Option<()> {
        let inst = &trace.insts[i];
        let array = inst.args[0].as_ref()?;
        // The bounds first, exiting before the run of offsets whose overflow check they
        // stand for, if any (`opt::checks`); then the array's flag.
        let out = self.pending.remove(&i).unwrap_or(fail);
        self.check_bounds(an, trace, i, a, out)?;
        if !self.checked.contains(&array) {
            dynasm!(self.ops
                ; .arch x64
                ; cmp QWORD [Rq(a) + INTS], 0
                ; je =>fail
            );
            self.checked.push(array);
        }
        Some(())
    }

    /// [`Quick::check_access`]'s bounds check.
    fn check_bounds(
        &mut self,
        an: &TreeAnalysis,
        trace: &crate::trace::Trace,
        i: usize,
        a: u8,
        fail: DynamicLabel,
    ) -> Option<()> {
        let inst = &trace.insts[i];
        let index = self.loc(&inst.args[1])?;
        let (lo, hi, c) = match an.checks[0].bounds(i) {
            Bounds::Covered => return Some(()),
            Bounds::Span { lo, hi, at, .. } => (lo, hi, at),
            Bounds::Index => match index {
                // An index of the plan's ([`Quick::supported`] refuses others): the span
                // of its one offset.
                Loc::Reg(_) if an.checks[0].access[i].is_some() => (0, 0, 0),
                Loc::Reg(_) => return None,
                // A constant index (from 0, `supported`).
                Loc::Imm(k) => {
                    dynasm!(self.ops
                        ; .arch x64
                        ; cmp QWORD [Rq(a) + LEN], k as i32
                        ; jbe =>fail
                    );
                    return Some(());
                }
            },
        };
        let Loc::Reg(x) = index else { return None };
        // Each end of the span, `x + lo` and `x + hi`, as `index + (end - c)`: both within
        // the array (unsigned: a negative or wrapped sum is past any length), so is every
        // offset between.
        let ends = if lo == hi { vec![lo] } else { vec![lo, hi] };
        for end in ends {
            let d = i32::try_from(end.checked_sub(c)?).ok()?;
            if d == 0 {
                dynasm!(self.ops ; .arch x64 ; cmp Rq(x), QWORD [Rq(a) + LEN]);
            } else {
                dynasm!(self.ops
                    ; .arch x64
                    ; lea r11, [Rq(x) + d]
                    ; cmp r11, QWORD [Rq(a) + LEN]
                );
            }
            dynasm!(self.ops ; .arch x64 ; jae =>fail);
        }
        Some(())
    }

    /// Emits `access` with the address of the payload of the element at `index` among the
    /// items at register `items`, as a displacement from a register: `items + 16 * index +
    /// 8` (the scratch register holds `2 * index`).
    fn element(&mut self, items: u8, index: Loc, access: impl FnOnce(&mut Quick, Address)) {
        let payload = abi::VALUE_PAYLOAD_OFFSET as i32;
        match index {
            Loc::Reg(x) => {
                dynasm!(self.ops ; .arch x64 ; lea r11, [Rq(x) + Rq(x)]);
                access(self, Address::Scaled(items, payload));
            }
            Loc::Imm(k) => {
                let at = k as i32 * abi::VALUE_SIZE as i32 + payload;
                access(self, Address::Plain(items, at));
            }
        }
    }

    /// `mov d, [address]`.
    fn load_at(&mut self, d: u8, address: Address) {
        match address {
            Address::Scaled(b, at) => {
                dynasm!(self.ops ; .arch x64 ; mov Rq(d), QWORD [Rq(b) + r11 * 8 + at])
            }
            Address::Plain(b, at) => dynasm!(self.ops ; .arch x64 ; mov Rq(d), QWORD [Rq(b) + at]),
        }
    }

    /// `mov [address], v` (`v` a register or a 32-bit immediate, `supported`).
    fn store_at(&mut self, address: Address, v: Loc) {
        match (address, v) {
            (Address::Scaled(b, d), Loc::Reg(s)) => {
                dynasm!(self.ops ; .arch x64 ; mov QWORD [Rq(b) + r11 * 8 + d], Rq(s))
            }
            (Address::Scaled(b, d), Loc::Imm(k)) => {
                dynasm!(self.ops ; .arch x64 ; mov QWORD [Rq(b) + r11 * 8 + d], k as i32)
            }
            (Address::Plain(b, d), Loc::Reg(s)) => {
                dynasm!(self.ops ; .arch x64 ; mov QWORD [Rq(b) + d], Rq(s))
            }
            (Address::Plain(b, d), Loc::Imm(k)) => {
                dynasm!(self.ops ; .arch x64 ; mov QWORD [Rq(b) + d], k as i32)
            }
        }
    }

    /// Where operands are now.
    fn locs(&self, args: &[Opnd]) -> Option<Vec<Loc>> {
        args.iter().map(|a| self.loc(a)).collect()
    }

    /// Moves `from`, the operands of `loop_start` or `loop`, into the registers of the
    /// loop's parameters, all at once: a move waits until no other still reads its
    /// destination, and a cycle goes through the scratch register.
    fn parallel_move(&mut self, trace: &crate::trace::Trace, from: Vec<Loc>) -> Option<()> {
        let start = trace.loop_start()?;
        let mut moves: Vec<(u8, Loc)> = Vec::new();
        for (k, from) in from.into_iter().enumerate() {
            let to = self.reg_of[start + 1 + k]?;
            if from != Loc::Reg(to) {
                moves.push((to, from));
            }
        }
        while !moves.is_empty() {
            let free = (0..moves.len())
                .find(|&m| !moves.iter().any(|(_, from)| *from == Loc::Reg(moves[m].0)));
            match free {
                Some(m) => {
                    let (to, from) = moves.remove(m);
                    self.mov(to, from);
                }
                None => {
                    // Only cycles are left: the first move's destination is kept in the
                    // scratch register, and read from there.
                    let to = moves[0].0;
                    dynasm!(self.ops ; .arch x64 ; mov r11, Rq(to));
                    for (_, from) in &mut moves {
                        if *from == Loc::Reg(to) {
                            *from = Loc::Reg(SCRATCH);
                        }
                    }
                }
            }
        }
        Some(())
    }

    /// Writes `exit` as its `plan` says: a linked one makes its stores, writes its snapshot
    /// into the mirror and goes on through its slot of the link table; another stores its
    /// snapshot's values in their slots and returns its code.
    fn write_exit(&mut self, plan: &ExitPlan, exit: &Exit) -> Option<()> {
        let reg = |r: &Ref| exit.regs.iter().find(|(x, _)| x == r).map(|(_, g)| *g);
        dynasm!(self.ops ; .arch x64 ; =>exit.label);
        debug_assert!(
            plan.carried.is_empty(),
            "no bridge of this code goes back to its start"
        );
        let Some(link) = &plan.link else {
            for (r, at) in &plan.returned {
                self.store(*at, Loc::Reg(reg(r)?))?;
            }
            self.restore();
            dynasm!(self.ops
                ; .arch x64
                ; mov rax, QWORD plan.code
                ; ret
            );
            return Some(());
        };
        // The stores the code delayed (`opt::sink`), into arrays checked holding only
        // integers before the exit (the code stores nothing else). A register that holds
        // none of the snapshot's values holds their items.
        if !link.stores.is_empty() {
            let taken: Vec<u8> = exit.regs.iter().map(|(_, g)| *g).collect();
            let items = POOL.iter().copied().find(|g| !taken.contains(g))?;
            self.uses(items);
            for st in link.stores {
                let array = st.array.as_ref()?;
                if !self.checked[..exit.checked].contains(&array) {
                    return None;
                }
                let at = |o: &Opnd| match o {
                    Opnd::Ref(r) => reg(r).map(Loc::Reg),
                    Opnd::Const(Value::Int(k)) => Some(Loc::Imm(*k)),
                    Opnd::Const(_) => None,
                };
                let a = reg(&array)?;
                dynasm!(self.ops ; .arch x64 ; mov Rq(items), QWORD [Rq(a) + ITEMS]);
                let v = at(&st.value)?;
                self.element(items, at(&st.index)?, |q, address| q.store_at(address, v));
            }
        }
        for w in &link.writes {
            let value = match w.value {
                Opnd::Ref(r) => Loc::Reg(reg(r)?),
                Opnd::Const(v) => Loc::Imm(constant(v)?.0),
            };
            self.store(w.at, value)?;
            if let Some(tag) = w.tag {
                self.store(w.at + 1, Loc::Imm(tag))?;
            }
        }
        self.restore();
        dynasm!(self.ops
            ; .arch x64
            ; mov rdx, QWORD link.code
            ; mov r11, QWORD link.slot
            ; jmp QWORD [r11]
        );
        Some(())
    }

    /// Stores `v` into slot `at` of the register buffer.
    fn store(&mut self, at: usize, v: Loc) -> Option<()> {
        let at = disp(at)?;
        match self.narrow(v) {
            Loc::Reg(s) => dynasm!(self.ops ; .arch x64 ; mov QWORD [rdi + at], Rq(s)),
            Loc::Imm(k) => dynasm!(self.ops ; .arch x64 ; mov QWORD [rdi + at], k as i32),
        }
        Some(())
    }
}
