//! Finding the IP fragment a frame carries: the link-layer headers sift supports, then the IPv4
//! header or the IPv6 extension-header chain up to its Fragment header.
//!
//! Only what fragment dispatch needs is read: the datagram's identity (the reassembly key of
//! RFC 791 / RFC 8200) and whether this fragment is the first (offset 0). Anything that cannot be
//! read in full from the captured bytes is "not a fragment": the packet is then matched as it is,
//! and the filters decide (they see the same truncated bytes).

use std::fmt;

/// The link layers whose headers are understood (capture files' `LINKTYPE_` values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LinkLayer {
    /// 0 (DLT_NULL) and 108 (DLT_LOOP): a 4-byte address family. NULL stores it in the byte
    /// order of the machine that wrote the capture, LOOP in network order; both are accepted in
    /// either order (the values are small, so the two readings cannot be confused).
    Loopback,
    /// 1: Ethernet II, any number of 802.1Q / 802.1ad / QinQ tags, PPPoE sessions, MPLS.
    Ethernet,
    /// 12, 14, 101: raw IP (version from the first nibble); 228: IPv4; 229: IPv6.
    Raw,
    /// 113: Linux cooked capture v1 (protocol at 14, payload at 16).
    LinuxSll,
    /// 276: Linux cooked capture v2 (protocol at 0, payload at 20).
    LinuxSll2,
}

impl LinkLayer {
    pub(crate) fn from_linktype(linktype: u32) -> Option<LinkLayer> {
        Some(match linktype {
            0 | 108 => LinkLayer::Loopback,
            1 => LinkLayer::Ethernet,
            12 | 14 | 101 | 228 | 229 => LinkLayer::Raw,
            113 => LinkLayer::LinuxSll,
            276 => LinkLayer::LinuxSll2,
            _ => return None,
        })
    }
}

/// The identity of an IP datagram, shared by all its fragments.
///
/// IPv4 (RFC 791): source, destination, protocol and identification. IPv6 (RFC 8200 section
/// 4.5): source, destination and identification only — the Next Header of the Fragment header
/// may differ between fragments of one packet (only the first fragment's counts), so it cannot
/// be part of the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DatagramKey {
    V4 {
        src: [u8; 4],
        dst: [u8; 4],
        protocol: u8,
        id: u16,
    },
    V6 {
        src: [u8; 16],
        dst: [u8; 16],
        id: u32,
    },
}

impl fmt::Display for DatagramKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatagramKey::V4 {
                src,
                dst,
                protocol,
                id,
            } => write!(
                f,
                "{} > {} proto {protocol} id {id:#06x}",
                std::net::Ipv4Addr::from(*src),
                std::net::Ipv4Addr::from(*dst)
            ),
            DatagramKey::V6 { src, dst, id } => write!(
                f,
                "{} > {} id {id:#010x}",
                std::net::Ipv6Addr::from(*src),
                std::net::Ipv6Addr::from(*dst)
            ),
        }
    }
}

/// A frame that carries an IP fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fragment {
    pub(crate) key: DatagramKey,
    /// Offset 0: the fragment that carries the transport header the filters test.
    pub(crate) first: bool,
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_PPPOE_SESSION: u16 = 0x8864;
const ETHERTYPE_MPLS: u16 = 0x8847;
const ETHERTYPE_MPLS_MULTICAST: u16 = 0x8848;
const PPP_IPV4: u16 = 0x0021;
const PPP_IPV6: u16 = 0x0057;
const AF_INET: u32 = 2;
/// AF_INET6 on the BSDs (NetBSD/OpenBSD 24, FreeBSD 28, Darwin 30).
const BSD_AF_INET6: [u32; 3] = [24, 28, 30];
const IPV4_MORE_FRAGMENTS: u16 = 0x2000;
const IPV4_OFFSET_MASK: u16 = 0x1fff;
const IPV6_FRAGMENT: u8 = 44;
const IPV6_OFFSET_MASK: u16 = 0xfff8;
const IPV6_MORE_FRAGMENTS: u16 = 0x0001;

/// Which IP version the link layer announced (`None`: it does not say; read the nibble).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Announced {
    V4,
    V6,
    Unknown,
}

fn u16_at(p: &[u8], at: usize) -> Option<u16> {
    let b = p.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

fn u32_at(p: &[u8], at: usize) -> Option<u32> {
    let b = p.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// The fragment `frame` carries, if it is an IPv4 or IPv6 fragment (not an unfragmented packet,
/// not an IPv6 atomic fragment: offset 0 without More Fragments is a whole packet, RFC 6946).
pub(crate) fn fragment(link: LinkLayer, frame: &[u8]) -> Option<Fragment> {
    let (announced, at) = network_layer(link, frame)?;
    let ip = frame.get(at..)?;
    match (announced, ip.first()? >> 4) {
        (Announced::V4 | Announced::Unknown, 4) => ipv4(ip),
        (Announced::V6 | Announced::Unknown, 6) => ipv6(ip),
        _ => None,
    }
}

/// Where the IP header starts, and what the link layer says it is.
fn network_layer(link: LinkLayer, frame: &[u8]) -> Option<(Announced, usize)> {
    match link {
        LinkLayer::Raw => Some((Announced::Unknown, 0)),
        LinkLayer::Loopback => {
            let b = frame.get(..4)?;
            let family = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            let family = family.min(family.swap_bytes());
            if family == AF_INET {
                Some((Announced::V4, 4))
            } else if BSD_AF_INET6.contains(&family) {
                Some((Announced::V6, 4))
            } else {
                None
            }
        }
        LinkLayer::Ethernet => ethertype_payload(frame, u16_at(frame, 12)?, 14),
        LinkLayer::LinuxSll => ethertype_payload(frame, u16_at(frame, 14)?, 16),
        LinkLayer::LinuxSll2 => ethertype_payload(frame, u16_at(frame, 0)?, 20),
    }
}

/// Follows an EtherType (`ty`, payload at `at`) through VLAN tags, PPPoE and MPLS to IP.
fn ethertype_payload(frame: &[u8], mut ty: u16, mut at: usize) -> Option<(Announced, usize)> {
    // Every step consumes at least 4 bytes of the frame, so the loop ends with it.
    loop {
        match ty {
            ETHERTYPE_IPV4 => return Some((Announced::V4, at)),
            ETHERTYPE_IPV6 => return Some((Announced::V6, at)),
            0x8100 | 0x88a8 | 0x9100 => {
                ty = u16_at(frame, at + 2)?;
                at += 4;
            }
            ETHERTYPE_PPPOE_SESSION => {
                // Version/type, code, session id, length; then the PPP protocol.
                return match u16_at(frame, at + 6)? {
                    PPP_IPV4 => Some((Announced::V4, at + 8)),
                    PPP_IPV6 => Some((Announced::V6, at + 8)),
                    _ => None,
                };
            }
            ETHERTYPE_MPLS | ETHERTYPE_MPLS_MULTICAST => {
                // Labels until bottom of stack; MPLS does not say what it carries, the
                // version nibble does.
                loop {
                    let label = u32_at(frame, at)?;
                    at += 4;
                    if label & 0x100 != 0 {
                        return Some((Announced::Unknown, at));
                    }
                }
            }
            _ => return None,
        }
    }
}

fn ipv4(ip: &[u8]) -> Option<Fragment> {
    if usize::from(ip[0] & 0x0f) < 5 || ip.len() < 20 {
        return None;
    }
    let flags_offset = u16_at(ip, 6)?;
    let offset = flags_offset & IPV4_OFFSET_MASK;
    if offset == 0 && flags_offset & IPV4_MORE_FRAGMENTS == 0 {
        return None;
    }
    let mut src = [0; 4];
    let mut dst = [0; 4];
    src.copy_from_slice(&ip[12..16]);
    dst.copy_from_slice(&ip[16..20]);
    Some(Fragment {
        key: DatagramKey::V4 {
            src,
            dst,
            protocol: ip[9],
            id: u16_at(ip, 4)?,
        },
        first: offset == 0,
    })
}

/// Where the next header starts after the extension header of type `next` at `at`, if `next` is
/// an extension header that may precede a Fragment header.
fn skip_extension(ip: &[u8], next: u8, at: usize) -> Option<usize> {
    let len = usize::from(*ip.get(at + 1)?);
    match next {
        // Hop-by-hop, Routing, Destination options, Mobility, HIP, Shim6: 8-octet units
        // beyond the first 8 (RFC 8200 section 4, RFC 7045's list).
        0 | 43 | 60 | 135 | 139 | 140 => Some(at + (len + 1) * 8),
        // Authentication header: 4-octet units beyond the first 8 (RFC 4302).
        51 => Some(at + (len + 2) * 4),
        _ => None,
    }
}

fn ipv6(ip: &[u8]) -> Option<Fragment> {
    if ip.len() < 40 {
        return None;
    }
    let mut next = ip[6];
    let mut at = 40usize;
    // Each extension header is at least 8 bytes long, so the walk ends with the packet.
    while next != IPV6_FRAGMENT {
        let following = *ip.get(at)?;
        at = skip_extension(ip, next, at)?;
        next = following;
    }
    let offset_flags = u16_at(ip, at + 2)?;
    let id = u32_at(ip, at + 4)?;
    let offset = offset_flags & IPV6_OFFSET_MASK;
    if offset == 0 && offset_flags & IPV6_MORE_FRAGMENTS == 0 {
        return None; // an atomic fragment: a whole packet
    }
    let mut src = [0; 16];
    let mut dst = [0; 16];
    src.copy_from_slice(&ip[8..24]);
    dst.copy_from_slice(&ip[24..40]);
    Some(Fragment {
        key: DatagramKey::V6 { src, dst, id },
        first: offset == 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_fragment(flags_offset: u16, id: u16) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 40];
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&flags_offset.to_be_bytes());
        p.extend_from_slice(&[64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        p.extend_from_slice(&[0; 20]);
        p
    }

    /// IPv6 with the given extension headers (type, bytes) before a Fragment header.
    fn ipv6_fragment(ext: &[(u8, Vec<u8>)], offset_flags: u16, id: u32) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 0, 0, 64];
        p.extend_from_slice(&[0x20, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p.extend_from_slice(&[0x20, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        let mut types: Vec<u8> = ext.iter().map(|(t, _)| *t).collect();
        types.push(IPV6_FRAGMENT);
        p[6] = types[0];
        for (i, (_, body)) in ext.iter().enumerate() {
            let mut h = body.clone();
            h[0] = types[i + 1];
            p.extend_from_slice(&h);
        }
        p.extend_from_slice(&[17, 0]);
        p.extend_from_slice(&offset_flags.to_be_bytes());
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&[0; 16]);
        p
    }

    fn framed(link: LinkLayer, prefix: &[u8], ip: &[u8]) -> Option<Fragment> {
        let mut f = prefix.to_vec();
        f.extend_from_slice(ip);
        fragment(link, &f)
    }

    #[test]
    fn ipv4_first_later_and_whole() {
        let first = fragment(LinkLayer::Raw, &ipv4_fragment(0x2000, 7)).unwrap();
        assert!(first.first);
        let later = fragment(LinkLayer::Raw, &ipv4_fragment(0x0010, 7)).unwrap();
        assert!(!later.first);
        assert_eq!(first.key, later.key);
        // Don't Fragment alone, and no flags: whole packets.
        assert_eq!(fragment(LinkLayer::Raw, &ipv4_fragment(0x4000, 7)), None);
        assert_eq!(fragment(LinkLayer::Raw, &ipv4_fragment(0, 7)), None);
        // The last fragment (offset, no MF) is a later fragment.
        assert!(
            !fragment(LinkLayer::Raw, &ipv4_fragment(0x0003, 7))
                .unwrap()
                .first
        );
        assert_eq!(
            fragment(LinkLayer::Raw, &ipv4_fragment(0x2000, 7)[..19]),
            None
        );
    }

    #[test]
    fn ipv6_through_extension_headers() {
        let hbh = (0u8, vec![0, 0, 1, 4, 0, 0, 0, 0]);
        let dst = (60u8, vec![0, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let ah = (51u8, vec![0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let ext = vec![hbh, dst, ah];
        let first = fragment(LinkLayer::Raw, &ipv6_fragment(&ext, 0x0001, 9)).unwrap();
        let later = fragment(LinkLayer::Raw, &ipv6_fragment(&[], 0x0100, 9)).unwrap();
        assert!(first.first && !later.first);
        assert_eq!(first.key, later.key);
        assert_eq!(
            fragment(LinkLayer::Raw, &ipv6_fragment(&ext, 0, 9)),
            None,
            "atomic fragment"
        );
        // ESP hides what follows: not a fragment as far as we can tell.
        let mut esp = ipv6_fragment(&[], 0x0001, 9);
        esp[6] = 50;
        assert_eq!(fragment(LinkLayer::Raw, &esp), None);
        // Truncated inside the chain.
        let whole = ipv6_fragment(&ext, 0x0001, 9);
        for cut in 0..40 + 8 + 16 + 12 + 8 {
            assert_eq!(fragment(LinkLayer::Raw, &whole[..cut]), None, "cut {cut}");
        }
    }

    #[test]
    fn link_layers() {
        let v4 = ipv4_fragment(0x2000, 1);
        let v6 = ipv6_fragment(&[], 0x0001, 1);
        let mac = [0u8; 12];
        let eth = |tags: &[u8], ty: u16| {
            let mut p = mac.to_vec();
            p.extend_from_slice(tags);
            p.extend_from_slice(&ty.to_be_bytes());
            p
        };
        assert!(framed(LinkLayer::Ethernet, &eth(&[], 0x0800), &v4).is_some());
        assert!(framed(LinkLayer::Ethernet, &eth(&[], 0x86dd), &v6).is_some());
        // Ethertype and version disagree.
        assert!(framed(LinkLayer::Ethernet, &eth(&[], 0x86dd), &v4).is_none());
        let qinq = [0x88, 0xa8, 0, 10, 0x81, 0, 0, 20];
        assert!(framed(LinkLayer::Ethernet, &eth(&qinq, 0x0800), &v4).is_some());
        let mut pppoe = eth(&[], 0x8864);
        pppoe.extend_from_slice(&[0x11, 0, 0, 1, 0, 40, 0x00, 0x57]);
        assert!(framed(LinkLayer::Ethernet, &pppoe, &v6).is_some());
        let mut mpls = eth(&[], 0x8847);
        mpls.extend_from_slice(&[0, 1, 0, 64, 0, 2, 1, 64]);
        assert!(framed(LinkLayer::Ethernet, &mpls, &v4).is_some());
        assert!(framed(LinkLayer::Ethernet, &eth(&[], 0x0806), &v4).is_none());

        let mut sll = vec![0u8; 14];
        sll.extend_from_slice(&[0x08, 0x00]);
        assert!(framed(LinkLayer::LinuxSll, &sll, &v4).is_some());
        let mut sll2 = vec![0x86, 0xdd];
        sll2.extend_from_slice(&[0; 18]);
        assert!(framed(LinkLayer::LinuxSll2, &sll2, &v6).is_some());
        for family in [2u32.to_le_bytes(), 2u32.to_be_bytes()] {
            assert!(framed(LinkLayer::Loopback, &family, &v4).is_some());
        }
        for af in BSD_AF_INET6 {
            assert!(framed(LinkLayer::Loopback, &af.to_le_bytes(), &v6).is_some());
        }
        assert!(framed(LinkLayer::Loopback, &7u32.to_le_bytes(), &v4).is_none());
        assert!(framed(LinkLayer::Raw, &[], &v6).is_some());
        assert_eq!(LinkLayer::from_linktype(147), None);
    }

    #[test]
    fn never_reads_outside_the_frame() {
        // Every prefix of every framing: no panic, and a fragment only when complete.
        let v4 = ipv4_fragment(0x2000, 1);
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x81, 0, 0, 1, 0x88, 0x47, 0, 0, 1, 0]);
        frame.extend_from_slice(&v4);
        for cut in 0..=frame.len() {
            let got = fragment(LinkLayer::Ethernet, &frame[..cut]);
            assert_eq!(got.is_some(), cut >= 22 + 20, "cut {cut}");
        }
        for link in [
            LinkLayer::Loopback,
            LinkLayer::Ethernet,
            LinkLayer::Raw,
            LinkLayer::LinuxSll,
            LinkLayer::LinuxSll2,
        ] {
            for len in 0..64 {
                for fill in [0u8, 0x08, 0x44, 0x60, 0x81, 0x86, 0xff] {
                    let _ = fragment(link, &vec![fill; len]);
                }
            }
        }
    }
}
