//! The optimizer's passes, tested as text: the cases under `tests/opt/` (an input trace,
//! the passes to run, and the expected trace, in the SSA form that `--dump opt` prints),
//! the loop bodies `--dump opt` shows for the examples, and the loop state of a peeled
//! trace.

mod common;

use std::path::{Path, PathBuf};

use flowjit::backend::Tuning;
use flowjit::lang::Slot;
use flowjit::opt;
use flowjit::trace::parse::{parse_ssa, TextNames};
use flowjit::trace::tree::Segment;
use flowjit::trace::{print, verify::verify};

/// The directory of the optimizer's cases.
fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/opt")
}

/// One case: what it says, the passes, the input trace, and the expected result.
struct Case {
    /// Everything up to and including the `=>` line.
    head: String,
    passes: Vec<String>,
    /// The variables held as integers of any size where the trace reads them (`wide:`),
    /// for the `repr` step.
    wide: Vec<String>,
    input: String,
    expected: String,
}

fn read_case(text: &str) -> Result<Case, String> {
    let (head, expected) = text
        .split_once("\n=>\n")
        .ok_or("no `=>` line between the input and the expected result")?;
    let mut passes = None;
    let mut wide = Vec::new();
    let mut input = String::new();
    for line in head.lines() {
        if let Some(p) = line.strip_prefix("passes:") {
            passes = Some(p.split_whitespace().map(String::from).collect());
        } else if let Some(w) = line.strip_prefix("wide:") {
            wide = w.split_whitespace().map(String::from).collect();
        } else {
            input.push_str(line);
            input.push('\n');
        }
    }
    Ok(Case {
        head: format!("{head}\n=>\n"),
        passes: passes.ok_or("no `passes:` line")?,
        wide,
        input,
        expected: expected.to_string(),
    })
}

/// What the optimizer makes of a case's input: the optimized trace in the SSA form, or
/// `trace rejected: why`.
fn outcome(case: &Case) -> Result<String, String> {
    let (trace, names) = parse_ssa(&case.input)?;
    // `repr` last: the optimized trace as a tree's root, with how machine code holds its
    // values (`opt::repr`), as `--dump opt` prints it.
    let (passes, held) = match case.passes.split_last() {
        Some((last, rest)) if last == "repr" => (rest, true),
        _ => (&case.passes[..], false),
    };
    let passes: Vec<opt::Pass> = if passes == ["all"] {
        opt::PIPELINE.to_vec()
    } else {
        opt::check_passes(passes)?
    };
    Ok(match opt::optimize(&trace, &passes) {
        Ok(out) if held => {
            verify(&out).map_err(|e| format!("the optimized trace is broken: {e}"))?;
            let wide = (case.wide.iter())
                .map(|w| match names.vars.iter().position(|v| v == w) {
                    Some(k) => Ok(Slot(k as u32)),
                    None => Err(format!("no variable `{w}` for `wide:`")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let segments = [Segment::root(&out)];
            let reprs = opt::repr::infer(&segments, &wide, true);
            let checks = Tuning::DEFAULT.checks(&segments, &reprs, true);
            let notes = |i: usize| checks.notes(0, &out, i);
            print::ssa_held(&names, &out, &reprs.values[0], &notes)
        }
        Ok(out) => {
            verify(&out).map_err(|e| format!("the optimized trace is broken: {e}"))?;
            print::ssa(&names, &out)
        }
        Err(rejected) => format!("{rejected}\n"),
    })
}

/// Runs every case under `tests/opt/`: an input trace, the passes (`passes: fold cse`, or
/// `passes: all` for the whole pipeline; `repr` after them prints how machine code holds
/// each value, the variables of a `wide:` line read as integers of any size), `=>`, and the
/// optimized trace expected (or `trace rejected: why`), in the SSA form `--dump opt` prints, in the manner of Cranelift's
/// filetests and PyPy's optimizeopt tests. With `FLOWJIT_BLESS=1`, each expected result
/// is rewritten with what the optimizer gives now (review the diff before committing it).
#[test]
fn optimizer_cases() {
    let bless = std::env::var_os("FLOWJIT_BLESS").is_some();
    let paths = common::trace_files(&cases_dir());
    assert!(paths.len() >= 20, "only {} cases", paths.len());
    let mut failures = Vec::new();
    for path in &paths {
        let name = path.file_name().expect("a file").to_string_lossy();
        let text = std::fs::read_to_string(path).expect("a readable case");
        let case = match read_case(&text) {
            Ok(case) => case,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        match outcome(&case) {
            Ok(got) if got == case.expected => {}
            Ok(got) if bless => {
                std::fs::write(path, format!("{}{got}", case.head)).expect("a writable case");
            }
            Ok(got) => failures.push(format!(
                "{name}:\n--- expected\n{}--- got\n{got}",
                case.expected
            )),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed (FLOWJIT_BLESS=1 rewrites the expectations):\n\n{}",
        failures.len(),
        paths.len(),
        failures.join("\n")
    );
}

/// The instructions of the optimized loop body (after `loop_start` and the params) that
/// `--dump opt` prints for a run, without their snapshots.
fn loop_body(args: &[&str]) -> Vec<String> {
    let out = common::flowjit_command()
        .args(common::reproducible(&[args, &["--dump", "opt"]].concat()))
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
            "v14:int = sub v12, 1",
            "v15:int = add v13, v7",
            "v16:int = eq v14, 0",
            "g17: guard_false v16",
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
            "v8:int = sub v7, 11",
            "v9:int = ge v8, 0",
            "g10: guard_true v9",
            "loop v8"
        ]
    );
}

/// The header state of a peeled trace, from its text, with the names it declares.
fn loop_state(peeled: &str) -> (TextNames, opt::header::LoopState) {
    let (trace, names) = parse_ssa(peeled).unwrap_or_else(|e| panic!("{e}"));
    let state = opt::header::LoopState::of(&trace).expect("a peeled trace has a header state");
    (names, state)
}

/// `x` and `y` share a param, `z` is assumed to stay 7.
const MERGED: &str = "[x:int, c:int, i:int]
     v0:int = input x  @l:0 #0 []
     v1:int = add v0, 1  @l:0 #0 []
     v2:int = input c  @l:1 #1 [x=v1]
     guard_true v2  @d:0 #2 [x=v1]
     v4:int = input i  @d:0 #2 [x=v1]
     loop_start v1  @l:0 #2 [x=v1, y=v1, z=7]
     v6:int = param x
     v7:int = add v6, 1  @l:0 #0 [x=v6, y=v6, z=7]
     loop v7  @l:0 #2 [x=v7, y=v7, z=7]";

#[test]
fn loop_state_names_merged_params_and_assumed_constants() {
    use flowjit::opt::header::Assumed;
    use flowjit_runtime::Value;
    let (names, state) = loop_state(MERGED);
    let slot = |name: &str| {
        let at = names.vars.iter().position(|v| v == name);
        Slot(at.expect("a variable of the trace") as u32)
    };
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
    use flowjit::opt::header::Arrival;
    use flowjit::trace::Ref;
    use flowjit_runtime::Value;
    let (names, state) = loop_state(MERGED);
    let slot = |name: &str| {
        let at = names.vars.iter().position(|v| v == name);
        Slot(at.expect("a variable of the trace") as u32)
    };
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

#[test]
fn the_articles_purefunction_loop_holds_the_result_and_no_call() {
    // `promote(self)` and `@elidable compute(self)` (seed 003): the loop adds compute's
    // result, a constant; it neither calls nor reads the field, nor stores it (`sink`: the
    // loop carries it in a register, and its exits store it).
    let body = loop_body(&["run", "examples/purefunction.fg", "n=100000", "x=4"]);
    assert!(body.iter().any(|l| l.ends_with("= add 9, v10")), "{body:?}");
    assert!(
        !body
            .iter()
            .any(|l| l.contains("call_pure") || l.contains("getitem")),
        "{body:?}"
    );
    assert_eq!(
        body.iter().filter(|l| l.starts_with("setitem")).count(),
        0,
        "{body:?}"
    );
}
