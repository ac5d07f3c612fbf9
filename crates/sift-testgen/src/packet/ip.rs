//! IPv4 and IPv6 packets and their payloads: TCP, UDP (with Geneve), SCTP, ICMP and ICMPv6.

use crate::pools::*;
use crate::Rng;

use super::link::mac;

pub(super) fn ipv4_addr(rng: &mut Rng) -> [u8; 4] {
    match rng.below(20) {
        0..=14 => *rng.pick(IPV4_UNICAST),
        15..=18 => *rng.pick(IPV4_SPECIAL),
        _ => rng.next_u32().to_be_bytes(),
    }
}

pub(super) fn ipv6_addr(rng: &mut Rng) -> [u8; 16] {
    if rng.chance(1, 10) {
        rng.bytes(16).try_into().unwrap_or([0; 16])
    } else {
        *rng.pick(IPV6_ADDRS)
    }
}

pub(super) fn port(rng: &mut Rng) -> u16 {
    if rng.chance(1, 6) {
        rng.u16()
    } else {
        *rng.pick(PORTS)
    }
}

pub(super) fn checksum(data: &[u8]) -> u16 {
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
pub(super) fn ip_payload(rng: &mut Rng, proto: u8, v6: bool) -> Vec<u8> {
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

pub(super) fn tcp(rng: &mut Rng) -> Vec<u8> {
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

pub(super) fn udp(rng: &mut Rng) -> Vec<u8> {
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

pub(super) fn geneve(rng: &mut Rng) -> Vec<u8> {
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

pub(super) fn sctp(rng: &mut Rng) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&port(rng).to_be_bytes());
    p.extend_from_slice(&port(rng).to_be_bytes());
    p.extend(rng.bytes(8));
    p.extend_from_slice(&[1, 0, 0, 20]);
    p.extend(rng.bytes(16));
    p
}

pub(super) fn icmp(rng: &mut Rng) -> Vec<u8> {
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

pub(super) fn icmp6(rng: &mut Rng) -> Vec<u8> {
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
