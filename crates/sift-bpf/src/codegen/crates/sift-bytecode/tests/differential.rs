//! Differential test: the bytecode interpreter against the IR's reference interpreter.
//!
//! pcap-filter expressions (random ones from `sift-testgen` and, when `../shared` is present,
//! the shared lists) are lowered to IR by the `sift` facade, compiled to bytecode, and both
//! engines run on generated packets plus truncated copies of them. Every verdict must agree
//! (zero divergences); the encoded program must also decode, verify and round-trip through text.

use std::path::Path;

use sift_bytecode::{assemble, compile, decode, load, Cache};
use sift_testgen::{generate_packets, random_expressions, truncate_packet, Packet, Rng};

const SNAPLEN: u32 = 262_144;
const LINKTYPES: [(u32, &str); 4] = [
    (1, "EN10MB"),
    (101, "RAW"),
    (113, "LINUX_SLL"),
    (276, "LINUX_SLL2"),
];

#[derive(Default)]
struct Stats {
    expressions: usize,
    compiled: usize,
    runs: usize,
    max_insns: usize,
    spilling: usize,
    divergences: Vec<String>,
}

fn packets(linktype: u32, seed: u64) -> Vec<Packet> {
    let base = generate_packets(linktype, seed, 300);
    let mut rng = Rng::new(seed ^ 0x7e57);
    let mut out = base.clone();
    for p in &base {
        out.push(truncate_packet(&mut rng, p));
        out.push(truncate_packet(&mut rng, p));
    }
    out
}

fn check_expr(expr: &str, linktype: u32, packets: &[Packet], stats: &mut Stats) {
    stats.expressions += 1;
    let Ok(filter) = sift::Filter::compile(expr, linktype, SNAPLEN) else {
        return; // invalid expressions are the front end's business
    };
    let ir = filter.ir();
    let program = match compile(ir) {
        Ok(p) => p,
        Err(e) => {
            stats
                .divergences
                .push(format!("[{linktype}] {expr:?}: codegen failed: {e}"));
            return;
        }
    };
    stats.compiled += 1;
    stats.max_insns = stats.max_insns.max(program.program().code.len());
    if program.program().scratch_words > 0 {
        stats.spilling += 1;
    }

    // The program survives the trip across a boundary, in binary and in text.
    let bytes = program.encode();
    assert_eq!(&decode(&bytes).unwrap(), program.program(), "{expr}");
    let reloaded = load(&bytes).unwrap();
    let text = program.to_string();
    assert_eq!(&assemble(&text).unwrap(), program.program(), "{expr}");

    let reference = sift_ir::Interpreter::new(ir.clone()).unwrap();
    let mut ir_cache = sift_ir::Cache::new();
    let mut cache = Cache::new();
    for p in packets {
        let want = reference.run(&mut ir_cache, &p.data, p.wire_len);
        let got = program.run(&mut cache, &p.data, p.wire_len);
        let again = reloaded.run(&mut cache, &p.data, p.wire_len);
        stats.runs += 1;
        if want != got || got != again {
            stats.divergences.push(format!(
                "[{linktype}] {expr:?}: IR {want}, bytecode {got} (reloaded {again}) on {} bytes \
                 (wire {}): {:02x?}\n{text}",
                p.data.len(),
                p.wire_len,
                p.data
            ));
            return;
        }
    }
}

fn report(suite: &str, stats: &Stats) {
    eprintln!(
        "[{suite}] {} expressions, {} compiled, {} runs, largest program {} instructions, \
         {} programs spill, {} divergences",
        stats.expressions,
        stats.compiled,
        stats.runs,
        stats.max_insns,
        stats.spilling,
        stats.divergences.len()
    );
    for d in stats.divergences.iter().take(5) {
        eprintln!("{d}");
    }
    assert!(stats.divergences.is_empty(), "[{suite}] divergences");
}

#[test]
fn random_expressions_agree_with_the_ir_interpreter() {
    let mut stats = Stats::default();
    for (i, (lt, _)) in LINKTYPES.into_iter().enumerate() {
        let seed = 0xb17e + i as u64;
        let pkts = packets(lt, seed);
        for expr in random_expressions(seed, lt, 300) {
            check_expr(&expr, lt, &pkts, &mut stats);
        }
    }
    report("random", &stats);
    assert!(stats.compiled > 600, "too few valid expressions");
}

#[test]
fn shared_expressions_agree_with_the_ir_interpreter() {
    let shared = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared"));
    if !shared.is_dir() {
        eprintln!("NOTE: ../shared not found; the shared expression lists are skipped");
        return;
    }
    let exprs = sift_oracle::diff::load_shared_exprs(shared.join("exprs")).unwrap();
    let random: Vec<String> = std::fs::read_to_string(shared.join("exprs/random.txt"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let mut stats = Stats::default();
    for (i, (lt, name)) in LINKTYPES.into_iter().enumerate() {
        let pkts = packets(lt, 0x5ade + i as u64);
        let mut list: Vec<&str> = exprs
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, e)| e.as_str())
            .collect();
        if lt == 1 {
            list.extend(random.iter().map(String::as_str));
        }
        for expr in list {
            check_expr(expr, lt, &pkts, &mut stats);
        }
    }
    report("shared", &stats);
}
