//! Lowering a trace tree (a peeled root trace and the bridges attached to its guards) to
//! one Cranelift function.
//!
//! The function is `tail fn(regs: *mut i64, ctx) -> i64` ([`tree_signature`]). `regs` starts
//! with the *mirror* of the frame (two slots per variable: its unboxed value and its kind),
//! where the tree reads its inputs, then has one 64-bit slot per instruction of every segment
//! (the root is segment 0, bridge `k` segment `k + 1`) and one for the counter ([`Layout`]).
//! Before the first tree runs, the runtime fills the mirror from the frame.
//!
//! ```text
//! entry:  load the tree inputs ───► start(inputs...):  root preamble ── loop_start ──►
//!         header(params...): root loop body ── loop ──► header
//!             │ a guard with a bridge branches to it (guard_value: a switch on the value)
//!             ▼
//!         bridge block ── ... ── at the anchor: jump start(the inputs' new values)
//! ```
//!
//! A guard without a bridge, and every other instruction that can exit, branches to a cold
//! block of its own, which stores the SSA values its snapshot needs and returns the
//! instruction's code ([`exit_code`]: the tree's number and the instruction's global index).
//! Snapshots are complete (`crate::resume`): a bridge's hold what the guards it hangs from
//! wrote, as its `input`s of them, which are those guards' values. The runtime writes the
//! mirror, then the one snapshot, into the frame.
//!
//! An exit that resumes at the anchor of another tree ([`linkable`]) writes its snapshot
//! into the mirror and makes its stores, then goes on as a tail call through its slot of
//! the tree's link table: once the driver has seen that exit followed by an entry into that
//! tree, the slot holds the tree's function, and the exit goes there without returning
//! (PyPy's jumps between loops, LuaJIT's linked traces); until then it holds [`unlinked`],
//! which returns the exit's code marked [`WRITTEN`]. Loops nested in loops thus run from
//! machine code to machine code. The driver links an exit to a tree only where the exit
//! leaves the kinds the tree was compiled for in the mirror, and the runtime checks the
//! frame before it enters code: a tree checks on entry only its inputs held as integers of
//! any size (and the `--max-steps` budget), returning [`REFUSED`] otherwise.
//!
//! Values are unboxed by kind (`flowjit_runtime::abi`): an integer is an `i64`, an atom its
//! id, a list the address of its `List`. Arithmetic checks overflow, and an overflow is an
//! exit: the interpreter redoes the operation with big integers. Under `--max-steps` the
//! code keeps an operation budget (the counter): each completed iteration subtracts what its
//! path cost, and the code exits at the anchor when the budget could not hold the costliest
//! iteration of the tree. Without a limit there is no counter.

use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I32, I64};
use cranelift_codegen::ir::{
    AbiParam, Block, BlockArg, Function, InstBuilder, MemFlagsData, Signature, SourceLoc,
    StackSlot, StackSlotData, StackSlotKind, UserFuncName, Value as ClifValue,
};
use cranelift_codegen::isa::{CallConv, TargetIsa};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Switch, Variable};
use flowjit_runtime::abi::{self, Repr};
use flowjit_runtime::{Op, Value};

pub use super::exit::{
    decode_exit, exit_code, linkable, mirror_tag, HOT, REFUSED, RETURNED, WRITTEN,
};
use super::exit::{Carried, ExitPlan, LinkPlan};
use super::helpers::{self, CallSite};
use super::ops;
use crate::lang::Slot;
use crate::opt::checks::{self, Bounds};
use crate::opt::header::Arrival;
use crate::opt::interval::Range;
use crate::opt::repr::Source;
use crate::trace::tree::is_virtual;
use crate::trace::{call_pure_parts, Kind, Opnd, Ref};

use super::analysis::holds_loads;
pub use super::analysis::{analyze, exit_kinds, max_cost, path_cost, Layout, TreeAnalysis};
pub use crate::trace::tree::{Segment, TreeInst};

/// The namespace of the name by which a tree's function calls itself ([`Lower::itself`]).
pub const ITSELF: u32 = 4;

/// The signature of a tree's function: `tail fn(regs, ctx, code) -> i64` ([`exit_code`]).
/// Trees use the tail-call convention, so that an exit can go on in another tree without
/// returning (`return_call_indirect`); the runtime calls them through a trampoline
/// ([`trampoline_signature`]). `code` is the code of the exit that jumped there: a tree
/// ignores it, the function of unlinked exits ([`unlinked`]) returns it. `ctx` is the
/// context the trampoline passes, which the code does not read: it reads the context from
/// its slot of the register buffer where a helper needs it ([`Layout::context`]), and an
/// exit passes `regs` in its place. (Held in a register through the whole function, the
/// context took one from the trace's values: 22 of mandel.b's 385 functions compiled by
/// Cranelift spilled it to the stack on entry.)
pub fn tree_signature(isa: &dyn TargetIsa) -> Signature {
    let mut sig = Signature::new(CallConv::Tail);
    sig.params.push(AbiParam::new(isa.pointer_type()));
    sig.params.push(AbiParam::new(isa.pointer_type()));
    sig.params.push(AbiParam::new(I64));
    sig.returns.push(AbiParam::new(I64));
    sig
}

/// Where a [`linkable`] exit goes while nothing is linked to it: a function of the trees'
/// signature that returns the code it is given, so that every such exit is one tail call
/// through its slot of the link table, linked or not.
pub fn unlinked(isa: &dyn TargetIsa, fctx: &mut FunctionBuilderContext) -> Function {
    let mut func = Function::with_name_signature(UserFuncName::user(3, 0), tree_signature(isa));
    let mut b = FunctionBuilder::new(&mut func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    let code = b.block_params(entry)[2];
    b.ins().return_(&[code]);
    b.finalize(isa.frontend_config());
    func
}

/// The trampoline's signature: `extern "C" fn(tree, regs, ctx) -> i64` calls `tree`.
pub fn trampoline_signature(isa: &dyn TargetIsa) -> Signature {
    let mut sig = Signature::new(isa.default_call_conv());
    for _ in 0..3 {
        sig.params.push(AbiParam::new(isa.pointer_type()));
    }
    sig.returns.push(AbiParam::new(I64));
    sig
}

/// The trampoline through which the runtime enters a tree (see [`tree_signature`]).
pub fn trampoline(isa: &dyn TargetIsa, fctx: &mut FunctionBuilderContext) -> Function {
    let mut func =
        Function::with_name_signature(UserFuncName::user(2, 0), trampoline_signature(isa));
    let mut b = FunctionBuilder::new(&mut func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    let params = b.block_params(entry).to_vec();
    let sig = b.import_signature(tree_signature(isa));
    let none = b.ins().iconst(I64, 0);
    let call = b
        .ins()
        .call_indirect(sig, params[0], &[params[1], params[2], none]);
    let code = b.inst_results(call)[0];
    b.ins().return_(&[code]);
    b.finalize(isa.frontend_config());
    func
}

/// The signature of a residual program's function: `extern "C" fn(regs: *mut i64, ctx:
/// *mut Ctx) -> u32` ([`helpers::Ctx`]).
pub fn signature(isa: &dyn TargetIsa) -> Signature {
    let mut sig = Signature::new(isa.default_call_conv());
    sig.params.push(AbiParam::new(isa.pointer_type()));
    sig.params.push(AbiParam::new(isa.pointer_type()));
    sig.returns.push(AbiParam::new(I32));
    sig
}

/// Where a piece of machine code (or Cranelift IR) comes from: an instruction of a trace of
/// the tree, or the exit block of a guard. Cranelift carries it as the instructions'
/// source location (`SourceLoc`), through to the ranges of the machine code
/// (`MachSrcLoc`): listings annotate the code with it, and `flowjit report` links each
/// trace operation to its IR and its instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Origin {
    /// The segment in its tree: 0 for the root trace, B + 1 for bridge B.
    pub segment: usize,
    /// The instruction's index in the segment.
    pub inst: usize,
    /// Whether this is the code of the instruction's exit (writing back its snapshot)
    /// rather than the instruction itself.
    pub exit: bool,
}

impl Origin {
    const EXIT: u32 = 1 << 31;

    /// As a source location: the exit flag, the segment in bits 16-30, the instruction in
    /// bits 0-15 (a trace is shorter than `BRIDGE_LENGTH_FACTOR` times the longest root,
    /// under 2^16 instructions).
    pub fn srcloc(self) -> SourceLoc {
        let exit = if self.exit { Origin::EXIT } else { 0 };
        SourceLoc::new(exit | ((self.segment as u32) << 16) | (self.inst as u32 & 0xffff))
    }

    /// The origin a source location stands for, if it stands for one.
    pub fn of(loc: SourceLoc) -> Option<Origin> {
        if loc.is_default() {
            return None;
        }
        let bits = loc.bits();
        Some(Origin {
            segment: ((bits & !Origin::EXIT) >> 16) as usize,
            inst: (bits & 0xffff) as usize,
            exit: bits & Origin::EXIT != 0,
        })
    }
}

/// Per guard: the bridges leaving from it, as (segment, value).
type Attachments<'a> = HashMap<TreeInst, Vec<(usize, Option<&'a Value>)>>;

/// A value derived from an array that [`Lower::known`] remembers: its length, its items, or
/// the address of one of its elements.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Derived {
    /// An array's length.
    Len,
    /// An array's items.
    Items,
    /// The address of the element at an index among the items given.
    Element(ClifValue),
}

struct Lower<'a> {
    segments: &'a [Segment<'a>],
    an: &'a TreeAnalysis,
    /// Per segment and instruction: its value.
    vals: Vec<Vec<Option<ClifValue>>>,
    /// The current values of the tree inputs (the `start` block's parameters).
    inputs: Vec<ClifValue>,
    regs: ClifValue,
    isa: &'a dyn TargetIsa,
    counter: Option<Variable>,
    max_cost: u64,
    start: Block,
    /// The root loop's header, once lowered.
    header: Option<Block>,
    /// Exit blocks to fill at the end: (block, segment, instruction).
    exits: Vec<Exit>,
    /// Per instruction of the segment being lowered: the last instruction that reads it
    /// as an operand (snapshots aside).
    last_use: Vec<usize>,
    /// Bridges: (segment, guard) → [(bridge segment, value)].
    bridges: Attachments<'a>,
    /// Bridge blocks to fill: (block, bridge segment, the arrays known to hold only
    /// integers where its guard branches there: `ints`).
    pending: Vec<(Block, usize, Vec<ClifValue>)>,
    seg: usize,
    /// The virtual arrays of the guard the current bridge hangs from, built where the
    /// bridge starts: by their refs in the guard's segment.
    built: HashMap<Ref, ClifValue>,
    /// The arrays known, at this point of the current block, to hold only 64-bit integers
    /// (their flag, `abi::ARRAY_INTS_OFFSET`, was checked): their elements are read and
    /// written without tags. Forgotten where a segment or the loop body starts, and after
    /// what may store anything else.
    ints: Vec<ClifValue>,
    /// What the accesses of arrays of integers computed on the current segment's way so
    /// far, for the later ones to use again ([`Lower::field`], [`Lower::element`]): an
    /// array's length and items (fixed for its life), an index times the element size.
    /// Each was computed on the way to every later instruction of the segment up to the
    /// loop's header, where they are forgotten (bridges may jump there from before them),
    /// as they are where a segment, a bridge's block or an exit's block starts.
    /// Cranelift's optimizer finds these again, but a function compiled without it (a
    /// bridge on its own) would compute each once per access.
    known: Vec<(Derived, ClifValue, ClifValue)>,
    /// The boxes of the integers of any size the code holds (kind `Num`): one per
    /// instruction that makes one, per tree input and loop parameter of that kind, and per
    /// big constant. The code holds their addresses; they live as long as it.
    boxes: RefCell<helpers::Boxes>,
    /// The boxes instructions of kind `Num` write their results into, by (segment,
    /// instruction): the only instruction that writes each (but for the back edge's
    /// exchanges, `param_args`).
    own_boxes: HashMap<TreeInst, *mut Value>,
    /// Per root loop parameter of kind `Num`: its box.
    param_boxes: HashMap<usize, *mut Value>,
    /// Per tree input: its box, if it is of kind `Num` (null otherwise). `start` takes its
    /// address: the entry and the bridges that go back to `start` fill it.
    input_boxes: Vec<*mut Value>,
    /// Per tree input of kind `Num`, when the code holds no bridge of its tree (nothing
    /// jumps to `start`): its move from the mirror into its box, made where the first
    /// segment reads the input rather than on entry (an exit before that, the way most
    /// iterations of a loop of many ways leave the root, does not pay for it).
    deferred: Vec<Option<NumMove>>,
    /// The tree's number in the run (in its exits' codes).
    tree: usize,
    /// The blocks of the bridges from reads ([`Lower::read_bridge`]).
    read_bridges: HashMap<TreeInst, Block>,
    /// What the code's direct calls and `return`s need, when it makes them.
    direct: Option<Direct<'a>>,
    /// The register buffer of the function traces the code calls directly, in its own
    /// frame (made with the first such call), and its size in slots.
    reserve: Option<(StackSlot, usize)>,
    /// The code's own function, as its calls of itself call it ([`Lower::calls_itself`]).
    itself: Option<cranelift_codegen::ir::FuncRef>,
}

/// What code needs to call function traces' code directly ([`super::nested::FnCell`])
/// and, in a function trace, to return the value of its `return` ([`RETURNED`]).
#[derive(Clone, Copy)]
pub struct Direct<'a> {
    /// The program: each function's parameters, each `return`'s operand.
    pub program: &'a crate::lang::Program,
    /// The address of the first function's cell (`nested::FnCell`), one per function.
    pub cells: u64,
    /// The cells of the calls of dispatch functions (`Program::portal`), by call: the
    /// function trace of their green arguments'. A call of one that is not here goes
    /// through a helper.
    pub keyed: &'a [(TreeInst, u64)],
}

impl Direct<'_> {
    /// The address of `func`'s cell.
    fn cell(&self, func: crate::lang::FuncId) -> u64 {
        self.cells + (func.index() * std::mem::size_of::<super::nested::FnCell>()) as u64
    }
}

/// The fewest slots of the register buffer that code not of a function trace reserves in
/// its frame for the calls it makes directly (2 KiB): a function trace with a few bridges
/// inlining calls needs a hundred or more.
const MIN_RESERVE: usize = 256;

/// A move of an integer of any size into a box of the code: (the box, the value's bits,
/// its kind code).
type NumMove = (*mut Value, ClifValue, ClifValue);

impl Lower<'_> {
    /// The context helpers take, from its slot of the register buffer
    /// ([`Layout::context`]): read where used (Cranelift shares the reads and moves them
    /// out of loops), rather than held in a register through the whole function.
    fn ctx(&self, b: &mut FunctionBuilder) -> ClifValue {
        let flags = MemFlagsData::trusted().with_readonly().with_can_move();
        b.ins()
            .load(I64, flags, self.regs, (8 * self.an.layout.context) as i32)
    }

    /// The number in its tree of segment `seg` of those being lowered.
    fn tree_segment(&self, seg: usize) -> usize {
        if self.an.unit == 0 {
            seg
        } else {
            self.an.unit
        }
    }

    fn kind(&self, seg: usize, i: usize) -> Repr {
        self.an.kinds[seg][i].expect("a value has a kind")
    }

    fn opnd(&self, b: &mut FunctionBuilder, seg: usize, o: &Opnd) -> (ClifValue, Repr) {
        match o {
            Opnd::Ref(r) => (
                self.vals[seg][r.index()].expect("refs are defined before use"),
                self.kind(seg, r.index()),
            ),
            Opnd::Const(v @ Value::Big(_)) => (self.new_box(b, v.clone()).0, Repr::Num),
            Opnd::Const(v) => {
                let kind = Repr::of(v).expect("analyze() rejects other constants");
                let bits = abi::unbox(v, kind).expect("a value unboxes as its own kind");
                (b.ins().iconst(I64, bits), kind)
            }
        }
    }

    /// A new box of the code holding `v`: its address, as a value and as a pointer.
    fn new_box(&self, b: &mut FunctionBuilder, v: Value) -> (ClifValue, *mut Value) {
        let at = self.boxes.borrow_mut().make(v);
        (b.ins().iconst(I64, at as i64), at)
    }

    /// Whether the root loop has a parameter of kind `Num`.
    fn num_params(&self) -> bool {
        !self.param_boxes.is_empty()
    }

    /// Moves integers into boxes of the code, as one parallel assignment
    /// ([`helpers::num_moves`]): (box, value, its kind).
    fn num_moves(&mut self, b: &mut FunctionBuilder, moves: &[(*mut Value, ClifValue, Repr)]) {
        let moves: Vec<_> = moves
            .iter()
            .map(|(dst, v, kind)| (*dst, *v, b.ins().iconst(I64, helpers::kind_code(*kind))))
            .collect();
        self.num_moves_coded(b, &moves);
    }

    /// [`Lower::num_moves`], with each value's kind code as a value of the code (the entry
    /// reads it from the mirror).
    fn num_moves_coded(&self, b: &mut FunctionBuilder, moves: &[NumMove]) {
        if moves.is_empty() {
            return;
        }
        let slot = b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            (24 * moves.len()) as u32,
            3,
        ));
        for (k, (dst, v, kind)) in moves.iter().enumerate() {
            let dst = b.ins().iconst(I64, *dst as i64);
            for (w, x) in [dst, *v, *kind].into_iter().enumerate() {
                b.ins().stack_store(I64, x, slot, (8 * (3 * k + w)) as i32);
            }
        }
        let at = b.ins().stack_addr(I64, slot, 0);
        let n = b.ins().iconst(I64, moves.len() as i64);
        self.call(b, helpers::num_moves as *const u8, &[at, n], false);
    }

    /// Whether no snapshot of segment `seg` reads an `input` of `slot`: no exit then writes
    /// the value into the mirror, moves it out of its box, or reads it after another entry
    /// of the same exit wrote the mirror's box it may be.
    fn in_no_snapshot(&self, seg: usize, slot: Slot) -> bool {
        let trace = self.segments[seg].trace;
        let reads: Vec<Ref> = (0..trace.insts.len())
            .filter(|&i| trace.insts[i].kind == Kind::Input(slot))
            .map(|i| Ref(i as u32))
            .collect();
        trace.snaps.iter().all(|snap| {
            snap.operands()
                .all(|o| o.as_ref().is_none_or(|r| !reads.contains(&r)))
        })
    }

    /// An input of kind `Num` that no snapshot reads ([`Lower::in_no_snapshot`]), read
    /// where the mirror has it instead of copied: the address the mirror holds when its tag
    /// says `Num` (a box of the context's or the frame's slot, which nothing writes while
    /// the code runs, exits aside), or the input's box holding the 64-bit integer the
    /// mirror holds (the box only ever holds a 64-bit integer then: only its payload is
    /// written).
    fn borrowed_input(&mut self, b: &mut FunctionBuilder, (bx, bits, code): NumMove) -> ClifValue {
        let mf = MemFlagsData::trusted();
        let addr = b.ins().iconst(I64, bx as i64);
        b.ins()
            .store(mf, bits, addr, abi::VALUE_PAYLOAD_OFFSET as i32);
        let boxed = b
            .ins()
            .icmp_imm_s(IntCC::Equal, code, helpers::kind_code(Repr::Num));
        b.ins().select(boxed, bits, addr)
    }

    /// The arguments for the root loop's header from the root (its `loop_start` or its
    /// `loop`, `args`): those of the parameters held in registers, having moved those of
    /// kind `Num` into their boxes. With `exchange` (the back edge), a parameter whose new
    /// value is a box of the loop body that no other parameter takes exchanges its box with
    /// it: the body's next write into that box reuses the digits of two iterations ago.
    fn param_args(
        &mut self,
        b: &mut FunctionBuilder,
        args: &[Opnd],
        exchange: bool,
    ) -> Vec<BlockArg> {
        let start = self.segments[0].trace.loop_start().expect("a peeled root");
        let mut out = Vec::new();
        let mut moves = Vec::new();
        let mut swaps = Vec::new();
        for (p, a) in args.iter().enumerate() {
            let Some(&sp) = self.param_boxes.get(&p) else {
                out.push(BlockArg::Value(self.opnd(b, 0, a).0));
                continue;
            };
            if exchange {
                if let Opnd::Ref(r) = a {
                    if r.index() == start + 1 + p {
                        continue; // unchanged
                    }
                    let own = self.own_boxes.get(&TreeInst::new(0, r.index())).copied();
                    let once = args.iter().filter(|x| *x == a).count() == 1;
                    if let Some(sx) = own.filter(|_| once && r.index() > start) {
                        swaps.push((sp, sx));
                        continue;
                    }
                }
            }
            let (v, kind) = self.opnd(b, 0, a);
            moves.push((sp, v, kind));
        }
        // Every value is read before a box is written: the moves first (they may read a
        // parameter's box that an exchange below writes), then the exchanges.
        self.num_moves(b, &moves);
        let mf = MemFlagsData::trusted();
        for (x, y) in swaps {
            let (x, y) = (b.ins().iconst(I64, x as i64), b.ins().iconst(I64, y as i64));
            let words: Vec<ClifValue> = [(x, 0), (x, 8), (y, 0), (y, 8)]
                .iter()
                .map(|&(at, off)| b.ins().load(I64, mf, at, off))
                .collect();
            b.ins().store(mf, words[2], x, 0);
            b.ins().store(mf, words[3], x, 8);
            b.ins().store(mf, words[0], y, 0);
            b.ins().store(mf, words[1], y, 8);
        }
        out
    }

    /// At the root's `loop_start` `i`: exits unless each accumulator the loop's proofs
    /// assume cannot overflow (`bounds::Sum`) stays within 64 bits for as many iterations
    /// as its counter allows: `a0 + n * step`, with `n = (c0 - end) / -by + 1`, computed
    /// with overflow checks.
    fn check_sums(&mut self, b: &mut FunctionBuilder, i: usize) {
        let seg = self.seg;
        let inst = &self.segments[seg].trace.insts[i];
        let mut fail: Option<ClifValue> = None;
        let mut or = |b: &mut FunctionBuilder, flag: ClifValue| {
            fail = Some(match fail {
                Some(f) => b.ins().bor(f, flag),
                None => flag,
            });
        };
        // Per counter: how many times at most the loop's header is reached.
        let mut counts: HashMap<usize, ClifValue> = HashMap::default();
        for sum in &self.an.bounds[seg].sums {
            let n = match counts.get(&sum.counter) {
                Some(n) => *n,
                None => {
                    let (c0, _) = self.opnd(b, seg, &inst.args[sum.counter]);
                    let end = b.ins().iconst(I64, sum.end);
                    let (span, over) = if sum.by < 0 {
                        b.ins().ssub_overflow(c0, end)
                    } else {
                        b.ins().ssub_overflow(end, c0)
                    };
                    or(b, over);
                    let outside = b.ins().icmp_imm_s(IntCC::SignedLessThan, span, 0);
                    or(b, outside);
                    let moves = match sum.by.unsigned_abs() {
                        1 => span,
                        by => b.ins().udiv_imm_u(span, by as i64),
                    };
                    let one = b.ins().iconst(I64, 1);
                    let (n, over) = b.ins().sadd_overflow(moves, one);
                    or(b, over);
                    counts.insert(sum.counter, n);
                    n
                }
            };
            let (a0, _) = self.opnd(b, seg, &inst.args[sum.acc]);
            // A parameter passed on unchanged holds what the loop is entered with.
            let step = match &sum.step {
                Opnd::Ref(x) if x.index() > i => &inst.args[x.index() - i - 1],
                o => o,
            };
            let (step, _) = self.opnd(b, seg, step);
            let (total, over) = b.ins().smul_overflow(n, step);
            or(b, over);
            let (_, over) = if sum.minus {
                b.ins().ssub_overflow(a0, total)
            } else {
                b.ins().sadd_overflow(a0, total)
            };
            or(b, over);
        }
        if let Some(fail) = fail {
            self.exit_if(b, fail, i);
        }
    }

    /// Lowers operation `i` on integers of which one at least is of kind `Num`, through
    /// the helpers: into the instruction's own box for a `Num` result, or to a 64-bit one.
    fn num_op(&mut self, b: &mut FunctionBuilder, i: usize, op: Op) {
        let seg = self.seg;
        let inst = &self.segments[seg].trace.insts[i];
        let mut words = vec![b.ins().iconst(I64, helpers::op_code(op))];
        let result = self.kind(seg, i);
        let own = if result == Repr::Num {
            let (v, at) = self.new_box(b, Value::Int(0));
            self.own_boxes.insert(TreeInst::new(seg, i), at);
            words.push(v);
            Some(v)
        } else {
            None
        };
        self.operand_words(b, i, &mut words);
        let snap = inst.snap.is_some();
        // Where every operand holds a 64-bit integer, the code does it itself.
        let small = self.num_small(b, i, op, own);
        match own {
            Some(v) => {
                let f = helpers::num_arith as *const u8;
                let done = self.call(b, f, &words, true).expect("a result");
                if snap {
                    let failed = b.ins().icmp_imm_s(IntCC::Equal, done, 0);
                    self.exit_if(b, failed, i);
                }
                self.vals[seg][i] = Some(v);
                if let Some(join) = small {
                    b.ins().jump(join, &[]);
                    b.seal_block(join);
                    b.switch_to_block(join);
                }
            }
            None => {
                let f = helpers::num_test as *const u8;
                let r = self.call(b, f, &words, true).expect("a result");
                if snap {
                    let failed = b.ins().icmp_imm_s(IntCC::SignedLessThan, r, 0);
                    self.exit_if(b, failed, i);
                }
                self.vals[seg][i] = Some(r);
                if let Some(join) = small {
                    b.ins().jump(join, &[BlockArg::Value(r)]);
                    b.seal_block(join);
                    b.switch_to_block(join);
                    self.vals[seg][i] = Some(b.block_params(join)[0]);
                }
            }
        }
    }

    /// The inline way of [`Lower::num_op`] `i` when each operand of kind `Num` holds a
    /// 64-bit integer (a value past 64 bits that came back, or a box that never left them):
    /// `add`, `sub` and `mul` without overflow into the instruction's own box `own` while it
    /// holds a 64-bit integer too (the helper frees the digits it held before), and the
    /// comparisons. Returns the block joining the helper's way (with the comparison's
    /// result as its one parameter), having switched to the helper's way, a cold block;
    /// `None` when the operation has no inline way.
    fn num_small(
        &mut self,
        b: &mut FunctionBuilder,
        i: usize,
        op: Op,
        own: Option<ClifValue>,
    ) -> Option<Block> {
        let seg = self.seg;
        let inst = &self.segments[seg].trace.insts[i];
        let arith = matches!(op, Op::Add | Op::Sub | Op::Mul);
        let test = matches!(op, Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Eq | Op::Ne);
        if inst.args.len() != 2 || !(arith && own.is_some() || test && own.is_none()) {
            return None;
        }
        // Integers only: an atom, a list or an array compared with a boxed integer is not
        // equal to it whatever its bits, and ordering it is a type error.
        let integer = |a: &Opnd| match a {
            Opnd::Ref(r) => matches!(self.kind(seg, r.index()), Repr::Int | Repr::Num),
            Opnd::Const(v) => matches!(v, Value::Int(_)),
        };
        if !inst.args.iter().all(integer) {
            return None;
        }
        let mf = MemFlagsData::trusted();
        let (slow, join) = (b.create_block(), b.create_block());
        b.set_cold_block(slow);
        let mut words = Vec::new();
        for a in &inst.args {
            let (v, kind) = self.opnd(b, seg, a);
            if kind != Repr::Num {
                words.push(v);
                continue;
            }
            let tag = b.ins().load(I64, mf, v, abi::VALUE_TAG_OFFSET as i32);
            let big = b
                .ins()
                .icmp_imm_s(IntCC::NotEqual, tag, abi::TAG_INT as i64);
            self.branch_if(b, big, slow);
            words.push(b.ins().load(I64, mf, v, abi::VALUE_PAYLOAD_OFFSET as i32));
        }
        let (x, y) = (words[0], words[1]);
        match own {
            Some(own) => {
                let (r, over) = match op {
                    Op::Add => b.ins().sadd_overflow(x, y),
                    Op::Sub => b.ins().ssub_overflow(x, y),
                    _ => b.ins().smul_overflow(x, y),
                };
                self.branch_if(b, over, slow);
                let tag = b.ins().load(I64, mf, own, abi::VALUE_TAG_OFFSET as i32);
                let big = b
                    .ins()
                    .icmp_imm_s(IntCC::NotEqual, tag, abi::TAG_INT as i64);
                self.branch_if(b, big, slow);
                b.ins().store(mf, r, own, abi::VALUE_PAYLOAD_OFFSET as i32);
                b.ins().jump(join, &[]);
            }
            None => {
                let cc = match op {
                    Op::Lt => IntCC::SignedLessThan,
                    Op::Le => IntCC::SignedLessThanOrEqual,
                    Op::Gt => IntCC::SignedGreaterThan,
                    Op::Ge => IntCC::SignedGreaterThanOrEqual,
                    Op::Eq => IntCC::Equal,
                    _ => IntCC::NotEqual,
                };
                let r = b.ins().icmp(cc, x, y);
                let r = b.ins().uextend(I64, r);
                b.append_block_param(join, I64);
                b.ins().jump(join, &[BlockArg::Value(r)]);
            }
        }
        b.seal_block(slow);
        b.switch_to_block(slow);
        Some(join)
    }

    /// Emits exit `plan` of segment `seg` in the current block. A returning exit jumps to
    /// the one block that returns (`ret`, made where first needed).
    fn exit(
        &mut self,
        b: &mut FunctionBuilder,
        seg: usize,
        plan: &ExitPlan,
        ret: &mut Option<(Block, ClifValue)>,
    ) {
        let nums = self.carry_inputs(b, plan);
        if let Some(link) = &plan.link {
            let Some(plain) = self.link_exit(b, seg, link, &nums) else {
                return;
            };
            b.switch_to_block(plain);
            b.seal_block(plain);
        }
        self.return_exit(b, seg, plan, &nums, ret);
    }

    /// Writes back the tree inputs `plan` carries ([`ExitPlan::carried`]): each input's
    /// value, and for one of any size its tag; those (with their boxes) are left to the
    /// way the exit leaves.
    fn carry_inputs(
        &mut self,
        b: &mut FunctionBuilder,
        plan: &ExitPlan,
    ) -> Vec<(Carried, ClifValue)> {
        let mf = MemFlagsData::trusted();
        let mut nums = Vec::new();
        for c in &plan.carried {
            let v = self.inputs[c.input];
            if c.num {
                // The entry may have found a 64-bit integer.
                let tag = b.ins().iconst(I64, mirror_tag(Repr::Num));
                b.ins().store(mf, tag, self.regs, (8 * (c.at + 1)) as i32);
                nums.push((*c, v));
            } else {
                // A variable the snapshot writes is written over in the mirror (a linked
                // exit) or in the frame after the mirror (a return).
                b.ins().store(mf, v, self.regs, (8 * c.at) as i32);
            }
        }
        nums
    }

    /// Emits the way a linked exit goes on: one tail call through the exit's slot of the
    /// link table, to the tree linked there or to the function that returns the code
    /// (`unlinked`), after its stores and its writes into the mirror. Returns the block in
    /// which the exit returns instead, when an array it stores an integer into may no
    /// longer hold only integers.
    fn link_exit(
        &mut self,
        b: &mut FunctionBuilder,
        seg: usize,
        link: &LinkPlan,
        nums: &[(Carried, ClifValue)],
    ) -> Option<Block> {
        let mf = MemFlagsData::trusted();
        // An integer stored into an array that holds only integers is one plain store;
        // where an array no longer does, the exit returns instead (below), and the runtime
        // makes the stores. (No call here: calls are what cost Cranelift most.)
        let mut ints: Vec<ClifValue> = Vec::new();
        let mut plain = None;
        for st in link.stores {
            let (a, ka) = self.opnd(b, seg, &st.array);
            let (_, kv) = self.opnd(b, seg, &st.value);
            if ka == Repr::Array && kv == Repr::Int && !ints.contains(&a) {
                let flag = b.ins().load(I64, mf, a, abi::ARRAY_INTS_OFFSET as i32);
                let next = b.create_block();
                let to = *plain.get_or_insert_with(|| {
                    let block = b.create_block();
                    b.set_cold_block(block);
                    block
                });
                b.set_cold_block(next);
                b.ins().brif(flag, next, &[], to, &[]);
                b.seal_block(next);
                b.switch_to_block(next);
                ints.push(a);
            }
        }
        // The stores first: an integer of any size they store may be moved into the
        // mirror below.
        for st in link.stores {
            let (a, _) = self.opnd(b, seg, &st.array);
            let (index, _) = self.opnd(b, seg, &st.index);
            let (v, kv) = self.opnd(b, seg, &st.value);
            self.store(b, seg, a, (index, &st.index), v, kv, ints.contains(&a));
        }
        // Each variable once (an entry's value replaces the input's), so that what `moved`
        // remembers stays where it is.
        let mut moved = Vec::new();
        for &(c, v) in nums.iter().filter(|(c, _)| !c.rewritten) {
            let v = self.mirror_num(b, c.slot, v, true, &mut moved);
            b.ins().store(mf, v, self.regs, (8 * c.at) as i32);
        }
        for w in &link.writes {
            let (v, kind) = self.opnd(b, seg, w.value);
            debug_assert_eq!(kind, w.kind, "the plan's kind is the code's");
            let v = match (kind, w.value) {
                (Repr::Num, Opnd::Ref(r)) => {
                    let take = self.rewritten_box(seg, *r);
                    self.mirror_num(b, w.slot, v, take, &mut moved)
                }
                _ => v,
            };
            b.ins().store(mf, v, self.regs, (8 * w.at) as i32);
            if let Some(tag) = w.tag {
                let tag = b.ins().iconst(I64, tag);
                b.ins().store(mf, tag, self.regs, (8 * (w.at + 1)) as i32);
            }
        }
        // What the path to the exit did counts against the budget the next tree finds.
        if let Some(counter) = self.counter {
            let count = b.use_var(counter);
            let left = b.ins().iadd_imm_s(count, -(link.cost as i64));
            b.ins()
                .store(mf, left, self.regs, (8 * self.an.layout.counter) as i32);
        }
        let code = b.ins().iconst(I64, link.code);
        let slot = b.ins().iconst(I64, link.slot);
        let target = b.ins().load(I64, mf, slot, 0);
        // Each exit keeps its own indirect jump: the branch predictor learns each exit's
        // target at its own address.
        let sig = b.import_signature(tree_signature(self.isa));
        b.ins()
            .return_call_indirect(sig, target, &[self.regs, self.regs, code]);
        plain
    }

    /// Emits the way an exit returns: the carried inputs' boxes and each value the snapshot
    /// reads stored in their slots, the budget left, then a jump to the block that returns
    /// the exit's code.
    fn return_exit(
        &mut self,
        b: &mut FunctionBuilder,
        seg: usize,
        plan: &ExitPlan,
        nums: &[(Carried, ClifValue)],
        ret: &mut Option<(Block, ClifValue)>,
    ) {
        let mf = MemFlagsData::trusted();
        // Returning, the boxes' own addresses: the runtime reads them at once.
        for &(c, v) in nums {
            b.ins().store(mf, v, self.regs, (8 * c.at) as i32);
        }
        for &(r, at) in &plan.returned {
            let v = self.vals[seg][r.index()].expect("snapshot refs are defined before the exit");
            b.ins().store(mf, v, self.regs, (8 * at) as i32);
        }
        if let Some(counter) = self.counter {
            let count = b.use_var(counter);
            b.ins()
                .store(mf, count, self.regs, (8 * self.an.layout.counter) as i32);
        }
        let code = b.ins().iconst(I64, plan.code);
        let (to, _) = *ret.get_or_insert_with(|| {
            let block = b.create_block();
            let param = b.append_block_param(block, I64);
            b.set_cold_block(block);
            (block, param)
        });
        b.ins().jump(to, &[BlockArg::Value(code)]);
    }

    /// Copies each tree input of kind `Num` into a box of its own from the mirror, where it
    /// is a 64-bit integer or the address of one of any size (a frame's slot): `start` takes
    /// the box's address in place of what was `loaded`.
    fn box_num_inputs(
        &mut self,
        b: &mut FunctionBuilder,
        mut loaded: Vec<BlockArg>,
    ) -> Vec<BlockArg> {
        let (an, segments, regs) = (self.an, self.segments, self.regs);
        let mf = MemFlagsData::trusted();
        let mut moves = Vec::new();
        for (k, ((_, at), kind)) in an.layout.inputs.iter().zip(&an.input_kinds).enumerate() {
            if *kind != Repr::Num {
                self.input_boxes.push(std::ptr::null_mut());
                continue;
            }
            let (addr, bx) = self.new_box(b, Value::Int(0));
            self.input_boxes.push(bx);
            let BlockArg::Value(bits) = loaded[k] else {
                unreachable!("loaded values")
            };
            let tag = b.ins().load(I64, mf, regs, (8 * (at + 1)) as i32);
            // The kind code is the tag less one (`mirror_tag`).
            let code = b.ins().iadd_imm_s(tag, -1);
            moves.push((k, (bx, bits, code)));
            loaded[k] = BlockArg::Value(addr);
        }
        // Their sources are the mirror's: no move reads a box another writes.
        if segments.iter().skip(1).all(|s| s.separate) {
            self.deferred = vec![None; an.layout.inputs.len()];
            for (k, m) in moves {
                self.deferred[k] = Some(m);
            }
        } else {
            let moves: Vec<NumMove> = moves.into_iter().map(|(_, m)| m).collect();
            self.num_moves_coded(b, &moves);
        }
        loaded
    }

    /// Lowers the bridges compiled in the function, each from the block its guard branches
    /// to. An array its guard's code found holding only integers still does where the
    /// bridge starts, unless a store the guard's snapshot holds may put something else into
    /// it.
    fn pending_bridges(&mut self, b: &mut FunctionBuilder) {
        while let Some((block, seg, ints)) = self.pending.pop() {
            b.switch_to_block(block);
            b.seal_block(block);
            self.seg = seg;
            self.known.clear();
            self.build_virtuals(b);
            self.ints = ints;
            if self.parent_may_mix() {
                self.ints.clear();
            }
            let mut none = None;
            self.segment(b, &mut none);
        }
    }

    /// Fills the exit blocks, each emitting its plan ([`ExitPlan`]). Those that return jump
    /// to one block that returns its parameter, the exit's code: the epilogue (the
    /// callee-saved registers restored, the frame popped) is written once for them all, not
    /// once per exit (with the linked exits' own, the epilogues were two fifths of
    /// Brainfuck's mandelbrot's machine code).
    fn exit_blocks(&mut self, b: &mut FunctionBuilder, tree: usize, links: Option<Links>) {
        let (an, segments) = (self.an, self.segments);
        let exits = std::mem::take(&mut self.exits);
        let table = links.map(|l| l.table as u64);
        // Made where first jumped to.
        let mut ret: Option<(Block, ClifValue)> = None;
        for (block, seg, i, recompute) in exits {
            b.switch_to_block(block);
            b.seal_block(block);
            self.known.clear();
            let origin = Origin {
                segment: self.tree_segment(seg),
                inst: i,
                exit: true,
            };
            b.set_srcloc(origin.srcloc());
            // The operand the exit computes back stands for itself while the exit is filled.
            let saved = recompute.map(|(r, first, undo)| {
                let v = undo.operand(b, first);
                (r, self.vals[seg][r.index()].replace(v))
            });
            let s = &segments[seg];
            let plan = ExitPlan::new(an, s.trace, seg, i, (tree, s.cost), table);
            self.exit(b, seg, &plan, &mut ret);
            if let Some((r, old)) = saved {
                self.vals[seg][r.index()] = old;
            }
        }
        // Shared by the exits: no instruction of the trace's own.
        b.set_srcloc(SourceLoc::default());
        if let Some((block, code)) = ret {
            b.switch_to_block(block);
            b.ins().return_(&[code]);
        }
    }

    fn exit_block(&mut self, b: &mut FunctionBuilder, i: usize) -> Block {
        if let Some(bridge) = self.read_bridge(b, i) {
            return bridge;
        }
        let exit = b.create_block();
        b.set_cold_block(exit);
        self.exits.push((exit, self.seg, i, None));
        exit
    }

    /// Goes to `target` when `fail` is non-zero, and on in a new block otherwise.
    fn branch_if(&mut self, b: &mut FunctionBuilder, fail: ClifValue, target: Block) {
        let cont = b.create_block();
        b.ins().brif(fail, target, &[], cont, &[]);
        b.seal_block(cont);
        b.switch_to_block(cont);
    }

    /// Exits at instruction `i` when `fail` is non-zero.
    fn exit_if(&mut self, b: &mut FunctionBuilder, fail: ClifValue, i: usize) {
        let exit = self.exit_block(b, i);
        self.branch_if(b, fail, exit);
    }

    /// The block of the bridge from read `i` (`getitem`) of the current segment, if it has
    /// one in this function: where every exit of the read goes, the bridge reading again
    /// (a function trace's read that finds another type). One block for them all, knowing
    /// no array to hold only integers.
    fn read_bridge(&mut self, b: &mut FunctionBuilder, i: usize) -> Option<Block> {
        let at = TreeInst::new(self.seg, i);
        if self.segments[self.seg].trace.insts[i].kind != Kind::GetItem {
            return None;
        }
        if let Some(block) = self.read_bridges.get(&at) {
            return Some(*block);
        }
        let (s, _) = *self.bridges.get(&at)?.iter().find(|(_, v)| v.is_none())?;
        let block = b.create_block();
        self.pending.push((block, s, Vec::new()));
        self.read_bridges.insert(at, block);
        Some(block)
    }

    /// Where a failing guard `i` goes: its bridge's block, or an exit.
    fn guard_target(&mut self, b: &mut FunctionBuilder, i: usize) -> Block {
        let bridge = self
            .bridges
            .get(&TreeInst::new(self.seg, i))
            .and_then(|bs| bs.iter().find(|(_, v)| v.is_none()))
            .map(|(s, _)| *s);
        match bridge {
            Some(s) => self.bridge_block(b, s),
            None => self.exit_block(b, i),
        }
    }

    fn bridge_block(&mut self, b: &mut FunctionBuilder, seg: usize) -> Block {
        let block = b.create_block();
        self.pending.push((block, seg, self.ints.clone()));
        block
    }

    /// Appends the two operands of instruction `i` of the current segment to `words`, as
    /// helpers take them: each value's bits, then its kind code (a unary operation's second
    /// is 0, an integer).
    fn operand_words(&self, b: &mut FunctionBuilder, i: usize, words: &mut Vec<ClifValue>) {
        let seg = self.seg;
        let inst = &self.segments[seg].trace.insts[i];
        for k in 0..2 {
            let (v, kind) = match inst.args.get(k) {
                Some(a) => self.opnd(b, seg, a),
                None => (b.ins().iconst(I64, 0), Repr::Int),
            };
            words.push(v);
            words.push(b.ins().iconst(I64, helpers::kind_code(kind)));
        }
    }

    /// Lowers `op` (one that allocates) at instruction `i`: the runtime makes the new list
    /// or array and keeps it alive in the context; the code exits before `i` when it fails.
    fn alloc(&mut self, b: &mut FunctionBuilder, i: usize, op: Op) {
        let seg = self.seg;
        let inst = &self.segments[seg].trace.insts[i];
        let ctx = self.ctx(b);
        let int = |o: &Opnd| match o {
            Opnd::Ref(r) => self.kind(seg, r.index()) == Repr::Int,
            Opnd::Const(v) => matches!(v, Value::Int(_)),
        };
        let (f, words) = match (op, inst.args.as_slice()) {
            // `array(n, k)` of 64-bit integers, the common case, made directly.
            (Op::Array, [n, k]) if int(n) && int(k) => {
                let (n, k) = (self.opnd(b, seg, n).0, self.opnd(b, seg, k).0);
                (helpers::new_ints as *const u8, vec![ctx, n, k])
            }
            _ => {
                let mut words = vec![ctx, b.ins().iconst(I64, helpers::op_code(op))];
                self.operand_words(b, i, &mut words);
                (helpers::alloc as *const u8, words)
            }
        };
        let made = self.call(b, f, &words, true).expect("a result");
        if inst.snap.is_some() {
            let failed = b.ins().icmp_imm_s(IntCC::Equal, made, 0);
            self.exit_if(b, failed, i);
        }
        self.vals[seg][i] = Some(made);
    }

    /// Whether the loop after `loop_start` `i` of the current segment may make an array
    /// hold something other than integers: it stores a value of another kind, or calls a
    /// function (which may store anything).
    fn loop_may_mix(&self, i: usize) -> bool {
        self.may_mix(self.seg, &self.segments[self.seg].trace.insts[i + 1..])
    }

    /// Whether `insts`, of segment `seg`, may store something other than an integer into
    /// an array, or call a function (which may).
    fn may_mix(&self, seg: usize, insts: &[crate::trace::Inst]) -> bool {
        insts.iter().any(|inst| match inst.kind {
            Kind::CallPure(_) | Kind::Call(_) => true,
            Kind::SetItem => match &inst.args[2] {
                Opnd::Ref(r) => self.an.kinds[seg][r.index()] != Some(Repr::Int),
                Opnd::Const(v) => Repr::of(v) != Some(Repr::Int),
            },
            _ => false,
        })
    }

    /// What guard `i` on `c` branches on, and whether `c` holds where that is not zero. A
    /// test of an integer against 0 branches on the integer itself (`test`, `jne`), which
    /// keeps Cranelift from comparing the value it was computed from instead (`x - 1 == 0`
    /// as `x == 1`, which keeps both alive); another comparison of integers on its flags,
    /// not on the 0 or 1 it makes (which Cranelift's e-graph would see through, but
    /// bridges compiled without it would not); anything else on `c` itself.
    fn branch_value(&self, b: &mut FunctionBuilder, i: usize, c: ClifValue) -> (ClifValue, bool) {
        let seg = self.seg;
        let trace = self.segments[seg].trace;
        let Opnd::Ref(cr) = &trace.insts[i].args[0] else {
            return (c, true);
        };
        let cond = &trace.insts[cr.index()];
        let cc = match cond.kind {
            Kind::Op(Op::Lt) => IntCC::SignedLessThan,
            Kind::Op(Op::Le) => IntCC::SignedLessThanOrEqual,
            Kind::Op(Op::Gt) => IntCC::SignedGreaterThan,
            Kind::Op(Op::Ge) => IntCC::SignedGreaterThanOrEqual,
            Kind::Op(Op::Eq) => IntCC::Equal,
            Kind::Op(Op::Ne) => IntCC::NotEqual,
            _ => return (c, true),
        };
        let int = |o: &Opnd| match o {
            Opnd::Ref(r) => self.an.kinds[seg][r.index()] == Some(Repr::Int),
            Opnd::Const(v) => matches!(v, Value::Int(_)),
        };
        let [x, y] = cond.args.as_slice() else {
            return (c, true);
        };
        if !int(x) || !int(y) {
            return (c, true);
        }
        match (x, y) {
            (o @ Opnd::Ref(_), Opnd::Const(Value::Int(0)))
            | (Opnd::Const(Value::Int(0)), o @ Opnd::Ref(_))
                if matches!(cc, IntCC::Equal | IntCC::NotEqual) =>
            {
                (self.opnd(b, seg, o).0, cc == IntCC::NotEqual)
            }
            _ => {
                let (x, _) = self.opnd(b, seg, x);
                let (y, _) = self.opnd(b, seg, y);
                (b.ins().icmp(cc, x, y), true)
            }
        }
    }

    /// Whether instruction `i` of the current segment comes just before the root's back
    /// edge, with nothing to do between them (not counting steps or made values, which
    /// `charge` checks there).
    fn closes_loop(&self, i: usize) -> bool {
        let trace = self.segments[self.seg].trace;
        self.seg == 0
            && self.an.unit == 0
            && !self.an.owns
            && self.counter.is_none()
            && !self.num_params()
            && trace.insts.get(i + 1).is_some_and(|n| n.kind == Kind::Loop)
    }

    /// When counting, exits at instruction `i` unless the budget holds the costliest
    /// iteration after subtracting this one's `cost`, and subtracts it. When the code
    /// makes lists or arrays, exits at `i` when the context holds as many as it may
    /// ([`helpers::MAX_OWNED`]), so that they are let go.
    fn charge(&mut self, b: &mut FunctionBuilder, i: usize, cost: u64) {
        if self.an.owns {
            let at = std::mem::offset_of!(helpers::Ctx, made) as i32;
            let ctx = self.ctx(b);
            let made = b.ins().load(I64, MemFlagsData::trusted(), ctx, at);
            let full = b.ins().icmp_imm_u(
                IntCC::UnsignedGreaterThanOrEqual,
                made,
                helpers::MAX_OWNED as i64,
            );
            self.exit_if(b, full, i);
        }
        if let Some(counter) = self.counter {
            let count = b.use_var(counter);
            let left = b.ins().iadd_imm_s(count, -(cost as i64));
            let short = b
                .ins()
                .icmp_imm_s(IntCC::SignedLessThan, left, self.max_cost as i64);
            self.exit_if(b, short, i);
            b.def_var(counter, left);
        }
    }

    /// What operand `o` of segment `seg` stands for: a bridge's `input` of a variable the
    /// guard's snapshot gives is that value, in the segment that defines it (unless it is
    /// a virtual array there, which the bridge builds: then the input itself).
    fn origin(&self, seg: usize, o: Opnd) -> (usize, Opnd) {
        if let Opnd::Ref(r) = &o {
            if let Kind::Input(slot) = self.segments[seg].trace.insts[r.index()].kind {
                if let Some(Source::Chain(ps, po)) = self.an.sources[seg].get(&slot) {
                    let virtual_ = po
                        .as_ref()
                        .is_some_and(|pr| is_virtual(self.segments, *ps, pr));
                    if !virtual_ {
                        return self.origin(*ps, po.clone());
                    }
                }
            }
        }
        (seg, o)
    }

    /// What is known of `o`, an operand of segment `seg` that a bridge only passes on,
    /// where the value it stands for was left: the interval the segment that computed it
    /// knows before the guard on the way to `seg` (`opt::bounds::facts_before`).
    fn known_before(&self, seg: usize, o: &Opnd) -> Option<Range> {
        let (at, value) = self.origin(seg, o.clone());
        if at == seg {
            return None;
        }
        let mut s = seg;
        let guard = loop {
            let TreeInst {
                segment: ps,
                inst: pi,
            } = self.segments[s].parent?;
            if ps == at {
                break pi;
            }
            s = ps;
        };
        crate::opt::bounds::facts_before(self.segments[at].trace, guard).of(&value)
    }

    /// Whether the stores that the snapshot of the current bridge's guard holds, made
    /// where the bridge starts ([`Lower::build_virtuals`]), may store into an array
    /// anything but a 64-bit integer.
    fn parent_may_mix(&self) -> bool {
        let Some(TreeInst {
            segment: ps,
            inst: pi,
        }) = self.segments[self.seg].parent
        else {
            return true;
        };
        let trace = self.segments[ps].trace;
        let Some(snap) = trace.snap_of(&trace.insts[pi]) else {
            return true;
        };
        snap.stores.iter().any(|st| match &st.value {
            Opnd::Ref(r) => self.an.kinds[ps][r.index()] != Some(Repr::Int),
            Opnd::Const(v) => Repr::of(v) != Some(Repr::Int),
        })
    }

    /// Where the current bridge starts: builds the virtual arrays of the guard's snapshot
    /// it hangs from, as an exit would (`resume::restore`), so that its `input`s of them
    /// read arrays. Each is made first, then its elements stored (one may hold another, or
    /// itself); the context keeps them alive. Then makes the stores the snapshot holds.
    fn build_virtuals(&mut self, b: &mut FunctionBuilder) {
        self.built.clear();
        let Some(TreeInst {
            segment: ps,
            inst: pi,
        }) = self.segments[self.seg].parent
        else {
            return;
        };
        let trace = self.segments[ps].trace;
        let snap = trace
            .snap_of(&trace.insts[pi])
            .expect("a guard has a snapshot");
        // Only those the bridge reads, or that a store or another array holds: the bridge
        // makes the others again itself (`trace::Rebuilt`).
        let read: Vec<&Opnd> = (self.segments[self.seg].trace.insts.iter())
            .filter_map(|inst| match inst.kind {
                Kind::Input(slot) => snap.get(slot),
                _ => None,
            })
            .collect();
        let needed = |at: Ref| {
            let here = |o: &Opnd| *o == Opnd::Ref(at);
            read.iter().any(|o| here(o))
                || (snap.stores.iter()).any(|st| here(&st.array) || here(&st.value))
                || (snap.virtuals.iter()).any(|v| v.fields.iter().any(here))
        };
        for v in snap.virtuals.iter().filter(|v| needed(v.at)) {
            let n = b.ins().iconst(I64, v.fields.len() as i64);
            let zero = b.ins().iconst(I64, 0);
            let f = helpers::new_ints as *const u8;
            let ctx = self.ctx(b);
            let made = self.call(b, f, &[ctx, n, zero], true).expect("a result");
            self.built.insert(v.at, made);
        }
        // Each element but a 0, which the array was made with, stored as a store of the
        // trace is.
        let built: Vec<&crate::resume::Virtual> = (snap.virtuals.iter())
            .filter(|v| self.built.contains_key(&v.at))
            .collect();
        for v in built {
            for (k, o) in v.fields.iter().enumerate() {
                if matches!(o, Opnd::Const(Value::Int(0))) {
                    continue;
                }
                let (bits, kind) = match o {
                    Opnd::Ref(r) if self.built.contains_key(r) => (self.built[r], Repr::Array),
                    o => self.opnd(b, ps, o),
                };
                let array = self.built[&v.at];
                let at = Opnd::Const(Value::Int(k as i64));
                let index = b.ins().iconst(I64, k as i64);
                self.store(b, ps, array, (index, &at), bits, kind, false);
            }
        }
        // The stores the guard's code had not made yet (`opt::sink`).
        for s in &snap.stores {
            let (array, _) = self.opnd(b, ps, &s.array);
            let (index, _) = self.opnd(b, ps, &s.index);
            let (bits, kind) = match &s.value {
                Opnd::Ref(r) if self.built.contains_key(r) => (self.built[r], Repr::Array),
                o => self.opnd(b, ps, o),
            };
            self.store(b, ps, array, (index, &s.index), bits, kind, false);
        }
    }

    /// The arguments for the root loop's header at the end (instruction `i`) of the current
    /// bridge, when it may jump there directly: it hangs (through its chain) from a guard of
    /// the loop body, the state it brings satisfies what the loop assumes at its header
    /// ([`LoopState::admits`]: constants, variables sharing a parameter, no invariant
    /// written), and the parameters keep their kinds.
    fn header_args(&mut self, b: &mut FunctionBuilder, i: usize) -> Option<Vec<BlockArg>> {
        let seg = self.seg;
        // Parameters of kind `Num` are filled by the root's own jumps (`param_args`); a
        // bridge goes back through the preamble.
        if !self.segments[seg].returns || self.num_params() {
            return None;
        }
        // What the loop's accumulators assume of its iterations is checked at
        // `loop_start` (`bounds::Sum`): a bridge goes back through the preamble.
        if !self.an.bounds[0].sums.is_empty() {
            return None;
        }
        let state = self.an.state.as_ref()?;
        let start = self.segments[0].trace.loop_start()?;
        let mut s = seg;
        while let Some(TreeInst {
            segment: ps,
            inst: pi,
        }) = self.segments[s].parent
        {
            if ps == 0 && pi <= start {
                return None;
            }
            // The loop may hold what it loaded from arrays before the bridge (a load the
            // optimizer moved out of the loop, an element carried as a parameter), and
            // count on arrays the preamble found holding only integers still doing so
            // (`ints`): a bridge on the way that stores where the loop holds loads, or
            // stores anything but integers (or calls a function, which may), goes back
            // through the preamble, which loads and checks again.
            let insts = &self.segments[s].trace.insts;
            let stores = insts.iter().any(|i| i.kind == Kind::SetItem);
            let root = self.segments[0].trace;
            let held = || root.heap_from_preamble || holds_loads(root, start);
            if self.may_mix(s, insts) || (stores && held()) {
                return None;
            }
            s = ps;
        }
        // Every variable the path writes: the bridge's end snapshot is complete. A value a
        // bridge only passes on (its `input` of a variable the guard's snapshot gives)
        // arrives as the value it stands for.
        let end = self.segments[seg]
            .trace
            .snap_of(&self.segments[seg].trace.insts[i])?;
        let written: Vec<Slot> = end.entries.iter().map(|(sl, _)| *sl).collect();
        let now = |slot: Slot| -> Option<(usize, Opnd)> {
            end.get(slot).map(|o| self.origin(seg, o.clone()))
        };
        let arrival = |slot: Slot| match now(slot) {
            Some((_, Opnd::Const(c))) => Arrival::Const(c),
            Some((s, Opnd::Ref(r))) => Arrival::Value(s, r),
            None => Arrival::Unchanged,
        };
        let sources = state.admits(&written, &arrival)?;
        // The loop's overflow proofs assume each parameter in an interval (`an.hull`): what
        // the bridge brings must be known to lie in it.
        let brought: Vec<Option<Opnd>> = (sources.iter())
            .map(|s| s.and_then(|slot| end.get(slot)).cloned())
            .collect();
        let here = (self.segments[seg].trace, i, &self.an.kinds[seg][..]);
        let before = |o: &Opnd| self.known_before(seg, o);
        if !crate::opt::bounds::admits_at_header(here, &self.an.bounds[0].hull, &brought, before) {
            return None;
        }
        let mut args = Vec::new();
        for (k, source) in sources.into_iter().enumerate() {
            let p = start + 1 + k;
            let (v, kind) = match source.and_then(now) {
                Some((s, o)) => self.opnd(b, s, &o),
                None => (
                    self.vals[0][p].expect("params are lowered"),
                    self.kind(0, p),
                ),
            };
            if kind != self.kind(0, p) {
                return None;
            }
            args.push(BlockArg::Value(v));
        }
        Some(args)
    }

    /// Lowers the instructions of the current segment from the current block.
    fn segment(&mut self, b: &mut FunctionBuilder, header: &mut Option<Block>) {
        let seg = self.seg;
        let trace = self.segments[seg].trace;
        self.plan_segment(seg);
        let segment = self.tree_segment(seg);
        for (i, inst) in trace.insts.iter().enumerate() {
            let origin = Origin {
                segment,
                inst: i,
                exit: false,
            };
            b.set_srcloc(origin.srcloc());
            if !self.inst(b, i, inst, header) {
                return;
            }
        }
    }

    /// What lowering segment `seg` needs to know before its first instruction: each value's
    /// last use; and it forgets what the segment before computed.
    fn plan_segment(&mut self, seg: usize) {
        let trace = self.segments[seg].trace;
        self.last_use = (0..trace.insts.len()).collect();
        for (j, inst) in trace.insts.iter().enumerate() {
            for r in inst.args.iter().filter_map(Opnd::as_ref) {
                self.last_use[r.index()] = j;
            }
        }
        self.known.clear();
    }

    /// Lowers instruction `i` of the current segment; false when the code does not go on
    /// past it (it always exits, or ends the segment with a jump).
    fn inst(
        &mut self,
        b: &mut FunctionBuilder,
        i: usize,
        inst: &crate::trace::Inst,
        header: &mut Option<Block>,
    ) -> bool {
        let seg = self.seg;
        match inst.kind {
            Kind::Input(slot) => self.input(b, i, slot),
            // Never allocated: an exit whose snapshot holds it builds it.
            Kind::Param(_) | Kind::ParamItem | Kind::Virtual => {}
            Kind::LoopStart => return self.loop_start(b, i, header),
            Kind::Loop if self.segments[seg].trace.function.is_some() => {
                return self.function_end(b, i);
            }
            Kind::Loop if seg == 0 && self.an.unit == 0 => return self.root_loop(b, i, header),
            Kind::Loop => return self.bridge_end(b, i),
            Kind::GuardTrue | Kind::GuardFalse => return self.guard_bool(b, i, header),
            Kind::GetItem => return self.getitem(b, i),
            Kind::Op(op) if op.allocates() || op == Op::ToList => self.alloc(b, i, op),
            Kind::SetItem => return self.setitem(b, i),
            Kind::Print => {
                let (v, kind) = self.opnd(b, seg, &inst.args[0]);
                let kind = b.ins().iconst(I64, helpers::kind_code(kind));
                let f = helpers::print as *const u8;
                let ctx = self.ctx(b);
                self.call(b, f, &[ctx, v, kind], false);
            }
            Kind::Putchar => return self.putchar(b, i),
            Kind::Getchar => {
                let f = helpers::getchar as *const u8;
                let ctx = self.ctx(b);
                self.vals[seg][i] = self.call(b, f, &[ctx], true);
            }
            Kind::CallPure(_) => {
                // The function may store anything into any array.
                self.ints.clear();
                self.call_pure(b, i);
            }
            Kind::Call(_) => {
                // The function may store anything into any array.
                self.ints.clear();
                self.call_not_inlined(b, i);
            }
            Kind::GuardValue => return self.guard_value(b, i),
            Kind::Op(op) => return self.op(b, i, op, inst.snap.is_some()),
        }
        true
    }

    /// Lowers `input` `i` of variable `slot`: the tree input's value, or the value the guard
    /// it hangs from gives.
    fn input(&mut self, b: &mut FunctionBuilder, i: usize, slot: Slot) {
        let seg = self.seg;
        let v = match &self.an.sources[seg][&slot] {
            Source::Input(k) => {
                if let Some(m) = self.deferred.get_mut(*k).and_then(Option::take) {
                    if self.in_no_snapshot(seg, slot) {
                        self.inputs[*k] = self.borrowed_input(b, m);
                    } else {
                        self.num_moves_coded(b, &[m]);
                    }
                }
                self.inputs[*k]
            }
            Source::Chain(_, Opnd::Ref(r)) if self.built.contains_key(r) => self.built[r],
            Source::Chain(ps, o) => self.opnd(b, *ps, o).0,
        };
        self.vals[seg][i] = Some(v);
    }

    /// Lowers the root's `loop_start` `i`: the entry's checks of what the loop assumes, then a
    /// jump to the loop's header, made here, with the parameters.
    fn loop_start(
        &mut self,
        b: &mut FunctionBuilder,
        i: usize,
        header: &mut Option<Block>,
    ) -> bool {
        let seg = self.seg;
        let trace = self.segments[seg].trace;
        let inst = &trace.insts[i];
        // The loop's proofs may assume a parameter in an interval the
        // preamble's value is not known to lie in (a counter moving towards
        // the bound it is compared with, `bounds::induction`): checked here.
        let entry = self.an.bounds[seg].entry.clone();
        for (k, range) in entry.iter().enumerate() {
            let Some(range) = range else { continue };
            let (v, kind) = self.opnd(b, seg, &inst.args[k]);
            debug_assert_eq!(kind, Repr::Int, "only integers are assumed");
            // A bound at the end of 64 bits needs no check.
            let bounds = [
                (IntCC::SignedLessThan, range.lo, i64::MIN),
                (IntCC::SignedGreaterThan, range.hi, i64::MAX),
            ];
            for (cc, bound, end) in bounds {
                let bound = bound.and_then(|n| i64::try_from(n).ok());
                let Some(bound) = bound.filter(|n| *n != end) else {
                    continue;
                };
                let out = b.ins().icmp_imm_s(cc, v, bound);
                self.exit_if(b, out, i);
            }
        }
        self.check_sums(b, i);
        let h = b.create_block();
        for (k, _) in inst.args.iter().enumerate() {
            // A parameter of kind `Num` lives in its box, which the jumps to
            // the header fill.
            let p = if self.kind(seg, i + 1 + k) == Repr::Num {
                let (v, at) = self.new_box(b, Value::Int(0));
                self.param_boxes.insert(k, at);
                v
            } else {
                b.append_block_param(h, I64)
            };
            self.vals[seg][i + 1 + k] = Some(p);
        }
        self.charge(b, i, trace.iteration_cost());
        let args = self.param_args(b, &inst.args, false);
        b.ins().jump(h, &args);
        b.switch_to_block(h);
        *header = Some(h);
        self.header = Some(h);
        self.known.clear();
        // The back edge and bridges come here too. Bridges that store do not
        // (`header_args`); where the loop itself stores only integers and calls
        // nothing, an array the preamble found holding only integers still
        // does at the header, and is not checked again in each iteration.
        if self.loop_may_mix(i) {
            self.ints.clear();
        }
        true
    }

    /// Lowers the root's `loop` `i`: the back edge to the header.
    fn root_loop(&mut self, b: &mut FunctionBuilder, i: usize, header: &mut Option<Block>) -> bool {
        let seg = self.seg;
        let trace = self.segments[seg].trace;
        let inst = &trace.insts[i];
        let h = header.expect("a peeled trace has a loop_start before its loop");
        self.charge(b, i, trace.iteration_cost());
        let args = self.param_args(b, &inst.args, true);
        b.ins().jump(h, &args);
        // Not sealed yet: a bridge may jump here too. Every block is sealed
        // once all are lowered.
        true
    }

    /// Lowers a bridge's `loop` `i`, its end.
    fn bridge_end(&mut self, b: &mut FunctionBuilder, i: usize) -> bool {
        let seg = self.seg;
        let trace = self.segments[seg].trace;
        let inst = &trace.insts[i];
        // A bridge's end: straight into the loop when it may (`header_args`);
        // else back to `start` with every tree input's value now, if they keep
        // their kinds; otherwise (or at another anchor) an exit.
        if let Some(args) = self.header_args(b, i) {
            self.charge(b, i, path_cost(self.segments, seg, i));
            b.ins()
                .jump(self.header.expect("lowered with the root"), &args);
            return true;
        }
        let mut args = Vec::new();
        let mut same_kinds = self.segments[seg].returns;
        let mut moves = Vec::new();
        let end = trace.snap_of(inst).expect("a loop has a snapshot");
        for (k, (slot, _)) in self.an.layout.inputs.iter().enumerate() {
            let (v, kind) = match end.get(*slot) {
                Some(o) => self.opnd(b, seg, o),
                None => (self.inputs[k], self.an.input_kinds[k]),
            };
            let input = self.an.input_kinds[k];
            if input == Repr::Num && matches!(kind, Repr::Int | Repr::Num) {
                // Into the input's box (`start` takes its address).
                if v != self.inputs[k] {
                    moves.push((self.input_boxes[k], v, kind));
                }
                args.push(BlockArg::Value(self.inputs[k]));
                continue;
            }
            same_kinds &= kind == input;
            args.push(BlockArg::Value(v));
        }
        if same_kinds {
            self.charge(b, i, path_cost(self.segments, seg, i));
            self.num_moves(b, &moves);
            b.ins().jump(self.start, &args);
        } else {
            let exit = self.exit_block(b, i);
            b.ins().jump(exit, &[]);
        }
        true
    }

    /// Lowers `guard_true` or `guard_false` `i`.
    fn guard_bool(
        &mut self,
        b: &mut FunctionBuilder,
        i: usize,
        header: &mut Option<Block>,
    ) -> bool {
        let seg = self.seg;
        let trace = self.segments[seg].trace;
        let inst = &trace.insts[i];
        let (mut c, mut kind) = self.opnd(b, seg, &inst.args[0]);
        let want_true = inst.kind == Kind::GuardTrue;
        if kind == Repr::Num {
            // Whether it is not 0, by the helper.
            let op = b.ins().iconst(I64, helpers::op_code(Op::Ne));
            let num = b.ins().iconst(I64, helpers::kind_code(Repr::Num));
            let int = b.ins().iconst(I64, helpers::kind_code(Repr::Int));
            let zero = b.ins().iconst(I64, 0);
            let f = helpers::num_test as *const u8;
            c = self
                .call(b, f, &[op, c, num, zero, int], true)
                .expect("a result");
            kind = Repr::Int;
        }
        if kind != Repr::Int {
            // An atom or a list is never the integer 0: always true.
            if !want_true {
                let target = self.guard_target(b, i);
                b.ins().jump(target, &[]);
                return false;
            }
            return true;
        }
        // The value the guard branches on, and whether it fails where that
        // is not zero.
        let (fail, holds_on_nonzero) = self.branch_value(b, i, c);
        let on_nonzero = holds_on_nonzero != want_true;
        let target = self.guard_target(b, i);
        let back_edge = *header;
        if let Some(h) = back_edge.filter(|_| self.closes_loop(i)) {
            // The guard just before the root's back edge: the loop goes on
            // where it holds, one conditional branch per iteration to the way
            // out. The values that go round are passed by a jump from a block
            // of their own (`round`, which comes next), not by the branch: a
            // value the exit needs too is then computed again on each way,
            // not held in a register apart from the loop's and moved.
            let round = b.create_block();
            let over = b.create_block();
            Self::guard_branch(b, fail, on_nonzero, over, round);
            b.seal_block(round);
            b.switch_to_block(round);
            let args: Vec<BlockArg> = trace.insts[i + 1]
                .args
                .iter()
                .map(|a| BlockArg::Value(self.opnd(b, seg, a).0))
                .collect();
            b.ins().jump(h, &args);
            b.seal_block(over);
            b.switch_to_block(over);
            b.ins().jump(target, &[]);
            return false;
        }
        let cont = b.create_block();
        Self::guard_branch(b, fail, on_nonzero, target, cont);
        b.seal_block(cont);
        b.switch_to_block(cont);
        true
    }

    /// Lowers `getitem` `i`.
    fn getitem(&mut self, b: &mut FunctionBuilder, i: usize) -> bool {
        let seg = self.seg;
        let trace = self.segments[seg].trace;
        let inst = &trace.insts[i];
        if let Some(v) = self.getitem_int(b, i) {
            self.vals[seg][i] = Some(v);
            return true;
        }
        if self.kind(seg, i) == Repr::Num {
            return self.getitem_num(b, i);
        }
        // Its own exits would see the run of offsets an access that checks its
        // bounds in `getitem_int` stands for.
        debug_assert!(!self.an.checks[self.seg].by_access.contains_key(&i));
        if !self.op(b, i, Op::Readlist, inst.snap.is_some()) {
            return false;
        }
        let kind = self.kind(seg, i);
        if matches!(kind, Repr::List | Repr::Array) {
            let v = self.vals[seg][i].expect("lowered");
            let code = b.ins().iconst(I64, helpers::kind_code(kind));
            let ctx = self.ctx(b);
            self.call(b, helpers::keep as *const u8, &[ctx, v, code], false);
        }
        true
    }

    /// Lowers `getitem` or `readlist` `i` of an integer the code holds at any size
    /// (`Segment::wide`):
    /// the helper copies the element into the read's own box, or the code exits before the
    /// read; false when it always exits (not a list or an array, or an index past 64 bits).
    fn getitem_num(&mut self, b: &mut FunctionBuilder, i: usize) -> bool {
        let seg = self.seg;
        let inst = &self.segments[seg].trace.insts[i];
        let (list, kl) = self.opnd(b, seg, &inst.args[0]);
        let (index, ki) = self.opnd(b, seg, &inst.args[1]);
        if !matches!(kl, Repr::List | Repr::Array) || ki != Repr::Int {
            let exit = self.exit_block(b, i);
            b.ins().jump(exit, &[]);
            return false;
        }
        let (own, at) = self.new_box(b, Value::Int(0));
        self.own_boxes.insert(TreeInst::new(seg, i), at);
        let kind = b.ins().iconst(I64, helpers::kind_code(kl));
        let f = helpers::num_item as *const u8;
        let read = self
            .call(b, f, &[own, list, kind, index], true)
            .expect("a result");
        let failed = b.ins().icmp_imm_s(IntCC::Equal, read, 0);
        self.exit_if(b, failed, i);
        self.vals[seg][i] = Some(own);
        true
    }

    /// Lowers `putchar` `i`: a byte, or an exit before it.
    fn putchar(&mut self, b: &mut FunctionBuilder, i: usize) -> bool {
        let seg = self.seg;
        let trace = self.segments[seg].trace;
        let inst = &trace.insts[i];
        let (v, kind) = self.opnd(b, seg, &inst.args[0]);
        if kind != Repr::Int {
            let exit = self.exit_block(b, i);
            b.ins().jump(exit, &[]);
            return false;
        }
        // Not a byte (a negative one is a huge unsigned number): exit before.
        let wide = b.ins().icmp_imm_u(IntCC::UnsignedGreaterThan, v, 255);
        self.exit_if(b, wide, i);
        let ctx = self.ctx(b);
        self.call(b, helpers::putchar as *const u8, &[ctx, v], false);
        true
    }

    /// Lowers `guard_value` `i`: a comparison with the constant, or a dispatch on the value
    /// to the bridges specialized on it.
    fn guard_value(&mut self, b: &mut FunctionBuilder, i: usize) -> bool {
        let seg = self.seg;
        let trace = self.segments[seg].trace;
        let inst = &trace.insts[i];
        let (v, kv) = self.opnd(b, seg, &inst.args[0]);
        let (k, kk) = self.opnd(b, seg, &inst.args[1]);
        if kv != kk {
            // Never the constant: always the other way.
            let other = self.guard_target(b, i);
            b.ins().jump(other, &[]);
            return false;
        }
        let specialized: Vec<(usize, &Value)> = self
            .bridges
            .get(&TreeInst::new(seg, i))
            .map(|bs| {
                bs.iter()
                    .filter_map(|(s, val)| val.map(|val| (*s, val)))
                    .collect()
            })
            .unwrap_or_default();
        // A value without a bridge of its own goes to the unspecialized bridge,
        // if the guard has one, or exits.
        let other = self.guard_target(b, i);
        if specialized.is_empty() || kv == Repr::List {
            // For lists this compares addresses: a list equal to the constant
            // but stored elsewhere takes the other way, which is always allowed.
            let fail = b.ins().icmp(IntCC::NotEqual, v, k);
            self.branch_if(b, fail, other);
            return true;
        }
        // A dispatch on the value: the trace's own value goes on, each value a
        // bridge is specialized on goes to that bridge, any other exits.
        let key = |val: &Value| abi::unbox(val, kv).map(|bits| bits as u64 as u128);
        let mut switch = Switch::new();
        let cont = b.create_block();
        let own = inst.args[1]
            .as_const()
            .and_then(key)
            .expect("a constant of the guard's kind");
        switch.set_entry(own, cont);
        for (bseg, val) in specialized {
            if let Some(bits) = key(val).filter(|bits| *bits != own) {
                let block = self.bridge_block(b, bseg);
                switch.set_entry(bits, block);
            }
        }
        switch.emit(b, v, other);
        b.seal_block(cont);
        b.switch_to_block(cont);
        true
    }

    /// Calls the helper at `f` on `args`; its result, if it has one.
    fn call(
        &self,
        b: &mut FunctionBuilder,
        f: *const u8,
        args: &[ClifValue],
        ret: bool,
    ) -> Option<ClifValue> {
        ops::call_helper(b, self.isa, f, args, ret)
    }

    /// The address to leave in the mirror for variable `slot`, of kind `Num`, which the box
    /// at `v` holds, in an exit that goes on in other code: not a box of this code, which
    /// its next operations may write while the mirror still points there, but the
    /// context's box for that variable ([`helpers::Ctx::nums`]), which only exits write.
    /// With `take`, the value is moved there (the code writes its box again before reading
    /// it: [`Lower::rewritten_box`]), and `moved` remembers where, so that another variable
    /// the exit gives the same value copies it from there; otherwise it is copied.
    fn mirror_num(
        &self,
        b: &mut FunctionBuilder,
        slot: Slot,
        v: ClifValue,
        take: bool,
        moved: &mut Vec<(ClifValue, ClifValue)>,
    ) -> ClifValue {
        let (from, take) = match moved.iter().find(|(x, _)| *x == v) {
            Some(&(_, there)) => (there, false),
            None => (v, take),
        };
        let slot = b.ins().iconst(I64, slot.index() as i64);
        let mode = b.ins().iconst(I64, take as i64);
        let f = helpers::mirror_num as *const u8;
        let ctx = self.ctx(b);
        let at = self
            .call(b, f, &[ctx, slot, from, mode], true)
            .expect("the helper returns the address");
        if take {
            moved.push((v, at));
        }
        at
    }

    /// Whether the box that holds the value of `r` (of kind `Num`) in segment `seg` is
    /// written again before it is read in any later run of this code, so that an exit may
    /// move its value out: an instruction's own box, a root loop parameter's, a tree
    /// input's (filled on entry, where the first segment reads it, or by the jumps to
    /// `start`; an input read where the mirror has it, [`Lower::borrowed_input`], is in no
    /// snapshot, so never asked about); not a constant's, which a bridge's `input` may read
    /// from its guard's snapshot.
    fn rewritten_box(&self, seg: usize, r: Ref) -> bool {
        let trace = self.segments[seg].trace;
        match trace.insts[r.index()].kind {
            Kind::Input(slot) => match self.an.sources[seg].get(&slot) {
                Some(Source::Input(_)) => true,
                Some(Source::Chain(ps, Opnd::Ref(pr))) => self.rewritten_box(*ps, *pr),
                _ => false,
            },
            Kind::Param(_) if seg == 0 => {
                let start = trace.loop_start().expect("params follow loop_start");
                self.param_boxes.contains_key(&(r.index() - start - 1))
            }
            _ => self.own_boxes.contains_key(&TreeInst::new(seg, r.index())),
        }
    }

    /// Lowers `setitem` `i`; false when it always exits. The element's words are written
    /// in place when neither the element replaced nor the value stored owns a reference;
    /// otherwise the runtime stores it ([`helpers::setitem`]).
    fn setitem(&mut self, b: &mut FunctionBuilder, i: usize) -> bool {
        let (seg, segments) = (self.seg, self.segments);
        let inst = &segments[seg].trace.insts[i];
        let (a, ka) = self.opnd(b, seg, &inst.args[0]);
        let (index, ki) = self.opnd(b, seg, &inst.args[1]);
        let (v, kv) = self.opnd(b, seg, &inst.args[2]);
        if ka != Repr::Array || ki != Repr::Int {
            // Fails every time (a type error): exit before it.
            let exit = self.exit_block(b, i);
            b.ins().jump(exit, &[]);
            return false;
        }
        // Without a snapshot it cannot fail: the index was checked before (`opt::heap`).
        if inst.snap.is_some() {
            self.check_index(b, i, a, index);
        }
        let ints = self.ints.contains(&a);
        self.store(b, seg, a, (index, &inst.args[1]), v, kv, ints);
        if kv != Repr::Int {
            self.ints.clear();
        }
        true
    }

    /// Lowers `getitem` `i` of an integer from an array that holds only integers (checked
    /// here once per array and block, see `ints`): its bounds are checked (when it has a
    /// snapshot) and its element's tag is not. `None` (nothing emitted) when the general
    /// path must lower it.
    fn getitem_int(&mut self, b: &mut FunctionBuilder, i: usize) -> Option<ClifValue> {
        let seg = self.seg;
        let inst = &self.segments[seg].trace.insts[i];
        inst.snap?;
        if !self.an.ints || self.kind(seg, i) != Repr::Int {
            return None;
        }
        let (a, ka) = self.opnd(b, seg, &inst.args[0]);
        let (index, ki) = self.opnd(b, seg, &inst.args[1]);
        if ka != Repr::Array || ki != Repr::Int {
            return None;
        }
        let mf = MemFlagsData::trusted();
        // The bounds first: where it stands for an overflow check, no exit may see an
        // index before it (`opt::checks`).
        self.check_index(b, i, a, index);
        if !self.ints.contains(&a) {
            let flag = b.ins().load(I64, mf, a, abi::ARRAY_INTS_OFFSET as i32);
            let mixed = b.ins().icmp_imm_s(IntCC::Equal, flag, 0);
            self.exit_if(b, mixed, i);
            self.ints.push(a);
        }
        let items = self.field(b, Derived::Items, a);
        let (addr, at) = self.element(b, seg, items, index, &inst.args[1]);
        Some(b.ins().load(I64, mf, addr, at))
    }

    /// An index of segment `seg` as `base + c` (`opt::checks::index_parts`).
    fn index_parts(&self, seg: usize, r: Ref) -> (Ref, i64) {
        checks::index_parts(self.segments[seg].trace, &self.an.kinds[seg], r)
    }

    /// Exits at access `i` (of the current segment) unless `index` is within the array
    /// `a`, making the bounds check the plan says (`opt::checks`). The first access of a
    /// segment to an array around a base checks every offset the segment's accesses use
    /// around it, as LuaJIT widens an array bounds check to the greatest constant offset
    /// (`lj_opt_fold.c`, `fold_abc_k`), and the later accesses check nothing: the cells a
    /// Brainfuck loop `[->>>>+<<<<]` reads and writes around its pointer cost one check of
    /// each end.
    fn check_index(&mut self, b: &mut FunctionBuilder, i: usize, a: ClifValue, index: ClifValue) {
        let seg = self.seg;
        let plan = &self.an.checks[seg];
        let exit_at = plan.exit_at(i);
        let (base, lo, hi, at, floor) = match plan.bounds(i) {
            Bounds::Covered => return,
            Bounds::Index => {
                let len = self.field(b, Derived::Len, a);
                let fail = b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, index, len);
                self.exit_if(b, fail, exit_at);
                return;
            }
            Bounds::Span {
                base,
                lo,
                hi,
                at,
                floor,
            } => (base, lo, hi, at, floor),
        };
        let len = self.field(b, Derived::Len, a);
        // The base, or the index less its offset.
        let x = match self.vals[seg][base.index()] {
            Some(x) => x,
            None => b.ins().iadd_imm_s(index, at.wrapping_neg()),
        };
        // One unsigned comparison with a limit that depends on the array only, and is
        // hoisted out of a loop with its length. With a floor, `x` itself below `len -
        // hi` (or 0): the index `x + at` is then not needed before the element's address,
        // which is `x`'s anyway (`Lower::element`), and a loop that moves its pointer,
        // `[>>>>>>>>>]`, computes its new pointer where the iteration ends, in the old
        // one's register, with no move at the back edge. Otherwise `x + lo` below `len -
        // (hi - lo)` (or 0, for an array shorter than the span), exactly when `x + lo` and
        // `x + hi` are both within the array: a sum that wraps lands at 2^63 or past, as an
        // unsigned number, beyond any limit.
        let room = b.ins().iadd_imm_s(len, if floor { -hi } else { lo - hi });
        let zero = b.ins().iconst(I64, 0);
        let limit = b.ins().smax(room, zero);
        let at = if floor { x } else { b.ins().iadd_imm_s(x, lo) };
        let fail = b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, at, limit);
        self.exit_if(b, fail, exit_at);
    }

    /// A guard's branch on `fail`: to `out` where it fails (on a non-zero `fail` when
    /// `on_nonzero`, on zero otherwise), to `holds` where it holds.
    ///
    /// `holds` is always the branch's second target, the one Cranelift places right after
    /// the branch (its block order is the reverse postorder of a walk that takes a
    /// branch's first target first): the way the guard holds falls through, and only a
    /// failing guard jumps. With the targets the other way round, a guard before a loop's
    /// back edge whose bridge is in the function jumped on every iteration to a block
    /// that jumped again, to the loop's header.
    fn guard_branch(
        b: &mut FunctionBuilder,
        fail: ClifValue,
        on_nonzero: bool,
        out: Block,
        holds: Block,
    ) {
        let fail = if on_nonzero {
            fail
        } else {
            // Folded into the comparison that makes `fail`, or a test of `fail` itself.
            b.ins().icmp_imm_s(IntCC::Equal, fail, 0)
        };
        b.ins().brif(fail, out, &[], holds, &[]);
    }

    /// The address of the payload of the element at `index` (the value of operand `o` of
    /// segment `seg`) among `items`, as a base and a displacement. An index `x + c` (or
    /// `x - c`) computed in the segment addresses from `items + 16 * x`, which every offset
    /// of `x` shares, with `c`'s part in the displacement: the cells a Brainfuck run
    /// `>>+<<-` reads and writes around its pointer cost a load or a store each.
    fn element(
        &mut self,
        b: &mut FunctionBuilder,
        seg: usize,
        items: ClifValue,
        index: ClifValue,
        o: &Opnd,
    ) -> (ClifValue, i32) {
        let size = abi::VALUE_SIZE as i64;
        let payload = abi::VALUE_PAYLOAD_OFFSET as i64;
        let (x, at) = match o {
            Opnd::Ref(r) if self.goes_round(seg, *r) => (None, None),
            Opnd::Ref(r) => {
                let (x, c) = self.index_parts(seg, *r);
                let at = c
                    .checked_mul(size)
                    .and_then(|d| i32::try_from(d + payload).ok());
                (self.vals[seg][x.index()], at)
            }
            Opnd::Const(_) => (None, None),
        };
        let (x, at) = match (x, at) {
            (Some(x), Some(at)) => (x, at),
            _ => (index, payload as i32),
        };
        let address = self.remembered(b, Derived::Element(items), x, |b| {
            let scaled = ops::element_offset(b, x);
            b.ins().iadd(items, scaled)
        });
        (address, at)
    }

    /// Whether `r`, of segment `seg`, is a value the root's loop passes round (a pointer
    /// that the iteration moves, `ptr - 9` of `[<<<<<<<<<]`), and the only index of its base
    /// on its array: its element is addressed from `r` itself, not from the base with a
    /// displacement, so that the base dies where `r` is computed and `r` takes its register
    /// for the next iteration, with no move at the back edge.
    fn goes_round(&self, seg: usize, r: Ref) -> bool {
        if seg != 0 {
            return false;
        }
        let trace = self.segments[0].trace;
        let Some(last) = trace.insts.last().filter(|i| i.kind == Kind::Loop) else {
            return false;
        };
        let (x, _) = self.index_parts(seg, r);
        x != r
            && last.args.contains(&Opnd::Ref(r))
            && self.an.checks[seg]
                .spans
                .iter()
                .filter(|((_, base), _)| *base == x)
                .all(|(_, (lo, hi))| lo == hi)
    }

    /// Field `what` (`Derived::Len` or `Derived::Items`) of the array `a`, loaded once on the
    /// segment's way ([`Lower::known`]).
    fn field(&mut self, b: &mut FunctionBuilder, what: Derived, a: ClifValue) -> ClifValue {
        let offset = match what {
            Derived::Len => abi::LIST_LEN_OFFSET,
            _ => abi::LIST_ITEMS_OFFSET,
        };
        self.remembered(b, what, a, |b| {
            b.ins().load(I64, ops::HEADER, a, offset as i32)
        })
    }

    /// `what` of `of`, emitted by `make` the first time on the segment's way and the
    /// same value after ([`Lower::known`]).
    fn remembered(
        &mut self,
        b: &mut FunctionBuilder,
        what: Derived,
        of: ClifValue,
        make: impl FnOnce(&mut FunctionBuilder) -> ClifValue,
    ) -> ClifValue {
        if let Some(&(_, _, v)) = self.known.iter().find(|k| (k.0, k.1) == (what, of)) {
            return v;
        }
        let v = make(b);
        self.known.push((what, of, v));
        v
    }

    /// Stores `v` (of kind `kv`) at `index` (operand `o` of the current segment) of the
    /// array `a` ([`ops::store_item`]).
    #[allow(clippy::too_many_arguments)]
    fn store(
        &mut self,
        b: &mut FunctionBuilder,
        seg: usize,
        a: ClifValue,
        (index, o): (ClifValue, &Opnd),
        v: ClifValue,
        kv: Repr,
        ints: bool,
    ) {
        if ints && kv == Repr::Int {
            let items = self.field(b, Derived::Items, a);
            let (addr, at) = self.element(b, seg, items, index, o);
            b.ins().store(MemFlagsData::trusted(), v, addr, at);
            return;
        }
        ops::store_item(b, self.isa, (a, index, v, kv), ints);
    }

    /// Lowers `call_pure` `i`: the arguments go to a stack slot, the helper makes the call
    /// within what the budget can spare beyond the costliest iteration, and the code exits
    /// before the call when it could not.
    fn call_pure(&mut self, b: &mut FunctionBuilder, i: usize) {
        let (slot, n, site, args) = self.call_site_args(b, i, true);
        let inst = &self.segments[self.seg].trace.insts[i];
        // The budget: what the counter holds beyond the costliest iteration, which counts
        // the operations the call took when recorded.
        let (_, _, recorded) = call_pure_parts(&inst.args);
        let budget = match self.counter {
            Some(counter) => {
                let count = b.use_var(counter);
                b.ins()
                    .iadd_imm_s(count, recorded as i64 - self.max_cost as i64)
            }
            None => b.ins().iconst(I64, i64::MAX),
        };
        let f = helpers::call_pure as *const u8;
        let ctx = self.ctx(b);
        let used = self
            .call(b, f, &[ctx, site, args, budget], true)
            .expect("a helper with a result");
        let failed = b.ins().icmp_imm_s(IntCC::SignedLessThan, used, 0);
        self.exit_if(b, failed, i);
        if let Some(counter) = self.counter {
            let count = b.use_var(counter);
            let left = b.ins().isub(count, used);
            let left = b.ins().iadd_imm_s(left, recorded as i64);
            b.def_var(counter, left);
        }
        self.vals[self.seg][i] = Some(b.ins().stack_load(I64, I64, slot, (8 * n) as i32));
    }

    /// For call `i` (`call_pure` or `call`): a stack slot holding its arguments (with
    /// `store`; otherwise [`Lower::store_args`] stores them), with a word more for the
    /// result the helper writes; their number, and the site's and the arguments'
    /// addresses, the helper's operands.
    fn call_site_args(
        &mut self,
        b: &mut FunctionBuilder,
        i: usize,
        store: bool,
    ) -> (StackSlot, usize, ClifValue, ClifValue) {
        let (seg, an) = (self.seg, self.an);
        let site: &CallSite = &an.sites[&TreeInst::new(seg, i)];
        let n = site.args.len();
        let slot = b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            (8 * (n + 1)) as u32,
            3,
        ));
        if store {
            self.store_args(b, i, slot);
        }
        // A result held at any size goes into the call's own box (`helpers::Ctx::give`).
        if site.result == Repr::Num {
            let (own, at) = self.new_box(b, Value::Int(0));
            self.own_boxes.insert(TreeInst::new(seg, i), at);
            b.ins().stack_store(I64, own, slot, (8 * n) as i32);
        }
        let args = b.ins().stack_addr(I64, slot, 0);
        let site = b.ins().iconst(I64, site as *const CallSite as i64);
        (slot, n, site, args)
    }

    /// Stores call `i`'s arguments into its stack slot `slot`.
    fn store_args(&mut self, b: &mut FunctionBuilder, i: usize, slot: StackSlot) {
        let seg = self.seg;
        let inst = &self.segments[seg].trace.insts[i];
        let n = self.an.sites[&TreeInst::new(seg, i)].args.len();
        for (k, a) in inst.args[..n].iter().enumerate() {
            let (v, _) = self.opnd(b, seg, a);
            b.ins().stack_store(I64, v, slot, (8 * k) as i32);
        }
    }

    /// Lowers `call` `i`: the arguments go to a stack slot, and the code calls its
    /// function's trace directly when it may ([`Lower::direct_call`]), else the helper
    /// makes the call ([`helpers::call`]); the code exits after it when it cannot go on
    /// with its result.
    fn call_not_inlined(&mut self, b: &mut FunctionBuilder, i: usize) {
        let (slot, n, site, args) = self.call_site_args(b, i, false);
        let ctx = self.ctx(b);
        // Only the helper reads the arguments there.
        let done = self.direct_call(b, i, ctx, [site, args]);
        self.store_args(b, i, slot);
        let f = helpers::call as *const u8;
        let failed = self
            .call(b, f, &[ctx, site, args], true)
            .expect("a helper with a result");
        self.exit_if(b, failed, i);
        let result = b.ins().stack_load(I64, I64, slot, (8 * n) as i32);
        self.vals[self.seg][i] = Some(result);
        if let Some(done) = done {
            b.ins().jump(done, &[BlockArg::Value(result)]);
            b.seal_block(done);
            b.switch_to_block(done);
            self.vals[self.seg][i] = Some(b.block_params(done)[0]);
        }
    }

    /// The direct call of `call` `i`'s function trace (PyPy's `call_assembler`), if the
    /// code may make one: its arguments and result of kinds held in registers, the
    /// program known. Lowers the checks of the function's cell ([`FnCell`]), the call on a
    /// register buffer in this code's frame, and the value its code returns, or the end
    /// of the call by the interpreter from its exit ([`helpers::call_finish`]). Returns
    /// the block the call's result goes to (its one parameter), having switched to a cold
    /// block where the checks failed: the caller lowers the call through the helper there.
    ///
    /// [`FnCell`]: super::nested::FnCell
    fn direct_call(
        &mut self,
        b: &mut FunctionBuilder,
        i: usize,
        ctx: ClifValue,
        [site_at, args]: [ClifValue; 2],
    ) -> Option<Block> {
        use super::nested::FnCell;
        let (direct, an) = (self.direct?, self.an);
        let seg = self.seg;
        let site: &CallSite = &an.sites[&TreeInst::new(seg, i)];
        let (_, inlined) = site.call?;
        let func = direct.program.func(site.func);
        let tags = FnCell::tags(&site.args)?;
        if site.args.contains(&Repr::Num) || site.result == Repr::Num {
            return None;
        }
        let layout = &an.layout;
        let own = self.segments[0]
            .trace
            .function
            .filter(|_| self.an.unit == 0);
        let (reserve, size) = *self.reserve.get_or_insert_with(|| {
            // Room for the code's own buffer (a function trace calls itself), or for a
            // trace of some instructions (a function's, or a loop's it goes on in), and
            // for some more: a function trace compiled again with a bridge has more. The
            // code another function's cell holds now may grow as much again.
            let least = match own {
                Some(_) => 0,
                None => (2 * layout.mirror + 4 + 64).max(MIN_RESERVE),
            };
            let others = (an.sites.values())
                .filter(|s| Some(s.func) != own && direct.program.portal(s.func).is_none())
                .map(|s| {
                    // SAFETY: the cells live as long as the driver, on whose thread code
                    // is lowered.
                    2 * unsafe { (*(direct.cell(s.func) as *const FnCell)).size.get() } as usize
                })
                .max()
                .unwrap_or(0);
            let size = layout.size.max(least).max(others) + 16;
            let data = StackSlotData::new(StackSlotKind::ExplicitSlot, (8 * size) as u32, 3);
            (b.create_sized_stack_slot(data), size)
        });
        let mf = MemFlagsData::trusted();
        let slow = b.create_block();
        b.set_cold_block(slow);
        let done = b.create_block();
        b.append_block_param(done, I64);
        // The cell: code, of the arguments' kinds, whose buffer fits.
        // The code to call, and how deep the calls it inlined nest (plus one): this code
        // itself, or the cell's, of the arguments' kinds, whose buffer fits.
        let itself = self.calls_itself(site);
        let (code, calls) = if let Some(calls) = itself {
            (None, b.ins().iconst(I64, calls as i64))
        } else {
            let cell = match direct.program.portal(site.func) {
                Some(_) => {
                    (direct
                        .keyed
                        .iter()
                        .find(|(at, _)| *at == TreeInst::new(seg, i)))?
                    .1
                }
                None => direct.cell(site.func),
            } as i64;
            let cell = b.ins().iconst(I64, cell);
            let code = b.ins().load(I64, mf, cell, FnCell::CODE);
            let none = b.ins().icmp_imm_s(IntCC::Equal, code, 0);
            self.branch_if(b, none, slow);
            let mask = b.ins().load(I64, mf, cell, FnCell::MASK);
            let kinds = b.ins().load(I64, mf, cell, FnCell::KINDS);
            let taken = b.ins().band_imm_u(mask, tags as i64);
            let other = b.ins().icmp(IntCC::NotEqual, taken, kinds);
            self.branch_if(b, other, slow);
            let needs = b.ins().load(I64, mf, cell, FnCell::SIZE);
            let large = b
                .ins()
                .icmp_imm_u(IntCC::UnsignedGreaterThan, needs, size as i64);
            self.branch_if(b, large, slow);
            (Some(code), b.ins().load(I64, mf, cell, FnCell::CALLS))
        };
        // The depth the call reaches, and the native stack it needs.
        let state = b.ins().load(I64, mf, ctx, helpers::Ctx::STATE);
        let depth = b.ins().load(I64, mf, state, helpers::Ctx::DEPTH);
        let reached = b.ins().iadd(depth, calls);
        let reached = b.ins().iadd_imm_s(reached, inlined as i64);
        let max = b.ins().load(I64, mf, ctx, helpers::Ctx::MAX_DEPTH);
        let deep = b.ins().icmp(IntCC::SignedGreaterThanOrEqual, reached, max);
        self.branch_if(b, deep, slow);
        let regs = b.ins().stack_addr(I64, reserve, 0);
        let floor = b.ins().load(I64, mf, ctx, helpers::Ctx::STACK_FLOOR);
        let low = b.ins().icmp(IntCC::UnsignedLessThan, regs, floor);
        self.branch_if(b, low, slow);
        // The callee's frame in its mirror: the parameters, with their kinds' tags.
        let inner = b.ins().iadd_imm_s(depth, inlined as i64 + 1);
        b.ins().store(mf, inner, state, helpers::Ctx::DEPTH);
        let inst = &self.segments[seg].trace.insts[i];
        for ((p, a), kind) in func.params.iter().zip(&inst.args).zip(&site.args) {
            let (v, _) = self.opnd(b, seg, a);
            b.ins().store(mf, v, regs, (16 * p.index()) as i32);
            let tag = b.ins().iconst(I64, mirror_tag(*kind));
            b.ins().store(mf, tag, regs, (16 * p.index() + 8) as i32);
        }
        b.ins().store(mf, ctx, regs, (8 * layout.context) as i32);
        let zero = b.ins().iconst(I64, 0);
        if super::nested::goes_on_in_loops(direct.program, site.func) {
            // Its code may go on in a loop's tree (`nested::Linked`): what no exit wrote
            // is untagged, and the buffer's size is in the counter's slot for that code to
            // check (`refuse_entries`).
            let room = b.ins().iconst(I64, size as i64);
            b.ins().store(mf, room, regs, (8 * layout.counter) as i32);
            let locals = direct.program.locals(site.func).iter();
            for v in locals.filter(|v| !func.params.contains(v)) {
                b.ins().store(mf, zero, regs, (16 * v.index() + 8) as i32);
            }
        }
        b.ins()
            .store(mf, zero, regs, (8 * (layout.result + 1)) as i32);
        let n = b.ins().load(I64, mf, ctx, helpers::Ctx::ENTERED);
        let n = b.ins().iadd_imm_s(n, 1);
        b.ins().store(mf, n, ctx, helpers::Ctx::ENTERED);
        // What the code keeps alive from here on: only the call's result may borrow from
        // it once the call has returned, if it is a list or an array.
        let borrows = matches!(site.result, Repr::List | Repr::Array);
        // This code calling itself keeps nothing in the context when it makes no list or
        // array and no call of it gives one: nothing to let go after the call.
        let keeps = itself.is_none()
            || self.an.owns
            || (self.an.sites.values()).any(|s| matches!(s.result, Repr::List | Repr::Array));
        let mark = keeps.then(|| b.ins().load(I64, mf, ctx, helpers::Ctx::KEPT));
        let call = match code {
            Some(code) => {
                let sig = b.import_signature(tree_signature(self.isa));
                b.ins().call_indirect(sig, code, &[regs, ctx, zero])
            }
            None => {
                let itself = self.itself(b);
                b.ins().call(itself, &[regs, ctx, zero])
            }
        };
        let returned = b.inst_results(call)[0];
        b.ins().store(mf, depth, state, helpers::Ctx::DEPTH);
        // A value of the kind the code holds: the call's result.
        let tag = b
            .ins()
            .load(I64, mf, regs, (8 * (layout.result + 1)) as i32);
        let other = b
            .ins()
            .icmp_imm_s(IntCC::NotEqual, tag, mirror_tag(site.result));
        let (calm, got, exited) = (b.create_block(), b.create_block(), b.create_block());
        b.set_cold_block(exited);
        b.ins().brif(other, exited, &[], calm, &[]);
        b.seal_block(calm);
        b.switch_to_block(calm);
        // Unless the driver has something to do (`Ctx::attend`). (Two branches: one on
        // both conditions made each a flag first.)
        let attend = b.ins().load(I64, mf, ctx, helpers::Ctx::ATTEND);
        b.ins().brif(attend, exited, &[], got, &[]);
        b.seal_block(got);
        b.switch_to_block(got);
        let v = b.ins().load(I64, mf, regs, (8 * layout.result) as i32);
        if let Some(mark) = mark {
            // What the callee kept is not needed any more, but for the result.
            let kept = b.ins().load(I64, mf, ctx, helpers::Ctx::KEPT);
            let more = b.ins().icmp(IntCC::NotEqual, kept, mark);
            let (release, on) = (b.create_block(), b.create_block());
            b.set_cold_block(release);
            b.ins().brif(more, release, &[], on, &[]);
            b.seal_block(release);
            b.switch_to_block(release);
            if borrows {
                let code = b.ins().iconst(I64, helpers::kind_code(site.result));
                let f = helpers::release_keeping as *const u8;
                self.call(b, f, &[ctx, mark, v, code], false);
            } else {
                self.call(b, helpers::release as *const u8, &[ctx, mark], false);
            }
            b.ins().jump(on, &[]);
            b.seal_block(on);
            b.switch_to_block(on);
        }
        b.ins().jump(done, &[BlockArg::Value(v)]);
        // Otherwise the interpreter finishes the call from the callee's exit, or the
        // value returned is given as the helper gives it.
        b.seal_block(exited);
        b.switch_to_block(exited);
        let f = helpers::call_finish as *const u8;
        let failed = self
            .call(b, f, &[ctx, site_at, args, regs, returned], true)
            .expect("a helper with a result");
        self.exit_if(b, failed, i);
        let n = site.args.len();
        let reserve_args = b.ins().load(I64, mf, args, (8 * n) as i32);
        b.ins().jump(done, &[BlockArg::Value(reserve_args)]);
        b.seal_block(slow);
        b.switch_to_block(slow);
        Some(done)
    }

    /// For a call of the function whose trace this code is (its tree's function), of
    /// arguments of the kinds the code takes, by code that may be entered again: how deep
    /// the calls the code inlined nest, plus one, as its cell would say. The call then calls
    /// this code itself, whichever code the cell holds, without the cell's checks: its
    /// buffer is the reserve, of this code's size. Not for a function whose code may go on
    /// in a loop's tree, whose cell checks what that code counts on
    /// (`Compiled::assume`), nor for a dispatch function's, keyed by greens.
    fn calls_itself(&self, site: &CallSite) -> Option<usize> {
        let direct = self.direct?;
        let root = self.segments[0].trace;
        let func = direct.program.func(site.func);
        let same = self.an.unit == 0
            && root.function == Some(site.func)
            && direct.program.portal(site.func).is_none()
            && !super::nested::goes_on_in_loops(direct.program, site.func)
            && super::reentrant(self.an);
        let mut inputs = (self.an.layout.inputs.iter()).zip(&self.an.input_kinds);
        let takes = inputs.all(|((slot, _), kind)| {
            (func.params.iter().position(|p| p == slot)).is_some_and(|k| site.args[k] == *kind)
        });
        let calls = self.segments.iter().map(|s| s.trace.calls).max()?;
        (same && takes).then_some(calls + 1)
    }

    /// The code's own function, as a call of it (`calls_itself`): a relocation to the
    /// function's start, which `background::emit` resolves (the call is relative to it).
    fn itself(&mut self, b: &mut FunctionBuilder) -> cranelift_codegen::ir::FuncRef {
        if let Some(f) = self.itself {
            return f;
        }
        use cranelift_codegen::ir::{ExtFuncData, ExternalName, UserExternalName};
        let name = (b.func).declare_imported_user_function(UserExternalName::new(ITSELF, 0));
        let signature = b.import_signature(tree_signature(self.isa));
        let f = b.import_function(ExtFuncData {
            name: ExternalName::User(name),
            signature,
            colocated: true,
            patchable: false,
        });
        self.itself = Some(f);
        f
    }

    /// Lowers a function trace's end `i`, its `loop` at a `return`: with the program
    /// known and no budget to keep, the value returned goes to the result slots
    /// (`Layout::result`) and the code returns [`RETURNED`]; otherwise, or where the value
    /// is not one the code holds in a register, or the snapshot has more to do than leave
    /// the frame (an inlined call's frame, a store, an array to build), an exit, and the
    /// interpreter makes the `return`.
    fn function_end(&mut self, b: &mut FunctionBuilder, i: usize) -> bool {
        let Some((v, kind)) = self.returned(b, i) else {
            let exit = self.exit_block(b, i);
            b.ins().jump(exit, &[]);
            return true;
        };
        let mf = MemFlagsData::trusted();
        let at = self.an.layout.result;
        b.ins().store(mf, v, self.regs, (8 * at) as i32);
        let tag = b.ins().iconst(I64, mirror_tag(kind));
        b.ins().store(mf, tag, self.regs, (8 * (at + 1)) as i32);
        let g = (self.an.layout.offsets[self.seg] + i) as u32;
        let code = exit_code(self.tree, self.an.unit, g | RETURNED);
        let code = b.ins().iconst(I64, code);
        b.ins().return_(&[code]);
        true
    }

    /// The value the `return` at function trace end `i` gives, and its kind, when
    /// [`Lower::function_end`] can return it.
    fn returned(&mut self, b: &mut FunctionBuilder, i: usize) -> Option<(ClifValue, Repr)> {
        use crate::lang::{Operand, Terminator};
        let direct = self.direct?;
        let seg = self.seg;
        let trace = self.segments[seg].trace;
        let own = trace.snap_of(&trace.insts[i])?;
        let block = direct.program.block(own.pos.block);
        let plain = own.frames.is_empty() && own.stores.is_empty() && own.virtuals.is_empty();
        let Terminator::Return(operand) = &block.term else {
            return None;
        };
        if self.counter.is_some() || !plain || own.pos.inst != block.insts.len() {
            return None;
        }
        let (v, kind) = match operand {
            Operand::Const(v) => match Repr::of(v) {
                Some(Repr::Num) | None => return None,
                Some(_) => self.opnd(b, seg, &Opnd::Const(v.clone())),
            },
            Operand::Var(slot) => match own.get(*slot) {
                Some(Opnd::Ref(r)) => {
                    let v = self.vals[seg][r.index()]?;
                    (v, self.kind(seg, r.index()))
                }
                Some(o @ Opnd::Const(_)) => match o.as_const().and_then(Repr::of) {
                    Some(Repr::Num) | None => return None,
                    Some(_) => self.opnd(b, seg, o),
                },
                // As the function was entered: a tree input.
                None => {
                    let k = (self.an.layout.inputs.iter()).position(|(s, _)| s == slot)?;
                    (self.inputs[k], self.an.input_kinds[k])
                }
            },
        };
        (kind != Repr::Num).then_some((v, kind))
    }

    /// Lowers operation `i`; false when it always exits (the rest of the segment is dead).
    fn op(&mut self, b: &mut FunctionBuilder, i: usize, op: Op, snap: bool) -> bool {
        let seg = self.seg;
        let inst = &self.segments[seg].trace.insts[i];
        let num = |o: &Opnd| match o {
            Opnd::Ref(r) => self.kind(seg, r.index()) == Repr::Num,
            Opnd::Const(v) => matches!(v, Value::Big(_)),
        };
        if op == Op::Readlist && self.kind(seg, i) == Repr::Num {
            return self.getitem_num(b, i);
        }
        // Arithmetic on integers of any size, or whose result the code holds so.
        if op != Op::Same && (inst.args.iter().any(num) || self.kind(seg, i) == Repr::Num) {
            self.num_op(b, i, op);
            return true;
        }
        let args: Vec<(ClifValue, Repr)> = inst.args.iter().map(|a| self.opnd(b, seg, a)).collect();
        // A widened run's one overflow check, unless an access's bounds check stands for it.
        let widen = self.an.bounds[seg].widen[i];
        let plan = &self.an.checks[seg];
        if let Some((lo, hi)) = widen.filter(|_| plan.standing_for(i).is_none()) {
            // One check for the whole run of offsets of the same value (`MachineBounds`).
            let x = match inst.args.as_slice() {
                [Opnd::Ref(_), _] => args[0].0,
                _ => args[1].0,
            };
            let mut exits = TreeExits {
                exits: &mut self.exits,
                seg,
                i,
                undo: None,
                bridge: None,
            };
            if hi > 0 {
                let over = b
                    .ins()
                    .icmp_imm_s(IntCC::SignedGreaterThan, x, i64::MAX - hi);
                ops::Exits::exit_if(&mut exits, b, over);
            }
            if lo < 0 {
                let under = b.ins().icmp_imm_s(IntCC::SignedLessThan, x, i64::MIN - lo);
                ops::Exits::exit_if(&mut exits, b, under);
            }
        }
        // The operand of an addition or subtraction that nothing after it reads (but
        // snapshots): its overflow exit computes it back, so that it dies here.
        let dies = |o: &Opnd| match o {
            Opnd::Ref(r) => self.last_use[r.index()] == i && self.vals[seg][r.index()].is_some(),
            Opnd::Const(_) => false,
        };
        let undo = match inst.args.as_slice() {
            [x, y] if x == y => None,
            [x, _] if dies(x) => x.as_ref().map(|r| (r, true)),
            [_, y] if dies(y) => y.as_ref().map(|r| (r, false)),
            _ => None,
        };
        // A read with a bridge in this function goes there wherever it would exit.
        let bridge = match op {
            Op::Readlist => self.read_bridge(b, i),
            _ => None,
        };
        let mut exits = TreeExits {
            exits: &mut self.exits,
            seg,
            i,
            undo,
            bridge,
        };
        let checked = snap && !self.an.bounds[seg].safe[i];
        match ops::lower_op(b, op, &args, checked, self.an.kinds[seg][i], &mut exits) {
            ops::Outcome::Value(v) => {
                self.vals[seg][i] = Some(v);
                true
            }
            ops::Outcome::AlwaysExits => false,
        }
    }
}

/// An exit to fill: its block, the segment and instruction it exits at, and the operand it
/// computes back ([`ops::Undo`]), if any.
type Exit = (Block, usize, usize, Option<(Ref, bool, ops::Undo)>);

/// Exits of a trace tree: a cold block per exiting instruction, filled at the end.
struct TreeExits<'a> {
    exits: &'a mut Vec<Exit>,
    /// The operand of a checked addition or subtraction an exit computes back, if any:
    /// its ref and whether it is the first.
    undo: Option<(Ref, bool)>,
    seg: usize,
    i: usize,
    /// Where every exit goes instead, if anywhere: a read's bridge in the same function
    /// (`Lower::read_bridge`).
    bridge: Option<Block>,
}

impl ops::Exits for TreeExits<'_> {
    fn exit_if(&mut self, b: &mut FunctionBuilder, fail: ClifValue) {
        self.exit_computing(b, fail, None);
    }

    fn exit_now(&mut self, b: &mut FunctionBuilder) {
        if let Some(bridge) = self.bridge {
            b.ins().jump(bridge, &[]);
            return;
        }
        let exit = b.create_block();
        b.set_cold_block(exit);
        self.exits.push((exit, self.seg, self.i, None));
        b.ins().jump(exit, &[]);
    }

    fn exit_on_overflow(&mut self, b: &mut FunctionBuilder, fail: ClifValue, undo: ops::Undo) {
        let recompute = self.undo.map(|(r, first)| (r, first, undo));
        self.exit_computing(b, fail, recompute);
    }
}

impl TreeExits<'_> {
    /// Exits when `fail` is not zero, the exit computing back the operand `recompute`
    /// names, if any; goes on in a new block otherwise.
    fn exit_computing(
        &mut self,
        b: &mut FunctionBuilder,
        fail: ClifValue,
        recompute: Option<(Ref, bool, ops::Undo)>,
    ) {
        let exit = match self.bridge {
            Some(bridge) => bridge,
            None => {
                let exit = b.create_block();
                b.set_cold_block(exit);
                self.exits.push((exit, self.seg, self.i, recompute));
                exit
            }
        };
        let cont = b.create_block();
        b.ins().brif(fail, exit, &[], cont, &[]);
        b.seal_block(cont);
        b.switch_to_block(cont);
    }
}

/// How the exits of a function go on in other trees, and how it is entered from them.
#[derive(Clone, Copy)]
pub struct Links<'a> {
    /// The link table: a slot per global instruction index.
    pub table: *const u64,
    /// The kinds of inputs the function need not check on entry: for a bridge unit, those
    /// the exit of its guard surely leaves in the mirror ([`exit_kinds`]), the only exit
    /// linked to it; for a tree, its inputs' (the driver links only exits that leave them,
    /// the runtime checks the frame).
    pub assumed: &'a [(Slot, Repr)],
    /// For a bridge unit: the address of its count of entries left before it asks to be
    /// compiled in its tree's function ([`HOT`]).
    pub entries: Option<u64>,
}

/// The inputs whose kinds the code `an` analyzed does not check on entry, given the kinds
/// it may assume: every one of those but an integer of any size (whose tag may say a
/// 64-bit integer).
pub fn unchecked(an: &TreeAnalysis, assumed: &[(Slot, Repr)]) -> Vec<(Slot, Repr)> {
    an.layout
        .inputs
        .iter()
        .zip(&an.input_kinds)
        .map(|((slot, _), kind)| (*slot, *kind))
        .filter(|k| k.1 != Repr::Num && assumed.contains(k))
        .collect()
}

/// Lowers trace tree number `tree` (see [`analyze`]) to a Cranelift function for `isa`.
/// With `counting`, the code keeps the `--max-steps` budget in the counter slot. With
/// `links`, each [`linkable`] exit goes on in the tree whose function its slot of the table
/// holds (LuaJIT's and PyPy's jumps from one trace to another): it writes its snapshot
/// into the mirror and calls that function as a tail call, which checks its inputs' kinds
/// in the mirror ([`REFUSED`]), except those assumed (`Links::assumed`).
pub fn lower(
    segments: &[Segment],
    an: &TreeAnalysis,
    isa: &dyn TargetIsa,
    fctx: &mut FunctionBuilderContext,
    counting: bool,
    (tree, links): (usize, Option<Links>),
    direct: Option<Direct>,
) -> (Function, helpers::Boxes) {
    let mut func = Function::with_name_signature(UserFuncName::user(0, 0), tree_signature(isa));
    let mf = MemFlagsData::trusted();
    let mut b = FunctionBuilder::new(&mut func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    let regs = b.block_params(entry)[0];
    let counter = counting.then(|| {
        let counter = b.declare_var(I64);
        let initial = b.ins().load(I64, mf, regs, (8 * an.layout.counter) as i32);
        b.def_var(counter, initial);
        counter
    });
    refuse_entries(&mut b, regs, segments, an, counter, tree, links);
    if let Some(entries) = links.and_then(|l| l.entries) {
        count_entries(&mut b, entries, exit_code(tree, an.unit, HOT));
    }
    let start = b.create_block();
    let loaded: Vec<BlockArg> = an
        .layout
        .inputs
        .iter()
        .map(|(_, at)| BlockArg::Value(b.ins().load(I64, mf, regs, (8 * at) as i32)))
        .collect();
    let inputs: Vec<ClifValue> = loaded
        .iter()
        .map(|_| b.append_block_param(start, I64))
        .collect();
    let mut l = Lower {
        segments,
        an,
        vals: segments
            .iter()
            .map(|s| vec![None; s.trace.insts.len()])
            .collect(),
        inputs,
        regs,
        isa,
        counter,
        max_cost: max_cost(segments),
        start,
        header: None,
        exits: Vec::new(),
        last_use: Vec::new(),
        bridges: HashMap::default(),
        pending: Vec::new(),
        seg: 0,
        built: HashMap::default(),
        ints: Vec::new(),
        known: Vec::new(),
        boxes: RefCell::new(helpers::Boxes::default()),
        own_boxes: HashMap::default(),
        param_boxes: HashMap::default(),
        input_boxes: Vec::new(),
        deferred: Vec::new(),
        tree,
        read_bridges: HashMap::default(),
        direct,
        reserve: None,
        itself: None,
    };
    let loaded = l.box_num_inputs(&mut b, loaded);
    b.ins().jump(start, &loaded);
    b.switch_to_block(start);
    l.bridges = attachments(segments);
    let mut header = None;
    l.ints.clear();
    l.segment(&mut b, &mut header);
    l.pending_bridges(&mut b);
    b.seal_block(start);
    l.exit_blocks(&mut b, tree, links);
    b.seal_all_blocks();
    b.finalize(isa.frontend_config());
    (func, l.boxes.into_inner())
}

/// The entry's checks of a function that may be entered from another's exit: each input
/// whose kind the mirror may not hold (entered from another tree, the mirror holds what that
/// tree left, which may not be of the kinds this one was compiled for), and under
/// `--max-steps` whether the budget holds the costliest iteration, without it whether the
/// register buffer holds the code's slots (a loop's tree that an entry trace's end goes on
/// in runs on the buffer of the call, whose size the call leaves in the counter's slot,
/// `Lower::direct_call`). A failed check returns [`REFUSED`].
fn refuse_entries(
    b: &mut FunctionBuilder,
    regs: ClifValue,
    segments: &[Segment],
    an: &TreeAnalysis,
    counter: Option<Variable>,
    tree: usize,
    links: Option<Links>,
) {
    let mf = MemFlagsData::trusted();
    let sure = unchecked(an, links.map_or(&[][..], |l| l.assumed));
    let unsure: Vec<_> = an
        .layout
        .inputs
        .iter()
        .zip(&an.input_kinds)
        .filter(|((slot, _), kind)| !sure.contains(&(*slot, **kind)))
        .collect();
    let sized = an.sized;
    if links.is_some() && (!unsure.is_empty() || counter.is_some() || sized) {
        let refused = b.create_block();
        b.set_cold_block(refused);
        for ((_, at), kind) in unsure {
            let tag = b.ins().load(I64, mf, regs, (8 * (at + 1)) as i32);
            let other = if *kind == Repr::Num {
                // A 64-bit integer or a boxed one.
                let int = b
                    .ins()
                    .icmp_imm_s(IntCC::NotEqual, tag, mirror_tag(Repr::Int));
                let num = b
                    .ins()
                    .icmp_imm_s(IntCC::NotEqual, tag, mirror_tag(Repr::Num));
                b.ins().band(int, num)
            } else {
                b.ins().icmp_imm_s(IntCC::NotEqual, tag, mirror_tag(*kind))
            };
            let cont = b.create_block();
            b.ins().brif(other, refused, &[], cont, &[]);
            b.seal_block(cont);
            b.switch_to_block(cont);
        }
        if sized {
            let room = b.ins().load(I64, mf, regs, (8 * an.layout.counter) as i32);
            let size = an.layout.size as i64;
            let small = b.ins().icmp_imm_s(IntCC::SignedLessThan, room, size);
            let cont = b.create_block();
            b.ins().brif(small, refused, &[], cont, &[]);
            b.seal_block(cont);
            b.switch_to_block(cont);
        }
        // Under `--max-steps`, the budget must hold this tree's costliest iteration, as
        // the runtime checks before it enters one.
        if let Some(counter) = counter {
            let count = b.use_var(counter);
            let short = b
                .ins()
                .icmp_imm_s(IntCC::SignedLessThan, count, max_cost(segments) as i64);
            let cont = b.create_block();
            b.ins().brif(short, refused, &[], cont, &[]);
            b.seal_block(cont);
            b.switch_to_block(cont);
        }
        let go_on = b.create_block();
        b.ins().jump(go_on, &[]);
        b.switch_to_block(refused);
        b.seal_block(refused);
        let code = b.ins().iconst(I64, exit_code(tree, an.unit, REFUSED));
        b.ins().return_(&[code]);
        b.switch_to_block(go_on);
        b.seal_block(go_on);
    }
}

/// A bridge unit counts its entries down in the word at `entries`; the entry that spends
/// the count returns `code` ([`HOT`]).
fn count_entries(b: &mut FunctionBuilder, entries: u64, code: i64) {
    let mf = MemFlagsData::trusted();
    let at = b.ins().iconst(I64, entries as i64);
    let left = b.ins().load(I64, mf, at, 0);
    let left = b.ins().iadd_imm_s(left, -1);
    b.ins().store(mf, left, at, 0);
    let (hot, go_on) = (b.create_block(), b.create_block());
    b.set_cold_block(hot);
    b.ins().brif(left, go_on, &[], hot, &[]);
    b.seal_block(hot);
    b.seal_block(go_on);
    b.switch_to_block(hot);
    let code = b.ins().iconst(I64, code);
    b.ins().return_(&[code]);
    b.switch_to_block(go_on);
}

/// Per guard, the bridges compiled in the function that leave from it.
fn attachments<'a>(segments: &[Segment<'a>]) -> Attachments<'a> {
    let mut bridges: Attachments = HashMap::default();
    for (seg, s) in segments.iter().enumerate().skip(1) {
        if s.separate {
            continue;
        }
        let parent = s.parent.expect("a bridge has a parent guard");
        bridges.entry(parent).or_default().push((seg, s.value));
    }
    bridges
}
