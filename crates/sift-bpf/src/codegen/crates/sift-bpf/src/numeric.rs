//! The numeric program formats: `tcpdump -ddd` (a count line, then `code jt jf k` in decimal),
//! `tcpdump -dd` (a C array of `{ code, jt, jf, k },`) and the binary `struct sock_filter` array
//! (8 bytes per instruction: `code` u16, `jt` u8, `jf` u8, `k` u32, in the byte order of the
//! machine that wrote it).
//!
//! The `-ddd` reader also accepts the comma-separated single-line variant that `bpf_asm -c`-less
//! tools, iptables' `xt_bpf` and `tc`'s `bytecode` use (`4,40 0 0 12,21 0 1 2048,6 0 0 1,6 0 0
//! 0`).

use std::fmt::Write as _;

use crate::cursor::Cursor;
use crate::error::{ParseError, ParseErrorKind};
use crate::insn::{Insn, Program};

/// Byte order of a binary `struct sock_filter` array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteOrder {
    Little,
    Big,
}

/// Formats a program like `tcpdump -ddd`.
pub fn to_ddd(prog: &Program) -> String {
    let mut out = format!("{}\n", prog.len());
    for i in prog.insns() {
        let _ = writeln!(out, "{} {} {} {}", i.code, i.jt, i.jf, i.k);
    }
    out
}

/// Formats a program like `tcpdump -dd`.
pub fn to_dd(prog: &Program) -> String {
    let mut out = String::new();
    for i in prog.insns() {
        let _ = writeln!(
            out,
            "{{ 0x{:x}, {}, {}, 0x{:08x} }},",
            i.code, i.jt, i.jf, i.k
        );
    }
    out
}

/// One `code jt jf k` group of the `-ddd` format.
fn ddd_insn(cur: &mut Cursor<'_>) -> Result<Insn, ParseError> {
    let code = cur.unsigned("code", u32::from(u16::MAX))? as u16;
    let jt = cur.unsigned("jt", u32::from(u8::MAX))? as u8;
    let jf = cur.unsigned("jf", u32::from(u8::MAX))? as u8;
    let k = cur.number("k")?;
    let k = u32::try_from(k).map_err(|_| cur.error(ParseErrorKind::OutOfRange("k")))?;
    Ok(Insn { code, jt, jf, k })
}

/// Reads `tcpdump -ddd` output (or its comma-separated one-line form).
pub fn parse_ddd(text: &str) -> Result<Program, ParseError> {
    let mut count: Option<(usize, usize, usize)> = None;
    let mut insns = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut cur = Cursor::new(line, i + 1);
        loop {
            if cur.at_end(&["#"]) {
                break;
            }
            if count.is_none() {
                let n = cur.unsigned("the instruction count", u32::MAX)?;
                count = Some((n as usize, i + 1, 1));
            } else {
                insns.push(ddd_insn(&mut cur)?);
            }
            if cur.at_end(&["#"]) {
                break;
            }
            cur.expect(',', "`,` or the end of the line")?;
        }
    }
    let Some((declared, line, column)) = count else {
        return Err(ParseError::new(1, 1, ParseErrorKind::Empty));
    };
    if declared != insns.len() {
        return Err(ParseError::new(
            line,
            column,
            ParseErrorKind::CountMismatch {
                declared,
                found: insns.len(),
            },
        ));
    }
    Ok(Program(insns))
}

/// Reads `tcpdump -dd` output: one `{ code, jt, jf, k },` per line (the trailing comma is
/// optional; blank lines and `//` or `#` comment lines are skipped; numbers are C literals).
pub fn parse_dd(text: &str) -> Result<Program, ParseError> {
    let mut insns = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut cur = Cursor::new(line, i + 1);
        if cur.at_end(&["//", "#"]) {
            continue;
        }
        cur.expect('{', "`{`")?;
        let code = cur.unsigned("code", u32::from(u16::MAX))? as u16;
        cur.expect(',', "`,`")?;
        let jt = cur.unsigned("jt", u32::from(u8::MAX))? as u8;
        cur.expect(',', "`,`")?;
        let jf = cur.unsigned("jf", u32::from(u8::MAX))? as u8;
        cur.expect(',', "`,`")?;
        let k = cur.unsigned("k", u32::MAX)?;
        cur.expect('}', "`}`")?;
        cur.eat(',');
        if !cur.at_end(&["//"]) {
            return Err(cur.error(ParseErrorKind::TrailingInput));
        }
        insns.push(Insn { code, jt, jf, k });
    }
    if insns.is_empty() {
        return Err(ParseError::new(1, 1, ParseErrorKind::Empty));
    }
    Ok(Program(insns))
}

/// Reads a binary `struct sock_filter` array. Errors carry the byte offset in `column` (and
/// line 0).
pub fn from_bytes(bytes: &[u8], order: ByteOrder) -> Result<Program, ParseError> {
    if !bytes.len().is_multiple_of(8) {
        return Err(ParseError::new(
            0,
            bytes.len() - bytes.len() % 8,
            ParseErrorKind::TruncatedBinary { len: bytes.len() },
        ));
    }
    let insns = bytes
        .chunks_exact(8)
        .map(|c| {
            let (code, k) = match order {
                ByteOrder::Little => (
                    u16::from_le_bytes([c[0], c[1]]),
                    u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
                ),
                ByteOrder::Big => (
                    u16::from_be_bytes([c[0], c[1]]),
                    u32::from_be_bytes([c[4], c[5], c[6], c[7]]),
                ),
            };
            Insn {
                code,
                jt: c[2],
                jf: c[3],
                k,
            }
        })
        .collect();
    Ok(Program(insns))
}

/// Writes a binary `struct sock_filter` array.
pub fn to_bytes(prog: &Program, order: ByteOrder) -> Vec<u8> {
    let mut out = Vec::with_capacity(prog.len() * 8);
    for i in prog.insns() {
        match order {
            ByteOrder::Little => out.extend_from_slice(&i.code.to_le_bytes()),
            ByteOrder::Big => out.extend_from_slice(&i.code.to_be_bytes()),
        }
        out.extend_from_slice(&[i.jt, i.jf]);
        match order {
            ByteOrder::Little => out.extend_from_slice(&i.k.to_le_bytes()),
            ByteOrder::Big => out.extend_from_slice(&i.k.to_be_bytes()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip_filter() -> Program {
        Program(vec![
            Insn::stmt(0x28, 12),
            Insn::jump(0x15, 0x800, 0, 1),
            Insn::stmt(0x06, 262144),
            Insn::stmt(0x06, 0),
        ])
    }

    #[test]
    fn ddd_round_trip() {
        let text = to_ddd(&ip_filter());
        assert_eq!(text, "4\n40 0 0 12\n21 0 1 2048\n6 0 0 262144\n6 0 0 0\n");
        assert_eq!(parse_ddd(&text).unwrap(), ip_filter());
        let one_line = "4,40 0 0 12,21 0 1 2048,6 0 0 262144,6 0 0 0\n";
        assert_eq!(parse_ddd(one_line).unwrap(), ip_filter());
    }

    #[test]
    fn dd_round_trip() {
        let text = to_dd(&ip_filter());
        assert!(text.starts_with("{ 0x28, 0, 0, 0x0000000c },\n"), "{text}");
        assert_eq!(parse_dd(&text).unwrap(), ip_filter());
    }

    #[test]
    fn binary_round_trip() {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let bytes = to_bytes(&ip_filter(), order);
            assert_eq!(bytes.len(), 32);
            assert_eq!(from_bytes(&bytes, order).unwrap(), ip_filter());
        }
        let e = from_bytes(&[0; 12], ByteOrder::Little).unwrap_err();
        assert_eq!((e.line, e.column), (0, 8));
    }

    #[test]
    fn errors_have_positions() {
        let e = parse_ddd("2\n40 0 0 12\n").unwrap_err();
        assert_eq!(
            e.kind,
            ParseErrorKind::CountMismatch {
                declared: 2,
                found: 1
            }
        );
        let e = parse_ddd("1\n40 0 256 12\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 6));
        assert_eq!(e.kind, ParseErrorKind::OutOfRange("jf"));
        let e = parse_dd("{ 0x28, 0, 0 0xc },").unwrap_err();
        assert_eq!((e.line, e.column), (1, 14));
        let e = parse_ddd("1\n6 0 0 -1\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(parse_ddd("").unwrap_err().kind, ParseErrorKind::Empty);
        assert!(parse_ddd("1\n6 0 0 99999999999999999999999\n").is_err());
    }
}
