//! Differential tests: on random tables, payloads and keys, `Coprocessors` answers exactly as
//! the sift-ir reference semantics (`PatternSet::occurs`, `ValueSet::contains`).

use std::sync::Arc;

use sift_coproc::{Coprocessors, Memo};
use sift_ir::{KeyWidth, Pattern, PatternSet, ValueSet};
use sift_testgen::Rng;

/// SplitMix64: a small deterministic generator, so every failure replays from its seed.
/// A random 128-bit number.
fn u128_of(rng: &mut Rng) -> u128 {
    u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())
}

/// Bytes drawn from a small alphabet (mixed case, NUL, 0xff, non-ASCII) so that random patterns
/// overlap, nest and recur in random payloads.
const ALPHABET: &[u8] = b"abcABC\x00\xff\xe9/ ";

fn random_bytes(rng: &mut Rng, len: usize) -> Vec<u8> {
    (0..len).map(|_| *rng.pick(ALPHABET)).collect()
}

fn flip_case_randomly(rng: &mut Rng, bytes: &[u8]) -> Vec<u8> {
    bytes
        .iter()
        .map(|&b| {
            if rng.chance(50, 100) {
                b.to_ascii_uppercase()
            } else {
                b.to_ascii_lowercase()
            }
        })
        .collect()
}

const REGEXES: &[&str] = &[
    "a[bc]+A",
    "^ab",
    "bc$",
    "(?i)abc",
    r"\x00\xff",
    "(?-u:[\\x80-\\xff]){2}",
    "a.b",
    "^$",
    "c*",
    "(?s)A.{3}B",
    "b{3,}",
];

fn random_pattern_set(rng: &mut Rng, size: usize) -> PatternSet {
    let mut set = PatternSet::new();
    let mut literals: Vec<Vec<u8>> = Vec::new();
    while set.len() < size {
        let pattern = match rng.below(10) {
            // A prefix, suffix or infix of an earlier literal.
            0 | 1 if !literals.is_empty() => {
                let base = rng.pick(&literals).clone();
                let a = rng.below(base.len() as u64) as usize;
                let b = a + 1 + rng.below((base.len() - a) as u64) as usize;
                Pattern::Literal {
                    bytes: base[a..b].to_vec(),
                    nocase: rng.chance(30, 100),
                }
            }
            2 => Pattern::Regex(rng.pick(REGEXES).to_string()),
            _ => {
                let len = 1 + rng.below(6) as usize;
                Pattern::Literal {
                    bytes: random_bytes(rng, len),
                    nocase: rng.chance(30, 100),
                }
            }
        };
        if let Pattern::Literal { bytes, .. } = &pattern {
            literals.push(bytes.clone());
        }
        set.add(pattern).unwrap();
    }
    set
}

/// A random payload with some of the set's literals planted (nocase ones in random case).
fn random_payload(rng: &mut Rng, set: &PatternSet) -> Vec<u8> {
    let len = rng.below(120) as usize;
    let mut payload = random_bytes(rng, len);
    for _ in 0..rng.below(4) {
        if let Pattern::Literal { bytes, nocase } = rng.pick(set.patterns()) {
            let bytes = if *nocase {
                flip_case_randomly(rng, bytes)
            } else {
                bytes.clone()
            };
            let at = rng.below(payload.len() as u64 + 1) as usize;
            payload.splice(at..at, bytes);
        }
    }
    payload
}

#[test]
fn pattern_search_matches_reference() {
    let mut rng = Rng::new(1);
    let mut memo = Memo::new();
    let mut checks = 0u64;
    let mut hits = 0u64;
    for round in 0..300 {
        let sizes = [1, 2, 3, 5, 8, 20, 70, 150];
        let sets: Vec<Arc<PatternSet>> = (0..1 + rng.below(3))
            .map(|_| {
                let size = *rng.pick(&sizes);
                Arc::new(random_pattern_set(&mut rng, size))
            })
            .collect();
        let coproc = Coprocessors::compile(&sets, &[]).unwrap();
        assert!(!coproc.is_empty());
        for _ in 0..20 {
            let source = rng.pick(&sets).clone();
            let packet = random_payload(&mut rng, &source);
            memo.next_packet();
            // Several starts per packet (inside, at the end, past the end), several sets,
            // queried in random order and more than once.
            let starts: Vec<u32> = (0..3)
                .map(|_| rng.below(packet.len() as u64 + 4) as u32)
                .chain([0, u32::MAX])
                .collect();
            for _ in 0..60 {
                let set = rng.below(sets.len() as u64) as u32;
                let pattern = rng.below(sets[set as usize].len() as u64) as u32;
                let start = *rng.pick(&starts);
                let want = sets[set as usize].occurs(pattern, &packet, start);
                let got = coproc.contains(&mut memo, set, pattern, &packet, start);
                assert_eq!(
                    got,
                    want,
                    "round {round}: set {set} pattern {pattern:?} start {start} packet {packet:?}",
                    pattern = sets[set as usize].patterns()[pattern as usize],
                );
                checks += 1;
                hits += u64::from(got);
            }
        }
    }
    assert!(checks > 300_000);
    assert!(
        hits > checks / 5 && hits < checks * 4 / 5,
        "{hits} of {checks}"
    );
}

#[test]
fn exhaustive_queries_on_small_sets() {
    // Every pattern at every start: catches a wrong bit anywhere in the result bitsets.
    let mut rng = Rng::new(2);
    let mut memo = Memo::new();
    for _ in 0..200 {
        let size = 1 + rng.below(100) as usize;
        let set = Arc::new(random_pattern_set(&mut rng, size));
        let coproc = Coprocessors::compile(std::slice::from_ref(&set), &[]).unwrap();
        let packet = random_payload(&mut rng, &set);
        memo.next_packet();
        for start in 0..=packet.len() as u32 + 1 {
            for pattern in 0..set.len() as u32 {
                assert_eq!(
                    coproc.contains(&mut memo, 0, pattern, &packet, start),
                    set.occurs(pattern, &packet, start)
                );
            }
        }
    }
}

#[test]
fn memo_never_leaks_results_across_packets() {
    let mut set = PatternSet::new();
    let get = set
        .add(Pattern::Literal {
            bytes: b"GET".to_vec(),
            nocase: false,
        })
        .unwrap();
    let set = Arc::new(set);
    let coproc = Coprocessors::compile(&[set], &[]).unwrap();
    let mut memo = Memo::new();
    let packets: [&[u8]; 4] = [b"GET /", b"PUT /", b"xxGET", b"GEX"];
    for round in 0..3 {
        for packet in packets {
            memo.next_packet();
            for start in 0..4 {
                let want = packet
                    .get(start as usize..)
                    .is_some_and(|p| p.windows(3).any(|w| w == b"GET"));
                assert_eq!(
                    coproc.contains(&mut memo, 0, get, packet, start),
                    want,
                    "round {round} packet {packet:?} start {start}"
                );
            }
        }
    }
    // The same memo used with other tables never answers from the first tables' results.
    let mut other = PatternSet::new();
    other
        .add(Pattern::Literal {
            bytes: b"PUT".to_vec(),
            nocase: false,
        })
        .unwrap();
    let other = Coprocessors::compile(&[Arc::new(other)], &[]).unwrap();
    memo.next_packet();
    assert!(coproc.contains(&mut memo, 0, 0, b"GET", 0));
    assert!(!other.contains(&mut memo, 0, 0, b"GET", 0));
    assert!(coproc.contains(&mut memo, 0, 0, b"GET", 0));
}

#[test]
fn out_of_range_arguments_answer_zero() {
    let mut set = PatternSet::new();
    set.add(Pattern::Regex("^$".into())).unwrap();
    let sets = [Arc::new(ValueSet::new(KeyWidth::W32, [(1, 1)]))];
    let coproc = Coprocessors::compile(&[Arc::new(set)], &sets).unwrap();
    let mut memo = Memo::new();
    assert!(coproc.contains(&mut memo, 0, 0, b"ab", 2), "empty payload");
    assert!(!coproc.contains(&mut memo, 0, 0, b"ab", 3), "no payload");
    assert!(!coproc.contains(&mut memo, 0, 1, b"", 0));
    assert!(!coproc.contains(&mut memo, 7, 0, b"", 0));
    assert!(!coproc.member(7, &[1]));
    assert!(coproc.member(0, &[1]));
    assert!(!coproc.member(0, &[1, 1]));
    assert!(coproc.member(0, &[0, 0, 1]));
    let empty = Coprocessors::compile(&[], &[]).unwrap();
    assert!(empty.is_empty());
}

/// A random set of the given shape and the interesting keys to ask about.
fn random_value_set(rng: &mut Rng, width: KeyWidth, count: usize) -> ValueSet {
    let bits: u32 = match width {
        KeyWidth::W32 => 32,
        KeyWidth::W128 => 128,
    };
    let max = width.max();
    let random_key = |rng: &mut Rng| match rng.below(4) {
        // Small keys so that some sets fit the small-key bitmap.
        0 => u128_of(rng) % 70_000,
        _ => u128_of(rng) & max,
    };
    let shape = rng.below(6);
    let ranges: Vec<(u128, u128)> = (0..count)
        .map(|_| {
            let lo = random_key(rng);
            let kind = if shape == 5 { rng.below(5) } else { shape };
            match kind {
                // A single key.
                0 => (lo, lo),
                // An aligned prefix, of any length (short ones included).
                1 => {
                    let len = rng.below(u64::from(bits) + 1) as u32;
                    let host = u128::MAX.checked_shr(128 - (bits - len)).unwrap_or(0);
                    (lo & !host & max, (lo | host) & max)
                }
                // An arbitrary range, narrow or wide.
                2 => {
                    let span = if rng.chance(50, 100) {
                        u128_of(rng) % 1000
                    } else {
                        u128_of(rng) & max >> rng.below(u64::from(bits))
                    };
                    (lo, lo.saturating_add(span).min(max))
                }
                // Adjacent runs (merged into one range by ValueSet::new).
                3 => (lo, lo.saturating_add(1)),
                _ => (lo, lo.saturating_add(rng.below(3) as u128)),
            }
        })
        .collect();
    let mut set = ValueSet::new(width, ranges.clone());
    if rng.chance(3, 100) {
        set = ValueSet::new(width, [(0, max)]);
    } else if shape == 3 {
        // Literally adjacent ranges.
        let adjacent = ranges
            .iter()
            .flat_map(|&(lo, hi)| [(lo, hi), (hi.saturating_add(1), hi.saturating_add(5))]);
        set = ValueSet::new(width, adjacent);
    }
    set
}

fn key_words(width: KeyWidth, key: u128) -> Vec<u32> {
    match width {
        KeyWidth::W32 => vec![key as u32],
        KeyWidth::W128 => (0..4).rev().map(|i| (key >> (32 * i)) as u32).collect(),
    }
}

#[test]
fn set_membership_matches_reference() {
    let mut rng = Rng::new(3);
    let mut checks = 0u64;
    let mut hits = 0u64;
    for round in 0..1500 {
        let width = if rng.chance(50, 100) {
            KeyWidth::W32
        } else {
            KeyWidth::W128
        };
        let count = *rng.pick(&[0usize, 1, 2, 4, 5, 10, 100, 2000]);
        let set = Arc::new(random_value_set(&mut rng, width, count));
        let coproc = Coprocessors::compile(&[], std::slice::from_ref(&set)).unwrap();
        let max = width.max();
        let mut keys: Vec<u128> = vec![0, 1, max, max - 1, 65535, 65536];
        for &(lo, hi) in set.ranges().iter().take(300) {
            keys.extend([lo.wrapping_sub(1) & max, lo, hi, hi.wrapping_add(1) & max]);
            keys.push(lo + (hi - lo) / 2);
        }
        for _ in 0..200 {
            keys.push(u128_of(&mut rng) & max);
        }
        for key in keys {
            let words = key_words(width, key);
            assert_eq!(
                coproc.member(0, &words),
                set.contains(ValueSet::key(&words)),
                "round {round}: {width:?} key {key:#x} ranges {:?}",
                &set.ranges()[..set.ranges().len().min(8)]
            );
            checks += 1;
            hits += u64::from(set.contains(key));
        }
    }
    assert!(checks > 500_000, "{checks}");
    assert!(
        hits > checks / 5 && hits < checks * 4 / 5,
        "{hits} of {checks}"
    );
}

#[test]
fn large_sets_match_reference() {
    // Sizes where prefix tables, short-prefix bitmaps and the bisection fallback all occur.
    let mut rng = Rng::new(4);
    for (width, count) in [(KeyWidth::W32, 50_000), (KeyWidth::W128, 20_000)] {
        for _ in 0..4 {
            let set = Arc::new(random_value_set(&mut rng, width, count));
            let coproc = Coprocessors::compile(&[], std::slice::from_ref(&set)).unwrap();
            for &(lo, hi) in set.ranges() {
                for key in [
                    lo.wrapping_sub(1) & width.max(),
                    lo,
                    hi,
                    hi.wrapping_add(1) & width.max(),
                ] {
                    let words = key_words(width, key);
                    assert_eq!(coproc.member(0, &words), set.contains(key));
                }
            }
        }
    }
}

#[test]
fn keys_of_the_wrong_width_match_reference() {
    // The verifier rules these out, but the answer must still be the reference's.
    let mut rng = Rng::new(5);
    for _ in 0..200 {
        let width = if rng.chance(50, 100) {
            KeyWidth::W32
        } else {
            KeyWidth::W128
        };
        let count = 1 + rng.below(50) as usize;
        let set = Arc::new(random_value_set(&mut rng, width, count));
        let coproc = Coprocessors::compile(&[], std::slice::from_ref(&set)).unwrap();
        for n in 0..6 {
            let words: Vec<u32> = (0..n)
                .map(|_| {
                    if rng.chance(50, 100) {
                        0
                    } else {
                        rng.next_u64() as u32
                    }
                })
                .collect();
            assert_eq!(
                coproc.member(0, &words),
                set.contains(ValueSet::key(&words))
            );
        }
    }
}

#[test]
fn large_literal_sets_match_reference() {
    // Past 64 literals of 4+ bytes the window filter takes over (shorter literals stay with
    // the automaton): mixed case, shared prefixes, literals inside others, long payloads.
    let mut rng = Rng::new(6);
    let mut memo = Memo::new();
    let mut hits = 0u64;
    for _ in 0..60 {
        let size = 65 + rng.below(400) as usize;
        let mut set = random_pattern_set(&mut rng, size / 2);
        while set.len() < size {
            let len = 4 + rng.below(8) as usize;
            let mut bytes = random_bytes(&mut rng, len);
            if rng.chance(30, 100) {
                bytes.splice(0..0, b"GET /".iter().copied());
            }
            set.add(Pattern::Literal {
                bytes,
                nocase: rng.chance(30, 100),
            })
            .unwrap();
        }
        let set = Arc::new(set);
        let coproc = Coprocessors::compile(std::slice::from_ref(&set), &[]).unwrap();
        for _ in 0..20 {
            let mut packet = Vec::new();
            for _ in 0..1 + rng.below(8) {
                packet.extend(random_payload(&mut rng, &set));
            }
            memo.next_packet();
            let start = rng.below(packet.len() as u64 + 2) as u32;
            for pattern in 0..set.len() as u32 {
                let want = set.occurs(pattern, &packet, start);
                assert_eq!(
                    coproc.contains(&mut memo, 0, pattern, &packet, start),
                    want,
                    "pattern {:?} start {start} packet {packet:?}",
                    set.patterns()[pattern as usize]
                );
                hits += u64::from(want);
            }
        }
    }
    assert!(hits > 10_000, "{hits}");
}
