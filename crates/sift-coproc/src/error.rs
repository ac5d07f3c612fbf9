//! The error of compiling a function's coprocessor tables.

use std::fmt;

use sift_ir::PatternError;

/// A pattern set that cannot be compiled: which set (and pattern, when one is to blame) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileError {
    /// Index of the pattern set in [`Function::patterns`](sift_ir::Function::patterns).
    pub set: u32,
    /// Index of the offending pattern within the set, when a single pattern is to blame.
    pub pattern: Option<u32>,
    pub reason: CompileErrorReason,
}

/// Why a pattern set could not be compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompileErrorReason {
    /// The pattern itself is invalid (an empty literal, a regular expression that does not
    /// compile). The IR verifier normally rules this out.
    Pattern(PatternError),
    /// The multi-pattern literal automaton could not be built (too many states); the message is
    /// the `aho-corasick` crate's.
    Automaton(String),
    /// A regular expression compiles alone but not within the limits the engine allows; the
    /// message is the `regex` crate's.
    Regex(String),
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pattern set {}", self.set)?;
        if let Some(p) = self.pattern {
            write!(f, ", pattern {p}")?;
        }
        match &self.reason {
            CompileErrorReason::Pattern(e) => write!(f, ": {e}"),
            CompileErrorReason::Automaton(m) => {
                write!(f, ": cannot build the literal automaton: {m}")
            }
            CompileErrorReason::Regex(m) => {
                write!(f, ": cannot compile the regular expression: {m}")
            }
        }
    }
}

impl std::error::Error for CompileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.reason {
            CompileErrorReason::Pattern(e) => Some(e),
            _ => None,
        }
    }
}
