//! Differential tests against libpcap 1.10: random expressions over generated traffic for every
//! supported link type (with and without libpcap's optimizer), and (when `../shared` is present)
//! the shared expression lists over the shared corpus, synthetic and real. Accept/reject
//! decisions and per-packet verdicts must agree exactly, but for the known cases listed below.

use std::path::Path;

use sift_oracle::diff::{run_diff, DiffOptions, DiffReport, Matcher};

/// sift's engine: native code (or the bytecode interpreter where there is no JIT) for the
/// optimized IR. Every packet also runs through the bytecode interpreter and the lowered IR's
/// reference interpreter, and all three must return the same value, so the optimizer, the
/// bytecode and the JIT are checked against the unoptimized lowering as well as against libpcap.
fn sift_engine(expr: &str, linktype: u32, snaplen: u32) -> Result<Matcher, String> {
    let f = sift::Filter::compile(expr, linktype, snaplen).map_err(|e| e.to_string())?;
    let expr = expr.to_owned();
    Ok(Box::new(move |pkt: &[u8], wire: u32| {
        let result = f.run(pkt, wire);
        let (interpreted, reference) = (f.run_interpreted(pkt, wire), f.run_reference(pkt, wire));
        assert!(
            result == interpreted && result == reference,
            "engines disagree on `{expr}` for packet {pkt:02x?}: {} {result}, bytecode \
             {interpreted}, lowered IR {reference}\n{}",
            f.engine(),
            f.optimized_ir()
        );
        result != 0
    }))
}

fn check(suite: &str, report: DiffReport) {
    eprintln!("[{suite}] {report}");
    assert!(
        report.divergences.is_empty(),
        "[{suite}] sift and libpcap differ for link type {}:\n{report}",
        report.linktype
    );
}

/// Every link type sift supports with its own header (12 and 14 are raw IP, as 101). The oracle
/// compiles against a savefile, as `tcpdump -r` does (which matters for NULL and LOOP, where
/// `ip6` then tests the three BSD AF_INET6 values).
const LINKTYPES: [u32; 8] = [1, 101, 113, 276, 228, 229, 0, 108];

/// The rounds of the random suite: round 0, or `SIFT_DIFF_SEEDS` rounds from
/// `SIFT_DIFF_FIRST_SEED` (default 0) for a longer soak run (each round is a new set of
/// expressions and packets per link type; a later soak starts where the last one ended).
fn soak_rounds() -> std::ops::Range<u64> {
    let var = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let first = var("SIFT_DIFF_FIRST_SEED", 0);
    first..first + var("SIFT_DIFF_SEEDS", 1)
}

/// Expressions that test a few fields with a few values again and again
/// ([`sift_testgen::random_focused_expressions`]), where libpcap's optimizer threads edges and
/// pulls tests up; the same rounds as [`random_expressions_on_generated_traffic`].
#[test]
fn focused_expressions_on_generated_traffic() {
    generated_rounds("focused", 0xf0c5, |seed, _| {
        sift_testgen::random_focused_expressions(seed, 200)
    });
}

/// Focused expressions with primitives that use libpcap's index register the ways its optimizer
/// loses track of ([`sift_testgen::random_index_expressions`]); the same rounds.
#[test]
fn index_expressions_on_generated_traffic() {
    generated_rounds("index", 0x1d8e, |seed, _| {
        sift_testgen::random_index_expressions(seed, 200)
    });
}

/// Every seed runs, and the failures are reported together at the end.
#[test]
fn random_expressions_on_generated_traffic() {
    generated_rounds("generated", 0x5eed, |seed, lt| {
        sift_testgen::random_expressions(seed, lt, 400)
    });
}

/// The rounds of [`soak_rounds`] over every link type: `expressions(seed, linktype)` against
/// libpcap on 300 packets generated from the same seed (`base` plus the link type's place and
/// the round), all rounds run before the failures are reported.
fn generated_rounds(suite: &str, base: u64, expressions: impl Fn(u64, u32) -> Vec<String>) {
    let mut failed = Vec::new();
    for round in soak_rounds() {
        for (i, lt) in LINKTYPES.into_iter().enumerate() {
            let seed = base + i as u64 + round * 0x1_0000;
            let exprs = expressions(seed, lt);
            let packets = sift_testgen::generate_packets(lt, seed, 300);
            let engine = sift_engine;
            let report = run_diff(&engine, lt, &exprs, &packets, &DiffOptions::default()).unwrap();
            eprintln!("[{suite}, seed {seed:#x}] {report}");
            if !report.divergences.is_empty() {
                failed.push(format!("seed {seed:#x}, link type {lt}:\n{report}"));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "sift and libpcap differ:\n{}",
        failed.join("\n")
    );
}

/// What soak runs found: each listed expression against libpcap on the generated packets of
/// the seed that showed the difference (`tests/data/soak_findings.txt`), and the filters on
/// which libpcap's program reads an unset index register (`tests/data/libpcap_unset_x.txt`).
#[test]
fn soak_findings_agree() {
    findings_agree(include_str!("data/soak_findings.txt"));
    findings_agree(include_str!("data/libpcap_unset_x.txt"));
}

/// The lines of the file `SIFT_FINDINGS` names (the soak lists' format), each printed with
/// whether it agrees: for sorting a soak's findings, or comparing two builds on them.
#[test]
#[ignore = "a tool: needs SIFT_FINDINGS=FILE"]
fn listed_findings_agree() {
    let path = std::env::var("SIFT_FINDINGS").expect("SIFT_FINDINGS=FILE");
    let list = std::fs::read_to_string(&path).expect("SIFT_FINDINGS names a readable file");
    let mut differ = 0;
    for line in list
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let agrees = std::panic::catch_unwind(|| findings_agree(line)).is_ok();
        differ += usize::from(!agrees);
        eprintln!("{} {line}", if agrees { "AGREE " } else { "DIFFER" });
    }
    assert_eq!(differ, 0, "lines that differ from libpcap");
}

/// Runs each `LINKTYPE SEED EXPRESSION` line of `list` against libpcap.
fn findings_agree(list: &str) {
    let mut failed = Vec::new();
    for line in list
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let mut fields = line.splitn(3, ' ');
        let (Some(lt), Some(seed), Some(expr)) = (fields.next(), fields.next(), fields.next())
        else {
            panic!("bad line {line:?}")
        };
        let lt: u32 = lt.parse().unwrap();
        let seed = u64::from_str_radix(seed.trim_start_matches("0x"), 16).unwrap();
        let packets = sift_testgen::generate_packets(lt, seed, 300);
        let exprs = [expr.to_owned()];
        let report = run_diff(&sift_engine, lt, &exprs, &packets, &DiffOptions::default()).unwrap();
        if !report.divergences.is_empty() {
            failed.push(report.to_string());
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// `tcpdump -O`: without libpcap's optimizer, truncated packets are judged by every load the
/// filter makes.
#[test]
fn unoptimized_semantics_on_generated_traffic() {
    for (i, lt) in [1u32, 101].into_iter().enumerate() {
        let seed = 0x0f0f + i as u64;
        let exprs = sift_testgen::random_expressions(seed, lt, 300);
        let packets = sift_testgen::generate_packets(lt, seed, 200);
        let engine = |expr: &str, linktype: u32, snaplen: u32| -> Result<Matcher, String> {
            let opts = sift::Options {
                optimize: false,
                ..sift::Options::new(linktype, snaplen)
            };
            let f = sift::Filter::compile_with(expr, &opts).map_err(|e| e.to_string())?;
            Ok(Box::new(move |pkt: &[u8], wire: u32| {
                let result = f.run(pkt, wire);
                assert_eq!(result, f.run_interpreted(pkt, wire));
                assert_eq!(result, f.run_reference(pkt, wire));
                result != 0
            }))
        };
        let opts = DiffOptions {
            optimize: false,
            ..DiffOptions::default()
        };
        check(
            "unoptimized",
            run_diff(&engine, lt, &exprs, &packets, &opts).unwrap(),
        );
    }
}

fn shared_dir() -> Option<&'static Path> {
    let p = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared"));
    if p.is_dir() {
        Some(Box::leak(p.to_path_buf().into_boxed_path()))
    } else {
        eprintln!("NOTE: ../shared not found; the shared-corpus differential suite is skipped");
        None
    }
}

/// The shared expressions for the link type libpcap calls `dlt_name`, and for Ethernet the
/// shared random suite too.
fn shared_list(shared: &Path, dlt_name: &str) -> Vec<String> {
    let exprs = sift_oracle::diff::load_shared_exprs(shared.join("exprs")).unwrap();
    let mut list: Vec<String> = exprs
        .into_iter()
        .filter(|(n, _)| n == dlt_name)
        .map(|(_, e)| e)
        .collect();
    if dlt_name == "EN10MB" {
        let random = std::fs::read_to_string(shared.join("exprs/random.txt")).unwrap();
        list.extend(random.lines().map(str::to_owned));
    }
    list
}

fn capture_packets(path: &Path) -> Vec<(Vec<u8>, u32)> {
    let mut r = sift_capture::CaptureReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Ok(Some(rec)) = r.next_record() {
        out.push((rec.data, rec.wire_len));
    }
    out
}

#[test]
fn shared_expressions_on_shared_corpus() {
    let Some(shared) = shared_dir() else { return };
    let synthetic = shared.join("corpus/synthetic");
    for (name, lt, file) in [
        ("EN10MB", 1, "eth.pcap"),
        ("RAW", 101, "raw.pcap"),
        ("LINUX_SLL", 113, "sll.pcap"),
        ("NULL", 0, "null.pcap"),
        ("IPV4", 228, "raw.pcap"),
        ("IPV6", 229, "raw.pcap"),
        ("LINUX_SLL2", 276, "sll.pcap"),
    ] {
        let list = shared_list(shared, name);
        let packets = capture_packets(&synthetic.join(file));
        let engine = sift_engine;
        check(
            "shared",
            run_diff(&engine, lt, &list, &packets, &DiffOptions::default()).unwrap(),
        );
    }
}

/// The shared expression lists (and, for Ethernet, the random suite) over the real captures of
/// the shared corpus (copied from tcpdump's and libpcap's test suites), grouped by link type;
/// captures of link types sift does not support are skipped here (the CLI reports them).
#[test]
fn shared_expressions_on_real_captures() {
    let Some(shared) = shared_dir() else { return };
    let real = shared.join("corpus/real");
    let manifest = std::fs::read_to_string(real.join("MANIFEST.tsv")).unwrap();
    let mut by_linktype: std::collections::BTreeMap<u32, Vec<(Vec<u8>, u32)>> = Default::default();
    for line in manifest.lines().skip(1) {
        let file = line.split('\t').next().unwrap();
        let Ok(mut reader) = sift_capture::CaptureReader::open(real.join(file)) else {
            continue;
        };
        while let Ok(Some(rec)) = reader.next_record() {
            by_linktype
                .entry(rec.linktype)
                .or_default()
                .push((rec.data, rec.wire_len));
        }
    }
    let names = [
        (0, "NULL"),
        (1, "EN10MB"),
        (101, "RAW"),
        (108, "LOOP"),
        (113, "LINUX_SLL"),
        (228, "IPV4"),
        (229, "IPV6"),
        (276, "LINUX_SLL2"),
    ];
    let mut compared = 0;
    for (lt, name) in names {
        let Some(packets) = by_linktype.get(&lt) else {
            continue;
        };
        let list = shared_list(shared, name);
        let engine = sift_engine;
        let report = run_diff(&engine, lt, &list, packets, &DiffOptions::default()).unwrap();
        compared += report.pairs_compared;
        check("real", report);
    }
    assert!(
        compared > 0,
        "no real capture of a supported link type was read"
    );
}

/// Long `or` chains, where libpcap's optimizer moves thousands of edges (sift takes shortcuts
/// through runs of decided blocks that libpcap walks one by one; the result must be the same).
#[test]
fn long_chains_on_generated_traffic() {
    let hosts: Vec<String> = (0..60)
        .map(|i| format!("host 192.168.{}.{}", i % 3, i))
        .collect();
    let ports: Vec<String> = (0..60).map(|i| format!("port {}", 20 + i * 7)).collect();
    let nets: Vec<String> = (0..40).map(|i| format!("net 10.{i}.0.0/16")).collect();
    let mixed: Vec<String> = (0..40)
        .map(|i| match i % 4 {
            0 => format!("tcp dst port {}", 1000 + i),
            1 => format!("udp src port {}", 50 + i),
            2 => format!("ip6 host 2001:db8::{i:x}"),
            _ => format!("src host 10.0.0.{i}"),
        })
        .collect();
    // Source and port pairs: past each matched source, threading passes the later source
    // tests whole (`equality_runs.rs` in sift-lower).
    let pairs: Vec<String> = (0..100)
        .map(|i| format!("(src host 10.0.0.{i} and dst port {})", 20 + i * 7))
        .collect();
    let exprs: Vec<String> = [hosts, ports, nets, mixed, pairs]
        .iter()
        .flat_map(|terms| {
            [
                terms.join(" or "),
                format!("ip and ({})", terms.join(" or ")),
                format!("not ({}) and tcp", terms.join(" or ")),
            ]
        })
        .collect();
    for lt in [1, 101] {
        let packets = sift_testgen::generate_packets(lt, 0x10c5, 400);
        let engine = sift_engine;
        check(
            "long-chains",
            run_diff(&engine, lt, &exprs, &packets, &DiffOptions::default()).unwrap(),
        );
    }
}
