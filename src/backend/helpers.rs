//! What machine code calls: the runtime's side of the operations that a trace does through
//! the running program's state (output, input, elidable calls) or that need a value's
//! reference count (a store over an element that owns something).
//!
//! Compiled code receives a [`Ctx`] as its second argument and passes it on to the helpers
//! that need the state. Every helper is `extern "C"`, is called at an address the code holds
//! as a constant, and never unwinds: a failure is a return value, and the code then exits
//! before the instruction, so that the interpreter runs it and raises the error.

use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{AbiParam, Signature};
use cranelift_codegen::isa::TargetIsa;
use flowjit_runtime::abi::{self, Kind as MKind};
use flowjit_runtime::{ops, Value};

use crate::lang::{FuncId, Program};
use crate::state::{State, Steps};

/// What compiled code reaches through its second argument.
pub struct Ctx<'a> {
    /// The program (its functions, for elidable calls).
    pub program: &'a Program,
    /// The running state: its input and output, and its calls (for the depth of a call).
    pub state: &'a mut State,
    /// The `--max-steps` limit, for the budget of an elidable call.
    pub limit: Option<u64>,
    /// How large what `owned` holds is, in elements (one more for each list or array); the
    /// code reads it where an iteration ends, and exits there when it reaches
    /// [`MAX_OWNED`].
    pub made: u64,
    /// The values the code made (arrays and lists) or copied out of arrays (a list or an
    /// array element), each kept alive here until the code returns: the code's registers
    /// only borrow (`abi::unbox`), so that no register owns what it holds. The exit copies
    /// what the interpreter keeps (`abi::rebox`) before these are dropped.
    pub owned: Vec<Value>,
    /// How many lists and arrays the code has made (`--stats`).
    pub allocated: u64,
}

/// How large (in elements, see [`Ctx::made`]) what the code makes or copies out of arrays
/// may grow before it exits at the end of an iteration and lets it go: memory stays bounded
/// (about 256 KiB of elements, small enough to stay in the cache) in a loop that makes an
/// array on every iteration, for the cost of one exit and entry per this many.
pub const MAX_OWNED: u64 = 1 << 14;

impl Ctx<'_> {
    /// Keeps `v` alive until the code returns; its bits, as the code holds them.
    fn keep(&mut self, v: Value, kind: MKind) -> i64 {
        let bits = abi::unbox(&v, kind).expect("a value of the kind the code expects");
        let size = match &v {
            Value::List(l) => l.len(),
            Value::Array(a) => a.len(),
            _ => return bits,
        };
        self.owned.push(v);
        self.made += 1 + size as u64;
        bits
    }
}

/// An operation that allocates (`array`, `toarray`, `tolist`), on one or two operands (`b`
/// ignored for one): the new array's or list's address, kept alive in the context; 0 when
/// the operation fails (the code then exits before it and the interpreter raises).
///
/// # Safety
/// `ctx` is the code's context; `a` and `b` hold live values of kinds `a_kind` and `b_kind`.
pub unsafe extern "C" fn alloc(
    ctx: *mut Ctx,
    op: i64,
    a: i64,
    a_kind: i64,
    b: i64,
    b_kind: i64,
) -> i64 {
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { &mut *ctx };
    let op = flowjit_runtime::Op::ALL[op as usize];
    let made = unsafe {
        abi::with_boxed(a, kind_from(a_kind), |a| {
            if op.arity() == 1 {
                ops::apply1(op, a)
            } else {
                abi::with_boxed(b, kind_from(b_kind), |b| ops::apply2(op, a, b))
            }
        })
    };
    match made {
        Ok(v) => match abi::Kind::of(&v) {
            Some(kind @ (MKind::Array | MKind::List)) => {
                ctx.allocated += 1;
                ctx.keep(v, kind)
            }
            _ => 0,
        },
        Err(_) => 0,
    }
}

/// The operation's code for [`alloc`].
pub fn op_code(op: flowjit_runtime::Op) -> i64 {
    flowjit_runtime::Op::ALL
        .iter()
        .position(|o| *o == op)
        .expect("every operation is in the table") as i64
}

/// Keeps the list or array the code has just read out of an array alive until the code
/// returns: a later store may replace it in the array, which owned it.
///
/// # Safety
/// `ctx` is the code's context; `bits` holds a live value of kind `kind`.
pub unsafe extern "C" fn keep(ctx: *mut Ctx, bits: i64, kind: i64) {
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { &mut *ctx };
    let kind = kind_from(kind);
    let v = unsafe { abi::rebox(bits, kind) };
    ctx.keep(v, kind);
}

/// An elidable call in compiled code: the function, and the kinds of its arguments and of
/// its result. Compiled code holds its address.
#[derive(Clone, Debug)]
pub struct CallSite {
    /// The function.
    pub func: FuncId,
    /// The kind of each argument.
    pub args: Vec<MKind>,
    /// The kind of the result the trace expects.
    pub result: MKind,
    /// The type of the result the trace expects.
    pub ty: crate::trace::Ty,
}

/// A kind as a helper's argument.
pub fn kind_code(kind: MKind) -> i64 {
    match kind {
        MKind::Int => 0,
        MKind::Atom => 1,
        MKind::List => 2,
        MKind::Array => 3,
    }
}

/// The kind whose [`kind_code`] is `code`.
pub fn kind_from(code: i64) -> MKind {
    match code {
        0 => MKind::Int,
        1 => MKind::Atom,
        2 => MKind::List,
        _ => MKind::Array,
    }
}

/// `print(v)`.
///
/// # Safety
/// `ctx` is the code's context; `bits` holds a live value of kind `kind` (`abi::rebox`).
pub unsafe extern "C" fn print(ctx: *mut Ctx, bits: i64, kind: i64) {
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { &mut *ctx };
    unsafe { abi::with_boxed(bits, kind_from(kind), |v| ctx.state.io.print(v)) }
}

/// `putchar(byte)`: the code has checked that it is a byte.
///
/// # Safety
/// `ctx` is the code's context.
pub unsafe extern "C" fn putchar(ctx: *mut Ctx, byte: i64) {
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { &mut *ctx };
    ctx.state.io.putchar(byte as u8);
}

/// `getchar()`.
///
/// # Safety
/// `ctx` is the code's context.
pub unsafe extern "C" fn getchar(ctx: *mut Ctx) -> i64 {
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { &mut *ctx };
    ctx.state.io.getchar()
}

/// `setitem(array, index, v)` where the code's own store does not do: the element replaced
/// owns a reference (a list, an array or a big integer), or `v` is a list or an array. The
/// code has checked the index.
///
/// # Safety
/// `array` is the address of a live array, `index` one of its indices, `bits` a live value
/// of kind `kind`.
pub unsafe extern "C" fn setitem(array: i64, index: i64, bits: i64, kind: i64) {
    // SAFETY: the caller's guarantee.
    unsafe {
        abi::with_boxed(array, MKind::Array, |a| {
            let v = abi::rebox(bits, kind_from(kind));
            let stored = ops::setitem(a, &Value::Int(index), v);
            debug_assert!(stored.is_ok(), "the code checked the index");
        })
    }
}

/// An elidable call: runs the function of `site` on the `args` (one word per argument)
/// within `budget` operations, writes the result's bits after the arguments, and returns
/// the operations it used; -1 when the call fails, runs out of budget or gives a result of
/// another type (the code then exits before it, and the interpreter makes the call).
///
/// # Safety
/// `ctx` is the code's context, `site` a call site of the code, `args` holds a live value of
/// each argument's kind and has room for one word more.
pub unsafe extern "C" fn call_pure(
    ctx: *mut Ctx,
    site: *const CallSite,
    args: *mut i64,
    budget: i64,
) -> i64 {
    // SAFETY: the caller's guarantee.
    let (ctx, site) = unsafe { (&mut *ctx, &*site) };
    let values: Vec<Value> = site
        .args
        .iter()
        .enumerate()
        // SAFETY: the caller's guarantee.
        .map(|(k, kind)| unsafe { abi::rebox(*args.add(k), *kind) })
        .collect();
    let mut steps = Steps {
        limit: ctx.limit,
        left: budget.max(0) as u64,
    };
    let (program, state) = (ctx.program, &*ctx.state);
    let made =
        crate::trace::call_elidable(program, state, site.func, values, &mut steps, 0, 0, site.ty);
    let Some(v) = made else {
        return -1;
    };
    if abi::Kind::of(&v) != Some(site.result) {
        return -1;
    }
    // A list or an array the call returns is kept alive in the context.
    let bits = ctx.keep(v, site.result);
    // SAFETY: the caller's guarantee of room.
    unsafe { *args.add(site.args.len()) = bits };
    budget - steps.left as i64
}

/// The signature of a helper taking `params` words and returning `ret` words (0 or 1).
pub fn signature(isa: &dyn TargetIsa, params: usize, ret: bool) -> Signature {
    let mut sig = Signature::new(isa.default_call_conv());
    for _ in 0..params {
        sig.params.push(AbiParam::new(I64));
    }
    if ret {
        sig.returns.push(AbiParam::new(I64));
    }
    sig
}
