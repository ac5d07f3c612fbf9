//! The DPF text syntax: lexer and parser into a syntax tree of steps (atoms and `SHIFT`s).
//!
//! ```text
//! filter   := cond                          (a conjunction, nothing else)
//! cond     := rel ("&&" rel)*
//! rel      := bits [relop bits]             relop: == != < <= > >=
//! bits     := or-level, then ^, then & ...  (C's order: | ^ & << >> + - * / % , unary ~ -)
//! postfix  := primary [":" BITS]            BITS: 8, 16 or 32
//! primary  := NUMBER | "(" cond ")" | "SHIFT" "(" cond ")"
//! ```
//!
//! Every node is either a *value* or a *condition* (an atom, a `SHIFT`, or a conjunction of
//! them). `&` between two conditions is a conjunction, between two values a bitwise and; mixing
//! the two is an error. Unlike C, a comparison binds more loosely than the bitwise operators, so
//! `(12:16 & 0xfff == 5)` masks first. Atoms are usually parenthesized, as in the paper; an
//! unparenthesized `a == 1 & b == 2` is rejected rather than read C's way.
//!
//! `#` starts a comment that runs to the end of the line. Numbers are C constants that fit 32 bits.
//! `SHIFT` may be written in any case.

use std::fmt;

use sift_ir::BinOp;

use super::atoms::{Rel, Width};
use crate::number::c_number;
use crate::span::{Span, SyntaxError};

/// A syntax error, or a filter that is not a conjunction of canonical atoms, with its position.
pub type ParseError = SyntaxError<ParseErrorKind>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseErrorKind {
    UnexpectedChar(char),
    BadNumber(String),
    UnknownName(String),
    Expected {
        expected: &'static str,
        found: String,
    },
    Unclosed,
    BadWidth(u32),
    /// A value where a condition is needed, or the reverse.
    ValueNotCondition,
    ConditionNotValue,
    MixedAnd,
    /// An atom that does not compare one (masked) packet field with a constant.
    NotCanonical,
    /// An `==`/`!=` constant with bits the field's mask clears: it could never (or always) hold.
    ValueOutsideMask {
        value: u32,
        mask: u32,
    },
    /// Constant offsets (shifts plus the atom's offset) past 2^32 - 1.
    OffsetTooLarge,
    DivisionByZero,
    /// A filter with no atoms.
    Empty,
    TooDeep,
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseErrorKind::UnexpectedChar(c) => write!(f, "unexpected character {c:?}"),
            ParseErrorKind::BadNumber(s) => write!(f, "bad number {s:?}"),
            ParseErrorKind::UnknownName(n) => write!(f, "unknown name {n:?} (only SHIFT)"),
            ParseErrorKind::Expected { expected, found } => {
                write!(f, "expected {expected}, found {found}")
            }
            ParseErrorKind::Unclosed => write!(f, "this '(' is never closed"),
            ParseErrorKind::BadWidth(b) => write!(f, "a load is 8, 16 or 32 bits, not {b}"),
            ParseErrorKind::ValueNotCondition => {
                write!(f, "expected an atom (a comparison) or SHIFT, found a value")
            }
            ParseErrorKind::ConditionNotValue => {
                write!(f, "expected a value, found an atom or SHIFT")
            }
            ParseErrorKind::MixedAnd => write!(f, "'&' between an atom and a value"),
            ParseErrorKind::NotCanonical => write!(
                f,
                "an atom compares a packet field (optionally masked) with a constant"
            ),
            ParseErrorKind::ValueOutsideMask { value, mask } => write!(
                f,
                "{value:#x} has bits outside the field's mask {mask:#x}, so the atom is constant"
            ),
            ParseErrorKind::OffsetTooLarge => write!(f, "constant offset exceeds 2^32 - 1"),
            ParseErrorKind::DivisionByZero => write!(f, "division by zero"),
            ParseErrorKind::Empty => write!(f, "a filter needs at least one atom"),
            ParseErrorKind::TooDeep => write!(f, "nested too deeply"),
        }
    }
}

/// A value expression as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExprKind {
    Num(u32),
    /// `addr:bits`, relative to the current base.
    Load {
        addr: Box<Expr>,
        width: Width,
    },
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `~x`
    Not(Box<Expr>),
    /// `-x`
    Neg(Box<Expr>),
}

/// One element of the conjunction, in text order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// `lhs rel rhs`.
    Atom {
        lhs: Expr,
        rel: Rel,
        rhs: Expr,
        span: Span,
    },
    /// `SHIFT(amount)`: advances the base of every later step.
    Shift { amount: Expr, span: Span },
}

/// Parses the text into its steps.
pub fn parse_steps(text: &str) -> Result<Vec<Step>, ParseError> {
    let tokens = lex(text)?;
    let mut p = Parser {
        text,
        tokens,
        pos: 0,
        depth: 0,
    };
    let start = p.peek().span;
    let node = p.cond()?;
    if p.peek().tok != Tok::Eof {
        return p.expected("'&', '&&' or the end of the filter");
    }
    match node {
        Node::Cond(steps) => Ok(steps),
        Node::Value(e) => Err(ParseError::new(
            text,
            ParseErrorKind::ValueNotCondition,
            start.to(e.span),
        )),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok<'a> {
    Num(u32),
    Ident(&'a str),
    Punct(&'static str),
    Eof,
}

#[derive(Clone, Copy, Debug)]
struct Token<'a> {
    tok: Tok<'a>,
    span: Span,
}

const PUNCTS: [&str; 21] = [
    "==", "!=", "<=", ">=", "<<", ">>", "&&", "<", ">", "&", "|", "^", "+", "-", "*", "/", "%",
    "~", "(", ")", ":",
];

fn lex(text: &str) -> Result<Vec<Token<'_>>, ParseError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'#' {
            i = text[i..].find('\n').map_or(bytes.len(), |n| i + n);
        } else if c.is_ascii_alphanumeric() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let (s, span) = (&text[start..i], Span::new(start, i));
            let tok = if c.is_ascii_digit() {
                let Some(n) = c_number(s) else {
                    return Err(ParseError::new(
                        text,
                        ParseErrorKind::BadNumber(s.into()),
                        span,
                    ));
                };
                Tok::Num(n)
            } else if s.eq_ignore_ascii_case("shift") {
                Tok::Ident("SHIFT")
            } else {
                return Err(ParseError::new(
                    text,
                    ParseErrorKind::UnknownName(s.into()),
                    span,
                ));
            };
            out.push(Token { tok, span });
        } else if let Some(p) = PUNCTS.iter().find(|p| text[i..].starts_with(**p)) {
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

/// A parsed node: a value, or a conjunction of steps.
enum Node {
    Value(Expr),
    Cond(Vec<Step>),
}

struct Parser<'a> {
    text: &'a str,
    tokens: Vec<Token<'a>>,
    pos: usize,
    depth: usize,
}

const MAX_DEPTH: usize = 64;

/// Binary operator levels from loosest to tightest, after the relations.
const LEVELS: [&[(&str, BinOp)]; 6] = [
    &[("|", BinOp::Or)],
    &[("^", BinOp::Xor)],
    &[("&", BinOp::And)],
    &[("<<", BinOp::Shl), (">>", BinOp::Shr)],
    &[("+", BinOp::Add), ("-", BinOp::Sub)],
    &[("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Mod)],
];

const RELS: [(&str, Rel); 6] = [
    ("==", Rel::Eq),
    ("!=", Rel::Ne),
    ("<=", Rel::Le),
    (">=", Rel::Ge),
    ("<", Rel::Lt),
    (">", Rel::Gt),
];

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

    fn last_span(&self) -> Span {
        self.tokens[self.pos.saturating_sub(1)].span
    }

    fn error<T>(&self, kind: ParseErrorKind, span: Span) -> Result<T, ParseError> {
        Err(ParseError::new(self.text, kind, span))
    }

    fn expected<T>(&self, expected: &'static str) -> Result<T, ParseError> {
        let t = self.peek();
        let found = match t.tok {
            Tok::Eof => "end of input".to_string(),
            _ => format!("{:?}", &self.text[t.span.start..t.span.end]),
        };
        self.error(ParseErrorKind::Expected { expected, found }, t.span)
    }

    fn eat(&mut self, p: &'static str) -> bool {
        if self.peek().tok == Tok::Punct(p) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn value(&self, node: Node, span: Span) -> Result<Expr, ParseError> {
        match node {
            Node::Value(e) => Ok(e),
            Node::Cond(_) => self.error(ParseErrorKind::ConditionNotValue, span),
        }
    }

    fn cond(&mut self) -> Result<Node, ParseError> {
        let start = self.peek().span;
        let first = self.rel()?;
        if self.peek().tok != Tok::Punct("&&") {
            return Ok(first);
        }
        let mut steps = self.steps(first, start)?;
        while self.eat("&&") {
            let start = self.peek().span;
            let next = self.rel()?;
            steps.extend(self.steps(next, start)?);
        }
        Ok(Node::Cond(steps))
    }

    fn steps(&self, node: Node, start: Span) -> Result<Vec<Step>, ParseError> {
        match node {
            Node::Cond(s) => Ok(s),
            Node::Value(_) => self.error(
                ParseErrorKind::ValueNotCondition,
                start.to(self.last_span()),
            ),
        }
    }

    fn rel(&mut self) -> Result<Node, ParseError> {
        let start = self.peek().span;
        let lhs = self.binary(0)?;
        let Some(&(_, rel)) = RELS.iter().find(|(p, _)| self.peek().tok == Tok::Punct(p)) else {
            return Ok(lhs);
        };
        let lhs = self.value(lhs, start.to(self.last_span()))?;
        self.bump();
        let rstart = self.peek().span;
        let rhs = self.binary(0)?;
        let rhs = self.value(rhs, rstart.to(self.last_span()))?;
        let span = start.to(self.last_span());
        Ok(Node::Cond(vec![Step::Atom {
            lhs,
            rel,
            rhs,
            span,
        }]))
    }

    fn binary(&mut self, level: usize) -> Result<Node, ParseError> {
        if level == LEVELS.len() {
            return self.unary();
        }
        let start = self.peek().span;
        let mut lhs = self.binary(level + 1)?;
        loop {
            let Some(&(_, op)) = LEVELS[level]
                .iter()
                .find(|(p, _)| self.peek().tok == Tok::Punct(p))
            else {
                return Ok(lhs);
            };
            let op_span = self.bump().span;
            let rhs = self.binary(level + 1)?;
            let span = start.to(self.last_span());
            lhs = match (lhs, rhs) {
                (Node::Value(a), Node::Value(b)) => Node::Value(Expr {
                    kind: ExprKind::Binary(op, Box::new(a), Box::new(b)),
                    span,
                }),
                (Node::Cond(mut a), Node::Cond(b)) if op == BinOp::And => {
                    a.extend(b);
                    Node::Cond(a)
                }
                (Node::Cond(_), Node::Cond(_)) => {
                    return self.error(ParseErrorKind::ConditionNotValue, op_span)
                }
                _ if op == BinOp::And => return self.error(ParseErrorKind::MixedAnd, op_span),
                _ => return self.error(ParseErrorKind::ConditionNotValue, span),
            };
        }
    }

    fn unary(&mut self) -> Result<Node, ParseError> {
        let start = self.peek().span;
        let wrap: fn(Box<Expr>) -> ExprKind = if self.eat("~") {
            ExprKind::Not
        } else if self.eat("-") {
            ExprKind::Neg
        } else {
            return self.postfix();
        };
        self.enter()?;
        let inner = self.unary()?;
        self.depth -= 1;
        let span = start.to(self.last_span());
        let e = self.value(inner, span)?;
        Ok(Node::Value(Expr {
            kind: wrap(Box::new(e)),
            span,
        }))
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.error(ParseErrorKind::TooDeep, self.peek().span);
        }
        Ok(())
    }

    fn postfix(&mut self) -> Result<Node, ParseError> {
        let start = self.peek().span;
        let node = self.primary()?;
        if !self.eat(":") {
            return Ok(node);
        }
        let addr = self.value(node, start.to(self.last_span()))?;
        let t = self.bump();
        let Tok::Num(bits) = t.tok else {
            self.pos -= usize::from(t.tok != Tok::Eof);
            return self.expected("a load width (8, 16 or 32)");
        };
        let Some(width) = Width::from_bits(bits) else {
            return self.error(ParseErrorKind::BadWidth(bits), t.span);
        };
        Ok(Node::Value(Expr {
            kind: ExprKind::Load {
                addr: Box::new(addr),
                width,
            },
            span: start.to(t.span),
        }))
    }

    fn primary(&mut self) -> Result<Node, ParseError> {
        let t = self.bump();
        match t.tok {
            Tok::Num(n) => Ok(Node::Value(Expr {
                kind: ExprKind::Num(n),
                span: t.span,
            })),
            Tok::Punct("(") => {
                let inner = self.group(t.span)?;
                Ok(inner)
            }
            Tok::Ident("SHIFT") => {
                let open = self.peek().span;
                if !self.eat("(") {
                    return self.expected("'(' after SHIFT");
                }
                let inner = self.group(open)?;
                let span = t.span.to(self.last_span());
                let amount = self.value(inner, span)?;
                Ok(Node::Cond(vec![Step::Shift { amount, span }]))
            }
            _ => {
                self.pos -= usize::from(t.tok != Tok::Eof);
                self.expected("a number, '(' or SHIFT")
            }
        }
    }

    /// The inside of parentheses opened at `open`, and the closing parenthesis.
    fn group(&mut self, open: Span) -> Result<Node, ParseError> {
        self.enter()?;
        let inner = self.cond()?;
        self.depth -= 1;
        if self.eat(")") {
            return Ok(inner);
        }
        if self.peek().tok == Tok::Eof {
            return self.error(ParseErrorKind::Unclosed, open);
        }
        self.expected("')'")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> ParseErrorKind {
        parse_steps(text).unwrap_err().kind
    }

    #[test]
    fn precedence_and_conjunctions() {
        let steps = parse_steps("(12:16 & 0xfff == 5) & SHIFT(14) && (0:8 == 1)").unwrap();
        assert_eq!(steps.len(), 3);
        let Step::Atom { lhs, rel, .. } = &steps[0] else {
            panic!("not an atom")
        };
        assert_eq!(*rel, Rel::Eq);
        assert!(matches!(lhs.kind, ExprKind::Binary(BinOp::And, _, _)));
        // Nested groups flatten.
        assert_eq!(parse_steps("((1:8 == 1) & ((2:8 == 2)))").unwrap().len(), 2);
        // `:` binds tighter than anything.
        let steps = parse_steps("SHIFT((4:8 & 0xf) << 2)").unwrap();
        assert!(matches!(&steps[0], Step::Shift { amount, .. }
            if matches!(amount.kind, ExprKind::Binary(BinOp::Shl, _, _))));
    }

    #[test]
    fn errors() {
        assert_eq!(kind("(1:8 == 1"), ParseErrorKind::Unclosed);
        assert_eq!(kind("1:12 == 1"), ParseErrorKind::BadWidth(12));
        assert_eq!(kind("12:16"), ParseErrorKind::ValueNotCondition);
        assert_eq!(kind("(1:8 == 1) & 5"), ParseErrorKind::MixedAnd);
        assert_eq!(
            kind("(1:8 == 1) | (2:8 == 1)"),
            ParseErrorKind::ConditionNotValue
        );
        assert_eq!(
            kind("(1:8 == 1) + 1 == 2"),
            ParseErrorKind::ConditionNotValue
        );
        assert_eq!(kind("SHIFT((1:8 == 1))"), ParseErrorKind::ConditionNotValue);
        assert_eq!(kind("foo"), ParseErrorKind::UnknownName("foo".into()));
        assert_eq!(
            kind("1:8 == 0x1g"),
            ParseErrorKind::BadNumber("0x1g".into())
        );
        assert_eq!(kind("1:8 == $"), ParseErrorKind::UnexpectedChar('$'));
        assert_eq!(kind(&"(".repeat(1000)), ParseErrorKind::TooDeep);
        assert_eq!(kind(&"~".repeat(1000)), ParseErrorKind::TooDeep);
        let e = parse_steps("(1:8 == 1) &\n  (2:8 ==)").unwrap_err();
        assert_eq!((e.location.line, e.location.column), (2, 10));
        assert!(matches!(e.kind, ParseErrorKind::Expected { .. }));
    }
}
