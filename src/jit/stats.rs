//! Statistics of a run, and their report for `--stats`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::backend;
use crate::opt;
use crate::trace::{print, AbortReason, Kind, Trace};

use super::{describe, Jit};

/// What happened during a run, for `--stats`.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Recordings abandoned, with where and why.
    pub aborts: Vec<(String, AbortReason)>,
    /// Traces the optimizer rejected, with where and why.
    pub rejected: Vec<(String, opt::Rejected)>,
    /// Loops whose body assumes nothing of what the preamble leaves, because the body that
    /// did was rejected (`opt::optimize_generic`), with where and why.
    pub generic: Vec<(String, opt::Rejected)>,
    /// Trees left on the trace interpreter, with where and why.
    pub not_compiled: Vec<(String, backend::Unsupported)>,
    /// Times a tree was entered.
    pub entries: u64,
    /// Entries into each tree from the driver, by tree (those machine code makes from
    /// tree to tree are not counted).
    pub tree_entries: BTreeMap<usize, u64>,
    /// Entries into machine code.
    pub native_entries: u64,
    /// Exits of machine code made to go on in another tree's machine code directly.
    pub links: u64,
    /// Exits per (tree, segment, instruction).
    pub exits: BTreeMap<(usize, usize, usize), u64>,
    /// Time interpreting.
    pub interp_time: Duration,
    /// Time recording (which interprets too).
    pub record_time: Duration,
    /// Time optimizing.
    pub opt_time: Duration,
    /// Time compiling to machine code on the driver's thread.
    pub compile_time: Duration,
    /// Time the compiler thread took over the functions it gave back.
    pub thread_time: Duration,
    /// Functions the compiler thread gave back.
    pub thread_functions: usize,
    /// The compiler thread's functions given back, its time, and the functions still on
    /// it, when the run ended (`Jit::await_listings`).
    pub thread_at_end: Option<(usize, Duration, usize)>,
    /// Time on the trace interpreter.
    pub trace_time: Duration,
    /// Time in machine code.
    pub native_time: Duration,
    /// From the start of the run to the first entry into machine code (the JIT's warm-up).
    pub first_native: Option<Duration>,
    /// Limits reached, each said once.
    pub limits: Vec<String>,
    /// Array loads, array stores, elidable calls and array allocations per iteration: as
    /// recorded, and what the optimizer left of them, summed over the traces and bridges
    /// kept.
    pub heap: [Kept; 4],
    /// The calls not inlined (`call`) of the traces and bridges kept, as recorded and as
    /// the optimizer left them (each is kept).
    pub calls: Kept,
    /// How many times traces and their machine code made such a call.
    pub calls_made: u64,
    /// How many of those entered a function trace's machine code.
    pub calls_entered: u64,
    /// How many of those entered it through a helper (`helpers::call`), not directly.
    pub calls_helped: u64,
    /// Trees whose loop ran long in the quick backend's code, compiled again by Cranelift.
    pub tiered: u64,
    /// Bridges compiled on their own that moved into their tree's function once entered
    /// often (`Jit::absorb_bridge`).
    pub absorbed: u64,
    /// Lists and arrays that machine code made (allocation removal made none of the
    /// others).
    pub native_allocations: u64,
    /// Times a counted loop became hot with too few iterations left for compiling it to pay
    /// for itself, and was left to the interpreter (`Config::pay_off`).
    pub not_worth: u64,
}

/// How many instructions of a kind one pass through a trace has, as recorded and as
/// optimized (in a peeled trace, the loop's body).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Kept {
    /// As recorded.
    pub recorded: u64,
    /// Left by the optimizer.
    pub left: u64,
}

impl Stats {
    /// Counts the array loads, stores and elidable calls of `recorded` and of `optimized`
    /// (its loop, when peeled).
    pub(super) fn count_heap(&mut self, recorded: &Trace, optimized: &Trace) {
        let body = &optimized.insts[optimized.loop_start().map_or(0, |s| s + 1)..];
        let kinds: [fn(Kind) -> bool; 4] = [
            |k| k == Kind::GetItem,
            |k| k == Kind::SetItem,
            |k| matches!(k, Kind::CallPure(_)),
            |k| matches!(k, Kind::Op(op) if op.allocates()),
        ];
        for (kept, is) in self.heap.iter_mut().zip(kinds) {
            kept.recorded += recorded.insts.iter().filter(|i| is(i.kind)).count() as u64;
            kept.left += body.iter().filter(|i| is(i.kind)).count() as u64;
        }
        let call = |i: &&crate::trace::Inst| matches!(i.kind, Kind::Call(_));
        self.calls.recorded += recorded.insts.iter().filter(call).count() as u64;
        self.calls.left += body.iter().filter(call).count() as u64;
    }
}

impl Stats {
    pub(super) fn limit(&mut self, what: String) {
        if !self.limits.contains(&what) {
            self.limits.push(what);
        }
    }
}

impl Jit<'_> {
    /// The statistics, as `--stats` prints them.
    pub fn stats_report(&self) -> String {
        let mut out = String::from("# stats\n");
        self.report_traces(&mut out);
        if self.config.native {
            self.report_machine_code(&mut out);
        }
        self.report_optimizer(&mut out);
        self.report_exits(&mut out);
        let s = &self.stats;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let _ = writeln!(
            out,
            "time: interpreting {:.3} ms, recording {:.3} ms, optimizing {:.3} ms, compiling {:.3} ms, trace interpreter {:.3} ms, machine code {:.3} ms",
            ms(s.interp_time),
            ms(s.record_time),
            ms(s.opt_time),
            ms(s.compile_time),
            ms(s.trace_time),
            ms(s.native_time)
        );
        let (given, took, still) =
            (s.thread_at_end).unwrap_or((s.thread_functions, s.thread_time, self.jobs.len()));
        if given > 0 || still > 0 {
            let _ = writeln!(
                out,
                "compiler thread: {} function(s) in {:.3} ms; {} still compiling when the run ended",
                given,
                ms(took),
                still
            );
        }
        let cycles = flowjit_runtime::cycles::counts();
        if cycles.collections > 0 || cycles.marked > 0 {
            let _ = writeln!(
                out,
                "cycle collector: {} collection(s) ({} full), {} array(s) in cycles reclaimed, {} marked at the end",
                cycles.collections, cycles.full, cycles.reclaimed, cycles.marked
            );
        }
        out
    }

    /// The report's trees, the limits reached, and the recordings abandoned.
    fn report_traces(&self, out: &mut String) {
        let s = &self.stats;
        let _ = writeln!(out, "traces recorded: {}", self.trees.len());
        for (i, t) in self.trees.iter().enumerate() {
            let _ = writeln!(
                out,
                "  trace {i}: {} at {}, {} instructions, {} bridge(s){}",
                t.root.what(),
                describe(self.program, &t.key),
                t.root.insts.len(),
                t.bridges.len(),
                match &t.code {
                    // A call made in machine code runs it in the interpreter instead.
                    Some(code) if t.root.function.is_some() && !code.enterable() => {
                        if code.reentrant() {
                            ", machine code, counting steps: not entered from machine code"
                        } else {
                            ", machine code, holding integers past 64 bits: not entered from machine code"
                        }
                    }
                    Some(_) => ", machine code",
                    None => "",
                }
            );
        }
        for limit in &s.limits {
            let _ = writeln!(out, "limit: {limit}");
        }
        let max_bridges = self.config.policy.max_bridges;
        for (i, t) in self.trees.iter().enumerate() {
            if t.bridges.len() >= max_bridges {
                let _ = writeln!(
                    out,
                    "limit: bridge limit reached at trace {i} ({max_bridges} bridges)"
                );
            }
        }
        if s.not_worth > 0 {
            let _ = writeln!(
                out,
                "hot loops left to the interpreter, too near their end to pay for compiling: {}",
                s.not_worth
            );
        }
        let _ = writeln!(out, "trace aborts: {}", s.aborts.len());
        for (label, reason) in &s.aborts {
            let _ = writeln!(out, "  at {label}: {reason}");
        }
    }

    /// The report's machine code: trees' functions, bridges on their own, the code's size,
    /// and what was not compiled.
    fn report_machine_code(&self, out: &mut String) {
        let s = &self.stats;
        let compiled = self.trees.iter().filter(|t| t.code.is_some()).count();
        let bytes: usize = self
            .trees
            .iter()
            .filter_map(|t| t.code.as_ref())
            .map(|c| c.size)
            .sum();
        let _ = writeln!(
            out,
            "traces compiled to machine code: {compiled} ({bytes} bytes)"
        );
        let quick = self
            .trees
            .iter()
            .filter(|t| t.code.as_ref().is_some_and(|c| c.quick))
            .count();
        if quick + s.tiered as usize > 0 {
            let _ = writeln!(
                out,
                "trees whose function is the quick backend's: {quick} ({} compiled again by Cranelift once their loop ran {} iterations)",
                s.tiered,
                self.config.policy.tier_iterations
            );
        }
        let separate: Vec<&backend::Compiled> = self
            .trees
            .iter()
            .flat_map(|t| t.bridges.iter().filter_map(|b| b.code.as_ref()))
            .collect();
        if !separate.is_empty() || s.absorbed > 0 {
            let quick = separate.iter().filter(|c| c.quick).count();
            let _ = writeln!(
                out,
                "bridges compiled on their own: {} ({} bytes; {quick} by the quick backend; \
                 {} moved into their tree's function once entered {} times)",
                separate.len(),
                separate.iter().map(|c| c.size).sum::<usize>(),
                s.absorbed,
                self.config.policy.bridge_entries,
            );
        }
        // Code nothing reaches any more (a tree's function compiled again) is freed.
        let (made, live) = self
            .backend
            .as_ref()
            .map_or((0, 0), backend::Backend::code_bytes);
        let _ = writeln!(
            out,
            "machine code: {made} bytes made in all, {live} bytes live"
        );
        for (label, why) in &s.not_compiled {
            let _ = writeln!(out, "  not compiled, at {label}: {why}");
        }
    }

    /// The report's optimizer: traces rejected, loops optimized as generic, and what the
    /// optimizer left of the heap operations.
    fn report_optimizer(&self, out: &mut String) {
        let s = &self.stats;
        // A count, then where and why, one line each.
        let rejections = |out: &mut String, title: &str, list: &[(String, opt::Rejected)]| {
            let _ = writeln!(out, "{title}: {}", list.len());
            for (label, why) in list {
                let _ = writeln!(out, "  at {label}: {}", why.reason());
            }
        };
        rejections(out, "traces rejected by the optimizer", &s.rejected);
        if !s.generic.is_empty() {
            let title = "loops whose body assumes nothing of the preamble";
            rejections(out, title, &s.generic);
        }
        let [loads, stores, calls, allocs] = s.heap;
        if loads.recorded + stores.recorded + calls.recorded + allocs.recorded > 0 {
            let _ = writeln!(
                out,
                "per iteration, recorded -> optimized: array loads {} -> {}, array stores {} -> {}, elidable calls {} -> {}, array allocations {} -> {}",
                loads.recorded, loads.left, stores.recorded, stores.left, calls.recorded, calls.left, allocs.recorded, allocs.left
            );
        }
        if loads.recorded + stores.recorded + calls.recorded + allocs.recorded > 0 {
            let _ = writeln!(
                out,
                "arrays and lists made by machine code: {}",
                s.native_allocations
            );
        }
        if s.calls.recorded > 0 {
            let _ = writeln!(
                out,
                "calls not inlined, per iteration: {} recorded, {} left; made {} times, {} of them in a function trace's machine code ({} directly)",
                s.calls.recorded, s.calls.left, s.calls_made, s.calls_entered, s.calls_entered - s.calls_helped.min(s.calls_entered)
            );
        }
    }

    /// The report's entries, links and exits, each guard's exits on a line.
    fn report_exits(&self, out: &mut String) {
        let s = &self.stats;
        let _ = writeln!(
            out,
            "trace entries: {} ({} in machine code)",
            s.entries, s.native_entries
        );
        if s.links > 0 {
            let _ = writeln!(
                out,
                "exits linked to another tree's machine code: {}",
                s.links
            );
        }
        let _ = writeln!(out, "exits: {}", s.exits.values().sum::<u64>());
        for ((t, seg, i), n) in &s.exits {
            let trace = self.trees[*t].segment(*seg);
            let place = if *seg == 0 {
                format!("trace {t}")
            } else {
                format!("trace {t} bridge {}", seg - 1)
            };
            let _ = writeln!(
                out,
                "  {place} {}: {n}",
                print::ssa_inst(self.program, trace, *i)
            );
        }
    }
}
