//! Link layers and what rides on them but IP: Ethernet (with VLAN tags, MPLS, PPPoE, LLC,
//! IPX, DECnet, ARP) and Linux cooked headers.

use crate::pools::*;
use crate::Rng;

use super::ip::{ipv4, ipv4_addr, ipv6};

/// What follows the MAC addresses of an Ethernet frame (or the SLL header).
pub(super) enum L2Payload {
    /// Ethernet II: type + payload (which may itself hold VLAN tags, MPLS labels, PPPoE...).
    EtherType(u16, Vec<u8>),
    /// 802.2 LLC header + payload (802.3 frame with a length field).
    Llc(Vec<u8>),
    /// "Raw 802.3" Novell IPX (starts with 0xffff).
    Novell(Vec<u8>),
}

pub(super) fn ethernet(rng: &mut Rng) -> Vec<u8> {
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

pub(super) fn sll(rng: &mut Rng, v2: bool) -> Vec<u8> {
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

pub(super) fn mac(rng: &mut Rng) -> [u8; 6] {
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
pub(super) fn l2_payload(rng: &mut Rng, depth: u32) -> L2Payload {
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

pub(super) fn mpls(rng: &mut Rng) -> Vec<u8> {
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

pub(super) fn pppoe_session(rng: &mut Rng, depth: u32) -> L2Payload {
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

pub(super) fn pppoe_discovery(rng: &mut Rng) -> Vec<u8> {
    let code = *rng.pick(&[0x09u8, 0x07, 0x19, 0x65, 0xa7]);
    let mut p = vec![0x11, code, 0, 0];
    let tags = vec![0x01, 0x01, 0x00, 0x00, 0x01, 0x03, 0x00, 0x04, 1, 2, 3, 4];
    p.extend_from_slice(&(tags.len() as u16).to_be_bytes());
    p.extend(tags);
    p
}

pub(super) fn llc(rng: &mut Rng) -> Vec<u8> {
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

pub(super) fn ipx_header(rng: &mut Rng) -> Vec<u8> {
    let mut p = vec![0xff, 0xff, 0x00, 30, 0, *rng.pick(&[0u8, 4, 17])];
    p.extend(rng.bytes(24));
    p
}

pub(super) fn decnet(rng: &mut Rng) -> Vec<u8> {
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

pub(super) fn arp(rng: &mut Rng, reverse: bool) -> Vec<u8> {
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
