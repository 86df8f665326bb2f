//! Trace printers: the articles' notation, and the SSA text form that the parser reads back.
//!
//! Both name a trace's long constants once. A constant whose printed form is longer than
//! [`LONG`] characters (in an interpreter written in the flowgraph language, the green
//! bytecode list at every `guard_value`) is printed once, before the operations, and the
//! operations refer to it as `k0`, `k1`, ..., numbered in the order of their first use: the
//! articles' notation gives the table as Prolog comments, `% k0 = [mov_a_r0,...]`, the SSA
//! form as lines `k0 = [mov_a_r0,...]` after its inputs (which the parser reads back). One
//! instruction printed alone ([`ssa_inst`], [`article_inst`]) has no table: there a long
//! constant is shortened (`[mov_a_r0,mov_a_r1,mo...`).
//!
//! In the SSA form each guard is named `g` and its instruction index (guards define no
//! value, so the index is free): `v5:int = eq v1, 0`, then `g6: guard_false v5  @l:0 ...`.
//!
//! Atoms print as the runtime prints them in every dump (and in the green values of the
//! dumps' headers): bare when they are `[a-z][A-Za-z0-9_]*`, quoted with `'` otherwise
//! (`jump_if_a`, `'x y'`). The SSA form also quotes an atom that reads as one of its own
//! names, `'v3'` or `'k0'`. Names of variables, labels and functions in the articles'
//! notation are Prolog atoms too, quoted in the same way (`var('X')`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;

use flowjit_runtime::ops::shown_within;
use flowjit_runtime::{Atom, Value};

use super::ir::{Inst, Kind, Opnd, Snapshot, Trace, Ty};
use super::parse::is_numbered;
use crate::lang::{BlockId, FuncId, Inst as Stmt, Operand, Program, Slot, Terminator};
use flowjit_runtime::abi::Repr;

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

/// The longest printed form (in characters) of a constant that a dump prints where it is
/// used; a longer one is printed once, in the dump's table of constants.
pub const LONG: usize = 32;

/// How many characters a long constant keeps where there is no table.
const SHORTENED: usize = 24;

/// A dump's table of long constants: `k0`, `k1`, ... in the order of their first use.
#[derive(Default)]
struct Table {
    /// The entry of each value seen (a list hashes as its fingerprint: no formatting).
    by_value: HashMap<Value, usize>,
    /// The entry of each printed form: values that print alike share one (an array read
    /// back from text is another array with the same elements).
    by_text: HashMap<String, usize>,
    /// The printed form of each entry.
    texts: Vec<String>,
}

impl Table {
    /// `v` as `show` prints it, or the name of its entry when that is longer than [`LONG`].
    fn name(&mut self, v: &Value, show: fn(&Value) -> String) -> String {
        if let Some(k) = self.by_value.get(v) {
            return format!("k{k}");
        }
        let text = show(v);
        if text.chars().count() <= LONG {
            return text;
        }
        let k = match self.by_text.get(&text) {
            Some(&k) => k,
            None => {
                let k = self.texts.len();
                self.by_text.insert(text.clone(), k);
                self.texts.push(text);
                k
            }
        };
        self.by_value.insert(v.clone(), k);
        format!("k{k}")
    }
}

/// `v` as `show` prints it: named in `table`, or, without one, shortened to [`SHORTENED`]
/// characters when longer than [`LONG`] (formatting only what is shown: a constant may be
/// a whole program).
fn constant(table: &mut Option<&mut Table>, v: &Value, show: fn(&Value) -> String) -> String {
    if let Some(table) = table {
        return table.name(v, show);
    }
    // A printed value never ends in `...` (a list ends in `]`, a quoted atom in `'`), so
    // `shown_within` cut it exactly when it does.
    let probe = shown_within(v, 4 * (LONG + 1));
    if probe.ends_with("...") || probe.chars().count() > LONG {
        shown_within(v, SHORTENED)
    } else {
        show(v)
    }
}

/// A constant in the articles' notation, as the runtime prints it.
fn article_const(v: &Value) -> String {
    v.to_string()
}

/// A name (of a variable, label or function) in the articles' notation: a Prolog atom, bare
/// when it is `[a-z][A-Za-z0-9_]*`, quoted otherwise (as `flowjit fmt --format pl`
/// writes it).
fn pl_name(name: &str) -> Cow<'_, str> {
    if Atom::is_bare(name) {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(format!(
            "'{}'",
            name.replace('\\', "\\\\").replace('\'', "\\'")
        ))
    }
}

fn article_operand(program: &Program, o: &Operand, table: &mut Option<&mut Table>) -> String {
    match o {
        Operand::Var(s) => format!("var({})", pl_name(program.var(*s))),
        Operand::Const(v) => format!("const({})", constant(table, v, article_const)),
    }
}

/// One instruction in the articles' notation (`op2(res,mul,var(res),var(x))`,
/// `guard_true(y,[],power_done)`), or `None` for instructions the articles do not show
/// (`input`). Alone, without the trace's table of constants: a long constant is shortened.
pub fn article_inst(program: &Program, trace: &Trace, inst: &Inst) -> Option<String> {
    article_line(program, trace, inst, &mut None)
}

/// One instruction in the articles' notation, its long constants named in `table` if
/// there is one.
fn article_line(
    program: &Program,
    trace: &Trace,
    inst: &Inst,
    table: &mut Option<&mut Table>,
) -> Option<String> {
    let label = |inst: &Inst| {
        trace
            .snap_of(inst)
            .map_or(Cow::Borrowed("?"), |s| pl_name(program.label(s.pos.block)))
            .into_owned()
    };
    let var = |slot: &Slot| pl_name(program.var(*slot)).into_owned();
    let origin = inst.origin?;
    let block = program.block(origin.block);
    let stmt = block.insts.get(origin.inst);
    let mut operand = |o: &Operand| article_operand(program, o, table);
    Some(match (inst.kind, stmt, &block.term) {
        (Kind::Op(op), Some(Stmt::Op1 { dst, a, .. }), _) => {
            format!("op1({},{},{})", var(dst), op.name(), operand(a))
        }
        (Kind::GetItem, Some(Stmt::Op2 { dst, a, b, .. }), _) => {
            format!("op2({},readlist,{},{})", var(dst), operand(a), operand(b))
        }
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
            var(array),
            operand(index),
            operand(value)
        ),
        (Kind::Print, Some(Stmt::Print(a)), _) | (Kind::Putchar, Some(Stmt::Putchar(a)), _) => {
            format!("{}({})", inst.kind.name(), operand(a))
        }
        (Kind::Getchar, Some(Stmt::Getchar(dst)), _) => {
            format!("op0({},getchar)", var(dst))
        }
        (Kind::CallPure(func) | Kind::Call(func), Some(Stmt::Call { dst, args, .. }), _) => {
            let args: Vec<String> = args.iter().map(operand).collect();
            format!(
                "call({},{},[{}])",
                var(dst),
                pl_name(&program.func(func).name),
                args.join(",")
            )
        }
        (Kind::Op(op), Some(Stmt::Op2 { dst, a, b, .. }), _) => format!(
            "op2({},{},{},{})",
            var(dst),
            op.name(),
            operand(a),
            operand(b)
        ),
        (Kind::GuardTrue | Kind::GuardFalse, None, Terminator::If { cond, .. }) => {
            format!("{}({},[],{})", inst.kind.name(), var(cond), label(inst))
        }
        (Kind::GuardValue, Some(Stmt::Promote(promoted)), _)
        | (Kind::GuardValue, None, Terminator::Promote { var: promoted, .. }) => {
            let value = inst.args[1]
                .as_const()
                .map_or(String::new(), |v| constant(table, v, article_const));
            format!("guard_value({},{value},[],{})", var(promoted), label(inst))
        }
        (Kind::GuardValue, Some(Stmt::MergePoint(greens)), _) => {
            article_green(program, trace, inst, greens, &label(inst), table)
        }
        _ => return None,
    })
}

/// The guard `inst` on a green variable (of `greens`) where a loop or bridge reaches the
/// merge point, resuming at `label`: `guard_value(pc,3,[],dispatch)`. The green is named by
/// the snapshot entry that holds the guarded operand, if one does.
fn article_green(
    program: &Program,
    trace: &Trace,
    inst: &Inst,
    greens: &[Slot],
    label: &str,
    table: &mut Option<&mut Table>,
) -> String {
    let value = inst.args[1]
        .as_const()
        .map_or(String::new(), |v| constant(table, v, article_const));
    let green = trace
        .snap_of(inst)
        .and_then(|s| {
            s.entries
                .iter()
                .find(|(slot, o)| greens.contains(slot) && *o == inst.args[0])
        })
        .map_or_else(
            || opnd_in(&inst.args[0], table),
            |(slot, _)| pl_name(program.var(*slot)).into_owned(),
        );
    format!("guard_value({green},{value},[],{label})")
}

/// The trace in the articles' notation, one operation a line, ending in `loop`; its long
/// constants first, each on a comment line of its own (`% k0 = [mov_a_r0,...]`).
pub fn articles(program: &Program, trace: &Trace) -> String {
    let mut table = Table::default();
    let mut body = String::new();
    for inst in &trace.insts {
        if inst.kind == Kind::Loop {
            body.push_str("loop\n");
        } else if let Some(line) = article_line(program, trace, inst, &mut Some(&mut table)) {
            let _ = writeln!(body, "{line}");
        }
    }
    let mut out = String::new();
    for (k, text) in table.texts.iter().enumerate() {
        let _ = writeln!(out, "% k{k} = {text}");
    }
    out + &body
}

/// A constant in the SSA form: as the runtime prints it (an atom bare when it is
/// `[a-z][A-Za-z0-9_]*`, quoted otherwise), except that an atom that reads as one of the
/// form's names (`v3`, `k0`) is quoted.
pub fn ssa_const(v: &Value) -> String {
    match v {
        Value::Atom(a) if is_numbered(a.name(), 'v') || is_numbered(a.name(), 'k') => {
            format!("'{}'", a.name())
        }
        other => other.to_string(),
    }
}

/// An operand in the SSA form: `v3`, or a constant ([`ssa_const`]) in full.
pub fn opnd(o: &Opnd) -> String {
    match o {
        Opnd::Ref(r) => r.to_string(),
        Opnd::Const(v) => ssa_const(v),
    }
}

/// An operand in the SSA form, a long constant named in `table` if there is one.
fn opnd_in(o: &Opnd, table: &mut Option<&mut Table>) -> String {
    match o {
        Opnd::Ref(r) => r.to_string(),
        Opnd::Const(v) => constant(table, v, ssa_const),
    }
}

/// A snapshot in the SSA form: `@label:index #cost [var=opnd, ...]`, the entries in the
/// order of their names (so that the text does not depend on how slots are numbered); then,
/// for each call the snapshot is inside (outermost first), `> dst=label:index [var=opnd,
/// ...]`: the caller's variable that receives the result, where the caller goes on, and the
/// callee's variables; last, in braces, each virtual array the snapshot holds, with its
/// elements: `{v4=[v2, 7]}`. Alone, without a trace's table: a long constant is shortened.
pub fn snapshot(names: &dyn Names, snap: &Snapshot) -> String {
    snapshot_in(names, snap, &mut None)
}

fn snapshot_in(names: &dyn Names, snap: &Snapshot, table: &mut Option<&mut Table>) -> String {
    let mut entries = |es: &[(Slot, Opnd)]| {
        let mut entries: Vec<(&str, String)> = es
            .iter()
            .map(|(slot, o)| (names.var(*slot), opnd_in(o, table)))
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
                let fields: Vec<String> = v.fields.iter().map(|f| opnd_in(f, table)).collect();
                format!("{}=[{}]", v.at, fields.join(", "))
            })
            .collect();
        let _ = write!(text, " {{{}}}", virtuals.join(", "));
    }
    if !snap.stores.is_empty() {
        let stores: Vec<String> = snap
            .stores
            .iter()
            .map(|s| {
                format!(
                    "{}[{}]={}",
                    opnd_in(&s.array, table),
                    opnd_in(&s.index, table),
                    opnd_in(&s.value, table)
                )
            })
            .collect();
        let _ = write!(text, " | {}", stores.join(", "));
    }
    text
}

/// One instruction in the SSA form: `v3:int = add v1, 1  @l:2 #2 [x=v1]`, or a guard,
/// named `g` and its index, `g4: guard_true v3  @d:0 #3 [x=v3]`. Alone, without the
/// trace's table of constants: a long constant is shortened (`[mov_a_r0,mov_a_r1,mo...`).
pub fn ssa_inst(names: &dyn Names, trace: &Trace, index: usize) -> String {
    inst_line(names, trace, index, &mut None, None)
}

/// The name of the guard at `index` in the SSA form, `g` and its index: how dumps and
/// statistics refer to a guard (`trace 0 g6`, `trace 0 bridge 1 g3`).
pub fn guard_name(index: usize) -> String {
    format!("g{index}")
}

/// Whether instructions of `kind` are guards, which the SSA form names.
pub(crate) fn named_guard(kind: Kind) -> bool {
    kind.is_guard() || kind.name().starts_with("guard_")
}

fn inst_line(
    names: &dyn Names,
    trace: &Trace,
    index: usize,
    table: &mut Option<&mut Table>,
    held: Option<&[Option<Repr>]>,
) -> String {
    let inst = &trace.insts[index];
    let mut line = String::new();
    if inst.kind.has_result() {
        let _ = write!(line, "v{index}:{} = ", type_held(inst.ty, held, index));
    } else if named_guard(inst.kind) {
        let _ = write!(line, "{}: ", guard_name(index));
    }
    line.push_str(inst.kind.name());
    match inst.kind {
        Kind::Input(slot) | Kind::Param(slot) => {
            let _ = write!(line, " {}", var_in_call(names, slot));
        }
        Kind::CallPure(func) | Kind::Call(func) => {
            let _ = write!(line, " {}", names.func(func));
        }
        _ => {}
    }
    let args: Vec<String> = inst.args.iter().map(|a| opnd_in(a, table)).collect();
    if !args.is_empty() {
        let _ = write!(line, " {}", args.join(", "));
    }
    if let Some(snap) = trace.snap_of(inst) {
        let _ = write!(line, "  {}", snapshot_in(names, snap, table));
    }
    line
}

/// The name of variable `slot`, of the trace's frame or of an inlined call's
/// (`resume::in_call`): `x`, or `x^2` for `x` of the second call.
fn var_in_call(names: &dyn Names, slot: Slot) -> String {
    match crate::resume::call_of(slot) {
        (0, slot) => names.var(slot).to_string(),
        (depth, slot) => format!("{}^{depth}", names.var(slot)),
    }
}

/// The trace's inputs, as the first line of the SSA form gives them: each variable the
/// trace reads from the frame, with its type, in the order the trace reads them
/// (`[res:int, x:int, y:int]`, in the manner of PyPy's `[i0, p1]`).
pub fn header(names: &dyn Names, trace: &Trace) -> String {
    header_held(names, trace, None)
}

fn header_held(names: &dyn Names, trace: &Trace, held: Option<&[Option<Repr>]>) -> String {
    let inputs: Vec<String> = (trace.insts.iter().enumerate())
        .filter_map(|(i, inst)| match inst.kind {
            Kind::Input(slot) => Some(format!(
                "{}:{}",
                var_in_call(names, slot),
                type_held(inst.ty, held, i)
            )),
            _ => None,
        })
        .collect();
    format!("[{}]", inputs.join(", "))
}

/// The type of value `index` as the SSA form prints it: `num` for an integer machine code
/// holds boxed, as an integer of any size (`held`, from `opt::repr`), else its type.
fn type_held(ty: Ty, held: Option<&[Option<Repr>]>, index: usize) -> String {
    match held.and_then(|h| h[index]) {
        Some(Repr::Num) => "num".to_string(),
        _ => ty.to_string(),
    }
}

/// The whole trace in the SSA form: its inputs, its long constants (`k0 = [...]`, a line
/// each), then one instruction a line. The text is standalone: [`super::parse::parse_ssa`]
/// reads it back without the program.
pub fn ssa(names: &dyn Names, trace: &Trace) -> String {
    ssa_with(names, trace, None, &|_| Vec::new())
}

/// [`ssa`], with how machine code holds each value (`opt::repr`): an integer held boxed,
/// as an integer of any size, has the type `num` (`v4:num = add v2, v3`), which
/// [`super::parse::parse_ssa`] reads as `int`; and above each instruction, as comments
/// (`# bounds: v5-1 .. v5+4 < len v3`), the `notes` of what machine code checks there
/// (`opt::checks::Checks::notes`).
pub fn ssa_held(
    names: &dyn Names,
    trace: &Trace,
    held: &[Option<Repr>],
    notes: &dyn Fn(usize) -> Vec<String>,
) -> String {
    ssa_with(names, trace, Some(held), notes)
}

fn ssa_with(
    names: &dyn Names,
    trace: &Trace,
    held: Option<&[Option<Repr>]>,
    notes: &dyn Fn(usize) -> Vec<String>,
) -> String {
    let mut table = Table::default();
    let mut body = String::new();
    for i in 0..trace.insts.len() {
        for note in notes(i) {
            let _ = writeln!(body, "# {note}");
        }
        body.push_str(&inst_line(names, trace, i, &mut Some(&mut table), held));
        body.push('\n');
    }
    let mut out = header_held(names, trace, held) + "\n";
    for (k, text) in table.texts.iter().enumerate() {
        let _ = writeln!(out, "k{k} = {text}");
    }
    out + &body
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::parse::parse_ssa;

    /// The green bytecode of the register machine's square program: 136 characters.
    const LIST: &str = "[mov_a_r0,mov_a_r1,mov_r0_a,decr_a,mov_a_r0,mov_r2_a,add_r1_to_a,mov_a_r2,mov_r0_a,jump_if_a,2,mov_r2_a,return_a]";

    /// A trace as the SSA form prints it: its lines, without the indentation of the source.
    fn text(lines: &[&str]) -> String {
        lines.iter().map(|l| format!("{}\n", l.trim())).collect()
    }

    fn reprinted(text: &str) -> String {
        let (trace, names) = parse_ssa(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        ssa(&names, &trace)
    }

    #[test]
    fn a_guard_is_named_by_its_index_and_the_name_reads_back() {
        let t = text(&[
            "[x:int]",
            "v0:int = input x  @l:0 #0 []",
            "v1:int = eq v0, 0",
            "g2: guard_false v1  @d:0 #1 []",
            "g3: guard_value v0, 5  @e:0 #1 []",
            "v4:int = sub v0, 1  @l:1 #2 []",
            "g5: guard_true v4  @d:0 #3 [x=v4]",
            "loop  @l:0 #3 [x=v4]",
        ]);
        assert_eq!(reprinted(&t), t);
        let (trace, names) = parse_ssa(&t).expect("a valid trace");
        assert_eq!(
            ssa_inst(&names, &trace, 2),
            "g2: guard_false v1  @d:0 #1 []"
        );
        assert_eq!(guard_name(5), "g5");
        // The name is optional when read: the printer adds it.
        assert_eq!(reprinted(&t.replace("g3: ", "")), t);
        // Every kind named `guard_...` is a guard, and the printer names it.
        for name in ["guard_true", "guard_false", "guard_value"] {
            let kind = Kind::from_name(name).expect("a kind");
            assert!(kind.is_guard() && named_guard(kind), "{name}");
        }
        assert!(!named_guard(Kind::Loop));
    }

    #[test]
    fn a_guard_named_by_another_number_is_rejected() {
        let good = text(&[
            "[x:int]",
            "v0:int = input x  @l:0 #0 []",
            "g1: guard_true v0  @d:0 #1 []",
            "loop  @l:0 #1 []",
        ]);
        assert!(parse_ssa(&good).is_ok());
        assert_eq!(
            parse_ssa(&good.replace("g1:", "g2:")).unwrap_err(),
            "line 3: guard `g2` is instruction 1 of the trace: a guard is named by its \
             index, `g1`"
        );
        assert!(parse_ssa(&good.replace("g1:", "g01:"))
            .unwrap_err()
            .contains("named by its index, `g1`"));
        assert_eq!(
            parse_ssa(&good.replace("loop  @", "g3: loop  @")).unwrap_err(),
            "line 4: `g3:` names a guard, and `loop` is not one"
        );
    }

    #[test]
    fn a_long_constant_is_printed_once_and_read_back() {
        let t = text(&[
            "[b:list, pc:int]",
            &format!("k0 = {LIST}"),
            "k1 = 100000000000000000000000000000000000000",
            "v0:list = input b  @l:0 #0 []",
            "g1: guard_value v0, k0  @l:0 #0 []",
            "v2:int = input pc  @l:1 #1 []",
            "v3:int = add v2, k1  @l:1 #1 []",
            "v4:atom = readlist k0, v2  @l:2 #1 [b=k0]",
            "g5: guard_value v0, k0  @l:3 #2 [b=k0, op=v4, x=[a,b]]",
            "loop  @l:0 #3 [b=k0, op=v4, pc=v3]",
        ]);
        assert_eq!(reprinted(&t), t);
        // Written in full, the constants are named as they first appear.
        let full = t
            .lines()
            .filter(|l| !l.starts_with('k'))
            .map(|l| {
                let l = l.replace("k0", LIST);
                format!(
                    "{}\n",
                    l.replace("k1", "100000000000000000000000000000000000000")
                )
            })
            .collect::<String>();
        assert_eq!(reprinted(&full), t);
        // Alone, an instruction shortens its long constants.
        let (trace, names) = parse_ssa(&t).expect("a valid trace");
        assert_eq!(
            ssa_inst(&names, &trace, 5),
            "g5: guard_value v0, [mov_a_r0,mov_a_r1,mo...  @l:3 #2 [b=[mov_a_r0,mov_a_r1,mo..., \
             op=v4, x=[a,b]]"
        );
        assert_eq!(
            ssa_inst(&names, &trace, 3),
            "v3:int = add v2, 100000000000000000000...  @l:1 #1 []"
        );
        // A name used before its line, or defined twice, is an error.
        let late = t
            .replace("k1 = 1", "# ")
            .replace("[b=k0, op=v4, pc=v3]", "[b=k1]");
        assert_eq!(
            parse_ssa(&late).unwrap_err(),
            "line 7: `k1` is used before its line `k1 = CONSTANT` defines it"
        );
        let twice = t.replace("k1 = 1000", "k0 = 1000");
        assert_eq!(
            parse_ssa(&twice).unwrap_err(),
            "line 3: `k0` is defined twice"
        );
        assert!(parse_ssa(&t.replace("k1 = 1000", "k1 = k0, 1000"))
            .unwrap_err()
            .contains("bad constant"));
        // A constant of 32 characters is printed where it is used.
        let short = "[aaaaaaaaaa,bbbbbbbbbb,ccccccccc]";
        assert_eq!(short.len(), LONG + 1);
        let t = text(&[
            "[b:list]",
            "v0:list = input b  @l:0 #0 []",
            &format!("g1: guard_value v0, {}]  @l:0 #0 []", &short[..LONG - 1]),
            "loop  @l:0 #1 []",
        ]);
        assert_eq!(reprinted(&t), t);
    }

    #[test]
    fn atoms_print_bare_unless_they_read_as_names() {
        let t = text(&[
            "[op:atom]",
            "v0:atom = input op  @l:0 #0 []",
            "v1:int = eq v0, jump_if_a",
            "g2: guard_true v1  @d:0 #1 [a='x y', b='v0', c='k1', d=[v0,k1,'Q'], e=g2]",
            "loop  @l:0 #2 []",
        ]);
        assert_eq!(reprinted(&t), t);
        // Quoted where it needs no quotes, an atom reads as itself and prints bare.
        assert_eq!(reprinted(&t.replace(", jump_if_a", ", 'jump_if_a'")), t);
        let (trace, _) = parse_ssa(&t).expect("a valid trace");
        let snap = trace.snap_of(&trace.insts[2]).expect("a snapshot");
        let shown: Vec<String> = snap.entries.iter().map(|(_, o)| opnd(o)).collect();
        assert_eq!(shown, ["'x y'", "'v0'", "'k1'", "[v0,k1,'Q']", "g2"]);
    }
}
