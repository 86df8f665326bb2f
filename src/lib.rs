//! # flowjit
//!
//! A meta-tracing JIT for the flowgraph language of the articles *Comparing Partial
//! Evaluation to Tracing*. See `docs/ARCHITECTURE.md` for the pipeline.
//!
//! ## Glossary
//! - **block**: a label, a sequence of operations and one terminator.
//! - **back edge**: a jump to a block that does not come later in the source; every loop has
//!   one, and its target is where hot loops are counted and traces start.
//! - **trace anchor**: the label a trace starts at and closes its loop at.
//! - **guard**: a check in a trace that the path recorded is the path taken.
//! - **resume variables**: the values a guard writes back when it fails, so that the
//!   interpreter continues exactly where the trace left off.
//! - **promote**: a hint that freezes a variable's current value into the trace behind a
//!   `guard_value`.
//! - **green**: a variable that identifies a position in an interpreted program
//!   (`bytecode`, `pc`), constant inside a trace.
//! - **residual program**: what partial evaluation leaves of a program.
//!
//! ## Features
//! - `cli` (default): the `flowjit` binary and the `cli` module, and what only they need
//!   (clap, indicatif, plotters, serde_json): the command line, and the JSON and SVG output
//!   of [`bench::Report`]. It includes `difftest`.
//! - `difftest`: the differential tester, the `difftest` module, on proptest.
//!
//! Without them (`--no-default-features`) the library has the language, the executors, the
//! JIT, the partial evaluator and [`bench`](mod@bench)'s runs and table.
//!
//! ## As a library
//! [`embed`] is the facade (SPEC §7): a program parsed and checked from text, run with
//! inputs in a mode, its input and output the caller's, and its value, error and
//! statistics as data (`examples/embed.rs` shows it end to end).
#![deny(missing_docs)]

pub mod backend;
pub mod bench;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "difftest")]
pub mod difftest;
pub mod embed;
pub mod interp;
pub mod jit;
pub mod lang;
pub mod opt;
pub mod peval;
#[cfg(feature = "cli")]
pub mod report;
pub mod resume;
pub mod state;
pub mod trace;
