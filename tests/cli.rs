//! The command line's contract: each class of error has its message and exit status, and
//! the articles' examples print what the articles print.

mod common;

use std::path::PathBuf;

use common::flowjit;

thread_local! {
    /// The directory of each test's programs, removed when the test's thread ends.
    static DIR: tempfile::TempDir = tempfile::tempdir().expect("a temporary directory");
}

/// Writes `text` to a fresh file named `name` and returns its path.
fn program(name: &str, text: &str) -> PathBuf {
    let path = DIR.with(|dir| dir.path().join(name));
    std::fs::write(&path, text).expect("write program");
    path
}

fn run_file(name: &str, text: &str, extra: &[&str]) -> (String, String, Option<i32>) {
    let path = program(name, text);
    let path = path.to_str().expect("utf-8 temp path");
    let mut args = vec!["run", path];
    args.extend_from_slice(extra);
    let out = flowjit(&args);
    let stderr = String::from_utf8_lossy(&out.stderr).replace(path, "FILE");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr,
        out.status.code(),
    )
}

fn stdout_of(args: &[&str]) -> String {
    common::flowjit_ok(args).0
}

#[test]
fn the_articles_examples_print_what_the_articles_print() {
    assert_eq!(
        stdout_of(&["run", "examples/power.fg", "x=10", "y=10"]),
        "10000000000\n"
    );
    assert_eq!(
        stdout_of(&[
            "run",
            "examples/power.pl",
            "--entry",
            "power_rec",
            "res=1",
            "x=10",
            "y=20"
        ]),
        "100000000000000000000\n"
    );
    assert_eq!(
        stdout_of(&[
            "run",
            "examples/promotion.fg",
            "--entry",
            "b",
            "i=100",
            "x=5"
        ]),
        "-10\n"
    );
    assert_eq!(
        stdout_of(&["bytecode", "examples/square.bc", "a=16"]),
        "256\n"
    );
}

#[test]
fn parse_error() {
    let (out, err, status) = run_file("p.fg", "a:\n    x = 1 +\n", &[]);
    assert_eq!(out, "");
    assert_eq!(
        err,
        "FILE:2:12: error: expected an argument (a variable, an integer, a quoted atom or a list), found the end of the file\n    x = 1 +\n           ^\n"
    );
    assert_eq!(status, Some(2));
    let (_, err, status) = run_file(
        "p.pl",
        "block(a, op2(x, add, var(y) const(1), jump(a))).\n",
        &[],
    );
    assert_eq!(err, "FILE:1:29: error: expected `)`, found `const`\nblock(a, op2(x, add, var(y) const(1), jump(a))).\n                            ^^^^^\n");
    assert_eq!(status, Some(2));
}

#[test]
fn missing_label() {
    let (_, err, status) = run_file("m.fg", "a:\n    goto b\n", &[]);
    assert_eq!(
        err,
        "FILE:2:10: error: no block is labelled `b`\n    goto b\n         ^\n"
    );
    assert_eq!(status, Some(2));
}

#[test]
fn duplicate_label() {
    let (_, err, status) = run_file("d.pl", "block(a, jump(a)).\nblock(a, jump(a)).\n", &[]);
    assert_eq!(
        err,
        "FILE:2:7: error: label `a` is defined twice\nblock(a, jump(a)).\n      ^\nFILE:1:7: note: first defined here\nblock(a, jump(a)).\n      ^\n"
    );
    assert_eq!(status, Some(2));
}

#[test]
fn unknown_op_and_wrong_arity_are_all_reported() {
    let (_, err, status) = run_file(
        "u.fg",
        "a:\n    x = frob(1)\n    y = add(1)\n    print_and_stop(x)\n",
        &[],
    );
    assert_eq!(
        err,
        "FILE:2:9: error: unknown operation `frob`\n    x = frob(1)\n        ^^^^\n\
         FILE:3:9: error: `add` takes 2 arguments, not 1\n    y = add(1)\n        ^^^^^^\n"
    );
    assert_eq!(status, Some(2));
    let (_, err, _) = run_file(
        "u.pl",
        "block(a, op1(x, mul, const(1), print_and_stop(var(x)))).\n",
        &[],
    );
    assert!(
        err.starts_with("FILE:1:17: error: `mul` takes 2 arguments, not 1\n"),
        "{err}"
    );
}

#[test]
fn key_not_found() {
    let (out, err, status) = run_file("k.fg", "a:\n    x = y + 1\n    print_and_stop(x)\n", &[]);
    assert_eq!(
        (out.as_str(), err.as_str(), status),
        ("", "error: key_not_found(y) (in block a)\n", Some(1))
    );
}

#[test]
fn type_error() {
    let (_, err, status) = run_file(
        "t.fg",
        "a:\n    x = y + 1\n    print_and_stop(x)\n",
        &["y=[1,2]"],
    );
    assert_eq!(
        err,
        "error: type error: add expects integers, got the list [1,2] (in block a)\n"
    );
    assert_eq!(status, Some(1));
}

#[test]
fn readlist_out_of_range() {
    let (_, err, status) = run_file(
        "r.fg",
        "a:\n    x = l[i]\n    print_and_stop(x)\n",
        &["l=[a,b]", "i=2"],
    );
    assert_eq!(
        err,
        "error: readlist: index 2 out of range for a list of length 2 (in block a)\n"
    );
    assert_eq!(status, Some(1));
}

#[test]
fn division_by_zero() {
    let (_, err, status) = run_file(
        "z.fg",
        "a:\n    x = 1 % y\n    print_and_stop(x)\n",
        &["y=0"],
    );
    assert_eq!(err, "error: division by zero in mod (in block a)\n");
    assert_eq!(status, Some(1));
}

#[test]
fn max_steps() {
    let loop_ = "a:\n    i = i + 1\n    goto a\n";
    let (_, err, status) = run_file("s.fg", loop_, &["i=0", "--max-steps", "1000"]);
    assert_eq!(
        err,
        "error: step limit reached: the program did not stop within 1000 operations (in block a)\n"
    );
    assert_eq!(status, Some(1));
    // A program that needs exactly the limit finishes.
    let (out, _, status) = run_file(
        "s2.fg",
        "a:\n    x = 1\n    print_and_stop(x)\n",
        &["--max-steps", "2"],
    );
    assert_eq!((out.as_str(), status), ("1\n", Some(0)));
    let (_, _, status) = run_file(
        "s3.fg",
        "a:\n    x = 1\n    print_and_stop(x)\n",
        &["--max-steps", "1"],
    );
    assert_eq!(status, Some(1));
}

#[test]
fn bad_usage_exits_with_2() {
    let out = flowjit(&["run", "examples/power.fg", "x=10", "nope"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: input `nope` is not of the form NAME=VALUE\n"
    );
    assert_eq!(out.status.code(), Some(2));
    let out = flowjit(&["run", "examples/power.fg", "z=1"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: input `z` is not a variable of the program\n"
    );
    assert_eq!(out.status.code(), Some(2));
    let out = flowjit(&["run", "examples/power.fg", "--entry", "nowhere"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: no block is labelled `nowhere`\n"
    );
    assert_eq!(out.status.code(), Some(2));
    let out = flowjit(&["run", "examples/missing.fg"]);
    assert!(String::from_utf8_lossy(&out.stderr)
        .starts_with("error: cannot read examples/missing.fg: "));
    assert_eq!(out.status.code(), Some(2));
    let out = flowjit(&["run", "examples/power.fg", "x=[1,"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "input x:1:4: error: expected a term, found the end of the file\n[1,\n   ^\n"
    );
    assert_eq!(out.status.code(), Some(2));
    let out = flowjit(&["bytecode", "examples/square.bc", "r9=1"]);
    assert_eq!(out.status.code(), Some(2));
    let out = flowjit(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn an_input_given_twice_is_bad_usage() {
    let cases: &[(&[&str], &str)] = &[
        (&["run", "examples/power.fg", "x=5", "y=2", "x=6"], "x"),
        (
            &[
                "trace",
                "examples/power.fg",
                "--from",
                "power",
                "y=1",
                "x=2",
                "y=1",
            ],
            "y",
        ),
        (&["bytecode", "examples/square.bc", "a=5", "a=6"], "a"),
        (&["bench", "examples/square.bc", "a=5", "a=6"], "a"),
        (&["bench", "examples/sum.fg", "n=5", "n=6"], "n"),
        (&["pe", "examples/power.fg", "y=5", "y=5"], "y"),
        (
            &["pe", "examples/power.fg", "y=5", "--run", "x=2", "x=3"],
            "x",
        ),
    ];
    for (args, name) in cases {
        let out = flowjit(args);
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("error: input `{name}` is given twice\n"),
            "{args:?}"
        );
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // Static, and dynamic again under `pe --run`.
    let out = flowjit(&["pe", "examples/power.fg", "y=5", "--run", "x=2", "y=6"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: input `y` is given twice: static, and dynamic after --run\n"
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

#[test]
fn integer_literals_past_the_size_limit_are_refused_when_the_program_loads() {
    // 2^24 bits is at most 5,050,446 decimal digits: one more is refused unparsed.
    let digits = "7".repeat(5_050_447);
    let message = "error: integer literal of 5050447 digits too large (more than 16777216 bits)\n";
    let cases = [
        (
            "big.fg",
            format!("a:\n    x = [1, -{digits}]\n    print_and_stop(x)\n"),
            "2:14",
        ),
        (
            "big.pl",
            format!("block(a, print_and_stop(const({digits}))).\n"),
            "1:31",
        ),
    ];
    for (name, text, at) in cases {
        let (out, err, status) = run_file(name, &text, &[]);
        assert_eq!(out, "");
        assert!(
            err.starts_with(&format!("FILE:{at}: {message}")),
            "{name}: {}",
            &err[..err.len().min(500)]
        );
        // The line is shown around the literal, not all of it.
        assert!(
            err.len() < 500,
            "{name}: {} bytes of diagnostics",
            err.len()
        );
        assert_eq!(status, Some(2), "{name}");
    }
    let path = program("big.bc", &format!("mov_a_r0\njump_if_a {digits}\n"));
    let path = path.to_str().expect("utf-8 temp path");
    let out = flowjit(&["bytecode", path]);
    let err = String::from_utf8_lossy(&out.stderr).replace(path, "FILE");
    assert!(
        err.starts_with(&format!("FILE:2:11: {message}")),
        "{}",
        &err[..err.len().min(500)]
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bad_bytecode_is_reported_with_positions() {
    let path = program("bad.bc", "mov_a_r0\njump_if_a nowhere\nfly\n");
    let out = flowjit(&["bytecode", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr).replace(path.to_str().unwrap(), "FILE");
    assert_eq!(
        err,
        "FILE:2:11: error: no label `nowhere` in the program\njump_if_a nowhere\n          ^^^^^^^\n\
         FILE:3:1: error: unknown instruction `fly` (the machine has jump_if_a, mov_a_r0, mov_a_r1, mov_a_r2, mov_r0_a, mov_r1_a, mov_r2_a, add_r0_to_a, add_r1_to_a, add_r2_to_a, decr_a, return_a)\nfly\n^^^\n"
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn fmt_converts_between_syntaxes() {
    let printed = stdout_of(&["fmt", "examples/power.fg", "--format", "pl"]);
    // The file's comments come first, as Prolog comments; then its blocks.
    let (comments, pl) = printed.split_at(printed.find("block(").expect("blocks"));
    assert!(comments.lines().all(|l| l.starts_with('%')), "{comments}");
    assert!(comments.ends_with("% x to the y-th power\n"), "{comments}");
    assert_eq!(
        pl,
        "block(power, op1(res, same, const(1),\n    if(y, power_rec, power_done))).\n\
         block(power_rec, op2(res, mul, var(res), var(x),\n    op2(y, sub, var(y), const(1),\n    if(y, power_rec, power_done)))).\n\
         block(power_done, print_and_stop(var(res))).\n"
    );
}

#[test]
fn tracing_flags_are_checked() {
    let out = flowjit(&["run", "examples/power.fg", "x=2", "y=3", "--dump", "frob"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: unknown dump `frob` (choose from trace, opt, ir, asm)\n"
    );
    assert_eq!(out.status.code(), Some(2));
    let out = flowjit(&[
        "run",
        "examples/power.fg",
        "x=2",
        "y=3",
        "--mode",
        "interp",
        "--stats",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = flowjit(&[
        "trace",
        "examples/power.fg",
        "--from",
        "nowhere",
        "x=2",
        "y=3",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: no block is labelled `nowhere`\n"
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn stats_show_traces_and_guard_exits() {
    let out = flowjit(&[
        "run",
        "examples/sum.fg",
        "n=1000",
        "--mode",
        "trace",
        "--stats",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "500500\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(
            "# stats\ntraces recorded: 1\n  trace 0: loop at sum_loop, 15 instructions, 0 bridge(s)\n"
        ),
        "{err}"
    );
    assert!(
        err.contains("trace entries: 1 (0 in machine code)\n"),
        "{err}"
    );
    // The exit writes back only `s`: `sum_done` reads nothing else (`lang::liveness`).
    assert!(
        err.contains("exits: 1\n  trace 0 g13: guard_true v12  @sum_done:0 #4 [s=v10]: 1\n"),
        "{err}"
    );
}

/// `--stats` and `--log` report on the run the default flags make (SPEC §4): its functions
/// compiled on the compiler thread while the program ran on, which `--compile-on-driver`
/// (what the other tests ask for, `common::reproducible`) moves to the driver's thread.
#[test]
fn statistics_describe_the_default_run() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join("events.jsonl");
    let log = log.to_str().expect("a UTF-8 path");
    let run = [
        "run",
        "examples/sum.fg",
        "n=1000000",
        "--stats",
        "--log",
        log,
    ];
    let out = common::flowjit_command()
        .args(run)
        .output()
        .expect("flowjit runs");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "500000500000\n");
    let err = String::from_utf8_lossy(&out.stderr);
    let given = number_after(&err, "compiler thread: ");
    let pending = nth_number(&err, "compiler thread: ", "; ", 1);
    assert!(given + pending >= 1, "{err}");
    let events = std::fs::read_to_string(log).expect("the log is written");
    assert!(events.contains("\"event\":\"run_ended\""), "{events}");
    let (_, err) = common::flowjit_ok(&run);
    assert!(!err.contains("compiler thread: "), "{err}");
}

#[test]
fn the_jit_runs_hot_loops_as_machine_code() {
    let out = flowjit(&["run", "examples/sum.fg", "n=100000", "--stats"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "5000050000\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("traces compiled to machine code: 1 ("),
        "{err}"
    );
    assert!(
        err.contains("trace entries: 1 (1 in machine code)\n"),
        "{err}"
    );
    // readlist in machine code, bounds-checked: the list loop runs there.
    let out = flowjit(&[
        "run",
        "examples/lists.fg",
        "xs=[3,1,4,1,5]",
        "--stats",
        "--threshold",
        "0",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "14\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("trace entries: 1 (1 in machine code)\n"),
        "{err}"
    );
    // A trace machine code cannot run stays on the trace interpreter, and says why.
    let out = flowjit(&[
        "run",
        "examples/sum.fg",
        "n=100000",
        "--stats",
        "--passes",
        "fold,cse",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "5000050000\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "  not compiled, at sum_loop: the trace is not peeled (the peel pass is off)\n"
        ),
        "{err}"
    );
}

#[test]
fn ir_and_asm_dumps_show_each_compiled_trace() {
    let out = flowjit(&["run", "examples/sum.fg", "n=100000", "--dump", "ir,asm"]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    let host = if cfg!(target_arch = "aarch64") {
        "aarch64"
    } else {
        "x86_64"
    };
    assert!(
        err.starts_with(&format!("# ir 0: loop at sum_loop ({host})\nfunction ")),
        "{err}"
    );
    assert!(
        err.contains(&format!("# asm 0: loop at sum_loop ({host})\n  0x")),
        "{err}"
    );
    // Another ISA, for display, while the host's code runs.
    let out = flowjit(&[
        "run",
        "examples/sum.fg",
        "n=100000",
        "--dump",
        "asm",
        "--target",
        "aarch64",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "5000050000\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("# asm 0: loop at sum_loop (aarch64)\n"),
        "{err}"
    );
    assert!(err.contains(" ret"), "{err}");
    let out = flowjit(&["run", "examples/sum.fg", "n=10", "--target", "sparc"]);
    assert_eq!(out.status.code(), Some(2));
    let out = flowjit(&[
        "run",
        "examples/sum.fg",
        "n=10",
        "--mode",
        "trace",
        "--dump",
        "asm",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bench_prints_a_table_json_and_a_plot() {
    let out = flowjit(&["bench", "examples/sum.fg", "n=20000", "--runs", "2"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[0],
        "flowjit bench examples/sum.fg: 2 runs each, interleaved"
    );
    assert!(lines[1].starts_with("executor"), "{table}");
    for (line, name) in lines[2..5].iter().zip(["interp", "trace", "jit"]) {
        assert!(line.starts_with(name), "{table}");
    }
    assert!(lines[2].ends_with("1.0x"), "{table}");
    assert!(
        table.contains("JIT warm-up (start of the run to the first machine code): median "),
        "{table}"
    );
    assert!(table.ends_with("every run printed: 200010000\n"), "{table}");

    let svg = DIR.with(|dir| dir.path().join("bench.svg"));
    let out = flowjit(&[
        "bench",
        "examples/square.bc",
        "a=100",
        "--runs",
        "1",
        "--json",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = String::from_utf8_lossy(&out.stdout);
    for field in [
        "\"executor\": \"pe+compile\"",
        "\"result\": \"10000\"",
        "\"inputs\": [\n    \"a=100\"\n  ]",
        "\"median_s\"",
    ] {
        assert!(json.contains(field), "{field} in {json}");
    }
    let drawn = std::fs::read_to_string(&svg).expect("the plot is written");
    assert!(
        drawn.starts_with("<svg") && drawn.contains("pe+compile"),
        "{drawn}"
    );
    let out = flowjit(&["bench", "examples/sum.fg", "n=10", "--runs", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_help_lists_the_exit_statuses_and_bench_and_difftest_their_own() {
    let help = stdout_of(&["--help"]);
    for status in [
        "\n  0  success\n",
        "\n  1  a runtime error in the program\n",
        "\n  2  bad usage, an unreadable or invalid program\n",
        "\n  3  flowjit bench, flowjit difftest: an executor printed something other than the\n     interpreter did\n",
    ] {
        assert!(help.contains(status), "{status:?} in\n{help}");
    }
    let help = stdout_of(&["bench", "--help"]);
    assert!(
        help.contains("when one does not, no table is printed and the exit status is 3"),
        "{help}"
    );
    let help = stdout_of(&["difftest", "--help"]);
    assert!(help.contains("(exit status 3)"), "{help}");
}

#[test]
fn machine_code_drops_overflow_checks_that_guards_make_impossible() {
    // `i >= 0` is guarded before `i - 11`, in the preamble and in the loop: no overflow check.
    let out = flowjit(&[
        "run",
        "examples/promotion.fg",
        "--entry",
        "b",
        "x=5",
        "i=100000",
        "--dump",
        "ir",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "-1\n");
    let ir = String::from_utf8_lossy(&out.stderr);
    assert!(ir.contains("isub") && !ir.contains("ssub_overflow"), "{ir}");
    // sum.fg's `s + i` and `i + 1` are unbounded: they keep theirs.
    let out = flowjit(&["run", "examples/sum.fg", "n=100000", "--dump", "ir"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("sadd_overflow"));
}

/// Prints 50,000 lines, then fails in a hot loop (one that becomes machine code).
const PRINTS_THEN_FAILS: &str = "start:
    k = 0
    goto outer
outer:
    c = k < 50000
    if c goto outer_body else goto start_hot
outer_body:
    print(k)
    k += 1
    goto outer
start_hot:
    j = 0
    goto hot
hot:
    d = 1000 - j
    x = 7 // d
    j += 1
    goto hot
";

#[test]
fn output_written_before_an_error_in_a_hot_loop_is_all_there_in_every_mode() {
    let path = program("prints_then_fails.fg", PRINTS_THEN_FAILS);
    let path = path.to_str().expect("utf-8 temp path");
    let want: String = (0..50_000).map(|k| format!("{k}\n")).collect();
    let runs: &[&[&str]] = &[
        &["run", path, "--mode", "interp"],
        &["run", path, "--mode", "trace"],
        &["run", path, "--mode", "jit"],
        &["run", path, "--mode", "jit", "--threshold", "0"],
        &["pe", path, "--entry", "start", "--run"],
        &["pe", path, "--entry", "start", "--mode", "jit", "--run"],
        &["pe", path, "--entry", "start", "--compile", "--run"],
    ];
    for args in runs {
        let out = flowjit(args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout == want, "{args:?}: {} bytes of output", stdout.len());
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "error: division by zero in div (in block hot)\n",
            "{args:?}"
        );
        assert_eq!(out.status.code(), Some(1), "{args:?}");
    }
}

#[test]
fn output_written_before_the_step_limit_is_all_there_in_every_mode() {
    let path = program("prints_then_fails.fg", PRINTS_THEN_FAILS);
    let path = path.to_str().expect("utf-8 temp path");
    // Two operations to start, then five a line: after 40,000 lines the budget is spent,
    // and the run stops where it tests for the next one.
    let limit = "200002";
    let want: String = (0..40_000).map(|k| format!("{k}\n")).collect();
    for mode in ["interp", "trace", "jit"] {
        let out = flowjit(&["run", path, "--mode", mode, "--max-steps", limit]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout == want, "{mode}: {} bytes of output", stdout.len());
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "error: step limit reached: the program did not stop within 200002 operations (in block outer)\n",
        );
        assert_eq!(out.status.code(), Some(1));
    }
}

#[test]
fn fmt_keeps_comments_in_both_syntaxes() {
    let text = "# The sum 1 + ... + n.\n\
                sum:\n    s = 0  # the total\n    # counts down\n    goto head\n\
                head:\n    if n goto body else goto done\n\
                body:\n    s = s + n\n    n = n - 1\n    goto head\n\
                # done: '#' in an atom is no comment\n\
                done:\n    print_and_stop('a # b')\n# the end\n";
    let path = program("commented.fg", text);
    let path = path.to_str().expect("utf-8 temp path");
    let (fg, _) = common::flowjit_ok(&["fmt", path]);
    assert_eq!(
        fg,
        "# The sum 1 + ... + n.\nsum:\n    s = 0  # the total\n    # counts down\n    goto head\n\n\
         head:\n    if n goto body else goto done\n\n\
         body:\n    s = s + n\n    n = n - 1\n    goto head\n\n\
         # done: '#' in an atom is no comment\ndone:\n    print_and_stop('a # b')\n# the end\n"
    );
    // To the Prolog syntax and back: the same comments, the same program.
    let (pl, _) = common::flowjit_ok(&["fmt", path, "--format", "pl"]);
    assert!(pl.starts_with("% The sum 1 + ... + n.\nblock(sum, op1(s, same, const(0),  % the total\n    % counts down\n"), "{pl}");
    let pl_path = program("commented.pl", &pl);
    let (again, _) =
        common::flowjit_ok(&["fmt", pl_path.to_str().expect("utf-8"), "--format", "fg"]);
    assert_eq!(again, fg);
}

/// A loop that makes an array of 100,000 elements (1.6 MB) and drops it, 2,000 times: 3.2 GB
/// if arrays were never freed. Under a 2 GB limit of virtual memory (which the 512 MiB
/// stack of the command's thread and the code memory count against too) it must finish.
#[test]
fn a_loop_that_makes_and_drops_arrays_runs_in_constant_memory() {
    if std::env::var_os("FLOWJIT_TEST_RUNNER").is_some_and(|r| !r.is_empty()) {
        // Under an emulator the limit would be the emulator's memory, not flowjit's.
        return;
    }
    let path = program(
        "churn.fg",
        "start:\n    i = 0\n    goto head\n\
         head:\n    c = i < 2000\n    if c goto body else goto done\n\
         body:\n    a = array(100000, i)\n    a[5] = 1\n    i += 1\n    goto head\n\
         done:\n    print_and_stop(i)\n",
    );
    let bin = env!("CARGO_BIN_EXE_flowjit");
    for mode in ["interp", "jit"] {
        let script = format!(
            "ulimit -v 2000000 && exec '{bin}' run '{}' --mode {mode}",
            path.display()
        );
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .expect("sh runs");
        assert_eq!(
            (
                String::from_utf8_lossy(&out.stdout).as_ref(),
                out.status.code()
            ),
            ("2000\n", Some(0)),
            "--mode {mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A tree whose inner loop carries a virtual array and whose bridge goes back to the tree's
/// start: every exit writes the tree's inputs back, the array's variable among them (found
/// by the differential test: the machine code's analysis had no kind for it).
#[test]
fn a_bridge_back_to_the_start_of_a_loop_that_carries_a_virtual_array() {
    let path = "tests/programs/virtuals.fg";
    let args = ["which=ret", "n=23", "k=36"];
    let (want, _) =
        common::flowjit_ok(&[&["run", path][..], &args, &["--mode", "interp"]].concat());
    assert_eq!(want, "81920\n");
    for mode in ["jit", "trace"] {
        let flags = [
            "--mode",
            mode,
            "--threshold",
            "50",
            "--bridge-threshold",
            "20",
        ];
        let (got, _) = common::flowjit_ok(&[&["run", path][..], &args, &flags].concat());
        assert_eq!(got, want, "--mode {mode}");
    }
}

/// A guard whose snapshot holds a virtual array, failing on two iterations of three, gets
/// a bridge in machine code (which builds the array where it starts), rather than an exit
/// to the interpreter each time.
#[test]
fn a_guard_holding_a_virtual_array_gets_a_bridge_in_machine_code() {
    let path = "tests/programs/virtuals.fg";
    let (out, stats) =
        common::flowjit_ok(&["run", path, "which=branch", "n=30000", "k=0", "--stats"]);
    assert_eq!(out, "[29999,59995]\n89994\n");
    assert!(
        stats.contains("bridge(s), machine code") && !stats.contains(" 0 bridge(s)"),
        "{stats}"
    );
    let exits: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("exits: "))
        .and_then(|n| n.parse().ok())
        .expect("an exits line");
    assert!(exits < 100, "{exits} exits for 3000 iterations:\n{stats}");
}

/// Boxed integers (`examples/boxed.fg`): allocation removal keeps every box out of memory,
/// so the machine-code loop makes no array (`--stats`), while a loop whose arrays escape
/// makes them in machine code.
#[test]
fn boxed_integers_allocate_nothing_in_machine_code() {
    let (out, stats) = common::flowjit_ok(&["run", "examples/boxed.fg", "n=100000", "--stats"]);
    assert_eq!(out, "4999950000\n");
    assert!(stats.contains("bridge(s), machine code"), "{stats}");
    assert!(stats.contains("array allocations 3 -> 0"), "{stats}");
    assert!(
        stats.contains("arrays and lists made by machine code: 0\n"),
        "{stats}"
    );
    let (_, stats) = common::flowjit_ok(&[
        "run",
        "tests/programs/alloc_loop.fg",
        "n=10000",
        "bad=0",
        "--stats",
    ]);
    let made: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("arrays and lists made by machine code: "))
        .and_then(|n| n.parse().ok())
        .expect("a line of allocations");
    assert!(made > 20_000, "{stats}");
}

/// A loop on integers past 64 bits runs as machine code, which holds them boxed and
/// computes on them through helpers, never on the trace interpreter. An accumulator past 64
/// bits from the start is boxed when the loop is recorded: one entry, one exit at the end.
/// One that crosses 64 bits halfway exits at the overflow; its next entry is refused once,
/// and the tree is compiled again holding it boxed: three entries, two in machine code.
#[test]
fn a_big_integer_loop_runs_as_machine_code() {
    for (file, n, want, entries, exits) in [
        (
            "benches/cliffs/big_acc.fg",
            "n=100000",
            "100000000000004999950000\n",
            "trace entries: 1 (1 in machine code)",
            1,
        ),
        (
            "benches/cliffs/cross64.fg",
            "n=100000",
            "9223372036854825807\n",
            "trace entries: 3 (2 in machine code)",
            2,
        ),
    ] {
        let (out, err) = common::flowjit_ok(&["run", file, n, "--stats"]);
        assert_eq!(out, want, "{file}");
        assert!(err.contains(entries), "{file}: {err}");
        assert!(!err.contains("refused"), "{file}: {err}");
        assert!(err.contains("trace interpreter 0.000 ms"), "{file}: {err}");
        assert_eq!(number_after(&err, "exits: "), exits, "{file}: {err}");
    }
}

/// An integer that leaves 64 bits where a loop reads it from an array or a list, or gets
/// it from a call (elidable or not), or computes it from 64-bit ones: the read, the call or
/// the arithmetic exits until its code is compiled again holding its result boxed, and the
/// exits do not grow with the run. Each exited at every iteration past 64 bits before: 10,021
/// times (array), 2,500 (list), 9,521 (elidable call) and 2,521 (call) at n=20000, twice that
/// at n=40000. (The recursive `pw` of `which=call` gets a function trace, which its calls
/// from the loop's code enter: its guard, call and multiplication take their own exits, in
/// each copy the traces inline, a threshold's worth each, until its bridge and its result
/// held boxed are compiled.) So does the stack machine whose sum (a local, in an array)
/// leaves 64 bits.
#[test]
fn results_past_64_bits_are_held_boxed_and_stop_exiting() {
    let run = |args: &[&str]| {
        let (out, err) = common::flowjit_ok(&[args, &["--stats"]].concat());
        (out, number_after(&err, "exits: "), err)
    };
    let file = "tests/programs/wide_results.fg";
    for which in ["which=array", "which=list", "which=pure", "which=call"] {
        let (want, _) = common::flowjit_ok(&["run", file, which, "n=40000", "--mode", "interp"]);
        let (_, short, _) = run(&["run", file, which, "n=20000"]);
        let (out, long, err) = run(&["run", file, which, "n=40000"]);
        assert_eq!(out, want, "{which}");
        assert_eq!(short, long, "{which}: exits grow with the run");
        // No instruction exits more than the bridge threshold's worth (20) and the exit
        // that asks for the code.
        let per_site = (err.lines())
            .filter(|l| l.starts_with("  trace ") && l.contains(" @"))
            .map(|l| l.rsplit(' ').next().and_then(|n| n.parse::<usize>().ok()));
        for n in per_site {
            assert!(n.is_some_and(|n| n <= 22), "{which}: {err}");
        }
    }
    let file = "benches/cliffs/stackbig.fg";
    let (out, exits, _) = run(&["run", file, "n=3100000"]);
    assert_eq!(out, "9930328528333850000\n");
    assert!(exits < 100, "{exits} exits");
}

/// `--stats` says which function traces' code a call made in machine code does not enter:
/// code holding integers past 64 bits (`tests/programs/big_recursion.fg`). A walk of a
/// tree of arrays, whose reads exit for an element of another type (a leaf's 0 where the
/// trace met an array), holds none: its code was held so once, and every recursive call of
/// `sum` below the first ran in the interpreter.
#[test]
fn stats_name_the_function_traces_calls_do_not_enter() {
    const NOT_ENTERED: &str = "holding integers past 64 bits: not entered from machine code";
    let (out, err) = common::flowjit_ok(&[
        "run",
        "tests/programs/big_recursion.fg",
        "n=25",
        "--stats",
        "--compile-on-driver",
    ]);
    assert_eq!(out, "559826400834955899830272\n");
    assert!(err.contains(NOT_ENTERED), "{err}");
    let (out, err) = common::flowjit_ok(&[
        "run",
        "benches/recursion/tree.fg",
        "d=12",
        "k=3",
        "--stats",
        "--compile-on-driver",
    ]);
    assert_eq!(out, "100651008\n");
    let functions: Vec<&str> = (err.lines())
        .filter(|l| l.starts_with("  trace ") && l.contains(": function at "))
        .collect();
    assert_eq!(functions.len(), 2, "{err}");
    for line in functions {
        assert!(line.ends_with(", machine code"), "{line}");
    }
}

/// A bridge on its own whose guards have bridges of their own moves into its tree's
/// function once entered often: its guards' exits there go on in those bridges as they did
/// from its own code (compiled again where the new exit says less about the mirror). The
/// returns to the runtime then do not grow with the run: left unlinked, every failing
/// guard returned, 24,916 times in 200,000 iterations and 49,916 in 400,000.
#[test]
fn a_bridge_that_moves_into_its_tree_keeps_its_guards_bridges_linked() {
    let run = |n: &str| {
        let (out, err) = common::flowjit_ok(&[
            "run",
            "benches/cliffs/dispatch64.fg",
            n,
            "--bridge-entries",
            "2000",
            "--stats",
        ]);
        assert!(
            err.contains("moved into their tree's function") && !err.contains("; 0 moved"),
            "a bridge moves: {err}"
        );
        (out, number_after(&err, "exits: "))
    };
    let (short, exits_short) = run("n=200000");
    let (long, exits_long) = run("n=400000");
    assert_eq!((short.as_str(), long.as_str()), ("6300000\n", "12600000\n"));
    assert_eq!(
        exits_short, exits_long,
        "returns to the runtime grow with the run"
    );
    assert!(exits_short < 2000, "{exits_short}");
}

/// Arithmetic whose result only a mask reads wraps in machine code: a sum, a product and a
/// difference that leave 64 bits at every iteration (`x` near 2^63) stay in the loop's
/// machine code, which is entered once and left once, at the loop's end, where each
/// overflow used to exit.
#[test]
fn arithmetic_only_a_mask_reads_stays_in_machine_code_past_64_bits() {
    let file = "tests/programs/masked.fg";
    let (out, err) =
        common::flowjit_ok(&["run", file, "n=30000", "x=9223372036854775700", "--stats"]);
    assert_eq!(out, "1007064608\n");
    assert!(
        err.contains("trace entries: 1 (1 in machine code)"),
        "{err}"
    );
    assert_eq!(number_after(&err, "exits: "), 1, "{err}");
}

/// A tree compiled again to hold a variable boxed that cannot be (it promotes a value
/// computed from it) keeps its old code: its entries are then refused and counted, and the
/// loop is left to the interpreter, rather than compiled again at each entry.
#[test]
fn a_loop_that_cannot_hold_its_big_integer_boxed_is_compiled_again_once() {
    let file = "tests/programs/wide_promote.fg";
    let (out, err) = common::flowjit_ok(&["run", file, "n=20000", "--stats"]);
    assert_eq!(out, "9223372036856675807\n");
    let refused = "not compiled, at loop: `guard_value` of an integer that may leave 64 bits";
    assert_eq!(err.matches(refused).count(), 1, "{err}");
    assert!(
        err.contains("limit: machine code refused 16 entries"),
        "{err}"
    );
}

/// An exit that resumes at the start of a block is one tail call through its slot of the
/// link table, linked or not (an unlinked slot holds a function that returns the exit's
/// code); the other exits share one return (one epilogue). The loop of `examples/sum.fg`
/// has six exits: four resume at the start of a block, two after its first operation; its
/// function has four tail calls and one return (no refusal: a tree's function does not
/// check the kinds of its inputs, which every entry makes sure of).
#[test]
fn an_exit_is_a_tail_call_or_shares_one_return() {
    let (_, err) = common::flowjit_ok(&["run", "examples/sum.fg", "n=100000", "--dump", "ir"]);
    let exits = err.matches("; exit of ").count();
    let starts = |p: &str| {
        err.lines()
            .filter(|l| l.trim_start().starts_with(p))
            .count()
    };
    assert_eq!(
        (exits, starts("return_call_indirect "), starts("return ")),
        (6, 4, 1),
        "{err}"
    );
}

/// Machine code does not check the kinds of its inputs on entry, and has no refusal: a
/// bridge compiled on its own is entered from its guard's exit, which leaves the kinds it
/// assumes in the mirror; a tree's function from the runtime, which checks the frame
/// first, or from an exit linked to it only where that exit leaves the kinds it assumes.
/// `dispatch64.fg`'s loop gets a bridge on its own for each of its 63 other ways.
#[test]
fn machine_code_does_not_check_what_its_entries_make_sure_of() {
    let (_, err) = common::flowjit_ok(&[
        "run",
        "benches/cliffs/dispatch64.fg",
        "n=20000",
        "--dump",
        "ir",
    ]);
    let functions: Vec<&str> = err.split("# ir ").skip(1).collect();
    // The refusal returns the code of the function's tree and unit with REFUSED.
    let refuses = |f: &&&str| {
        f.lines()
            .any(|l| l.trim_start().starts_with("return ") && l.ends_with("ffff_ffff"))
    };
    let (bridges, trees): (Vec<&str>, Vec<&str>) =
        functions.iter().partition(|f| f.contains(": bridge "));
    assert_eq!((trees.len(), bridges.len()), (1, 63), "{err}");
    assert!(!trees.iter().any(|f| refuses(&f)), "{err}");
    assert!(!bridges.iter().any(|f| refuses(&f)), "{err}");
}

/// An exit that leaves an integer of any size in the mirror goes on in the code linked to
/// it, as any other: `tests/programs/wide_bridges.fg`'s sum leaves 64 bits and each of its
/// eight ways is a bridge on its own, whose end goes on in the tree (when such exits
/// returned, the runtime saw one exit per iteration: 85,867 of 100,000).
#[test]
fn an_exit_that_leaves_a_big_integer_goes_on_in_machine_code() {
    let (out, err) = common::flowjit_ok(&[
        "run",
        "tests/programs/wide_bridges.fg",
        "n=100000",
        "--stats",
    ]);
    assert_eq!(out, "9223372036855075807\n");
    let exits = number_after(&err, "exits: ");
    assert!(exits < 1000, "{err}");
}

/// An exit that leaves one integer of any size in two variables gives each the value
/// (`tests/programs/big_twice.fg`, at the thresholds where its loop's exits go on in other
/// code).
#[test]
fn an_exit_leaves_one_big_integer_in_two_variables() {
    for threshold in ["2", "3"] {
        let (out, _) = common::flowjit_ok(&[
            "run",
            "tests/programs/big_twice.fg",
            "--threshold",
            threshold,
        ]);
        assert_eq!(out, "17708874310761169551360\n", "threshold {threshold}");
    }
}

/// The number that starts part `k` of the line of `text` starting with `prefix` (the rest
/// of the line cut at `sep`).
fn nth_number(text: &str, prefix: &str, sep: &str, k: usize) -> usize {
    (text.lines())
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|l| l.split(sep).nth(k))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number {k} in `{prefix}` in\n{text}"))
}

/// The number after `prefix` on the line of `text` that starts with it.
fn number_after(text: &str, prefix: &str) -> usize {
    let line = text
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` in\n{text}"));
    line[prefix.len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .expect("a number")
}

/// Code nothing reaches any more is freed: a tree's function compiled again with each new
/// bridge leaves its old versions, which give their memory back, so what is live is the
/// code the trees hold now (and the trampoline that enters them), whatever was made before.
#[test]
fn machine_code_compiled_again_frees_the_old_code() {
    for (file, n) in [
        ("tests/programs/branchy.fg", "n=1000"),
        ("tests/programs/promote_cycles.fg", "n=2000"),
    ] {
        let (_, err) = common::flowjit_ok(&["run", file, n, "--bridge-threshold", "5", "--stats"]);
        let made = number_after(&err, "machine code: ");
        let live_line = err
            .lines()
            .find(|l| l.starts_with("machine code: "))
            .expect("the code line");
        let live: usize = live_line
            .split(", ")
            .nth(1)
            .and_then(|p| p.split(' ').next())
            .and_then(|n| n.parse().ok())
            .expect("live bytes");
        let trees = number_after(&err, "traces compiled to machine code: 1 (");
        let bridges = err
            .lines()
            .find(|l| l.starts_with("bridges compiled on their own: "))
            .map_or(0, |l| {
                let inside = l.split('(').nth(1).unwrap();
                inside.split(' ').next().unwrap().parse::<usize>().unwrap()
            });
        assert!(live < made, "{file}: old versions freed: {live_line}");
        let trampoline = live - (trees + bridges);
        assert!(
            trampoline > 0 && trampoline < 512,
            "{file}: {live_line}\n{err}"
        );
    }
}

/// A long trace whose exits read values the path does not need (`tests/programs/
/// long_trace.fg`: 1,844 instructions, 408 guards) compiles to code in proportion to its
/// length: each value is computed once, where the trace defines it, not again in every
/// exit that reads it (that made 1.7 MB of code for its two trees, about 900 bytes an
/// instruction).
#[test]
fn a_long_trace_compiles_to_code_in_proportion_to_its_length() {
    let (out, err) = common::flowjit_ok(&[
        "run",
        "tests/programs/long_trace.fg",
        "--threshold",
        "1",
        "--bridge-threshold",
        "1",
        "--stats",
    ]);
    assert_eq!(out.trim(), "320003841017289034591025963");
    let bytes = err
        .lines()
        .find_map(|l| l.strip_prefix("traces compiled to machine code: 2 ("))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("two trees compiled:\n{err}"));
    let insts: usize = err
        .lines()
        .filter(|l| l.trim_start().starts_with("trace "))
        .filter_map(|l| {
            l.split(", ")
                .nth(1)?
                .strip_suffix(" instructions")?
                .parse::<usize>()
                .ok()
        })
        .sum();
    assert!(insts > 1800, "the long trace is recorded:\n{err}");
    assert!(
        bytes < 300 * insts,
        "{bytes} bytes of code for {insts} instructions:\n{err}"
    );
}

/// Compiling pays for itself: with the default thresholds, a counted loop that becomes hot
/// with too few iterations left to repay its compilation stays in the interpreter, and one
/// with many is compiled; a threshold given is obeyed as given.
#[test]
fn a_counted_loop_near_its_end_is_left_to_the_interpreter() {
    let (out, err) = common::flowjit_ok(&["run", "examples/sum.fg", "n=1000", "--stats"]);
    assert_eq!(out, "500500\n");
    assert!(err.contains("traces compiled to machine code: 0 "), "{err}");
    assert!(
        err.contains(
            "hot loops left to the interpreter, too near their end to pay for compiling: "
        ),
        "{err}"
    );
    let (out, err) = common::flowjit_ok(&["run", "examples/sum.fg", "n=1000000", "--stats"]);
    assert_eq!(out, "500000500000\n");
    assert!(err.contains("traces compiled to machine code: 1 "), "{err}");
    // An inner loop of 20 iterations is hot near the end of one of its runs again and
    // again; the program's loops are still compiled.
    let (out, err) = common::flowjit_ok(&[
        "run",
        "tests/programs/nested_counted.fg",
        "n=100000",
        "--stats",
    ]);
    assert_eq!(out, "19000000\n");
    assert!(
        !err.contains("traces compiled to machine code: 0 "),
        "{err}"
    );
    assert!(
        err.contains("trace entries: 1 (1 in machine code)"),
        "{err}"
    );
    for flag in ["--threshold", "--bridge-threshold"] {
        let (out, err) =
            common::flowjit_ok(&["run", "examples/sum.fg", "n=1000", flag, "50", "--stats"]);
        assert_eq!(out, "500500\n");
        assert!(
            err.contains("traces compiled to machine code: 1 "),
            "{flag}: {err}"
        );
    }
}

/// A bridge compiled on its own that only computes with 64-bit integers is emitted by the
/// quick backend on x86-64 (`backend/quick.rs`), which `--stats` counts and `--dump asm`
/// lists with the trace's instructions; asked for Cranelift's IR, the bridge is compiled by
/// Cranelift, which has one to show. Either way the program prints what the interpreter
/// prints (`tests/programs/quick.fg` runs under every mode).
#[test]
fn bridges_of_integer_arithmetic_are_emitted_by_the_quick_backend() {
    let quick_bridges = |err: &str| -> usize {
        let line = err
            .lines()
            .find(|l| l.starts_with("bridges compiled on their own: "))
            .expect("bridges compiled on their own");
        let inside = line.split("; ").nth(1).expect("the quick backend's count");
        inside.split(' ').next().unwrap().parse().unwrap()
    };
    let run = ["run", "tests/programs/quick.fg", "n=20000"];
    let (interp, _) = common::flowjit_ok(&[&run[..], &["--mode", "interp"]].concat());
    let (out, err) = common::flowjit_ok(&[&run[..], &["--stats", "--dump", "asm"]].concat());
    assert_eq!(out, interp);
    let quick = quick_bridges(&err);
    if cfg!(target_arch = "x86_64") {
        assert!(quick >= 5, "{err}");
        assert!(
            err.contains("  ; bridge 2: v1:int = sub v0, 3\n") && err.contains("jo "),
            "a listing with the trace's instructions and the overflow check:\n{err}"
        );
    } else {
        assert_eq!(quick, 0, "{err}");
    }
    let (out, err) = common::flowjit_ok(&[&run[..], &["--stats", "--dump", "ir"]].concat());
    assert_eq!(out, interp);
    assert_eq!(quick_bridges(&err), 0, "{err}");
    assert!(err.contains("# ir 0: bridge 2 at loop"), "{err}");
}

/// A loop of integer arithmetic alone in its tree runs first in the quick backend's code,
/// which counts its iterations; past `Policy::tier_iterations` it exits there and Cranelift
/// compiles the tree again, and the loop goes on in that code from the interpreter's next
/// entry. Either way the sum is the interpreter's.
#[test]
fn a_hot_loop_moves_from_the_quick_backend_to_cranelift() {
    let tiers = |err: &str| -> Option<(usize, usize)> {
        let line = err
            .lines()
            .find(|l| l.starts_with("trees whose function is the quick backend's: "))?;
        let mut numbers = line
            .split(|c: char| !c.is_ascii_digit())
            .filter(|w| !w.is_empty())
            .map(|w| w.parse().unwrap());
        Some((numbers.next()?, numbers.next()?))
    };
    for (n, expect) in [(50_000, (1, 0)), (300_000, (0, 1))] {
        let n = format!("n={n}");
        let run = ["run", "examples/sum.fg", &n];
        let (interp, _) = common::flowjit_ok(&[&run[..], &["--mode", "interp"]].concat());
        let (out, err) = common::flowjit_ok(&[&run[..], &["--stats"]].concat());
        assert_eq!(out, interp, "{n}");
        if cfg!(target_arch = "x86_64") {
            assert_eq!(tiers(&err), Some(expect), "{n}:\n{err}");
        } else {
            assert_eq!(tiers(&err), None, "{n}:\n{err}");
        }
    }
}

/// Division and remainder by a constant other than 0 and -1 cannot fail: the optimizer
/// drops their snapshot, and machine code divides without one (the bridges of
/// `bridge_store_header.fg` compute `i % 8` and `i % 7` so; they stayed on the trace
/// interpreter when the backends wanted a snapshot for every division).
#[test]
fn a_division_by_a_safe_constant_needs_no_snapshot_in_machine_code() {
    let (out, err) = common::flowjit_ok(&[
        "run",
        "tests/programs/bridge_store_header.fg",
        "n=1000",
        "--threshold",
        "1",
        "--bridge-threshold",
        "1",
        "--stats",
    ]);
    assert_eq!(out, "284005\n");
    assert!(!err.contains("not compiled"), "{err}");
    assert!(err.contains("traces compiled to machine code: 1"), "{err}");
}

/// `NAME=@FILE` (SPEC §3) binds NAME to the file's bytes, a list of integers 0..255, for
/// every command that takes inputs: a loop summing them prints the same sum under each.
/// A file that cannot be read is bad usage, with the file's name.
#[test]
fn a_file_as_an_input_is_the_list_of_its_bytes() {
    let sum_bytes = "start:\n    s = 0\n    i = 0\n    n = len(t)\n    goto head\n\
                     head:\n    c = i < n\n    if c goto body else goto done\n\
                     body:\n    b = t[i]\n    s = s + b\n    i = i + 1\n    goto head\n\
                     done:\n    print_and_stop(s)\n";
    let path = program("sum_bytes.fg", sum_bytes);
    let path = path.to_str().expect("utf-8 temp path");
    let bytes: Vec<u8> = (0..3000u32).map(|k| (k * 7 % 256) as u8).collect();
    let data = program("data.bin", "");
    std::fs::write(&data, &bytes).expect("write data");
    let input = format!("t=@{}", data.to_str().expect("utf-8 temp path"));
    let sum = bytes.iter().map(|&b| u64::from(b)).sum::<u64>();
    let want = format!("{sum}\n");
    let page = DIR.with(|dir| dir.path().join("sum_bytes.html"));
    let page = page.to_str().expect("utf-8 temp path");
    let runs: Vec<Vec<&str>> = vec![
        vec!["run", path, &input],
        vec!["run", path, &input, "--mode", "interp"],
        vec!["run", path, &input, "--mode", "trace", "--threshold", "1"],
        vec!["run", path, &input, "--threshold", "1"],
        // `trace` starts at the loop, with what `start` would have set.
        vec![
            "trace", path, "--from", "head", &input, "s=0", "i=0", "n=3000",
        ],
        vec!["pe", path, &input, "--run"],
        vec!["pe", path, "--compile", "--run", &input],
    ];
    for args in &runs {
        assert_eq!(stdout_of(args), want, "{args:?}");
    }
    let out = flowjit(&["bench", path, &input, "--runs", "1"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout_of(&["report", path, &input, "-o", page]), want);
    assert!(std::fs::metadata(page).is_ok(), "the page is written");
    let missing = DIR.with(|dir| dir.path().join("no_such_file"));
    let missing = missing.to_str().expect("utf-8 temp path");
    for command in [&["run", path][..], &["pe", path], &["bench", path]] {
        let mut args = command.to_vec();
        let bad = format!("t=@{missing}");
        args.push(&bad);
        let out = flowjit(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("error: input `t`: cannot read {missing}: ")),
            "{args:?}: {err}"
        );
    }
}

/// A loop that drops arrays in cycles (`tests/programs/cycles.fg`) leaves behind no more of
/// them at 200,000 iterations than at 20,000, in every executor: the cycle collector
/// reclaims them, and `--stats` says how many.
#[test]
fn arrays_in_cycles_are_reclaimed_in_every_executor() {
    for mode in ["trace", "jit"] {
        let marked_at = |n: u32| {
            let input = format!("n={n}");
            let args = [
                "run",
                "--mode",
                mode,
                "--stats",
                "tests/programs/cycles.fg",
                &input,
            ];
            let (out, err) = common::flowjit_ok(&args);
            assert!(out.ends_with('\n'), "{out}");
            let reclaimed = nth_number(&err, "cycle collector: ", ", ", 1);
            let marked = nth_number(&err, "cycle collector: ", ", ", 2);
            (reclaimed, marked)
        };
        let (small_reclaimed, small) = marked_at(20_000);
        let (large_reclaimed, large) = marked_at(200_000);
        assert!(
            large_reclaimed > 9 * small_reclaimed,
            "{mode}: {small_reclaimed} {large_reclaimed}"
        );
        // Each iteration marks three arrays; the collector runs every 65,536 elements' worth.
        assert!(
            small < 20_000 && large < 20_000,
            "{mode}: {small} and {large} marked"
        );
    }
}

/// A function trace whose read finds another type than when it was recorded (`sum` of
/// benches/recursion/tree.fg recorded at a leaf, whose `t[0]` is 0, reading an inner node's
/// array there, or the other way round) gets a bridge from that read, in its function: the
/// read branches to it where it would exit. Every call then runs in machine code, and the
/// read stops exiting: recorded at a leaf, it exited 1,001 times and left `sum` to the
/// interpreter before.
#[test]
fn a_read_finding_another_type_in_a_function_trace_gets_a_bridge() {
    for d in ["12", "15"] {
        let (out, stats) = common::flowjit_ok(&[
            "run",
            "benches/recursion/tree.fg",
            &format!("d={d}"),
            "k=2",
            "--stats",
            "--compile-on-driver",
        ]);
        let (want, _) = common::flowjit_ok(&[
            "run",
            "benches/recursion/tree.fg",
            &format!("d={d}"),
            "k=2",
            "--mode",
            "interp",
        ]);
        assert_eq!(out, want);
        let sum = (stats.lines())
            .find(|l| l.contains("function at sum, "))
            .unwrap_or_else(|| panic!("{stats}"));
        assert!(!sum.contains(" 0 bridge(s)"), "{stats}");
        assert!(!stats.contains("left to the interpreter"), "{stats}");
        let read = (stats.lines())
            .find(|l| l.contains("getitem v0, 0"))
            .unwrap_or_else(|| panic!("{stats}"));
        let exits: usize = read.rsplit(' ').next().unwrap().parse().unwrap();
        // Those before the bridge is compiled: as many at any depth.
        assert!(exits < 300, "{stats}");
    }
}

/// A guard inside a call the loop's trace inlined, which starts failing halfway through the
/// run, gets a bridge that starts in the call's frame (and one inside the call that one
/// inlines): past the bridge threshold, the loop no longer exits, however long it runs. It
/// exited at every iteration past the change before, and ran slower than the interpreter.
#[test]
fn a_guard_inside_an_inlined_call_gets_a_bridge() {
    let file = "tests/programs/inlined_bridges.fg";
    let exits = |n: &str| {
        let (out, err) = common::flowjit_ok(&["run", file, "which=flip", n, "--stats"]);
        let (want, _) = common::flowjit_ok(&["run", file, "which=flip", n, "--mode", "interp"]);
        assert_eq!(out, want);
        assert!(err.contains(" 2 bridge(s), machine code"), "{err}");
        number_after(&err, "exits: ")
    };
    let (short, long) = (exits("n=20000"), exits("n=40000"));
    assert_eq!(short, long, "exits grow with the run");
    assert!(long < 100, "{long} exits");
}

/// A recursion's calls from machine code enter the function trace's machine code
/// (`backend::nested`): past the first few, every call of `fib` the trace does not inline
/// does, its base case in a bridge recorded from the guard's exits inside the calls, and
/// the answer is the interpreter's.
#[test]
fn recursive_calls_enter_the_function_traces_machine_code() {
    let (out, stats) = common::flowjit_ok(&[
        "run",
        "tests/programs/function_traces.fg",
        "which=fib",
        "n=22",
        "--stats",
        // When the code arrives from the compiler thread decides how many calls the
        // interpreter makes before; on the driver's thread, as many every time.
        "--compile-on-driver",
    ]);
    assert_eq!(out, "17711\n");
    assert!(stats.contains("function at fib"), "{stats}");
    assert!(!stats.contains(" 0 bridge(s), machine code"), "{stats}");
    let made = nth_number(&stats, "calls not inlined", "made ", 1);
    let entered = nth_number(&stats, "calls not inlined", "times, ", 1);
    let direct = nth_number(&stats, "calls not inlined", "machine code (", 1);
    // fib(22) makes 57,313 calls: the trace inlines one of fib's frames in another
    // (`trace::RECURSION_UNROLL`), so that about half of them are calls it makes; those
    // the interpreter makes before the trace is compiled and those nested in a call it
    // finishes are the rest. The machine code calls itself directly, not through a helper
    // (`backend::nested::FnCell`).
    assert!(made > 25_000 && entered > 25_000, "{stats}");
    assert!(direct > entered * 9 / 10, "{stats}");
}

/// An interpreter whose guest calls are calls of its own dispatch function gets a function
/// trace per guest function, keyed by the greens its calls start at (`Program::portal`),
/// and guest calls from that trace's machine code enter it directly: guest fib's calls run
/// in machine code, and the answer is the interpreter's.
#[test]
fn guest_calls_of_an_interpreter_enter_the_guest_functions_trace() {
    let (out, stats) = common::flowjit_ok(&[
        "run",
        "tests/programs/guest_calls.fg",
        "which=fib",
        "n=22",
        "--stats",
        "--compile-on-driver",
    ]);
    // Three runs of guest fib(22).
    assert_eq!(out, "53133\n");
    assert!(
        stats.contains("function at exec with greens ([arg,push,2,lt,jump_i..., 0)"),
        "{stats}"
    );
    let made = nth_number(&stats, "calls not inlined", "made ", 1);
    let direct = nth_number(&stats, "calls not inlined", "machine code (", 1);
    // Each makes 57,313 guest calls; the interpreter makes those before the trace is
    // compiled.
    assert!(made > 160_000 && direct > made * 9 / 10, "{stats}");
}

#[test]
fn calls_machine_code_makes_record_the_function_trace_they_make_hot() {
    // The loop's trace is compiled (on the driver's thread) before its calls of `eval` are
    // hot: they are counted and recorded from machine code, and enter the trace after.
    let (out, stats) = common::flowjit_ok(&[
        "run",
        "tests/programs/loop_calls.fg",
        "which=eval",
        "n=3000",
        "--stats",
        "--compile-on-driver",
    ]);
    assert_eq!(out, "48701173520238400\n");
    assert!(stats.contains("trace 0: loop at loop"), "{stats}");
    assert!(stats.contains("trace 1: function at eval"), "{stats}");
    // 17 calls of `eval` an iteration, a third of them or more made by the trace (the
    // others inlined in their caller's frame, `trace::RECURSION_UNROLL`).
    let made = nth_number(&stats, "calls not inlined", "made ", 1);
    let direct = nth_number(&stats, "calls not inlined", "machine code (", 1);
    assert!(made > 15_000 && direct > made * 9 / 10, "{stats}");
}

/// A function trace's calls of itself call its own code, not the code its function's cell
/// holds (`Lower::calls_itself`): in `fib`'s function every recursive call is a `call` of
/// the function itself (a relocation to its start), none an indirect call through a cell.
#[test]
fn a_function_trace_calls_itself_directly() {
    let (out, err) = common::flowjit_ok(&[
        "run",
        "benches/recursion/fib.fg",
        "n=20",
        "--compile-on-driver",
        // The first call's trace: fib(20)'s, with its calls, in the root's listing (a
        // bridge's shows its own blocks, not the function's declarations).
        "--threshold",
        "0",
        "--dump",
        "ir",
    ]);
    assert_eq!(out, "6765\n");
    // The signature of trees' functions, `tail`, is the one a call through a cell uses.
    assert!(err.contains("fn0 = colocated u4:0 sig0"), "{err}");
    assert!(err.matches("= call fn0(").count() >= 2, "{err}");
    let tail_sigs: Vec<&str> = (err.lines())
        .filter(|l| l.trim_start().starts_with("sig") && l.ends_with(" tail"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let through_cell = (err.lines())
        .filter(|l| l.contains("= call_indirect "))
        .filter(|l| {
            tail_sigs
                .iter()
                .any(|s| l.contains(&format!("call_indirect {s},")))
        })
        .count();
    assert_eq!(through_cell, 0, "{err}");
}

#[test]
fn a_recursive_function_running_a_loop_makes_its_calls_from_its_loops_code() {
    // The partition loop's bridges make the two recursive calls and end at the
    // function's `return`; nothing is abandoned.
    let (out, stats) = common::flowjit_ok(&[
        "run",
        "tests/programs/loop_recursion.fg",
        "which=sort",
        "n=20000",
        "--stats",
        "--compile-on-driver",
    ]);
    assert_eq!(out, "199990000\n");
    assert!(stats.contains("trace aborts: 0"), "{stats}");
    assert!(stats.contains("loop at part_loop"), "{stats}");
    // Two calls of `qsort` for each partition (about 13,000), from the loop's bridges,
    // most of them directly into the function's entry trace, whose end goes on in the
    // loop's code (linked): a call returns from the loop's bridges, in machine code, not
    // through an exit (26,514 exits before the link, 1,027 with it).
    let made = nth_number(&stats, "calls not inlined", "made ", 1);
    assert!(made > 20_000, "{stats}");
    let direct = nth_number(&stats, "calls not inlined", "(", 1);
    assert!(direct > 20_000, "{stats}");
    assert!(number_after(&stats, "exits linked to another tree's machine code: ") >= 1);
    assert!(number_after(&stats, "exits: ") < 5_000, "{stats}");
}
