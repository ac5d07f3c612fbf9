#![no_main]

//! Arbitrary bytes drive the random IR generator of the translation-validation test (the same
//! file, included by path); the bytes left over, and a PRNG seeded with a hash of the input,
//! give packets. Every optimizer configuration (each pass alone, the whole pipeline) must keep
//! the verifier happy and return what the original function returns on each packet and on every
//! truncation of it.

#[path = "../../tests/common/passes.rs"]
mod passes;
#[path = "../../tests/common/random_ir/mod.rs"]
mod random_ir;

use libfuzzer_sys::fuzz_target;
use random_ir::{Bytes, SplitMix};
use sift_ir::{Cache, Interpreter};

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fuzz_target!(|data: &[u8]| {
    let mut e = Bytes::new(data);
    let program = random_ir::generate(&mut e);
    let f = &program.function;
    if let Err(err) = sift_ir::verify(f) {
        panic!("the generator made invalid IR: {err}\n{f}");
    }
    let mut packets = Vec::new();
    for _ in 0..4 {
        packets.push(random_ir::packet(&mut e, &program));
    }
    let seed = data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let mut rng = SplitMix(seed);
    for _ in 0..4 {
        packets.push(random_ir::packet(&mut rng, &program));
    }
    let orig = Interpreter::new(f.clone()).expect("verified");
    let mut cache = Cache::new();
    let mut cases = Vec::new();
    for (packet, wire) in &packets {
        for cut in 0..=packet.len() {
            let p = &packet[..cut];
            cases.push((p, *wire, orig.run(&mut cache, p, *wire)));
        }
    }
    for (name, opts) in passes::configurations() {
        let mut g = f.clone();
        if let Err(err) = sift_opt::try_optimize_with(&mut g, &opts) {
            panic!("[{name}] {err}\noriginal:\n{f}");
        }
        let opt = Interpreter::new(g).expect("verified after every pass");
        for &(p, wire, expected) in &cases {
            let got = opt.run(&mut cache, p, wire);
            assert_eq!(
                got,
                expected,
                "[{name}] packet {} wire {wire}\noriginal:\n{f}\noptimized:\n{}",
                hex(p),
                opt.function()
            );
        }
    }
});
