//! Brainfuck programs on the bundled interpreter (`flowjit bf`, SPEC.md §6): every program
//! under `tests/bf/` prints, byte for byte, what its `.out` file holds, in every executor,
//! with `.in` as its standard input if there is one; with a `.err` file the run ends with
//! that runtime error (exit status 1) after its output.

mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The executors: the interpreter, the trace interpreter and machine code, at thresholds
/// that trace at once and make bridges at once.
const MODES: &[&[&str]] = &[
    &["--mode", "interp"],
    &["--mode", "trace"],
    &["--mode", "trace", "--threshold", "0"],
    &[],
    &["--threshold", "0"],
    &["--threshold", "1", "--bridge-threshold", "1"],
    &["--threshold", "0", "--bridge-threshold", "0"],
];

fn programs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bf");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/bf")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "b") && p.with_extension("out").exists())
        .collect();
    files.sort();
    files
}

/// Runs `flowjit bf FILE MODE...` with `stdin`: its standard output, standard error and
/// exit status.
fn bf(file: &Path, mode: &[&str], stdin: &[u8]) -> (Vec<u8>, String, Option<i32>) {
    let file = file.to_str().expect("a UTF-8 path");
    let mut child = common::flowjit_command()
        .args(common::reproducible(&[&["bf", file][..], mode].concat()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flowjit starts");
    let mut input = child.stdin.take().expect("piped");
    // A program that stops reading closes the pipe: not the test's failure.
    let _ = input.write_all(stdin);
    drop(input);
    let out = child.wait_with_output().expect("flowjit runs");
    (
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

#[test]
fn every_brainfuck_program_prints_what_its_out_file_holds_in_every_executor() {
    let files = programs();
    assert!(files.len() >= 5, "the Brainfuck programs: {files:?}");
    let mut failures = Vec::new();
    for file in &files {
        let want_out = std::fs::read(file.with_extension("out")).expect("the .out file");
        let stdin = std::fs::read(file.with_extension("in")).unwrap_or_default();
        let (want_err, want_status) = match std::fs::read_to_string(file.with_extension("err")) {
            Ok(err) => (err, Some(1)),
            Err(_) => (String::new(), Some(0)),
        };
        for mode in MODES {
            let got = bf(file, mode, &stdin);
            if got != (want_out.clone(), want_err.clone(), want_status) {
                failures.push(format!(
                    "{} {}: got {:?}, {:?}, {:?}",
                    file.display(),
                    mode.join(" "),
                    String::from_utf8_lossy(&got.0),
                    got.1,
                    got.2
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn unbalanced_brackets_are_rejected_with_their_position_before_the_run() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bf/unbalanced.b");
    for mode in MODES {
        let (out, err, status) = bf(&file, mode, b"");
        assert_eq!((out.as_slice(), status), (&b""[..], Some(2)), "{err}");
        assert!(
            err.contains("unbalanced.b:2:2: error: this `[` has no `]` after it"),
            "{err}"
        );
    }
    let closing = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bf/hello.b");
    let text = std::fs::read_to_string(closing).expect("hello.b") + "]";
    let dir = tempfile::tempdir().expect("a temporary directory");
    let extra = dir.path().join("extra.b");
    std::fs::write(&extra, text).expect("write");
    let (_, err, status) = bf(&extra, &[], b"");
    assert_eq!(status, Some(2), "{err}");
    assert!(
        err.contains(":4:1: error: this `]` has no `[` before it"),
        "{err}"
    );
}

#[test]
fn a_file_that_is_not_there_is_bad_usage() {
    let (_, err, status) = bf(Path::new("no/such/file.b"), &[], b"");
    assert_eq!(status, Some(2));
    assert!(err.contains("cannot read no/such/file.b"), "{err}");
}

/// The first Futamura projection: the interpreter specialized to each program (`program`
/// static, its `pc` green and so kept static), then compiled whole to machine code, prints
/// what the interpreter prints, byte for byte, and fails with the same error.
#[test]
fn every_brainfuck_program_specialized_and_compiled_whole_prints_the_same() {
    for file in programs() {
        let text = std::fs::read_to_string(&file).expect("the program");
        let commands: Vec<String> = text
            .chars()
            .filter(|c| "<>+-.,[]".contains(*c))
            .map(|c| format!("'{c}'"))
            .collect();
        let mut child = common::flowjit_command()
            .args(["pe", "examples/bf.fg", "--entry", "start"])
            .arg(format!("program=[{}]", commands.join(",")))
            .args(["--compile", "--stats", "--run"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("flowjit starts");
        let stdin = std::fs::read(file.with_extension("in")).unwrap_or_default();
        let mut input = child.stdin.take().expect("piped");
        let _ = input.write_all(&stdin);
        drop(input);
        let out = child.wait_with_output().expect("flowjit runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("# stats\nresidual program compiled: "),
            "{}: {err}",
            file.display()
        );
        let mut want = std::fs::read(file.with_extension("out")).expect("the .out file");
        match std::fs::read_to_string(file.with_extension("err")) {
            Ok(want_err) => {
                assert_eq!(out.status.code(), Some(1), "{}", file.display());
                assert!(err.ends_with(&want_err), "{}: {err}", file.display());
            }
            Err(_) => {
                assert_eq!(out.status.code(), Some(0), "{}: {err}", file.display());
                // What `print_and_stop` prints after the program's own output.
                want.extend_from_slice(b"0\n");
            }
        }
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&want),
            "{}",
            file.display()
        );
    }
}

/// Cranelift's verifier checks every function in the debug builds that run the tests; a
/// function it rejects is not run (its loop stays on the interpreter), so a wrong answer
/// would not show it: the statistics must name no such rejection. The lowering's
/// reuse of what a segment computed (`Lower::known`) once gave blocks values from blocks
/// that do not dominate them.
#[test]
fn cranelift_accepts_every_function_made_for_the_brainfuck_programs() {
    let mut failures = Vec::new();
    for file in programs() {
        let stdin = std::fs::read(file.with_extension("in")).unwrap_or_default();
        for mode in &MODES[3..] {
            let mode = [&["--stats"][..], mode].concat();
            let (_, err, _) = bf(&file, &mode, &stdin);
            if err.contains("Verifier") {
                failures.push(format!("{} {}:\n{err}", file.display(), mode.join(" ")));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
