//! `geneve` against libpcap 1.10 on hand-built Geneve packets: outer Ethernet (with and without a
//! VLAN tag), Linux cooked and raw IP captures; outer IPv4 (with and without options) and IPv6;
//! Geneve with and without options carrying an Ethernet frame (protocol 0x6558) or bare IPv4 /
//! IPv6 (0x0800 / 0x86dd); inner IPv4/TCP, IPv4/UDP and IPv6/TCP. Every packet is also tried at
//! every truncation, since the order of loads decides what a short packet does.

use sift_oracle::diff::{run_diff, DiffOptions, Matcher};
use sift_oracle::Oracle;

const SNAPLEN: u32 = 262_144;
const INNER_SRC_MAC: [u8; 6] = [0x00, 0x11, 0x22, 0x33, 0x44, 0x55];
const INNER_DST_MAC: [u8; 6] = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
const OUTER_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Inner {
    Ipv4Tcp {
        dport: u16,
    },
    Ipv4Udp,
    Ipv4Multicast,
    Ipv6Tcp,
    Icmp6,
    Arp,
    Mpls,
    Pppoes,
    /// An 802.3 frame with an ISO (CLNP) LLC header; only inside an Ethernet frame.
    IsoLlc,
    /// Geneve again, inside the first one.
    Nested,
}

impl Inner {
    const ALL: [Inner; 11] = [
        Inner::Ipv4Tcp { dport: 80 },
        Inner::Ipv4Tcp { dport: 443 },
        Inner::Ipv4Udp,
        Inner::Ipv4Multicast,
        Inner::Ipv6Tcp,
        Inner::Icmp6,
        Inner::Arp,
        Inner::Mpls,
        Inner::Pppoes,
        Inner::IsoLlc,
        Inner::Nested,
    ];

    /// The Ethernet type (or 802.3 length) announcing the payload, and the payload.
    fn payload(self) -> (u16, Vec<u8>) {
        let tcp4 = || ipv4(6, [10, 1, 1, 1], [10, 2, 2, 2], 0, &tcp(80));
        match self {
            Inner::Ipv4Tcp { dport } => (
                0x0800,
                ipv4(6, [10, 1, 1, 1], [10, 2, 2, 2], 0, &tcp(dport)),
            ),
            Inner::Ipv4Udp => (
                0x0800,
                ipv4(17, [10, 3, 3, 3], [10, 1, 1, 1], 1, &udp(53, &[0; 4])),
            ),
            Inner::Ipv4Multicast => (
                0x0800,
                ipv4(17, [10, 3, 3, 3], [224, 0, 0, 5], 0, &udp(5353, &[0; 4])),
            ),
            Inner::Ipv6Tcp => (0x86dd, ipv6(6, &tcp(80))),
            Inner::Icmp6 => (0x86dd, ipv6(58, &[128, 0, 0, 0, 0, 1, 0, 1])),
            Inner::Arp => {
                let mut p = vec![0, 1, 8, 0, 6, 4, 0, 1];
                p.extend(INNER_SRC_MAC);
                p.extend([10, 1, 1, 1]);
                p.extend([0; 6]);
                p.extend([10, 2, 2, 2]);
                (0x0806, p)
            }
            Inner::Mpls => {
                let mut p = vec![0x00, 0x01, 0x01, 0x40]; // label 16, bottom of stack
                p.extend(tcp4());
                (0x8847, p)
            }
            Inner::Pppoes => {
                let ip = tcp4();
                let len = (ip.len() + 2) as u16;
                let mut p = vec![0x11, 0x00, 0x00, 0x03];
                p.extend(len.to_be_bytes());
                p.extend([0x00, 0x21]);
                p.extend(ip);
                (0x8864, p)
            }
            Inner::IsoLlc => {
                let p = vec![0xfe, 0xfe, 0x03, 0x81, 0x10, 0x01, 0x00, 0x00];
                (p.len() as u16, p)
            }
            Inner::Nested => {
                let inside = Geneve {
                    vni: 7,
                    option_words: 1,
                    protocol: 0x6558,
                    inner_vlan: None,
                    inner: Inner::Ipv4Tcp { dport: 80 },
                    version: 0,
                };
                let datagram = udp(6081, &geneve_payload(&inside));
                (0x0800, ipv4(17, [10, 9, 9, 9], [10, 1, 1, 1], 0, &datagram))
            }
        }
    }
}

#[derive(Clone, Copy)]
struct Geneve {
    vni: u32,
    option_words: u8,
    /// 0x6558 (an Ethernet frame follows) or the payload's Ethernet type.
    protocol: u16,
    /// An 802.1Q tag in the inner Ethernet header.
    inner_vlan: Option<u16>,
    inner: Inner,
    /// Geneve version bits (only 0 is Geneve as libpcap tests it).
    version: u8,
}

fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], options: usize, payload: &[u8]) -> Vec<u8> {
    let ihl = 5 + options as u8;
    let total = 20 + 4 * options + payload.len();
    let mut p = vec![
        0x40 | ihl,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        1,
        0,
        0,
        64,
        proto,
        0,
        0,
    ];
    p.extend(src);
    p.extend(dst);
    // NOP options.
    p.extend(vec![1u8; 4 * options]);
    p.extend(payload);
    p
}

fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut p = vec![0x60, 0, 0, 0, (len >> 8) as u8, len as u8, next, 64];
    p.extend([0x20, 0x01, 0x0d, 0xb8].iter().chain(&[0; 11]).chain(&[1]));
    p.extend([0x20, 0x01, 0x0d, 0xb8].iter().chain(&[0; 11]).chain(&[2]));
    p.extend(payload);
    p
}

fn tcp(dport: u16) -> Vec<u8> {
    let mut p = vec![0x30, 0x39];
    p.extend(dport.to_be_bytes());
    p.extend([0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
    p
}

fn udp(dport: u16, payload: &[u8]) -> Vec<u8> {
    let len = 8 + payload.len();
    let mut p = vec![0x12, 0x34];
    p.extend(dport.to_be_bytes());
    p.extend([(len >> 8) as u8, len as u8, 0, 0]);
    p.extend(payload);
    p
}

fn geneve_payload(g: &Geneve) -> Vec<u8> {
    let mut p = vec![(g.version << 6) | g.option_words, 0];
    p.extend(g.protocol.to_be_bytes());
    p.extend((g.vni << 8).to_be_bytes());
    for i in 0..g.option_words {
        p.push(0xa0 | i);
    }
    p.extend(vec![0u8; 3 * usize::from(g.option_words)]);
    let (ethertype, network) = g.inner.payload();
    if g.protocol == 0x6558 {
        p.extend(INNER_DST_MAC);
        p.extend(INNER_SRC_MAC);
        if let Some(id) = g.inner_vlan {
            p.extend([0x81, 0x00]);
            p.extend(id.to_be_bytes());
        }
        p.extend(ethertype.to_be_bytes());
    }
    p.extend(network);
    p
}

/// The outer network layer: the Ethernet type and the IP packet carrying the Geneve datagram.
fn outer_ip(v6: bool, ip_options: usize, g: &Geneve) -> (u16, Vec<u8>) {
    let datagram = udp(6081, &geneve_payload(g));
    if v6 {
        (0x86dd, ipv6(17, &datagram))
    } else {
        (
            0x0800,
            ipv4(
                17,
                [192, 168, 0, 1],
                [192, 168, 0, 2],
                ip_options,
                &datagram,
            ),
        )
    }
}

fn frame(linktype: u32, outer_vlan: bool, ethertype: u16, ip: Vec<u8>) -> Vec<u8> {
    let mut p = Vec::new();
    match linktype {
        1 => {
            p.extend(OUTER_MAC);
            p.extend(OUTER_MAC);
            if outer_vlan {
                p.extend([0x81, 0x00, 0x00, 0x05]);
            }
            p.extend(ethertype.to_be_bytes());
        }
        113 => {
            p.extend([0, 0, 0, 1, 0, 6]);
            p.extend(OUTER_MAC);
            p.extend([0, 0]);
            p.extend(ethertype.to_be_bytes());
        }
        276 => {
            p.extend(ethertype.to_be_bytes());
            p.extend([0, 0, 0, 0, 0, 2, 0, 1, 0, 6]);
            p.extend(OUTER_MAC);
            p.extend([0, 0]);
        }
        101 | 228 | 229 => {}
        _ => unreachable!("no frame builder for link type {linktype}"),
    }
    p.extend(ip);
    p
}

fn packets(linktype: u32) -> Vec<Vec<u8>> {
    let mut geneves = Vec::new();
    for inner in Inner::ALL {
        let bare = inner.payload().0;
        for protocol in [0x6558, bare] {
            if protocol == bare && inner == Inner::IsoLlc {
                continue;
            }
            for (vni, option_words) in [(100, 0), (5, 2), (0xff_ffff, 1)] {
                geneves.push(Geneve {
                    vni,
                    option_words,
                    protocol,
                    inner_vlan: None,
                    inner,
                    version: 0,
                });
            }
        }
    }
    let vlan_inner = Geneve {
        vni: 5,
        option_words: 1,
        protocol: 0x6558,
        inner_vlan: Some(20),
        inner: Inner::Ipv4Tcp { dport: 80 },
        version: 0,
    };
    geneves.push(vlan_inner);
    geneves.push(Geneve {
        version: 1,
        ..vlan_inner
    });
    let mut out = Vec::new();
    for g in &geneves {
        for (v6, ip_options) in [(false, 0), (false, 2), (true, 0)] {
            let (ethertype, ip) = outer_ip(v6, ip_options, g);
            out.push(frame(linktype, false, ethertype, ip.clone()));
            if linktype == 1 && !v6 && ip_options == 0 {
                out.push(frame(linktype, true, ethertype, ip));
            }
        }
    }
    // Not Geneve: plain TCP, and UDP to another port.
    let plain = ipv4(6, [10, 1, 1, 1], [10, 2, 2, 2], 0, &tcp(80));
    out.push(frame(linktype, false, 0x0800, plain));
    let other = ipv4(17, [10, 1, 1, 1], [10, 2, 2, 2], 0, &udp(4789, &[0; 40]));
    out.push(frame(linktype, false, 0x0800, other));
    out
}

/// Packets that are not Geneve, with header fields planted where a test that reads `geneve`'s
/// offsets where it did not match looks (at offsets from the registers' earlier values): Ethernet
/// and IP types, addresses and ports at random places in the first 48 bytes.
fn planted(linktype: u32) -> Vec<Vec<u8>> {
    let tcp80 = ipv4(6, [10, 1, 1, 1], [10, 2, 2, 2], 0, &tcp(80));
    let udp53 = ipv4(17, [10, 2, 2, 2], [10, 1, 1, 1], 0, &udp(53, &[0; 40]));
    let bases = [
        frame(linktype, false, 0x0800, tcp80),
        frame(linktype, false, 0x0800, udp53),
    ];
    plant(0x9e7e + u64::from(linktype), &bases)
}

/// Packets whose header chains `protochain` walks (IPv6 extension headers, AH after IPv4 and
/// IPv6), planted as [`planted`]'s are: after a walk that took a step, its register holds the
/// protocol it stopped at, which a later test reading `geneve`'s offsets there uses.
fn chained(linktype: u32) -> Vec<Vec<u8>> {
    // An extension header (next header, length in 8-byte units after the first 8) and an AH
    // header (next header, length in 4-byte units minus 2).
    let ext = |next: u8, rest: &[u8]| -> Vec<u8> {
        let mut h = vec![next, 0, 1, 4, 0, 0, 0, 0];
        h.extend(rest);
        h
    };
    let ah = |next: u8, rest: &[u8]| -> Vec<u8> {
        let mut h = vec![
            next, 4, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        h.extend(rest);
        h
    };
    let ip6 = [
        ipv6(0, &ext(60, &ext(6, &tcp(80)))),
        ipv6(43, &ext(44, &ext(17, &udp(53, &[0; 8])))),
        ipv6(51, &ah(6, &tcp(443))),
        ipv6(0, &ext(59, &[0; 16])),
        ipv6(60, &ext(58, &[128, 0, 0, 0, 0, 0, 0, 0])),
    ];
    let ip4 = [
        ipv4(51, [10, 1, 1, 1], [10, 2, 2, 2], 0, &ah(6, &tcp(80))),
        ipv4(
            51,
            [10, 2, 2, 2],
            [10, 1, 1, 1],
            0,
            &ah(51, &ah(17, &udp(53, &[0; 8]))),
        ),
    ];
    let bases: Vec<Vec<u8>> = ip6
        .into_iter()
        .map(|p| frame(linktype, false, 0x86dd, p))
        .chain(ip4.into_iter().map(|p| frame(linktype, false, 0x0800, p)))
        .collect();
    let mut out = bases.clone();
    // The protocols the walks stop at, as offsets: where the reads land after a step.
    for base in &bases {
        for at in [6, 17, 51, 58, 59] {
            for token in [[0x08, 0x00], [0x86, 0xdd]] {
                let mut p = base.clone();
                if let Some(bytes) = p.get_mut(at..at + 2) {
                    bytes.copy_from_slice(&token);
                    out.push(p);
                }
            }
        }
    }
    out.extend(plant(0xc4a1 + u64::from(linktype), &bases));
    out
}

/// 150 copies of random `bases` with tokens planted at random places in their first 48 bytes.
fn plant(seed: u64, bases: &[Vec<u8>]) -> Vec<Vec<u8>> {
    const TOKENS: &[&[u8]] = &[
        &[0x08, 0x00],
        &[0x86, 0xdd],
        &[0x81, 0x00, 0x00, 0x14],
        &[0x45],
        &[0x60],
        &[6],
        &[17],
        &[10, 1, 1, 1],
        &[10, 2, 2, 2],
        &[0x00, 0x50],
        &[0x00, 0x35],
        &[0x00, 0x11, 0x22, 0x33, 0x44, 0x55],
    ];
    let mut rng = sift_testgen::Rng::new(seed);
    let mut out = Vec::new();
    for _ in 0..150 {
        let mut p = rng.pick(bases).clone();
        for _ in 0..1 + rng.index(4) {
            let token = *rng.pick(TOKENS);
            let at = rng.index(48);
            for (i, b) in token.iter().enumerate() {
                if let Some(x) = p.get_mut(at + i) {
                    *x = *b;
                }
            }
        }
        out.push(p);
    }
    out
}

/// Filters both compilers accept (or both refuse), compared packet by packet.
const EXPRESSIONS: &[&str] = &[
    "geneve",
    "geneve 100",
    "geneve 5",
    "geneve 16777215",
    "geneve 16777216",
    "geneve and ip host 10.1.1.1",
    "geneve and host 10.1.1.1",
    "geneve and ip src 10.3.3.3",
    "geneve and tcp port 80",
    "geneve and tcp dst port 443",
    "geneve and udp port 53",
    "geneve and port 80",
    "geneve and ether src 00:11:22:33:44:55",
    "geneve and ether dst 00:11:22:33:44:55",
    "geneve and ether host 00:11:22:33:44:55 and tcp",
    "geneve and ether broadcast",
    "geneve and ether multicast",
    "geneve and broadcast",
    "geneve 5 and vlan",
    "geneve 5 and vlan 20 and tcp port 80",
    "geneve and vlan and ip host 10.1.1.1",
    "udp port 6081 and geneve",
    "udp port 6081 and geneve and tcp",
    "geneve and ip6",
    "geneve and ip6 and tcp port 80",
    "geneve and ip",
    "geneve and not ip",
    "geneve and (tcp or udp)",
    "geneve and ip proto 17",
    "geneve and ip[9] = 6",
    "geneve and ip[0] & 0xf > 5",
    "geneve and tcp[13] & 2 != 0",
    "geneve and tcp[tcpflags] & tcp-syn != 0",
    "geneve and udp[2:2] = 53",
    "geneve and icmp6",
    "geneve and ip6[6] = 6",
    "geneve and ether[12:2] = 0x0800",
    "geneve and link[0] = 0xff",
    "geneve and ether proto 0x0800",
    "geneve and arp",
    "geneve and ip broadcast",
    "geneve and ip multicast",
    "geneve and llc",
    "geneve and iso",
    "geneve and stp",
    "geneve and mpls",
    "geneve and mpls and ip",
    "geneve and pppoes and ip",
    "geneve and pppoes 3",
    "geneve and geneve",
    "geneve and geneve and tcp",
    "geneve and geneve 7 and ether src 00:11:22:33:44:55 and tcp port 80",
    "geneve and icmp6 and icmp6[0] = 128",
    "geneve and arp host 10.1.1.1",
    "geneve and mpls 16 and tcp port 80",
    "geneve and pppoes 3 and ip host 10.2.2.2",
    "geneve and iso and clnp",
    "geneve and llc u",
    "geneve and ip multicast and udp port 5353",
    "geneve and len > 100",
    "geneve and less 120",
    "geneve and protochain 6",
    "geneve and inbound",
    "ip6 and geneve",
    "vlan and geneve and ip",
    "vlan 5 and geneve 5 and tcp port 80",
    "ip host 192.168.0.1 and geneve 100 and ip host 10.2.2.2",
    "not geneve",
    "geneve or len > 10",
    "not geneve or len > 200",
    "geneve and (ip host 10.1.1.1 or ip6)",
    "geneve and not (tcp port 80)",
    "geneve and ether src 00:11:22:33:44:55 and vlan 20",
    // Register accounting: each `geneve` keeps three of libpcap's sixteen scratch registers.
    "geneve and geneve and geneve and geneve and geneve",
    "geneve and geneve and geneve and geneve and geneve and geneve",
    "geneve and geneve and geneve and geneve and ip[0] = 0x45",
    "geneve and geneve and geneve and geneve and geneve and ip[0] = 0x45",
];

/// Filters where a test reads the inner packet's offsets on a path where `geneve` did not match.
/// libpcap reads the scratch registers that hold them there: uninitialized memory (0 for sift, and
/// for the oracle, which zeroes it first), or the value of an earlier arithmetic expression that
/// had the same register.
const UNMATCHED_READS: &[&str] = &[
    "geneve or ip",
    "geneve or ip host 10.1.1.1",
    "not geneve and tcp",
    "(geneve and tcp) or udp",
    "geneve 5 or vlan",
    "geneve or ether src 00:11:22:33:44:55",
    "geneve or ether host 00:11:22:33:44:55 or tcp port 80",
    "(geneve or geneve 5) and geneve 100",
    // The second `geneve` looks for Geneve inside the first one's payload, even where the first
    // did not match.
    "geneve 0 or geneve 1",
    "(geneve 100 or geneve 5) and udp",
    "not geneve 100 and geneve and ip",
    // Registers an earlier relation stored into and gave back, which `geneve` then takes.
    "ether[0] = 1 or geneve or ip",
    "ether[12:2] = 0x800 or geneve or ip6",
    "len - 14 > 2000 or geneve or udp",
    "ip[0] & 0xf > 5 or geneve 5 or tcp",
    "(ether[len - 1] = 0 and geneve) or ip host 10.1.1.1",
    "ether[0] + ether[1] * 2 = 0 or geneve or ether[12:2] = 0x0800",
    "-ether[0] = 0 or geneve or vlan",
    "(ether[6] = 2 or geneve) and (ip[9] = 6 or udp port 53)",
    "not (udp[0:2] = 1 or geneve) and ip",
];

/// Filters where such a read may see what a `protochain` walk saved in the register `geneve`
/// takes next (or that the walk's register kept from before, when it took no step).
const PROTOCHAIN_READS: &[&str] = &[
    "ip protochain 6 or geneve or ip",
    "ip6 protochain 6 or geneve or ip",
    "ip6 protochain 17 or geneve 5 or udp port 53",
    "protochain 51 or geneve or tcp",
    "ip6 protochain 60 or geneve or ip6",
    "ip6 protochain 44 or not geneve and ip",
    "ip6 protochain 58 or geneve or icmp6",
    "ip6 protochain 59 or geneve or ether src 00:11:22:33:44:55",
    "(ip protochain 17 and udp) or geneve or ip host 10.1.1.1",
    "ether[0] = 1 or ip6 protochain 6 or geneve or tcp port 80",
    "protochain 51 or arp net 10.0.0.0/30 or protochain 58 and !geneve 1 || ip proto 17",
];

fn compare(linktype: u32, expr: &str, packets: &[Vec<u8>]) -> Result<usize, String> {
    let oracle = Oracle::new(linktype, SNAPLEN).unwrap();
    let lib = oracle.compile(expr, true, 0);
    let ours = sift::Filter::compile(expr, linktype, SNAPLEN);
    let (lib, ours) = match (lib, ours) {
        (Err(_), Err(_)) => return Ok(0),
        (Ok(l), Ok(o)) => (l, o),
        (l, o) => {
            return Err(format!(
                "[{linktype}] `{expr}`: libpcap {:?}, sift {:?}",
                l.err().map(|e| e.to_string()),
                o.err().map(|e| e.to_string())
            ))
        }
    };
    let mut compared = 0;
    for p in packets {
        for caplen in 0..=p.len() {
            let cut = &p[..caplen];
            let (l, o) = (lib.run(cut, p.len() as u32), ours.run(cut, p.len() as u32));
            if l != o {
                return Err(format!(
                    "[{linktype}] `{expr}` on {caplen}/{} bytes {:02x?}: libpcap {l}, sift {o}",
                    p.len(),
                    p
                ));
            }
            compared += 1;
        }
    }
    Ok(compared)
}

#[test]
fn geneve_matches_libpcap_on_built_packets() {
    let mut failures = Vec::new();
    let mut pairs = 0;
    let mut matched = 0;
    for linktype in [1, 113, 101] {
        let packets = packets(linktype);
        let mut with_planted = packets.clone();
        with_planted.extend(planted(linktype));
        with_planted.extend(chained(linktype));
        for expr in EXPRESSIONS
            .iter()
            .chain(UNMATCHED_READS)
            .chain(PROTOCHAIN_READS)
        {
            let packets = if EXPRESSIONS.contains(expr) {
                &packets
            } else {
                &with_planted
            };
            match compare(linktype, expr, packets) {
                Ok(n) => pairs += n,
                Err(e) => failures.push(e),
            }
            if let Ok(f) = sift::Filter::compile(expr, linktype, SNAPLEN) {
                matched += packets
                    .iter()
                    .filter(|p| f.matches(p, p.len() as u32))
                    .count();
            }
        }
    }
    eprintln!("{pairs} (filter, packet prefix) pairs agree; {matched} full-packet matches");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The packets exercise the matching paths, not only rejections.
    assert!(matched > 1000, "only {matched} matches");
}

#[test]
fn geneve_filters_match_the_packets_they_describe() {
    // Spot checks that do not depend on libpcap: the inner packet is what later tests see.
    let packets = packets(1);
    let count = |expr: &str| {
        let f = sift::Filter::compile(expr, 1, SNAPLEN).unwrap();
        packets
            .iter()
            .filter(|p| f.matches(p, p.len() as u32))
            .count()
    };
    assert!(count("geneve") > 0);
    assert_eq!(count("geneve and ip host 192.168.0.1"), 0);
    assert!(count("geneve and ip host 10.1.1.1") > 0);
    assert!(count("geneve and ether src 00:11:22:33:44:55") > 0);
    assert_eq!(count("geneve and ether src 02:00:00:00:00:01"), 0);
    assert!(count("geneve 5 and vlan 20") > 0);
    assert_eq!(count("geneve 100 and vlan"), 0);
}

#[test]
fn reads_where_geneve_did_not_match_are_accepted() {
    // Exactness itself is checked above; here, that these are accepted on every link type and
    // read the register's earlier value where there is one.
    for linktype in [1, 113, 101] {
        for expr in UNMATCHED_READS {
            if let Err(e) = sift::Filter::compile(expr, linktype, SNAPLEN) {
                panic!("[{linktype}] `{expr}`: {e}");
            }
        }
    }
}

#[test]
fn reads_of_protochains_register_follow_the_walk() {
    // `ip6 protochain 17` steps over the hop-by-hop and destination options headers and stops
    // at TCP, leaving 6 in its register. `geneve`, which did not match, takes that register for
    // the offset of the inner frame's type, so `ip` then reads the type at 6 (in the source
    // MAC address). With an IPv6 next header of 59 the walk takes no step and the register
    // keeps its 0: `ip` reads the destination MAC address.
    let expr = "ip6 protochain 17 or geneve or ip";
    let f = sift::Filter::compile(expr, 1, SNAPLEN).unwrap();
    let oracle = Oracle::new(1, SNAPLEN)
        .unwrap()
        .compile(expr, true, 0)
        .unwrap();
    let mut walked = vec![60, 0, 1, 4, 0, 0, 0, 0, 6, 0, 1, 4, 0, 0, 0, 0];
    walked.extend(tcp(80));
    let mut p = frame(1, false, 0x86dd, ipv6(0, &walked));
    p[6..8].copy_from_slice(&[0x08, 0x00]);
    let mut unwalked = p.clone();
    unwalked[20] = 59;
    for (pkt, want) in [(p, true), (unwalked, false)] {
        let len = pkt.len() as u32;
        assert_eq!(oracle.run(&pkt, len) != 0, want, "libpcap");
        assert_eq!(f.matches(&pkt, len), want, "sift");
    }
}

#[test]
fn protochain_keeps_a_register_like_libpcap() {
    // libpcap's unqualified `protochain` never gives back the register it takes first.
    let oracle = Oracle::new(1, SNAPLEN).unwrap();
    for n in [15, 16] {
        let expr = vec!["protochain 6"; n].join(" or ");
        let lib = oracle.compile(&expr, true, 0).is_ok();
        let ours = sift::Filter::compile(&expr, 1, SNAPLEN).is_ok();
        assert_eq!(lib, ours, "{n} protochains: libpcap {lib}, sift {ours}");
        assert_eq!(ours, n == 15, "{n} protochains");
    }
}

/// Every primitive the expression generator knows, inside Geneve and where Geneve did not match
/// (`geneve and (E)`, `geneve or (E)`, `not geneve 5 and (E)`, ... for random `E`), over
/// generated traffic (which includes Geneve), the built packets and the planted ones. No
/// divergence is allowed.
#[test]
fn random_expressions_inside_geneve() {
    let engine = |expr: &str, linktype: u32, snaplen: u32| -> Result<Matcher, String> {
        let f = sift::Filter::compile(expr, linktype, snaplen).map_err(|e| e.to_string())?;
        Ok(Box::new(move |pkt: &[u8], wire: u32| f.matches(pkt, wire)))
    };
    for (i, linktype) in [1, 113, 101, 276, 228, 229].into_iter().enumerate() {
        let seed = 0x6e6e + i as u64;
        let exprs: Vec<String> = sift_testgen::random_expressions(seed, linktype, 150)
            .into_iter()
            .enumerate()
            .map(|(j, e)| match j % 5 {
                0 => format!("geneve and ({e})"),
                1 => format!("geneve 5 and ({e})"),
                2 => format!("udp and geneve and ({e})"),
                // Where `geneve` did not match, `E` reads its offsets' registers.
                3 => format!("geneve or ({e})"),
                _ => format!("not geneve 5 and ({e})"),
            })
            .collect();
        let mut traffic: Vec<(Vec<u8>, u32)> = packets(linktype)
            .into_iter()
            .chain(planted(linktype))
            .map(|p| {
                let len = p.len() as u32;
                (p, len)
            })
            .collect();
        traffic.extend(
            sift_testgen::generate_packets(linktype, seed, 200)
                .into_iter()
                .map(|p| (p.data, p.wire_len)),
        );
        let report =
            run_diff(&engine, linktype, &exprs, &traffic, &DiffOptions::default()).unwrap();
        eprintln!("{report}");
        assert!(report.divergences.is_empty(), "{report}");
        assert!(report.both_accepted > 50, "{report}");
    }
}
