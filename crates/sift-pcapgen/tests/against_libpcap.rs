//! The block graph rebuilt from sift's unoptimized IR against libpcap's own unoptimized
//! program, over the shared expression sets and generated expressions, for link types 1
//! (Ethernet), 101 (raw IP), 113 (Linux cooked) and 0 (BSD loopback).
//!
//! `cargo test --release -p sift-pcapgen -- --nocapture` prints the counts per set and link
//! type, the most common kinds of difference and the first few differences.

use std::collections::BTreeMap;

use sift_bpf::Insn;
use sift_oracle::Oracle;
use sift_pcapgen::{from_linear, libpcap_code, same_graph, MismatchKind};

const LINKTYPES: [u32; 4] = [1, 101, 113, 0];
const SNAPLEN: u32 = 262_144;
/// The shared expression lists, beside the repository (skipped when absent).
const SHARED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/exprs");

enum Outcome {
    /// One of the two compilers rejects the expression, or it is out of scope.
    Skipped,
    Same,
    Different {
        kind: String,
        detail: String,
    },
    Unsupported(String),
}

fn compare(oracle: &Oracle, linktype: u32, expr: &str) -> Outcome {
    // sift treats these separately (block parameters, loops).
    if expr.contains("protochain") || expr.contains("geneve") {
        return Outcome::Skipped;
    }
    // libpcap's test host names are in no hosts file here, so both compilers reject them,
    // after the resolver's 5 s timeout now and then.
    if expr.to_ascii_lowercase().contains(".libpcap.test") {
        return Outcome::Skipped;
    }
    // sift first: it rejects the host names it cannot resolve without asking DNS, where
    // libpcap may wait for the resolver.
    let opts = sift::Options {
        optimize: false,
        ..sift::Options::new(linktype, SNAPLEN)
    };
    let Ok(ir) = sift::compile_ir(expr, &opts) else {
        return Outcome::Skipped;
    };
    let Ok(program) = oracle.compile(expr, false, 0) else {
        return Outcome::Skipped;
    };
    let insns: Vec<Insn> = program
        .instructions()
        .iter()
        .map(|i| Insn::jump(i.code, i.k, i.jt, i.jf))
        .collect();
    let theirs = from_linear(&insns);
    let ours = match libpcap_code(&ir) {
        Ok(g) => g,
        Err(e) => return Outcome::Unsupported(e.what.split(" (").next().unwrap_or("").to_string()),
    };
    match same_graph(&ours, 0, &theirs, 0) {
        Ok(()) => Outcome::Same,
        Err(m) => {
            let mnemonic = |s: Option<Insn>| {
                s.map_or("(none)".to_string(), |s| {
                    let t = sift_pcapgen::statement_text(s);
                    t.split_whitespace().next().unwrap_or("").to_string()
                })
            };
            let kind = match &m.kind {
                MismatchKind::Statement { a, b, .. } => {
                    format!("statement {} vs {}", mnemonic(*a), mnemonic(*b))
                }
                MismatchKind::Exit { a, b } => format!(
                    "exit {} vs {}",
                    a.map_or("(none)".into(), |e| e.shape().to_string()),
                    b.map_or("(none)".into(), |e| e.shape().to_string())
                ),
                MismatchKind::Shape { .. } => "shape".to_string(),
                MismatchKind::Dangling => "dangling".to_string(),
            };
            Outcome::Different {
                kind,
                detail: m.to_string(),
            }
        }
    }
}

#[derive(Default)]
struct Tally {
    same: usize,
    different: usize,
    unsupported: usize,
    skipped: usize,
}

#[derive(Default)]
struct Report {
    /// Per (set, link type).
    tallies: BTreeMap<(String, u32), Tally>,
    /// Kind of difference or unsupported construct -> count and first example.
    kinds: BTreeMap<String, (usize, String)>,
    /// The first few differences, whatever their kind.
    first: Vec<String>,
}

impl Report {
    fn run(&mut self, set: &str, linktype: u32, oracle: &Oracle, exprs: &[String]) {
        let tally = self.tallies.entry((set.to_string(), linktype)).or_default();
        for expr in exprs {
            let outcome = compare(oracle, linktype, expr);
            let (key, example) = match outcome {
                Outcome::Skipped => {
                    tally.skipped += 1;
                    continue;
                }
                Outcome::Same => {
                    tally.same += 1;
                    continue;
                }
                Outcome::Different { kind, detail } => {
                    tally.different += 1;
                    (kind, detail)
                }
                Outcome::Unsupported(what) => {
                    tally.unsupported += 1;
                    (format!("unsupported: {what}"), String::new())
                }
            };
            let example = format!("[{linktype}] {expr:?}: {example}");
            if self.first.len() < 5 {
                self.first.push(format!("{key}: {example}"));
            }
            let entry = self.kinds.entry(key).or_insert((0, String::new()));
            entry.0 += 1;
            if entry.1.is_empty() {
                entry.1 = example;
            }
        }
    }

    fn total(&self) -> Tally {
        let mut t = Tally::default();
        for x in self.tallies.values() {
            t.same += x.same;
            t.different += x.different;
            t.unsupported += x.unsupported;
            t.skipped += x.skipped;
        }
        t
    }

    fn print(&self) {
        println!(
            "{:<16} {:>4} {:>6} {:>10} {:>12} {:>8}",
            "set", "lt", "same", "different", "unsupported", "skipped"
        );
        for ((set, lt), t) in &self.tallies {
            println!(
                "{set:<16} {lt:>4} {:>6} {:>10} {:>12} {:>8}",
                t.same, t.different, t.unsupported, t.skipped
            );
        }
        let t = self.total();
        println!(
            "{:<16} {:>4} {:>6} {:>10} {:>12} {:>8}",
            "total", "", t.same, t.different, t.unsupported, t.skipped
        );
        println!("\nfirst differences:");
        for d in &self.first {
            println!("  {d}");
        }
        let mut kinds: Vec<_> = self.kinds.iter().collect();
        kinds.sort_by_key(|(_, (n, _))| std::cmp::Reverse(*n));
        println!("\nkinds of difference (count, first example):");
        for (kind, (n, example)) in kinds {
            println!("{n:>5}  {kind}\n       {example}");
        }
    }
}

fn lines(path: &str) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// Hand-picked expressions: every arithmetic operator, negation, nested and transport-layer
/// indexes, comparisons of constants, link-layer tests, encapsulations.
const FOCUSED: &[&str] = &[
    "ip[0] * 3 / 2 % 5 ^ 1 << 2 >> 1 | 4 & 7 - 1 + 2 = 0",
    "-ip[0] = -len",
    "ip6[40] = 6 and icmp6[0] = 128",
    "vlan 10 and ip[2:2] > 100",
    "mpls 5 and udp[8] = 1",
    "pppoes 3 and ip[0] = 4",
    "ip broadcast or ether multicast or ip multicast or ip6 multicast",
    "llc",
    "tcp[tcp[0] & 3] = 1",
    "ip[ip[ip[0]]] = ip[1]",
    "ether[len - 4] = 0",
    "udp[0:4] > len",
    "5 > 3",
    "1 = 1 or 2 > 1",
    "ether[0] & 1 != 0",
    "arp[7] = 2",
    "sctp[sctp[1] + 1:2] >= 3",
    "ip[0] - ip[1] - ip[2] - ip[3] - ip[4] - ip[5] - ip[6] - ip[7] - ip[8] - ip[9] = 0",
    "inbound or outbound",
    "ether host 1:2:3:4:5:6 and net 10.0.0.0/8",
    "ip6 net ff00::/8 or portrange 1-100",
    "decnet host 1.2 or iso or stp or atalk or pppoed or rarp",
    "ip proto \\tcp and tcp[tcpflags] & (tcp-syn|tcp-ack) = tcp-syn",
    "icmp6[icmp6type] = icmp6-echo",
    "vlan and vlan and ip",
    "mpls and mpls 3 and tcp",
    "byte 3 < 4 and byte 2 > 1 and byte 1 = 0",
    "ip[0] != 1 and ip[0] < 2 and ip[0] <= 3",
    "ether proto 0x1234 or arp src host 1.2.3.4",
    "ip host 1.2.3.4 and not src net 10",
    "less 10 or greater 20",
];

#[test]
fn rebuilt_code_is_libpcaps() {
    let random = lines(&format!("{SHARED}/random.txt"));
    let accept_text = std::fs::read_to_string(format!("{SHARED}/libpcap-accept.tsv"))
        .expect("libpcap-accept.tsv");
    let accept: Vec<String> = sift_oracle::diff::parse_tsv(&accept_text)
        .expect("well-formed TSV")
        .into_iter()
        .map(|(_, expr)| expr)
        .collect();
    let index: Vec<String> = [1, 2]
        .into_iter()
        .flat_map(|seed| sift_testgen::random_index_expressions(seed, 150))
        .collect();

    let mut report = Report::default();
    for lt in LINKTYPES {
        let oracle = Oracle::new(lt, SNAPLEN).expect("libpcap handle");
        report.run("random.txt", lt, &oracle, &random);
        report.run("libpcap-accept", lt, &oracle, &accept);
        report.run("index", lt, &oracle, &index);
        let focused: Vec<String> = FOCUSED.iter().map(|e| e.to_string()).collect();
        report.run("focused", lt, &oracle, &focused);
        let generated: Vec<String> = [1, 2]
            .into_iter()
            .flat_map(|seed| sift_testgen::random_expressions(seed, lt, 150))
            .collect();
        report.run("generated", lt, &oracle, &generated);
    }
    report.print();

    // The one remaining difference: `byte N | V` (4), which libpcap emits as `or #V; jeq #0`
    // on whatever A holds and sift lowers to a constant test (`ld #0; jeq #0`); the lowering
    // keeps such filters off the statement model. (Link type 0's IPv6 families in gencode's
    // order, 30 first, and `less`/`greater` with their constant first, told from relations on
    // `len` by that, were the others.)
    let total = report.total();
    assert_eq!(total.unsupported, 0, "IR the translation does not know");
    assert!(
        total.same >= 4229,
        "fewer programs than before match libpcap's ({}); raise the floor when it grows",
        total.same
    );
}
