//! Meta-tracing and bridges: what the JIT makes of an interpreter written in the flowgraph
//! language, and of loops that branch.

mod common;

use common::flowjit_ok as flowjit;

const SQUARE: &str = "bytecode=[mov_a_r0,mov_a_r1,mov_r0_a,decr_a,mov_a_r0,mov_r2_a,add_r1_to_a,mov_a_r2,mov_r0_a,jump_if_a,2,mov_r2_a,return_a]";

/// The number after `prefix` on the stats line that starts with it.
fn stat(err: &str, prefix: &str) -> u64 {
    let line = err
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` in {err}"));
    line[prefix.len()..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number in `{line}`"))
}

#[test]
fn with_only_promote_hints_the_interpreter_makes_one_instruction_traces() {
    // The articles' point: traced from the dispatch loop, a trace covers one bytecode, and its
    // second iteration would need another pc. The optimizer proves that and rejects them.
    let (out, err) = flowjit(&[
        "run",
        "tests/programs/regmachine.pl",
        "--entry",
        "bytecode_loop",
        SQUARE,
        "pc=0",
        "a=100",
        "r0=0",
        "r1=0",
        "r2=0",
        "--stats",
    ]);
    assert_eq!(out, "10000\n");
    assert_eq!(stat(&err, "traces recorded: "), 0, "{err}");
    assert_eq!(stat(&err, "traces rejected by the optimizer: "), 4, "{err}");
    assert!(err.contains("  at bytecode_loop: guard_value("), "{err}");
}

#[test]
fn with_merge_point_hints_the_bytecode_loop_is_one_trace_in_machine_code() {
    let (out, err) = flowjit(&[
        "bytecode",
        "examples/square.bc",
        "a=100000",
        "--stats",
        "--dump",
        "opt",
    ]);
    assert_eq!(out, "10000000000\n");
    assert_eq!(stat(&err, "traces recorded: "), 1, "{err}");
    assert_eq!(stat(&err, "traces compiled to machine code: "), 1, "{err}");
    assert!(
        err.contains("  trace 0: loop at bytecode_loop with greens ([mov_a_r0,mov_a_r1,mo..., 2)"),
        "{err}"
    );
    // The loop body after loop_start: no dispatch left.
    let body: Vec<&str> = err
        .lines()
        .skip_while(|l| !l.starts_with("loop_start"))
        .skip(1)
        .take_while(|l| !l.starts_with('#'))
        .filter(|l| !l.contains(" = param "))
        .map(|l| l.split("  @").next().unwrap_or(l))
        .collect();
    assert_eq!(
        body,
        [
            "v10:int = sub v8, 1",
            "v11:int = add v9, v3",
            "v12:int = eq v10, 0",
            "g13: guard_false v12",
            "loop v10, v11"
        ]
    );
}

/// With the greens constant, the interpreter's dispatch is done as it is recorded: the
/// recorded trace of `square.bc`'s loop holds the bytecodes' work and the one guard of
/// `jump_if_a`, and no read of the bytecode list, no test of an opcode, no `promote`
/// (`Recorder::folds`). With the optimizer off, every operation is recorded.
#[test]
fn the_dispatch_on_constant_greens_is_not_recorded() {
    let dump = |extra: &[&str]| {
        let mut args = vec!["bytecode", "examples/square.bc", "a=100", "--dump", "trace"];
        args.extend_from_slice(extra);
        let (out, err) = flowjit(&args);
        assert_eq!(out, "10000\n");
        err.lines()
            .skip(1)
            .take_while(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        dump(&[]),
        [
            "op1(a,same,var(r0))",
            "op2(a,sub,var(a),const(1))",
            "op1(r0,same,var(a))",
            "op1(a,same,var(r2))",
            "op2(a,add,var(a),var(r1))",
            "op1(r2,same,var(a))",
            "op1(a,same,var(r0))",
            "op2(c,eq,var(a),const(0))",
            "guard_false(c,[],bytecode_loop)",
            "loop",
        ]
    );
    let unfolded = dump(&["--no-opt"]);
    assert!(unfolded.len() > 40, "{unfolded:?}");
    assert!(unfolded.contains(&"op2(opcode,readlist,var(bytecode),var(pc))".to_string()));
}

#[test]
fn a_branching_loop_stays_in_machine_code_through_its_bridge() {
    let exits = |n: &str| {
        let (out, err) = flowjit(&["run", "tests/programs/branchy.fg", n, "--stats"]);
        assert!(err.contains("1 bridge(s), machine code"), "{err}");
        (out, stat(&err, "exits: "))
    };
    let (small, few) = exits("n=10000");
    let (large, same) = exits("n=200000");
    assert_eq!(
        (small.as_str(), large.as_str()),
        ("25000000\n", "10000000000\n")
    );
    // Exits to the interpreter do not grow with the number of iterations.
    assert_eq!(few, same);
    assert!(few < 30, "{few} exits");
}

/// A loop whose two ways alternate (a flag each way sets as a constant): a body peeled after
/// the recorded way cannot take it again, and was rejected, leaving the loop to the
/// interpreter. Its body now assumes nothing of the preamble, and the other way is a bridge.
#[test]
fn a_loop_whose_ways_alternate_runs_in_machine_code() {
    let (out, err) = flowjit(&[
        "run",
        "tests/programs/alternate.fg",
        "n=100000",
        "--stats",
        "--dump",
        "opt",
    ]);
    assert_eq!(out, "200000\n");
    // The dump says why, and the body's guard on the flag reads a `param`, not a constant.
    assert!(
        err.contains(
            "# (its body assumes nothing of the preamble: peeled, guard_true on 0 always fails)"
        ),
        "{err}"
    );
    assert!(err.contains(": guard_true v11  @even:0"), "{err}");
    assert!(err.contains("v11:int = param f"), "{err}");
    assert_eq!(stat(&err, "traces rejected by the optimizer: "), 0, "{err}");
    assert_eq!(
        stat(&err, "loops whose body assumes nothing of the preamble: "),
        1,
        "{err}"
    );
    assert!(err.contains("1 bridge(s), machine code"), "{err}");
    // The driver enters the tree a few times, not once every other iteration.
    assert!(stat(&err, "exits: ") < 30, "{err}");
}

#[test]
fn a_promoted_variable_that_varies_gets_one_specialization_per_value_up_to_a_limit() {
    // x = i // 1000 takes the values 0..=19: the guard on it gets bridges for values up to
    // the limit of 8 specializations, then one unspecialized bridge that every other value
    // takes, so that nothing exits to the interpreter any more.
    let (out, err) = flowjit(&[
        "run",
        "tests/programs/promote_varies.fg",
        "n=20000",
        "--stats",
        "--dump",
        "opt",
    ]);
    assert_eq!(out, "190000000\n");
    let specialized = err
        .lines()
        .filter(|l| l.starts_with("# bridge ") && l.contains(", for "))
        .count();
    assert_eq!(specialized, 8, "{err}");
    for value in 1..=8 {
        assert!(
            err.contains(&format!(", for {value}\n")),
            "no bridge for {value}: {err}"
        );
    }
    let unspecialized = err
        .lines()
        .filter(|l| l.starts_with("# bridge ") && l.ends_with(", unspecialized"))
        .count();
    assert_eq!(unspecialized, 1, "{err}");
    // The values past the eighth cost no exit: 20 values, a few exits before each bridge.
    assert!(stat(&err, "exits: ") < 40, "{err}");
}

#[test]
fn a_promotion_that_sees_many_values_stays_in_machine_code() {
    // v cycles through 100 values: past 8 specializations, the unspecialized bridge takes
    // them all, and the loop stays in machine code (not one exit per iteration).
    let (out, err) = flowjit(&[
        "run",
        "tests/programs/promote_many.fg",
        "n=200000",
        "--stats",
    ]);
    assert_eq!(out, "9900000\n");
    assert!(stat(&err, "exits: ") < 100, "{err}");
    assert!(err.contains("machine code"), "{err}");
}

#[test]
fn bridges_show_in_the_dumps() {
    let (_, err) = flowjit(&[
        "run",
        "tests/programs/branchy.fg",
        "n=1000",
        "--dump",
        "trace",
        "--bridge-threshold",
        "5",
    ]);
    assert!(err.contains("# trace 0: loop at loop\n"), "{err}");
    let bridge = err
        .lines()
        .find(|l| l.starts_with("# bridge 0 from trace 0 g"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(bridge.ends_with(" to loop"), "{bridge}");
}

/// The `--dump asm` listings in `err`, each as its header and its lines.
fn asm_listings(err: &str) -> Vec<(&str, Vec<&str>)> {
    let mut listings: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut inside = false;
    for line in err.lines() {
        if line.starts_with("# ") {
            inside = line.starts_with("# asm ");
            if inside {
                listings.push((line, Vec::new()));
            }
        } else if inside {
            listings.last_mut().expect("a listing").1.push(line);
        }
    }
    listings
}

#[test]
fn asm_listings_show_jump_tables_as_data_and_go_on_to_the_end() {
    // Four specialized bridges on one guard_value: a switch with a jump table.
    for target in ["x86_64", "aarch64"] {
        let (out, err) = flowjit(&[
            "run",
            "tests/programs/promote_cycles.fg",
            "n=20000",
            "--dump",
            "asm",
            "--target",
            target,
        ]);
        assert_eq!(out, "40000\n");
        let listings = asm_listings(&err);
        // The last bridge, compiled into its tree's function, shows its code and the
        // guard it hangs from, whose dispatch on the value is a jump table.
        let (header, last) = listings.last().expect("a listing");
        assert!(header.contains(", in the tree's function"), "{header}");
        let listing = last.join("\n");
        assert!(listing.contains("  ; jump table\n"), "{target}:\n{listing}");
        let addresses: Vec<&str> = last
            .iter()
            .filter_map(|l| l.trim().split(':').next())
            .filter(|a| a.starts_with("0x"))
            .collect();
        let mut to_bridge = 0;
        for l in last {
            // Garbage: bytes capstone cannot decode, zeros (x86_64 `addb %al, (%rax)`) or
            // table entries (aarch64 `udf`) decoded as instructions.
            for bad in [".byte", "addb     %al, (%rax)", "udf"] {
                assert!(!l.contains(bad), "{target}: `{l}` in\n{listing}");
            }
            // An entry of the table leads to the bridge's code (the others to the rest of
            // the function, which this listing leaves out; the listing's unit tests check
            // that every entry of a whole function's table leads to an instruction).
            if let Some(dest) = l.split("; -> ").nth(1) {
                to_bridge += addresses.contains(&dest) as usize;
            }
        }
        assert!(
            to_bridge > 0,
            "{target}: no entry leads to the bridge\n{listing}"
        );
        // A whole function's listing goes on to its end.
        for (_, lines) in listings.iter().filter(|(h, _)| !h.contains(" bridge ")) {
            let end = lines.last().expect("a line");
            assert!(
                ["ret", ".quad", ".long"]
                    .iter()
                    .any(|m| end.contains(&format!(": {m}"))),
                "{target}: the listing ends with `{end}`"
            );
        }
    }
}

/// Three interpreters, each with a merge point of its own (SPEC §4), one calling the next
/// (`tests/programs/merge_points.fg`): each dispatch loop gets a trace keyed by its own
/// greens, compiled to machine code, and the run prints what the interpreter prints.
#[test]
fn each_merge_point_keys_the_traces_of_its_own_loop() {
    let run = [
        "run",
        "tests/programs/merge_points.fg",
        "which=three",
        "n=40",
        "m=30",
    ];
    let (want, _) = flowjit(&[&run[..], &["--mode", "interp"]].concat());
    let (out, err) = flowjit(&[&run[..], &["--stats"]].concat());
    assert_eq!(out, want);
    for anchor in [
        "loop at inner_loop with greens ([dbl,inc,inc,loop], 0)",
        "loop at middle_loop with greens ([call,step,again], 0)",
        "loop at outer with greens ([add,1,deep,dec,jnz,0..., 0)",
    ] {
        assert!(
            err.lines()
                .any(|l| l.contains(anchor) && l.ends_with("machine code")),
            "{anchor}:\n{err}"
        );
    }
}
