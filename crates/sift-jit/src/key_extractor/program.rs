//! The key program: what a shape's key extraction computes, as straight-line steps over
//! numbered values ([`KeyStep`], [`KeyProgram`]), the comparisons its checks make
//! ([`KeyRel`]), and the validation the code generator relies on
//! ([`KeyProgram::validate`]). Shared by the extractor, the demultiplexer's matchers and
//! sift-demux's interpreter, which defines the semantics (see the parent module).

use std::fmt;

use sift_ir::{BinOp, CmpOp};

use super::KEY_WORDS;

/// A comparison a check makes (unsigned; `Set`: `a & b != 0`, `Clear`: `a & b == 0`): sift-ir's
/// [`CmpOp`] closed under negation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyRel {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Set,
    Clear,
}

impl KeyRel {
    pub fn from_ir(op: CmpOp) -> KeyRel {
        match op {
            CmpOp::Eq => KeyRel::Eq,
            CmpOp::Ne => KeyRel::Ne,
            CmpOp::Gt => KeyRel::Gt,
            CmpOp::Ge => KeyRel::Ge,
            CmpOp::Lt => KeyRel::Lt,
            CmpOp::Le => KeyRel::Le,
            CmpOp::Set => KeyRel::Set,
        }
    }

    pub fn eval(self, a: u32, b: u32) -> bool {
        match self {
            KeyRel::Eq => a == b,
            KeyRel::Ne => a != b,
            KeyRel::Gt => a > b,
            KeyRel::Ge => a >= b,
            KeyRel::Lt => a < b,
            KeyRel::Le => a <= b,
            KeyRel::Set => a & b != 0,
            KeyRel::Clear => a & b == 0,
        }
    }

    pub fn negate(self) -> KeyRel {
        match self {
            KeyRel::Eq => KeyRel::Ne,
            KeyRel::Ne => KeyRel::Eq,
            KeyRel::Gt => KeyRel::Le,
            KeyRel::Ge => KeyRel::Lt,
            KeyRel::Lt => KeyRel::Ge,
            KeyRel::Le => KeyRel::Gt,
            KeyRel::Set => KeyRel::Clear,
            KeyRel::Clear => KeyRel::Set,
        }
    }

    /// The relation with its operands swapped: `a R b` iff `b R.mirror() a`.
    pub fn mirror(self) -> KeyRel {
        match self {
            KeyRel::Gt => KeyRel::Lt,
            KeyRel::Ge => KeyRel::Le,
            KeyRel::Lt => KeyRel::Gt,
            KeyRel::Le => KeyRel::Ge,
            symmetric => symmetric,
        }
    }
}

/// One step of a [`KeyProgram`]. The steps that compute a value (`Const` to `Neg`) define the
/// program's values in order: the first defines value 0, the next value 1, and so on; operands
/// name values defined earlier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyStep {
    Const(u32),
    WireLen,
    /// `bytes` big-endian at `index + offset` (`index`: a value, or none for 0).
    Load {
        index: Option<u32>,
        offset: u32,
        bytes: u8,
    },
    Bin {
        op: BinOp,
        a: u32,
        b: u32,
    },
    BinK {
        op: BinOp,
        a: u32,
        k: u32,
    },
    Neg(u32),
    /// Rejects unless `value[a] rel k`.
    Check {
        rel: KeyRel,
        a: u32,
        k: u32,
    },
    /// Rejects unless `value[a] rel value[b]`.
    CheckValues {
        rel: KeyRel,
        a: u32,
        b: u32,
    },
    /// `key[word] |= u64::from(value[a]) << shift`.
    Key {
        a: u32,
        word: u8,
        shift: u8,
    },
}

/// Straight-line key extraction: an entry check on the captured length, then the steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyProgram {
    /// Packets with fewer captured bytes are rejected before any step runs.
    pub min_caplen: u64,
    pub steps: Vec<KeyStep>,
}

/// Why a [`KeyProgram`] is malformed (the step's position and what is wrong with it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyProgramError {
    pub step: usize,
    pub problem: &'static str,
}

impl fmt::Display for KeyProgramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key program step {}: {}", self.step, self.problem)
    }
}

impl std::error::Error for KeyProgramError {}

impl KeyProgram {
    /// Checks what the code generator relies on.
    pub fn validate(&self) -> Result<(), KeyProgramError> {
        let mut defined: u64 = 0;
        for (i, step) in self.steps.iter().enumerate() {
            let fail = |problem| Err(KeyProgramError { step: i, problem });
            let operand_ok = |v: u32| u64::from(v) < defined;
            let ok = match *step {
                KeyStep::Const(_) | KeyStep::WireLen => true,
                KeyStep::Load { index, bytes, .. } => {
                    if !matches!(bytes, 1 | 2 | 4) {
                        return fail("load size is not 1, 2 or 4");
                    }
                    index.is_none_or(operand_ok)
                }
                KeyStep::Bin { a, b, .. } | KeyStep::CheckValues { a, b, .. } => {
                    operand_ok(a) && operand_ok(b)
                }
                KeyStep::BinK { a, .. } | KeyStep::Neg(a) | KeyStep::Check { a, .. } => {
                    operand_ok(a)
                }
                KeyStep::Key { a, word, shift } => {
                    if usize::from(word) >= KEY_WORDS || shift >= 64 {
                        return fail("key word or shift out of range");
                    }
                    operand_ok(a)
                }
            };
            if !ok {
                return fail("operand not defined by an earlier step");
            }
            if defines_value(step) {
                defined += 1;
            }
        }
        Ok(())
    }
}

/// Whether a step defines the next value (every step but checks and key placements).
pub(super) fn defines_value(step: &KeyStep) -> bool {
    !matches!(
        step,
        KeyStep::Check { .. } | KeyStep::CheckValues { .. } | KeyStep::Key { .. }
    )
}
