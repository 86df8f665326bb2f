//! `flowjit bench`: every executor on the same program and inputs, side by side.
//!
//! Each executor runs the whole program (loading aside) `runs` times, in interleaved
//! rounds (interpreter, trace interpreter, JIT, partial evaluation, then again), so that
//! a noisy machine disturbs them alike. Every run must print what the interpreter prints:
//! a benchmark of a wrong answer is refused. The JIT's figure includes recording,
//! optimizing and compiling; its *warm-up* (from the start of the run to the first entry
//! into machine code) is reported apart. The partially evaluated figure includes
//! specialization, clean-up and compilation of the residual program.
//!
//! The report's JSON and SVG forms (`Report::json`, `Report::plot`) come with the
//! feature `cli`; the runs and the table need no feature.

use std::time::{Duration, Instant};

use flowjit_runtime::Value;

use crate::backend::Backend;
use crate::interp::{self, RuntimeError};
use crate::jit::{Config, Jit};
use crate::lang::{BlockId, Program, Slot};
use crate::peval::{self, run::Execution};
use crate::state::{Io, State};

/// What to run.
pub struct Setup<'p> {
    /// The program.
    pub program: &'p Program,
    /// Where it starts.
    pub entry: BlockId,
    /// Its inputs.
    pub inputs: Vec<(Slot, Value)>,
    /// The inputs the partial evaluator takes as static, if it runs at all.
    pub statics: Option<Vec<Slot>>,
}

/// One executor's timings.
#[derive(Clone, Debug)]
pub struct Timing {
    /// The executor: `interp`, `trace`, `jit` or `pe+compile`.
    pub mode: &'static str,
    /// Each run's time.
    pub times: Vec<Duration>,
    /// Each run's JIT warm-up, for the JIT.
    pub warmups: Vec<Duration>,
}

impl Timing {
    /// The median time.
    pub fn median(&self) -> Duration {
        median(&self.times)
    }

    /// The shortest time.
    pub fn min(&self) -> Duration {
        self.times.iter().copied().min().unwrap_or_default()
    }

    /// The longest time.
    pub fn max(&self) -> Duration {
        self.times.iter().copied().max().unwrap_or_default()
    }
}

/// The median of some durations (the lower middle one for an even count).
pub fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted
        .get(sorted.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or_default()
}

/// What a benchmark found.
#[derive(Clone, Debug)]
pub struct Report {
    /// What every run printed (or the error every run raised).
    pub result: String,
    /// Runs per executor.
    pub runs: usize,
    /// The executors' timings, interpreter first.
    pub timings: Vec<Timing>,
}

/// What a run printed, as the table shows it: its last line, and how much came before.
fn last_line(printed: &str) -> String {
    match printed.rsplit_once('\n') {
        None => printed.to_string(),
        Some((before, last)) => {
            let lines = before.lines().count();
            format!(
                "{last} (after {lines} line{} of output)",
                if lines == 1 { "" } else { "s" }
            )
        }
    }
}

/// What a run did: its result, and what it wrote.
type Outcome = (Result<Value, RuntimeError>, Io);

/// What a run printed, its output first, as the command line would show it.
fn describe(outcome: &Outcome) -> String {
    let (result, io) = outcome;
    let written = String::from_utf8_lossy(io.output());
    match result {
        Ok(v) => format!("{written}{v}"),
        Err(e) => format!("{written}error: {e}"),
    }
}

fn run_interp(setup: &Setup) -> Outcome {
    let mut state = State::new(setup.program, &setup.inputs, Io::default());
    let result = interp::run_program(setup.program, setup.entry, &mut state, None);
    (result, state.io)
}

fn run_jit(setup: &Setup, native: bool) -> (Outcome, Option<Duration>) {
    let config = Config {
        native,
        pay_off: true,
        background: native,
        ..Config::default()
    };
    let mut jit = Jit::new(setup.program, config).expect("the host emits machine code");
    let mut state = State::new(setup.program, &setup.inputs, Io::default());
    let result = jit.run(&mut state, setup.entry);
    ((result, state.io), jit.stats.first_native)
}

fn run_pe(setup: &Setup, statics: &[Slot]) -> Outcome {
    let program = setup.program;
    let (known, dynamic): (Vec<_>, Vec<_>) = setup
        .inputs
        .iter()
        .cloned()
        .partition(|(s, _)| statics.contains(s));
    let mut backend = Backend::new(None, crate::jit::Policy::DEFAULT.backend_limits())
        .expect("the host emits machine code");
    let how = Execution {
        backend: Some(&mut backend),
        ..Execution::default()
    };
    let mut io = Io::default();
    match peval::run::specialize_and_run(program, setup.entry, &known, &dynamic, how, &mut io) {
        Ok(result) => (result, io),
        // Beyond the partial evaluator's budget: run the original, as the CLI would not.
        Err(_) => run_interp(setup),
    }
}

/// An executor printed something other than what the interpreter printed: the benchmark
/// is refused (`flowjit bench` exits with status 3).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{mode} printed {got:?} where the interpreter printed {want:?}")]
pub struct Disagreement {
    /// The executor.
    pub mode: &'static str,
    /// What it printed.
    pub got: String,
    /// What the interpreter printed.
    pub want: String,
}

/// Runs every executor `runs` times, interleaved; `tick` is called after each run with
/// the executor's name. Fails (with both answers) when an executor disagrees with the
/// interpreter.
pub fn run(setup: &Setup, runs: usize, tick: impl FnMut(&str)) -> Result<Report, Disagreement> {
    let mut modes: Vec<&'static str> = vec!["interp", "trace", "jit"];
    if setup.statics.is_some() {
        modes.push("pe+compile");
    }
    let execute = |mode: &str| {
        let (outcome, warmup) = match mode {
            "interp" => (run_interp(setup), None),
            "trace" => run_jit(setup, false),
            "jit" => run_jit(setup, true),
            _ => (run_pe(setup, setup.statics.as_deref().unwrap_or(&[])), None),
        };
        (describe(&outcome), warmup)
    };
    rounds(&modes, runs, execute, tick)
}

/// Runs each of `modes` (the interpreter first) `runs` times through `execute`, which
/// returns what the run printed and its JIT warm-up, in interleaved rounds; stops at the
/// first run that prints something other than the first run did.
fn rounds(
    modes: &[&'static str],
    runs: usize,
    mut execute: impl FnMut(&str) -> (String, Option<Duration>),
    mut tick: impl FnMut(&str),
) -> Result<Report, Disagreement> {
    let mut timings: Vec<Timing> = modes
        .iter()
        .map(|m| Timing {
            mode: m,
            times: Vec::new(),
            warmups: Vec::new(),
        })
        .collect();
    let mut expected: Option<String> = None;
    for _ in 0..runs {
        for timing in &mut timings {
            let start = Instant::now();
            let (got, warmup) = execute(timing.mode);
            timing.times.push(start.elapsed());
            timing.warmups.extend(warmup);
            match &expected {
                None => expected = Some(got),
                Some(want) if *want != got => {
                    return Err(Disagreement {
                        mode: timing.mode,
                        got,
                        want: want.clone(),
                    })
                }
                Some(_) => {}
            }
            tick(timing.mode);
        }
    }
    Ok(Report {
        result: expected.unwrap_or_default(),
        runs,
        timings,
    })
}

/// A duration the way a person reads it: `6.45 s`, `10.3 ms`, `842 µs`.
pub fn human(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

impl Report {
    /// The table `flowjit bench` prints.
    pub fn table(&self, title: &str) -> String {
        let base = self.timings[0].median().as_secs_f64();
        let mut out = format!("{title}: {} runs each, interleaved\n", self.runs);
        out.push_str(&format!(
            "{:<12} {:>11} {:>11} {:>11} {:>10}\n",
            "executor", "median", "min", "max", "speedup"
        ));
        for t in &self.timings {
            let speedup = base / t.median().as_secs_f64().max(1e-12);
            out.push_str(&format!(
                "{:<12} {:>11} {:>11} {:>11} {:>9.1}x\n",
                t.mode,
                human(t.median()),
                human(t.min()),
                human(t.max()),
                speedup
            ));
        }
        if let Some(jit) = self.timings.iter().find(|t| t.mode == "jit") {
            if jit.warmups.is_empty() {
                out.push_str("JIT warm-up: no loop became machine code\n");
            } else {
                out.push_str(&format!(
                    "JIT warm-up (start of the run to the first machine code): median {}\n",
                    human(median(&jit.warmups))
                ));
            }
        }
        out.push_str(&format!("every run printed: {}\n", last_line(&self.result)));
        out
    }

    /// The report for machines.
    #[cfg(feature = "cli")]
    pub fn json(&self, program: &str, inputs: &[String]) -> String {
        let base = self.timings[0].median().as_secs_f64();
        let modes: Vec<serde_json::Value> = self
            .timings
            .iter()
            .map(|t| {
                serde_json::json!({
                    "executor": t.mode,
                    "times_s": t.times.iter().map(Duration::as_secs_f64).collect::<Vec<_>>(),
                    "median_s": t.median().as_secs_f64(),
                    "min_s": t.min().as_secs_f64(),
                    "max_s": t.max().as_secs_f64(),
                    "speedup": base / t.median().as_secs_f64().max(1e-12),
                    "warmup_median_s": (!t.warmups.is_empty()).then(|| median(&t.warmups).as_secs_f64()),
                })
            })
            .collect();
        let report = serde_json::json!({
            "program": program,
            "inputs": inputs,
            "runs": self.runs,
            "result": self.result,
            "executors": modes,
        });
        serde_json::to_string_pretty(&report).expect("a JSON value serializes")
    }

    /// Draws the medians as a bar chart (log scale) into an SVG file.
    #[cfg(feature = "cli")]
    pub fn plot(&self, path: &std::path::Path, title: &str) -> Result<(), String> {
        use plotters::prelude::*;
        let root =
            SVGBackend::new(path, (760, 120 + 60 * self.timings.len() as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let secs: Vec<f64> = self
            .timings
            .iter()
            .map(|t| t.median().as_secs_f64().max(1e-7))
            .collect();
        let lo = secs.iter().copied().fold(f64::MAX, f64::min) / 3.0;
        let hi = secs.iter().copied().fold(0.0, f64::max) * 3.0;
        let n = self.timings.len();
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(110)
            .build_cartesian_2d((lo..hi).log_scale(), (0..n).into_segmented())
            .map_err(|e| e.to_string())?;
        let names: Vec<&str> = self.timings.iter().map(|t| t.mode).collect();
        chart
            .configure_mesh()
            .x_desc("median time per run (s, log scale)")
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => names.get(*i).copied().unwrap_or("").to_string(),
                _ => String::new(),
            })
            .draw()
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(secs.iter().enumerate().map(|(i, s)| {
                Rectangle::new(
                    [
                        (lo, SegmentValue::Exact(i)),
                        (*s, SegmentValue::Exact(i + 1)),
                    ],
                    Palette99::pick(i).filled(),
                )
            }))
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_executor_that_disagrees_with_the_interpreter_stops_the_benchmark() {
        let modes = ["interp", "trace", "jit"];
        let mut ran = Vec::new();
        let result = rounds(
            &modes,
            3,
            |mode| {
                ran.push(mode.to_string());
                let printed = if mode == "jit" && ran.len() > 3 {
                    "41"
                } else {
                    "42"
                };
                (printed.to_string(), None)
            },
            |_| {},
        );
        assert_eq!(
            result.unwrap_err(),
            Disagreement {
                mode: "jit",
                got: "41".to_string(),
                want: "42".to_string()
            }
        );
        // The second round's JIT run was the last.
        assert_eq!(ran.len(), 6);
        let agreed = rounds(&modes, 2, |_| ("42".to_string(), None), |_| {}).unwrap();
        assert_eq!(agreed.result, "42");
        assert!(agreed.timings.iter().all(|t| t.times.len() == 2));
    }

    #[test]
    fn the_table_shows_the_last_line_of_what_a_run_printed() {
        assert_eq!(last_line("42"), "42");
        assert_eq!(last_line("2\n3\n5\n3"), "3 (after 3 lines of output)");
        assert_eq!(last_line("AB\n1"), "1 (after 1 line of output)");
    }
}
