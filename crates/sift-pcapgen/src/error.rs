//! What [`crate::libpcap_code`] could not map to gencode's statements.

use std::fmt;

use sift_ir::{Block, Value};

/// An IR construct with no gencode counterpart known here (a coprocessor call, `geneve`'s
/// block parameters, an instruction outside the shapes gencode's functions produce, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    /// The block being translated (`None`: about the function as a whole).
    pub block: Option<Block>,
    /// The instruction at fault, when it is one instruction.
    pub value: Option<Value>,
    /// What was not understood, with the instruction's text.
    pub what: String,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(b) = self.block {
            write!(f, "{b}, ")?;
        }
        if let Some(v) = self.value {
            write!(f, "{v}, ")?;
        }
        f.write_str(&self.what)
    }
}

impl std::error::Error for Unsupported {}
