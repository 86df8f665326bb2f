//! The checks made before anything runs, and the resolution of names to slots and blocks.
//!
//! Every problem is collected, not just the first: a jump to a missing label, a label defined
//! twice, an unknown operation, an operation with the wrong number of arguments, and a
//! `jit_merge_point` that is not the first statement of its block.

use std::collections::HashMap;

use flowjit_runtime::Op;

use super::ast::{self, Arg, Ast, Name, Span, Stmt, Term};
use super::diag::Diagnostic;
use super::program::{Block, BlockId, Inst, Jump, Operand, Program, Slot, Terminator};

/// Checks `ast` and resolves it into a [`Program`], or returns every problem found.
pub fn check(ast: &Ast) -> Result<Program, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    if ast.blocks.is_empty() {
        diags.push(Diagnostic::new(
            Span::new(0, 0),
            "the program has no blocks",
        ));
        return Err(diags);
    }
    let mut labels: HashMap<&str, (BlockId, Span)> = HashMap::new();
    for (i, b) in ast.blocks.iter().enumerate() {
        if let Some((_, first)) = labels.get(b.label.text.as_str()) {
            diags.push(
                Diagnostic::new(
                    b.label.span,
                    format!("label `{}` is defined twice", b.label.text),
                )
                .with_note(*first, "first defined here"),
            );
        } else {
            labels.insert(&b.label.text, (BlockId(i as u32), b.label.span));
        }
    }
    let mut r = Resolver {
        labels,
        slots: HashMap::new(),
        vars: Vec::new(),
        diags,
    };
    let blocks: Vec<Block> = ast
        .blocks
        .iter()
        .enumerate()
        .map(|(i, b)| r.block(i, b))
        .collect();
    // One merge point: the driver keys traces by its greens.
    let mut merge_points = ast
        .blocks
        .iter()
        .flat_map(|b| &b.stmts)
        .filter_map(|s| match s {
            Stmt::MergePoint { span, .. } => Some(*span),
            _ => None,
        });
    let first_merge = merge_points.next();
    for extra in merge_points {
        let d = Diagnostic::new(extra, "a program has at most one jit_merge_point");
        r.diags.push(match first_merge {
            Some(first) => d.with_note(first, "the first one is here"),
            None => d,
        });
    }
    if first_merge.is_none() {
        for s in ast.blocks.iter().flat_map(|b| &b.stmts) {
            if let Stmt::CanEnterJit(span) = s {
                r.diags.push(Diagnostic::new(
                    *span,
                    "can_enter_jit needs a jit_merge_point in the program",
                ));
            }
        }
    }
    if r.diags.is_empty() {
        Ok(Program::new(blocks, r.vars))
    } else {
        r.diags.sort_by_key(|d| d.span.start);
        Err(r.diags)
    }
}

struct Resolver<'a> {
    labels: HashMap<&'a str, (BlockId, Span)>,
    slots: HashMap<String, Slot>,
    vars: Vec<String>,
    diags: Vec<Diagnostic>,
}

impl Resolver<'_> {
    fn slot(&mut self, name: &Name) -> Slot {
        if let Some(&s) = self.slots.get(&name.text) {
            return s;
        }
        let s = Slot(self.vars.len() as u32);
        self.vars.push(name.text.clone());
        self.slots.insert(name.text.clone(), s);
        s
    }

    fn operand(&mut self, a: &Arg) -> Operand {
        match a {
            Arg::Var(n) => Operand::Var(self.slot(n)),
            Arg::Const(v, _) => Operand::Const(v.clone()),
        }
    }

    fn jump(&mut self, from: usize, label: &Name) -> Jump {
        match self.labels.get(label.text.as_str()) {
            Some(&(target, _)) => Jump {
                target,
                back_edge: target.index() <= from,
            },
            None => {
                self.diags.push(Diagnostic::new(
                    label.span,
                    format!("no block is labelled `{}`", label.text),
                ));
                Jump {
                    target: BlockId(0),
                    back_edge: false,
                }
            }
        }
    }

    fn block(&mut self, index: usize, b: &ast::Block) -> Block {
        let mut insts = Vec::new();
        for (i, s) in b.stmts.iter().enumerate() {
            match s {
                Stmt::Op {
                    dst,
                    op,
                    args,
                    span,
                } => {
                    let Some(known) = Op::from_name(&op.text) else {
                        self.diags.push(Diagnostic::new(
                            op.span,
                            format!("unknown operation `{}`", op.text),
                        ));
                        continue;
                    };
                    if known.arity() != args.len() {
                        let span = Span::new(op.span.start, span.end.max(op.span.end));
                        self.diags.push(Diagnostic::new(
                            span,
                            format!(
                                "`{}` takes {} argument{}, not {}",
                                known.name(),
                                known.arity(),
                                if known.arity() == 1 { "" } else { "s" },
                                args.len()
                            ),
                        ));
                        continue;
                    }
                    let dst = self.slot(dst);
                    insts.push(match args.as_slice() {
                        [a] => Inst::Op1 {
                            dst,
                            op: known,
                            a: self.operand(a),
                        },
                        [a, b] => Inst::Op2 {
                            dst,
                            op: known,
                            a: self.operand(a),
                            b: self.operand(b),
                        },
                        _ => unreachable!("every operation takes one or two arguments"),
                    });
                }
                Stmt::Promote(v) => insts.push(Inst::Promote(self.slot(v))),
                Stmt::MergePoint { greens, span } => {
                    if i != 0 {
                        self.diags.push(Diagnostic::new(
                            *span,
                            "jit_merge_point must be the first statement of its block",
                        ));
                    }
                    let greens = greens.iter().map(|g| self.slot(g)).collect();
                    insts.push(Inst::MergePoint(greens));
                }
                Stmt::CanEnterJit(_) => insts.push(Inst::CanEnterJit),
            }
        }
        let term = match &b.term {
            Term::Goto(l) => Terminator::Goto(self.jump(index, l)),
            Term::If { cond, then, els } => Terminator::If {
                cond: self.slot(cond),
                then: self.jump(index, then),
                els: self.jump(index, els),
            },
            Term::PrintAndStop(a) => Terminator::PrintAndStop(self.operand(a)),
            Term::Promote { var, target } => Terminator::Promote {
                var: self.slot(var),
                target: self.jump(index, target),
            },
        };
        let cost = insts.iter().filter(|i| !i.is_hint()).count() as u64 + 1;
        let enters_jit = insts.iter().any(|i| matches!(i, Inst::CanEnterJit));
        Block {
            name: b.label.text.clone(),
            insts,
            term,
            cost,
            enters_jit,
            origins: None,
        }
    }
}
