//! The assembler: reads the `tcpdump -d` disassembly back, and the `bpf_asm` style with labels.
//!
//! ```text
//! (000) ldh      [12]                         ; tcpdump -d: absolute jump targets,
//! (001) jeq      #0x800           jt 2 jf 3    ; optional "(nnn)" instruction numbers
//!       ldh [12]                              ; bpf_asm style: labels as targets
//!       jeq #0x800, ipv4, drop                ; `jeq #k, Ltrue` falls through when false
//! ipv4: ret #262144
//! drop: ret #0
//! ```
//!
//! Both styles may be mixed. A numeric jump target is an absolute instruction number, as in
//! `tcpdump -d`; `ja` may go backwards (libpcap's `protochain` does), conditional jumps only
//! forward by at most 256. `bpf_asm`'s `jne`, `jlt` and `jle` become `jeq`, `jge` and `jgt` with
//! the targets swapped. `unimp 0xNN` (what `bpf_image` prints for opcodes it does not know)
//! stands for that raw opcode. Comments start with `;` (or `//`). Every error names its line and
//! column; no input makes the assembler panic.

use std::collections::HashMap;

use crate::cursor::Cursor;
use crate::disasm::{jmp_by_mnemonic, ANCILLARY_NAMES};
use crate::error::{ParseError, ParseErrorKind};
use crate::insn::{code, AluOp, Class, Insn, JmpOp, Op, Program, Size, Src};

const COMMENTS: [&str; 2] = [";", "//"];

/// A jump target before label resolution.
#[derive(Clone, Debug)]
enum Target {
    /// An absolute instruction number.
    Index(i64),
    Label(String),
    /// The next instruction.
    Next,
}

/// One parsed instruction; targets are resolved in a second pass.
struct Pending {
    insn: Insn,
    /// `(true target, false target)` for conditional jumps, `(target, _)` for `ja`.
    targets: Option<(Target, Target)>,
    line: usize,
    column: usize,
}

/// Assembles program text (see the module docs) into a program (not validated).
pub fn assemble(text: &str) -> Result<Program, ParseError> {
    let mut labels: HashMap<String, usize> = HashMap::new();
    let mut pending: Vec<Pending> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut cur = Cursor::new(line, i + 1);
        if cur.at_end(&COMMENTS) {
            continue;
        }
        // Labels: `name:` (possibly several) before the instruction.
        loop {
            let save = cur.pos();
            let col = cur.column();
            let word = cur.word();
            if !word.is_empty() && is_label(word) && cur.eat(':') {
                if labels.insert(word.to_string(), pending.len()).is_some() {
                    return Err(ParseError::new(
                        i + 1,
                        col,
                        ParseErrorKind::DuplicateLabel(word.to_string()),
                    ));
                }
            } else {
                cur.rewind(save);
                break;
            }
        }
        if cur.at_end(&COMMENTS) {
            continue;
        }
        // The `(nnn)` instruction number of tcpdump -d.
        if cur.peek() == Some('(') {
            let col = cur.column();
            cur.eat('(');
            let n = cur.decimal("the instruction number")?;
            cur.expect(')', "`)`")?;
            if n != pending.len() as u64 {
                return Err(ParseError::new(
                    i + 1,
                    col,
                    ParseErrorKind::BadOperand("instruction number does not match its position"),
                ));
            }
        }
        let column = cur.column();
        let (insn, targets) = instruction(&mut cur, pending.len())?;
        if !cur.at_end(&COMMENTS) {
            return Err(cur.error(ParseErrorKind::TrailingInput));
        }
        pending.push(Pending {
            insn,
            targets,
            line: i + 1,
            column,
        });
    }
    if pending.is_empty() {
        return Err(ParseError::new(1, 1, ParseErrorKind::Empty));
    }
    let mut insns = Vec::with_capacity(pending.len());
    for (n, p) in pending.iter().enumerate() {
        let mut insn = p.insn;
        if let Some((t, f)) = &p.targets {
            let err = |kind| ParseError::new(p.line, p.column, kind);
            let resolve = |t: &Target| -> Result<i64, ParseError> {
                match t {
                    Target::Index(i) => Ok(*i),
                    Target::Next => Ok(n as i64 + 1),
                    Target::Label(l) => labels
                        .get(l)
                        .map(|&i| i as i64)
                        .ok_or_else(|| err(ParseErrorKind::UndefinedLabel(l.clone()))),
                }
            };
            if insn.code & 0xf0 == code::JA && insn.class() == Class::Jmp {
                // `ja` offsets are 32-bit and wrap (bpf_image prints `n + 1 + k` modulo 2^32).
                let target = resolve(t)?;
                insn.k = (target - n as i64 - 1) as u32;
            } else {
                let offset = |t: &Target| -> Result<u8, ParseError> {
                    let d = resolve(t)? - n as i64 - 1;
                    if d < 0 {
                        return Err(err(ParseErrorKind::BadJumpTarget(
                            "conditional jumps only go forward",
                        )));
                    }
                    u8::try_from(d).map_err(|_| {
                        err(ParseErrorKind::BadJumpTarget(
                            "more than 256 instructions ahead",
                        ))
                    })
                };
                insn.jt = offset(t)?;
                insn.jf = offset(f)?;
            }
        }
        insns.push(insn);
    }
    Ok(Program(insns))
}

fn is_label(w: &str) -> bool {
    w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '.')
}

type Parsed = (Insn, Option<(Target, Target)>);

/// Parses one instruction at `cur` (instruction number `n`).
fn instruction(cur: &mut Cursor<'_>, n: usize) -> Result<Parsed, ParseError> {
    let start = cur.pos();
    let mnemonic = cur.word().to_ascii_lowercase();
    let stmt = |op: Op, k: u32| Ok((op.with_k(k), None));
    let alu = AluOp::ALL.into_iter().find(|a| a.mnemonic() == mnemonic);
    if let Some(a) = alu {
        return match src_operand(cur)? {
            (Src::K, k) => stmt(Op::Alu(a, Src::K), k),
            (Src::X, _) => stmt(Op::Alu(a, Src::X), 0),
        };
    }
    match mnemonic.as_str() {
        "ld" | "ldh" | "ldb" => {
            let size = match mnemonic.as_str() {
                "ld" => Size::Word,
                "ldh" => Size::Half,
                _ => Size::Byte,
            };
            load(cur, size)
        }
        "ldx" | "ldxb" => {
            if cur.eat_str("4") {
                let k = msh_operand(cur)?;
                return stmt(Op::LdxMsh, k);
            }
            if mnemonic == "ldxb" {
                return Err(cur.error(ParseErrorKind::Expected("`4*([k]&0xf)`")));
            }
            if cur.eat_str("#pktlen") || cur.eat_str("#len") || eat_keyword(cur, "len") {
                return stmt(Op::LdxLen, 0);
            }
            if cur.eat('#') {
                return stmt(Op::LdxImm, cur.unsigned("k", u32::MAX)?);
            }
            if cur.eat_str("M[") {
                return stmt(Op::LdxMem, mem_index(cur)?);
            }
            Err(cur.error(ParseErrorKind::Expected(
                "`#k`, `M[k]`, `len` or `4*([k]&0xf)`",
            )))
        }
        "st" | "stx" => {
            if !cur.eat_str("M[") {
                return Err(cur.error(ParseErrorKind::Expected("`M[k]`")));
            }
            let k = mem_index(cur)?;
            stmt(if mnemonic == "st" { Op::St } else { Op::Stx }, k)
        }
        "neg" => stmt(Op::Neg, 0),
        "tax" => stmt(Op::Tax, 0),
        "txa" => stmt(Op::Txa, 0),
        "ret" => {
            if cur.eat('#') {
                return stmt(Op::RetK, cur.unsigned("k", u32::MAX)?);
            }
            if cur.at_end(&COMMENTS) || eat_keyword(cur, "a") || cur.eat_str("%a") {
                return stmt(Op::RetA, 0);
            }
            Err(cur.error(ParseErrorKind::Expected("`#k` or `a`")))
        }
        "ja" | "jmp" => {
            let t = target(cur)?;
            Ok((Op::Ja.with_k(0), Some((t, Target::Next))))
        }
        "unimp" => {
            let code = cur.unsigned("code", u32::from(u16::MAX))? as u16;
            let insn = Insn::stmt(code, 0);
            if insn.class() == Class::Jmp && code & 0xf0 != code::JA {
                let (t, f) = jump_targets(cur, n)?;
                return Ok((insn, Some((t, f))));
            }
            Ok((insn, None))
        }
        m => {
            // Conditional jumps, with bpf_asm's negated forms.
            let (op, swapped) = match m {
                "jne" | "jneq" => (JmpOp::Jeq, true),
                "jlt" => (JmpOp::Jge, true),
                "jle" => (JmpOp::Jgt, true),
                _ => match jmp_by_mnemonic(m) {
                    Some(op) => (op, false),
                    None => {
                        return Err(cur.error_at(
                            start,
                            ParseErrorKind::UnknownMnemonic(
                                mnemonic.chars().take(32).collect::<String>(),
                            ),
                        ))
                    }
                },
            };
            let (src, k) = src_operand(cur)?;
            let (t, f) = jump_targets(cur, n)?;
            let (t, f) = if swapped { (f, t) } else { (t, f) };
            Ok((Insn::stmt(Op::Jmp(op, src).code(), k), Some((t, f))))
        }
    }
}

/// Consumes a keyword only if it is a whole word.
fn eat_keyword(cur: &mut Cursor<'_>, kw: &str) -> bool {
    cur.skip_blanks();
    let rest = cur.rest();
    let after = rest.get(kw.len()..).and_then(|r| r.chars().next());
    if rest
        .get(..kw.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(kw))
        && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        cur.eat_str(kw)
    } else {
        false
    }
}

/// `#k` or `x` (also `%x`).
fn src_operand(cur: &mut Cursor<'_>) -> Result<(Src, u32), ParseError> {
    if cur.eat('#') {
        return Ok((Src::K, cur.unsigned("k", u32::MAX)?));
    }
    if eat_keyword(cur, "x") || cur.eat_str("%x") {
        return Ok((Src::X, 0));
    }
    Err(cur.error(ParseErrorKind::Expected("`#k` or `x`")))
}

/// `k]` after `M[`.
fn mem_index(cur: &mut Cursor<'_>) -> Result<u32, ParseError> {
    let k = cur.unsigned("the scratch index", u32::MAX)?;
    cur.expect(']', "`]`")?;
    Ok(k)
}

/// `*([k]&0xf)` after the `4` of `4*([k]&0xf)`.
fn msh_operand(cur: &mut Cursor<'_>) -> Result<u32, ParseError> {
    cur.expect('*', "`*`")?;
    cur.expect('(', "`(`")?;
    cur.expect('[', "`[`")?;
    let k = cur.unsigned("k", u32::MAX)?;
    cur.expect(']', "`]`")?;
    cur.expect('&', "`&`")?;
    if !cur.eat_str("0xf") {
        return Err(cur.error(ParseErrorKind::Expected("`0xf`")));
    }
    cur.expect(')', "`)`")?;
    Ok(k)
}

fn load(cur: &mut Cursor<'_>, size: Size) -> Result<Parsed, ParseError> {
    let stmt = |op: Op, k: u32| Ok((op.with_k(k), None));
    if size == Size::Word {
        if cur.eat_str("#pktlen") || cur.eat_str("#len") || eat_keyword(cur, "len") {
            return stmt(Op::LdLen, 0);
        }
        if cur.eat('#') {
            return stmt(Op::LdImm, cur.unsigned("k", u32::MAX)?);
        }
        if cur.eat_str("M[") {
            return stmt(Op::LdMem, mem_index(cur)?);
        }
    }
    cur.expect('[', "`[`")?;
    cur.skip_blanks();
    let save_col = cur.pos();
    let word = cur.word();
    if word.eq_ignore_ascii_case("x") {
        cur.expect('+', "`+`")?;
        let k = cur.unsigned("k", u32::MAX)?;
        cur.expect(']', "`]`")?;
        return stmt(Op::LdInd(size), k);
    }
    if !word.is_empty() && !word.starts_with(|c: char| c.is_ascii_digit()) {
        let Some(i) = ANCILLARY_NAMES.iter().position(|&n| n == word) else {
            return Err(cur.error_at(
                save_col,
                ParseErrorKind::Expected("`x + k`, `k` or an ancillary name"),
            ));
        };
        cur.expect(']', "`]`")?;
        return stmt(Op::LdAbs(size), code::SKF_AD_OFF + 4 * i as u32);
    }
    // `word` consumed the digits of a plain number: re-read it with sign and radix.
    let k = reparse_number(cur, save_col)?;
    cur.expect(']', "`]`")?;
    stmt(Op::LdAbs(size), k)
}

/// Reads the number that starts at byte `start` of the line (the cursor may have moved past
/// part of it).
fn reparse_number(cur: &mut Cursor<'_>, start: usize) -> Result<u32, ParseError> {
    cur.rewind(start);
    cur.unsigned("k", u32::MAX)
}

/// `jt N jf M` (tcpdump -d) or `, T[, F]` (bpf_asm).
fn jump_targets(cur: &mut Cursor<'_>, _n: usize) -> Result<(Target, Target), ParseError> {
    if eat_keyword(cur, "jt") {
        let t = target(cur)?;
        if !eat_keyword(cur, "jf") {
            return Err(cur.error(ParseErrorKind::Expected("`jf`")));
        }
        let f = target(cur)?;
        return Ok((t, f));
    }
    cur.expect(',', "`,` or `jt`")?;
    let t = target(cur)?;
    let f = if cur.eat(',') {
        target(cur)?
    } else {
        Target::Next
    };
    Ok((t, f))
}

fn target(cur: &mut Cursor<'_>) -> Result<Target, ParseError> {
    cur.skip_blanks();
    match cur.peek() {
        Some(c) if c.is_ascii_digit() || c == '-' => Ok(Target::Index(cur.number("jump target")?)),
        _ => {
            let w = cur.word();
            if w.is_empty() || !is_label(w) {
                return Err(cur.error(ParseErrorKind::Expected("a label or instruction number")));
            }
            Ok(Target::Label(w.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disasm::disassemble;

    #[test]
    fn reads_tcpdump_d_back() {
        let prog = Program(vec![
            Insn::stmt(0x28, 12),
            Insn::jump(0x15, 0x800, 0, 8),
            Insn::stmt(0x30, 23),
            Insn::jump(0x15, 6, 0, 6),
            Insn::stmt(0x28, 20),
            Insn::jump(0x45, 0x1fff, 4, 0),
            Insn::stmt(0xb1, 14),
            Insn::stmt(0x48, 16),
            Insn::jump(0x15, 80, 0, 1),
            Insn::stmt(0x06, 262144),
            Insn::stmt(0x06, 0),
        ]);
        let text = disassemble(&prog);
        assert_eq!(assemble(&text).unwrap(), prog, "{text}");
    }

    #[test]
    fn bpf_asm_style_with_labels() {
        let text = "\
            ldh [12]\n\
            jeq #0x800, ip, drop ; IPv4?\n\
            ip: ldb [23]\n\
            jne #6, drop\n\
            ret #-1\n\
            drop: ret #0\n";
        let prog = assemble(text).unwrap();
        assert_eq!(
            prog.0,
            vec![
                Insn::stmt(0x28, 12),
                Insn::jump(0x15, 0x800, 0, 3),
                Insn::stmt(0x30, 23),
                Insn::jump(0x15, 6, 0, 1),
                Insn::stmt(0x06, u32::MAX),
                Insn::stmt(0x06, 0),
            ]
        );
    }

    #[test]
    fn backward_ja_round_trips() {
        let prog = Program(vec![
            Insn::stmt(0x00, 1),
            Insn::stmt(0x05, 0xffff_fffe),
            Insn::stmt(0x05, 0xffff_ffff),
            Insn::stmt(0x16, 0),
        ]);
        assert_eq!(assemble(&disassemble(&prog)).unwrap(), prog);
    }

    #[test]
    fn errors_have_line_and_column() {
        let e = assemble("ldh [12]\n  jeq #1, nowhere\nret #0\n").unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::UndefinedLabel("nowhere".into()));
        assert_eq!((e.line, e.column), (2, 3));
        let e = assemble("ldh [12]\n  frob #1\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 3));
        let e = assemble("ld [x + 99999999999]\n").unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::OutOfRange("k"));
        let e = assemble("a: ret #0\na: ret #1\n").unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::DuplicateLabel("a".into()));
        let e = assemble("(001) ret #0\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 1));
        assert!(assemble("jeq #1, 0, 1\nret #0\n").is_err());
    }

    #[test]
    fn never_panics_on_garbage() {
        let samples = [
            "",
            "(",
            "(0",
            "ld [",
            "ld [x",
            "ld [x +",
            "ldxb 4*([",
            "ret #",
            "jeq",
            "jeq #1 jt",
            "ldx 4*([1]&0xe)",
            "ä: ret #0",
            "ld [ä]",
            "ld M[",
            "jeq #1,",
            "((((",
            "ld [-]",
            "ja -5",
            "unimp 0x15 jt 1 jf",
            "ld [0x]",
            "\u{feff}ret #0",
        ];
        for s in samples {
            let _ = assemble(s);
        }
        // Every prefix of a real listing.
        let text = "(000) ldh      [12]\n(001) jeq      #0x800           jt 2\tjf 3\n(002) ret      #262144\n(003) ret      #0\n";
        for i in 0..text.len() {
            let _ = assemble(&text[..i]);
        }
    }
}
