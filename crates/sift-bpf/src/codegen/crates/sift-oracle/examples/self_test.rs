//! Self-test of the differential harness: unoptimized libpcap (engine under test) against optimized
//! libpcap (the oracle), over generated packets and random expressions for every link type.
//!
//! `cargo run --release -p sift-oracle --example self_test -- [SEED] [EXPRS] [PACKETS]`

use sift_oracle::diff::{run_diff, DiffOptions, DivergenceKind, LibpcapEngine};
use sift_oracle::{linktype, Oracle, OracleError, DEFAULT_SNAPLEN};

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let seed = args.first().copied().unwrap_or(1);
    let n_exprs = args.get(1).copied().unwrap_or(2000) as usize;
    let n_packets = args.get(2).copied().unwrap_or(500) as usize;
    println!("{}", sift_oracle::lib_version());
    let engine = LibpcapEngine {
        optimize: false,
        netmask: 0,
    };
    let opts = DiffOptions {
        display_limit: 20,
        ..DiffOptions::default()
    };
    let mut total_pairs = 0u64;
    let mut total_div = 0usize;
    for lt in [1u32, 101, 228, 229, 0, 108, 113, 276] {
        let exprs = sift_testgen::random_expressions(seed, lt, n_exprs);
        let packets = sift_testgen::generate_packets(lt, seed, n_packets);
        let oracle = Oracle::new(lt, DEFAULT_SNAPLEN).unwrap();
        let (mut ok, mut rej, mut all) = (0, 0, 0);
        for e in &exprs {
            match oracle.compile(e, true, 0) {
                Ok(_) => ok += 1,
                Err(OracleError::RejectsAll) => all += 1,
                Err(_) => rej += 1,
            }
        }
        let report = run_diff(&engine, lt, &exprs, &packets, &opts).unwrap();
        println!(
            "linktype {lt} ({}): accepted {ok}, rejects-all {all}, rejected {rej} ({:.1}%)",
            linktype::name(lt).unwrap_or("?"),
            100.0 * rej as f64 / exprs.len() as f64
        );
        // Per-packet hit rate: fraction of accepted expressions matching at least one packet.
        print!("{report}");
        let matched_any = exprs
            .iter()
            .filter_map(|e| oracle.compile(e, true, 0).ok())
            .filter(|p| {
                packets
                    .iter()
                    .any(|pk| p.run_bounded(&pk.data, pk.wire_len, 1_000_000).unwrap_or(0) != 0)
            })
            .count();
        println!("  accepted expressions matching at least one packet: {matched_any}/{ok}");
        // Classify verdict divergences: direction, truncated or not, and whether they vanish when
        // the packet is padded with zeros (i.e. caused by an out-of-bounds load).
        let (mut opt_only, mut unopt_only, mut truncated, mut oob, mut persistent) =
            (0, 0, 0, 0, 0);
        for d in &report.divergences {
            if let DivergenceKind::Verdict {
                packet_index,
                expected,
                ..
            } = d.kind
            {
                let pk = &packets[packet_index];
                if expected {
                    opt_only += 1;
                } else {
                    unopt_only += 1;
                }
                if pk.data.len() < pk.wire_len as usize {
                    truncated += 1;
                }
                let mut padded = pk.data.clone();
                padded.resize(4096, 0);
                let o = oracle.compile(&d.expr, true, 0).ok();
                let u = oracle.compile(&d.expr, false, 0).unwrap();
                let ov =
                    o.is_some_and(|p| p.run_bounded(&padded, 4096, 1_000_000).unwrap_or(0) != 0);
                if ov == (u.run_bounded(&padded, 4096, 1_000_000).unwrap_or(0) != 0) {
                    oob += 1;
                } else {
                    persistent += 1;
                    println!("  PERSISTENT (not an out-of-bounds effect): {d}");
                }
            }
        }
        println!(
            "  verdict divergences: optimized-only match {opt_only}, unoptimized-only match \
             {unopt_only}; on truncated packets {truncated}; vanish when zero-padded {oob}, \
             persist {persistent}"
        );
        total_pairs += report.pairs_compared;
        total_div += report.divergences.len();
    }
    println!("total pairs compared: {total_pairs}, divergences: {total_div}");
}
