//! Comments, kept for `flowjit fmt`: the parsers skip them, so they are found again in the
//! text, with their positions, and the printers put each back before the statement, block
//! or terminator that follows it (or at the end of the line it ended, for a comment after
//! code on its line).

use super::ast::Span;
use super::Syntax;

/// A comment: where it is, and its text after the comment sign (`#`, `%`, or inside
/// `/* */`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comment {
    /// Where it is, comment sign included.
    pub span: Span,
    /// Its text, without the comment sign and trailing spaces.
    pub text: String,
}

/// The comments of `text` in `syntax`, in order. Comment signs inside quoted atoms (and,
/// in the Prolog syntax, strings) are not comments.
pub fn comments(text: &str, syntax: Syntax) -> Vec<Comment> {
    let bytes = text.as_bytes();
    let line_sign = match syntax {
        Syntax::Fg => b'#',
        Syntax::Pl => b'%',
    };
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == line_sign {
            let end = text[i..].find('\n').map_or(text.len(), |e| i + e);
            found.push(Comment {
                span: Span::new(i, end),
                text: text[i + 1..end].trim_end().to_string(),
            });
            i = end;
        } else if syntax == Syntax::Pl && text[i..].starts_with("/*") {
            let end = text[i + 2..]
                .find("*/")
                .map_or(text.len(), |e| i + 2 + e + 2);
            let inner = text[i + 2..end].trim_end_matches("*/");
            for line in inner.lines() {
                found.push(Comment {
                    span: Span::new(i, end),
                    text: format!(" {}", line.trim()).trim_end().to_string(),
                });
            }
            i = end;
        } else if c == b'\'' || (syntax == Syntax::Pl && (c == b'"' || c == b'`')) {
            // Skip the quoted text: a doubled quote or an escaped one does not end it, and
            // neither a quoted atom nor a string spans lines.
            i += 1;
            while i < bytes.len() && bytes[i] != b'\n' {
                if bytes[i] == b'\\' {
                    i += 2;
                } else if bytes[i] == c {
                    if bytes.get(i + 1) == Some(&c) {
                        i += 2;
                    } else {
                        i += 1;
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else {
            i += 1;
        }
    }
    found
}

/// The comments a printer has still to place, and the text they come from.
pub struct Notes<'a> {
    comments: &'a [Comment],
    text: &'a str,
    next: usize,
    /// `#` or `%`: the comment sign of the syntax printed.
    sign: &'static str,
}

impl<'a> Notes<'a> {
    /// No comments.
    pub fn none() -> Notes<'static> {
        Notes {
            comments: &[],
            text: "",
            next: 0,
            sign: "#",
        }
    }

    /// The `comments` of `text`, to be printed with the comment sign `sign`.
    pub fn new(comments: &'a [Comment], text: &'a str, sign: &'static str) -> Notes<'a> {
        Notes {
            comments,
            text,
            next: 0,
            sign,
        }
    }

    /// Takes the comments that start before `offset`: first, the one on the line where
    /// `after` is (it followed code on that line), if any; then the others.
    pub fn before(&mut self, offset: usize, after: Option<usize>) -> (Option<String>, Vec<String>) {
        let mut trailing = None;
        let mut own = Vec::new();
        while let Some(c) = self.comments.get(self.next) {
            if c.span.start >= offset {
                break;
            }
            self.next += 1;
            let line = format!("{}{}", self.sign, c.text);
            let same_line = after
                .is_some_and(|a| a <= c.span.start && !self.text[a..c.span.start].contains('\n'));
            if same_line && trailing.is_none() && own.is_empty() {
                trailing = Some(line);
            } else {
                own.push(line);
            }
        }
        (trailing, own)
    }

    /// The comments not placed yet.
    pub fn rest(&mut self) -> Vec<String> {
        self.before(usize::MAX, None).1
    }
}

/// Appends `comment` at the end of the last line `out` holds (before its newline).
pub fn append_to_last_line(out: &mut String, comment: &str) {
    let at = out.rfind('\n').unwrap_or(out.len());
    out.insert_str(at, &format!("  {comment}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comment_signs_in_quoted_atoms_are_not_comments() {
        let text = "a: x = '# not' # yes\n    print_and_stop(x) #  two\n";
        let found = comments(text, Syntax::Fg);
        let texts: Vec<&str> = found.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts, [" yes", "  two"]);
        let pl = "% head\nblock(a, print_and_stop(const('%'))). /* a\nb */\n";
        let texts: Vec<String> = comments(pl, Syntax::Pl)
            .into_iter()
            .map(|c| c.text)
            .collect();
        assert_eq!(texts, [" head", " a", " b"]);
    }
}
