//! The syntax tree both syntaxes parse to, with source spans.
//!
//! Names are still names here; [`crate::lang::check`] turns an [`Ast`] into a
//! [`crate::lang::Program`] whose variables are frame slots and whose labels are block indices.
//! Operation names are kept as written, so that an unknown operation is reported by the
//! checker with the other problems rather than stopping the parse.

use flowjit_runtime::Value;

/// A byte range in the source text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

impl Span {
    /// The span from `start` to `end`.
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// A name (of a variable, label or operation) and where it was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name {
    /// The name.
    pub text: String,
    /// Where it was written.
    pub span: Span,
}

impl Name {
    /// A name with the given text and span.
    pub fn new(text: impl Into<String>, span: Span) -> Name {
        Name {
            text: text.into(),
            span,
        }
    }
}

/// An argument of an operation: a variable or a constant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arg {
    /// `var(x)`, or `x` in the readable syntax.
    Var(Name),
    /// `const(c)`: an integer, an atom or a list.
    Const(Value, Span),
}

impl Arg {
    /// Where the argument was written.
    pub fn span(&self) -> Span {
        match self {
            Arg::Var(name) => name.span,
            Arg::Const(_, span) => *span,
        }
    }
}

/// A statement: an operation assigning a variable, or a hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stmt {
    /// `dst = op(args...)`.
    Op {
        /// The variable assigned.
        dst: Name,
        /// The operation, by name (checked later).
        op: Name,
        /// The arguments.
        args: Vec<Arg>,
        /// The whole statement.
        span: Span,
    },
    /// `promote(v)`: a hint to freeze `v`'s value into the trace.
    Promote(Name),
    /// `jit_merge_point(greens...)`: marks the dispatch loop of an interpreter.
    MergePoint {
        /// The green variables.
        greens: Vec<Name>,
        /// The whole hint.
        span: Span,
    },
    /// `can_enter_jit`: marks a backward jump of the interpreted program.
    CanEnterJit(Span),
    /// `a[i] = v` (`setitem(var(a), I, V, Rest)`): stores `v` into array `a` at index `i`.
    SetItem {
        /// The array's variable.
        array: Name,
        /// The index.
        index: Arg,
        /// The value stored.
        value: Arg,
        /// The whole statement.
        span: Span,
    },
    /// `print(x)`: writes `x` and a newline.
    Print(Arg, Span),
    /// `putchar(x)`: writes the byte `x`.
    Putchar(Arg, Span),
    /// `v = getchar()` (`op0(v, getchar, Rest)`): reads a byte of input, -1 at its end.
    Getchar {
        /// The variable assigned.
        dst: Name,
        /// The whole statement.
        span: Span,
    },
    /// `r = call f(args...)`.
    Call {
        /// The variable that receives the result.
        dst: Name,
        /// The function called.
        func: Name,
        /// The arguments.
        args: Vec<Arg>,
        /// The whole statement.
        span: Span,
    },
}

impl Stmt {
    /// Where the statement was written, as far as the tree knows (a hint that keeps no
    /// span gives its variable's).
    pub fn span(&self) -> Span {
        match self {
            Stmt::Op { span, .. }
            | Stmt::MergePoint { span, .. }
            | Stmt::CanEnterJit(span)
            | Stmt::SetItem { span, .. }
            | Stmt::Print(_, span)
            | Stmt::Putchar(_, span)
            | Stmt::Getchar { span, .. }
            | Stmt::Call { span, .. } => *span,
            Stmt::Promote(v) => v.span,
        }
    }
}

/// How a block ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Term {
    /// `goto L` / `jump(L)`.
    Goto(Name),
    /// `if v goto L1 else goto L2`.
    If {
        /// The condition variable.
        cond: Name,
        /// Taken when `cond` is not the integer 0.
        then: Name,
        /// Taken when `cond` is 0.
        els: Name,
    },
    /// `print_and_stop(arg)`.
    PrintAndStop(Arg),
    /// `promote(v, L)`: jump to `L`, freezing `v` for the tracer.
    Promote {
        /// The promoted variable.
        var: Name,
        /// Where to continue.
        target: Name,
    },
    /// `return arg`: ends the current call with `arg` as its result.
    Return(Arg),
}

/// The declaration of a function at a block: `func NAME(params):` (`func(NAME, [P, ...]).`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Func {
    /// The parameters, in order.
    pub params: Vec<Name>,
    /// Whether it was marked `@elidable` (`elidable(NAME).`).
    pub elidable: bool,
    /// Where it was declared.
    pub span: Span,
}

/// A labelled block: statements, then one terminator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// The block's label.
    pub label: Name,
    /// The statements, in order.
    pub stmts: Vec<Stmt>,
    /// The terminator.
    pub term: Term,
    /// Where the terminator was written.
    pub term_span: Span,
    /// The function the block declares, if it is a function's entry.
    pub func: Option<Func>,
}

/// A parsed program: its blocks in source order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Ast {
    /// The blocks, in source order.
    pub blocks: Vec<Block>,
}

impl Ast {
    /// The same program with every span set to zero, for comparing programs parsed from
    /// different texts.
    pub fn without_spans(&self) -> Ast {
        let z = Span::default();
        let name = |n: &Name| Name::new(n.text.clone(), z);
        let arg = |a: &Arg| match a {
            Arg::Var(n) => Arg::Var(name(n)),
            Arg::Const(v, _) => Arg::Const(v.clone(), z),
        };
        let blocks = self
            .blocks
            .iter()
            .map(|b| Block {
                label: name(&b.label),
                stmts: b
                    .stmts
                    .iter()
                    .map(|s| match s {
                        Stmt::Op { dst, op, args, .. } => Stmt::Op {
                            dst: name(dst),
                            op: name(op),
                            args: args.iter().map(arg).collect(),
                            span: z,
                        },
                        Stmt::Promote(v) => Stmt::Promote(name(v)),
                        Stmt::MergePoint { greens, .. } => Stmt::MergePoint {
                            greens: greens.iter().map(name).collect(),
                            span: z,
                        },
                        Stmt::CanEnterJit(_) => Stmt::CanEnterJit(z),
                        Stmt::SetItem {
                            array,
                            index,
                            value,
                            ..
                        } => Stmt::SetItem {
                            array: name(array),
                            index: arg(index),
                            value: arg(value),
                            span: z,
                        },
                        Stmt::Print(a, _) => Stmt::Print(arg(a), z),
                        Stmt::Putchar(a, _) => Stmt::Putchar(arg(a), z),
                        Stmt::Getchar { dst, .. } => Stmt::Getchar {
                            dst: name(dst),
                            span: z,
                        },
                        Stmt::Call {
                            dst, func, args, ..
                        } => Stmt::Call {
                            dst: name(dst),
                            func: name(func),
                            args: args.iter().map(arg).collect(),
                            span: z,
                        },
                    })
                    .collect(),
                term: match &b.term {
                    Term::Goto(l) => Term::Goto(name(l)),
                    Term::If { cond, then, els } => Term::If {
                        cond: name(cond),
                        then: name(then),
                        els: name(els),
                    },
                    Term::PrintAndStop(a) => Term::PrintAndStop(arg(a)),
                    Term::Promote { var, target } => Term::Promote {
                        var: name(var),
                        target: name(target),
                    },
                    Term::Return(a) => Term::Return(arg(a)),
                },
                term_span: z,
                func: b.func.as_ref().map(|f| Func {
                    params: f.params.iter().map(name).collect(),
                    elidable: f.elidable,
                    span: z,
                }),
            })
            .collect();
        Ast { blocks }
    }
}

/// How deep lists may nest in a constant: deeper is refused with an error, before anything
/// recursive (printing, comparing, dropping a value) could run out of stack.
pub const MAX_LIST_NESTING: usize = 10_000;

/// How deep a Prolog term may nest (a block of the Prolog syntax is one term nesting as
/// deep as it has statements).
pub const MAX_TERM_NESTING: usize = 100_000;

/// Words of the readable syntax that cannot be variables or labels.
pub const KEYWORDS: &[&str] = &[
    "if",
    "goto",
    "else",
    "print_and_stop",
    "promote",
    "jit_merge_point",
    "can_enter_jit",
    "func",
    "call",
    "return",
    "print",
    "putchar",
    "getchar",
];

/// Whether `text` is an identifier (`[A-Za-z_][A-Za-z0-9_]*`) that is not a keyword.
pub fn is_plain_name(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&text)
}
