//! Lowering an optimized (peeled) trace to a Cranelift function.
//!
//! The function is `extern "C" fn(regs: *mut i64) -> u32`. `regs` has one 64-bit slot per
//! trace instruction and one more, the *loop counter*. Before the call, the runtime stores
//! each `input`'s value in its slot and the number of iterations allowed in the counter. The
//! preamble is the entry block; `loop_start` and `loop` jump to the loop header, whose block
//! parameters are the `param`s. Every instruction that can exit branches to a cold block of
//! its own, which stores the SSA values its snapshot needs into their slots (and the
//! counter), and returns the instruction's index. The counter exists only in code compiled
//! for a run with `--max-steps`: without a limit, a loop iteration has no bookkeeping. The runtime then writes the resume
//! variables into the frame.
//!
//! Values are unboxed: an integer is an `i64`, an atom its id, a list the address of its
//! `Rc` (borrowed from the frame or from the trace's constants, which outlive the call).
//! Arithmetic checks overflow, and an overflow is an exit: the interpreter redoes the
//! operation with big integers.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I32, I64};
use cranelift_codegen::ir::{
    AbiParam, Block, BlockArg, Function, InstBuilder, MemFlagsData, Signature, UserFuncName,
    Value as ClifValue,
};
use cranelift_codegen::isa::TargetIsa;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use flowjit_runtime::abi::{self, Kind as MKind};
use flowjit_runtime::{Op, Value};

use super::Unsupported;
use crate::interp::Frame;
use crate::trace::{Kind, Opnd, Trace};

/// The kind of a constant, if machine code can hold it.
fn const_kind(v: &Value) -> Result<MKind, Unsupported> {
    MKind::of(v).ok_or_else(|| Unsupported("a big integer constant".into()))
}

/// The kind of each instruction's result, seeded by the frame's values for the `input`s
/// (the trace is compiled with the frame at its anchor, as the recording left it).
pub fn kinds(trace: &Trace, frame: &Frame) -> Result<Vec<Option<MKind>>, Unsupported> {
    let Some(start) = trace.loop_start() else {
        return Err(Unsupported(
            "the trace is not peeled (the peel pass is off)".into(),
        ));
    };
    let mut kinds: Vec<Option<MKind>> = vec![None; trace.insts.len()];
    let of = |kinds: &[Option<MKind>], o: &Opnd| -> Result<MKind, Unsupported> {
        match o {
            Opnd::Ref(r) => Ok(kinds[r.index()].expect("refs are defined before use")),
            Opnd::Const(v) => const_kind(v),
        }
    };
    for (i, inst) in trace.insts.iter().enumerate() {
        kinds[i] = match inst.kind {
            Kind::Input(slot) => Some(match &frame[slot.index()] {
                Some(v) => MKind::of(v).ok_or_else(|| Unsupported("a big integer input".into()))?,
                None => return Err(Unsupported("an input that was never written".into())),
            }),
            Kind::Param(_) => {
                let k = i - start - 1;
                Some(of(&kinds, &trace.insts[start].args[k])?)
            }
            Kind::Op(Op::Same) => Some(of(&kinds, &inst.args[0])?),
            Kind::Op(op) => {
                let arg_kinds = inst
                    .args
                    .iter()
                    .map(|a| of(&kinds, a))
                    .collect::<Result<Vec<_>, _>>()?;
                if matches!(op, Op::Eq | Op::Ne) && arg_kinds == [MKind::List, MKind::List] {
                    return Err(Unsupported("comparing lists in machine code".into()));
                }
                let exits = matches!(op, Op::Readlist | Op::Shl | Op::Shr | Op::Div | Op::Mod);
                if exits && inst.snap.is_none() {
                    return Err(Unsupported(format!("`{op}` without a snapshot")));
                }
                match op {
                    Op::Readlist => match inst.seen {
                        Some(k @ (MKind::Int | MKind::Atom)) => Some(k),
                        _ => {
                            return Err(Unsupported(
                                "`readlist` of an element machine code cannot hold".into(),
                            ))
                        }
                    },
                    _ => Some(MKind::Int),
                }
            }
            Kind::Loop => {
                for (k, a) in inst.args.iter().enumerate() {
                    if Some(of(&kinds, a)?) != kinds[start + 1 + k] {
                        return Err(Unsupported("a loop-carried value changes kind".into()));
                    }
                }
                None
            }
            _ => {
                for a in &inst.args {
                    of(&kinds, a)?;
                }
                None
            }
        };
    }
    Ok(kinds)
}

/// The signature of every compiled trace: `extern "C" fn(*mut i64) -> u32`.
pub fn signature(isa: &dyn TargetIsa) -> Signature {
    let mut sig = Signature::new(isa.default_call_conv());
    sig.params.push(AbiParam::new(isa.pointer_type()));
    sig.returns.push(AbiParam::new(I32));
    sig
}

struct Lower<'a> {
    trace: &'a Trace,
    kinds: &'a [Option<MKind>],
    vals: Vec<Option<ClifValue>>,
    regs: ClifValue,
    /// The loop counter, when the code counts iterations (under `--max-steps`).
    counter: Option<Variable>,
    /// Exit blocks to fill at the end: (block, exiting instruction).
    exits: Vec<(Block, usize)>,
}

impl Lower<'_> {
    fn opnd(&self, b: &mut FunctionBuilder, o: &Opnd) -> (ClifValue, MKind) {
        match o {
            Opnd::Ref(r) => (
                self.vals[r.index()].expect("refs are defined before use"),
                self.kinds[r.index()].expect("a ref has a kind"),
            ),
            Opnd::Const(v) => {
                let kind = MKind::of(v).expect("kinds() rejects big constants");
                let bits = abi::unbox(v, kind).expect("a value unboxes as its own kind");
                (b.ins().iconst(I64, bits), kind)
            }
        }
    }

    /// Exits at instruction `i` when `fail` is non-zero.
    fn exit_if(&mut self, b: &mut FunctionBuilder, fail: ClifValue, i: usize) {
        let exit = b.create_block();
        b.set_cold_block(exit);
        self.exits.push((exit, i));
        let cont = b.create_block();
        b.ins().brif(fail, exit, &[], cont, &[]);
        b.seal_block(cont);
        b.switch_to_block(cont);
    }

    /// Exits at instruction `i` unconditionally.
    fn exit_now(&mut self, b: &mut FunctionBuilder, i: usize) {
        let exit = b.create_block();
        b.set_cold_block(exit);
        self.exits.push((exit, i));
        b.ins().jump(exit, &[]);
    }

    /// The end of an iteration at instruction `i`: when counting, exits if the counter is
    /// spent and counts down; then jumps to the loop header with the instruction's operands.
    fn loop_end(&mut self, b: &mut FunctionBuilder, i: usize, header: Block) {
        if let Some(counter) = self.counter {
            let count = b.use_var(counter);
            let spent = b.ins().icmp_imm_s(IntCC::Equal, count, 0);
            self.exit_if(b, spent, i);
            let next = b.ins().iadd_imm_s(count, -1);
            b.def_var(counter, next);
        }
        let args: Vec<BlockArg> = self.trace.insts[i]
            .args
            .iter()
            .map(|a| BlockArg::Value(self.opnd(b, a).0))
            .collect();
        b.ins().jump(header, &args);
    }
}

fn bool_to_int(b: &mut FunctionBuilder, flag: ClifValue) -> ClifValue {
    b.ins().uextend(I64, flag)
}

/// Lowers `trace` (peeled, with `kinds` from [`kinds`]) to a Cranelift function for `isa`.
/// With `counting`, the code counts loop iterations down from the counter slot and exits
/// when it is spent (for `--max-steps`); without, the loop has no counter at all.
pub fn lower(
    trace: &Trace,
    kinds: &[Option<MKind>],
    isa: &dyn TargetIsa,
    fctx: &mut FunctionBuilderContext,
    counting: bool,
) -> Function {
    let mut func = Function::with_name_signature(UserFuncName::user(0, 0), signature(isa));
    let mf = MemFlagsData::trusted();
    let n = trace.insts.len();
    let mut b = FunctionBuilder::new(&mut func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    let regs = b.block_params(entry)[0];
    let counter = counting.then(|| {
        let counter = b.declare_var(I64);
        let initial = b.ins().load(I64, mf, regs, (8 * n) as i32);
        b.def_var(counter, initial);
        counter
    });
    let mut l = Lower {
        trace,
        kinds,
        vals: vec![None; n],
        regs,
        counter,
        exits: Vec::new(),
    };
    let mut header: Option<Block> = None;
    for (i, inst) in trace.insts.iter().enumerate() {
        let snap = inst.snap.is_some();
        match inst.kind {
            Kind::Input(_) => {
                l.vals[i] = Some(b.ins().load(I64, mf, regs, (8 * i) as i32));
            }
            Kind::Param(_) => {}
            Kind::LoopStart => {
                let h = b.create_block();
                for (k, _) in inst.args.iter().enumerate() {
                    let p = b.append_block_param(h, I64);
                    l.vals[i + 1 + k] = Some(p);
                }
                l.loop_end(&mut b, i, h);
                b.switch_to_block(h);
                header = Some(h);
            }
            Kind::Loop => {
                let h = header.expect("a peeled trace has a loop_start before its loop");
                l.loop_end(&mut b, i, h);
                b.seal_block(h);
            }
            Kind::GuardTrue | Kind::GuardFalse => {
                let (c, kind) = l.opnd(&mut b, &inst.args[0]);
                let want_true = inst.kind == Kind::GuardTrue;
                if kind != MKind::Int {
                    // An atom or a list is never the integer 0: always true.
                    if !want_true {
                        l.exit_now(&mut b, i);
                        break;
                    }
                    continue;
                }
                let cc = if want_true {
                    IntCC::Equal
                } else {
                    IntCC::NotEqual
                };
                let fail = b.ins().icmp_imm_s(cc, c, 0);
                l.exit_if(&mut b, fail, i);
            }
            Kind::GuardValue => {
                let (v, kv) = l.opnd(&mut b, &inst.args[0]);
                let (k, kk) = l.opnd(&mut b, &inst.args[1]);
                if kv != kk {
                    l.exit_now(&mut b, i);
                    break;
                }
                // For lists this compares addresses: a list equal to the constant but
                // stored elsewhere exits, which is always allowed (the interpreter goes on).
                let fail = b.ins().icmp(IntCC::NotEqual, v, k);
                l.exit_if(&mut b, fail, i);
            }
            Kind::Op(op) => {
                let args: Vec<(ClifValue, MKind)> =
                    inst.args.iter().map(|a| l.opnd(&mut b, a)).collect();
                if op == Op::Same {
                    l.vals[i] = Some(args[0].0);
                    continue;
                }
                if let (Op::Eq | Op::Ne, [(x, kx), (y, ky)]) = (op, args.as_slice()) {
                    let v = if kx != ky {
                        b.ins().iconst(I64, (op == Op::Ne) as i64)
                    } else if *kx == MKind::List {
                        // Lists are equal by structure, which addresses cannot decide.
                        unreachable!("kinds() leaves list equality to the trace interpreter")
                    } else {
                        let cc = if op == Op::Eq {
                            IntCC::Equal
                        } else {
                            IntCC::NotEqual
                        };
                        let f = b.ins().icmp(cc, *x, *y);
                        bool_to_int(&mut b, f)
                    };
                    l.vals[i] = Some(v);
                    continue;
                }
                if let (Op::Readlist, [(list, MKind::List), (index, MKind::Int)]) =
                    (op, args.as_slice())
                {
                    // Bounds-checked: an index outside the list (a negative one is a huge
                    // unsigned number) exits, and so does an element of another kind.
                    let len = b.ins().load(I64, mf, *list, abi::LIST_LEN_OFFSET as i32);
                    let outside = b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, *index, len);
                    l.exit_if(&mut b, outside, i);
                    let items = b.ins().load(I64, mf, *list, abi::LIST_ITEMS_OFFSET as i32);
                    let offset = b.ins().imul_imm_s(*index, abi::VALUE_SIZE as i64);
                    let addr = b.ins().iadd(items, offset);
                    let tag = b.ins().load(I64, mf, addr, abi::VALUE_TAG_OFFSET as i32);
                    let kind = kinds[i].expect("readlist has a kind");
                    let other = b.ins().icmp_imm_s(IntCC::NotEqual, tag, kind.tag() as i64);
                    l.exit_if(&mut b, other, i);
                    let at = abi::VALUE_PAYLOAD_OFFSET as i32;
                    l.vals[i] = Some(match kind {
                        MKind::Atom => b.ins().uload32(mf, addr, at),
                        _ => b.ins().load(I64, mf, addr, at),
                    });
                    continue;
                }
                if let (Op::Len, [(list, MKind::List)]) = (op, args.as_slice()) {
                    l.vals[i] = Some(b.ins().load(I64, mf, *list, abi::LIST_LEN_OFFSET as i32));
                    continue;
                }
                if args.iter().any(|(_, k)| *k != MKind::Int) {
                    // Integers only: the operation fails every time; exit before it.
                    l.exit_now(&mut b, i);
                    break;
                }
                let x = args[0].0;
                let y = args.get(1).map(|a| a.0);
                let v = match (op, y) {
                    (Op::Add | Op::Sub | Op::Mul, Some(y)) if snap => {
                        let (r, of) = match op {
                            Op::Add => b.ins().sadd_overflow(x, y),
                            Op::Sub => b.ins().ssub_overflow(x, y),
                            _ => b.ins().smul_overflow(x, y),
                        };
                        l.exit_if(&mut b, of, i);
                        r
                    }
                    (Op::Add, Some(y)) => b.ins().iadd(x, y),
                    (Op::Sub, Some(y)) => b.ins().isub(x, y),
                    (Op::Mul, Some(y)) => b.ins().imul(x, y),
                    (Op::Neg, None) if snap => {
                        let zero = b.ins().iconst(I64, 0);
                        let (r, of) = b.ins().ssub_overflow(zero, x);
                        l.exit_if(&mut b, of, i);
                        r
                    }
                    (Op::Neg, None) => b.ins().ineg(x),
                    (Op::Not, None) => {
                        let f = b.ins().icmp_imm_s(IntCC::Equal, x, 0);
                        bool_to_int(&mut b, f)
                    }
                    (Op::And, Some(y)) => b.ins().band(x, y),
                    (Op::Or, Some(y)) => b.ins().bor(x, y),
                    (Op::Xor, Some(y)) => b.ins().bxor(x, y),
                    (Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Eq | Op::Ne, Some(y)) => {
                        let cc = match op {
                            Op::Lt => IntCC::SignedLessThan,
                            Op::Le => IntCC::SignedLessThanOrEqual,
                            Op::Gt => IntCC::SignedGreaterThan,
                            Op::Ge => IntCC::SignedGreaterThanOrEqual,
                            Op::Eq => IntCC::Equal,
                            _ => IntCC::NotEqual,
                        };
                        let f = b.ins().icmp(cc, x, y);
                        bool_to_int(&mut b, f)
                    }
                    (Op::Div | Op::Mod, Some(y)) => {
                        // Exit on a zero divisor, and on MIN / -1 (the result leaves 64 bits).
                        let zero = b.ins().icmp_imm_s(IntCC::Equal, y, 0);
                        let min = b.ins().icmp_imm_s(IntCC::Equal, x, i64::MIN);
                        let minus1 = b.ins().icmp_imm_s(IntCC::Equal, y, -1);
                        let both = b.ins().band(min, minus1);
                        let fail = b.ins().bor(zero, both);
                        l.exit_if(&mut b, fail, i);
                        let q = b.ins().sdiv(x, y);
                        let r = b.ins().srem(x, y);
                        // Floor: when the remainder is not 0 and its sign differs from the
                        // divisor's, q - 1 and r + y.
                        let rnz = b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
                        let sx = b.ins().bxor(r, y);
                        let neg = b.ins().icmp_imm_s(IntCC::SignedLessThan, sx, 0);
                        let adjust = b.ins().band(rnz, neg);
                        if op == Op::Div {
                            let one = bool_to_int(&mut b, adjust);
                            b.ins().isub(q, one)
                        } else {
                            let r2 = b.ins().iadd(r, y);
                            b.ins().select(adjust, r2, r)
                        }
                    }
                    (Op::Shl, Some(y)) => {
                        // A count outside 0..64 (negative: huge unsigned) exits, and so does a
                        // result that does not shift back to `x` (it left 64 bits).
                        let wide = b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, y, 64);
                        l.exit_if(&mut b, wide, i);
                        let r = b.ins().ishl(x, y);
                        let back = b.ins().sshr(r, y);
                        let lost = b.ins().icmp(IntCC::NotEqual, back, x);
                        l.exit_if(&mut b, lost, i);
                        r
                    }
                    (Op::Shr, Some(y)) => {
                        // A negative count exits; a count of 64 or more gives what 63 gives
                        // (0 or -1), as floor division by a huge power of two does.
                        let negative = b.ins().icmp_imm_s(IntCC::SignedLessThan, y, 0);
                        l.exit_if(&mut b, negative, i);
                        let big = b.ins().icmp_imm_s(IntCC::SignedGreaterThan, y, 63);
                        let max = b.ins().iconst(I64, 63);
                        let count = b.ins().select(big, max, y);
                        b.ins().sshr(x, count)
                    }
                    _ => unreachable!("kinds() rejects {op} in machine code"),
                };
                l.vals[i] = Some(v);
            }
        }
    }
    // The exit blocks: store what each snapshot needs, and the counter; return the index.
    let exits = std::mem::take(&mut l.exits);
    for (block, i) in exits {
        b.switch_to_block(block);
        b.seal_block(block);
        let snap = trace
            .snap_of(&trace.insts[i])
            .expect("an exiting instruction has a snapshot");
        for (_, o) in &snap.entries {
            if let Opnd::Ref(r) = o {
                let v = l.vals[r.index()].expect("snapshot refs are defined before the exit");
                b.ins().store(mf, v, l.regs, (8 * r.index()) as i32);
            }
        }
        if let Some(counter) = l.counter {
            let count = b.use_var(counter);
            b.ins().store(mf, count, l.regs, (8 * n) as i32);
        }
        let code = b.ins().iconst(I32, i as i64);
        b.ins().return_(&[code]);
    }
    b.seal_all_blocks();
    b.finalize(isa.frontend_config());
    func
}
