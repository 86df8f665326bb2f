//! Lowering one primitive operation on unboxed values: shared by the lowering of trace trees
//! (`lower`) and of whole residual programs (`cfg`), which differ only in what an exit is.
//!
//! Every check that fails (an overflow, a zero divisor, an index outside a list, an element
//! of another kind than expected) leaves through [`Exits`]: before the operation, so that the
//! interpreter can run it again and get the exact result or raise the exact error.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{
    InstBuilder, InstructionData, MemFlagsData, Opcode, Value as ClifValue,
};
use cranelift_codegen::isa::TargetIsa;
use cranelift_frontend::FunctionBuilder;
use flowjit_runtime::abi::{self, Repr};
use flowjit_runtime::Op;

use super::helpers;
use crate::opt::bounds::safe_divisor;

/// The flags of a load of a list's or an array's length or elements' address: neither ever
/// changes (arrays have a fixed length), so Cranelift may merge two such loads and let
/// stores to elements pass them, and then forwards a stored element to a load of it. The
/// load may also move (`can_move`): a value of kind list or array is the address of one
/// wherever it is defined, so the load is pure, and Cranelift's e-graph shares it across
/// stores and hoists it out of the loop.
pub const HEADER: MemFlagsData = MemFlagsData::trusted().with_readonly().with_can_move();

/// How the code leaves when a check fails.
pub trait Exits {
    /// Leaves when `fail` is not zero, and goes on in a new block otherwise.
    fn exit_if(&mut self, b: &mut FunctionBuilder, fail: ClifValue);
    /// Leaves unconditionally (the current block is then filled).
    fn exit_now(&mut self, b: &mut FunctionBuilder);
    /// Leaves when `fail`, the overflow flag of the wrapped sum or difference `undo`
    /// describes, is set. An exit may compute an operand back from the result and the other
    /// operand instead of keeping it alive past the operation (`add` overwrites one on
    /// x86-64).
    fn exit_on_overflow(&mut self, b: &mut FunctionBuilder, fail: ClifValue, undo: Undo) {
        let _ = undo;
        self.exit_if(b, fail);
    }
}

/// A wrapped `result = x + y` (or `x - y`), whose operands an exit can compute back.
#[derive(Clone, Copy, Debug)]
pub struct Undo {
    /// The wrapped result.
    pub result: ClifValue,
    /// The first operand.
    pub x: ClifValue,
    /// The second operand.
    pub y: ClifValue,
    /// An addition (else a subtraction).
    pub add: bool,
}

impl Undo {
    /// The first operand (`first`) or the second, computed from the result and the other.
    pub fn operand(self, b: &mut FunctionBuilder, first: bool) -> ClifValue {
        match (self.add, first) {
            (true, true) => b.ins().isub(self.result, self.y),
            (true, false) => b.ins().isub(self.result, self.x),
            (false, true) => b.ins().iadd(self.result, self.y),
            (false, false) => b.ins().isub(self.x, self.result),
        }
    }
}

/// What lowering an operation gave.
pub enum Outcome {
    /// Its result.
    Value(ClifValue),
    /// It fails on every value of these kinds: the code leaves before it, always.
    AlwaysExits,
}

/// Whether machine code can do `op` on operands of these kinds (any other combination
/// always exits, except the cases this rejects outright).
pub fn supported(op: Op, kinds: &[Repr]) -> Result<(), super::Unsupported> {
    match (op, kinds) {
        (Op::Eq | Op::Ne, [Repr::List, Repr::List]) => Err(super::Unsupported::ListComparison),
        _ => Ok(()),
    }
}

/// The offset of element `index` from an array's or list's first element, `index *
/// VALUE_SIZE`, written `(index + index) << 3`: x86-64 then doubles the index with one `lea`
/// into a new register and scales it by 8 in the access's address, where `index << 4` takes a
/// copy of the index and a shift (a fifth of the partially evaluated mandel.b's
/// instructions were those two). Cranelift's optimizer keeps this form (it folds a constant
/// added to the index into the `lea`).
pub fn element_offset(b: &mut FunctionBuilder, index: ClifValue) -> ClifValue {
    const _: () = assert!(abi::VALUE_SIZE == 16);
    let twice = b.ins().iadd(index, index);
    b.ins().ishl_imm_u(twice, 3)
}

fn bool_to_int(b: &mut FunctionBuilder, flag: ClifValue) -> ClifValue {
    b.ins().uextend(I64, flag)
}

/// The value of `v` when an `iconst` defines it.
pub(super) fn constant(b: &FunctionBuilder, v: ClifValue) -> Option<i64> {
    let inst = b.func.dfg.value_def(v).inst()?;
    match b.func.dfg.insts[inst] {
        InstructionData::UnaryImm {
            opcode: Opcode::Iconst,
            imm,
        } => Some(imm.bits()),
        _ => None,
    }
}

/// `x + c` or `x - c` for a constant `c`, exiting where it would leave 64 bits: a
/// comparison of `x` with the bound the constant leaves it (`x - 1` overflows only where
/// `x == i64::MIN`), which x86-64 and aarch64 branch on directly, rather than the
/// overflow flag, which Cranelift turns into a byte and a test (`seto`, `test`, `jne`).
fn checked_by_constant(
    b: &mut FunctionBuilder,
    op: Op,
    x: ClifValue,
    c: i64,
    exits: &mut dyn Exits,
) -> ClifValue {
    // x + d, with d = c or -c: overflows where x > MAX - d (d > 0) or x < MIN - d (d < 0).
    let d = match op {
        Op::Add => Some(c),
        _ => c.checked_neg(),
    };
    let fails = match d {
        Some(0) => None,
        Some(d) if d > 0 => Some(
            b.ins()
                .icmp_imm_s(IntCC::SignedGreaterThan, x, i64::MAX - d),
        ),
        Some(d) => Some(b.ins().icmp_imm_s(IntCC::SignedLessThan, x, i64::MIN - d)),
        // x - MIN overflows where x >= 0.
        None => Some(b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, x, 0)),
    };
    if let Some(f) = fails {
        exits.exit_if(b, f);
    }
    let k = b.ins().iconst(I64, c);
    match op {
        Op::Add => b.ins().iadd(x, k),
        _ => b.ins().isub(x, k),
    }
}

/// Lowers `op` on `args`. With `checked`, arithmetic checks overflow (without, the
/// optimizer proved it cannot happen); `result` is the kind a `readlist` must find.
pub fn lower_op(
    b: &mut FunctionBuilder,
    op: Op,
    args: &[(ClifValue, Repr)],
    checked: bool,
    result: Option<Repr>,
    exits: &mut dyn Exits,
) -> Outcome {
    if op == Op::Same {
        return Outcome::Value(args[0].0);
    }
    if let (Op::Eq | Op::Ne, [(x, kx), (y, ky)]) = (op, args) {
        let v = if kx != ky {
            b.ins().iconst(I64, (op == Op::Ne) as i64)
        } else {
            let cc = if op == Op::Eq {
                IntCC::Equal
            } else {
                IntCC::NotEqual
            };
            let f = b.ins().icmp(cc, *x, *y);
            bool_to_int(b, f)
        };
        return Outcome::Value(v);
    }
    if let (Op::Readlist, [(list, Repr::List | Repr::Array), (index, Repr::Int)]) = (op, args) {
        let kind = result.expect("supported() checked the kind of the element");
        return Outcome::Value(read_element(b, *list, *index, kind, exits));
    }
    if let (Op::Len, [(list, Repr::List | Repr::Array)]) = (op, args) {
        return Outcome::Value(
            b.ins()
                .load(I64, HEADER, *list, abi::LIST_LEN_OFFSET as i32),
        );
    }
    // `len` and `readlist` need a list or an array, which they did not get; the others need integers
    // only. Either way the operation fails every time: exit before it.
    if matches!(op, Op::Len | Op::Readlist) || args.iter().any(|(_, k)| *k != Repr::Int) {
        exits.exit_now(b);
        return Outcome::AlwaysExits;
    }
    Outcome::Value(int_op(
        b,
        op,
        args[0].0,
        args.get(1).map(|a| a.0),
        checked,
        exits,
    ))
}

/// Element `index` of `list` (a list or an array, which has a list's layout), of kind
/// `kind`: bounds-checked, an index outside the list (a negative one is a huge unsigned
/// number) exits, and so does an element of another kind.
fn read_element(
    b: &mut FunctionBuilder,
    list: ClifValue,
    index: ClifValue,
    kind: Repr,
    exits: &mut dyn Exits,
) -> ClifValue {
    let mf = MemFlagsData::trusted();
    let len = b.ins().load(I64, HEADER, list, abi::LIST_LEN_OFFSET as i32);
    let outside = b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, index, len);
    exits.exit_if(b, outside);
    let items = b
        .ins()
        .load(I64, HEADER, list, abi::LIST_ITEMS_OFFSET as i32);
    let offset = element_offset(b, index);
    let addr = b.ins().iadd(items, offset);
    let tag = b.ins().load(I64, mf, addr, abi::VALUE_TAG_OFFSET as i32);
    let other = b.ins().icmp_imm_s(IntCC::NotEqual, tag, kind.tag() as i64);
    exits.exit_if(b, other);
    let at = abi::VALUE_PAYLOAD_OFFSET as i32;
    match kind {
        Repr::Atom => b.ins().uload32(mf, addr, at),
        Repr::Int => b.ins().load(I64, mf, addr, at),
        // An `Rc` pointer: the list's or the array's address is past the counts.
        Repr::List | Repr::Array => {
            let rc = b.ins().load(I64, mf, addr, at);
            b.ins().iadd_imm_s(rc, abi::RC_VALUE_OFFSET as i64)
        }
        Repr::Num => unreachable!("an element read is of a kind with one tag"),
    }
}

/// `op` on the 64-bit integers `x` and `y` (`None` for an operation of one operand). With
/// `checked`, arithmetic checks overflow.
fn int_op(
    b: &mut FunctionBuilder,
    op: Op,
    x: ClifValue,
    y: Option<ClifValue>,
    checked: bool,
    exits: &mut dyn Exits,
) -> ClifValue {
    match (op, y) {
        (Op::Add | Op::Sub, Some(y)) if checked && constant(b, y).is_some() => {
            let c = constant(b, y).expect("checked");
            checked_by_constant(b, op, x, c, exits)
        }
        (Op::Add, Some(y)) if checked && constant(b, x).is_some() => {
            let c = constant(b, x).expect("checked");
            checked_by_constant(b, op, y, c, exits)
        }
        (Op::Add | Op::Sub | Op::Mul, Some(y)) if checked => {
            let (r, of) = match op {
                Op::Add => b.ins().sadd_overflow(x, y),
                Op::Sub => b.ins().ssub_overflow(x, y),
                _ => b.ins().smul_overflow(x, y),
            };
            if op == Op::Mul {
                exits.exit_if(b, of);
            } else {
                let undo = Undo {
                    result: r,
                    x,
                    y,
                    add: op == Op::Add,
                };
                exits.exit_on_overflow(b, of, undo);
            }
            r
        }
        (Op::Add, Some(y)) => b.ins().iadd(x, y),
        (Op::Sub, Some(y)) => b.ins().isub(x, y),
        (Op::Mul, Some(y)) => b.ins().imul(x, y),
        (Op::Neg, None) if checked => {
            let zero = b.ins().iconst(I64, 0);
            let (r, of) = b.ins().ssub_overflow(zero, x);
            exits.exit_if(b, of);
            r
        }
        (Op::Neg, None) => b.ins().ineg(x),
        (Op::Not, None) => {
            let f = b.ins().icmp_imm_s(IntCC::Equal, x, 0);
            bool_to_int(b, f)
        }
        (Op::And, Some(y)) => b.ins().band(x, y),
        (Op::Or, Some(y)) => b.ins().bor(x, y),
        (Op::Xor, Some(y)) => b.ins().bxor(x, y),
        (Op::Lt | Op::Le | Op::Gt | Op::Ge, Some(y)) => {
            let cc = match op {
                Op::Lt => IntCC::SignedLessThan,
                Op::Le => IntCC::SignedLessThanOrEqual,
                Op::Gt => IntCC::SignedGreaterThan,
                _ => IntCC::SignedGreaterThanOrEqual,
            };
            let f = b.ins().icmp(cc, x, y);
            bool_to_int(b, f)
        }
        (Op::Div | Op::Mod, Some(y))
            if constant(b, y).is_some_and(|k| k > 0 && k.count_ones() == 1) =>
        {
            // Floor division by a power of two is an arithmetic shift, the floor
            // remainder a mask; neither can fail.
            let k = constant(b, y).expect("checked");
            if op == Op::Div {
                b.ins().sshr_imm_s(x, i64::from(k.trailing_zeros()))
            } else {
                b.ins().band_imm_s(x, k - 1)
            }
        }
        (Op::Div | Op::Mod, Some(y)) => {
            // Exit on a zero divisor, and on MIN / -1 (the result leaves 64 bits); by a
            // constant other than those, neither can happen (and the optimizer may have
            // dropped the snapshot: `opt::bounds`).
            if !constant(b, y).is_some_and(safe_divisor) {
                let zero = b.ins().icmp_imm_s(IntCC::Equal, y, 0);
                let min = b.ins().icmp_imm_s(IntCC::Equal, x, i64::MIN);
                let minus1 = b.ins().icmp_imm_s(IntCC::Equal, y, -1);
                let both = b.ins().band(min, minus1);
                let fail = b.ins().bor(zero, both);
                exits.exit_if(b, fail);
            }
            let q = b.ins().sdiv(x, y);
            let r = b.ins().srem(x, y);
            // Floor: when the remainder is not 0 and its sign differs from the divisor's,
            // q - 1 and r + y.
            let rnz = b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
            let sx = b.ins().bxor(r, y);
            let neg = b.ins().icmp_imm_s(IntCC::SignedLessThan, sx, 0);
            let adjust = b.ins().band(rnz, neg);
            if op == Op::Div {
                let one = bool_to_int(b, adjust);
                b.ins().isub(q, one)
            } else {
                let r2 = b.ins().iadd(r, y);
                b.ins().select(adjust, r2, r)
            }
        }
        (Op::Shl, Some(y)) => {
            // A count outside 0..64 (negative: huge unsigned) exits, and so does a result
            // that does not shift back to `x` (it left 64 bits).
            let wide = b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, y, 64);
            exits.exit_if(b, wide);
            let r = b.ins().ishl(x, y);
            let back = b.ins().sshr(r, y);
            let lost = b.ins().icmp(IntCC::NotEqual, back, x);
            exits.exit_if(b, lost);
            r
        }
        (Op::Shr, Some(y)) => {
            // A negative count exits; a count of 64 or more gives what 63 gives (0 or -1),
            // as floor division by a huge power of two does.
            let negative = b.ins().icmp_imm_s(IntCC::SignedLessThan, y, 0);
            exits.exit_if(b, negative);
            let big = b.ins().icmp_imm_s(IntCC::SignedGreaterThan, y, 63);
            let max = b.ins().iconst(I64, 63);
            let count = b.ins().select(big, max, y);
            b.ins().sshr(x, count)
        }
        _ => unreachable!("every operation on integers is lowered above ({op})"),
    }
}

/// Calls the runtime helper at `f` on `args` (one word each); its result, if it has one.
pub fn call_helper(
    b: &mut FunctionBuilder,
    isa: &dyn TargetIsa,
    f: *const u8,
    args: &[ClifValue],
    ret: bool,
) -> Option<ClifValue> {
    let sig = b.import_signature(helpers::signature(isa, args.len(), ret));
    let callee = b.ins().iconst(I64, f as i64);
    let call = b.ins().call_indirect(sig, callee, args);
    b.inst_results(call).first().copied()
}

/// Stores `v` (of kind `kv`) into element `index` of array `a`, an index known to be in
/// bounds: in place when neither the old element nor `v` owns a reference, through the
/// runtime otherwise ([`helpers::setitem`]). With `ints` (the array is known to hold only
/// integers) an integer is stored without looking at the old element, and without writing a
/// tag.
pub fn store_item(
    b: &mut FunctionBuilder,
    isa: &dyn TargetIsa,
    (a, index, v, kv): (ClifValue, ClifValue, ClifValue, Repr),
    ints: bool,
) {
    let mf = MemFlagsData::trusted();
    if ints && kv == Repr::Int {
        let items = b.ins().load(I64, HEADER, a, abi::LIST_ITEMS_OFFSET as i32);
        let offset = element_offset(b, index);
        let addr = b.ins().iadd(items, offset);
        b.ins().store(mf, v, addr, abi::VALUE_PAYLOAD_OFFSET as i32);
        return;
    }
    let kind = b.ins().iconst(I64, helpers::kind_code(kv));
    let slow = &[a, index, v, kind];
    let setitem = helpers::setitem as *const u8;
    if !matches!(kv, Repr::Int | Repr::Atom) {
        call_helper(b, isa, setitem, slow, false);
        return;
    }
    let items = b.ins().load(I64, HEADER, a, abi::LIST_ITEMS_OFFSET as i32);
    let offset = element_offset(b, index);
    let addr = b.ins().iadd(items, offset);
    let tag = b.ins().load(I64, mf, addr, abi::VALUE_TAG_OFFSET as i32);
    // Integers (tag 0) and atoms (tag 2) own nothing: any other tag has bits outside 2.
    const _: () = assert!(abi::TAG_INT == 0 && abi::TAG_ATOM == 2);
    let owns = b.ins().band_imm_s(tag, !2);
    let (fast, by_runtime, join) = (b.create_block(), b.create_block(), b.create_block());
    b.set_cold_block(by_runtime);
    b.ins().brif(owns, by_runtime, &[], fast, &[]);
    b.seal_block(fast);
    b.seal_block(by_runtime);
    b.switch_to_block(fast);
    let new_tag = b.ins().iconst(I64, kv.tag() as i64);
    b.ins()
        .store(mf, new_tag, addr, abi::VALUE_TAG_OFFSET as i32);
    b.ins().store(mf, v, addr, abi::VALUE_PAYLOAD_OFFSET as i32);
    if kv != Repr::Int {
        // The array no longer holds only integers (the runtime's stores say so too).
        let no = b.ins().iconst(I64, 0);
        b.ins().store(mf, no, a, abi::ARRAY_INTS_OFFSET as i32);
    }
    b.ins().jump(join, &[]);
    b.switch_to_block(by_runtime);
    call_helper(b, isa, setitem, slow, false);
    b.ins().jump(join, &[]);
    b.seal_block(join);
    b.switch_to_block(join);
}
