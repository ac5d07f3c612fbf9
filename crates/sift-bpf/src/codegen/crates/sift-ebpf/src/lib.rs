//! eBPF back end (in progress).
#![deny(unsafe_code)]

mod codegen;
pub mod elf;
pub mod insn;
mod moves;
mod program;
mod regalloc;

pub use codegen::{compile, CodegenError, MAX_INSNS};
pub use elf::{to_elf, to_elf_with_license, ElfError};
pub use program::*;
