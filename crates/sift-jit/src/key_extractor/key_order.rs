//! Keys in packet byte order: what the demultiplexer's matchers compare, without byte swaps.
//!
//! A [`KeyProgram`] defines its key with big-endian field values (a port 80 is `0x0050`),
//! which is what the interpreter and [`super::NativeExtractor`] compute. Swapping every
//! field's bytes on a little-endian host costs the matcher a swap, an extension, a shift and
//! an or per field, on the path from the packet to the hash. A demultiplexer's table only
//! needs *some* one-to-one encoding of the key, the same for the keys it stores and the keys
//! it looks up; so [`crate::demux_matcher`] packs fields that are plain packet loads as the
//! bytes lie in the packet (read natively, no swap), and fields adjacent both in the packet
//! and in the key word (two addresses, two ports) with one load for all of them. The table's
//! keys are converted the same way with [`PacketOrder::apply`].
//!
//! A field is kept in packet order when it is a [`KeyStep::Key`] of a load's value that fits
//! in its word (`shift + 8 * bytes <= 64`) and whose bits no other `Key` step of the word can
//! touch (a computed value may use 32 bits); any other field keeps its big-endian value. On
//! a big-endian host both orders are the same and nothing is converted.

use super::{KeyProgram, KeyStep, KEY_WORDS};

/// At most this many fields of two or more bytes fit in a key.
const MAX_SWAPPED: usize = KEY_WORDS * 4;

/// A field stored in packet order: `bytes` bytes at bit `shift` of key word `word`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Field {
    word: u8,
    shift: u8,
    bytes: u8,
}

/// How a program's key in big-endian fields maps to the key its demultiplexer matcher
/// computes (see the module docs). `Copy`: a table keeps one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketOrder {
    /// The fields of two or four bytes whose bytes are swapped (one byte reads the same in
    /// both orders).
    swapped: [Field; MAX_SWAPPED],
    len: u8,
}

impl PacketOrder {
    /// Converts a key as the program defines it (big-endian fields) into the key the
    /// program's [`crate::demux_matcher::DemuxMatcher`] computes for the same packet, and
    /// back: the conversion is its own inverse. Words beyond `key.len()` are left alone.
    pub fn apply(&self, key: &mut [u64]) {
        for f in &self.swapped[..usize::from(self.len)] {
            let Some(word) = key.get_mut(usize::from(f.word)) else {
                continue;
            };
            let bits = 8 * u32::from(f.bytes);
            let mask = (1u64 << bits) - 1;
            let value = (*word >> f.shift) & mask;
            let swapped = match f.bytes {
                2 => u64::from((value as u16).swap_bytes()),
                _ => u64::from((value as u32).swap_bytes()),
            };
            *word = (*word & !(mask << f.shift)) | (swapped << f.shift);
        }
    }

    /// Whether the conversion changes nothing (one-byte fields only, or a big-endian host).
    pub fn is_identity(&self) -> bool {
        self.len == 0
    }
}

impl KeyProgram {
    /// The conversion between this program's keys and its matcher's (see [`PacketOrder`]).
    /// Meaningful for a valid program (see [`KeyProgram::validate`]).
    pub fn packet_order(&self) -> PacketOrder {
        let mut order = PacketOrder::default();
        for (at, raw) in raw_key_steps(self).into_iter().enumerate() {
            let (true, KeyStep::Key { a, word, shift }) = (raw, self.steps[at]) else {
                continue;
            };
            let Some((_, _, bytes)) = load_of(self, a) else {
                continue;
            };
            if bytes > 1 && usize::from(order.len) < MAX_SWAPPED {
                order.swapped[usize::from(order.len)] = Field { word, shift, bytes };
                order.len += 1;
            }
        }
        order
    }
}

/// The load (index, offset, bytes) that defines value `v`, if a load does.
pub(super) fn load_of(program: &KeyProgram, v: u32) -> Option<(Option<u32>, u32, u8)> {
    let mut n = 0u32;
    for step in &program.steps {
        if !super::program::defines_value(step) {
            continue;
        }
        if n == v {
            return match *step {
                KeyStep::Load {
                    index,
                    offset,
                    bytes,
                } => Some((index, offset, bytes)),
                _ => None,
            };
        }
        n += 1;
    }
    None
}

/// Per step: whether it is a `Key` step whose field the matcher packs in packet order (always
/// false on a big-endian host, where the orders agree).
pub(super) fn raw_key_steps(program: &KeyProgram) -> Vec<bool> {
    let mut raw = vec![false; program.steps.len()];
    if cfg!(target_endian = "big") {
        return raw;
    }
    // Every Key step's bits: a load's value has 8 * bytes of them, any other value up to 32.
    let spans: Vec<Option<(u8, u32, u32, bool)>> = program
        .steps
        .iter()
        .map(|step| match *step {
            KeyStep::Key { a, word, shift } => {
                let load = load_of(program, a);
                let width = load.map_or(32, |(_, _, bytes)| 8 * u32::from(bytes));
                let start = u32::from(shift);
                Some((word, start, start + width, load.is_some()))
            }
            _ => None,
        })
        .collect();
    for (at, span) in spans.iter().enumerate() {
        let Some((word, start, end, true)) = *span else {
            continue;
        };
        let alone = spans.iter().enumerate().all(|(other, s)| match *s {
            Some((w, s0, s1, _)) if other != at && w == word => s1 <= start || end <= s0,
            _ => true,
        });
        raw[at] = end <= 64 && alone;
    }
    raw
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demux_matcher::fixtures::four_tuple;

    #[test]
    fn swaps_two_and_four_byte_loads_and_is_its_own_inverse() {
        // Addresses in word 0 (source at bit 32), ports in word 1 (source port at bit 16).
        let order = four_tuple([0, 0, 1, 1]).packet_order();
        let key = [0x0a00_0001_c0a8_0002, 0x0400_0050];
        let mut converted = key;
        order.apply(&mut converted);
        if cfg!(target_endian = "little") {
            assert_eq!(converted, [0x0100_000a_0200_a8c0, 0x0004_5000]);
        } else {
            assert_eq!(converted, key);
        }
        order.apply(&mut converted);
        assert_eq!(converted, key);
    }

    #[test]
    fn fields_sharing_bits_keep_their_values() {
        let load = |offset, bytes| KeyStep::Load {
            index: None,
            offset,
            bytes,
        };
        let program = KeyProgram {
            min_caplen: 8,
            steps: vec![
                load(0, 2),
                load(2, 4),
                KeyStep::BinK {
                    op: sift_ir::BinOp::And,
                    a: 1,
                    k: 0xff,
                },
                // A load alone, a load whose bits overlap a computed value, one that would
                // not fit in its word.
                KeyStep::Key {
                    a: 0,
                    word: 0,
                    shift: 0,
                },
                KeyStep::Key {
                    a: 1,
                    word: 1,
                    shift: 8,
                },
                KeyStep::Key {
                    a: 2,
                    word: 1,
                    shift: 0,
                },
                KeyStep::Key {
                    a: 0,
                    word: 2,
                    shift: 56,
                },
            ],
        };
        let raw = raw_key_steps(&program);
        let little = cfg!(target_endian = "little");
        assert_eq!(raw, [false, false, false, little, false, false, false]);
        let mut key = [0x1234, 0x0011_2233_4455, 0x34 << 56];
        program.packet_order().apply(&mut key);
        let first = if little { 0x3412 } else { 0x1234 };
        assert_eq!(key, [first, 0x0011_2233_4455, 0x34 << 56]);
    }
}
