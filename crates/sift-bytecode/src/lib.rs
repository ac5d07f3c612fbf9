//! The sift bytecode: a verified register machine for packet filters.
//!
//! This crate is the back end that lets a filter cross a protection boundary (BPF+'s figure 1):
//! the IR ([`sift_ir::Function`]) is compiled to a compact, documented, versioned bytecode
//! ([`compile`]); the receiving side decodes it ([`decode`]), checks it ([`verify`]) and runs it
//! ([`VerifiedProgram::run`]), or hands the [`VerifiedProgram`] to a JIT.
//!
//! ```text
//! sift_ir::Function ──compile──▶ VerifiedProgram ──encode──▶ bytes ──decode──▶ Program
//!                                  ▲     │ run(cache, packet, wire_len)            │
//!                                  └─────┼──────────────── verify ◀────────────────┘
//!          text (assemble / Display) ◀──▶ Program
//! ```
//!
//! The machine ([`insn`]): sixteen 32-bit registers, up to 256 words of scratch memory, packet
//! loads of 1, 2 or 4 bytes (big-endian) at a constant offset or at a register plus a constant,
//! three-address ALU operations, two-way compare-and-branch and multiway `switch` (lookup
//! tables), all branching forward only, and `ret`. [`VerifiedProgram`] is the only type the
//! interpreter accepts, and only [`verify`] makes one: every register and scratch slot is
//! written before it is read on every path, every path ends in `ret`, every program terminates.
//! At run time an out-of-bounds packet load or a division by zero rejects the packet (returns
//! 0), as in classic BPF and in the IR's reference interpreter, which this crate's tests hold
//! the interpreter to. The full specification is `docs/bytecode.md` at the repository root.

#![forbid(unsafe_code)]

mod asm;
mod codegen;
mod disasm;
mod encoding;
pub mod insn;
mod interp;
mod verify;

pub use asm::{assemble, AsmError, AsmErrorKind};
pub use codegen::{compile, CodegenError};
pub use encoding::{decode, encode, DecodeError, DecodeErrorKind, MAGIC, VERSION};
pub use insn::{AluOp, Cond, Insn, Key, Operand, Program, Reg, Table, Width};
pub use interp::Cache;
pub use verify::{verify, VerifiedProgram, VerifyError, Violation, ViolationKind};

use std::fmt;

/// Why bytes could not be loaded as a runnable program.
#[derive(Debug)]
pub enum LoadError {
    Decode(DecodeError),
    Verify(VerifyError),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Decode(e) => write!(f, "{e}"),
            LoadError::Verify(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoadError::Decode(e) => Some(e),
            LoadError::Verify(e) => Some(e),
        }
    }
}

/// Decodes and verifies an encoded program: what the receiving side of a boundary does.
pub fn load(bytes: &[u8]) -> Result<VerifiedProgram, LoadError> {
    verify(decode(bytes).map_err(LoadError::Decode)?).map_err(LoadError::Verify)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn shared_between_threads() {
        assert_send_sync::<VerifiedProgram>();
        let p = verify(assemble("ld.b r0, [0]\n ret r0\n").unwrap()).unwrap();
        let p = std::sync::Arc::new(p);
        let handles: Vec<_> = (0..2u8)
            .map(|i| {
                let p = p.clone();
                std::thread::spawn(move || p.run(&mut Cache::new(), &[i + 1], 1))
            })
            .collect();
        let got: Vec<u32> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(got, vec![1, 2]);
    }

    #[test]
    fn load_checks_both_layers() {
        let p = assemble("mov r1, 5\n ret r1\n").unwrap();
        assert_eq!(load(&encode(&p)).unwrap().run(&mut Cache::new(), &[], 0), 5);
        assert!(matches!(load(b"nope"), Err(LoadError::Decode(_))));
        let bad = assemble("ret r1\n").unwrap();
        assert!(matches!(load(&encode(&bad)), Err(LoadError::Verify(_))));
    }
}
