//! sift's eBPF in the running kernel: every program is loaded with `bpf(BPF_PROG_LOAD)` (so
//! the verifier accepts it) and run with `BPF_PROG_TEST_RUN` as a socket filter, an XDP program
//! and a tc classifier; each verdict is compared with libpcap 1.10's for the same expression.
//! Without privilege the tests fail loudly (or skip loudly with `SIFT_SKIP_KERNEL_TESTS=1`).

#![cfg(target_os = "linux")]

mod common;

use common::*;
use sift_ebpf::{kernel, Options, ProgramType};

fn check(suite: &str, tally: &Tally) {
    eprintln!("[{suite}] {tally}");
    assert!(
        tally.mismatches.is_empty(),
        "[{suite}] verdicts differ from libpcap:\n{}",
        tally
            .mismatches
            .iter()
            .filter(|m| !m.is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(tally.runs > 0, "[{suite}] nothing ran");
    assert!(
        tally.ir_divergences.is_empty(),
        "[{suite}] the IR and libpcap disagree:\n{}",
        tally.ir_divergences[..tally.ir_divergences.len().min(10)].join("\n")
    );
}

#[test]
fn shared_expressions_on_shared_corpus() {
    if !kernel_available() {
        return;
    }
    let Some(shared) = shared_dir() else {
        eprintln!("NOTE: ../shared not found; the shared-corpus kernel test is skipped");
        return;
    };
    let packets = capture_packets(&shared.join("corpus/synthetic/eth.pcap"));
    let mut exprs: Vec<String> = sift_oracle::diff::load_shared_exprs(shared.join("exprs"))
        .unwrap()
        .into_iter()
        .filter(|(lt, _)| lt == "EN10MB")
        .map(|(_, e)| e)
        .collect();
    exprs.extend(
        std::fs::read_to_string(shared.join("exprs/random.txt"))
            .unwrap()
            .lines()
            .map(str::to_owned),
    );
    let oracle = sift_oracle::Oracle::new(ETHERNET, SNAPLEN).unwrap();
    let mut tally = Tally::default();
    for e in &exprs {
        compare(&oracle, e, true, &packets, &mut tally);
    }
    check("shared corpus", &tally);
}

#[test]
fn random_expressions_on_generated_packets() {
    if !kernel_available() {
        return;
    }
    let packets = usable(
        sift_testgen::generate_packets(ETHERNET, 0xeb9f, 600)
            .into_iter()
            .map(|p| p.data)
            .collect(),
    );
    let oracle = sift_oracle::Oracle::new(ETHERNET, SNAPLEN).unwrap();
    let mut tally = Tally::default();
    for e in sift_testgen::random_expressions(0xeb9f, ETHERNET, 300) {
        compare(&oracle, &e, true, &packets, &mut tally);
    }
    check("generated", &tally);
}

/// The lowered IR before optimization has other shapes (no tables, more values live).
#[test]
fn unoptimized_ir_on_generated_packets() {
    if !kernel_available() {
        return;
    }
    let packets = usable(
        sift_testgen::generate_packets(ETHERNET, 0x0e0f, 300)
            .into_iter()
            .map(|p| p.data)
            .collect(),
    );
    let oracle = sift_oracle::Oracle::new(ETHERNET, SNAPLEN).unwrap();
    let mut tally = Tally::default();
    for e in sift_testgen::random_expressions(0x0e0f, ETHERNET, 200) {
        compare(&oracle, &e, false, &packets, &mut tally);
    }
    check("unoptimized", &tally);
}

fn ipv6_chain(next_headers: &[u8], last: u8) -> Vec<u8> {
    let mut p = vec![0u8; 14];
    p[12] = 0x86;
    p[13] = 0xdd;
    let mut ip6 = vec![0u8; 40];
    ip6[0] = 0x60;
    ip6[6] = next_headers.first().copied().unwrap_or(last);
    ip6[7] = 64;
    p.extend(ip6);
    for (i, _) in next_headers.iter().enumerate() {
        // Hop-by-hop/routing/destination options: next header, length 0 (8 bytes).
        let next = next_headers.get(i + 1).copied().unwrap_or(last);
        p.extend([next, 0, 0, 0, 0, 0, 0, 0]);
    }
    p.extend([0u8; 20]);
    p
}

fn chains(lengths: &[usize]) -> Vec<Vec<u8>> {
    let mut packets = Vec::new();
    for &n in lengths {
        for last in [6u8, 17, 58] {
            let headers: Vec<u8> = (0..n).map(|i| [0u8, 43, 60][i % 3]).collect();
            let p = ipv6_chain(&headers, last);
            packets.push(p.clone());
            packets.push(p[..p.len() - 25].to_vec());
        }
    }
    usable(packets)
}

const PROTOCHAIN: [&str; 4] = [
    "ip6 protochain 6",
    "ip6 protochain 58",
    "protochain 17",
    "ip6 protochain 6 or ip6 protochain 17",
];

/// `ip6 protochain` is a loop in libpcap; the lowering unrolls it to 32 headers. The verifier
/// must accept the unrolled program, and chains of up to 31 extension headers must be judged
/// as libpcap does.
#[test]
fn ip6_protochain_unrolled() {
    if !kernel_available() {
        return;
    }
    let packets = chains(&[0, 1, 2, 5, 20, 31]);
    let oracle = sift_oracle::Oracle::new(ETHERNET, SNAPLEN).unwrap();
    let mut tally = Tally::default();
    for e in PROTOCHAIN {
        for optimize in [true, false] {
            compare(&oracle, e, optimize, &packets, &mut tally);
        }
    }
    check("protochain", &tally);
}

/// Longer chains are where the unrolled IR stops (it rejects, libpcap keeps walking): the
/// kernel must still do exactly what the IR does.
#[test]
fn ip6_protochain_past_the_unrolling() {
    if !kernel_available() {
        return;
    }
    let packets = chains(&[32, 33, 40]);
    let oracle = sift_oracle::Oracle::new(ETHERNET, SNAPLEN).unwrap();
    let mut tally = Tally::default();
    for e in PROTOCHAIN {
        compare(&oracle, e, true, &packets, &mut tally);
    }
    eprintln!("[long protochains] {tally}");
    assert!(tally.mismatches.is_empty(), "{:#?}", tally.mismatches);
    assert!(
        tally.ir_divergences.iter().all(|d| d.contains(": IR 0,")),
        "{:#?}",
        tally.ir_divergences
    );
}

fn host_set(n: usize) -> String {
    (0..n)
        .map(|i| format!("host 10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256))
        .collect::<Vec<_>>()
        .join(" or ")
}

fn ipv4_packet(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut p = vec![0u8; 54];
    p[12] = 0x08;
    p[14] = 0x45;
    p[23] = 6;
    p[26..30].copy_from_slice(&src);
    p[30..34].copy_from_slice(&dst);
    p
}

/// Large host sets become lookup tables in the optimizer and binary searches here; the
/// verifier must accept them and they must find every member.
#[test]
fn large_host_sets() {
    if !kernel_available() {
        return;
    }
    let oracle = sift_oracle::Oracle::new(ETHERNET, SNAPLEN).unwrap();
    for n in [10usize, 100, 1000] {
        let expr = host_set(n);
        let mut packets = Vec::new();
        for i in (0..n + 5).step_by((n / 50).max(1)) {
            let a = [10, (i / 65536) as u8, (i / 256 % 256) as u8, (i % 256) as u8];
            packets.push(ipv4_packet(a, [192, 168, 0, 1]));
            packets.push(ipv4_packet([192, 168, 0, 1], a));
        }
        let mut tally = Tally::default();
        // Complete packets only: libpcap's (slow) optimizer would not change its verdicts.
        compare_with(&oracle, &expr, true, false, &packets, &mut tally);
        check(&format!("{n} hosts"), &tally);
        assert!(tally.matches > 0);
    }
}

/// Arithmetic corner cases: division by zero rejects, shifts by 32 or more give 0, constants
/// with the top bit set compare as unsigned, `len` is the packet's length.
#[test]
fn arithmetic_corner_cases() {
    if !kernel_available() {
        return;
    }
    let mut packets = Vec::new();
    for b in [0u8, 1, 2, 31, 32, 33, 64, 0x80, 0xff] {
        let mut p = ipv4_packet([10, 0, 0, b], [b, 0, 0, 1]);
        p[14 + 9] = b;
        packets.push(p.clone());
        p.extend(std::iter::repeat(b).take(usize::from(b)));
        packets.push(p);
    }
    let oracle = sift_oracle::Oracle::new(ETHERNET, SNAPLEN).unwrap();
    let mut tally = Tally::default();
    for e in [
        "ip[29] / ip[9] = 0",
        "ip[29] % ip[9] = 1",
        "ip[9] != 0 and 100 / ip[9] > 2",
        "1 << ip[29] = 0",
        "0xffffffff >> ip[29] = 1",
        "ip[12:4] > 0x80000000",
        "ip[12:4] & 0x80000000 != 0",
        "ip[16:4] = 0xff000001",
        "len > 100",
        "len - ip[29] = 54",
        "ip[ip[29] & 3] = 0x45",
        "ip[ip[29]:2] > 1000",
        "-ip[9] = 0xffffff00",
        "ether[60000] = 1",
        "ether[ip[9] * 1000] = 0",
    ] {
        for optimize in [true, false] {
            compare(&oracle, e, optimize, &packets, &mut tally);
        }
    }
    check("arithmetic", &tally);
}

/// XDP and tc return the configured actions.
#[test]
fn configurable_verdicts() {
    if !kernel_available() {
        return;
    }
    let f = ir("tcp", true).unwrap();
    let tcp = ipv4_packet([1, 1, 1, 1], [2, 2, 2, 2]);
    let mut udp = tcp.clone();
    udp[23] = 17;
    for t in [ProgramType::Xdp, ProgramType::SchedCls] {
        let opts = Options {
            on_match: 3,
            on_no_match: 0,
            ..Options::new(t)
        };
        let p = kernel::load(&sift_ebpf::compile(&f, &opts).unwrap(), "verdicts").unwrap();
        assert_eq!(p.run(&tcp).unwrap(), 3, "{t}");
        assert_eq!(p.run(&udp).unwrap(), 0, "{t}");
    }
}
