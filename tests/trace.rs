//! The tracer: the articles' traces, and the exactness of every guard exit.

mod common;

use common::flowjit_ok as flowjit;

use flowjit::interp::{self, Exit, Monitor, NoMonitor};
use flowjit::lang::{BlockId, Program};
use flowjit::state::{Position, Steps};
use flowjit::trace::{self, parse::parse_ssa, print, Recorded, Trace};

const SQUARE: &str = "bytecode=[mov_a_r0,mov_a_r1,mov_r0_a,decr_a,mov_a_r0,mov_r2_a,add_r1_to_a,mov_a_r2,mov_r0_a,jump_if_a,2,mov_r2_a,return_a]";

fn golden(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/golden/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("golden file")
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
    assert_eq!(err, golden("power_rec.trace"));
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
    assert_eq!(err, golden("regmachine_square.trace"));
    // The beginning and the end as the article prints them.
    let lines: Vec<&str> = err.lines().collect();
    let list = &SQUARE["bytecode=".len()..];
    assert_eq!(
        lines[1..9],
        [
            "op1(pc,same,var(target))".to_string(),
            format!("guard_value(bytecode,{list},[],bytecode_loop)"),
            format!("guard_value(bytecode,{list},[],bytecode_loop_promote_bytecode)"),
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

/// A trace as the only segment of a tree.
fn root(trace: &Trace) -> flowjit::backend::Segment<'_> {
    flowjit::backend::Segment {
        trace,
        parent: None,
        value: None,
        returns: false,
        cost: 0,
        separate: false,
        ints: true,
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

/// Whether two values are equal, arrays compared by their contents (to a bounded depth, for
/// arrays that hold themselves).
fn same_contents(a: &flowjit_runtime::Value, b: &flowjit_runtime::Value) -> bool {
    fn go(a: &flowjit_runtime::Value, b: &flowjit_runtime::Value, depth: u32) -> bool {
        use flowjit_runtime::Value;
        match (a, b) {
            _ if depth == 0 => true,
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len()
                    && x.to_vec()
                        .iter()
                        .zip(&y.to_vec())
                        .all(|(p, q)| go(p, q, depth - 1))
            }
            (Value::List(x), Value::List(y)) => {
                x.items().len() == y.items().len()
                    && x.items()
                        .iter()
                        .zip(y.items())
                        .all(|(p, q)| go(p, q, depth - 1))
            }
            _ => a == b,
        }
    }
    go(a, b, 64)
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

fn exits_match_the_interpreter(passes: &[&str], native: bool) {
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
        let mut backend = flowjit::backend::Backend::new(None).expect("a supported host");
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
                        &|_, _| false,
                        &mut steps,
                        4000,
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
                                    let (tree, frame) = (traces.len(), program.frame_size());
                                    backend
                                        .compile(
                                            &[root(&t)],
                                            Default::default(),
                                            true,
                                            (tree, 0),
                                            frame,
                                        )
                                        .ok()
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
                    segments: vec![root(&traces[k])],
                    start: Position::start(traces[k].anchor),
                };
                backend.run((index, 0), &find, &program, &mut state, &mut steps)
            });
            if by_machine_code.is_some() {
                native_exits += 1;
            }
            let exit_pos = match by_machine_code {
                Some(exit) => exit.pos,
                None => {
                    let mut env = trace::Env {
                        program: &program,
                        state: &mut state,
                        steps: &mut steps,
                    };
                    trace::run_trace(&traces[index], &mut env).pos
                }
            };
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
            &|_, _| false,
            &mut steps,
            4000,
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
        "v3: guard_true needs a snapshot"
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
