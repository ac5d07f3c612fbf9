//! Inputs shared by the tests of the demultiplexer's native code, in this crate and in
//! `sift-demux` (its guard-page test): not part of the API proper.

use sift_ir::BinOp;

use crate::key_extractor::{KeyProgram, KeyRel, KeyStep};

/// The key program of a TCP connection over IPv4 over Ethernet: checks the ethertype, the
/// protocol and that the packet is not a later fragment, then packs the source address (bit
/// 32 of the word `word_of[0]` names), the destination address (bit 0 of `word_of[1]`), the
/// source port (bit 16 of `word_of[2]`) and the destination port (bit 0 of `word_of[3]`),
/// the ports read after the IPv4 header's length. `[0, 0, 1, 1]` is the demultiplexer's own
/// layout (addresses in one word, ports in the next: both read as one wide load each).
pub fn four_tuple(word_of: [u8; 4]) -> KeyProgram {
    four_tuple_at(word_of, [32, 0, 16, 0])
}

/// [`four_tuple`] with the four fields at bits `shift_of` of their words instead (for
/// layouts in which fields adjacent in the packet are adjacent in the key too, as
/// `[0, 32, 0, 16]` with the words `[0, 0, 1, 1]`: each pair read with one load in packet
/// order).
pub fn four_tuple_at(word_of: [u8; 4], shift_of: [u8; 4]) -> KeyProgram {
    let load = |offset, bytes| KeyStep::Load {
        index: None,
        offset,
        bytes,
    };
    let check = |a, rel, k| KeyStep::Check { rel, a, k };
    let mut steps = vec![
        load(12, 2),
        check(0, KeyRel::Eq, 0x0800),
        load(23, 1),
        check(1, KeyRel::Eq, 6),
        load(20, 2),
        check(2, KeyRel::Clear, 0x1fff),
        load(14, 1),
        KeyStep::BinK {
            op: BinOp::And,
            a: 3,
            k: 15,
        },
        KeyStep::BinK {
            op: BinOp::Shl,
            a: 4,
            k: 2,
        },
        load(26, 4),
        load(30, 4),
        KeyStep::Load {
            index: Some(5),
            offset: 14,
            bytes: 2,
        },
        KeyStep::Load {
            index: Some(5),
            offset: 16,
            bytes: 2,
        },
    ];
    for (field, &word) in word_of.iter().enumerate() {
        steps.push(KeyStep::Key {
            a: 6 + field as u32,
            word,
            shift: shift_of[field],
        });
    }
    KeyProgram {
        min_caplen: 34,
        steps,
    }
}
