//! Generated packets for every link type sift supports.
//!
//! [`generate_packets`] mixes well-formed packets (about 70%), snaplen-truncated ones (data cut at a
//! random point, possibly inside a header; `wire_len` keeps the original length) and mutated ones
//! (header bytes, lengths, version nibbles, IHL flipped; see [`mutate_packet`]).

use crate::pools::*;
use crate::Rng;

/// A captured packet: the bytes captured and the length it had on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Packet {
    /// Captured bytes (possibly truncated).
    pub data: Vec<u8>,
    /// Original length on the wire (`>= data.len()` for generated packets).
    pub wire_len: u32,
}

impl Packet {
    /// A complete (untruncated) packet.
    pub fn new(data: Vec<u8>) -> Packet {
        let wire_len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        Packet { data, wire_len }
    }
}

/// The LINKTYPE values [`generate_packets`] knows how to frame.
///
/// 0 NULL, 1 Ethernet, 12/14/101 raw IP, 108 LOOP, 113 Linux SLL, 228 IPv4, 229 IPv6, 276 SLL2.
pub fn supported_linktypes() -> &'static [u32] {
    &[0, 1, 12, 14, 101, 108, 113, 228, 229, 276]
}

/// `count` packets for `linktype`, deterministic from `seed`.
///
/// Unknown link types get random bytes (still useful for out-of-bounds paths).
pub fn generate_packets(linktype: u32, seed: u64, count: usize) -> Vec<Packet> {
    let mut rng = Rng::new(seed ^ (u64::from(linktype) << 48));
    (0..count)
        .map(|_| generate_packet(&mut rng, linktype))
        .collect()
}

/// One packet: well-formed 70%, truncated 15%, mutated 15%.
pub fn generate_packet(rng: &mut Rng, linktype: u32) -> Packet {
    let pkt = Packet::new(frame(rng, linktype));
    match rng.below(100) {
        0..=69 => pkt,
        70..=84 => truncate_packet(rng, &pkt),
        _ => mutate_packet(rng, &pkt),
    }
}

/// Cuts the captured data at a random point (anywhere, including inside the link header);
/// `wire_len` keeps the original length, as with a small snaplen.
pub fn truncate_packet(rng: &mut Rng, pkt: &Packet) -> Packet {
    let n = pkt.data.len();
    let cut = if n == 0 {
        0
    } else if rng.chance(1, 2) {
        // Concentrate on header boundaries.
        rng.index(n.min(80))
    } else {
        rng.index(n)
    };
    Packet {
        data: pkt.data[..cut].to_vec(),
        wire_len: pkt.wire_len,
    }
}

/// Values that make headers interesting: version nibbles, IHL values, protocol numbers, extremes.
const INTERESTING: &[u8] = &[
    0x00, 0xff, 0x40, 0x45, 0x46, 0x4f, 0x41, 0x60, 0x65, 0x06, 0x11, 0x3a, 0x2c, 0x00, 0x20, 0x80,
    0x08, 0x86, 0xdd, 0x81, 0x88, 0x3f, 0xe0,
];

/// Applies 1-3 random mutations: byte flips and "interesting" values, mostly in the first 64 bytes
/// (where the headers are), nibble swaps (IP version / IHL), length fields, or a changed wire
/// length.
pub fn mutate_packet(rng: &mut Rng, pkt: &Packet) -> Packet {
    let mut data = pkt.data.clone();
    let mut wire_len = pkt.wire_len;
    for _ in 0..rng.range(1, 3) {
        if data.is_empty() {
            break;
        }
        let hot = data.len().min(64);
        let i = if rng.chance(4, 5) {
            rng.index(hot)
        } else {
            rng.index(data.len())
        };
        match rng.below(7) {
            0 => data[i] ^= 1 << rng.below(8),
            1 => data[i] = *rng.pick(INTERESTING),
            2 => data[i] = (data[i] & 0x0f) | (rng.byte() & 0xf0),
            3 => data[i] = (data[i] & 0xf0) | (rng.byte() & 0x0f),
            4 => data[i] = rng.byte(),
            5 => {
                // Plausible length / offset values in a 16-bit field.
                let v: u16 = *rng.pick(&[0, 1, 20, 40, 0x05dc, 0x0600, 0xffff, 0x2000, 0x3fff]);
                let n = data.len();
                let j = i.min(n.saturating_sub(2));
                let k = (n - j).min(2);
                data[j..j + k].copy_from_slice(&v.to_be_bytes()[..k]);
            }
            _ => {
                wire_len = match rng.below(3) {
                    0 => wire_len.saturating_add(rng.range(1, 2000) as u32),
                    1 => data.len() as u32,
                    _ => rng.range(0, 70000) as u32,
                };
            }
        }
    }
    Packet { data, wire_len }
}

/// A complete frame for `linktype`.
fn frame(rng: &mut Rng, linktype: u32) -> Vec<u8> {
    match linktype {
        1 => ethernet(rng),
        12 | 14 | 101 => {
            if rng.chance(1, 2) {
                ipv4(rng)
            } else {
                ipv6(rng)
            }
        }
        228 => ipv4(rng),
        229 => ipv6(rng),
        0 | 108 => {
            let (family, payload) = match rng.below(10) {
                0..=4 => (2u32, ipv4(rng)),
                5..=8 => (*rng.pick(&[24u32, 28, 30]), ipv6(rng)),
                _ => {
                    let random_family = rng.next_u32();
                    (
                        *rng.pick(&[7u32, 0, 23, 0x0200_0000, random_family]),
                        rng.bytes(30),
                    )
                }
            };
            let mut out = if linktype == 0 {
                family.to_le_bytes().to_vec()
            } else {
                family.to_be_bytes().to_vec()
            };
            out.extend(payload);
            out
        }
        113 | 276 => sll(rng, linktype == 276),
        _ => {
            let n = rng.range(0, 120) as usize;
            rng.bytes(n)
        }
    }
}

/// What follows the MAC addresses of an Ethernet frame (or the SLL header).
enum L2Payload {
    /// Ethernet II: type + payload (which may itself hold VLAN tags, MPLS labels, PPPoE...).
    EtherType(u16, Vec<u8>),
    /// 802.2 LLC header + payload (802.3 frame with a length field).
    Llc(Vec<u8>),
    /// "Raw 802.3" Novell IPX (starts with 0xffff).
    Novell(Vec<u8>),
}

fn ethernet(rng: &mut Rng) -> Vec<u8> {
    let payload = l2_payload(rng, 0);
    let mut dst = mac(rng);
    if let L2Payload::EtherType(0x86dd, _) = payload {
        if rng.chance(1, 4) {
            dst = [0x33, 0x33, 0, 0, 0, 1];
        }
    }
    let mut out = dst.to_vec();
    out.extend_from_slice(&mac(rng));
    match payload {
        L2Payload::EtherType(t, p) => {
            out.extend_from_slice(&t.to_be_bytes());
            out.extend(p);
        }
        L2Payload::Llc(p) | L2Payload::Novell(p) => {
            let len = if rng.chance(9, 10) {
                p.len() as u16
            } else {
                rng.range(0, 1500) as u16
            };
            out.extend_from_slice(&len.to_be_bytes());
            out.extend(p);
        }
    }
    // Pad to the Ethernet minimum like real captures, most of the time.
    if out.len() < 60 && rng.chance(2, 3) {
        out.resize(60, 0);
    }
    out
}

fn sll(rng: &mut Rng, v2: bool) -> Vec<u8> {
    let payload = l2_payload(rng, 0);
    let (mut proto, body) = match payload {
        L2Payload::EtherType(t, p) => (t, p),
        L2Payload::Llc(p) => (0x0004, p),
        L2Payload::Novell(p) => (0x0001, p),
    };
    // libpcap 1.10 compiles `iso`/`stp`/`ipx`/`netbeui` on SLL2 as a test of the protocol field
    // against the LLC SAP (0x00fe, ...), so put such values there sometimes.
    if proto == 0x0004 && rng.chance(1, 3) {
        proto = u16::from(body.first().copied().unwrap_or(0xfe));
    }
    let pkttype: u16 = *rng.pick(&[0, 1, 2, 3, 4]);
    let hatype: u16 = rng.weighted(&[(8, 1u16), (2, 772), (1, 65534), (1, 778)]);
    let addrlen: u16 = *rng.pick(&[6, 6, 6, 0, 8]);
    let mut addr = [0u8; 8];
    addr[..6].copy_from_slice(&mac(rng));
    let mut out = Vec::new();
    if v2 {
        out.extend_from_slice(&proto.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&rng.range(1, 4).to_be_bytes()[4..]);
        out.extend_from_slice(&hatype.to_be_bytes());
        out.push(pkttype as u8);
        out.push(addrlen as u8);
        out.extend_from_slice(&addr);
    } else {
        out.extend_from_slice(&pkttype.to_be_bytes());
        out.extend_from_slice(&hatype.to_be_bytes());
        out.extend_from_slice(&addrlen.to_be_bytes());
        out.extend_from_slice(&addr);
        out.extend_from_slice(&proto.to_be_bytes());
    }
    out.extend(body);
    out
}

fn mac(rng: &mut Rng) -> [u8; 6] {
    if rng.chance(1, 12) {
        let mut m: [u8; 6] = rng.bytes(6).try_into().unwrap_or([0; 6]);
        if rng.chance(1, 2) {
            m[0] |= 1; // random multicast
        }
        m
    } else {
        rng.weighted(&[
            (4, MACS[0]),
            (4, MACS[1]),
            (3, MACS[2]),
            (3, MACS[3]),
            (2, MACS[4]),
            (2, MACS[5]),
        ])
    }
}

/// The payload after the MACs; `depth` bounds encapsulation nesting.
fn l2_payload(rng: &mut Rng, depth: u32) -> L2Payload {
    let nest = depth < 2;
    let choice = rng.below(100);
    match choice {
        0..=29 => L2Payload::EtherType(0x0800, ipv4(rng)),
        30..=47 => L2Payload::EtherType(0x86dd, ipv6(rng)),
        48..=53 => L2Payload::EtherType(0x0806, arp(rng, false)),
        54..=56 => L2Payload::EtherType(0x8035, arp(rng, true)),
        57..=64 if nest => {
            // 802.1Q / QinQ tag.
            let tpid = rng.weighted(&[(6, 0x8100u16), (2, 0x88a8), (2, 0x9100)]);
            let inner = l2_payload(rng, depth + 1);
            let vid = if rng.chance(5, 6) {
                *rng.pick(VLAN_IDS)
            } else {
                rng.u16() & 0xfff
            };
            let tci = (u16::from(rng.byte() & 0xf0) << 8) | vid;
            let mut p = tci.to_be_bytes().to_vec();
            match inner {
                L2Payload::EtherType(t, body) => {
                    p.extend_from_slice(&t.to_be_bytes());
                    p.extend(body);
                }
                L2Payload::Llc(body) | L2Payload::Novell(body) => {
                    p.extend_from_slice(&(body.len() as u16).to_be_bytes());
                    p.extend(body);
                }
            }
            L2Payload::EtherType(tpid, p)
        }
        65..=70 => L2Payload::EtherType(*rng.pick(&[0x8847, 0x8847, 0x8848]), mpls(rng)),
        71..=75 => pppoe_session(rng, depth),
        76..=77 => L2Payload::EtherType(0x8863, pppoe_discovery(rng)),
        78..=86 => L2Payload::Llc(llc(rng)),
        87 => L2Payload::Novell(ipx_header(rng)),
        88 => L2Payload::EtherType(0x6003, decnet(rng)),
        89 => L2Payload::EtherType(0x809b, rng.bytes(24)),
        90 => L2Payload::EtherType(0x80f3, rng.bytes(28)),
        91 => L2Payload::EtherType(0x8137, ipx_header(rng)),
        92..=94 => {
            let t = *rng.pick(&[0x88cc, 0x6001, 0x6002, 0x6004, 0x6007, 0x9000, 0x0800]);
            L2Payload::EtherType(t, rng.bytes_between(0, 46))
        }
        95 => L2Payload::EtherType(rng.u16(), rng.bytes_between(0, 60)),
        _ => L2Payload::EtherType(0x0800, ipv4(rng)),
    }
}

fn mpls(rng: &mut Rng) -> Vec<u8> {
    let labels = rng.range(1, 3);
    let mut out = Vec::new();
    for i in 0..labels {
        let label = if rng.chance(4, 5) {
            *rng.pick(MPLS_LABELS)
        } else {
            rng.next_u32() & 0xfffff
        };
        let bos = u32::from(i + 1 == labels || rng.chance(1, 20));
        let entry = (label << 12) | (u32::from(rng.byte() & 7) << 9) | (bos << 8) | 64;
        out.extend_from_slice(&entry.to_be_bytes());
    }
    match rng.below(5) {
        0..=2 => out.extend(ipv4(rng)),
        3 => out.extend(ipv6(rng)),
        _ => out.extend(rng.bytes(20)),
    }
    out
}

fn pppoe_session(rng: &mut Rng, depth: u32) -> L2Payload {
    let (ppp_proto, body): (u16, Vec<u8>) = match rng.below(6) {
        0..=2 => (0x0021, ipv4(rng)),
        3 | 4 => (0x0057, ipv6(rng)),
        _ => (*rng.pick(&[0xc021, 0x8021, 0x0281]), rng.bytes(12)),
    };
    let _ = depth;
    let sid = if rng.chance(3, 4) {
        *rng.pick(PPPOE_SESSIONS)
    } else {
        rng.u16()
    };
    let mut p = vec![0x11, 0x00];
    p.extend_from_slice(&sid.to_be_bytes());
    p.extend_from_slice(&((body.len() + 2) as u16).to_be_bytes());
    p.extend_from_slice(&ppp_proto.to_be_bytes());
    p.extend(body);
    L2Payload::EtherType(0x8864, p)
}

fn pppoe_discovery(rng: &mut Rng) -> Vec<u8> {
    let code = *rng.pick(&[0x09u8, 0x07, 0x19, 0x65, 0xa7]);
    let mut p = vec![0x11, code, 0, 0];
    let tags = vec![0x01, 0x01, 0x00, 0x00, 0x01, 0x03, 0x00, 0x04, 1, 2, 3, 4];
    p.extend_from_slice(&(tags.len() as u16).to_be_bytes());
    p.extend(tags);
    p
}

fn llc(rng: &mut Rng) -> Vec<u8> {
    let ctrl = *rng.pick(&[0x03u8, 0x03, 0x00, 0x01, 0x0b, 0xaf, 0xe3]);
    match rng.below(8) {
        0 | 1 => {
            // SNAP.
            let (oui, t, body): ([u8; 3], u16, Vec<u8>) = match rng.below(5) {
                0 => ([0, 0, 0], 0x0800, ipv4(rng)),
                1 => ([0, 0, 0], 0x0806, arp(rng, false)),
                2 => ([0x08, 0x00, 0x07], 0x809b, rng.bytes(20)),
                3 => ([0, 0, 0], 0x80f3, rng.bytes(28)),
                _ => ([0, 0, 0], 0x8137, ipx_header(rng)),
            };
            let mut p = vec![0xaa, 0xaa, 0x03];
            p.extend_from_slice(&oui);
            p.extend_from_slice(&t.to_be_bytes());
            p.extend(body);
            p
        }
        2 => {
            // STP BPDU.
            let mut p = vec![
                0x42,
                0x42,
                0x03,
                0x00,
                0x00,
                *rng.pick(&[0u8, 2, 3]),
                *rng.pick(&[0u8, 0x80, 2]),
            ];
            p.extend(rng.bytes(31));
            p
        }
        3 | 4 => {
            // ISO: CLNP, ES-IS, IS-IS.
            let nlpid = *rng.pick(&[0x81u8, 0x82, 0x83, 0x83, 0x00]);
            let mut p = vec![0xfe, 0xfe, 0x03, nlpid, 27, 1, 0];
            let pdu = *rng.pick(&[15u8, 16, 17, 18, 20, 24, 25, 26, 27, 1, 28]);
            p.push(pdu);
            p.extend(rng.bytes(20));
            p
        }
        5 => {
            let mut p = vec![0xe0, 0xe0, 0x03];
            p.extend(ipx_header(rng));
            p
        }
        6 => {
            let mut p = vec![0xf0, 0xf0, ctrl];
            p.extend(rng.bytes(20));
            p
        }
        _ => {
            let mut p = vec![rng.byte(), rng.byte(), ctrl];
            p.extend(rng.bytes(10));
            p
        }
    }
}

fn ipx_header(rng: &mut Rng) -> Vec<u8> {
    let mut p = vec![0xff, 0xff, 0x00, 30, 0, *rng.pick(&[0u8, 4, 17])];
    p.extend(rng.bytes(24));
    p
}

fn decnet(rng: &mut Rng) -> Vec<u8> {
    let (area, node) = *rng.pick(DECNET_ADDRS);
    let dst = (area << 10) | node;
    let (sa, sn) = *rng.pick(DECNET_ADDRS);
    let src = (sa << 10) | sn;
    let mut body = Vec::new();
    if rng.chance(1, 3) {
        body.push(0x81); // one byte of padding
    }
    if rng.chance(1, 2) {
        // Short data header: flags, dst, src, forward.
        body.push(0x02);
        body.extend_from_slice(&dst.to_le_bytes());
        body.extend_from_slice(&src.to_le_bytes());
        body.push(0);
    } else {
        // Long data header: flags, d-area, d-subarea, HIORD + dst, s-area, s-subarea, HIORD + src.
        body.extend_from_slice(&[0x06, 0, 0, 0xaa, 0x00, 0x04, 0x00]);
        body.extend_from_slice(&dst.to_le_bytes());
        body.extend_from_slice(&[0, 0, 0xaa, 0x00, 0x04, 0x00]);
        body.extend_from_slice(&src.to_le_bytes());
        body.extend_from_slice(&[0, 0, 0]);
    }
    body.extend(rng.bytes(8));
    let mut p = (body.len() as u16).to_le_bytes().to_vec();
    p.extend(body);
    p
}

fn arp(rng: &mut Rng, reverse: bool) -> Vec<u8> {
    let op: u16 = if reverse {
        *rng.pick(&[3, 4])
    } else {
        *rng.pick(&[1, 2])
    };
    let (hlen, plen) = if rng.chance(1, 15) {
        (rng.byte() & 15, rng.byte() & 15)
    } else {
        (6, 4)
    };
    let mut p = vec![0, 1, 8, 0, hlen, plen];
    p.extend_from_slice(&op.to_be_bytes());
    p.extend_from_slice(&mac(rng));
    p.extend_from_slice(&ipv4_addr(rng));
    p.extend_from_slice(&mac(rng));
    p.extend_from_slice(&ipv4_addr(rng));
    p
}

fn ipv4_addr(rng: &mut Rng) -> [u8; 4] {
    match rng.below(20) {
        0..=14 => *rng.pick(IPV4_UNICAST),
        15..=18 => *rng.pick(IPV4_SPECIAL),
        _ => rng.next_u32().to_be_bytes(),
    }
}

fn ipv6_addr(rng: &mut Rng) -> [u8; 16] {
    if rng.chance(1, 10) {
        rng.bytes(16).try_into().unwrap_or([0; 16])
    } else {
        *rng.pick(IPV6_ADDRS)
    }
}

fn port(rng: &mut Rng) -> u16 {
    if rng.chance(1, 6) {
        rng.u16()
    } else {
        *rng.pick(PORTS)
    }
}

fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for chunk in data.chunks(2) {
        let word = u16::from_be_bytes([chunk[0], *chunk.get(1).unwrap_or(&0)]);
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An IPv4 datagram: options sometimes, fragments sometimes, any of the transports.
pub(crate) fn ipv4(rng: &mut Rng) -> Vec<u8> {
    let proto = rng.weighted(&[
        (20, 6u8),
        (16, 17),
        (8, 1),
        (3, 2),
        (3, 132),
        (2, 103),
        (2, 112),
        (3, 47),
        (2, 51),
        (2, 50),
        (2, 4),
        (2, 41),
        (1, 0),
        (1, 255),
    ]);
    let options: Vec<u8> = match rng.below(8) {
        0 => vec![0x94, 0x04, 0x00, 0x00], // router alert
        1 => vec![0x01, 0x01, 0x01, 0x00], // NOPs + EOL
        2 => {
            let mut o = vec![0x07, 11, 4];
            o.extend(rng.bytes(8));
            o.push(0);
            o
        }
        _ => Vec::new(),
    };
    // Fragments: first (MF, offset 0), middle (MF, offset > 0), last (offset > 0).
    let (flags_frag, fragment) = match rng.below(10) {
        0 => (0x2000u16, false),
        1 => (0x2000 | rng.range(1, 200) as u16, true),
        2 => (rng.range(1, 200) as u16, true),
        3..=6 => (0x4000, false),
        _ => (0, false),
    };
    let payload = if fragment {
        rng.bytes_between(0, 32)
    } else {
        ip_payload(rng, proto, false)
    };
    let dst = ipv4_addr(rng);
    let src = if rng.chance(1, 10) {
        dst
    } else {
        ipv4_addr(rng)
    };
    let ihl = 5 + options.len() / 4;
    let total = (ihl * 4 + payload.len()) as u16;
    let random_tos = rng.byte();
    let tos = *rng.pick(&[0u8, 0, 0xb8, 0x10, random_tos]);
    let mut h = vec![0x40 | ihl as u8, tos];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&rng.u16().to_be_bytes());
    h.extend_from_slice(&flags_frag.to_be_bytes());
    h.push(*rng.pick(&[1u8, 64, 128, 255, 0]));
    h.push(proto);
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend(options);
    let c = checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend(payload);
    h
}

/// An IPv6 packet with 0-3 extension headers before the transport.
pub(crate) fn ipv6(rng: &mut Rng) -> Vec<u8> {
    let upper = rng.weighted(&[
        (10, 6u8),
        (8, 17),
        (8, 58),
        (2, 132),
        (1, 59),
        (1, 50),
        (1, 47),
        (1, 4),
    ]);
    let n_ext = rng.weighted(&[(10, 0usize), (4, 1), (2, 2), (1, 3)]);
    let mut chain: Vec<u8> = (0..n_ext)
        .map(|_| *rng.pick(&[0u8, 43, 44, 60, 51]))
        .collect();
    chain.push(upper);
    let mut payload = Vec::new();
    let mut fragment = false;
    for i in 0..n_ext {
        let nh = chain[i + 1];
        match chain[i] {
            44 => {
                let off: u16 = *rng.pick(&[0u16, 0, 8, 100]);
                let m = u16::from(rng.chance(1, 2));
                fragment |= off != 0;
                payload.push(nh);
                payload.push(0);
                payload.extend_from_slice(&((off << 3) | m).to_be_bytes());
                payload.extend_from_slice(&rng.next_u32().to_be_bytes());
            }
            51 => {
                // AH: length in 4-octet units minus 2.
                payload.extend_from_slice(&[nh, 4, 0, 0]);
                payload.extend(rng.bytes(20));
            }
            _ => {
                let len8 = rng.below(2) as u8;
                payload.extend_from_slice(&[nh, len8]);
                payload.extend_from_slice(&[1, 4, 0, 0, 0, 0]);
                payload.extend(vec![0u8; usize::from(len8) * 8]);
            }
        }
    }
    payload.extend(if fragment {
        rng.bytes(16)
    } else {
        ip_payload(rng, upper, true)
    });
    let mut h = vec![0x60 | (rng.byte() & 0x0f), rng.byte(), 0, rng.byte()];
    h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    h.push(chain[0]);
    h.push(*rng.pick(&[1u8, 64, 255]));
    let dst = ipv6_addr(rng);
    let src = if rng.chance(1, 10) {
        dst
    } else {
        ipv6_addr(rng)
    };
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend(payload);
    h
}

/// The transport for `proto` (IPv4 or IPv6).
fn ip_payload(rng: &mut Rng, proto: u8, v6: bool) -> Vec<u8> {
    match proto {
        6 => tcp(rng),
        17 => udp(rng),
        132 => sctp(rng),
        1 if !v6 => icmp(rng),
        58 if v6 => icmp6(rng),
        2 => {
            let t = *rng.pick(&[0x11u8, 0x16, 0x17, 0x22, 0x12]);
            let mut p = vec![t, 0, 0, 0];
            p.extend_from_slice(&ipv4_addr(rng));
            p
        }
        103 => {
            let mut p = vec![0x20 | (rng.byte() & 0x0f), 0, 0, 0];
            p.extend(rng.bytes(8));
            p
        }
        112 => {
            let mut p = vec![0x21, rng.byte(), 100, 1, 0, 1, 0, 0];
            p.extend_from_slice(&ipv4_addr(rng));
            p
        }
        47 => {
            let inner_v4 = rng.chance(2, 3);
            let mut p = vec![0, 0];
            p.extend_from_slice(&(if inner_v4 { 0x0800u16 } else { 0x6558 }).to_be_bytes());
            if inner_v4 {
                p.extend(rng.bytes(20));
            } else {
                p.extend(rng.bytes(14));
            }
            p
        }
        51 => {
            let nh = *rng.pick(&[6u8, 17, 1]);
            let mut p = vec![nh, 4, 0, 0];
            p.extend(rng.bytes(20));
            p.extend(ip_payload(rng, nh, v6));
            p
        }
        50 => {
            let mut p = rng.next_u32().to_be_bytes().to_vec();
            p.extend(rng.bytes(24));
            p
        }
        4 if !v6 || rng.chance(1, 2) => {
            let mut p = vec![0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0];
            p.extend_from_slice(&ipv4_addr(rng));
            p.extend_from_slice(&ipv4_addr(rng));
            p.extend(udp(rng).into_iter().take(8));
            p
        }
        _ => rng.bytes_between(0, 24),
    }
}

fn tcp(rng: &mut Rng) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&port(rng).to_be_bytes());
    p.extend_from_slice(&port(rng).to_be_bytes());
    p.extend_from_slice(&rng.next_u32().to_be_bytes());
    p.extend_from_slice(&rng.next_u32().to_be_bytes());
    let opts: Vec<u8> = match rng.below(4) {
        0 => vec![2, 4, 5, 0xb4],
        1 => vec![2, 4, 5, 0xb4, 1, 3, 3, 7, 4, 2, 1, 1],
        _ => Vec::new(),
    };
    let doff = 5 + opts.len() / 4;
    p.push((doff as u8) << 4);
    let random_flags = rng.byte();
    let flags = rng.weighted(&[
        (6, 0x02u8),
        (4, 0x12),
        (8, 0x10),
        (4, 0x18),
        (3, 0x11),
        (2, 0x04),
        (1, 0x14),
        (1, 0x20),
        (1, 0x29),
        (2, random_flags),
    ]);
    p.push(flags);
    p.extend_from_slice(&rng.u16().to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 0]);
    p.extend(opts);
    let data = rng.range(0, 3) as usize * 16;
    p.extend(rng.bytes(data));
    p
}

fn udp(rng: &mut Rng) -> Vec<u8> {
    let sport = port(rng);
    let dport = if rng.chance(1, 8) { 6081 } else { port(rng) };
    let body = if dport == 6081 {
        geneve(rng)
    } else {
        rng.bytes_between(0, 40)
    };
    let mut p = Vec::new();
    p.extend_from_slice(&sport.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&((body.len() + 8) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend(body);
    p
}

fn geneve(rng: &mut Rng) -> Vec<u8> {
    let opt_words = rng.below(3) as u8;
    let inner_eth = rng.chance(2, 3);
    let proto: u16 = if inner_eth { 0x6558 } else { 0x0800 };
    let vni = if rng.chance(4, 5) {
        *rng.pick(GENEVE_VNIS)
    } else {
        rng.next_u32() & 0xffffff
    };
    let mut p = vec![opt_words, 0];
    p.extend_from_slice(&proto.to_be_bytes());
    p.extend_from_slice(&(vni << 8).to_be_bytes());
    p.extend(vec![0u8; usize::from(opt_words) * 4]);
    if inner_eth {
        p.extend_from_slice(&mac(rng));
        p.extend_from_slice(&mac(rng));
        p.extend_from_slice(&[0x08, 0x00]);
    }
    // A short inner IPv4 + UDP header without recursion into another Geneve.
    let mut inner = vec![0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0];
    inner.extend_from_slice(&ipv4_addr(rng));
    inner.extend_from_slice(&ipv4_addr(rng));
    inner.extend_from_slice(&port(rng).to_be_bytes());
    inner.extend_from_slice(&port(rng).to_be_bytes());
    inner.extend_from_slice(&[0, 8, 0, 0]);
    p.extend(inner);
    p
}

fn sctp(rng: &mut Rng) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&port(rng).to_be_bytes());
    p.extend_from_slice(&port(rng).to_be_bytes());
    p.extend(rng.bytes(8));
    p.extend_from_slice(&[1, 0, 0, 20]);
    p.extend(rng.bytes(16));
    p
}

fn icmp(rng: &mut Rng) -> Vec<u8> {
    let t = if rng.chance(9, 10) {
        *rng.pick(ICMP_TYPES)
    } else {
        rng.byte()
    };
    let code = if rng.chance(3, 4) { 0 } else { rng.byte() & 15 };
    let mut p = vec![t, code, 0, 0];
    p.extend(rng.bytes(4));
    if matches!(t, 3 | 4 | 5 | 11 | 12) {
        // Quoted header of the offending datagram.
        p.extend_from_slice(&[0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0]);
        p.extend_from_slice(&ipv4_addr(rng));
        p.extend_from_slice(&ipv4_addr(rng));
        p.extend(rng.bytes(8));
    } else {
        p.extend(rng.bytes_between(0, 24));
    }
    let c = checksum(&p);
    p[2..4].copy_from_slice(&c.to_be_bytes());
    p
}

fn icmp6(rng: &mut Rng) -> Vec<u8> {
    let t = if rng.chance(9, 10) {
        *rng.pick(ICMP6_TYPES)
    } else {
        rng.byte()
    };
    let mut p = vec![t, if rng.chance(3, 4) { 0 } else { rng.byte() }, 0, 0];
    p.extend(rng.bytes(4));
    if matches!(t, 135 | 136) {
        p.extend_from_slice(&ipv6_addr(rng));
    } else {
        p.extend(rng.bytes_between(0, 24));
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic() {
        for &lt in supported_linktypes() {
            assert_eq!(generate_packets(lt, 42, 50), generate_packets(lt, 42, 50));
            assert_ne!(generate_packets(lt, 42, 50), generate_packets(lt, 43, 50));
        }
    }

    #[test]
    fn wire_len_never_below_caplen_for_unmutated() {
        let mut rng = Rng::new(3);
        for _ in 0..2000 {
            let p = Packet::new(frame(&mut rng, 1));
            assert_eq!(p.wire_len as usize, p.data.len());
            let t = truncate_packet(&mut rng, &p);
            assert!(t.data.len() < p.data.len());
            assert_eq!(t.wire_len, p.wire_len);
        }
    }

    #[test]
    fn ipv4_headers_are_consistent() {
        let mut rng = Rng::new(5);
        for _ in 0..500 {
            let p = ipv4(&mut rng);
            assert_eq!(p[0] >> 4, 4);
            let ihl = usize::from(p[0] & 15) * 4;
            assert!(ihl >= 20 && ihl <= p.len());
            assert_eq!(usize::from(u16::from_be_bytes([p[2], p[3]])), p.len());
            assert_eq!(checksum(&p[..ihl]), 0);
        }
    }

    #[test]
    fn ipv6_payload_length_is_consistent() {
        let mut rng = Rng::new(6);
        for _ in 0..500 {
            let p = ipv6(&mut rng);
            assert_eq!(p[0] >> 4, 6);
            assert_eq!(usize::from(u16::from_be_bytes([p[4], p[5]])) + 40, p.len());
        }
    }

    #[test]
    fn ethernet_covers_the_interesting_types() {
        let pkts = generate_packets(1, 9, 4000);
        let type_at_12 = |p: &Packet| p.data.get(12..14).map(|b| u16::from_be_bytes([b[0], b[1]]));
        for t in [
            0x0800u16, 0x86dd, 0x0806, 0x8035, 0x8100, 0x88a8, 0x9100, 0x8847, 0x8848, 0x8863,
            0x8864, 0x6003, 0x809b, 0x80f3, 0x8137, 0x88cc,
        ] {
            assert!(
                pkts.iter().any(|p| type_at_12(p) == Some(t)),
                "no ethertype {t:#06x}"
            );
        }
        // 802.3 frames with each LLC SAP.
        for sap in [0xaa, 0x42, 0xfe, 0xe0, 0xf0] {
            assert!(
                pkts.iter()
                    .any(|p| type_at_12(p).is_some_and(|t| t <= 1500)
                        && p.data.get(14) == Some(&sap)),
                "no LLC SAP {sap:#04x}"
            );
        }
        assert!(pkts.iter().any(|p| p.data.starts_with(&[0xff; 6])));
        assert!(pkts.iter().any(|p| p.data.len() < 14));
        assert!(pkts.iter().any(|p| (p.wire_len as usize) > p.data.len()));
    }

    #[test]
    fn cooked_and_loopback_headers() {
        let sll = generate_packets(113, 1, 400);
        for proto in [[0x08, 0x00], [0x86, 0xdd], [0x00, 0x04], [0x81, 0x00]] {
            assert!(
                sll.iter().any(|p| p.data.get(14..16) == Some(&proto[..])),
                "{proto:?}"
            );
        }
        let null = generate_packets(0, 1, 200);
        assert!(null.iter().any(|p| p.data.starts_with(&[2, 0, 0, 0])));
        let lo = generate_packets(108, 1, 200);
        assert!(lo.iter().any(|p| p.data.starts_with(&[0, 0, 0, 2])));
        let sll2 = generate_packets(276, 1, 300);
        assert!(sll2.iter().any(|p| p.data.starts_with(&[0x08, 0x00, 0, 0])));
        assert!(generate_packets(229, 1, 100)
            .iter()
            .filter(|p| p.data.len() == p.wire_len as usize)
            .any(|p| p.data[0] >> 4 == 6));
    }

    #[test]
    fn mutation_changes_something_usually() {
        let mut rng = Rng::new(11);
        let mut changed = 0;
        for _ in 0..200 {
            let p = Packet::new(ethernet(&mut rng));
            if mutate_packet(&mut rng, &p) != p {
                changed += 1;
            }
        }
        assert!(changed > 150, "{changed}");
        assert_eq!(
            mutate_packet(&mut rng, &Packet::new(Vec::new())).data,
            Vec::<u8>::new()
        );
    }
}
