//! File-based tests: every `tests/programs/*.cspf`, `*.dpf` and `*.mpf` file is a program followed by
//! expectations in comments (see `common/expectations.rs`): verdicts on packets, checked on the
//! reference evaluator and on the lifted IR, or the location of the parse error.

#[path = "common/expectations.rs"]
mod expectations;

use std::path::Path;

use expectations::Expectation;
use sift_ir::{Cache, Function, Interpreter};
use sift_seeds::{cspf, dpf, mpf, Location};

/// The reference verdict of a parsed program on a packet.
type Reference = Box<dyn Fn(&[u8]) -> bool>;

fn check(
    path: &Path,
    expects: &[Expectation],
    parsed: Result<(Function, Reference), (Location, String)>,
) -> usize {
    let name = path.display();
    match parsed {
        Err((loc, msg)) => {
            assert!(
                expects
                    .iter()
                    .any(|e| matches!(e, Expectation::Error(l) if *l == loc)),
                "{name}: unexpected error\n{msg}"
            );
            1
        }
        Ok((func, reference)) => {
            let ir = Interpreter::new(func).unwrap();
            let mut cache = Cache::new();
            let mut n = 0;
            for e in expects {
                match e {
                    Expectation::Error(loc) => {
                        panic!("{name}: parsed, but expected an error at {loc}")
                    }
                    Expectation::Verdict { accept, packet } => {
                        assert_eq!(
                            reference(packet),
                            *accept,
                            "{name}: reference on {packet:02x?}"
                        );
                        let lifted = ir.run(&mut cache, packet, packet.len() as u32) != 0;
                        assert_eq!(lifted, *accept, "{name}: lifted IR on {packet:02x?}");
                        n += 1;
                    }
                }
            }
            n
        }
    }
}

#[test]
fn program_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    let (mut files, mut cases) = (0, 0);
    for path in entries {
        let text = std::fs::read_to_string(&path).unwrap();
        let (expects, parsed) = match path.extension().and_then(|e| e.to_str()) {
            Some("cspf") => (
                expectations::parse(&text, "//"),
                cspf::parse(&text)
                    .map(|p| {
                        let f = cspf::lift(&p);
                        let r: Reference = Box::new(move |pkt| cspf::interp::run(&p, pkt).accept);
                        (f, r)
                    })
                    .map_err(|e| (e.location, e.render(&text))),
            ),
            Some("dpf") => (
                expectations::parse(&text, "#"),
                dpf::parse(&text)
                    .map(|flt| {
                        let f = dpf::lift(&flt);
                        let r: Reference = Box::new(move |pkt| dpf::eval::matches(&flt, pkt));
                        (f, r)
                    })
                    .map_err(|e| (e.location, e.render(&text))),
            ),
            Some("mpf") => (
                expectations::parse(&text, ";"),
                mpf::parse(&text)
                    .map_err(|e| (e.location, e.render(&text)))
                    .and_then(|p| {
                        let f = mpf::lift(&p).map_err(|e| {
                            (
                                e.span
                                    .map_or(Location::default(), |s| Location::of(&text, s.start)),
                                e.render(&text),
                            )
                        })?;
                        let r: Reference =
                            Box::new(move |pkt| mpf::interp::run(&p, pkt, pkt.len() as u32) != 0);
                        Ok((f, r))
                    }),
            ),
            _ => continue,
        };
        assert!(!expects.is_empty(), "{}: no expectations", path.display());
        cases += check(&path, &expects, parsed);
        files += 1;
    }
    println!("{files} files, {cases} cases");
    assert!(files >= 12);
}
