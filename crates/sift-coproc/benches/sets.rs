//! Set lookup cost: sift-coproc's compiled sets against the sift-ir reference (binary search
//! over sorted ranges), plus the compile time of each set.
//!
//! Run: `cargo bench -p sift-coproc --bench sets`
//!
//! Sets: IPv4 mixes of 90% random /32 addresses and 10% random prefixes (9% /24 to /31, 1% /16
//! to /23), with 10 to 1,000,000 entries; and a port set (60 single ports and 10 ranges).
//! Keys: 1,000,000 per set, half inside an entry of the set, half uniformly random.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sift_coproc::Coprocessors;
use sift_ir::{KeyWidth, ValueSet};
use sift_testgen::Rng;

fn ipv4_mix(rng: &mut Rng, entries: usize) -> Vec<(u128, u128)> {
    (0..entries)
        .map(|_| {
            let addr = rng.next_u64() as u32;
            if rng.below(10) == 0 {
                let len = match rng.below(10) {
                    0 => 16 + rng.below(8) as u32,
                    _ => 24 + rng.below(8) as u32,
                };
                let host = u32::MAX >> len;
                (u128::from(addr & !host), u128::from(addr | host))
            } else {
                (u128::from(addr), u128::from(addr))
            }
        })
        .collect()
}

fn ports(rng: &mut Rng) -> Vec<(u128, u128)> {
    let mut ranges: Vec<(u128, u128)> = (0..60)
        .map(|_| {
            let p = u128::from(rng.below(65536));
            (p, p)
        })
        .collect();
    ranges.extend((0..10).map(|_| {
        let lo = u128::from(rng.below(60000));
        (lo, lo + u128::from(rng.below(5000)))
    }));
    ranges
}

/// Keys to look up: half inside some range of the set, half uniformly random.
fn keys(rng: &mut Rng, set: &ValueSet, max: u32) -> Vec<u32> {
    let ranges = set.ranges();
    (0..1_000_000)
        .map(|i| {
            if i % 2 == 0 {
                let (lo, hi) = ranges[rng.below(ranges.len() as u64) as usize];
                (lo + u128::from(rng.next_u64()) % (hi - lo + 1)) as u32
            } else {
                (rng.next_u64() as u32) % max.saturating_add(1).max(max)
            }
        })
        .collect()
}

fn per_lookup(time: Duration, lookups: usize) -> f64 {
    time.as_secs_f64() * 1e9 / lookups as f64
}

fn best_of_3(mut run: impl FnMut()) -> Duration {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            run();
            t.elapsed()
        })
        .min()
        .unwrap()
}

/// A benchmark case: name, ranges, largest key.
type Case = (String, Vec<(u128, u128)>, u32);

fn main() {
    let mut rng = Rng::new(42);
    let mut cases: Vec<Case> = [10usize, 1_000, 100_000, 1_000_000]
        .into_iter()
        .map(|n| {
            (
                format!("IPv4 mix, {n} entries"),
                ipv4_mix(&mut rng, n),
                u32::MAX,
            )
        })
        .collect();
    cases.push(("ports, 70 entries".into(), ports(&mut rng), 65535));

    println!("| set | ranges after merging | ValueSet::new | Coprocessors::compile | sift ns/lookup | reference ns/lookup | speedup | hits |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, ranges, max) in cases {
        let t = Instant::now();
        let set = Arc::new(ValueSet::new(KeyWidth::W32, ranges));
        let build = t.elapsed();
        let t = Instant::now();
        let coproc = Coprocessors::compile(&[], std::slice::from_ref(&set)).unwrap();
        let compile = t.elapsed();
        let keys = keys(&mut rng, &set, max);

        let mut hits = 0;
        let sift = best_of_3(|| {
            hits = keys
                .iter()
                .filter(|&&k| coproc.member(0, &[black_box(k)]))
                .count();
        });
        let mut reference_hits = 0;
        let reference = best_of_3(|| {
            reference_hits = keys
                .iter()
                .filter(|&&k| set.contains(u128::from(black_box(k))))
                .count();
        });
        assert_eq!(hits, reference_hits, "sift and the reference disagree");
        let (sift, reference) = (
            per_lookup(sift, keys.len()),
            per_lookup(reference, keys.len()),
        );
        println!(
            "| {name} | {} | {:.1} ms | {:.1} ms | {sift:.1} | {reference:.1} | {:.1}x | {:.0}% |",
            set.ranges().len(),
            build.as_secs_f64() * 1e3,
            compile.as_secs_f64() * 1e3,
            reference / sift,
            hits as f64 * 100.0 / keys.len() as f64,
        );
    }
}
