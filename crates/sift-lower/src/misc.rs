//! Link-level and length primitives: `broadcast`, `multicast`, `less`, `greater`, `byte`,
//! `inbound`/`outbound`, `ifindex`.

use sift_ir::LoadSize::{Byte, Half, Word};
use sift_ir::{CmpOp, Inst};
use sift_syntax::ast::{ByteOp, Dir, Proto};

use crate::cond::Cond;
use crate::gen::{Gen, GenResult, OffRel};
use crate::linktype::*;

const LINUX_SLL_OUTGOING: u32 = 4;

impl Gen {
    /// `tcpdump -r` compiles with a netmask of 0, so `ip broadcast` tests for 0 or all-ones.
    pub fn broadcast(&mut self, proto: Proto) -> GenResult<Cond> {
        match proto {
            Proto::Default | Proto::Link => {
                if self.link.linktype != Dlt::En10mb {
                    return Err("not a broadcast link".into());
                }
                self.ehost([0xff; 6], Dir::Dst)
            }
            Proto::Ip => {
                let hostmask = !self.netmask;
                let b0 = self.linktype(ETHERTYPE_IP)?;
                let b1 = self.mcmp(OffRel::LinkPl, 16, Word, 0, hostmask);
                let b2 = self.mcmp(OffRel::LinkPl, 16, Word, hostmask, hostmask);
                let b2 = self.or(b1, b2);
                Ok(self.and(b0, b2))
            }
            _ => Err("only link-layer/IP broadcast filters supported".into()),
        }
    }

    pub fn multicast(&mut self, proto: Proto) -> GenResult<Cond> {
        match proto {
            Proto::Default | Proto::Link => {
                if self.link.linktype != Dlt::En10mb {
                    return Err("link-layer multicast filters supported only on ethernet/FDDI/token ring/ARCNET/802.11/ATM LANE/Fibre Channel".into());
                }
                let frame = self.ethernet_header_check();
                let b = self.jset(OffRel::LinkHdr, 0, Byte, 1);
                Ok(match frame {
                    Some(frame) => self.and(frame, b),
                    None => b,
                })
            }
            Proto::Ip => {
                let b0 = self.linktype(ETHERTYPE_IP)?;
                let b1 = self.ncmp(OffRel::LinkPl, 16, Byte, 0xffff_ffff, CmpOp::Ge, 224);
                Ok(self.and(b0, b1))
            }
            Proto::Ipv6 => {
                let b0 = self.linktype(ETHERTYPE_IPV6)?;
                let b1 = self.cmp(OffRel::LinkPl, 24, Byte, 255);
                Ok(self.and(b0, b1))
            }
            _ => Err("link-layer multicast filters supported only on ethernet/FDDI/token ring/ARCNET/802.11/ATM LANE/Fibre Channel".into()),
        }
    }

    /// `len op n` for `less` (`len <= n`) and `greater` (`len >= n`).
    pub fn length(&mut self, op: CmpOp, n: u32) -> Cond {
        let block = self.f.create_block();
        // gencode's `ld len; jge #n`, no scratch memory: the constant comes first, which tells
        // it from the relation `len >= n` (`sift_pcapgen`).
        let k = self.f.iconst(block, n);
        let len = self.f.push(block, Inst::WireLen);
        match op {
            CmpOp::Le => self.branch(block, CmpOp::Gt, len, k).not(),
            _ => self.branch(block, op, len, k),
        }
    }

    /// `byte idx op val` on the link-layer header.
    pub fn byte_op(&mut self, index: u32, op: ByteOp, value: u32) -> GenResult<Cond> {
        if matches!(op, ByteOp::And | ByteOp::Or) {
            self.statements_known = false;
        }
        Ok(match op {
            ByteOp::Eq => self.cmp(OffRel::LinkHdr, index, Byte, value),
            ByteOp::Lt => self
                .ncmp(OffRel::LinkHdr, index, Byte, 0xffff_ffff, CmpOp::Ge, value)
                .not(),
            ByteOp::Gt => self.cmp_gt(OffRel::LinkHdr, index, Byte, value),
            // libpcap emits `byte N & V` and `byte N | V` as `and #V` / `or #V` on whatever the
            // accumulator holds, without loading the byte, and accepts when the result is not
            // 0. With `| V` for V != 0 that always holds. Otherwise the result depends on the
            // accumulator: known (0, as bpf_filter starts) only when this is the first test.
            ByteOp::Or if value != 0 => self.uncond(true),
            ByteOp::And | ByteOp::Or if self.f.blocks.is_empty() => self.uncond(false),
            ByteOp::And | ByteOp::Or => {
                return Err(
                    "'byte N & V' and 'byte N | 0' test libpcap's accumulator, not the \
                     byte (a libpcap bug); sift supports them only as the first test"
                        .into(),
                )
            }
        })
    }

    pub fn inbound(&mut self, outbound: bool) -> GenResult<Cond> {
        let b0 = match self.link.linktype {
            Dlt::LinuxSll => self.cmp(OffRel::LinkHdr, 0, Half, LINUX_SLL_OUTGOING),
            Dlt::LinuxSll2 => self.cmp(OffRel::LinkHdr, 10, Byte, LINUX_SLL_OUTGOING),
            other => {
                return Err(format!(
                    "inbound/outbound not supported on {} when reading savefiles",
                    other.description()
                ))
            }
        };
        Ok(if outbound { b0 } else { b0.not() })
    }

    pub fn ifindex(&mut self, index: u32) -> GenResult<Cond> {
        match self.link.linktype {
            Dlt::LinuxSll2 => Ok(self.cmp(OffRel::LinkHdr, 4, Word, index)),
            other => Err(format!(
                "ifindex not supported on {} when reading savefiles",
                other.description()
            )),
        }
    }
}
