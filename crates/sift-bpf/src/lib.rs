//! Classic BPF (cBPF) for sift: programs in, programs out.
//!
//! Classic BPF is both an input of sift's pipeline (users hold `tcpdump -ddd` output, `bpf_asm`
//! sources and kernel socket filters) and an output (kernel `SO_ATTACH_FILTER`, `tcpdump -d`
//! style listings). This crate is the whole cBPF side, one concept per module:
//!
//! ```text
//!  text / bytes ──numeric, asm──► Program ──validate──► ValidProgram ──interp──► verdict
//!                                    ▲                        │
//!                      disasm, numeric (out)                 lift
//!                                    │                        ▼
//!                              codegen::compile ◄──── sift_ir::Function (optimizer, engines)
//! ```
//!
//! * [`insn`]: the `struct bpf_insn` layout ([`Insn`], [`Program`]) and the decoded opcode
//!   ([`Op`]);
//! * [`numeric`]: `tcpdump -ddd`, `tcpdump -dd` and binary `struct sock_filter` arrays;
//! * [`disasm`]: `tcpdump -d` output, byte-identical to libpcap's `bpf_image`;
//! * [`asm`]: the assembler, reading `tcpdump -d` listings back and `bpf_asm`-style text with
//!   labels;
//! * [`validate`](mod@validate): libpcap's and the Linux kernel's rules ([`Dialect`]), every violation listed,
//!   producing the [`ValidProgram`] type that everything downstream requires;
//! * [`protochain`]: libpcap's `protochain` loop, the one backward jump classic BPF programs
//!   may contain (emitted for the libpcap dialect, recognised by the validator);
//! * [`interp`]: the interpreter, identical to libpcap's `bpf_filter` (with a step budget where
//!   `bpf_filter` would loop forever);
//! * [`lift`](mod@lift): cBPF to the SSA IR (machine state as SSA values, block parameters at merges);
//! * [`codegen`]: the IR to cBPF (register and scratch allocation, layout, long jumps).
//!
//! Parse errors carry line and column; no input makes any of these panic.
//!
//! ```
//! use sift_bpf::{asm::assemble, disasm::disassemble, interp, validate, Dialect};
//! let prog = assemble("ldh [12]\njeq #0x800, ip, drop\nip: ret #-1\ndrop: ret #0\n").unwrap();
//! let valid = validate(&prog, Dialect::Linux).unwrap();
//! let mut pkt = [0u8; 14];
//! pkt[12] = 8;
//! assert_eq!(interp::run(&valid, &pkt, 14), u32::MAX);
//! assert!(disassemble(&prog).starts_with("(000) ldh      [12]\n"));
//! ```
#![forbid(unsafe_code)]

pub mod asm;
pub mod codegen;
mod cursor;
pub mod disasm;
pub mod error;
pub mod insn;
pub mod interp;
pub mod lift;
pub mod numeric;
pub mod protochain;
pub mod validate;

pub use codegen::{compile, compile_for, CodegenError};
pub use error::{ParseError, ParseErrorKind};
pub use insn::{code, AluOp, Class, Insn, JmpOp, Op, Program, Size, Src};
pub use lift::lift;
pub use validate::{validate, Dialect, ValidProgram, ValidationError, Violation};
