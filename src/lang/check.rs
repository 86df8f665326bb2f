//! The checks made before anything runs, and the resolution of names to slots and blocks.
//!
//! Every problem is collected, not just the first: a jump to a missing label, a label defined
//! twice, an unknown operation, an operation with the wrong number of arguments, a
//! `jit_merge_point` that is not the first statement of its block, a call of a function
//! that is not declared or with the wrong number of arguments, a function named like an
//! operation, a parameter named twice, and an `@elidable` function from whose entry output,
//! input or `print_and_stop` can be reached (through jumps and calls).

use std::collections::HashMap;

use flowjit_runtime::Op;

use super::ast::{self, Arg, Ast, Name, Span, Stmt, Term};
use super::diag::Diagnostic;
use super::program::{
    Block, BlockId, Func, FuncId, Inst, Jump, Operand, Program, Slot, Terminator,
};

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
        funcs: HashMap::new(),
        slots: HashMap::new(),
        vars: Vec::new(),
        diags,
    };
    let funcs = r.functions(ast);
    let blocks: Vec<Block> = ast
        .blocks
        .iter()
        .enumerate()
        .map(|(i, b)| r.block(i, b))
        .collect();
    // Several merge points may be (SPEC §4); `can_enter_jit` needs one.
    let has_merge =
        (ast.blocks.iter().flat_map(|b| &b.stmts)).any(|s| matches!(s, Stmt::MergePoint { .. }));
    if !has_merge {
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
        elidable_effects(ast, &blocks, &funcs, &mut r.diags);
    }
    if r.diags.is_empty() {
        Ok(Program::new(blocks, funcs, r.vars))
    } else {
        r.diags.sort_by_key(|d| d.span.start);
        Err(r.diags)
    }
}

/// Reports each `@elidable` function from whose entry an effect that anyone can see
/// (`print`, `putchar`, `getchar`, `print_and_stop`) can be reached, through jumps and
/// calls: such a function would not be elidable.
fn elidable_effects(ast: &Ast, blocks: &[Block], funcs: &[Func], diags: &mut Vec<Diagnostic>) {
    for f in funcs.iter().filter(|f| f.elidable) {
        let mut seen = vec![false; blocks.len()];
        let mut work = vec![f.entry];
        seen[f.entry.index()] = true;
        let mut found: Option<(Span, &str)> = None;
        while let Some(id) = work.pop() {
            let (block, source) = (&blocks[id.index()], &ast.blocks[id.index()]);
            for (inst, stmt) in block.insts.iter().zip(&source.stmts) {
                if inst.is_io() {
                    let what = match inst {
                        Inst::Print(_) => "print",
                        Inst::Putchar(_) => "putchar",
                        _ => "getchar",
                    };
                    found = Some((stmt.span(), what));
                    break;
                }
            }
            if found.is_none() {
                if let Terminator::PrintAndStop(_) = block.term {
                    found = Some((source.term_span, "print_and_stop"));
                }
            }
            if found.is_some() {
                break;
            }
            let calls = block.insts.iter().filter_map(|i| match i {
                Inst::Call { func, .. } => Some(funcs[func.index()].entry),
                _ => None,
            });
            for next in block.term.jumps().map(|j| j.target).chain(calls) {
                if !std::mem::replace(&mut seen[next.index()], true) {
                    work.push(next);
                }
            }
        }
        if let Some((span, what)) = found {
            let decl = ast.blocks[f.entry.index()]
                .func
                .as_ref()
                .map_or(Span::default(), |d| d.span);
            diags.push(
                Diagnostic::new(
                    decl,
                    format!(
                        "function `{}` is marked elidable, but `{what}` can be reached from it",
                        f.name
                    ),
                )
                .with_note(span, format!("`{what}` is here")),
            );
        }
    }
}

struct Resolver<'a> {
    labels: HashMap<&'a str, (BlockId, Span)>,
    funcs: HashMap<String, (FuncId, usize)>,
    slots: HashMap<String, Slot>,
    vars: Vec<String>,
    diags: Vec<Diagnostic>,
}

impl Resolver<'_> {
    /// The functions the blocks declare, in block order, checked.
    fn functions(&mut self, ast: &Ast) -> Vec<Func> {
        let mut funcs = Vec::new();
        for (i, b) in ast.blocks.iter().enumerate() {
            let Some(decl) = &b.func else { continue };
            if Op::from_name(&b.label.text).is_some() {
                self.diags.push(Diagnostic::new(
                    b.label.span,
                    format!("function `{}` is named like an operation", b.label.text),
                ));
            }
            let mut params: Vec<Slot> = Vec::new();
            for p in &decl.params {
                let slot = self.slot(p);
                if params.contains(&slot) {
                    self.diags.push(Diagnostic::new(
                        p.span,
                        format!("parameter `{}` is named twice", p.text),
                    ));
                }
                params.push(slot);
            }
            let id = FuncId(funcs.len() as u32);
            self.funcs
                .entry(b.label.text.clone())
                .or_insert((id, params.len()));
            funcs.push(Func {
                name: b.label.text.clone(),
                entry: BlockId(i as u32),
                params,
                elidable: decl.elidable,
            });
        }
        funcs
    }

    /// The function `name` calls with `args` arguments, if it is declared and takes them.
    fn callee(&mut self, name: &Name, args: usize, span: Span) -> Option<FuncId> {
        let Some(&(id, arity)) = self.funcs.get(&name.text) else {
            let why = if self.labels.contains_key(name.text.as_str()) {
                format!(
                    "block `{}` is not a function (declare it with `func {}(...):`)",
                    name.text, name.text
                )
            } else {
                format!("no function is named `{}`", name.text)
            };
            self.diags.push(Diagnostic::new(name.span, why));
            return None;
        };
        if arity != args {
            self.diags.push(Diagnostic::new(
                span,
                format!(
                    "function `{}` takes {arity} argument{}, not {args}",
                    name.text,
                    if arity == 1 { "" } else { "s" },
                ),
            ));
            return None;
        }
        Some(id)
    }

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

    /// Statement `s`, the `i`th of its block; `None` where it is in error (a diagnostic
    /// says why).
    fn stmt(&mut self, i: usize, s: &Stmt) -> Option<Inst> {
        Some(match s {
            Stmt::Op {
                dst,
                op,
                args,
                span,
            } => self.operation(dst, op, args, *span)?,
            Stmt::Promote(v) => Inst::Promote(self.slot(v)),
            Stmt::MergePoint { greens, span } => {
                if i != 0 {
                    self.diags.push(Diagnostic::new(
                        *span,
                        "jit_merge_point must be the first statement of its block",
                    ));
                }
                let greens = greens.iter().map(|g| self.slot(g)).collect();
                Inst::MergePoint(greens)
            }
            Stmt::CanEnterJit(_) => Inst::CanEnterJit,
            Stmt::SetItem {
                array,
                index,
                value,
                ..
            } => Inst::SetItem {
                array: self.slot(array),
                index: self.operand(index),
                value: self.operand(value),
            },
            Stmt::Print(a, _) => Inst::Print(self.operand(a)),
            Stmt::Putchar(a, _) => Inst::Putchar(self.operand(a)),
            Stmt::Getchar { dst, .. } => Inst::Getchar(self.slot(dst)),
            Stmt::Call {
                dst,
                func,
                args,
                span,
            } => {
                let func = self.callee(func, args.len(), *span)?;
                let args = args.iter().map(|a| self.operand(a)).collect();
                Inst::Call {
                    dst: self.slot(dst),
                    func,
                    args,
                }
            }
        })
    }

    /// `dst = op(args...)` at `span`; `None` for an unknown operation or one given the
    /// wrong number of arguments.
    fn operation(&mut self, dst: &Name, op: &Name, args: &[Arg], span: Span) -> Option<Inst> {
        let Some(known) = Op::from_name(&op.text) else {
            self.diags.push(Diagnostic::new(
                op.span,
                format!("unknown operation `{}`", op.text),
            ));
            return None;
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
            return None;
        }
        let dst = self.slot(dst);
        Some(match args {
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
        })
    }

    /// The terminator `term` of block `index`.
    fn terminator(&mut self, index: usize, term: &Term) -> Terminator {
        match term {
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
            Term::Return(a) => Terminator::Return(self.operand(a)),
        }
    }

    fn block(&mut self, index: usize, b: &ast::Block) -> Block {
        let mut insts = Vec::new();
        for (i, s) in b.stmts.iter().enumerate() {
            if let Some(inst) = self.stmt(i, s) {
                insts.push(inst);
            }
        }
        let term = self.terminator(index, &b.term);
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
