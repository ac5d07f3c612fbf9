//! Long `or` chains: the optimizer must turn them into lookup tables, stay correct, and take
//! near-linear time (checked by size, not by clock: no timed assertions here; the
//! `opt_stats` example prints the times).

mod common;

use sift_ir::{Cache, Interpreter};
use sift_opt::{optimize_with, Options};

fn optimized(
    n: usize,
    term: fn(usize) -> String,
    verify: bool,
) -> (sift_ir::Function, sift_ir::Function, sift_opt::Stats) {
    let orig = common::lower_chain(n, 1, term);
    let mut f = orig.clone();
    let stats = optimize_with(
        &mut f,
        &Options {
            verify,
            ..Options::default()
        },
    );
    sift_ir::verify(&f).unwrap();
    (orig, f, stats)
}

/// An Ethernet/IPv4 packet with the given source and destination addresses.
fn ipv4(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut p = vec![0u8; 54];
    p[12] = 0x08;
    p[14] = 0x45;
    p[23] = 6;
    p[26..30].copy_from_slice(&src);
    p[30..34].copy_from_slice(&dst);
    p
}

fn addr(i: usize) -> [u8; 4] {
    let i = i as u32 + 1;
    [10, (i >> 16) as u8, (i >> 8) as u8, i as u8]
}

#[test]
fn host_chain_becomes_tables() {
    let n = 300;
    let (orig, f, stats) = optimized(n, common::host_term, true);
    eprintln!("{stats}");
    // IPv4 source and destination, ARP and RARP sender and target: at most 6 tables.
    assert!(
        stats.after.switches >= 4 && stats.after.switches <= 6,
        "{stats}"
    );
    assert!(stats.after.branches < 20, "{stats}");
    let (a, b) = (
        Interpreter::new(orig).unwrap(),
        Interpreter::new(f).unwrap(),
    );
    let (mut ca, mut cb) = (Cache::new(), Cache::new());
    for i in (0..n + 5).step_by(7) {
        for p in [ipv4(addr(i), [1, 2, 3, 4]), ipv4([1, 2, 3, 4], addr(i))] {
            for cut in [p.len(), 30, 33, 34] {
                let q = &p[..cut];
                assert_eq!(
                    a.run(&mut ca, q, 60),
                    b.run(&mut cb, q, 60),
                    "host {i} cut {cut}"
                );
            }
        }
    }
}

#[test]
fn ten_thousand_hosts() {
    // Verification after every pass is quadratic on a 120,000-block chain (sift-ir's dominator
    // computation); the result is verified once. (This test used to lower the chain with
    // sift-lower, which takes minutes on 10^4 terms; the optimizer itself takes < 1 s here.)
    // Built directly in the code generator's unoptimized shape (lowering 10^4 terms is slow in
    // sift-lower today, and this way redundant predicate elimination does all the work).
    let n = 10_000;
    let orig = common::raw_host_chain(n);
    let mut f = orig.clone();
    let stats = optimize_with(
        &mut f,
        &Options {
            verify: false,
            ..Options::default()
        },
    );
    sift_ir::verify(&f).unwrap();
    eprintln!("{stats}");
    assert!(stats.after.switch_cases >= 4 * n - 2, "{stats}");
    assert!(stats.after.branches < 20, "{stats}");
    let (a, b) = (
        Interpreter::new(orig).unwrap(),
        Interpreter::new(f).unwrap(),
    );
    let (mut ca, mut cb) = (Cache::new(), Cache::new());
    for i in [0, 1, 4999, 9999, 10_000, 20_000] {
        let p = ipv4([1, 2, 3, 4], addr(i));
        assert_eq!(a.run(&mut ca, &p, 60), b.run(&mut cb, &p, 60), "host {i}");
    }
}

#[test]
fn port_and_net_chains() {
    for term in [common::port_term as fn(usize) -> String, common::net_term] {
        let (orig, f, stats) = optimized(200, term, true);
        eprintln!("{stats}");
        assert!(stats.after.switches >= 1, "{stats}");
        assert!(
            stats.after.branches + stats.after.switch_cases <= stats.before.branches,
            "{stats}"
        );
        let packets = sift_testgen::generate_packets(1, 3, 400);
        let (a, b) = (
            Interpreter::new(orig).unwrap(),
            Interpreter::new(f).unwrap(),
        );
        let mut caches = (Cache::new(), Cache::new());
        for p in &packets {
            assert!(common::compare(&a, &b, &mut caches, &p.data, p.wire_len).is_none());
        }
    }
}
