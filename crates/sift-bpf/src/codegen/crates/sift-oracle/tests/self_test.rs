//! The differential harness tested on libpcap itself: unoptimized libpcap as the engine under test
//! against optimized libpcap (the oracle), over generated packets and random expressions.
//!
//! This doubles as a record of how libpcap 1.10's optimizer changes semantics:
//! * it removes or reorders loads, so a packet on which the unoptimized program hits an
//!   out-of-bounds load (and rejects) can be accepted by the optimized one; never the other way
//!   round in our runs;
//! * constant folding turns a run-time division/modulus by zero into a compile error.

use sift_oracle::diff::{load_shared_exprs, run_diff, DiffOptions, DivergenceKind, LibpcapEngine};
use sift_oracle::linktype;

const UNOPTIMIZED: LibpcapEngine = LibpcapEngine {
    optimize: false,
    netmask: 0,
};

#[test]
fn unoptimized_vs_optimized_libpcap() {
    let mut pairs = 0;
    let mut verdicts = 0;
    for lt in [1u32, 101, 228, 229, 0, 108, 113, 276] {
        let exprs = sift_testgen::random_expressions(3, lt, 250);
        let packets = sift_testgen::generate_packets(lt, 3, 150);
        let report = run_diff(&UNOPTIMIZED, lt, &exprs, &packets, &DiffOptions::default()).unwrap();
        println!("{report}");
        pairs += report.pairs_compared;
        verdicts += report.verdict_pair_count();
        for d in &report.divergences {
            match &d.kind {
                DivergenceKind::AcceptReject {
                    libpcap_error,
                    engine_error: None,
                } => {
                    let msg = libpcap_error.as_deref().unwrap_or("");
                    assert!(msg.contains("by zero"), "{report}");
                }
                DivergenceKind::AcceptReject { .. } => panic!("{report}"),
                DivergenceKind::Verdict { expected, got, .. } => {
                    assert!(*expected && !*got, "{report}");
                }
            }
        }
    }
    assert!(pairs > 100_000, "{pairs}");
    println!("{pairs} pairs compared, {verdicts} verdict divergences");
}

#[test]
#[ignore = "the shared tables name *.libpcap.test hosts: libpcap resolves them (DNS), ~30 s offline"]
fn shared_expressions_through_the_harness() {
    let dir = std::path::Path::new("/work/shared/exprs");
    if !dir.exists() {
        return;
    }
    let exprs = load_shared_exprs(dir).unwrap();
    let mut by_lt: std::collections::BTreeMap<u32, Vec<String>> = Default::default();
    for (name, expr) in exprs {
        let lt = linktype::from_name(&name).unwrap_or_else(|| panic!("unknown linktype {name}"));
        by_lt.entry(lt).or_default().push(expr);
    }
    for (lt, exprs) in by_lt {
        let packets = sift_testgen::generate_packets(lt, 9, 100);
        let report = run_diff(&UNOPTIMIZED, lt, &exprs, &packets, &DiffOptions::default()).unwrap();
        println!("{report}");
        assert_eq!(report.expressions, exprs.len());
    }
}
