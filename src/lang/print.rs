//! Printers for both syntaxes. Parsing what they print gives the same program back.
//!
//! The `_noted` printers put comments back too (`flowjit fmt`): each before the block,
//! statement or terminator it preceded in the source, or at the end of the line it ended.

use std::fmt::Write as _;

use flowjit_runtime::{Atom, Op, Value};

use super::ast::{Arg, Ast, Block, Stmt, Term};
use super::comment::{append_to_last_line, Notes};

/// A constant as the readable syntax writes it: atoms at the top level are quoted (a bare
/// name would be a variable); inside lists bare names are atoms.
pub fn fg_const(v: &Value) -> String {
    match v {
        Value::Atom(a) => {
            let shown = a.to_string();
            if shown.starts_with('\'') {
                shown
            } else {
                format!("'{shown}'")
            }
        }
        other => other.to_string(),
    }
}

fn fg_arg(a: &Arg) -> String {
    match a {
        Arg::Var(n) => n.text.clone(),
        Arg::Const(v, _) => fg_const(v),
    }
}

/// One statement in the readable syntax.
pub fn fg_stmt(s: &Stmt) -> String {
    match s {
        Stmt::Op { dst, op, args, .. } => {
            let known = Op::from_name(&op.text);
            let rhs = match (known, args.as_slice()) {
                (Some(Op::Same), [a]) => fg_arg(a),
                (Some(Op::Readlist), [l, i]) => format!("{}[{}]", fg_arg(l), fg_arg(i)),
                (Some(op), [a, b]) if op.infix().is_some() => {
                    format!(
                        "{} {} {}",
                        fg_arg(a),
                        op.infix().unwrap_or_default(),
                        fg_arg(b)
                    )
                }
                _ => {
                    let args: Vec<String> = args.iter().map(fg_arg).collect();
                    format!("{}({})", op.text, args.join(", "))
                }
            };
            format!("{} = {rhs}", dst.text)
        }
        Stmt::Promote(v) => format!("promote({})", v.text),
        Stmt::MergePoint { greens, .. } => {
            let g: Vec<&str> = greens.iter().map(|g| g.text.as_str()).collect();
            format!("jit_merge_point({})", g.join(", "))
        }
        Stmt::CanEnterJit(_) => "can_enter_jit".to_string(),
        Stmt::SetItem {
            array,
            index,
            value,
            ..
        } => format!("{}[{}] = {}", array.text, fg_arg(index), fg_arg(value)),
        Stmt::Print(a, _) => format!("print({})", fg_arg(a)),
        Stmt::Putchar(a, _) => format!("putchar({})", fg_arg(a)),
        Stmt::Getchar { dst, .. } => format!("{} = getchar()", dst.text),
        Stmt::Call {
            dst, func, args, ..
        } => {
            let args: Vec<String> = args.iter().map(fg_arg).collect();
            format!("{} = call {}({})", dst.text, func.text, args.join(", "))
        }
    }
}

/// A terminator in the readable syntax.
pub fn fg_term(t: &Term) -> String {
    match t {
        Term::Goto(l) => format!("goto {}", l.text),
        Term::If { cond, then, els } => {
            format!("if {} goto {} else goto {}", cond.text, then.text, els.text)
        }
        Term::PrintAndStop(a) => format!("print_and_stop({})", fg_arg(a)),
        Term::Promote { var, target } => format!("promote({}, {})", var.text, target.text),
        Term::Return(a) => format!("return {}", fg_arg(a)),
    }
}

/// A block in the readable syntax.
pub fn fg_block(b: &Block) -> String {
    let mut out = String::new();
    fg_block_noted(&mut out, b, &mut Notes::none());
    out
}

/// Where a block starts in the source: its `func` header, or its label.
fn block_start(b: &Block) -> usize {
    b.func.as_ref().map_or(b.label.span.start, |f| f.span.start)
}

/// Puts the comments before `offset` into `out`: the one that ended the line of `after` at
/// its end, the others on lines of their own, indented by `indent`.
fn place(out: &mut String, notes: &mut Notes, offset: usize, after: Option<usize>, indent: &str) {
    let (trailing, own) = notes.before(offset, after);
    if let Some(t) = trailing {
        append_to_last_line(out, &t);
    }
    for c in own {
        let _ = writeln!(out, "{indent}{c}");
    }
}

/// Writes block `b` in the readable syntax, with its comments, to `out`.
fn fg_block_noted(out: &mut String, b: &Block, notes: &mut Notes) {
    out.push_str(&match &b.func {
        None => format!("{}:\n", b.label.text),
        Some(f) => {
            let params: Vec<&str> = f.params.iter().map(|p| p.text.as_str()).collect();
            format!(
                "{}func {}({}):\n",
                if f.elidable { "@elidable\n" } else { "" },
                b.label.text,
                params.join(", ")
            )
        }
    });
    let mut prev = Some(b.label.span.end);
    for s in &b.stmts {
        place(out, notes, s.span().start, prev, "    ");
        let _ = writeln!(out, "    {}", fg_stmt(s));
        prev = Some(s.span().end);
    }
    place(out, notes, b.term_span.start, prev, "    ");
    let _ = writeln!(out, "    {}", fg_term(&b.term));
}

/// A whole program in the readable syntax, blocks separated by blank lines.
pub fn to_fg(ast: &Ast) -> String {
    to_fg_noted(ast, &mut Notes::none())
}

/// A whole program in the readable syntax, with the comments of `notes`.
pub fn to_fg_noted(ast: &Ast, notes: &mut Notes) -> String {
    let mut out = String::new();
    let mut prev = None;
    for (i, b) in ast.blocks.iter().enumerate() {
        let (trailing, own) = notes.before(block_start(b), prev);
        if let Some(t) = trailing {
            append_to_last_line(&mut out, &t);
        }
        if i > 0 {
            out.push('\n');
        }
        for c in own {
            let _ = writeln!(out, "{c}");
        }
        fg_block_noted(&mut out, b, notes);
        prev = Some(b.term_span.end);
    }
    place(&mut out, notes, usize::MAX, prev, "");
    out
}

/// A name as a Prolog atom (quoted when it is not `[a-z][A-Za-z0-9_]*`).
fn pl_atom(name: &str) -> String {
    Atom::intern(name).to_string()
}

fn pl_arg(a: &Arg) -> String {
    match a {
        Arg::Var(n) => format!("var({})", pl_atom(&n.text)),
        Arg::Const(v, _) => format!("const({v})"),
    }
}

/// A block in the articles' Prolog notation, one operation a line; a function's entry
/// is preceded by its `func` (and `elidable`) facts.
pub fn pl_block(b: &Block) -> String {
    let mut out = String::new();
    pl_block_noted(&mut out, b, &mut Notes::none());
    out
}

/// Writes block `b` in the Prolog-term syntax, with its comments, to `out`.
fn pl_block_noted(out: &mut String, b: &Block, notes: &mut Notes) {
    if let Some(f) = &b.func {
        let params: Vec<String> = f.params.iter().map(|p| pl_atom(&p.text)).collect();
        let name = pl_atom(&b.label.text);
        let _ = writeln!(out, "func({name}, [{}]).", params.join(", "));
        if f.elidable {
            let _ = writeln!(out, "elidable({name}).");
        }
    }
    let _ = write!(out, "block({}, ", pl_atom(&b.label.text));
    let mut closers = 1;
    let mut prev = Some(b.label.span.end);
    for s in &b.stmts {
        place(out, notes, s.span().start, prev, "");
        prev = Some(s.span().end);
        pl_stmt_open(out, s);
        closers += 1;
    }
    place(out, notes, b.term_span.start, prev, "");
    pl_term(out, &b.term);
    out.push_str(&")".repeat(closers));
    out.push_str(".\n");
}

/// Writes statement `s` in the Prolog-term syntax, open: the rest of the block's code
/// follows as its last argument.
fn pl_stmt_open(out: &mut String, s: &Stmt) {
    match s {
        Stmt::Op { dst, op, args, .. } => {
            let args: Vec<String> = args.iter().map(pl_arg).collect();
            let kind = if args.len() == 1 { "op1" } else { "op2" };
            let _ = write!(
                out,
                "{kind}({}, {}, {},\n    ",
                pl_atom(&dst.text),
                pl_atom(&op.text),
                args.join(", ")
            );
        }
        Stmt::Promote(v) => {
            let _ = write!(out, "promote({},\n    ", pl_atom(&v.text));
        }
        Stmt::MergePoint { greens, .. } => {
            let g: Vec<String> = greens.iter().map(|g| pl_atom(&g.text)).collect();
            let _ = write!(out, "jit_merge_point([{}],\n    ", g.join(", "));
        }
        Stmt::CanEnterJit(_) => out.push_str("can_enter_jit(\n    "),
        Stmt::SetItem {
            array,
            index,
            value,
            ..
        } => {
            let _ = write!(
                out,
                "setitem(var({}), {}, {},\n    ",
                pl_atom(&array.text),
                pl_arg(index),
                pl_arg(value)
            );
        }
        Stmt::Print(a, _) => {
            let _ = write!(out, "print({},\n    ", pl_arg(a));
        }
        Stmt::Putchar(a, _) => {
            let _ = write!(out, "putchar({},\n    ", pl_arg(a));
        }
        Stmt::Getchar { dst, .. } => {
            let _ = write!(out, "op0({}, getchar,\n    ", pl_atom(&dst.text));
        }
        Stmt::Call {
            dst, func, args, ..
        } => {
            let args: Vec<String> = args.iter().map(pl_arg).collect();
            let _ = write!(
                out,
                "call({}, {}, [{}],\n    ",
                pl_atom(&dst.text),
                pl_atom(&func.text),
                args.join(", ")
            );
        }
    }
}

/// Writes terminator `term` in the Prolog-term syntax.
fn pl_term(out: &mut String, term: &Term) {
    match term {
        Term::Goto(l) => {
            let _ = write!(out, "jump({})", pl_atom(&l.text));
        }
        Term::If { cond, then, els } => {
            let _ = write!(
                out,
                "if({}, {}, {})",
                pl_atom(&cond.text),
                pl_atom(&then.text),
                pl_atom(&els.text)
            );
        }
        Term::PrintAndStop(a) => {
            let _ = write!(out, "print_and_stop({})", pl_arg(a));
        }
        Term::Promote { var, target } => {
            let _ = write!(
                out,
                "promote({}, {})",
                pl_atom(&var.text),
                pl_atom(&target.text)
            );
        }
        Term::Return(a) => {
            let _ = write!(out, "return({})", pl_arg(a));
        }
    }
}

/// A block in the articles' Prolog notation on one line, as the articles list residual
/// blocks: `block(power_rec5, op2(res, mul, var(res), var(x), jump(power_done1))).`
pub fn pl_block_line(b: &Block) -> String {
    pl_block(b).replace("\n    ", " ")
}

/// A whole program in the Prolog-term syntax.
pub fn to_pl(ast: &Ast) -> String {
    to_pl_noted(ast, &mut Notes::none())
}

/// A whole program in the Prolog-term syntax, with the comments of `notes`.
pub fn to_pl_noted(ast: &Ast, notes: &mut Notes) -> String {
    let mut out = String::new();
    let mut prev = None;
    for b in &ast.blocks {
        place(&mut out, notes, block_start(b), prev, "");
        pl_block_noted(&mut out, b, notes);
        prev = Some(b.term_span.end);
    }
    place(&mut out, notes, usize::MAX, prev, "");
    out
}
