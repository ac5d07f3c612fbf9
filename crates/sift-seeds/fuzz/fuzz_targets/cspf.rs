#![no_main]

use libfuzzer_sys::fuzz_target;
use sift_seeds::cspf::{self, ByteOrder, Limits};

fuzz_target!(|data: &[u8]| {
    // The bytes as a binary program, both byte orders: whatever passes the static checks lifts
    // into verified IR.
    for order in [ByteOrder::Big, ByteOrder::Little] {
        if let Ok(p) = cspf::parse_binary(data, order, 0, &Limits::default()) {
            sift_ir::verify(&cspf::lift(&p)).unwrap();
        }
        let _ = cspf::parse_enfilter_image(data, order, &Limits::default());
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match cspf::parse(text) {
        Ok(p) => {
            sift_ir::verify(&cspf::lift(&p)).unwrap();
            assert_eq!(cspf::parse(&p.to_string()).unwrap(), p);
        }
        Err(e) => {
            assert!(e.span.start <= e.span.end && e.span.end <= text.len());
            let _ = e.render(text);
        }
    }
});
