//! The pieces of a line: operand words with their columns, names still to resolve, and the
//! syntax of numbers, names and quoted strings.

use crate::insn::{Operand, Reg};

use super::{AsmError, AsmErrorKind};

/// A name to resolve once every label and table is known, with its position for errors.
#[derive(Clone, Debug)]
pub(super) struct Pending {
    pub(super) name: String,
    pub(super) line: usize,
    pub(super) column: usize,
}

/// Where a target or table reference points: already absolute, or a name.
#[derive(Clone, Debug)]
pub(super) enum Ref {
    Index(u32),
    Name(Pending),
}

/// One token of an operand list, with its column.
pub(super) struct Word<'a> {
    pub(super) text: &'a str,
    pub(super) column: usize,
}

/// The line being assembled (1-based), for errors; its methods parse operands and report
/// what is wrong at the operand's column.
pub(super) struct Line {
    pub(super) number: usize,
}

impl Line {
    pub(super) fn err(&self, column: usize, kind: AsmErrorKind) -> AsmError {
        AsmError {
            line: self.number,
            column,
            kind,
        }
    }

    pub(super) fn number(&self, w: &Word<'_>, what: &'static str) -> Result<u32, AsmError> {
        parse_u32(w.text).ok_or_else(|| self.err(w.column, AsmErrorKind::Expected(what)))
    }

    pub(super) fn reg(&self, w: &Word<'_>) -> Result<Reg, AsmError> {
        w.text
            .strip_prefix('r')
            .and_then(|d| decimal(d).and_then(|n| u8::try_from(n).ok()))
            .map(Reg)
            .ok_or_else(|| self.err(w.column, AsmErrorKind::Expected("a register (r0..r255)")))
    }

    pub(super) fn operand(&self, w: &Word<'_>) -> Result<Operand, AsmError> {
        if w.text.starts_with('r') {
            self.reg(w).map(Operand::Reg)
        } else {
            self.number(w, "a register or a number").map(Operand::Imm)
        }
    }

    pub(super) fn slot(&self, w: &Word<'_>) -> Result<u16, AsmError> {
        w.text
            .strip_prefix('m')
            .and_then(|d| decimal(d).and_then(|n| u16::try_from(n).ok()))
            .ok_or_else(|| self.err(w.column, AsmErrorKind::Expected("a scratch slot (m0..)")))
    }

    pub(super) fn target(&self, w: &Word<'_>, absolute: char) -> Result<Ref, AsmError> {
        if let Some(d) = w.text.strip_prefix(absolute) {
            return decimal(d)
                .map(Ref::Index)
                .ok_or_else(|| self.err(w.column, AsmErrorKind::Expected("an index")));
        }
        if !is_name(w.text) {
            return Err(self.err(w.column, AsmErrorKind::Expected("a name")));
        }
        Ok(Ref::Name(Pending {
            name: w.text.to_owned(),
            line: self.number,
            column: w.column,
        }))
    }

    /// `[offset]` or `[rN+offset]` (also `[rN]`).
    pub(super) fn address(&self, w: &Word<'_>) -> Result<(Option<Reg>, u32), AsmError> {
        let bad = || self.err(w.column, AsmErrorKind::Expected("an address [k] or [rN+k]"));
        let inner = w
            .text
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']'))
            .ok_or_else(bad)?
            .trim();
        let sub = |text| Word {
            text,
            column: w.column + 1,
        };
        if !inner.starts_with('r') {
            return Ok((None, self.number(&sub(inner), "an offset")?));
        }
        let (base, offset) = match inner.split_once('+') {
            Some((b, o)) => (b.trim(), self.number(&sub(o.trim()), "an offset")?),
            None => (inner, 0),
        };
        Ok((Some(self.reg(&sub(base))?), offset))
    }
}

pub(super) fn decimal(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

pub(super) fn parse_u32(s: &str) -> Option<u32> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            u32::from_str_radix(h, 16).ok()
        }
        Some(_) => None,
        None => decimal(s),
    }
}

pub(super) fn is_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
}

/// `pN.M` (a pattern of a pattern set).
pub(super) fn pattern_ref(s: &str) -> Option<(u32, u32)> {
    let (set, pattern) = s.strip_prefix('p')?.split_once('.')?;
    Some((decimal(set)?, decimal(pattern)?))
}

pub(super) fn parse_u128(s: &str) -> Option<u128> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            u128::from_str_radix(h, 16).ok()
        }
        Some(_) => None,
        None if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
        None => None,
    }
}

/// The bytes of a quoted string in which `\xNN` is the only escape.
pub(super) fn unquote(s: &str) -> Option<Vec<u8>> {
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = Vec::with_capacity(inner.len());
    let mut bytes = inner.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'\\' => {
                let (x, hi, lo) = (bytes.next()?, bytes.next()?, bytes.next()?);
                let digit = |c: u8| char::from(c).to_digit(16);
                if x != b'x' {
                    return None;
                }
                out.push((digit(hi)? * 16 + digit(lo)?) as u8);
            }
            b'"' => return None,
            _ => out.push(b),
        }
    }
    Some(out)
}

/// The coprocessor tables being assembled.
/// Splits `text` (starting at 1-based `column`) at commas into trimmed words.
pub(super) fn split_operands(text: &str, column: usize) -> Vec<Word<'_>> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut start = 0;
    for piece in text.split(',') {
        let lead = piece.len() - piece.trim_start().len();
        out.push(Word {
            text: piece.trim(),
            column: column + start + lead,
        });
        start += piece.len() + 1;
    }
    out
}
