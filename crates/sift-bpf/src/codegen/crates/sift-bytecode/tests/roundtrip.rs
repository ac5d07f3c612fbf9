//! Round-trip properties of the binary and text forms, on thousands of random programs (valid
//! or not: both forms must represent every program the types can hold).

mod common;

use sift_bytecode::{assemble, decode, encode, verify};
use sift_testgen::Rng;

#[test]
fn binary_round_trip() {
    let mut rng = Rng::new(1);
    for _ in 0..5000 {
        let p = common::arbitrary_program(&mut rng);
        let bytes = encode(&p);
        assert_eq!(decode(&bytes).unwrap(), p);
    }
}

#[test]
fn text_round_trip() {
    let mut rng = Rng::new(2);
    for _ in 0..5000 {
        let p = common::arbitrary_program(&mut rng);
        let text = p.to_string();
        let back = assemble(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, p, "{text}");
        // The printed form is canonical: printing again gives the same text.
        assert_eq!(back.to_string(), text);
    }
}

#[test]
fn valid_programs_verify_and_survive_both_forms() {
    let mut rng = Rng::new(3);
    for _ in 0..2000 {
        let p = common::valid_program(&mut rng);
        let v = verify(p.clone()).unwrap_or_else(|e| panic!("{e}\n{p}"));
        assert_eq!(decode(&v.encode()).unwrap(), p);
        assert_eq!(assemble(&v.to_string()).unwrap(), p);
    }
}

#[test]
fn accepted_bytes_re_encode_identically() {
    // Mutated encodings: whatever the decoder accepts must be canonical.
    let mut rng = Rng::new(4);
    let mut accepted = 0;
    for _ in 0..20000 {
        let mut bytes = encode(&common::arbitrary_program(&mut rng));
        for _ in 0..rng.range(1, 3) {
            if bytes.is_empty() {
                break;
            }
            let i = rng.index(bytes.len());
            match rng.below(3) {
                0 => bytes[i] = rng.byte(),
                1 => bytes.truncate(i),
                _ => bytes.insert(i, rng.byte()),
            }
        }
        if let Ok(p) = decode(&bytes) {
            accepted += 1;
            assert_eq!(encode(&p), bytes);
        }
    }
    assert!(accepted > 1000, "only {accepted} mutated inputs decoded");
}
