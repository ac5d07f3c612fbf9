//! Classic BPF (cBPF) for sift.
#![forbid(unsafe_code)]

pub mod asm;
mod cursor;
pub mod disasm;
pub mod error;
pub mod insn;
pub mod numeric;

pub use error::{ParseError, ParseErrorKind};
pub use insn::{code, AluOp, Class, Insn, JmpOp, Op, Program, Size, Src};
pub mod interp;
pub mod validate;

pub use validate::{validate, Dialect, ValidProgram, ValidationError, Violation};
pub mod lift;

pub use lift::lift;
pub mod codegen;

pub use codegen::{compile, CodegenError};
