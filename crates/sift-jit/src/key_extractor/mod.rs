//! Native code for the demultiplexer's key extractors (`sift-demux`).
//!
//! The demultiplexer groups filters that differ only in constants into *shapes* (MPF's
//! collapse): per packet and shape it runs a few checks (ethertype, protocol, not a fragment)
//! and packs the fields the filters compare with constants (addresses, ports) into a fixed-size
//! key, which it then looks up in the shape's hash table. That extraction is the
//! demultiplexer's inner loop. [`KeyProgram`] describes it as straight-line code over
//! numbered values; [`NativeExtractor::compile`] turns it into one machine-code function
//! `extract(packet, caplen, wire_len, key) -> accepted` with Cranelift. The table stays on the
//! Rust side, so adding a key to a shape never touches the code.
//!
//! Semantics (those of the demultiplexer's interpreter, which remains the fallback where
//! [`crate::supported`] is false): a load reads `bytes` (1, 2 or 4) big-endian at
//! `index + offset` (computed without wrapping) and rejects the packet unless that lies within
//! the captured bytes; a division or remainder by zero rejects; shifts by 32 or more give 0;
//! arithmetic wraps; a check that does not hold rejects. On acceptance every key word is
//! written (words no [`KeyStep::Key`] touches are 0); on rejection the key is unspecified.
//!
//! Safety: [`NativeExtractor::compile`] validates the program (operands defined before use,
//! key words and shifts in range, load sizes 1, 2 or 4), and the generated code reads the packet
//! only after a bounds check that covers the load (a fixed-offset load within
//! [`KeyProgram::min_caplen`] is covered by the one check on entry; loads at one index share
//! one check, made at the first of them, as far as the furthest reads: the program is
//! straight-line and every failure rejects, so checking earlier changes nothing but which check
//! rejects), writes only the [`KEY_WORDS`] words of the key it is given, has no loops and calls
//! nothing. A key word packed from adjacent big-endian loads of one index (two addresses, two
//! ports) is read with one wide load, covered by its parts' checks.
//!
//! The parts: `program` (the steps and their validation), `layout` (what is loaded together
//! and how far each bounds check reaches), `emit` (the steps as Cranelift IR, shared with
//! the matchers), `extractor` (the compiled function and the only `unsafe` here) and
//! `key_order` (keys in packet byte order, for the matchers' tables).

mod emit;
mod extractor;
mod key_order;
mod layout;
mod program;
#[cfg(test)]
mod tests;

pub(crate) use emit::emit_key;
pub use extractor::NativeExtractor;
pub use key_order::PacketOrder;
pub(crate) use layout::KeyOrder;
pub use program::{KeyProgram, KeyProgramError, KeyRel, KeyStep};

/// Words in a key (enough for an IPv6 4-tuple with its ethertype and next header).
pub const KEY_WORDS: usize = 6;
