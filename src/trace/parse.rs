//! A parser for the SSA text form that [`super::print::ssa`] prints, so that tests (and
//! people) can write traces as text.
//!
//! Value names (`v0`, `v7`, ...) need not be the instruction indices: each `vN = ...` line
//! defines the name, later uses refer to it, and the parsed trace renumbers. Lines starting
//! with `#` and blank lines are skipped. The anchor is the label the `loop` resumes at.

use std::collections::HashMap;

use super::ir::{Inst, Kind, Opnd, Ref, SnapId, Snapshot, Trace};
use crate::lang::parse_fg::parse_fg_const;
use crate::lang::{Program, Slot};
use crate::state::Position;

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

struct Parser<'p> {
    program: &'p Program,
    names: HashMap<String, Ref>,
}

impl Parser<'_> {
    fn opnd(&self, text: &str) -> Result<Opnd, String> {
        let text = text.trim();
        let is_name = text.len() > 1
            && text.starts_with('v')
            && text[1..].chars().all(|c| c.is_ascii_digit());
        if is_name {
            return self
                .names
                .get(text)
                .map(|r| Opnd::Ref(*r))
                .ok_or_else(|| format!("`{text}` is used before it is defined"));
        }
        parse_fg_const(text)
            .map(Opnd::Const)
            .map_err(|d| format!("bad operand `{text}`: {}", d.message))
    }

    fn slot(&self, name: &str) -> Result<Slot, String> {
        self.program
            .slot(name.trim())
            .ok_or_else(|| format!("`{}` is not a variable of the program", name.trim()))
    }

    fn snapshot(&self, text: &str) -> Result<Snapshot, String> {
        let bad = || format!("bad snapshot `@{text}`: expected @LABEL:INDEX #COST [VAR=OPND, ...]");
        let (pos, rest) = text.split_once(' ').ok_or_else(bad)?;
        let (label, index) = pos.split_once(':').ok_or_else(bad)?;
        let block = self
            .program
            .block_id(label)
            .ok_or_else(|| format!("no block is labelled `{label}`"))?;
        let inst = index.parse().map_err(|_| bad())?;
        let rest = rest.trim_start();
        let (cost, entries) = rest
            .strip_prefix('#')
            .and_then(|r| r.split_once(' '))
            .ok_or_else(bad)?;
        let cost = cost.parse().map_err(|_| bad())?;
        let entries = entries
            .trim()
            .strip_prefix('[')
            .and_then(|e| e.strip_suffix(']'))
            .ok_or_else(bad)?;
        let mut parsed = Vec::new();
        if !entries.trim().is_empty() {
            for entry in split_top(entries, ',') {
                let (var, o) = entry.split_once('=').ok_or_else(bad)?;
                parsed.push((self.slot(var)?, self.opnd(o)?));
            }
        }
        parsed.sort_by_key(|(s, _)| *s);
        Ok(Snapshot {
            pos: Position { block, inst },
            cost,
            entries: parsed,
        })
    }
}

/// Parses a trace in the SSA text form, resolving variables and labels in `program`.
pub fn parse_ssa(program: &Program, text: &str) -> Result<Trace, String> {
    let mut p = Parser {
        program,
        names: HashMap::new(),
    };
    let mut insts = Vec::new();
    let mut snaps = Vec::new();
    for (lineno, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |e: String| format!("line {}: {e}", lineno + 1);
        let parts = split_top(line, '@');
        let (body, snap) = match parts.as_slice() {
            [body] => (*body, None),
            [body, snap] => (*body, Some(p.snapshot(snap.trim()).map_err(at)?)),
            _ => return Err(at("more than one `@`".to_string())),
        };
        let (name, body) = match body.split_once(" = ") {
            Some((name, body)) => (Some(name.trim()), body.trim()),
            None => (None, body.trim()),
        };
        let (mnemonic, args) = body.split_once(' ').unwrap_or((body, ""));
        let (kind, args) = if mnemonic == "input" {
            (Kind::Input(p.slot(args).map_err(at)?), Vec::new())
        } else if mnemonic == "param" {
            (Kind::Param(p.slot(args).map_err(at)?), Vec::new())
        } else {
            let kind = Kind::from_name(mnemonic)
                .ok_or_else(|| at(format!("unknown instruction `{mnemonic}`")))?;
            let args = if args.trim().is_empty() {
                Vec::new()
            } else {
                split_top(args, ',')
                    .into_iter()
                    .map(|a| p.opnd(a))
                    .collect::<Result<_, _>>()
                    .map_err(at)?
            };
            (kind, args)
        };
        match (kind.has_result(), name) {
            (true, Some(name)) => {
                p.names.insert(name.to_string(), Ref(insts.len() as u32));
            }
            (true, None) => {
                return Err(at(format!(
                    "`{mnemonic}` needs a name: `vN = {mnemonic} ...`"
                )))
            }
            (false, Some(_)) => return Err(at(format!("`{mnemonic}` defines no value"))),
            (false, None) => {}
        }
        let snap = snap.map(|s| {
            snaps.push(s);
            SnapId(snaps.len() as u32 - 1)
        });
        insts.push(Inst {
            kind,
            args,
            snap,
            origin: None,
            seen: None,
        });
    }
    let anchor = insts
        .last()
        .filter(|i| i.kind == Kind::Loop)
        .and_then(|i| i.snap)
        .map(|s| snaps[s.index()].pos.block)
        .ok_or("the trace must end in `loop @ANCHOR:0 ...`")?;
    let trace = Trace {
        anchor,
        insts,
        snaps,
    };
    super::verify::verify(&trace)?;
    Ok(trace)
}
