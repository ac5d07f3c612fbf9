//! `port` and `portrange` over IPv4 and IPv6 (libpcap's `gen_port*`/`gen_portrange*`). Over IPv4
//! only first fragments are considered; over IPv6 only a transport header directly after the
//! fixed header is (no extension headers), exactly as libpcap 1.10 does.

use sift_ir::CmpOp;
use sift_ir::LoadSize::{Byte, Half};
use sift_syntax::ast::Dir;

use crate::cond::Cond;
use crate::gen::{Gen, GenResult, OffRel};
use crate::linktype::{ETHERTYPE_IP, ETHERTYPE_IPV6};
use crate::proto::{IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP};

/// The transport protocols a port primitive applies to: one, or all three.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortProto {
    One(u32),
    Any,
}

/// A port test: a single port, or an inclusive range.
#[derive(Clone, Copy, Debug)]
struct Ports(u32, u32);

impl Gen {
    fn port_atom(&mut self, v6: bool, offset: u32, ports: Option<Ports>, port: u32) -> Cond {
        let rel = if v6 {
            OffRel::TranIpv6
        } else {
            OffRel::TranIpv4
        };
        if let Some(set) = self.member_set {
            return self.member_cmp(rel, &[offset], Half, u32::MAX, set);
        }
        match ports {
            None => self.cmp(rel, offset, Half, port),
            Some(Ports(a, b)) => {
                let (lo, hi) = if a > b { (b, a) } else { (a, b) };
                let b1 = self.ncmp(rel, offset, Half, 0xffff_ffff, CmpOp::Ge, lo);
                let b2 = self
                    .ncmp(rel, offset, Half, 0xffff_ffff, CmpOp::Gt, hi)
                    .not();
                self.and(b1, b2)
            }
        }
    }

    fn port_op(
        &mut self,
        v6: bool,
        ports: Option<Ports>,
        port: u32,
        proto: u32,
        dir: Dir,
    ) -> GenResult<Cond> {
        let b0 = if v6 {
            self.cmp(OffRel::LinkPl, 6, Byte, proto)
        } else {
            let tmp = self.cmp(OffRel::LinkPl, 9, Byte, proto);
            let frag = self.ipfrag();
            self.and(tmp, frag)
        };
        let what = if ports.is_some() {
            "port ranges"
        } else {
            "ports"
        };
        let b1 = self.by_dir(dir, what, &mut |g, is_src| {
            Ok(g.port_atom(v6, if is_src { 0 } else { 2 }, ports, port))
        })?;
        Ok(self.and(b0, b1))
    }

    fn port_family(
        &mut self,
        v6: bool,
        ports: Option<Ports>,
        port: u32,
        proto: PortProto,
        dir: Dir,
    ) -> GenResult<Cond> {
        let b0 = self.linktype(if v6 { ETHERTYPE_IPV6 } else { ETHERTYPE_IP })?;
        let b1 = match proto {
            PortProto::One(p) => self.port_op(v6, ports, port, p, dir)?,
            PortProto::Any => {
                let tmp = self.port_op(v6, ports, port, IPPROTO_TCP, dir)?;
                let b1 = self.port_op(v6, ports, port, IPPROTO_UDP, dir)?;
                let b1 = self.or(tmp, b1);
                let tmp = self.port_op(v6, ports, port, IPPROTO_SCTP, dir)?;
                self.or(tmp, b1)
            }
        };
        Ok(self.and(b0, b1))
    }

    /// `port N` over IPv4 only (`gen_port`) or IPv6 only (`gen_port6`).
    pub fn port_in(&mut self, v6: bool, port: u32, proto: PortProto, dir: Dir) -> GenResult<Cond> {
        self.port_family(v6, None, port, proto, dir)
    }

    /// `port N` over IPv4 or IPv6 (`gen_port` or'ed with `gen_port6`).
    pub fn port(&mut self, port: u32, proto: PortProto, dir: Dir) -> GenResult<Cond> {
        let b = self.port_family(false, None, port, proto, dir)?;
        let b6 = self.port_family(true, None, port, proto, dir)?;
        Ok(self.or(b6, b))
    }

    /// `portrange A-B` over IPv4 or IPv6.
    pub fn portrange(&mut self, lo: u32, hi: u32, proto: PortProto, dir: Dir) -> GenResult<Cond> {
        let r = Some(Ports(lo, hi));
        let b = self.port_family(false, r, 0, proto, dir)?;
        let b6 = self.port_family(true, r, 0, proto, dir)?;
        Ok(self.or(b6, b))
    }
}
