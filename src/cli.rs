//! The `flowjit` command line: argument parsing and output only.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use flowjit_runtime::Value;

use crate::interp;
use crate::jit;
use crate::lang::{self, brainfuck, bytecode, diag, Diagnostic, Program, Slot, Source, Syntax};
use crate::peval::{
    self,
    run::{Execution, Runnable},
};
use crate::state::{Io, State};

/// A meta-tracing JIT for the flowgraph language of "Comparing Partial Evaluation to Tracing".
#[derive(Parser, Debug)]
#[command(
    name = "flowjit",
    version,
    about,
    max_term_width = 100,
    after_help = EXIT_STATUSES
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The exit statuses, as `flowjit --help` lists them.
const EXIT_STATUSES: &str = "Exit status:
  0  success
  1  a runtime error in the program
  2  bad usage, an unreadable or invalid program
  3  flowjit bench, flowjit difftest: an executor printed something other than the
     interpreter did";

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a program from --entry (default: the first block).
    Run {
        /// The program (.fg readable syntax, .pl Prolog terms).
        program: PathBuf,
        /// Inputs, NAME=VALUE with VALUE in Prolog-term form (x=10, op=jump_if_a, l=\[a,1\]),
        /// or NAME=@FILE: the file's bytes as a list of integers 0..255.
        inputs: Vec<String>,
        /// The label to start at.
        #[arg(long)]
        entry: Option<String>,
        /// Run options.
        #[command(flatten)]
        opts: RunOpts,
    },
    /// The articles' do_trace: trace at once from LABEL, close the loop at LABEL, run the
    /// trace, and let the interpreter finish when it exits.
    Trace {
        /// The program.
        program: PathBuf,
        /// Inputs, NAME=VALUE or NAME=@FILE.
        inputs: Vec<String>,
        /// The label to trace from.
        #[arg(long)]
        from: String,
        /// Run options.
        #[command(flatten)]
        opts: RunOpts,
    },
    /// Partially evaluate a program with NAME=VALUE inputs static: print the residual
    /// program, or run it with --run.
    Pe {
        /// The program.
        program: PathBuf,
        /// Static inputs, NAME=VALUE or NAME=@FILE.
        inputs: Vec<String>,
        /// The label to specialize (default: the first block).
        #[arg(long)]
        entry: Option<String>,
        /// Syntax of the residual program.
        #[arg(long, value_enum, default_value = "fg")]
        format: Syntax,
        /// The residual program before clean-up.
        #[arg(long)]
        raw: bool,
        /// Run the residual program with these dynamic inputs (NAME=VALUE ...) instead of
        /// printing it; --mode interp (the default here), trace or jit.
        #[arg(long, num_args = 0.., value_name = "NAME=VALUE")]
        run: Option<Vec<String>>,
        /// With --run: compile the whole residual program to one function of machine code
        /// (what it cannot compile, or an operation that leaves 64 bits, the interpreter runs).
        #[arg(long)]
        compile: bool,
        /// Run options.
        #[command(flatten)]
        opts: RunOpts,
    },
    /// Run a register-machine bytecode program (.bc) on the bundled interpreter, which is
    /// written in the flowgraph language. Registers a r0 r1 r2 start at 0 unless given.
    Bytecode {
        /// The bytecode program.
        file: PathBuf,
        /// Registers, REG=VALUE (a=16).
        inputs: Vec<String>,
        /// Run options.
        #[command(flatten)]
        opts: RunOpts,
    },
    /// Run a Brainfuck program (.b) on the bundled interpreter, which is written in the
    /// flowgraph language (examples/bf.fg); standard input is the program's input, and the
    /// output is what the program writes.
    Bf {
        /// The Brainfuck program.
        file: PathBuf,
        /// Run options.
        #[command(flatten)]
        opts: RunOpts,
    },
    /// Run a program under the JIT and write one self-contained HTML page of what it did:
    /// the source with its hot loops, each trace and bridge as recorded, optimized, as
    /// Cranelift IR and as machine code, side by side and linked, the time per phase and a
    /// timeline of the compile events. Accepts the run flags (--mode jit or trace).
    Report {
        /// The program (.fg, .pl; .bc: register-machine bytecode, .b: Brainfuck, each run on
        /// its bundled interpreter).
        program: PathBuf,
        /// Inputs, NAME=VALUE or NAME=@FILE (registers for a .bc file).
        inputs: Vec<String>,
        /// The label to start at.
        #[arg(long)]
        entry: Option<String>,
        /// The HTML file to write.
        #[arg(short = 'o', long = "output", value_name = "FILE.html")]
        output: PathBuf,
        /// Run options.
        #[command(flatten)]
        opts: RunOpts,
    },
    /// Differential testing at length: random programs under every executor, compared with
    /// the interpreter; a difference is shrunk and printed (exit status 3), and so is a
    /// program the executors take more than two minutes on (unshrunk).
    Difftest {
        /// The seed (the same seed generates the same programs).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// How many programs.
        #[arg(long, default_value_t = 1000)]
        count: u32,
    },
    /// Print a program in either syntax (checked first): converts between .fg and .pl.
    Fmt {
        /// The program.
        program: PathBuf,
        /// The syntax to print.
        #[arg(long, value_enum, default_value = "fg")]
        format: Syntax,
        /// The program's syntax, instead of the one its extension implies.
        #[arg(long, value_enum)]
        syntax: Option<Syntax>,
    },
    /// Interpreter, trace interpreter, JIT (and the partially evaluated program compiled
    /// whole) side by side: a table of timings and the speedups. A .bc file runs on the
    /// bundled interpreter, with `bytecode` and `pc` static for the partial evaluator.
    /// Every run must print what the interpreter prints; when one does not, no table is
    /// printed and the exit status is 3.
    Bench {
        /// The program (.fg, .pl, .bc, or .b: a Brainfuck program, run by the bundled
        /// interpreter with `program` static for the partial evaluator).
        program: PathBuf,
        /// Inputs, NAME=VALUE or NAME=@FILE (registers for a .bc file).
        inputs: Vec<String>,
        /// The label to start at.
        #[arg(long)]
        entry: Option<String>,
        /// Runs per executor.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Inputs the partial evaluator takes as static (comma-separated names); without
        /// it, and for a program that is not bytecode, partial evaluation is not run.
        #[arg(long = "static", value_delimiter = ',')]
        statics: Option<Vec<String>>,
        /// Print JSON for machines.
        #[arg(long)]
        json: bool,
        /// Draw the medians into this SVG file.
        #[arg(long)]
        plot: Option<PathBuf>,
    },
}

/// How a program is executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Hot loops become machine code.
    Jit,
    /// Hot loops are traced, optimized and run on a trace interpreter.
    Trace,
    /// The plain interpreter.
    Interp,
}

/// The flags shared by `run`, `trace`, `bytecode` and `bf`.
#[derive(Args, Debug, Clone)]
pub struct RunOpts {
    /// jit: hot loops become machine code (the default); trace: traces run on a trace
    /// interpreter; interp: the plain interpreter.
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// Hot-loop threshold: back edges before tracing [default: 50], or, in a program with
    /// the meta-tracing hints, can_enter_jit arrivals with the same greens [default: 10].
    /// With neither threshold given, --mode jit also leaves a counted loop that becomes
    /// hot too near its end for compiling to pay to the interpreter; a threshold given is
    /// obeyed as given.
    #[arg(long)]
    pub threshold: Option<u64>,
    /// Guard failures before a bridge is traced [default: 20], or, in a program with the
    /// meta-tracing hints, [default: 5].
    #[arg(long)]
    pub bridge_threshold: Option<u64>,
    /// Loop iterations in the quick backend's code (x86-64) before Cranelift compiles the
    /// loop's tree.
    #[arg(long, value_name = "N", default_value_t = jit::Policy::DEFAULT.tier_iterations, value_parser = clap::value_parser!(i64).range(1..))]
    pub tier_iterations: i64,
    /// Entries of a bridge compiled on its own before it moves into its tree's function.
    #[arg(long, value_name = "N", default_value_t = jit::Policy::DEFAULT.bridge_entries, value_parser = clap::value_parser!(i64).range(1..))]
    pub bridge_entries: i64,
    /// Optimizer passes, by name, comma-separated (fold, cse, heap, guards, bounds, peel, virtuals, sink, dce).
    #[arg(long, value_delimiter = ',')]
    pub passes: Option<Vec<String>>,
    /// Run no optimizer pass.
    #[arg(long)]
    pub no_opt: bool,
    /// Print to stderr: trace, opt, ir, asm (comma-separated). In `opt`, an operation that
    /// may exit ends in its snapshot, `@label:i #n [x=v1, ...] | a[i]=v {v3=[...]}`: the
    /// interpreter resumes at statement i of block label, the exit counting n operations of
    /// the iteration as done (for --max-steps), with x holding v1, the pending stores made
    /// and the virtual arrays built;
    /// a guard is named gN by its index N, as bridges and --stats name it.
    #[arg(long, value_delimiter = ',')]
    pub dump: Vec<String>,
    /// ISA for ir/asm dumps: x86_64 or aarch64.
    #[arg(long)]
    pub target: Option<String>,
    /// Print statistics to stderr.
    #[arg(long)]
    pub stats: bool,
    /// Write the JIT's events to FILE as JSON lines (trace started, aborted, optimized,
    /// compiled, bridge attached, blacklisted, guard exits, the run's totals); the schema
    /// is in docs/ARCHITECTURE.md.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Stop with an error after N interpreted operations.
    #[arg(long)]
    pub max_steps: Option<u64>,
    /// Compile on the driver's thread, the program waiting for each function, instead of
    /// on the compiler thread while the program runs on: what --stats, --log and --dump
    /// report no longer depends on the compiler thread's speed (reproducible statistics).
    #[arg(long)]
    pub compile_on_driver: bool,
    /// The program's syntax, instead of the one its extension implies.
    #[arg(long, value_enum)]
    pub syntax: Option<Syntax>,
    /// Whether the run prints the program's final line (not a flag: `flowjit bf` does not,
    /// since a Brainfuck program's output is what its `.` commands write).
    #[arg(skip = true)]
    pub final_line: bool,
}

/// Why the command failed, with the exit status that goes with it.
pub enum Failure {
    /// Bad usage, an unreadable or invalid program: exit status 2. Already reported.
    Usage,
    /// A runtime error in the program: exit status 1. Already reported.
    Runtime,
    /// `flowjit bench` or `flowjit difftest`: an executor printed something other than the
    /// interpreter did, a
    /// fault of flowjit rather than of the program or the command line: exit status 3.
    /// Already reported.
    Disagreement,
}

impl Failure {
    /// The process's exit status.
    pub fn exit_status(&self) -> u8 {
        match self {
            Failure::Runtime => 1,
            Failure::Usage => 2,
            Failure::Disagreement => DISAGREEMENT_STATUS,
        }
    }
}

/// The exit status of `flowjit bench` and `flowjit difftest` when executors disagree.
pub const DISAGREEMENT_STATUS: u8 = 3;

type CliResult<T> = Result<T, Failure>;

fn usage_error(message: impl std::fmt::Display) -> Failure {
    eprintln!("error: {message}");
    Failure::Usage
}

/// The stack the command runs on: parsing, printing and dropping values recurse as deep as
/// programs nest (up to the parsers' limits).
const STACK: usize = 512 << 20;

/// Runs the command line and returns the process's exit status.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let worker = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || dispatch(cli.command))
        .expect("a thread for the command");
    match worker.join().expect("the command does not panic") {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => ExitCode::from(failure.exit_status()),
    }
}

/// Runs one command.
fn dispatch(command: Command) -> CliResult<()> {
    match command {
        Command::Run {
            program,
            inputs,
            entry,
            opts,
        } => {
            let (loaded, entry, inputs) = open(&program, opts.syntax, entry.as_deref(), &inputs)?;
            execute(&loaded, Start::Run(entry), &inputs, &opts)
        }
        Command::Bytecode { file, inputs, opts } => {
            let (loaded, entry, inputs) = bytecode_setup(&file, &inputs)?;
            execute(&loaded, Start::Run(entry), &inputs, &opts)
        }
        Command::Bf { file, opts } => {
            let (loaded, entry, inputs) = brainfuck_setup(&file)?;
            let quiet = RunOpts {
                final_line: false,
                ..opts
            };
            execute(&loaded, Start::Run(entry), &inputs, &quiet)
        }
        Command::Fmt {
            program,
            format,
            syntax,
        } => fmt_command(&program, format, syntax),
        Command::Difftest { seed, count } => difftest(seed, count),
        Command::Report {
            program,
            inputs,
            entry,
            output,
            opts,
        } => report_command(&program, &inputs, entry.as_deref(), &output, &opts),
        Command::Trace {
            program,
            inputs,
            from,
            opts,
        } => {
            let (loaded, anchor, inputs) = open(&program, opts.syntax, Some(&from), &inputs)?;
            execute(&loaded, Start::TraceFrom(anchor), &inputs, &opts)
        }
        Command::Pe {
            program,
            inputs,
            entry,
            format,
            raw,
            run,
            compile,
            opts,
        } => pe_command(
            &program,
            &inputs,
            entry.as_deref(),
            format,
            raw,
            run,
            compile,
            opts,
        ),
        Command::Bench {
            program,
            inputs,
            entry,
            runs,
            statics,
            json,
            plot,
        } => bench_command(
            &program,
            &inputs,
            entry.as_deref(),
            runs,
            statics,
            json,
            plot,
        ),
    }
}

/// `flowjit fmt`: prints the program at `path` (in `syntax`, or the one its extension
/// implies) in syntax `format`, with its comments.
fn fmt_command(path: &PathBuf, format: Syntax, syntax: Option<Syntax>) -> CliResult<()> {
    let text = read_file(path)?;
    let path = path.display().to_string();
    let syntax = syntax.unwrap_or_else(|| Syntax::from_path(&path));
    let (ast, _) = lang::load(&text, syntax).map_err(|d| report(&path, &text, &d))?;
    let comments = lang::comment::comments(&text, syntax);
    let printed = match format {
        Syntax::Fg => {
            let mut notes = lang::comment::Notes::new(&comments, &text, "#");
            lang::print::to_fg_noted(&ast, &mut notes)
        }
        Syntax::Pl => {
            let mut notes = lang::comment::Notes::new(&comments, &text, "%");
            lang::print::to_pl_noted(&ast, &mut notes)
        }
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(printed.as_bytes());
    Ok(())
}

/// `flowjit pe`: partially evaluates the program at `path` with the `inputs` static, and
/// prints the residual program (raw, as the partial evaluator made it, with `raw`), or runs
/// it on the dynamic inputs `run` (compiled whole, with `compile`).
#[allow(clippy::too_many_arguments)]
fn pe_command(
    path: &PathBuf,
    inputs: &[String],
    entry: Option<&str>,
    format: Syntax,
    raw: bool,
    run: Option<Vec<String>>,
    compile: bool,
    opts: RunOpts,
) -> CliResult<()> {
    let (loaded, entry, statics) = open(path, opts.syntax, entry, inputs)?;
    // Checked before the specialization, which may take a while.
    let dynamic = match &run {
        Some(words) => Some(dynamic_inputs(&loaded, &statics, words)?),
        None => None,
    };
    if compile {
        small_pages();
    }
    let residual =
        peval::run::residual(&loaded.program, entry, &statics, !raw).map_err(usage_error)?;
    match dynamic {
        None => {
            print_residual(&residual, &loaded, format);
            Ok(())
        }
        Some(dynamic) => run_residual(residual, &loaded, &dynamic, compile, opts),
    }
}

/// `flowjit pe` without `--run`: prints the residual program of `loaded` in syntax
/// `format`.
fn print_residual(residual: &peval::Residual, loaded: &Loaded, format: Syntax) {
    let ast = residual.to_ast(&loaded.program);
    let printed = match format {
        Syntax::Fg => lang::print::to_fg(&ast),
        Syntax::Pl => ast.blocks.iter().map(lang::print::pl_block_line).collect(),
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(printed.as_bytes());
}

/// `flowjit pe --run`: runs the residual program of `loaded` on the `dynamic` inputs, as
/// one compiled function with `compile`, else as `opts` say (by default interpreted).
fn run_residual(
    residual: peval::Residual,
    loaded: &Loaded,
    dynamic: &Inputs,
    compile: bool,
    mut opts: RunOpts,
) -> CliResult<()> {
    // Inputs are variables of the original program; one the residual program never
    // reads is dropped.
    let runnable = residual.runnable(&loaded.program, dynamic);
    // What partial evaluation made is no longer needed: compiling reuses its memory.
    drop(residual);
    if compile {
        return run_compiled_program(&runnable, &opts);
    }
    opts.mode = Some(opts.mode.unwrap_or(Mode::Interp));
    let residual_loaded = Loaded {
        program: runnable.program,
        ast: None,
    };
    execute(
        &residual_loaded,
        Start::Run(peval::run::ENTRY),
        &runnable.inputs,
        &opts,
    )
}

/// `flowjit bench`: times the program at `path` under each executor, `runs` times, and
/// prints the table (or the JSON, and draws the plot).
fn bench_command(
    path: &PathBuf,
    inputs: &[String],
    entry: Option<&str>,
    runs: usize,
    statics: Option<Vec<String>>,
    json: bool,
    plot: Option<PathBuf>,
) -> CliResult<()> {
    let (loaded, entry, parsed, default_statics) = bench_program(path, inputs, entry)?;
    let statics = match statics.or(default_statics) {
        None => None,
        Some(names) => Some(
            names
                .iter()
                .map(|n| {
                    loaded.program.slot(n).ok_or_else(|| {
                        usage_error(format!("`{n}` is not a variable of the program"))
                    })
                })
                .collect::<CliResult<Vec<Slot>>>()?,
        ),
    };
    if runs == 0 {
        return Err(usage_error("--runs must be at least 1"));
    }
    let setup = crate::bench::Setup {
        program: &loaded.program,
        entry,
        inputs: parsed,
        statics,
    };
    let executors = 3 + setup.statics.is_some() as u64;
    let bar = indicatif::ProgressBar::new(runs as u64 * executors);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs {msg}")
            .expect("a valid template"),
    );
    let report = crate::bench::run(&setup, runs, |mode| {
        bar.set_message(mode.to_string());
        bar.inc(1);
    });
    bar.finish_and_clear();
    let report = report.map_err(|e| {
        eprintln!("error: the executors disagree: {e}");
        Failure::Disagreement
    })?;
    let path = path.display().to_string();
    let title = format!("flowjit bench {path}");
    let mut out = std::io::stdout().lock();
    if json {
        let _ = writeln!(out, "{}", report.json(&path, inputs));
    } else {
        let _ = write!(out, "{}", report.table(&title));
    }
    if let Some(svg) = plot {
        report
            .plot(&svg, &title)
            .map_err(|e| usage_error(format!("cannot draw {}: {e}", svg.display())))?;
    }
    Ok(())
}

/// The program `flowjit bench` times, by the extension of `path`: a register-machine
/// bytecode program (`.bc`) or a Brainfuck program (`.b`) on the bundled interpreter, or a
/// flowgraph program; with the inputs the partial evaluator takes as static by default.
fn bench_program(
    path: &PathBuf,
    inputs: &[String],
    entry: Option<&str>,
) -> CliResult<(Loaded, lang::BlockId, Inputs, Option<Vec<String>>)> {
    let name = path.display().to_string();
    if name.ends_with(".bc") {
        let (loaded, entry, inputs) = bytecode_setup(path, inputs)?;
        let statics = vec!["bytecode".to_string(), "pc".to_string()];
        Ok((loaded, entry, inputs, Some(statics)))
    } else if name.ends_with(".b") {
        if !inputs.is_empty() {
            return Err(usage_error(
                "a Brainfuck program takes no inputs (it reads standard input)",
            ));
        }
        let (loaded, entry, inputs) = brainfuck_setup(path)?;
        let statics = vec![brainfuck::BF_PROGRAM.to_string()];
        Ok((loaded, entry, inputs, Some(statics)))
    } else {
        let (loaded, entry, parsed) = open(path, None, entry, inputs)?;
        Ok((loaded, entry, parsed, None))
    }
}

/// Reads, parses and checks the program at `path` (in `syntax`, or the one its extension
/// implies), and resolves the entry label and the inputs.
fn open(
    path: &PathBuf,
    syntax: Option<Syntax>,
    entry: Option<&str>,
    inputs: &[String],
) -> CliResult<(Loaded, lang::BlockId, Inputs)> {
    let name = path.display().to_string();
    let text = read_file(path)?;
    let syntax = syntax.unwrap_or_else(|| Syntax::from_path(&name));
    let loaded = load_program(&name, &text, syntax)?;
    let entry = resolve_entry(&loaded, entry)?;
    let inputs = parse_inputs(&loaded, inputs)?;
    Ok((loaded, entry, inputs))
}

/// The bundled interpreter loaded with a `.bc` program: `bytecode`, `pc = 0`, and the
/// registers (0 unless given).
fn bytecode_setup(file: &PathBuf, inputs: &[String]) -> CliResult<(Loaded, lang::BlockId, Inputs)> {
    let path = file.display().to_string();
    let text = read_file(file)?;
    let cells = bytecode::assemble(&text).map_err(|d| report(&path, &text, &d))?;
    let loaded = load_program(
        bytecode::REGMACHINE_NAME,
        bytecode::REGMACHINE_SOURCE,
        Syntax::Fg,
    )?;
    let entry = resolve_entry(&loaded, Some(bytecode::REGMACHINE_ENTRY))?;
    let mut given = Vec::new();
    for word in inputs {
        let (name, value) = parse_input(word)?;
        if !bytecode::REGISTERS.contains(&name.as_str()) {
            return Err(usage_error(format!(
                "`{name}` is not a register of the machine (registers: {})",
                bytecode::REGISTERS.join(" ")
            )));
        }
        if given.iter().any(|(n, _)| *n == name) {
            return Err(given_twice(&name));
        }
        given.push((name, value));
    }
    let mut all = vec![
        ("bytecode".to_string(), Value::list(cells)),
        ("pc".to_string(), Value::Int(0)),
    ];
    for reg in bytecode::REGISTERS {
        let v = given
            .iter()
            .find(|(n, _)| n == reg)
            .map_or(Value::Int(0), |(_, v)| v.clone());
        all.push((reg.to_string(), v));
    }
    let inputs = all
        .into_iter()
        .map(|(n, v)| {
            let slot = loaded
                .program
                .slot(&n)
                .expect("the bundled interpreter uses every register");
            (slot, v)
        })
        .collect::<Vec<_>>();
    Ok((loaded, entry, inputs))
}

/// The bundled Brainfuck interpreter loaded with a `.b` program as its `program` list.
fn brainfuck_setup(file: &PathBuf) -> CliResult<(Loaded, lang::BlockId, Inputs)> {
    let path = file.display().to_string();
    // Comments may be any bytes: only the commands need to be text.
    let bytes = std::fs::read(file)
        .map_err(|e| usage_error(format!("cannot read {}: {e}", file.display())))?;
    let text = String::from_utf8_lossy(&bytes);
    let commands = brainfuck::parse(&text).map_err(|d| report(&path, &text, &d))?;
    let loaded = load_program(brainfuck::BF_NAME, brainfuck::BF_SOURCE, Syntax::Fg)?;
    let entry = resolve_entry(&loaded, Some(brainfuck::BF_ENTRY))?;
    let slot = loaded
        .program
        .slot(brainfuck::BF_PROGRAM)
        .expect("the bundled interpreter reads its program");
    Ok((loaded, entry, vec![(slot, Value::list(commands))]))
}

/// `flowjit difftest`: runs `count` generated programs from `seed`.
fn difftest(seed: u64, count: u32) -> CliResult<()> {
    match crate::difftest::run(seed, count).map_err(usage_error)? {
        crate::difftest::Outcome::Agreed { seconds, discarded } => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "{count} programs (seed {seed}), no difference, in {seconds:.1} s: {:.0} programs/s ({discarded} more discarded as too long)",
                count as f64 / seconds,
            );
            Ok(())
        }
        crate::difftest::Outcome::Differs { why, program } => {
            eprintln!("difference (shrunk): {why}\n{program}");
            Err(Failure::Disagreement)
        }
    }
}

/// Inputs resolved to slots.
type Inputs = Vec<(Slot, Value)>;

/// A checked program with the source it came from.
struct Loaded {
    program: Program,
    /// Its syntax tree, for a program read from text (not a residual one).
    ast: Option<lang::ast::Ast>,
}

fn read_file(path: &PathBuf) -> CliResult<String> {
    std::fs::read_to_string(path)
        .map_err(|e| usage_error(format!("cannot read {}: {e}", path.display())))
}

fn report(name: &str, text: &str, diags: &[Diagnostic]) -> Failure {
    let source = Source::new(name, text);
    eprint!("{}", source.render(diags, diag::stderr_color()));
    Failure::Usage
}

fn load_program(name: &str, text: &str, syntax: Syntax) -> CliResult<Loaded> {
    let (ast, program) = lang::load(text, syntax).map_err(|d| report(name, text, &d))?;
    Ok(Loaded {
        program,
        ast: Some(ast),
    })
}

fn resolve_entry(loaded: &Loaded, entry: Option<&str>) -> CliResult<lang::BlockId> {
    match entry {
        None => Ok(lang::BlockId(0)),
        Some(label) => loaded
            .program
            .block_id(label)
            .ok_or_else(|| usage_error(format!("no block is labelled `{label}`"))),
    }
}

fn parse_input(word: &str) -> CliResult<(String, Value)> {
    let Some((name, text)) = word.split_once('=') else {
        return Err(usage_error(format!(
            "input `{word}` is not of the form NAME=VALUE"
        )));
    };
    if !lang::ast::is_plain_name(name) {
        return Err(usage_error(format!(
            "input `{word}`: `{name}` is not a variable name"
        )));
    }
    if let Some(file) = text.strip_prefix('@') {
        return Ok((name.to_string(), file_bytes(name, file)?));
    }
    let value = lang::parse_value(text).map_err(|d| {
        let source = Source::new(format!("input {name}"), text);
        eprint!("{}", source.render(&[d], diag::stderr_color()));
        Failure::Usage
    })?;
    Ok((name.to_string(), value))
}

/// Input `name`'s value for `NAME=@FILE` (SPEC §3): the bytes of `file`, a list of integers
/// 0..255; a file that cannot be read is bad usage.
fn file_bytes(name: &str, file: &str) -> CliResult<Value> {
    let bytes = std::fs::read(file)
        .map_err(|e| usage_error(format!("input `{name}`: cannot read {file}: {e}")))?;
    Ok(Value::list(
        bytes.into_iter().map(|b| Value::Int(b.into())).collect(),
    ))
}

/// The inputs `words`, each naming a variable of the program, none given twice.
fn parse_inputs(loaded: &Loaded, words: &[String]) -> CliResult<Vec<(Slot, Value)>> {
    let mut inputs: Vec<(Slot, Value)> = Vec::new();
    for word in words {
        let (name, value) = parse_input(word)?;
        let slot = loaded.program.slot(&name).ok_or_else(|| {
            usage_error(format!("input `{name}` is not a variable of the program"))
        })?;
        if inputs.iter().any(|(s, _)| *s == slot) {
            return Err(given_twice(&name));
        }
        inputs.push((slot, value));
    }
    Ok(inputs)
}

/// `pe --run`'s dynamic inputs `words`: variables of the program, none given twice, none
/// also static.
fn dynamic_inputs(loaded: &Loaded, statics: &Inputs, words: &[String]) -> CliResult<Inputs> {
    let dynamic = parse_inputs(loaded, words)?;
    for (slot, _) in &dynamic {
        if statics.iter().any(|(s, _)| s == slot) {
            let name = loaded.program.var(*slot);
            return Err(usage_error(format!(
                "input `{name}` is given twice: static, and dynamic after --run"
            )));
        }
    }
    Ok(dynamic)
}

/// An input given twice is refused rather than one of its values silently chosen.
fn given_twice(name: &str) -> Failure {
    usage_error(format!("input `{name}` is given twice"))
}

/// How `execute` starts the run.
#[derive(Clone, Copy)]
enum Start {
    /// Run from this block, tracing hot loops as the mode says.
    Run(lang::BlockId),
    /// The articles' `do_trace` from this block.
    TraceFrom(lang::BlockId),
}

/// The driver's policy with the command line's thresholds: a threshold given is both the
/// plain one and that of a program with the meta-tracing hints.
fn policy(opts: &RunOpts) -> jit::Policy {
    let default = jit::Policy::DEFAULT;
    jit::Policy {
        threshold: opts.threshold.unwrap_or(default.threshold),
        merge_threshold: opts.threshold.unwrap_or(default.merge_threshold),
        bridge_threshold: opts.bridge_threshold.unwrap_or(default.bridge_threshold),
        merge_bridge_threshold: opts
            .bridge_threshold
            .unwrap_or(default.merge_bridge_threshold),
        tier_iterations: opts.tier_iterations,
        bridge_entries: opts.bridge_entries,
        ..default
    }
}

fn jit_config(opts: &RunOpts) -> CliResult<jit::Config> {
    let mut dumps = jit::Dumps::default();
    for name in &opts.dump {
        match name.as_str() {
            "trace" => dumps.trace = true,
            "opt" => dumps.opt = true,
            "ir" => dumps.ir = true,
            "asm" => dumps.asm = true,
            other => {
                return Err(usage_error(format!(
                    "unknown dump `{other}` (choose from trace, opt, ir, asm)"
                )))
            }
        }
    }
    let target = match &opts.target {
        None => None,
        Some(name) => Some(crate::backend::Target::from_name(name).ok_or_else(|| {
            usage_error(format!(
                "unknown target `{name}` (choose x86_64 or aarch64)"
            ))
        })?),
    };
    let passes = match (&opts.passes, opts.no_opt) {
        (Some(_), true) => return Err(usage_error("give --passes or --no-opt, not both")),
        (_, true) => Vec::new(),
        (Some(names), false) => crate::opt::check_passes(names).map_err(usage_error)?,
        (None, false) => crate::opt::PIPELINE.to_vec(),
    };
    Ok(jit::Config {
        policy: policy(opts),
        max_steps: opts.max_steps,
        dumps,
        passes,
        target,
        // Thresholds given are obeyed as given; the default ones compile only what can
        // pay for itself.
        pay_off: opts.threshold.is_none() && opts.bridge_threshold.is_none(),
        // --stats, --log and --dump report on the run the default flags make (SPEC §4).
        // Steps are counted where the driver compiles: a run stopped at its budget stops
        // at the same operation whatever the compiler thread's speed.
        background: !opts.compile_on_driver && opts.max_steps.is_none(),
        ..jit::Config::default()
    })
}

fn execute(
    loaded: &Loaded,
    start: Start,
    inputs: &[(Slot, Value)],
    opts: &RunOpts,
) -> CliResult<()> {
    execute_with(loaded, start, inputs, opts, None)
}

/// What `flowjit report` writes its page about, and where.
struct ReportTo {
    /// The page's file.
    output: PathBuf,
    /// The command, for the title.
    command: String,
    /// The flowgraph program's file name, text and syntax tree.
    source_name: String,
    source_text: String,
    ast: lang::ast::Ast,
    /// The interpreted program, for a `.bc` or `.b` file.
    guest: Option<(String, String)>,
}

/// `flowjit report`: runs the program as `run`, `bytecode` or `bf` would (by its
/// extension), keeping what the page shows, and writes the page.
fn report_command(
    path: &PathBuf,
    inputs: &[String],
    entry: Option<&str>,
    output: &std::path::Path,
    opts: &RunOpts,
) -> CliResult<()> {
    let name = path.display().to_string();
    let mut command = format!("flowjit report {name}");
    for word in inputs {
        command.push(' ');
        command.push_str(word);
    }
    let guest_text = || -> CliResult<String> {
        let bytes =
            std::fs::read(path).map_err(|e| usage_error(format!("cannot read {name}: {e}")))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    let (loaded, entry, inputs, to) = if name.ends_with(".bc") || name.ends_with(".b") {
        let bc = name.ends_with(".bc");
        if entry.is_some() {
            return Err(usage_error(
                "--entry is for flowgraph programs, not .bc or .b files",
            ));
        }
        let (loaded, entry, inputs) = if bc {
            bytecode_setup(path, inputs)?
        } else {
            if !inputs.is_empty() {
                return Err(usage_error(
                    "a Brainfuck program takes no inputs (it reads standard input)",
                ));
            }
            brainfuck_setup(path)?
        };
        let (source_name, source_text) = if bc {
            (bytecode::REGMACHINE_NAME, bytecode::REGMACHINE_SOURCE)
        } else {
            (brainfuck::BF_NAME, brainfuck::BF_SOURCE)
        };
        let to = ReportTo {
            output: output.to_path_buf(),
            command,
            source_name: source_name.to_string(),
            source_text: source_text.to_string(),
            ast: loaded.ast.clone().expect("read from text"),
            guest: Some((name.clone(), guest_text()?)),
        };
        (loaded, entry, inputs, to)
    } else {
        let (loaded, entry, inputs) = open(path, opts.syntax, entry, inputs)?;
        let to = ReportTo {
            output: output.to_path_buf(),
            command,
            source_name: name.clone(),
            source_text: read_file(path)?,
            ast: loaded.ast.clone().expect("read from text"),
            guest: None,
        };
        (loaded, entry, inputs, to)
    };
    let opts = RunOpts {
        final_line: !name.ends_with(".b"),
        ..opts.clone()
    };
    if opts.mode == Some(Mode::Interp) {
        return Err(usage_error(
            "flowjit report needs --mode jit or --mode trace",
        ));
    }
    execute_with(&loaded, Start::Run(entry), &inputs, &opts, Some(&to))
}

/// Writes `text` to `path`, or says why it cannot.
fn write_file(path: &std::path::Path, text: &str) -> CliResult<()> {
    std::fs::write(path, text)
        .map_err(|e| usage_error(format!("cannot write {}: {e}", path.display())))
}

fn execute_with(
    loaded: &Loaded,
    start: Start,
    inputs: &[(Slot, Value)],
    opts: &RunOpts,
    report: Option<&ReportTo>,
) -> CliResult<()> {
    let mode = opts.mode.unwrap_or(Mode::Jit);
    let mut config = jit_config(opts)?;
    config.native = mode == Mode::Jit;
    config.keep = report.is_some();
    config.background &= !config.keep;
    if !config.native && (config.dumps.ir || config.dumps.asm || config.target.is_some()) {
        return Err(usage_error(
            "--dump ir, --dump asm and --target need --mode jit",
        ));
    }
    if mode == Mode::Interp {
        if let Start::Run(entry) = start {
            if opts.stats || !opts.dump.is_empty() || opts.log.is_some() {
                return Err(usage_error(
                    "--stats, --dump and --log need --mode jit or --mode trace",
                ));
            }
            let mut state = State::new(&loaded.program, inputs, Io::stdio());
            let result = interp::run_program(&loaded.program, entry, &mut state, opts.max_steps);
            return finish(result, &mut state.io, opts.final_line);
        }
        return Err(usage_error(
            "`flowjit trace` needs a tracing mode, not --mode interp",
        ));
    }
    let mut state = State::new(&loaded.program, inputs, Io::stdio());
    let mut driver = jit::Jit::new(&loaded.program, config).map_err(usage_error)?;
    let result = match start {
        Start::Run(entry) => driver.run(&mut state, entry),
        Start::TraceFrom(from) => driver.do_trace(&mut state, from),
    };
    state.io.flush();
    driver.await_listings();
    eprint!("{}", driver.take_dump());
    if opts.stats {
        eprint!("{}", driver.stats_report());
    }
    let events = driver.events();
    // What the program wrote is out; the log and the page are written even after its
    // error, which `finish` reports last.
    let mut written = Ok(());
    if let Some(path) = &opts.log {
        written = written.and(write_file(path, &crate::report::json_lines(&events)));
    }
    if let Some(to) = report {
        let subject = crate::report::Subject {
            command: &to.command,
            source: crate::report::SourceText {
                name: &to.source_name,
                text: &to.source_text,
                ast: &to.ast,
            },
            guest: to.guest.as_ref().map(|(n, t)| (n.as_str(), t.as_str())),
        };
        let page = crate::report::html(&subject, &driver, &events);
        written = written.and(write_file(&to.output, &page));
    }
    let finished = finish(result, &mut state.io, opts.final_line);
    finished.and(written)
}

/// Has the kernel give the process's memory in pages of 4 KiB from now on, not in
/// transparent huge pages of 2 MiB (`PR_SET_THP_DISABLE`): for `pe --compile`, whose
/// specialization and whole-program compilation allocate tens of megabytes once and briefly.
/// Under huge pages each fresh 2 MiB is zeroed whole at its first touch: mandel.b's
/// `pe --compile --run` peaked at 81 MB (60 MB in small pages) and ran 6% longer
/// (docs/BENCHMARKS.md). `flowjit bf` keeps huge pages: without them it ran 1-3% longer.
fn small_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: a plain system call on the process itself; a failure leaves the pages as
    // they were, which is only slower.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// `pe --compile --run`: the residual program as one function of machine code; the
/// interpreter takes over where it deoptimizes, or runs it all when it cannot be compiled.
fn run_compiled_program(runnable: &Runnable, opts: &RunOpts) -> CliResult<()> {
    let config = jit_config(opts)?;
    let mut backend = crate::backend::Backend::new(config.target, config.policy.backend_limits())
        .map_err(usage_error)?;
    let how = Execution {
        // --max-steps counts interpreted operations: with a limit the interpreter runs it all.
        backend: opts.max_steps.is_none().then_some(&mut backend),
        listings: crate::backend::Listings {
            ir: config.dumps.ir,
            asm: config.dumps.asm,
        },
        max_steps: opts.max_steps,
    };
    let mut io = Io::stdio();
    let result = runnable.run(how, &mut io, |compiled| match compiled {
        Ok(code) => {
            if let Some(ir) = &code.ir {
                eprint!("# ir: residual program\n{ir}");
            }
            if let Some(asm) = &code.asm {
                eprint!("# asm: residual program\n{asm}");
            }
            if opts.stats {
                eprintln!(
                    "# stats\nresidual program compiled: {} bytes in {:.1} ms",
                    code.size,
                    code.time.as_secs_f64() * 1e3
                );
            }
        }
        Err(why) => {
            if opts.stats || !opts.dump.is_empty() {
                eprintln!("# residual program not compiled: {why}");
            }
        }
    });
    finish(result, &mut io, opts.final_line)
}

/// Ends a run: what the program wrote goes out first, then its final line (if `final_line`),
/// or its error.
fn finish(
    result: Result<Value, interp::RuntimeError>,
    io: &mut Io,
    final_line: bool,
) -> CliResult<()> {
    io.flush();
    match result {
        Ok(_) if !final_line => Ok(()),
        Ok(value) => {
            let mut out = std::io::stdout().lock();
            // A closed pipe is not the program's failure.
            let _ = writeln!(out, "{value}");
            let _ = out.flush();
            Ok(())
        }
        Err(e) => {
            eprintln!("error: {e}");
            Err(Failure::Runtime)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_has_its_own_exit_status() {
        assert_eq!(Failure::Runtime.exit_status(), 1);
        assert_eq!(Failure::Usage.exit_status(), 2);
        // Executors that disagree are neither bad usage nor the program's error.
        assert_eq!(Failure::Disagreement.exit_status(), 3);
        assert!(EXIT_STATUSES.contains("\n  3  flowjit bench, flowjit difftest: "));
    }
}
