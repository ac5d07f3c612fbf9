//! Generated packets for every link type sift supports.
//!
//! [`generate_packets`] mixes well-formed packets (about 70%), snaplen-truncated ones (data cut at a
//! random point, possibly inside a header; `wire_len` keeps the original length) and mutated ones
//! (header bytes, lengths, version nibbles, IHL flipped; see [`mutate_packet`]).

use crate::Rng;

mod ip;
mod link;

use ip::{ipv4, ipv6};
use link::{ethernet, sll};

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

/// A minimal Ethernet frame carrying IPv4 (or IPv6) and a transport header of protocol `proto`
/// (6 TCP, 17 UDP, 132 SCTP) with the given ports, every other byte zero: for probing tables of
/// ports at their edges.
pub fn ethernet_ports(ip6: bool, proto: u8, sport: u16, dport: u16) -> Packet {
    let (ethertype, header, proto_at): (u16, usize, usize) = if ip6 {
        (0x86dd, 40, 20)
    } else {
        (0x0800, 20, 23)
    };
    let mut p = vec![0u8; 14 + header + 20];
    p[12..14].copy_from_slice(&ethertype.to_be_bytes());
    p[14] = if ip6 { 0x60 } else { 0x45 };
    p[proto_at] = proto;
    let l4 = 14 + header;
    p[l4..l4 + 2].copy_from_slice(&sport.to_be_bytes());
    p[l4 + 2..l4 + 4].copy_from_slice(&dport.to_be_bytes());
    Packet::new(p)
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

#[cfg(test)]
mod tests {
    use super::ip::checksum;
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
