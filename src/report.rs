//! What a run shows of itself: the event log as JSON lines (`--log FILE`), and `flowjit
//! report`, one self-contained HTML page of the run's traces (PyPy's jitviewer and
//! LuaJIT's `-jdump` in one place).
//!
//! The page holds the program's source, each hot loop marked with its counts; each trace
//! and bridge as a tree under the guard it hangs from; for each, the trace as recorded, as
//! optimized, its Cranelift IR and its machine code side by side; the time per phase, code
//! sizes, aborts and a timeline of the compile events. Every line that comes from a trace
//! instruction carries `data-o="T.S.I"` (tree, segment, instruction) and, where the
//! instruction was recorded from a statement, `data-src="LN"` (its source line): selecting
//! one lights up all the others. Styles and scripts are inline: the page needs no network.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::json;

use crate::backend::lower::Origin;
use crate::jit::listing::{self, Line};
use crate::jit::{Event, EventKind, GuardRef, Jit};
use crate::lang::ast::Ast;
use crate::lang::Program;
use crate::state::Position;
use crate::trace::{print, Kind, Trace};
use flowjit_runtime::Value;

/// An event as one JSON object: `t` (microseconds since the run began), `event` (its
/// kind's name) and the kind's fields (schema: docs/ARCHITECTURE.md, "The event log").
pub fn event_json(e: &Event) -> serde_json::Value {
    let guard = |g: &GuardRef| json!({"tree": g.tree, "segment": g.segment, "inst": g.inst});
    let mut v = match &e.kind {
        EventKind::TraceStarted { anchor, from } => {
            json!({"anchor": anchor, "from": from.as_ref().map(guard)})
        }
        EventKind::TraceAborted { at, reason } => json!({"at": at, "reason": reason}),
        EventKind::Optimized {
            tree,
            bridge,
            recorded,
            optimized,
            micros,
        } => json!({"tree": tree, "bridge": bridge, "recorded": recorded,
                    "optimized": optimized, "micros": micros}),
        EventKind::Rejected { at, reason } => json!({"at": at, "reason": reason}),
        EventKind::Compiled {
            tree,
            bridge,
            bridges,
            bytes,
            micros,
        } => json!({"tree": tree, "bridge": bridge, "bridges": bridges, "bytes": bytes,
                    "micros": micros}),
        EventKind::NotCompiled { what, reason } => json!({"what": what, "reason": reason}),
        EventKind::BridgeAttached {
            bridge,
            from,
            value,
            to,
            separate,
        } => json!({"bridge": bridge, "from": guard(from), "value": value, "to": to,
                    "separate": separate}),
        EventKind::Blacklisted { anchor } => json!({"anchor": anchor}),
        EventKind::Linked { from, to } => json!({"from": guard(from), "to": to}),
        EventKind::Limit { what } => json!({"what": what}),
        EventKind::GuardExits { guard: g, count } => json!({"guard": guard(g), "count": count}),
        EventKind::RunEnded {
            traces,
            bridges,
            aborts,
            entries,
            native_entries,
            exits,
            links,
            micros,
        } => json!({"traces": traces, "bridges": bridges, "aborts": aborts,
                    "entries": entries, "native_entries": native_entries, "exits": exits,
                    "links": links,
                    "micros": {"interpreting": micros[0], "recording": micros[1],
                               "optimizing": micros[2], "compiling": micros[3],
                               "trace_interpreter": micros[4], "machine_code": micros[5]}}),
    };
    let mut obj = serde_json::Map::new();
    obj.insert("t".into(), json!(crate::jit::events::micros(e.at)));
    obj.insert("event".into(), json!(e.kind.name()));
    if let Some(fields) = v.as_object_mut() {
        obj.append(fields);
    }
    serde_json::Value::Object(obj)
}

/// The events as JSON lines, one object a line.
pub fn json_lines(events: &[Event]) -> String {
    let mut out = String::new();
    for e in events {
        out.push_str(&event_json(e).to_string());
        out.push('\n');
    }
    out
}

/// A source text and its syntax tree, for the report's source pane.
pub struct SourceText<'a> {
    /// The file's name as the page shows it.
    pub name: &'a str,
    /// The text.
    pub text: &'a str,
    /// Its syntax tree (whose blocks and statements are the program's, in order).
    pub ast: &'a Ast,
}

/// What the report is about.
pub struct Subject<'a> {
    /// The command that ran, for the title.
    pub command: &'a str,
    /// The flowgraph program that ran.
    pub source: SourceText<'a>,
    /// The program it interpreted, for an interpreter written in the flowgraph language
    /// (a `.bc` or `.b` file): its name and text.
    pub guest: Option<(&'a str, &'a str)>,
}

/// The most traces and bridges whose recordings and listings the page holds, in the order
/// they were made; past it, their optimized traces only (Brainfuck's mandelbrot makes about
/// a thousand: its page was 68 MB with 400 listed, which no browser shows well).
pub const MAX_LISTED: usize = 120;

/// The report of a run of `jit` (made with [`crate::jit::Config::keep`]), whose events
/// are `events`, as one HTML page.
pub fn html(subject: &Subject, jit: &Jit, events: &[Event]) -> String {
    let page = Page::new(subject, jit, events);
    page.render()
}

struct Page<'a> {
    subject: &'a Subject<'a>,
    jit: &'a Jit<'a>,
    events: &'a [Event],
    program: &'a Program,
    /// Line starts of the source text.
    line_starts: Vec<usize>,
}

/// HTML-escapes `s`.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

/// The `data-o` value of an origin in tree `t`.
fn data_o(t: usize, segment: usize, inst: usize) -> String {
    format!("{t}.{segment}.{inst}")
}

/// The element id of a trace's section: `t3` for a root, `t3b1` for bridge 1.
fn section_id(t: usize, bridge: Option<usize>) -> String {
    match bridge {
        None => format!("t{t}"),
        Some(b) => format!("t{t}b{b}"),
    }
}

fn ms(micros: u64) -> String {
    format!("{:.3} ms", micros as f64 / 1e3)
}

impl<'a> Page<'a> {
    fn new(subject: &'a Subject<'a>, jit: &'a Jit<'a>, events: &'a [Event]) -> Page<'a> {
        let text = subject.source.text;
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Page {
            subject,
            jit,
            events,
            program: jit.program(),
            line_starts,
        }
    }

    /// The source line (1-based) a statement position was written on.
    fn line_of(&self, pos: Position) -> Option<usize> {
        let ast = self.subject.source.ast;
        let block = ast.blocks.get(pos.block.index())?;
        let checked = self.program.blocks.get(pos.block.index())?;
        let span = if pos.inst < block.stmts.len() && block.stmts.len() == checked.insts.len() {
            block.stmts[pos.inst].span()
        } else if pos.inst == checked.insts.len() {
            block.term_span
        } else {
            block.label.span
        };
        Some(self.line_starts.partition_point(|&s| s <= span.start))
    }

    fn src_attr(&self, origin: Option<Position>) -> String {
        origin
            .and_then(|p| self.line_of(p))
            .map_or(String::new(), |l| format!(" data-src=\"L{l}\""))
    }

    fn render(&self) -> String {
        let mut out = String::new();
        let title = format!("flowjit report: {}", self.subject.command);
        let _ = write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
            esc(&title)
        );
        let _ = writeln!(out, "<header><h1>{}</h1>", esc(&title));
        out.push_str("<pre id=\"errors\"></pre></header>\n");
        out.push_str("<main>\n");
        self.summary(&mut out);
        out.push_str("<div id=\"panes\">\n");
        self.source_pane(&mut out);
        self.traces(&mut out);
        self.timeline(&mut out);
        out.push_str("</main>\n");
        let _ = write!(out, "<script>{SCRIPT}</script>\n</body>\n</html>\n");
        out
    }

    fn run_ended(&self) -> Option<(&EventKind, u64)> {
        self.events.iter().rev().find_map(|e| match &e.kind {
            k @ EventKind::RunEnded { .. } => Some((k, crate::jit::events::micros(e.at))),
            _ => None,
        })
    }

    fn summary(&self, out: &mut String) {
        out.push_str("<section id=\"summary\">\n<div class=\"box\"><h2>Summary</h2>\n<table class=\"facts\">\n");
        let trees = self.jit.trees();
        let bridges: usize = trees.iter().map(|t| t.bridges.len()).sum();
        let kept = self.jit.kept();
        let bytes: usize = kept.code.iter().map(|c| c.size).sum();
        let compiles = self
            .events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Compiled { .. }))
            .count();
        let mut row = |k: &str, v: String| {
            let _ = writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&v));
        };
        row("traces (trees)", trees.len().to_string());
        row("bridges", bridges.to_string());
        row("compilations", compiles.to_string());
        row("machine code now", format!("{bytes} bytes"));
        row("trace aborts", self.jit.stats.aborts.len().to_string());
        row(
            "trace entries",
            format!(
                "{} ({} into machine code)",
                self.jit.stats.entries, self.jit.stats.native_entries
            ),
        );
        row(
            "guard exits",
            self.jit.stats.exits.values().sum::<u64>().to_string(),
        );
        row(
            "exits linked to other trees",
            self.jit.stats.links.to_string(),
        );
        out.push_str("</table></div>\n");
        if let Some((EventKind::RunEnded { micros, .. }, _)) = self.run_ended() {
            phases(out, micros);
        }
        self.aborts(out);
        out.push_str("</section>\n");
    }

    /// The box of the aborts and of the traces the optimizer rejected, if there are any.
    fn aborts(&self, out: &mut String) {
        let aborts = &self.jit.stats.aborts;
        if !aborts.is_empty() || !self.jit.stats.rejected.is_empty() {
            out.push_str("<div class=\"box\"><h2>Aborts</h2>\n<ul id=\"aborts\">\n");
            for (label, reason) in aborts {
                let _ = writeln!(
                    out,
                    "<li>at {}: {}</li>",
                    esc(label),
                    esc(&reason.to_string())
                );
            }
            for (label, why) in &self.jit.stats.rejected {
                let _ = writeln!(
                    out,
                    "<li>rejected at {}: {}</li>",
                    esc(label),
                    esc(&why.reason().to_string())
                );
            }
            out.push_str("</ul></div>\n");
        }
    }

    fn source_pane(&self, out: &mut String) {
        // Hot loops: the anchors of trees, with their counts.
        let mut badges: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        let stats = &self.jit.stats;
        for (t, tree) in self.jit.trees().iter().enumerate() {
            let Some(line) = self.line_of(Position::start(tree.key.anchor)) else {
                continue;
            };
            let entries = stats.tree_entries.get(&t).copied().unwrap_or(0);
            let exits: u64 = stats
                .exits
                .range((t, 0, 0)..(t + 1, 0, 0))
                .map(|(_, n)| n)
                .sum();
            badges.entry(line).or_default().push(format!(
                "<a class=\"hot\" href=\"#t{t}\" data-show=\"t{t}\">trace {t}: {entries} entries, {exits} exits, {} bridges</a>",
                tree.bridges.len()
            ));
        }
        let src = &self.subject.source;
        let _ = writeln!(
            out,
            "<section id=\"source\" class=\"pane\">\n<h2>Source <small>{}</small></h2>\n<pre class=\"src\">",
            esc(src.name)
        );
        for (k, line) in src.text.lines().enumerate() {
            let n = k + 1;
            let _ = write!(
                out,
                "<span class=\"sl\" id=\"L{n}\"><span class=\"ln\">{n}</span>{}",
                esc(line)
            );
            if let Some(bs) = badges.get(&n) {
                for b in bs {
                    out.push(' ');
                    out.push_str(b);
                }
            }
            out.push_str("</span>");
        }
        out.push_str("</pre>\n");
        if let Some((name, text)) = self.subject.guest {
            let _ = writeln!(
                out,
                "<h2>Interpreted program <small>{}</small></h2>\n<pre class=\"guest\">{}</pre>",
                esc(name),
                esc(text)
            );
        }
        out.push_str("</section>\n");
    }

    fn traces(&self, out: &mut String) {
        let trees = self.jit.trees();
        out.push_str(
            "<section id=\"traces\" class=\"pane\">\n<h2>Traces</h2>\n<nav id=\"tree\">\n<ul>\n",
        );
        for (t, tree) in trees.iter().enumerate() {
            let _ = write!(
                out,
                "<li><a href=\"#t{t}\" data-show=\"t{t}\">trace {t}: {} at {}</a>",
                tree.root.what(),
                esc(&self.jit.label(t))
            );
            self.bridge_list(out, t, 0);
            out.push_str("</li>\n");
        }
        out.push_str("</ul>\n</nav>\n");
        if trees.is_empty() {
            out.push_str("<p>No trace was recorded: no loop or function got hot.</p>\n");
        }
        out.push_str("<p class=\"hint\">Select a line of a trace, of its IR or of its machine code: what it comes from and what it became light up, the source statement too. A guard's line ends in its snapshot (where the interpreter resumes, the operations counted, the variables written back), its exit count and its bridges.</p>\n");
        out.push_str("</section>\n</div>\n<section id=\"listings\">\n");
        let mut listed = 0;
        for (t, tree) in trees.iter().enumerate() {
            self.trace_section(out, t, None, &tree.root, listed < MAX_LISTED);
            listed += 1;
            for (b, bridge) in tree.bridges.iter().enumerate() {
                self.trace_section(out, t, Some(b), &bridge.trace, listed < MAX_LISTED);
                listed += 1;
            }
        }
        out.push_str("</section>\n");
    }

    /// The bridges hanging from guards of segment `seg` of tree `t`, as a nested list.
    fn bridge_list(&self, out: &mut String, t: usize, seg: usize) {
        let tree = &self.jit.trees()[t];
        let children: Vec<usize> = (0..tree.bridges.len())
            .filter(|&b| tree.bridges[b].from.segment == seg)
            .collect();
        if children.is_empty() {
            return;
        }
        out.push_str("<ul>");
        for b in children {
            let bridge = &tree.bridges[b];
            let value = bridge
                .value
                .as_ref()
                .map_or(String::new(), |v| format!(", for {}", short(v)));
            let _ = write!(
                out,
                "<li><a href=\"#t{t}b{b}\" data-show=\"t{t}b{b}\">bridge {b} from g{} to {}{}</a>",
                bridge.from.inst,
                esc(self.program.label(bridge.trace.anchor)),
                esc(&value)
            );
            self.bridge_list(out, t, b + 1);
            out.push_str("</li>");
        }
        out.push_str("</ul>\n");
    }

    /// The heading of trace `t`'s section, or of its bridge `bridge`'s (whose trace is
    /// `trace`).
    fn trace_title(&self, t: usize, bridge: Option<usize>, trace: &Trace) -> String {
        let tree = &self.jit.trees()[t];
        match bridge {
            None => format!("trace {t}: {} at {}", tree.root.what(), self.jit.label(t)),
            Some(b) => {
                let br = &tree.bridges[b];
                let from = GuardRef {
                    tree: t,
                    segment: br.from.segment,
                    inst: br.from.inst,
                };
                format!(
                    "bridge {b} from {from} to {}{}",
                    self.program.label(trace.anchor),
                    if br.separate {
                        ", compiled on its own"
                    } else {
                        ", compiled in its tree's function"
                    }
                )
            }
        }
    }

    /// The line under the heading of a trace's section: its entries from the interpreter,
    /// its lengths as recorded and optimized, and its machine code's size.
    fn trace_meta(&self, out: &mut String, t: usize, bridge: Option<usize>, trace: &Trace) {
        let tree = &self.jit.trees()[t];
        let entries = match bridge {
            None => match self.jit.stats.tree_entries.get(&t).copied().unwrap_or(0) {
                1 => "1 entry from the interpreter, ".to_string(),
                n => format!("{n} entries from the interpreter, "),
            },
            Some(_) => String::new(),
        };
        let size = self
            .jit
            .kept()
            .code
            .iter()
            .find(|c| c.tree == t && c.bridge == bridge.filter(|b| tree.bridges[*b].separate))
            .map_or("no machine code".to_string(), |c| {
                match (bridge, c.bridge) {
                    (Some(_), None) => format!("its tree's function: {} bytes", c.size),
                    _ => format!("machine code: {} bytes", c.size),
                }
            });
        let _ = writeln!(
            out,
            "<p class=\"meta\">{entries}{} instructions as recorded, {} optimized; {size}</p>",
            self.jit
                .kept()
                .recorded
                .get(&(t, bridge))
                .map_or(0, |r| r.insts.len()),
            trace.insts.len()
        );
    }

    /// The columns of a trace's section of the Cranelift IR and the machine code it was
    /// compiled to (only the bridge's part of its tree's function, for a bridge compiled in
    /// it), when `listed`.
    fn code_columns(&self, out: &mut String, t: usize, bridge: Option<usize>, listed: bool) {
        let tree = &self.jit.trees()[t];
        let code = self.jit.kept().code.iter().find(|c| {
            c.tree == t
                && match bridge {
                    Some(b) if tree.bridges[b].separate => c.bridge == Some(b),
                    _ => c.bridge.is_none(),
                }
        });
        let only = bridge
            .filter(|b| !tree.bridges[*b].separate)
            .map(|b| listing::Only {
                segment: b + 1,
                parent: tree.bridges[b].from,
            });
        for (class, name) in [("ir", "Cranelift IR"), ("asm", "machine code")] {
            let _ = write!(out, "<div class=\"col {class}\"><h4>{name}</h4><pre>");
            match code {
                Some(c) if listed => {
                    let lines = if class == "ir" { &c.ir } else { &c.asm };
                    self.code_lines(out, lines, t, only);
                }
                Some(_) => out.push_str("(not listed: too many traces)"),
                None if self.jit.kept().code.is_empty() => {
                    out.push_str("(no machine code: --mode trace)")
                }
                None => out.push_str("(not compiled)"),
            }
            out.push_str("</pre></div>\n");
        }
    }

    fn trace_section(
        &self,
        out: &mut String,
        t: usize,
        bridge: Option<usize>,
        trace: &Trace,
        listed: bool,
    ) {
        let seg = bridge.map_or(0, |b| b + 1);
        let id = section_id(t, bridge);
        let title = self.trace_title(t, bridge, trace);
        let _ = writeln!(
            out,
            "<article class=\"trace\" id=\"{id}\">\n<h3>{}</h3>",
            esc(&title)
        );
        self.trace_meta(out, t, bridge, trace);
        out.push_str("<div class=\"cols\">\n");
        // As recorded.
        out.push_str("<div class=\"col rec\"><h4>recorded</h4><pre>");
        match self.jit.kept().recorded.get(&(t, bridge)) {
            Some(rec) if listed => self.recorded_lines(out, rec, t, seg),
            Some(_) => out.push_str("(not listed: too many traces)"),
            None => out.push_str("(not kept)"),
        }
        out.push_str("</pre></div>\n");
        // As optimized.
        out.push_str("<div class=\"col opt\"><h4>optimized</h4><pre>");
        self.optimized_lines(out, trace, t, seg);
        out.push_str("</pre></div>\n");
        self.code_columns(out, t, bridge, listed);
        out.push_str("</div>\n</article>\n");
    }

    /// For each instruction of `rec` (a recording), the merge point it was recorded after,
    /// as a marker (`pc=3: decr_a`): `None` before the first, or without hints.
    fn merge_points(&self, rec: &Trace) -> Vec<Option<String>> {
        let mut out = vec![None; rec.insts.len()];
        for (k, m) in rec.merges.iter().enumerate() {
            let end = rec.merges.get(k + 1).map_or(rec.insts.len(), |n| n.at);
            let greens = self.program.merge_at(m.block).unwrap_or_default();
            let label = green_label(self.program, greens, &m.greens);
            for slot in out.iter_mut().take(end).skip(m.at) {
                *slot = Some(label.clone());
            }
        }
        out
    }

    fn recorded_lines(&self, out: &mut String, rec: &Trace, t: usize, seg: usize) {
        let marks = self.merge_points(rec);
        // The articles' notation, long constants declared first (`% k0 = ...`): a line for
        // each instruction it shows, in order.
        let text = print::articles(self.program, rec);
        let mut lines = text.lines().peekable();
        while let Some(table) = lines.next_if(|l| l.starts_with("% ")) {
            let _ = writeln!(out, "<span class=\"hd\">{}</span>", esc(table));
        }
        let shown: Vec<usize> = (0..rec.insts.len())
            .filter(|&i| {
                let inst = &rec.insts[i];
                inst.kind == Kind::Loop || print::article_inst(self.program, rec, inst).is_some()
            })
            .collect();
        let body: Vec<&str> = lines.collect();
        let mut last: Option<&String> = None;
        for (k, &i) in shown.iter().enumerate() {
            let inst = &rec.insts[i];
            if let Some(m) = &marks[i] {
                if last != Some(m) {
                    let _ = writeln!(out, "<span class=\"mp\"># {}</span>", esc(m));
                    last = Some(m);
                }
            }
            let line = match body.get(k).filter(|_| body.len() == shown.len()) {
                Some(l) => l.to_string(),
                None => print::article_inst(self.program, rec, inst).unwrap_or_default(),
            };
            let _ = writeln!(
                out,
                "<span class=\"l\" data-r=\"{t}.{seg}.r{i}\"{}>{}</span>",
                self.src_attr(inst.origin),
                esc(&line)
            );
        }
    }

    /// For each instruction of `trace`, the instruction of its recording `rec` it comes
    /// from, as far as statements tell: each matched, in order, with the next recorded
    /// instruction from the same statement (from the start again after `loop_start`, where
    /// a peeled trace's loop begins its second copy of the recording).
    fn recorded_of(trace: &Trace, rec: &Trace) -> Vec<Option<usize>> {
        let mut at = 0;
        trace
            .insts
            .iter()
            .map(|inst| {
                if inst.kind == Kind::LoopStart {
                    at = 0;
                    return None;
                }
                let origin = inst.origin?;
                let k = (at..rec.insts.len()).find(|&k| rec.insts[k].origin == Some(origin))?;
                at = k + 1;
                Some(k)
            })
            .collect()
    }

    fn optimized_lines(&self, out: &mut String, trace: &Trace, t: usize, seg: usize) {
        let tree = &self.jit.trees()[t];
        let stats = &self.jit.stats;
        let rec = self.jit.kept().recorded.get(&(t, seg.checked_sub(1)));
        let from = rec.map_or(vec![None; trace.insts.len()], |r| {
            Self::recorded_of(trace, r)
        });
        let marks = rec.map(|r| self.merge_points(r));
        // The SSA form: the inputs, long constants declared once, then a line for each
        // instruction.
        let text = print::ssa(self.program, trace);
        let mut lines = text.lines();
        if let Some(header) = lines.next() {
            let _ = writeln!(out, "<span class=\"hd\">{}</span>", esc(header));
        }
        let mut lines = lines.peekable();
        while let Some(table) = lines.next_if(|l| l.starts_with('k') && l.contains(" = ")) {
            let _ = writeln!(out, "<span class=\"hd\">{}</span>", esc(table));
        }
        let body: Vec<&str> = lines.collect();
        let mut last: Option<String> = None;
        for (i, inst) in trace.insts.iter().enumerate() {
            let mark = from[i].and_then(|k| marks.as_ref()?[k].clone());
            if let Some(m) = mark {
                if last.as_ref() != Some(&m) {
                    let _ = writeln!(out, "<span class=\"mp\"># {}</span>", esc(&m));
                    last = Some(m);
                }
            }
            let rec_attr =
                from[i].map_or(String::new(), |k| format!(" data-rec=\"{t}.{seg}.r{k}\""));
            let text = match body.get(i).filter(|_| body.len() == trace.insts.len()) {
                Some(l) => l.to_string(),
                None => print::ssa_inst(self.program, trace, i),
            };
            let mut extra = String::new();
            if let Some(n) = stats.exits.get(&(t, seg, i)) {
                let _ = write!(extra, " <span class=\"exits\">{n} exits</span>");
            }
            for (b, br) in tree.bridges.iter().enumerate() {
                if br.from == crate::backend::TreeInst::new(seg, i) {
                    let _ = write!(
                        extra,
                        " <a class=\"br\" href=\"#t{t}b{b}\" data-show=\"t{t}b{b}\">→ bridge {b}</a>"
                    );
                }
            }
            let class = if inst.kind.name().starts_with("guard") {
                "l guard"
            } else {
                "l"
            };
            let _ = writeln!(
                out,
                "<span class=\"{class}\" data-o=\"{}\"{rec_attr}{}>{}</span>{extra}",
                data_o(t, seg, i),
                self.src_attr(inst.origin),
                esc(&text)
            );
        }
    }

    fn code_lines(&self, out: &mut String, lines: &[Line], t: usize, only: Option<listing::Only>) {
        let keep = listing::keep_lines(lines, only);
        let mut last: Option<Origin> = None;
        for (line, _) in lines.iter().zip(&keep).filter(|(_, k)| **k) {
            match line.origin {
                Some(o) => {
                    if last != Some(o) {
                        let _ = writeln!(
                            out,
                            "<span class=\"cm\" data-o=\"{}\">; {}</span>",
                            data_o(t, o.segment, o.inst),
                            esc(&self.jit.describe_origin(t, o))
                        );
                        last = Some(o);
                    }
                    let class = if o.exit { "l exit" } else { "l" };
                    let _ = writeln!(
                        out,
                        "<span class=\"{class}\" data-o=\"{}\">{}</span>",
                        data_o(t, o.segment, o.inst),
                        esc(&line.text)
                    );
                }
                None => {
                    let _ = writeln!(out, "<span class=\"l\">{}</span>", esc(&line.text));
                }
            }
        }
    }

    fn timeline(&self, out: &mut String) {
        out.push_str("<section id=\"timeline\">\n<h2>Timeline</h2>\n");
        let end = self.run_ended().map(|(_, at)| at).unwrap_or(1).max(1);
        let width = 1000.0;
        let _ = write!(
            out,
            "<svg viewBox=\"0 0 {width} 40\" width=\"100%\" height=\"40\" role=\"img\" aria-label=\"compile events over the run\"><line x1=\"0\" y1=\"20\" x2=\"{width}\" y2=\"20\" class=\"axis\"/>"
        );
        for e in self.events {
            let class = match e.kind {
                EventKind::Compiled { .. } => "ev-compiled",
                EventKind::TraceAborted { .. } | EventKind::Rejected { .. } => "ev-aborted",
                EventKind::BridgeAttached { .. } => "ev-bridge",
                EventKind::Blacklisted { .. } | EventKind::Limit { .. } => "ev-limit",
                _ => continue,
            };
            let x = crate::jit::events::micros(e.at) as f64 * width / end as f64;
            let _ = write!(
                out,
                "<line x1=\"{x:.1}\" y1=\"6\" x2=\"{x:.1}\" y2=\"34\" class=\"{class}\"><title>{} at {}</title></line>",
                e.kind.name(),
                ms(crate::jit::events::micros(e.at))
            );
        }
        let _ = writeln!(out, "</svg>\n<p class=\"legend\"><span class=\"ev-compiled\">compiled</span> <span class=\"ev-bridge\">bridge attached</span> <span class=\"ev-aborted\">aborted or rejected</span> <span class=\"ev-limit\">blacklisted or limit</span> — the run took {}</p>", ms(end));
        out.push_str("<table id=\"events\"><thead><tr><th>time</th><th>event</th><th>details</th></tr></thead><tbody>\n");
        const MAX_ROWS: usize = 2000;
        for e in self.events.iter().take(MAX_ROWS) {
            let mut details = event_json(e);
            let obj = details.as_object_mut().expect("an object");
            obj.remove("t");
            obj.remove("event");
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
                ms(crate::jit::events::micros(e.at)),
                e.kind.name(),
                esc(&details.to_string())
            );
        }
        if self.events.len() > MAX_ROWS {
            let _ = writeln!(
                out,
                "<tr><td colspan=\"3\">… {} more (all of them: --log FILE)</td></tr>",
                self.events.len() - MAX_ROWS
            );
        }
        out.push_str("</tbody></table>\n</section>\n");
    }
}

/// A value shortened for a heading.
fn short(v: &Value) -> String {
    flowjit_runtime::ops::shown_within(v, 24)
}

/// A merge point's greens as a marker: each green `name=value`, and for an integer green
/// that indexes a list green, the element it selects (`pc=3: decr_a`, the bytecode the
/// interpreter is at).
fn green_label(program: &Program, greens: &[crate::lang::Slot], values: &[Value]) -> String {
    let list = values.iter().find_map(|v| match v {
        Value::List(l) => Some(l.clone()),
        _ => None,
    });
    let mut parts = Vec::new();
    for (slot, v) in greens.iter().zip(values) {
        match v {
            Value::List(_) => {}
            Value::Int(i) => {
                let elem = list.as_ref().and_then(|l| {
                    let k = usize::try_from(*i).ok()?;
                    l.items().get(k).map(short)
                });
                match elem {
                    Some(e) => parts.push(format!("{}={v}: {e}", program.var(*slot))),
                    None => parts.push(format!("{}={v}", program.var(*slot))),
                }
            }
            v => parts.push(format!("{}={}", program.var(*slot), short(v))),
        }
    }
    parts.join(", ")
}

const STYLE: &str = r#"
:root { --bg:#fbfbfa; --fg:#1d1d1f; --mute:#6b6b70; --line:#e4e4e0; --hl:#ffe58a; --acc:#2a62c9; }
* { box-sizing:border-box; }
body { margin:0; font:14px/1.45 system-ui, sans-serif; background:var(--bg); color:var(--fg); }
header { padding:10px 18px; border-bottom:1px solid var(--line); background:#fff; }
h1 { font-size:18px; margin:0; } h2 { font-size:16px; margin:14px 0 6px; } h3 { font-size:14px; margin:10px 0 4px; }
h4 { font-size:12px; margin:0 0 4px; text-transform:uppercase; letter-spacing:.05em; color:var(--mute); }
small { color:var(--mute); font-weight:normal; }
main { padding:0 18px 30px; }
#summary { display:flex; flex-wrap:wrap; gap:12px 48px; align-items:flex-start; }
#summary .box { min-width:260px; } #phases { width:360px; } #aborts { max-height:9em; overflow:auto; margin:0; padding-left:18px; font-size:12px; }
#errors:empty { display:none; } #errors { color:#b00020; }
table.facts { border-collapse:collapse; } .facts th { text-align:left; font-weight:normal; color:var(--mute); padding:1px 14px 1px 0; } .facts td { font-variant-numeric:tabular-nums; }
.bar { display:flex; height:14px; width:100%; max-width:700px; border-radius:3px; overflow:hidden; background:var(--line); }
.ph0 { background:#8e9aaf; } .ph1 { background:#e0a458; } .ph2 { background:#c9a227; } .ph3 { background:#d1495b; } .ph4 { background:#66a182; } .ph5 { background:#2a62c9; }
.key { display:inline-block; width:10px; height:10px; margin-right:6px; border-radius:2px; }
#panes { display:grid; grid-template-columns: minmax(320px, 45%) 1fr; gap:14px; align-items:start; }
.hint { color:var(--mute); font-size:12px; max-width:60em; }
.meta { color:var(--mute); font-size:12px; margin:0 0 6px; }
#traces nav { max-height:60vh; overflow:auto; }
.pane { min-width:0; }
pre { margin:0; font:12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
pre.src, pre.guest { background:#fff; border:1px solid var(--line); padding:6px 0; max-height:36vh; overflow:auto; }
pre.guest { padding:6px; max-height:14vh; white-space:pre-wrap; word-break:break-all; }
.sl { display:block; padding:0 8px 0 0; } .ln { display:inline-block; width:3.2em; color:var(--mute); text-align:right; margin-right:10px; user-select:none; }
.hot { background:#2a62c9; color:#fff; border-radius:8px; padding:0 6px; font-size:11px; text-decoration:none; }
nav ul { list-style:none; padding-left:14px; margin:2px 0; } nav > ul { padding-left:0; }
nav a { color:var(--acc); text-decoration:none; } nav a.cur { font-weight:bold; }
article.trace { display:none; border-top:1px solid var(--line); margin-top:10px; }
article.trace.shown { display:block; }
.cols { display:grid; grid-template-columns: repeat(4, minmax(0, 1fr)); gap:8px; }
.col { background:#fff; border:1px solid var(--line); padding:6px; max-height:70vh; overflow:auto; }
.col pre { white-space:pre; }
.l, .cm, .mp, .hd { display:inline-block; min-width:100%; cursor:pointer; }
.cm { color:#3a7d44; } .mp { color:#8a5a00; font-weight:bold; } .hd { color:var(--mute); }
.guard { color:#7a1fa2; } .exit { color:#9a3412; }
.exits { background:#fde2e1; color:#9b1c1c; border-radius:6px; padding:0 4px; font-size:11px; }
.br { color:var(--acc); font-size:11px; }
.hl { background:var(--hl) !important; }
svg .axis { stroke:#999; } svg line { stroke-width:2; }
.ev-compiled { stroke:#2a62c9; color:#2a62c9; } .ev-bridge { stroke:#3a7d44; color:#3a7d44; } .ev-aborted { stroke:#d1495b; color:#d1495b; } .ev-limit { stroke:#8a5a00; color:#8a5a00; }
#events { border-collapse:collapse; font-size:12px; } #events td, #events th { border-bottom:1px solid var(--line); padding:1px 8px; text-align:left; vertical-align:top; }
#timeline { margin-top:20px; } #timeline table { display:block; max-height:40vh; overflow:auto; }
"#;

const SCRIPT: &str = r#"
(function () {
  var errors = document.getElementById('errors');
  window.addEventListener('error', function (e) { errors.textContent += (e.message || 'error') + '\n'; });
  function show(id) {
    var found = false;
    document.querySelectorAll('article.trace').forEach(function (a) {
      var on = a.id === id; a.classList.toggle('shown', on); found = found || on;
    });
    document.querySelectorAll('nav a').forEach(function (a) { a.classList.toggle('cur', a.dataset.show === id); });
    return found;
  }
  function mark(selector) {
    var found = [];
    document.querySelectorAll(selector).forEach(function (x) { x.classList.add('hl'); found.push(x); });
    return found;
  }
  // An optimized instruction, its IR and its machine code share data-o; it came from the
  // recorded instruction data-rec names (data-r); a recorded one lights up what it became.
  function select(el) {
    document.querySelectorAll('.hl').forEach(function (x) { x.classList.remove('hl'); });
    var ops = [];
    if (el.dataset.o) ops = mark('[data-o="' + el.dataset.o + '"]');
    var r = el.dataset.r || el.dataset.rec;
    if (r) {
      mark('[data-r="' + r + '"]');
      mark('[data-rec="' + r + '"]').forEach(function (x) {
        if (x.dataset.o && x.dataset.o !== el.dataset.o) ops = ops.concat(mark('[data-o="' + x.dataset.o + '"]'));
      });
    }
    var src = el.dataset.src;
    for (var k = 0; !src && k < ops.length; k++) src = ops[k].dataset.src;
    if (src) {
      var line = document.getElementById(src);
      if (line) { line.classList.add('hl'); scrollInto(line, line.closest('pre')); }
    }
    document.querySelectorAll('article.trace.shown .col').forEach(function (c) {
      var h = c.querySelector('.hl'); if (h) scrollInto(h, c);
    });
  }
  function scrollInto(el, box) {
    if (!box) return;
    var top = el.offsetTop - box.offsetTop;
    if (top < box.scrollTop || top > box.scrollTop + box.clientHeight - 20) box.scrollTop = Math.max(0, top - 60);
  }
  document.addEventListener('click', function (e) {
    var link = e.target.closest('[data-show]');
    if (link) { e.preventDefault(); show(link.dataset.show); history.replaceState(null, '', '#' + link.dataset.show); return; }
    var el = e.target.closest('[data-o],[data-r]');
    if (el) select(el);
  });
  // #t0 shows trace 0; #t0/0.0.12 also selects its instruction 12 (a link to share).
  var first = document.querySelector('article.trace');
  var hash = location.hash.slice(1).split('/');
  if (!(hash[0] && show(hash[0])) && first) show(first.id);
  if (hash[1]) {
    var op = document.querySelector('article.trace.shown [data-o="' + hash[1] + '"]');
    if (op) select(op);
  }
  document.body.dataset.ready = 'yes';
})();
"#;

/// The box of the time per phase, `micros` (in the order of `RunEnded`'s): a bar and a
/// table.
fn phases(out: &mut String, micros: &[u64]) {
    let names = [
        "interpreting",
        "recording",
        "optimizing",
        "compiling",
        "trace interpreter",
        "machine code",
    ];
    let total: u64 = micros.iter().sum::<u64>().max(1);
    out.push_str("<div class=\"box\"><h2>Time per phase</h2>\n<div id=\"phases\" class=\"bar\">");
    for (k, (name, us)) in names.iter().zip(micros).enumerate() {
        let pct = *us as f64 * 100.0 / total as f64;
        if pct > 0.0 {
            let _ = write!(
                out,
                "<span class=\"ph ph{k}\" style=\"width:{pct:.2}%\" title=\"{name}: {}\"></span>",
                ms(*us)
            );
        }
    }
    out.push_str("</div>\n<table class=\"facts phases\">");
    for (k, (name, us)) in names.iter().zip(micros).enumerate() {
        let _ = write!(
            out,
            "<tr><th><span class=\"key ph{k}\"></span>{name}</th><td>{}</td></tr>",
            ms(*us)
        );
    }
    out.push_str("</table></div>\n");
}
