//! `payload ...` (a sift extension): tests on the bytes after the TCP or UDP header.
//!
//! The payload starts after the transport header: for TCP at the data offset (`tcp[12] >> 4`
//! words), for UDP 8 bytes in. The transport header is found as `port` finds it: after the IPv4
//! header of a first fragment (or unfragmented packet), or directly after the fixed IPv6 header
//! (no extension headers). A payload test is the `or` of the test over IPv4/TCP, IPv4/UDP,
//! IPv6/TCP and IPv6/UDP, each guarded by its protocol checks.
//!
//! * `contains` and `matches` call the pattern coprocessor on the captured bytes from the payload
//!   start on (a payload not captured contains nothing); they read only the TCP data offset,
//!   which, as for `tcp[12]`, rejects the packet when it is not captured.
//! * `payload[OFF:LEN] = VALUE` compares the bytes four at a time, first bytes first; a read
//!   past the captured bytes rejects the packet, as every load does.

use std::sync::Arc;

use sift_ir::LoadSize::{Byte, Half, Word};
use sift_ir::{BinOp, Block, CmpOp, Inst, LoadSize, Pattern, PatternSet, Value};
use sift_syntax::ast::PayloadTest;

use crate::cond::Cond;
use crate::gen::{Gen, GenResult, OffRel};
use crate::linktype::{ETHERTYPE_IP, ETHERTYPE_IPV6};
use crate::proto::{IPPROTO_TCP, IPPROTO_UDP};

impl Gen {
    pub fn payload(&mut self, test: &PayloadTest) -> GenResult<Cond> {
        let mut arms = Vec::with_capacity(4);
        for v6 in [false, true] {
            for proto in [IPPROTO_TCP, IPPROTO_UDP] {
                arms.push(self.payload_arm(v6, proto, test)?);
            }
        }
        Ok(self.any(arms).expect("four arms"))
    }

    /// The test over one network and transport protocol.
    fn payload_arm(&mut self, v6: bool, proto: u32, test: &PayloadTest) -> GenResult<Cond> {
        let family = self.linktype(if v6 { ETHERTYPE_IPV6 } else { ETHERTYPE_IP })?;
        let transport = if v6 {
            self.cmp(OffRel::LinkPl, 6, Byte, proto)
        } else {
            let p = self.cmp(OffRel::LinkPl, 9, Byte, proto);
            let first_fragment = self.ipfrag();
            self.and(p, first_fragment)
        };
        let guard = self.and(family, transport);
        let block = self.f.create_block();
        let start = self.payload_start(block, v6, proto);
        let body = match test {
            PayloadTest::Contains { bytes, nocase } => {
                let pattern = Pattern::Literal {
                    bytes: bytes.clone(),
                    nocase: *nocase,
                };
                self.search(block, start, pattern)?
            }
            PayloadTest::Matches(re) => self.search(block, start, Pattern::Regex(re.clone()))?,
            PayloadTest::Equals {
                offset,
                bytes,
                negated,
            } => {
                let eq = self.payload_bytes(block, start, *offset, bytes);
                if *negated {
                    eq.not()
                } else {
                    eq
                }
            }
        };
        Ok(self.and(guard, body))
    }

    /// The offset of the first payload byte, computed in `block`.
    fn payload_start(&mut self, block: Block, v6: bool, proto: u32) -> Value {
        let rel = if v6 {
            OffRel::TranIpv6
        } else {
            OffRel::TranIpv4
        };
        let (index, offset) = self.address(block, rel, 0);
        let header_len = if proto == IPPROTO_TCP {
            let data_offset = self.f.push(
                block,
                Inst::Load {
                    index,
                    offset: offset.wrapping_add(12),
                    size: Byte,
                },
            );
            let mask = self.f.iconst(block, 0xf0);
            let words = self
                .f
                .push(block, Inst::Binary(BinOp::And, data_offset, mask));
            let two = self.f.iconst(block, 2);
            self.f.push(block, Inst::Binary(BinOp::Shr, words, two))
        } else {
            self.f.iconst(block, 8)
        };
        let fixed = self.f.iconst(block, offset);
        let transport = match index {
            Some(x) => self.f.push(block, Inst::Binary(BinOp::Add, x, fixed)),
            None => fixed,
        };
        self.f
            .push(block, Inst::Binary(BinOp::Add, transport, header_len))
    }

    /// `contains(pattern, start) != 0`, ending `block`.
    fn search(&mut self, block: Block, start: Value, pattern: Pattern) -> GenResult<Cond> {
        if self.f.patterns.is_empty() {
            self.f.patterns.push(Arc::new(PatternSet::new()));
        }
        let index = Arc::make_mut(&mut self.f.patterns[0])
            .add(pattern)
            .map_err(|e| e.to_string())?;
        let hit = self.f.push(
            block,
            Inst::Contains {
                set: 0,
                pattern: index,
                start,
            },
        );
        Ok(self.branch_const(block, CmpOp::Ne, hit, 0))
    }

    /// `bytes` at `start + offset`: the first chunk compared in `block`, each later one in a
    /// block of its own.
    fn payload_bytes(&mut self, block: Block, start: Value, offset: u32, bytes: &[u8]) -> Cond {
        let mut chunks = Vec::new();
        let mut at = 0usize;
        while at < bytes.len() {
            let size = match bytes.len() - at {
                n if n >= 4 => Word,
                n if n >= 2 => Half,
                _ => Byte,
            };
            let n = size.bytes() as usize;
            let value = bytes[at..at + n]
                .iter()
                .fold(0u32, |v, &b| (v << 8) | u32::from(b));
            let b = if chunks.is_empty() {
                block
            } else {
                self.f.create_block()
            };
            chunks.push(self.chunk(b, start, offset.wrapping_add(at as u32), size, value));
            at += n;
        }
        self.all(chunks)
            .expect("payload comparisons have at least one byte")
    }

    fn chunk(&mut self, block: Block, start: Value, offset: u32, size: LoadSize, v: u32) -> Cond {
        let x = self.f.push(
            block,
            Inst::Load {
                index: Some(start),
                offset,
                size,
            },
        );
        self.branch_const(block, CmpOp::Eq, x, v)
    }
}
