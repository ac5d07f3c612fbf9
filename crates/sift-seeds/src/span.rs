//! Source positions shared by the seeds' text syntaxes (CSPF, DPF, MPF): byte spans,
//! line/column locations, the error type that carries them, and the caret rendering used in
//! error messages.

use std::fmt;

/// A byte range `start..end` in the source text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// A 1-based line and column (the column counts characters, not bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

impl Location {
    /// The location of byte `offset` in `text` (clamped to the text; a position inside a
    /// multi-byte character counts as that character).
    pub fn of(text: &str, offset: usize) -> Location {
        let offset = offset.min(text.len());
        let before = text.as_bytes()[..offset].iter();
        let line = 1 + before.filter(|&&b| b == b'\n').count();
        let line_start = text.as_bytes()[..offset]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        // Count characters by their first bytes, so that this never slices inside a character.
        let column = 1 + text.as_bytes()[line_start..offset]
            .iter()
            .filter(|&&b| (b & 0xC0) != 0x80)
            .count();
        Location { line, column }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// An error in one of the seeds' texts: what went wrong (`K`, each syntax's own kinds), the
/// byte span it points at, and that span's line and column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError<K> {
    pub kind: K,
    pub span: Span,
    pub location: Location,
}

impl<K> SyntaxError<K> {
    /// The error `kind` at `span` of `text`.
    pub fn new(text: &str, kind: K, span: Span) -> SyntaxError<K> {
        SyntaxError {
            kind,
            span,
            location: Location::of(text, span.start),
        }
    }
}

impl<K: fmt::Display> SyntaxError<K> {
    /// The error with the offending source line and a caret under the span.
    pub fn render(&self, text: &str) -> String {
        render(text, self.span, &self.kind.to_string())
    }
}

impl<K: fmt::Display> fmt::Display for SyntaxError<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.kind)
    }
}

impl<K: fmt::Display + fmt::Debug> std::error::Error for SyntaxError<K> {}

/// Renders `message` with the source line holding `span` and a caret line under the span.
pub fn render(text: &str, span: Span, message: &str) -> String {
    let loc = Location::of(text, span.start);
    let line_text = text.lines().nth(loc.line - 1).unwrap_or("");
    let width = line_text.chars().count();
    let start = (loc.column - 1).min(width);
    let len = text
        .get(span.start.min(text.len())..span.end.min(text.len()))
        .map_or(1, |s| s.lines().next().unwrap_or("").chars().count())
        .max(1);
    format!(
        "{loc}: {message}\n{line_text}\n{}{}",
        " ".repeat(start),
        "^".repeat(len)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_count_lines_and_characters() {
        let text = "ab\ncdé f\n";
        assert_eq!(Location::of(text, 0), Location { line: 1, column: 1 });
        assert_eq!(Location::of(text, 3), Location { line: 2, column: 1 });
        // 'é' is two bytes; 'f' is the 5th character of line 2.
        assert_eq!(Location::of(text, 8), Location { line: 2, column: 5 });
        assert_eq!(Location::of(text, 1000).line, 3);
    }

    #[test]
    fn render_points_at_the_span() {
        let r = render("x\nfoo bar\n", Span::new(6, 9), "bad");
        assert_eq!(r, "2:5: bad\nfoo bar\n    ^^^");
    }
}
