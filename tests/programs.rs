//! Runs every `test:` line of the example and test programs through the `flowjit` binary,
//! under every execution mode, and checks standard output, standard error and exit status.
//!
//! A program carries its own cases in comments (`#` in `.fg` and `.bc`, `%` in `.pl`):
//!
//! ```text
//! # test: x=10 y=10 => 10000000000
//! # test: x=foo y=2 => error: type error: mul expects integers, got the atom foo (in block power_rec)
//! ```
//!
//! The words before `=>` are the command's arguments; after it, the one line the run
//! prints: on standard output with status 0, or, when it starts with `error:`, on standard
//! error with status 1. A run that prints more lines has nothing after `=>` and its lines
//! below, indented (at least three spaces after the comment sign); the last may be an
//! error, the others are standard output. `< TEXT` after the arguments is the run's
//! standard input (`\n`, `\t`, `\\` and `\xHH` escapes):
//!
//! ```text
//! # test: n=3 < ab\n =>
//! #    97
//! #    98
//! #    error: putchar: -1 is not a byte (in block echo)
//! ```
//!
//! `.bc` files run with `flowjit bytecode`, others with `flowjit run`. Adding a test means
//! adding a line.

mod common;

use common::cases;

/// Every mode a program must give the same answer under. The interpreter is the oracle; each
/// other executor is held to its output.
const MODES: &[&[&str]] = &[
    &["--mode", "interp"],
    &["--mode", "jit"],
    // Loops move from the quick backend's code to Cranelift's after two iterations.
    &[
        "--mode",
        "jit",
        "--threshold",
        "0",
        "--tier-iterations",
        "2",
    ],
    &["--mode", "jit", "--threshold", "1"],
    // The same with Cranelift on the driver's thread: a test program ends in a few
    // milliseconds, often before the compiler thread's code (a tree compiled again holding
    // a value boxed, say) would have run.
    &["--mode", "jit", "--threshold", "1", "--compile-on-driver"],
    // Bridges compiled on their own move into their tree's function after three entries.
    &[
        "--mode",
        "jit",
        "--threshold",
        "0",
        "--bridge-threshold",
        "0",
        "--bridge-entries",
        "3",
    ],
    // Bridges from every guard that fails at all, or twice.
    &[
        "--mode",
        "jit",
        "--threshold",
        "0",
        "--bridge-threshold",
        "0",
    ],
    &[
        "--mode",
        "jit",
        "--threshold",
        "1",
        "--bridge-threshold",
        "1",
    ],
    &[
        "--mode",
        "trace",
        "--threshold",
        "0",
        "--bridge-threshold",
        "0",
    ],
    &[],
    &["--mode", "trace"],
    &["--mode", "trace", "--threshold", "0"],
    &["--mode", "trace", "--threshold", "1"],
    &["--mode", "trace", "--threshold", "0", "--no-opt"],
    // Each optimizer pass switched off in turn.
    &[
        "--mode",
        "trace",
        "--threshold",
        "0",
        "--passes",
        "cse,guards,bounds,peel,virtuals,sink,dce",
    ],
    &[
        "--mode",
        "trace",
        "--threshold",
        "0",
        "--passes",
        "fold,heap,guards,bounds,peel,virtuals,sink,dce",
    ],
    &[
        "--mode",
        "trace",
        "--threshold",
        "0",
        "--passes",
        "fold,cse,heap,bounds,peel,virtuals,sink,dce",
    ],
    &[
        "--mode",
        "trace",
        "--threshold",
        "0",
        "--passes",
        "fold,cse,heap,guards,peel,virtuals,sink,dce",
    ],
    &[
        "--mode",
        "trace",
        "--threshold",
        "0",
        "--passes",
        "fold,cse,heap,guards,bounds,virtuals,sink,dce",
    ],
    &[
        "--mode",
        "trace",
        "--threshold",
        "0",
        "--passes",
        "fold,cse,heap,guards,bounds,peel,virtuals,sink",
    ],
    &[
        "--mode",
        "trace",
        "--threshold",
        "0",
        "--passes",
        "fold,cse,heap,guards,bounds,peel,sink,dce",
    ],
    &[
        "--mode",
        "trace",
        "--threshold",
        "0",
        "--passes",
        "fold,cse,heap,guards,bounds,peel,virtuals,dce",
    ],
    // Machine code with each pass but `peel` (without which nothing is compiled) switched
    // off in turn, bridges from every guard that fails twice.
    &[
        "--threshold",
        "1",
        "--bridge-threshold",
        "1",
        "--passes",
        "cse,guards,bounds,peel,virtuals,sink,dce",
    ],
    &[
        "--threshold",
        "1",
        "--bridge-threshold",
        "1",
        "--passes",
        "fold,heap,guards,bounds,peel,virtuals,sink,dce",
    ],
    &[
        "--threshold",
        "1",
        "--bridge-threshold",
        "1",
        "--passes",
        "fold,cse,heap,bounds,peel,virtuals,sink,dce",
    ],
    &[
        "--threshold",
        "1",
        "--bridge-threshold",
        "1",
        "--passes",
        "fold,cse,heap,guards,peel,virtuals,sink,dce",
    ],
    &[
        "--threshold",
        "1",
        "--bridge-threshold",
        "1",
        "--passes",
        "fold,cse,heap,guards,bounds,peel,virtuals,sink",
    ],
    &[
        "--threshold",
        "1",
        "--bridge-threshold",
        "1",
        "--passes",
        "fold,cse,heap,guards,bounds,peel,sink,dce",
    ],
    &[
        "--threshold",
        "1",
        "--bridge-threshold",
        "1",
        "--passes",
        "fold,cse,heap,guards,bounds,peel,virtuals,dce",
    ],
];

/// The modes run under an emulator (the aarch64 run, `FLOWJIT_TEST_RUNNER`), where everything
/// is about ten times slower: only those that run machine code, at each threshold and with
/// bridges. The interpreter, the trace interpreter and the optimizer's passes switched off in
/// turn run Rust code that is the same on every ISA, and the native run checks them.
const EMULATED_MODES: &[&[&str]] = &[
    &["--mode", "jit"],
    &["--mode", "jit", "--threshold", "0"],
    &[
        "--mode",
        "jit",
        "--threshold",
        "0",
        "--bridge-threshold",
        "0",
    ],
    &[
        "--mode",
        "jit",
        "--threshold",
        "1",
        "--bridge-threshold",
        "1",
    ],
];

#[test]
fn every_program_prints_what_its_test_lines_say_in_every_mode() {
    let cases = cases();
    let emulated = std::env::var_os("FLOWJIT_TEST_RUNNER").is_some_and(|r| !r.is_empty());
    let modes = if emulated { EMULATED_MODES } else { MODES };
    assert!(cases.len() >= 40, "found only {} test lines", cases.len());
    let runs: Vec<_> = cases
        .iter()
        .flat_map(|case| modes.iter().map(move |mode| (case, *mode)))
        .collect();
    let failures: Vec<String> = common::in_parallel(&runs, |(case, mode)| {
        let is_bc = case.file.extension().is_some_and(|e| e == "bc");
        let mut cmd = common::flowjit_command();
        cmd.arg(if is_bc { "bytecode" } else { "run" })
            .arg(&case.file)
            .args(&case.args)
            .args(*mode);
        case.check(cmd).map(|why| {
            format!(
                "{} {} {}\n{why}",
                case.file.display(),
                case.args.join(" "),
                mode.join(" "),
            )
        })
    })
    .into_iter()
    .flatten()
    .collect();
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every program gives the interpreter's result when partially evaluated with no static
/// variables and its residual program run (by the interpreter, by the JIT, and compiled
/// whole to machine code with `--compile`). Bytecode
/// cases run on the bundled interpreter, and `--max-steps` counts the residual program's
/// operations, so those cases are left out.
#[test]
fn every_program_partially_evaluated_with_nothing_static_prints_the_same() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in cases() {
        let is_bc = case.file.extension().is_some_and(|e| e == "bc");
        if is_bc || case.args.iter().any(|a| a == "--max-steps") {
            continue;
        }
        let mut entry = Vec::new();
        let mut inputs = Vec::new();
        let mut args = case.args.iter();
        while let Some(a) = args.next() {
            if a == "--entry" {
                entry.push(a.clone());
                entry.extend(args.next().cloned());
            } else {
                inputs.push(a.clone());
            }
        }
        for mode in [
            &["--mode", "interp"][..],
            &["--mode", "jit"],
            &["--compile"],
        ] {
            let mut cmd = common::flowjit_command();
            cmd.arg("pe")
                .arg(&case.file)
                .args(&entry)
                .args(mode)
                .arg("--run")
                .args(&inputs);
            if let Some(why) = case.check(cmd) {
                failures.push(format!(
                    "pe {} {} {}\n{why}",
                    case.file.display(),
                    case.args.join(" "),
                    mode.join(" "),
                ));
            }
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} runs");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every example in the readable syntax, printed in the Prolog-term syntax by `flowjit fmt`,
/// prints what its test lines say, interpreted and in machine code.
#[test]
fn every_example_prints_the_same_in_the_prolog_syntax() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in cases() {
        let from_examples = case.file.parent().is_some_and(|d| d.ends_with("examples"));
        if !from_examples || case.file.extension().is_none_or(|e| e != "fg") {
            continue;
        }
        let out = common::flowjit_command()
            .arg("fmt")
            .arg(&case.file)
            .args(["--format", "pl"])
            .output()
            .expect("flowjit runs");
        assert_eq!(out.status.code(), Some(0), "fmt {}", case.file.display());
        let stem = case.file.file_stem().expect("a file name");
        let pl = dir.path().join(stem).with_extension("pl");
        std::fs::write(&pl, &out.stdout).expect("write");
        for mode in [
            &["--mode", "interp"][..],
            &["--mode", "jit", "--threshold", "1"],
        ] {
            let mut cmd = common::flowjit_command();
            cmd.arg("run").arg(&pl).args(&case.args).args(mode);
            if let Some(why) = case.check(cmd) {
                failures.push(format!("{} {}\n{why}", pl.display(), case.args.join(" ")));
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} runs");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
