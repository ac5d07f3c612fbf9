//! Address primitives: IPv4 and IPv6 hosts and networks, Ethernet addresses and DECnet hosts
//! (libpcap's `gen_host`, `gen_hostop`, `gen_host6`, `gen_ehostop`, `gen_dnhostop`).

use sift_ir::LoadSize::{Byte, Half, Word};
use sift_syntax::ast::{AddrKind, Dir, Proto};

use crate::cond::Cond;
use crate::gen::{Gen, GenResult, OffRel};
use crate::linktype::*;

/// The error for 802.11-only direction qualifiers applied to other addresses.
pub(crate) fn wlan_dir_error(dir: Dir, what: &str) -> String {
    let q = match dir {
        Dir::Addr1 => "'addr1' and 'address1' are",
        Dir::Addr2 => "'addr2' and 'address2' are",
        Dir::Addr3 => "'addr3' and 'address3' are",
        Dir::Addr4 => "'addr4' and 'address4' are",
        Dir::Ra => "'ra' is",
        Dir::Ta => "'ta' is",
        _ => "this qualifier is",
    };
    format!("{q} not valid qualifiers for {what}")
}

impl Gen {
    /// Applies `one(dir)` for `src`/`dst`, and combines both for `src and dst` / `src or dst`.
    pub(crate) fn by_dir(
        &mut self,
        dir: Dir,
        what: &str,
        one: &mut dyn FnMut(&mut Gen, bool) -> GenResult<Cond>,
    ) -> GenResult<Cond> {
        match dir {
            Dir::Src => one(self, true),
            Dir::Dst => one(self, false),
            Dir::And => {
                let b0 = one(self, true)?;
                let b1 = one(self, false)?;
                Ok(self.and(b0, b1))
            }
            Dir::Default | Dir::Or => {
                let b0 = one(self, true)?;
                let b1 = one(self, false)?;
                Ok(self.or(b0, b1))
            }
            Dir::Undef => Err("syntax error".into()),
            _ => Err(wlan_dir_error(dir, what)),
        }
    }

    fn hostop(
        &mut self,
        addr: u32,
        mask: u32,
        dir: Dir,
        proto: u32,
        src: u32,
        dst: u32,
    ) -> GenResult<Cond> {
        self.by_dir(
            dir,
            "addresses other than 802.11 MAC addresses",
            &mut |g, is_src| {
                let b0 = g.linktype(proto)?;
                let offset = if is_src { src } else { dst };
                let b1 = match g.member_set {
                    Some(set) => g.member_cmp(OffRel::LinkPl, &[offset], Word, mask, set),
                    None => g.mcmp(OffRel::LinkPl, offset, Word, addr, mask),
                };
                Ok(g.and(b0, b1))
            },
        )
    }

    /// An IPv4 host or network (`gen_host`).
    pub fn host(
        &mut self,
        addr: u32,
        mask: u32,
        proto: Proto,
        dir: Dir,
        kind: AddrKind,
    ) -> GenResult<Cond> {
        let typestr = if kind == AddrKind::Net { "net" } else { "host" };
        match proto {
            Proto::Default => {
                let b0 = self.host(addr, mask, Proto::Ip, dir, kind)?;
                if self.link.label_stack_depth == 0 {
                    let b1 = self.host(addr, mask, Proto::Arp, dir, kind)?;
                    let b1 = self.or(b0, b1);
                    let b0 = self.host(addr, mask, Proto::Rarp, dir, kind)?;
                    return Ok(self.or(b1, b0));
                }
                Ok(b0)
            }
            Proto::Link => Err(format!("link-layer modifier applied to {typestr}")),
            Proto::Ip => self.hostop(addr, mask, dir, ETHERTYPE_IP, 12, 16),
            Proto::Rarp => self.hostop(addr, mask, dir, ETHERTYPE_REVARP, 14, 24),
            Proto::Arp => self.hostop(addr, mask, dir, ETHERTYPE_ARP, 14, 24),
            Proto::Decnet => self.dnhostop(addr, dir),
            Proto::Atalk => Err("AppleTalk host filtering not implemented".into()),
            Proto::Lat => Err("LAT host filtering not implemented".into()),
            Proto::Sca => Err("SCA host filtering not implemented".into()),
            Proto::Moprc => Err("MOPRC host filtering not implemented".into()),
            Proto::Mopdl => Err("MOPDL host filtering not implemented".into()),
            Proto::Aarp => Err("AARP host filtering not implemented".into()),
            Proto::Iso => Err("ISO host filtering not implemented".into()),
            Proto::Ipx => Err("IPX host filtering not implemented".into()),
            Proto::Ipv6 => Err("'ip6' modifier applied to ip host".into()),
            Proto::Undef => Err("syntax error".into()),
            other => Err(format!(
                "'{}' modifier applied to {typestr}",
                other.keyword()
            )),
        }
    }

    /// An IPv6 host or network (`gen_host6`); `addr` and `mask` are 16 bytes each.
    pub fn host6(
        &mut self,
        addr: [u8; 16],
        mask: [u8; 16],
        proto: Proto,
        dir: Dir,
        kind: AddrKind,
    ) -> GenResult<Cond> {
        let typestr = if kind == AddrKind::Net { "net" } else { "host" };
        match proto {
            Proto::Default | Proto::Ipv6 => {}
            Proto::Link => return Err(format!("link-layer modifier applied to ip6 {typestr}")),
            Proto::Atalk => return Err(format!("AppleTalk modifier applied to ip6 {typestr}")),
            Proto::Undef => return Err("syntax error".into()),
            other => {
                return Err(format!(
                    "'{}' modifier applied to ip6 {typestr}",
                    other.keyword()
                ))
            }
        }
        let word = |b: &[u8; 16], i: usize| {
            u32::from_be_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
        };
        self.by_dir(
            dir,
            "addresses other than 802.11 MAC addresses",
            &mut |g, is_src| {
                let offset = if is_src { 8 } else { 24 };
                if let Some(set) = g.member_set {
                    let key = [offset, offset + 4, offset + 8, offset + 12];
                    let b1 = g.member_cmp(OffRel::LinkPl, &key, Word, u32::MAX, set);
                    let b0 = g.linktype(ETHERTYPE_IPV6)?;
                    return Ok(g.and(b0, b1));
                }
                let mut b1 = g.mcmp(
                    OffRel::LinkPl,
                    offset + 12,
                    Word,
                    word(&addr, 3),
                    word(&mask, 3),
                );
                for i in (0..3).rev() {
                    let b0 = g.mcmp(
                        OffRel::LinkPl,
                        offset + 4 * i as u32,
                        Word,
                        word(&addr, i),
                        word(&mask, i),
                    );
                    b1 = g.and(b0, b1);
                }
                let b0 = g.linktype(ETHERTYPE_IPV6)?;
                Ok(g.and(b0, b1))
            },
        )
    }

    /// An Ethernet address (`gen_ehostop`, with the check libpcap's callers put before it); only
    /// on Ethernet.
    pub fn ehost(&mut self, mac: [u8; 6], dir: Dir) -> GenResult<Cond> {
        match dir {
            Dir::Addr1 | Dir::Addr2 | Dir::Addr3 | Dir::Addr4 | Dir::Ra | Dir::Ta => {
                return Err(
                    "802.11 address qualifiers are only supported on 802.11 with 802.11 headers"
                        .into(),
                )
            }
            _ => {}
        }
        let frame = self.ethernet_header_check();
        let b = self.by_dir(dir, "", &mut |g, is_src| {
            Ok(g.bcmp(OffRel::LinkHdr, if is_src { 6 } else { 0 }, &mac))
        })?;
        Ok(match frame {
            Some(frame) => self.and(frame, b),
            None => b,
        })
    }

    /// A DECnet host (`gen_dnhostop`), for both long and short DECnet routing headers.
    fn dnhostop(&mut self, addr: u32, dir: Dir) -> GenResult<Cond> {
        self.by_dir(
            dir,
            "addresses other than 802.11 MAC addresses",
            &mut |g, is_src| {
                let (offset_sh, offset_lh) = if is_src { (3, 15) } else { (1, 7) };
                let addr = u32::from((addr as u16).swap_bytes());
                let b0 = g.linktype(ETHERTYPE_DN)?;
                let tmp = g.mcmp(
                    OffRel::LinkPl,
                    2,
                    Half,
                    0x0681u16.swap_bytes().into(),
                    0x07ffu16.swap_bytes().into(),
                );
                let b1 = g.cmp(OffRel::LinkPl, 2 + 1 + offset_lh, Half, addr);
                let b1 = g.and(tmp, b1);
                let tmp = g.mcmp(OffRel::LinkPl, 2, Byte, 0x06, 0x7);
                let b2 = g.cmp(OffRel::LinkPl, 2 + offset_lh, Half, addr);
                let b2 = g.and(tmp, b2);
                let b1 = g.or(b2, b1);
                let tmp = g.mcmp(
                    OffRel::LinkPl,
                    2,
                    Half,
                    0x0281u16.swap_bytes().into(),
                    0x07ffu16.swap_bytes().into(),
                );
                let b2 = g.cmp(OffRel::LinkPl, 2 + 1 + offset_sh, Half, addr);
                let b2 = g.and(tmp, b2);
                let b1 = g.or(b2, b1);
                let tmp = g.mcmp(OffRel::LinkPl, 2, Byte, 0x02, 0x7);
                let b2 = g.cmp(OffRel::LinkPl, 2 + offset_sh, Half, addr);
                let b2 = g.and(tmp, b2);
                let b1 = g.or(b2, b1);
                Ok(g.and(b0, b1))
            },
        )
    }
}
