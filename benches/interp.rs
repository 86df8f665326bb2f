//! The interpreter's speed: flowgraph operations per second on the register-machine
//! interpreter running the square bytecode, and on a direct flowgraph loop.
//!
//! `cargo bench --bench interp` reports time per run and, through criterion's throughput,
//! operations per second; divide to get nanoseconds per flowgraph operation.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use flowjit::interp::{self, Exit, NoMonitor};
use flowjit::lang::{self, bytecode, Program, Slot, Syntax};
use flowjit::state::{Io, Position, State, Steps};
use flowjit_runtime::Value;

fn inputs(program: &Program, named: &[(&str, Value)]) -> Vec<(Slot, Value)> {
    named
        .iter()
        .map(|(n, v)| (program.slot(n).expect("input is a variable"), v.clone()))
        .collect()
}

/// Runs once and returns how many operations the run interpreted.
fn count_ops(program: &Program, entry: lang::BlockId, inputs: &[(Slot, Value)]) -> u64 {
    let mut state = State::new(program, inputs, Io::default());
    let mut steps = Steps::new(Some(u64::MAX - 1));
    let exit = interp::run(
        program,
        &mut state,
        Position::start(entry),
        &mut steps,
        &mut NoMonitor,
    );
    assert!(matches!(exit, Ok(Exit::Stop(_))));
    steps.used()
}

fn bench(c: &mut Criterion) {
    let (_, rm) = lang::load(bytecode::REGMACHINE_SOURCE, Syntax::Fg).expect("bundled interpreter");
    let square = bytecode::assemble(include_str!("../examples/square.bc")).expect("square.bc");
    let entry = rm.block_id(bytecode::REGMACHINE_ENTRY).expect("entry");
    let args = inputs(
        &rm,
        &[
            ("bytecode", Value::list(square)),
            ("pc", Value::Int(0)),
            ("a", Value::Int(1000)),
            ("r0", Value::Int(0)),
            ("r1", Value::Int(0)),
            ("r2", Value::Int(0)),
        ],
    );
    let ops = count_ops(&rm, entry, &args);
    let mut group = c.benchmark_group("interp");
    group.throughput(Throughput::Elements(ops));
    group.bench_function("regmachine_square_1000", |b| {
        b.iter(|| {
            let mut state = State::new(&rm, &args, Io::default());
            interp::run_program(&rm, entry, &mut state, None).expect("runs")
        })
    });

    let (_, sum) = lang::load(include_str!("../examples/sum.fg"), Syntax::Fg).expect("sum.fg");
    let args = inputs(&sum, &[("n", Value::Int(100_000))]);
    let ops = count_ops(&sum, lang::BlockId(0), &args);
    group.throughput(Throughput::Elements(ops));
    group.bench_function("sum_100000", |b| {
        b.iter(|| {
            let mut state = State::new(&sum, &args, Io::default());
            interp::run_program(&sum, lang::BlockId(0), &mut state, None).expect("runs")
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
