//! MPF: the Mach Packet Filter of Yuhara, Bershad, Maeda and Moss, "Efficient Packet
//! Demultiplexing for Multiple Endpoints and Large Messages" (USENIX Winter 1994), sections 2
//! and 3, tables 1 and 2, figure 3 and appendix B.
//!
//! MPF is classic BPF plus instructions that let many filters share one program: filters that
//! differ only in the immediates of their `key` instructions collapse into one program and one
//! hash table (figure 3), and per-filter state dispatches IP fragments (appendix B).
//!
//! # Instructions
//!
//! Scratch words `M[0..N]` are compared with `N` keys; `key` slots follow their match instruction
//! and count as instructions for jump offsets. `ALL` is the whole packet.
//!
//! * `ret_match_imm #N, #R` + `N × key #k`: if `M[i] == k_i` for every `i < N`, return `R`,
//!   else return 0 (table 1's BPF sequence). In a collapsed group: the endpoints whose keys equal
//!   `M[0..N]` receive `R` bytes, the others reject.
//! * `jmp_match_imm #N, Lt, Lf` + `N × key #k`: go to `Lt` if all `N` keys match, else to `Lf`.
//!   `A`, `X` and `M[]` are unchanged. In a group, the matching endpoints continue at `Lt` (they
//!   are "associated" with the run), the others at `Lf`.
//! * `register_data #N, #T`: record `M[0..N]` in the filter's static memory for the endpoints
//!   on this path, valid for `T` ms. Checked statically: a `jmp_match_imm` has matched on every
//!   path to it (table 2's requirement).
//! * `ret_match_data #N, #R`: if `M[0..N]` is registered (still valid) in the static memory,
//!   the endpoints on this path that registered it receive `R` bytes and the run ends (the
//!   others on the path reject: the packet has an owner); otherwise execution continues with the
//!   next instruction. The static memory is the filter's — in a group, the collapsed filter's,
//!   as in Mach, where it maps data to receive ports.
//! * `postpone #T`: stop; the packet waits in the filter's queue and runs again after later
//!   packets; it is dropped `T` ms after it was first postponed (or earlier, for room).
//! * `ret #ALL`: accept the whole packet.
//!
//! # Decisions
//!
//! * **Collapsing never changes meaning**: a group's result for an endpoint is what that
//!   endpoint's program alone would return. One consequence differs from Mach's implementation:
//!   a plain `ret #k` reached without a match accepts for every endpoint on the path (Mach's
//!   collapsed filter returned 0 there, having no port to deliver to).
//! * **Scratch words start at 0**, as in `sift_bpf` (Mach left them uninitialised); a match or
//!   data instruction that compares a word not stored on every path is a static error.
//! * **Keys**: 1 to 16 per instruction (the scratch memory's size); several match instructions
//!   per program are allowed (appendix B has two; Mach's validator allowed one).
//! * A program may end with a match instruction's keys (Mach required a final `ret`).
//! * **Byte order**: loads read network byte order, as in classic BPF; keys are compared with
//!   the loaded values, so they are written as numbers (`key #1234` for TCP port 1234,
//!   `key #0xc00c4501` for 192.12.69.1).
//! * **State is explicit**: [`lift()`] refuses stateful programs; [`Session`] runs them with
//!   bounded static memory and a bounded postponed queue, on the caller's clock.
//!
//! # Pipeline
//!
//! [`parse`] (text) → [`Program`] (checked) → [`lift_with`] → `sift_ir::Function` (stateless
//! programs; through the classic BPF expansion of [`to_classic`]), or → [`Session`] (any
//! program). [`interp`] is the reference the lifting and the session are tested against.

pub mod interp;
pub mod lift;
pub mod program;
pub mod session;
pub mod syntax;

pub use lift::{lift, lift_with, to_classic, LiftError, LiftErrorKind, ACCEPT_ALL};
pub use program::{Insn, Length, Program, ProgramError, ProgramErrorKind, MAX_KEYS};
pub use session::{Delivery, EndpointId, InstallError, Limits, Session, Stats};
pub use syntax::{parse, ParseError, ParseErrorKind};
