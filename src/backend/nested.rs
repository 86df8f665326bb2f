//! Calls between machine code: a `call` whose function has a function trace with machine
//! code runs that code, on a register buffer of its own, instead of the interpreter (PyPy's
//! `call_assembler`).
//!
//! The caller's code calls [`helpers::call`](super::helpers::call) as for any call; the
//! helper asks the driver's [`Functions`] for the callee's code, and [`Entry::call`] enters
//! it with the arguments in a fresh mirror (the callee's frame: its parameters, nothing
//! else), on the same state and a context of its own, then goes on by the exit it took:
//!
//! ```text
//!   exit at the function trace's end       the `return`'s operand, read from the snapshot
//!   (its `loop`, at the `return`)          or the mirror: the call's result
//!   any other exit (a guard, a call        the callee's frame rebuilt from the mirror and the
//!   it could not go on after, ...)         snapshot; the interpreter finishes the call
//! ```
//!
//! and gives the result to the caller's code as `helpers::call` does (a result of another
//! type makes the caller exit after the call, a program ended inside ends the run). The
//! interpreter's frame is not touched on the way in or at the end: the callee's frame
//! exists only when an exit needs it. The call depth counts the calls nested in machine
//! code (`State::depth`), so the depth limit is the interpreter's; a call that would reach
//! it, or that finds less than [`STACK_RESERVE`] of native stack left, is made by the
//! interpreter instead, which raises the error where it raises it. Only code that counts no
//! steps makes calls (`--max-steps` runs calls in the interpreter).

use std::cell::RefCell;

use flowjit_runtime::abi::{self, Repr};
use flowjit_runtime::Value;

use super::exit::{self, decode_exit, HOT, REFUSED, RETURNED, WRITTEN};
use super::helpers::{CallSite, Ctx};
use super::{Compiled, Trampoline};
use crate::interp::{self, Exit};
use crate::lang::{Operand, Program, Terminator};
use crate::state::{Frame, Position, State, Steps, MAX_CALL_DEPTH};
use crate::trace::{Opnd, Trace};

/// The native stack a call into machine code leaves for what runs below it: a call that
/// finds less is made by the interpreter, whose calls are data.
pub const STACK_RESERVE: usize = 1 << 20;

/// What finds the code a `call` enters: the driver's function traces.
pub trait Functions {
    /// Makes the `call` of `site` on `args` (one word per argument, room for the result
    /// after them, as [`helpers::call`](super::helpers::call) takes them): in the machine
    /// code of its function's trace, if it has code that the call may enter; otherwise
    /// counted towards the function's trace (recorded there once hot) and made by the
    /// interpreter, whose calls enter code that they may. What `helpers::call` returns.
    ///
    /// # Safety
    /// As [`helpers::call`](super::helpers::call)'s.
    unsafe fn call(&self, ctx: &mut Ctx, site: &CallSite, args: *mut i64) -> i64;

    /// Ends the `call` of `site` that machine code made directly into its function's
    /// code (through its [`FnCell`]), which returned `returned` with its register buffer
    /// at `regs` and did not give a value of the kind the site holds: as
    /// [`Entry::finish_direct`], what `helpers::call` returns.
    ///
    /// # Safety
    /// As [`helpers::call`](super::helpers::call)'s; `regs` is the buffer as the code left
    /// it, which was the code of a tree's function whose cell the driver published.
    unsafe fn finish(
        &self,
        ctx: &mut Ctx,
        site: &CallSite,
        args: *mut i64,
        regs: *const i64,
        returned: i64,
    ) -> i64;

    /// Whether a call of the function whose entry is `entry`, its frame `frame`, may have
    /// code to enter ([`Functions::call_frame`]).
    fn enters(&self, entry: crate::lang::BlockId, frame: &Frame) -> bool;

    /// Makes the call of the function whose entry is `entry`, which the interpreter has
    /// entered on `ctx`'s state, in its trace's code, if it has code that the call may
    /// enter ([`Entry::call_frame`]): its result, or how the program ended; `None`, having
    /// done nothing, otherwise.
    fn call_frame(&self, ctx: &mut Ctx, entry: crate::lang::BlockId) -> Option<Result<Value, End>>;

    /// Whether the driver has something to do for what calls found (a bridge recorded, an
    /// exit taken often): the outermost code then exits after the call that finds it.
    fn pending(&self) -> bool;

    /// Whether a loop's tree with code is anchored at `block` (for any values of the
    /// frame's): the interpreter that finishes a call stops at a back edge there
    /// ([`Functions::run_loop`]).
    fn enters_loop(&self, block: crate::lang::BlockId) -> bool;

    /// Runs the loop's tree anchored at `block` in its code (with the bridges and trees its
    /// exits go on to), the frame of `ctx`'s state at its anchor, inside a call machine
    /// code made: where the interpreter goes on, or how the program ended; `None`, having
    /// done nothing, when its code cannot be entered here.
    fn run_loop(&self, ctx: &mut Ctx, block: crate::lang::BlockId)
        -> Option<Result<Position, End>>;
}

/// What machine code needs to call a function's trace directly, one per function of the
/// program, at an address fixed for the run (code holds it): the code to call, and what
/// the call must check first. The driver publishes a function's trace here when its code
/// may be entered so ([`FnCell::publish`]), and clears it when not.
///
/// A direct call (`Lower::direct_call`) checks that the cell holds code, that the
/// arguments are of the kinds it takes, that its register buffer fits in the caller's
/// reserve, that the call depth and the native stack leave room; then it writes the
/// parameters into a buffer of its own frame's, calls the code, and takes the value from
/// the result slots (`Layout::result`) if the code returned one ([`super::exit::RETURNED`]) of
/// the kind the caller holds. Otherwise [`helpers::call_finish`](super::helpers::call_finish)
/// lets the interpreter finish the call from the exit. Failing a check, the call goes
/// through [`helpers::call`](super::helpers::call).
#[repr(C)]
#[derive(Default)]
pub struct FnCell {
    /// The tree's function (`lower::tree_signature`), or 0.
    pub code: std::cell::Cell<u64>,
    /// Per parameter `k` (at most [`FnCell::MAX_PARAMS`]), in byte `k`: 0xff if the code
    /// reads the parameter (a tree input), else 0.
    pub mask: std::cell::Cell<u64>,
    /// Per parameter `k` the code reads, in byte `k`: the mirror tag of the kind it takes
    /// (`exit::mirror_tag`).
    pub kinds: std::cell::Cell<u64>,
    /// How many slots its register buffer has (`Layout::size`).
    pub size: std::cell::Cell<u64>,
    /// One more than how deep the calls its trace inlined nest.
    pub calls: std::cell::Cell<u64>,
}

/// The byte offsets of [`FnCell`]'s fields, as machine code reads them.
impl FnCell {
    /// The most parameters a function called directly may have.
    pub const MAX_PARAMS: usize = 8;
    /// Offset of [`FnCell::code`].
    pub const CODE: i32 = std::mem::offset_of!(FnCell, code) as i32;
    /// Offset of [`FnCell::mask`].
    pub const MASK: i32 = std::mem::offset_of!(FnCell, mask) as i32;
    /// Offset of [`FnCell::kinds`].
    pub const KINDS: i32 = std::mem::offset_of!(FnCell, kinds) as i32;
    /// Offset of [`FnCell::size`].
    pub const SIZE: i32 = std::mem::offset_of!(FnCell, size) as i32;
    /// Offset of [`FnCell::calls`].
    pub const CALLS: i32 = std::mem::offset_of!(FnCell, calls) as i32;

    /// The word of mirror tags a call passing arguments of `kinds` compares with
    /// [`FnCell::kinds`] under [`FnCell::mask`]; `None` past [`FnCell::MAX_PARAMS`].
    pub fn tags(kinds: &[Repr]) -> Option<u64> {
        (kinds.len() <= Self::MAX_PARAMS).then(|| {
            (kinds.iter().enumerate())
                .map(|(k, kind)| (exit::mirror_tag(*kind) as u64) << (8 * k))
                .sum()
        })
    }

    /// Makes `code`, the function of the tree of function `func`'s trace whose inlined
    /// calls nest `calls` deep, what direct calls of `func` enter; with `None`, or code
    /// that cannot be entered so (it counts steps, holds an integer of any size, or takes
    /// too many parameters), none.
    pub fn publish(&self, params: &[crate::lang::Slot], code: Option<&Compiled>, calls: usize) {
        let code = code
            .filter(|c| !c.counting && c.reentrant && !c.quick && params.len() <= Self::MAX_PARAMS);
        let Some(code) = code else {
            self.code.set(0);
            return;
        };
        let an = &code.analysis;
        let (mut mask, mut kinds) = (0, 0);
        let inputs = (an.layout.inputs.iter().map(|(slot, _)| slot)).zip(&an.input_kinds);
        for (slot, kind) in inputs.chain(code.assumptions().iter().map(|(s, k)| (s, k))) {
            let Some(k) = params.iter().position(|p| p == slot) else {
                // An input that is not a parameter: never entered so.
                self.code.set(0);
                return;
            };
            mask |= 0xff << (8 * k);
            kinds |= (exit::mirror_tag(*kind) as u64) << (8 * k);
        }
        self.mask.set(mask);
        self.kinds.set(kinds);
        self.size.set(an.layout.size as u64);
        self.calls.set(calls as u64 + 1);
        self.code.set(code.f as u64);
    }
}

/// A function trace's machine code, as a call enters it: the function of its tree, with
/// no bridge compiled on its own (each exit is the function's).
pub struct Callee<'a> {
    /// The function it runs.
    pub func: crate::lang::FuncId,
    /// Its tree.
    pub tree: usize,
    /// The tree's function.
    pub code: &'a Compiled,
    /// The trace of each of its segments.
    pub segments: &'a dyn Fn(usize) -> &'a Trace,
    /// How deep the calls it inlined nest.
    pub calls: usize,
    /// Told of each exit of a guard or an operation the interpreter finishes the call
    /// from, the state there (the callee's frame): where the interpreter goes on (a bridge
    /// recorded from there ends at the `return`), or how the program ended meanwhile.
    pub exited: &'a dyn Fn(&mut State, super::TreeInst, Position) -> Result<Position, End>,
    /// Where its exits that went on in other trees' code take the call.
    pub linked: Linked<'a>,
}

/// Where a call's code went on in a loop's tree (an entry trace's end linked to its loop's
/// tree, `lower::linkable`): what finishes the call from that tree's exit.
///
/// The callee's frame is then the mirror: a call of a function whose code may go on so
/// ([`goes_on_in_loops`]) clears the tags of its variables there before it enters the
/// code, so that the variables the code wrote, with its parameters, are those tagged.
pub struct Linked<'a> {
    /// The function called.
    pub func: crate::lang::FuncId,
    /// Each tree's code by tree and unit (`Backend::run`'s).
    pub trees: &'a dyn Fn((usize, usize)) -> super::TreeCode<'a>,
    /// Told of each exit of another tree's code inside the call, the state there: the
    /// tree, its exiting instruction (`None` for an entry it refused) and the bridge unit
    /// entered often ([`HOT`]), as the runtime tells the driver of a loop's exit.
    pub told: &'a Told<'a>,
}

/// What [`Linked::told`] is told: the state, the tree, its exiting instruction, the bridge
/// unit entered often.
pub type Told<'a> = dyn Fn(&State, usize, Option<super::TreeInst>, Option<usize>) + 'a;

impl Callee<'_> {
    /// Whether a call may enter the code at all: it counts no steps and holds no integer
    /// of any size.
    pub fn enterable(&self) -> bool {
        !self.code.counting && self.code.reentrant
    }
}

/// Whether the code of a call of `func` may go on in a loop's tree (its entry trace's end
/// linked there, [`Linked`]): `func` loops itself and is not a dispatch function, whose
/// loops' trees are found by greens and never linked so (`Jit::enters_from_calls`).
pub fn goes_on_in_loops(program: &Program, func: crate::lang::FuncId) -> bool {
    program.loops_itself(func) && program.portal(func).is_none()
}

/// How a program ended inside a call: `print_and_stop` of a value, or an error.
pub type End = Result<Value, interp::RuntimeError>;

/// What enters machine code from a call: the trampoline, and a register buffer per call
/// nested in machine code, kept for the next call at that depth.
pub struct Entry {
    trampoline: Trampoline,
    regs_len: usize,
    pool: RefCell<Vec<Vec<i64>>>,
}

impl Entry {
    /// Enters code through `trampoline` on buffers of `regs_len` slots (the backend's).
    pub(super) fn new(trampoline: Trampoline, regs_len: usize) -> Entry {
        Entry {
            trampoline,
            regs_len,
            pool: RefCell::new(Vec::new()),
        }
    }

    /// Makes the call of `site` on `args` in `callee`'s code (see the module's
    /// documentation): 0 with the result after the arguments, or 1 when the caller's code
    /// exits after the call; `None`, having done nothing, when the call cannot enter it
    /// here (an argument of a kind it was not compiled for, or held at any size, the depth
    /// limit or the native stack near).
    ///
    /// # Safety
    /// As [`helpers::call`](super::helpers::call)'s.
    pub unsafe fn call(
        &self,
        ctx: &mut Ctx,
        site: &CallSite,
        args: *mut i64,
        callee: &Callee,
    ) -> Option<i64> {
        let (_, inlined) = site.call?;
        if site.args.contains(&Repr::Num) {
            return None;
        }
        // As `trace::run::call` counts it: the caller's depth, then the callee's frame and
        // the calls its trace inlined.
        let depth = ctx.state.depth + ctx.state.calls.len() + inlined;
        // SAFETY: the caller's guarantee: a word per argument.
        let words = unsafe { std::slice::from_raw_parts(args, site.args.len()) };
        // SAFETY: as the caller guarantees, the words are live values of their kinds.
        let result = unsafe { self.run(ctx, callee, words, &site.args, depth, inlined + 1)? };
        // SAFETY: the caller's guarantee.
        Some(unsafe { give(ctx, site, args, result) })
    }

    /// Makes the call of `callee`'s function that the interpreter has entered (the state's
    /// frame is the callee's, holding its arguments, and its call is on the state's
    /// calls) in `callee`'s code, as [`Entry::call`] makes one: the result, or how the
    /// program ended; `None`, having done nothing, when the code cannot be entered here.
    pub fn call_frame(&self, ctx: &mut Ctx, callee: &Callee) -> Option<Result<Value, End>> {
        let f = ctx.program.func(callee.func);
        // Kept alive while the code borrows them.
        let args: Vec<Value> = (f.params.iter())
            .map(|p| ctx.state.frame[p.index()].clone())
            .collect::<Option<_>>()?;
        let kinds: Vec<Repr> = args.iter().map(Repr::of).collect::<Option<_>>()?;
        let words: Vec<i64> = (args.iter().zip(&kinds))
            .map(|(v, k)| abi::unbox(v, *k))
            .collect::<Option<_>>()?;
        // The callee's frame counts already.
        let depth = (ctx.state.depth + ctx.state.calls.len()).checked_sub(1)?;
        // SAFETY: the words are `args`', alive until the code has returned.
        unsafe { self.run(ctx, callee, &words, &kinds, depth, 0) }
    }

    /// Runs `callee`'s code on `args` (one word per parameter, of `kinds`), for a call made
    /// at `depth` (the caller's), the state's depth raised by `raise` while it runs; the
    /// result or how the program ended, or `None`, having done nothing, when the code
    /// cannot be entered here (an argument of a kind it was not compiled for, or held at
    /// any size, the depth limit or the native stack near, a step limit).
    ///
    /// # Safety
    /// Each word of `args` holds a live value of its kind, alive until this returns.
    unsafe fn run(
        &self,
        ctx: &mut Ctx,
        callee: &Callee,
        args: &[i64],
        kinds: &[Repr],
        depth: usize,
        raise: usize,
    ) -> Option<Result<Value, End>> {
        let program = ctx.program;
        let an = &callee.code.analysis;
        let layout = &an.layout;
        let f = program.func(callee.func);
        let code = callee.code;
        if kinds.contains(&Repr::Num) || code.counting || !code.reentrant || ctx.limit.is_some() {
            return None;
        }
        if depth + 1 + callee.calls >= MAX_CALL_DEPTH
            || stacker::remaining_stack().is_some_and(|left| left < STACK_RESERVE)
        {
            return None;
        }
        // The inputs are parameters, of the kinds the code was compiled for, as are those
        // it counts on (`Compiled::assume`).
        let inputs = (layout.inputs.iter().map(|(slot, _)| slot)).zip(&an.input_kinds);
        for (slot, kind) in inputs.chain(code.assumptions().iter().map(|(s, k)| (s, k))) {
            let k = f.params.iter().position(|p| p == slot)?;
            if kinds[k] != *kind {
                return None;
            }
        }
        // The mirror's other slots hold what an earlier call left: only the parameters and
        // what an exit writes are read back (`frame_at`).
        let mut regs = self.pool.borrow_mut().pop().unwrap_or_default();
        regs.resize(self.regs_len.max(layout.size), 0);
        if goes_on_in_loops(program, callee.func) {
            // Its code may go on in a loop's tree (`Linked`): what no exit wrote is untagged.
            for v in program.locals(callee.func) {
                regs[2 * v.index() + 1] = 0;
            }
        }
        for (k, p) in f.params.iter().enumerate() {
            regs[2 * p.index()] = args[k];
            regs[2 * p.index() + 1] = exit::mirror_tag(kinds[k]);
        }
        // No budget: the buffer's size, which the code of loops it goes on in checks.
        regs[layout.counter] = regs.len() as i64;
        let mut inner = Ctx::new(program, &mut *ctx.state, None, ctx.functions);
        inner.nested = true;
        regs[layout.context] = &mut inner as *mut Ctx as i64;
        inner.state.depth += raise;
        // SAFETY: `regs` has the slots of every tree's code, its mirror holds the callee's
        // frame (its parameters, of the kinds the code takes) and `inner` outlives the call.
        let returned = unsafe { (self.trampoline)(callee.code.f, regs.as_mut_ptr(), &mut inner) };
        inner.state.depth -= raise;
        ctx.calls += inner.calls + 1;
        ctx.entered += inner.entered + 1;
        ctx.helped += inner.helped + 1;
        ctx.allocated += inner.allocated;
        let result = match inner.ended.take() {
            Some(end) => Err(end),
            // SAFETY: `regs` as the code left it, `inner` holding what it borrows.
            None => unsafe { finish(program, &regs, &mut inner, returned, callee, depth) },
        };
        // What the code made lives until the result is taken out of it.
        drop(inner);
        self.pool.borrow_mut().push(regs);
        Some(result)
    }

    /// Runs unit `t` of the code `trees` finds (a loop's tree) on `ctx`'s state, as
    /// [`Backend::run`](super::Backend::run) runs it but on a register buffer of its own,
    /// for a call machine code made (its code does not exit for the driver's sake, its
    /// calls and arrays count in `ctx`); `None`, having done nothing, when it cannot run
    /// here (a step limit, the native stack near its end, an input of another kind).
    pub fn run_tree<'t>(
        &self,
        ctx: &mut Ctx,
        t: (usize, usize),
        trees: &dyn Fn((usize, usize)) -> super::TreeCode<'t>,
    ) -> Option<super::TreeExit> {
        if ctx.limit.is_some()
            || stacker::remaining_stack().is_some_and(|left| left < STACK_RESERVE)
        {
            return None;
        }
        let mut regs = self.pool.borrow_mut().pop().unwrap_or_default();
        regs.resize(self.regs_len, 0);
        let run = super::Run {
            enter: self.trampoline,
            program: ctx.program,
            functions: ctx.functions,
            nested: true,
        };
        let mut steps = Steps::new(None);
        // SAFETY: the buffer has the backend's slots, those of every tree's code.
        let exit = unsafe { super::run_code(&run, &mut regs, t, trees, ctx.state, &mut steps) };
        self.pool.borrow_mut().push(regs);
        if let Some(e) = &exit {
            // As the caller's code counts them (`TreeExit::calls` counts direct calls once).
            ctx.calls += e.calls + e.helped - e.entered;
            ctx.entered += e.entered;
            ctx.helped += e.helped;
            ctx.allocated += e.allocated;
        }
        exit
    }

    /// Ends the call of `site` on `args` that machine code made directly into `callee`'s
    /// code ([`FnCell`]), which returned `returned` with its buffer at `regs`, on the
    /// caller's context: a program ended inside ends the run; otherwise the value the code
    /// returned, or the interpreter finishing the call from its exit, gives the result, as
    /// [`Entry::call`] gives it.
    ///
    /// # Safety
    /// As [`helpers::call`](super::helpers::call)'s; `regs` holds `callee`'s register
    /// buffer as its code left it.
    pub unsafe fn finish_direct(
        ctx: &mut Ctx,
        site: &CallSite,
        args: *mut i64,
        regs: *const i64,
        returned: i64,
        callee: &Callee,
    ) -> i64 {
        if ctx.ended.is_some() {
            return 1;
        }
        let (_, inlined) = site.call.expect("a call's site");
        let depth = ctx.state.depth + ctx.state.calls.len() + inlined;
        let size = callee.code.analysis.layout.size;
        // SAFETY: the caller's guarantee: the callee's buffer, of its code's size.
        let regs = unsafe { std::slice::from_raw_parts(regs, size) };
        // SAFETY: as the caller guarantees; what the code borrows lives in `ctx`.
        let result = unsafe { finish(ctx.program, regs, ctx, returned, callee, depth) };
        // SAFETY: the caller's guarantee.
        unsafe { give(ctx, site, args, result) }
    }

    /// As [`Entry::finish_direct`], for a call whose code went on in the code of a loop's
    /// tree, which returned `returned`.
    ///
    /// # Safety
    /// As [`Entry::finish_direct`]'s, `regs` holding the buffer as the code of the tree
    /// `returned` names left it, as large as that code's and the callee's.
    pub unsafe fn finish_linked(
        ctx: &mut Ctx,
        site: &CallSite,
        args: *mut i64,
        regs: *const i64,
        returned: i64,
        linked: &Linked,
    ) -> i64 {
        if ctx.ended.is_some() {
            return 1;
        }
        let (_, inlined) = site.call.expect("a call's site");
        let depth = ctx.state.depth + ctx.state.calls.len() + inlined;
        let (tree, unit, _) = decode_exit(returned);
        let size = (linked.trees)((tree, unit)).code.analysis.layout.size;
        // SAFETY: the caller's guarantee.
        let regs = unsafe { std::slice::from_raw_parts(regs, size) };
        // SAFETY: as the caller guarantees; what the code borrows lives in `ctx`.
        let result = unsafe { finish_in(ctx.program, regs, ctx, returned, linked, depth) };
        // SAFETY: the caller's guarantee.
        unsafe { give(ctx, site, args, result) }
    }
}

/// Gives the code that made the call of `site` on `args` its `result`: 0 with the result
/// after the arguments, or 1 when the code exits after the call (a result of another type
/// or kind, a program ended inside, or the driver having something to do).
///
/// # Safety
/// As [`helpers::call`](super::helpers::call)'s.
unsafe fn give(ctx: &mut Ctx, site: &CallSite, args: *mut i64, result: Result<Value, End>) -> i64 {
    // The driver has bridges to attach or code to compile again for what the call's
    // exits found: the outermost code exits after the call, its result in hand.
    let pending = ctx.functions.is_some_and(|f| f.pending());
    ctx.attend = pending as u64;
    let attend = ctx.outermost() && pending;
    match result {
        Ok(v) if site.accepts(&v) && !attend => {
            // SAFETY: the caller's guarantee of room after the arguments.
            unsafe { ctx.give(v, site.result, args.add(site.args.len())) };
            0
        }
        Ok(v) => {
            ctx.called = Some(v);
            1
        }
        Err(end) => {
            ctx.ended = Some(end);
            1
        }
    }
}

/// The result of a call whose code returned `returned`: the `return`'s operand where the
/// function trace ended, otherwise what the interpreter finds finishing the call from the
/// exit. `Err` for a program that ended inside.
///
/// # Safety
/// `regs` and `inner` are as the callee's code left them.
unsafe fn finish(
    program: &Program,
    regs: &[i64],
    inner: &mut Ctx,
    returned: i64,
    callee: &Callee,
    depth: usize,
) -> Result<Value, End> {
    let an = &callee.code.analysis;
    let layout = &an.layout;
    let (tree, unit, at) = decode_exit(returned);
    if (tree, unit) != (callee.tree, 0) {
        // SAFETY: the caller's guarantee.
        return unsafe { finish_in(program, regs, inner, returned, &callee.linked, depth) };
    }
    debug_assert_eq!(unit, 0, "a callee has no bridge compiled on its own");
    if at == REFUSED || at == HOT {
        // Nothing ran: the interpreter makes the call from the function's entry.
        let entry = (callee.segments)(0).anchor;
        let start = |_: &mut State| Ok(Position::start(entry));
        let params = program.func(callee.func).params.iter().map(|p| p.index());
        return unsafe { interpret(program, regs, params, inner, depth, start) };
    }
    if at & RETURNED != 0 {
        // SAFETY: the code reached a `return` and left its value there, borrowed as below.
        return Ok(unsafe { exit::returned_value(regs, layout) });
    }
    let written = at & WRITTEN != 0;
    let super::TreeInst { segment: seg, inst } = layout.locate((at & !WRITTEN) as usize);
    let trace = (callee.segments)(seg);
    let exiting = &trace.insts[inst];
    let own = trace.snap_of(exiting).expect("an exit has a snapshot");
    let (base, kinds) = (layout.offsets[seg], &an.kinds[seg]);
    // SAFETY (for each `rebox`): the code stored each slot from a value of its kind,
    // borrowed from the arguments, the trees' constants or `inner.owned`.
    let read = |r: crate::trace::Ref| unsafe {
        abi::rebox(
            regs[base + r.index()],
            kinds[r.index()].expect("a ref has a kind"),
        )
    };
    let mirrored = |slot: usize| {
        let tag = regs[2 * slot + 1];
        // SAFETY: as above.
        (tag != 0)
            .then(|| unsafe { abi::rebox(regs[2 * slot], super::helpers::kind_from(tag - 1)) })
    };
    // The function trace's end: the value the `return` gives, unless the exit has more to
    // do than write variables.
    let f = program.func(callee.func);
    let block = program.block(own.pos.block);
    let plain = own.frames.is_empty() && own.stores.is_empty() && own.virtuals.is_empty();
    if let (Terminator::Return(operand), true, true) = (
        &block.term,
        own.pos.inst == block.insts.len() && trace.function.is_some(),
        plain && exiting.kind == crate::trace::Kind::Loop,
    ) {
        let v = match operand {
            Operand::Const(v) => Some(v.clone()),
            Operand::Var(slot) if written => mirrored(slot.index()),
            Operand::Var(slot) => match own.get(*slot) {
                Some(Opnd::Ref(r)) => Some(read(*r)),
                Some(Opnd::Const(v)) => Some(v.clone()),
                None if f.params.contains(slot) => mirrored(slot.index()),
                None => None,
            },
        };
        if let Some(v) = v {
            return Ok(v);
        }
    }
    let called = inner.called.take();
    // The frame the exit leaves: the parameters as the call gave them, then the snapshot,
    // in the mirror (`written`) or from the exit's values.
    let params = f.params.iter().map(|p| p.index());
    let wrote = own
        .entries
        .iter()
        .filter(|_| written)
        .map(|(slot, _)| slot.index());
    unsafe {
        interpret(program, regs, params.chain(wrote), inner, depth, |state| {
            if !written {
                crate::resume::restore(own, read, state);
                if let Some(v) = called {
                    crate::trace::run::give_result(program, exiting, state, v);
                }
            }
            (callee.exited)(state, super::TreeInst::new(seg, inst), own.pos)
        })
    }
}

/// The result of a call whose code went on in a loop's tree ([`Linked`]), whose code
/// returned `returned`: the value left in the result slots at a `return`, otherwise what
/// the interpreter finds finishing the call from the exit, the callee's frame the
/// variables tagged in the mirror with what the exit's snapshot says (as `run_code` writes
/// a loop's exit back). `Err` for a program that ended inside.
///
/// # Safety
/// As [`finish`]'s.
unsafe fn finish_in(
    program: &Program,
    regs: &[i64],
    inner: &mut Ctx,
    returned: i64,
    linked: &Linked,
    depth: usize,
) -> Result<Value, End> {
    let (tree, unit, at) = decode_exit(returned);
    let code = (linked.trees)((tree, unit));
    let an = &code.code.analysis;
    let locals = program.locals(linked.func).iter().map(|v| v.index());
    if at == REFUSED || at == HOT {
        // Nothing ran of that code: the interpreter goes on where it starts.
        let hot = (at == HOT).then_some(unit);
        let start = code.start;
        // SAFETY: the caller's guarantee.
        return unsafe {
            interpret(program, regs, locals, inner, depth, |state| {
                (linked.told)(state, tree, None, hot);
                Ok(start)
            })
        };
    }
    if at & RETURNED != 0 {
        // SAFETY: the code reached a `return` and left its value there.
        return Ok(unsafe { exit::returned_value(regs, &an.layout) });
    }
    let written = at & WRITTEN != 0;
    let super::TreeInst { segment: seg, inst } = an.layout.locate((at & !WRITTEN) as usize);
    let trace = code.segment(seg).trace;
    let exiting = &trace.insts[inst];
    let own = trace.snap_of(exiting).expect("an exit has a snapshot");
    let (base, kinds) = (an.layout.offsets[seg], &an.kinds[seg]);
    // SAFETY (for each `rebox`): the code stored each slot from a value of its kind,
    // borrowed from the arguments, the trees' constants or `inner.owned`.
    let read = |r: crate::trace::Ref| unsafe {
        abi::rebox(
            regs[base + r.index()],
            kinds[r.index()].expect("a ref has a kind"),
        )
    };
    let called = inner.called.take();
    // A bridge unit's only segment is its segment `unit` in the tree.
    let at = super::TreeInst::new(if unit == 0 { seg } else { unit }, inst);
    // SAFETY: the caller's guarantee.
    unsafe {
        interpret(program, regs, locals, inner, depth, |state| {
            if !written {
                crate::resume::restore(own, read, state);
                if let Some(v) = called {
                    crate::trace::run::give_result(program, exiting, state, v);
                }
            }
            (linked.told)(state, tree, Some(at), None);
            Ok(own.pos)
        })
    }
}

/// Finishes a call in the interpreter: the callee's frame is the mirror's variables in
/// `slots` (its parameters, and what a written exit left there), then what `resume`
/// writes, installed in place of the caller's, the state's calls those `resume` rebuilds;
/// the interpreter runs from the position `resume` gives until the call returns.
///
/// # Safety
/// The mirror's `slots` hold values of their tags' kinds, borrowed as `finish` says.
unsafe fn interpret(
    program: &Program,
    regs: &[i64],
    slots: impl Iterator<Item = usize>,
    inner: &mut Ctx,
    depth: usize,
    resume: impl FnOnce(&mut State) -> Result<Position, End>,
) -> Result<Value, End> {
    let mut frame = inner.state.fresh_frame(program.frame_size());
    for slot in slots {
        let tag = regs[2 * slot + 1];
        if tag != 0 {
            // SAFETY: the caller's guarantee.
            let v = unsafe { abi::rebox(regs[2 * slot], super::helpers::kind_from(tag - 1)) };
            frame[slot] = Some(v);
        }
    }
    in_frame(inner, frame, depth, |inner| {
        resume(inner.state).and_then(|pos| run_calling(program, inner, pos))
    })
}

/// Runs `body` on `inner` with `frame` in place of the state's frame, as a call made at
/// `depth` (the caller's) apart from the state's calls, whose `return` returns out; the
/// state as it was afterwards.
fn in_frame<T>(inner: &mut Ctx, frame: Frame, depth: usize, body: impl FnOnce(&mut Ctx) -> T) -> T {
    let state = &mut *inner.state;
    let caller = std::mem::replace(&mut state.frame, frame);
    let calls = std::mem::take(&mut state.calls);
    let (outer, returns_out) = (state.depth, state.returns_out);
    state.depth = depth + 1;
    state.returns_out = true;
    let result = body(inner);
    let state = &mut *inner.state;
    let done = std::mem::replace(&mut state.frame, caller);
    state.recycle(done);
    state.calls = calls;
    state.depth = outer;
    state.returns_out = returns_out;
    result
}

/// Makes the call of `site` on `args` in the interpreter, on a frame of the callee's
/// holding the arguments: `body` runs it from the function's entry (a recording, then the
/// interpreter, say) and gives its result, which the caller's code gets as from
/// [`helpers::call`](super::helpers::call). A call that would reach the depth limit fails
/// there, as the interpreter's.
///
/// # Safety
/// As [`helpers::call`](super::helpers::call)'s.
pub unsafe fn call_with(
    ctx: &mut Ctx,
    site: &CallSite,
    args: *mut i64,
    body: impl FnOnce(&mut Ctx, Position) -> Result<Value, End>,
) -> i64 {
    let (at, inlined) = site.call.expect("a call's site");
    let program = ctx.program;
    ctx.calls += 1;
    let depth = ctx.state.depth + ctx.state.calls.len() + inlined;
    let result = if depth >= MAX_CALL_DEPTH {
        Err(Err(crate::trace::run::call_depth_error(program, at)))
    } else {
        let f = program.func(site.func);
        let mut frame = ctx.state.fresh_frame(program.frame_size());
        // SAFETY: the caller's guarantee: a live value per argument.
        let values = unsafe { site.arguments(args) };
        for (p, v) in f.params.iter().zip(values) {
            frame[p.index()] = Some(v);
        }
        in_frame(ctx, frame, depth, |ctx| body(ctx, Position::start(f.entry)))
    };
    // SAFETY: the caller's guarantee.
    unsafe { give(ctx, site, args, result) }
}

/// Interprets from `pos` on `ctx`'s state until the frame there returns, its calls of
/// functions whose traces have code that a call may enter made in that code
/// ([`Functions::call_frame`]), not in the interpreter: an exit deep in a recursion leaves
/// only its own frame to the interpreter.
pub fn run_calling(program: &Program, ctx: &mut Ctx, mut pos: Position) -> Result<Value, End> {
    /// Stops the interpreter where it enters a call whose function has such code, or
    /// takes a back edge to a loop whose tree has.
    struct Enters<'f>(Option<&'f dyn Functions>);
    impl interp::Monitor for Enters<'_> {
        fn back_edge(&mut self, _: crate::lang::BlockId, target: crate::lang::BlockId) -> bool {
            self.0.is_some_and(|f| f.enters_loop(target))
        }
        fn call(&mut self, entry: crate::lang::BlockId, frame: &Frame) -> bool {
            self.0.is_some_and(|f| f.enters(entry, frame))
        }
    }
    let mut enters = Enters(ctx.functions);
    let mut steps = Steps::new(None);
    loop {
        // At the anchor of a loop's tree (where a function's entry trace ends, say): its
        // code, at once.
        if pos.inst == 0 && enters.0.is_some_and(|f| f.enters_loop(pos.block)) {
            let made = ctx.functions.and_then(|f| f.run_loop(ctx, pos.block));
            match made {
                Some(Ok(next)) if next != pos => {
                    pos = next;
                    continue;
                }
                Some(Err(end)) => return Err(end),
                // Refused: the interpreter runs an iteration.
                _ => {}
            }
        }
        match interp::run(program, ctx.state, pos, &mut steps, &mut enters) {
            Ok(Exit::Return(v)) => return Ok(v),
            Ok(Exit::Stop(v)) => return Err(Ok(v)),
            Err(e) => return Err(Err(e)),
            Ok(Exit::Called(entry)) => {
                let made = ctx.functions.and_then(|f| f.call_frame(ctx, entry));
                pos = match made {
                    Some(Ok(v)) => ctx.state.leave(v).expect("a call was entered"),
                    Some(Err(end)) => return Err(end),
                    // The interpreter makes it.
                    None => Position::start(entry),
                };
            }
            Ok(Exit::Hot(anchor)) => {
                let made = ctx.functions.and_then(|f| f.run_loop(ctx, anchor));
                pos = match made {
                    Some(Ok(pos)) => pos,
                    Some(Err(end)) => return Err(end),
                    // The interpreter runs an iteration.
                    None => Position::start(anchor),
                };
            }
        }
    }
}
