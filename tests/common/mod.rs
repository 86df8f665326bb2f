//! What the integration tests share: the `test:` lines of the example and test programs,
//! and loading a case's program and inputs through the library.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use flowjit::lang::{self, bytecode, BlockId, Program, Slot, Syntax};
use flowjit_runtime::Value;

/// The `.trace` files of directory `dir` (a file-test suite), sorted.
pub fn trace_files(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "trace"))
        .collect();
    paths.sort();
    paths
}

/// One `test: ARGS => OUTPUT` line (see `tests/programs.rs`).
pub struct Case {
    /// The program file.
    pub file: PathBuf,
    /// The command's arguments after the file.
    pub args: Vec<String>,
    /// The run's standard input.
    pub stdin: Vec<u8>,
    /// The lines the run prints, the last one perhaps an error.
    pub expected: Vec<String>,
}

impl Case {
    /// The standard output, standard error and exit status the run must give: the lines on
    /// standard output, but a last line starting with `error:`, which is on standard error
    /// with status 1.
    pub fn want(&self) -> (String, String, i32) {
        let mut out: String = self.expected.iter().map(|l| format!("{l}\n")).collect();
        match self.expected.last() {
            Some(last) if last.starts_with("error:") => {
                out.truncate(out.len() - last.len() - 1);
                (out, format!("{last}\n"), 1)
            }
            _ => (out, String::new(), 0),
        }
    }

    /// Whether the run fails with a runtime error.
    pub fn fails(&self) -> bool {
        self.want().2 == 1
    }

    /// Runs `cmd` with the case's standard input; `None` if it gave what the case wants,
    /// otherwise what it gave.
    pub fn check(&self, mut cmd: Command) -> Option<String> {
        use std::io::Write as _;
        let mut child = cmd
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("flowjit starts");
        let mut stdin = child.stdin.take().expect("piped");
        // A program that stops reading closes the pipe: not the test's failure.
        let _ = stdin.write_all(&self.stdin);
        drop(stdin);
        let out = child.wait_with_output().expect("flowjit runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let (want_out, want_err, want_status) = self.want();
        if stdout == want_out && stderr == want_err && out.status.code() == Some(want_status) {
            return None;
        }
        Some(format!(
            "  want: status {want_status}, stdout {want_out:?}, stderr {want_err:?}\n  got:  status {:?}, stdout {stdout:?}, stderr {stderr:?}",
            out.status.code(),
        ))
    }
}

/// `text` with the escapes `\n`, `\t`, `\\` and `\xHH` replaced by what they stand for.
fn unescape(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b'\\', Some(b'n')) => out.push(b'\n'),
            (b'\\', Some(b't')) => out.push(b'\t'),
            (b'\\', Some(b'\\')) => out.push(b'\\'),
            (b'\\', Some(b'x')) => {
                let hex = &text[i + 2..i + 4];
                out.push(u8::from_str_radix(hex, 16).expect("two hex digits after \\x"));
                i += 2;
            }
            (b, _) => {
                out.push(b);
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    out
}

/// Every case of `examples/`, `tests/programs/` and the benchmarks written in the flowgraph
/// language (`benches/cliffs/`, `benches/recursion/`), in file order.
pub fn cases() -> Vec<Case> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "examples",
        "tests/programs",
        "benches/cliffs",
        "benches/recursion",
    ] {
        for entry in std::fs::read_dir(root.join(dir)).expect("test directories exist") {
            let path = entry.expect("readable directory").path();
            if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("fg" | "pl" | "bc")
            ) {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut cases = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable program");
        let comments: Vec<&str> = text
            .lines()
            .map(|l| l.strip_prefix(['#', '%']).unwrap_or("\0"))
            .collect();
        for (k, line) in comments.iter().enumerate() {
            let Some(spec) = line.trim().strip_prefix("test:") else {
                continue;
            };
            let (args, expected) = spec
                .split_once("=>")
                .unwrap_or_else(|| panic!("{}: a test line needs `=>`", file.display()));
            let (args, stdin) = match args.split_once(" < ") {
                // The text between `< ` and ` =>`, spaces and all.
                Some((args, input)) => (args, unescape(input.strip_suffix(' ').unwrap_or(input))),
                None => (args, Vec::new()),
            };
            let expected: Vec<String> = if expected.trim().is_empty() {
                // The lines follow, indented.
                comments[k + 1..]
                    .iter()
                    .take_while(|l| l.starts_with("   "))
                    .map(|l| l.trim().to_string())
                    .collect()
            } else {
                vec![expected.trim().to_string()]
            };
            assert!(
                !expected.is_empty(),
                "{}: a test line expects nothing",
                file.display()
            );
            cases.push(Case {
                file: file.clone(),
                args: args.split_whitespace().map(str::to_string).collect(),
                stdin,
                expected,
            });
        }
    }
    cases
}

/// A case's program, entry block and inputs, loaded as the CLI would load them.
pub struct Loaded {
    /// The checked program.
    pub program: Program,
    /// Where the run starts.
    pub entry: BlockId,
    /// The inputs.
    pub inputs: Vec<(Slot, Value)>,
    /// `--max-steps`, if the case gives it.
    pub max_steps: Option<u64>,
}

/// Loads `case` through the library (`.bc` files run on the bundled interpreter).
pub fn load(case: &Case) -> Loaded {
    let text = std::fs::read_to_string(&case.file).expect("readable program");
    let mut entry = None;
    let mut max_steps = None;
    let mut named: Vec<(String, Value)> = Vec::new();
    let mut args = case.args.iter();
    while let Some(a) = args.next() {
        if a == "--entry" {
            entry = args.next().cloned();
        } else if a == "--max-steps" {
            max_steps = args.next().map(|n| n.parse().expect("a number of steps"));
        } else {
            let (n, v) = a.split_once('=').expect("NAME=VALUE");
            named.push((n.to_string(), lang::parse_value(v).expect("valid value")));
        }
    }
    let is_bc = case.file.extension().is_some_and(|e| e == "bc");
    let (program, entry) = if is_bc {
        let cells = bytecode::assemble(&text).expect("valid bytecode");
        let mut all = vec![
            ("bytecode".to_string(), Value::list(cells)),
            ("pc".to_string(), Value::Int(0)),
        ];
        for reg in bytecode::REGISTERS {
            if !named.iter().any(|(n, _)| n == reg) {
                all.push((reg.to_string(), Value::Int(0)));
            }
        }
        named.extend(all);
        let (_, p) = lang::load(bytecode::REGMACHINE_SOURCE, Syntax::Fg).expect("bundled");
        (p, Some(bytecode::REGMACHINE_ENTRY.to_string()))
    } else {
        let syntax = Syntax::from_path(&case.file.display().to_string());
        let (_, p) = lang::load(&text, syntax).expect("valid program");
        (p, entry)
    };
    let entry = entry.map_or(BlockId(0), |e| program.block_id(&e).expect("entry exists"));
    let inputs = named
        .into_iter()
        .map(|(n, v)| (program.slot(&n).expect("input is a variable"), v))
        .collect();
    Loaded {
        program,
        entry,
        inputs,
        max_steps,
    }
}

/// A command that starts the `flowjit` binary under test, in the project's root.
///
/// When `FLOWJIT_TEST_RUNNER` is set, the binary is started through it, as cargo starts test
/// binaries through a target's runner: `scripts/aarch64-test.sh` sets it to
/// `qemu-aarch64 -L /usr/aarch64-linux-gnu`, so the suites that start the binary run on
/// aarch64 under emulation too.
pub fn flowjit_command() -> Command {
    let bin = env!("CARGO_BIN_EXE_flowjit");
    let runner = std::env::var("FLOWJIT_TEST_RUNNER").unwrap_or_default();
    let mut words = runner.split_whitespace();
    let mut cmd = match words.next() {
        Some(program) => {
            let mut cmd = Command::new(program);
            cmd.args(words).arg(bin);
            cmd
        }
        None => Command::new(bin),
    };
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

/// Runs the binary with `args` and returns what it did.
///
/// A run that reports on itself (`--stats`, `--dump`, `--log`) compiles on the driver's
/// thread (`--compile-on-driver`): the tests read its decisions (traces, bridges, exits,
/// code), which with the compiler thread depend on how fast it is.
/// `cli::statistics_describe_the_default_run` checks a report made the default way.
pub fn flowjit(args: &[&str]) -> Output {
    flowjit_command()
        .args(reproducible(args))
        .output()
        .expect("flowjit runs")
}

/// `args`, with `--compile-on-driver` when they run a program that reports on itself.
pub fn reproducible<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let runs = matches!(args.first(), Some(&("run" | "bytecode" | "bf" | "trace")));
    let reports = args
        .iter()
        .any(|a| matches!(*a, "--stats" | "--dump" | "--log"));
    let mut all = args.to_vec();
    if runs && reports && !args.contains(&"--compile-on-driver") {
        all.push("--compile-on-driver");
    }
    all
}

/// Runs the binary with `args`, checks that it succeeded, and returns its standard output
/// and standard error.
pub fn flowjit_ok(args: &[&str]) -> (String, String) {
    let out = flowjit(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "flowjit {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `f` of each item, in the items' order, computed by as many threads as the machine has
/// cores: the suites that start the binary once per program and mode spend their time
/// waiting for one process each (under qemu, ten times longer), and the cores are idle
/// otherwise.
pub fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(items.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                results.lock().expect("no worker panicked")[i] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .expect("no worker panicked")
        .into_iter()
        .map(|r| r.expect("every item computed"))
        .collect()
}
