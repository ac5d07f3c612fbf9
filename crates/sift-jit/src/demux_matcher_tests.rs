//! Native probing against the Rust walk of the same table ([`Table::slot`] on the key the
//! extractor computes), over random key sets changed by random inserts and removals.

use std::num::NonZeroU64;

use super::*;
use crate::demux_table::KeyHash;
use crate::key_extractor::NativeExtractor;
use fixtures::{four_tuple, four_tuple_at};
use sift_testgen::Rng;

/// A packet of connection `c` (a small number, so that sets collide), sometimes damaged.
fn packet(rng: &mut Rng, c: u64) -> Vec<u8> {
    let mut p = vec![0u8; 60];
    p[12] = 0x08;
    p[14] = 0x45;
    p[23] = 6;
    p[26..30].copy_from_slice(&(0x0a00_0000 | (c as u32 & 0xff)).to_be_bytes());
    p[30..34].copy_from_slice(&(0xc0a8_0000 | (c as u32 >> 8 & 0xff)).to_be_bytes());
    p[34..36].copy_from_slice(&(1024 + (c >> 16 & 0x3f) as u16).to_be_bytes());
    p[36..38].copy_from_slice(&[80u16, 443][(c >> 22 & 1) as usize].to_be_bytes());
    match rng.next_u64() % 16 {
        0 => p.truncate((rng.next_u64() % 60) as usize),
        1 => p[14] = 0x40 | (rng.next_u64() % 16) as u8,
        2 => p[20] = 0x20,
        _ => {}
    }
    p
}

/// `one_pass_keys`: as [`DemuxMatcher::compile_one_pass_up_to`] (the tables here have up to
/// a few thousand keys: 0 tests the batches' passes, the default their one pass).
fn differential<const W: usize>(program: KeyProgram, seed: u64, one_pass_keys: u64) {
    let matcher = DemuxMatcher::<W>::compile_one_pass_up_to(&program, one_pass_keys).unwrap();
    let extractor = NativeExtractor::compile(&program).unwrap();
    let order = program.packet_order();
    // The key the matcher computes: the extractor's in packet order.
    let extract = |p: &[u8], key: &mut [u64; crate::key_extractor::KEY_WORDS]| {
        let accepted = extractor.extract(p, 60, key);
        order.apply(key);
        accepted
    };
    let mut rng = Rng::new(seed);
    let mut table = Table::<W>::new(KeyHash::random());
    let (mut hits, mut compared) = (0, 0);
    for round in 0..40 {
        // Grow for a while, then shrink: tables from empty to a few thousand keys.
        let grow = round < 25;
        for _ in 0..300 {
            let c = rng.next_u64() % 5000;
            let p = packet(&mut Rng::new(c + 1), c);
            let mut key = [0u64; crate::key_extractor::KEY_WORDS];
            if !extract(&p, &mut key) {
                continue;
            }
            let key: [u64; W] = std::array::from_fn(|i| key[i]);
            if grow || rng.next_u64().is_multiple_of(4) {
                let tag = NonZeroU64::new(c + 1).unwrap();
                table.insert(key, tag);
            } else {
                table.remove(&key);
            }
        }
        table.check_layout().unwrap();
        let packets: Vec<Vec<u8>> = (0..200)
            .map(|_| {
                let c = rng.next_u64() % 6000;
                packet(&mut rng, c)
            })
            .collect();
        let mut expected = Vec::new();
        for p in &packets {
            let mut key = [0u64; crate::key_extractor::KEY_WORDS];
            let want = extract(p, &mut key)
                .then(|| table.slot(&std::array::from_fn(|i| key[i])))
                .flatten();
            let got = matcher.lookup(&table, p, 60);
            assert_eq!(got.map(|s| s as *const _), want.map(|s| s as *const _));
            hits += usize::from(got.is_some());
            compared += 1;
            expected.push(want);
        }
        let refs: Vec<PacketRef> = packets.iter().map(|p| PacketRef::new(p, 60)).collect();
        for (chunk, want) in refs.chunks(BATCH).zip(expected.chunks(BATCH)) {
            let mut out = [None; BATCH];
            assert_eq!(matcher.lookup_batch(&table, chunk, &mut out), chunk.len());
            let values: Vec<_> = want.iter().map(|s| s.and_then(Slot::value)).collect();
            assert_eq!(&out[..chunk.len()], &values[..]);
            for (r, w) in chunk.iter().zip(want) {
                let got = matcher.lookup_ref(&table, r);
                assert_eq!(got.map(|s| s as *const _), w.map(|s| s as *const _));
            }
        }
    }
    assert!(
        hits > 1000 && hits < compared - 1000,
        "{hits} of {compared}"
    );
}

#[test]
fn native_probing_equals_the_rust_walk() {
    if !crate::supported() {
        return;
    }
    for one_pass_keys in [ONE_PASS_KEYS, 0] {
        differential::<2>(four_tuple([0, 0, 1, 1]), 1, one_pass_keys);
        differential::<1>(four_tuple([0, 0, 0, 0]), 2, one_pass_keys);
        differential::<6>(four_tuple([0, 3, 5, 4]), 3, one_pass_keys);
        // Fields adjacent in the packet and the key: each pair one load in packet order
        // (both addresses; both ports), the ports after a lone address, and a pair
        // starting inside a word.
        differential::<2>(
            four_tuple_at([0, 0, 1, 1], [0, 32, 0, 16]),
            4,
            one_pass_keys,
        );
        differential::<2>(
            four_tuple_at([0, 1, 1, 1], [0, 0, 32, 48]),
            5,
            one_pass_keys,
        );
        differential::<6>(
            four_tuple_at([1, 1, 3, 3], [0, 32, 16, 32]),
            6,
            one_pass_keys,
        );
    }
}

#[test]
#[ignore = "prints the generated code"]
fn print_listing() {
    println!(
        "{}",
        DemuxMatcher::<2>::listing(&four_tuple([0, 0, 1, 1])).unwrap()
    );
}

/// The connection program's key of a packet (captured length 60) as the matcher computes it:
/// the extractor's, in packet order; `None` when the checks reject the packet.
fn connection_key(program: &KeyProgram) -> impl Fn(&[u8]) -> Option<[u64; 2]> {
    let extractor = NativeExtractor::compile(program).unwrap();
    let order = program.packet_order();
    move |p| {
        let mut key = [0u64; crate::key_extractor::KEY_WORDS];
        extractor.extract(p, 60, &mut key).then(|| {
            order.apply(&mut key);
            [key[0], key[1]]
        })
    }
}

/// `program`'s native lookups of `packets` in `table` (single, and batches in one pass and in
/// passes) find the slots `want`.
fn assert_native_finds(
    program: &KeyProgram,
    table: &Table<2>,
    packets: &[Vec<u8>],
    want: &[Option<&Slot<2>>],
) {
    let refs: Vec<PacketRef> = packets.iter().map(|p| PacketRef::new(p, 60)).collect();
    for one_pass_keys in [u64::MAX, 0] {
        let matcher = DemuxMatcher::<2>::compile_one_pass_up_to(program, one_pass_keys).unwrap();
        for (p, w) in packets.iter().zip(want) {
            let got = matcher.lookup(table, p, 60);
            assert_eq!(got.map(|s| s as *const _), w.map(|s| s as *const _));
        }
        for (chunk, w) in refs.chunks(BATCH).zip(want.chunks(BATCH)) {
            let mut out = [None; BATCH];
            assert_eq!(matcher.lookup_batch(table, chunk, &mut out), chunk.len());
            let values: Vec<_> = w.iter().map(|s| s.and_then(Slot::value)).collect();
            assert_eq!(&out[..chunk.len()], &values[..]);
        }
    }
}

/// Leaves hold up to `LEAF_MAX` keys, so the tables of `differential` have at most one
/// branch level: here a table two levels deep, probed natively (single and batch, in one
/// pass and in passes) against the Rust walk, hits and misses.
#[test]
fn deep_tables() {
    if !crate::supported() {
        return;
    }
    let program = four_tuple([0, 0, 1, 1]);
    let key_of = connection_key(&program);
    // Connection numbers spread over the 2^23 that `packet` tells apart.
    let conn = |i: u64| i.wrapping_mul(0x9e37_79b9) & ((1 << 23) - 1);
    let mut table = Table::<2>::new(KeyHash::random());
    for i in 0..200_000u64 {
        let c = conn(i);
        let key = key_of(&packet(&mut Rng::new(3), c)).expect("an undamaged packet");
        let tag = NonZeroU64::new(c + 1).unwrap();
        table.insert(key, tag);
    }
    table.check_layout().unwrap();
    assert!(table.depth() >= 2, "depth {}", table.depth());
    let mut rng = Rng::new(9);
    let packets: Vec<Vec<u8>> = (0..4000)
        .map(|_| {
            // Half installed connections, half others (mostly absent).
            let c = match rng.next_u64() % 2 {
                0 => conn(rng.next_u64() % 200_000),
                _ => rng.next_u64() % (1 << 23),
            };
            packet(&mut rng, c)
        })
        .collect();
    let want: Vec<_> = packets
        .iter()
        .map(|p| key_of(p).and_then(|k| table.slot(&k)))
        .collect();
    let hits = want.iter().filter(|w| w.is_some()).count();
    assert!(hits > 1500 && hits < 3500, "{hits} hits");
    assert_native_finds(&program, &table, &packets, &want);
}

/// Tables as deep as the trie goes ([`MAX_LEVEL`] branch levels, where a leaf only grows),
/// which random keys never reach (it takes more than `LEAF_MAX` keys sharing 37 hash bits):
/// here seeds chosen so that the hash of a connection key is its address word, and addresses
/// that share the trie's hash bits but for the two that split the root and a level-5 branch.
/// Native lookups (single, batch in one pass and in passes) against the Rust walk, hits and
/// misses, then again after removing most keys.
#[test]
fn deepest_tables() {
    if !crate::supported() {
        return;
    }
    let program = four_tuple([0, 0, 1, 1]);
    let key = connection_key(&program);
    let key_of = |p: &[u8]| key(p).expect("an undamaged packet");
    // The address word in packet order holds the destination's bytes at bits 0-31 and the
    // source's at bits 32-63. Connection `c`: its low 11 bits in the bytes below the trie's
    // hash bits (destination bytes 0 and 1), bit 11 in bit 23 (a root bit), bit 12 in bit 56
    // (level 5's).
    let packet = |c: u64| {
        let mut p = packet(&mut Rng::new(0), 0);
        p[30] = c as u8;
        p[31] = (c >> 8 & 7) as u8;
        p[32] = (c >> 11 & 1) as u8 * 0x80;
        p[29] = (c >> 12 & 1) as u8;
        p
    };
    // Every packet has the same second key word: the hash of a key is its first word.
    let hash = KeyHash::first_word_for(key_of(&packet(0))[1]);
    assert_eq!(
        hash.hash(&key_of(&packet(0x1abc))),
        key_of(&packet(0x1abc))[0]
    );
    let mut table = Table::<2>::new(hash);
    let installed = |c: u64| !c.is_multiple_of(3);
    for c in (0..1 << 13).filter(|&c| installed(c)) {
        let tag = NonZeroU64::new(c + 1).unwrap();
        table.insert(key_of(&packet(c)), tag);
    }
    let packets: Vec<Vec<u8>> = (0..1 << 13).map(packet).collect();
    for round in 0..2 {
        table.check_layout().unwrap();
        let depth = table.depth();
        assert_eq!(depth, if round == 0 { MAX_LEVEL } else { 0 });
        let want: Vec<_> = packets.iter().map(|p| table.slot(&key_of(p))).collect();
        let hits = want.iter().filter(|w| w.is_some()).count();
        assert_eq!(hits, table.len());
        assert_native_finds(&program, &table, &packets, &want);
        if round == 0 {
            // Few keys left: the table is one leaf again.
            for c in (0..1 << 13).filter(|&c| installed(c) && !c.is_multiple_of(31)) {
                assert!(table.remove(&key_of(&packet(c))).is_some());
            }
        }
    }
}

/// Keys that share their first slot (seeds that make a connection key's hash its address
/// word, whose low byte is the same for every connection): one cluster running past the end of
/// the leaf and on from its start, so that the probe's first step, its loop, the wrap and
/// misses that walk the whole cluster are all compared with the Rust walk (single, batch in
/// one pass and in passes), then again after removals inside the cluster.
#[test]
fn clustered_leaves() {
    if !crate::supported() {
        return;
    }
    let program = four_tuple([0, 0, 1, 1]);
    let key = connection_key(&program);
    let key_of = |p: &[u8]| key(p).expect("an undamaged packet");
    // Destination byte 0 is bits 0-7 of the address word (see `deepest_tables`).
    let packet = |c: u64| {
        let mut p = packet(&mut Rng::new(0), 0);
        p[30] = 250;
        p[31] = c as u8;
        p
    };
    let hash = KeyHash::first_word_for(key_of(&packet(0))[1]);
    let mut table = Table::<2>::new(hash);
    // 40 keys: a leaf of 256 slots, every probe starting at slot 250.
    for c in 0..40 {
        assert_eq!(hash.hash(&key_of(&packet(c))) & 0xff, 250);
        let tag = NonZeroU64::new(c + 1).unwrap();
        table.insert(key_of(&packet(c)), tag);
    }
    // 40 installed connections, the others absent.
    let packets: Vec<Vec<u8>> = (0..64).map(packet).collect();
    for round in 0..2 {
        table.check_layout().unwrap();
        let want: Vec<_> = packets.iter().map(|p| table.slot(&key_of(p))).collect();
        let hits = want.iter().filter(|w| w.is_some()).count();
        assert_eq!(hits, table.len());
        assert_native_finds(&program, &table, &packets, &want);
        if round == 0 {
            for c in (0..40).step_by(3) {
                assert!(table.remove(&key_of(&packet(c))).is_some());
            }
            assert_eq!(table.len(), 26);
        }
    }
}

#[test]
fn keys_wider_than_the_table_are_refused() {
    if !crate::supported() {
        return;
    }
    assert!(matches!(
        DemuxMatcher::<1>::compile(&four_tuple([0, 0, 1, 1])),
        Err(JitError::KeyWidth {
            word: 1,
            table_words: 1
        })
    ));
}
