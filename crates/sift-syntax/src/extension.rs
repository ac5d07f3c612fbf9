//! sift's extensions to the language (on only when asked for, see [`crate::parse_with`]):
//! payload matching and sets. This module holds their tokens (quoted strings, `{...}` set
//! literals, `@file` references) and their grammar; `docs/extensions.md` is the user's view.
//!
//! ```text
//! payload contains [nocase] STRING      payload matches STRING (a regular expression)
//! payload[OFF] = VALUE                  payload[OFF:LEN] (= | == | !=) VALUE     VALUE: STRING | NUM
//! [qualifiers] (host|net|port|...) in SET     vlan in SET       SET: { item, ... } | @FILE
//! ```
//!
//! Strings take the escapes `\\`, `\"`, `\|`, `\n`, `\r`, `\t`, `\0` and `\xHH`, and Snort-style
//! hex between bars: `"GET|0d 0a|"`. Set items are kept as written, with their spans; the
//! lowering stage reads them according to the qualifiers (addresses, prefixes, port names,
//! ranges), as it reads the lines of a set file.

use crate::ast::{SetItem, Span};
use crate::error::{ParseError, ParseErrorKind};
use crate::lexer::Tok;

/// Words that are keywords in the extended language only.
pub(crate) const PAYLOAD: &str = "payload";
pub(crate) const CONTAINS: &str = "contains";
pub(crate) const MATCHES: &str = "matches";
pub(crate) const NOCASE: &str = "nocase";
pub(crate) const IN: &str = "in";

/// Lexes an extension token starting at `i`, if one starts there.
pub(crate) fn lex(text: &str, i: usize) -> Option<Result<(Tok, usize), ParseError>> {
    match text.as_bytes()[i] {
        b'"' => Some(string(text, i)),
        b'{' => Some(set_literal(text, i)),
        b'@' => Some(file_ref(text, i)),
        _ => None,
    }
}

fn error(kind: ParseErrorKind, start: usize, end: usize) -> ParseError {
    ParseError::new(kind, Span::new(start, end))
}

/// A quoted string with escapes and `|hex|` runs.
fn string(text: &str, open: usize) -> Result<(Tok, usize), ParseError> {
    let s = text.as_bytes();
    let bad = |why: &str, start: usize, end: usize| {
        error(ParseErrorKind::BadString(why.to_string()), start, end)
    };
    let mut out = Vec::new();
    let mut i = open + 1;
    let mut hex_from: Option<usize> = None;
    loop {
        let Some(&c) = s.get(i) else {
            return Err(bad("unterminated string", open, s.len()));
        };
        if let Some(from) = hex_from {
            match c {
                b'|' => {
                    hex_from = None;
                    i += 1;
                }
                b' ' | b'\t' => i += 1,
                _ => {
                    let pair = s
                        .get(i..i + 2)
                        .filter(|p| p.iter().all(u8::is_ascii_hexdigit));
                    let Some(pair) = pair else {
                        let end = (i + 1).min(s.len());
                        if c == b'"' {
                            return Err(bad("unterminated `|hex|` run", from, end));
                        }
                        return Err(bad("expected two hex digits or `|`", i, end));
                    };
                    out.push(hex_byte(pair));
                    i += 2;
                }
            }
            continue;
        }
        match c {
            b'"' => return Ok((Tok::Str(out), i + 1)),
            b'|' => {
                hex_from = Some(i);
                i += 1;
            }
            b'\\' => {
                let (byte, len) = match s.get(i + 1) {
                    Some(b'\\') => (b'\\', 2),
                    Some(b'"') => (b'"', 2),
                    Some(b'|') => (b'|', 2),
                    Some(b'n') => (b'\n', 2),
                    Some(b'r') => (b'\r', 2),
                    Some(b't') => (b'\t', 2),
                    Some(b'0') => (0, 2),
                    Some(b'x') => match s.get(i + 2..i + 4) {
                        Some(p) if p.iter().all(u8::is_ascii_hexdigit) => (hex_byte(p), 4),
                        _ => {
                            return Err(bad("`\\x` needs two hex digits", i, (i + 4).min(s.len())))
                        }
                    },
                    _ => return Err(bad("unknown escape", i, (i + 2).min(s.len()))),
                };
                out.push(byte);
                i += len;
            }
            _ => {
                // Copy a whole UTF-8 character: strings may hold any text.
                let ch = text[i..].chars().next().map_or(1, char::len_utf8);
                out.extend_from_slice(&s[i..i + ch]);
                i += ch;
            }
        }
    }
}

fn hex_byte(pair: &[u8]) -> u8 {
    let digit = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
    digit(pair[0]) << 4 | digit(pair[1])
}

/// `{ item, item, ... }`: the items as written, trimmed, with their spans.
fn set_literal(text: &str, open: usize) -> Result<(Tok, usize), ParseError> {
    let Some(len) = text[open..].find('}') else {
        return Err(error(
            ParseErrorKind::BadSet("unterminated set: missing `}`".into()),
            open,
            open + 1,
        ));
    };
    let close = open + len;
    let mut items = Vec::new();
    let mut from = open + 1;
    for piece in text[open + 1..close].split(',') {
        let lead = piece.len() - piece.trim_start().len();
        let item = piece.trim();
        let start = from + lead;
        if item.is_empty() {
            let what = if close == open + 1 || text[open + 1..close].trim().is_empty() {
                "empty set"
            } else {
                "empty set item"
            };
            return Err(error(
                ParseErrorKind::BadSet(what.into()),
                start,
                (start + 1).min(close + 1),
            ));
        }
        items.push(SetItem {
            text: item.to_string(),
            span: Span::new(start, start + item.len()),
        });
        from += piece.len() + 1;
    }
    Ok((Tok::SetLit(items), close + 1))
}

/// `@path`: the path runs to the next blank or parenthesis.
fn file_ref(text: &str, at: usize) -> Result<(Tok, usize), ParseError> {
    let rest = &text[at + 1..];
    let len = rest
        .find(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .unwrap_or(rest.len());
    if len == 0 {
        return Err(error(
            ParseErrorKind::BadSet("`@` must be followed by a file name".into()),
            at,
            at + 1,
        ));
    }
    Ok((Tok::FileRef(rest[..len].to_string()), at + 1 + len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(s: &str) -> Tok {
        lex(s, 0).unwrap().unwrap().0
    }

    fn err(s: &str) -> ParseError {
        lex(s, 0).unwrap().unwrap_err()
    }

    #[test]
    fn strings() {
        assert_eq!(tok(r#""GET /""#), Tok::Str(b"GET /".to_vec()));
        assert_eq!(
            tok(r#""a|0d 0A|b\x41\"\|\\""#),
            Tok::Str(b"a\r\nbA\"|\\".to_vec())
        );
        assert_eq!(tok("\"é\""), Tok::Str("é".as_bytes().to_vec()));
        assert_eq!(err(r#""abc"#).span, Span::new(0, 4));
        assert_eq!(err(r#""a|0g|""#).span, Span::new(3, 4));
        assert_eq!(err(r#""a|0d""#).span, Span::new(2, 6));
        assert_eq!(err(r#""\q""#).span, Span::new(1, 3));
    }

    #[test]
    fn sets_and_files() {
        let Tok::SetLit(items) = tok("{ 10.0.0.1 ,8000-8100}") else {
            panic!()
        };
        let texts: Vec<(&str, Span)> = items.iter().map(|i| (&*i.text, i.span)).collect();
        assert_eq!(
            texts,
            [
                ("10.0.0.1", Span::new(2, 10)),
                ("8000-8100", Span::new(12, 21))
            ]
        );
        assert_eq!(err("{}").kind, ParseErrorKind::BadSet("empty set".into()));
        assert_eq!(err("{1,,2}").span, Span::new(3, 4));
        assert_eq!(err("{1, 2").span, Span::new(0, 1));
        assert_eq!(tok("@list.txt)"), Tok::FileRef("list.txt".into()));
        assert_eq!(err("@ x").span, Span::new(0, 1));
    }

    fn parsed(text: &str) -> String {
        match crate::parse_with(text, true) {
            Ok(e) => e.expect("not empty").to_string(),
            Err(e) => format!("error at {}: {e}", e.span.start),
        }
    }

    #[test]
    fn grammar() {
        assert_eq!(
            parsed(r#"tcp and payload contains nocase "GET""#),
            r#"(tcp and payload contains nocase "GET")"#
        );
        assert_eq!(
            parsed("payload[2:2] != 0x0301 or payload[0] = 22"),
            r#"(payload[2:2] != "\x03\x01" or payload[0:1] = "\x16")"#
        );
        assert_eq!(
            parsed("src host in {10.0.0.1, ::1} and vlan in @ids.txt"),
            "([src host]in {10.0.0.1, ::1} and vlan in @ids.txt)"
        );
        assert_eq!(parsed("tcp dst port in {80}"), "[tcp dst port]in {80}");
        assert_eq!(
            parsed(r#"payload matches "^GET" "#),
            r#"payload matches "^GET""#
        );
        assert_eq!(parsed("payload"), "error at 7: syntax error: unexpected end of expression, expected `contains`, `matches` or `[`");
        assert_eq!(
            parsed("payload[0:5] = 7"),
            "error at 10: a number compares 1 to 4 bytes (use a string for more)"
        );
        assert_eq!(
            parsed("payload[0:2] = 70000"),
            "error at 15: 70000 does not fit in 2 bytes"
        );
        assert_eq!(parsed("host in 10.0.0.1"), "error at 8: syntax error: unexpected IPv4 address `10.0.0.1`, expected a set `{...}` or a set file `@path`");
    }

    #[test]
    fn off_by_default() {
        assert!(crate::parse(r#"payload contains "x""#).is_err());
        // Without extensions `in` and `payload` are host names, as in libpcap.
        assert_eq!(
            crate::parse("host in").unwrap().unwrap().to_string(),
            "[host]in"
        );
        assert_eq!(
            crate::parse_with("host in", true).unwrap_err().span.start,
            7
        );
    }
}
