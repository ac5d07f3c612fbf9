//! DPF: the declarative filters of Engler and Kaashoek, "DPF: Fast, Flexible Message
//! Demultiplexing using Dynamic Code Generation" (SIGCOMM 1996), section 2 and figure 1.
//!
//! A filter is a conjunction of *atoms*, each comparing a packet field with a constant, and of
//! `SHIFT`s that move the base the following atoms are read from:
//!
//! ```text
//! # Check Ethernet header
//! (12:16 == 0x0800) &          # IP datagram?
//! (SHIFT(6 + 6 + 2)) &         # skip the Ethernet header (14 bytes)
//! (9:8 == 6) &                 # TCP
//! (12:32 == 0xc00c4501) &      # source address 192.12.69.1
//! (SHIFT((0:8 & 0xf) << 2)) &  # skip the IP header, whatever its length
//! (0:16 == 1234) &             # source port
//! (2:16 == 4321)               # destination port
//! ```
//!
//! [`syntax`] has the grammar. `offset:bits` reads `bits` (8, 16 or 32) bits at `offset` bytes
//! from the current base; the offset may be a constant or an expression over other loads (an
//! indirect load). Atoms compare a field, optionally masked (`(6:16 & 0x1fff == 0)`), with a
//! constant using `==`, `!=`, `<`, `<=`, `>`, `>=`, unsigned. Arithmetic is 32-bit unsigned with
//! wrap-around (`+ - * / % & | ^ << >> ~`, unary `-`).
//!
//! # Decisions
//!
//! * **Byte order**: loads read the packet in network byte order (big-endian), and constants are
//!   written as numbers, so a field is compared with the value a protocol document gives it:
//!   the IPv4 Ethernet type is `0x0800`, 192.12.69.1 is `0xc00c4501`. (The paper's figure 1 writes
//!   `0x8`, a little-endian MIPS host's view of the same two bytes; written that way here it would
//!   test for type 0x0008.)
//! * **Offsets** are in bytes from the first byte of the packet (the link-layer header) until a
//!   `SHIFT` moves the base; sizes are in bits, as in the paper.
//! * **Verdict**: the packet is accepted iff every atom holds. A load outside the captured bytes,
//!   a base past 2^32 - 1, or a division by zero in a shift makes the packet rejected. Because a
//!   filter is a pure conjunction, this does not depend on the order atoms are checked in, so the
//!   demultiplexer may reorder and merge them freely. A `SHIFT` that no atom follows has no
//!   effect.
//! * **Canonical atoms** ([`Atom`]) are what the demultiplexer merges (section 3): constant shifts
//!   folded into offsets, packet-dependent shifts kept as the atom's [`Context`].
//!
//! # Figure 1 and pcap
//!
//! Figure 1 (with `0x0800`) accepts the same packets as the pcap expression
//! `ip src 192.12.69.1 and ip proto 6 and tcp src port 1234 and tcp dst port 4321` on Ethernet
//! whenever the IPv4 header is 20 bytes long and the packet is not a non-first fragment. It
//! differs elsewhere because it assumes what pcap checks:
//!
//! * **IP options**: figure 1 reads the ports at the fixed offset 34. With a longer header pcap
//!   reads them after the options (`14 + 4 * IHL`), figure 1 reads option bytes; with an IHL below
//!   5 the two also read different bytes. The `SHIFT((0:8 & 0xf) << 2)` form above follows the
//!   header length as pcap does.
//! * **Fragments**: pcap's `tcp src port` requires the fragment offset to be 0; figure 1 accepts a
//!   later fragment whose payload bytes happen to match the ports.
//! * Neither checks the IP version nibble, and both reject VLAN-tagged frames (type 0x8100).
//!
//! # Pipeline
//!
//! [`parse`] → [`Filter`] (its [`Filter::atoms`]) → [`lift()`] → `sift_ir::Function`. [`eval`]
//! evaluates the syntax tree directly and is the reference the lifting is tested against.

pub mod atoms;
pub mod eval;
pub mod filter;
pub mod lift;
pub mod syntax;

pub use atoms::{Atom, Context, Expr, Rel, Shift, Width};
pub use filter::{parse, Filter};
pub use lift::{lift, lift_atoms, lift_with, ACCEPT_ALL};
pub use syntax::{ParseError, ParseErrorKind};
