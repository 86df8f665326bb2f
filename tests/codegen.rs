//! The code generators, tested as text: each case under `tests/codegen/` is a trace in the
//! SSA form (`--dump opt`), compiled by the backend as the root of a tree, and the listings
//! it gives (`--dump asm`, `--dump ir`) matched against patterns that survive renumbering
//! and new addresses, in the manner of yk's `codegen_and_test` and Cranelift's filetests.
//!
//! # A case
//!
//! ```text
//! # What the case shows (comment lines start with `#`).
//! passes: all
//! [x:int, y:int]
//! v0:int = input x  @l:0 #0 []
//! ...
//! loop  @l:0 #4 [x=v3]
//! => quick-x86_64 asm
//! ...
//! ; v3:int = add v0, v1
//! movq %{{_}}, %{{sum}}
//! addq %{{_}}, %{{sum}}
//! jo {{exit}}
//! ...
//! ; exit of v3, resume at @l:0
//! {{exit}}: ...
//! => cranelift-aarch64 asm
//! ...
//! ```
//!
//! - `passes:` (optional) names the optimizer's passes to run first (`all` for the whole
//!   pipeline, as in `tests/opt/`); without it the trace goes to the backend as written. A
//!   root must be peeled (hold a `loop_start`), so a case either runs `peel` or is peeled.
//! - The trace is compiled as the driver first compiles a root: for arrays that hold only
//!   integers (`Tuning::ints`), with the loop's induction proofs, and without counting
//!   steps (`--max-steps` off).
//! - Each `=> GENERATOR LISTING` line starts the patterns of one listing. GENERATOR is
//!   `cranelift-x86_64` (Cranelift for x86-64), `quick-x86_64` (the quick assembler,
//!   `backend/quick.rs`: the case fails if it declines the trace) or `cranelift-aarch64`
//!   (Cranelift for AArch64). Code for another ISA than the host's is the listing
//!   `--target` shows (the backend's display ISA, compiled and never run); the quick
//!   assembler's needs an x86-64 host, and elsewhere its sections are skipped, with a
//!   message saying so. LISTING is `asm` (the disassembly) or `ir` (Cranelift's IR; not
//!   for `quick-x86_64`).
//!
//! # The listings
//!
//! The listing is the one `--dump` prints: where the trace instruction the code comes from
//! changes, a comment line names it (`; v4:int = add v0, 1`, as the trace prints it
//! without its snapshot, or `; exit of g3, resume at @d:0`). Runs of blanks become one
//! space, blank lines go, and a disassembly line's address becomes a label without leading
//! zeros, as branch operands print addresses: `0x7f12a0: jo 0x7f12f8`.
//!
//! # Patterns
//!
//! The pattern lines are matched in order against the listing's lines, each against a whole
//! line (blanks collapsed, as above), with its label or without it: `jo {{_}}` and
//! `{{at}}: jo {{_}}` both match the line above. The listing's end is open (as if the
//! patterns ended in `...`); its start is not.
//!
//! - `...` alone: any lines, none or many.
//! - `..! TEXT`: any lines, none of which matches the pattern TEXT, up to the line the next
//!   pattern matches: how a case says that something is absent (`..! jo ...`).
//! - `{{_}}` in a line: any token (characters other than blanks and commas);
//!   `{{name}}`: a token too, the same one each time the name recurs in the section (the
//!   address a branch goes to, a register, an IR value): the first match binds it.
//! - `...` within a line: any text.
//! - Lines starting with `#`, and blank lines, are comments.
//!
//! A case that fails says which pattern line matched nowhere it must, and prints the whole
//! listing. `FLOWJIT_CODEGEN_SHOW=1` prints every listing (with `-- --nocapture`), to write
//! a new case's patterns from: assert what the case is about, not every register.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use flowjit::backend::lower::Origin;
use flowjit::backend::{Backend, Listings, Segment, Target, Unit};
use flowjit::jit::listing;
use flowjit::opt;
use flowjit::trace::parse::{parse_ssa, TextNames};
use flowjit::trace::print::Names;
use flowjit::trace::{print, verify::verify, Trace};

/// The directory of the cases.
fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/codegen")
}

/// A code generator a section is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Generator {
    CraneliftX86,
    QuickX86,
    CraneliftAarch64,
}

impl Generator {
    fn from_name(name: &str) -> Option<Generator> {
        match name {
            "cranelift-x86_64" => Some(Generator::CraneliftX86),
            "quick-x86_64" => Some(Generator::QuickX86),
            "cranelift-aarch64" => Some(Generator::CraneliftAarch64),
            _ => None,
        }
    }

    fn target(self) -> Target {
        match self {
            Generator::CraneliftX86 | Generator::QuickX86 => Target::X86_64,
            Generator::CraneliftAarch64 => Target::Aarch64,
        }
    }
}

/// One section of a case: a listing of one generator and its patterns.
struct Section {
    /// The `=> …` line.
    title: String,
    generator: Generator,
    ir: bool,
    patterns: Vec<String>,
    /// The line of the case each pattern is on, from 1.
    lines: Vec<usize>,
}

/// A case: the passes, the trace, and the sections.
struct Case {
    passes: Option<Vec<String>>,
    trace: String,
    sections: Vec<Section>,
}

fn read_case(text: &str) -> Result<Case, String> {
    let mut case = Case {
        passes: None,
        trace: String::new(),
        sections: Vec::new(),
    };
    for (lineno, line) in text.lines().enumerate() {
        if let Some(title) = line.strip_prefix("=>") {
            let words: Vec<&str> = title.split_whitespace().collect();
            let (generator, ir) = match words[..] {
                [g, l] if l == "asm" || l == "ir" => (Generator::from_name(g), l == "ir"),
                _ => (None, false),
            };
            let generator = generator.ok_or_else(|| {
                format!("`{line}`: not `=> GENERATOR asm|ir` (GENERATOR: cranelift-x86_64, quick-x86_64, cranelift-aarch64)")
            })?;
            if ir && generator == Generator::QuickX86 {
                return Err("the quick assembler has no IR".to_string());
            }
            case.sections.push(Section {
                title: line.to_string(),
                generator,
                ir,
                patterns: Vec::new(),
                lines: Vec::new(),
            });
        } else if let Some(section) = case.sections.last_mut() {
            if !line.trim_start().starts_with('#') && !line.trim().is_empty() {
                section.patterns.push(collapse(line));
                section.lines.push(lineno + 1);
            }
        } else if let Some(p) = line.strip_prefix("passes:") {
            case.passes = Some(p.split_whitespace().map(String::from).collect());
        } else {
            case.trace.push_str(line);
            case.trace.push('\n');
        }
    }
    if case.sections.is_empty() {
        return Err("no `=> GENERATOR LISTING` section".to_string());
    }
    if let Some(empty) = case.sections.iter().find(|s| s.patterns.is_empty()) {
        return Err(format!("`{}` has no patterns", empty.title));
    }
    Ok(case)
}

/// `text` with runs of blanks made one space, trimmed.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The trace of a case, after its passes.
fn optimized(case: &Case) -> Result<(Trace, TextNames), String> {
    let (trace, names) = parse_ssa(&case.trace)?;
    let Some(passes) = &case.passes else {
        return Ok((trace, names));
    };
    let passes: Vec<opt::Pass> = if passes == &["all"] {
        opt::PIPELINE.to_vec()
    } else {
        opt::check_passes(passes)?
    };
    let out = opt::optimize(&trace, &passes).map_err(|r| format!("{r}"))?;
    verify(&out).map_err(|e| format!("the optimized trace is broken: {e}"))?;
    Ok((out, names))
}

/// What a listing's comment line says of `o`, as `--dump` does for a root: the instruction
/// (`v4:int = add v0, 1`), or the exit of one and where it resumes (`exit of g3, resume at
/// @d:0`).
fn describe(names: &TextNames, trace: &Trace, o: Origin) -> String {
    let Some(inst) = trace.insts.get(o.inst).filter(|_| o.segment == 0) else {
        return format!("segment {} #{}", o.segment, o.inst);
    };
    let text = print::ssa_inst(names, trace, o.inst);
    let op = text.split("  @").next().unwrap_or(&text);
    if !o.exit {
        return op.to_string();
    }
    // A value's name (`v4`), a guard's (`g3`), or the kind and number (`setitem #5`).
    let name = match op.split_once([':', ' ']) {
        Some((name, _)) if name.starts_with(['v', 'g']) && name[1..].parse::<u32>().is_ok() => {
            name.to_string()
        }
        _ => format!("{} #{}", inst.kind.name(), o.inst),
    };
    let resume = trace.snap_of(inst).map_or(String::new(), |s| {
        format!(", resume at @{}:{}", names.label(s.pos.block), s.pos.inst)
    });
    format!("exit of {name}{resume}")
}

/// The listing `section` asks for, its lines normalized (module doc); `Ok(None)` when the
/// host cannot make it.
fn listing_of(
    section: &Section,
    trace: &Trace,
    names: &TextNames,
) -> Result<Option<Vec<String>>, String> {
    let host = Target::host().ok_or("no machine code for this host")?;
    if section.generator == Generator::QuickX86 && host != Target::X86_64 {
        return Ok(None);
    }
    let target = section.generator.target();
    let mut backend = Backend::new(
        (target != host).then_some(target),
        flowjit::jit::Policy::DEFAULT.backend_limits(),
    )?;
    let segment = Segment::root(trace);
    let listings = Listings {
        ir: section.ir,
        asm: !section.ir,
    };
    let frame_size = names.vars.len();
    let segments = [segment];
    let mut unit = Unit::tree(&segments, &[], frame_size);
    unit.tuning.quick = section.generator == Generator::QuickX86;
    let code = backend
        .compile(unit, listings)
        .map_err(|e| format!("the backend refused the trace: {e}"))?;
    if code.quick != (section.generator == Generator::QuickX86) {
        return Err(format!(
            "compiled by {}",
            if code.quick {
                "the quick assembler"
            } else {
                "Cranelift (the quick assembler declined the trace)"
            }
        ));
    }
    let lines = if section.ir {
        listing::ir_lines(code.ir.as_deref().ok_or("no IR")?)
    } else {
        listing::asm_lines(code.asm.as_deref().ok_or("no disassembly")?, &code)
    };
    let text = listing::render(&lines, "", None, &|o| describe(names, trace, o));
    Ok(Some(
        text.lines()
            .map(normalize)
            .filter(|l| !l.is_empty())
            .collect(),
    ))
}

/// A listing's line as patterns see it: blanks collapsed, and a disassembly line's
/// address (`0x00007f12a0:`) a label without leading zeros (`0x7f12a0:`).
fn normalize(line: &str) -> String {
    let line = collapse(line);
    let address = line
        .strip_prefix("0x")
        .and_then(|rest| rest.split_once(": "))
        .and_then(|(hex, text)| Some((u64::from_str_radix(hex, 16).ok()?, text)));
    match address {
        Some((a, text)) => format!("{a:#x}: {text}"),
        None => line,
    }
}

/// The names `{{name}}` bound so far.
type Bindings = HashMap<String, String>;

/// Whether `pattern` matches all of `line`, extending `bound`; a pattern without a label
/// also matches the line without its address.
fn line_matches(pattern: &str, line: &str, bound: &mut Bindings) -> bool {
    let mut attempt = bound.clone();
    if glob(pattern, line, &mut attempt) {
        *bound = attempt;
        return true;
    }
    let Some((_, text)) = line.split_once(": ").filter(|(a, _)| a.starts_with("0x")) else {
        return false;
    };
    let mut attempt = bound.clone();
    if glob(pattern, text, &mut attempt) {
        *bound = attempt;
        return true;
    }
    false
}

/// Whether `pattern` (with `{{…}}` and `...`) matches all of `text`.
fn glob(pattern: &str, text: &str, bound: &mut Bindings) -> bool {
    if let Some(rest) = pattern.strip_prefix("...") {
        return (0..=text.len())
            .filter(|&k| text.is_char_boundary(k))
            .any(|k| {
                let mut attempt = bound.clone();
                glob(rest, &text[k..], &mut attempt) && {
                    *bound = attempt;
                    true
                }
            });
    }
    if let Some((name, rest)) = pattern.strip_prefix("{{").and_then(|p| p.split_once("}}")) {
        let token = text
            .find(|c: char| c.is_whitespace() || c == ',')
            .unwrap_or(text.len());
        return (1..=token).filter(|&k| text.is_char_boundary(k)).any(|k| {
            let (got, after) = text.split_at(k);
            if name != "_" && bound.get(name).is_some_and(|b| b != got) {
                return false;
            }
            let mut attempt = bound.clone();
            if name != "_" {
                attempt.insert(name.to_string(), got.to_string());
            }
            glob(rest, after, &mut attempt) && {
                *bound = attempt;
                true
            }
        });
    }
    match (pattern.chars().next(), text.chars().next()) {
        (None, None) => true,
        (Some(p), Some(t)) if p == t => {
            glob(&pattern[p.len_utf8()..], &text[t.len_utf8()..], bound)
        }
        _ => false,
    }
}

/// Whether `patterns` match `lines` in order (module doc), extending `bound`; `left` keeps
/// the fewest patterns left unmatched on any attempt, for the report.
fn matches(patterns: &[String], lines: &[String], bound: &mut Bindings, left: &mut usize) -> bool {
    let Some((first, rest)) = patterns.split_first() else {
        return lines.is_empty();
    };
    if first == "..." {
        return (0..=lines.len()).any(|k| {
            let mut attempt = bound.clone();
            matches(rest, &lines[k..], &mut attempt, left) && {
                *bound = attempt;
                true
            }
        });
    }
    if let Some(absent) = first.strip_prefix("..!") {
        let absent = absent.trim();
        for k in 0..=lines.len() {
            let mut attempt = bound.clone();
            if matches(rest, &lines[k..], &mut attempt, left) {
                *bound = attempt;
                return true;
            }
            if k < lines.len() && line_matches(absent, &lines[k], &mut bound.clone()) {
                return false;
            }
        }
        return false;
    }
    *left = (*left).min(patterns.len());
    let Some((line, others)) = lines.split_first() else {
        return false;
    };
    let mut attempt = bound.clone();
    line_matches(first, line, &mut attempt) && matches(rest, others, &mut attempt, left) && {
        *bound = attempt;
        true
    }
}

/// Runs every case under `tests/codegen/` (module doc).
#[test]
fn code_generator_cases() {
    let show = std::env::var_os("FLOWJIT_CODEGEN_SHOW").is_some();
    let paths = common::trace_files(&cases_dir());
    assert!(!paths.is_empty(), "no cases");
    let (mut failures, mut checked) = (Vec::new(), 0);
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
        let (trace, names) = match optimized(&case) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        for section in &case.sections {
            let lines = match listing_of(section, &trace, &names) {
                Ok(Some(lines)) => lines,
                Ok(None) => {
                    eprintln!(
                        "{name}: `{}` skipped: the quick assembler runs on x86-64 hosts only",
                        section.title
                    );
                    continue;
                }
                Err(e) => {
                    failures.push(format!("{name}: `{}`: {e}", section.title));
                    continue;
                }
            };
            checked += 1;
            let listing = lines.join("\n");
            if show {
                eprintln!("{name}: `{}`\n{listing}\n", section.title);
            }
            // Patterns leave the listing's end open: a last `...` is implied.
            let mut patterns = section.patterns.clone();
            patterns.push("...".to_string());
            let mut left = patterns.len();
            if !matches(&patterns, &lines, &mut Bindings::new(), &mut left) {
                // The first pattern no attempt got past (the implied `...` never fails).
                let at = (patterns.len() - left).min(section.lines.len().saturating_sub(1));
                failures.push(format!(
                    "{name}:{}: `{}`: `{}` matches no line where it must\n--- listing\n{listing}\n",
                    section.lines.get(at).copied().unwrap_or(0),
                    section.title,
                    patterns[at],
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failure(s) (of {checked} listings):\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Whether `patterns` (one a line) match `listing` as a section's do.
fn section_matches(patterns: &str, listing: &str) -> bool {
    let mut patterns: Vec<String> = patterns.lines().map(collapse).collect();
    patterns.push("...".to_string());
    let lines: Vec<String> = listing.lines().map(normalize).collect();
    let mut left = patterns.len();
    matches(&patterns, &lines, &mut Bindings::new(), &mut left)
}

#[test]
fn patterns_match_in_order_with_wildcards_names_and_absences() {
    let listing = "  0x000000001000: addq     %rsi, %rcx
  0x000000001003: jo       0x1010
  ; v4:int = mul v3, v1
  0x000000001009: imulq    %rsi, %rcx
  0x000000001010: jmpq     *(%r11)";
    // Tokens, any text, and the address a label.
    assert!(section_matches("addq %{{_}}, %{{_}}\njo {{_}}", listing));
    assert!(section_matches("...\n; v{{_}}:int = mul ...", listing));
    assert!(section_matches("0x1000: addq ...", listing));
    // In order, each pattern a whole line, blanks collapsed.
    assert!(!section_matches("jo {{_}}\naddq %{{_}}, %{{_}}", listing));
    assert!(!section_matches("addq %rsi", listing));
    // A name binds once: the branch goes to the jmpq, not to the imulq.
    assert!(section_matches(
        "...\njo {{x}}\n...\n{{x}}: jmpq ...",
        listing
    ));
    assert!(!section_matches(
        "...\njo {{x}}\n...\n{{x}}: imulq ...",
        listing
    ));
    // An absence holds up to the next pattern's line, not past it.
    assert!(section_matches("...\n; ...\n..! jo ...\njmpq ...", listing));
    assert!(!section_matches("..! jo ...\nimulq ...", listing));
    assert!(section_matches("..! imulq ...\nimulq ...", listing));
}
