//! Native code: optimized traces become machine code through Cranelift.
//!
//! [`Backend`] owns one `JITModule`, and with it the code memory of every trace it compiled;
//! dropping the backend frees that memory. [`Backend::compile`] lowers a trace
//! ([`lower`]), compiles it for the host, and can also emit it for another ISA for display
//! (`--target`). [`run_compiled`] marshals the trace's inputs from the frame into unboxed
//! registers, calls the machine code, and on exit writes the snapshot's resume variables
//! back into the frame.
//!
//! A trace the backend cannot lower (it is not peeled, it uses `readlist`, a big integer
//! constant, ...) is not an error: it stays on the trace interpreter, and `--stats` says why.

pub mod cfg;
pub mod helpers;
pub mod listing;
pub mod lower;
pub mod ops;

pub use lower::Segment;

use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::isa::{self, OwnedTargetIsa, TargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};
use flowjit_runtime::abi;

use crate::resume;
use crate::state::{Frame, Position, State, Steps};
use crate::trace::Ref;

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
    /// A trace instruction that machine code does not run yet.
    #[error("`{0}` is not compiled yet")]
    NotLowered(&'static str),
    /// An array, which machine code does not hold yet.
    #[error("an array value (arrays are not compiled yet)")]
    Array,
    /// An input of a residual program machine code cannot hold.
    #[error("a big integer input")]
    BigInput,
    /// A bridge's `input` of a value its guard gives with another type.
    #[error("an input of another type than its value")]
    InputType,
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
    /// [`MAX_CODE_BYTES`] of machine code are made.
    #[error("the code memory limit ({} MiB) is reached", MAX_CODE_BYTES >> 20)]
    CodeMemory,
    /// Cranelift refused the function.
    #[error("Cranelift: {0}")]
    Cranelift(String),
    /// The listing could not be made.
    #[error("disassembler: {0}")]
    Disassembler(String),
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

fn flags() -> settings::Flags {
    let mut b = settings::builder();
    for (k, v) in [
        ("opt_level", "speed"),
        ("is_pic", "false"),
        ("use_colocated_libcalls", "false"),
        // Where each block starts, for listings: code resumes there after a jump table.
        ("machine_code_cfg_info", "true"),
    ] {
        b.set(k, v).expect("a known Cranelift setting");
    }
    settings::Flags::new(b)
}

fn isa_for(target: Target) -> Result<OwnedTargetIsa, String> {
    let triple = target.triple().parse().map_err(|e| format!("{e}"))?;
    isa::lookup(triple)
        .map_err(|e| e.to_string())?
        .finish(flags())
        .map_err(|e| e.to_string())
}

type TraceFn = unsafe extern "C" fn(*mut i64, *mut helpers::Ctx) -> u32;

/// The most machine code a backend makes, in bytes; past it, traces stay on the trace
/// interpreter.
pub const MAX_CODE_BYTES: usize = 64 << 20;

/// A trace as machine code.
pub struct Compiled {
    f: TraceFn,
    counting: bool,
    max_cost: u64,
    analysis: lower::Analysis,
    /// The Cranelift IR, when asked for.
    pub ir: Option<String>,
    /// The disassembly with addresses, when asked for.
    pub asm: Option<String>,
    /// The machine code's size in bytes.
    pub size: usize,
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
    module: Option<JITModule>,
    /// Bytes of machine code made so far (the code of every compilation stays until the
    /// backend is dropped).
    code_bytes: usize,
    isa: OwnedTargetIsa,
    host: Target,
    /// The ISA of `--target` when it is not the host's: code emitted for display only.
    display: Option<(Target, OwnedTargetIsa)>,
    fctx: FunctionBuilderContext,
    compiled: u32,
}

impl Backend {
    /// A backend for the host; `display` emits listings for that ISA instead.
    pub fn new(display: Option<Target>) -> Result<Backend, String> {
        let host =
            Target::host().ok_or("flowjit emits machine code for x86_64 and aarch64 hosts only")?;
        let isa = isa_for(host)?;
        let display = match display {
            Some(t) if t != host => Some((t, isa_for(t)?)),
            _ => None,
        };
        let module = JITModule::new(JITBuilder::with_isa(isa.clone(), default_libcall_names()));
        Ok(Backend {
            module: Some(module),
            code_bytes: 0,
            isa,
            host,
            display,
            fctx: FunctionBuilderContext::new(),
            compiled: 0,
        })
    }

    /// The name of the ISA listings are for.
    pub fn listing_target(&self) -> &'static str {
        match &self.display {
            Some((t, _)) => t.name(),
            None => Target::host().map_or("host", Target::name),
        }
    }

    /// Compiles the trace tree `segments`, specialized on the types its traces give.
    /// With `counting`, the code counts iterations so that `--max-steps` stays exact.
    pub fn compile(
        &mut self,
        segments: &[Segment],
        listings: Listings,
        counting: bool,
    ) -> Result<Compiled, Unsupported> {
        let an = lower::analyze(segments)?;
        let func = lower::lower(segments, &an, &*self.isa, &mut self.fctx, counting);
        let cl = Unsupported::Cranelift;
        let mut ir = None;
        let mut asm = None;
        if let Some((target, disp)) = &self.display {
            // Emitted for another ISA: listings only, from a compilation of their own.
            let dfunc = lower::lower(segments, &an, &**disp, &mut self.fctx, counting);
            if listings.ir {
                ir = Some(dfunc.display().to_string());
            }
            if listings.asm {
                let mut ctx = Context::for_function(dfunc);
                let code = ctx
                    .compile(&**disp, &mut ControlPlane::default())
                    .map_err(|e| cl(format!("{e:?}")))?;
                let (bytes, blocks) = (code.code_buffer(), &code.bb_starts);
                asm = Some(disassemble(&**disp, *target, bytes, 0, blocks)?);
            }
        } else if listings.ir {
            ir = Some(func.display().to_string());
        }
        let Defined {
            f,
            bytes,
            ptr,
            blocks,
        } = self.define(func)?;
        if listings.asm && self.display.is_none() {
            asm = Some(disassemble(
                &*self.isa, self.host, &bytes, ptr as u64, &blocks,
            )?);
        }
        Ok(Compiled {
            f,
            counting,
            max_cost: lower::max_cost(segments),
            analysis: an,
            ir,
            asm,
            size: bytes.len(),
        })
    }
}

/// A whole program as machine code.
pub struct CompiledProgram {
    f: TraceFn,
    analysis: cfg::Analysis,
    /// The Cranelift IR, when asked for.
    pub ir: Option<String>,
    /// The disassembly with addresses, when asked for.
    pub asm: Option<String>,
    /// The machine code's size in bytes.
    pub size: usize,
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
        let mut an = cfg::analyze(program, entry, frame)?;
        let func = cfg::lower(program, entry, &mut an, &*self.isa, &mut self.fctx);
        let ir = listings.ir.then(|| func.display().to_string());
        let Defined {
            f,
            bytes,
            ptr,
            blocks,
        } = self.define(func)?;
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
        })
    }

    /// Compiles `func` into the module.
    fn define(&mut self, func: cranelift_codegen::ir::Function) -> Result<Defined, Unsupported> {
        if self.code_bytes >= MAX_CODE_BYTES {
            return Err(Unsupported::CodeMemory);
        }
        let cl = Unsupported::Cranelift;
        let module = self
            .module
            .as_mut()
            .expect("the module lives as long as the backend");
        let name = format!("code{}", self.compiled);
        self.compiled += 1;
        let id = module
            .declare_function(&name, Linkage::Local, &func.signature)
            .map_err(|e| cl(e.to_string()))?;
        let mut ctx = Context::for_function(func);
        module
            .define_function(id, &mut ctx)
            .map_err(|e| cl(format!("{e:?}")))?;
        let (bytes, blocks) = ctx
            .compiled_code()
            .map(|c| (c.code_buffer().to_vec(), c.bb_starts.clone()))
            .unwrap_or_default();
        module
            .finalize_definitions()
            .map_err(|e| cl(e.to_string()))?;
        self.code_bytes += bytes.len();
        let ptr = module.get_finalized_function(id);
        // SAFETY: every function is compiled with `lower::signature`, which is this type.
        let f: TraceFn = unsafe { std::mem::transmute::<*const u8, TraceFn>(ptr) };
        Ok(Defined {
            f,
            bytes,
            ptr,
            blocks,
        })
    }
}

/// A function compiled into the module.
struct Defined {
    /// The function.
    f: TraceFn,
    /// Its machine code.
    bytes: Vec<u8>,
    /// Its address.
    ptr: *const u8,
    /// Where its blocks start in the code.
    blocks: Vec<u32>,
}

/// Runs a compiled program on `frame` (at its entry) until it stops or deoptimizes.
/// Returns `None`, having done nothing, when an input is not of the kind the code was
/// compiled for.
pub fn run_program(code: &CompiledProgram, frame: &mut Frame) -> Option<cfg::ProgramExit> {
    let an = &code.analysis;
    let n = an.kinds.len();
    let mut regs = vec![0i64; n + 1];
    for (slot, kind) in an.kinds.iter().enumerate() {
        if let (Some(v), Some(kind)) = (&frame[slot], kind) {
            regs[slot] = abi::unbox(v, *kind)?;
        }
    }
    // SAFETY: `regs` has a slot per variable and one for the printed value; every variable
    // written in the frame is of the kind the code was compiled for.
    // A residual program does no input, output or call: its code uses no context.
    let code_returned = unsafe { (code.f)(regs.as_mut_ptr(), std::ptr::null_mut()) };
    // SAFETY (for every `rebox`): a slot was stored from a value of the kind recorded for it;
    // a list comes from the frame or from the program's constants, alive in an Rc.
    if let Some(kind) = cfg::stopped(code_returned) {
        return Some(cfg::ProgramExit::Stop(unsafe { abi::rebox(regs[n], kind) }));
    }
    // Each variable lives in the register of its slot.
    let point = &an.points[code_returned as usize];
    let read = |r: Ref| {
        let kind = an.kinds[r.index()].expect("a written variable has a kind");
        unsafe { abi::rebox(regs[r.index()], kind) }
    };
    resume::restore_frame(point, read, frame);
    Some(cfg::ProgramExit::Resume(point.pos))
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(module) = self.module.take() {
            // SAFETY: the backend owns every compiled trace's code; dropping it ends their
            // use (the driver drops its compiled traces with it).
            unsafe { module.free_memory() };
        }
    }
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
    /// Where the interpreter continues.
    pub pos: Position,
    /// The segment (0: the root, `k`: bridge `k - 1`) and instruction that exited.
    pub at: (usize, usize),
    /// How many lists and arrays the code made (the virtual arrays bridges built
    /// included).
    pub allocated: u64,
}

/// Runs compiled tree `segments` on `frame` (at the tree's anchor) until it exits, with the
/// same accounting of `steps` as the trace interpreter. Returns `None`, having done nothing,
/// when an input is not of the kind the code was compiled for, or the budget cannot hold
/// the tree's costliest iteration: the trace interpreter runs then.
pub fn run_compiled(
    code: &Compiled,
    segments: &[Segment],
    program: &crate::lang::Program,
    state: &mut State,
    steps: &mut Steps,
) -> Option<TreeExit> {
    let an = &code.analysis;
    let layout = &an.layout;
    if steps.left < code.max_cost || (steps.limit.is_some() && !code.counting) {
        return None;
    }
    let mut regs = vec![0i64; layout.size];
    for (k, (slot, at)) in layout.inputs.iter().enumerate() {
        regs[*at] = abi::unbox(state.frame[slot.index()].as_ref()?, an.input_kinds[k])?;
    }
    let initial = steps.left.min(i64::MAX as u64) as i64;
    regs[layout.counter] = initial;
    // The frame is not written while the code runs: the lists and arrays it holds, which
    // the code borrows, stay alive. Helpers reach the rest of the state.
    let mut ctx = helpers::Ctx {
        program,
        state,
        limit: steps.limit,
        made: 0,
        owned: Vec::new(),
        allocated: 0,
    };
    // SAFETY: `regs` has every slot the code reads and writes (`layout.size`), and every
    // input slot holds a value of the kind the code was compiled for; `ctx` outlives the
    // call.
    let exit = unsafe { (code.f)(regs.as_mut_ptr(), &mut ctx) } as usize;
    // What the code made or copied out of arrays lives until the exit has copied what the
    // interpreter keeps; so does what the frame held, which the write-back below replaces
    // slot by slot: a register may borrow a list or an array that only the frame's old
    // value of another variable owns (`ali = arr` then `arr = array(...)` in the loop).
    let allocated = ctx.allocated;
    let _owned = std::mem::take(&mut ctx.owned);
    let _held = state.frame.clone();
    let (seg, inst) = layout.locate(exit);
    // SAFETY (for every `rebox` below): a slot was stored by the exit from a value of the
    // kind recorded for it; a list or an array is borrowed from the frame (unchanged while
    // the code ran, and kept above), from the trees' constants, or from `_owned`, so its
    // address is in a live Rc.
    if layout.carry {
        for (k, (slot, at)) in layout.inputs.iter().enumerate() {
            state.frame[slot.index()] = Some(unsafe { abi::rebox(regs[*at], an.input_kinds[k]) });
        }
    }
    let trace = segments[seg].trace;
    let own = trace
        .snap_of(&trace.insts[inst])
        .expect("an exiting instruction has a snapshot");
    let kinds = &an.kinds[seg];
    let base = layout.offsets[seg];
    // SAFETY: as above.
    let read = |r: Ref| unsafe {
        abi::rebox(
            regs[base + r.index()],
            kinds[r.index()].expect("a ref has a kind"),
        )
    };
    let cost = segments[seg].cost + resume::restore(own, read, state);
    // What the iterations completed in machine code consumed, and the exit's own part. An
    // elidable call gives back what it did not use of the operations it took when recorded,
    // which the exit's part counts: before an iteration is complete, the counter may stand
    // above where it started.
    let consumed = if code.counting {
        initial - regs[layout.counter]
    } else {
        0
    };
    let total = (cost as i64).saturating_add(consumed).max(0) as u64;
    steps.left = steps.left.saturating_sub(total);
    let pos = own.pos;
    Some(TreeExit {
        pos,
        at: (seg, inst),
        allocated,
    })
}
