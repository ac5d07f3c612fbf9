//! The CSPF paper's example programs (figures 11 and 12) on Pup packets over the 3 Mb Ethernet
//! header of figure 10, and equivalent programs over 10 Mb Ethernet checked against pcap
//! expressions as libpcap 1.10 compiles them (through `sift-oracle`), with the lifted programs
//! on every engine.

mod common;

use sift_ir::{Cache, Interpreter};
use sift_seeds::cspf::{self, interp, interp::Exit, Program};
use sift_testgen::{generate_packets, Packet};

const FIGURE_11: &str = "
struct enfilter f = {
    10, 12,
                                     /* priority and length */
    PUSHWORD+1, PUSHLIT | EQ, 2,
                                     /* packet type == PUP */
                                     /* mask low byte */
    PUSHWORD+3, PUSH00FF | AND,
    PUSHZERO | GT,
                                     /* PupType > 0 */
    PUSHWORD+3, PUSH00FF | AND,
                                     /* mask low byte */
    PUSHLIT | LE, 100,
                                     /* PupType <= 100 */
                                     /* 0 < PupType <= 100 */
    AND,
    AND
                                     /* && packet type == PUP */
};
";

const FIGURE_12: &str = "
struct enfilter f = {
    10, 8,
    PUSHWORD+8, PUSHLIT | CAND, 35,
    PUSHWORD+7, PUSHZERO | CAND,
    PUSHWORD+1, PUSHLIT | EQ, 2
};
";

/// A Pup packet on the 3 Mb Experimental Ethernet (figure 10): a 4-byte data-link header (one
/// byte each of destination and source host, then the 16-bit type, 2 for Pup in the paper's
/// figures), then the Pup header: length, transport control, Pup type, identifier, destination
/// net/host/socket, source net/host/socket, then data and a checksum.
fn pup(ether_type: u16, transport_control: u8, pup_type: u8, dst_socket: u32) -> Vec<u8> {
    let data = b"hello";
    let pup_len = (20 + data.len() + 2) as u16;
    let mut p = vec![0x05, 0x11];
    p.extend(ether_type.to_be_bytes());
    p.extend(pup_len.to_be_bytes());
    p.extend([transport_control, pup_type]);
    p.extend(0x1234_5678u32.to_be_bytes()); // identifier
    p.extend([3, 0x05]); // destination net, host
    p.extend(dst_socket.to_be_bytes());
    p.extend([3, 0x11]); // source net, host
    p.extend(0x0000_0400u32.to_be_bytes());
    p.extend(data);
    p.extend([0xff, 0xff]); // no checksum
    p
}

/// The verdict of the reference interpreter and of the lifted IR, which must agree.
fn verdict(program: &Program, packet: &[u8]) -> bool {
    let direct = interp::run(program, packet).accept;
    let ir = Interpreter::new(cspf::lift(program)).unwrap();
    let lifted = ir.run(&mut Cache::new(), packet, packet.len() as u32) != 0;
    assert_eq!(
        direct, lifted,
        "interpreter and IR disagree on {packet:02x?}"
    );
    direct
}

#[test]
fn figure_11_accepts_pup_types_1_to_100() {
    let f = cspf::parse(FIGURE_11).unwrap();
    assert_eq!((f.priority(), f.words().len()), (10, 12));
    for (pup_type, expected) in [(0, false), (1, true), (2, true), (100, true), (101, false)] {
        assert_eq!(
            verdict(&f, &pup(2, 0, pup_type, 35)),
            expected,
            "type {pup_type}"
        );
        // The transport control byte shares word 3; the mask removes it.
        assert_eq!(verdict(&f, &pup(2, 0xff, pup_type, 35)), expected);
    }
    assert!(!verdict(&f, &pup(2, 0, 255, 35)));
    // Not a Pup packet.
    assert!(!verdict(&f, &pup(3, 0, 50, 35)));
    assert!(!verdict(&f, &pup(0x0200, 0, 50, 35)));
    // Truncated before the Pup type: word 3 is out of the packet.
    let short = &pup(2, 0, 50, 35)[..7];
    assert!(!verdict(&f, short));
    assert_eq!(interp::run(&f, short).exit, Exit::OutOfPacket { word: 3 });
}

#[test]
fn figure_12_accepts_destination_socket_35() {
    let f = cspf::parse(FIGURE_12).unwrap();
    assert_eq!((f.priority(), f.words().len()), (10, 8));
    assert!(verdict(&f, &pup(2, 0, 1, 35)));
    assert!(verdict(&f, &pup(2, 0, 200, 35)));
    assert!(!verdict(&f, &pup(2, 0, 1, 36)));
    // The high word of the socket is checked too.
    assert!(!verdict(&f, &pup(2, 0, 1, 0x0001_0023)));
    assert!(!verdict(&f, &pup(5, 0, 1, 35)));
    // "in most packets the DstSocket is likely not to match and so the short-circuit operation
    // will exit immediately": at the first CAND, word 1 of the program.
    let other = pup(2, 0, 1, 44);
    assert_eq!(interp::run(&f, &other).exit, Exit::ShortCircuit { word: 1 });
    assert_eq!(interp::run(&f, &pup(2, 0, 1, 35)).exit, Exit::End);
    // A packet that ends inside the socket field: word 8 is not there.
    assert!(!verdict(&f, &pup(2, 0, 1, 35)[..17]));
}

#[test]
fn figures_round_trip_through_the_printed_form() {
    for text in [FIGURE_11, FIGURE_12] {
        let p = cspf::parse(text).unwrap();
        let printed = p.to_string();
        assert_eq!(cspf::parse(&printed).unwrap(), p, "{printed}");
    }
}

/// Ethernet programs in the paper's style and the pcap expressions they mean.
const ETHERNET: &[(&str, &str)] = &[
    // Figure 11's shape: IPv4 with protocol 1..=100 (word 11's low byte is ip[9]).
    (
        "PUSHWORD+6, PUSHLIT | EQ, 0x0800,
         PUSHWORD+11, PUSH00FF | AND, PUSHZERO | GT,
         PUSHWORD+11, PUSH00FF | AND, PUSHLIT | LE, 100,
         AND, AND",
        "ip and ip[9] > 0 and ip[9] <= 100",
    ),
    // Figure 12's shape: the most selective test first, with CAND.
    (
        "PUSHWORD+18, PUSHLIT | CAND, 53,
         PUSHWORD+11, PUSH00FF | AND, PUSHLIT | CAND, 17,
         PUSHWORD+6, PUSHLIT | EQ, 0x0800",
        "ether[36:2] = 53 and ether[23] = 17 and ether[12:2] = 0x800",
    ),
    // COR: ARP or RARP.
    (
        "ENF_PUSHWORD+6, ENF_PUSHLIT | ENF_COR, 0x0806,
         ENF_PUSHWORD+6, ENF_PUSHLIT | ENF_EQ, 0x8035",
        "arp or rarp",
    ),
    // CNAND/CNOR: anything but IPv4 to or from 10.0.0.1 ... written as a negation chain:
    // not IPv4 -> accept; source 10.0.0.1 -> reject; otherwise the destination decides.
    (
        "PUSHWORD+6, PUSHLIT | CNAND, 0x0800,
         PUSHWORD+13, PUSHLIT | EQ, 0x0a00, PUSHWORD+14, PUSHONE | EQ, AND,
         PUSHONE | CNOR,
         PUSHWORD+15, PUSHLIT | NEQ, 0x0a00, PUSHWORD+16, PUSHONE | NEQ, OR",
        "not ip or (not ip src 10.0.0.1 and not ip dst 10.0.0.1)",
    ),
    // Bitwise operators on header fields: TCP with SYN set and ACK clear (no IP options).
    (
        "PUSHWORD+6, PUSHLIT | CAND, 0x0800,
         PUSHWORD+11, PUSH00FF | AND, PUSHLIT | CAND, 6,
         PUSHWORD+23, PUSHLIT | AND, 0x12, PUSHLIT | EQ, 0x02",
        "ether[12:2] = 0x800 and ether[23] = 6 and ether[46:2] & 0x12 = 2",
    ),
];

/// Generated Ethernet traffic, plus copies rewritten so that the programs' fields match.
fn ethernet_packets() -> Vec<Packet> {
    let mut out = generate_packets(1, 1987, 4000);
    let extra: Vec<Packet> = out
        .iter()
        .filter(|p| p.data.len() >= 48)
        .flat_map(|p| {
            let mut a = p.clone();
            a.data[36..38].copy_from_slice(&53u16.to_be_bytes());
            let mut b = p.clone();
            b.data[26..30].copy_from_slice(&[10, 0, 0, 1]);
            let mut c = p.clone();
            c.data[30..34].copy_from_slice(&[10, 0, 0, 1]);
            [a, b, c]
        })
        .collect();
    out.extend(extra);
    out
}

#[test]
fn ethernet_programs_match_pcap_expressions() {
    let packets = ethernet_packets();
    let oracle = sift_oracle::Oracle::new(1, 262144).unwrap();
    for (program, expr) in ETHERNET {
        let p = cspf::parse(program).unwrap_or_else(|e| panic!("{}", e.render(program)));
        let libpcap = oracle.compile(expr, true, 0).unwrap();
        let mut engines = common::Engines::new(&cspf::lift(&p));
        let mut accepted = 0;
        for pkt in &packets {
            let direct = interp::run(&p, &pkt.data).accept;
            let lifted = engines.run(&pkt.data, pkt.wire_len) != 0;
            let expected = libpcap.run(&pkt.data, pkt.wire_len) != 0;
            assert_eq!(
                direct, lifted,
                "{expr}: interpreter vs IR on {:02x?}",
                pkt.data
            );
            assert_eq!(
                direct, expected,
                "{expr}: CSPF vs pcap on {:02x?}",
                pkt.data
            );
            accepted += usize::from(expected);
        }
        println!(
            "{expr}: {accepted} of {} packets accepted by CSPF (interpreter and 4 engines) and \
             by libpcap alike",
            packets.len()
        );
        assert!(
            accepted > 50 && accepted < packets.len() - 50,
            "{expr}: {accepted} of {} accepted; the test needs both verdicts",
            packets.len()
        );
    }
}
