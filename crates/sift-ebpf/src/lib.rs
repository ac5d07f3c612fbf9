//! The eBPF back end: sift's predicate IR as programs the Linux kernel verifies and runs.
//!
//! ```text
//! sift_ir::Function ──compile(Options{program_type,..})──▶ Program ──to_elf──▶ ELF object
//!  (lowered, optionally        socket filter / XDP / tc       │                (libbpf, ip, tc)
//!   optimized by sift-opt)                                    ├─to_text──▶ llvm-objdump-style listing
//!                                                             └─kernel::load ─▶ BPF_PROG_TEST_RUN
//! ```
//!
//! It sits beside the other back ends (classic BPF in `sift-bpf`, the bytecode in
//! `sift-bytecode`) and keeps the IR's meaning exactly: an out-of-bounds load or a division by
//! zero rejects the packet, shifts by 32 or more give 0, values are 32-bit unsigned. What
//! "reject" and "accept" mean depends on the program type ([`ProgramType`]): a socket filter
//! returns the filter's result (bytes to keep, 0 to drop) like classic BPF; XDP and tc map
//! match / no match to two configurable actions ([`Options`]: `XDP_PASS`/`XDP_DROP`,
//! `TC_ACT_OK`/`TC_ACT_SHOT` by default). How packets are read per type is described in
//! `codegen/packet.rs`: `LD_ABS`/`LD_IND` for socket filters, direct packet access with
//! hoisted bounds checks for XDP and tc.
//!
//! The IR is acyclic, so the generated programs are loop-free (`ip6 protochain` arrives
//! unrolled from the lowering); `Switch` tables become binary searches. The kernel's limits
//! that code generation checks are the 16-bit jump offsets and the 1,000,000-instruction
//! program size ([`CodegenError`]); the verifier's own budget (1,000,000 instructions
//! explored) is checked only by loading.
//!
//! [`cbpf`] translates classic BPF (libpcap's output) to eBPF the way the kernel's
//! `bpf_convert_filter` does, so that benchmarks can run libpcap's programs under the same
//! JIT. [`kernel`] (Linux only, the one module with `unsafe`) loads programs and runs them with
//! `BPF_PROG_TEST_RUN`.
//!
//! Only little-endian hosts are supported (the instruction encoding and the ELF objects are
//! little-endian).

#![deny(unsafe_code)]

mod assembler;
pub mod cbpf;
mod codegen;
pub mod elf;
pub mod insn;
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub mod kernel;
mod listing;
mod moves;
mod program;
mod regalloc;

pub use codegen::{compile, CodegenError, MAX_INSNS};
pub use elf::{to_elf, to_elf_with_license, ElfError, DEFAULT_LICENSE};
pub use listing::{asm, to_text};
pub use program::{Options, Program, ProgramType, TC_ACT_OK, TC_ACT_SHOT, XDP_DROP, XDP_PASS};
