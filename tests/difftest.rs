//! A bounded share of the differential test: random programs under every executor, each
//! compared with the interpreter (`flowjit difftest` runs it at length). A failure prints
//! the program, shrunk.

use flowjit::difftest::{check, programs};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_executor_agrees_with_the_interpreter(program in programs()) {
        let text = program.text();
        match check(&text) {
            Ok(_) => {}
            Err(why) => return Err(TestCaseError::fail(format!("{why}\n{text}"))),
        }
    }
}

/// The two programs the differential test found first, kept as regressions.
#[test]
fn found_by_the_differential_test() {
    // A big integer folded into a constant by the partial evaluator, printed: compiling the
    // residual program whole must decline it (it panicked).
    let big_constant =
        "start: x2 = 9223372036854775804 x1 = x2 * x2 goto end end: print_and_stop(x1)";
    assert_eq!(check(big_constant), Ok(true));
    // Squaring a huge integer again and again: an error, not an allocation that kills the
    // process.
    let growing = "start: x = 1 << 16777000 i = 3 goto head \
                   head: c = i > 0 if c goto body else goto end \
                   body: x = x * x i = i - 1 goto head \
                   end: print_and_stop(i)";
    assert_eq!(check(growing), Ok(true));
}
