//! Flow identities of packets, for `sift split`: the addresses, protocol and ports of the
//! IPv4/IPv6 packet a frame carries, found through the link-layer headers sift supports.

use std::fmt;
use std::net::IpAddr;

/// The transport endpoints of a packet: addresses, IP protocol, and ports (0 where the
/// protocol has none, or for fragments after the first, which carry no transport header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoints {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

/// How `sift split` groups packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SplitBy {
    /// Both directions of a connection together (protocol, addresses and ports, unordered).
    Flow,
    /// Each direction apart (protocol, source and destination address and port).
    #[value(name = "5-tuple")]
    FiveTuple,
    /// All traffic between two hosts, whatever the protocol (addresses, unordered).
    HostPair,
}

impl Endpoints {
    /// The file name of the group this packet belongs to for `by`.
    pub fn group_name(self, by: SplitBy) -> String {
        let key = self.key(by);
        match by {
            SplitBy::HostPair => format!("{}_{}", addr_name(key.src), addr_name(key.dst)),
            SplitBy::Flow | SplitBy::FiveTuple => key.to_string(),
        }
    }

    /// The group key for `by` (a canonical orientation where direction does not count).
    pub fn key(self, by: SplitBy) -> Endpoints {
        let swapped = Endpoints {
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            ..self
        };
        match by {
            SplitBy::FiveTuple => self,
            SplitBy::Flow => {
                if (self.src, self.sport) <= (self.dst, self.dport) {
                    self
                } else {
                    swapped
                }
            }
            SplitBy::HostPair => {
                let (src, dst) = if self.src <= self.dst {
                    (self.src, self.dst)
                } else {
                    (self.dst, self.src)
                };
                Endpoints {
                    src,
                    dst,
                    proto: 0,
                    sport: 0,
                    dport: 0,
                }
            }
        }
    }
}

/// An address as it appears in file names (IPv6 colons become `-`).
fn addr_name(a: IpAddr) -> String {
    a.to_string().replace(':', "-")
}

/// A file-name friendly form: `tcp_10.0.0.1_80_10.0.0.2_51234`.
impl fmt::Display for Endpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let addr = addr_name;
        let proto = match self.proto {
            0 => "ip".to_string(),
            1 => "icmp".to_string(),
            6 => "tcp".to_string(),
            17 => "udp".to_string(),
            58 => "icmp6".to_string(),
            132 => "sctp".to_string(),
            n => format!("proto{n}"),
        };
        write!(
            f,
            "{proto}_{}_{}_{}_{}",
            addr(self.src),
            self.sport,
            addr(self.dst),
            self.dport
        )
    }
}

fn u16_at(p: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes(p.get(i..i + 2)?.try_into().ok()?))
}

/// The endpoints of the IP packet inside a frame of `linktype`, if it carries one.
pub fn endpoints(linktype: u32, frame: &[u8]) -> Option<Endpoints> {
    let (ethertype, offset) = match linktype {
        // Ethernet, with any number of 802.1Q / 802.1ad tags.
        1 => {
            let mut offset = 12;
            let mut ty = u16_at(frame, offset)?;
            while matches!(ty, 0x8100 | 0x88a8 | 0x9100) {
                offset += 4;
                ty = u16_at(frame, offset)?;
            }
            (Some(ty), offset + 2)
        }
        113 => (Some(u16_at(frame, 14)?), 16), // Linux cooked v1
        276 => (Some(u16_at(frame, 0)?), 20),  // Linux cooked v2
        12 | 14 | 101 | 228 | 229 => (None, 0), // raw IP
        // BSD loopback: a 4-byte address family in either byte order.
        0 | 108 => {
            let family = frame.get(..4)?;
            let family = u32::from_le_bytes(family.try_into().ok()?)
                .min(u32::from_be_bytes(family.try_into().ok()?));
            match family {
                2 => (Some(0x0800), 4),
                24 | 28 | 30 => (Some(0x86dd), 4),
                _ => return None,
            }
        }
        _ => return None,
    };
    let ip = frame.get(offset..)?;
    let version = ip.first()? >> 4;
    match (ethertype, version) {
        (Some(0x0800) | None, 4) => ipv4(ip),
        (Some(0x86dd) | None, 6) => ipv6(ip),
        _ => None,
    }
}

fn ports(proto: u8, transport: &[u8]) -> (u16, u16) {
    match proto {
        6 | 17 | 132 => (
            u16_at(transport, 0).unwrap_or(0),
            u16_at(transport, 2).unwrap_or(0),
        ),
        _ => (0, 0),
    }
}

fn ipv4(ip: &[u8]) -> Option<Endpoints> {
    let header_len = usize::from(ip.first()? & 0x0f) * 4;
    let proto = *ip.get(9)?;
    let src: [u8; 4] = ip.get(12..16)?.try_into().ok()?;
    let dst: [u8; 4] = ip.get(16..20)?.try_into().ok()?;
    let first_fragment = u16_at(ip, 6)? & 0x1fff == 0;
    let (sport, dport) = match ip.get(header_len..) {
        Some(t) if first_fragment => ports(proto, t),
        _ => (0, 0),
    };
    Some(Endpoints {
        src: IpAddr::from(src),
        dst: IpAddr::from(dst),
        proto,
        sport,
        dport,
    })
}

fn ipv6(ip: &[u8]) -> Option<Endpoints> {
    let src: [u8; 16] = ip.get(8..24)?.try_into().ok()?;
    let dst: [u8; 16] = ip.get(24..40)?.try_into().ok()?;
    let (mut next, mut offset) = (*ip.get(6)?, 40usize);
    let mut first_fragment = true;
    // Extension headers; a chain longer than this is not worth following for a file name.
    for _ in 0..16 {
        match next {
            0 | 43 | 60 => {
                let len = (usize::from(*ip.get(offset + 1)?) + 1) * 8;
                next = *ip.get(offset)?;
                offset += len;
            }
            44 => {
                first_fragment = u16_at(ip, offset + 2)? & 0xfff8 == 0;
                next = *ip.get(offset)?;
                offset += 8;
            }
            51 => {
                let len = (usize::from(*ip.get(offset + 1)?) + 2) * 4;
                next = *ip.get(offset)?;
                offset += len;
            }
            _ => break,
        }
    }
    let (sport, dport) = match ip.get(offset..) {
        Some(t) if first_fragment => ports(next, t),
        _ => (0, 0),
    };
    Some(Endpoints {
        src: IpAddr::from(src),
        dst: IpAddr::from(dst),
        proto: next,
        sport,
        dport,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth_ipv4_tcp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut p = vec![0u8; 54];
        p[12..14].copy_from_slice(&[0x08, 0x00]);
        p[14] = 0x45;
        p[23] = 6;
        p[26..30].copy_from_slice(&src);
        p[30..34].copy_from_slice(&dst);
        p[34..36].copy_from_slice(&sport.to_be_bytes());
        p[36..38].copy_from_slice(&dport.to_be_bytes());
        p
    }

    #[test]
    fn both_directions_of_a_flow_share_a_key() {
        let a = endpoints(1, &eth_ipv4_tcp([10, 0, 0, 1], [10, 0, 0, 2], 80, 5000)).unwrap();
        let b = endpoints(1, &eth_ipv4_tcp([10, 0, 0, 2], [10, 0, 0, 1], 5000, 80)).unwrap();
        assert_eq!(a.key(SplitBy::Flow), b.key(SplitBy::Flow));
        assert_ne!(a.key(SplitBy::FiveTuple), b.key(SplitBy::FiveTuple));
        assert_eq!(a.key(SplitBy::HostPair), b.key(SplitBy::HostPair));
        assert_eq!(a.to_string(), "tcp_10.0.0.1_80_10.0.0.2_5000");
        assert_eq!(b.group_name(SplitBy::HostPair), "10.0.0.1_10.0.0.2");
        assert_eq!(b.group_name(SplitBy::Flow), "tcp_10.0.0.1_80_10.0.0.2_5000");
    }

    #[test]
    fn vlan_tags_and_truncation() {
        let mut tagged = eth_ipv4_tcp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2);
        tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        assert_eq!(endpoints(1, &tagged).unwrap().dport, 2);
        // Cut inside the TCP header: addresses but no ports.
        let cut = &eth_ipv4_tcp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2)[..35];
        let e = endpoints(1, cut).unwrap();
        assert_eq!((e.sport, e.dport), (0, 0));
        assert_eq!(endpoints(1, &[0u8; 10]), None);
        assert_eq!(endpoints(105, &tagged), None);
    }
}
