//! Arrays, calls and elidable calls in machine code, each against its plain twin, side by
//! side in one run (the heap issue's benchmarks):
//!
//! - `boxed_1e6`: a loop on integers boxed as `[tag, payload]` arrays, every operation a
//!   call that checks the tags and returns a new box (`examples/boxed.fg`), against
//!   `plain_1e6`, the same loop on plain integers (`examples/sum.fg`).
//! - `stackvm_1e6`: a stack machine written in the flowgraph language running a counting
//!   loop (`examples/stackvm.fg`), against the same plain loop.
//! - `purefunction_1e6`: the articles' `promote` then `@elidable` call in a loop
//!   (`examples/purefunction.fg`).
//! - `alloc_1e6`: a loop whose arrays and lists escape (`tests/programs/alloc_loop.fg`):
//!   machine code makes them through the runtime.
//!
//! Each group times the interpreter and the JIT (machine code, compilation included).
//!
//! `cargo bench --bench heap`

use criterion::{criterion_group, criterion_main, Criterion};
use flowjit::interp;
use flowjit::jit::{Config, Jit};
use flowjit::lang::{self, BlockId, Program, Slot, Syntax};
use flowjit::state::{Io, State};
use flowjit_runtime::Value;

/// A case: its name, the program's text and its inputs.
type Case = (&'static str, &'static str, Vec<(&'static str, i64)>);

/// A loaded program, its entry and its inputs.
type Loaded = (Program, BlockId, Vec<(Slot, Value)>);

fn load(text: &str, inputs: &[(&str, i64)]) -> Loaded {
    let (_, program) = lang::load(text, Syntax::Fg).expect("valid example");
    let inputs = inputs
        .iter()
        .map(|(n, v)| (program.slot(n).expect("variable"), Value::Int(*v)))
        .collect();
    (program, BlockId(0), inputs)
}

fn bench(c: &mut Criterion) {
    let n = 1_000_000;
    let cases: [Case; 5] = [
        (
            "boxed_1e6",
            include_str!("../examples/boxed.fg"),
            vec![("n", n)],
        ),
        (
            "plain_1e6",
            include_str!("../examples/sum.fg"),
            vec![("n", n)],
        ),
        (
            "stackvm_1e6",
            include_str!("../examples/stackvm.fg"),
            vec![("n", n)],
        ),
        (
            "purefunction_1e6",
            include_str!("../examples/purefunction.fg"),
            vec![("n", n), ("x", 4)],
        ),
        (
            "alloc_1e6",
            include_str!("../tests/programs/alloc_loop.fg"),
            vec![("n", n), ("bad", 0)],
        ),
    ];
    for (name, text, inputs) in cases {
        let (program, entry, inputs) = load(text, &inputs);
        let mut group = c.benchmark_group(name);
        group.sample_size(10);
        group.bench_function("interp", |b| {
            b.iter(|| {
                let mut state = State::new(&program, &inputs, Io::default());
                interp::run_program(&program, entry, &mut state, None).expect("runs")
            })
        });
        group.bench_function("jit", |b| {
            b.iter(|| {
                let config = Config {
                    native: true,
                    ..Config::default()
                };
                let mut jit = Jit::new(&program, config).expect("supported host");
                let mut state = State::new(&program, &inputs, Io::default());
                jit.run(&mut state, entry).expect("runs")
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
