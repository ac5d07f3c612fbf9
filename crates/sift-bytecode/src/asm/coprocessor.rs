//! The `.pattern` and `.set` directives: the coprocessor tables a program carries.

use sift_ir::{KeyWidth, Pattern, PatternSet, ValueSet};

use super::operands::{decimal, parse_u128, unquote, Line, Word};
use super::{AsmError, AsmErrorKind};

#[derive(Default)]
pub(super) struct CoprocessorTables {
    pub(super) patterns: Vec<PatternSet>,
    pub(super) sets: Vec<ValueSet>,
}

impl CoprocessorTables {
    /// The index `name` (`pN`/`sN`) gives, which must be below or equal to `len`.
    pub(super) fn index(
        line: &Line,
        arg: &Word<'_>,
        name: &str,
        prefix: char,
        len: usize,
    ) -> Result<usize, AsmError> {
        let i = name.strip_prefix(prefix).and_then(decimal).ok_or_else(|| {
            line.err(
                arg.column,
                AsmErrorKind::Expected("a table name (p0, s0, ...)"),
            )
        })?;
        let i = i as usize;
        if i > len {
            return Err(line.err(arg.column, AsmErrorKind::TableOutOfOrder(name.to_owned())));
        }
        Ok(i)
    }

    /// `pN [= [nocase|regex] "..."]`.
    pub(super) fn pattern(&mut self, line: &Line, arg: &Word<'_>) -> Result<(), AsmError> {
        let (name, body) = match arg.text.split_once('=') {
            Some((n, b)) => (n.trim(), Some(b.trim())),
            None => (arg.text, None),
        };
        let i = CoprocessorTables::index(line, arg, name, 'p', self.patterns.len())?;
        if i == self.patterns.len() {
            self.patterns.push(PatternSet::new());
        }
        let Some(body) = body else { return Ok(()) };
        let (kind, quoted) = match body.split_once(char::is_whitespace) {
            Some((k @ ("nocase" | "regex"), rest)) => (k, rest.trim()),
            _ => ("", body),
        };
        let bad = |what| line.err(arg.column, AsmErrorKind::Expected(what));
        let bytes = unquote(quoted).ok_or_else(|| bad("a quoted string with \\xNN escapes"))?;
        let pattern = match kind {
            "regex" => Pattern::Regex(String::from_utf8(bytes).map_err(|_| bad("a UTF-8 regex"))?),
            k => Pattern::Literal {
                bytes,
                nocase: k == "nocase",
            },
        };
        let set = &mut self.patterns[i];
        let before = set.len();
        let at = set
            .add(pattern)
            .map_err(|e| line.err(arg.column, AsmErrorKind::InvalidPattern(e)))?;
        if at as usize != before {
            return Err(line.err(arg.column, AsmErrorKind::DuplicatePattern));
        }
        Ok(())
    }

    /// `sN w32|w128 = k, lo-hi, ...`.
    pub(super) fn set(&mut self, line: &Line, arg: &Word<'_>) -> Result<(), AsmError> {
        let bad = |what| line.err(arg.column, AsmErrorKind::Expected(what));
        let (head, body) = arg
            .text
            .split_once('=')
            .ok_or_else(|| bad("`sN wW = ranges`"))?;
        let mut words = head.split_whitespace();
        let name = words.next().unwrap_or("");
        let i = CoprocessorTables::index(line, arg, name, 's', self.sets.len())?;
        if i != self.sets.len() {
            return Err(line.err(arg.column, AsmErrorKind::TableOutOfOrder(name.to_owned())));
        }
        let width = match (words.next(), words.next()) {
            (Some("w32"), None) => KeyWidth::W32,
            (Some("w128"), None) => KeyWidth::W128,
            _ => return Err(bad("a key width (w32 or w128)")),
        };
        let mut ranges = Vec::new();
        let body = body.trim();
        if !body.is_empty() {
            for item in body.split(',') {
                let item = item.trim();
                let (lo, hi) = item.split_once('-').unwrap_or((item, item));
                let bound =
                    |s: &str| parse_u128(s.trim()).ok_or_else(|| bad("a number or a range lo-hi"));
                ranges.push((bound(lo)?, bound(hi)?));
            }
        }
        self.sets.push(ValueSet::new(width, ranges));
        Ok(())
    }
}
