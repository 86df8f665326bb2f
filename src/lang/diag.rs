//! Diagnostics: problems found in a program's text, reported with file, line, column and a
//! caret under the source line.
//!
//! Rendering goes through `codespan-reporting`, whose short style is exactly the
//! `FILE:LINE:COL: error: MESSAGE` line of the contract, with colour only when standard error
//! is a terminal. The source line and the caret follow it.

use std::fmt::Write as _;
use std::io::IsTerminal;

use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label};
use codespan_reporting::files::{Files, SimpleFile};
use codespan_reporting::term::{self, termcolor, Config, DisplayStyle};

use super::ast::Span;

/// One problem in a program's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where the problem is.
    pub span: Span,
    /// What the problem is.
    pub message: String,
    /// Other places that explain it, such as where a label was first defined.
    pub notes: Vec<(Span, String)>,
}

impl Diagnostic {
    /// A problem at `span`.
    pub fn new(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            span,
            message: message.into(),
            notes: Vec::new(),
        }
    }

    /// The same problem, with a note pointing at `span`.
    pub fn with_note(mut self, span: Span, note: impl Into<String>) -> Diagnostic {
        self.notes.push((span, note.into()));
        self
    }
}

/// A source file, by name and text, that diagnostics point into.
#[derive(Clone, Debug)]
pub struct Source {
    /// The name shown in diagnostics (the path as given).
    pub name: String,
    /// The full text.
    pub text: String,
}

impl Source {
    /// A source named `name` holding `text`.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Source {
        Source {
            name: name.into(),
            text: text.into(),
        }
    }

    /// 1-based line and column (in characters) of byte offset `at`.
    pub fn line_col(&self, at: usize) -> (usize, usize) {
        let at = at.min(self.text.len());
        let line_start = self.text[..at].rfind('\n').map_or(0, |i| i + 1);
        let line = self.text[..at].matches('\n').count() + 1;
        (line, self.text[line_start..at].chars().count() + 1)
    }

    /// Renders `diags` as the contract says, one after another. Colour is used only when
    /// `color` is true.
    pub fn render(&self, diags: &[Diagnostic], color: bool) -> String {
        let file = SimpleFile::new(self.name.as_str(), self.text.as_str());
        let config = Config {
            display_style: DisplayStyle::Short,
            ..Config::default()
        };
        let mut out = String::new();
        let parts = diags.iter().flat_map(|d| {
            std::iter::once((CsDiagnostic::error(), d.span, &d.message))
                .chain(d.notes.iter().map(|(s, m)| (CsDiagnostic::note(), *s, m)))
        });
        for (cs, span, message) in parts {
            let start = span.start.min(self.text.len());
            let end = span.end.clamp(start, self.text.len());
            let cs = cs
                .with_message(message)
                .with_labels(vec![Label::primary((), start..end)]);
            let mut buffer = if color {
                termcolor::Buffer::ansi()
            } else {
                termcolor::Buffer::no_color()
            };
            term::emit(&mut buffer, &config, &file, &cs).expect("writing to a memory buffer");
            out.push_str(&String::from_utf8_lossy(buffer.as_slice()));
            self.caret(&file, start, end, &mut out);
        }
        out
    }

    fn caret(&self, file: &SimpleFile<&str, &str>, start: usize, end: usize, out: &mut String) {
        let Ok(line) = file.line_index((), start) else {
            return;
        };
        let Ok(range) = file.line_range((), line) else {
            return;
        };
        let text = self.text.as_str();
        let line_end = range.start + text[range.clone()].trim_end_matches(['\n', '\r']).len();
        let end = end.min(line_end).max(start);
        // A long line (a literal of a million digits) is shown around the span only: some
        // characters before it, the start of it, and some after.
        let span_end = end.min(forward_chars(text, start, SPAN));
        let shown_start = back_chars(text, start, CONTEXT).max(range.start);
        let shown_end = forward_chars(text, span_end, CONTEXT)
            .min(line_end)
            .max(shown_start);
        let before = if shown_start > range.start { "..." } else { "" };
        let after = if shown_end < line_end { "..." } else { "" };
        let width = text[start..span_end].chars().count().max(1);
        let pad: String = before
            .chars()
            .chain(text[shown_start..start].chars())
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let _ = writeln!(out, "{before}{}{after}", &text[shown_start..shown_end]);
        let _ = writeln!(out, "{pad}{}", "^".repeat(width));
    }
}

/// How many characters of a line are shown before a span, and after it.
const CONTEXT: usize = 60;
/// How many characters of a span are shown under carets.
const SPAN: usize = 60;

/// The offset `n` characters before `at` in `text` (or its start).
fn back_chars(text: &str, at: usize, n: usize) -> usize {
    text[..at]
        .char_indices()
        .rev()
        .nth(n.saturating_sub(1))
        .map_or(0, |(i, _)| i)
}

/// The offset `n` characters after `at` in `text` (or its end).
fn forward_chars(text: &str, at: usize, n: usize) -> usize {
    text[at..]
        .char_indices()
        .nth(n)
        .map_or(text.len(), |(i, _)| at + i)
}

/// Whether diagnostics written to standard error should be coloured.
pub fn stderr_color() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_file_line_col_and_caret() {
        let src = Source::new("p.fg", "a:\n    x = foo(y)\n    goto a\n");
        let at = src.text.find("foo").unwrap();
        let d = Diagnostic::new(Span::new(at, at + 3), "unknown operation `foo`");
        assert_eq!(
            src.render(&[d], false),
            "p.fg:2:9: error: unknown operation `foo`\n    x = foo(y)\n        ^^^\n"
        );
        assert_eq!(src.line_col(at), (2, 9));
    }

    #[test]
    fn long_lines_are_shown_around_the_span() {
        let digits = "7".repeat(1_000_000);
        let src = Source::new("p.fg", format!("a:\n    x = {digits} + y\n    goto a\n"));
        let at = src.text.find('7').unwrap();
        let d = Diagnostic::new(Span::new(at, at + digits.len()), "too large");
        let sixty = "7".repeat(60);
        assert_eq!(
            src.render(&[d], false),
            format!(
                "p.fg:2:9: error: too large\n    x = {sixty}{sixty}...\n        {}\n",
                "^".repeat(60)
            )
        );
        let plus = src.text.find('+').unwrap();
        let d = Diagnostic::new(Span::new(plus, plus + 1), "here");
        assert_eq!(
            src.render(&[d], false),
            format!(
                "p.fg:2:1000010: error: here\n...{} + y\n{}^\n",
                &sixty[1..],
                " ".repeat(63)
            )
        );
    }
}
