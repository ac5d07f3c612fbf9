//! Reading MPF programs: the classic BPF assembler text of `sift_bpf::asm`, plus MPF's
//! instructions.
//!
//! ```text
//!         ldh [12]                  ; classic BPF, as sift_bpf::asm reads it
//!         jeq #0x800, ip, fail
//! ip:     ld [26]
//!         st M[0]
//!         ret_match_imm #1, #ALL    ; MPF: count, then length (#k or #ALL)
//!         key #0xc00c4501           ; one `key` slot per compared word
//! fail:   ret #0
//! ```
//!
//! The MPF mnemonics (case-insensitive) and their operands; `#` before a number is optional:
//!
//! | text | |
//! |---|---|
//! | `ret_match_imm #N, #R` | also `ret_match_imm #ALL, N` (figure 3's order: `ALL` is always the length) |
//! | `jmp_match_imm #N, Lt, Lf` | targets as in classic jumps (labels or instruction numbers; `jt Lt jf Lf` too) |
//! | `key #k` | N of them right after each match instruction |
//! | `register_data #N, #T` | `T` in milliseconds |
//! | `ret_match_data #N, #R` | `R` is `#k` or `#ALL` |
//! | `postpone #T` | `T` in milliseconds |
//! | `ret #ALL` | the whole packet |
//!
//! Numbers are C constants (decimal, `0x`, octal). `unimp` (the classic assembler's raw opcode
//! escape) is refused, because MPF's own opcodes would be indistinguishable from it.
//!
//! # How
//!
//! A pre-pass reads the MPF lines itself and hands the assembler a text where each MPF line keeps
//! its labels and becomes one `unimp` placeholder with Mach's opcode for that instruction, so that
//! labels, jump offsets (which count key slots) and every classic error come from the classic
//! assembler with their original line and column. The `jmp_match_imm` placeholder is padded to
//! the width of `jmp_match_imm #N`, so errors in its targets keep their columns too.

use std::fmt;

use sift_bpf::asm::assemble;

use super::program::{Insn, Length, Program, ProgramErrorKind, MAX_KEYS};
use crate::number::c_number;
use crate::span::{Span, SyntaxError};

/// A text that is not an MPF program: where, and why.
pub type ParseError = SyntaxError<ParseErrorKind>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// The classic assembler's error (unknown mnemonic, bad operand, undefined label, ...).
    Classic(sift_bpf::ParseErrorKind),
    /// An MPF operand was expected here.
    Expected(&'static str),
    /// A number that does not fit its operand (`what` names the operand).
    OutOfRange { what: &'static str },
    /// Text after a complete MPF instruction.
    TrailingInput,
    /// `unimp` is not accepted in MPF text.
    RawOpcode,
    /// A static check failed at this instruction.
    Program(ProgramErrorKind),
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseErrorKind::Classic(k) => write!(f, "{k}"),
            ParseErrorKind::Expected(what) => write!(f, "expected {what}"),
            ParseErrorKind::OutOfRange { what } => write!(f, "number out of range for {what}"),
            ParseErrorKind::TrailingInput => f.write_str("unexpected text after the instruction"),
            ParseErrorKind::RawOpcode => {
                f.write_str("`unimp` raw opcodes are not accepted in MPF programs")
            }
            ParseErrorKind::Program(k) => write!(f, "{k}"),
        }
    }
}

/// Mach's opcodes for the MPF instructions (`<device/bpf.h>`), used as the placeholders' raw
/// opcodes; none of them is a classic instruction. `ret #ALL` uses `BPF_RET|BPF_X`, which classic
/// BPF does not execute either.
mod placeholder {
    pub const RET_MATCH_IMM: u16 = 0x1e;
    pub const RET_MATCH_DATA: u16 = 0x26;
    pub const KEY: u16 = 0x17;
    pub const REGISTER_DATA: u16 = 0x1f;
    pub const POSTPONE: u16 = 0x27;
    pub const JMP_MATCH_IMM: u16 = 0x55;
    pub const RET_ALL: u16 = 0x0e;
}

/// Parses and checks an MPF program.
pub fn parse(text: &str) -> Result<Program, ParseError> {
    let mut classic_text = String::with_capacity(text.len());
    // Per instruction slot: the span of its text, and the MPF instruction if it is one.
    let mut slots: Vec<(Span, Option<Insn>)> = Vec::new();
    let mut offset = 0;
    for raw in text.split_inclusive('\n') {
        let line = raw.trim_end_matches('\n').trim_end_matches('\r');
        let out = scan_line(text, offset, line, &mut slots)?;
        classic_text.push_str(&out);
        classic_text.push('\n');
        offset += raw.len();
    }
    let assembled = assemble(&classic_text).map_err(|e| {
        let start = byte_offset(text, e.line, e.column);
        ParseError::new(
            text,
            ParseErrorKind::Classic(e.kind),
            Span::new(start, start + 1),
        )
    })?;
    let insns: Vec<Insn> = assembled
        .insns()
        .iter()
        .zip(&slots)
        .map(|(&c, (_, mpf))| match (mpf, c.code) {
            (Some(Insn::JmpMatchImm { count, .. }), placeholder::JMP_MATCH_IMM) => {
                Insn::JmpMatchImm {
                    count: *count,
                    jt: c.jt,
                    jf: c.jf,
                }
            }
            (Some(i), _) => *i,
            (None, _) => Insn::Classic(c),
        })
        .collect();
    if insns.len() != slots.len() {
        // The pre-pass and the assembler disagree about which lines hold instructions: a bug,
        // reported rather than risking a misplaced MPF instruction.
        return Err(ParseError::new(
            text,
            ParseErrorKind::Expected("one instruction per line"),
            Span::new(0, 0),
        ));
    }
    let program = Program::new(insns).map_err(|e| {
        let span = e
            .slot
            .and_then(|s| slots.get(s))
            .map_or(Span::new(0, 0), |(span, _)| *span);
        ParseError::new(text, ParseErrorKind::Program(e.kind), span)
    })?;
    Ok(program.with_spans(slots.iter().map(|(span, _)| *span).collect()))
}

/// The byte offset of a 1-based line and character column.
fn byte_offset(text: &str, line: usize, column: usize) -> usize {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    let rest = &text[line_start.min(text.len())..];
    line_start
        + rest
            .char_indices()
            .nth(column.saturating_sub(1))
            .map_or(rest.len(), |(i, _)| i)
}

/// A cursor over one line; positions are byte offsets in the line.
struct Line<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Line<'a> {
    fn skip_blanks(&mut self) {
        let rest = &self.text[self.pos..];
        self.pos += rest.len() - rest.trim_start_matches([' ', '\t', '\r']).len();
    }

    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn at_end(&mut self) -> bool {
        self.skip_blanks();
        let rest = self.rest();
        rest.is_empty() || rest.starts_with(';') || rest.starts_with("//")
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_blanks();
        if self.rest().starts_with(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    /// Letters, digits, `_` and `.` (the classic assembler's words).
    fn word(&mut self) -> &'a str {
        self.skip_blanks();
        let start = self.pos;
        let n = self
            .rest()
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(self.rest().len());
        self.pos += n;
        &self.text[start..self.pos]
    }
}

/// One operand: `#k`, `k`, or (when `all` is allowed) `#ALL`/`ALL`. Returns the value
/// (`None` for `ALL`) and the operand's span in the line.
fn operand(
    line: &mut Line<'_>,
    what: &'static str,
    all: bool,
) -> Result<(Option<u32>, Span), (Span, ParseErrorKind)> {
    line.skip_blanks();
    let start = line.pos;
    line.eat('#');
    let word = line.word();
    let span = Span::new(start, line.pos.max(start + 1));
    if all && word.eq_ignore_ascii_case("all") {
        return Ok((None, span));
    }
    if word.is_empty() {
        let expected = if all { "`#k` or `#ALL`" } else { "`#k`" };
        return Err((span, ParseErrorKind::Expected(expected)));
    }
    match c_number(word) {
        Some(v) => Ok((Some(v), span)),
        None if word.starts_with(|c: char| c.is_ascii_digit()) => {
            Err((span, ParseErrorKind::OutOfRange { what }))
        }
        None => Err((span, ParseErrorKind::Expected("a number"))),
    }
}

fn count(value: Option<u32>, span: Span) -> Result<u8, (Span, ParseErrorKind)> {
    match value {
        Some(n) if (1..=u32::from(MAX_KEYS)).contains(&n) => Ok(n as u8),
        Some(_) => Err((
            span,
            ParseErrorKind::OutOfRange {
                what: "a key count (1 to 16)",
            },
        )),
        None => Err((span, ParseErrorKind::Expected("a key count"))),
    }
}

fn comma(line: &mut Line<'_>) -> Result<(), (Span, ParseErrorKind)> {
    if line.eat(',') {
        Ok(())
    } else {
        Err((
            Span::new(line.pos, line.pos + 1),
            ParseErrorKind::Expected("`,`"),
        ))
    }
}

fn length(value: Option<u32>) -> Length {
    value.map_or(Length::All, Length::Bytes)
}

/// Reads one line: records its instruction slot (if any) and returns the line the classic
/// assembler gets.
fn scan_line(
    text: &str,
    line_offset: usize,
    line_text: &str,
    slots: &mut Vec<(Span, Option<Insn>)>,
) -> Result<String, ParseError> {
    let mut line = Line {
        text: line_text,
        pos: 0,
    };
    if line.at_end() {
        return Ok(line_text.to_string());
    }
    // Labels, as the classic assembler reads them: `name:` possibly several times.
    loop {
        let save = line.pos;
        let w = line.word();
        let is_label = w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '.');
        if is_label && line.eat(':') {
            continue;
        }
        line.pos = save;
        break;
    }
    if line.at_end() {
        return Ok(line_text.to_string());
    }
    // tcpdump -d's `(nnn)`: the assembler checks it.
    if line.rest().starts_with('(') {
        if let Some(close) = line.rest().find(')') {
            line.pos += close + 1;
            line.skip_blanks();
        }
    }
    let start = line.pos;
    let mnemonic = line.word().to_ascii_lowercase();
    // The instruction's text, without a trailing comment or blanks.
    let content = &line_text[start..];
    let content = content[..[content.find(';'), content.find("//")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(content.len())]
        .trim_end();
    let slot_span = Span::new(
        line_offset + start,
        line_offset + start + content.len().max(1),
    );
    let in_text = |s: Span| Span::new(line_offset + s.start, line_offset + s.end);
    let fail = |(s, kind): (Span, ParseErrorKind)| ParseError::new(text, kind, in_text(s));
    let mpf = match mnemonic.as_str() {
        "unimp" => {
            return Err(ParseError::new(
                text,
                ParseErrorKind::RawOpcode,
                in_text(Span::new(start, line.pos)),
            ))
        }
        "ret" => {
            let save = line.pos;
            line.eat('#');
            if line.word().eq_ignore_ascii_case("all") {
                Some((Insn::RetAll, placeholder::RET_ALL))
            } else {
                line.pos = save;
                None
            }
        }
        "key" => {
            let (v, span) = operand(&mut line, "a key", false).map_err(fail)?;
            let k = v
                .ok_or((span, ParseErrorKind::Expected("`#k`")))
                .map_err(fail)?;
            Some((Insn::Key(k), placeholder::KEY))
        }
        "ret_match_imm" | "ret_match_data" => {
            let (a, a_span) = operand(&mut line, "a key count", true).map_err(fail)?;
            comma(&mut line).map_err(fail)?;
            let (b, b_span) = operand(&mut line, "a length", true).map_err(fail)?;
            // `ALL` is always the length: figure 3 writes `ret_match_imm #ALL, 3`.
            let (n, len) = match a {
                None => (count(b, b_span).map_err(fail)?, Length::All),
                Some(_) => (count(a, a_span).map_err(fail)?, length(b)),
            };
            Some(if mnemonic == "ret_match_imm" {
                (
                    Insn::RetMatchImm { count: n, len },
                    placeholder::RET_MATCH_IMM,
                )
            } else {
                (
                    Insn::RetMatchData { count: n, len },
                    placeholder::RET_MATCH_DATA,
                )
            })
        }
        "register_data" => {
            let (a, a_span) = operand(&mut line, "a key count", false).map_err(fail)?;
            comma(&mut line).map_err(fail)?;
            let (t, _) = operand(&mut line, "a timeout", false).map_err(fail)?;
            let n = count(a, a_span).map_err(fail)?;
            Some((
                Insn::RegisterData {
                    count: n,
                    timeout_ms: t.unwrap_or(0),
                },
                placeholder::REGISTER_DATA,
            ))
        }
        "postpone" => {
            let (t, _) = operand(&mut line, "a timeout", false).map_err(fail)?;
            Some((
                Insn::Postpone {
                    timeout_ms: t.unwrap_or(0),
                },
                placeholder::POSTPONE,
            ))
        }
        "jmp_match_imm" => {
            let (a, a_span) = operand(&mut line, "a key count", false).map_err(fail)?;
            let n = count(a, a_span).map_err(fail)?;
            // The targets stay in the text for the assembler, at their original columns.
            let head_width = line_text[start..line.pos].chars().count();
            let stand_in = format!("unimp {:#x}", placeholder::JMP_MATCH_IMM);
            let pad = " ".repeat(head_width.saturating_sub(stand_in.len()));
            slots.push((
                slot_span,
                Some(Insn::JmpMatchImm {
                    count: n,
                    jt: 0,
                    jf: 0,
                }),
            ));
            return Ok(format!(
                "{}{stand_in}{pad}{}",
                &line_text[..start],
                &line_text[line.pos..]
            ));
        }
        _ => None,
    };
    let Some((insn, code)) = mpf else {
        slots.push((slot_span, None));
        return Ok(line_text.to_string());
    };
    if !line.at_end() {
        let here = Span::new(line.pos, line.pos + 1);
        return Err(fail((here, ParseErrorKind::TrailingInput)));
    }
    slots.push((slot_span, Some(insn)));
    Ok(format!("{}unimp {code:#x}", &line_text[..start]))
}

/// The placeholder opcodes are not classic instructions (so the assembler's output tells them
/// apart from everything a classic line can produce).
#[cfg(test)]
mod tests {
    use super::*;
    use sift_bpf::Insn as BpfInsn;

    #[test]
    fn placeholders_are_not_classic_opcodes() {
        use placeholder::*;
        for code in [
            RET_MATCH_IMM,
            RET_MATCH_DATA,
            KEY,
            REGISTER_DATA,
            POSTPONE,
            JMP_MATCH_IMM,
            RET_ALL,
        ] {
            assert_eq!(BpfInsn::stmt(code, 0).decode(), None, "{code:#x}");
        }
    }

    const FIGURE_3_TAIL: &str = "\
        ld [26]\n\
        st M[0]\n\
        ret_match_imm #ALL, 1   ; figure 3's operand order\n\
        key #0xc00c4501\n\
fail:   ret #0\n";

    #[test]
    fn reads_mpf_instructions() {
        let p = parse(FIGURE_3_TAIL).unwrap();
        assert_eq!(
            p.insns()[2],
            Insn::RetMatchImm {
                count: 1,
                len: Length::All
            }
        );
        assert_eq!(p.keys(), vec![0xc00c4501]);
        let p =
            parse("ld [0]\nst M[0]\njmp_match_imm #1, yes, no\nkey 5\nyes: ret #ALL\nno: ret #0\n")
                .unwrap();
        assert_eq!(
            p.insns()[2],
            Insn::JmpMatchImm {
                count: 1,
                jt: 1,
                jf: 2
            }
        );
        assert_eq!(p.insns()[4], Insn::RetAll);
    }

    fn error_at(text: &str) -> (usize, usize, String) {
        let e = parse(text).unwrap_err();
        (e.location.line, e.location.column, e.kind.to_string())
    }

    #[test]
    fn errors_point_at_line_and_column() {
        // A classic error on a classic line, after MPF lines.
        let (l, c, _) = error_at("ld [0]\nst M[0]\nret_match_imm #1, #4\nkey #1\n  frob #2\n");
        assert_eq!((l, c), (5, 3));
        // A bad count.
        let (l, c, m) = error_at("ld [0]\nst M[0]\nret_match_imm #17, #4\n");
        assert_eq!((l, c), (3, 15), "{m}");
        // An undefined label in a jmp_match_imm keeps the instruction's column.
        let (l, c, m) =
            error_at("ld [0]\nst M[0]\n   jmp_match_imm #1, nowhere, x\nkey 1\nx: ret #0\n");
        assert_eq!((l, c), (3, 4), "{m}");
        assert!(m.contains("nowhere"), "{m}");
        // A static check points at the instruction.
        let (l, c, m) = error_at("ld [0]\nret_match_imm #2, #4\nkey 1\nkey 2\n");
        assert_eq!((l, c), (2, 1));
        assert!(m.contains("M[0]"), "{m}");
        // Trailing text, and raw opcodes.
        let (l, c, _) = error_at("ld [0]\nst M[0]\nkey #1 2\n");
        assert_eq!((l, c), (3, 8));
        let (l, c, _) = error_at("lbl: unimp 0x1e\n");
        assert_eq!((l, c), (1, 6));
    }

    #[test]
    fn never_panics_on_prefixes() {
        let text = "l: ldh [12]\n st M[0]\n jeq #0x800, a, f\na: ld [26]\nst M[0]\njmp_match_imm #1, b, f\nkey #7\nb: register_data #1, #100\nret #ALL\nf: ret_match_data #1, #ALL\npostpone #5\n";
        for i in 0..=text.len() {
            if text.is_char_boundary(i) {
                let _ = parse(&text[..i]);
            }
        }
        assert!(parse(text).is_ok());
        for s in [
            "ret_match_imm",
            "ret_match_imm #",
            "key #ä",
            "key #0x",
            "postpone #99999999999",
            "ret #ALLx",
            "jmp_match_imm #1,",
        ] {
            let _ = parse(s);
        }
    }
}
