//! What an exit of machine code does, decided once from its snapshot: the [`ExitPlan`] that
//! each code generator (the Cranelift lowering in `lower`, the quick x86-64 assembler in
//! `quick`) only emits.
//!
//! An exit leaves a tree's code in one of two ways.
//!
//! - **Linked** ([`LinkPlan`]): an exit that resumes at the anchor of a tree ([`linkable`])
//!   makes the stores the trace delayed (`opt::sink`), writes its snapshot's resume variables
//!   into the mirror of the frame (value and tag, each variable once), charges the budget
//!   what its path did, and goes on as a tail call through its slot of the link table, with
//!   its code marked [`WRITTEN`]. The slot holds the function of the tree linked there, or
//!   one that returns the code: the runtime then writes the mirror back into the frame.
//! - **Returning**: the exit stores each SSA value its snapshot reads (each once) in that
//!   value's slot of the register buffer and returns its code ([`exit_code`]); the runtime
//!   writes the mirror, then the snapshot, into the frame, building what the snapshot holds
//!   virtual and making its delayed stores.
//!
//! A linked exit that cannot make its stores itself (an array that no longer holds only
//! integers) returns instead, which is why a plan always says how to return.
//!
//! ```text
//! guard fails ──► carried inputs into the mirror ──► linked? ──► stores, mirror writes,
//!                                                      │          budget, jump via table
//!                                                      └──────► values to their slots,
//!                                                                return the code
//! ```

use flowjit_runtime::abi::Repr;

use flowjit_runtime::Value;
use std::rc::Rc;

use super::helpers;
use super::lower::TreeAnalysis;
use crate::lang::Slot;
use crate::resume::Store;
use crate::state::Frame;
use crate::trace::{Opnd, Ref, Trace};

/// What an exiting tree returns for an entry that found a tree input of another kind in the
/// mirror than the tree was compiled for: the tree did nothing.
pub const REFUSED: u32 = u32::MAX;

/// What a bridge unit returns, having done nothing, on the entry that spends its count
/// (`lower::Links::entries`): it runs often enough for its tree's function to take it in.
pub const HOT: u32 = u32::MAX - 1;

/// In an [`exit_code`], with the exiting instruction: the exit wrote its snapshot into the
/// mirror and made its stores, as a linked exit does, and the runtime only writes the
/// mirror back (a [`linkable`] exit with nothing linked to it).
pub const WRITTEN: u32 = 1 << 31;

/// In an [`exit_code`], with the instruction of a function trace's end (its `loop`, at a
/// `return`): the code reached the `return` and left the value it returns in the result
/// slots (`Layout::result`): its bits, then its kind's [`mirror_tag`]. The rest of the
/// snapshot is not written: the frame is left, and only the `return`'s operand counts.
pub const RETURNED: u32 = 1 << 30;

/// The value a function trace's code left in the result slots of `regs` when it returned
/// [`RETURNED`].
///
/// # Safety
/// `regs` is the register buffer as that code left it, its result slots holding a value
/// of their tag's kind, whose reference, if any, is still alive.
pub unsafe fn returned_value(regs: &[i64], layout: &super::lower::Layout) -> Value {
    let (bits, tag) = (regs[layout.result], regs[layout.result + 1]);
    // SAFETY: the caller's guarantee.
    unsafe { flowjit_runtime::abi::rebox(bits, helpers::kind_from(tag - 1)) }
}

/// The code a function returns: in the high half the tree's number and the unit (0 for the
/// tree's function, `k` for the bridge unit of segment `k`), in the low half the global
/// index of the exiting instruction ([`Layout::locate`](super::lower::Layout::locate)), with [`WRITTEN`] or
/// [`RETURNED`] or neither, or [`REFUSED`].
pub fn exit_code(tree: usize, unit: usize, at: u32) -> i64 {
    ((tree as i64) << 40) | ((unit as i64) << 32) | at as i64
}

/// The tree, the unit and the instruction (or [`REFUSED`]) of an [`exit_code`].
pub fn decode_exit(code: i64) -> (usize, usize, u32) {
    (
        (code >> 40) as usize,
        ((code >> 32) & 0xff) as usize,
        code as u32,
    )
}

/// The kind of a value in the mirror ([`Layout`](super::lower::Layout)): 0 stands for a variable machine code
/// does not hold.
pub fn mirror_tag(kind: Repr) -> i64 {
    helpers::kind_code(kind) + 1
}

/// Whether an exit at instruction `i` of `trace` may go straight into the tree anchored
/// where it resumes, through the mirror (`Layout`): its snapshot resumes at the start of
/// a block in the trace's own frame, with no virtual array to build (it makes the stores
/// the trace delayed itself), and every constant it writes is one machine code holds (not a
/// big integer, which only the runtime's write-back makes).
pub fn linkable(trace: &Trace, i: usize) -> bool {
    trace.snap_of(&trace.insts[i]).is_some_and(|s| {
        let held = |o: &Opnd| o.as_const().is_none_or(|v| Repr::of(v).is_some());
        s.pos.inst == 0 && s.frames.is_empty() && s.virtuals.is_empty() && s.exit_values().all(held)
    })
}

/// What the exit at instruction `inst` of a segment does.
#[derive(Debug)]
pub struct ExitPlan<'t> {
    /// The exiting instruction, in its segment.
    pub inst: usize,
    /// The code the exit returns ([`exit_code`], without [`WRITTEN`]).
    pub code: i64,
    /// The tree inputs the exit writes back into the mirror whichever way it leaves, when
    /// bridges go back to the tree's start (`Layout::carry`).
    pub carried: Vec<Carried>,
    /// How it goes on in another tree, when it can.
    pub link: Option<LinkPlan<'t>>,
    /// Returning: each SSA value its snapshot reads, once, with its slot of the register
    /// buffer.
    pub returned: Vec<(Ref, usize)>,
}

/// A tree input an exit writes back into the mirror ([`ExitPlan::carried`]).
#[derive(Clone, Copy, Debug)]
pub struct Carried {
    /// Its number among the tree inputs.
    pub input: usize,
    /// Its variable.
    pub slot: Slot,
    /// Its value's slot of the register buffer (in the mirror); its tag is the next one.
    pub at: usize,
    /// Whether it is held as an integer of any size (a box): its tag is written as such, and
    /// its box is moved into the mirror (linked) or left for the runtime (returning).
    pub num: bool,
    /// Whether the exit's snapshot writes the variable too: then the snapshot's value is
    /// the one the mirror gets.
    pub rewritten: bool,
}

/// How a [`linkable`] exit goes on in another tree ([`ExitPlan::link`]).
#[derive(Debug)]
pub struct LinkPlan<'t> {
    /// The stores the trace delayed, which the exit makes first.
    pub stores: &'t [Store],
    /// The snapshot's resume variables, each written into the mirror once.
    pub writes: Vec<MirrorWrite<'t>>,
    /// The flowgraph operations the path to the exit did: what the budget is charged
    /// under `--max-steps`.
    pub cost: u64,
    /// The code passed on ([`WRITTEN`]).
    pub code: i64,
    /// The address of the exit's slot of the link table.
    pub slot: i64,
}

/// A resume variable written into the mirror ([`LinkPlan::writes`]).
#[derive(Clone, Copy, Debug)]
pub struct MirrorWrite<'t> {
    /// The variable.
    pub slot: Slot,
    /// Its value's slot of the register buffer; its tag is the next one.
    pub at: usize,
    /// Its value at the exit.
    pub value: &'t Opnd,
    /// How the code holds that value.
    pub kind: Repr,
    /// The tag to write, unless the mirror already holds it: an input's tag holds its kind
    /// since the entry checked it, except an input of any size, whose tag may say a
    /// 64-bit integer.
    pub tag: Option<i64>,
}

impl<'t> ExitPlan<'t> {
    /// The plan of the exit at instruction `inst` of segment `seg` (numbered as in the code
    /// `an` analyzed) of tree number `tree`, `trace` being that segment's instructions and
    /// `cost` what the path to its start stands for (`Segment::cost`; 0 for code that keeps
    /// no budget). `table` is the link table, when the code has one and the exit may use it.
    pub fn new(
        an: &TreeAnalysis,
        trace: &'t Trace,
        seg: usize,
        inst: usize,
        (tree, cost): (usize, u64),
        table: Option<u64>,
    ) -> ExitPlan<'t> {
        let layout = &an.layout;
        let snap = trace
            .snap_of(&trace.insts[inst])
            .expect("an exiting instruction has a snapshot");
        let global = layout.offsets[seg] + inst;
        let carried = if layout.carry {
            carried(an, |slot| snap.get(slot).is_some())
        } else {
            Vec::new()
        };
        let link = table
            .filter(|_| linkable(trace, inst))
            .map(|table| LinkPlan {
                stores: &snap.stores,
                writes: snap
                    .entries
                    .iter()
                    .map(|(slot, value)| mirror_write(an, seg, *slot, value))
                    .collect(),
                cost: cost + snap.cost,
                code: exit_code(tree, an.unit, global as u32 | WRITTEN),
                slot: table as i64 + 8 * global as i64,
            });
        let mut returned: Vec<(Ref, usize)> = Vec::new();
        snap.for_each_exit_ref(|r| {
            if returned.iter().all(|(x, _)| *x != r) {
                returned.push((r, layout.offsets[seg] + r.index()));
            }
        });
        ExitPlan {
            inst,
            code: exit_code(tree, an.unit, global as u32),
            carried,
            link,
            returned,
        }
    }
}

/// The tree inputs an exit carries back: those of any size, and the others its snapshot
/// does not write (`rewrites`).
fn carried(an: &TreeAnalysis, rewrites: impl Fn(Slot) -> bool) -> Vec<Carried> {
    let inputs = an.layout.inputs.iter().zip(&an.input_kinds).enumerate();
    inputs
        .map(|(input, ((slot, at), kind))| Carried {
            input,
            slot: *slot,
            at: *at,
            num: *kind == Repr::Num,
            rewritten: rewrites(*slot),
        })
        .filter(|c| c.num || !c.rewritten)
        .collect()
}

fn mirror_write<'t>(an: &TreeAnalysis, seg: usize, slot: Slot, value: &'t Opnd) -> MirrorWrite<'t> {
    let kind = match value {
        Opnd::Ref(r) => an.kinds[seg][r.index()].expect("a value has a kind"),
        Opnd::Const(v) => Repr::of(v).expect("a linkable exit writes no big constant"),
    };
    let input = an.layout.inputs.iter().position(|(s, _)| *s == slot);
    let checked = input.map(|k| an.input_kinds[k]) == Some(kind);
    MirrorWrite {
        slot,
        at: 2 * slot.index(),
        value,
        kind,
        tag: (kind == Repr::Num || !checked).then(|| mirror_tag(kind)),
    }
}

/// Fills the mirror at the start of `regs` from `frame`'s first `mirror` variables: each
/// value unboxed where machine code can hold it, with its tag ([`mirror_tag`]; 0 for a
/// variable not written). A big integer is held as the address of the frame's slot
/// (`abi::Repr::Num`), which does not move while the code runs.
pub fn fill_mirror(regs: &mut [i64], frame: &Frame, mirror: usize) {
    for (slot, v) in frame.iter().enumerate().take(mirror) {
        let kind = |v: &Value| match v {
            Value::Big(_) => Some(Repr::Num),
            v => Repr::of(v),
        };
        let held = v.as_ref().and_then(|v| Some((v, kind(v)?)));
        let (bits, tag) = match held {
            Some((v, kind)) => (
                flowjit_runtime::abi::unbox(v, kind).expect("a value unboxes as its own kind"),
                mirror_tag(kind),
            ),
            None => (0, 0),
        };
        regs[2 * slot] = bits;
        regs[2 * slot + 1] = tag;
    }
}

/// Writes the mirror back into `frame`: every variable whose tag says machine code holds
/// it, reboxed as its tag's kind. The lists, arrays and big integers it replaces go into
/// `replaced` (unless the new value is the same one), so that what the mirror's later slots
/// borrow from them stays alive until the caller drops them.
///
/// # Safety
/// Each tagged slot holds a value of its tag's kind that the code stored; a list or an
/// array, at an address inside a live `Rc`.
pub unsafe fn read_mirror(
    regs: &[i64],
    frame: &mut Frame,
    mirror: usize,
    replaced: &mut Vec<Value>,
) {
    for slot in 0..mirror {
        let tag = regs[2 * slot + 1];
        if tag != 0 {
            let kind = helpers::kind_from(tag - 1);
            // SAFETY: the caller's guarantee.
            let new = unsafe { flowjit_runtime::abi::rebox(regs[2 * slot], kind) };
            let old = frame[slot].replace(new);
            let kept = match (old, &frame[slot]) {
                (Some(Value::Array(a)), Some(Value::Array(b))) if Rc::ptr_eq(&a, b) => None,
                (Some(Value::List(a)), Some(Value::List(b))) if Rc::ptr_eq(&a, b) => None,
                (Some(Value::Big(a)), Some(Value::Big(b))) if Rc::ptr_eq(&a, b) => None,
                (Some(v @ (Value::Array(_) | Value::List(_) | Value::Big(_))), _) => Some(v),
                _ => None,
            };
            replaced.extend(kept);
        }
    }
}
