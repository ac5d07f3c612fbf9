#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The libpcap language, then the same text with sift's extensions.
    for extensions in [false, true] {
        match sift_syntax::parse_with(text, extensions) {
            Ok(Some(e)) => {
                // Printing must not panic, and the printed form of a tree must not be empty.
                assert!(!e.to_string().is_empty());
            }
            Ok(None) => assert!(text.trim_matches([' ', '\t', '\n', '\r']).is_empty()),
            Err(e) => {
                assert!(e.span.start <= e.span.end && e.span.end <= text.len());
                let _ = e.render(text);
            }
        }
    }
});
