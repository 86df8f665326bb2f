//! JIT against interpreter on long loops, side by side in one run: the plain interpreter,
//! the tracing JIT with traces on the trace interpreter, and the tracing JIT with machine
//! code. Compilation is included in each JIT run.
//!
//! `cargo bench --bench jit`

use criterion::{criterion_group, criterion_main, Criterion};
use flowjit::backend::{self, Backend, Listings};
use flowjit::interp;
use flowjit::jit::{Config, Jit};
use flowjit::lang::{self, BlockId, Program, Slot, Syntax};
use flowjit::peval;
use flowjit::state::{Io, State};
use flowjit_runtime::Value;

/// A loaded program, its entry and its inputs.
type Loaded = (Program, BlockId, Vec<(Slot, Value)>);

fn load(text: &str, entry: &str, inputs: &[(&str, i64)]) -> Loaded {
    let (_, program) = lang::load(text, Syntax::Fg).expect("valid example");
    let entry = program.block_id(entry).expect("entry");
    let inputs = inputs
        .iter()
        .map(|(n, v)| (program.slot(n).expect("variable"), Value::Int(*v)))
        .collect();
    (program, entry, inputs)
}

fn bench(c: &mut Criterion) {
    let cases = [
        (
            "power_x1_y1e6",
            include_str!("../examples/power.fg"),
            "power",
            vec![("x", 1), ("y", 1_000_000)],
        ),
        (
            "sum_1e6",
            include_str!("../examples/sum.fg"),
            "sum",
            vec![("n", 1_000_000)],
        ),
        (
            "promotion_i1e6",
            include_str!("../examples/promotion.fg"),
            "b",
            vec![("i", 1_000_000), ("x", 5)],
        ),
        (
            "branchy_1e6",
            include_str!("../tests/programs/branchy.fg"),
            "start",
            vec![("n", 1_000_000)],
        ),
        (
            "straight_1e6",
            include_str!("../tests/programs/straight.fg"),
            "start",
            vec![("n", 1_000_000)],
        ),
        (
            // A megamorphic promotion: 100 values, past the specializations of its guard.
            "promote_many_1e6",
            include_str!("../tests/programs/promote_many.fg"),
            "start",
            vec![("n", 1_000_000)],
        ),
    ];
    let mut loaded: Vec<(&str, Loaded)> = cases
        .into_iter()
        .map(|(name, text, entry, inputs)| (name, load(text, entry, &inputs)))
        .collect();
    // The bundled register machine running square.bc (meta-traced through its hints).
    let (program, entry, mut inputs) = load(
        lang::bytecode::REGMACHINE_SOURCE,
        lang::bytecode::REGMACHINE_ENTRY,
        &[("pc", 0), ("a", 1_000_000), ("r0", 0), ("r1", 0), ("r2", 0)],
    );
    let square =
        lang::bytecode::assemble(include_str!("../examples/square.bc")).expect("square.bc");
    inputs.push((
        program.slot("bytecode").expect("bytecode"),
        Value::list(square),
    ));
    loaded.push(("regmachine_square_1e6", (program, entry, inputs)));
    for (name, (program, entry, inputs)) in loaded {
        let mut group = c.benchmark_group(name);
        group.sample_size(10);
        group.bench_function("interp", |b| {
            b.iter(|| {
                let mut state = State::new(&program, &inputs, Io::default());
                interp::run_program(&program, entry, &mut state, None).expect("runs")
            })
        });
        if name == "regmachine_square_1e6" {
            // The articles' other way: partially evaluate the interpreter for the bytecode
            // (bytecode and pc static), clean up, compile the residual program whole, run it.
            group.bench_function("pe_compiled", |b| {
                b.iter(|| {
                    let statics: Vec<(Slot, Value)> = inputs
                        .iter()
                        .filter(|(s, _)| matches!(program.var(*s), "bytecode" | "pc"))
                        .cloned()
                        .collect();
                    let residual =
                        peval::specialize(&program, entry, &statics).expect("specializes");
                    let residual = peval::cleanup::clean(residual).to_program(&program);
                    let dynamic: Vec<(Slot, Value)> = inputs
                        .iter()
                        .filter_map(|(s, v)| residual.slot(program.var(*s)).map(|r| (r, v.clone())))
                        .collect();
                    let mut state =
                        flowjit::state::State::new(&residual, &dynamic, Default::default());
                    let mut backend =
                        Backend::new(None, flowjit::jit::Policy::DEFAULT.backend_limits())
                            .expect("supported host");
                    let code = backend
                        .compile_program(&residual, BlockId(0), &state.frame, Listings::default())
                        .expect("compiles");
                    match backend::run_program(&code, &residual, &mut state) {
                        Some(backend::cfg::ProgramExit::Stop(v)) => v,
                        _ => unreachable!("square of 10^6 stays within 64 bits"),
                    }
                })
            });
        }
        for (mode, native) in [("trace", false), ("jit", true)] {
            group.bench_function(mode, |b| {
                b.iter(|| {
                    let config = Config {
                        native,
                        ..Config::default()
                    };
                    let mut jit = Jit::new(&program, config).expect("supported host");
                    let mut state = State::new(&program, &inputs, Io::default());
                    jit.run(&mut state, entry).expect("runs")
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
