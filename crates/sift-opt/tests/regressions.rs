//! File-based regression tests of the optimizer: `tests/regressions/*.ir`.
//!
//! Each file is IR text (`sift_ir::parse_function`) whose comments carry the checks:
//!
//! ```text
//! ; packet <hex bytes | -> <wire length> => <result>
//! ; rounds <n>
//! ```
//!
//! Every `packet` line must give `result` on the function as written (which pins the case) and
//! after every optimizer configuration (each pass alone, and the whole pipeline), the verifier
//! running after every pass. A `rounds` line bounds the rounds any configuration may take to
//! reach its fixed point (a pass that reports a change it did not make never gets there).
//! Cases found by the randomized tests and the fuzz targets land here, reduced by hand.

mod common;

use std::path::{Path, PathBuf};

use common::passes::configurations;
use sift_ir::{parse_function, Cache, Interpreter};
use sift_opt::try_optimize_with;

struct Check {
    line: usize,
    packet: Vec<u8>,
    wire: u32,
    expected: u32,
}

struct Case {
    checks: Vec<Check>,
    max_rounds: Option<usize>,
}

fn parse_hex(s: &str) -> Option<Vec<u8>> {
    if s == "-" {
        return Some(Vec::new());
    }
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn parse_checks(path: &Path, text: &str) -> Case {
    let mut case = Case {
        checks: Vec::new(),
        max_rounds: None,
    };
    for (i, line) in text.lines().enumerate() {
        let Some(comment) = line.trim().strip_prefix(';') else {
            continue;
        };
        let words: Vec<&str> = comment.split_whitespace().collect();
        let bad = || panic!("{}:{}: malformed check {line:?}", path.display(), i + 1);
        match words.first() {
            Some(&"packet") => {
                let [_, hex, wire, "=>", result] = words[..] else {
                    bad()
                };
                case.checks.push(Check {
                    line: i + 1,
                    packet: parse_hex(hex).unwrap_or_else(|| bad()),
                    wire: wire.parse().unwrap_or_else(|_| bad()),
                    expected: result.parse().unwrap_or_else(|_| bad()),
                });
            }
            Some(&"rounds") => {
                let [_, n] = words[..] else { bad() };
                case.max_rounds = Some(n.parse().unwrap_or_else(|_| bad()));
            }
            _ => {}
        }
    }
    case
}

fn files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/regressions");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/regressions exists")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "ir"))
        .collect();
    out.sort();
    out
}

#[test]
fn regression_files() {
    let mut failures = Vec::new();
    let mut checked = 0;
    let files = files();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable");
        let f = parse_function(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let case = parse_checks(path, &text);
        assert!(
            !case.checks.is_empty() || case.max_rounds.is_some(),
            "{}: no checks",
            path.display()
        );
        let orig =
            Interpreter::new(f.clone()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut cache = Cache::new();
        for c in &case.checks {
            let got = orig.run(&mut cache, &c.packet, c.wire);
            assert_eq!(
                got,
                c.expected,
                "{}:{}: the function as written returns {got}",
                path.display(),
                c.line
            );
        }
        for (name, opts) in configurations() {
            let mut g = f.clone();
            let stats = match try_optimize_with(&mut g, &opts) {
                Ok(s) => s,
                Err(e) => {
                    failures.push(format!("{} [{name}]: {e}", path.display()));
                    continue;
                }
            };
            if let Some(max) = case.max_rounds {
                if stats.rounds > max {
                    failures.push(format!(
                        "{} [{name}]: {} rounds (at most {max} expected)\n{stats}",
                        path.display(),
                        stats.rounds
                    ));
                }
            }
            let opt = Interpreter::new(g).expect("verified after every pass");
            for c in &case.checks {
                checked += 1;
                let got = opt.run(&mut cache, &c.packet, c.wire);
                if got != c.expected {
                    failures.push(format!(
                        "{}:{} [{name}]: optimized returns {got}, expected {}\n{}",
                        path.display(),
                        c.line,
                        c.expected,
                        opt.function()
                    ));
                }
            }
        }
    }
    eprintln!("{} regression files, {checked} checks", files.len());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
