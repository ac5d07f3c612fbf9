#![no_main]

//! The demultiplexer's native matcher against its definition. Arbitrary bytes decode into a
//! key program (checks, arithmetic, loads at fixed and computed offsets, key fields at any
//! word and shift: plain loads that the matcher reads in packet byte order, adjacent ones
//! merged into one load, fields sharing bits, fields that do not fit) and a packet. For every
//! prefix of the packet, placed so that it ends at an inaccessible page (generated code is not
//! instrumented; the guard page catches its over-reads), the matcher's single and batch
//! lookups must find exactly the slot that the key extractor's key (big-endian fields),
//! converted with `KeyProgram::packet_order`, finds in a walk of the table in Rust; the table
//! holds the keys of some prefixes and up to `2 * LEAF_MAX` filler keys (enough to split its
//! root, so that the native walk follows branches).

#[path = "../../../sift-jit/tests/common/guarded_page.rs"]
mod guarded_page;

use std::num::NonZeroU64;

use guarded_page::GuardedPage;
use libfuzzer_sys::fuzz_target;
use sift_ir::BinOp;
use sift_jit::demux_matcher::{DemuxMatcher, BATCH};
use sift_jit::demux_table::{KeyHash, Table, LEAF_MAX};
use sift_jit::key_extractor::{KeyProgram, KeyRel, KeyStep, NativeExtractor, KEY_WORDS};
use sift_jit::PacketRef;

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }

    fn word(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }
}

const OPS: [BinOp; 10] = [
    BinOp::Add,
    BinOp::Sub,
    BinOp::Mul,
    BinOp::Div,
    BinOp::Mod,
    BinOp::And,
    BinOp::Or,
    BinOp::Xor,
    BinOp::Shl,
    BinOp::Shr,
];
const RELS: [KeyRel; 8] = [
    KeyRel::Eq,
    KeyRel::Ne,
    KeyRel::Gt,
    KeyRel::Ge,
    KeyRel::Lt,
    KeyRel::Le,
    KeyRel::Set,
    KeyRel::Clear,
];

/// A program of up to 24 steps; operands name earlier values (`None` before any).
fn program(b: &mut Bytes) -> Option<KeyProgram> {
    let mut steps = Vec::new();
    let mut values = 0u32;
    let steps_wanted = b.byte() % 24 + 1;
    let min_caplen = u64::from(b.byte() % 48);
    for _ in 0..steps_wanted {
        let op = b.byte();
        let operand = |b: &mut Bytes| (values > 0).then(|| u32::from(b.byte()) % values);
        let step = match op % 16 {
            0 => KeyStep::Const(b.word() % 64),
            1 => KeyStep::WireLen,
            2..=6 => KeyStep::Load {
                index: if op & 0x80 != 0 { operand(b) } else { None },
                offset: u32::from(b.byte() % 64),
                bytes: [1, 2, 4][usize::from(b.byte() % 3)],
            },
            7 => KeyStep::BinK {
                op: OPS[usize::from(b.byte() % 10)],
                a: operand(b)?,
                k: b.word() % 64,
            },
            8 => KeyStep::Bin {
                op: OPS[usize::from(b.byte() % 10)],
                a: operand(b)?,
                b: operand(b)?,
            },
            9 => KeyStep::Check {
                rel: RELS[usize::from(b.byte() % 8)],
                a: operand(b)?,
                k: b.word(),
            },
            _ => {
                // Key fields: mostly at byte boundaries (where loads of adjacent bytes line
                // up into one), sometimes anywhere.
                let shift = b.byte();
                KeyStep::Key {
                    a: operand(b)?,
                    word: b.byte() % KEY_WORDS as u8,
                    shift: if shift & 0x80 != 0 {
                        shift % 64
                    } else {
                        shift % 8 * 8
                    },
                }
            }
        };
        if !matches!(
            step,
            KeyStep::Check { .. } | KeyStep::CheckValues { .. } | KeyStep::Key { .. }
        ) {
            values += 1;
        }
        steps.push(step);
    }
    let program = KeyProgram { min_caplen, steps };
    program.validate().ok().map(|()| program)
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let Some(program) = program(&mut b) else {
        return;
    };
    let seeds = [u64::from(b.word()), u64::from(b.word())];
    let packet: Vec<u8> = b.0.iter().copied().take(96).collect();
    let extractor = NativeExtractor::compile(&program).expect("valid programs compile");
    let matcher = DemuxMatcher::<KEY_WORDS>::compile(&program).expect("valid programs compile");
    let in_passes = DemuxMatcher::<KEY_WORDS>::compile_one_pass_up_to(&program, 0).unwrap();
    let order = program.packet_order();
    let wire_len = packet.len() as u32 + 3;
    let mut guard = GuardedPage::new();
    // The matcher's key: the extractor's in packet order.
    let key_of = |p: &[u8]| {
        let mut key = [0u64; KEY_WORDS];
        extractor.extract(p, wire_len, &mut key).then(|| {
            order.apply(&mut key);
            key
        })
    };
    let mut table = Table::<KEY_WORDS>::new(KeyHash::new(seeds));
    for len in 0..=packet.len() {
        if let Some(key) = key_of(guard.place(&packet[..len])) {
            if len % 3 != 0 {
                let tag = NonZeroU64::new(len as u64 + 1).unwrap();
                table.insert(key, tag);
            }
        }
    }
    for i in 0..u64::from(seeds[0] as u16) % (2 * LEAF_MAX as u64 + 1) {
        let key = std::array::from_fn(|w| (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> w);
        table.insert(key, NonZeroU64::new(1000 + i).unwrap());
    }
    let mut want_all = Vec::new();
    for len in 0..=packet.len() {
        let p = guard.place(&packet[..len]);
        let want = key_of(p).and_then(|k| table.slot(&k));
        let got = matcher.lookup(&table, p, wire_len).map(|s| s as *const _);
        assert_eq!(
            got,
            want.map(|s| s as *const _),
            "prefix {len} of {packet:02x?}, {program:?}"
        );
        if len == packet.len() {
            want_all.push(want.and_then(|s| s.value()));
        }
    }
    // Batches read the packets where they are: only the full packet, at the guard page.
    let refs = [PacketRef::new(guard.place(&packet), wire_len)];
    for m in [&matcher, &in_passes] {
        let mut out = [None; BATCH];
        let n = m.lookup_batch(&table, &refs, &mut out);
        assert_eq!(
            out[..n],
            want_all[..],
            "batch of {packet:02x?}, {program:?}"
        );
    }
});
