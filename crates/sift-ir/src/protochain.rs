//! The header-chain walk of libpcap's `protochain`, the one loop in the filter language.
//!
//! libpcap compiles `ip6 protochain 6` into a classic BPF loop (a backward jump) that follows
//! IPv6 extension headers and AH headers until it finds the wanted protocol, `IPPROTO_NONE`, or a
//! header it cannot walk. The IR is acyclic, so the loop is one instruction,
//! [`Inst::Protochain`], whose meaning [`walk`] defines; back ends that
//! cannot loop (the Linux kernel's classic BPF, eBPF) replace it with a bounded unrolling
//! ([`unroll`]).
//!
//! The walk keeps libpcap's arithmetic exactly, including an oddity: after an AH header the new
//! offset is `(ah_len + 2) * 4` from the network header, not from the AH header. A chain of AH
//! headers can therefore send libpcap round in a circle forever (it never returns for such a
//! packet). Every step reads a header byte inside the captured bytes, and the state of the walk
//! is the pair (protocol, offset), so a walk longer than [`step_limit`] has repeated a state and
//! will never end; sift rejects the packet there instead of hanging.

use std::borrow::Cow;

use crate::function::{
    thin_vec, BinOp, Block, CmpOp, Function, Inst, LoadSize, Target, Terminator, ThinVec, Value,
};
use crate::interp::load;

/// `IPPROTO_NONE`: no next header; the walk stops.
pub const IPPROTO_NONE: u32 = 59;
/// `IPPROTO_AH`: an authentication header; both walks step over it.
pub const IPPROTO_AH: u32 = 51;
/// The IPv6 extension headers the IPv6 walk steps over (hop-by-hop, destination options,
/// routing, fragment).
pub const IPV6_EXTENSIONS: [u32; 4] = [0, 60, 43, 44];

/// Which walk: IPv4 steps over AH headers only, IPv6 also over its extension headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Chain {
    Ip,
    Ip6,
}

impl Chain {
    pub fn name(self) -> &'static str {
        match self {
            Chain::Ip => "ip",
            Chain::Ip6 => "ip6",
        }
    }

    /// How many protocol numbers the walk steps over: AH, and for IPv6 its extension headers.
    fn walkable(self) -> u32 {
        match self {
            Chain::Ip => 1,
            Chain::Ip6 => 1 + IPV6_EXTENSIONS.len() as u32,
        }
    }

    fn is_extension(self, proto: u32) -> bool {
        self == Chain::Ip6 && IPV6_EXTENSIONS.contains(&proto)
    }
}

/// The most steps a walk over `captured` bytes can take without repeating a state (see the
/// module documentation): a step needs a walkable protocol and an offset inside the packet.
pub fn step_limit(chain: Chain, captured: usize) -> u64 {
    u64::from(chain.walkable()) * captured as u64
}

/// Walks the chain: `proto` is the first header's protocol, `offset` its position relative to
/// `base` (the network header). Returns the protocol the walk stopped at (`target`,
/// `IPPROTO_NONE`, or a header it does not step over), or `None` when the packet is rejected: a
/// header byte lies outside `pkt`, or the walk is a cycle libpcap would never leave.
pub fn walk(
    pkt: &[u8],
    chain: Chain,
    base: u32,
    mut proto: u32,
    mut offset: u32,
    target: u32,
) -> Option<u32> {
    let limit = step_limit(chain, pkt.len());
    let mut steps = 0u64;
    loop {
        if proto == target || proto == IPPROTO_NONE {
            return Some(proto);
        }
        let extension = chain.is_extension(proto);
        if !extension && proto != IPPROTO_AH {
            return Some(proto);
        }
        steps += 1;
        if steps > limit {
            return None;
        }
        let next = load(pkt, offset, base, LoadSize::Byte)?;
        offset = if extension {
            let len = load(pkt, offset, base.wrapping_add(1), LoadSize::Byte)?;
            (len + 1).wrapping_mul(8).wrapping_add(offset)
        } else {
            let len = load(pkt, offset.wrapping_add(1), base, LoadSize::Byte)?;
            (len + 2) * 4
        };
        proto = next;
    }
}

/// How many headers back ends without loops walk: exact on every chain of at most this many
/// headers (real traffic has a handful).
pub const UNROLLED_HEADERS: usize = 32;

/// `f` with every walk unrolled to [`UNROLLED_HEADERS`] headers, or `f` itself when it has none.
pub fn without_loops(f: &Function) -> Cow<'_, Function> {
    if find(f).is_none() {
        return Cow::Borrowed(f);
    }
    let mut f = f.clone();
    unroll(&mut f, UNROLLED_HEADERS);
    Cow::Owned(f)
}

/// Replaces every [`Inst::Protochain`] in `f` by `headers` copies of the loop body; a chain
/// longer than that rejects the packet. For back ends without loops; exact on every packet
/// whose walk takes at most `headers` steps.
pub fn unroll(f: &mut Function, headers: usize) {
    while let Some((block, at)) = find(f) {
        let v = f.block(block).insts[at];
        let Inst::Protochain {
            chain,
            base,
            proto,
            offset,
            target,
        } = *f.inst(v)
        else {
            unreachable!("find returns protochain instructions")
        };
        // Split the block after the walk: `rest` receives the walk's result as its parameter.
        let rest = f.split_at_value(block, at);
        let reject = f.create_block();
        f.set_term(reject, Terminator::Return(0));
        let (mut from, mut a, mut x) = (block, proto, offset);
        // Each round tests the protocol and takes one step; the last only tests, and a chain
        // that goes on is rejected.
        for round in 0..=headers {
            let again = f.create_block();
            let pa = f.add_param(again);
            let px = f.add_param(again);
            f.set_term(from, jump(again, thin_vec![a, x]));
            let last = round == headers;
            let walk = Walk {
                chain,
                base,
                target,
                done: rest,
                reject: last.then_some(reject),
            };
            match walk.step(f, again, pa, px) {
                Some(next) => (from, a, x) = next,
                None => break,
            }
        }
    }
}

fn find(f: &Function) -> Option<(Block, usize)> {
    f.blocks.iter().enumerate().find_map(|(b, data)| {
        let at = data
            .insts
            .iter()
            .position(|&v| matches!(f.inst(v), Inst::Protochain { .. }))?;
        Some((Block(b as u32), at))
    })
}

fn jump(to: Block, args: ThinVec<Value>) -> Terminator {
    Terminator::Jump(Target { block: to, args })
}

/// One round of an unrolled walk.
struct Walk {
    chain: Chain,
    base: u32,
    target: u32,
    /// Where the walk goes with the protocol it stopped at.
    done: Block,
    /// In the last round, where a walk that would step on goes.
    reject: Option<Block>,
}

impl Walk {
    /// Emits the tests of one round in `again`, with protocol `pa` at offset `px`: stop (jump to
    /// `done` with the protocol) or compute the next header. Returns the block that ends the
    /// step with the next protocol and offset, or `None` in the last round.
    fn step(
        &self,
        f: &mut Function,
        again: Block,
        pa: Value,
        px: Value,
    ) -> Option<(Block, Value, Value)> {
        let Walk {
            chain,
            base,
            target,
            done,
            reject,
        } = *self;
        // The tests run in libpcap's order: target, NONE, extension headers, AH.
        let mut tests = vec![target, IPPROTO_NONE];
        let stops = tests.len();
        if chain == Chain::Ip6 {
            tests.extend(IPV6_EXTENSIONS);
        }
        tests.push(IPPROTO_AH);
        // Where extension headers and AH headers go (the IPv4 walk has no extension tests).
        let (advance, ah) = match reject {
            Some(r) => (r, r),
            None if chain == Chain::Ip6 => (f.create_block(), f.create_block()),
            None => (done, f.create_block()),
        };
        let mut block = again;
        for (i, &k) in tests.iter().enumerate() {
            let kv = f.iconst(block, k);
            let then_ = if i < stops {
                Target {
                    block: done,
                    args: thin_vec![pa],
                }
            } else if k == IPPROTO_AH {
                ah.into()
            } else {
                advance.into()
            };
            let else_ = if i + 1 == tests.len() {
                Target {
                    block: done,
                    args: thin_vec![pa],
                }
            } else {
                f.create_block().into()
            };
            let next = else_.block;
            f.set_term(
                block,
                Terminator::Branch {
                    op: CmpOp::Eq,
                    lhs: pa,
                    rhs: kv,
                    then_,
                    else_,
                },
            );
            block = next;
        }
        let byte = |f: &mut Function, b: Block, index: Value, offset: u32| {
            f.push(
                b,
                Inst::Load {
                    index: Some(index),
                    offset,
                    size: LoadSize::Byte,
                },
            )
        };
        let binary = |f: &mut Function, b: Block, op: BinOp, x: Value, k: u32| {
            let kv = f.iconst(b, k);
            f.push(b, Inst::Binary(op, x, kv))
        };
        if reject.is_some() {
            return None;
        }
        let join = f.create_block();
        let ja = f.add_param(join);
        let jx = f.add_param(join);
        if chain == Chain::Ip6 {
            // advance: next = P[X]; X += (P[X + 1] + 1) * 8.
            let next = byte(f, advance, px, base);
            let len = byte(f, advance, px, base.wrapping_add(1));
            let t = binary(f, advance, BinOp::Add, len, 1);
            let t = binary(f, advance, BinOp::Mul, t, 8);
            let nx = f.push(advance, Inst::Binary(BinOp::Add, t, px));
            f.set_term(advance, jump(join, thin_vec![next, nx]));
        }
        // ah: next = P[X]; X = (P[X + 1] + 2) * 4.
        let next = byte(f, ah, px, base);
        let x1 = binary(f, ah, BinOp::Add, px, 1);
        let len = byte(f, ah, x1, base);
        let t = binary(f, ah, BinOp::Add, len, 2);
        let nx = binary(f, ah, BinOp::Mul, t, 4);
        f.set_term(ah, jump(join, thin_vec![next, nx]));
        Some((join, ja, jx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv6 header (40 bytes, next header `first`) followed by `rest`.
    fn ip6(first: u8, rest: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x60;
        p[6] = first;
        p.extend_from_slice(rest);
        p
    }

    #[test]
    fn walks_extension_headers() {
        // hop-by-hop (8 bytes) -> routing (16 bytes) -> TCP.
        let mut rest = vec![43, 0, 0, 0, 0, 0, 0, 0];
        rest.extend([6, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let p = ip6(0, &rest);
        assert_eq!(walk(&p, Chain::Ip6, 0, 0, 40, 6), Some(6));
        assert_eq!(walk(&p, Chain::Ip6, 0, 0, 40, 17), Some(6));
        // Looking for routing stops there.
        assert_eq!(walk(&p, Chain::Ip6, 0, 0, 40, 43), Some(43));
        // IPv4 does not step over IPv6 extension headers.
        assert_eq!(walk(&p, Chain::Ip, 0, 0, 40, 6), Some(0));
        // Truncated inside the second header's length byte.
        assert_eq!(walk(&p[..48], Chain::Ip6, 0, 0, 40, 6), None);
    }

    #[test]
    fn ah_offset_is_from_the_network_header() {
        // IPv4 with AH at offset 20 whose length byte 3 sends the walk to (3 + 2) * 4 = 20:
        // libpcap loops forever; sift rejects.
        let mut p = vec![0u8; 40];
        p[20] = 51;
        p[21] = 3;
        assert_eq!(walk(&p, Chain::Ip, 0, 51, 20, 6), None);
        // Length 4 sends it to 24, where TCP is announced.
        p[21] = 4;
        p[24] = 6;
        assert_eq!(walk(&p, Chain::Ip, 0, 51, 20, 6), Some(6));
    }

    #[test]
    fn unrolled_walk_agrees_within_its_bound() {
        let text = "block0:\n v0 = load.b [6]\n v1 = const 40\n v2 = protochain.ip6 v0, [v1+0], 6\n v3 = const 6\n br eq v2, v3, block1, block2\nblock1:\n ret 1\nblock2:\n ret 0\n";
        let f = crate::parse_function(text).unwrap();
        assert_eq!(crate::parse_function(&f.to_string()).unwrap(), f);
        let mut unrolled = f.clone();
        unroll(&mut unrolled, 4);
        crate::verify(&unrolled).unwrap();
        let run = |f: &Function, p: &[u8]| {
            crate::Interpreter::new(f.clone()).unwrap().run(
                &mut crate::Cache::new(),
                p,
                p.len() as u32,
            )
        };
        // 0..=5 destination-options headers then TCP.
        for n in 0..6usize {
            let mut rest = Vec::new();
            for i in 0..n {
                rest.extend([if i + 1 == n { 6 } else { 60 }, 0, 0, 0, 0, 0, 0, 0]);
            }
            let p = ip6(if n == 0 { 6 } else { 60 }, &rest);
            assert_eq!(run(&f, &p), 1, "{n} headers");
            assert_eq!(
                run(&unrolled, &p),
                u32::from(n <= 4),
                "{n} headers, unrolled"
            );
        }
    }
}
