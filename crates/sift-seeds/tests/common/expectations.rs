//! The expectation lines of the seed-language program files (`tests/programs/*.cspf`, `*.dpf`,
//! `*.mpf`), shared by every test that reads them (also `sift`'s `seed_languages` test, which
//! includes this file by path).
//!
//! Expectations sit in comments, one per line, so the files stay valid programs:
//!
//! * `accept HEX` / `reject HEX`: the verdict on a packet (hex bytes, spaces ignored);
//! * `error LINE:COLUMN`: the file must not parse, and the error must point there.
//!
//! The comment marker is the language's: `//` in CSPF, `#` in DPF, `;` in MPF.

// Each test binary that includes this file uses part of it.
#![allow(dead_code)]

use std::path::Path;

use sift_seeds::Location;

/// One expectation line.
#[derive(Debug)]
pub enum Expectation {
    Verdict { accept: bool, packet: Vec<u8> },
    Error(Location),
}

/// The comment marker of a program file, by its extension.
pub fn comment_marker(path: &Path) -> Option<&'static str> {
    match path.extension()?.to_str()? {
        "cspf" => Some("//"),
        "dpf" => Some("#"),
        "mpf" => Some(";"),
        _ => None,
    }
}

/// Every expectation of `text`, whose comments start with `marker`. Malformed lines panic:
/// they are mistakes in the test data.
pub fn parse(text: &str, marker: &str) -> Vec<Expectation> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix(marker) else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let (Some(keyword), arg) = (words.next(), words.collect::<String>()) else {
            continue;
        };
        let packet = || -> Vec<u8> {
            assert!(arg.len() % 2 == 0, "odd number of hex digits: {line}");
            (0..arg.len() / 2)
                .map(|i| u8::from_str_radix(&arg[2 * i..2 * i + 2], 16).expect("hex packet"))
                .collect()
        };
        match keyword {
            "accept" => out.push(Expectation::Verdict {
                accept: true,
                packet: packet(),
            }),
            "reject" => out.push(Expectation::Verdict {
                accept: false,
                packet: packet(),
            }),
            "error" => {
                let (l, c) = arg.split_once(':').expect("error LINE:COLUMN");
                out.push(Expectation::Error(Location {
                    line: l.parse().expect("error line"),
                    column: c.parse().expect("error column"),
                }));
            }
            _ => {}
        }
    }
    out
}

/// The packets of the file at `path`'s `accept` / `reject` lines.
pub fn packets(path: &Path, text: &str) -> Vec<Vec<u8>> {
    let Some(marker) = comment_marker(path) else {
        return Vec::new();
    };
    parse(text, marker)
        .into_iter()
        .filter_map(|e| match e {
            Expectation::Verdict { packet, .. } => Some(packet),
            Expectation::Error(_) => None,
        })
        .collect()
}
