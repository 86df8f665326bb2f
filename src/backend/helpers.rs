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
use flowjit_runtime::abi::{self, Repr};
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
    /// How many values `owned` holds, for machine code to read ([`release`]).
    pub kept: u64,
    /// How many lists and arrays the code has made (`--stats`).
    pub allocated: u64,
    /// Per variable, the integer of any size a linked exit left in the mirror for it: the
    /// mirror holds such an integer as the address of a frame's slot or of its box here,
    /// which only exits write ([`mirror_num`]).
    pub nums: Vec<Value>,
    /// How many variables the mirror holds: `nums`' length, made when a linked exit first
    /// needs it.
    pub mirror: usize,
    /// The result of the `call` the code exits after, which it could not go on with
    /// ([`call`]): the exit writes it into the call's variable.
    pub called: Option<Value>,
    /// How the program ended inside a `call` the code made: `print_and_stop` of a value,
    /// or an error. The code exited there, and the run ends.
    pub ended: Option<Result<Value, crate::interp::RuntimeError>>,
    /// How many `call`s the code made through [`call`] (`--stats`); those it made directly
    /// count in `entered` only.
    pub calls: u64,
    /// How many of those entered a function trace's machine code ([`super::nested`]).
    pub entered: u64,
    /// How many of those entered it through [`call`] rather than directly.
    pub helped: u64,
    /// Whether the code runs inside such a call (not entered by the driver).
    pub nested: bool,
    /// The function traces' code a `call` enters ([`super::nested`]), if any.
    pub functions: Option<&'a dyn super::nested::Functions>,
    /// The call depth (`State::depth`) of the code the driver entered: code whose call
    /// entered a function trace's code directly runs deeper.
    pub base_depth: usize,
    /// The depth `State::depth` may not reach in calls made directly from machine code:
    /// the language's limit less the calls the interpreter holds in `State::calls`.
    pub max_depth: i64,
    /// The lowest address of the native stack a direct call's register buffer may have:
    /// a call that would go lower is made through [`call`], which leaves it to the
    /// interpreter ([`super::nested::STACK_RESERVE`]).
    pub stack_floor: u64,
    /// Non-zero when the driver has something to do for what calls found
    /// ([`super::nested::Functions::pending`]): a direct call then ends through
    /// [`call_finish`], and the outermost code exits after it.
    pub attend: u64,
}

/// How large (in elements, see [`Ctx::made`]) what the code makes or copies out of arrays
/// may grow before it exits at the end of an iteration and lets it go: memory stays bounded
/// (about 256 KiB of elements, small enough to stay in the cache) in a loop that makes an
/// array on every iteration, for the cost of one exit and entry per this many.
pub const MAX_OWNED: u64 = 1 << 14;

impl<'a> Ctx<'a> {
    /// A context for code entered by the runtime on `state`, under the `--max-steps`
    /// `limit`, whose `call`s enter the code `functions` finds; nothing made or kept yet.
    pub fn new(
        program: &'a Program,
        state: &'a mut State,
        limit: Option<u64>,
        functions: Option<&'a dyn super::nested::Functions>,
    ) -> Ctx<'a> {
        let base_depth = state.depth;
        let max_depth = crate::state::MAX_CALL_DEPTH.saturating_sub(state.calls.len()) as i64;
        Ctx {
            program,
            state,
            limit,
            made: 0,
            owned: Vec::new(),
            kept: 0,
            allocated: 0,
            nums: Vec::new(),
            mirror: 0,
            called: None,
            ended: None,
            calls: 0,
            entered: 0,
            helped: 0,
            nested: false,
            functions,
            base_depth,
            max_depth,
            stack_floor: stack_floor(),
            attend: 0,
        }
    }

    /// The byte offset of [`Ctx::state`], for machine code.
    pub const STATE: i32 = std::mem::offset_of!(Ctx<'static>, state) as i32;
    /// The byte offset of `State::depth` in the state, for machine code.
    pub const DEPTH: i32 = std::mem::offset_of!(State, depth) as i32;
    /// The byte offset of [`Ctx::max_depth`], for machine code.
    pub const MAX_DEPTH: i32 = std::mem::offset_of!(Ctx<'static>, max_depth) as i32;
    /// The byte offset of [`Ctx::stack_floor`], for machine code.
    pub const STACK_FLOOR: i32 = std::mem::offset_of!(Ctx<'static>, stack_floor) as i32;
    /// The byte offset of [`Ctx::kept`], for machine code.
    pub const KEPT: i32 = std::mem::offset_of!(Ctx<'static>, kept) as i32;
    /// The byte offset of [`Ctx::attend`], for machine code.
    pub const ATTEND: i32 = std::mem::offset_of!(Ctx<'static>, attend) as i32;
    /// The byte offset of [`Ctx::entered`], for machine code.
    pub const ENTERED: i32 = std::mem::offset_of!(Ctx<'static>, entered) as i32;

    /// Whether the code running is the one the driver entered, not one a call entered.
    pub fn outermost(&self) -> bool {
        !self.nested && self.state.depth == self.base_depth
    }

    /// Keeps `v` alive until the code returns; its bits, as the code holds them.
    fn keep(&mut self, v: Value, kind: Repr) -> i64 {
        let bits = abi::unbox(&v, kind).expect("a value of the kind the code expects");
        if let Some(size) = weight(&v) {
            self.owned.push(v);
            self.kept += 1;
            self.made += size;
        }
        bits
    }

    /// Gives the code a call's result `v`, of kind `kind`, at `out`: its bits, kept alive;
    /// or, for an integer the code holds at any size, the value itself, in the box whose
    /// address the code left at `out` (the call's own, [`Lower::new_box`]).
    ///
    /// # Safety
    /// `out` is writable, and for [`Repr::Num`] holds the address of a box of the code's.
    pub(crate) unsafe fn give(&mut self, v: Value, kind: Repr, out: *mut i64) {
        if kind == Repr::Num {
            // SAFETY: the caller's guarantee.
            unsafe { *(*out as *mut Value) = v };
            return;
        }
        let bits = self.keep(v, kind);
        // SAFETY: the caller's guarantee.
        unsafe { *out = bits };
    }
}

/// The lowest address a direct call's register buffer may have on this thread's native
/// stack ([`Ctx::stack_floor`]): [`STACK_RESERVE`](super::nested::STACK_RESERVE) above its
/// end; with no end known, none (every call goes through [`call`]).
fn stack_floor() -> u64 {
    let here = 0u8;
    let at = std::ptr::addr_of!(here) as u64;
    match stacker::remaining_stack() {
        Some(left) => at.saturating_sub(left as u64) + super::nested::STACK_RESERVE as u64,
        None => u64::MAX,
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
        Ok(v) => match abi::Repr::of(&v) {
            Some(kind @ (Repr::Array | Repr::List)) => {
                ctx.allocated += 1;
                ctx.keep(v, kind)
            }
            _ => 0,
        },
        Err(_) => 0,
    }
}

/// `array(n, k)` of a 64-bit integer `k`, as [`alloc`] makes it without going through the
/// operations' table: the new array, kept alive in the context; 0 when `n` is negative or
/// too large (the code then exits before the operation, and the interpreter fails there).
///
/// # Safety
/// `ctx` is the code's context.
pub unsafe extern "C" fn new_ints(ctx: *mut Ctx, n: i64, k: i64) -> i64 {
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { &mut *ctx };
    if !(0..=flowjit_runtime::array::MAX_ARRAY_LEN as i64).contains(&n) {
        return 0;
    }
    let made = Value::Array(flowjit_runtime::Array::ints(n as usize, k));
    ctx.allocated += 1;
    ctx.keep(made, Repr::Array)
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

/// Element `index` of `list` (a list or an array, of kind `kind`) for code that holds it
/// as an integer of any size: into `out`, the read's own box, and 1; 0 when the index is
/// outside or the element is not an integer (the code then exits before the read, and the
/// interpreter makes it).
///
/// # Safety
/// `out` is a box of the code's; `list` holds a live value of kind `kind`.
pub unsafe extern "C" fn num_item(out: *mut Value, list: i64, kind: i64, index: i64) -> i64 {
    // SAFETY: the caller's guarantee.
    let item = unsafe {
        abi::with_boxed(list, kind_from(kind), |l| {
            ops::apply2(flowjit_runtime::Op::Readlist, l, &Value::Int(index))
        })
    };
    match item {
        Ok(v @ (Value::Int(_) | Value::Big(_))) => {
            // SAFETY: the caller's guarantee.
            unsafe { *out = v };
            1
        }
        _ => 0,
    }
}

/// An elidable call in compiled code: the function, and the kinds of its arguments and of
/// its result. Compiled code holds its address.
#[derive(Clone, Debug)]
pub struct CallSite {
    /// The function.
    pub func: FuncId,
    /// The kind of each argument.
    pub args: Vec<Repr>,
    /// The kind of the result the trace expects.
    pub result: Repr,
    /// The type of the result the trace expects.
    pub ty: crate::trace::Ty,
    /// For a `call` (not an elidable one): the call statement it was recorded from, and how
    /// many calls the trace inlined around it there.
    pub call: Option<(crate::state::Position, usize)>,
}

impl CallSite {
    /// The values of the call's arguments, one word each at `args`.
    ///
    /// # Safety
    /// `args` holds a live value of each argument's kind.
    pub(crate) unsafe fn arguments(&self, args: *const i64) -> Vec<Value> {
        (self.args.iter().enumerate())
            // SAFETY: the caller's guarantee.
            .map(|(k, kind)| unsafe { abi::rebox(*args.add(k), *kind) })
            .collect()
    }

    /// Whether the call's result is one the code can go on with: of the type recorded, and
    /// of the kind the code holds.
    pub(crate) fn accepts(&self, v: &Value) -> bool {
        let held = match v {
            Value::Int(_) | Value::Big(_) if self.result == Repr::Num => Some(Repr::Num),
            v => abi::Repr::of(v),
        };
        self.ty.admits(v) && held == Some(self.result)
    }
}

/// A kind as a helper's argument.
pub fn kind_code(kind: Repr) -> i64 {
    match kind {
        Repr::Int => 0,
        Repr::Atom => 1,
        Repr::List => 2,
        Repr::Array => 3,
        Repr::Num => 4,
    }
}

/// The kind whose [`kind_code`] is `code`.
pub fn kind_from(code: i64) -> Repr {
    match code {
        0 => Repr::Int,
        1 => Repr::Atom,
        2 => Repr::List,
        3 => Repr::Array,
        _ => Repr::Num,
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
    // SAFETY: the caller's guarantee: the array outlives the store (what the code borrows
    // it from holds it), and the value's reference taken here is the array's.
    let (array, v) = unsafe {
        (
            &*(array as *const flowjit_runtime::Array),
            abi::rebox(bits, kind_from(kind)),
        )
    };
    let stored = array.set(index as usize, v);
    debug_assert!(stored, "the code checked the index");
}

/// An elidable call: runs the function of `site` on the `args` (one word per argument)
/// within `budget` operations, writes the result's bits after the arguments, and returns
/// the operations it used; -1 when the call fails, runs out of budget or gives a result of
/// another type (the code then exits before it, and the interpreter makes the call).
///
/// # Safety
/// `ctx` is the code's context, `site` a call site of the code, `args` holds a live value of
/// each argument's kind and has room for one word more (holding the address of the
/// call's box when its result is an integer of any size).
pub unsafe extern "C" fn call_pure(
    ctx: *mut Ctx,
    site: *const CallSite,
    args: *mut i64,
    budget: i64,
) -> i64 {
    // SAFETY: the caller's guarantee.
    let (ctx, site) = unsafe { (&mut *ctx, &*site) };
    // SAFETY: the caller's guarantee.
    let values = unsafe { site.arguments(args) };
    let mut steps = Steps {
        limit: ctx.limit,
        left: budget.max(0) as u64,
    };
    let (program, state) = (ctx.program, &*ctx.state);
    // A result of another kind than the code holds is a call given up too, whose stores are
    // undone (`trace::call_elidable`).
    let accept = |v: &Value| site.accepts(v);
    let made =
        crate::trace::call_elidable(program, state, site.func, values, &mut steps, 0, 0, accept);
    let Some(v) = made else {
        return -1;
    };
    // A list or an array the call returns is kept alive in the context.
    // SAFETY: the caller's guarantee of room, and of a box there for an integer of any size.
    unsafe { ctx.give(v, site.result, args.add(site.args.len())) };
    budget - steps.left as i64
}

/// A call not inlined (`call`): runs the function of `site` on the `args` (one word per
/// argument) as the interpreter runs it, on the running state, and writes the result's bits
/// after the arguments: 0. When the result is not of the kind the code holds, the call's
/// exit writes it into the call's variable ([`Ctx::called`]); when the program ended inside
/// the call, the run ends ([`Ctx::ended`]): 1, and the code exits after the call. Only code
/// that counts no steps makes calls (`Unsupported::CountedCall`).
///
/// # Safety
/// `ctx` is the code's context, `site` a `call`'s site of the code, `args` holds a live value
/// of each argument's kind and has room for one word more (holding the address of the
/// call's box when its result is an integer of any size).
pub unsafe extern "C" fn call(ctx: *mut Ctx, site: *const CallSite, args: *mut i64) -> i64 {
    // SAFETY: the caller's guarantee.
    let (ctx, site) = unsafe { (&mut *ctx, &*site) };
    // The driver's: the callee's function trace, if it has machine code to enter.
    if let Some(functions) = ctx.functions {
        // SAFETY: the caller's guarantee.
        return unsafe { functions.call(ctx, site, args) };
    }
    let (at, inlined) = site.call.expect("a call's site");
    // SAFETY: the caller's guarantee.
    let values = unsafe { site.arguments(args) };
    let mut steps = Steps::new(None);
    ctx.calls += 1;
    let accept = |v: &Value| site.accepts(v);
    let (program, state) = (ctx.program, &mut *ctx.state);
    let called = crate::trace::run::call(
        program, state, site.func, values, at, inlined, &mut steps, 0, 0, 0, accept,
    );
    match called {
        crate::trace::run::Called::Returned(v) => {
            // SAFETY: the caller's guarantee of room, and of a box there for an integer of
            // any size.
            unsafe { ctx.give(v, site.result, args.add(site.args.len())) };
            0
        }
        crate::trace::run::Called::Exits(v) => {
            ctx.called = Some(v);
            1
        }
        crate::trace::run::Called::Ended(end) => {
            ctx.ended = Some(end);
            1
        }
    }
}

/// The end of a `call` machine code made directly into its function trace's code
/// ([`super::nested::FnCell`]) that did not return a value of the kind the site holds: the
/// callee's code returned `returned`, its register buffer at `regs`, and the interpreter
/// finishes the call from there ([`super::nested::Entry::finish_direct`]). Returns as
/// [`call`] does.
///
/// # Safety
/// As [`call`]'s; `regs` is the callee's register buffer as its code left it.
pub unsafe extern "C" fn call_finish(
    ctx: *mut Ctx,
    site: *const CallSite,
    args: *mut i64,
    regs: *const i64,
    returned: i64,
) -> i64 {
    // SAFETY: the caller's guarantee.
    let (ctx, site) = unsafe { (&mut *ctx, &*site) };
    let functions = ctx
        .functions
        .expect("code that calls function traces directly runs with the driver's");
    // SAFETY: the caller's guarantee.
    unsafe { functions.finish(ctx, site, args, regs, returned) }
}

/// What a list or an array counts for in [`Ctx::made`]: one more than its elements; `None`
/// for other values, which [`Ctx::owned`] does not keep.
fn weight(v: &Value) -> Option<u64> {
    match v {
        Value::List(l) => Some(1 + l.len() as u64),
        Value::Array(a) => Some(1 + a.len() as u64),
        _ => None,
    }
}

/// Lets go of what the code kept alive since `owned` held `mark` values: what a call made
/// directly kept, which nothing borrows once it has returned a value that borrows nothing
/// (an integer, an atom). Keeps a recursion that reads arrays out of arrays from holding
/// every one it read until the outermost code returns.
///
/// # Safety
/// `ctx` is the code's context; nothing the code still uses borrows what was kept after
/// `mark`.
pub unsafe extern "C" fn release(ctx: *mut Ctx, mark: u64) {
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { &mut *ctx };
    let mark = mark as usize;
    for v in ctx.owned.drain(mark..) {
        ctx.made = ctx.made.saturating_sub(weight(&v).unwrap_or(0));
    }
    ctx.kept = mark as u64;
}

/// As [`release`], for a call that returned a list or an array, `bits` of kind `kind`,
/// which may be among what the callee kept: the code keeps one reference to it, taken
/// before the others go. Keeps a recursion that builds a tree of arrays from holding every
/// node it made until the outermost code returns.
///
/// # Safety
/// As [`release`]'s, but for the value `bits`, a live value of kind `kind`.
pub unsafe extern "C" fn release_keeping(ctx: *mut Ctx, mark: u64, bits: i64, kind: i64) {
    let kind = kind_from(kind);
    // SAFETY: the caller's guarantee.
    let owned = unsafe { &(*ctx).owned };
    // The first value the callee kept is the one it returns (the node a recursion that
    // builds a tree made first): it stays where it is, the others go.
    if (owned.get(mark as usize)).is_some_and(|v| abi::unbox(v, kind) == Some(bits)) {
        // SAFETY: the caller's guarantee; the value returned is kept.
        unsafe { release(ctx, mark + 1) };
        return;
    }
    // SAFETY: the caller's guarantee: a live value, alive until the release below.
    let v = unsafe { abi::rebox(bits, kind) };
    // SAFETY: the caller's guarantee.
    unsafe { release(ctx, mark) };
    // SAFETY: the caller's guarantee.
    unsafe { &mut *ctx }.keep(v, kind);
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

/// A box machine code owns: a [`Value`] holding an integer of any size, at an address
/// that does not move while the code that writes it lives. The code holds an integer of kind
/// `Num` as the address of such a box (or of a frame's slot); only helpers read or write
/// what is inside.
pub type NumBox = std::cell::UnsafeCell<Value>;

/// The boxes of a function's code, each allocated on its own: the code holds their
/// addresses, which must not move as more are made.
#[allow(clippy::vec_box)]
#[derive(Default)]
pub struct Boxes(Vec<Box<NumBox>>);

impl Boxes {
    /// A new box holding `v`, kept with the others; its address.
    pub fn make(&mut self, v: Value) -> *mut Value {
        let bx = Box::new(std::cell::UnsafeCell::new(v));
        let at = bx.get();
        self.0.push(bx);
        at
    }
}

/// Leaves the integer of any size at `bits` (a box of the code, or of the context) in
/// variable `slot`'s box of the context, and returns that box's address, for the mirror: an
/// exit that goes on in another tree cannot leave the address of a box of its code there,
/// which the code may write again before the runtime reads the mirror back. With `take`
/// (non-zero) the value is moved (the two boxes exchange what they hold: the digits come
/// back to the code's box, which its arithmetic reuses), otherwise copied.
///
/// # Safety
/// `ctx` is the running code's context, with a box for every variable of the frame; `bits`
/// is the address of a live integer, which `take` allows to replace.
pub unsafe extern "C" fn mirror_num(ctx: *mut Ctx, slot: i64, bits: i64, take: i64) -> i64 {
    // SAFETY: the caller's guarantee.
    let ctx = unsafe { &mut *ctx };
    if ctx.nums.is_empty() {
        // Made once, at its full length: the boxes' addresses stay put.
        ctx.nums = vec![Value::Int(0); ctx.mirror];
    }
    let at: *mut Value = &mut ctx.nums[slot as usize];
    let from = bits as *mut Value;
    if at != from {
        // SAFETY: both are live, distinct integers; `take` allows writing `from`.
        unsafe {
            if take != 0 {
                std::ptr::swap(at, from);
            } else {
                *at = (*from).clone();
            }
        }
    }
    at as i64
}

/// `*dst = op(a, b)` on integers, one of them at least of kind `Num` (`b` ignored for a
/// unary operation); 1 when done, 0 when the operation fails (the code then exits before
/// it, and the interpreter raises the error). An addition or a subtraction of a 64-bit
/// integer to a big one reuses the digits `dst` already owns: a loop's accumulator past 64
/// bits allocates nothing from one iteration to the next.
///
/// # Safety
/// `dst` is a box of the code, no operand's address; `a` and `b` hold live values of kinds
/// `a_kind` and `b_kind` (`abi::rebox`).
pub unsafe extern "C" fn num_arith(
    op: i64,
    dst: *mut Value,
    a: i64,
    a_kind: i64,
    b: i64,
    b_kind: i64,
) -> i64 {
    let op = flowjit_runtime::Op::ALL[op as usize];
    // SAFETY: the caller's guarantee: `dst` is the code's own box, aliasing no operand.
    let dst = unsafe { &mut *dst };
    // A big integer plus or minus a 64-bit one, a loop's accumulator's usual step: made in
    // the digits `dst` alone owns, without the general case's closures (a big accumulator
    // spent as long getting to its sum as making it). Anything else, a box of kind `Num`
    // that holds a small integer included, goes the general way.
    let (num, int) = (kind_code(Repr::Num), kind_code(Repr::Int));
    let big_small = match op {
        flowjit_runtime::Op::Add | flowjit_runtime::Op::Sub if (a_kind, b_kind) == (num, int) => {
            Some((a, b))
        }
        flowjit_runtime::Op::Add if (a_kind, b_kind) == (int, num) => Some((b, a)),
        _ => None,
    };
    if let Some((big, small)) = big_small {
        // SAFETY: the caller's guarantee: a live integer.
        if in_place(op, dst, unsafe { &*(big as *const Value) }, small) {
            return 1;
        }
    }
    let made = unsafe {
        abi::with_boxed(a, kind_from(a_kind), |a| {
            if op.arity() == 1 {
                return ops::apply1(op, a);
            }
            abi::with_boxed(b, kind_from(b_kind), |b| ops::apply2(op, a, b))
        })
    };
    match made {
        Ok(v) => {
            *dst = v;
            1
        }
        Err(_) => 0,
    }
}

/// `op(a, b)` (`b` ignored for a unary operation) for an operation whose result is a
/// 64-bit integer (a comparison, `not`), one operand at least of kind `Num`: the result, or
/// -1 when the operation fails (the code then exits before it).
///
/// # Safety
/// `a` and `b` hold live values of kinds `a_kind` and `b_kind` (`abi::rebox`).
pub unsafe extern "C" fn num_test(op: i64, a: i64, a_kind: i64, b: i64, b_kind: i64) -> i64 {
    let op = flowjit_runtime::Op::ALL[op as usize];
    // SAFETY: the caller's guarantee.
    if let Some(r) = unsafe { compare_ints(op, (a, a_kind), (b, b_kind)) } {
        return r;
    }
    let made = unsafe {
        abi::with_boxed(a, kind_from(a_kind), |a| {
            if op.arity() == 1 {
                return ops::apply1(op, a);
            }
            abi::with_boxed(b, kind_from(b_kind), |b| ops::apply2(op, a, b))
        })
    };
    match made {
        Ok(Value::Int(n)) => n,
        _ => -1,
    }
}

/// A comparison of two integers, each a 64-bit one or a box (a loop's test against a bound
/// past 64 bits), made without the general way's copies: 1 or 0, or `None` for another
/// operation or operand.
///
/// # Safety
/// As for [`num_test`].
unsafe fn compare_ints(op: flowjit_runtime::Op, a: (i64, i64), b: (i64, i64)) -> Option<i64> {
    use flowjit_runtime::Op;
    use num_bigint::Sign;
    use std::cmp::Ordering;
    let (num, int) = (kind_code(Repr::Num), kind_code(Repr::Int));
    // An integer past 64 bits (never one within them) against a 64-bit one: its sign.
    let beyond = |x: &num_bigint::BigInt| match x.sign() {
        Sign::Minus => Ordering::Less,
        _ => Ordering::Greater,
    };
    let word = |(bits, kind): (i64, i64)| -> Option<Result<i64, &num_bigint::BigInt>> {
        if kind == int {
            return Some(Ok(bits));
        }
        if kind != num {
            return None;
        }
        // SAFETY: the caller's guarantee: a live integer in its box.
        match unsafe { &*(bits as *const Value) } {
            Value::Int(n) => Some(Ok(*n)),
            Value::Big(x) => Some(Err(x)),
            _ => None,
        }
    };
    let order = match (word(a)?, word(b)?) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        (Err(x), Err(y)) => x.cmp(y),
        (Err(x), Ok(_)) => beyond(x),
        (Ok(_), Err(y)) => beyond(y).reverse(),
    };
    let holds = match op {
        Op::Lt => order.is_lt(),
        Op::Le => order.is_le(),
        Op::Gt => order.is_gt(),
        Op::Ge => order.is_ge(),
        Op::Eq => order.is_eq(),
        Op::Ne => order.is_ne(),
        _ => return None,
    };
    Some(holds as i64)
}

/// Moves integers into boxes of the code as one parallel assignment: `moves` holds `n`
/// triples (the box's address, the value's bits, its kind code), and every value is read
/// before any box is written (a loop's parameters exchanged read each other's boxes).
///
/// # Safety
/// `moves` holds `n` such triples; each box is the code's own, each value a live integer of
/// its kind.
pub unsafe extern "C" fn num_moves(moves: *const i64, n: i64) {
    // SAFETY: the caller's guarantee.
    let moves = unsafe { std::slice::from_raw_parts(moves, 3 * n as usize) };
    if let [dst, bits, kind] = *moves {
        if dst != bits || kind_from(kind) != Repr::Num {
            // SAFETY: as above; the value is read before the box is written.
            unsafe {
                let v = abi::rebox(bits, kind_from(kind));
                *(dst as *mut Value) = v;
            }
        }
        return;
    }
    // SAFETY: as above.
    let values: Vec<Value> = moves
        .chunks(3)
        .map(|m| unsafe { abi::rebox(m[1], kind_from(m[2])) })
        .collect();
    for (m, v) in moves.chunks(3).zip(values) {
        // SAFETY: as above.
        unsafe { *(m[0] as *mut Value) = v };
    }
}

/// `x + y` or `x - y` of a big integer `x` and a 64-bit `y` into `dst`, reusing its digits
/// when it alone owns them; whether it was done.
fn in_place(op: flowjit_runtime::Op, dst: &mut Value, x: &Value, y: i64) -> bool {
    use flowjit_runtime::Op;
    use num_traits::ToPrimitive;
    let (Value::Big(d), Value::Big(x)) = (&mut *dst, x) else {
        return false;
    };
    let Some(d) = std::rc::Rc::get_mut(d) else {
        return false;
    };
    d.clone_from(x);
    match op {
        Op::Add => *d += y,
        Op::Sub => *d -= y,
        _ => unreachable!("only sums and differences are made in place"),
    }
    if let Some(small) = d.to_i64() {
        *dst = Value::Int(small);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowjit_runtime::Op;
    use num_bigint::BigInt;

    fn big(digits: &str) -> Value {
        Value::from_bigint(digits.parse::<BigInt>().expect("digits"))
    }

    fn arith(op: Op, dst: &mut Value, a: &Value, b: &Value) -> i64 {
        let word = |v: &Value| match v {
            Value::Int(n) => (*n, kind_code(Repr::Int)),
            v => (v as *const Value as i64, kind_code(Repr::Num)),
        };
        let ((a, ak), (b, bk)) = (word(a), word(b));
        // SAFETY: `dst` aliases neither operand; both are live integers.
        unsafe { num_arith(op_code(op), dst, a, ak, b, bk) }
    }

    #[test]
    fn a_big_sum_reuses_the_digits_its_box_alone_owns() {
        let a = big("100000000000000000000000");
        let mut dst = big("5");
        assert_eq!(arith(Op::Add, &mut dst, &a, &Value::Int(7)), 1);
        assert_eq!(dst, big("100000000000000000000007"));
        let Value::Big(rc) = &dst else {
            panic!("a big sum")
        };
        let before = std::rc::Rc::as_ptr(rc);
        // Its box alone owns it: the next sum is made in place.
        assert_eq!(arith(Op::Sub, &mut dst, &a, &Value::Int(-9)), 1);
        assert_eq!(dst, big("100000000000000000000009"));
        let Value::Big(rc) = &dst else {
            panic!("a big difference")
        };
        assert_eq!(std::rc::Rc::as_ptr(rc), before);
        // Shared with the frame, it is not written: a new value.
        let kept = dst.clone();
        assert_eq!(arith(Op::Add, &mut dst, &Value::Int(1), &a), 1);
        assert_eq!(dst, big("100000000000000000000001"));
        assert_eq!(kept, big("100000000000000000000009"));
        // Back within 64 bits, in its canonical form.
        let near = big("9223372036854775808");
        assert_eq!(arith(Op::Sub, &mut dst, &near, &Value::Int(1)), 1);
        assert_eq!(dst, Value::Int(i64::MAX));
    }

    #[test]
    fn a_failing_operation_leaves_its_box_and_says_so() {
        let a = big("100000000000000000000000");
        let mut dst = Value::Int(3);
        assert_eq!(arith(Op::Div, &mut dst, &a, &Value::Int(0)), 0);
        assert_eq!(dst, Value::Int(3));
        assert_eq!(arith(Op::Mod, &mut dst, &a, &Value::Int(7)), 1);
        assert_eq!(
            dst,
            Value::Int(100000000000000000000000i128.rem_euclid(7) as i64)
        );
    }

    #[test]
    fn an_exit_moves_or_copies_a_big_integer_into_the_contexts_box() {
        let source = "start:\n    print_and_stop(0)\n";
        let (_, program) = crate::lang::load(source, crate::lang::Syntax::Fg).expect("parses");
        let mut state = State::with_frame(crate::state::frame_with(&program, &[]));
        let mut ctx = Ctx::new(&program, &mut state, None, None);
        ctx.nums = vec![Value::Int(0), Value::Int(7)];
        let x = big("100000000000000000000000");
        let mut code_box = x.clone();
        let p = &mut code_box as *mut Value as i64;
        // Copied: the code's box keeps it; the address is the context's box.
        // SAFETY: every address is a live integer's.
        let at = unsafe { mirror_num(&mut ctx, 0, p, 0) };
        assert_eq!(at, &ctx.nums[0] as *const Value as i64);
        assert_eq!((&ctx.nums[0], &code_box), (&x, &x));
        // Moved: the boxes exchange what they hold.
        // SAFETY: as above.
        unsafe { mirror_num(&mut ctx, 1, p, 1) };
        assert_eq!((&ctx.nums[1], &code_box), (&x, &Value::Int(7)));
        // Another variable given the same value copies it from where it was moved.
        let there = &ctx.nums[1] as *const Value as i64;
        ctx.nums[0] = Value::Int(0);
        // SAFETY: as above.
        unsafe { mirror_num(&mut ctx, 0, there, 0) };
        assert_eq!((&ctx.nums[0], &ctx.nums[1]), (&x, &x));
    }

    #[test]
    fn moves_read_every_value_before_writing_a_box() {
        let (x, y) = (
            big("100000000000000000000000"),
            big("200000000000000000000000"),
        );
        let mut boxes = [x.clone(), y.clone()];
        let (p, q) = (&mut boxes[0] as *mut Value, &mut boxes[1] as *mut Value);
        let num = kind_code(Repr::Num);
        // (p, q) = (q, p).
        let moves = [p as i64, q as i64, num, q as i64, p as i64, num];
        // SAFETY: both boxes are live integers.
        unsafe { num_moves(moves.as_ptr(), 2) };
        assert_eq!(boxes, [y, x]);
    }

    #[test]
    fn comparisons_of_boxed_integers_agree_with_the_operation_table() {
        use flowjit_runtime::ops::apply2;
        let values = [
            big("-100000000000000000000000"),
            Value::Int(i64::MIN),
            Value::Int(-1),
            Value::Int(0),
            Value::Int(i64::MAX),
            big("100000000000000000000000"),
            big("100000000000000000000001"),
        ];
        let (num, int) = (kind_code(Repr::Num), kind_code(Repr::Int));
        let ops = [Op::Lt, Op::Le, Op::Gt, Op::Ge, Op::Eq, Op::Ne];
        for a in &values {
            for b in &values {
                // Each operand boxed, and a 64-bit one also as it is.
                let mut words = vec![(
                    (a as *const Value as i64, num),
                    (b as *const Value as i64, num),
                )];
                if let Value::Int(n) = b {
                    words.push(((a as *const Value as i64, num), (*n, int)));
                }
                if let Value::Int(n) = a {
                    words.push(((*n, int), (b as *const Value as i64, num)));
                }
                for op in ops {
                    let Ok(Value::Int(want)) = apply2(op, a, b) else {
                        panic!("a comparison of integers")
                    };
                    for ((x, xk), (y, yk)) in &words {
                        // SAFETY: every word is a live integer of its kind.
                        let got = unsafe { num_test(op_code(op), *x, *xk, *y, *yk) };
                        assert_eq!(got, want, "{op:?} {a:?} {b:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn sums_of_big_and_64_bit_integers_made_in_place_agree_with_the_operation_table() {
        use flowjit_runtime::ops::apply2;
        let two = BigInt::from(2);
        let mut xs = Vec::new();
        for (bits, delta) in [
            (63, 0),
            (63, 1),
            (64, -1),
            (64, 0),
            (64, 1),
            (128, -1),
            (200, 3),
        ] {
            let x: BigInt = two.pow(bits) + delta;
            xs.push(Value::from_bigint(x.clone()));
            xs.push(Value::from_bigint(-x));
        }
        // One of many digits.
        xs.push(Value::from_bigint(two.pow(600) - 1));
        let ys = [
            0,
            1,
            -1,
            2,
            -2,
            12345,
            -12345,
            i64::MAX,
            i64::MIN,
            i64::MIN + 1,
        ];
        for x in xs.iter().filter(|x| matches!(x, Value::Big(_))) {
            for y in ys {
                for op in [Op::Add, Op::Sub] {
                    let want = apply2(op, x, &Value::Int(y)).expect("a sum");
                    // The destination alone owns digits of its own: made in place.
                    let mut dst = big("5000000000000000000000000000000");
                    assert_eq!(arith(op, &mut dst, x, &Value::Int(y)), 1);
                    assert_eq!(dst, want, "{x:?} {op:?} {y}");
                }
            }
        }
    }
}
