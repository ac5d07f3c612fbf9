#![no_main]

use libfuzzer_sys::fuzz_target;
use sift_seeds::dpf;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match dpf::parse(text) {
        Ok(f) => {
            sift_ir::verify(&dpf::lift(&f)).unwrap();
            // Canonical atoms print as filters that parse back to them.
            for a in f.atoms() {
                let back = dpf::parse(&a.to_string()).unwrap();
                assert_eq!(back.atoms(), std::slice::from_ref(a));
            }
        }
        Err(e) => {
            assert!(e.span.start <= e.span.end && e.span.end <= text.len());
            let _ = e.render(text);
        }
    }
});
