//! The checked program that executors run: variables are frame slots, labels are block
//! indices, operations are [`Op`]s whose arity is known to be right.

use std::collections::HashMap;
use std::fmt;

use flowjit_runtime::{Op, Value};

use super::liveness::{Liveness, Vars};

/// A variable, as an index into the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot(pub u32);

impl Slot {
    /// The slot's index into the frame.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A block, as an index into [`Program::blocks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockId(pub u32);

impl BlockId {
    /// The block's index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// An operand: a variable's slot, or a constant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operand {
    /// The variable in this slot.
    Var(Slot),
    /// A constant.
    Const(Value),
}

impl Operand {
    /// The constant, if the operand is one.
    pub fn as_const(&self) -> Option<&Value> {
        match self {
            Operand::Const(v) => Some(v),
            Operand::Var(_) => None,
        }
    }
}

/// A statement of a checked block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inst {
    /// `dst = op(a)`.
    Op1 {
        /// Where the result goes.
        dst: Slot,
        /// A one-argument operation.
        op: Op,
        /// The argument.
        a: Operand,
    },
    /// `dst = op(a, b)`.
    Op2 {
        /// Where the result goes.
        dst: Slot,
        /// A two-argument operation.
        op: Op,
        /// The first argument.
        a: Operand,
        /// The second argument.
        b: Operand,
    },
    /// `promote(v)`: no effect when interpreting; a `guard_value` when tracing.
    Promote(Slot),
    /// `jit_merge_point(greens...)`.
    MergePoint(Vec<Slot>),
    /// `can_enter_jit`.
    CanEnterJit,
    /// `array[index] = value`.
    SetItem {
        /// The variable holding the array.
        array: Slot,
        /// The index.
        index: Operand,
        /// The value stored.
        value: Operand,
    },
    /// `print(x)`.
    Print(Operand),
    /// `putchar(x)`.
    Putchar(Operand),
    /// `dst = getchar()`.
    Getchar(Slot),
    /// `dst = call func(args...)`.
    Call {
        /// Where the result goes, in the caller's frame.
        dst: Slot,
        /// The function.
        func: FuncId,
        /// The arguments, bound to the function's parameters.
        args: Vec<Operand>,
    },
}

/// A function, as an index into [`Program::funcs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FuncId(pub u32);

impl FuncId {
    /// The function's index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A function: a block that a `call` enters in a new frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Func {
    /// Its name, the label of its entry block.
    pub name: String,
    /// Its entry block.
    pub entry: BlockId,
    /// Its parameters' slots, in order.
    pub params: Vec<Slot>,
    /// Whether it is marked `@elidable`.
    pub elidable: bool,
}

/// A jump to a block. `back_edge` is true when the target does not come after the jumping
/// block in the source: every loop of the program contains at least one such jump, so these
/// targets are where the interpreter counts and where traces start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Jump {
    /// The block jumped to.
    pub target: BlockId,
    /// Whether this is a backward jump.
    pub back_edge: bool,
}

/// How a checked block ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Terminator {
    /// `goto L`.
    Goto(Jump),
    /// `if cond goto then else goto els`.
    If {
        /// The condition variable.
        cond: Slot,
        /// Taken when `cond` is not the integer 0.
        then: Jump,
        /// Taken when `cond` is 0.
        els: Jump,
    },
    /// `print_and_stop(arg)`.
    PrintAndStop(Operand),
    /// `promote(var, L)`: a jump to `L`; for the tracer, a `guard_value` on `var`.
    Promote {
        /// The promoted variable.
        var: Slot,
        /// Where to continue.
        target: Jump,
    },
    /// `return arg`: ends the current call.
    Return(Operand),
}

/// A checked block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// The block's label.
    pub name: String,
    /// Its statements.
    pub insts: Vec<Inst>,
    /// Its terminator.
    pub term: Terminator,
    /// How many operations running the whole block costs against `--max-steps`: every
    /// operation and the terminator; hints cost nothing, so adding hints never changes a run.
    pub cost: u64,
    /// Whether the block holds `can_enter_jit` (which takes effect at the end of the block).
    pub enters_jit: bool,
    /// For a residual program: per statement (and, last, the terminator), the label of the
    /// block of the original program it comes from, which runtime errors name.
    pub origins: Option<Vec<String>>,
}

impl Block {
    /// The label a runtime error at statement `k` (the terminator: `insts.len()`) names.
    pub fn label_at(&self, k: usize) -> &str {
        match &self.origins {
            Some(origins) => &origins[k.min(origins.len() - 1)],
            None => &self.name,
        }
    }
}

impl Inst {
    /// Whether the statement is a hint, which never changes what a program computes.
    pub fn is_hint(&self) -> bool {
        matches!(
            self,
            Inst::Promote(_) | Inst::MergePoint(_) | Inst::CanEnterJit
        )
    }

    /// An operation's destination, operation and arguments; `None` for a hint.
    pub fn operation(&self) -> Option<(Slot, Op, Vec<&Operand>)> {
        match self {
            Inst::Op1 { dst, op, a } => Some((*dst, *op, vec![a])),
            Inst::Op2 { dst, op, a, b } => Some((*dst, *op, vec![a, b])),
            _ => None,
        }
    }

    /// The variable the statement writes, if any.
    pub fn written(&self) -> Option<Slot> {
        match self {
            Inst::Op1 { dst, .. }
            | Inst::Op2 { dst, .. }
            | Inst::Call { dst, .. }
            | Inst::Getchar(dst) => Some(*dst),
            _ => None,
        }
    }

    /// Whether the statement reads input or writes output.
    pub fn is_io(&self) -> bool {
        matches!(self, Inst::Print(_) | Inst::Putchar(_) | Inst::Getchar(_))
    }

    /// What in the statement the whole-program compiler does not hold yet, named for a
    /// message: calls. It declines a residual program with one.
    pub fn not_compiled(&self) -> Option<&'static str> {
        match self {
            Inst::Call { .. } => Some("`call`"),
            _ => None,
        }
    }

    /// The operands the statement reads, in order.
    pub fn operands(&self) -> Vec<Operand> {
        match self {
            Inst::Op1 { a, .. } => vec![a.clone()],
            Inst::Op2 { a, b, .. } => vec![a.clone(), b.clone()],
            Inst::SetItem {
                array,
                index,
                value,
            } => vec![Operand::Var(*array), index.clone(), value.clone()],
            Inst::Print(a) | Inst::Putchar(a) => vec![a.clone()],
            Inst::Call { args, .. } => args.clone(),
            Inst::Promote(_) | Inst::MergePoint(_) | Inst::CanEnterJit | Inst::Getchar(_) => {
                Vec::new()
            }
        }
    }
}

/// A checked program, ready to run.
#[derive(Clone, Debug)]
pub struct Program {
    /// The blocks, in source order; the first is the default entry.
    pub blocks: Vec<Block>,
    /// The functions, in the order of their entry blocks.
    pub funcs: Vec<Func>,
    /// Variable names, indexed by slot.
    pub vars: Vec<String>,
    labels: HashMap<String, BlockId>,
    slots: HashMap<String, Slot>,
    merge_points: Vec<(BlockId, Vec<Slot>)>,
    /// Per block, the merge point (an index into `merge_points`) its `can_enter_jit`
    /// belongs to ([`Program::merge_of_can_enter`]).
    enters: Vec<usize>,
    liveness: Liveness,
    /// Per function, whether a call of it may run a loop ([`Program::runs_loops`]), and
    /// whether its own blocks loop ([`Program::loops_itself`]).
    loops: Vec<(bool, bool)>,
    /// Per block, the function whose blocks it is among ([`Program::func_of`]).
    owners: Vec<Option<FuncId>>,
    /// Per function, the green parameters of its dispatch loop ([`Program::portal`]).
    portals: Vec<Option<Vec<Slot>>>,
    /// Per function, the variables its frame may hold ([`Program::locals`]).
    locals: Vec<Vec<Slot>>,
}

impl Program {
    pub(crate) fn new(blocks: Vec<Block>, funcs: Vec<Func>, vars: Vec<String>) -> Program {
        let labels = blocks
            .iter()
            .enumerate()
            .map(|(i, b)| (b.name.clone(), BlockId(i as u32)))
            .collect();
        let slots = vars
            .iter()
            .enumerate()
            .map(|(i, v)| (v.clone(), Slot(i as u32)))
            .collect();
        let merge_points: Vec<(BlockId, Vec<Slot>)> = blocks
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match b.insts.first() {
                Some(Inst::MergePoint(greens)) => Some((BlockId(i as u32), greens.clone())),
                _ => None,
            })
            .collect();
        // Only a block holding `can_enter_jit` asks, and only where there is a choice.
        let enters = (0..blocks.len())
            .map(|b| match blocks[b].enters_jit && merge_points.len() > 1 {
                true => merge_reached(&blocks, &merge_points, BlockId(b as u32)),
                false => 0,
            })
            .collect();
        let liveness = Liveness::new(&blocks, vars.len());
        let loops = loops(&blocks, &funcs);
        let owners = owners(&blocks, &funcs);
        let portals = (funcs.iter())
            .map(|f| portal(&blocks, &merge_points, f))
            .collect();
        let locals = funcs.iter().map(|f| locals(&blocks, f)).collect();
        Program {
            blocks,
            funcs,
            vars,
            labels,
            slots,
            merge_points,
            enters,
            liveness,
            loops,
            owners,
            portals,
            locals,
        }
    }

    /// The variables a frame of `func` may hold: its parameters, and each variable a
    /// statement of a block its entry reaches writes.
    pub fn locals(&self, func: FuncId) -> &[Slot] {
        &self.locals[func.index()]
    }

    /// The greens of `func`'s dispatch loop, when it is an interpreter's (PyPy's portal):
    /// the one merge point its entry reaches before any other, whose green variables are
    /// all parameters of `func` that nothing writes on the way. A call of it then starts
    /// at the position in the interpreted program its arguments name, and each such
    /// position has a function trace of its own (SPEC §4: a trace per guest function).
    pub fn portal(&self, func: FuncId) -> Option<&[Slot]> {
        self.portals[func.index()].as_deref()
    }

    /// Whether a call of `func` may run a loop: the blocks it reaches from its entry, or
    /// those of a function it calls, hold a backward jump or a `jit_merge_point`.
    pub fn runs_loops(&self, func: FuncId) -> bool {
        self.loops[func.index()].0
    }

    /// Whether `func`'s own blocks (those its entry reaches by jumps) hold a backward jump
    /// or a `jit_merge_point`: a loop of its frame, not only of the functions it calls.
    pub fn loops_itself(&self, func: FuncId) -> bool {
        self.loops[func.index()].1
    }

    /// The function whose frame runs `block`: the one whose entry reaches it by jumps
    /// (`None` for the program's own blocks, outside every function).
    pub fn func_of(&self, block: BlockId) -> Option<FuncId> {
        self.owners[block.index()]
    }

    /// The variables live before statement `inst` of `block` (or before its terminator,
    /// when `inst` is the number of statements): see [`super::liveness`].
    pub fn live_at(&self, block: BlockId, inst: usize) -> &Vars {
        self.liveness.live_at(block, inst)
    }

    /// The blocks holding a `jit_merge_point`, in source order, with their green
    /// variables (SPEC §4: each merge point names its own).
    pub fn merge_points(&self) -> impl Iterator<Item = (BlockId, &[Slot])> {
        self.merge_points.iter().map(|(b, g)| (*b, g.as_slice()))
    }

    /// The green variables of the merge point at the start of `block`, if one is there.
    pub fn merge_at(&self, block: BlockId) -> Option<&[Slot]> {
        (self.merge_points.iter())
            .find(|(b, _)| *b == block)
            .map(|(_, g)| g.as_slice())
    }

    /// The merge point (its index in [`Program::merge_points`]) that a `can_enter_jit`
    /// at the end of `block` counts for: the first one control reaches from the block's
    /// jumps, not entering calls (the dispatch loop whose backward jump the hint marks);
    /// where the jumps reach none, the program's first.
    pub fn merge_of_can_enter(&self, block: BlockId) -> usize {
        self.enters[block.index()]
    }

    /// Whether the program carries the meta-tracing hints: a merge point and at least one
    /// `can_enter_jit`. Such a program is profiled per green values, not per back edge.
    pub fn has_jit_hints(&self) -> bool {
        !self.merge_points.is_empty() && self.blocks.iter().any(|b| b.enters_jit)
    }

    /// The block labelled `label`.
    pub fn block_id(&self, label: &str) -> Option<BlockId> {
        self.labels.get(label).copied()
    }

    /// The function with this id.
    pub fn func(&self, id: FuncId) -> &Func {
        &self.funcs[id.index()]
    }

    /// The function whose entry is `block`, if it is one's.
    pub fn func_entered_at(&self, block: BlockId) -> Option<FuncId> {
        (self.funcs.iter())
            .position(|f| f.entry == block)
            .map(|k| FuncId(k as u32))
    }

    /// The block with this id.
    pub fn block(&self, id: BlockId) -> &Block {
        &self.blocks[id.index()]
    }

    /// The label of block `id`.
    pub fn label(&self, id: BlockId) -> &str {
        &self.blocks[id.index()].name
    }

    /// The slot of variable `name`.
    pub fn slot(&self, name: &str) -> Option<Slot> {
        self.slots.get(name).copied()
    }

    /// The name of the variable in `slot`.
    pub fn var(&self, slot: Slot) -> &str {
        &self.vars[slot.index()]
    }

    /// How many slots a frame for this program has.
    pub fn frame_size(&self) -> usize {
        self.vars.len()
    }

    /// Whether some jump in the program is a back edge to `id`.
    pub fn is_loop_header(&self, id: BlockId) -> bool {
        self.blocks
            .iter()
            .any(|b| b.term.jumps().any(|j| j.back_edge && j.target == id))
    }
}

impl Terminator {
    /// The jumps this terminator can take.
    pub fn jumps(&self) -> impl Iterator<Item = Jump> {
        let (a, b) = match *self {
            Terminator::Goto(j) | Terminator::Promote { target: j, .. } => (Some(j), None),
            Terminator::If { then, els, .. } => (Some(then), Some(els)),
            Terminator::PrintAndStop(_) | Terminator::Return(_) => (None, None),
        };
        a.into_iter().chain(b)
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s{}", self.0)
    }
}

/// The merge point (an index into `merges`) first reached from the jumps that end `from`,
/// breadth first; 0 if none is.
fn merge_reached(blocks: &[Block], merges: &[(BlockId, Vec<Slot>)], from: BlockId) -> usize {
    let mut seen = vec![false; blocks.len()];
    let mut work: std::collections::VecDeque<BlockId> = blocks[from.index()]
        .term
        .jumps()
        .map(|j| j.target)
        .collect();
    while let Some(b) = work.pop_front() {
        if std::mem::replace(&mut seen[b.index()], true) {
            continue;
        }
        if let Some(m) = merges.iter().position(|(at, _)| *at == b) {
            return m;
        }
        work.extend(blocks[b.index()].term.jumps().map(|j| j.target));
    }
    0
}

/// [`Program::portal`] of function `f`: walks its blocks from the entry up to the merge
/// points they reach.
fn portal(blocks: &[Block], merges: &[(BlockId, Vec<Slot>)], f: &Func) -> Option<Vec<Slot>> {
    if f.elidable {
        return None;
    }
    let mut seen = vec![false; blocks.len()];
    let (mut work, mut reached, mut written) = (vec![f.entry], Vec::new(), Vec::new());
    while let Some(b) = work.pop() {
        if std::mem::replace(&mut seen[b.index()], true) {
            continue;
        }
        if let Some((_, greens)) = merges.iter().find(|(at, _)| *at == b) {
            reached.push(greens);
            continue;
        }
        let block = &blocks[b.index()];
        written.extend(block.insts.iter().filter_map(Inst::written));
        work.extend(block.term.jumps().map(|j| j.target));
    }
    match reached[..] {
        [greens]
            if greens
                .iter()
                .all(|g| f.params.contains(g) && !written.contains(g)) =>
        {
            Some(greens.clone())
        }
        _ => None,
    }
}

/// The variables a frame of `f` may hold ([`Program::locals`]), each once.
fn locals(blocks: &[Block], f: &Func) -> Vec<Slot> {
    let mut vars = f.params.clone();
    for block in reached(blocks, f.entry) {
        vars.extend(block.insts.iter().filter_map(Inst::written));
    }
    vars.sort_unstable();
    vars.dedup();
    vars
}

/// The blocks `entry` reaches by jumps, itself included, each once.
fn reached(blocks: &[Block], entry: BlockId) -> Vec<&Block> {
    let mut seen = vec![false; blocks.len()];
    let (mut work, mut found) = (vec![entry], Vec::new());
    while let Some(b) = work.pop() {
        if std::mem::replace(&mut seen[b.index()], true) {
            continue;
        }
        let block = &blocks[b.index()];
        work.extend(block.term.jumps().map(|j| j.target));
        found.push(block);
    }
    found
}

/// Per block, the function of `funcs` whose entry reaches it by jumps, if one does
/// ([`Program::func_of`]).
fn owners(blocks: &[Block], funcs: &[Func]) -> Vec<Option<FuncId>> {
    let mut owner = vec![None; blocks.len()];
    for (k, f) in funcs.iter().enumerate() {
        let mut work = vec![f.entry];
        while let Some(b) = work.pop() {
            if owner[b.index()].is_some() {
                continue;
            }
            owner[b.index()] = Some(FuncId(k as u32));
            work.extend(blocks[b.index()].term.jumps().map(|j| j.target));
        }
    }
    owner
}

/// Per function of `funcs`, whether a call of it may run a loop ([`Program::runs_loops`]),
/// and whether its own blocks loop ([`Program::loops_itself`]).
fn loops(blocks: &[Block], funcs: &[Func]) -> Vec<(bool, bool)> {
    // Each function's own blocks: whether they loop, and the functions they call.
    let own: Vec<(bool, Vec<FuncId>)> = funcs
        .iter()
        .map(|f| {
            let (mut looped, mut calls) = (false, Vec::new());
            for block in reached(blocks, f.entry) {
                for inst in &block.insts {
                    match inst {
                        Inst::Call { func, .. } => calls.push(*func),
                        Inst::MergePoint(_) => looped = true,
                        _ => {}
                    }
                }
                looped |= block.term.jumps().any(|j| j.back_edge);
            }
            (looped, calls)
        })
        .collect();
    let mut loops: Vec<bool> = own.iter().map(|(l, _)| *l).collect();
    // Through the calls, until nothing changes.
    let mut changed = true;
    while changed {
        changed = false;
        for (f, (_, calls)) in own.iter().enumerate() {
            if !loops[f] && calls.iter().any(|c| loops[c.index()]) {
                loops[f] = true;
                changed = true;
            }
        }
    }
    loops
        .into_iter()
        .zip(own)
        .map(|(l, (own, _))| (l, own))
        .collect()
}
