//! The partial evaluator: the articles' residual programs, clean-up, and termination.

mod common;

use common::flowjit;

const SQUARE: &str = "bytecode=[mov_a_r0,mov_a_r1,mov_r0_a,decr_a,mov_a_r0,mov_r2_a,add_r1_to_a,mov_a_r2,mov_r0_a,jump_if_a,2,mov_r2_a,return_a]";

fn stdout(args: &[&str]) -> String {
    common::flowjit_ok(args).0
}

#[test]
fn power_specialized_to_y_5_is_the_articles_residual_program() {
    let listing = stdout(&[
        "pe",
        "examples/power.pl",
        "--entry",
        "power",
        "y=5",
        "--raw",
        "--format",
        "pl",
    ]);
    assert_eq!(
        listing,
        "block(power1, jump(power_rec1)).\n\
         block(power_rec1, op2(res, mul, const(1), var(x), jump(power_rec2))).\n\
         block(power_rec2, op2(res, mul, var(res), var(x), jump(power_rec3))).\n\
         block(power_rec3, op2(res, mul, var(res), var(x), jump(power_rec4))).\n\
         block(power_rec4, op2(res, mul, var(res), var(x), jump(power_rec5))).\n\
         block(power_rec5, op2(res, mul, var(res), var(x), jump(power_done1))).\n\
         block(power_done1, print_and_stop(var(res))).\n"
    );
    let run = [
        "pe",
        "examples/power.pl",
        "--entry",
        "power",
        "y=5",
        "--raw",
        "--format",
        "pl",
        "--run",
        "x=3",
    ];
    assert_eq!(stdout(&run), "243\n");
    // Cleaned up: the jump-only block threaded, the chain merged into one block.
    assert_eq!(
        stdout(&["pe", "examples/power.pl", "--entry", "power", "y=5"]),
        "power_rec1:\n    res = 1 * x\n    res = res * x\n    res = res * x\n    res = res * x\n    res = res * x\n    print_and_stop(res)\n"
    );
}

#[test]
fn the_register_machine_specialized_to_square_loses_its_dispatch() {
    let residual = stdout(&[
        "pe",
        "examples/regmachine.fg",
        "--entry",
        "bytecode_loop",
        SQUARE,
        "pc=0",
    ]);
    let blocks = residual.lines().filter(|l| l.ends_with(':')).count();
    assert_eq!(blocks, 3, "{residual}");
    // What the statements do, without the blocks' names (a block is named after the label
    // it starts at, the dispatch loop's own `bytecode_loop` among them).
    let code: String = residual
        .lines()
        .filter(|l| !l.ends_with(':'))
        .map(|l| l.split(" goto ").next().unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    for gone in [
        "bytecode",
        "pc",
        "opcode",
        "readlist",
        "jump_if_a",
        "promote",
    ] {
        assert!(!code.contains(gone), "`{gone}` is left in:\n{residual}");
    }
    // The loop: register moves and arithmetic, the test of a, and the jump back.
    let loop_block: Vec<&str> = residual
        .split("\n\n")
        .find(|b| {
            b.lines()
                .last()
                .is_some_and(|l| l.contains(b.lines().next().unwrap_or("").trim_end_matches(':')))
        })
        .expect("a block that jumps to itself")
        .lines()
        .skip(1)
        .map(str::trim)
        .collect();
    assert_eq!(
        &loop_block[..loop_block.len() - 1],
        [
            "a = r0",
            "a = a - 1",
            "r0 = a",
            "a = r2",
            "a = a + r1",
            "r2 = a",
            "a = r0",
            "c = a == 0"
        ]
    );
    let run = [
        "pe",
        "examples/regmachine.fg",
        "--entry",
        "bytecode_loop",
        SQUARE,
        "pc=0",
        "--run",
        "a=16",
        "r0=0",
        "r1=0",
        "r2=0",
    ];
    assert_eq!(stdout(&run), "256\n");
}

#[test]
fn a_static_counter_that_never_repeats_is_generalized_and_partial_evaluation_ends() {
    // With nothing static, `i = 1` makes the loop counter static and the loop's end dynamic:
    // the articles' partial evaluator would specialize sum_loop for i = 1, 2, 3, ... forever.
    let residual = stdout(&["pe", "examples/sum.fg"]);
    // 32 specializations, then a general loop entered with the values it forgot.
    assert!(residual.contains("    s = 528\n    i = 33\n"), "{residual}");
    assert!(
        residual.contains("    s = s + i\n    i = i + 1\n"),
        "{residual}"
    );
    assert_eq!(
        stdout(&["pe", "examples/sum.fg", "--run", "n=1000000"]),
        "500000500000\n"
    );
    assert_eq!(stdout(&["pe", "examples/sum.fg", "--run", "n=5"]), "15\n");
}

#[test]
fn residual_programs_fail_as_the_original_does() {
    let out = flowjit(&["pe", "examples/power.fg", "y=3", "--run", "x=foo"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: type error: mul expects integers, got the atom foo (in block power_rec)\n"
    );
    assert_eq!(out.status.code(), Some(1));
    let out = flowjit(&["pe", "examples/power.fg", "--entry", "nowhere"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn residual_programs_compiled_whole_give_the_same_results() {
    let square = [
        "pe",
        "examples/regmachine.fg",
        "--entry",
        "bytecode_loop",
        SQUARE,
        "pc=0",
        "--compile",
        "--stats",
        "--run",
        "a=16",
        "r0=0",
        "r1=0",
        "r2=0",
    ];
    let out = flowjit(&square);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "256\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("# stats\nresidual program compiled: "),
        "{err}"
    );
    // 3^70 leaves 64 bits: the machine code deoptimizes, and the interpreter finishes exactly.
    let power = [
        "pe",
        "examples/power.fg",
        "y=70",
        "--compile",
        "--stats",
        "--run",
        "x=3",
    ];
    let out = flowjit(&power);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "2503155504993241601315571986085849\n"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("residual program compiled"));
}
