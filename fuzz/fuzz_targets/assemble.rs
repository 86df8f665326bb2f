//! The `.bc` assembler: a program assembles or is reported, and an assembled program runs
//! on the bundled interpreter for a bounded number of steps.
#![no_main]
use flowjit::lang::{self, bytecode, Source, Syntax};
use flowjit_runtime::Value;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match bytecode::assemble(text) {
        Err(diags) => {
            let _ = Source::new("fuzz.bc", text).render(&diags, false);
        }
        Ok(cells) => {
            let (_, program) = lang::load(bytecode::REGMACHINE_SOURCE, Syntax::Fg).expect("bundled");
            let entry = program.block_id(bytecode::REGMACHINE_ENTRY).expect("entry");
            let mut inputs = vec![(program.slot("bytecode").expect("slot"), Value::list(cells))];
            for reg in ["pc", "a", "r0", "r1", "r2"] {
                inputs.push((program.slot(reg).expect("slot"), Value::Int(3)));
            }
            let mut state = flowjit::state::State::new(&program, &inputs, Default::default());
            let _ = flowjit::interp::run_program(&program, entry, &mut state, Some(10_000));
        }
    }
});
