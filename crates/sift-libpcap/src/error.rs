//! Why the model could not produce a program.
//!
//! Two families: the input is not a program libpcap's code generator could have emitted (so no
//! block graph can be recovered from it), or libpcap's optimizer itself reports an error while
//! folding constants. The latter carry libpcap's exact messages, so a caller can compare them
//! with what `pcap_compile` says.

use std::fmt;

/// An error from [`crate::optimize`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptimizeError {
    /// The program has no instructions.
    Empty,
    /// The instruction at `index` is not one classic BPF executes.
    UnknownOpcode {
        /// Index of the instruction in the input program.
        index: usize,
        /// Its opcode.
        code: u16,
    },
    /// A jump at `index` leads outside the program (past its end, or backwards through a `ja`
    /// whose offset wraps around).
    JumpOutOfRange {
        /// Index of the jump.
        index: usize,
    },
    /// Execution from a block start runs off the end of the program without a `ret`.
    FallsOffEnd {
        /// Index of the last instruction read.
        index: usize,
    },
    /// Straight-line code runs into the block starting at `index` without a branch. libpcap's
    /// code generator emits such code only together with a flag that turns its optimizer off
    /// (Geneve), so there is no optimized program to model.
    FallsThrough {
        /// The first instruction of the block run into.
        index: usize,
    },
    /// A `ja` at `index` is used as a statement of a block rather than as the long-jump
    /// trampoline libpcap emits right after a conditional jump.
    StrayJa {
        /// Index of the `ja`.
        index: usize,
    },
    /// The instruction at `index` addresses a scratch memory word `M[k]` with `k >= 16`.
    ScratchOutOfRange {
        /// Index of the instruction.
        index: usize,
        /// The out-of-range word number.
        k: u32,
    },
    /// `ret x` at `index`: libpcap's code generator never emits it and its interpreter does
    /// not run it, so the model does not accept it.
    UnsupportedReturn {
        /// Index of the instruction.
        index: usize,
    },
    /// libpcap's optimizer: a constant division by zero ("division by zero").
    DivisionByZero,
    /// libpcap's optimizer: a constant modulus by zero ("modulus by zero").
    ModulusByZero,
    /// libpcap's optimizer: a shift by a known X of more than 31 bits
    /// ("shift by more than 31 bits").
    ShiftTooLarge,
    /// The optimizer reached a state in which libpcap calls `abort()` (a comparison decided
    /// by a constant accumulator on a block whose branch opcode is not a conditional jump).
    LibpcapAborts {
        /// What libpcap would have been doing.
        reason: &'static str,
    },
    /// libpcap's optimizer would never finish: a pass that changed more than edges left the
    /// graph as an earlier such pass did, so the same passes come round forever (libpcap's
    /// guard against cycling counts only passes that move edges and nothing else).
    NeverFinishes,
}

impl OptimizeError {
    /// Whether this is an error libpcap's optimizer itself reports (as opposed to an input
    /// the model rejects).
    pub fn is_libpcap_error(&self) -> bool {
        matches!(
            self,
            OptimizeError::DivisionByZero
                | OptimizeError::ModulusByZero
                | OptimizeError::ShiftTooLarge
        )
    }
}

impl fmt::Display for OptimizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptimizeError::Empty => f.write_str("the program has no instructions"),
            OptimizeError::UnknownOpcode { index, code } => {
                write!(f, "instruction {index}: unknown opcode 0x{code:x}")
            }
            OptimizeError::JumpOutOfRange { index } => {
                write!(f, "instruction {index}: jump target outside the program")
            }
            OptimizeError::FallsOffEnd { index } => {
                write!(
                    f,
                    "instruction {index}: control runs off the end of the program"
                )
            }
            OptimizeError::FallsThrough { index } => write!(
                f,
                "instruction {index}: straight-line code falls into a branch target"
            ),
            OptimizeError::StrayJa { index } => write!(
                f,
                "instruction {index}: `ja` that is not a long-jump trampoline after a branch"
            ),
            OptimizeError::ScratchOutOfRange { index, k } => {
                write!(f, "instruction {index}: scratch word M[{k}] does not exist")
            }
            OptimizeError::UnsupportedReturn { index } => {
                write!(f, "instruction {index}: `ret x` is not supported")
            }
            // libpcap's own messages, verbatim.
            OptimizeError::DivisionByZero => f.write_str("division by zero"),
            OptimizeError::ModulusByZero => f.write_str("modulus by zero"),
            OptimizeError::ShiftTooLarge => f.write_str("shift by more than 31 bits"),
            OptimizeError::LibpcapAborts { reason } => {
                write!(f, "libpcap's optimizer would abort: {reason}")
            }
            OptimizeError::NeverFinishes => {
                f.write_str("libpcap's optimizer would never finish: its passes repeat")
            }
        }
    }
}

impl std::error::Error for OptimizeError {}
