//! Interpreter benchmark: ns per packet of libpcap's `bpf_filter` (on libpcap's optimized
//! program), the sift bytecode interpreter (on the optimized IR's bytecode, as the facade runs it),
//! and the IR reference interpreter (on the IR as lowered), in one run, on the
//! same generated Ethernet packets.
//!
//! Run with `CARGO_TARGET_DIR=target-bytecode cargo bench -p sift-bytecode --bench interp`.
//! Plain `std::time`; each cell is the best of 5 timed passes over the whole packet set.

use std::hint::black_box;
use std::time::Instant;

use sift_bytecode::Cache;
use sift_oracle::Oracle;

const LINKTYPE: u32 = 1;
const SNAPLEN: u32 = 262_144;

fn or_chain(n: u32) -> String {
    (1..=n)
        .map(|i| format!("host 10.0.0.{i}"))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Nanoseconds per packet: best of 5 passes, each running `f` over all packets `reps` times.
fn time(
    packets: &[sift_testgen::Packet],
    reps: usize,
    mut f: impl FnMut(&[u8], u32) -> u32,
) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let start = Instant::now();
        let mut acc = 0u32;
        for _ in 0..reps {
            for p in packets {
                acc = acc.wrapping_add(f(black_box(&p.data), black_box(p.wire_len)));
            }
        }
        black_box(acc);
        let ns = start.elapsed().as_nanos() as f64 / (reps * packets.len()) as f64;
        best = best.min(ns);
    }
    best
}

fn main() {
    let filters: Vec<String> = [
        "tcp port 80",
        "host 10.0.0.1 and udp",
        "tcp[tcpflags] & tcp-syn != 0",
        "vlan and tcp",
        "udp port 53 or udp port 123",
        "net 192.168.0.0/16 and not tcp",
        "icmp or arp",
        "tcp portrange 1000-2000",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([or_chain(20)])
    .collect();
    let packets = sift_testgen::generate_packets(LINKTYPE, 0xbe7c, 4000);
    let reps = 25;
    let oracle = Oracle::new(LINKTYPE, SNAPLEN).expect("libpcap");

    println!(
        "{} generated Ethernet packets, best of 5 passes x {reps} repetitions; ns/packet\n",
        packets.len()
    );
    println!(
        "{:<40} {:>5} {:>5} {:>5} {:>9} {:>9} {:>9} {:>8} {:>8} {:>7} {:>5}",
        "filter",
        "bpf#",
        "bc#",
        "ir#",
        "bpf ns",
        "bc ns",
        "ir ns",
        "bpf/bc",
        "ir/bc",
        "match%",
        "!bpf"
    );
    let (mut sum_bpf, mut sum_bc, mut sum_ir) = (0.0, 0.0, 0.0);
    for expr in &filters {
        let bpf = match oracle.compile(expr, true, 0) {
            Ok(p) => p,
            Err(e) => {
                println!("{expr:<40} libpcap: {e:?}");
                continue;
            }
        };
        let filter = sift::Filter::compile(expr, LINKTYPE, SNAPLEN).expect("sift compiles");
        let ir = sift_ir::Interpreter::new(filter.ir().clone()).expect("verified IR");
        // What the facade runs: bytecode for the optimized IR.
        let bc = filter.bytecode().clone();

        // The bytecode must agree with the IR exactly; disagreements with libpcap are the
        // front end's (counted in the last column; see the differential test of `sift`).
        let (mut ir_cache, mut cache) = (sift_ir::Cache::new(), Cache::new());
        let (mut matched, mut off) = (0, 0);
        for p in &packets {
            let a = bpf.run(&p.data, p.wire_len);
            let b = bc.run(&mut cache, &p.data, p.wire_len);
            let c = ir.run(&mut ir_cache, &p.data, p.wire_len);
            assert_eq!(b, c, "{expr}: bytecode and IR disagree");
            matched += usize::from(b != 0);
            off += usize::from(a != b);
        }

        let t_bpf = time(&packets, reps, |d, w| bpf.run(d, w));
        let t_bc = time(&packets, reps, |d, w| bc.run(&mut cache, d, w));
        let t_ir = time(&packets, reps, |d, w| ir.run(&mut ir_cache, d, w));
        sum_bpf += t_bpf;
        sum_bc += t_bc;
        sum_ir += t_ir;
        let name = if expr.len() > 40 {
            format!("{}...", &expr[..37])
        } else {
            expr.clone()
        };
        println!(
            "{name:<40} {:>5} {:>5} {:>5} {t_bpf:>9.2} {t_bc:>9.2} {t_ir:>9.2} {:>8.2} {:>8.2} {:>6.1}% {off:>5}",
            bpf.len(),
            bc.program().code.len(),
            filter.ir().inst_count() + filter.ir().blocks.len(),
            t_bpf / t_bc,
            t_ir / t_bc,
            100.0 * matched as f64 / packets.len() as f64
        );
    }
    println!(
        "\n{:<40} {:>5} {:>5} {:>5} {sum_bpf:>9.2} {sum_bc:>9.2} {sum_ir:>9.2} {:>8.2} {:>8.2}",
        "total",
        "",
        "",
        "",
        sum_bpf / sum_bc,
        sum_ir / sum_bc
    );
    println!("\nbpf# = libpcap instructions (optimized), bc# = bytecode instructions,");
    println!("ir# = IR instructions + terminators (the IR as lowered, before sift-opt);");
    println!("!bpf = packets where libpcap's verdict differs from sift's IR (front-end issue).");
}
