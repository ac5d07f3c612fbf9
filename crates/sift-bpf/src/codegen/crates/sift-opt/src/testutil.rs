//! Helpers for the unit tests: canonical text and a semantic comparison on many packets.

use sift_ir::{Cache, Function, Interpreter};

use crate::rewrite::canonicalize;

/// The text of `f` with blocks and values renumbered canonically.
pub fn canonical(f: &Function) -> String {
    let mut g = f.clone();
    canonicalize(&mut g);
    g.to_string()
}

/// Packets of every length up to 80 bytes with several byte patterns (so every load is both in
/// and out of bounds somewhere), plus pseudo-random ones.
pub fn packets() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for len in 0..80usize {
        for fill in [0u8, 1, 2, 4, 6, 0x45, 0x80, 0xff] {
            out.push(vec![fill; len]);
        }
        for _ in 0..4 {
            out.push((0..len).map(|_| (next() % 8) as u8 * 0x11).collect());
            out.push((0..len).map(|_| next() as u8).collect());
        }
    }
    out
}

/// Panics unless `a` and `b` return the same value on every test packet.
pub fn assert_same_semantics(a: &Function, b: &Function) {
    let ia = Interpreter::new(a.clone()).expect("original verifies");
    let ib = Interpreter::new(b.clone()).unwrap_or_else(|e| panic!("{e}\n{b}"));
    let (mut ca, mut cb) = (Cache::new(), Cache::new());
    for p in packets() {
        for wire in [p.len() as u32, 1500] {
            let x = ia.run(&mut ca, &p, wire);
            let y = ib.run(&mut cb, &p, wire);
            assert_eq!(x, y, "packet {p:02x?}\nbefore:\n{a}\nafter:\n{b}");
        }
    }
}
