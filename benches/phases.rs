//! The cost of each phase for one trace: recording, optimizing and compiling the register
//! machine's trace of the square loop (traced from `op_jump_if_a_jump`, as in the
//! articles). Throughput is in recorded trace operations, so criterion reports the cost per
//! operation; the sum of the three is the time from a loop becoming hot to its machine
//! code being ready.
//!
//! `cargo bench --bench phases`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use flowjit::backend::{Backend, Listings, Segment, Unit};
use flowjit::lang::{self, bytecode, Syntax};
use flowjit::opt;
use flowjit::state::Steps;
use flowjit::trace::{self, Recorded, Trace};
use flowjit_runtime::Value;

fn bench(c: &mut Criterion) {
    let (_, program) =
        lang::load(bytecode::REGMACHINE_SOURCE, Syntax::Fg).expect("bundled interpreter");
    let square = bytecode::assemble(include_str!("../examples/square.bc")).expect("square.bc");
    let anchor = program.block_id("op_jump_if_a_jump").expect("label");
    let inputs: Vec<_> = [
        ("bytecode", Value::list(square)),
        ("pc", Value::Int(11)),
        ("a", Value::Int(1_000_000)),
        ("r0", Value::Int(1_000_000)),
        ("r1", Value::Int(1_000_000)),
        ("r2", Value::Int(0)),
        ("target", Value::Int(2)),
    ]
    .into_iter()
    .map(|(n, v)| (program.slot(n).expect("variable"), v))
    .collect();
    let record = || -> Trace {
        let frame = flowjit::state::frame_with(&program, &inputs);
        let mut state = flowjit::state::State::with_frame(frame);
        let recorded = trace::record(
            &program,
            &mut state,
            anchor,
            &[],
            &mut trace::Interpreted::new(&program),
            &mut Steps::new(None),
            4000,
            true,
        );
        match recorded {
            Ok(Recorded::Loop(t)) => t,
            _ => unreachable!("the square loop closes"),
        }
    };
    let recorded = record();
    let frame_size = program.frame_size();
    let optimized = opt::optimize(&recorded, opt::PIPELINE).expect("optimizes");
    let mut group = c.benchmark_group("phases");
    group.throughput(Throughput::Elements(recorded.insts.len() as u64));
    group.bench_function("record", |b| b.iter(record));
    group.bench_function("optimize", |b| {
        b.iter(|| opt::optimize(&recorded, opt::PIPELINE).expect("optimizes"))
    });
    group.bench_function("compile", |b| {
        b.iter_batched(
            || {
                Backend::new(None, flowjit::jit::Policy::DEFAULT.backend_limits())
                    .expect("supported host")
            },
            |mut backend| {
                let segments = [Segment::root(&optimized)];
                let mut unit = Unit::tree(&segments, &[], frame_size);
                unit.tuning.quick = false;
                backend
                    .compile(unit, Listings::default())
                    .expect("compiles")
                    .size
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
