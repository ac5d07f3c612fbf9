//! Protocol tests: bare protocol names (`tcp`, `ip6`, `stp`, ...), `proto N`, `protochain N` and
//! the IPv4 fragment test that port and transport-layer primitives include.

use sift_ir::LoadSize::{Byte, Half};
use sift_ir::{Chain, CmpOp, Inst, Terminator};
use sift_syntax::ast::{Dir, Proto};

use crate::cond::{Cond, UNPATCHED};
use crate::gen::{Gen, GenResult, OffRel};
use crate::linktype::*;
use crate::scratch::{RegisterWrite, Stored};

pub(crate) const IPPROTO_ICMP: u32 = 1;
pub(crate) const IPPROTO_IGMP: u32 = 2;
pub(crate) const IPPROTO_TCP: u32 = 6;
pub(crate) const IPPROTO_IGRP: u32 = 9;
pub(crate) const IPPROTO_UDP: u32 = 17;
pub(crate) const IPPROTO_FRAGMENT: u32 = 44;
pub(crate) const IPPROTO_ESP: u32 = 50;
pub(crate) const IPPROTO_AH: u32 = 51;
pub(crate) const IPPROTO_ICMPV6: u32 = 58;
pub(crate) const IPPROTO_PIM: u32 = 103;
pub(crate) const IPPROTO_VRRP: u32 = 112;
pub(crate) const IPPROTO_CARP: u32 = 112;
pub(crate) const IPPROTO_SCTP: u32 = 132;
pub(crate) const ISO8473_CLNP: u32 = 0x81;
pub(crate) const ISO9542_ESIS: u32 = 0x82;
pub(crate) const ISO10589_ISIS: u32 = 0x83;
const ISIS_L1_LAN_IIH: u32 = 15;
const ISIS_L2_LAN_IIH: u32 = 16;
const ISIS_PTP_IIH: u32 = 17;
const ISIS_L1_LSP: u32 = 18;
const ISIS_L2_LSP: u32 = 20;
const ISIS_L1_CSNP: u32 = 24;
const ISIS_L2_CSNP: u32 = 25;
const ISIS_L1_PSNP: u32 = 26;
const ISIS_L2_PSNP: u32 = 27;

impl Gen {
    /// A bare protocol name (`gen_proto_abbrev`).
    pub fn proto_abbrev(&mut self, proto: Proto) -> GenResult<Cond> {
        let d = Proto::Default;
        Ok(match proto {
            Proto::Sctp => self.proto(IPPROTO_SCTP, d, Dir::Default)?,
            Proto::Tcp => self.proto(IPPROTO_TCP, d, Dir::Default)?,
            Proto::Udp => self.proto(IPPROTO_UDP, d, Dir::Default)?,
            Proto::Icmp => self.proto(IPPROTO_ICMP, Proto::Ip, Dir::Default)?,
            Proto::Igmp => self.proto(IPPROTO_IGMP, Proto::Ip, Dir::Default)?,
            Proto::Igrp => self.proto(IPPROTO_IGRP, Proto::Ip, Dir::Default)?,
            Proto::Pim => self.proto(IPPROTO_PIM, d, Dir::Default)?,
            Proto::Vrrp => self.proto(IPPROTO_VRRP, Proto::Ip, Dir::Default)?,
            Proto::Carp => self.proto(IPPROTO_CARP, Proto::Ip, Dir::Default)?,
            Proto::Ip => self.linktype(ETHERTYPE_IP)?,
            Proto::Arp => self.linktype(ETHERTYPE_ARP)?,
            Proto::Rarp => self.linktype(ETHERTYPE_REVARP)?,
            Proto::Link => return Err("link layer applied in wrong context".into()),
            Proto::Atalk => self.linktype(ETHERTYPE_ATALK)?,
            Proto::Aarp => self.linktype(ETHERTYPE_AARP)?,
            Proto::Decnet => self.linktype(ETHERTYPE_DN)?,
            Proto::Sca => self.linktype(ETHERTYPE_SCA)?,
            Proto::Lat => self.linktype(ETHERTYPE_LAT)?,
            Proto::Mopdl => self.linktype(ETHERTYPE_MOPDL)?,
            Proto::Moprc => self.linktype(ETHERTYPE_MOPRC)?,
            Proto::Ipv6 => self.linktype(ETHERTYPE_IPV6)?,
            Proto::Icmpv6 => self.proto(IPPROTO_ICMPV6, Proto::Ipv6, Dir::Default)?,
            Proto::Ah => self.proto(IPPROTO_AH, d, Dir::Default)?,
            Proto::Esp => self.proto(IPPROTO_ESP, d, Dir::Default)?,
            Proto::Iso => self.linktype(LLCSAP_ISONS)?,
            Proto::Esis => self.proto(ISO9542_ESIS, Proto::Iso, Dir::Default)?,
            Proto::Isis => self.proto(ISO10589_ISIS, Proto::Iso, Dir::Default)?,
            Proto::IsisL1 => self.isis_any(&[
                ISIS_L1_LAN_IIH,
                ISIS_PTP_IIH,
                ISIS_L1_LSP,
                ISIS_L1_CSNP,
                ISIS_L1_PSNP,
            ])?,
            Proto::IsisL2 => self.isis_any(&[
                ISIS_L2_LAN_IIH,
                ISIS_PTP_IIH,
                ISIS_L2_LSP,
                ISIS_L2_CSNP,
                ISIS_L2_PSNP,
            ])?,
            Proto::IsisIih => self.isis_any(&[ISIS_L1_LAN_IIH, ISIS_L2_LAN_IIH, ISIS_PTP_IIH])?,
            Proto::IsisLsp => self.isis_any(&[ISIS_L1_LSP, ISIS_L2_LSP])?,
            Proto::IsisSnp => {
                self.isis_any(&[ISIS_L1_CSNP, ISIS_L2_CSNP, ISIS_L1_PSNP, ISIS_L2_PSNP])?
            }
            Proto::IsisCsnp => self.isis_any(&[ISIS_L1_CSNP, ISIS_L2_CSNP])?,
            Proto::IsisPsnp => self.isis_any(&[ISIS_L1_PSNP, ISIS_L2_PSNP])?,
            Proto::Clnp => self.proto(ISO8473_CLNP, Proto::Iso, Dir::Default)?,
            Proto::Stp => self.linktype(LLCSAP_8021D)?,
            Proto::Ipx => self.linktype(LLCSAP_IPX)?,
            Proto::Netbeui => self.linktype(LLCSAP_NETBEUI)?,
            Proto::Radio => return Err("'radio' is not a valid protocol type".into()),
            Proto::Default | Proto::Undef => return Err("syntax error".into()),
        })
    }

    /// IS-IS PDUs of any of `types`. libpcap builds `(t0 or t1) or t2 ...` with the first two
    /// tested first.
    fn isis_any(&mut self, types: &[u32]) -> GenResult<Cond> {
        let b0 = self.proto(types[0], Proto::Isis, Dir::Default)?;
        let b1 = self.proto(types[1], Proto::Isis, Dir::Default)?;
        let mut acc = self.or(b0, b1);
        for &t in &types[2..] {
            let b0 = self.proto(t, Proto::Isis, Dir::Default)?;
            acc = self.or(b0, acc);
        }
        Ok(acc)
    }

    /// Not a fragment after the first: `(ip[6:2] & 0x1fff) == 0`.
    pub fn ipfrag(&mut self) -> Cond {
        self.jset(OffRel::LinkPl, 6, Half, 0x1fff).not()
    }

    /// `proto v` under a protocol qualifier (`gen_proto`).
    pub fn proto(&mut self, v: u32, proto: Proto, dir: Dir) -> GenResult<Cond> {
        if dir != Dir::Default {
            return Err("direction applied to 'proto'".into());
        }
        Ok(match proto {
            Proto::Default => {
                let b0 = self.proto(v, Proto::Ip, dir)?;
                let b1 = self.proto(v, Proto::Ipv6, dir)?;
                self.or(b0, b1)
            }
            Proto::Link => self.linktype(v)?,
            Proto::Ip => {
                let b0 = self.linktype(ETHERTYPE_IP)?;
                let b1 = self.cmp(OffRel::LinkPl, 9, Byte, v);
                self.and(b0, b1)
            }
            Proto::Ipv6 => {
                let b0 = self.linktype(ETHERTYPE_IPV6)?;
                let b2 = self.cmp(OffRel::LinkPl, 6, Byte, IPPROTO_FRAGMENT);
                let b1 = self.cmp(OffRel::LinkPl, 40, Byte, v);
                let b1 = self.and(b2, b1);
                let b2 = self.cmp(OffRel::LinkPl, 6, Byte, v);
                let b1 = self.or(b2, b1);
                self.and(b0, b1)
            }
            Proto::Iso => {
                let b0 = self.linktype(LLCSAP_ISONS)?;
                let b1 = self.cmp(OffRel::LinkPlNoSnap, 0, Byte, v);
                self.and(b0, b1)
            }
            Proto::Isis => {
                let b0 = self.proto(ISO10589_ISIS, Proto::Iso, Dir::Default)?;
                let b1 = self.cmp(OffRel::LinkPlNoSnap, 4, Byte, v);
                self.and(b0, b1)
            }
            Proto::Arp | Proto::Rarp | Proto::Lat | Proto::Sca | Proto::Moprc | Proto::Mopdl => {
                return Err(format!(
                    "{} does not encapsulate another protocol",
                    proto.keyword()
                ))
            }
            Proto::Atalk => return Err("AppleTalk encapsulation is not specifiable".into()),
            Proto::Decnet => return Err("DECNET encapsulation is not specifiable".into()),
            Proto::Clnp => return Err("'clnp proto' is not supported".into()),
            Proto::Undef => return Err("syntax error".into()),
            other => return Err(format!("'{} proto' is bogus", other.keyword())),
        })
    }

    /// `protochain v`: walks the IPv6 extension-header chain (and IPv4/IPv6 AH headers) looking
    /// for a header of type `v`, as libpcap's loop does, including its handling of AH lengths.
    ///
    /// libpcap takes a scratch register on entry and gives it back at the end, except for the
    /// unqualified form, which keeps it for the rest of the filter (so many `protochain`s can run
    /// out of registers).
    pub fn protochain(&mut self, v: u32, proto: Proto) -> GenResult<Cond> {
        let register = self.alloc_register()?;
        let v6 = match proto {
            Proto::Ip => false,
            Proto::Ipv6 => true,
            Proto::Default => {
                let b0 = self.protochain(v, Proto::Ip)?;
                let b = self.protochain(v, Proto::Ipv6)?;
                return Ok(self.or(b0, b));
            }
            _ => return Err("bad protocol applied for 'protochain'".into()),
        };
        if self.link.off_linkpl.runtime.is_some() {
            return Err("'protochain' not supported with variable length headers".into());
        }
        self.no_optimize = true;
        let b0 = self.linktype(if v6 { ETHERTYPE_IPV6 } else { ETHERTYPE_IP })?;
        self.registers.free(register.into());
        let nl = self.link.off_linkpl.constant.wrapping_add(self.link.off_nl);
        let f = &mut self.f;
        // Entry: A = next-header field, X = offset of the first header after the IP header.
        let entry = f.create_block();
        let next_header = Inst::Load {
            index: None,
            offset: nl.wrapping_add(if v6 { 6 } else { 9 }),
            size: Byte,
        };
        let a0 = f.push(entry, next_header);
        let x0 = if v6 {
            f.iconst(entry, 40)
        } else {
            self.ipv4_header_len(entry)
        };
        // The walk, then the final test `A == v`.
        let chain = if v6 { Chain::Ip6 } else { Chain::Ip };
        let f = &mut self.f;
        let a_end = f.push(
            entry,
            Inst::Protochain {
                chain,
                base: nl,
                proto: a0,
                offset: x0,
                target: v,
            },
        );
        // libpcap's loop saves each header's protocol in the register.
        self.register_writes.push(RegisterWrite {
            block: entry,
            register,
            value: Stored::Walk {
                chain,
                first: a0,
                last: a_end,
                target: v,
            },
        });
        let f = &mut self.f;
        let kv = f.iconst(entry, v);
        f.set_term(
            entry,
            Terminator::Branch {
                op: CmpOp::Eq,
                lhs: a_end,
                rhs: kv,
                then_: UNPATCHED.into(),
                else_: UNPATCHED.into(),
            },
        );
        let b = Cond::branch(entry);
        Ok(self.and(b0, b))
    }
}
