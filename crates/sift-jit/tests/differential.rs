//! The JIT against the bytecode interpreter on pcap-filter expressions.
//!
//! Random expressions from `sift-testgen` for four link types plus hand-picked ones (the
//! benchmark's filters, host sets that become hashed tables, port ranges that become jump
//! tables), each compiled with and without `sift-opt`, and with several JIT option sets; the
//! generated packets run whole, and a sample of them at every truncation length. Every result
//! of the single and the batch entry must equal the interpreter's.

mod common;

use common::{bytecode, compare, option_sets, GuardedPage};
use sift_bytecode::Cache;
use sift_jit::JitFilter;
use sift_testgen::{generate_packets, random_expressions};

const LINKTYPES: [u32; 4] = [1, 101, 113, 276];

fn hand_picked() -> Vec<String> {
    let mut v: Vec<String> = [
        "ip",
        "ip src 10.1.1.1",
        "ip and tcp",
        "ip src 10.1.1.1 and ip dst 10.2.2.2 and tcp src port 20 and tcp dst port 30",
        "ip src 10.4.4.4 or ip src 10.3.3.3 or ip src 10.2.2.2 or ip src 10.1.1.1",
        "tcp port 80",
        "udp port 53 or udp port 123",
        "tcp[tcpflags] & tcp-syn != 0",
        "vlan and tcp",
        "ip6 host fe80::1 and tcp",
        "ether host 00:11:22:33:44:55",
        "ip[2:2] > 1000 and len < 400",
        "tcp portrange 1000-1040",
        "ip proto 1 or ip proto 2 or ip proto 6 or ip proto 17 or ip proto 47 or ip proto 50",
        "ip[0] & 0xf != 5",
        "(ip[2:2] - ((ip[0]&0xf)<<2)) / 0 = 1",
        "ip[1] % 3 = 1 or tcp[3] * 7 > 200",
        "ip[8] << 30 = 0 and ip[9] >> 33 = 0",
        "ip6 protochain 6",
        "icmp[icmptype] = icmp-echo",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for n in [10, 100, 300] {
        v.push(
            (0..n)
                .map(|i| format!("host 10.{}.{}.{}", i % 7, i / 7 % 250, i % 250 + 1))
                .collect::<Vec<_>>()
                .join(" or "),
        );
    }
    v
}

#[test]
fn jit_equals_interpreter_on_expressions() {
    if !sift_jit::supported() {
        eprintln!("JIT not supported on this host; skipped");
        return;
    }
    let mut programs = 0;
    let mut runs = 0;
    let mut failures = Vec::new();
    let mut cache = Cache::new();
    let mut guard = GuardedPage::new();
    for lt in LINKTYPES {
        let packets = generate_packets(lt, 0x5eed + u64::from(lt), 250);
        let mut exprs = random_expressions(0xd1ff, lt, 120);
        if lt == 1 {
            exprs.extend(hand_picked());
        }
        for expr in &exprs {
            for optimize in [true, false] {
                let Some(program) = bytecode(expr, lt, optimize) else {
                    continue;
                };
                for options in option_sets() {
                    let jit = JitFilter::compile_with(&program, &options)
                        .unwrap_or_else(|e| panic!("{expr}: {e}"));
                    programs += 1;
                    for (k, p) in packets.iter().enumerate() {
                        // Every truncation of every 10th packet; the others whole.
                        match compare(
                            &mut guard,
                            &program,
                            &jit,
                            &p.data,
                            p.wire_len,
                            k % 10 == 0,
                            &mut cache,
                        ) {
                            Ok(n) => runs += n,
                            Err(e) => {
                                failures.push(format!(
                                    "[{lt}] {expr} (opt {optimize}, {options:?}): {e}"
                                ));
                                break;
                            }
                        }
                    }
                }
            }
        }
    }
    eprintln!("{programs} compiled programs, {runs} runs compared");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures[..failures.len().min(5)].join("\n\n")
    );
}
