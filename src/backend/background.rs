//! Cranelift's part of compiling a function (its e-graph, instruction selection, register
//! allocation, emission), on the main thread or on a thread of its own.
//!
//! Lowering a trace tree to Cranelift's IR reads the traces, whose constants share the
//! interpreter's values (`Rc`), so it stays on the driver's thread; what it makes, a
//! [`Function`], is plain data, and so is the machine code Cranelift makes of it: position
//! independent bytes ([`Machine`]), which the driver places in the code heap when it takes
//! them. Between the two, the compiler thread ([`Worker`]) does four fifths of the work
//! while the driver runs the program on. See docs/ARCHITECTURE.md, *Compiling in the
//! background*.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cranelift_codegen::binemit::Reloc;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::{ExternalName, Function};
use cranelift_codegen::isa::{OwnedTargetIsa, TargetIsa};
use cranelift_codegen::Context;
use cranelift_codegen::FinalizedRelocTarget;

use super::{lower, origins_of, Unsupported};

/// A function's machine code, not placed yet.
pub struct Machine {
    /// The code, position independent.
    pub bytes: Vec<u8>,
    /// Where its blocks start.
    pub blocks: Vec<u32>,
    /// Where each trace instruction's code is (`Compiled::origins`).
    pub locs: Vec<(u32, u32, lower::Origin)>,
    /// The alignment the code asks for (its constants').
    pub align: u32,
}

/// Compiles `func` for `isa` in `ctx` (its allocations reused from one function to the
/// next).
pub(crate) fn emit(
    isa: &dyn TargetIsa,
    ctx: &mut Context,
    func: Function,
) -> Result<Machine, Unsupported> {
    let cl = Unsupported::Cranelift;
    ctx.clear();
    ctx.func = func;
    ctx.compile(isa, &mut ControlPlane::default())
        .map_err(|e| cl(format!("{e:?}")))?;
    let code = ctx.compiled_code().expect("just compiled");
    // Every address the code holds is a constant of its own (helpers, link tables, other
    // functions through those), or its own start, which a call of itself reaches relative
    // to where it is (`lower::ITSELF`): it runs wherever it is placed.
    let mut bytes = code.code_buffer().to_vec();
    for reloc in code.buffer.relocs() {
        let itself = match &reloc.target {
            FinalizedRelocTarget::ExternalName(ExternalName::User(name)) => {
                ctx.func.params.user_named_funcs()[*name].namespace == lower::ITSELF
            }
            _ => false,
        };
        if !(itself && resolve_itself(&mut bytes, reloc.offset as usize, reloc.kind, reloc.addend))
        {
            return Err(cl(format!("a relocation in the code: {reloc:?}")));
        }
    }
    Ok(Machine {
        bytes,
        blocks: code.bb_starts.clone(),
        locs: origins_of(code.buffer.get_srclocs_sorted()),
        align: code.buffer.alignment,
    })
}

/// Makes the call at `offset` of `bytes`, whose relocation is of `kind` with `addend`, a
/// call of the function's start; whether the kind is one this can resolve.
fn resolve_itself(bytes: &mut [u8], offset: usize, kind: Reloc, addend: i64) -> bool {
    // The start is at 0: the displacement is what the site's own offset is short of it.
    let to = addend - offset as i64;
    match kind {
        Reloc::X86CallPCRel4 | Reloc::X86PCRel4 => {
            let Ok(rel) = i32::try_from(to) else {
                return false;
            };
            bytes[offset..offset + 4].copy_from_slice(&rel.to_le_bytes());
            true
        }
        Reloc::Arm64Call => {
            let at = &mut bytes[offset..offset + 4];
            let insn = u32::from_le_bytes([at[0], at[1], at[2], at[3]]);
            let imm = ((to >> 2) as u32) & 0x03ff_ffff;
            at.copy_from_slice(&((insn & !0x03ff_ffff) | imm).to_le_bytes());
            true
        }
        _ => false,
    }
}

/// A function the compiler thread has finished: its number, its code or why not, and the
/// time the thread took.
pub type Done = (u64, Result<Machine, Unsupported>, Duration);

/// The compiler thread has stopped (Cranelift panicked on a function).
#[derive(Clone, Copy, Debug)]
pub struct Gone;

/// A function to compile: its number (the driver's), its IR, and whether with Cranelift's
/// optimizations.
type Job = (u64, Function, bool);

/// The compiler thread: it takes functions in the order given and hands back their code.
/// It ends when its `Worker` is dropped (its queue closes), after the function it is on.
pub(crate) struct Worker {
    jobs: Sender<Job>,
    done: Receiver<Done>,
    /// How many functions the thread has handed back, and how many of them were taken.
    handed: Arc<AtomicU64>,
    taken: u64,
}

/// The count of functions the compiler thread has handed back, raised once more when the
/// thread ends (its channel then closing, which the driver must see too, [`Gone`]).
struct Ends(Arc<AtomicU64>);

impl Drop for Ends {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Whether the compiler thread has handed back functions that the driver has not taken
/// since this was made ([`Worker::finishes`]): something machine code that runs long
/// checks now and then, to return to the driver, which places the code.
#[derive(Clone)]
pub struct Finishes {
    handed: Arc<AtomicU64>,
    taken: u64,
}

impl Finishes {
    /// Whether a function finished is waiting.
    pub fn any(&self) -> bool {
        self.handed.load(Ordering::Relaxed) > self.taken
    }
}

impl Worker {
    /// Starts the thread, compiling for `isa` with Cranelift's optimizations and for
    /// `plain` without; `None` if the system would not start it.
    pub fn spawn(isa: OwnedTargetIsa, plain: OwnedTargetIsa) -> Option<Worker> {
        let (jobs, queue) = channel::<Job>();
        let (give, done) = channel();
        let handed = Arc::new(AtomicU64::new(0));
        let hands = Ends(handed.clone());
        std::thread::Builder::new()
            .name("flowjit-compiler".to_string())
            .spawn(move || {
                let hands = hands;
                let mut ctx = Context::new();
                for (id, func, optimize) in queue {
                    let isa = if optimize { &*isa } else { &*plain };
                    let start = Instant::now();
                    let machine = emit(isa, &mut ctx, func);
                    if give.send((id, machine, start.elapsed())).is_err() {
                        break;
                    }
                    // After the send: one counted is in the channel.
                    hands.0.fetch_add(1, Ordering::Relaxed);
                }
            })
            .ok()?;
        Some(Worker {
            jobs,
            done,
            handed,
            taken: 0,
        })
    }

    /// Queues function `id`; gives it back if the thread has gone (it panicked).
    pub fn submit(&self, id: u64, func: Function, optimize: bool) -> Result<(), Box<Function>> {
        self.jobs
            .send((id, func, optimize))
            .map_err(|refused| Box::new(refused.0 .1))
    }

    /// A thread that takes `n` functions and stops without compiling them, as one on which
    /// Cranelift panicked does (for the tests of what the driver does then).
    #[cfg(test)]
    pub fn stopping_after(n: usize) -> Worker {
        let (jobs, queue) = channel::<Job>();
        let (give, done) = channel::<Done>();
        let handed = Arc::new(AtomicU64::new(0));
        let hands = Ends(handed.clone());
        std::thread::spawn(move || {
            let (_give, _hands) = (give, hands);
            queue.iter().take(n).for_each(drop);
        });
        Worker {
            jobs,
            done,
            handed,
            taken: 0,
        }
    }

    /// A function the thread has finished, if any: without waiting, or (`wait`) the next
    /// one it finishes; `Err` when the thread has gone (Cranelift panicked on a function):
    /// the functions queued are lost.
    pub fn finished(&mut self, wait: bool) -> Result<Option<Done>, Gone> {
        let done = match wait {
            true => self.done.recv().map(Some).map_err(|_| Gone),
            false => match self.done.try_recv() {
                Ok(done) => Ok(Some(done)),
                Err(TryRecvError::Empty) => Ok(None),
                Err(TryRecvError::Disconnected) => Err(Gone),
            },
        };
        if let Ok(Some(_)) = done {
            self.taken += 1;
        }
        done
    }

    /// Whether the thread has handed back a function not taken yet, or has ended (an
    /// atomic load: the driver asks before each run of code).
    pub fn waiting(&self) -> bool {
        self.handed.load(Ordering::Relaxed) > self.taken
    }

    /// What tells whether the thread has handed back a function not taken yet.
    pub fn finishes(&self) -> Finishes {
        Finishes {
            handed: self.handed.clone(),
            taken: self.taken,
        }
    }
}
