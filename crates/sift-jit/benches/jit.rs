//! JIT benchmark: ns/packet of libpcap's `bpf_filter` (optimized program), the sift bytecode
//! interpreter, the JIT (one call per packet, and the batch loop), and hand-written Rust
//! predicates with the same semantics (including their result on truncated packets), on the same
//! packets; and the JIT's compile latency per filter (until it runs single packets: the batch
//! entry is compiled on the first batch).
//!
//! Run with `CARGO_TARGET_DIR=target-sift-jit cargo bench -p sift-jit --bench jit`
//! (`SIFT_BENCH_ONLY=TEXT` times only the filters whose names contain TEXT).
//!
//! Packets: 4,000 generated Ethernet packets (`sift_testgen`, including truncated and mutated
//! ones) plus 1,000 IPv4/TCP packets built to match the filters' addresses and ports. Each cell
//! is the best of 7 timed passes (after one warm-up pass) in each of `SWEEPS` sweeps over all
//! filters, each pass running `REPS` rounds over every packet. The sweeps lie seconds apart, so
//! each engine is timed across several stretches of time: on a shared machine whose speed moves
//! with other work (hand-written code by up to 1.7x from one moment to the next), one short
//! stretch per filter sometimes timed engines in different conditions (the JIT at 2.9-4.0 ns
//! instead of 1.6-2.1 in whole rows of a run). An engine's passes stay consecutive, so that in
//! a fixed order (below) what the branch predictor learned is not overwritten by other engines
//! between passes (interleaving them slowed the branching host sets from 2.2 to 2.6-3.3 ns).
//!
//! `SIFT_BENCH_TRAFFIC=corpus` replaces those packets with every Ethernet packet of the shared
//! corpus's real captures (about 1,500, from tcpdump's and libpcap's test suites): traffic as
//! captured, in which libpcap's interpreter runs faster (its branches are predictable and most
//! filters reject early), so the ratios differ.
//!
//! Order: by default each round visits the packets in a different random order (the same
//! sequence for every engine). Replaying one fixed order round after round lets the CPU's branch
//! predictor learn the whole 5,000-packet sequence of outcomes, and how well it learns depends
//! on where each engine's branches happen to lie in memory (measured: the same JIT code copied
//! to different byte offsets ran at 2.5 to 5 ns/packet in a fixed order, and at 6.2 to 6.6 in
//! shuffled rounds). `SIFT_BENCH_ORDER=fixed` replays one order, as earlier versions of this
//! benchmark did.
//!
//! Filters: the NetVM paper's five; BPF+'s chains of 1 to 5 predicates joined by `and` and by
//! `or`, with the predicates of the paper's Figure 6 (`tcp`, `src host 10.1.1.1`, `dst host
//! 10.2.2.2`, `port 20`, `net 10.2.0.0/16`: IPv4, IPv6 and ARP each take their own tests), and
//! the same chains of five tests of IPv4 header fields that earlier sessions measured in their
//! place (`ip src 10.1.1.1`, `ip dst 10.2.2.2`, `ip proto 6`, `ip[8] > 32`, `ip[2:2] > 40`);
//! host sets of 10, 100 and 1,000 addresses (`host a or host b or ...`). Every filter goes
//! through `sift_opt::optimize` before bytecode generation.

mod common;

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

use common::{best_ns, time_batch};
use sift_bytecode::{Cache, VerifiedProgram};
use sift_capture::CaptureReader;
use sift_jit::{JitFilter, PacketRef};
use sift_oracle::Oracle;
use sift_testgen::{generate_packets, Packet, Rng};

const LINKTYPE: u32 = 1;
const SNAPLEN: u32 = 262_144;
const REPS: usize = 20;
/// Sweeps over all filters (each cell is the best of `SWEEPS` x 7 passes).
const SWEEPS: usize = 3;
const ACCEPT: u32 = SNAPLEN;

// ---- packet field access with the interpreter's bounds behaviour ------------------------------

fn b8(p: &[u8], at: usize) -> Option<u32> {
    p.get(at).map(|&b| u32::from(b))
}

fn b16(p: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_be_bytes(*p.get(at..)?.first_chunk()?)))
}

fn b32(p: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(*p.get(at..)?.first_chunk()?))
}

const fn ip(a: u8, b: u8, c: u8, d: u8) -> u32 {
    u32::from_be_bytes([a, b, c, d])
}

/// A hand-written predicate: `Some(verdict)`, `None` when a load falls outside the packet.
type Hand = Box<dyn Fn(&[u8]) -> Option<bool>>;

fn verdict(h: &Hand, p: &[u8]) -> u32 {
    if h(p) == Some(true) {
        ACCEPT
    } else {
        0
    }
}

/// A chain's predicate: (expression, test with the interpreter's bounds behaviour).
type Pred = fn(&[u8]) -> Option<bool>;

/// BPF+'s Figure 6 predicates, in the order the paper lists them ("TCP, src A, dst B, port C,
/// and network D"), as libpcap defines them on Ethernet. The network holds B, so that the
/// chains of `and` can match.
const PAPER_PREDICATES: [(&str, Pred); 5] = [
    ("tcp", tcp),
    ("src host 10.1.1.1", |p| {
        address_test(p, 26, 28, |a| a == ip(10, 1, 1, 1))
    }),
    ("dst host 10.2.2.2", |p| {
        address_test(p, 30, 38, |a| a == ip(10, 2, 2, 2))
    }),
    ("port 20", port_20),
    ("net 10.2.0.0/16", |p| {
        let in_net = |a: u32| a & 0xffff_0000 == ip(10, 2, 0, 0);
        Some(address_test(p, 26, 28, in_net)? || address_test(p, 30, 38, in_net)?)
    }),
];

/// Tests of IPv4 header fields, each after the IPv4 EtherType check (the chains earlier
/// sessions measured as BPF+'s).
const IPV4_PREDICATES: [(&str, Pred); 5] = [
    ("ip src 10.1.1.1", |p| Some(b32(p, 26)? == ip(10, 1, 1, 1))),
    ("ip dst 10.2.2.2", |p| Some(b32(p, 30)? == ip(10, 2, 2, 2))),
    ("ip proto 6", |p| Some(b8(p, 23)? == 6)),
    ("ip[8] > 32", |p| Some(b8(p, 22)? > 32)),
    ("ip[2:2] > 40", |p| Some(b16(p, 16)? > 40)),
];

const IPV4: u32 = 0x0800;
const IPV6: u32 = 0x86dd;
const ARP: u32 = 0x0806;
const RARP: u32 = 0x8035;

/// `tcp`: IPv4's protocol, or IPv6's next header (directly or after a fragment header).
fn tcp(p: &[u8]) -> Option<bool> {
    Some(match b16(p, 12)? {
        IPV4 => b8(p, 23)? == 6,
        IPV6 => {
            let next = b8(p, 20)?;
            next == 6 || (next == 44 && b8(p, 54)? == 6)
        }
        _ => false,
    })
}

/// An address test of `host`/`net`: the IPv4 address at `ipv4`, the ARP or RARP one at `arp`.
fn address_test(p: &[u8], ipv4: usize, arp: usize, test: impl Fn(u32) -> bool) -> Option<bool> {
    Some(match b16(p, 12)? {
        IPV4 => test(b32(p, ipv4)?),
        ARP | RARP => test(b32(p, arp)?),
        _ => false,
    })
}

/// `port 20`: TCP, UDP or SCTP over IPv4 (first fragments only, after the header's options) or
/// over IPv6 (next header only, as libpcap).
fn port_20(p: &[u8]) -> Option<bool> {
    let ports = |at: usize| Some(b16(p, at)? == 20 || b16(p, at + 2)? == 20);
    let transport = |proto: u32| matches!(proto, 6 | 17 | 132);
    match b16(p, 12)? {
        IPV4 => {
            if !transport(b8(p, 23)?) || b16(p, 20)? & 0x1fff != 0 {
                return Some(false);
            }
            ports(14 + 4 * (b8(p, 14)? as usize & 15))
        }
        IPV6 => Some(transport(b8(p, 20)?) && ports(54)?),
        _ => Some(false),
    }
}

fn is_ipv4(p: &[u8]) -> Option<bool> {
    Some(b16(p, 12)? == IPV4)
}

fn netvm_filters() -> Vec<(String, String, Hand)> {
    let a = ip(10, 1, 1, 1);
    let b = ip(10, 2, 2, 2);
    let v: Vec<(&str, Hand)> = vec![
        ("ip", Box::new(is_ipv4)),
        (
            "ip src 10.1.1.1",
            Box::new(move |p| Some(is_ipv4(p)? && b32(p, 26)? == a)),
        ),
        (
            "ip and tcp",
            Box::new(|p| Some(is_ipv4(p)? && b8(p, 23)? == 6)),
        ),
        (
            "ip src 10.1.1.1 and ip dst 10.2.2.2 and tcp src port 20 and tcp dst port 30",
            Box::new(move |p| {
                if !(is_ipv4(p)? && b32(p, 26)? == a && b32(p, 30)? == b && b8(p, 23)? == 6) {
                    return Some(false);
                }
                if b16(p, 20)? & 0x1fff != 0 {
                    return Some(false);
                }
                let x = ((b8(p, 14)? & 0xf) << 2) as usize;
                Some(b16(p, x + 14)? == 20 && b16(p, x + 16)? == 30)
            }),
        ),
    ];
    let set = [
        ip(10, 4, 4, 4),
        ip(10, 3, 3, 3),
        ip(10, 2, 2, 2),
        ip(10, 1, 1, 1),
    ];
    let mut v = v;
    v.push((
        "ip src 10.4.4.4 or ip src 10.3.3.3 or ip src 10.2.2.2 or ip src 10.1.1.1",
        Box::new(move |p| {
            if !is_ipv4(p)? {
                return Some(false);
            }
            let s = b32(p, 26)?;
            Some(set.contains(&s))
        }),
    ));
    v.into_iter()
        .map(|(e, h)| (e.to_string(), e.to_string(), h))
        .collect()
}

/// `p0 or ... or p(N-1)` when `ANY`, else `p0 and ... and p(N-1)` (after `is_ipv4` when
/// `IPV4_ONLY`), unrolled by the compiler (the predicates are constants): the first predicate
/// whose verdict is `ANY` decides.
fn chain<const N: usize, const IPV4_ONLY: bool, const ANY: bool>(p: &[u8]) -> Option<bool> {
    let predicates = if IPV4_ONLY {
        &IPV4_PREDICATES
    } else {
        &PAPER_PREDICATES
    };
    if IPV4_ONLY && !is_ipv4(p)? {
        return Some(false);
    }
    for (_, f) in &predicates[..N] {
        if f(p)? == ANY {
            return Some(ANY);
        }
    }
    Some(!ANY)
}

/// The chains of 1 to 5 of `predicates`, named with `prefix`, and their hand-written versions.
fn chains(
    prefix: &str,
    predicates: &[(&str, Pred); 5],
    hands: [(Hand, Hand); 5],
) -> Vec<(String, String, Hand)> {
    let mut v: Vec<(String, String, Hand)> = Vec::new();
    for (n, (and_hand, or_hand)) in (1..=5).zip(hands) {
        let text = |op: &str| {
            predicates[..n]
                .iter()
                .map(|p| p.0)
                .collect::<Vec<_>>()
                .join(op)
        };
        v.push((format!("{prefix}and-chain of {n}"), text(" and "), and_hand));
        if n > 1 {
            v.push((format!("{prefix}or-chain of {n}"), text(" or "), or_hand));
        }
    }
    v
}

/// The hand-written and- and or-chains of 1 to 5 predicates.
fn chain_hands<const IPV4_ONLY: bool>() -> [(Hand, Hand); 5] {
    [
        (
            Box::new(chain::<1, IPV4_ONLY, false>),
            Box::new(chain::<1, IPV4_ONLY, true>),
        ),
        (
            Box::new(chain::<2, IPV4_ONLY, false>),
            Box::new(chain::<2, IPV4_ONLY, true>),
        ),
        (
            Box::new(chain::<3, IPV4_ONLY, false>),
            Box::new(chain::<3, IPV4_ONLY, true>),
        ),
        (
            Box::new(chain::<4, IPV4_ONLY, false>),
            Box::new(chain::<4, IPV4_ONLY, true>),
        ),
        (
            Box::new(chain::<5, IPV4_ONLY, false>),
            Box::new(chain::<5, IPV4_ONLY, true>),
        ),
    ]
}

fn chain_filters() -> Vec<(String, String, Hand)> {
    let mut v = chains("", &PAPER_PREDICATES, chain_hands::<false>());
    v.extend(chains("IPv4 ", &IPV4_PREDICATES, chain_hands::<true>()));
    v
}

fn host_address(i: usize) -> u32 {
    ip(
        10,
        (i / 250) as u8 + 1,
        (i * 7 % 250) as u8,
        (i % 250) as u8 + 1,
    )
}

fn host_set(n: usize) -> (String, String, Hand) {
    let expr = (0..n)
        .map(|i| {
            let [a, b, c, d] = host_address(i).to_be_bytes();
            format!("host {a}.{b}.{c}.{d}")
        })
        .collect::<Vec<_>>()
        .join(" or ");
    let mut set: Vec<u32> = (0..n).map(host_address).collect();
    set.sort_unstable();
    let hand: Hand = Box::new(move |p| {
        let member = |x: u32| set.binary_search(&x).is_ok();
        match b16(p, 12)? {
            0x0800 => Some(member(b32(p, 26)?) || member(b32(p, 30)?)),
            0x0806 | 0x8035 => Some(member(b32(p, 28)?) || member(b32(p, 38)?)),
            _ => Some(false),
        }
    });
    (format!("host set of {n}"), expr, hand)
}

/// Ethernet + IPv4 (20-byte header) + TCP (20 bytes).
fn eth_ipv4_tcp(src: u32, dst: u32, sport: u16, dport: u16, ttl: u8) -> Packet {
    let mut p = vec![0u8; 54];
    p[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    p[14] = 0x45;
    p[16..18].copy_from_slice(&40u16.to_be_bytes());
    p[22] = ttl;
    p[23] = 6;
    p[26..30].copy_from_slice(&src.to_be_bytes());
    p[30..34].copy_from_slice(&dst.to_be_bytes());
    p[34..36].copy_from_slice(&sport.to_be_bytes());
    p[36..38].copy_from_slice(&dport.to_be_bytes());
    Packet::new(p)
}

/// Every Ethernet packet of the real captures in the shared corpus (`../shared/corpus/real`
/// beside the repository, or `SIFT_CORPUS/real`), sorted by file name: traffic as captured,
/// where most branches go the same way packet after packet.
fn corpus_packets() -> Vec<Packet> {
    let corpus = std::env::var_os("SIFT_CORPUS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"),
        PathBuf::from,
    );
    let mut files = Vec::new();
    for dir in ["tcpdump", "libpcap"] {
        let dir = corpus.join("real").join(dir);
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e} (set SIFT_CORPUS)", dir.display()));
        files.extend(entries.map(|e| e.expect("directory entry").path()));
    }
    files.sort();
    let mut packets = Vec::new();
    for path in files {
        // Not every file in the corpus is a capture this reader takes; those are skipped, and
        // the packets before a damaged record are kept.
        let Ok(mut reader) = CaptureReader::open(&path) else {
            continue;
        };
        while let Ok(Some(record)) = reader.next_record() {
            if record.linktype == LINKTYPE {
                packets.push(Packet {
                    data: record.data,
                    wire_len: record.wire_len,
                });
            }
        }
    }
    packets
}

fn generated_packets() -> Vec<Packet> {
    let mut v = generate_packets(LINKTYPE, 0xbe7c, 4000);
    let mut rng = Rng::new(0x3a7c);
    for i in 0..1000 {
        let src = match i % 4 {
            0 => ip(10, 1, 1, 1),
            1 => ip(10, 1 + (i % 4) as u8, 1 + (i % 4) as u8, 1 + (i % 4) as u8),
            2 => host_address(rng.index(1000)),
            _ => rng.next_u32(),
        };
        let dst = if i % 3 == 0 {
            ip(10, 2, 2, 2)
        } else {
            host_address(rng.index(1200))
        };
        let (sport, dport) = if i % 2 == 0 {
            (20, 30)
        } else {
            (rng.u16(), rng.u16())
        };
        v.push(eth_ipv4_tcp(src, dst, sport, dport, rng.byte()));
    }
    // Interleave so branch predictors see a mix, not two phases.
    let mut mixed = Vec::with_capacity(v.len());
    let (gen, built) = v.split_at(4000);
    for (i, p) in gen.iter().enumerate() {
        mixed.push(p.clone());
        if i % 4 == 3 {
            mixed.push(built[i / 4].clone());
        }
    }
    mixed
}

/// The order in which each round visits the packets: `REPS` rounds of indices.
fn visiting_order(n: usize) -> Vec<usize> {
    let fixed = std::env::var("SIFT_BENCH_ORDER").is_ok_and(|v| v == "fixed");
    let mut rng = Rng::new(0x0bde);
    let mut order = Vec::with_capacity(REPS * n);
    for _ in 0..REPS {
        let mut round: Vec<usize> = (0..n).collect();
        if !fixed {
            for i in (1..n).rev() {
                round.swap(i, rng.index(i + 1));
            }
        }
        order.extend(round);
    }
    order
}

/// One timed pass: `f` on the packets in `order`.
fn pass<'a>(
    packets: &'a [Packet],
    order: &'a [usize],
    mut f: impl FnMut(&[u8], u32) -> u32 + 'a,
) -> impl FnMut() + 'a {
    move || {
        let mut acc = 0u32;
        for &i in order {
            let p = &packets[i];
            acc = acc.wrapping_add(f(black_box(&p.data), black_box(p.wire_len)));
        }
        black_box(acc);
    }
}

/// Median microseconds of `JitFilter::compile` over 15 compilations (the single-packet entry).
fn compile_latency(program: &VerifiedProgram) -> f64 {
    let mut samples: Vec<f64> = (0..15)
        .map(|_| {
            let start = Instant::now();
            black_box(JitFilter::compile(program).expect("compiles"));
            start.elapsed().as_nanos() as f64 / 1000.0
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[7]
}

fn main() {
    if !sift_jit::supported() {
        println!("JIT not supported on this host");
        return;
    }
    let corpus = std::env::var("SIFT_BENCH_TRAFFIC").is_ok_and(|v| v == "corpus");
    let packets = if corpus {
        corpus_packets()
    } else {
        generated_packets()
    };
    let oracle = Oracle::new(LINKTYPE, SNAPLEN).expect("libpcap");
    let mut filters = netvm_filters();
    filters.extend(chain_filters());
    for n in [10, 100, 1000] {
        filters.push(host_set(n));
    }
    // `SIFT_BENCH_ONLY=TEXT`: only the filters whose names contain TEXT.
    if let Ok(only) = std::env::var("SIFT_BENCH_ONLY") {
        filters.retain(|(name, ..)| name.contains(&only));
    }
    println!(
        "{} Ethernet packets ({}), best of {} passes x {REPS} rounds ({SWEEPS} sweeps over all filters), {}; ns/packet\n",
        packets.len(),
        if corpus {
            "the shared corpus's real captures"
        } else {
            "4,000 generated + 1,000 built to match"
        },
        SWEEPS * 7,
        match std::env::var("SIFT_BENCH_ORDER").as_deref() {
            Ok("fixed") => "the same order every round",
            _ => "each round in a new random order",
        }
    );
    println!(
        "| filter | bc insns | pcap | interp | jit | jit batch | hand | pcap/jit | jit/hand | batch/hand | compile µs | match % | !pcap |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut cache = Cache::new();
    let refs: Vec<PacketRef> = packets
        .iter()
        .map(|p| PacketRef::new(&p.data, p.wire_len))
        .collect();
    let mut out = vec![0u32; refs.len()];
    let order = visiting_order(packets.len());
    let ordered_refs: Vec<PacketRef> = order.iter().map(|&i| refs[i]).collect();
    // Compile and check every filter first, then time them all in `SWEEPS` sweeps: each cell
    // is the best of its passes over all sweeps, which lie seconds apart, so a stretch of time
    // in which the machine is slowed by other work cannot hold every pass of one filter.
    let mut rows = Vec::new();
    for (name, expr, hand) in &filters {
        let bpf = oracle.compile(expr, true, 0).expect("libpcap compiles");
        let mut ir = sift::compile_ir(expr, &sift::Options::new(LINKTYPE, SNAPLEN)).expect("sift");
        sift_opt::optimize(&mut ir);
        let program = sift_bytecode::compile(&ir).expect("codegen");
        let jit = JitFilter::compile(&program).expect("jit");

        let (mut matched, mut off_pcap) = (0, 0);
        jit.run_refs(&refs, &mut out);
        for (k, p) in packets.iter().enumerate() {
            let want = program.run(&mut cache, &p.data, p.wire_len);
            assert_eq!(jit.run(&p.data, p.wire_len), want, "{expr}: jit");
            assert_eq!(out[k], want, "{expr}: jit batch");
            assert_eq!(
                verdict(hand, &p.data),
                want,
                "{expr}: hand-written, packet {:02x?}",
                p.data
            );
            // Every truncation of the built packets too.
            if k % 5 == 4 {
                for n in 0..p.data.len() {
                    let t = &p.data[..n];
                    let want = program.run(&mut cache, t, p.wire_len);
                    assert_eq!(jit.run(t, p.wire_len), want, "{expr}: jit, caplen {n}");
                    assert_eq!(verdict(hand, t), want, "{expr}: hand-written, caplen {n}");
                }
            }
            matched += usize::from(want != 0);
            off_pcap += usize::from(bpf.run(&p.data, p.wire_len) != want);
        }
        let t_compile = compile_latency(&program);
        rows.push((name, hand, bpf, program, jit, matched, off_pcap, t_compile));
    }
    let mut times = vec![[f64::INFINITY; 5]; rows.len()];
    for _ in 0..SWEEPS {
        for ((_, hand, bpf, program, jit, ..), best) in rows.iter().zip(&mut times) {
            let n = order.len();
            let sweep = [
                best_ns(n, pass(&packets, &order, |d, w| bpf.run(d, w))),
                best_ns(
                    n,
                    pass(&packets, &order, |d, w| program.run(&mut cache, d, w)),
                ),
                best_ns(n, pass(&packets, &order, |d, w| jit.run(d, w))),
                time_batch(jit, &ordered_refs, &mut out),
                best_ns(n, pass(&packets, &order, |d, _| verdict(hand, d))),
            ];
            for (b, t) in best.iter_mut().zip(sweep) {
                *b = b.min(t);
            }
        }
    }
    for ((name, _, _, program, _, matched, off_pcap, t_compile), t) in rows.iter().zip(&times) {
        let [t_pcap, t_interp, t_jit, t_batch, t_hand] = *t;
        let short = if name.len() > 60 {
            format!("{}...", &name[..57])
        } else {
            name.to_string()
        };
        println!(
            "| `{short}` | {} | {t_pcap:.1} | {t_interp:.1} | {t_jit:.2} | {t_batch:.2} | {t_hand:.2} | {:.1}x | {:.2} | {:.2} | {t_compile:.0} | {:.1} | {off_pcap} |",
            program.program().code.len(),
            t_pcap / t_jit,
            t_jit / t_hand,
            t_batch / t_hand,
            100.0 * *matched as f64 / packets.len() as f64,
        );
    }
}
