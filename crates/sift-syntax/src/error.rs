//! Parse errors: a kind, the byte span of the offending text, and a renderer that points at it.

use std::fmt;

use crate::ast::Span;

/// What went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// A character that starts no token (libpcap: `syntax error`, via its `LEX_ERROR` token).
    IllegalCharacter(char),
    /// A number that does not fit in 32 bits.
    NumberOverflow(String),
    /// A number with a leading `0` (octal) containing `8` or `9`.
    NonOctalDigit(String),
    /// Text shaped like an IPv6 address that is not one (`bogus IPv6 address`).
    BogusIpv6(String),
    /// Colon-separated hex groups that are not a MAC address (`bogus ethernet address`).
    BogusEthernet(String),
    /// A token the grammar does not allow here (`syntax error`). `found` describes the token,
    /// `expected` what the grammar would have accepted.
    Unexpected { found: String, expected: String },
    /// A dotted IPv4 address after `port`, `portrange`, `proto` or `protochain` (libpcap rejects
    /// this in the grammar itself). The string is the qualifier.
    AddressAfterQualifier(&'static str),
    /// A name, number or IPv4 address in identifier position with nothing to inherit qualifiers
    /// from, because the primitive before it has none: `tcp or 80`, `(tcp) and foo`. libpcap
    /// reports this from its code generator as "syntax error in filter expression". The string
    /// is the identifier as written.
    NoQualifiers(String),
    /// Parentheses, `not` or unary minus nested deeper than [`crate::MAX_DEPTH`].
    TooDeep,
    /// A malformed quoted string (sift extension); the string says what is wrong.
    BadString(String),
    /// A malformed set literal or file reference (sift extension).
    BadSet(String),
    /// A malformed payload test (sift extension).
    BadPayload(String),
    /// An error found after parsing (by the lowering stage), rendered with the same caret line.
    Semantic(String),
}

/// A lexical or syntax error, with the span of the offending token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub kind: ParseErrorKind,
    pub span: Span,
}

impl ParseError {
    pub fn new(kind: ParseErrorKind, span: Span) -> ParseError {
        ParseError { kind, span }
    }

    /// Whether libpcap would call this a syntax error (rather than a lexical one such as an
    /// overflowing number).
    pub fn is_syntax(&self) -> bool {
        matches!(
            self.kind,
            ParseErrorKind::Unexpected { .. }
                | ParseErrorKind::IllegalCharacter(_)
                | ParseErrorKind::NoQualifiers(_)
                | ParseErrorKind::TooDeep
        )
    }

    /// Renders the error with the line of `text` that contains it and a caret line under the
    /// offending token, e.g.
    ///
    /// ```text
    /// error: syntax error: unexpected `)`, expected an expression
    ///   |
    /// 1 | tcp and )
    ///   |         ^
    /// ```
    ///
    /// `text` must be the expression the error came from. Tabs are expanded so that the carets
    /// line up; for a multi-line expression only the line where the error starts is shown.
    pub fn render(&self, text: &str) -> String {
        let start = floor_char_boundary(text, self.span.start.min(text.len()));
        let end = floor_char_boundary(text, self.span.end.min(text.len())).max(start);
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let line_no = text[..start].matches('\n').count() + 1;
        let line = &text[line_start..line_end];
        let shown: String = expand(line);
        let col = expand(&text[line_start..start]).chars().count();
        let width = if end > start {
            let stop = end.min(line_end);
            expand(&text[start..stop]).chars().count().max(1)
        } else {
            1
        };
        // A long line (a filter of thousands of terms) is shown as a window around the caret.
        let chars: Vec<char> = shown.trim_end().chars().collect();
        let (mut from, mut to) = (0, chars.len());
        if chars.len() > WINDOW {
            from = col.saturating_sub(WINDOW / 3).min(chars.len() - WINDOW);
            to = from + WINDOW;
        }
        let (before, after) = (
            if from > 0 { "..." } else { "" },
            if to < chars.len() { "..." } else { "" },
        );
        let visible: String = chars[from..to].iter().collect();
        let caret_col = before.len() + col.saturating_sub(from);
        let width = width.min(to.saturating_sub(col)).max(1);
        let gutter = line_no.to_string();
        let pad = " ".repeat(gutter.len());
        let mut out = format!("error: {self}\n{pad} |\n{gutter} | {before}{visible}{after}\n");
        out.push_str(&format!(
            "{pad} | {}{}",
            " ".repeat(caret_col),
            "^".repeat(width)
        ));
        out
    }
}

/// The widest part of a line [`ParseError::render`] shows, in characters.
const WINDOW: usize = 100;

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Replaces tabs by four spaces and other control characters by `?`, so columns line up.
fn expand(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\t' => "    ".to_string(),
            '\r' => String::new(),
            c if c.is_control() => "?".to_string(),
            c => c.to_string(),
        })
        .collect()
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ParseErrorKind::IllegalCharacter(c) => {
                write!(f, "syntax error: illegal character {c:?}")
            }
            ParseErrorKind::NumberOverflow(s) => write!(f, "number {s} overflows 32 bits"),
            ParseErrorKind::NonOctalDigit(s) => write!(f, "number {s} contains non-octal digit"),
            ParseErrorKind::BogusIpv6(s) => write!(f, "bogus IPv6 address {s}"),
            ParseErrorKind::BogusEthernet(s) => write!(f, "bogus ethernet address {s}"),
            ParseErrorKind::Unexpected { found, expected } => {
                write!(f, "syntax error: unexpected {found}, expected {expected}")
            }
            ParseErrorKind::AddressAfterQualifier(q) => {
                write!(f, "'{q}' modifier applied to ip host")
            }
            ParseErrorKind::NoQualifiers(s) => write!(
                f,
                "syntax error: `{s}` has no qualifiers to inherit (the primitive before it has \
                 none); write them out, e.g. `host {s}` or `port {s}`"
            ),
            ParseErrorKind::Semantic(m) => f.write_str(m),
            ParseErrorKind::BadString(m)
            | ParseErrorKind::BadSet(m)
            | ParseErrorKind::BadPayload(m) => f.write_str(m),
            ParseErrorKind::TooDeep => write!(
                f,
                "expression nested too deeply (sift allows {} levels of parentheses, `not` and \
                 unary minus, and {} levels in all, counting each switch between `and` and `or`)",
                crate::MAX_DEPTH,
                crate::MAX_TREE_DEPTH
            ),
        }
    }
}

impl std::error::Error for ParseError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_single_line() {
        let e = ParseError::new(
            ParseErrorKind::Unexpected {
                found: "`)`".into(),
                expected: "an expression".into(),
            },
            Span::new(8, 9),
        );
        let r = e.render("tcp and )");
        assert_eq!(
            r,
            "error: syntax error: unexpected `)`, expected an expression\n  |\n1 | tcp and )\n  |         ^"
        );
    }

    #[test]
    fn render_multi_line_with_tabs() {
        let text = "tcp and\n\tfoo )";
        let e = ParseError::new(ParseErrorKind::IllegalCharacter('?'), Span::new(13, 14));
        let r = e.render(text);
        assert!(r.contains("2 |     foo )"), "{r}");
        assert!(r.ends_with("  |         ^"), "{r}");
    }

    #[test]
    fn render_at_end_and_out_of_range() {
        let e = ParseError::new(ParseErrorKind::TooDeep, Span::new(3, 3));
        assert!(e.render("tcp").ends_with("|    ^"));
        let e = ParseError::new(ParseErrorKind::TooDeep, Span::new(30, 40));
        let _ = e.render("tcp");
        let e = ParseError::new(ParseErrorKind::TooDeep, Span::new(1, 2));
        let _ = e.render("é");
    }
}

#[cfg(test)]
mod render_tests {
    use super::*;

    #[test]
    fn a_long_line_is_shown_around_the_caret() {
        let text = format!(
            "{}tcp port 99999{}",
            "ip or ".repeat(500),
            " or ip".repeat(500)
        );
        let at = text.find("99999").unwrap();
        let e = ParseError::new(ParseErrorKind::TooDeep, Span::new(at, at + 5));
        let out = e.render(&text);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[2].len() < 120, "{out}");
        assert!(
            lines[2].starts_with("1 | ...") && lines[2].ends_with("..."),
            "{out}"
        );
        let caret = lines[3].find('^').unwrap();
        assert_eq!(&lines[2][caret..caret + 5], "99999", "{out}");
        assert_eq!(lines[3].matches('^').count(), 5);
    }
}
