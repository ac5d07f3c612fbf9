//! The assembler: text form to [`Program`] (the inverse of the disassembler in `disasm`).
//!
//! One statement per line; `;` starts a comment. A line may start with `label:`. Directives:
//! `.scratch N` (once, before the code) and `.table NAME` (after the code; the following lines
//! are `key -> target` entries). Targets are labels or absolute `@index`; tables are referenced
//! by name or by absolute `#index`. Numbers are decimal or `0x` hexadecimal. The assembler checks
//! syntax and names only; the verifier checks the rest (a backward label is assembled as written).
//!
//! Coprocessor tables are declared before the code: `.pattern pN = [nocase|regex] "..."` adds
//! a pattern to pattern set `N` (a bare `.pattern pN` declares the set, possibly empty), and
//! `.set sN w32|w128 = k, lo-hi, ...` defines value set `N`; sets are numbered in order. The
//! calls name them: `contains rD, pN.M, rS` and `member rD, sN, rK` (or four key registers).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use sift_ir::{Chain, KeyWidth, Pattern, PatternError, PatternSet, ValueSet};

use crate::insn::{AluOp, Cond, Insn, Key, Operand, Program, Reg, Table, Width};

/// A syntax or naming error at a line and column (both 1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AsmError {
    pub line: usize,
    pub column: usize,
    pub kind: AsmErrorKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AsmErrorKind {
    UnknownMnemonic(String),
    UnknownDirective(String),
    /// `expected` operands, `found` given.
    OperandCount {
        expected: usize,
        found: usize,
    },
    /// The operand is not of the kind the instruction needs (`what` names it).
    Expected(&'static str),
    DuplicateLabel(String),
    UndefinedLabel(String),
    DuplicateTable(String),
    UndefinedTable(String),
    /// `.scratch` given twice or after the first instruction.
    MisplacedScratch,
    /// An instruction or label after the first `.table`.
    CodeAfterTables,
    /// A label not followed by an instruction.
    LabelAtEnd(String),
    /// A `.pattern` or `.set` after the first instruction.
    MisplacedCoprocessorTable,
    /// A pattern or value set named out of order (`.set s2` before `s1`), or a value set
    /// defined twice.
    TableOutOfOrder(String),
    /// A pattern sift-ir refuses (an empty literal, an invalid regular expression).
    InvalidPattern(PatternError),
    /// A pattern already in its set (sets hold distinct patterns, so indices stay as written).
    DuplicatePattern,
}

impl fmt::Display for AsmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: ", self.line, self.column)?;
        match &self.kind {
            AsmErrorKind::UnknownMnemonic(m) => write!(f, "unknown instruction `{m}`"),
            AsmErrorKind::UnknownDirective(d) => write!(f, "unknown directive `{d}`"),
            AsmErrorKind::OperandCount { expected, found } => {
                write!(f, "expected {expected} operands, found {found}")
            }
            AsmErrorKind::Expected(what) => write!(f, "expected {what}"),
            AsmErrorKind::DuplicateLabel(l) => write!(f, "label `{l}` defined twice"),
            AsmErrorKind::UndefinedLabel(l) => write!(f, "undefined label `{l}`"),
            AsmErrorKind::DuplicateTable(t) => write!(f, "table `{t}` defined twice"),
            AsmErrorKind::UndefinedTable(t) => write!(f, "undefined table `{t}`"),
            AsmErrorKind::MisplacedScratch => {
                write!(f, "`.scratch` must appear once, before the code")
            }
            AsmErrorKind::CodeAfterTables => write!(f, "code after the first `.table`"),
            AsmErrorKind::LabelAtEnd(l) => write!(f, "label `{l}` does not label an instruction"),
            AsmErrorKind::MisplacedCoprocessorTable => {
                write!(f, "`.pattern` and `.set` must appear before the code")
            }
            AsmErrorKind::TableOutOfOrder(t) => {
                write!(f, "`{t}` is out of order or defined twice")
            }
            AsmErrorKind::InvalidPattern(e) => write!(f, "{e}"),
            AsmErrorKind::DuplicatePattern => write!(f, "pattern already in its set"),
        }
    }
}

impl std::error::Error for AsmError {}

/// A name to resolve once every label and table is known, with its position for errors.
#[derive(Clone, Debug)]
struct Pending {
    name: String,
    line: usize,
    column: usize,
}

/// Where a target or table reference points: already absolute, or a name.
#[derive(Clone, Debug)]
enum Ref {
    Index(u32),
    Name(Pending),
}

/// One token of an operand list, with its column.
struct Word<'a> {
    text: &'a str,
    column: usize,
}

struct Line {
    number: usize,
}

impl Line {
    fn err(&self, column: usize, kind: AsmErrorKind) -> AsmError {
        AsmError {
            line: self.number,
            column,
            kind,
        }
    }

    fn number(&self, w: &Word<'_>, what: &'static str) -> Result<u32, AsmError> {
        parse_u32(w.text).ok_or_else(|| self.err(w.column, AsmErrorKind::Expected(what)))
    }

    fn reg(&self, w: &Word<'_>) -> Result<Reg, AsmError> {
        w.text
            .strip_prefix('r')
            .and_then(|d| decimal(d).and_then(|n| u8::try_from(n).ok()))
            .map(Reg)
            .ok_or_else(|| self.err(w.column, AsmErrorKind::Expected("a register (r0..r255)")))
    }

    fn operand(&self, w: &Word<'_>) -> Result<Operand, AsmError> {
        if w.text.starts_with('r') {
            self.reg(w).map(Operand::Reg)
        } else {
            self.number(w, "a register or a number").map(Operand::Imm)
        }
    }

    fn slot(&self, w: &Word<'_>) -> Result<u16, AsmError> {
        w.text
            .strip_prefix('m')
            .and_then(|d| decimal(d).and_then(|n| u16::try_from(n).ok()))
            .ok_or_else(|| self.err(w.column, AsmErrorKind::Expected("a scratch slot (m0..)")))
    }

    fn target(&self, w: &Word<'_>, absolute: char) -> Result<Ref, AsmError> {
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
    fn address(&self, w: &Word<'_>) -> Result<(Option<Reg>, u32), AsmError> {
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

fn decimal(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn parse_u32(s: &str) -> Option<u32> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            u32::from_str_radix(h, 16).ok()
        }
        Some(_) => None,
        None => decimal(s),
    }
}

fn is_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
}

/// `pN.M` (a pattern of a pattern set).
fn pattern_ref(s: &str) -> Option<(u32, u32)> {
    let (set, pattern) = s.strip_prefix('p')?.split_once('.')?;
    Some((decimal(set)?, decimal(pattern)?))
}

fn parse_u128(s: &str) -> Option<u128> {
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
fn unquote(s: &str) -> Option<Vec<u8>> {
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
#[derive(Default)]
struct CoprocessorTables {
    patterns: Vec<PatternSet>,
    sets: Vec<ValueSet>,
}

impl CoprocessorTables {
    /// The index `name` (`pN`/`sN`) gives, which must be below or equal to `len`.
    fn index(
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
    fn pattern(&mut self, line: &Line, arg: &Word<'_>) -> Result<(), AsmError> {
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
    fn set(&mut self, line: &Line, arg: &Word<'_>) -> Result<(), AsmError> {
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

/// Splits `text` (starting at 1-based `column`) at commas into trimmed words.
fn split_operands(text: &str, column: usize) -> Vec<Word<'_>> {
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

/// An instruction whose targets may still be names.
struct Parsed {
    insn: Insn,
    targets: Vec<(usize, Ref)>,
    table: Option<Ref>,
}

fn alu_op(m: &str) -> Option<AluOp> {
    AluOp::ALL.into_iter().find(|op| op.name() == m)
}

fn cond(m: &str) -> Option<Cond> {
    Cond::ALL.into_iter().find(|c| c.mnemonic() == m)
}

fn parse_insn(
    line: &Line,
    mnemonic: &str,
    column: usize,
    ops: &[Word<'_>],
) -> Result<Parsed, AsmError> {
    let arity = |n: usize| {
        if ops.len() == n {
            Ok(())
        } else {
            Err(line.err(
                column,
                AsmErrorKind::OperandCount {
                    expected: n,
                    found: ops.len(),
                },
            ))
        }
    };
    let plain = |insn| Parsed {
        insn,
        targets: Vec::new(),
        table: None,
    };
    let width = match mnemonic {
        "ld.b" => Some(Width::Byte),
        "ld.h" => Some(Width::Half),
        "ld.w" => Some(Width::Word),
        _ => None,
    };
    let chain = match mnemonic {
        "protochain.ip" => Some(Chain::Ip),
        "protochain.ip6" => Some(Chain::Ip6),
        _ => None,
    };
    if let Some(chain) = chain {
        arity(4)?;
        let (offset, base) = match line.address(&ops[2])? {
            (Some(offset), base) => (offset, base),
            (None, _) => {
                return Err(line.err(
                    ops[2].column,
                    AsmErrorKind::Expected("a header offset [rN+base]"),
                ))
            }
        };
        return Ok(plain(Insn::Protochain {
            dst: line.reg(&ops[0])?,
            chain,
            base,
            proto: line.reg(&ops[1])?,
            offset,
            target: line.number(&ops[3], "a protocol number")?,
        }));
    }
    if let Some(width) = width {
        arity(2)?;
        let (base, offset) = line.address(&ops[1])?;
        return Ok(plain(Insn::Load {
            width,
            dst: line.reg(&ops[0])?,
            base,
            offset,
        }));
    }
    if let Some(op) = alu_op(mnemonic) {
        arity(3)?;
        return Ok(plain(Insn::Alu {
            op,
            dst: line.reg(&ops[0])?,
            lhs: line.reg(&ops[1])?,
            rhs: line.operand(&ops[2])?,
        }));
    }
    if let Some(cond) = cond(mnemonic) {
        arity(4)?;
        return Ok(Parsed {
            insn: Insn::Branch {
                cond,
                lhs: line.reg(&ops[0])?,
                rhs: line.operand(&ops[1])?,
                then_: 0,
                else_: 0,
            },
            targets: vec![
                (0, line.target(&ops[2], '@')?),
                (1, line.target(&ops[3], '@')?),
            ],
            table: None,
        });
    }
    Ok(match mnemonic {
        "mov" => {
            arity(2)?;
            plain(Insn::Mov {
                dst: line.reg(&ops[0])?,
                src: line.operand(&ops[1])?,
            })
        }
        "len" => {
            arity(1)?;
            plain(Insn::WireLen {
                dst: line.reg(&ops[0])?,
            })
        }
        "neg" => {
            arity(2)?;
            plain(Insn::Neg {
                dst: line.reg(&ops[0])?,
                src: line.reg(&ops[1])?,
            })
        }
        "ldm" => {
            arity(2)?;
            plain(Insn::LoadScratch {
                dst: line.reg(&ops[0])?,
                slot: line.slot(&ops[1])?,
            })
        }
        "stm" => {
            arity(2)?;
            plain(Insn::StoreScratch {
                slot: line.slot(&ops[0])?,
                src: line.reg(&ops[1])?,
            })
        }
        "jmp" => {
            arity(1)?;
            Parsed {
                insn: Insn::Jump { target: 0 },
                targets: vec![(0, line.target(&ops[0], '@')?)],
                table: None,
            }
        }
        "switch" => {
            arity(3)?;
            Parsed {
                insn: Insn::Switch {
                    key: line.reg(&ops[0])?,
                    table: 0,
                    default: 0,
                },
                targets: vec![(0, line.target(&ops[2], '@')?)],
                table: Some(line.target(&ops[1], '#')?),
            }
        }
        "ret" => {
            arity(1)?;
            plain(Insn::Return {
                value: line.operand(&ops[0])?,
            })
        }
        "contains" => {
            arity(3)?;
            let (set, pattern) = pattern_ref(ops[1].text).ok_or_else(|| {
                line.err(ops[1].column, AsmErrorKind::Expected("a pattern (pN.M)"))
            })?;
            plain(Insn::Contains {
                dst: line.reg(&ops[0])?,
                set,
                pattern,
                start: line.reg(&ops[2])?,
            })
        }
        "member" => {
            if ops.len() != 3 && ops.len() != 6 {
                arity(if ops.len() > 3 { 6 } else { 3 })?;
            }
            let set = ops[1]
                .text
                .strip_prefix('s')
                .and_then(decimal)
                .ok_or_else(|| line.err(ops[1].column, AsmErrorKind::Expected("a set (sN)")))?;
            let key = if ops.len() == 3 {
                Key::W32(line.reg(&ops[2])?)
            } else {
                Key::W128([
                    line.reg(&ops[2])?,
                    line.reg(&ops[3])?,
                    line.reg(&ops[4])?,
                    line.reg(&ops[5])?,
                ])
            };
            plain(Insn::Member {
                dst: line.reg(&ops[0])?,
                set,
                key,
            })
        }
        _ => return Err(line.err(column, AsmErrorKind::UnknownMnemonic(mnemonic.to_owned()))),
    })
}

/// Assembles the text form into a program.
pub fn assemble(text: &str) -> Result<Program, AsmError> {
    let mut scratch: Option<u16> = None;
    let mut code: Vec<Parsed> = Vec::new();
    let mut labels: HashMap<String, u32> = HashMap::new();
    let mut open_labels: Vec<Pending> = Vec::new();
    let mut tables: Vec<Vec<(u32, Ref)>> = Vec::new();
    let mut table_names: HashMap<String, u32> = HashMap::new();
    let mut coprocessor = CoprocessorTables::default();

    for (i, raw) in text.lines().enumerate() {
        let line = Line { number: i + 1 };
        let content = raw.split(';').next().unwrap_or("");
        let indent = content.len() - content.trim_start().len();
        let mut rest = content.trim();
        let mut column = indent + 1;
        if rest.is_empty() {
            continue;
        }
        if let Some(directive) = rest.strip_prefix('.') {
            let (name, arg) = directive
                .split_once(char::is_whitespace)
                .unwrap_or((directive, ""));
            let arg_column = column + 1 + name.len() + (arg.len() - arg.trim_start().len()) + 1;
            let arg = Word {
                text: arg.trim(),
                column: arg_column,
            };
            match name {
                "scratch" => {
                    if scratch.is_some() || !code.is_empty() || !open_labels.is_empty() {
                        return Err(line.err(column, AsmErrorKind::MisplacedScratch));
                    }
                    let n = line.number(&arg, "a word count")?;
                    let n = u16::try_from(n).map_err(|_| {
                        line.err(arg.column, AsmErrorKind::Expected("a count below 65536"))
                    })?;
                    scratch = Some(n);
                }
                "table" => {
                    if !is_name(arg.text) {
                        return Err(line.err(arg.column, AsmErrorKind::Expected("a table name")));
                    }
                    let index = tables.len() as u32;
                    if table_names.insert(arg.text.to_owned(), index).is_some() {
                        let name = arg.text.to_owned();
                        return Err(line.err(arg.column, AsmErrorKind::DuplicateTable(name)));
                    }
                    tables.push(Vec::new());
                }
                "pattern" | "set" => {
                    if !code.is_empty() || !open_labels.is_empty() || !tables.is_empty() {
                        return Err(line.err(column, AsmErrorKind::MisplacedCoprocessorTable));
                    }
                    if name == "pattern" {
                        coprocessor.pattern(&line, &arg)?;
                    } else {
                        coprocessor.set(&line, &arg)?;
                    }
                }
                _ => {
                    let d = name.to_owned();
                    return Err(line.err(column, AsmErrorKind::UnknownDirective(d)));
                }
            }
            continue;
        }
        if let Some(entries) = tables.last_mut() {
            // Inside a table: `key -> target`.
            let Some((key, target)) = rest.split_once("->") else {
                return Err(line.err(column, AsmErrorKind::CodeAfterTables));
            };
            let key_word = Word {
                text: key.trim(),
                column,
            };
            let target_column = column + key.len() + 2 + (target.len() - target.trim_start().len());
            let target_word = Word {
                text: target.trim(),
                column: target_column,
            };
            let key = line.number(&key_word, "a key")?;
            entries.push((key, line.target(&target_word, '@')?));
            continue;
        }
        if let Some((label, after)) = rest.split_once(':') {
            let label = label.trim();
            if is_name(label) {
                if labels.contains_key(label) || open_labels.iter().any(|p| p.name == label) {
                    let l = label.to_owned();
                    return Err(line.err(column, AsmErrorKind::DuplicateLabel(l)));
                }
                open_labels.push(Pending {
                    name: label.to_owned(),
                    line: line.number,
                    column,
                });
                column += rest.len() - after.len();
                column += after.len() - after.trim_start().len();
                rest = after.trim();
                if rest.is_empty() {
                    continue;
                }
            }
        }
        let (mnemonic, operands) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let ops_column = column + mnemonic.len() + 1;
        let ops = split_operands(operands, ops_column);
        let parsed = parse_insn(&line, mnemonic, column, &ops)?;
        let index = code.len() as u32;
        for l in open_labels.drain(..) {
            labels.insert(l.name, index);
        }
        code.push(parsed);
    }
    if let Some(l) = open_labels.into_iter().next() {
        return Err(AsmError {
            line: l.line,
            column: l.column,
            kind: AsmErrorKind::LabelAtEnd(l.name),
        });
    }

    let resolve = |r: &Ref| -> Result<u32, AsmError> {
        match r {
            Ref::Index(i) => Ok(*i),
            Ref::Name(p) => labels.get(&p.name).copied().ok_or_else(|| AsmError {
                line: p.line,
                column: p.column,
                kind: AsmErrorKind::UndefinedLabel(p.name.clone()),
            }),
        }
    };
    let mut program = Program {
        scratch_words: scratch.unwrap_or(0),
        code: Vec::with_capacity(code.len()),
        tables: Vec::with_capacity(tables.len()),
        patterns: coprocessor.patterns.into_iter().map(Arc::new).collect(),
        sets: coprocessor.sets.into_iter().map(Arc::new).collect(),
    };
    for p in code {
        let mut insn = p.insn;
        for (slot, r) in &p.targets {
            let t = resolve(r)?;
            match (&mut insn, slot) {
                (Insn::Jump { target }, _) => *target = t,
                (Insn::Branch { then_, .. }, 0) => *then_ = t,
                (Insn::Branch { else_, .. }, _) => *else_ = t,
                (Insn::Switch { default, .. }, _) => *default = t,
                _ => {}
            }
        }
        if let (Insn::Switch { table, .. }, Some(r)) = (&mut insn, &p.table) {
            *table = match r {
                Ref::Index(i) => *i,
                Ref::Name(n) => *table_names.get(&n.name).ok_or_else(|| AsmError {
                    line: n.line,
                    column: n.column,
                    kind: AsmErrorKind::UndefinedTable(n.name.clone()),
                })?,
            };
        }
        program.code.push(insn);
    }
    for entries in tables {
        let entries = entries
            .iter()
            .map(|(k, r)| Ok((*k, resolve(r)?)))
            .collect::<Result<Vec<_>, AsmError>>()?;
        program.tables.push(Table { entries });
    }
    Ok(program)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
.scratch 1
    ld.h r0, [12]
    jeq r0, 2048, L2, L5
L2:
    ld.b r1, [r0+23] ; indexed
    stm m0, r1
    switch r1, T0, L5
L5:
    ret 0
L6:
    ret r1
.table T0
    6 -> L6
    17 -> L6
";

    #[test]
    fn assembles_and_prints_back() {
        let p = assemble(TEXT).unwrap();
        assert_eq!(p.scratch_words, 1);
        assert_eq!(p.code.len(), 7);
        assert_eq!(
            p.code[1],
            Insn::Branch {
                cond: Cond::Eq,
                lhs: Reg(0),
                rhs: Operand::Imm(2048),
                then_: 2,
                else_: 5
            }
        );
        let printed = p.to_string();
        assert_eq!(assemble(&printed).unwrap(), p);
        assert_eq!(printed, TEXT.replace(" ; indexed", ""));
    }

    #[test]
    fn absolute_targets_and_hex() {
        let p = assemble("start: jmp @9\n mov r1, 0x10\n switch r1, #3, start\n").unwrap();
        assert_eq!(p.code[0], Insn::Jump { target: 9 });
        assert_eq!(
            p.code[1],
            Insn::Mov {
                dst: Reg(1),
                src: Operand::Imm(16)
            }
        );
        assert_eq!(
            p.code[2],
            Insn::Switch {
                key: Reg(1),
                table: 3,
                default: 0
            }
        );
        assert_eq!(assemble(&p.to_string()).unwrap(), p);
    }

    #[test]
    fn errors_have_positions() {
        let e = assemble("  ret 0\n  frob r1\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 3));
        assert_eq!(e.kind, AsmErrorKind::UnknownMnemonic("frob".into()));

        let e = assemble("  add r1, r2, x9\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 15));

        let e = assemble("  jmp nowhere\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 7));
        assert_eq!(e.kind, AsmErrorKind::UndefinedLabel("nowhere".into()));

        let e = assemble("a:\n ret 0\na: ret 1\n").unwrap_err();
        assert_eq!(e.kind, AsmErrorKind::DuplicateLabel("a".into()));

        let e = assemble(" ret 0\nend:\n").unwrap_err();
        assert_eq!(e.kind, AsmErrorKind::LabelAtEnd("end".into()));

        let e = assemble(" ret 0, 1\n").unwrap_err();
        assert_eq!(
            e.kind,
            AsmErrorKind::OperandCount {
                expected: 1,
                found: 2
            }
        );
    }
}
