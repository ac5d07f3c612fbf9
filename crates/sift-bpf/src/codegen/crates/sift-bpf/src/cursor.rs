//! A character cursor over one line of program text, shared by the text formats: it knows its
//! column, skips blanks, and reads C-style numbers without ever panicking.

use crate::error::{ParseError, ParseErrorKind};

pub(crate) struct Cursor<'a> {
    text: &'a str,
    /// Byte position in `text`.
    pos: usize,
    line: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(text: &'a str, line: usize) -> Cursor<'a> {
        Cursor { text, pos: 0, line }
    }

    /// 1-based column (in characters) of the current position.
    pub(crate) fn column(&self) -> usize {
        self.text[..self.pos].chars().count() + 1
    }

    pub(crate) fn error(&self, kind: ParseErrorKind) -> ParseError {
        ParseError::new(self.line, self.column(), kind)
    }

    pub(crate) fn error_at(&self, pos: usize, kind: ParseErrorKind) -> ParseError {
        ParseError::new(self.line, self.text[..pos].chars().count() + 1, kind)
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Moves back to byte position `pos` (one this cursor was at before).
    pub(crate) fn rewind(&mut self, pos: usize) {
        if pos <= self.pos {
            self.pos = pos;
        }
    }

    pub(crate) fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    pub(crate) fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    pub(crate) fn skip_blanks(&mut self) {
        while let Some(c) = self.peek() {
            if c == ' ' || c == '\t' || c == '\r' {
                self.pos += c.len_utf8();
            } else {
                break;
            }
        }
    }

    /// Whether only blanks (or a comment starting with one of `comments`) remain.
    pub(crate) fn at_end(&mut self, comments: &[&str]) -> bool {
        self.skip_blanks();
        let rest = self.rest();
        rest.is_empty() || comments.iter().any(|c| rest.starts_with(c))
    }

    /// Consumes `c` (after blanks) if it is next.
    pub(crate) fn eat(&mut self, c: char) -> bool {
        self.skip_blanks();
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    /// Consumes `s` (after blanks) if it is next, ignoring ASCII case.
    pub(crate) fn eat_str(&mut self, s: &str) -> bool {
        self.skip_blanks();
        let rest = self.rest();
        if rest.len() >= s.len()
            && rest.is_char_boundary(s.len())
            && rest[..s.len()].eq_ignore_ascii_case(s)
        {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    pub(crate) fn expect(&mut self, c: char, what: &'static str) -> Result<(), ParseError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(ParseErrorKind::Expected(what)))
        }
    }

    /// Reads a word of letters, digits, `_` and `.` (after blanks); may be empty.
    pub(crate) fn word(&mut self) -> &'a str {
        self.skip_blanks();
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                self.pos += 1;
            } else {
                break;
            }
        }
        &self.text[start..self.pos]
    }

    /// Reads an optionally negative C integer literal (decimal, `0x` hex, or `0` octal) and
    /// returns it as an i64 (after blanks). Magnitudes beyond 2^32 are out of range.
    pub(crate) fn number(&mut self, field: &'static str) -> Result<i64, ParseError> {
        self.skip_blanks();
        let start = self.pos;
        let negative = self.eat('-');
        let rest = self.rest();
        let (radix, skip) = if rest.starts_with("0x") || rest.starts_with("0X") {
            (16, 2)
        } else if rest.starts_with('0') && rest[1..].starts_with(|c: char| c.is_ascii_digit()) {
            (8, 1)
        } else {
            (10, 0)
        };
        let digits: &str = {
            let body = &rest[skip..];
            let n = body
                .find(|c: char| !c.is_ascii_alphanumeric())
                .unwrap_or(body.len());
            &body[..n]
        };
        if digits.is_empty() {
            return Err(self.error_at(start, ParseErrorKind::Expected("a number")));
        }
        let magnitude = u64::from_str_radix(digits, radix)
            .ok()
            .filter(|&m| m <= u64::from(u32::MAX))
            .ok_or_else(|| {
                if digits.chars().all(|c| c.is_digit(radix)) {
                    self.error_at(start, ParseErrorKind::OutOfRange(field))
                } else {
                    self.error_at(start, ParseErrorKind::Expected("a number"))
                }
            })?;
        self.pos += skip + digits.len();
        let m = magnitude as i64;
        Ok(if negative { -m } else { m })
    }

    /// A plain decimal number (leading zeros allowed, as in `(008)`).
    pub(crate) fn decimal(&mut self, field: &'static str) -> Result<u64, ParseError> {
        self.skip_blanks();
        let start = self.pos;
        let n = self
            .rest()
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(self.rest().len());
        if n == 0 {
            return Err(self.error(ParseErrorKind::Expected("a number")));
        }
        let value = self.rest()[..n]
            .parse::<u64>()
            .map_err(|_| self.error_at(start, ParseErrorKind::OutOfRange(field)))?;
        self.pos += n;
        Ok(value)
    }

    /// A number in `0..=max`, where negative numbers down to `-2^31` are taken as their two's
    /// complement (only when `max` is `u32::MAX`: bpf_image prints some `k` with `%d`).
    pub(crate) fn unsigned(&mut self, field: &'static str, max: u32) -> Result<u32, ParseError> {
        self.skip_blanks();
        let start = self.pos;
        let n = self.number(field)?;
        let out_of_range = || self.error_at(start, ParseErrorKind::OutOfRange(field));
        if n < 0 {
            if max == u32::MAX && n >= i64::from(i32::MIN) {
                return Ok(n as i32 as u32);
            }
            return Err(out_of_range());
        }
        u32::try_from(n)
            .ok()
            .filter(|&v| v <= max)
            .ok_or_else(out_of_range)
    }
}
