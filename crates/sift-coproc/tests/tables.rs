//! File-based tests: the tables of the IR functions in `tests/tables/*.ir`, compiled with
//! `Coprocessors::for_function`, answer as the reference on payloads built from their
//! patterns and on the boundary keys of their sets.

use std::fs;
use std::path::Path;

use sift_coproc::{Coprocessors, Memo};
use sift_ir::{parse_function, KeyWidth, Pattern, ValueSet};

#[test]
fn tables_in_files_match_reference() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tables");
    let mut files = 0;
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "ir") {
            continue;
        }
        files += 1;
        let text = fs::read_to_string(&path).unwrap();
        let f = parse_function(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let coproc = Coprocessors::for_function(&f).unwrap();
        let mut memo = Memo::new();
        // Payloads: every literal alone, in swapped case, and all of them together.
        let mut payloads: Vec<Vec<u8>> = vec![b"GET /index HTTP/1.1\r\nHost: x\r\n".to_vec()];
        let mut all = Vec::new();
        for set in &f.patterns {
            for p in set.patterns() {
                if let Pattern::Literal { bytes, .. } = p {
                    payloads.push(bytes.clone());
                    payloads.push(bytes.iter().map(|b| b ^ 0x20).collect());
                    all.extend_from_slice(bytes);
                }
            }
        }
        payloads.push(all);
        for packet in &payloads {
            memo.next_packet();
            for (s, set) in f.patterns.iter().enumerate() {
                for p in 0..set.len() as u32 {
                    for start in 0..=packet.len() as u32 + 1 {
                        assert_eq!(
                            coproc.contains(&mut memo, s as u32, p, packet, start),
                            set.occurs(p, packet, start),
                            "{}: p{s}.{p} start {start} in {packet:?}",
                            path.display()
                        );
                    }
                }
            }
        }
        for (s, set) in f.sets.iter().enumerate() {
            let max = set.width().max();
            for &(lo, hi) in set.ranges() {
                for key in [lo.wrapping_sub(1) & max, lo, hi, hi.wrapping_add(1) & max] {
                    let words: Vec<u32> = match set.width() {
                        KeyWidth::W32 => vec![key as u32],
                        KeyWidth::W128 => (0..4).rev().map(|i| (key >> (32 * i)) as u32).collect(),
                    };
                    assert_eq!(
                        coproc.member(s as u32, &words),
                        set.contains(ValueSet::key(&words)),
                        "{}: s{s} key {key:#x}",
                        path.display()
                    );
                }
            }
        }
    }
    assert!(files > 0);
}
