//! Identifiers under qualifiers: what `host NAME`, `net 10.1`, `port http`, `proto \tcp`,
//! `ether host 00:11:22:33:44:55` and the other qualified identifiers mean (libpcap's
//! `gen_scode`, `gen_ncode`, `gen_mcode`, `gen_mcode6`, `gen_ecode`).

use std::net::IpAddr;

use sift_syntax::ast::{AddrKind, Proto, Qualifiers};

use crate::cond::Cond;
use crate::gen::{Gen, GenResult};
use crate::linktype::Dlt;
use crate::netdb::{self, PortOwner};
use crate::port::PortProto;
use crate::proto::{
    IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP, ISO10589_ISIS, ISO8473_CLNP, ISO9542_ESIS,
};

/// libpcap's `__pcap_atoin`: a dotted IPv4 prefix and its length in bits.
pub(crate) fn atoin(s: &str) -> Option<(u32, u32)> {
    let mut addr = 0u32;
    let mut len = 0;
    for part in s.split('.') {
        let n: u32 = if part.is_empty() {
            0
        } else {
            part.parse().ok()?
        };
        if n > 255 {
            return None;
        }
        addr = (addr << 8) | n;
        len += 8;
    }
    Some((addr, len))
}

/// libpcap's `__pcap_atodn`: a DECnet `area.node` address.
fn atodn(s: &str) -> Option<u32> {
    let (area, node) = s.split_once('.')?;
    let area: u32 = area.parse().ok()?;
    let node: u32 = node.split('.').next()?.parse().ok()?;
    Some(((area << 10) & 0o176000) | (node & 0o1777))
}

pub(crate) fn port_proto(proto: Proto, what: &str) -> GenResult<PortProto> {
    Ok(match proto {
        Proto::Udp => PortProto::One(IPPROTO_UDP),
        Proto::Tcp => PortProto::One(IPPROTO_TCP),
        Proto::Sctp => PortProto::One(IPPROTO_SCTP),
        Proto::Default => PortProto::Any,
        _ => return Err(format!("illegal qualifier of '{what}'")),
    })
}

/// Checks a named port against an explicit `tcp`/`udp`/`sctp` qualifier.
fn resolve_owner(proto: Proto, owner: PortOwner, name: &str, what: &str) -> GenResult<PortProto> {
    let name_of = |p: u32| match p {
        IPPROTO_TCP => "tcp",
        IPPROTO_UDP => "udp",
        _ => "sctp",
    };
    let wanted = match proto {
        Proto::Udp => IPPROTO_UDP,
        Proto::Tcp => IPPROTO_TCP,
        Proto::Sctp => IPPROTO_SCTP,
        _ => {
            return Ok(match owner {
                PortOwner::Proto(p) => PortProto::One(p),
                PortOwner::Any => PortProto::Any,
            })
        }
    };
    match owner {
        PortOwner::Proto(p) if p != wanted => Err(format!("{what} '{name}' is {}", name_of(p))),
        _ => Ok(PortProto::One(wanted)),
    }
}

impl Gen {
    /// An `ID` under qualifiers (`gen_scode`).
    pub fn scode(&mut self, name: &str, q: Qualifiers) -> GenResult<Cond> {
        let (proto, dir) = (q.proto, q.dir);
        match q.addr {
            AddrKind::Net => {
                let mut addr = netdb::network(name);
                if addr == 0 {
                    return Err(format!("unknown network '{name}'"));
                }
                let mut mask = 0xffff_ffffu32;
                while addr != 0 && addr & 0xff00_0000 == 0 {
                    addr <<= 8;
                    mask <<= 8;
                }
                self.host(addr, mask, proto, dir, q.addr)
            }
            AddrKind::Default | AddrKind::Host => {
                if proto == Proto::Link {
                    if self.link.linktype != Dlt::En10mb {
                        return Err("only ethernet/FDDI/token ring/802.11/ATM LANE/Fibre Channel supports link-level host name".into());
                    }
                    let mac = netdb::ether_host(name)
                        .ok_or_else(|| format!("unknown ether host '{name}'"))?;
                    return self.ehost(mac, dir);
                }
                if proto == Proto::Decnet {
                    return Err(format!(
                        "decnet name support not included, '{name}' cannot be translated"
                    ));
                }
                let addrs = netdb::host_addresses(name);
                if addrs.is_empty() {
                    return Err(format!("unknown host '{name}'"));
                }
                let (mut tproto, mut tproto6) = (proto, proto);
                if self.link.off_linktype.is_none() && proto == Proto::Default {
                    tproto = Proto::Ip;
                    tproto6 = Proto::Ipv6;
                }
                let mut conds = Vec::new();
                for a in addrs {
                    let c = match a {
                        IpAddr::V4(v4) => {
                            if tproto == Proto::Ipv6 {
                                continue;
                            }
                            self.host(u32::from(v4), 0xffff_ffff, tproto, dir, q.addr)?
                        }
                        IpAddr::V6(v6) => {
                            if tproto6 == Proto::Ip {
                                continue;
                            }
                            self.host6(v6.octets(), [0xff; 16], tproto6, dir, q.addr)?
                        }
                    };
                    conds.push(c);
                }
                self.any(conds).ok_or_else(|| {
                    let suffix = if proto == Proto::Default {
                        ""
                    } else {
                        " for specified address family"
                    };
                    format!("unknown host '{name}'{suffix}")
                })
            }
            AddrKind::Port => {
                port_proto(proto, "port")?;
                let (port, owner) =
                    netdb::port(name).ok_or_else(|| format!("unknown port '{name}'"))?;
                let pp = resolve_owner(proto, owner, name, "port")?;
                self.port(port, pp, dir)
            }
            AddrKind::PortRange => {
                port_proto(proto, "portrange")?;
                let (p1, p2, owner) = netdb::port_range(name)
                    .ok_or_else(|| format!("unknown port in range '{name}'"))?;
                let pp = resolve_owner(proto, owner, name, "port in range")?;
                for p in [p1, p2] {
                    if p < 0 {
                        return Err(format!("illegal port number {p} < 0"));
                    }
                    if p > 65535 {
                        return Err(format!("illegal port number {p} > 65535"));
                    }
                }
                self.portrange(p1 as u32, p2 as u32, pp, dir)
            }
            AddrKind::Gateway => Err("'gateway' not supported in this configuration".into()),
            AddrKind::Proto => {
                let v = self.lookup_proto(name, proto)?;
                self.proto(v, proto, dir)
            }
            AddrKind::Protochain => {
                let v = self.lookup_proto(name, proto)?;
                self.protochain(v, proto)
            }
            AddrKind::Undef => Err("syntax error".into()),
        }
    }

    fn lookup_proto(&mut self, name: &str, proto: Proto) -> GenResult<u32> {
        match proto {
            Proto::Default | Proto::Ip | Proto::Ipv6 => {
                netdb::ip_protocol(name).ok_or_else(|| format!("unknown ip proto '{name}'"))
            }
            Proto::Link => {
                netdb::ether_protocol(name).ok_or_else(|| format!("unknown ether proto '{name}'"))
            }
            Proto::Iso => match name {
                "esis" => Ok(ISO9542_ESIS),
                "isis" => Ok(ISO10589_ISIS),
                "clnp" => Ok(ISO8473_CLNP),
                _ => Err(format!("unknown osi proto '{name}'")),
            },
            _ => Err(format!("unknown protocol: {name}")),
        }
    }

    /// A number or dotted IPv4 prefix under qualifiers (`gen_ncode`); `text` is the dotted form.
    pub fn ncode(&mut self, text: Option<&str>, mut v: u32, q: Qualifiers) -> GenResult<Cond> {
        let (proto, dir) = (q.proto, q.dir);
        let vlen = match text {
            None => 32,
            Some(s) if proto == Proto::Decnet => {
                v = atodn(s).ok_or_else(|| format!("malformed decnet address '{s}'"))?;
                32
            }
            Some(s) => {
                let (a, len) = atoin(s).ok_or_else(|| format!("invalid IPv4 address '{s}'"))?;
                v = a;
                len
            }
        };
        match q.addr {
            AddrKind::Default | AddrKind::Host | AddrKind::Net => {
                if proto == Proto::Decnet {
                    return self.host(v, 0, proto, dir, q.addr);
                }
                if proto == Proto::Link {
                    return Err("illegal link layer address".into());
                }
                let mut mask = 0xffff_ffffu32;
                if text.is_none() && q.addr == AddrKind::Net {
                    while v != 0 && v & 0xff00_0000 == 0 {
                        v <<= 8;
                        mask <<= 8;
                    }
                } else {
                    v = v.checked_shl(32 - vlen).unwrap_or(0);
                    mask = mask.checked_shl(32 - vlen).unwrap_or(0);
                }
                self.host(v, mask, proto, dir, q.addr)
            }
            AddrKind::Port => {
                let pp = port_proto(proto, "port")?;
                if v > 65535 {
                    return Err(format!("illegal port number {v} > 65535"));
                }
                self.port(v, pp, dir)
            }
            AddrKind::PortRange => {
                let pp = port_proto(proto, "portrange")?;
                if v > 65535 {
                    return Err(format!("illegal port number {v} > 65535"));
                }
                self.portrange(v, v, pp, dir)
            }
            AddrKind::Gateway => Err("'gateway' requires a name".into()),
            AddrKind::Proto => self.proto(v, proto, dir),
            AddrKind::Protochain => self.protochain(v, proto),
            AddrKind::Undef => Err("syntax error".into()),
        }
    }

    /// `A.B.C.D/len` or `A.B.C.D mask M.M.M.M` (`gen_mcode`).
    pub fn mcode(
        &mut self,
        s1: &str,
        mask_text: Option<&str>,
        masklen: u32,
        q: Qualifiers,
    ) -> GenResult<Cond> {
        let (n, nlen) = atoin(s1).ok_or_else(|| format!("invalid IPv4 address '{s1}'"))?;
        let n = n.checked_shl(32 - nlen).unwrap_or(0);
        let m = match mask_text {
            Some(s2) => {
                let (m, mlen) = atoin(s2).ok_or_else(|| format!("invalid IPv4 address '{s2}'"))?;
                let m = m.checked_shl(32 - mlen).unwrap_or(0);
                if n & !m != 0 {
                    return Err(format!("non-network bits set in \"{s1} mask {s2}\""));
                }
                m
            }
            None => {
                if masklen > 32 {
                    return Err("mask length must be <= 32".into());
                }
                let m = if masklen == 0 {
                    0
                } else {
                    0xffff_ffffu32 << (32 - masklen)
                };
                if n & !m != 0 {
                    return Err(format!("non-network bits set in \"{s1}/{masklen}\""));
                }
                m
            }
        };
        match q.addr {
            AddrKind::Net => self.host(n, m, q.proto, q.dir, q.addr),
            _ => Err("Mask syntax for networks only".into()),
        }
    }

    /// An IPv6 address with a prefix length (`gen_mcode6`).
    pub fn mcode6(&mut self, s: &str, masklen: u32, q: Qualifiers) -> GenResult<Cond> {
        let addr: std::net::Ipv6Addr = s.parse().map_err(|_| format!("invalid ip6 address {s}"))?;
        if masklen > 128 {
            return Err("mask length must be <= 128".into());
        }
        let bits = if masklen == 0 {
            0u128
        } else {
            u128::MAX << (128 - masklen)
        };
        let mask = bits.to_be_bytes();
        let a = u128::from(addr);
        if a & !bits != 0 {
            return Err(format!("non-network bits set in \"{s}/{masklen}\""));
        }
        match q.addr {
            AddrKind::Default | AddrKind::Host if masklen != 128 => {
                Err("Mask syntax for networks only".into())
            }
            AddrKind::Default | AddrKind::Host | AddrKind::Net => {
                self.host6(addr.octets(), mask, q.proto, q.dir, q.addr)
            }
            _ => Err("invalid qualifier against IPv6 address".into()),
        }
    }

    /// A MAC address (`gen_ecode`).
    pub fn ecode(&mut self, s: &str, q: Qualifiers) -> GenResult<Cond> {
        if matches!(q.addr, AddrKind::Host | AddrKind::Default) && q.proto == Proto::Link {
            if self.link.linktype != Dlt::En10mb {
                return Err("ethernet addresses supported only on ethernet/FDDI/token ring/802.11/ATM LANE/Fibre Channel".into());
            }
            let mac = netdb::parse_mac(s).ok_or_else(|| format!("invalid MAC address '{s}'"))?;
            return self.ehost(mac, q.dir);
        }
        Err("ethernet address used in non-ether expression".into())
    }
}
