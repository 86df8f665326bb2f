//! Bad inputs never panic and never lose work: each gets a clear message and exit status 2
//! (bad usage or program) or 1 (a runtime error). This table is the one in
//! docs/RELIABILITY.md.

mod common;

/// (what, file name, file contents, extra arguments, start of stderr, exit status)
type Row = (
    &'static str,
    &'static str,
    Vec<u8>,
    Vec<&'static str>,
    &'static str,
    i32,
);

fn rows() -> Vec<Row> {
    let deep =
        |n: usize| format!("a: print_and_stop({}{})", "[".repeat(n), "]".repeat(n)).into_bytes();
    vec![
        ("an empty program", "e.fg", b"".to_vec(), vec![], "FILE:1:1: error: the program has no blocks", 2),
        ("bytes that are not UTF-8", "b.fg", vec![0xff, 0xfe, 0x00], vec![], "error: cannot read FILE: stream did not contain valid UTF-8", 2),
        ("a character outside the syntax", "c.fg", b"a: x = 1 ? 2".to_vec(), vec![], "FILE:1:10: error: unexpected character `?`", 2),
        ("an unterminated quoted atom", "q.fg", b"a: print_and_stop('abc)\n".to_vec(), vec![], "FILE:1:19: error: unterminated quoted atom", 2),
        ("a block without a terminator", "t.fg", b"a: x = 1\nb: goto a\n".to_vec(), vec![], "FILE:1:1: error: block `a` has no terminator", 2),
        ("a keyword as a variable", "k.fg", b"a: goto = 1 goto a".to_vec(), vec![], "FILE:1:9: error: expected a label after `goto`, found `=`", 2),
        ("lists nested 100000 deep", "d.fg", deep(100_000), vec![], "FILE:1:10019: error: lists nested more than 10000 deep", 2),
        ("a rule whose head is block/2 is skipped, leaving nothing", "r.pl", b"block(X, Y) :- foo(X, Y).\n".to_vec(), vec![], "FILE:1:1: error: the program has no blocks", 2),
        ("a Prolog variable inside a block", "v.pl", b"block(a, print_and_stop(const(X))).\n".to_vec(), vec![], "FILE:1:31: error: expected a constant (an integer, an atom or a list), found the Prolog variable `X`", 2),
        ("an input that is not NAME=VALUE", "p.fg", b"a: print_and_stop(x)".to_vec(), vec!["x"], "error: input `x` is not of the form NAME=VALUE", 2),
        ("an input value that does not parse", "p.fg", b"a: print_and_stop(x)".to_vec(), vec!["x=)("], "input x:1:1: error: expected a term, found `)`", 2),
        ("an input given twice", "p.fg", b"a: print_and_stop(x)".to_vec(), vec!["x=1", "x=2"], "error: input `x` is given twice", 2),
        ("an input for a variable the program lacks", "p.fg", b"a: print_and_stop(x)".to_vec(), vec!["y=1"], "error: input `y` is not a variable of the program", 2),
        ("an unknown dump", "p.fg", b"a: print_and_stop(1)".to_vec(), vec!["--dump", "everything"], "error: unknown dump `everything`", 2),
        ("an unknown pass", "p.fg", b"a: print_and_stop(1)".to_vec(), vec!["--passes", "fold,magic"], "error: unknown pass `magic`", 2),
        ("an unknown target", "p.fg", b"a: print_and_stop(1)".to_vec(), vec!["--target", "sparc"], "error: unknown target `sparc`", 2),
        ("an integer literal past the size limit (2^24 bits)", "i.fg", format!("a: x = {} print_and_stop(x)", "7".repeat(5_050_447)).into_bytes(), vec![], "FILE:1:8: error: integer literal of 5050447 digits too large (more than 16777216 bits)", 2),
        ("a negative threshold", "p.fg", b"a: print_and_stop(1)".to_vec(), vec!["--threshold", "-1"], "error: unexpected argument '-1' found", 2),
        ("a program that never stops, with --max-steps", "l.fg", b"a: goto a".to_vec(), vec!["--max-steps", "100000"], "error: step limit reached: the program did not stop within 100000 operations (in block a)", 1),
        ("a left shift past the size limit", "s.fg", b"a: x = 1 << 100000000 print_and_stop(x)".to_vec(), vec![], "error: shift count 100000000 too large in shl (at most 16777216) (in block a)", 1),
        ("squaring past the size limit in a hot loop", "m.fg", b"a: x = 1 << 16000000 i = 0 goto l l: x = x * x i = i + 1 goto l".to_vec(), vec![], "error: integer result of mul too large (more than 16777216 bits) (in block l)", 1),
        ("a call of a function that is not declared", "u.fg", b"a: r = call g(1)\n print_and_stop(r)\n".to_vec(), vec![], "FILE:1:13: error: no function is named `g`", 2),
        ("a call of a block that is not a function", "nb.fg", b"a: r = call b(1)\n print_and_stop(r)\nb:\n return 1\n".to_vec(), vec![], "FILE:1:13: error: block `b` is not a function (declare it with `func b(...):`)", 2),
        ("a call with the wrong number of arguments", "w.fg", b"a: r = call f(1, 2)\n print_and_stop(r)\nfunc f(x):\n return x\n".to_vec(), vec![], "FILE:1:4: error: function `f` takes 1 argument, not 2", 2),
        ("a function named like an operation", "o.fg", b"a: r = call add(1)\n print_and_stop(r)\nfunc add(x):\n return x\n".to_vec(), vec![], "FILE:3:6: error: function `add` is named like an operation", 2),
        ("a parameter named twice", "pp.fg", b"func f(x, x):\n return x\n".to_vec(), vec![], "FILE:1:11: error: parameter `x` is named twice", 2),
        ("an elidable function that reaches output through a jump and a call", "e.fg", b"a: r = call f(1)\n print_and_stop(r)\n@elidable\nfunc f(x):\n goto g\ng:\n y = call h(x)\n return y\nfunc h(x):\n putchar(x)\n return x\n".to_vec(), vec![], "FILE:3:1: error: function `f` is marked elidable, but `putchar` can be reached from it", 2),
        ("an elidable function that reaches input", "ei.fg", b"a: r = call f(1)\n print_and_stop(r)\n@elidable\nfunc f(x):\n c = getchar()\n return c\n".to_vec(), vec![], "FILE:3:1: error: function `f` is marked elidable, but `getchar` can be reached from it", 2),
        ("an elidable function that reaches print_and_stop", "es.pl", b"block(a, call(r, f, [const(1)], print_and_stop(var(r)))).\nfunc(f, [x]).\nelidable(f).\nblock(f, print_and_stop(var(x))).\n".to_vec(), vec![], "FILE:2:1: error: function `f` is marked elidable, but `print_and_stop` can be reached from it", 2),
        ("@elidable not followed by func", "at.fg", b"a: goto a\n@elidable\nb: return 1\n".to_vec(), vec![], "FILE:3:1: error: expected `func` after `@elidable`, found `b`", 2),
        ("a func fact that names no block", "f.pl", b"block(a, print_and_stop(const(1))).\nfunc(b, [x]).\n".to_vec(), vec![], "FILE:2:6: error: func(b, ...) names no block", 2),
        ("a store into a constant, in the Prolog syntax", "s.pl", b"block(a, setitem(const([1]), const(0), const(2), print_and_stop(const(1)))).\n".to_vec(), vec![], "FILE:1:18: error: setitem stores into the array a variable holds: expected var(A), found `const/1`", 2),
        ("op0 of another operation than getchar", "g.pl", b"block(a, op0(x, len, print_and_stop(var(x)))).\n".to_vec(), vec![], "FILE:1:17: error: op0 takes the operation getchar, not the atom `len`", 2),
        ("reading a variable never written, in a hot loop", "n.fg", b"a: i = 0 goto l l: i = i + 1 c = i > 500 if c goto b else goto l b: print_and_stop(y)".to_vec(), vec![], "error: key_not_found(y) (in block b)", 1),
    ]
}

#[test]
fn every_bad_input_gets_a_clear_message_and_status() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path();
    let mut failures = Vec::new();
    for (what, name, contents, args, want, status) in rows() {
        let path = dir.join(name);
        std::fs::write(&path, &contents).expect("write");
        let path = path.to_str().expect("utf-8 path");
        let out = common::flowjit_command()
            .arg("run")
            .arg(path)
            .args(&args)
            .output()
            .expect("flowjit runs");
        let err = String::from_utf8_lossy(&out.stderr).replace(path, "FILE");
        if !err.starts_with(want) || out.status.code() != Some(status) || err.contains("panicked") {
            failures.push(format!(
                "{what}: want {want:?} (status {status}), got {err:?} (status {:?})",
                out.status.code()
            ));
        }
    }
    // A directory, and a file that is not there.
    for (arg, want) in [
        (dir.to_str().unwrap().to_string(), "error: cannot read "),
        ("no/such.fg".to_string(), "error: cannot read no/such.fg: "),
    ] {
        let out = common::flowjit_command()
            .arg("run")
            .arg(&arg)
            .output()
            .expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        if !err.starts_with(want) || out.status.code() != Some(2) {
            failures.push(format!(
                "{arg}: got {err:?} (status {:?})",
                out.status.code()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
