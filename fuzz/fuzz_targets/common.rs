//! What the parser targets share: a program text is parsed and checked; diagnostics are
//! rendered (they slice the text at the spans they report, so they must stay on character
//! boundaries); a program that checks is printed in both syntaxes and parsed back to the
//! same program, and runs for a bounded number of steps.

use flowjit::lang::{self, print, Source, Syntax};

pub fn program(data: &[u8], syntax: Syntax) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match lang::load(text, syntax) {
        Err(diags) => {
            let rendered = Source::new("fuzz", text).render(&diags, false);
            assert!(rendered.contains("error: "));
        }
        Ok((ast, program)) => {
            let ast = ast.without_spans();
            for (printed, again) in [(print::to_fg(&ast), Syntax::Fg), (print::to_pl(&ast), Syntax::Pl)] {
                let parsed = lang::parse(&printed, again).expect("a printed program parses");
                assert_eq!(parsed.without_spans(), ast, "{printed}");
            }
            // Input for `getchar`; output kept, not printed.
            let io = flowjit::state::Io::captured(b"fuzz\n");
            let mut state = flowjit::state::State::new(&program, &[], io);
            let _ = flowjit::interp::run_program(&program, lang::BlockId(0), &mut state, Some(10_000));
        }
    }
}
