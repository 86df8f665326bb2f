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
//! A third of them run a second interpreter ([`Second`]), with a merge point of its own:
//! after the first, or inside a function the first one's first handler calls (a trace of
//! the first then inlines the second's loop, and the second's own loop gets a trace).
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
    /// A second dispatch loop with a merge point of its own (SPEC §4: several), if any.
    pub second: Option<Second>,
}

/// A second interpreter: its dispatch loop (labels `i...`, greens `pc2` and sometimes
/// `lst2`, counter `fuel2`) runs after the first one ends, or (`nested`) inside a function
/// `inner(x0, .., x4)` that the first handler calls, whose result it adds to `x0`.
#[derive(Clone, Debug)]
pub struct Second {
    /// Its interpreted program `lst2`.
    pub code: Vec<i64>,
    /// Iterations of its dispatch loop.
    pub fuel: i64,
    /// Its handlers.
    pub handlers: Vec<Handler>,
    /// Whether it runs in a function the first loop calls.
    pub nested: bool,
}

fn second() -> impl Strategy<Value = Second> {
    (
        prop::collection::vec(-1i64..5, 1..6),
        prop_oneof![1 => 0i64..10, 2 => 10i64..300],
        prop::collection::vec(handler(), 1..4),
        any::<bool>(),
    )
        .prop_map(|(code, fuel, handlers, nested)| Second {
            code,
            fuel,
            handlers,
            nested,
        })
}

/// The names one dispatch loop's text uses: the first's (`""`) or the second's (`"i"`).
struct Names<'a> {
    /// The prefix of its labels.
    at: &'a str,
    /// Its merge point's greens.
    greens: &'a str,
    /// Where it goes when its counter runs out.
    end: &'a str,
}

impl Names<'_> {
    /// Its interpreted program, position and counter: `lst`, `pc`, `fuel`, numbered 2 in
    /// the second loop.
    fn vars(&self) -> (String, String, String) {
        let n = if self.at.is_empty() { "" } else { "2" };
        (format!("lst{n}"), format!("pc{n}"), format!("fuel{n}"))
    }
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
        prop_oneof![2 => Just(None), 1 => second().prop_map(Some)],
    )
        .prop_map(
            |(inits, code, fuel, list_green, handlers, result, second)| GenDispatch {
                inits,
                code,
                fuel,
                list_green,
                handlers,
                result,
                second,
            },
        )
}

impl GenDispatch {
    /// The program in the readable syntax; its first block is the entry.
    pub fn text(&self) -> String {
        let mut e = Emitter::new();
        let _ = writeln!(
            e.out,
            "start:\n{}    pc = 0\n    fuel = {}\n    goto dl",
            flow::prologue(&self.inits, &self.code),
            self.fuel
        );
        let nested = self.second.as_ref().is_some_and(|s| s.nested);
        let then = if self.second.is_some() && !nested {
            "i_start"
        } else {
            "end"
        };
        let names = Names {
            at: "",
            greens: if self.list_green { "lst, pc" } else { "pc" },
            end: then,
        };
        let call = nested.then_some("    r = call inner(x0, x1, x2, x3, x4)\n    x0 = x0 + r\n");
        dispatch_loop(&mut e, &names, self.code.len(), &self.handlers, call);
        if let Some(second) = &self.second {
            let items: Vec<String> = second.code.iter().map(i64::to_string).collect();
            let head = if second.nested {
                "func inner(x0, x1, x2, x3, x4):"
            } else {
                "i_start:"
            };
            let _ = writeln!(
                e.out,
                "{head}\n    lst2 = [{}]\n{}    pc2 = 0\n    fuel2 = {}\n    goto idl",
                items.join(", "),
                // The handlers' reads of `lst`, in the function's own frame.
                if second.nested {
                    "    lst = lst2\n"
                } else {
                    ""
                },
                // Called up to once per iteration of the first: at most 20,000 iterations
                // of it in all, within the step limit.
                match second.nested {
                    true => second.fuel.min(20_000 / self.fuel.max(1)),
                    false => second.fuel,
                }
            );
            let names = Names {
                at: "i",
                // The other choice of greens than the first loop's.
                greens: if self.list_green { "pc2" } else { "lst2, pc2" },
                end: if second.nested { "i_return" } else { "end" },
            };
            dispatch_loop(&mut e, &names, second.code.len(), &second.handlers, None);
            if second.nested {
                let _ = writeln!(e.out, "i_return:\n    return x1");
            }
        }
        let _ = writeln!(e.out, "end:\n{}", flow::epilogue(self.result));
        e.out
    }
}

/// One dispatch loop over `handlers`, named by `n`, for a program of `len` elements; the
/// first handler starts with `call`, when given.
fn dispatch_loop(e: &mut Emitter, n: &Names, len: usize, handlers: &[Handler], call: Option<&str>) {
    let at = n.at;
    let (lst, pc, fuel) = n.vars();
    let _ = writeln!(
        e.out,
        "{at}dl:\n    jit_merge_point({})\n    c = {fuel} > 0\n    if c goto {at}fetch else goto {}",
        n.greens, n.end
    );
    let last = handlers.len() - 1;
    let _ = writeln!(
        e.out,
        "{at}fetch:\n    {fuel} = {fuel} - 1\n    op = {lst}[{pc}]\n    goto {at}{}",
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
            "{at}d{k}:\n    c = op == {k}\n    if c goto {at}h{k} else goto {at}{no}"
        );
    }
    for (k, h) in handlers.iter().enumerate() {
        let _ = writeln!(e.out, "{at}h{k}:");
        if k == 0 {
            e.out.push_str(call.unwrap_or_default());
        }
        for o in &h.ops {
            e.stmt(o, &fuel);
        }
        let enter = if h.enter { "    can_enter_jit\n" } else { "" };
        let jump_back = |e: &mut Emitter, to: String| {
            let _ = write!(
                e.out,
                "    {pc} = {to}\n    {pc} = {pc} % {len}\n{enter}    goto {at}dl\n"
            );
        };
        match h.next {
            NextPc::Step(k) => jump_back(e, format!("{pc} + {k}")),
            NextPc::Jump(t) => jump_back(e, t.to_string()),
            NextPc::Red(v) => jump_back(e, format!("{pc} + x{v}")),
            NextPc::Fuel(k) => jump_back(e, format!("{fuel} // {k}")),
            NextPc::Branch(v, t) => {
                let yes = e.label("taken");
                let no = e.label("next");
                let _ = writeln!(e.out, "    if x{v} goto {yes} else goto {no}\n{yes}:");
                jump_back(e, t.to_string());
                let _ = writeln!(e.out, "{no}:");
                jump_back(e, format!("{pc} + 1"));
            }
        }
    }
}
