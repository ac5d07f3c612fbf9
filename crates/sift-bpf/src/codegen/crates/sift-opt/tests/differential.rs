//! Differential tests of the optimizer: for hundreds of expressions (random ones for six link
//! types and, when `../shared` is present, the shared expression lists), the optimized IR must
//! return exactly what the unoptimized IR returns on generated packets and on truncated copies of
//! them (which exercise out-of-bounds loads). The verifier runs after every pass.

mod common;

use std::path::Path;

use sift_ir::{Cache, Function, Interpreter};
use sift_opt::{try_optimize_with, Options, Stats};

const LINKTYPES: [u32; 6] = [1, 101, 113, 276, 228, 229];

#[derive(Default)]
struct Tally {
    expressions: usize,
    runs: usize,
    divergences: Vec<String>,
    before: usize,
    after: usize,
}

fn size(s: &sift_opt::Counts) -> usize {
    s.ops + s.branches + s.switch_cases
}

fn check(tally: &mut Tally, expr: &str, linktype: u32, packets: &[sift_testgen::Packet]) {
    let Ok(filter) = sift::Filter::compile(expr, linktype, 262144) else {
        return;
    };
    let orig: Function = filter.ir().clone();
    let mut opt = orig.clone();
    let opts = Options {
        verify: true,
        ..Options::default()
    };
    let stats: Stats = match try_optimize_with(&mut opt, &opts) {
        Ok(s) => s,
        Err(e) => {
            tally
                .divergences
                .push(format!("[{linktype}] {expr:?}: {e}"));
            return;
        }
    };
    tally.expressions += 1;
    tally.before += size(&stats.before);
    tally.after += size(&stats.after);
    let a = Interpreter::new(orig).expect("lowered IR verifies");
    let b = Interpreter::new(opt).expect("optimized IR verifies");
    let mut caches = (Cache::new(), Cache::new());
    for p in packets {
        tally.runs += 1;
        if let Some((pkt, x, y)) = common::compare(&a, &b, &mut caches, &p.data, p.wire_len) {
            tally.divergences.push(format!(
                "[{linktype}] {expr:?}: unoptimized {x}, optimized {y} on {:02x?}\n{}",
                pkt,
                b.function()
            ));
            return;
        }
    }
}

fn report(suite: &str, tally: &Tally) {
    eprintln!(
        "[{suite}] {} expressions, {} packets (x truncations), IR size {} -> {} ({:.1}%), {} divergences",
        tally.expressions,
        tally.runs,
        tally.before,
        tally.after,
        100.0 * tally.after as f64 / tally.before.max(1) as f64,
        tally.divergences.len()
    );
    for d in tally.divergences.iter().take(5) {
        eprintln!("{d}");
    }
    assert!(tally.divergences.is_empty(), "[{suite}] optimizer diverged");
}

#[test]
fn random_expressions_optimized_equal_unoptimized() {
    let mut tally = Tally::default();
    for (i, lt) in LINKTYPES.into_iter().enumerate() {
        let seed = 0x0b7 + i as u64;
        let exprs = sift_testgen::random_expressions(seed, lt, 250);
        let packets = sift_testgen::generate_packets(lt, seed, 200);
        for e in &exprs {
            check(&mut tally, e, lt, &packets);
        }
    }
    assert!(tally.expressions > 600, "too few expressions compiled");
    report("random", &tally);
}

fn shared_dir() -> Option<&'static Path> {
    let p = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared"));
    if p.is_dir() {
        Some(Box::leak(p.to_path_buf().into_boxed_path()))
    } else {
        eprintln!("NOTE: ../shared not found; the shared-expression suite is skipped");
        None
    }
}

#[test]
fn shared_expressions_optimized_equal_unoptimized() {
    let Some(shared) = shared_dir() else { return };
    let exprs = sift_oracle::diff::load_shared_exprs(shared.join("exprs")).unwrap();
    let random: Vec<String> = std::fs::read_to_string(shared.join("exprs/random.txt"))
        .map(|t| t.lines().map(str::to_owned).collect())
        .unwrap_or_default();
    let mut tally = Tally::default();
    for (name, lt) in [
        ("EN10MB", 1),
        ("RAW", 101),
        ("LINUX_SLL", 113),
        ("IPV4", 228),
        ("IPV6", 229),
        ("LINUX_SLL2", 276),
    ] {
        let mut list: Vec<String> = exprs
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, e)| e.clone())
            .collect();
        if lt == 1 {
            list.extend(random.iter().cloned());
        }
        let packets = sift_testgen::generate_packets(lt, 0x5a4ed ^ u64::from(lt), 150);
        for e in &list {
            check(&mut tally, e, lt, &packets);
        }
    }
    report("shared", &tally);
}

/// A handful of everyday filters, checked on many packets each.
#[test]
fn typical_expressions() {
    let mut tally = Tally::default();
    let packets = sift_testgen::generate_packets(1, 77, 2000);
    for e in [
        "tcp port 80",
        "host 10.0.0.1 or host 10.0.0.2 or host 10.0.0.3",
        "(src host 10.0.0.1 and dst host 10.0.0.2) or (src host 10.0.0.2 and dst host 10.0.0.1)",
        "port 22 or port 80 or port 443 or port 53",
        "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0 and not src net 10.0.0.0/8",
        "vlan and tcp port 80",
        "ip6 and tcp dst port 443",
        "icmp or icmp6 or arp",
        "tcp port 80 and (((ip[2:2] - ((ip[0]&0xf)<<2)) - ((tcp[12]&0xf0)>>2)) != 0)",
        "ip[100] = 1 or ip[100] = 2 or ip[100] = 3",
        "len > 100 and len <= 200 and len != 150",
        "udp[8:4] / (ip[0] & 0) = 1 or tcp",
    ] {
        check(&mut tally, e, 1, &packets);
    }
    report("typical", &tally);
}
