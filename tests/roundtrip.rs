//! Printing a parsed program in either syntax and parsing it again gives the same program.

use flowjit::lang::ast::{is_plain_name, Arg, Ast, Block, Func, Name, Span, Stmt, Term};
use flowjit::lang::{parse, print, Syntax};
use flowjit_runtime::{Op, Value};
use num_bigint::BigInt;
use proptest::prelude::*;

fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z_][a-zA-Z0-9_]{0,5}".prop_filter("not a keyword", |s| is_plain_name(s))
}

fn n(text: String) -> Name {
    Name::new(text, Span::default())
}

fn constant() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(Value::Int),
        (any::<i64>(), any::<i64>()).prop_map(|(a, b)| Value::from_bigint(
            BigInt::from(a) * BigInt::from(b) * BigInt::from(b)
        )),
        "[a-z][a-z0-9_]{0,4}".prop_map(|s| Value::atom(&s)),
        "[ -~\\n]{0,6}".prop_map(|s| Value::atom(&s)),
    ];
    leaf.prop_recursive(3, 12, 4, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(Value::list)
    })
}

fn arg() -> impl Strategy<Value = Arg> {
    prop_oneof![
        name().prop_map(|s| Arg::Var(n(s))),
        constant().prop_map(|v| Arg::Const(v, Span::default())),
    ]
}

fn stmt() -> impl Strategy<Value = Stmt> {
    let op = (name(), prop::sample::select(Op::ALL.to_vec()), arg(), arg()).prop_map(
        |(dst, op, a, b)| Stmt::Op {
            dst: n(dst),
            op: n(op.name().to_string()),
            args: if op.arity() == 1 { vec![a] } else { vec![a, b] },
            span: Span::default(),
        },
    );
    let z = Span::default();
    prop_oneof![
        8 => op,
        1 => name().prop_map(|v| Stmt::Promote(n(v))),
        1 => Just(Stmt::CanEnterJit(Span::default())),
        1 => (name(), arg(), arg()).prop_map(move |(a, i, v)| Stmt::SetItem {
            array: n(a),
            index: i,
            value: v,
            span: z,
        }),
        1 => arg().prop_map(move |a| Stmt::Print(a, z)),
        1 => arg().prop_map(move |a| Stmt::Putchar(a, z)),
        1 => name().prop_map(move |d| Stmt::Getchar { dst: n(d), span: z }),
        1 => (name(), name(), prop::collection::vec(arg(), 0..3)).prop_map(move |(d, f, args)| {
            Stmt::Call {
                dst: n(d),
                func: n(f),
                args,
                span: z,
            }
        }),
    ]
}

fn term() -> impl Strategy<Value = Term> {
    prop_oneof![
        name().prop_map(|l| Term::Goto(n(l))),
        (name(), name(), name()).prop_map(|(c, t, e)| Term::If {
            cond: n(c),
            then: n(t),
            els: n(e)
        }),
        arg().prop_map(Term::PrintAndStop),
        (name(), name()).prop_map(|(v, l)| Term::Promote {
            var: n(v),
            target: n(l)
        }),
        arg().prop_map(Term::Return),
    ]
}

fn block() -> impl Strategy<Value = Block> {
    (
        name(),
        prop::option::of(prop::collection::vec(name(), 0..3)),
        prop::collection::vec(stmt(), 0..5),
        term(),
        prop::option::of((prop::collection::vec(name(), 0..3), any::<bool>())),
    )
        .prop_map(|(label, greens, mut stmts, term, func)| {
            if let Some(greens) = greens {
                stmts.insert(
                    0,
                    Stmt::MergePoint {
                        greens: greens.into_iter().map(n).collect(),
                        span: Span::default(),
                    },
                );
            }
            Block {
                label: n(label),
                stmts,
                term,
                term_span: Span::default(),
                func: func.map(|(params, elidable)| Func {
                    params: params.into_iter().map(n).collect(),
                    elidable,
                    span: Span::default(),
                }),
            }
        })
}

/// Programs whose labels differ (the Prolog syntax declares a function by its label).
fn program() -> impl Strategy<Value = Ast> {
    prop::collection::vec(block(), 1..5).prop_map(|mut blocks| {
        let mut seen = std::collections::HashSet::new();
        blocks.retain(|b| seen.insert(b.label.text.clone()));
        Ast { blocks }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn readable_syntax_round_trips(ast in program()) {
        let text = print::to_fg(&ast);
        let parsed = parse(&text, Syntax::Fg).map_err(|d| TestCaseError::fail(format!("{d:?}\n{text}")))?;
        prop_assert_eq!(parsed.without_spans(), ast, "{}", text);
    }

    #[test]
    fn prolog_syntax_round_trips(ast in program()) {
        let text = print::to_pl(&ast);
        let parsed = parse(&text, Syntax::Pl).map_err(|d| TestCaseError::fail(format!("{d:?}\n{text}")))?;
        prop_assert_eq!(parsed.without_spans(), ast, "{}", text);
    }

    #[test]
    fn one_line_form_parses_the_same(ast in program()) {
        // Line breaks are not significant in the readable syntax.
        let text = print::to_fg(&ast).replace('\n', " ");
        let parsed = parse(&text, Syntax::Fg).map_err(|d| TestCaseError::fail(format!("{d:?}\n{text}")))?;
        prop_assert_eq!(parsed.without_spans(), ast);
    }
}

#[test]
fn every_example_round_trips_through_both_syntaxes() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let syntax = match path.extension().and_then(|e| e.to_str()) {
            Some("fg") => Syntax::Fg,
            Some("pl") => Syntax::Pl,
            _ => continue,
        };
        let ast = parse(&std::fs::read_to_string(&path).unwrap(), syntax)
            .unwrap()
            .without_spans();
        for (printed, again) in [
            (print::to_fg(&ast), Syntax::Fg),
            (print::to_pl(&ast), Syntax::Pl),
        ] {
            assert_eq!(
                parse(&printed, again).unwrap().without_spans(),
                ast,
                "{}",
                path.display()
            );
        }
        seen += 1;
    }
    assert!(seen >= 7);
}
