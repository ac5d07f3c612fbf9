//! DPF's figure 1 against the pcap expression it stands for (as libpcap 1.10 compiles it,
//! through `sift-oracle`), on generated and hand-made Ethernet packets, with the lifted filters on every engine;
//! and the variable-header variant the paper's section 3.2 describes.

mod common;

use sift_seeds::dpf::{self, eval, ParseErrorKind, Rel, Width};
use sift_testgen::{generate_packets, Packet};

/// Figure 1 as printed, with the Ethernet type written in network byte order.
const FIGURE_1_VERBATIM: &str = "(# Check Ethernet header
(12:16 == 0x0800) & # IP datagram?

# Skip over ether header (14 bytes)
(SHIFT(6 + 6 + 2)) & # Check IP header
(9:8 == 6) & # Check protocol: TCP is 6
(12:32 == 0xc00c4501) & # Check IP src addr (192.12.69.1)

# Skip past IP header (assume fixed sized; 20 bytes)
(SHIFT(20)) & # TCP header
(0:16 == 1234) & # Check source port (2 bytes)
(2:16 == 4321) # Check destination port (2 bytes)
";

const PCAP: &str = "ip src 192.12.69.1 and ip proto 6 and tcp src port 1234 and tcp dst port 4321";

/// The figure's first line opens a parenthesis that is never closed (a typesetting slip); read
/// with the closing parenthesis it lacks.
fn figure_1() -> String {
    format!("{FIGURE_1_VERBATIM})")
}

/// Section 3.2's variable-length header shift in place of `SHIFT(20)` (with the IP header at
/// offset 0 of the shifted base, where the paper's comment writes `4:8`).
fn figure_1_variable() -> String {
    figure_1().replace("(SHIFT(20))", "(SHIFT((0:8 & 0xf) << 2))")
}

/// The pcap expression as libpcap compiles it (optimized, as tcpdump does).
fn libpcap() -> sift_oracle::Program {
    sift_oracle::Oracle::new(1, 262144)
        .unwrap()
        .compile(PCAP, true, 0)
        .unwrap()
}

#[test]
fn figure_1_parses_into_five_atoms() {
    let e = dpf::parse(FIGURE_1_VERBATIM).unwrap_err();
    assert_eq!(e.kind, ParseErrorKind::Unclosed);
    assert_eq!((e.location.line, e.location.column), (1, 1));
    // Without the stray parenthesis, too.
    let alt = dpf::parse(&FIGURE_1_VERBATIM[1..]).unwrap();
    let f = dpf::parse(&figure_1()).unwrap();
    assert_eq!(alt.atoms(), f.atoms());
    let summary: Vec<(u32, Width, Rel, u32)> = f
        .atoms()
        .iter()
        .map(|a| {
            assert!(a.context.shifts.is_empty());
            assert_eq!(a.mask, a.width.mask());
            (a.offset, a.width, a.rel, a.value)
        })
        .collect();
    assert_eq!(
        summary,
        [
            (12, Width::W16, Rel::Eq, 0x0800),
            (23, Width::W8, Rel::Eq, 6),
            (26, Width::W32, Rel::Eq, 0xc00c4501),
            (34, Width::W16, Rel::Eq, 1234),
            (36, Width::W16, Rel::Eq, 4321),
        ]
    );
    // The variable-header form has one packet-dependent shift in the context of the ports.
    let v = dpf::parse(&figure_1_variable()).unwrap();
    assert_eq!(v.atoms()[..3], f.atoms()[..3]);
    assert_eq!(v.atoms()[3].context.shifts.len(), 1);
    assert_eq!(v.atoms()[3].context.shifts[0].skip, 14);
    assert_eq!(v.atoms()[3].context, v.atoms()[4].context);
}

/// An Ethernet/IPv4/TCP packet from 192.12.69.1, with `ihl` words of IP header (options padded
/// with NOPs) and the given fragment field.
fn tcp_packet(ihl: u8, sport: u16, dport: u16, frag: u16) -> Vec<u8> {
    let mut p = vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00];
    let header_len = 4 * usize::from(ihl);
    let total = (header_len + 20 + 4) as u16;
    p.extend([0x40 | ihl, 0]);
    p.extend(total.to_be_bytes());
    p.extend([0xab, 0xcd]);
    p.extend(frag.to_be_bytes());
    p.extend([64, 6, 0, 0, 192, 12, 69, 1, 10, 0, 0, 2]);
    p.resize(14 + header_len.max(20), 1); // NOP options
    p.extend(sport.to_be_bytes());
    p.extend(dport.to_be_bytes());
    p.extend([0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    p.extend(b"data");
    p
}

/// IPv4 on Ethernet with a 20-byte header, not a later fragment: where figure 1 and pcap must
/// agree. (Every other packet, figure 1 included, is compared too, in the tests below.)
fn plain_ipv4(p: &[u8]) -> bool {
    p.len() >= 22 && p[12..14] == [8, 0] && p[14] & 0x0f == 5 && (p[20] & 0x1f) | p[21] == 0
}

/// Generated traffic, and copies rewritten to carry figure 1's address, protocol and ports (all,
/// or all but one), so that both verdicts occur often.
fn packets() -> Vec<Packet> {
    let mut out = Vec::new();
    for seed in 0..4 {
        for p in generate_packets(1, 1996 + seed, 3000) {
            let mut variants = vec![p.clone()];
            if p.data.len() >= 14 + 20 {
                let mut m = p.clone();
                let ip = 14;
                let hl = 4 * usize::from(m.data[ip] & 0x0f);
                m.data[ip + 9] = 6;
                m.data[ip + 12..ip + 16].copy_from_slice(&[192, 12, 69, 1]);
                for (at, v) in [
                    (ip + hl, 1234u16),
                    (ip + hl + 2, 4321),
                    (34, 1234),
                    (36, 4321),
                ] {
                    if m.data.len() >= at + 2 {
                        m.data[at..at + 2].copy_from_slice(&v.to_be_bytes());
                    }
                }
                for spoil in [None, Some(23), Some(29), Some(35), Some(37)] {
                    let mut v = m.clone();
                    if let Some(i) = spoil {
                        if let Some(b) = v.data.get_mut(i) {
                            *b ^= 0x40;
                        }
                    }
                    variants.push(v);
                }
            }
            out.extend(variants);
        }
    }
    // Hand-made: plain, options, IHL below 5, fragments, truncations.
    for ihl in [5, 6, 15, 4] {
        for frag in [0, 0x2000, 0x0001, 0x4000] {
            let p = tcp_packet(ihl, 1234, 4321, frag);
            for cut in [p.len(), 38, 37, 34, 27] {
                out.push(Packet {
                    data: p[..cut].to_vec(),
                    wire_len: p.len() as u32,
                });
            }
        }
    }
    out
}

#[test]
fn figure_1_behaves_as_the_pcap_expression() {
    let f = dpf::parse(&figure_1()).unwrap();
    let variable = dpf::parse(&figure_1_variable()).unwrap();
    let libpcap = libpcap();
    let mut engines = [
        common::Engines::new(&dpf::lift(&f)),
        common::Engines::new(&dpf::lift(&variable)),
    ];
    let packets = packets();
    let (mut compared, mut accepted, mut differ_fixed, mut differ_variable) = (0, 0, 0, 0);
    for p in &packets {
        let expected = libpcap.run(&p.data, p.wire_len) != 0;
        for (filter, engines) in [&f, &variable].into_iter().zip(engines.iter_mut()) {
            let direct = eval::matches(filter, &p.data);
            let lifted = engines.run(&p.data, p.wire_len) != 0;
            assert_eq!(direct, lifted, "evaluator vs engines on {:02x?}", p.data);
        }
        let fixed = eval::matches(&f, &p.data);
        let var = eval::matches(&variable, &p.data);
        if plain_ipv4(&p.data) || p.data.len() < 22 || p.data[12..14] != [8, 0] {
            assert_eq!(fixed, expected, "figure 1 vs pcap on {:02x?}", p.data);
            compared += 1;
            accepted += usize::from(expected);
        }
        // The differences the module docs name, and no others.
        if fixed != expected {
            let ihl = p.data[14] & 0x0f;
            let later_fragment = (p.data[20] & 0x1f) | p.data[21] != 0;
            assert!(ihl != 5 || later_fragment, "{:02x?}", p.data);
            differ_fixed += 1;
        }
        if var != expected {
            let later_fragment = (p.data[20] & 0x1f) | p.data[21] != 0;
            assert!(later_fragment, "variable form vs pcap on {:02x?}", p.data);
            differ_variable += 1;
        }
    }
    println!(
        "{} packets; {compared} comparable, {accepted} of them accepted; the fixed form differs \
         from pcap on {differ_fixed} (options, IHL < 5, fragments), the variable form on \
         {differ_variable} (fragments)",
        packets.len()
    );
    assert!(accepted > 500 && compared - accepted > 500);
    assert!(differ_fixed > differ_variable && differ_variable > 0);
}

#[test]
fn figure_1_on_hand_made_packets() {
    let f = dpf::parse(&figure_1()).unwrap();
    let v = dpf::parse(&figure_1_variable()).unwrap();
    let pcap = libpcap();
    let check = |p: &[u8], fixed: bool, variable: bool, pcap_verdict: bool| {
        assert_eq!(eval::matches(&f, p), fixed);
        assert_eq!(eval::matches(&v, p), variable);
        assert_eq!(pcap.run(p, p.len() as u32) != 0, pcap_verdict);
    };
    check(&tcp_packet(5, 1234, 4321, 0), true, true, true);
    check(&tcp_packet(5, 1234, 4321, 0x4000), true, true, true); // DF set
    check(&tcp_packet(5, 1235, 4321, 0), false, false, false);
    check(&tcp_packet(5, 1234, 4322, 0), false, false, false);
    // Options: only the variable form finds the ports, as pcap does.
    check(&tcp_packet(6, 1234, 4321, 0), false, true, true);
    // A later fragment: pcap refuses to read ports in it, figure 1 does not know.
    check(&tcp_packet(5, 1234, 4321, 0x0001), true, true, false);
    // Truncated inside the destination port.
    check(&tcp_packet(5, 1234, 4321, 0)[..37], false, false, false);
}
