//! Differential test against libpcap 1.10: for every expression libpcap compiles, the model
//! applied to libpcap's unoptimized program must give libpcap's optimized program (or its
//! "rejects all packets" verdict, or its optimizer error), and linearizing the recovered graph
//! without optimizing must give the unoptimized program back.
//!
//! Programs libpcap does not optimize are skipped: `protochain` (backward jumps) and Geneve
//! (a block falling through into another); libpcap's code generator turns its optimizer off for
//! both. The test tables' `*.libpcap.test` host names are skipped when `/etc/hosts` does not
//! define them: libpcap then fails them anyway, some only after a 5-second DNS timeout.

use std::collections::HashSet;
use std::fmt::Write as _;

use sift_bpf::{disasm, Insn};
use sift_libpcap::OptimizeError;
use sift_oracle::{Oracle, OracleError, DEFAULT_SNAPLEN};

const LINKTYPES: [u32; 4] = [1, 101, 113, 0];
/// The shared expression lists, beside the repository (skipped when absent).
const SHARED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/exprs");
const SEEDS: [u64; 8] = [1, 2, 3, 4, 5, 6, 7, 8];
const PER_SEED: usize = 400;

fn to_insns(p: &sift_oracle::Program) -> Vec<Insn> {
    p.instructions()
        .iter()
        .map(|i| Insn::jump(i.code, i.k, i.jt, i.jf))
        .collect()
}

fn listing(prog: &[Insn]) -> String {
    let mut s = String::new();
    for (i, insn) in prog.iter().enumerate() {
        let _ = writeln!(s, "    {}", disasm::image(*insn, i));
    }
    s
}

/// An optimized outcome, libpcap's or the model's.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Program(Vec<Insn>),
    RejectsAll,
    Error(String),
}

impl Outcome {
    fn show(&self) -> String {
        match self {
            Outcome::Program(p) => listing(p),
            Outcome::RejectsAll => "    (rejects all packets)\n".to_string(),
            Outcome::Error(e) => format!("    error: {e}\n"),
        }
    }
}

/// One named list of expressions.
struct ExprSet {
    name: String,
    exprs: Vec<String>,
}

fn file_sets() -> Vec<ExprSet> {
    let mut sets = Vec::new();
    if let Ok(tsv) = std::fs::read_to_string(format!("{SHARED}/libpcap-accept.tsv")) {
        let exprs = tsv
            .lines()
            .filter_map(|l| l.split_once('\t').map(|(_, e)| e.to_string()))
            .collect();
        sets.push(ExprSet {
            name: "libpcap-accept.tsv".into(),
            exprs,
        });
    }
    if let Ok(txt) = std::fs::read_to_string(format!("{SHARED}/random.txt")) {
        sets.push(ExprSet {
            name: "random.txt".into(),
            exprs: txt.lines().map(str::to_string).collect(),
        });
    }
    sets
}

/// Constant folding, its errors, and the peepholes' corner cases.
const ARITHMETIC: &[&str] = &[
    "len / (2 - 2) = 1",
    "len % (2 - 2) = 1",
    "len = 4 / (2 - 2)",
    "len << (ip[0] * 0 + 40) = 0",
    "len >> (ip[0] * 0 + 32) = 0",
    "len = (len * 0 + 1) << (ip[0] * 0 + 40)",
    "len = (len * 0 + 7) >> (ip[0] * 0 + 33)",
    "len >> (len - len + 33) = 1",
    "len - (2 - 2) = 5",
    "ip[0] & 0 = 0",
    "ip[0] * 0 = 0",
    "ip[0] | 0 = 3",
    "ip[0] ^ 0 = 3",
    "0 - len = 5",
    "- len = 5",
    "-(len * 0 + 4) = 0xfffffffc",
    "ip[len - len] = 4",
    "ip[len * 0 + 2] = 4 and ip[ip[0] * 0 + 3] = 5",
    "tcp[0] = 1 and tcp[(len - len) + 2] = 3",
    "len - ip[0] = 0",
    "ip[0] - 5 = 0",
    "ip[0] & 0xf0 = 0",
    "ip[0] & 0xffffffff != 0",
    "ip[0] & 0 != 0",
    "(len * 0) + ip[0] = 3",
    "(len * 0) | ip[1] = 3 or (len * 0) ^ ip[2] = 3",
    "(len * 0) / ip[1] = 0 and (len * 0) % ip[2] = 0",
    "(len * 0) << ip[1] = 0 and (len * 0) >> ip[2] = 0",
    "ip[0] > 4 and ip[0] > 4",
    "ip[0] = 4 and ip[0] != 4",
    "ip[0] = 4 or ip[0] = 5 or ip[0] = 4",
    "udp[8] = 1 or tcp[8] = 1 or udp[9] = 2",
    "ip[ip[0] & 0xf] = 1 and ip[ip[0] & 0xf] = 1",
    "ip[ip[0] & 0xf] = 1 or ip[ip[1] & 0xf] = 1",
];

/// Programs long enough for branches to need `ja` trampolines.
fn long_chains() -> Vec<String> {
    let hosts = |n: u32| -> String {
        (0..n)
            .map(|i| format!("host 10.{}.{}.1", i / 200, i % 200))
            .collect::<Vec<_>>()
            .join(" or ")
    };
    let ports = |n: u32| -> String {
        (1..=n)
            .map(|i| format!("port {i}"))
            .collect::<Vec<_>>()
            .join(" or ")
    };
    let mut out = Vec::new();
    for n in [20, 40, 60, 90] {
        out.push(hosts(n));
        out.push(ports(n));
        out.push(format!("tcp and ({})", ports(n)));
        out.push(format!("not ({}) and udp", hosts(n)));
        out.push(format!("({}) and ({})", ports(n / 2), hosts(n / 2)));
        out.push(format!("ip6 and ({})", ports(n)));
        out.push(format!("({}) and tcp[13] & 2 != 0", ports(n)));
    }
    out
}

fn generated_sets(linktype: u32) -> Vec<ExprSet> {
    let mut sets = vec![
        ExprSet {
            name: "arithmetic".into(),
            exprs: ARITHMETIC.iter().map(|e| e.to_string()).collect(),
        },
        ExprSet {
            name: "long chains".into(),
            exprs: long_chains(),
        },
    ];
    for seed in SEEDS {
        sets.push(ExprSet {
            name: format!("random_expressions(seed {seed})"),
            exprs: sift_testgen::random_expressions(seed, linktype, PER_SEED),
        });
        sets.push(ExprSet {
            name: format!("random_index_expressions(seed {seed})"),
            exprs: sift_testgen::random_index_expressions(seed, PER_SEED),
        });
    }
    sets
}

#[derive(Default)]
struct Tally {
    compared: usize,
    matched: usize,
    not_optimized: usize,
    mismatches: Vec<String>,
}

fn check(oracle: &Oracle, linktype: u32, expr: &str, tally: &mut Tally) {
    let Ok(unopt) = oracle.compile(expr, false, 0) else {
        return;
    };
    if unopt.has_backward_jumps() {
        tally.not_optimized += 1;
        return;
    }
    let unopt = to_insns(&unopt);
    match sift_libpcap::relinearize(&unopt) {
        Err(OptimizeError::FallsThrough { .. }) => {
            tally.not_optimized += 1;
            return;
        }
        Ok(again) if again == unopt => {}
        other => {
            tally.compared += 1;
            tally.mismatches.push(format!(
                "linktype {linktype}: {expr}\n  round trip of the unoptimized program failed:\n{}  got {:?}\n",
                listing(&unopt),
                other.map(|p| listing(&p))
            ));
            return;
        }
    }
    let expected = match oracle.compile(expr, true, 0) {
        Ok(p) => Outcome::Program(to_insns(&p)),
        Err(OracleError::RejectsAll) => Outcome::RejectsAll,
        Err(e) => Outcome::Error(e.message()),
    };
    let got = match sift_libpcap::optimize(&unopt) {
        Ok(p) if sift_libpcap::rejects_all(&p) => Outcome::RejectsAll,
        Ok(p) => Outcome::Program(p),
        Err(e) => Outcome::Error(e.to_string()),
    };
    tally.compared += 1;
    if got == expected {
        tally.matched += 1;
    } else {
        tally.mismatches.push(format!(
            "linktype {linktype}: {expr}\n  libpcap:\n{}  model:\n{}",
            expected.show(),
            got.show()
        ));
    }
}

#[test]
fn agrees_with_libpcap() {
    let mut total = Tally::default();
    let mut report = String::new();
    let mut unresolvable: HashSet<String> = HashSet::new();
    let files = file_sets();
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    if !hosts.to_ascii_lowercase().contains("libpcap.test") {
        for set in files.iter() {
            for e in &set.exprs {
                if e.to_ascii_lowercase().contains(".libpcap.test") {
                    unresolvable.insert(e.clone());
                }
            }
        }
    }
    for lt in LINKTYPES {
        let oracle = Oracle::new(lt, DEFAULT_SNAPLEN).expect("libpcap handle");
        for set in files.iter().chain(generated_sets(lt).iter()) {
            let mut tally = Tally::default();
            for expr in &set.exprs {
                if !unresolvable.contains(expr) {
                    check(&oracle, lt, expr, &mut tally);
                }
            }
            let _ = writeln!(
                report,
                "linktype {lt:3} {:40} {:4}/{:4} match ({} not optimized by libpcap)",
                set.name, tally.matched, tally.compared, tally.not_optimized
            );
            total.compared += tally.compared;
            total.matched += tally.matched;
            total.not_optimized += tally.not_optimized;
            total.mismatches.extend(tally.mismatches);
        }
    }
    println!("{report}");
    println!(
        "total: {}/{} match; {} programs libpcap does not optimize; {} expressions with host names this machine cannot resolve skipped",
        total.matched,
        total.compared,
        total.not_optimized,
        unresolvable.len()
    );
    for m in total.mismatches.iter().take(5) {
        println!("{m}");
    }
    assert!(total.compared > 5000, "too few expressions compared");
    assert!(
        total.mismatches.is_empty(),
        "{} mismatches (first ones above)",
        total.mismatches.len()
    );
}
