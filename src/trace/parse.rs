//! A parser for the SSA text form that [`super::print::ssa`] prints, so that tests (and
//! people) can write traces as text.
//!
//! The form is standalone: it needs no program. Its first line declares the trace's inputs,
//! the variables it reads from the frame, with their types (`[x:int, c:list]`); variables
//! and labels named later (in snapshots, `param`s) are declared by their first use, and
//! [`TextNames`] keeps the names for printing. Every instruction that defines a value
//! states its type (`v2:int = add v0, 1`), which must be the one its kind gives.
//!
//! Value names (`v0`, `v7`, ...) need not be the instruction indices: each `vN:ty = ...`
//! line defines the name, later uses refer to it, and the parsed trace renumbers. A guard
//! may be named, `g6: guard_false v5 ...`, and then by its own index only (as the printer
//! names it): the line must be the trace's instruction 6. Lines `k0 = CONSTANT` (after the
//! inputs, before their use) name the trace's long constants, and an operand `k0` is that
//! constant; an atom of the form `vN` or `kN` is quoted, `'k0'`. Lines starting with `#`
//! and blank lines are skipped. The anchor is the label the `loop` resumes at.

use std::collections::HashMap;

use flowjit_runtime::Value;

use super::ir::{Inst, Kind, Opnd, Ref, SnapId, Snapshot, Trace, Ty};
use super::print::{named_guard, Names};
use crate::lang::parse_fg::parse_fg_const;
use crate::lang::{BlockId, FuncId, Slot};
use crate::resume::{Inlined, Store, Virtual};
use crate::state::Position;

/// The variables and labels a trace read from text names, by slot and block number.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextNames {
    /// Variable names, by slot.
    pub vars: Vec<String>,
    /// Labels, by block number.
    pub labels: Vec<String>,
    /// Function names, by function number.
    pub funcs: Vec<String>,
}

impl TextNames {
    fn intern(names: &mut Vec<String>, name: &str) -> u32 {
        let index = names.iter().position(|n| n == name).unwrap_or_else(|| {
            names.push(name.to_string());
            names.len() - 1
        });
        index as u32
    }

    /// The slot of variable `name`, declaring it if new.
    pub fn slot(&mut self, name: &str) -> Slot {
        Slot(Self::intern(&mut self.vars, name))
    }

    /// The block labelled `label`, declaring it if new.
    pub fn block(&mut self, label: &str) -> BlockId {
        BlockId(Self::intern(&mut self.labels, label))
    }

    /// The function named `name`, declaring it if new.
    pub fn function(&mut self, name: &str) -> FuncId {
        FuncId(Self::intern(&mut self.funcs, name))
    }
}

impl Names for TextNames {
    fn var(&self, slot: Slot) -> &str {
        &self.vars[slot.index()]
    }

    fn label(&self, block: BlockId) -> &str {
        &self.labels[block.index()]
    }

    fn func(&self, func: FuncId) -> &str {
        &self.funcs[func.index()]
    }
}

/// Splits `s` at each top-level `sep` (outside quotes and brackets).
fn split_top(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut quoted, mut escaped, mut start) = (0i32, false, false, 0);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '\'' => quoted = !quoted,
            '[' | '(' if !quoted => depth += 1,
            ']' | ')' if !quoted => depth -= 1,
            c if c == sep && !quoted && depth == 0 => {
                parts.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

struct Parser {
    text: TextNames,
    names: HashMap<String, Ref>,
    /// The table of long constants: `k0 = [...]`.
    consts: HashMap<String, Value>,
}

/// Whether `text` is a name of the SSA form made of `prefix` (`v` a value, `k` a constant
/// of the table, `g` a guard) and decimal digits.
pub(super) fn is_numbered(text: &str, prefix: char) -> bool {
    text.strip_prefix(prefix)
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

/// A variable or label name: letters, digits and `_`, not starting with a digit.
fn is_name(text: &str) -> bool {
    text.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && text.chars().all(|c| c.is_alphanumeric() || c == '_')
}

impl Parser {
    fn opnd(&self, text: &str) -> Result<Opnd, String> {
        let text = text.trim();
        if is_numbered(text, 'v') {
            return self
                .names
                .get(text)
                .map(|r| Opnd::Ref(*r))
                .ok_or_else(|| format!("`{text}` is used before it is defined"));
        }
        if is_numbered(text, 'k') {
            return self
                .consts
                .get(text)
                .map(|v| Opnd::Const(v.clone()))
                .ok_or_else(|| {
                    format!("`{text}` is used before its line `{text} = CONSTANT` defines it")
                });
        }
        parse_fg_const(text)
            .map(Opnd::Const)
            .map_err(|d| format!("bad operand `{text}`: {}", d.message))
    }

    /// `kN = CONSTANT`: an entry of the table of long constants.
    fn constant(&mut self, name: &str, text: &str) -> Result<(), String> {
        let text = text.trim();
        if is_numbered(text, 'v') || is_numbered(text, 'k') {
            return Err(format!(
                "`{name}` must be a constant, not `{text}` (an atom of this form is quoted: \
                 `'{text}'`)"
            ));
        }
        let value = parse_fg_const(text)
            .map_err(|d| format!("bad constant `{text}` for `{name}`: {}", d.message))?;
        if self.consts.insert(name.to_string(), value).is_some() {
            return Err(format!("`{name}` is defined twice"));
        }
        Ok(())
    }

    fn slot(&mut self, name: &str) -> Result<Slot, String> {
        let name = name.trim();
        if !is_name(name) {
            return Err(format!("`{name}` is not a variable name"));
        }
        Ok(self.text.slot(name))
    }

    fn snapshot(&mut self, text: &str) -> Result<Snapshot, String> {
        let bad = || {
            format!(
                "bad snapshot `@{text}`: expected @LABEL:INDEX #COST [VAR=OPND, ...], then \
                 `> VAR=LABEL:INDEX [VAR=OPND, ...]` for each call it is inside"
            )
        };
        // `| ARRAY[INDEX]=OPND, ...` at the end: the stores not made yet.
        let (text, stores) = match split_top(text, '|').as_slice() {
            [head, stores] => (*head, self.stores(stores)?),
            _ => (text, Vec::new()),
        };
        // `{vN=[OPND, ...], ...}` then: the virtual arrays.
        let (text, virtuals) = match text.trim_end().strip_suffix('}') {
            Some(head) => {
                let open = head.rfind('{').ok_or_else(bad)?;
                (&head[..open], self.virtuals(&head[open + 1..])?)
            }
            None => (text, Vec::new()),
        };
        let mut parts = split_top(text, '>').into_iter();
        let own = parts.next().ok_or_else(bad)?;
        let (pos, rest) = own.split_once(' ').ok_or_else(bad)?;
        let pos = self.position(pos).ok_or_else(bad)?;
        let rest = rest.trim_start();
        let (cost, entries) = rest
            .strip_prefix('#')
            .and_then(|r| r.split_once(' '))
            .ok_or_else(bad)?;
        let cost = cost.parse().map_err(|_| bad())?;
        let entries = self.entries(entries).ok_or_else(bad)??;
        let mut frames = Vec::new();
        for call in parts {
            let (head, entries) = call.trim().split_once(' ').ok_or_else(bad)?;
            let (dst, ret) = head.split_once('=').ok_or_else(bad)?;
            let dst = self.slot(dst)?;
            let ret = self.position(ret).ok_or_else(bad)?;
            let entries = self.entries(entries).ok_or_else(bad)??;
            frames.push(Inlined { ret, dst, entries });
        }
        Ok(Snapshot {
            pos,
            cost,
            entries,
            frames,
            virtuals,
            stores,
        })
    }

    /// `ARRAY[INDEX]=OPND, ...`: stores not made yet.
    fn stores(&mut self, text: &str) -> Result<Vec<Store>, String> {
        let mut stores = Vec::new();
        for part in split_top(text, ',') {
            let bad = || format!("bad store `{}`: expected ARRAY[INDEX]=OPND", part.trim());
            let (at, value) = part.split_once("]=").ok_or_else(bad)?;
            let (array, index) = at.rsplit_once('[').ok_or_else(bad)?;
            stores.push(Store {
                array: self.opnd(array)?,
                index: self.opnd(index)?,
                value: self.opnd(value)?,
            });
        }
        Ok(stores)
    }

    /// `vN=[OPND, ...], ...`: virtual arrays and their elements, sorted by ref.
    fn virtuals(&mut self, text: &str) -> Result<Vec<Virtual>, String> {
        let mut virtuals = Vec::new();
        for part in split_top(text, ',') {
            let bad = || {
                format!(
                    "bad virtual array `{}`: expected vN=[OPND, ...]",
                    part.trim()
                )
            };
            let (at, fields) = part.split_once('=').ok_or_else(bad)?;
            let at = self.opnd(at)?.as_ref().ok_or_else(bad)?;
            let inner = fields
                .trim()
                .strip_prefix('[')
                .and_then(|f| f.strip_suffix(']'));
            let inner = inner.ok_or_else(bad)?;
            let fields = if inner.trim().is_empty() {
                Vec::new()
            } else {
                split_top(inner, ',')
                    .into_iter()
                    .map(|f| self.opnd(f))
                    .collect::<Result<_, _>>()?
            };
            virtuals.push(Virtual { at, fields });
        }
        virtuals.sort_by_key(|v| v.at);
        Ok(virtuals)
    }

    /// `LABEL:INDEX`.
    fn position(&mut self, text: &str) -> Option<Position> {
        let (label, index) = text.split_once(':')?;
        if !is_name(label) {
            return None;
        }
        let inst = index.parse().ok()?;
        Some(Position {
            block: self.text.block(label),
            inst,
        })
    }

    /// `[VAR=OPND, ...]`, sorted by slot; `None` when not in brackets.
    fn entries(&mut self, text: &str) -> Option<Result<Vec<(Slot, Opnd)>, String>> {
        let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?;
        let mut parsed = Vec::new();
        if !inner.trim().is_empty() {
            for entry in split_top(inner, ',') {
                let Some((var, o)) = entry.split_once('=') else {
                    return Some(Err(format!("bad snapshot entry `{}`", entry.trim())));
                };
                let slot = match self.slot(var) {
                    Ok(s) => s,
                    Err(e) => return Some(Err(e)),
                };
                match self.opnd(o) {
                    Ok(o) => parsed.push((slot, o)),
                    Err(e) => return Some(Err(e)),
                }
            }
        }
        parsed.sort_by_key(|(s, _)| *s);
        Some(Ok(parsed))
    }
}

/// The inputs a trace's first line declares: `[x:int, c:list]`.
fn header(p: &mut Parser, line: &str) -> Result<Vec<(Slot, Ty)>, String> {
    let bad = || format!("the trace must start with its inputs, `[x:int, ...]`, not `{line}`");
    let inner = line
        .strip_prefix('[')
        .and_then(|l| l.strip_suffix(']'))
        .ok_or_else(bad)?;
    let mut inputs = Vec::new();
    for decl in inner.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let (name, ty) = decl.split_once(':').ok_or_else(bad)?;
        let ty = Ty::from_name(ty.trim()).ok_or_else(|| format!("unknown type `{}`", ty.trim()))?;
        let slot = p.slot(name)?;
        if inputs.iter().any(|(s, _)| *s == slot) {
            return Err(format!("input `{}` declared twice", name.trim()));
        }
        inputs.push((slot, ty));
    }
    Ok(inputs)
}

impl Parser {
    /// The instruction that `line` of a trace declares, as instruction `index` of the
    /// trace, with its snapshot (the instruction's `snap` is left for the caller to set);
    /// `None` for a line that names a constant (`kN = ...`). `declared` are the inputs the
    /// first line declares.
    fn line(
        &mut self,
        line: &str,
        declared: &[(Slot, Ty)],
        index: usize,
    ) -> Result<Option<(Inst, Option<Snapshot>)>, String> {
        if let Some((name, value)) = line.split_once('=') {
            let name = name.trim();
            if is_numbered(name, 'k') {
                self.constant(name, value)?;
                return Ok(None);
            }
        }
        let parts = split_top(line, '@');
        let (body, snap) = match parts.as_slice() {
            [body] => (*body, None),
            [body, snap] => (*body, Some(self.snapshot(snap.trim())?)),
            _ => return Err("more than one `@`".to_string()),
        };
        // `gN: `: a guard's name, its own index.
        let (guard, body) = match body.split_once(':') {
            Some((name, rest)) if is_numbered(name.trim(), 'g') => (Some(name.trim()), rest.trim()),
            _ => (None, body),
        };
        let (name, body) = match body.split_once(" = ") {
            Some((name, body)) => (Some(name.trim()), body.trim()),
            None => (None, body.trim()),
        };
        let (mnemonic, args) = body.split_once(' ').unwrap_or((body, ""));
        let (kind, args) = self.operation(mnemonic, args)?;
        let ty = self.result(kind, name, mnemonic, index)?;
        if let Some(guard) = guard {
            guard_name(guard, kind, mnemonic, index)?;
        }
        if let Kind::Input(slot) = kind {
            self.check_input(declared, slot, ty)?;
        }
        let inst = Inst {
            kind,
            args,
            snap: None,
            origin: None,
            ty,
        };
        Ok(Some((inst, snap)))
    }

    /// The instruction `mnemonic` on the operands `args`, as written after it.
    fn operation(&mut self, mnemonic: &str, args: &str) -> Result<(Kind, Vec<Opnd>), String> {
        if mnemonic == "input" {
            return Ok((Kind::Input(self.slot(args)?), Vec::new()));
        }
        if mnemonic == "param" {
            return Ok((Kind::Param(self.slot(args)?), Vec::new()));
        }
        let (kind, args) = if mnemonic == "call_pure" || mnemonic == "call" {
            let (func, args) = args.trim().split_once(' ').unwrap_or((args.trim(), ""));
            let func = self.text.function(func);
            let kind = if mnemonic == "call" {
                Kind::Call(func)
            } else {
                Kind::CallPure(func)
            };
            (kind, args)
        } else {
            let kind = Kind::from_name(mnemonic)
                .ok_or_else(|| format!("unknown instruction `{mnemonic}`"))?;
            (kind, args)
        };
        let args = if args.trim().is_empty() {
            Vec::new()
        } else {
            split_top(args, ',')
                .into_iter()
                .map(|a| self.opnd(a))
                .collect::<Result<_, _>>()?
        };
        Ok((kind, args))
    }

    /// The type of the value instruction `index`, a `kind` written `mnemonic`, defines as
    /// `name` (`vN:TYPE`), which now names it; `Ty::None` for one that defines none.
    fn result(
        &mut self,
        kind: Kind,
        name: Option<&str>,
        mnemonic: &str,
        index: usize,
    ) -> Result<Ty, String> {
        match (kind.has_result(), name) {
            (true, Some(name)) => {
                let (name, ty) = name.split_once(':').ok_or_else(|| {
                    format!("`{name}` needs its type: `{name}:int = {mnemonic} ...`")
                })?;
                let ty = Ty::from_name(ty.trim())
                    .ok_or_else(|| format!("unknown type `{}`", ty.trim()))?;
                self.names
                    .insert(name.trim().to_string(), Ref(index as u32));
                Ok(ty)
            }
            (true, None) => Err(format!(
                "`{mnemonic}` needs a name: `vN:TYPE = {mnemonic} ...`"
            )),
            (false, Some(_)) => Err(format!("`{mnemonic}` defines no value")),
            (false, None) => Ok(Ty::None),
        }
    }

    /// Checks that the `input` of `slot`, of type `ty`, reads an input the first line
    /// declares (`declared`), of that type.
    fn check_input(&self, declared: &[(Slot, Ty)], slot: Slot, ty: Ty) -> Result<(), String> {
        match declared.iter().find(|(s, _)| *s == slot) {
            Some((_, t)) if *t == ty => Ok(()),
            Some((_, t)) => Err(format!(
                "input `{}` is declared {t}, read as {ty}",
                self.text.var(slot)
            )),
            None => Err(format!(
                "input `{}` is not declared in the first line",
                self.text.var(slot)
            )),
        }
    }
}

/// Checks that `guard` (`gN:`) names instruction `index`, a guard (a `kind` written
/// `mnemonic`).
fn guard_name(guard: &str, kind: Kind, mnemonic: &str, index: usize) -> Result<(), String> {
    if !named_guard(kind) {
        return Err(format!(
            "`{guard}:` names a guard, and `{mnemonic}` is not one"
        ));
    }
    if guard != format!("g{index}") {
        return Err(format!(
            "guard `{guard}` is instruction {index} of the trace: a guard is named \
             by its index, `g{index}`"
        ));
    }
    Ok(())
}

/// Parses a trace in the SSA text form; returns it with the names it declares.
pub fn parse_ssa(text: &str) -> Result<(Trace, TextNames), String> {
    let mut p = Parser {
        text: TextNames::default(),
        names: HashMap::new(),
        consts: HashMap::new(),
    };
    let mut insts = Vec::new();
    let mut snaps = Vec::new();
    let mut inputs: Option<Vec<(Slot, Ty)>> = None;
    for (lineno, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |e: String| format!("line {}: {e}", lineno + 1);
        let Some(declared) = &inputs else {
            inputs = Some(header(&mut p, line).map_err(at)?);
            continue;
        };
        let Some((mut inst, snap)) = p.line(line, declared, insts.len()).map_err(at)? else {
            continue;
        };
        inst.snap = snap.map(|s| {
            snaps.push(s);
            SnapId(snaps.len() as u32 - 1)
        });
        insts.push(inst);
    }
    let anchor = insts
        .last()
        .filter(|i| i.kind == Kind::Loop)
        .and_then(|i| i.snap)
        .map(|s| snaps[s.index()].pos.block)
        .ok_or("the trace must end in `loop @ANCHOR:0 ...`")?;
    let calls = snaps.iter().map(|s| s.frames.len()).max().unwrap_or(0);
    let trace = Trace {
        anchor,
        insts,
        snaps,
        calls,
        known: Vec::new(),
        merges: Vec::new(),
        carries_elements: false,
        heap_from_preamble: false,
        function: None,
    };
    super::verify::verify(&trace)?;
    Ok((trace, p.text))
}
