//! Errors of the text and binary program formats: where (line and column, or byte offset) and
//! what.

use std::fmt;

/// A program text or binary image that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line (for binary input: 0).
    pub line: usize,
    /// 1-based column in characters (for binary input: the byte offset).
    pub column: usize,
    /// What is wrong.
    pub kind: ParseErrorKind,
}

/// What is wrong with a program text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// Something else was expected here (`expected` says what).
    Expected(&'static str),
    /// A number does not fit the field it is for (`field` names it).
    OutOfRange(&'static str),
    /// An unknown mnemonic.
    UnknownMnemonic(String),
    /// An operand that the mnemonic does not take.
    BadOperand(&'static str),
    /// A label defined twice.
    DuplicateLabel(String),
    /// A jump to a label that is never defined.
    UndefinedLabel(String),
    /// A jump target behind the jump or too far for the offset field.
    BadJumpTarget(&'static str),
    /// The `-ddd` count line disagrees with the number of instructions.
    CountMismatch { declared: usize, found: usize },
    /// A binary image whose length is not a multiple of 8 bytes.
    TruncatedBinary { len: usize },
    /// Text after a complete instruction.
    TrailingInput,
    /// No instruction at all.
    Empty,
}

impl ParseError {
    pub(crate) fn new(line: usize, column: usize, kind: ParseErrorKind) -> ParseError {
        ParseError { line, column, kind }
    }
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseErrorKind::Expected(what) => write!(f, "expected {what}"),
            ParseErrorKind::OutOfRange(field) => write!(f, "number out of range for {field}"),
            ParseErrorKind::UnknownMnemonic(m) => write!(f, "unknown instruction `{m}`"),
            ParseErrorKind::BadOperand(why) => write!(f, "bad operand: {why}"),
            ParseErrorKind::DuplicateLabel(l) => write!(f, "label `{l}` defined twice"),
            ParseErrorKind::UndefinedLabel(l) => write!(f, "label `{l}` is not defined"),
            ParseErrorKind::BadJumpTarget(why) => write!(f, "bad jump target: {why}"),
            ParseErrorKind::CountMismatch { declared, found } => write!(
                f,
                "the count line says {declared} instructions, the text has {found}"
            ),
            ParseErrorKind::TruncatedBinary { len } => write!(
                f,
                "binary program of {len} bytes is not a whole number of 8-byte instructions"
            ),
            ParseErrorKind::TrailingInput => f.write_str("unexpected text after the instruction"),
            ParseErrorKind::Empty => f.write_str("no instructions"),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "byte {}: {}", self.column, self.kind)
        } else {
            write!(f, "{}:{}: {}", self.line, self.column, self.kind)
        }
    }
}

impl std::error::Error for ParseError {}
