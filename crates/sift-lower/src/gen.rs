//! The code generator's state: the function being built, the link layer in force and the offsets
//! that `vlan`, `mpls`, `pppoes` and `geneve` move, and the primitive builders (loads and
//! comparisons) that every protocol module uses.

use sift_ir::{BinOp, Block, CmpOp, Function, Inst, LoadSize, Terminator, Value};
use sift_syntax::ast::Span;

use crate::cond::{Cond, UNPATCHED};
use crate::linktype::Dlt;
use crate::scratch::{Register, RegisterWrite, Registers};

/// A code-generation failure; the caller attaches the span of the primitive being lowered.
pub(crate) type GenResult<T> = Result<T, String>;

/// Where an offset is measured from (libpcap's `e_offrel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OffRel {
    /// The current link-layer header.
    LinkHdr,
    /// The 802.2 LLC header (the start of the link-layer payload).
    Llc,
    /// The last MPLS label before the network-layer header.
    PrevMplsHdr,
    /// The network-layer header, assuming Ethernet II / SNAP framing.
    LinkPl,
    /// The network-layer header, assuming 802.2 framing without SNAP.
    LinkPlNoSnap,
    /// The link-layer type field.
    LinkType,
    /// The transport header after an IPv4 header of variable length.
    TranIpv4,
    /// The transport header after a fixed 40-byte IPv6 header.
    TranIpv6,
}

/// The part of an offset that only the packet knows: a value computed by the code of a `geneve`
/// primitive (libpcap keeps it in a scratch register), which exists only on the paths through
/// that code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RuntimeOffset {
    pub value: Value,
    /// The block defining `value`; a use sees `value` where this block dominates it.
    pub defined_in: Block,
    /// The scratch register libpcap keeps the value in (which a use elsewhere reads).
    pub register: Register,
}

/// An offset from the start of the packet: a constant, plus a run-time part after `geneve`
/// (libpcap's `bpf_abs_offset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AbsOffset {
    pub runtime: Option<RuntimeOffset>,
    pub constant: u32,
}

impl AbsOffset {
    pub fn constant(constant: u32) -> AbsOffset {
        AbsOffset {
            runtime: None,
            constant,
        }
    }

    pub fn runtime(value: Value, defined_in: Block, register: Register) -> AbsOffset {
        AbsOffset {
            runtime: Some(RuntimeOffset {
                value,
                defined_in,
                register,
            }),
            constant: 0,
        }
    }

    /// The same offset moved by `k` bytes (only the constant part changes).
    pub fn plus(self, k: u32) -> AbsOffset {
        AbsOffset {
            runtime: self.runtime,
            constant: self.constant.wrapping_add(k),
        }
    }
}

/// The link-layer state, as libpcap's compiler state keeps it.
#[derive(Clone, Debug)]
pub(crate) struct LinkState {
    pub linktype: Dlt,
    pub prevlinktype: Dlt,
    pub off_linkhdr: AbsOffset,
    pub off_prevlinkhdr: AbsOffset,
    pub off_linkpl: AbsOffset,
    /// `None` where the link layer has no type field (raw IP).
    pub off_linktype: Option<AbsOffset>,
    pub off_nl: u32,
    pub off_nl_nosnap: u32,
    pub label_stack_depth: u32,
    pub vlan_stack_depth: u32,
    /// The link layer is the payload of the last `geneve` (Ethernet or bare network layer);
    /// link-level address tests then first check that there is an Ethernet header.
    pub is_geneve: bool,
}

/// A read of a run-time offset, resolved once the filter's control flow is complete (see
/// [`crate::offset_reads`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OffsetUse {
    pub offset: RuntimeOffset,
    pub used_in: Block,
    /// The primitive reading the offset (filled in when its lowering returns).
    pub span: Option<Span>,
}

/// Compile-time facts about the capture the filter is for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Env {
    /// The capture file is in the opposite byte order to this machine (affects the address
    /// family field of BSD loopback headers, which is in the writer's byte order).
    pub swapped: bool,
}

pub(crate) struct Gen {
    pub f: Function,
    pub link: LinkState,
    pub env: Env,
    /// The netmask `ip broadcast` uses.
    pub netmask: u32,
    /// libpcap's scratch registers: which are taken.
    pub registers: Registers,
    /// Every store to a scratch register, in order.
    pub register_writes: Vec<RegisterWrite>,
    /// libpcap disables its optimizer for filters that use `protochain` or `geneve`.
    pub no_optimize: bool,
    /// Whether libpcap's statements follow from the IR (`statement_model`): not after `byte N
    /// & V` or `byte N | V`, which libpcap applies to whatever the accumulator holds.
    pub statements_known: bool,
    /// Whether the filter compares computed values (`expr relop expr`), which lets it take
    /// libpcap's optimizer statement by statement up to a larger size
    /// (`statement_model::MAX_INSTRUCTIONS_WITH_RELATIONS`).
    pub relations: bool,
    /// Every read of a run-time offset, to be resolved where `geneve` may not have matched.
    pub offset_uses: Vec<OffsetUse>,
    /// While lowering `... in SET` (an extension): the set whose membership test replaces the
    /// address or port comparison of the primitive being generated.
    pub member_set: Option<u32>,
    /// A narrower span than the primitive's for the error being returned (a set item's).
    pub error_span: Option<Span>,
}

fn branch_cond(f: &mut Function, block: Block, op: CmpOp, lhs: Value, rhs: Value) -> Cond {
    f.set_term(
        block,
        Terminator::Branch {
            op,
            lhs,
            rhs,
            then_: UNPATCHED.into(),
            else_: UNPATCHED.into(),
        },
    );
    Cond::branch(block)
}

impl Gen {
    /// The absolute offset and optional index register for a load relative to `rel`.
    pub fn address(&mut self, block: Block, rel: OffRel, offset: u32) -> (Option<Value>, u32) {
        let l = &self.link;
        let base = match rel {
            OffRel::LinkHdr => l.off_linkhdr,
            OffRel::Llc => l.off_linkpl,
            OffRel::PrevMplsHdr => l.off_linkpl.plus(l.off_nl.wrapping_sub(4)),
            OffRel::LinkPl => l.off_linkpl.plus(l.off_nl),
            OffRel::LinkPlNoSnap => l.off_linkpl.plus(l.off_nl_nosnap),
            OffRel::LinkType => l.off_linktype.unwrap_or(AbsOffset::constant(0)),
            OffRel::TranIpv6 => l.off_linkpl.plus(l.off_nl.wrapping_add(40)),
            OffRel::TranIpv4 => {
                let x = self.ipv4_header_len(block);
                let k = self.link.off_linkpl.constant.wrapping_add(self.link.off_nl);
                return (Some(x), k.wrapping_add(offset));
            }
        };
        let index = self.runtime_part(block, base);
        (index, base.constant.wrapping_add(offset))
    }

    /// The run-time part of `off` for an instruction in `block`, recording the use.
    pub fn runtime_part(&mut self, block: Block, off: AbsOffset) -> Option<Value> {
        Some(self.runtime_use(block, off.runtime?))
    }

    /// The value of a run-time offset for an instruction in `block`, recording the use.
    pub fn runtime_use(&mut self, block: Block, r: RuntimeOffset) -> Value {
        self.offset_uses.push(OffsetUse {
            offset: r,
            used_in: block,
            span: None,
        });
        r.value
    }

    /// Emits a load of `size` bytes at `offset` relative to `rel` into `block`.
    pub fn load(&mut self, block: Block, rel: OffRel, offset: u32, size: LoadSize) -> Value {
        let (index, offset) = self.address(block, rel, offset);
        self.f.push(
            block,
            Inst::Load {
                index,
                offset,
                size,
            },
        )
    }

    /// The IPv4 header length in bytes, `4 * (ip[0] & 0xf)` (classic BPF's `ldx 4*([k]&0xf)`),
    /// plus the run-time part of the network layer's offset when there is one (libpcap's
    /// `gen_loadx_iphdrlen`): the index for loads relative to the transport header.
    pub fn ipv4_header_len(&mut self, block: Block) -> Value {
        let linkpl = self.link.off_linkpl;
        let k = linkpl.constant.wrapping_add(self.link.off_nl);
        let runtime = self.runtime_part(block, linkpl);
        let b = self.f.push(
            block,
            Inst::Load {
                index: runtime,
                offset: k,
                size: LoadSize::Byte,
            },
        );
        let mask = self.f.iconst(block, 0xf);
        let low = self.f.push(block, Inst::Binary(BinOp::And, b, mask));
        let two = self.f.iconst(block, 2);
        let len = self.f.push(block, Inst::Binary(BinOp::Shl, low, two));
        match runtime {
            Some(r) => self.f.push(block, Inst::Binary(BinOp::Add, len, r)),
            None => len,
        }
    }

    /// A branch on `op(value, k)` ending `block`.
    pub fn branch_const(&mut self, block: Block, op: CmpOp, value: Value, k: u32) -> Cond {
        let kv = self.f.iconst(block, k);
        branch_cond(&mut self.f, block, op, value, kv)
    }

    /// A branch on `op(lhs, rhs)` ending `block`.
    pub fn branch(&mut self, block: Block, op: CmpOp, lhs: Value, rhs: Value) -> Cond {
        branch_cond(&mut self.f, block, op, lhs, rhs)
    }

    /// libpcap's `gen_ncmp`: `(load & mask) op v` in a new block.
    pub fn ncmp(
        &mut self,
        rel: OffRel,
        offset: u32,
        size: LoadSize,
        mask: u32,
        op: CmpOp,
        v: u32,
    ) -> Cond {
        let block = self.f.create_block();
        let mut x = self.load(block, rel, offset, size);
        // `and #mask; jeq #0` becomes `jset` in libpcap's first round, as in
        // `libpcap_opt::branches::first_round_jset_peephole`.
        if mask != 0xffff_ffff {
            let m = self.f.iconst(block, mask);
            x = self.f.push(block, Inst::Binary(BinOp::And, x, m));
        }
        self.branch_const(block, op, x, v)
    }

    /// `member(set, key)` where the key is the loads of `size` at `offsets` (most significant
    /// first), each masked with `mask`, in a new block: a key that is not wholly captured
    /// rejects the packet.
    pub fn member_cmp(
        &mut self,
        rel: OffRel,
        offsets: &[u32],
        size: LoadSize,
        mask: u32,
        set: u32,
    ) -> Cond {
        let block = self.f.create_block();
        let mut key = sift_ir::ThinVec::with_capacity(offsets.len());
        for &o in offsets {
            let mut x = self.load(block, rel, o, size);
            if mask != u32::MAX {
                let m = self.f.iconst(block, mask);
                x = self.f.push(block, Inst::Binary(BinOp::And, x, m));
            }
            key.push(x);
        }
        let hit = self.f.push(block, Inst::Member { set, key });
        self.branch_const(block, CmpOp::Ne, hit, 0)
    }

    pub fn cmp(&mut self, rel: OffRel, offset: u32, size: LoadSize, v: u32) -> Cond {
        self.ncmp(rel, offset, size, 0xffff_ffff, CmpOp::Eq, v)
    }

    pub fn cmp_gt(&mut self, rel: OffRel, offset: u32, size: LoadSize, v: u32) -> Cond {
        self.ncmp(rel, offset, size, 0xffff_ffff, CmpOp::Gt, v)
    }

    pub fn mcmp(&mut self, rel: OffRel, offset: u32, size: LoadSize, v: u32, mask: u32) -> Cond {
        self.ncmp(rel, offset, size, mask, CmpOp::Eq, v)
    }

    /// `(load & mask) != 0` as classic BPF's `jset` tests it.
    pub fn jset(&mut self, rel: OffRel, offset: u32, size: LoadSize, mask: u32) -> Cond {
        self.ncmp(rel, offset, size, 0xffff_ffff, CmpOp::Set, mask)
    }

    /// libpcap's `gen_bcmp`: compares `bytes` at `offset`, the last four bytes first.
    pub fn bcmp(&mut self, rel: OffRel, offset: u32, bytes: &[u8]) -> Cond {
        let mut size = bytes.len();
        let mut conds = Vec::new();
        while size >= 4 {
            let p = &bytes[size - 4..size];
            let v = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
            conds.push(self.cmp(rel, offset.wrapping_add(size as u32 - 4), LoadSize::Word, v));
            size -= 4;
        }
        while size >= 2 {
            let p = &bytes[size - 2..size];
            let v = u32::from(u16::from_be_bytes([p[0], p[1]]));
            conds.push(self.cmp(rel, offset.wrapping_add(size as u32 - 2), LoadSize::Half, v));
            size -= 2;
        }
        if size > 0 {
            conds.push(self.cmp(rel, offset, LoadSize::Byte, u32::from(bytes[0])));
        }
        self.all(conds).expect("bcmp of no bytes")
    }

    /// A condition that is always true (`sense`) or always false: libpcap's `gen_uncond`, a
    /// block comparing a constant with 0 (`ld #0; jeq #0` for true). Its other edge is dead, but
    /// it is there until libpcap's optimizer decides the branch, and until then it counts for
    /// dominators, and so for which edges the optimizer may move.
    pub fn uncond(&mut self, sense: bool) -> Cond {
        let block = self.f.create_block();
        let value = self.f.iconst(block, u32::from(!sense));
        let zero = self.f.iconst(block, 0);
        branch_cond(&mut self.f, block, CmpOp::Eq, value, zero)
    }

    pub fn and(&mut self, a: Cond, b: Cond) -> Cond {
        crate::cond::and(&mut self.f, a, b)
    }

    pub fn or(&mut self, a: Cond, b: Cond) -> Cond {
        crate::cond::or(&mut self.f, a, b)
    }

    /// `a and b and ...`, left to right; `None` for no conditions.
    pub fn all(&mut self, conds: impl IntoIterator<Item = Cond>) -> Option<Cond> {
        conds.into_iter().reduce(|acc, c| self.and(acc, c))
    }

    /// `a or b or ...`, left to right; `None` for no conditions.
    pub fn any(&mut self, conds: impl IntoIterator<Item = Cond>) -> Option<Cond> {
        conds.into_iter().reduce(|acc, c| self.or(acc, c))
    }
}
