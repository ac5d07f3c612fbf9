#![no_main]

//! Arbitrary text through the assembler: no panics, and whatever assembles prints back to a
//! text that assembles to the same program.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(p) = sift_bytecode::assemble(text) {
        let printed = p.to_string();
        assert_eq!(sift_bytecode::assemble(&printed).as_ref(), Ok(&p));
    }
});
