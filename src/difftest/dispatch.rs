//! Interpreters: a dispatch loop with the meta-tracing hints, as an interpreter written in
//! the flowgraph language has, running a constant program `lst`.
//!
//! `pc` (with `lst`, sometimes) is the green variable of `jit_merge_point`; each iteration
//! spends one unit of `fuel` (so the loop ends), reads `op = lst[pc]`, and a chain of
//! comparisons selects a handler. A handler runs statements on `x0..x4`, computes the next
//! `pc` and marks (usually) `can_enter_jit` before it jumps back. The next `pc` is the next
//! position, a constant, or it depends on red values: a variable, or `fuel // k`, which
//! moves `pc` every `k` iterations; it is kept in range by `% len(lst)`. So greens change
//! inside the loop, in ways the trace must check, and a trace that closes its loop at the
//! merge point with the same greens meets other greens later.
//!
//! ```text
//! dl:      jit_merge_point(pc)
//!          c = fuel > 0                if c goto fetch else goto end
//! fetch:   fuel = fuel - 1             op = lst[pc]
//! d0:      c = op == 0                 if c goto h0 else goto h1
//! h0:      x1 = x1 + fuel              pc = fuel // 3     pc = pc % 3     can_enter_jit
//! h1:      x2 = x1                     pc = pc + 1        pc = pc % 3     can_enter_jit
//! ```

use std::fmt::Write as _;

use proptest::prelude::*;

use super::flow::{self, Emitter, GenOp, VARS};

/// How a handler computes the next `pc` (then taken `% len(lst)`).
#[derive(Clone, Debug)]
pub enum NextPc {
    /// `pc + k`.
    Step(i64),
    /// The constant `t`.
    Jump(i64),
    /// `pc + x{n}`: a red value.
    Red(usize),
    /// `fuel // k`: red, changes every `k` iterations.
    Fuel(i64),
    /// `t` when `x{n}` is not 0, else `pc + 1`.
    Branch(usize, i64),
}

/// One handler of the dispatch loop.
#[derive(Clone, Debug)]
pub struct Handler {
    /// Its statements (the counter is `fuel`).
    pub ops: Vec<GenOp>,
    /// The next `pc`.
    pub next: NextPc,
    /// Whether it marks `can_enter_jit` before jumping back.
    pub enter: bool,
}

/// A generated interpreter and the program it runs.
#[derive(Clone, Debug)]
pub struct GenDispatch {
    /// Initial values of `x0..x4`.
    pub inits: [i64; 5],
    /// The interpreted program `lst`: each element selects a handler (an element that is
    /// not the index of one selects the last).
    pub code: Vec<i64>,
    /// Iterations of the dispatch loop.
    pub fuel: i64,
    /// Whether `lst` is green too (`jit_merge_point(lst, pc)`), not only `pc`.
    pub list_green: bool,
    /// The handlers.
    pub handlers: Vec<Handler>,
    /// What is printed at the end (as [`super::GenProgram::result`]).
    pub result: Option<usize>,
}

fn next_pc() -> impl Strategy<Value = NextPc> {
    prop_oneof![
        3 => (1i64..3).prop_map(NextPc::Step),
        1 => (0i64..8).prop_map(NextPc::Jump),
        2 => (0..VARS).prop_map(NextPc::Red),
        3 => prop_oneof![1i64..4, 4i64..40].prop_map(NextPc::Fuel),
        2 => (0..VARS, 0i64..8).prop_map(|(n, t)| NextPc::Branch(n, t)),
    ]
}

fn handler() -> impl Strategy<Value = Handler> {
    (
        prop_oneof![3 => flow::hot_ops(), 1 => prop::collection::vec(flow::op(), 0..3)],
        next_pc(),
        prop::bool::weighted(0.8),
    )
        .prop_map(|(ops, next, enter)| Handler { ops, next, enter })
}

/// The strategy that generates interpreters.
pub fn dispatchers() -> impl Strategy<Value = GenDispatch> {
    (
        prop::array::uniform5(prop_oneof![9 => -5i64..20, 1 => Just(i64::MAX - 3)]),
        prop::collection::vec(-1i64..5, 1..7),
        prop_oneof![1 => 0i64..80, 2 => 80i64..1500],
        any::<bool>(),
        prop::collection::vec(handler(), 1..5),
        prop_oneof![1 => (0..VARS).prop_map(Some), 1 => Just(None)],
    )
        .prop_map(
            |(inits, code, fuel, list_green, handlers, result)| GenDispatch {
                inits,
                code,
                fuel,
                list_green,
                handlers,
                result,
            },
        )
}

impl GenDispatch {
    /// The program in the readable syntax; its first block is the entry.
    pub fn text(&self) -> String {
        let len = self.code.len();
        let mut e = Emitter::new();
        let greens = if self.list_green { "lst, pc" } else { "pc" };
        let _ = writeln!(
            e.out,
            "start:\n{}    pc = 0\n    fuel = {}\n    goto dl",
            flow::prologue(&self.inits, &self.code),
            self.fuel
        );
        let _ = writeln!(
            e.out,
            "dl:\n    jit_merge_point({greens})\n    c = fuel > 0\n    if c goto fetch else goto end"
        );
        let last = self.handlers.len() - 1;
        let _ = writeln!(
            e.out,
            "fetch:\n    fuel = fuel - 1\n    op = lst[pc]\n    goto {}",
            if last == 0 { "h0" } else { "d0" }
        );
        for k in 0..last {
            let no = if k + 1 == last {
                format!("h{last}")
            } else {
                format!("d{}", k + 1)
            };
            let _ = writeln!(
                e.out,
                "d{k}:\n    c = op == {k}\n    if c goto h{k} else goto {no}"
            );
        }
        for (k, h) in self.handlers.iter().enumerate() {
            let _ = writeln!(e.out, "h{k}:");
            for o in &h.ops {
                e.stmt(o, "fuel");
            }
            let enter = if h.enter { "    can_enter_jit\n" } else { "" };
            let jump_back = |e: &mut Emitter, pc: String| {
                let _ = write!(
                    e.out,
                    "    pc = {pc}\n    pc = pc % {len}\n{enter}    goto dl\n"
                );
            };
            match h.next {
                NextPc::Step(n) => jump_back(&mut e, format!("pc + {n}")),
                NextPc::Jump(t) => jump_back(&mut e, t.to_string()),
                NextPc::Red(n) => jump_back(&mut e, format!("pc + x{n}")),
                NextPc::Fuel(n) => jump_back(&mut e, format!("fuel // {n}")),
                NextPc::Branch(n, t) => {
                    let yes = e.label("taken");
                    let no = e.label("next");
                    let _ = writeln!(e.out, "    if x{n} goto {yes} else goto {no}\n{yes}:");
                    jump_back(&mut e, t.to_string());
                    let _ = writeln!(e.out, "{no}:");
                    jump_back(&mut e, "pc + 1".to_string());
                }
            }
        }
        let _ = writeln!(e.out, "end:\n{}", flow::epilogue(self.result));
        e.out
    }
}
