//! Structured programs: five integer variables, a constant list, straight-line code and
//! loops with bounded counters, printed in the readable syntax.

use std::fmt::Write as _;

use flowjit_runtime::Op;
use proptest::prelude::*;

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
