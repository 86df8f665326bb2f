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
//! error with status 1. `.bc` files run with `flowjit bytecode`, others with `flowjit run`.
//! Adding a test means adding a line.

mod common;

use std::process::Command;

use common::cases;

/// Every mode a program must give the same answer under. The interpreter is the oracle; each
/// other executor is held to its output.
const MODES: &[&[&str]] = &[
    &["--mode", "interp"],
    &["--mode", "jit"],
    &["--mode", "jit", "--threshold", "0"],
    &["--mode", "jit", "--threshold", "1"],
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
        "cse,guards,bounds,peel,dce",
    ],
    &[
        "--mode",
        "trace",
        "--threshold",
        "0",
        "--passes",
        "fold,guards,bounds,peel,dce",
    ],
    &[
        "--mode",
        "trace",
        "--threshold",
        "0",
        "--passes",
        "fold,cse,bounds,peel,dce",
    ],
    &[
        "--mode",
        "trace",
        "--threshold",
        "0",
        "--passes",
        "fold,cse,guards,peel,dce",
    ],
    &[
        "--mode",
        "trace",
        "--threshold",
        "0",
        "--passes",
        "fold,cse,guards,bounds,dce",
    ],
    &[
        "--mode",
        "trace",
        "--threshold",
        "0",
        "--passes",
        "fold,cse,guards,bounds,peel",
    ],
];

#[test]
fn every_program_prints_what_its_test_lines_say_in_every_mode() {
    let cases = cases();
    assert!(cases.len() >= 40, "found only {} test lines", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let is_bc = case.file.extension().is_some_and(|e| e == "bc");
        for mode in MODES {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_flowjit"));
            cmd.arg(if is_bc { "bytecode" } else { "run" })
                .arg(&case.file)
                .args(&case.args)
                .args(*mode);
            let out = cmd.output().expect("flowjit runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let (want_out, want_err, want_status) = if case.expected.starts_with("error:") {
                (String::new(), format!("{}\n", case.expected), 1)
            } else {
                (format!("{}\n", case.expected), String::new(), 0)
            };
            if stdout != want_out || stderr != want_err || out.status.code() != Some(want_status) {
                failures.push(format!(
                    "{} {} {}\n  want: status {want_status}, {:?}\n  got:  status {:?}, stdout {:?}, stderr {:?}",
                    case.file.display(),
                    case.args.join(" "),
                    mode.join(" "),
                    case.expected,
                    out.status.code(),
                    stdout,
                    stderr
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
