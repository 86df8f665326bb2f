//! What is known of a compilation unit before it is lowered: where its values live in the
//! register buffer ([`Layout`]), whether machine code can compute with the representations
//! the optimizer gave them (`opt::repr`), the elidable calls it makes, and the arithmetic
//! and bounds checks the optimizer planned (`opt::bounds`, `opt::checks`). Both code
//! generators lower from it.

use rustc_hash::FxHashMap as HashMap;

use flowjit_runtime::abi::Repr;
use flowjit_runtime::{Op, Value};

use super::helpers::CallSite;
use super::{ops, Tuning, Unsupported};
use crate::lang::Slot;
use crate::opt::bounds::{safe_divisor, MachineBounds};
use crate::opt::checks::{CheckPlan, Checks};
use crate::opt::header::LoopState;
use crate::opt::repr::{self, Reprs, Source};
use crate::trace::tree::{is_virtual, Segment, TreeInst};
use crate::trace::{Inst, Kind, Opnd, Trace};

/// Where the values of a tree live in the register buffer.
///
/// The buffer starts with the *mirror*: two slots per variable of the frame, the variable's
/// unboxed value (at `2 * slot`) and its kind (at `2 * slot + 1`: [`mirror_tag`](super::exit::mirror_tag), 0 for a
/// variable machine code does not hold). The mirror is the frame as it stands where the
/// running tree was entered: the runtime fills it before the first tree runs, an exit that
/// goes straight into another tree ([`linkable`](super::exit::linkable)) writes its snapshot into it, and the
/// runtime writes it back into the frame when the code returns, before the exit's own
/// snapshot. Every tree shares it, so a tree's inputs are read from it.
#[derive(Clone, Debug)]
pub struct Layout {
    /// How many variables the mirror holds (the program's frame size).
    pub mirror: usize,
    /// Per segment: the slot of its first instruction.
    pub offsets: Vec<usize>,
    /// The tree inputs: variables read from the frame on entry, with their slots (in the
    /// mirror).
    pub inputs: Vec<(Slot, usize)>,
    /// The counter's slot, the same in every tree (after the mirror): an exit that goes on
    /// in another tree leaves the budget there.
    pub counter: usize,
    /// The slot after it, the same in every tree: the address of the context the runtime
    /// passes helpers (`helpers::Ctx`), which it writes there before it enters the code.
    pub context: usize,
    /// The two slots after it, the same in every tree: where a function trace's code that
    /// reaches its `return` leaves the value returned and its kind's tag
    /// ([`RETURNED`](super::exit::RETURNED)).
    pub result: usize,
    /// How many slots in all.
    pub size: usize,
    /// Whether a bridge goes back to `start`: then the tree inputs are the state between
    /// iterations (every variable the tree writes is one), and every exit writes them all
    /// back before its snapshots.
    pub carry: bool,
}

impl Layout {
    /// The segment and instruction of global index `g`.
    pub fn locate(&self, g: usize) -> TreeInst {
        let seg = self
            .offsets
            .iter()
            .rposition(|&o| o <= g)
            .expect("the first segment starts after the mirror");
        TreeInst::new(seg, g - self.offsets[seg])
    }
}

/// Everything known about a tree before it is lowered.
pub struct TreeAnalysis {
    /// 0 for a tree's function, `k` for the bridge unit of segment `k`.
    pub unit: usize,
    /// The register layout.
    pub layout: Layout,
    /// Per segment and instruction: the kind of its result.
    pub kinds: Vec<Vec<Option<Repr>>>,
    /// Per tree input: its kind.
    pub input_kinds: Vec<Repr>,
    pub(super) sources: Vec<HashMap<Slot, Source>>,
    /// Per segment, what is known of its arithmetic: which operations cannot overflow,
    /// which check a whole run of offsets, and (for the root) the intervals the loop assumes
    /// at its header.
    pub(super) bounds: Vec<MachineBounds>,
    /// Per segment, its bounds checks as planned (`opt::checks`).
    pub(super) checks: Vec<CheckPlan>,
    /// What the root loop assumes at its header.
    pub(super) state: Option<LoopState>,
    /// The elidable calls, by (segment, instruction): the code holds their addresses.
    pub sites: HashMap<TreeInst, Box<CallSite>>,
    /// Whether the code makes lists or arrays, or copies them out of arrays, into the
    /// context (`helpers::Ctx::owned`): then it exits at the end of an iteration when the
    /// context holds [`helpers::MAX_OWNED`](super::helpers::MAX_OWNED) of them.
    pub owns: bool,
    /// Whether the code may read the elements of an array that says it holds only
    /// integers without their tags ([`Tuning::ints`]).
    pub ints: bool,
    /// Whether the code may run on the register buffer of a direct call, which a
    /// function's entry trace went on from into a loop's tree: it checks on entry that the
    /// buffer holds its slots (`lower::refuse_entries`). Code of a function's blocks, but
    /// a function trace's own, whose calls check its size.
    pub sized: bool,
}

/// The representations the mirror surely holds after the [`linkable`](super::exit::linkable) exit at instruction
/// `i` of segment `seg` (numbered as in the code `an` analyzed, 0 for a bridge unit's own):
/// those the exit writes, and those of the code's inputs, checked on entry, which it
/// leaves. A bridge unit entered only from that exit need not check them again
/// ([`Links::assumed`](super::lower::Links::assumed)).
pub fn exit_kinds(an: &TreeAnalysis, trace: &Trace, seg: usize, i: usize) -> Vec<(Slot, Repr)> {
    let snap = trace
        .snap_of(&trace.insts[i])
        .expect("an exiting instruction has a snapshot");
    let mut kinds: Vec<(Slot, Repr)> = an
        .layout
        .inputs
        .iter()
        .zip(&an.input_kinds)
        // The tag of an input of any size is either kind's, unless the exit writes it back.
        .filter(|(_, kind)| **kind != Repr::Num || an.layout.carry)
        .map(|((slot, _), kind)| (*slot, *kind))
        .collect();
    for (slot, o) in &snap.entries {
        let kind = match o {
            Opnd::Ref(r) => an.kinds[seg][r.index()],
            Opnd::Const(v) => repr::of_const(v),
        };
        kinds.retain(|(s, _)| s != slot);
        if let Some(kind) = kind {
            kinds.push((*slot, kind));
        }
    }
    kinds
}

/// What lowering needs to know of the unit `segments`, whose values are held as `reprs`
/// says (`opt::repr::infer`) and checked as `checks` says (`opt::checks::of_unit`), or why
/// machine code cannot run it: the register layout, the elidable calls, the checks.
/// `frame_size` is the program's (the mirror's size). `unit` is 0 for a tree's function,
/// whose first segment is the peeled root and which leaves out the `separate` segments; for
/// a bridge unit (`segments` is then the bridge alone), the bridge's segment number in its
/// tree.
pub fn analyze(
    segments: &[Segment],
    reprs: Reprs,
    checks: Checks,
    frame_size: usize,
    unit: usize,
    tuning: Tuning,
) -> Result<TreeAnalysis, Unsupported> {
    let root = segments[0].trace;
    if unit == 0 && root.loop_start().is_none() && root.function.is_none() {
        return Err(Unsupported::NotPeeled);
    }
    let mut check = Check {
        segments,
        reprs: &reprs,
        sites: HashMap::default(),
        owns: false,
    };
    for (seg, s) in segments.iter().enumerate() {
        if !s.separate {
            for i in 0..s.trace.insts.len() {
                check.inst(seg, i)?;
            }
        }
    }
    let Check { sites, owns, .. } = check;
    let input_kinds = (reprs.inputs.iter())
        .map(|(_, held)| held.ok_or(Unsupported::BigConstant))
        .collect::<Result<Vec<_>, _>>()?;
    let Reprs {
        values: kinds,
        inputs,
        sources,
        carry,
    } = reprs;
    let mut offsets = Vec::new();
    // The counter, shared by every tree like the mirror, follows it.
    let counter = 2 * frame_size;
    let mut next = counter + 4;
    for s in segments {
        offsets.push(next);
        next += s.trace.insts.len();
    }
    let layout = Layout {
        mirror: frame_size,
        offsets,
        inputs: inputs.iter().map(|(s, _)| (*s, 2 * s.index())).collect(),
        counter,
        context: counter + 1,
        result: counter + 2,
        size: next,
        carry,
    };
    Ok(TreeAnalysis {
        unit,
        layout,
        kinds,
        input_kinds,
        sources,
        bounds: checks.overflow,
        checks: checks.bounds,
        state: LoopState::of(root),
        sites,
        owns,
        ints: tuning.ints,
        sized: false,
    })
}

/// [`analyze`]'s walk over the unit: whether machine code can compute each instruction
/// with its operands held as the representations say, in order, and what it needs for it.
struct Check<'s, 'a> {
    segments: &'s [Segment<'a>],
    reprs: &'s Reprs,
    /// The elidable calls: the code holds their addresses.
    sites: HashMap<TreeInst, Box<CallSite>>,
    /// Whether the code keeps lists or arrays in the context ([`TreeAnalysis::owns`]).
    owns: bool,
}

impl Check<'_, '_> {
    /// How operand `o` of segment `seg` is held; `Err` for a constant machine code cannot
    /// hold.
    fn held(&self, seg: usize, o: &Opnd) -> Result<Repr, Unsupported> {
        match o {
            Opnd::Ref(r) => {
                Ok(self.reprs.values[seg][r.index()].expect("refs are defined before use"))
            }
            Opnd::Const(v) => repr::of_const(v).ok_or(Unsupported::BigConstant),
        }
    }

    /// How `inst`'s operands are held, having checked the values its snapshot gives an
    /// exit too.
    fn operands(&self, seg: usize, inst: &Inst) -> Result<Vec<Repr>, Unsupported> {
        let args = (inst.args.iter())
            .map(|a| self.held(seg, a))
            .collect::<Result<Vec<_>, _>>()?;
        let trace = self.segments[seg].trace;
        for o in trace
            .snap_of(inst)
            .into_iter()
            .flat_map(|s| s.exit_values())
        {
            self.held(seg, o)?;
        }
        Ok(args)
    }

    /// Checks instruction `i` of segment `seg`.
    fn inst(&mut self, seg: usize, i: usize) -> Result<(), Unsupported> {
        let trace = self.segments[seg].trace;
        let inst = &trace.insts[i];
        match inst.kind {
            Kind::Input(slot) => self.input(seg, i, slot)?,
            Kind::Param(_) | Kind::ParamItem => {
                let start = trace.loop_start().expect("params follow loop_start");
                self.held(seg, &trace.insts[start].args[i - start - 1])?;
            }
            Kind::GetItem | Kind::CallPure(_) => self.load_or_call(seg, i)?,
            Kind::Call(_) => self.load_or_call(seg, i)?,
            Kind::Getchar | Kind::Virtual => {}
            // What allocates gives the code a reference that the context keeps alive
            // (`helpers::alloc`).
            Kind::Op(op) if op.allocates() || op == Op::ToList => {
                self.operands(seg, inst)?;
                self.owns = true;
            }
            Kind::Op(Op::Same) => {
                self.held(seg, &inst.args[0])?;
            }
            Kind::Op(op) => self.op(seg, op, inst)?,
            _ => {
                let args = self.operands(seg, inst)?;
                // A `Num` may hold a small integer: a promotion of it, an index, a byte
                // written out are not lowered for it.
                let num_at = match inst.kind {
                    Kind::GuardValue | Kind::Putchar => args.first(),
                    Kind::SetItem => args.get(1),
                    _ => None,
                };
                if num_at == Some(&Repr::Num) {
                    return Err(Unsupported::Wide(inst.kind.name()));
                }
            }
        }
        Ok(())
    }

    /// Checks `input` `i` of `slot` in segment `seg`: what arrives is of the type it reads.
    fn input(&mut self, seg: usize, i: usize, slot: Slot) -> Result<(), Unsupported> {
        match &self.reprs.sources[seg][&slot] {
            // A virtual array of the guard's snapshot: the bridge builds it.
            Source::Chain(ps, Opnd::Ref(r)) if is_virtual(self.segments, *ps, *r) => {
                self.owns = true;
            }
            Source::Chain(_, Opnd::Const(v)) if repr::of_const(v).is_none() => {
                return Err(Unsupported::BigConstant)
            }
            // Only the guard's code holds the frames of the calls it is inside.
            Source::Input(_) if crate::resume::call_of(slot).0 > 0 => {
                return Err(Unsupported::CallFrameInput)
            }
            _ => {}
        }
        match self.reprs.values[seg][i] {
            Some(_) => Ok(()),
            None => Err(Unsupported::InputType),
        }
    }

    /// Checks `getitem` or call `i` of segment `seg`; a call's site is kept.
    fn load_or_call(&mut self, seg: usize, i: usize) -> Result<(), Unsupported> {
        let inst = &self.segments[seg].trace.insts[i];
        let args = self.operands(seg, inst)?;
        if inst.kind == Kind::GetItem && args.contains(&Repr::Num) {
            return Err(Unsupported::Wide("getitem"));
        }
        // A list or an array read out of an array, or returned, is kept alive in the
        // context (`helpers::keep`).
        let result = self.reprs.values[seg][i].expect("a load has a result");
        self.owns |= matches!(result, Repr::List | Repr::Array);
        let site = match inst.kind {
            Kind::CallPure(func) => CallSite {
                func,
                args: args[..args.len() - 2].to_vec(),
                result,
                ty: inst.ty,
                call: None,
            },
            Kind::Call(func) => {
                let snap = self.segments[seg].trace.snap_of(inst);
                let inlined = snap.expect("a call has a snapshot").frames.len();
                CallSite {
                    func,
                    args: args[..args.len() - 1].to_vec(),
                    result,
                    ty: inst.ty,
                    call: Some((inst.origin.expect("a call has its statement"), inlined)),
                }
            }
            _ => return Ok(()),
        };
        self.sites.insert(TreeInst::new(seg, i), Box::new(site));
        Ok(())
    }

    /// Checks operation `inst` (`op`, neither allocating nor `same`) of segment `seg`: the
    /// helpers run it on integers of any size, and where it may fail it has a snapshot to
    /// exit with.
    fn op(&self, seg: usize, op: Op, inst: &Inst) -> Result<(), Unsupported> {
        let args = (inst.args.iter())
            .map(|a| self.held(seg, a))
            .collect::<Result<Vec<_>, _>>()?;
        if args.contains(&Repr::Num) {
            return on_num(op, &args, inst.snap.is_some());
        }
        ops::supported(op, &args)?;
        // Division by a constant other than 0 and -1 cannot fail.
        let safe_divisor = matches!(
            inst.args.get(1),
            Some(Opnd::Const(Value::Int(k))) if safe_divisor(*k)
        );
        let exits = matches!(op, Op::Readlist | Op::Shl | Op::Shr)
            || (matches!(op, Op::Div | Op::Mod) && !safe_divisor);
        if exits && inst.snap.is_none() {
            return Err(Unsupported::NoSnapshot(op));
        }
        Ok(())
    }
}

/// Whether the helpers run `op` on operands held as `args`, one of them `Num`: arithmetic,
/// a comparison, `not`. `Err` for anything else, and for an operation that may fail (a type
/// error) where the interpreter's message needs an exit without a snapshot (`snap`) to exit
/// with.
fn on_num(op: Op, args: &[Repr], snap: bool) -> Result<(), Unsupported> {
    let ints = args.iter().all(|k| matches!(k, Repr::Int | Repr::Num));
    let fallible = matches!(op, Op::Div | Op::Mod | Op::Shl | Op::Shr);
    match op {
        Op::Eq | Op::Ne => Ok(()),
        Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Not if ints => Ok(()),
        Op::Add
        | Op::Sub
        | Op::Mul
        | Op::Div
        | Op::Mod
        | Op::And
        | Op::Or
        | Op::Xor
        | Op::Shl
        | Op::Shr
        | Op::Neg
            if ints && (snap || !fallible) =>
        {
            Ok(())
        }
        _ => Err(Unsupported::Wide(op.name())),
    }
}

/// How many flowgraph operations an iteration that ends at segment `seg`'s instruction
/// `i` (a loop end, or a bridge's end) stands for: its path to the segment, and its own.
pub fn path_cost(segments: &[Segment], seg: usize, i: usize) -> u64 {
    let own = segments[seg]
        .trace
        .snap_of(&segments[seg].trace.insts[i])
        .map_or(0, |s| s.cost);
    segments[seg].cost + own
}

/// The costliest way from the top of the loop to its end or to an exit, through any
/// bridges: the budget the code needs to start an iteration, since an exit counts the
/// operations of the path to it. (An exit inside a bridge, or at the end of a bridge that
/// goes to another tree, can cost more than any whole iteration.)
pub fn max_cost(segments: &[Segment]) -> u64 {
    let mut max = segments[0].trace.iteration_cost();
    for (seg, s) in segments.iter().enumerate() {
        for (i, inst) in s.trace.insts.iter().enumerate() {
            if inst.snap.is_some() {
                max = max.max(path_cost(segments, seg, i));
            }
        }
    }
    max
}

/// Whether the loop of `trace` (its `loop_start` at `start`) holds what its preamble loaded
/// from arrays: a body operation or snapshot reads a preamble value computed from a load
/// or a call, or a parameter carries an array's element (`param_item`). A store elsewhere
/// may then have changed what it holds.
pub(super) fn holds_loads(trace: &Trace, start: usize) -> bool {
    use crate::trace::Effect;
    let mut loaded = vec![false; start];
    for (k, inst) in trace.insts[..start].iter().enumerate() {
        let from_load = |o: &Opnd| o.as_ref().is_some_and(|r| loaded[r.index()]);
        loaded[k] = matches!(inst.kind.info().effect, Effect::Load | Effect::Call)
            || matches!(inst.kind, Kind::CallPure(_))
            || inst.args.iter().any(from_load);
    }
    let reads = |o: &Opnd| {
        o.as_ref()
            .is_some_and(|r| r.index() < start && loaded[r.index()])
    };
    trace.insts[start..].iter().any(|inst| {
        inst.kind == Kind::ParamItem
            || inst.args.iter().any(reads)
            || trace.snap_of(inst).is_some_and(|s| s.operands().any(reads))
    })
}
