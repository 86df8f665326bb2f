//! The library facade (`flowjit::embed`, SPEC §7): what a run gives back as values, under
//! every mode, with the command line's messages.

use std::io::Cursor;

use flowjit::embed::{Error, Mode, Program, Syntax, Value};

/// Counts to `n`, printing every 1000th, then reads a byte of input and returns the count
/// times 1000 plus the byte.
const COUNT: &str = "\
start:
    i = 0
    goto head
head:
    c = i < n
    if c goto body else goto done
body:
    m = i % 1000
    z = m == 0
    i = i + 1
    if z goto show else goto head
show:
    print(i)
    goto head
done:
    b = getchar()
    r = i * 1000
    r = r + b
    print_and_stop(r)
";

fn count() -> Program {
    Program::parse("count.fg", COUNT, Syntax::Fg).expect("a valid program")
}

#[test]
fn every_mode_gives_the_interpreters_value_output_and_input() {
    let program = count();
    for mode in [Mode::Interp, Mode::Trace, Mode::Jit] {
        for threshold in [None, Some(1)] {
            let mut run = program
                .run()
                .input("n", Value::Int(5000))
                .mode(mode)
                .stdin(Cursor::new(b"A".to_vec()));
            if let Some(t) = threshold {
                run = run.threshold(t);
            }
            let out = run.go();
            assert_eq!(
                out.result,
                Ok(Value::Int(5_000_065)),
                "{mode:?} {threshold:?}"
            );
            assert_eq!(out.output, b"1\n1001\n2001\n3001\n4001\n", "{mode:?}");
            assert_eq!(out.stats.is_some(), mode != Mode::Interp, "{mode:?}");
        }
    }
    // Hot at threshold 1: the JIT entered the loop's trace (in machine code once Cranelift,
    // on its own thread, has compiled it; on the trace interpreter until then).
    let out = program.run().input("n", Value::Int(5000)).threshold(1).go();
    assert!(out.stats.expect("statistics").entries > 0);
}

#[test]
fn errors_are_the_command_lines_and_keep_what_was_printed() {
    let err = Program::parse("bad.fg", "a:\n    x = \n", Syntax::Fg)
        .err()
        .expect("invalid");
    assert!(matches!(err, Error::Invalid(_)), "{err:?}");
    assert!(err.to_string().starts_with("bad.fg:2:"), "{err}");
    assert_eq!(err.exit_status(), 2);
    let program = count();
    let err = program
        .run()
        .input("nope", Value::Int(1))
        .go()
        .result
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "error: input `nope` is not a variable of the program"
    );
    let err = program.run().entry("nowhere").go().result.unwrap_err();
    assert_eq!(
        err,
        Error::Usage("no block is labelled `nowhere`".to_string())
    );
    // `n` is an atom at the comparison: the interpreter's type error, after the output.
    for mode in [Mode::Interp, Mode::Jit] {
        let out = program.run().input("n", Value::atom("ten")).mode(mode).go();
        let err = out.result.unwrap_err();
        assert_eq!(err.exit_status(), 1);
        assert_eq!(
            err.to_string(),
            "error: type error: lt expects integers, got the atom ten (in block head)"
        );
        assert!(out.output.is_empty());
    }
    let out = program
        .run()
        .input("n", Value::Int(100_000))
        .max_steps(9000)
        .go();
    assert!(out
        .result
        .unwrap_err()
        .to_string()
        .starts_with("error: step limit reached"));
    assert_eq!(
        out.output, b"1\n1001\n",
        "the output before the limit is kept"
    );
}
