//! Native code: optimized traces become machine code through Cranelift.
//!
//! Each function's code is a block of the backend's code heap (`code_heap`, [`CodeMemory`]),
//! owned by its [`Compiled`]:
//! dropping the code (a tree's function compiled again, a bridge's) gives the block back,
//! so code memory holds what can still run. [`Backend::compile`] lowers a trace
//! ([`lower`]), compiles it for the host, and can also emit it for another ISA for display
//! (`--target`). [`Backend::run`] marshals the trace's inputs from the frame into unboxed
//! registers, calls the machine code, and on exit writes the snapshot's resume variables
//! back into the frame.
//!
//! A trace the backend cannot lower is not an error: `--stats` says why, and the driver
//! leaves the loop to the interpreter (a bridge to the trace interpreter).

pub mod analysis;
mod background;
pub mod cfg;
mod code_heap;
pub mod exit;
pub mod helpers;
pub mod listing;
pub mod lower;
pub mod nested;
pub mod ops;
mod quick;

pub use lower::{Segment, TreeInst};

/// The limits the backend keeps to, each value with its reason in `jit::Policy`.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Iterations a root's loop runs in the quick backend's code before it exits to be
    /// compiled by Cranelift (at least 1).
    pub tier_iterations: i64,
    /// Entries a bridge compiled on its own counts before it returns [`lower::HOT`] (0: it
    /// does not count).
    pub bridge_entries: i64,
    /// The most trace instructions a function compiled with Cranelift's optimizations may
    /// hold.
    pub max_optimized: usize,
    /// The most machine code alive at once, in bytes.
    pub max_code_bytes: usize,
}

use std::cell::Cell;
use std::collections::HashMap;
use std::io::Write;
use std::rc::Rc;

use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::isa::{self, OwnedTargetIsa, TargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_codegen::{Final, MachSrcLoc};
use cranelift_frontend::FunctionBuilderContext;

pub use background::{Done, Finishes, Gone, Machine};
use flowjit_runtime::abi;

use crate::lang::Slot;
use crate::opt::checks::Checks;
use crate::opt::repr::Reprs;
use crate::resume;
use crate::state::{Frame, Position, State, Steps};
use crate::trace::{Ref, Trace};

/// Why a trace (or a residual program) stays off machine code: `--stats` says it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    /// The root trace has no loop to lower.
    #[error("the trace is not peeled (the peel pass is off)")]
    NotPeeled,
    /// A constant machine code cannot hold.
    #[error("a big integer constant")]
    BigConstant,
    /// A statement of a residual program that machine code does not run yet.
    #[error("{0} in a residual program is not compiled yet")]
    NotCompiled(&'static str),
    /// A call not inlined in code that counts `--max-steps`: the trace interpreter counts
    /// the operations inside the call exactly.
    #[error("a call not inlined, under --max-steps")]
    CountedCall,
    /// An input of a residual program machine code cannot hold.
    #[error("a big integer input")]
    BigInput,
    /// A bridge's `input` of a value its guard gives with another type.
    #[error("an input of another type than its value")]
    InputType,
    /// A bridge's `input` of an inlined call's variable (`resume::in_call`) that is not
    /// its guard's value: the bridge is compiled on its own.
    #[error("an input of an inlined call's frame, in a bridge on its own")]
    CallFrameInput,
    /// An operation that can fail, without a snapshot to exit with.
    #[error("`{0}` without a snapshot")]
    NoSnapshot(flowjit_runtime::Op),
    /// `eq` or `ne` of two lists (a structural comparison).
    #[error("comparing lists in machine code")]
    ListComparison,
    /// A residual program's `readlist` of a list with elements of several kinds.
    #[error("`readlist` of a list whose elements' kind is not known")]
    UnknownElements,
    /// A residual program's variable assigned values of two kinds.
    #[error("variable `{0}` holds values of two kinds")]
    TwoKinds(String),
    /// A residual program's variable read where it may not be written yet.
    #[error("`{0}` may be read before it is written")]
    ReadBeforeWrite(String),
    /// The limit of live machine code, in bytes ([`Limits::max_code_bytes`]), is reached.
    #[error("the code memory limit ({} MiB) is reached", .0 >> 20)]
    CodeMemory(usize),
    /// An instruction on an integer of any size (kind `Num`) that machine code does not
    /// run through its helpers.
    #[error("`{0}` of an integer that may leave 64 bits")]
    Wide(&'static str),
    /// Cranelift refused the function.
    #[error("Cranelift: {0}")]
    Cranelift(String),
    /// The listing could not be made.
    #[error("disassembler: {0}")]
    Disassembler(String),
    /// The code memory could not be made executable.
    #[error("the code memory: {0}")]
    Protection(String),
}

impl From<crate::opt::program::Unrepresentable> for Unsupported {
    fn from(why: crate::opt::program::Unrepresentable) -> Unsupported {
        use crate::opt::program::Unrepresentable as U;
        match why {
            U::BigConstant => Unsupported::BigConstant,
            U::BigInput => Unsupported::BigInput,
            U::UnknownElements => Unsupported::UnknownElements,
            U::TwoKinds(var) => Unsupported::TwoKinds(var),
        }
    }
}

/// The ISAs flowjit emits code for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// x86-64.
    X86_64,
    /// AArch64.
    Aarch64,
}

impl Target {
    /// The target named `name` (`x86_64` or `aarch64`).
    pub fn from_name(name: &str) -> Option<Target> {
        match name {
            "x86_64" => Some(Target::X86_64),
            "aarch64" => Some(Target::Aarch64),
            _ => None,
        }
    }

    /// The host's target, or why machine code cannot be made here.
    pub fn native() -> Result<Target, String> {
        Target::host().ok_or_else(|| {
            "flowjit emits machine code for x86_64 and aarch64 hosts only".to_string()
        })
    }

    /// The host's target, if flowjit supports it.
    pub fn host() -> Option<Target> {
        if cfg!(target_arch = "x86_64") {
            Some(Target::X86_64)
        } else if cfg!(target_arch = "aarch64") {
            Some(Target::Aarch64)
        } else {
            None
        }
    }

    fn triple(self) -> &'static str {
        match self {
            Target::X86_64 => "x86_64-unknown-linux-gnu",
            Target::Aarch64 => "aarch64-unknown-linux-gnu",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Target::X86_64 => "x86_64",
            Target::Aarch64 => "aarch64",
        }
    }
}

fn flags(opt_level: &str) -> settings::Flags {
    let mut b = settings::builder();
    for (k, v) in [
        ("opt_level", opt_level),
        ("is_pic", "false"),
        ("use_colocated_libcalls", "false"),
        // Where each block starts, for listings: code resumes there after a jump table.
        ("machine_code_cfg_info", "true"),
        // Cranelift's tail calls (an exit going on in another tree) need frame pointers.
        ("preserve_frame_pointers", "true"),
        // Cranelift checks every function it is given; the debug builds that run the tests
        // keep the check, a release build saves its time (a tenth of compiling).
        (
            "enable_verifier",
            if cfg!(debug_assertions) {
                "true"
            } else {
                "false"
            },
        ),
    ] {
        b.set(k, v).expect("a known Cranelift setting");
    }
    settings::Flags::new(b)
}

/// The ISA for `target`; `quick` compiles without Cranelift's optimizations (`opt_level`
/// none), for code that runs less than it costs to optimize.
fn isa_for(target: Target, quick: bool) -> Result<OwnedTargetIsa, String> {
    let triple = target.triple().parse().map_err(|e| format!("{e}"))?;
    isa::lookup(triple)
        .map_err(|e| e.to_string())?
        .finish(flags(if quick { "none" } else { "speed" }))
        .map_err(|e| e.to_string())
}

type TraceFn = unsafe extern "C" fn(*mut i64, *mut helpers::Ctx) -> u32;

/// Whether code analyzed as `an` may be entered again while it runs: it holds no integer of
/// any size (in a box of the code's, one per instruction).
pub(super) fn reentrant(an: &lower::TreeAnalysis) -> bool {
    let num = |k: &Option<abi::Repr>| *k == Some(abi::Repr::Num);
    !an.input_kinds.contains(&abi::Repr::Num) && !an.kinds.iter().flatten().any(num)
}

/// The trampoline that enters a tree (`lower::trampoline`): the tree, the register buffer,
/// the context.
type Trampoline = unsafe extern "C" fn(*const u8, *mut i64, *mut helpers::Ctx) -> i64;

/// The memory of one compiled function: its block of the code heap, given back when
/// dropped, so that code nothing can reach any more (a tree's function compiled again, a
/// bridge's) frees its memory.
pub struct CodeMemory {
    _block: code_heap::Block,
    bytes: usize,
    /// The backend's count of live bytes.
    live: Rc<Cell<usize>>,
}

impl Drop for CodeMemory {
    fn drop(&mut self) {
        self.live.set(self.live.get() - self.bytes);
    }
}

/// A trace tree as machine code.
pub struct Compiled {
    /// The tree's function (`lower::tree_signature`).
    f: *const u8,
    /// Per global instruction index, where a [`lower::linkable`] exit goes on: the address
    /// of another tree's function, or `unlinked` for a return to the runtime.
    links: Box<[Cell<u64>]>,
    /// The function that returns to the runtime ([`lower::unlinked`]).
    unlinked: u64,
    /// The kinds it counts on finding in the mirror on entry, of its inputs (which it does
    /// not check) and of other variables (which its exits leave as they were): a tree's
    /// inputs of fixed kinds; a bridge unit's, what its guard's exit leaves in the mirror.
    /// Every entry makes sure of them: the runtime's ([`Compiled::accepts`]) and a linked
    /// exit's ([`Compiled::admits`]).
    assumed: Vec<(Slot, abi::Repr)>,
    counting: bool,
    max_cost: u64,
    /// Whether a call may enter it while it runs ([`nested`]): it holds no integer of any
    /// size, whose boxes (one per instruction) its activations would share.
    reentrant: bool,
    analysis: lower::TreeAnalysis,
    /// The boxes of the integers of any size the code holds, at addresses it holds.
    _boxes: helpers::Boxes,
    /// The Cranelift IR, when asked for.
    pub ir: Option<String>,
    /// The disassembly with addresses, when asked for.
    pub asm: Option<String>,
    /// With the disassembly: where each trace instruction's code is, as (start, end,
    /// origin), offsets from `base`, sorted.
    pub origins: Vec<(u32, u32, lower::Origin)>,
    /// Whether the quick backend emitted it (`quick`), rather than Cranelift.
    pub quick: bool,
    /// What the code counts down: the quick backend's root, the iterations its loop runs
    /// before it exits to be compiled by Cranelift ([`Limits::tier_iterations`]); a bridge unit,
    /// its entries before it returns [`lower::HOT`] ([`Limits::bridge_entries`]).
    _countdown: Option<Box<Cell<i64>>>,
    /// The address the disassembly starts at.
    pub base: u64,
    /// The machine code's size in bytes.
    pub size: usize,
    /// Where the code lives; freed with it.
    _memory: CodeMemory,
}

/// The inputs of a tree's function whose kinds the function need not check where it is
/// entered: all but those of any size (whose tag may say a 64-bit integer).
fn held_inputs(an: &lower::TreeAnalysis) -> Vec<(Slot, abi::Repr)> {
    an.layout
        .inputs
        .iter()
        .zip(&an.input_kinds)
        .map(|((slot, _), kind)| (*slot, *kind))
        .filter(|(_, kind)| *kind != abi::Repr::Num)
        .collect()
}

/// What [`Backend::prepare`] made of a function.
pub enum Lowered {
    /// The quick backend's code, ready to run.
    Ready(Box<Compiled>),
    /// Cranelift's IR, to compile.
    Pending(Box<Prepared>),
}

/// A function lowered to Cranelift's IR, and what its [`Compiled`] will hold besides its
/// code (allocated now: the IR holds their addresses).
pub struct Prepared {
    /// The IR, until it goes to Cranelift.
    func: Option<cranelift_codegen::ir::Function>,
    /// Whether with Cranelift's optimizations ([`Limits::max_optimized`]).
    optimize: bool,
    /// Its name in the perf map.
    label: String,
    /// The root's loop header, when the function holds it.
    header: Option<usize>,
    /// Whether to disassemble the code.
    listing: bool,
    an: lower::TreeAnalysis,
    links: Box<[Cell<u64>]>,
    unlinked: u64,
    assumed: Vec<(Slot, abi::Repr)>,
    counting: bool,
    max_cost: u64,
    boxes: helpers::Boxes,
    ir: Option<String>,
    asm: Option<String>,
    origins: Vec<(u32, u32, lower::Origin)>,
    countdown: Option<Box<Cell<i64>>>,
}

/// What the backend compiles: a tree's function (its root and the bridges compiled in
/// it) or a bridge compiled on its own, with what the optimizer and the driver decided
/// for it.
pub struct Unit<'a> {
    /// The segments: a tree's (those `separate` are compiled elsewhere), or a bridge alone.
    pub segments: &'a [Segment<'a>],
    /// How the unit holds its values (`opt::repr::infer` of `segments`).
    pub reprs: Reprs,
    /// What its code checks (`opt::checks::of_unit` of `segments` and `reprs`).
    pub checks: Checks,
    /// The tree's number in the run, and 0 for its function or the segment number of the
    /// bridge compiled on its own.
    pub at: (usize, usize),
    /// How many variables the program's frames have (the mirror's size).
    pub frame_size: usize,
    /// Whether the code counts iterations so that `--max-steps` stays exact; its exits then
    /// always return.
    pub counting: bool,
    /// For a bridge on its own: the representations the mirror holds where it is entered,
    /// which it does not check ([`lower::exit_kinds`] of its guard's exit, the only one
    /// linked to it, which [`Compiled::admits`] checks). A tree's function checks the
    /// inputs held boxed only.
    pub assumed: &'a [(Slot, abi::Repr)],
    /// The driver's choices for the code.
    pub tuning: Tuning,
    /// The program, for the calls the code makes directly into function traces' code
    /// ([`nested::FnCell`]) and the values a function trace's code returns
    /// ([`lower::RETURNED`]); without it, every call goes through a helper and a function
    /// trace's end is an exit.
    pub program: Option<&'a crate::lang::Program>,
}

impl<'a> Unit<'a> {
    /// A tree's function of `segments`, tree 0 of a run, for frames of `frame_size`
    /// variables, holding `wide` as integers of any size where it reads them, everything
    /// tuned on, without counting steps.
    pub fn tree(segments: &'a [Segment<'a>], wide: &[Slot], frame_size: usize) -> Unit<'a> {
        let reprs = crate::opt::repr::infer(segments, wide, true);
        let tuning = Tuning::DEFAULT;
        Unit {
            checks: tuning.checks(segments, &reprs, true),
            reprs,
            segments,
            at: (0, 0),
            frame_size,
            counting: false,
            assumed: &[],
            tuning,
            program: None,
        }
    }
}

/// The driver's choices for a unit's code, each of which it revises when the code runs
/// badly with it.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Whether the code may read the elements of an array that says it holds only
    /// integers without their tags, checking that once (`Array::only_ints`), and exit when
    /// the array no longer does; otherwise every read checks its element's tag. Off for a
    /// tree whose reads exit too often.
    pub ints: bool,
    /// Whether the root loop's proofs may assume a parameter in an interval that the value
    /// the loop is entered with is checked against (`opt::bounds::induction`). Off for a
    /// tree whose entries fail that check too often.
    pub induction: bool,
    /// Whether the tree's function may be the quick backend's (`quick`), until its loop has
    /// run long enough for Cranelift's code to pay for itself.
    pub quick: bool,
}

impl Tuning {
    /// Everything on, as for a new tree.
    pub const DEFAULT: Tuning = Tuning {
        ints: true,
        induction: true,
        quick: true,
    };

    /// What the code of the unit `segments`, its values held as `reprs` says, checks with
    /// these choices (`opt::checks::of_unit`). `root`: whether the unit is a tree's
    /// function (not a bridge compiled on its own), whose root loop may assume an induction.
    pub fn checks(self, segments: &[Segment], reprs: &Reprs, root: bool) -> Checks {
        let induction = self.induction && root;
        crate::opt::checks::of_unit(segments, &reprs.values, self.ints, induction)
    }
}

/// What to produce besides the machine code.
#[derive(Clone, Copy, Debug, Default)]
pub struct Listings {
    /// The Cranelift IR.
    pub ir: bool,
    /// The disassembly.
    pub asm: bool,
}

/// The native-code backend.
pub struct Backend {
    /// The ISA bridges compiled on their own are compiled for: without Cranelift's
    /// optimizations (a third less compile time, and on Brainfuck's mandelbrot, with its
    /// 641 such bridges, code as fast), while trees keep them (the square loop of the
    /// register machine runs a fifth slower without).
    quick_isa: OwnedTargetIsa,
    /// The trampoline that enters trees (`lower::trampoline`), and its memory.
    trampoline: Option<(Trampoline, CodeMemory)>,
    /// Where the exits with nothing linked go (`lower::unlinked`), and its memory.
    unlinked: Option<(u64, CodeMemory)>,
    /// The register buffer trees run on, as large as the largest tree compiled needs: an
    /// exit may go on in any of them.
    regs: Vec<i64>,
    /// Bytes of machine code made so far, all compilations together.
    code_bytes: usize,
    /// Bytes of machine code alive now (each function's memory is freed with it).
    live: Rc<Cell<usize>>,
    /// Where all the functions' code is.
    heap: code_heap::CodeHeap,
    isa: OwnedTargetIsa,
    host: Target,
    /// The ISA of `--target` when it is not the host's: code emitted for display only.
    display: Option<(Target, OwnedTargetIsa)>,
    fctx: FunctionBuilderContext,
    /// The Cranelift context every function is compiled in, reused.
    ctx: Context,
    /// The compiler thread, once a function went there ([`Backend::submit`]).
    worker: Option<background::Worker>,
    /// Whether the compiler thread could not start, or has gone.
    worker_gone: bool,
    /// What it keeps to.
    limits: Limits,
    /// `/tmp/perf-PID.map`, when `FLOWJIT_PERF_MAP` is set: where each function's code
    /// is, for `perf report`.
    perf_map: Option<std::io::BufWriter<std::fs::File>>,
    /// One cell per function of the program, made with the first code that calls
    /// directly: what direct calls enter ([`nested::FnCell`]). Its address is in code and
    /// never changes.
    cells: Option<Box<[nested::FnCell]>>,
    /// The cells of an interpreter's dispatch functions (`Program::portal`), one per
    /// function and green arguments (a function of the interpreted program), made with the
    /// first code that calls or publishes it. Each box's address is in code and never
    /// changes.
    keyed: HashMap<(crate::lang::FuncId, Vec<flowjit_runtime::Value>), Box<nested::FnCell>>,
}

impl Backend {
    /// A backend for the host, keeping to `limits`; `display` emits listings for that ISA
    /// instead.
    pub fn new(display: Option<Target>, limits: Limits) -> Result<Backend, String> {
        let limits = Limits {
            tier_iterations: limits.tier_iterations.max(1),
            bridge_entries: limits.bridge_entries.max(0),
            ..limits
        };
        let host = Target::native()?;
        let isa = isa_for(host, false)?;
        let display = match display {
            Some(t) if t != host => Some((t, isa_for(t, false)?)),
            _ => None,
        };
        let mut backend = Backend {
            quick_isa: isa_for(host, true)?,
            trampoline: None,
            unlinked: None,
            regs: Vec::new(),
            code_bytes: 0,
            live: Rc::new(Cell::new(0)),
            heap: code_heap::CodeHeap::new(2 * limits.max_code_bytes, true)
                .map_err(|e| format!("cannot reserve memory for machine code: {e}"))?,
            isa,
            host,
            display,
            fctx: FunctionBuilderContext::new(),
            ctx: Context::new(),
            worker: None,
            worker_gone: false,
            limits,
            cells: None,
            keyed: HashMap::new(),
            perf_map: perf_map(),
        };
        let func = lower::trampoline(&*backend.isa, &mut backend.fctx);
        let tramp = backend
            .define(func, "trampoline", false, None)
            .map_err(|e| e.to_string())?;
        // SAFETY: the function was compiled with `lower::trampoline_signature`, this type.
        let enter = unsafe { std::mem::transmute::<*const u8, Trampoline>(tramp.ptr) };
        backend.trampoline = Some((enter, tramp.memory));
        let func = lower::unlinked(&*backend.isa, &mut backend.fctx);
        let unlinked = backend
            .define(func, "unlinked exit", false, None)
            .map_err(|e| e.to_string())?;
        backend.unlinked = Some((unlinked.ptr as u64, unlinked.memory));
        Ok(backend)
    }

    /// The cells of `program`'s functions ([`nested::FnCell`]), made on first use; `None`
    /// if they were made for a program with another number of functions.
    fn cells(&mut self, program: &crate::lang::Program) -> Option<&[nested::FnCell]> {
        let n = program.funcs.len();
        let cells =
            (self.cells).get_or_insert_with(|| (0..n).map(|_| Default::default()).collect());
        (cells.len() == n).then_some(&cells[..])
    }

    /// The cell of the function trace of dispatch function `func` for calls whose green
    /// arguments are `greens`, made on first use; its address never changes.
    fn keyed_cell(
        &mut self,
        func: crate::lang::FuncId,
        greens: &[flowjit_runtime::Value],
    ) -> &nested::FnCell {
        (self.keyed.entry((func, greens.to_vec()))).or_default()
    }

    /// Makes `code`, the function of function `func`'s trace (for the green arguments
    /// `greens`, when `func` is a dispatch function), whose inlined calls nest `calls`
    /// deep, what machine code's calls of `func` enter directly
    /// ([`nested::FnCell::publish`]); `None`: nothing, they go through a helper.
    pub fn publish(
        &mut self,
        program: &crate::lang::Program,
        func: crate::lang::FuncId,
        greens: &[flowjit_runtime::Value],
        code: Option<&Compiled>,
        calls: usize,
    ) {
        let params = &program.func(func).params;
        if program.portal(func).is_some() {
            self.keyed_cell(func, greens).publish(params, code, calls);
        } else if let Some(cells) = self.cells(program) {
            cells[func.index()].publish(params, code, calls);
        }
    }

    /// The cells the direct calls of `segments` (sites `sites`) to dispatch functions
    /// enter: per call whose green arguments are constants, that function trace's cell.
    fn keyed_cells(
        &mut self,
        program: &crate::lang::Program,
        segments: &[Segment],
        sites: &rustc_hash::FxHashMap<TreeInst, Box<helpers::CallSite>>,
    ) -> Vec<(TreeInst, u64)> {
        let mut found = Vec::new();
        for (at, site) in sites.iter().filter(|(_, s)| s.call.is_some()) {
            let Some(greens) = program.portal(site.func) else {
                continue;
            };
            let params = &program.func(site.func).params;
            let inst = &segments[at.segment].trace.insts[at.inst];
            let values: Option<Vec<flowjit_runtime::Value>> = (greens.iter())
                .map(|g| {
                    let k = params.iter().position(|p| p == g)?;
                    inst.args.get(k)?.as_const().cloned()
                })
                .collect();
            if let Some(values) = values {
                let cell = self.keyed_cell(site.func, &values) as *const nested::FnCell;
                found.push((*at, cell as u64));
            }
        }
        found
    }

    /// How many entries a bridge compiled on its own counts ([`Limits::bridge_entries`]).
    pub fn bridge_entries(&self) -> i64 {
        self.limits.bridge_entries
    }

    /// The name of the ISA listings are for.
    pub fn listing_target(&self) -> &'static str {
        match &self.display {
            Some((t, _)) => t.name(),
            None => Target::host().map_or("host", Target::name),
        }
    }

    /// Compiles `unit`, specialized on the representations its values have
    /// ([`Unit::reprs`]).
    pub fn compile(&mut self, unit: Unit, listings: Listings) -> Result<Compiled, Unsupported> {
        match self.prepare(unit, listings)? {
            Lowered::Ready(code) => Ok(*code),
            Lowered::Pending(mut p) => {
                let m = self.emit(&mut p)?;
                self.finish(p, m)
            }
        }
    }

    /// [`Backend::compile`]'s first part: the quick backend's code, or the function lowered
    /// to Cranelift's IR, for Cranelift to compile here ([`Backend::emit`]) or on the
    /// compiler thread ([`Backend::submit`]), and then [`Backend::finish`].
    pub fn prepare(&mut self, unit: Unit, listings: Listings) -> Result<Lowered, Unsupported> {
        let Unit {
            segments,
            reprs,
            checks,
            at: (tree, unit),
            frame_size,
            counting,
            assumed,
            tuning,
            program,
        } = unit;
        let mut an = lower::analyze(segments, reprs, checks, frame_size, unit, tuning)?;
        let root = segments[0].trace;
        an.sized = !counting
            && program.is_some_and(|p| p.func_of(root.anchor).is_some())
            && !(unit == 0 && root.function.is_some());
        let keyed = match program {
            Some(p) if !counting => self.keyed_cells(p, segments, &an.sites),
            _ => Vec::new(),
        };
        let direct = program.filter(|_| !counting).and_then(|p| {
            let cells = self.cells(p)?.as_ptr() as u64;
            Some(lower::Direct {
                program: p,
                cells,
                keyed: &keyed,
            })
        });
        if counting && an.sites.values().any(|s| s.call.is_some()) {
            return Err(Unsupported::CountedCall);
        }
        // A tree's function is entered by the runtime, which checks the frame first
        // (`Compiled::accepts`), or by a linked exit, which the driver links only where the
        // kinds the exit leaves are the inputs' (`Compiled::admits`): it checks none.
        let inputs: Vec<(Slot, abi::Repr)>;
        let assumed = if unit == 0 {
            inputs = held_inputs(&an);
            &inputs[..]
        } else {
            assumed
        };
        let unlinked = self.unlinked.as_ref().expect("made with the backend").0;
        let links: Box<[Cell<u64>]> = (0..an.layout.size).map(|_| Cell::new(unlinked)).collect();
        // A bridge unit counts its entries ([`lower::HOT`]); a root of the quick backend,
        // its loop's iterations.
        let counts_entries = unit != 0 && !counting && self.limits.bridge_entries > 0;
        let countdown = Box::new(Cell::new(if unit == 0 {
            self.limits.tier_iterations
        } else {
            self.limits.bridge_entries
        }));
        let table = Some(lower::Links {
            table: links.as_ptr() as *const u64,
            assumed,
            entries: counts_entries.then_some(countdown.as_ptr() as u64),
        });
        let label = match unit {
            0 => format!("tree {tree}"),
            k => format!("tree {tree} bridge {k}"),
        };
        // A bridge of integer arithmetic and guards, or a root of them alone in its
        // function, emitted directly. Its IR is Cranelift's to show, and `--max-steps`
        // counts in Cranelift's code only.
        let sure = lower::unchecked(&an, assumed);
        let alone = segments.iter().skip(1).all(|s| s.separate);
        let quick = (unit != 0 || (tuning.quick && alone))
            && !counting
            && !listings.ir
            && self.display.is_none()
            && self.host == Target::X86_64;
        let emitted = quick
            .then(|| {
                let table = links.as_ptr() as u64;
                let counter = (unit == 0 || counts_entries).then_some(countdown.as_ptr() as u64);
                quick::emit(&segments[0], &an, tree, table, &sure, counter)
            })
            .flatten();
        if let Some(emitted) = emitted {
            let (ptr, memory) = self.place(&emitted.bytes, 16, &label)?;
            let (mut asm, mut origins) = (None, Vec::new());
            if listings.asm {
                asm = Some(disassemble(
                    &*self.isa,
                    self.host,
                    &emitted.bytes,
                    ptr as u64,
                    &[0],
                )?);
                origins = emitted.origins;
            }
            if self.regs.len() < an.layout.size {
                self.regs.resize(an.layout.size, 0);
            }
            return Ok(Lowered::Ready(Box::new(Compiled {
                f: ptr,
                links,
                unlinked,
                assumed: assumed.to_vec(),
                counting,
                max_cost: lower::max_cost(segments),
                reentrant: reentrant(&an),
                analysis: an,
                _boxes: helpers::Boxes::default(),
                ir: None,
                asm,
                origins,
                quick: true,
                _countdown: Some(countdown),
                base: ptr as u64,
                size: emitted.bytes.len(),
                _memory: memory,
            })));
        }
        let (func, boxes) = lower::lower(
            segments,
            &an,
            &*self.isa,
            &mut self.fctx,
            counting,
            (tree, table),
            direct,
        );
        let (mut ir, mut asm, mut origins) = (None, None, Vec::new());
        if self.display.is_some() {
            let lowering = (segments, &an, counting, (tree, table), direct);
            (ir, asm, origins) = self.display_listings(lowering, listings)?;
        } else if listings.ir {
            ir = Some(func.display().to_string());
        }
        // The loop of the root, when this function holds it: its header is aligned.
        let header = segments[0].trace.loop_start().filter(|_| unit == 0);
        let size: usize = segments.iter().map(|s| s.trace.insts.len()).sum();
        Ok(Lowered::Pending(Box::new(Prepared {
            func: Some(func),
            optimize: !(unit != 0 || size > self.limits.max_optimized),
            label,
            header,
            listing: listings.asm,
            an,
            links,
            unlinked,
            assumed: assumed.to_vec(),
            counting,
            max_cost: lower::max_cost(segments),
            boxes,
            ir,
            asm,
            origins,
            countdown: counts_entries.then_some(countdown),
        })))
    }

    /// The listings of a function lowered for the ISA shown (`--target`) rather than the
    /// host's: its IR and its machine code, with the origin of each instruction, from a
    /// compilation of their own.
    #[allow(clippy::type_complexity)]
    fn display_listings(
        &mut self,
        (segments, an, counting, links, direct): (
            &[Segment],
            &lower::TreeAnalysis,
            bool,
            (usize, Option<lower::Links>),
            Option<lower::Direct>,
        ),
        listings: Listings,
    ) -> Result<
        (
            Option<String>,
            Option<String>,
            Vec<(u32, u32, lower::Origin)>,
        ),
        Unsupported,
    > {
        let (target, disp) = self.display.as_ref().expect("an ISA to display");
        let (dfunc, _) = lower::lower(
            segments,
            an,
            &**disp,
            &mut self.fctx,
            counting,
            links,
            direct,
        );
        let (mut ir, mut asm, mut origins) = (None, None, Vec::new());
        if listings.ir {
            ir = Some(dfunc.display().to_string());
        }
        if listings.asm {
            let mut ctx = Context::for_function(dfunc);
            let code = ctx
                .compile(&**disp, &mut ControlPlane::default())
                .map_err(|e| Unsupported::Cranelift(format!("{e:?}")))?;
            let (bytes, blocks) = (code.code_buffer(), &code.bb_starts);
            asm = Some(disassemble(&**disp, *target, bytes, 0, blocks)?);
            origins = origins_of(code.buffer.get_srclocs_sorted());
        }
        Ok((ir, asm, origins))
    }

    /// The machine code of a function [`Backend::prepare`] lowered, compiled by Cranelift
    /// here.
    pub fn emit(&mut self, p: &mut Prepared) -> Result<Machine, Unsupported> {
        let func = p.func.take().expect("a function not compiled yet");
        let isa = if p.optimize {
            &self.isa
        } else {
            &self.quick_isa
        };
        background::emit(&**isa, &mut self.ctx, func)
    }

    /// Queues the function [`Backend::prepare`] lowered, number `id`, for the compiler
    /// thread (started the first time); false when there is none (the system would not
    /// start it, or it has gone), and the caller compiles it here.
    pub fn submit(&mut self, id: u64, p: &mut Prepared) -> bool {
        if self.worker.is_none() && !self.worker_gone {
            self.worker = background::Worker::spawn(self.isa.clone(), self.quick_isa.clone());
            self.worker_gone = self.worker.is_none();
        }
        let Some(worker) = &self.worker else {
            return false;
        };
        let func = p.func.take().expect("a function not compiled yet");
        match worker.submit(id, func, p.optimize) {
            Ok(()) => true,
            // The thread has gone: `emit` compiles it here.
            Err(func) => {
                p.func = Some(*func);
                self.worker = None;
                self.worker_gone = true;
                false
            }
        }
    }

    /// Makes the compiler thread one that takes `n` functions and stops without compiling
    /// them, as one on which Cranelift panicked does (for the tests of what the driver does
    /// then).
    #[cfg(test)]
    pub(crate) fn stop_worker_after(&mut self, n: usize) {
        self.worker = Some(background::Worker::stopping_after(n));
    }

    /// Whether the compiler thread has gone (or could not be started).
    #[cfg(test)]
    pub(crate) fn worker_gone(&self) -> bool {
        self.worker_gone
    }

    /// A function the compiler thread has finished, if any (`wait`: the next it finishes,
    /// one being queued): its number and its code. `Err` once the thread has gone
    /// (Cranelift panicked): the functions queued are lost, and the next ones are compiled
    /// here.
    pub fn finished(&mut self, wait: bool) -> Result<Option<Done>, Gone> {
        let Some(worker) = &mut self.worker else {
            return Ok(None);
        };
        let done = worker.finished(wait);
        if done.is_err() {
            self.worker = None;
            self.worker_gone = true;
        }
        done
    }

    /// Whether the compiler thread has handed back a function not taken yet, or has gone
    /// (which [`Backend::finished`] then finds).
    pub fn waiting(&self) -> bool {
        self.worker
            .as_ref()
            .is_some_and(background::Worker::waiting)
    }

    /// What tells whether the compiler thread has handed back a function not taken yet
    /// (`None` without the thread).
    pub fn finishes(&self) -> Option<background::Finishes> {
        self.worker.as_ref().map(background::Worker::finishes)
    }

    /// Places the machine code of a prepared function: the function, compiled.
    pub fn finish(&mut self, p: Box<Prepared>, m: Machine) -> Result<Compiled, Unsupported> {
        let Defined {
            bytes,
            ptr,
            blocks,
            locs,
            memory,
        } = self.place_machine(m, &p.label, p.header, p.optimize)?;
        let (mut asm, mut origins, mut base) = (p.asm, p.origins, 0);
        if p.listing && self.display.is_none() {
            asm = Some(disassemble(
                &*self.isa, self.host, &bytes, ptr as u64, &blocks,
            )?);
            origins = locs;
            base = ptr as u64;
        }
        if self.regs.len() < p.an.layout.size {
            self.regs.resize(p.an.layout.size, 0);
        }
        Ok(Compiled {
            f: ptr,
            links: p.links,
            unlinked: p.unlinked,
            assumed: p.assumed,
            counting: p.counting,
            max_cost: p.max_cost,
            reentrant: reentrant(&p.an),
            analysis: p.an,
            _boxes: p.boxes,
            ir: p.ir,
            asm,
            origins,
            quick: false,
            _countdown: p.countdown,
            base,
            size: bytes.len(),
            _memory: memory,
        })
    }

    /// Places position-independent machine code in the code heap at a multiple of
    /// `align`, executable; `label` names it in the perf map.
    fn place(
        &mut self,
        bytes: &[u8],
        align: usize,
        label: &str,
    ) -> Result<(*const u8, CodeMemory), Unsupported> {
        if self.live.get() >= self.limits.max_code_bytes {
            return Err(Unsupported::CodeMemory(self.limits.max_code_bytes));
        }
        let block = self.heap.place(bytes, align).map_err(|e| match e.kind() {
            // Full (of holes too small, or of live code).
            std::io::ErrorKind::OutOfMemory => Unsupported::CodeMemory(self.limits.max_code_bytes),
            _ => Unsupported::Protection(e.to_string()),
        })?;
        let ptr = block.ptr();
        self.code_bytes += bytes.len();
        self.live.set(self.live.get() + bytes.len());
        if let Some(map) = &mut self.perf_map {
            // perf's format for code it cannot find in a file: start, size (hex), name.
            // A failed write loses only the profile's names.
            let _ = writeln!(map, "{:x} {:x} flowjit {label}", ptr as usize, bytes.len());
            let _ = map.flush();
        }
        let memory = CodeMemory {
            _block: block,
            bytes: bytes.len(),
            live: Rc::clone(&self.live),
        };
        Ok((ptr, memory))
    }
}

/// The origins of the ranges of machine code Cranelift reports (`Compiled::origins`).
fn origins_of(locs: &[MachSrcLoc<Final>]) -> Vec<(u32, u32, lower::Origin)> {
    locs.iter()
        .filter_map(|l| lower::Origin::of(l.loc).map(|o| (l.start, l.end, o)))
        .collect()
}

/// A whole program as machine code.
pub struct CompiledProgram {
    f: TraceFn,
    analysis: crate::opt::program::ProgramAnalysis,
    /// The Cranelift IR, when asked for.
    pub ir: Option<String>,
    /// The disassembly with addresses, when asked for.
    pub asm: Option<String>,
    /// The machine code's size in bytes.
    pub size: usize,
    /// How long analyzing, lowering and compiling it took.
    pub time: std::time::Duration,
    /// Where the code lives; freed with it.
    _memory: CodeMemory,
}

impl Backend {
    /// Compiles the whole of `program` from `entry` (a residual program) to one function;
    /// the kinds of its inputs are those of `frame`'s values now.
    pub fn compile_program(
        &mut self,
        program: &crate::lang::Program,
        entry: crate::lang::BlockId,
        frame: &Frame,
        listings: Listings,
    ) -> Result<CompiledProgram, Unsupported> {
        let start = std::time::Instant::now();
        let mut an = cfg::analyze(program, entry, frame)?;
        let func = cfg::lower(program, entry, &mut an, &*self.isa, &mut self.fctx);
        let ir = listings.ir.then(|| func.display().to_string());
        let Defined {
            bytes,
            ptr,
            blocks,
            memory,
            ..
        } = self.define(func, "program", false, None)?;
        // SAFETY: a residual program is compiled with `lower::signature`, which is this type.
        let f = unsafe { std::mem::transmute::<*const u8, TraceFn>(ptr) };
        let asm = if listings.asm {
            Some(disassemble(
                &*self.isa, self.host, &bytes, ptr as u64, &blocks,
            )?)
        } else {
            None
        };
        Ok(CompiledProgram {
            f,
            analysis: an,
            ir,
            asm,
            size: bytes.len(),
            time: start.elapsed(),
            _memory: memory,
        })
    }

    /// Bytes of machine code made so far, and of those, alive now.
    pub fn code_bytes(&self) -> (usize, usize) {
        (self.code_bytes, self.live.get())
    }

    /// Compiles `func` into a module of its own (for the quick ISA with `quick`); `label`
    /// names it in the perf map. With `header`, the index of the root's `loop_start`, the
    /// code is placed so that the loop's header starts near a 64-byte boundary
    /// ([`LOOP_ALIGN`]).
    fn define(
        &mut self,
        func: cranelift_codegen::ir::Function,
        label: &str,
        quick: bool,
        header: Option<usize>,
    ) -> Result<Defined, Unsupported> {
        if self.live.get() >= self.limits.max_code_bytes {
            return Err(Unsupported::CodeMemory(self.limits.max_code_bytes));
        }
        let isa = if quick { &self.quick_isa } else { &self.isa };
        // One context for every compilation: Cranelift keeps its allocations (the register
        // allocator's above all) from one function to the next.
        let m = background::emit(&**isa, &mut self.ctx, func)?;
        self.place_machine(m, label, header, !quick)
    }

    /// Places machine code compiled for the host (with Cranelift's optimizations, or
    /// without): `header` is the root's loop header, when the function holds it.
    fn place_machine(
        &mut self,
        m: Machine,
        label: &str,
        header: Option<usize>,
        optimized: bool,
    ) -> Result<Defined, Unsupported> {
        let Machine {
            bytes,
            blocks,
            locs,
            align,
        } = m;
        // The code goes `pad` bytes into memory aligned to LOOP_ALIGN: a multiple of the
        // alignment the code itself asks for (its constants'), chosen so that the block
        // where the loop's first instruction is starts at most `align - 1` bytes past a
        // boundary. A loop that straddles a boundary fetches two windows per iteration:
        // the square loop of the register machine ran half again as long.
        let align = align.max(16);
        let pad = header
            .and_then(|h| {
                let first = locs
                    .iter()
                    .find(|(_, _, o)| o.segment == 0 && !o.exit && o.inst > h)?
                    .0;
                let start = blocks.iter().rev().find(|b| **b <= first)?;
                let past = start % LOOP_ALIGN;
                Some((LOOP_ALIGN - past).div_ceil(align) * align % LOOP_ALIGN)
            })
            .unwrap_or(0);
        let isa = if optimized {
            &self.isa
        } else {
            &self.quick_isa
        };
        let mut placed = vec![isa_pad_byte(&**isa); pad as usize];
        placed.extend_from_slice(&bytes);
        let (ptr, memory) = self.place(&placed, LOOP_ALIGN as usize, label)?;
        // SAFETY: `pad` bytes into the function's memory, which holds `placed`.
        let ptr = unsafe { ptr.add(pad as usize) };
        Ok(Defined {
            bytes,
            ptr,
            blocks,
            locs,
            memory,
        })
    }
}

/// The boundary a loop's header is placed near, in bytes: the instruction fetch windows
/// of current x86-64 and aarch64 cores.
const LOOP_ALIGN: u32 = 64;

/// What fills the bytes before a function placed off its boundary (never run): a trap.
fn isa_pad_byte(isa: &dyn TargetIsa) -> u8 {
    match isa.triple().architecture {
        target_lexicon::Architecture::X86_64 => 0xcc,
        _ => 0,
    }
}

/// The perf map to write, when the environment asks for one (`FLOWJIT_PERF_MAP`, any
/// value): `perf record` then `perf report` name each tree's and bridge's code.
fn perf_map() -> Option<std::io::BufWriter<std::fs::File>> {
    std::env::var_os("FLOWJIT_PERF_MAP")?;
    let path = format!("/tmp/perf-{}.map", std::process::id());
    std::fs::File::create(path)
        .ok()
        .map(std::io::BufWriter::new)
}

/// A function compiled into the module.
struct Defined {
    /// Its machine code.
    bytes: Vec<u8>,
    /// Its address.
    ptr: *const u8,
    /// Where its blocks start in the code.
    blocks: Vec<u32>,
    /// Where each trace instruction's code is ([`Compiled::origins`]).
    locs: Vec<(u32, u32, lower::Origin)>,
    /// Its memory.
    memory: CodeMemory,
}

/// Runs a compiled residual program on `state` (`program` is the residual program, whose
/// functions the context names): from its entry with the variables of the frame, until it
/// stops or deoptimizes. `None` when a variable holds a value of another kind than the code
/// was compiled for (the interpreter then runs it all).
pub fn run_program(
    code: &CompiledProgram,
    program: &crate::lang::Program,
    state: &mut crate::state::State,
) -> Option<cfg::ProgramExit> {
    let an = &code.analysis;
    let n = an.kinds.len();
    let mut regs = vec![0i64; n + 1];
    for (slot, kind) in an.kinds.iter().enumerate() {
        if let (Some(v), Some(kind)) = (&state.frame[slot], kind) {
            regs[slot] = abi::unbox(v, *kind)?;
        }
    }
    let mut ctx = helpers::Ctx::new(program, state, None, None);
    // SAFETY: `regs` has a slot per variable and one for the printed value; every variable
    // written in the frame is of the kind the code was compiled for; `ctx` is the context
    // the helpers expect.
    let code_returned = unsafe { (code.f)(regs.as_mut_ptr(), &mut ctx) };
    // What the code made stays alive until the values the interpreter keeps are copied.
    let _made = std::mem::take(&mut ctx.owned);
    // SAFETY (for every `rebox`): a slot was stored from a value of the kind recorded for it,
    // alive in the frame, in the program's constants or in `_made`.
    if let Some(kind) = cfg::stopped(code_returned) {
        return Some(cfg::ProgramExit::Stop(unsafe { abi::rebox(regs[n], kind) }));
    }
    // Each variable lives in the register of its slot.
    let point = &an.points[code_returned as usize];
    let read = |r: Ref| {
        let kind = an.kinds[r.index()].expect("a written variable has a kind");
        unsafe { abi::rebox(regs[r.index()], kind) }
    };
    resume::restore_frame(point, read, &mut state.frame);
    Some(cfg::ProgramExit::Resume(point.pos))
}

/// The listing of `bytes`, compiled for `target` by `isa`, loaded at `base`, its blocks
/// starting at `blocks`: instructions, and jump tables and constants as data
/// ([`listing`]).
fn disassemble(
    isa: &dyn TargetIsa,
    target: Target,
    bytes: &[u8],
    base: u64,
    blocks: &[u32],
) -> Result<String, Unsupported> {
    let lines = listing::lines(isa, target, bytes, base, blocks)?;
    Ok(listing::render(&lines, base))
}

/// How a run of machine code ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeExit {
    /// The tree that returned: the one entered, or one that exits of others went on in.
    pub tree: usize,
    /// Where the interpreter continues.
    pub pos: Position,
    /// The segment (0: the root, `k`: bridge `k - 1`) and instruction of `tree` that
    /// exited; `None` when `tree` refused its entry (an input of another kind) and the
    /// interpreter continues at its anchor.
    pub at: Option<lower::TreeInst>,
    /// The bridge unit of `tree` that returned [`lower::HOT`] on its entry, having done
    /// nothing (`at` is `None`, the interpreter continues at the bridge's start).
    pub hot: Option<usize>,
    /// How many lists and arrays the code made (the virtual arrays bridges built
    /// included).
    pub allocated: u64,
    /// How the program ended inside a `call` the code made, if it did (`helpers::Ctx::ended`).
    pub ended: Option<Result<flowjit_runtime::Value, crate::interp::RuntimeError>>,
    /// How many `call`s the code made.
    pub calls: u64,
    /// How many of those entered a function trace's machine code (`nested`).
    pub entered: u64,
    /// How many of those entered it through a helper rather than directly.
    pub helped: u64,
}

/// What gives a tree's segments (the driver's trees): segment `seg` as its tree's function
/// holds it, its path's cost counted from the root.
pub trait Segments {
    /// Segment `seg` (0: the root).
    fn segment(&self, seg: usize) -> Segment<'_>;
}

/// A trace alone is a tree of one segment, its root.
impl Segments for crate::trace::Trace {
    fn segment(&self, seg: usize) -> Segment<'_> {
        debug_assert_eq!(seg, 0, "a trace alone has its root only");
        Segment::root(self)
    }
}

/// A compiled function, as [`Backend::run`] finds it by its tree and unit.
pub struct TreeCode<'a> {
    /// Its code.
    pub code: &'a Compiled,
    /// Its tree's segments.
    pub tree: &'a dyn Segments,
    /// For a bridge compiled on its own, its segment in the tree, which is the unit's only
    /// one; `None` for the tree's function.
    pub alone: Option<usize>,
    /// Where it starts: the tree's anchor, or the bridge's first position.
    pub start: Position,
}

impl<'a> TreeCode<'a> {
    /// The unit's segment `seg`: the tree's, or the bridge's alone, whose guard's exit
    /// counted the path to it (as `Jit::compile_bridge` compiles it).
    pub fn segment(&self, seg: usize) -> Segment<'a> {
        match self.alone {
            None => self.tree.segment(seg),
            Some(s) => Segment {
                cost: 0,
                ..self.tree.segment(s)
            },
        }
    }
}

impl Compiled {
    /// Whether code running may enter this code again (a call made in it: `nested`): it
    /// counts no steps and holds no integer of any size (whose boxes are the code's own).
    pub fn enterable(&self) -> bool {
        !self.counting && self.reentrant
    }

    /// Whether it holds no integer of any size, whose boxes (one per instruction) its
    /// activations would share.
    pub fn reentrant(&self) -> bool {
        self.reentrant
    }

    /// Stops a bridge unit's count of entries: it does not return [`lower::HOT`] again
    /// (within the next 2^63 entries).
    pub fn stop_counting(&self) {
        if let Some(c) = &self._countdown {
            c.set(i64::MAX);
        }
    }

    /// How many entries a bridge unit that counts them has left before it returns
    /// [`lower::HOT`].
    pub fn entries_left(&self) -> Option<i64> {
        self._countdown.as_ref().map(|c| c.get())
    }

    /// The kinds of variables it counts on finding in the mirror, besides its inputs'.
    pub fn assumptions(&self) -> &[(Slot, abi::Repr)] {
        &self.assumed
    }

    /// Counts on finding variables of `kinds` in the mirror too: its entries check them
    /// (`Compiled::accepts`, a function trace's calls), and its exits leave them so
    /// (`Compiled::exit_kinds`). A function trace's parameters that the code of a loop
    /// its end goes on in counts on.
    pub fn assume(&mut self, kinds: &[(Slot, abi::Repr)]) {
        for k in kinds {
            if !self.assumed.contains(k) {
                self.assumed.push(*k);
            }
        }
    }

    /// Makes the exit at global instruction index `g` return again, linked or not.
    pub fn unlink(&self, g: usize) {
        self.links[g].set(self.unlinked);
    }

    /// Makes the exit at global instruction index `g` (a [`lower::linkable`] one) go on in
    /// `target` instead of returning.
    pub fn link(&self, g: usize, target: &Compiled) {
        self.links[g].set(target.f as u64);
    }

    /// The kinds the mirror surely holds after the linkable exit at instruction `i` of
    /// segment `seg` (of its tree) of this code, `trace` ([`lower::exit_kinds`]); `None`
    /// if the code does not hold the segment (a bridge added to the tree since).
    pub fn exit_kinds(
        &self,
        trace: &Trace,
        seg: usize,
        i: usize,
    ) -> Option<Vec<(Slot, abi::Repr)>> {
        self.global(seg, i)?;
        let seg = if self.analysis.unit == 0 { seg } else { 0 };
        let mut kinds = lower::exit_kinds(&self.analysis, trace, seg, i);
        // What the code found in the mirror on entry is there still where the exit does
        // not write: code writes the mirror only at its exits.
        for &(slot, kind) in &self.assumed {
            if !kinds.iter().any(|(s, _)| *s == slot) {
                kinds.push((slot, kind));
            }
        }
        Some(kinds)
    }

    /// Whether this code is entered without checking that variable `slot` holds a value
    /// of kind `kind`.
    pub fn assumes(&self, slot: Slot, kind: abi::Repr) -> bool {
        self.assumed.contains(&(slot, kind))
    }

    /// Whether this code may be entered from an exit that leaves `kinds` in the mirror
    /// without checking what it assumes.
    pub fn admits(&self, kinds: &[(Slot, abi::Repr)]) -> bool {
        self.assumed.iter().all(|k| kinds.contains(k))
    }

    /// Makes the exit at global instruction index `g`, if it goes on in another tree, go
    /// on in `new`, that tree compiled again, if `new` admits what the exit leaves in the
    /// mirror (`kinds`); otherwise it returns to the runtime.
    pub fn relink(&self, g: usize, new: &Compiled, kinds: Option<&[(Slot, abi::Repr)]>) {
        if self.links[g].get() != self.unlinked {
            let to = match kinds {
                Some(kinds) if new.admits(kinds) => new.f as u64,
                _ => self.unlinked,
            };
            self.links[g].set(to);
        }
    }

    /// The kinds the mirror surely holds after the linkable exit at global instruction
    /// index `g` of this code, unit `unit` of its tree, whose segments `segment` gives
    /// ([`Compiled::exit_kinds`]).
    pub fn exit_kinds_at<'t>(
        &self,
        g: usize,
        unit: usize,
        segment: impl Fn(usize) -> &'t Trace,
    ) -> Option<Vec<(Slot, abi::Repr)>> {
        let lower::TreeInst {
            segment: seg,
            inst: i,
        } = self.analysis.layout.locate(g);
        let seg = if unit == 0 { seg } else { unit };
        self.exit_kinds(segment(seg), seg, i)
    }

    /// Whether the loop's entry checks the values it is entered with against what the
    /// loop's proofs assume (`Tuning::induction`): an exit at its `loop_start` is then
    /// such a check failing, unless the code counts steps or made values.
    pub fn checks_entry(&self) -> bool {
        !self.counting
            && !self.analysis.owns
            && self
                .analysis
                .bounds
                .first()
                .is_some_and(|b| b.entry.iter().any(Option::is_some) || !b.sums.is_empty())
    }

    /// Whether the code accepts `frame` as it is: each of its inputs of the kind it was
    /// compiled for (an integer that left 64 bits is not), and each variable of the kind
    /// it counts on finding (`assumed`).
    pub fn accepts(&self, frame: &Frame) -> bool {
        let an = &self.analysis;
        let holds = |slot: Slot, kind: abi::Repr| {
            frame[slot.index()]
                .as_ref()
                .and_then(|v| abi::unbox(v, kind))
                .is_some()
        };
        let inputs = an.layout.inputs.iter().zip(&an.input_kinds);
        inputs
            .into_iter()
            .all(|((slot, _), kind)| holds(*slot, *kind))
            && self.assumed.iter().all(|&(slot, kind)| holds(slot, kind))
    }

    /// The inputs the code holds as 64-bit integers that hold integers past 64 bits in
    /// `frame`: compiled again holding them boxed (`opt::repr`, a variable held wide), it accepts `frame`.
    pub fn grown(&self, frame: &Frame) -> Vec<crate::lang::Slot> {
        let an = &self.analysis;
        an.layout
            .inputs
            .iter()
            .zip(&an.input_kinds)
            .filter(|((slot, _), kind)| {
                **kind == abi::Repr::Int
                    && matches!(frame[slot.index()], Some(flowjit_runtime::Value::Big(_)))
            })
            .map(|((slot, _), _)| *slot)
            .collect()
    }

    /// The global instruction index of segment `seg`'s instruction `i` (for a bridge unit,
    /// of its only segment, `unit`), if the code holds the segment (a bridge that could not
    /// be compiled runs on the trace interpreter).
    pub fn global(&self, seg: usize, i: usize) -> Option<usize> {
        let an = &self.analysis;
        let seg = if an.unit == 0 {
            seg
        } else if seg == an.unit {
            0
        } else {
            return None;
        };
        Some(an.layout.offsets.get(seg)? + i)
    }
}

impl Backend {
    /// What enters the trees' code from a `call` made in machine code
    /// ([`nested::Entry`]): the trampoline, and buffers of the register buffer's size.
    pub fn entry(&self) -> nested::Entry {
        let enter = self.trampoline.as_ref().expect("made with the backend").0;
        nested::Entry::new(enter, self.regs.len())
    }

    /// Runs compiled tree `t` (found with the others through `trees`) on `state` (its frame
    /// at the tree's anchor) until an exit returns, with the same accounting of `steps` as
    /// the trace interpreter; a `call` its code makes enters the code `functions` finds.
    /// Returns `None`, having done nothing, when an input is not of
    /// the kind the code was compiled for, or the budget cannot hold the tree's costliest
    /// iteration: the trace interpreter runs then.
    pub fn run<'t>(
        &mut self,
        t: (usize, usize),
        trees: &dyn Fn((usize, usize)) -> TreeCode<'t>,
        program: &crate::lang::Program,
        state: &mut State,
        steps: &mut Steps,
        functions: Option<&dyn nested::Functions>,
    ) -> Option<TreeExit> {
        let enter = self.trampoline.as_ref().expect("made with the backend").0;
        let run = Run {
            enter,
            program,
            functions,
            nested: false,
        };
        // SAFETY: the backend's register buffer has every slot of every tree's code.
        unsafe { run_code(&run, &mut self.regs, t, trees, state, steps) }
    }
}

/// How [`run_code`] enters code: through `enter` (the trampoline), for `program`, its calls
/// entering the code `functions` finds; `nested` for code entered by a call machine code
/// made, which does not exit for the driver's sake ([`helpers::Ctx::outermost`]).
pub(crate) struct Run<'a> {
    pub(crate) enter: Trampoline,
    pub(crate) program: &'a crate::lang::Program,
    pub(crate) functions: Option<&'a dyn nested::Functions>,
    pub(crate) nested: bool,
}

/// [`Backend::run`] on the register buffer `regs`.
///
/// # Safety
/// `regs` has every slot the code of every compiled tree reads and writes.
pub(crate) unsafe fn run_code<'t>(
    run: &Run,
    regs: &mut [i64],
    t: (usize, usize),
    trees: &dyn Fn((usize, usize)) -> TreeCode<'t>,
    state: &mut State,
    steps: &mut Steps,
) -> Option<TreeExit> {
    let entered = trees(t);
    let code = entered.code;
    let an = &code.analysis;
    let layout = &an.layout;
    if steps.left < code.max_cost || (steps.limit.is_some() && !code.counting) {
        return None;
    }
    for (k, (slot, _)) in layout.inputs.iter().enumerate() {
        abi::unbox(state.frame[slot.index()].as_ref()?, an.input_kinds[k])?;
    }
    exit::fill_mirror(regs, &state.frame, layout.mirror);
    let initial = steps.left.min(i64::MAX as u64) as i64;
    regs[layout.counter] = initial;
    // The frame is not written while the code runs: the lists and arrays it holds, which
    // the code borrows, stay alive. Helpers reach the rest of the state.
    let mut ctx = helpers::Ctx::new(run.program, state, steps.limit, run.functions);
    ctx.mirror = layout.mirror;
    ctx.nested = run.nested;
    regs[layout.context] = &mut ctx as *mut helpers::Ctx as i64;
    // SAFETY: `regs` has every slot the code of any compiled tree reads and writes (the
    // caller's guarantee), the mirror holds the frame with each value's kind,
    // and every input slot of the tree holds a value of the kind it was compiled for;
    // `ctx` outlives the call.
    let returned = unsafe { (run.enter)(code.f, regs.as_mut_ptr(), &mut ctx) };
    let (tree, unit, at) = lower::decode_exit(returned);
    // What the code made or copied out of arrays lives until the exit has copied what
    // the interpreter keeps; so does what the frame held, which the write-back below
    // replaces slot by slot: a register may borrow a list or an array that only the
    // frame's old value of another variable owns (`ali = arr` then `arr = array(...)` in
    // the loop).
    let allocated = ctx.allocated;
    // Direct calls count only as entered.
    let calls = ctx.calls + ctx.entered - ctx.helped;
    let (called, ended) = (ctx.called.take(), ctx.ended.take());
    let (nested, helped) = (ctx.entered, ctx.helped);
    let _owned = std::mem::take(&mut ctx.owned);
    let mut _replaced = Vec::new();
    // SAFETY: what the code stored in the mirror is as the safety of `read_mirror` asks:
    // a list or an array is borrowed from the frame (unchanged while the code ran, what
    // the write-back replaces kept in `_replaced`), from the trees' constants, or from
    // `_owned`, so its address is in a live Rc.
    unsafe { exit::read_mirror(regs, &mut state.frame, layout.mirror, &mut _replaced) };
    // SAFETY (for the `rebox` below): a slot was stored by the code from a value of the
    // kind the exit's analysis gives, borrowed as above.
    let exited = if (tree, unit) == t {
        entered
    } else {
        trees((tree, unit))
    };
    // What the iterations completed in machine code consumed, and the parts of the
    // exits that went on in other trees (the counter's slot is every tree's). An
    // elidable call gives back what it did not use of the operations it took when
    // recorded, which the exit's part counts: before an iteration is complete, the
    // counter may stand above where it started.
    let consumed = if code.counting {
        initial - regs[layout.counter]
    } else {
        0
    };
    if at == lower::REFUSED || at == lower::HOT {
        steps.left = steps.left.saturating_sub(consumed.max(0) as u64);
        return Some(TreeExit {
            tree,
            pos: exited.start,
            at: None,
            hot: (at == lower::HOT).then_some(unit),
            allocated,
            ended,
            calls,
            entered: nested,
            helped,
        });
    }
    let an = &exited.code.analysis;
    let (written, returned) = (at & lower::WRITTEN != 0, at & lower::RETURNED != 0);
    let lower::TreeInst { segment: seg, inst } = an
        .layout
        .locate((at & !(lower::WRITTEN | lower::RETURNED)) as usize);
    let segment = exited.segment(seg);
    let trace = segment.trace;
    let own = trace
        .snap_of(&trace.insts[inst])
        .expect("an exiting instruction has a snapshot");
    // A bridge unit's only segment is its segment `unit` in the tree.
    let unit_seg = if unit == 0 { seg } else { unit };
    let exit = TreeExit {
        tree,
        pos: own.pos,
        at: Some(lower::TreeInst::new(unit_seg, inst)),
        hot: None,
        allocated,
        ended,
        calls,
        entered: nested,
        helped,
    };
    if returned {
        // A function trace's code reached a `return` and left its value in the result
        // slots: into the `return`'s variable, and the interpreter makes the `return`.
        // SAFETY: as for the mirror above.
        let v = unsafe { exit::returned_value(regs, &an.layout) };
        if let crate::lang::Terminator::Return(crate::lang::Operand::Var(slot)) =
            &run.program.block(own.pos.block).term
        {
            state.frame[slot.index()] = Some(v);
        }
    }
    if written || returned {
        // The exit wrote its snapshot into the mirror, now in the frame, and made its
        // stores (`lower::linkable`: no frame of an inlined call, no virtual), or only
        // the `return`'s variable counts; under a limit, its counter counts its path.
        let total = if code.counting {
            consumed.max(0) as u64
        } else {
            segment.cost + own.cost
        };
        steps.left = steps.left.saturating_sub(total);
        return Some(exit);
    }
    let kinds = &an.kinds[seg];
    let base = an.layout.offsets[seg];
    let read = |r: Ref| unsafe {
        abi::rebox(
            regs[base + r.index()],
            kinds[r.index()].expect("a ref has a kind"),
        )
    };
    // Where the program ended inside a call, nothing goes on.
    if exit.ended.is_none() {
        let cost = segment.cost + resume::restore(own, read, state);
        if let Some(v) = called {
            crate::trace::run::give_result(run.program, &trace.insts[inst], state, v);
        }
        let total = (cost as i64).saturating_add(consumed).max(0) as u64;
        steps.left = steps.left.saturating_sub(total);
    }
    Some(exit)
}
