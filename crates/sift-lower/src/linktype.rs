//! Link layers: which capture link types sift compiles for, where their headers put the network
//! layer, and how "the packet carries protocol P" is tested on each (libpcap's `gen_linktype`).

use sift_ir::LoadSize::{Byte, Half, Word};

use crate::cond::Cond;
use crate::gen::{AbsOffset, Gen, GenResult, LinkState, OffRel};

/// Link-layer types the code generator knows (libpcap's DLT values, for the ones sift supports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dlt {
    Null,
    En10mb,
    Raw,
    Loop,
    LinuxSll,
    LinuxSll2,
    Ipv4,
    Ipv6,
    /// PPP inside PPPoE (only reached through `pppoes`).
    Ppp,
}

impl Dlt {
    /// The link type of a capture file's `LINKTYPE_` value, as libpcap maps it.
    pub fn from_linktype(linktype: u32) -> Option<Dlt> {
        Some(match linktype {
            0 => Dlt::Null,
            1 => Dlt::En10mb,
            12 | 14 | 101 => Dlt::Raw,
            108 => Dlt::Loop,
            113 => Dlt::LinuxSll,
            276 => Dlt::LinuxSll2,
            228 => Dlt::Ipv4,
            229 => Dlt::Ipv6,
            _ => return None,
        })
    }

    pub fn description(self) -> &'static str {
        match self {
            Dlt::Null => "BSD loopback",
            Dlt::En10mb => "Ethernet",
            Dlt::Raw => "Raw IP",
            Dlt::Loop => "OpenBSD loopback",
            Dlt::LinuxSll => "Linux cooked v1",
            Dlt::LinuxSll2 => "Linux cooked v2",
            Dlt::Ipv4 => "Raw IPv4",
            Dlt::Ipv6 => "Raw IPv6",
            Dlt::Ppp => "PPP",
        }
    }
}

pub(crate) const ETHERMTU: u32 = 1500;
pub(crate) const ETHERTYPE_IP: u32 = 0x0800;
pub(crate) const ETHERTYPE_ARP: u32 = 0x0806;
pub(crate) const ETHERTYPE_REVARP: u32 = 0x8035;
pub(crate) const ETHERTYPE_NS: u32 = 0x0600;
pub(crate) const ETHERTYPE_MOPDL: u32 = 0x6001;
pub(crate) const ETHERTYPE_MOPRC: u32 = 0x6002;
pub(crate) const ETHERTYPE_DN: u32 = 0x6003;
pub(crate) const ETHERTYPE_LAT: u32 = 0x6004;
pub(crate) const ETHERTYPE_SCA: u32 = 0x6007;
pub(crate) const ETHERTYPE_ATALK: u32 = 0x809b;
pub(crate) const ETHERTYPE_AARP: u32 = 0x80f3;
pub(crate) const ETHERTYPE_8021Q: u32 = 0x8100;
pub(crate) const ETHERTYPE_IPX: u32 = 0x8137;
pub(crate) const ETHERTYPE_IPV6: u32 = 0x86dd;
pub(crate) const ETHERTYPE_MPLS: u32 = 0x8847;
pub(crate) const ETHERTYPE_PPPOED: u32 = 0x8863;
pub(crate) const ETHERTYPE_PPPOES: u32 = 0x8864;
pub(crate) const ETHERTYPE_8021AD: u32 = 0x88a8;
pub(crate) const ETHERTYPE_8021QINQ: u32 = 0x9100;
pub(crate) const LLCSAP_IP: u32 = 0x06;
pub(crate) const LLCSAP_8021D: u32 = 0x42;
pub(crate) const LLCSAP_SNAP: u8 = 0xaa;
pub(crate) const LLCSAP_IPX: u32 = 0xe0;
pub(crate) const LLCSAP_NETBEUI: u32 = 0xf0;
pub(crate) const LLCSAP_ISONS: u32 = 0xfe;
const LINUX_SLL_P_802_3: u32 = 0x0001;
const LINUX_SLL_P_802_2: u32 = 0x0004;
const PPP_IP: u32 = 0x0021;
const PPP_OSI: u32 = 0x0023;
const PPP_NS: u32 = 0x0025;
const PPP_DECNET: u32 = 0x0027;
const PPP_APPLE: u32 = 0x0029;
const PPP_IPX: u32 = 0x002b;
const PPP_BRPDU: u32 = 0x0031;
const PPP_IPV6: u32 = 0x0057;
const AF_INET: u32 = 2;
/// The values BSD-derived systems use for AF_INET6 in loopback headers; a capture file may come
/// from any of them.
const BSD_AF_INET6: [u32; 3] = [24, 28, 30];

impl LinkState {
    /// The offsets for a capture of link type `dlt` (libpcap's `init_linktype`).
    pub fn new(dlt: Dlt) -> LinkState {
        let (off_linktype, off_linkpl, off_nl_nosnap) = match dlt {
            Dlt::En10mb => (Some(12), 14, 3),
            Dlt::Null | Dlt::Loop => (Some(0), 4, 0),
            Dlt::Raw | Dlt::Ipv4 | Dlt::Ipv6 => (None, 0, 0),
            Dlt::LinuxSll => (Some(14), 16, 0),
            Dlt::LinuxSll2 => (Some(0), 20, 0),
            Dlt::Ppp => (Some(2), 4, 0),
        };
        LinkState {
            linktype: dlt,
            prevlinktype: dlt,
            off_linkhdr: AbsOffset::constant(0),
            off_prevlinkhdr: AbsOffset::constant(0),
            off_linkpl: AbsOffset::constant(off_linkpl),
            off_linktype: off_linktype.map(AbsOffset::constant),
            off_nl: 0,
            off_nl_nosnap,
            label_stack_depth: 0,
            vlan_stack_depth: 0,
            is_geneve: false,
        }
    }
}

fn ethertype_to_ppptype(proto: u32) -> u32 {
    match proto {
        ETHERTYPE_IP => PPP_IP,
        ETHERTYPE_IPV6 => PPP_IPV6,
        ETHERTYPE_DN => PPP_DECNET,
        ETHERTYPE_ATALK => PPP_APPLE,
        ETHERTYPE_NS => PPP_NS,
        LLCSAP_ISONS => PPP_OSI,
        LLCSAP_8021D => PPP_BRPDU,
        LLCSAP_IPX => PPP_IPX,
        other => other,
    }
}

impl Gen {
    /// "The link layer says the payload is protocol `proto`" (an Ethernet type or an LLC SAP).
    pub fn linktype(&mut self, proto: u32) -> GenResult<Cond> {
        if self.link.label_stack_depth > 0 {
            return self.mpls_linktype(proto);
        }
        Ok(match self.link.linktype {
            Dlt::En10mb => self.ether_linktype(proto),
            Dlt::LinuxSll => self.linux_sll_linktype(proto),
            Dlt::Raw => match proto {
                ETHERTYPE_IP => self.mcmp(OffRel::LinkHdr, 0, Byte, 0x40, 0xf0),
                ETHERTYPE_IPV6 => self.mcmp(OffRel::LinkHdr, 0, Byte, 0x60, 0xf0),
                _ => self.uncond(false),
            },
            Dlt::Ipv4 => self.uncond(proto == ETHERTYPE_IP),
            Dlt::Ipv6 => self.uncond(proto == ETHERTYPE_IPV6),
            Dlt::Ppp => self.cmp(OffRel::LinkType, 0, Half, ethertype_to_ppptype(proto)),
            Dlt::Null | Dlt::Loop => match proto {
                ETHERTYPE_IP => self.loopback_linktype(AF_INET),
                ETHERTYPE_IPV6 => {
                    // tcpdump reads a file: accept any BSD's AF_INET6, in gencode's order:
                    // Darwin's first, then the others' (`(30 or (24 or 28))`).
                    let [bsd, freebsd, darwin] = BSD_AF_INET6;
                    let bsd = self.loopback_linktype(bsd);
                    let freebsd = self.loopback_linktype(freebsd);
                    let either = self.or(bsd, freebsd);
                    let darwin = self.loopback_linktype(darwin);
                    self.or(darwin, either)
                }
                _ => self.uncond(false),
            },
            Dlt::LinuxSll2 => self.cmp(OffRel::LinkType, 0, Half, proto),
        })
    }

    /// The 4-byte address family of a BSD loopback header. DLT_NULL stores it in the byte order of
    /// the machine that wrote the capture; DLT_LOOP in network order.
    fn loopback_linktype(&mut self, family: u32) -> Cond {
        let v = if self.link.linktype == Dlt::Null {
            let written = if self.env.swapped {
                family.swap_bytes()
            } else {
                family
            };
            // The load reads big-endian; the header holds `written` in this machine's order.
            u32::from_be_bytes(written.to_ne_bytes())
        } else {
            family
        };
        self.cmp(OffRel::LinkHdr, 0, Word, v)
    }

    /// An 802.3 frame: the type/length field holds a length.
    fn ether_8023(&mut self) -> Cond {
        self.cmp_gt(OffRel::LinkType, 0, Half, ETHERMTU).not()
    }

    fn ether_linktype(&mut self, proto: u32) -> Cond {
        match proto {
            LLCSAP_ISONS | LLCSAP_IP | LLCSAP_NETBEUI => {
                let b0 = self.ether_8023();
                let b1 = self.cmp(OffRel::Llc, 0, Half, (proto << 8) | proto);
                self.and(b0, b1)
            }
            LLCSAP_IPX => {
                let b0 = self.cmp(OffRel::Llc, 0, Byte, LLCSAP_IPX);
                let b1 = self.cmp(OffRel::Llc, 0, Half, 0xffff);
                let b1 = self.or(b0, b1);
                let b0 = self.snap(0x000000, ETHERTYPE_IPX);
                let b1 = self.or(b0, b1);
                let b0 = self.ether_8023();
                let b1 = self.and(b0, b1);
                let b0 = self.cmp(OffRel::LinkType, 0, Half, ETHERTYPE_IPX);
                self.or(b0, b1)
            }
            ETHERTYPE_ATALK | ETHERTYPE_AARP => {
                let b0 = self.ether_8023();
                let b1 = if proto == ETHERTYPE_ATALK {
                    self.snap(0x080007, ETHERTYPE_ATALK)
                } else {
                    self.snap(0x000000, ETHERTYPE_AARP)
                };
                let b1 = self.and(b0, b1);
                let b0 = self.cmp(OffRel::LinkType, 0, Half, proto);
                self.or(b0, b1)
            }
            _ if proto <= ETHERMTU => {
                let b0 = self.ether_8023();
                let b1 = self.cmp(OffRel::LinkType, 2, Byte, proto);
                self.and(b0, b1)
            }
            _ => self.cmp(OffRel::LinkType, 0, Half, proto),
        }
    }

    fn linux_sll_linktype(&mut self, proto: u32) -> Cond {
        match proto {
            LLCSAP_ISONS | LLCSAP_IP | LLCSAP_NETBEUI => {
                let b0 = self.cmp(OffRel::LinkType, 0, Half, LINUX_SLL_P_802_2);
                let b1 = self.cmp(OffRel::Llc, 0, Half, (proto << 8) | proto);
                self.and(b0, b1)
            }
            LLCSAP_IPX => {
                let b0 = self.cmp(OffRel::Llc, 0, Byte, LLCSAP_IPX);
                let b1 = self.snap(0x000000, ETHERTYPE_IPX);
                let b1 = self.or(b0, b1);
                let b0 = self.cmp(OffRel::LinkType, 0, Half, LINUX_SLL_P_802_2);
                let b1 = self.and(b0, b1);
                let b0 = self.cmp(OffRel::LinkType, 0, Half, LINUX_SLL_P_802_3);
                let b1 = self.or(b0, b1);
                let b0 = self.cmp(OffRel::LinkType, 0, Half, ETHERTYPE_IPX);
                self.or(b0, b1)
            }
            ETHERTYPE_ATALK | ETHERTYPE_AARP => {
                let b0 = self.cmp(OffRel::LinkType, 0, Half, LINUX_SLL_P_802_2);
                let b1 = if proto == ETHERTYPE_ATALK {
                    self.snap(0x080007, ETHERTYPE_ATALK)
                } else {
                    self.snap(0x000000, ETHERTYPE_AARP)
                };
                let b1 = self.and(b0, b1);
                let b0 = self.cmp(OffRel::LinkType, 0, Half, proto);
                self.or(b0, b1)
            }
            _ if proto <= ETHERMTU => {
                let b0 = self.cmp(OffRel::LinkType, 0, Half, LINUX_SLL_P_802_2);
                // libpcap uses the payload's constant offset relative to the link header.
                let off = self.link.off_linkpl.constant;
                let b1 = self.cmp(OffRel::LinkHdr, off, Byte, proto);
                self.and(b0, b1)
            }
            _ => self.cmp(OffRel::LinkType, 0, Half, proto),
        }
    }

    /// Inside an MPLS stack only IPv4 and IPv6 can be recognized: the last label has the
    /// bottom-of-stack bit and the payload's version nibble says which.
    fn mpls_linktype(&mut self, proto: u32) -> GenResult<Cond> {
        let version = match proto {
            ETHERTYPE_IP => 0x40,
            ETHERTYPE_IPV6 => 0x60,
            _ => return Err("unsupported protocol over mpls".into()),
        };
        let b0 = self.mcmp(OffRel::LinkPl, (-2i32) as u32, Byte, 0x01, 0x01);
        let b1 = self.mcmp(OffRel::LinkPl, 0, Byte, version, 0xf0);
        Ok(self.and(b0, b1))
    }

    /// An 802.2 SNAP header with the given organization code and protocol type.
    pub fn snap(&mut self, orgcode: u32, ptype: u32) -> Cond {
        let block = [
            LLCSAP_SNAP,
            LLCSAP_SNAP,
            0x03,
            (orgcode >> 16) as u8,
            (orgcode >> 8) as u8,
            orgcode as u8,
            (ptype >> 8) as u8,
            ptype as u8,
        ];
        self.bcmp(OffRel::Llc, 0, &block)
    }
}

/// The link types sift compiles for, for messages.
pub fn supported_linktypes() -> &'static str {
    "0 (NULL), 1 (EN10MB), 12/14/101 (RAW), 108 (LOOP), 113 (LINUX_SLL), 228 (IPV4), 229 (IPV6), 276 (LINUX_SLL2)"
}

/// The names of the supported link types, as `tcpdump -y` takes them (libpcap's DLT names),
/// with their `LINKTYPE_` numbers (`RAW` as capture files store it).
const NAMES: [(&str, u32); 8] = [
    ("NULL", 0),
    ("EN10MB", 1),
    ("RAW", 101),
    ("LOOP", 108),
    ("LINUX_SLL", 113),
    ("IPV4", 228),
    ("IPV6", 229),
    ("LINUX_SLL2", 276),
];

/// The `LINKTYPE_` number of a supported link type's name: libpcap's DLT name as `tcpdump -y`
/// takes it (`EN10MB`, `LINUX_SLL`, ...), in any case, with or without a `DLT_` or
/// `LINKTYPE_` prefix; `ETHERNET` (`LINKTYPE_ETHERNET`) is `EN10MB`.
pub fn linktype_by_name(name: &str) -> Option<u32> {
    let upper = name.to_ascii_uppercase();
    let bare = ["DLT_", "LINKTYPE_"]
        .iter()
        .find_map(|prefix| upper.strip_prefix(prefix))
        .unwrap_or(&upper);
    let bare = if bare == "ETHERNET" { "EN10MB" } else { bare };
    NAMES.iter().find(|(n, _)| *n == bare).map(|&(_, lt)| lt)
}

/// The names [`linktype_by_name`] knows, for messages.
pub fn linktype_names() -> impl Iterator<Item = &'static str> {
    NAMES.iter().map(|&(n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name is a supported link type, every supported link type has a name, and the
    /// spellings tcpdump users type are understood.
    #[test]
    fn names_cover_the_supported_link_types() {
        for (name, lt) in NAMES {
            assert!(Dlt::from_linktype(lt).is_some(), "{name}");
            assert!(
                supported_linktypes().contains(&format!("({name})")),
                "{name}"
            );
        }
        let named: Vec<Dlt> = NAMES
            .iter()
            .map(|&(_, lt)| Dlt::from_linktype(lt).unwrap())
            .collect();
        for lt in 0..1000 {
            if let Some(dlt) = Dlt::from_linktype(lt) {
                assert!(named.contains(&dlt), "link type {lt} has no name");
            }
        }
        for (text, lt) in [
            ("EN10MB", Some(1)),
            ("en10mb", Some(1)),
            ("DLT_EN10MB", Some(1)),
            ("LINKTYPE_ETHERNET", Some(1)),
            ("linux_sll2", Some(276)),
            ("raw", Some(101)),
            ("IEEE802_11_RADIO", None),
            ("DLT_", None),
            ("", None),
        ] {
            assert_eq!(linktype_by_name(text), lt, "{text:?}");
        }
    }
}
