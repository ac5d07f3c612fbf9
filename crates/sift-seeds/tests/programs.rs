//! File-based tests: every `tests/programs/*.cspf`, `*.dpf` and `*.mpf` file is a program followed by
//! expectations in comments, one per line:
//!
//! * `accept HEX` / `reject HEX`: the verdict on a packet (hex bytes, spaces ignored), checked on
//!   the reference evaluator and on the lifted IR;
//! * `error LINE:COLUMN`: the file must not parse, and the error must point there.
//!
//! Expectation lines start with `//` in CSPF files, `#` in DPF files and `;` in MPF files, so the
//! files stay valid programs.

use std::path::Path;

use sift_ir::{Cache, Function, Interpreter};
use sift_seeds::{cspf, dpf, mpf, Location};

/// The reference verdict of a parsed program on a packet.
type Reference = Box<dyn Fn(&[u8]) -> bool>;

enum Expect {
    Verdict(bool, Vec<u8>),
    Error(Location),
}

fn expectations(text: &str, marker: &str) -> Vec<Expect> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix(marker) else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let (Some(keyword), hex) = (words.next(), words.collect::<String>()) else {
            continue;
        };
        let bytes = || -> Vec<u8> {
            (0..hex.len() / 2)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex packet"))
                .collect()
        };
        match keyword {
            "accept" => out.push(Expect::Verdict(true, bytes())),
            "reject" => out.push(Expect::Verdict(false, bytes())),
            "error" => {
                let (l, c) = hex.split_once(':').expect("error LINE:COLUMN");
                out.push(Expect::Error(Location {
                    line: l.parse().unwrap(),
                    column: c.parse().unwrap(),
                }));
            }
            _ => {}
        }
    }
    out
}

fn check(
    path: &Path,
    expects: &[Expect],
    parsed: Result<(Function, Reference), (Location, String)>,
) -> usize {
    let name = path.display();
    match parsed {
        Err((loc, msg)) => {
            assert!(
                expects
                    .iter()
                    .any(|e| matches!(e, Expect::Error(l) if *l == loc)),
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
                    Expect::Error(loc) => panic!("{name}: parsed, but expected an error at {loc}"),
                    Expect::Verdict(v, pkt) => {
                        assert_eq!(reference(pkt), *v, "{name}: reference on {pkt:02x?}");
                        let lifted = ir.run(&mut cache, pkt, pkt.len() as u32) != 0;
                        assert_eq!(lifted, *v, "{name}: lifted IR on {pkt:02x?}");
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
                expectations(&text, "//"),
                cspf::parse(&text)
                    .map(|p| {
                        let f = cspf::lift(&p);
                        let r: Reference = Box::new(move |pkt| cspf::interp::run(&p, pkt).accept);
                        (f, r)
                    })
                    .map_err(|e| (e.location, e.render(&text))),
            ),
            Some("dpf") => (
                expectations(&text, "#"),
                dpf::parse(&text)
                    .map(|flt| {
                        let f = dpf::lift(&flt);
                        let r: Reference = Box::new(move |pkt| dpf::eval::matches(&flt, pkt));
                        (f, r)
                    })
                    .map_err(|e| (e.location, e.render(&text))),
            ),
            Some("mpf") => (
                expectations(&text, ";"),
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
