//! The optimizer's passes, tested as text: an input trace, the passes to run, and the
//! expected trace, in the SSA form that `--dump opt` prints (in the manner of PyPy's
//! optimizeopt tests).

mod common;

use flowjit::lang::{self, Program, Syntax};
use flowjit::opt::{self, Rejected};
use flowjit::trace::{parse::parse_ssa, print};

/// A program that only provides names: variables `x y z c i` and labels `l d e`.
fn names() -> Program {
    let text = "l: x = 0 y = 0 z = 0 c = 0 i = 0 goto d  d: goto e  e: goto l";
    lang::load(text, Syntax::Fg).expect("valid program").1
}

fn unindent(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect()
}

fn optimize(input: &str, passes: &[&str]) -> Result<String, Rejected> {
    let program = names();
    let trace = parse_ssa(&program, &unindent(input)).unwrap_or_else(|e| panic!("{e}"));
    let out = opt::optimize(&trace, passes)?;
    assert_eq!(flowjit::trace::verify::verify(&out), Ok(()));
    Ok(print::ssa(&program, &out))
}

#[track_caller]
fn check(input: &str, passes: &[&str], expected: &str) {
    assert_eq!(
        optimize(input, passes).expect("not rejected"),
        unindent(expected)
    );
}

#[test]
fn fold_constant_arithmetic_guarded_by_guard_value_vanishes() {
    check(
        "v0 = add 2, 3  @l:0 #0 []
         guard_value v0, 5  @d:0 #1 [x=v0]
         loop  @l:0 #2 [x=v0]",
        &["fold"],
        "loop  @l:0 #2 [x=5]",
    );
}

#[test]
fn fold_two_guard_values_on_values_derived_from_each_other() {
    check(
        "v0 = input x  @l:0 #0 []
         guard_value v0, 5  @d:0 #1 []
         v2 = add v0, 1  @d:0 #1 []
         guard_value v2, 6  @e:0 #2 [y=v2]
         v4 = mul v2, v0  @e:0 #2 [y=v2]
         loop  @l:0 #3 [y=v2, z=v4]",
        &["fold"],
        "v0 = input x  @l:0 #0 []
         guard_value v0, 5  @d:0 #1 []
         loop  @l:0 #3 [y=6, z=30]",
    );
}

#[test]
fn fold_keeps_constants_in_snapshots_instead_of_computing_them() {
    check(
        "v0 = input c  @l:0 #0 []
         v1 = add 2, 3  @l:0 #0 []
         v2 = mul v1, v1  @l:1 #1 [x=v1]
         guard_true v0  @d:0 #2 [x=v1, y=v2]
         loop  @l:0 #3 [x=v1, y=v2]",
        &["fold"],
        "v0 = input c  @l:0 #0 []
         guard_true v0  @d:0 #2 [x=5, y=25]
         loop  @l:0 #3 [x=5, y=25]",
    );
}

#[test]
fn fold_learns_from_guard_false_and_guard_true_on_eq() {
    check(
        // The guard's own snapshot is used only when the guard fails: then v1, a
        // comparison, is 0.
        "v0 = input x  @l:0 #0 []
         v1 = eq v0, 'mov_a_r0'
         guard_true v1  @d:0 #1 [c=0]
         v3 = input y  @l:1 #1 [c=v1]
         guard_false v3  @e:0 #2 [c=v1]
         v5 = eq v0, v3
         loop  @l:0 #3 [c=v1, y=v3, z=v5]",
        &["fold"],
        // The guard's own snapshot is used only when the guard fails: then v1, a
        // comparison, is 0.
        "v0 = input x  @l:0 #0 []
         v1 = eq v0, 'mov_a_r0'
         guard_true v1  @d:0 #1 [c=0]
         v3 = input y  @l:1 #1 [c=1]
         guard_false v3  @e:0 #2 [c=1]
         loop  @l:0 #3 [y=0, z=0, c=1]",
    );
}

#[test]
fn fold_reads_a_constant_list_at_a_constant_index() {
    check(
        "v0 = readlist [a,b,c], 1  @l:0 #0 []
         v1 = eq v0, 'b'
         guard_true v1  @d:0 #1 [x=v0]
         loop  @l:0 #2 [x=v0]",
        &["fold"],
        "loop  @l:0 #2 [x='b']",
    );
}

#[test]
fn fold_keeps_an_operation_that_always_fails_so_the_interpreter_raises() {
    check(
        "v0 = readlist [a], 3  @l:0 #0 []
         loop  @l:0 #1 [x=v0]",
        &["fold"],
        "v0 = readlist [a], 3  @l:0 #0 []
         loop  @l:0 #1 [x=v0]",
    );
}

#[test]
fn fold_rejects_a_trace_whose_guard_must_fail() {
    let r = optimize(
        "v0 = input x  @l:0 #0 []
         guard_value v0, 5  @d:0 #1 []
         guard_value v0, 6  @d:0 #1 []
         loop  @l:0 #1 []",
        &["fold"],
    );
    assert_eq!(
        r.map_err(|e| e.reason().to_string()),
        Err("guard_value(5, 6) always fails".into())
    );
}

#[test]
fn cse_of_repeated_comparisons_then_the_repeated_guard_goes() {
    let input = "v0 = input x  @l:0 #0 []
                 v1 = lt v0, 4  @l:0 #0 []
                 guard_true v1  @d:0 #1 []
                 v3 = lt v0, 4  @d:0 #1 []
                 guard_true v3  @e:0 #2 []
                 loop  @l:0 #3 [c=v3]";
    check(
        input,
        &["cse"],
        "v0 = input x  @l:0 #0 []
         v1 = lt v0, 4  @l:0 #0 []
         guard_true v1  @d:0 #1 []
         guard_true v1  @e:0 #2 []
         loop  @l:0 #3 [c=v1]",
    );
    check(
        input,
        &["cse", "guards"],
        "v0 = input x  @l:0 #0 []
         v1 = lt v0, 4  @l:0 #0 []
         guard_true v1  @d:0 #1 []
         loop  @l:0 #3 [c=v1]",
    );
}

#[test]
fn cse_puts_commutative_operands_in_order() {
    check(
        "v0 = input x  @l:0 #0 []
         v1 = input y  @l:0 #0 []
         v2 = add v0, v1  @l:0 #0 []
         v3 = add v1, v0  @l:1 #1 []
         loop  @l:0 #2 [x=v2, y=v3]",
        &["cse"],
        "v0 = input x  @l:0 #0 []
         v1 = input y  @l:0 #0 []
         v2 = add v0, v1  @l:0 #0 []
         loop  @l:0 #2 [x=v2, y=v2]",
    );
}

#[test]
fn guards_a_guarded_x_below_4_makes_x_below_5_vanish() {
    check(
        "v0 = input x  @l:0 #0 []
         v1 = lt v0, 4  @l:0 #0 []
         guard_true v1  @d:0 #1 []
         v3 = lt v0, 5  @d:0 #1 []
         guard_true v3  @e:0 #2 []
         v5 = ge v0, 4  @e:0 #2 []
         guard_false v5  @e:0 #3 []
         loop  @l:0 #4 [c=v3, y=v5]",
        &["guards"],
        "v0 = input x  @l:0 #0 []
         v1 = lt v0, 4  @l:0 #0 []
         guard_true v1  @d:0 #1 []
         loop  @l:0 #4 [y=0, c=1]",
    );
}

#[test]
fn guards_reject_a_guard_that_contradicts_an_earlier_one() {
    let r = optimize(
        "v0 = input x  @l:0 #0 []
         v1 = lt v0, 4  @l:0 #0 []
         guard_true v1  @d:0 #1 []
         v3 = gt v0, 10  @d:0 #1 []
         guard_true v3  @e:0 #2 []
         loop  @l:0 #3 []",
        &["guards"],
    );
    assert_eq!(
        r.map_err(|e| e.reason().to_string()),
        Err("guard_true on 0 always fails".into())
    );
}

#[test]
fn bounds_remove_the_overflow_check_of_a_bounded_add() {
    let input = "v0 = input i  @l:0 #0 []
                 v1 = lt v0, 100  @l:0 #0 []
                 guard_true v1  @d:0 #1 []
                 v3 = ge v0, 0  @d:0 #1 []
                 guard_true v3  @e:0 #2 []
                 v5 = add v0, 1  @e:0 #2 []
                 v6 = mul v5, v5  @e:1 #3 []
                 v7 = mul v6, v6  @e:2 #4 []
                 v8 = mul v7, v7  @e:3 #5 []
                 v9 = mul v8, v8  @e:4 #6 []
                 loop  @l:0 #7 [i=v5, x=v9]";
    // `ge v0, 0` keeps its check: v0 is only known to be at most 99 there (it could be a
    // big negative integer). After both guards, 0..=99 + 1 cannot overflow; neither can its
    // square (10^4), fourth power (10^8) or eighth power (10^16); the sixteenth power (10^32)
    // can, and keeps its check.
    check(
        input,
        &["bounds"],
        "v0 = input i  @l:0 #0 []
         v1 = lt v0, 100  @l:0 #0 []
         guard_true v1  @d:0 #1 []
         v3 = ge v0, 0  @d:0 #1 []
         guard_true v3  @e:0 #2 []
         v5 = add v0, 1
         v6 = mul v5, v5
         v7 = mul v6, v6
         v8 = mul v7, v7
         v9 = mul v8, v8  @e:4 #6 []
         loop  @l:0 #7 [x=v9, i=v5]",
    );
}

#[test]
fn dce_removes_unused_operations_that_cannot_exit_and_keeps_those_that_can() {
    check(
        "v0 = input x  @l:0 #0 []
         v1 = eq v0, 3
         v2 = add v0, 1  @l:1 #1 []
         v3 = eq v0, 4
         guard_true v3  @d:0 #2 []
         loop  @l:0 #3 []",
        &["dce"],
        "v0 = input x  @l:0 #0 []
         v1 = add v0, 1  @l:1 #1 []
         v2 = eq v0, 4
         guard_true v2  @d:0 #2 []
         loop  @l:0 #3 []",
    );
}

#[test]
fn peel_the_promotion_loop_to_a_subtraction_a_comparison_and_a_guard() {
    // The promotion example's trace, as recorded and as the fold pass leaves it.
    check(
        "v0 = input x  @l:0 #0 []
         guard_value v0, 5  @d:0 #1 []
         v2 = mul v0, 2  @d:0 #1 []
         v3 = add v2, 1  @d:1 #2 [y=v2]
         v4 = input i  @d:2 #3 [y=v2, z=v3]
         v5 = sub v4, v3  @d:2 #3 [y=v2, z=v3]
         v6 = ge v5, 0  @e:0 #4 [i=v5, y=v2, z=v3]
         guard_true v6  @e:0 #5 [c=v6, i=v5, y=v2, z=v3]
         loop  @l:0 #5 [c=v6, i=v5, y=v2, z=v3]",
        opt::PIPELINE,
        "v0 = input x  @l:0 #0 []
         guard_value v0, 5  @d:0 #1 []
         v2 = input i  @d:2 #3 [y=10, z=11]
         v3 = sub v2, 11  @d:2 #3 [y=10, z=11]
         v4 = ge v3, 0  @e:0 #4 [y=10, z=11, i=v3]
         guard_true v4  @e:0 #5 [y=10, z=11, c=0, i=v3]
         loop_start v3  @l:0 #5 [y=10, z=11, c=1, i=v3]
         v7 = param i
         v8 = sub v7, 11  @d:2 #3 [y=10, z=11, c=1, i=v7]
         v9 = ge v8, 0  @e:0 #4 [y=10, z=11, c=1, i=v8]
         guard_true v9  @e:0 #5 [y=10, z=11, c=0, i=v8]
         loop v8  @l:0 #5 [y=10, z=11, c=1, i=v8]",
    );
}

#[test]
fn peel_carries_a_changing_constant_as_a_param() {
    // x is 0 at the end of the first iteration, but 1 at the end of the second: the
    // assumption that it stays 0 fails, and x becomes a param.
    check(
        "v0 = input x  @l:0 #0 []
         v1 = add v0, 1  @l:0 #0 []
         v2 = input c  @l:1 #1 [x=v1]
         guard_true v2  @d:0 #2 [x=v1]
         loop  @l:0 #2 [x=v1]",
        opt::PIPELINE,
        "v0 = input x  @l:0 #0 []
         v1 = add v0, 1  @l:0 #0 []
         v2 = input c  @l:1 #1 [x=v1]
         guard_true v2  @d:0 #2 [x=v1]
         loop_start v1  @l:0 #2 [x=v1]
         v5 = param x
         v6 = add v5, 1  @l:0 #0 [x=v5]
         loop v6  @l:0 #2 [x=v6]",
    );
}

/// The instructions of the optimized loop body (after `loop_start` and the params) that
/// `--dump opt` prints for a run, without their snapshots.
fn loop_body(args: &[&str]) -> Vec<String> {
    let out = common::flowjit_command()
        .args(args)
        .args(["--dump", "opt"])
        .output()
        .expect("flowjit runs");
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    err.lines()
        .skip_while(|l| !l.starts_with("loop_start"))
        .skip(1)
        .filter(|l| !l.contains(" = param "))
        .map(|l| l.split("  @").next().unwrap_or(l).to_string())
        .collect()
}

#[test]
fn the_register_machine_loop_body_has_no_dispatch_left() {
    let body = loop_body(&[
        "trace",
        "examples/regmachine.fg",
        "--from",
        "op_jump_if_a_jump",
        "bytecode=[mov_a_r0,mov_a_r1,mov_r0_a,decr_a,mov_a_r0,mov_r2_a,add_r1_to_a,mov_a_r2,mov_r0_a,jump_if_a,2,mov_r2_a,return_a]",
        "pc=11",
        "a=16",
        "r0=16",
        "r1=16",
        "r2=0",
        "target=2",
    ]);
    // r0 - 1, r2 + r1, the test of a, and the loop's exit guard: nothing of the dispatch.
    // (a and r0 always hold the same value: one loop-carried value.)
    assert_eq!(
        body,
        [
            "v14 = sub v12, 1",
            "v15 = add v13, v7",
            "v16 = eq v14, 0",
            "guard_false v16",
            "loop v14, v15",
        ]
    );
}

#[test]
fn the_promotion_loop_body_is_a_subtraction_a_comparison_and_a_guard() {
    let body = loop_body(&[
        "trace",
        "examples/promotion.fg",
        "--from",
        "b",
        "i=100",
        "x=5",
    ]);
    assert_eq!(
        body,
        [
            "v8 = sub v7, 11",
            "v9 = ge v8, 0",
            "guard_true v9",
            "loop v8"
        ]
    );
}

#[test]
fn peel_merges_params_that_always_hold_the_same_value() {
    // x and y are both v1 at the end of every iteration: one param carries them.
    check(
        "v0 = input x  @l:0 #0 []
         v1 = add v0, 1  @l:0 #0 []
         v2 = input c  @l:1 #1 [x=v1]
         guard_true v2  @d:0 #2 [x=v1]
         loop  @l:0 #2 [x=v1, y=v1]",
        opt::PIPELINE,
        "v0 = input x  @l:0 #0 []
         v1 = add v0, 1  @l:0 #0 []
         v2 = input c  @l:1 #1 [x=v1]
         guard_true v2  @d:0 #2 [x=v1]
         loop_start v1  @l:0 #2 [x=v1, y=v1]
         v5 = param x
         v6 = add v5, 1  @l:0 #0 [x=v5, y=v5]
         loop v6  @l:0 #2 [x=v6, y=v6]",
    );
}

/// The header state of a peeled trace, from its text.
fn loop_state(peeled: &str) -> (Program, opt::state::LoopState) {
    let program = names();
    let trace = parse_ssa(&program, &unindent(peeled)).unwrap_or_else(|e| panic!("{e}"));
    let state = opt::state::LoopState::of(&trace).expect("a peeled trace has a header state");
    (program, state)
}

/// `x` and `y` share a param, `z` is assumed to stay 7.
const MERGED: &str = "v0 = input x  @l:0 #0 []
     v1 = add v0, 1  @l:0 #0 []
     v2 = input c  @l:1 #1 [x=v1]
     guard_true v2  @d:0 #2 [x=v1]
     loop_start v1  @l:0 #2 [x=v1, y=v1, z=7]
     v5 = param x
     v6 = add v5, 1  @l:0 #0 [x=v5, y=v5, z=7]
     loop v6  @l:0 #2 [x=v6, y=v6, z=7]";

#[test]
fn loop_state_names_merged_params_and_assumed_constants() {
    use flowjit::opt::state::Assumed;
    use flowjit_runtime::Value;
    let (program, state) = loop_state(MERGED);
    let slot = |name: &str| program.slot(name).expect("a variable of the program");
    assert_eq!(state.params, 1);
    assert_eq!(state.assumed(slot("x")), Some(&Assumed::Param(0)));
    assert_eq!(state.assumed(slot("y")), Some(&Assumed::Param(0)));
    assert_eq!(
        state.assumed(slot("z")),
        Some(&Assumed::Const(Value::Int(7)))
    );
    assert_eq!(state.assumed(slot("i")), None);
}

#[test]
fn a_jump_enters_the_header_only_with_the_state_the_loop_assumes() {
    use flowjit::opt::state::Arrival;
    use flowjit::trace::Ref;
    use flowjit_runtime::Value;
    let (program, state) = loop_state(MERGED);
    let slot = |name: &str| program.slot(name).expect("a variable of the program");
    let (x, y, z, i) = (slot("x"), slot("y"), slot("z"), slot("i"));
    let v = |r: u32| Arrival::Value(1, Ref(r));
    // x and y arrive as one value, z as its constant: the param takes x's value.
    let same = |s| {
        if s == z {
            Arrival::Const(Value::Int(7))
        } else {
            v(3)
        }
    };
    assert_eq!(state.admits(&[x, y], &same), Some(vec![Some(x)]));
    // Nothing written on the path: the param keeps its value.
    assert_eq!(state.admits(&[], &|_| Arrival::Unchanged), Some(vec![None]));
    // x and y arrive as two values (the rare path's `y = 0`): through the preamble.
    let split = |s| match s {
        s if s == y => Arrival::Const(Value::Int(0)),
        s if s == z => Arrival::Unchanged,
        _ => v(3),
    };
    assert_eq!(state.admits(&[x, y], &split), None);
    // The same value from two segments is two values.
    let segments = |s| match s {
        s if s == y => Arrival::Value(2, Ref(3)),
        s if s == z => Arrival::Unchanged,
        _ => v(3),
    };
    assert_eq!(state.admits(&[x, y], &segments), None);
    // z arrives as another constant.
    let other = |s| {
        if s == z {
            Arrival::Const(Value::Int(8))
        } else {
            v(3)
        }
    };
    assert_eq!(state.admits(&[x, y, z], &other), None);
    // i is not carried: the preamble read it once, and a path that writes it must run it.
    assert_eq!(state.admits(&[x, y, i], &same), None);
}
