//! Fuzz-style tests without a fuzzer: random and mutated bytes through decode, verify and run,
//! random text through the assembler, and well-formed random programs through the interpreter.
//! Nothing may panic; every verified program must terminate (it does by construction: each
//! step moves forward) and return a value.

mod common;

use sift_bytecode::{assemble, decode, encode, load, verify, Cache};
use sift_testgen::Rng;

fn run_all(p: &sift_bytecode::VerifiedProgram, rng: &mut Rng, cache: &mut Cache) {
    for _ in 0..20 {
        let pkt = common::random_packet(rng);
        let wire = rng.next_u32();
        let _ = p.run(cache, &pkt, wire);
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng::new(10);
    let mut cache = Cache::new();
    for _ in 0..20000 {
        let mut bytes = rng.bytes_between(0, 64);
        if rng.chance(3, 4) && bytes.len() >= 8 {
            // A valid header makes the decoder look further.
            bytes[..8].copy_from_slice(b"SFBC\x01\x00\x04\x00");
        }
        if let Ok(p) = load(&bytes) {
            run_all(&p, &mut rng, &mut cache);
        }
    }
}

#[test]
fn mutated_programs_never_panic() {
    let mut rng = Rng::new(11);
    let mut cache = Cache::new();
    let mut verified = 0;
    for _ in 0..20000 {
        let mut bytes = encode(&common::valid_program(&mut rng));
        for _ in 0..rng.range(1, 4) {
            let i = rng.index(bytes.len());
            bytes[i] = if rng.chance(1, 2) {
                rng.byte()
            } else {
                bytes[i] ^ (1 << rng.below(8))
            };
        }
        if let Ok(p) = decode(&bytes) {
            if let Ok(v) = verify(p) {
                verified += 1;
                run_all(&v, &mut rng, &mut cache);
            }
        }
    }
    assert!(verified > 1000, "only {verified} mutants verified");
}

#[test]
fn valid_random_programs_run() {
    let mut rng = Rng::new(12);
    let mut cache = Cache::new();
    for _ in 0..5000 {
        let v = verify(common::valid_program(&mut rng)).unwrap();
        run_all(&v, &mut rng, &mut cache);
    }
}

#[test]
fn random_text_never_panics() {
    let words = [
        "mov",
        "ld.b",
        "ld.h",
        "ld.w",
        "add",
        "div",
        "jeq",
        "jset",
        "switch",
        "ret",
        "ldm",
        "stm",
        "len",
        "neg",
        "r0",
        "r15",
        "r300",
        "m2",
        "[",
        "]",
        "[r1+",
        "+",
        ",",
        ":",
        "L1",
        "L1:",
        "@5",
        "#0",
        "T0",
        ".table",
        ".scratch",
        "->",
        "0x",
        "0xffffffff",
        "4294967296",
        "7",
        "\n",
        "\n",
        " ",
        ";",
        "é",
    ];
    let mut rng = Rng::new(13);
    for _ in 0..20000 {
        let n = rng.index(20);
        let text: String = (0..n)
            .map(|_| *rng.pick(&words))
            .collect::<Vec<_>>()
            .join(if rng.chance(1, 2) { " " } else { "" });
        if let Ok(p) = assemble(&text) {
            // Whatever assembles prints and assembles back to itself.
            assert_eq!(assemble(&p.to_string()).unwrap(), p, "{text:?}");
        }
    }
}
