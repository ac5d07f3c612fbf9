//! Reading CSPF programs in the paper's C notation.
//!
//! # Text
//!
//! The text is what a C programmer wrote in the paper (figures 11 and 12): the initializer of a
//! `struct enfilter`, optionally with its declaration and the trailing semicolon,
//!
//! ```text
//! struct enfilter f = {
//!     10, 12,                              /* priority and length */
//!     PUSHWORD+1, PUSHLIT | EQ, 2,         /* packet type == PUP */
//!     ...
//! };
//! ```
//!
//! or, without braces, a bare comma-separated list of words (priority 0, length implied). Inside
//! braces the first two items are the priority (0..=255) and the length, which must equal the
//! number of words that follow. Each item is a C constant expression over
//!
//! * numbers in C syntax (decimal, `0x` hexadecimal, `0` octal, `u`/`l` suffixes ignored);
//! * the names of figure 9, with or without the headers' `ENF_` prefix (`PUSHWORD`, `PUSHLIT`,
//!   `EQ`, `ENF_CAND`, ...), standing for their encoded values;
//! * `|`, `^`, `&`, `<<`, `>>`, `+`, `-`, `*`, `/`, `%`, `~`, parentheses, with C's precedence;
//! * `htons(x)` and `ntohs(x)`, which are the identity: literals are compared with packet words
//!   read in network byte order (see the module docs of [`crate::cspf`]).
//!
//! Comments are C's (`/* */` and `//`). Every item must be a 16-bit value.

use std::fmt;

use super::program::{
    Limits, Operator, Program, ProgramErrorKind, ENF_NOPUSH, ENF_PUSH00FF, ENF_PUSHFF00,
    ENF_PUSHFFFF, ENF_PUSHLIT, ENF_PUSHONE, ENF_PUSHWORD, ENF_PUSHZERO,
};
use crate::number::c_number;
use crate::span::{Span, SyntaxError};

/// A text parse error (lexical, syntactic, or a failed static check of the program), with its
/// position.
pub type ParseError = SyntaxError<ParseErrorKind>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseErrorKind {
    UnexpectedChar(char),
    UnterminatedComment,
    BadNumber(String),
    /// Expected one thing, found another (`found` is the token's text, or "end of input").
    Expected {
        expected: &'static str,
        found: String,
    },
    UnknownName(String),
    /// A value that does not fit where it is used.
    OutOfRange {
        value: i64,
        what: &'static str,
    },
    /// Arithmetic in a constant expression overflowed, or divided by zero.
    BadArithmetic,
    /// The initializer's length field disagrees with the number of words.
    LengthMismatch {
        declared: i64,
        actual: usize,
    },
    /// An initializer without its priority and length.
    MissingHeader,
    /// A static check of the program failed at the word this error points to.
    Program(ProgramErrorKind),
    TooDeep,
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseErrorKind::UnexpectedChar(c) => write!(f, "unexpected character {c:?}"),
            ParseErrorKind::UnterminatedComment => write!(f, "unterminated comment"),
            ParseErrorKind::BadNumber(s) => write!(f, "bad number {s:?}"),
            ParseErrorKind::Expected { expected, found } => {
                write!(f, "expected {expected}, found {found}")
            }
            ParseErrorKind::UnknownName(n) => write!(f, "unknown name {n:?}"),
            ParseErrorKind::OutOfRange { value, what } => {
                write!(f, "{value} does not fit {what}")
            }
            ParseErrorKind::BadArithmetic => {
                write!(f, "constant expression overflows or divides by zero")
            }
            ParseErrorKind::LengthMismatch { declared, actual } => write!(
                f,
                "the length field says {declared} words but {actual} words follow"
            ),
            ParseErrorKind::MissingHeader => {
                write!(
                    f,
                    "a struct enfilter initializer starts with priority and length"
                )
            }
            ParseErrorKind::Program(k) => write!(f, "{k}"),
            ParseErrorKind::TooDeep => write!(f, "expression nested too deeply"),
        }
    }
}

/// Parses a program with the default [`Limits`].
pub fn parse(text: &str) -> Result<Program, ParseError> {
    parse_with(text, &Limits::default())
}

/// Parses a program and runs the static checks with `limits`; a failed check points at the
/// offending word in the text.
pub fn parse_with(text: &str, limits: &Limits) -> Result<Program, ParseError> {
    let tokens = lex(text)?;
    let mut p = Parser {
        text,
        tokens,
        pos: 0,
    };
    p.source(limits)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok<'a> {
    Ident(&'a str),
    Num(i64),
    Punct(&'static str),
    Eof,
}

#[derive(Clone, Copy, Debug)]
struct Token<'a> {
    tok: Tok<'a>,
    span: Span,
}

const PUNCTS: [&str; 17] = [
    "<<", ">>", "{", "}", ",", ";", "=", "|", "^", "&", "+", "-", "*", "/", "%", "(", ")",
];
const TILDE: &str = "~";

fn lex(text: &str) -> Result<Vec<Token<'_>>, ParseError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if text[i..].starts_with("/*") {
            match text[i + 2..].find("*/") {
                Some(end) => i += end + 4,
                None => {
                    let span = Span::new(i, i + 2);
                    return Err(ParseError::new(
                        text,
                        ParseErrorKind::UnterminatedComment,
                        span,
                    ));
                }
            }
        } else if text[i..].starts_with("//") {
            i = text[i..].find('\n').map_or(bytes.len(), |n| i + n);
        } else if c.is_ascii_alphanumeric() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let span = Span::new(start, i);
            let s = &text[start..i];
            let tok = if c.is_ascii_digit() {
                match c_number(s) {
                    Some(n) => Tok::Num(i64::from(n)),
                    None => {
                        return Err(ParseError::new(
                            text,
                            ParseErrorKind::BadNumber(s.into()),
                            span,
                        ));
                    }
                }
            } else {
                Tok::Ident(s)
            };
            out.push(Token { tok, span });
        } else if let Some(p) = PUNCTS
            .iter()
            .chain([&TILDE])
            .find(|p| text[i..].starts_with(**p))
        {
            out.push(Token {
                tok: Tok::Punct(p),
                span: Span::new(i, i + p.len()),
            });
            i += p.len();
        } else {
            let ch = text[i..].chars().next().unwrap_or('?');
            let span = Span::new(i, i + ch.len_utf8());
            return Err(ParseError::new(
                text,
                ParseErrorKind::UnexpectedChar(ch),
                span,
            ));
        }
    }
    out.push(Token {
        tok: Tok::Eof,
        span: Span::new(text.len(), text.len()),
    });
    Ok(out)
}

/// The value of a figure 9 name (with or without `ENF_`).
fn name_value(name: &str) -> Option<u16> {
    let bare = name.strip_prefix("ENF_").unwrap_or(name);
    let action = match bare {
        "NOPUSH" => Some(ENF_NOPUSH),
        "PUSHLIT" => Some(ENF_PUSHLIT),
        "PUSHZERO" => Some(ENF_PUSHZERO),
        "PUSHONE" => Some(ENF_PUSHONE),
        "PUSHFFFF" => Some(ENF_PUSHFFFF),
        "PUSHFF00" => Some(ENF_PUSHFF00),
        "PUSH00FF" => Some(ENF_PUSH00FF),
        "PUSHWORD" => Some(ENF_PUSHWORD),
        _ => None,
    };
    action.or_else(|| {
        Operator::ALL
            .iter()
            .find(|o| o.name() == bare)
            .map(|o| o.code())
    })
}

struct Parser<'a> {
    text: &'a str,
    tokens: Vec<Token<'a>>,
    pos: usize,
}

const MAX_DEPTH: usize = 64;

impl<'a> Parser<'a> {
    fn peek(&self) -> Token<'a> {
        self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn bump(&mut self) -> Token<'a> {
        let t = self.peek();
        if t.tok != Tok::Eof {
            self.pos += 1;
        }
        t
    }

    fn err<T>(&self, kind: ParseErrorKind, span: Span) -> Result<T, ParseError> {
        Err(ParseError::new(self.text, kind, span))
    }

    fn expected<T>(&self, expected: &'static str) -> Result<T, ParseError> {
        let t = self.peek();
        let found = match t.tok {
            Tok::Eof => "end of input".to_string(),
            _ => format!("{:?}", &self.text[t.span.start..t.span.end]),
        };
        self.err(ParseErrorKind::Expected { expected, found }, t.span)
    }

    fn eat(&mut self, p: &'static str) -> bool {
        if self.peek().tok == Tok::Punct(p) || self.peek().tok == Tok::Ident(p) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, p: &'static str) -> Result<(), ParseError> {
        if self.eat(p) {
            Ok(())
        } else {
            self.expected(p)
        }
    }

    fn source(&mut self, limits: &Limits) -> Result<Program, ParseError> {
        let mut braced = false;
        if self.eat("struct") {
            self.expect("enfilter")?;
            if !matches!(self.bump().tok, Tok::Ident(_)) {
                self.pos -= 1;
                return self.expected("a variable name");
            }
            self.expect("=")?;
            self.expect("{")?;
            braced = true;
        } else if self.eat("{") {
            braced = true;
        }
        let mut items = Vec::new();
        let close = if braced { Tok::Punct("}") } else { Tok::Eof };
        while self.peek().tok != close {
            let start = self.peek().span;
            let value = self.expr(0)?;
            items.push((value, start.to(self.tokens[self.pos - 1].span)));
            if !self.eat(",") {
                break;
            }
        }
        if braced {
            self.expect("}")?;
            self.eat(";");
        }
        if self.peek().tok != Tok::Eof {
            return self.expected(if braced { "end of input" } else { "','" });
        }
        let (priority, words) = if braced {
            if items.len() < 2 {
                let span = items.first().map_or(self.peek().span, |i| i.1);
                return self.err(ParseErrorKind::MissingHeader, span);
            }
            let (prio, prio_span) = items[0];
            let (len, len_span) = items[1];
            let Ok(priority) = u8::try_from(prio) else {
                let kind = ParseErrorKind::OutOfRange {
                    value: prio,
                    what: "a priority (0..=255)",
                };
                return self.err(kind, prio_span);
            };
            if len != (items.len() - 2) as i64 {
                let kind = ParseErrorKind::LengthMismatch {
                    declared: len,
                    actual: items.len() - 2,
                };
                return self.err(kind, len_span);
            }
            (priority, &items[2..])
        } else {
            (0, &items[..])
        };
        let mut values = Vec::with_capacity(words.len());
        for &(v, span) in words {
            match u16::try_from(v) {
                Ok(w) => values.push(w),
                Err(_) => {
                    let what = "a 16-bit word";
                    return self.err(ParseErrorKind::OutOfRange { value: v, what }, span);
                }
            }
        }
        Program::with_limits(priority, values, limits).map_err(|e| {
            let span = words.get(e.word).map_or(self.peek().span, |w| w.1);
            ParseError::new(self.text, ParseErrorKind::Program(e.kind), span)
        })
    }

    /// A C constant expression, by precedence climbing over the binary operators.
    fn expr(&mut self, depth: usize) -> Result<i64, ParseError> {
        self.binary(0, depth)
    }

    fn binary(&mut self, level: usize, depth: usize) -> Result<i64, ParseError> {
        const LEVELS: [&[&str]; 6] = [
            &["|"],
            &["^"],
            &["&"],
            &["<<", ">>"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        if level == LEVELS.len() {
            return self.unary(depth);
        }
        let start = self.peek().span;
        let mut lhs = self.binary(level + 1, depth)?;
        loop {
            let Tok::Punct(p) = self.peek().tok else {
                return Ok(lhs);
            };
            if !LEVELS[level].contains(&p) {
                return Ok(lhs);
            }
            self.bump();
            let rhs = self.binary(level + 1, depth)?;
            let span = start.to(self.tokens[self.pos - 1].span);
            lhs = c_arith(p, lhs, rhs)
                .ok_or_else(|| ParseError::new(self.text, ParseErrorKind::BadArithmetic, span))?;
        }
    }

    fn unary(&mut self, depth: usize) -> Result<i64, ParseError> {
        if depth > MAX_DEPTH {
            return self.err(ParseErrorKind::TooDeep, self.peek().span);
        }
        let t = self.bump();
        match t.tok {
            Tok::Num(n) => Ok(n),
            Tok::Punct("-") => Ok(-self.unary(depth + 1)?),
            // C's `~` on an int; only its low 16 bits can end up in a word.
            Tok::Punct("~") => Ok(!self.unary(depth + 1)? & 0xFFFF),
            Tok::Punct("(") => {
                let v = self.expr(depth + 1)?;
                self.expect(")")?;
                Ok(v)
            }
            Tok::Ident("htons" | "ntohs") => {
                self.expect("(")?;
                let v = self.expr(depth + 1)?;
                self.expect(")")?;
                Ok(v)
            }
            Tok::Ident(name) => match name_value(name) {
                Some(v) => Ok(i64::from(v)),
                None => self.err(ParseErrorKind::UnknownName(name.into()), t.span),
            },
            _ => {
                self.pos -= usize::from(t.tok != Tok::Eof);
                self.expected("a number, a name or '('")
            }
        }
    }
}

fn c_arith(op: &str, a: i64, b: i64) -> Option<i64> {
    match op {
        "|" => Some(a | b),
        "^" => Some(a ^ b),
        "&" => Some(a & b),
        "<<" if (0..32).contains(&b) => a.checked_shl(b as u32),
        ">>" if (0..64).contains(&b) => Some(a >> b),
        "+" => a.checked_add(b),
        "-" => a.checked_sub(b),
        "*" => a.checked_mul(b),
        "/" => a.checked_div(b),
        "%" => a.checked_rem(b),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_lists_and_initializers() {
        let p = parse("PUSHWORD+1, ENF_PUSHLIT | ENF_EQ, 0x0800").unwrap();
        assert_eq!(p.words(), &[17, 1 | 1 << 10, 0x800]);
        assert_eq!(p.priority(), 0);
        let p = parse("{ 7, 3, PUSHWORD+1, PUSHLIT | EQ, htons(2), };").unwrap();
        assert_eq!((p.priority(), p.words().len()), (7, 3));
    }

    #[test]
    fn errors_have_positions() {
        let e = parse("PUSHWORD+1,\n  PUSHLIT | EQQ, 2").unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::UnknownName("EQQ".into()));
        assert_eq!((e.location.line, e.location.column), (2, 13));
        let e = parse("{ 10, 4, PUSHWORD+1, PUSHLIT | EQ, 2 }").unwrap_err();
        assert!(matches!(
            e.kind,
            ParseErrorKind::LengthMismatch {
                declared: 4,
                actual: 3
            }
        ));
        assert_eq!(e.location.column, 7);
        // The static checks point at the word.
        let e = parse("PUSHONE,\nEQ").unwrap_err();
        assert!(matches!(e.kind, ParseErrorKind::Program(_)));
        assert_eq!((e.location.line, e.location.column), (2, 1));
        let e = parse("PUSHLIT | EQ, 0x10000").unwrap_err();
        assert!(matches!(
            e.kind,
            ParseErrorKind::OutOfRange { value: 65536, .. }
        ));
        assert!(parse("/* open").is_err());
        assert!(parse("{ 300, 0 }").is_err());
        assert!(parse("PUSHONE PUSHONE").is_err());
        assert!(parse("1/0").is_err());
        assert!(parse(&"(".repeat(500)).is_err());
        assert_eq!(
            parse("PUSHONE,\n  @").unwrap_err().render("PUSHONE,\n  @"),
            "2:3: unexpected character '@'\n  @\n  ^"
        );
    }
}
