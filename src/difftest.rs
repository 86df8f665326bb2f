//! Differential testing: random well-formed programs, run by every executor; any difference
//! from the interpreter (in what is printed, or in the error) is a bug.
//!
//! The programs ([`GenProgram`], printed in the readable syntax) use five integer variables
//! and a constant list, and are sequences of straight-line code and loops with bounded
//! counters (nested up to two deep), so they terminate. Loops may hold a branch that changes
//! direction part-way, a promotion of a value that varies, and operations of every kind on
//! values that may leave 64 bits, index outside the list, divide by zero, shift by a
//! negative count or meet an atom: errors that happen after a loop is hot are part of what
//! is tested. [`check`] runs a program under the interpreter (the oracle) and under the
//! trace interpreter and the JIT with several thresholds and optimizer pass sets, and
//! partially evaluated (interpreted and compiled whole).
//!
//! The generator is a proptest [`Strategy`], so a failing program is shrunk before it is
//! reported. `flowjit difftest --seed S --count N` runs it at length.

use std::fmt::Write as _;

use flowjit_runtime::{Op, Value};
use proptest::prelude::*;

use crate::backend::{cfg::ProgramExit, Backend, Listings};
use crate::interp::{self, ErrorKind, NoMonitor, Position, Steps};
use crate::jit::{Config, Jit};
use crate::lang::{self, BlockId, Program, Syntax};
use crate::opt;
use crate::peval;

/// How many operations the oracle may run; a program that needs more is discarded.
pub const STEP_LIMIT: u64 = 200_000;

/// An argument of a generated operation.
#[derive(Clone, Debug)]
pub enum GenArg {
    /// Variable `x{n}`.
    Var(usize),
    /// An integer literal.
    Int(i64),
    /// 2^70, past 64 bits.
    Big,
    /// The atom `'a'`.
    Atom,
    /// The innermost loop counter (or `x0` outside loops).
    Counter,
}

/// A generated statement `x{dst} = op(args)`.
#[derive(Clone, Debug)]
pub struct GenOp {
    /// The variable assigned.
    pub dst: usize,
    /// The operation.
    pub op: Op,
    /// Its arguments (as many as it takes are used).
    pub args: [GenArg; 2],
}

/// A piece of a generated program.
#[derive(Clone, Debug)]
pub enum Seg {
    /// Straight-line statements.
    Ops(Vec<GenOp>),
    /// A loop running `count` times.
    Loop {
        /// Iterations.
        count: i64,
        /// Its body.
        body: Vec<Seg>,
        /// A branch on `counter < at`: statements for each way.
        branch: Option<(i64, Vec<GenOp>, Vec<GenOp>)>,
        /// Whether to promote `counter // 7` (a value that varies every few iterations).
        promote: bool,
    },
}

/// A generated program.
#[derive(Clone, Debug)]
pub struct GenProgram {
    /// Initial values of `x0..x4`.
    pub inits: [i64; 5],
    /// The constant list `lst`.
    pub list: Vec<i64>,
    /// Its pieces, in order.
    pub segs: Vec<Seg>,
    /// The variable printed at the end.
    pub result: usize,
}

const VARS: usize = 5;

fn arg() -> impl Strategy<Value = GenArg> {
    prop_oneof![
        6 => (0..VARS).prop_map(GenArg::Var),
        3 => prop_oneof![-3i64..10, Just(i64::MAX), Just(i64::MIN), Just(1 << 40)].prop_map(GenArg::Int),
        3 => Just(GenArg::Counter),
        1 => Just(GenArg::Big),
        1 => Just(GenArg::Atom),
    ]
}

fn op() -> impl Strategy<Value = GenOp> {
    (
        0..VARS,
        prop::sample::select(Op::ALL.to_vec()),
        arg(),
        arg(),
    )
        .prop_map(|(dst, op, a, b)| GenOp {
            dst,
            op,
            args: [a, b],
        })
}

fn ops() -> impl Strategy<Value = Vec<GenOp>> {
    prop::collection::vec(op(), 0..5)
}

fn seg(depth: u32) -> BoxedStrategy<Seg> {
    let straight = ops().prop_map(Seg::Ops);
    if depth == 0 {
        return straight.boxed();
    }
    let looped = (
        0i64..80,
        prop::collection::vec(seg(depth - 1), 0..3),
        prop::option::of((0i64..80, ops(), ops())),
        any::<bool>(),
    )
        .prop_map(|(count, body, branch, promote)| Seg::Loop {
            count,
            body,
            branch,
            promote,
        });
    prop_oneof![1 => straight, 2 => looped].boxed()
}

/// The strategy that generates programs.
pub fn programs() -> impl Strategy<Value = GenProgram> {
    (
        prop::array::uniform5(prop_oneof![4 => -5i64..20, 1 => Just(i64::MAX - 3)]),
        prop::collection::vec(-3i64..9, 1..6),
        prop::collection::vec(seg(2), 1..4),
        0..VARS,
    )
        .prop_map(|(inits, list, segs, result)| GenProgram {
            inits,
            list,
            segs,
            result,
        })
}

struct Emitter {
    out: String,
    labels: usize,
}

impl Emitter {
    fn label(&mut self, base: &str) -> String {
        self.labels += 1;
        format!("{base}{}", self.labels)
    }

    fn arg(a: &GenArg, counter: &str) -> String {
        match a {
            GenArg::Var(i) => format!("x{i}"),
            GenArg::Int(n) => n.to_string(),
            GenArg::Big => "1180591620717411303424".to_string(),
            GenArg::Atom => "'a'".to_string(),
            GenArg::Counter => counter.to_string(),
        }
    }

    fn stmt(&mut self, o: &GenOp, counter: &str) {
        let a = Self::arg(&o.args[0], counter);
        let b = Self::arg(&o.args[1], counter);
        let rhs = match o.op {
            Op::Same => a,
            Op::Readlist => format!("lst[{b}]"),
            Op::Len => "len(lst)".to_string(),
            op if op.arity() == 1 => format!("{}({a})", op.name()),
            op => format!("{a} {} {b}", op.infix().unwrap_or("?")),
        };
        let _ = writeln!(self.out, "    x{} = {rhs}", o.dst);
    }

    /// Emits `seg`, continuing at `next`; returns the label it starts at.
    fn seg(&mut self, seg: &Seg, next: &str, counter: &str) -> String {
        match seg {
            Seg::Ops(ops) => {
                let l = self.label("s");
                let _ = writeln!(self.out, "{l}:");
                for o in ops {
                    self.stmt(o, counter);
                }
                let _ = writeln!(self.out, "    goto {next}");
                l
            }
            Seg::Loop {
                count,
                body,
                branch,
                promote,
            } => {
                let setup = self.label("loop");
                let head = self.label("head");
                let step = self.label("step");
                let i = self.label("i");
                let c = self.label("c");
                // The body's pieces, last first, so that each knows where it goes on.
                let mut after_body = step.clone();
                if let Some((at, yes, no)) = branch {
                    let fork = self.label("fork");
                    let then = self.label("then");
                    let els = self.label("else");
                    let w = self.label("w");
                    let _ = writeln!(self.out, "{then}:");
                    for o in yes {
                        self.stmt(o, &i);
                    }
                    let _ = writeln!(self.out, "    goto {step}");
                    let _ = writeln!(self.out, "{els}:");
                    for o in no {
                        self.stmt(o, &i);
                    }
                    let _ = writeln!(self.out, "    goto {step}");
                    let _ = writeln!(
                        self.out,
                        "{fork}:\n    {w} = {i} < {at}\n    if {w} goto {then} else goto {els}"
                    );
                    after_body = fork;
                }
                for s in body.iter().rev() {
                    after_body = self.seg(s, &after_body, &i);
                }
                let first = if *promote {
                    let p = self.label("promote");
                    let _ = writeln!(
                        self.out,
                        "{p}:\n    p = {i} // 7\n    promote(p)\n    x0 = x0 + p\n    goto {after_body}"
                    );
                    p
                } else {
                    after_body
                };
                let _ = writeln!(self.out, "{setup}:\n    {i} = {count}\n    goto {head}");
                let _ = writeln!(
                    self.out,
                    "{head}:\n    {c} = {i} > 0\n    if {c} goto {first} else goto {next}"
                );
                let _ = writeln!(self.out, "{step}:\n    {i} = {i} - 1\n    goto {head}");
                setup
            }
        }
    }
}

impl GenProgram {
    /// The program in the readable syntax; its first block is the entry.
    pub fn text(&self) -> String {
        let mut e = Emitter {
            out: String::new(),
            labels: 0,
        };
        let mut next = "end".to_string();
        for s in self.segs.iter().rev() {
            next = e.seg(s, &next, "x0");
        }
        let mut start = String::from("start:\n");
        for (k, v) in self.inits.iter().enumerate() {
            let _ = writeln!(start, "    x{k} = {v}");
        }
        let items: Vec<String> = self.list.iter().map(i64::to_string).collect();
        let _ = writeln!(start, "    lst = [{}]\n    goto {next}", items.join(", "));
        let _ = writeln!(e.out, "end:\n    print_and_stop(x{})", self.result);
        start + &e.out
    }
}

fn describe(outcome: Result<Value, interp::RuntimeError>) -> String {
    match outcome {
        Ok(v) => v.to_string(),
        Err(e) => format!("error: {e}"),
    }
}

/// Every JIT configuration a program is run under: (native, threshold, bridge threshold,
/// passes).
fn configurations() -> Vec<(bool, u64, u64, Vec<&'static str>)> {
    let all = opt::PIPELINE.to_vec();
    let mut configs = vec![
        (true, 0, 0, all.clone()),
        (true, 1, 1, all.clone()),
        (true, 3, 20, all.clone()),
        (false, 0, 0, all.clone()),
        (false, 1, 1, Vec::new()),
    ];
    for off in opt::PIPELINE {
        let passes = all.iter().copied().filter(|p| p != off).collect();
        configs.push((false, 0, 1, passes));
    }
    configs
}

fn run_pe(program: &Program, compile: bool) -> String {
    let raw = match peval::specialize(program, BlockId(0), &[]) {
        Ok(r) => r,
        Err(e) => return format!("pe: {e}"),
    };
    let residual = peval::cleanup::clean(&raw).to_program(program);
    let mut frame = interp::frame_with(&residual, &[]);
    let mut pos = Position::start(BlockId(0));
    if compile {
        let mut backend = Backend::new(None).expect("the host emits machine code");
        if let Ok(code) =
            backend.compile_program(&residual, BlockId(0), &frame, Listings::default())
        {
            match crate::backend::run_program(&code, &mut frame) {
                Some(ProgramExit::Stop(v)) => return v.to_string(),
                Some(ProgramExit::Resume(at)) => pos = at,
                None => {}
            }
        }
    }
    // The residual program does fewer operations than the original: twice the limit is
    // ample for one that the oracle ran within it.
    let mut steps = Steps::new(Some(2 * STEP_LIMIT));
    describe(
        interp::run(&residual, &mut frame, pos, &mut steps, &mut NoMonitor).map(
            |exit| match exit {
                interp::Exit::Stop(v) => v,
                interp::Exit::Hot(_) => unreachable!("NoMonitor never takes over"),
            },
        ),
    )
}

/// Runs `text` under every executor and compares each with the interpreter. `Ok(false)`:
/// the program was discarded (it needs more than [`STEP_LIMIT`] operations).
pub fn check(text: &str) -> Result<bool, String> {
    let (_, program) = lang::load(text, Syntax::Fg)
        .map_err(|d| format!("generated an invalid program: {d:?}\n{text}"))?;
    let oracle = interp::run_program(&program, BlockId(0), &[], Some(STEP_LIMIT));
    if matches!(&oracle, Err(e) if matches!(e.kind, ErrorKind::MaxSteps(_))) {
        return Ok(false);
    }
    let want = describe(oracle);
    let differ = |who: String, got: String| -> Result<(), String> {
        if got == want {
            Ok(())
        } else {
            Err(format!("{who} printed {got:?}, the interpreter {want:?}"))
        }
    };
    for (native, threshold, bridge_threshold, passes) in configurations() {
        let config = Config {
            native,
            threshold,
            bridge_threshold,
            passes: passes.clone(),
            max_steps: Some(STEP_LIMIT),
            ..Config::default()
        };
        let mut jit = Jit::new(&program, config).map_err(|e| e.to_string())?;
        let mut frame = interp::frame_with(&program, &[]);
        let got = describe(jit.run(&mut frame, BlockId(0)));
        differ(
            format!(
                "--mode {} --threshold {threshold} --bridge-threshold {bridge_threshold} --passes {}",
                if native { "jit" } else { "trace" },
                passes.join(",")
            ),
            got,
        )?;
    }
    differ("pe --run".into(), run_pe(&program, false))?;
    differ("pe --compile --run".into(), run_pe(&program, true))?;
    Ok(true)
}

/// What a run of [`run`] found.
#[derive(Debug)]
pub enum Outcome {
    /// Every program agreed with the interpreter.
    Agreed {
        /// How long the run took.
        seconds: f64,
        /// Programs discarded as needing more than [`STEP_LIMIT`] operations (not counted).
        discarded: u32,
    },
    /// A program that differs, shrunk.
    Differs {
        /// How it differs.
        why: String,
        /// The program, in the readable syntax.
        program: String,
    },
}

/// Checks `count` programs generated from `seed` (the same seed generates the same
/// programs); a difference is shrunk. An error says why the run stopped early (too many
/// programs discarded).
pub fn run(seed: u64, count: u32) -> Result<Outcome, String> {
    use proptest::test_runner::{Config, RngAlgorithm, TestError, TestRng, TestRunner};
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases: count,
        failure_persistence: None,
        max_global_rejects: count.saturating_mul(4),
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    let start = std::time::Instant::now();
    let discarded = std::cell::Cell::new(0u32);
    let result = runner.run(&programs(), |p| match check(&p.text()) {
        Ok(true) => Ok(()),
        Ok(false) => {
            discarded.set(discarded.get() + 1);
            Err(TestCaseError::reject("needs too many steps"))
        }
        Err(e) => Err(TestCaseError::fail(e)),
    });
    match result {
        Ok(()) => Ok(Outcome::Agreed {
            seconds: start.elapsed().as_secs_f64(),
            discarded: discarded.get(),
        }),
        Err(TestError::Fail(why, program)) => Ok(Outcome::Differs {
            why: why.to_string(),
            program: program.text(),
        }),
        Err(TestError::Abort(why)) => Err(format!("difftest stopped: {why}")),
    }
}
