//! The tokenizer of the readable syntax (`.fg`) and of `.bc` files.

use num_bigint::BigInt;

use super::ast::Span;
use super::diag::Diagnostic;
use super::literal;

/// A token of the readable syntax.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or keyword.
    Ident(String),
    /// An unsigned integer literal (a minus sign is its own token).
    Int(BigInt),
    /// A quoted atom, without its quotes.
    Atom(String),
    /// Punctuation or an operator, as written: `: = ( ) [ ] , += -= + - * // % == != < <= > >= & | ^ << >> @`.
    Punct(&'static str),
    /// The end of the text.
    Eof,
}

impl Tok {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(n) => literal::describe(n, ""),
            Tok::Atom(a) => format!("atom '{a}'"),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Eof => "the end of the file".to_string(),
        }
    }
}

const PUNCTS: &[&str] = &[
    "+=", "-=", "==", "!=", "<=", ">=", "<<", ">>", "//", ":", "=", "(", ")", "[", "]", ",", "+",
    "-", "*", "%", "<", ">", "&", "|", "^", "@",
];

/// Splits `text` into tokens with their spans; the last token is [`Tok::Eof`].
pub fn tokenize(text: &str) -> Result<Vec<(Tok, Span)>, Diagnostic> {
    let bytes = text.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'#' {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            toks.push((Tok::Ident(text[start..i].to_string()), Span::new(start, i)));
        } else if c.is_ascii_digit() {
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if i < bytes.len() && (bytes[i].is_ascii_alphabetic() || bytes[i] == b'_') {
                return Err(Diagnostic::new(
                    Span::new(start, i + 1),
                    "a number cannot run into a name; put a space between them",
                ));
            }
            let span = Span::new(start, i);
            toks.push((Tok::Int(literal::integer(&text[start..i], span)?), span));
        } else if c == b'\'' {
            let (atom, end) = quoted_atom(text, start)?;
            i = end;
            toks.push((Tok::Atom(atom), Span::new(start, end)));
        } else if let Some(p) = PUNCTS.iter().find(|p| text[i..].starts_with(**p)) {
            i += p.len();
            toks.push((Tok::Punct(p), Span::new(start, i)));
        } else {
            let ch = text[i..].chars().next().expect("i is inside the text");
            return Err(Diagnostic::new(
                Span::new(i, i + ch.len_utf8()),
                format!("unexpected character `{ch}`"),
            ));
        }
    }
    let end = toks.last().map_or(0, |(_, s): &(Tok, Span)| s.end);
    toks.push((Tok::Eof, Span::new(end, end)));
    Ok(toks)
}

/// Reads a `'quoted atom'` starting at byte `start` (the opening quote). Understands the
/// escapes `\'`, `\\`, `\n` and `\t`, and a doubled quote `''` as one quote (as Prolog does).
/// Returns the atom's text and the offset just past the closing quote.
pub fn quoted_atom(text: &str, start: usize) -> Result<(String, usize), Diagnostic> {
    let mut out = String::new();
    let mut chars = text[start + 1..].char_indices().peekable();
    while let Some((off, c)) = chars.next() {
        let at = start + 1 + off;
        match c {
            '\'' => {
                if let Some(&(_, '\'')) = chars.peek() {
                    chars.next();
                    out.push('\'');
                } else {
                    return Ok((out, at + 1));
                }
            }
            '\\' => match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, e @ ('\'' | '\\'))) => out.push(e),
                Some((o, e)) => {
                    let end = start + 1 + o + e.len_utf8();
                    return Err(Diagnostic::new(
                        Span::new(at, end),
                        format!("unknown escape `\\{e}` in a quoted atom"),
                    ));
                }
                None => break,
            },
            '\n' => {
                return Err(Diagnostic::new(
                    Span::new(start, at),
                    "unterminated quoted atom (a quote is missing before the end of the line)",
                ))
            }
            c => out.push(c),
        }
    }
    Err(Diagnostic::new(
        Span::new(start, text.len()),
        "unterminated quoted atom",
    ))
}
