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

use rustc_hash::FxHashMap as HashMap;

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
use crate::opt::program::{self, bounds, operand_kind, Checked, ProgramAnalysis, Slots};
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

/// What is known of `program`, entered at `entry` with `frame` (`opt::program::analyze`),
/// or why machine code cannot run it.
pub fn analyze(
    program: &Program,
    entry: BlockId,
    frame: &Frame,
) -> Result<ProgramAnalysis, Unsupported> {
    declined(program)?;
    let an = program::analyze(program, entry, frame)?;
    check_reads(program, &an.kinds, &an.defined)?;
    Ok(an)
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
        let program = self.program;
        for (k, inst) in program.blocks[bi].insts.iter().enumerate() {
            let lowered = self.statement(b, (bi, k), inst, &written, (&mut made, &mut seen));
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

    /// Lowers statement `k` of block `bi`, the variables `written` before it.
    fn statement(
        &mut self,
        b: &mut FunctionBuilder,
        (bi, k): (usize, usize),
        inst: &Inst,
        written: &[Slot],
        (made, seen): (&mut Made, &mut Elements),
    ) -> Stmt {
        let checked = self.an.checked[bi][k];
        match inst {
            Inst::Op1 { dst, op, .. } | Inst::Op2 { dst, op, .. } => {
                let at = (bi, k, checked);
                self.operation(b, at, (*dst, *op), inst, written, (made, seen))
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
                if checked.bounds {
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

    /// Lowers operation `op` assigning `dst`, statement `k` of block `bi`, checking what
    /// `checked` says (`opt::program::Checked`).
    #[allow(clippy::too_many_arguments)]
    fn operation(
        &mut self,
        b: &mut FunctionBuilder,
        (bi, k, checked): (usize, usize, Checked),
        (dst, op): (Slot, Op),
        inst: &Inst,
        written: &[Slot],
        (made, seen): (&mut Made, &mut Elements),
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
        let mut exits = self.deopts(bi, k, written);
        if op.allocates() || op == Op::ToList {
            return Stmt::Assigned(dst, alloc(b, isa, ctx, op, &args, &mut exits));
        }
        if let (Op::Readlist, true, [(a, Repr::Array), (i, Repr::Int)]) =
            (op, ints, args.as_slice())
        {
            let at = index_parts(b, *i);
            let v = seen
                .get(*a, at)
                .unwrap_or_else(|| int_item(b, made, *a, *i, checked.bounds, &mut exits));
            seen.put(*a, at, v);
            return Stmt::Assigned(dst, v);
        }
        // A sum or difference of integers whose intervals keep it within 64 bits is not
        // checked (`opt::program::Checked`).
        match ops::lower_op(b, op, &args, checked.overflow, result, &mut exits) {
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
