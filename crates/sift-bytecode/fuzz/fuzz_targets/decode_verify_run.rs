#![no_main]

//! Arbitrary bytes: the first byte splits the input into an encoded program and a packet.
//! Decoding never panics; whatever decodes re-encodes to the same bytes; whatever verifies
//! runs to completion on the packet (and on every prefix of it) without panicking.

use libfuzzer_sys::fuzz_target;
use sift_bytecode::{decode, encode, verify, Cache};

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let split = usize::from(split).min(rest.len());
    let (packet, program) = rest.split_at(split);
    // Give the decoder a valid header often, so it looks past the magic.
    let mut bytes = b"SFBC\x01\x00\x08\x00".to_vec();
    bytes.extend_from_slice(program);
    for input in [program, &bytes[..]] {
        let Ok(p) = decode(input) else { continue };
        assert_eq!(encode(&p), input);
        let text = p.to_string();
        assert_eq!(sift_bytecode::assemble(&text).as_ref(), Ok(&p));
        if let Ok(v) = verify(p) {
            let mut cache = Cache::new();
            for n in 0..=packet.len() {
                let _ = v.run(&mut cache, &packet[..n], packet.len() as u32);
            }
        }
    }
});
