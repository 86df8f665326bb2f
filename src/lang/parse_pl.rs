//! The parser of the Prolog-term syntax (`.pl`).
//!
//! The articles' programs run pasted as they are: every clause that is a `block(Label, Code)`
//! fact becomes a block; every other clause (facts such as `bytecode_square([...]).`, rules,
//! `:- ...` directives) is skipped. `%` line comments and `/* */` comments are skipped too.
//!
//! ```text
//! Code := op1(V, Op, Arg, Code) | op2(V, Op, Arg, Arg, Code) | op0(V, getchar, Code)
//!       | setitem(var(A), Arg, Arg, Code) | print(Arg, Code) | putchar(Arg, Code)
//!       | call(V, F, [Arg, ...], Code)
//!       | jump(L) | if(V, L1, L2) | print_and_stop(Arg) | promote(V, L) | return(Arg)
//!       | promote(V, Code)                    (hint: freeze V, then go on with Code)
//!       | jit_merge_point([G1, ...], Code) | can_enter_jit(Code)
//! Arg  := var(X) | const(C)                  C an integer, an atom or a list
//! ```
//!
//! Functions are declared by facts beside the blocks: `func(F, [P, ...]).` makes block `F`
//! the entry of a function with those parameters, `elidable(F).` marks it elidable.

use flowjit_runtime::Value;
use num_bigint::BigInt;

use super::ast::{
    Arg, Ast, Block, Func, Name, Span, Stmt, Term, KEYWORDS, MAX_LIST_NESTING, MAX_TERM_NESTING,
};
use super::diag::Diagnostic;
use super::lexer::quoted_atom;
use super::literal;

type PResult<T> = Result<T, Diagnostic>;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Atom(String),
    Var(String),
    Int(BigInt),
    Str,
    Punct(char),
    Symbol(String),
    End,
    Eof,
}

/// A Prolog term, as far as flowjit needs to read one.
#[derive(Clone, Debug)]
enum PTerm {
    Atom(String, Span),
    Int(BigInt, Span),
    Var(String, Span),
    Compound(String, Vec<PTerm>, Span),
    List(Vec<PTerm>, Span),
}

impl PTerm {
    fn span(&self) -> Span {
        match self {
            PTerm::Atom(_, s)
            | PTerm::Int(_, s)
            | PTerm::Var(_, s)
            | PTerm::Compound(_, _, s)
            | PTerm::List(_, s) => *s,
        }
    }

    fn describe(&self) -> String {
        match self {
            PTerm::Atom(a, _) => format!("the atom `{a}`"),
            PTerm::Int(n, _) => literal::describe(n, "the integer "),
            PTerm::Var(v, _) => format!("the Prolog variable `{v}`"),
            PTerm::Compound(f, args, _) => format!("`{f}/{}`", args.len()),
            PTerm::List(..) => "a list".to_string(),
        }
    }
}

fn tokenize(text: &str) -> PResult<Vec<(Tok, Span)>> {
    let bytes = text.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'%' {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if text[i..].starts_with("/*") {
            i = text[i + 2..]
                .find("*/")
                .map_or(bytes.len(), |e| i + 2 + e + 2);
            continue;
        }
        let tok = if c.is_ascii_lowercase() {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            Tok::Atom(text[start..i].to_string())
        } else if c.is_ascii_uppercase() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            Tok::Var(text[start..i].to_string())
        } else if c.is_ascii_digit() {
            let (tok, end) = number(text, start)?;
            i = end;
            tok
        } else if c == b'\'' {
            let (atom, end) = quoted_atom(text, start)?;
            i = end;
            Tok::Atom(atom)
        } else if c == b'"' || c == b'`' {
            i += 1;
            while i < bytes.len() && bytes[i] != c {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(bytes.len());
            Tok::Str
        } else if b"()[],|!;{}".contains(&c) {
            i += 1;
            Tok::Punct(c as char)
        } else if SYMBOL.contains(&c) {
            let (tok, end) = symbol(text, start);
            i = end;
            tok
        } else {
            let ch = text[i..].chars().next().expect("i is inside the text");
            return Err(Diagnostic::new(
                Span::new(i, i + ch.len_utf8()),
                format!("unexpected character `{ch}`"),
            ));
        };
        toks.push((tok, Span::new(start, i)));
    }
    toks.push((Tok::Eof, Span::new(text.len(), text.len())));
    Ok(toks)
}

/// The characters of which symbols such as `:-` and `=..` are made.
const SYMBOL: &[u8] = b"+-*/\\^<>=~:.?@#&$";

/// The number token that starts at byte `start` of `text`, a digit, and the byte after it:
/// an integer, or a character code such as `0'a`.
fn number(text: &str, start: usize) -> PResult<(Tok, usize)> {
    let bytes = text.as_bytes();
    let mut i = start;
    if text[i..].starts_with("0'") && i + 2 < bytes.len() {
        // A character code such as 0'a: only ever inside skipped clauses.
        let ch = text[i + 2..].chars().next().expect("checked length");
        i += 2 + ch.len_utf8();
        return Ok((Tok::Int(BigInt::from(ch as u32)), i));
    }
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    let n = literal::integer(&text[start..i], Span::new(start, i))?;
    Ok((Tok::Int(n), i))
}

/// The symbol token that starts at byte `start` of `text`, and the byte after it: a `.`
/// followed by white space, a comment or the end of the text ends a clause.
fn symbol(text: &str, start: usize) -> (Tok, usize) {
    let bytes = text.as_bytes();
    let mut i = start;
    while i < bytes.len() && SYMBOL.contains(&bytes[i]) {
        i += 1;
    }
    let sym = &text[start..i];
    let at_end = i >= bytes.len() || bytes[i].is_ascii_whitespace() || bytes[i] == b'%';
    let tok = if sym == "." && at_end {
        Tok::End
    } else {
        Tok::Symbol(sym.to_string())
    };
    (tok, i)
}

struct Parser {
    toks: Vec<(Tok, Span)>,
    pos: usize,
    /// How deep in terms the parser is.
    depth: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].0
    }

    /// Whether the clause here is a fact or rule whose head is `name(...)`.
    fn head_is(&self, name: &str) -> bool {
        self.peek() == &Tok::Atom(name.into())
            && self.toks.get(self.pos + 1).map(|t| &t.0) == Some(&Tok::Punct('('))
    }

    fn span(&self) -> Span {
        self.toks[self.pos].1
    }

    fn bump(&mut self) -> (Tok, Span) {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn error<T>(&self, expected: &str) -> PResult<T> {
        let found = match self.peek() {
            Tok::Atom(a) => format!("`{a}`"),
            Tok::Var(v) => format!("`{v}`"),
            Tok::Int(n) => literal::describe(n, ""),
            Tok::Str => "a string".to_string(),
            Tok::Punct(c) => format!("`{c}`"),
            Tok::Symbol(s) => format!("`{s}`"),
            Tok::End => "the end of the clause".to_string(),
            Tok::Eof => "the end of the file".to_string(),
        };
        Err(Diagnostic::new(
            self.span(),
            format!("expected {expected}, found {found}"),
        ))
    }

    fn expect(&mut self, c: char) -> PResult<Span> {
        if self.peek() == &Tok::Punct(c) {
            Ok(self.bump().1)
        } else {
            self.error(&format!("`{c}`"))
        }
    }

    /// Skips to just past the end of the current clause.
    fn skip_clause(&mut self) {
        while !matches!(self.peek(), Tok::End | Tok::Eof) {
            self.bump();
        }
        if self.peek() == &Tok::End {
            self.bump();
        }
    }

    fn term(&mut self) -> PResult<PTerm> {
        if self.depth >= MAX_TERM_NESTING {
            return Err(Diagnostic::new(
                self.span(),
                format!("terms nested more than {MAX_TERM_NESTING} deep"),
            ));
        }
        self.depth += 1;
        let t = self.term_inner();
        self.depth -= 1;
        t
    }

    fn term_inner(&mut self) -> PResult<PTerm> {
        if !matches!(
            self.peek(),
            Tok::Atom(_) | Tok::Var(_) | Tok::Int(_) | Tok::Symbol(_) | Tok::Punct('[')
        ) {
            return self.error("a term");
        }
        let (tok, span) = self.bump();
        match tok {
            Tok::Atom(name) if self.peek() == &Tok::Punct('(') && self.span().start == span.end => {
                self.bump();
                let mut args = vec![self.term()?];
                while self.peek() == &Tok::Punct(',') {
                    self.bump();
                    args.push(self.term()?);
                }
                let end = self.expect(')')?;
                Ok(PTerm::Compound(name, args, span.to(end)))
            }
            Tok::Atom(name) => Ok(PTerm::Atom(name, span)),
            Tok::Var(name) => Ok(PTerm::Var(name, span)),
            Tok::Int(n) => Ok(PTerm::Int(n, span)),
            Tok::Symbol(s) if s == "-" && matches!(self.peek(), Tok::Int(_)) => {
                let (Tok::Int(n), end) = self.bump() else {
                    unreachable!("checked above")
                };
                Ok(PTerm::Int(-n, span.to(end)))
            }
            Tok::Punct('[') if self.depth > MAX_LIST_NESTING => Err(Diagnostic::new(
                span,
                format!("lists nested more than {MAX_LIST_NESTING} deep"),
            )),
            Tok::Punct('[') => {
                let mut items = Vec::new();
                if self.peek() != &Tok::Punct(']') {
                    items.push(self.term()?);
                    while self.peek() == &Tok::Punct(',') {
                        self.bump();
                        items.push(self.term()?);
                    }
                }
                if self.peek() == &Tok::Punct('|') {
                    return Err(Diagnostic::new(
                        self.span(),
                        "a list with a tail (`[H|T]`) is not a constant",
                    ));
                }
                let end = self.expect(']')?;
                Ok(PTerm::List(items, span.to(end)))
            }
            _ => Err(Diagnostic::new(span, "expected a term")),
        }
    }
}

/// Parses a program in the Prolog-term syntax.
pub fn parse_pl(text: &str) -> PResult<Ast> {
    let mut p = Parser {
        toks: tokenize(text)?,
        pos: 0,
        depth: 0,
    };
    let mut blocks = Vec::new();
    let mut funcs: Vec<(Name, Func)> = Vec::new();
    let mut elidable: Vec<Name> = Vec::new();
    while p.peek() != &Tok::Eof {
        if p.head_is("func") || p.head_is("elidable") {
            let start = p.pos;
            let fact = p.term()?;
            if p.peek() != &Tok::End {
                // A rule or something longer: not a declaration.
                p.pos = start;
                p.skip_clause();
                continue;
            }
            p.bump();
            declaration(&fact, &mut funcs, &mut elidable)?;
            continue;
        }
        if !p.head_is("block") {
            p.skip_clause();
            continue;
        }
        let start = p.pos;
        let head = p.term()?;
        match p.peek() {
            Tok::End => {
                p.bump();
            }
            Tok::Symbol(s) if s == ":-" => {
                // A rule whose head is block(...): part of a pasted interpreter, not a block.
                p.pos = start;
                p.skip_clause();
                continue;
            }
            _ => return p.error("`.` after the block"),
        }
        blocks.push(block(&head)?);
    }
    declare(&mut blocks, funcs, elidable)?;
    Ok(Ast { blocks })
}

/// Notes a `func(Name, [Param, ...])` fact in `funcs`, or an `elidable(Name)` fact in
/// `elidable`.
fn declaration(
    fact: &PTerm,
    funcs: &mut Vec<(Name, Func)>,
    elidable: &mut Vec<Name>,
) -> PResult<()> {
    match &fact {
        PTerm::Compound(f, args, span) if f == "func" => match args.as_slice() {
            [name_t, PTerm::List(params, _)] => {
                let params = params
                    .iter()
                    .map(|t| name(t, "a parameter"))
                    .collect::<PResult<_>>()?;
                funcs.push((
                    name(name_t, "a function name")?,
                    Func {
                        params,
                        elidable: false,
                        span: *span,
                    },
                ));
            }
            _ => {
                return Err(Diagnostic::new(
                    *span,
                    "a function is declared as func(Name, [Param, ...])",
                ))
            }
        },
        PTerm::Compound(_, args, span) => match args.as_slice() {
            [name_t] => elidable.push(name(name_t, "a function name")?),
            _ => {
                return Err(Diagnostic::new(
                    *span,
                    "a function is marked elidable as elidable(Name)",
                ))
            }
        },
        _ => unreachable!("the head is func( or elidable("),
    }
    Ok(())
}

/// Attaches the `func` and `elidable` facts to the blocks they name.
fn declare(blocks: &mut [Block], funcs: Vec<(Name, Func)>, elidable: Vec<Name>) -> PResult<()> {
    for (fname, func) in funcs {
        let Some(b) = blocks.iter_mut().find(|b| b.label.text == fname.text) else {
            return Err(Diagnostic::new(
                fname.span,
                format!("func({}, ...) names no block", fname.text),
            ));
        };
        if b.func.is_some() {
            return Err(Diagnostic::new(
                fname.span,
                format!("function `{}` is declared twice", fname.text),
            ));
        }
        b.func = Some(func);
    }
    for fname in elidable {
        match blocks.iter_mut().find(|b| b.label.text == fname.text) {
            Some(Block {
                func: Some(func), ..
            }) => func.elidable = true,
            _ => {
                return Err(Diagnostic::new(
                    fname.span,
                    format!(
                        "elidable({}) names no function (declare it with func({}, [...]))",
                        fname.text, fname.text
                    ),
                ))
            }
        }
    }
    Ok(())
}

/// Parses a value written as a Prolog term: an integer, an atom or a list of values. This is
/// the form of `NAME=VALUE` inputs and of `const(...)`.
pub fn parse_pl_value(text: &str) -> PResult<Value> {
    let mut p = Parser {
        toks: tokenize(text)?,
        pos: 0,
        depth: 0,
    };
    let t = p.term()?;
    if p.peek() != &Tok::Eof {
        return p.error("the end of the value");
    }
    value(&t)
}

fn value(t: &PTerm) -> PResult<Value> {
    match t {
        PTerm::Int(n, _) => Ok(Value::from_bigint(n.clone())),
        PTerm::Atom(a, _) => Ok(Value::atom(a)),
        PTerm::List(items, _) => Ok(Value::list(
            items.iter().map(value).collect::<PResult<_>>()?,
        )),
        other => Err(Diagnostic::new(
            other.span(),
            format!(
                "expected a constant (an integer, an atom or a list), found {}",
                other.describe()
            ),
        )),
    }
}

fn name(t: &PTerm, what: &str) -> PResult<Name> {
    match t {
        PTerm::Atom(a, span) => {
            if KEYWORDS.contains(&a.as_str()) {
                return Err(Diagnostic::new(
                    *span,
                    format!("`{a}` cannot be {what}: it is a keyword of the readable syntax"),
                ));
            }
            if !super::ast::is_plain_name(a) {
                return Err(Diagnostic::new(
                    *span,
                    format!("`{a}` cannot be {what}: names are [A-Za-z_][A-Za-z0-9_]*"),
                ));
            }
            Ok(Name::new(a.clone(), *span))
        }
        other => Err(Diagnostic::new(
            other.span(),
            format!("expected {what} (an atom), found {}", other.describe()),
        )),
    }
}

fn arg(t: &PTerm) -> PResult<Arg> {
    match t {
        PTerm::Compound(f, args, _) if f == "var" && args.len() == 1 => {
            Ok(Arg::Var(name(&args[0], "a variable")?))
        }
        PTerm::Compound(f, args, span) if f == "const" && args.len() == 1 => {
            Ok(Arg::Const(value(&args[0])?, *span))
        }
        other => Err(Diagnostic::new(
            other.span(),
            format!(
                "expected an argument, var(X) or const(C), found {}",
                other.describe()
            ),
        )),
    }
}

fn block(head: &PTerm) -> PResult<Block> {
    let PTerm::Compound(_, args, span) = head else {
        unreachable!("parse_pl only calls block() on block(...) terms")
    };
    let [label, code] = args.as_slice() else {
        return Err(Diagnostic::new(
            *span,
            format!(
                "a block is block(Label, Code), with 2 arguments, not {}",
                args.len()
            ),
        ));
    };
    let label = name(label, "a block label")?;
    let mut stmts = Vec::new();
    let mut code = code;
    loop {
        let PTerm::Compound(f, a, span) = code else {
            return Err(Diagnostic::new(
                code.span(),
                format!(
                    "expected an operation or a terminator, found {}",
                    code.describe()
                ),
            ));
        };
        if let Some((stmt, rest)) = statement(f, a, *span)? {
            stmts.push(stmt);
            code = rest;
            continue;
        }
        let Some(term) = terminator(f, a)? else {
            return Err(Diagnostic::new(
                *span,
                format!(
                    "unknown statement {}: expected op1/4, op2/5, op0/3, setitem/4, print/2, putchar/2, call/4, jump/1, if/3, print_and_stop/1, promote/2, return/1, jit_merge_point/2 or can_enter_jit/1",
                    code.describe()
                ),
            ));
        };
        return Ok(Block {
            label,
            stmts,
            term,
            term_span: *span,
            func: None,
        });
    }
}

/// The statement that the term `f(a...)` (at `span`) of a block's code is, with the rest of
/// the code after it; `None` when it is no statement.
fn statement<'t>(f: &str, a: &'t [PTerm], span: Span) -> PResult<Option<(Stmt, &'t PTerm)>> {
    Ok(Some(match (f, a) {
        ("op1", [dst, op, x, rest]) => (
            Stmt::Op {
                dst: name(dst, "a variable")?,
                op: op_name(op)?,
                args: vec![arg(x)?],
                span: op.span().to(x.span()),
            },
            rest,
        ),
        ("op2", [dst, op, x, y, rest]) => (
            Stmt::Op {
                dst: name(dst, "a variable")?,
                op: op_name(op)?,
                args: vec![arg(x)?, arg(y)?],
                span: op.span().to(y.span()),
            },
            rest,
        ),
        ("promote", [var, rest @ PTerm::Compound(..)]) => {
            (Stmt::Promote(name(var, "a variable")?), rest)
        }
        ("jit_merge_point", [PTerm::List(greens, _), rest]) => (
            Stmt::MergePoint {
                greens: greens
                    .iter()
                    .map(|g| name(g, "a green variable"))
                    .collect::<PResult<_>>()?,
                span,
            },
            rest,
        ),
        ("can_enter_jit", [rest]) => (
            Stmt::CanEnterJit(Span::new(span.start, span.start + f.len())),
            rest,
        ),
        ("op0", [dst, op, rest]) => (getchar(dst, op, span)?, rest),
        ("setitem", [array, index, value, rest]) => (setitem(array, index, value, span)?, rest),
        ("print" | "putchar", [x, rest]) => {
            let a = arg(x)?;
            let span = Span::new(span.start, x.span().end);
            let stmt = if f == "print" {
                Stmt::Print(a, span)
            } else {
                Stmt::Putchar(a, span)
            };
            (stmt, rest)
        }
        ("call", [dst, func, PTerm::List(args, _), rest]) => (
            Stmt::Call {
                dst: name(dst, "a variable")?,
                func: name(func, "a function name")?,
                args: args.iter().map(arg).collect::<PResult<_>>()?,
                span: Span::new(span.start, func.span().end),
            },
            rest,
        ),
        _ => return Ok(None),
    }))
}

/// `op0(Dst, getchar, Rest)` at `span`.
fn getchar(dst: &PTerm, op: &PTerm, span: Span) -> PResult<Stmt> {
    if !matches!(op, PTerm::Atom(a, _) if a == "getchar") {
        return Err(Diagnostic::new(
            op.span(),
            format!("op0 takes the operation getchar, not {}", op.describe()),
        ));
    }
    Ok(Stmt::Getchar {
        dst: name(dst, "a variable")?,
        span,
    })
}

/// `setitem(var(A), Index, Value, Rest)` at `span`.
fn setitem(array: &PTerm, index: &PTerm, value: &PTerm, span: Span) -> PResult<Stmt> {
    let array = match array {
        PTerm::Compound(f, a, _) if f == "var" && a.len() == 1 => name(&a[0], "a variable")?,
        other => {
            return Err(Diagnostic::new(
                other.span(),
                format!(
                    "setitem stores into the array a variable holds: expected var(A), found {}",
                    other.describe()
                ),
            ))
        }
    };
    Ok(Stmt::SetItem {
        array,
        index: arg(index)?,
        value: arg(value)?,
        span: Span::new(span.start, value.span().end),
    })
}

/// The terminator that the term `f(a...)` ending a block's code is; `None` when it is no
/// terminator.
fn terminator(f: &str, a: &[PTerm]) -> PResult<Option<Term>> {
    Ok(Some(match (f, a) {
        ("return", [x]) => Term::Return(arg(x)?),
        ("jump", [l]) => Term::Goto(name(l, "a label")?),
        ("if", [v, l1, l2]) => Term::If {
            cond: name(v, "a variable")?,
            then: name(l1, "a label")?,
            els: name(l2, "a label")?,
        },
        ("print_and_stop", [x]) => Term::PrintAndStop(arg(x)?),
        ("promote", [v, l]) => Term::Promote {
            var: name(v, "a variable")?,
            target: name(l, "a label")?,
        },
        _ => return Ok(None),
    }))
}

fn op_name(t: &PTerm) -> PResult<Name> {
    match t {
        PTerm::Atom(a, span) => Ok(Name::new(a.clone(), *span)),
        other => Err(Diagnostic::new(
            other.span(),
            format!("expected an operation name, found {}", other.describe()),
        )),
    }
}
