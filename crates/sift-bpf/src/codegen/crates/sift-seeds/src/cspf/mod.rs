//! CSPF: the stack-language packet filter of Mogul, Rashid and Accetta, "The Packet Filter: An
//! Efficient Mechanism for User-level Network Code" (SOSP 1987), section 3.1 and figure 9.
//!
//! A program is an array of 16-bit words ([`program`] has the encoding and its sources). Each
//! instruction pushes a value (a literal, a constant, or a packet word) and then applies a binary
//! operator to the top two stack values. The packet is accepted if the value left on top of the
//! stack is non-zero. The short-circuit operators `COR`, `CAND`, `CNOR`, `CNAND` compute
//! `R = (T1 == T2)` and either return at once (figure 9's table) or push `R` and continue.
//!
//! # Decisions
//!
//! * **Packet words** are counted from the first byte of the packet (the data-link header, as the
//!   paper's figures count them) and read in network byte order: word `n` is
//!   `(p[2n] << 8) | p[2n+1]`. This is what the paper's figures need: figure 11 finds the Pup type
//!   in the low byte of word 3 with `PUSH00FF | AND` (the Pup type is byte 7 of the packet), and
//!   figure 12 tests the high half of the 32-bit destination socket in word 7 and the low half in
//!   word 8. Literals are therefore written as they appear on the wire (`0x0800` for IPv4 on
//!   Ethernet); `htons(x)` in the text form is accepted and is the identity.
//! * A word is out of the packet unless both its bytes were captured; the program then rejects
//!   at that word, as the enet interpreter does.
//! * **Short-circuit operators push `R`** when they continue, as the paper says. (The Stanford and
//!   Ultrix interpreters popped both operands and pushed nothing; programs ending in a plain
//!   comparison, like figure 12, mean the same under both readings.)
//! * **An empty stack at the end accepts**: the enet interpreter's stack starts with TRUE below the
//!   program's values, so the empty program (like any program that pushes nothing) accepts
//!   every packet.
//! * **Static checks** (section 7): with no jumps, validity, literal presence, and the stack depth
//!   at every word are known ahead of time, so [`Program`] checks them once and reports the
//!   offending word; only packet bounds are left to run time. The length limit is
//!   `ENMAXFILTERS` = 40 words, the stack limit 38 values (see [`Limits`]).
//! * The **priority** is carried in [`Program::priority`] for the demultiplexer. So is nothing
//!   else: exclusive versus copy delivery (section 3.2) is a property of the port, not of the
//!   program.
//!
//! # Pipeline
//!
//! [`parse`] (text) or [`parse_binary`] (words) → [`Program`] → [`lift()`] → `sift_ir::Function`.
//! [`interp`] runs programs directly, with the 1987 interpreter's run-time checks, and is the
//! reference the lifting is tested against.

pub mod binary;
pub mod interp;
pub mod lift;
pub mod program;
pub mod syntax;

pub use binary::{
    decode_words, encode_words, parse_binary, parse_enfilter_image, BinaryError, ByteOrder,
};
pub use lift::{lift, lift_with, ACCEPT_ALL};
pub use program::{Action, Instruction, Limits, Operator, Program, ProgramError, ProgramErrorKind};
pub use syntax::{parse, parse_with, ParseError, ParseErrorKind};
