//! The tracer: the articles' traces, and the exactness of every guard exit.

mod common;

use common::flowjit_ok as flowjit;

use flowjit::interp::{self, Exit, Monitor, NoMonitor};
use flowjit::lang::{BlockId, Program};
use flowjit::state::{Position, Steps};
use flowjit::trace::{self, parse::parse_ssa, print, Recorded, Trace};

const SQUARE: &str = "bytecode=[mov_a_r0,mov_a_r1,mov_r0_a,decr_a,mov_a_r0,mov_r2_a,add_r1_to_a,mov_a_r2,mov_r0_a,jump_if_a,2,mov_r2_a,return_a]";

fn golden_path(name: &str) -> String {
    format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn golden(name: &str) -> String {
    std::fs::read_to_string(golden_path(name)).expect("golden file")
}

/// Compares `got` with the golden file `name`; with `FLOWJIT_BLESS=1`, rewrites the file
/// with `got` instead (review the diff before committing it).
fn assert_golden(got: &str, name: &str) {
    if std::env::var_os("FLOWJIT_BLESS").is_some() && got != golden(name) {
        std::fs::write(golden_path(name), got).expect("a writable golden file");
    }
    assert_eq!(
        got,
        golden(name),
        "tests/golden/{name} (FLOWJIT_BLESS=1 rewrites it)"
    );
}

#[test]
fn power_traces_as_in_the_articles() {
    let (out, err) = flowjit(&[
        "trace",
        "examples/power.pl",
        "--from",
        "power_rec",
        "res=1",
        "x=10",
        "y=20",
        "--dump",
        "trace",
    ]);
    assert_eq!(out, "100000000000000000000\n");
    assert_eq!(
        err,
        "# trace 0: loop at power_rec\n\
         op2(res,mul,var(res),var(x))\n\
         op2(y,sub,var(y),const(1))\n\
         guard_true(y,[],power_done)\n\
         loop\n"
    );
    assert_golden(&err, "power_rec.trace");
}

#[test]
fn promotion_traces_as_in_the_articles() {
    let (out, err) = flowjit(&[
        "trace",
        "examples/promotion.pl",
        "--from",
        "b",
        "i=100",
        "x=5",
        "--dump",
        "trace",
    ]);
    assert_eq!(out, "-10\n");
    assert_golden(&err, "promotion_b.trace");
    assert_eq!(
        err,
        "# trace 0: loop at b\n\
         guard_value(x,5,[],b2)\n\
         op2(x2,mul,var(x),const(2))\n\
         op2(x3,add,var(x2),const(1))\n\
         op2(i,sub,var(i),var(x3))\n\
         op2(c,ge,var(i),const(0))\n\
         guard_true(c,[],l_done)\n\
         loop\n"
    );
}

#[test]
fn the_register_machine_meta_traces_as_in_the_articles() {
    let (out, err) = flowjit(&[
        "trace",
        "examples/regmachine.fg",
        "--from",
        "op_jump_if_a_jump",
        SQUARE,
        "pc=11",
        "a=16",
        "r0=16",
        "r1=16",
        "r2=0",
        "target=2",
        "--dump",
        "trace",
    ]);
    assert_eq!(out, "256\n");
    assert_golden(&err, "regmachine_square.trace");
    // The beginning and the end as the article prints them, the bytecode list (too long to
    // print at each guard) once, before the operations, as `k0`.
    let lines: Vec<&str> = err.lines().collect();
    let list = &SQUARE["bytecode=".len()..];
    assert_eq!(
        lines[1..10],
        [
            format!("% k0 = {list}"),
            "op1(pc,same,var(target))".to_string(),
            "guard_value(bytecode,k0,[],bytecode_loop)".to_string(),
            "guard_value(bytecode,k0,[],bytecode_loop_promote_bytecode)".to_string(),
            "guard_value(pc,2,[],bytecode_loop_promote_pc)".to_string(),
            "op2(opcode,readlist,var(bytecode),var(pc))".to_string(),
            "op2(pc,add,var(pc),const(1))".to_string(),
            "op2(c,eq,var(opcode),const(jump_if_a))".to_string(),
            "guard_false(c,[],op_jump_if_a)".to_string(),
        ]
    );
    assert_eq!(
        lines[lines.len() - 10..lines.len() - 1],
        [
            "guard_value(pc,9,[],bytecode_loop_promote_pc)",
            "op2(opcode,readlist,var(bytecode),var(pc))",
            "op2(pc,add,var(pc),const(1))",
            "op2(c,eq,var(opcode),const(jump_if_a))",
            "guard_true(c,[],not_jump_if_a)",
            "op2(c,eq,var(a),const(0))",
            "op2(target,readlist,var(bytecode),var(pc))",
            "op2(pc,add,var(pc),const(1))",
            "guard_false(c,[],bytecode_loop)",
        ]
    );
    assert_eq!(lines.last(), Some(&"loop"));
}

#[test]
fn the_articles_notation_quotes_atoms_and_names_as_prolog_does() {
    let path = std::env::temp_dir().join(format!("flowjit-quoted-{}.fg", std::process::id()));
    let program = "start:\n    goto Loop\nLoop:\n    N = N - 1\n    t = 'x y'\n    \
                   u = 'jump_if_a'\n    if N goto Loop else goto done\ndone:\n    \
                   print(u)\n    print_and_stop(t)\n";
    std::fs::write(&path, program).expect("a writable temporary file");
    let file = path.to_string_lossy().to_string();
    let (out, err) = flowjit(&[
        "trace",
        &file,
        "--from",
        "Loop",
        "N=10",
        "--dump",
        "trace,opt",
    ]);
    let _ = std::fs::remove_file(&path);
    assert_eq!(out, "jump_if_a\n'x y'\n");
    let trace = err.split("# opt").next().expect("the trace dump");
    assert_eq!(
        trace,
        "# trace 0: loop at Loop\n\
         op2('N',sub,var('N'),const(1))\n\
         op1(t,same,const('x y'))\n\
         op1(u,same,const(jump_if_a))\n\
         guard_true('N',[],done)\n\
         loop\n"
    );
    // The SSA form names variables as the program does, and prints atoms as above.
    assert!(err.contains("[t='x y', u=jump_if_a]"), "{err}");
}

/// The dumps of `flowjit bytecode examples/square.bc` with the optimizer off, so that the
/// `opt` dump keeps the dispatch: each dump's sections (a header line starting with `#`,
/// then what follows up to the next one).
fn square_dumps() -> Vec<(String, String)> {
    let (out, err) = flowjit(&[
        "bytecode",
        "examples/square.bc",
        "a=100",
        "--no-opt",
        "--dump",
        "trace,opt",
        "--stats",
    ]);
    assert_eq!(out, "10000\n");
    let mut sections: Vec<(String, String)> = Vec::new();
    for line in err.lines() {
        match sections.last_mut() {
            Some((_, body)) if !line.starts_with('#') => {
                body.push_str(line);
                body.push('\n');
            }
            _ => sections.push((line.to_string(), String::new())),
        }
    }
    sections
}

#[test]
fn the_bytecode_list_prints_once_in_each_dump_and_atoms_print_bare_in_all() {
    let list = &SQUARE["bytecode=".len()..];
    let sections = square_dumps();
    let section = |prefix: &str| -> &str {
        sections
            .iter()
            .find(|(h, _)| h.starts_with(prefix))
            .map(|(_, body)| body.as_str())
            .unwrap_or_else(|| panic!("no `{prefix}` section in {sections:?}"))
    };
    let greens = "loop at bytecode_loop with greens ([mov_a_r0,mov_a_r1,mo..., 2)";
    assert_eq!(sections[0].0, format!("# trace 0: {greens}"));
    assert_eq!(sections[1].0, format!("# opt 0: {greens}"));
    // The articles' notation: the list as a comment line before the operations, then `k0`.
    let trace = section("# trace 0");
    assert!(trace.starts_with(&format!("% k0 = {list}\nguard_value(bytecode,k0,[],")));
    assert_eq!(trace.matches(list).count(), 1, "{trace}");
    assert!(trace.contains("\nop2(c,eq,var(opcode),const(jump_if_a))\n"));
    // The SSA form: the list after the inputs, then `k0`; the atom bare, as above.
    let opt = section("# opt 0");
    let mut lines = opt.lines();
    assert!(lines.next().is_some_and(|l| l.starts_with('[')), "{opt}");
    assert_eq!(lines.next(), Some(format!("k0 = {list}").as_str()));
    assert!(lines
        .next()
        .is_some_and(|l| l.starts_with("g0: guard_value k0, k0  @")));
    assert_eq!(opt.matches(list).count(), 1, "{opt}");
    assert!(
        opt.contains(":int = eq v2, jump_if_a\ng5: guard_false v4  @"),
        "{opt}"
    );
    // It reads back as it is.
    let (parsed, names) = parse_ssa(opt).unwrap_or_else(|e| panic!("{e}\n{opt}"));
    assert_eq!(print::ssa(&names, &parsed), opt);
    // The statistics name each exit's guard as the dump does, its constants shortened.
    let stats = section("# stats");
    let exits = stats
        .lines()
        .skip_while(|l| !l.starts_with("exits: "))
        .skip(1)
        .take_while(|l| l.starts_with("  trace "))
        .collect::<Vec<_>>();
    assert!(!exits.is_empty(), "{stats}");
    for exit in exits {
        let inst = exit["  trace 0 ".len()..]
            .rsplit_once(": ")
            .expect("a count")
            .0;
        let name = inst.split(':').next().expect("a name");
        assert!(name.starts_with('g'), "{exit}");
        let printed = opt
            .lines()
            .find(|l| l.starts_with(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no {name} in the dump"));
        assert_eq!(printed, inst.replace("[mov_a_r0,mov_a_r1,mo...", "k0"));
    }
    for (header, body) in &sections {
        assert!(!header.contains("'jump_if_a'") && !body.contains("'jump_if_a'"));
    }
}

/// Takes over at the first back edge to any label, or to a label that has a trace.
struct FirstBackEdge<'a> {
    traced: &'a [Option<usize>],
    tried: &'a [bool],
}

impl Monitor for FirstBackEdge<'_> {
    fn back_edge(&mut self, _from: BlockId, target: BlockId) -> bool {
        self.traced[target.index()].is_some() || !self.tried[target.index()]
    }
}

/// Runs the interpreter alone for exactly `used` operations from the case's start, and
/// returns its frame and the block it stopped in.
fn oracle(
    program: &Program,
    entry: BlockId,
    inputs: &[(flowjit::lang::Slot, flowjit_runtime::Value)],
    used: u64,
) -> (flowjit::state::Frame, Option<String>) {
    let mut state = flowjit::state::State::with_frame(flowjit::state::frame_with(program, inputs));
    let mut steps = Steps::new(Some(used));
    let r = interp::run(
        program,
        &mut state,
        Position::start(entry),
        &mut steps,
        &mut NoMonitor,
    );
    let block = match r {
        Err(e) => Some(e.block),
        Ok(_) => None,
    };
    (state.frame, block)
}

/// Whether two values are equal, arrays compared by their contents (to a bounded depth),
/// each pair of arrays once: arrays that hold themselves, or each other twice, are compared
/// in time linear in their elements.
fn same_contents(a: &flowjit_runtime::Value, b: &flowjit_runtime::Value) -> bool {
    use std::collections::HashSet;
    fn go(
        a: &flowjit_runtime::Value,
        b: &flowjit_runtime::Value,
        depth: u32,
        seen: &mut HashSet<(usize, usize)>,
    ) -> bool {
        use flowjit_runtime::Value;
        match (a, b) {
            _ if depth == 0 => true,
            (Value::Array(x), Value::Array(y)) => {
                let pair = (
                    std::rc::Rc::as_ptr(x) as usize,
                    std::rc::Rc::as_ptr(y) as usize,
                );
                if !seen.insert(pair) {
                    // Being compared, or compared already: what differs is found there.
                    return true;
                }
                x.len() == y.len()
                    && x.to_vec()
                        .iter()
                        .zip(&y.to_vec())
                        .all(|(p, q)| go(p, q, depth - 1, seen))
            }
            (Value::List(x), Value::List(y)) => {
                x.items().len() == y.items().len()
                    && x.items()
                        .iter()
                        .zip(y.items())
                        .all(|(p, q)| go(p, q, depth - 1, seen))
            }
            _ => a == b,
        }
    }
    go(a, b, 64, &mut HashSet::new())
}

/// Drives interpreter and traces by hand (tracing every loop at its first back edge) and,
/// after every guard exit, compares every variable live where the interpreter resumes with
/// what the interpreter alone holds after the same number of operations, and the block it
/// would run next.
#[test]
fn after_every_exit_every_live_variable_holds_what_the_interpreter_alone_gives_it() {
    exits_match_the_interpreter(&[], false);
}

#[test]
fn after_every_exit_of_an_optimized_trace_every_live_variable_holds_what_the_interpreter_alone_gives_it(
) {
    exits_match_the_interpreter(flowjit::opt::PIPELINE, false);
}

#[test]
fn after_every_exit_from_machine_code_every_live_variable_holds_what_the_interpreter_alone_gives_it(
) {
    exits_match_the_interpreter(flowjit::opt::PIPELINE, true);
}

fn exits_match_the_interpreter(passes: &[flowjit::opt::Pass], native: bool) {
    let mut native_exits = 0;
    let mut exits_checked = 0;
    for case in common::cases() {
        let common::Loaded {
            program,
            entry,
            inputs,
            ..
        } = common::load(&case);
        let n = program.blocks.len();
        let mut state =
            flowjit::state::State::with_frame(flowjit::state::frame_with(&program, &inputs));
        let mut steps = Steps::new(None);
        let mut traced: Vec<Option<usize>> = vec![None; n];
        let mut tried = vec![false; n];
        let mut traces: Vec<Trace> = Vec::new();
        let mut backend =
            flowjit::backend::Backend::new(None, flowjit::jit::Policy::DEFAULT.backend_limits())
                .expect("a supported host");
        let mut compiled: Vec<Option<flowjit::backend::Compiled>> = Vec::new();
        let mut pos = Position::start(entry);
        let what = format!("{} {}", case.file.display(), case.args.join(" "));
        // The oracle interprets from the start each time: the first exits of each case are
        // checked, which covers every kind of guard the programs have.
        let mut checked_here = 0;
        while checked_here < 25 {
            let mut monitor = FirstBackEdge {
                traced: &traced,
                tried: &tried,
            };
            let anchor = match interp::run(&program, &mut state, pos, &mut steps, &mut monitor) {
                Ok(Exit::Hot(anchor)) => anchor,
                Ok(Exit::Stop(_) | Exit::Return(_)) | Err(_) => break,
                Ok(Exit::Called(_)) => unreachable!("this monitor takes over at back edges"),
            };
            let index = match traced[anchor.index()] {
                Some(i) => i,
                None => {
                    tried[anchor.index()] = true;
                    match trace::record(
                        &program,
                        &mut state,
                        anchor,
                        &[],
                        &mut trace::Interpreted::new(&program),
                        &mut steps,
                        4000,
                        true,
                    ) {
                        Ok(Recorded::Loop(t)) => {
                            assert_eq!(trace::verify::verify(&t), Ok(()), "{what}");
                            let Ok(t) = flowjit::opt::optimize_counted(&t, passes) else {
                                // Rejected: the frame is at the anchor; interpret on.
                                pos = Position::start(anchor);
                                continue;
                            };
                            assert_eq!(trace::verify::verify(&t), Ok(()), "{what}");
                            let code = native
                                .then(|| {
                                    let segments = [flowjit::backend::Segment::root(&t)];
                                    let frame = program.frame_size();
                                    let mut unit =
                                        flowjit::backend::Unit::tree(&segments, &[], frame);
                                    (unit.at, unit.counting) = ((traces.len(), 0), true);
                                    unit.tuning.quick = false;
                                    backend.compile(unit, Default::default()).ok()
                                })
                                .flatten();
                            compiled.push(code);
                            traces.push(t);
                            traced[anchor.index()] = Some(traces.len() - 1);
                            traces.len() - 1
                        }
                        Ok(Recorded::Aborted { at, .. }) => {
                            pos = at;
                            continue;
                        }
                        Ok(Recorded::Stopped(_)) | Err(_) => break,
                    }
                }
            };
            let by_machine_code = compiled[index].as_ref().and_then(|_| {
                let find = |(k, _): (usize, usize)| flowjit::backend::TreeCode {
                    code: compiled[k].as_ref().expect("compiled"),
                    tree: &traces[k],
                    alone: None,
                    start: Position::start(traces[k].anchor),
                };
                backend.run((index, 0), &find, &program, &mut state, &mut steps, None)
            });
            if by_machine_code.is_some() {
                native_exits += 1;
            }
            let (exit_pos, ended) = match by_machine_code {
                Some(exit) => (exit.pos, exit.ended.is_some()),
                None => {
                    let mut env = trace::Env::new(&program, &mut state, &mut steps);
                    let pos = trace::run_trace(&traces[index], &mut env).pos;
                    (pos, env.ended.is_some())
                }
            };
            if ended {
                // The program ended inside a call the trace made: no frame to compare.
                break;
            }
            let used = steps.used();
            let (expected, block) = oracle(&program, entry, &inputs, used);
            // Arrays are compared by their contents: the oracle's are other arrays. A
            // variable not live where the interpreter resumes is never read before it is
            // written again, and an exit leaves it as it is (`lang::liveness`).
            let live = program.live_at(exit_pos.block, exit_pos.inst);
            let same = state.frame.len() == expected.len()
                && state
                    .frame
                    .iter()
                    .zip(&expected)
                    .enumerate()
                    .filter(|(slot, _)| live.contains(flowjit::lang::program::Slot(*slot as u32)))
                    .all(|(_, (a, b))| match (a, b) {
                        (Some(a), Some(b)) => same_contents(a, b),
                        (a, b) => a.is_none() && b.is_none(),
                    });
            assert!(
                same,
                "{what}: frame after exit at {exit_pos:?} ({used} operations)\n  got:  {:?}\n  want: {expected:?}",
                state.frame
            );
            assert_eq!(
                block.as_deref(),
                Some(program.label(exit_pos.block)),
                "{what}: the interpreter continues elsewhere"
            );
            exits_checked += 1;
            checked_here += 1;
            pos = exit_pos;
        }
    }
    assert!(exits_checked > 100, "only {exits_checked} exits checked");
    if native {
        assert!(
            native_exits > 50,
            "only {native_exits} exits from machine code"
        );
    }
}

#[test]
fn the_ssa_form_reads_back_as_the_same_trace() {
    let mut seen = 0;
    for case in common::cases() {
        let common::Loaded {
            program,
            entry,
            inputs,
            ..
        } = common::load(&case);
        let mut state =
            flowjit::state::State::with_frame(flowjit::state::frame_with(&program, &inputs));
        let mut steps = Steps::new(None);
        // Trace the first loop the run reaches.
        struct First;
        impl Monitor for First {
            fn back_edge(&mut self, _: BlockId, _: BlockId) -> bool {
                true
            }
        }
        let Ok(Exit::Hot(anchor)) = interp::run(
            &program,
            &mut state,
            Position::start(entry),
            &mut steps,
            &mut First,
        ) else {
            continue;
        };
        let Ok(Recorded::Loop(t)) = trace::record(
            &program,
            &mut state,
            anchor,
            &[],
            &mut trace::Interpreted::new(&program),
            &mut steps,
            4000,
            true,
        ) else {
            continue;
        };
        let text = print::ssa(&program, &t);
        let (parsed, names) = parse_ssa(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        // The text names variables and labels itself: the same trace up to their numbers.
        assert_eq!(print::ssa(&names, &parsed), text);
        assert_eq!(parsed.insts.len(), t.insts.len());
        // Operands compared as the text shows them: an array read from text is another
        // array with the same elements.
        let shown = |args: &[flowjit::trace::Opnd]| -> Vec<String> {
            args.iter().map(print::opnd).collect()
        };
        for (p, r) in parsed.insts.iter().zip(&t.insts) {
            assert_eq!(
                (p.ty, shown(&p.args), p.snap),
                (r.ty, shown(&r.args), r.snap),
                "{text}"
            );
        }
        seen += 1;
    }
    assert!(seen > 20, "only {seen} traces");
}

#[test]
fn the_verifier_rejects_broken_traces() {
    let good = "[res:int, x:int]\n\
                v0:int = input res  @power_rec:0 #0 []\n\
                v1:int = input x  @power_rec:0 #0 []\n\
                v2:int = mul v0, v1  @power_rec:0 #0 []\n\
                loop  @power_rec:0 #1 [res=v2]\n";
    assert!(parse_ssa(good).is_ok());
    let use_before_def = good.replace("mul v0, v1", "mul v0, v2");
    assert_eq!(
        parse_ssa(&use_before_def).unwrap_err(),
        "line 4: `v2` is used before it is defined"
    );
    let no_snapshot = good.replace("loop  @", "guard_true v2\nloop  @");
    assert_eq!(
        parse_ssa(&no_snapshot).unwrap_err(),
        "g3: guard_true needs a snapshot"
    );
    let no_loop = good.lines().take(4).collect::<Vec<_>>().join("\n");
    assert!(parse_ssa(&no_loop).is_err());
    let arity = good.replace("mul v0, v1", "mul v0");
    assert_eq!(
        parse_ssa(&arity).unwrap_err(),
        "v2: mul takes 2 operands, has 1"
    );
    // Types: each value states its own, the one its kind gives; inputs as declared.
    let wrong_type = good.replace("v2:int = mul", "v2:atom = mul");
    assert_eq!(
        parse_ssa(&wrong_type).unwrap_err(),
        "v2: mul is of type int, not atom"
    );
    let untyped = good.replace("v2:int = mul", "v2 = mul");
    assert!(parse_ssa(&untyped)
        .unwrap_err()
        .contains("`v2` needs its type"));
    let undeclared = good.replace("[res:int, x:int]", "[res:int]");
    assert_eq!(
        parse_ssa(&undeclared).unwrap_err(),
        "line 3: input `x` is not declared in the first line"
    );
    let mistyped = good.replace("x:int]", "x:list]");
    assert_eq!(
        parse_ssa(&mistyped).unwrap_err(),
        "line 3: input `x` is declared list, read as int"
    );
}
