//! Trace printers: the articles' notation, and the SSA text form that the parser reads back.

use std::fmt::Write as _;

use flowjit_runtime::Value;

use super::ir::{Inst, Kind, Opnd, Snapshot, Trace};
use crate::lang::print::fg_const;
use crate::lang::{BlockId, FuncId, Inst as Stmt, Operand, Program, Slot, Terminator};

/// The names of a trace's variables and labels: a program's, or those a trace read from
/// text declared ([`super::parse::TextNames`]).
pub trait Names {
    /// The name of variable `slot`.
    fn var(&self, slot: Slot) -> &str;
    /// The label of block `block`.
    fn label(&self, block: BlockId) -> &str;
    /// The name of function `func`.
    fn func(&self, func: FuncId) -> &str;
}

impl Names for Program {
    fn var(&self, slot: Slot) -> &str {
        Program::var(self, slot)
    }

    fn label(&self, block: BlockId) -> &str {
        Program::label(self, block)
    }

    fn func(&self, func: FuncId) -> &str {
        &Program::func(self, func).name
    }
}

fn article_operand(program: &Program, o: &Operand) -> String {
    match o {
        Operand::Var(s) => format!("var({})", program.var(*s)),
        Operand::Const(v) => format!("const({v})"),
    }
}

/// One instruction in the articles' notation (`op2(res,mul,var(res),var(x))`,
/// `guard_true(y,[],power_done)`), or `None` for instructions the articles do not show
/// (`input`).
pub fn article_inst(program: &Program, trace: &Trace, inst: &Inst) -> Option<String> {
    let label = |inst: &Inst| {
        trace
            .snap_of(inst)
            .map_or("?", |s| program.label(s.pos.block))
            .to_string()
    };
    let origin = inst.origin?;
    let block = program.block(origin.block);
    let stmt = block.insts.get(origin.inst);
    Some(match (inst.kind, stmt, &block.term) {
        (Kind::Op(op), Some(Stmt::Op1 { dst, a, .. }), _) => format!(
            "op1({},{},{})",
            program.var(*dst),
            op.name(),
            article_operand(program, a)
        ),
        (Kind::GetItem, Some(Stmt::Op2 { dst, a, b, .. }), _) => format!(
            "op2({},readlist,{},{})",
            program.var(*dst),
            article_operand(program, a),
            article_operand(program, b)
        ),
        (
            Kind::SetItem,
            Some(Stmt::SetItem {
                array,
                index,
                value,
            }),
            _,
        ) => format!(
            "setitem(var({}),{},{})",
            program.var(*array),
            article_operand(program, index),
            article_operand(program, value)
        ),
        (Kind::Print, Some(Stmt::Print(a)), _) | (Kind::Putchar, Some(Stmt::Putchar(a)), _) => {
            format!("{}({})", inst.kind.name(), article_operand(program, a))
        }
        (Kind::Getchar, Some(Stmt::Getchar(dst)), _) => {
            format!("op0({},getchar)", program.var(*dst))
        }
        (Kind::CallPure(func), Some(Stmt::Call { dst, args, .. }), _) => {
            let args: Vec<String> = args.iter().map(|a| article_operand(program, a)).collect();
            format!(
                "call({},{},[{}])",
                program.var(*dst),
                program.func(func).name,
                args.join(",")
            )
        }
        (Kind::Op(op), Some(Stmt::Op2 { dst, a, b, .. }), _) => format!(
            "op2({},{},{},{})",
            program.var(*dst),
            op.name(),
            article_operand(program, a),
            article_operand(program, b)
        ),
        (Kind::GuardTrue | Kind::GuardFalse, None, Terminator::If { cond, .. }) => {
            format!(
                "{}({},[],{})",
                inst.kind.name(),
                program.var(*cond),
                label(inst)
            )
        }
        (Kind::GuardValue, Some(Stmt::Promote(var)), _)
        | (Kind::GuardValue, None, Terminator::Promote { var, .. }) => {
            let value = inst.args[1]
                .as_const()
                .map_or(String::new(), Value::to_string);
            format!(
                "guard_value({},{value},[],{})",
                program.var(*var),
                label(inst)
            )
        }
        (Kind::GuardValue, Some(Stmt::MergePoint(greens)), _) => {
            // A green checked where a loop or bridge reaches the merge point: name it by the
            // snapshot entry that holds the guarded operand, if one does.
            let value = inst.args[1]
                .as_const()
                .map_or(String::new(), Value::to_string);
            let var = trace
                .snap_of(inst)
                .and_then(|s| {
                    s.entries
                        .iter()
                        .find(|(slot, o)| greens.contains(slot) && *o == inst.args[0])
                })
                .map_or_else(
                    || opnd(&inst.args[0]),
                    |(slot, _)| program.var(*slot).to_string(),
                );
            format!("guard_value({var},{value},[],{})", label(inst))
        }
        _ => return None,
    })
}

/// The trace in the articles' notation, one operation a line, ending in `loop`.
pub fn articles(program: &Program, trace: &Trace) -> String {
    let mut out = String::new();
    for inst in &trace.insts {
        if inst.kind == Kind::Loop {
            out.push_str("loop\n");
        } else if let Some(line) = article_inst(program, trace, inst) {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// An operand in the SSA form: `v3`, or a constant as the readable syntax writes it.
pub fn opnd(o: &Opnd) -> String {
    match o {
        Opnd::Ref(r) => r.to_string(),
        Opnd::Const(v) => fg_const(v),
    }
}

/// A snapshot in the SSA form: `@label:index #cost [var=opnd, ...]`, the entries in the
/// order of their names (so that the text does not depend on how slots are numbered); then,
/// for each call the snapshot is inside (outermost first), `> dst=label:index [var=opnd,
/// ...]`: the caller's variable that receives the result, where the caller goes on, and the
/// callee's variables; last, in braces, each virtual array the snapshot holds, with its
/// elements: `{v4=[v2, 7]}`.
pub fn snapshot(names: &dyn Names, snap: &Snapshot) -> String {
    let entries = |es: &[(Slot, Opnd)]| {
        let mut entries: Vec<(&str, String)> = es
            .iter()
            .map(|(slot, o)| (names.var(*slot), opnd(o)))
            .collect();
        entries.sort();
        let entries: Vec<String> = entries.iter().map(|(v, o)| format!("{v}={o}")).collect();
        entries.join(", ")
    };
    let mut text = format!(
        "@{}:{} #{} [{}]",
        names.label(snap.pos.block),
        snap.pos.inst,
        snap.cost,
        entries(&snap.entries)
    );
    for call in &snap.frames {
        let _ = write!(
            text,
            " > {}={}:{} [{}]",
            names.var(call.dst),
            names.label(call.ret.block),
            call.ret.inst,
            entries(&call.entries)
        );
    }
    if !snap.virtuals.is_empty() {
        let virtuals: Vec<String> = snap
            .virtuals
            .iter()
            .map(|v| {
                let fields: Vec<String> = v.fields.iter().map(opnd).collect();
                format!("{}=[{}]", v.at, fields.join(", "))
            })
            .collect();
        let _ = write!(text, " {{{}}}", virtuals.join(", "));
    }
    if !snap.stores.is_empty() {
        let stores: Vec<String> = snap
            .stores
            .iter()
            .map(|s| format!("{}[{}]={}", opnd(&s.array), opnd(&s.index), opnd(&s.value)))
            .collect();
        let _ = write!(text, " | {}", stores.join(", "));
    }
    text
}

/// One instruction in the SSA form: `v3:int = add v1, 1  @l:2 #2 [x=v1]`.
pub fn ssa_inst(names: &dyn Names, trace: &Trace, index: usize) -> String {
    let inst = &trace.insts[index];
    let mut line = String::new();
    if inst.kind.has_result() {
        let _ = write!(line, "v{index}:{} = ", inst.ty);
    }
    line.push_str(inst.kind.name());
    match inst.kind {
        Kind::Input(slot) | Kind::Param(slot) => {
            let _ = write!(line, " {}", names.var(slot));
        }
        Kind::CallPure(func) => {
            let _ = write!(line, " {}", names.func(func));
        }
        _ => {}
    }
    let args: Vec<String> = inst.args.iter().map(opnd).collect();
    if !args.is_empty() {
        let _ = write!(line, " {}", args.join(", "));
    }
    if let Some(snap) = trace.snap_of(inst) {
        let _ = write!(line, "  {}", snapshot(names, snap));
    }
    line
}

/// The trace's inputs, as the first line of the SSA form gives them: each variable the
/// trace reads from the frame, with its type, in the order the trace reads them
/// (`[res:int, x:int, y:int]`, in the manner of PyPy's `[i0, p1]`).
pub fn header(names: &dyn Names, trace: &Trace) -> String {
    let inputs: Vec<String> = trace
        .insts
        .iter()
        .filter_map(|inst| match inst.kind {
            Kind::Input(slot) => Some(format!("{}:{}", names.var(slot), inst.ty)),
            _ => None,
        })
        .collect();
    format!("[{}]", inputs.join(", "))
}

/// The whole trace in the SSA form: its inputs, then one instruction a line. The text is
/// standalone: [`super::parse::parse_ssa`] reads it back without the program.
pub fn ssa(names: &dyn Names, trace: &Trace) -> String {
    let mut out = header(names, trace) + "\n";
    for i in 0..trace.insts.len() {
        out.push_str(&ssa_inst(names, trace, i));
        out.push('\n');
    }
    out
}
