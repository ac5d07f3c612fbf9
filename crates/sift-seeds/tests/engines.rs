//! Every language through every engine: the lifted IR of each program file and paper example
//! runs on the IR interpreter, on verified bytecode, and on both after `sift_opt::optimize`; all
//! four agree with each other and with the language's reference evaluator, on generated traffic.

mod common;
#[path = "common/expectations.rs"]
mod expectations;

use std::path::Path;

use common::Engines;
use sift_seeds::{cspf, dpf, mpf};
use sift_testgen::generate_packets;

/// A lifted program, its reference verdict, and the packets its file's expectations name.
type Case = (
    String,
    sift_ir::Function,
    Box<dyn Fn(&[u8], u32) -> u32>,
    Vec<Vec<u8>>,
);

fn cases() -> Vec<Case> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let mut out: Vec<Case> = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let extra = expectations::packets(&path, &text);
        match path.extension().and_then(|e| e.to_str()) {
            Some("cspf") => {
                if let Ok(p) = cspf::parse(&text) {
                    let f = cspf::lift(&p);
                    out.push((
                        name,
                        f,
                        Box::new(move |pkt, _| {
                            if cspf::interp::run(&p, pkt).accept {
                                cspf::ACCEPT_ALL
                            } else {
                                0
                            }
                        }),
                        extra,
                    ));
                }
            }
            Some("dpf") => {
                if let Ok(flt) = dpf::parse(&text) {
                    let f = dpf::lift(&flt);
                    out.push((
                        name,
                        f,
                        Box::new(move |pkt, _| {
                            if dpf::eval::matches(&flt, pkt) {
                                dpf::ACCEPT_ALL
                            } else {
                                0
                            }
                        }),
                        extra,
                    ));
                }
            }
            Some("mpf") => {
                if let Ok(p) = mpf::parse(&text) {
                    if let Ok(f) = mpf::lift(&p) {
                        let reference = move |pkt: &[u8], w| mpf::interp::run(&p, pkt, w);
                        out.push((name, f, Box::new(reference), extra));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn every_language_on_every_engine() {
    let mut packets = generate_packets(1, 7, 3000);
    // Truncated copies, so that out-of-packet loads are exercised on every engine.
    let cut: Vec<_> = packets
        .iter()
        .filter(|p| p.data.len() > 20)
        .map(|p| {
            let mut q = p.clone();
            q.data.truncate(p.data.len() / 2);
            q
        })
        .collect();
    packets.extend(cut);
    let cases = cases();
    let mut languages = std::collections::BTreeSet::new();
    for (name, f, reference, extra) in &cases {
        let mut engines = Engines::new(f);
        let mut accepted = 0;
        let own = extra.iter().flat_map(|p| {
            // Each file packet, and every truncation of it.
            (0..=p.len()).map(move |n| (&p[..n], p.len() as u32))
        });
        let generated = packets.iter().map(|p| (&p.data[..], p.wire_len));
        let mut count = 0;
        for (data, wire_len) in generated.chain(own) {
            let v = engines.run(data, wire_len);
            assert_eq!(v, reference(data, wire_len), "{name}: engines vs reference");
            accepted += usize::from(v != 0);
            count += 1;
        }
        languages.insert(name.rsplit('.').next().unwrap().to_string());
        println!("{name}: {count} packets, {accepted} accepted, 4 engines and the reference agree");
    }
    assert_eq!(languages.len(), 3, "{languages:?}");
    assert!(cases.len() >= 8);
}
