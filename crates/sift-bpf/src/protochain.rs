//! libpcap's `protochain` loop in classic BPF: emitting it and recognising it.
//!
//! `ip6 protochain 6` walks a chain of IPv6 extension and AH headers
//! ([`sift_ir::protochain::walk`] is the exact meaning). libpcap compiles it into the one loop
//! of classic BPF, closed by a backward `ja`; its userland `bpf_validate` and `bpf_filter` accept
//! backward jumps for this loop alone, the Linux kernel refuses them. sift emits the same loop
//! for the libpcap dialect ([`loop_code`]) and accepts backward jumps only where they close a
//! loop of this exact shape ([`recognize`]), so that every valid program has a known meaning,
//! lifts to [`sift_ir::Inst::Protochain`], and runs for a bounded number of steps.
//!
//! The loop, entered with `A` = the first protocol and `X` = its offset from the network header
//! at `base` (offsets relative to the loop's first instruction; `END` is the instruction right
//! after the loop, where `A` holds the protocol the walk stopped at):
//!
//! ```text
//!  0  jeq #target   jt END              the wanted protocol
//!  1  jeq #59       jt END              IPPROTO_NONE
//!     -- IPv6 only --
//!  2  jeq #0        jt 6                hop-by-hop, destination options, routing, fragment:
//!  3  jeq #60       jt 6                  advance over an extension header
//!  4  jeq #43       jt 6
//!  5  jeq #44       jt 6    jf 15
//!  6  ldb [x + base]                    next protocol
//!  7  st  M[s]
//!  8  ldb [x + base+1]                  X += (length + 1) * 8
//!  9  add #1 ; mul #8 ; add x ; tax
//! 13  ld  M[s]
//! 14  ja  0
//!     -- both --
//! 15  jeq #51       jt 16   jf END      AH
//! 16  ldb [x + base] ; st M[s]           next protocol
//!     ldb [x + base+1] ; add #2 ; mul #4 ; tax    X = (length + 2) * 4 (libpcap's arithmetic,
//!     ld  M[s] ; ja 0                               from the network header, not the AH)
//! ```
//!
//! libpcap's own AH step is 12 instructions (`txa; ldb [x+base]; st; txa; add #1; tax; ldb
//! [x+base]; add #2; mul #4; tax; ld; ja`) and its IPv4 loop has an `add #0` before the AH test;
//! [`recognize`] accepts both forms. `ldb [x + base+1]` reads the byte libpcap reads after
//! `X += 1`: the first load of the step already proved `X + base` inside the packet, so neither
//! sum wraps.
//!
//! # Termination
//!
//! Each step reads a header byte inside the captured bytes, and the walk's state is (protocol,
//! offset), so a walk longer than [`sift_ir::protochain::step_limit`] steps repeats a state and
//! never ends (libpcap 1.10's AH arithmetic makes such cycles possible: `bpf_filter` then never
//! returns). Every step takes the closing `ja` once, and outside loops control only moves
//! forward, so each loop runs at most once per packet: the interpreter allows the sum of the
//! loops' step limits in backward jumps, and rejects the packet (returns 0) beyond it, exactly
//! where the IR's walk rejects.

use sift_ir::protochain::{step_limit, IPPROTO_AH, IPPROTO_NONE, IPV6_EXTENSIONS};
use sift_ir::Chain;

use crate::insn::{code, AluOp, Insn, JmpOp, Op, Size, Src};

/// One recognised protochain loop of a program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProtochainLoop {
    /// Index of the loop's first instruction (the target of its backward jumps).
    pub head: usize,
    /// Index of the instruction after the loop, where every exit goes.
    pub end: usize,
    pub chain: Chain,
    /// Offset of the network header (`k` of the loop's packet loads).
    pub base: u32,
    /// The protocol looked for.
    pub target: u32,
    /// The scratch word the loop clobbers.
    pub scratch: u32,
}

impl ProtochainLoop {
    /// Whether instruction `i` lies inside the loop.
    pub fn contains(&self, i: usize) -> bool {
        (self.head..self.end).contains(&i)
    }

    /// The most steps a terminating walk of this loop takes on `captured` bytes.
    pub fn step_limit(&self, captured: usize) -> u64 {
        step_limit(self.chain, captured)
    }
}

fn jeq(k: u32, jt: u8, jf: u8) -> Insn {
    Insn::jump(Op::Jmp(JmpOp::Jeq, Src::K).code(), k, jt, jf)
}

fn ldb_ind(k: u32) -> Insn {
    Op::LdInd(Size::Byte).with_k(k)
}

fn alu(op: AluOp, k: u32) -> Insn {
    Op::Alu(op, Src::K).with_k(k)
}

/// The extension-header step after its tests (ends with the `ja` back to the head at
/// `-(at + 9)`, `at` being the step's offset in the loop).
fn advance_step(base: u32, scratch: u32, at: usize) -> Vec<Insn> {
    vec![
        ldb_ind(base),
        Op::St.with_k(scratch),
        ldb_ind(base.wrapping_add(1)),
        alu(AluOp::Add, 1),
        alu(AluOp::Mul, 8),
        Op::Alu(AluOp::Add, Src::X).with_k(0),
        Op::Tax.with_k(0),
        Op::LdMem.with_k(scratch),
        Op::Ja.with_k(back(at + 8)),
    ]
}

/// sift's AH step (8 instructions).
fn ah_step(base: u32, scratch: u32, at: usize) -> Vec<Insn> {
    vec![
        ldb_ind(base),
        Op::St.with_k(scratch),
        ldb_ind(base.wrapping_add(1)),
        alu(AluOp::Add, 2),
        alu(AluOp::Mul, 4),
        Op::Tax.with_k(0),
        Op::LdMem.with_k(scratch),
        Op::Ja.with_k(back(at + 7)),
    ]
}

/// libpcap's AH step (12 instructions).
fn libpcap_ah_step(base: u32, scratch: u32, at: usize) -> Vec<Insn> {
    vec![
        Op::Txa.with_k(0),
        ldb_ind(base),
        Op::St.with_k(scratch),
        Op::Txa.with_k(0),
        alu(AluOp::Add, 1),
        Op::Tax.with_k(0),
        ldb_ind(base),
        alu(AluOp::Add, 2),
        alu(AluOp::Mul, 4),
        Op::Tax.with_k(0),
        Op::LdMem.with_k(scratch),
        Op::Ja.with_k(back(at + 11)),
    ]
}

/// The `ja` offset from loop position `at` back to position 0.
fn back(at: usize) -> u32 {
    (-(at as i64) - 1) as u32
}

/// The loop for a walk (see the module documentation); its exits go to the instruction right
/// after it. `scratch` must be below 16.
pub fn loop_code(chain: Chain, base: u32, target: u32, scratch: u32) -> Vec<Insn> {
    let len = match chain {
        Chain::Ip6 => 24,
        Chain::Ip => 11,
    };
    // A conditional jump at `at` to the end of the loop.
    let to_end = |at: usize| (len - at - 1) as u8;
    let mut out = vec![jeq(target, to_end(0), 0), jeq(IPPROTO_NONE, to_end(1), 0)];
    if chain == Chain::Ip6 {
        for (i, &ext) in IPV6_EXTENSIONS.iter().enumerate() {
            let at = 2 + i;
            let last = i + 1 == IPV6_EXTENSIONS.len();
            out.push(jeq(ext, (6 - at - 1) as u8, if last { 9 } else { 0 }));
        }
        out.extend(advance_step(base, scratch, 6));
    }
    let at = out.len();
    out.push(jeq(IPPROTO_AH, 0, to_end(at)));
    out.extend(ah_step(base, scratch, at + 1));
    debug_assert_eq!(out.len(), len);
    out
}

/// Whether `insns[at..]` starts with `want` (compared in canonical form).
fn matches_at(insns: &[Insn], at: usize, want: &[Insn]) -> bool {
    insns
        .get(at..at + want.len())
        .is_some_and(|have| have.iter().zip(want).all(|(h, w)| h.canonical() == *w))
}

/// The `jeq #k` at `at`, if that is what it is: `(k, jt target, jf target)`.
fn test_at(insns: &[Insn], at: usize) -> Option<(u32, usize, usize)> {
    let insn = *insns.get(at)?;
    (insn.decode()? == Op::Jmp(JmpOp::Jeq, Src::K)).then(|| {
        (
            insn.k,
            at + 1 + usize::from(insn.jt),
            at + 1 + usize::from(insn.jf),
        )
    })
}

/// The AH test and step at `at` (either form), given the base and scratch word when an IPv6
/// advance step fixed them; returns (end, base, scratch, index of the closing `ja`).
fn ah_at(
    insns: &[Insn],
    head: usize,
    at: usize,
    fixed: Option<(u32, u32)>,
) -> Option<(usize, u32, u32, usize)> {
    let (k, t, end) = test_at(insns, at)?;
    if k != IPPROTO_AH || t != at + 1 {
        return None;
    }
    let step = at + 1;
    let (base, scratch) = match fixed {
        Some(bs) => bs,
        // The step's second instruction names the scratch word, the base is in either form's
        // first packet load.
        None => {
            let first = insns.get(step)?.canonical();
            let (load, store) = if first == Op::Txa.with_k(0) {
                (insns.get(step + 1)?, insns.get(step + 2)?)
            } else {
                (&first, insns.get(step + 1)?)
            };
            (load.k, store.k)
        }
    };
    if scratch >= code::MEMWORDS {
        return None;
    }
    let offset = step - head;
    for form in [
        ah_step(base, scratch, offset),
        libpcap_ah_step(base, scratch, offset),
    ] {
        let closing = step + form.len() - 1;
        // The test's `jf` leaves the loop: right after the step.
        if matches_at(insns, step, &form) && end == closing + 1 {
            return Some((end, base, scratch, closing));
        }
    }
    None
}

/// The protochain loop starting at `head`, if one does, with the indices of its backward
/// `ja`s. The loop must be exactly one of the forms of the module documentation (libpcap's or
/// sift's), with every exit at the instruction after it.
pub fn recognize(insns: &[Insn], head: usize) -> Option<(ProtochainLoop, Vec<usize>)> {
    let (target, end, next) = test_at(insns, head)?;
    if next != head + 1 {
        return None;
    }
    let (none, end1, next) = test_at(insns, head + 1)?;
    if none != IPPROTO_NONE || end1 != end || next != head + 2 {
        return None;
    }
    let mut at = head + 2;
    let mut closing = Vec::new();
    let (chain, fixed) = match test_at(insns, at) {
        Some((k, _, _)) if k == IPV6_EXTENSIONS[0] => {
            let advance = at + IPV6_EXTENSIONS.len();
            for (i, &ext) in IPV6_EXTENSIONS.iter().enumerate() {
                let (k, t, f) = test_at(insns, at + i)?;
                let last = i + 1 == IPV6_EXTENSIONS.len();
                let want_f = if last { advance + 9 } else { at + i + 1 };
                if k != ext || t != advance || f != want_f {
                    return None;
                }
            }
            let load = *insns.get(advance)?;
            let store = *insns.get(advance + 1)?;
            let (base, scratch) = (load.k, store.k);
            if scratch >= code::MEMWORDS
                || !matches_at(insns, advance, &advance_step(base, scratch, advance - head))
            {
                return None;
            }
            closing.push(advance + 8);
            at = advance + 9;
            (Chain::Ip6, Some((base, scratch)))
        }
        _ => {
            // libpcap's IPv4 loop has a no-op before the AH test.
            if insns.get(at).map(|i| i.canonical()) == Some(alu(AluOp::Add, 0)) {
                at += 1;
            }
            (Chain::Ip, None)
        }
    };
    let (ah_end, base, scratch, ah_closing) = ah_at(insns, head, at, fixed)?;
    closing.push(ah_closing);
    if ah_end != end {
        return None;
    }
    let found = ProtochainLoop {
        head,
        end,
        chain,
        base,
        target,
        scratch,
    };
    Some((found, closing))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emitted_loops_are_recognised() {
        for chain in [Chain::Ip, Chain::Ip6] {
            for target in [6, 0, 44, 51, 59] {
                let code = loop_code(chain, 14, target, 3);
                let (found, closing) = recognize(&code, 0).unwrap();
                assert_eq!(found.end, code.len());
                assert_eq!((found.chain, found.base, found.target), (chain, 14, target));
                assert_eq!(found.scratch, 3);
                for j in closing {
                    assert_eq!(code[j].decode(), Some(Op::Ja));
                    assert_eq!(j as i64 + 1 + i64::from(code[j].k as i32), 0);
                }
            }
        }
    }

    #[test]
    fn other_loops_are_not() {
        let mut code = loop_code(Chain::Ip6, 14, 6, 3);
        assert!(recognize(&code, 1).is_none());
        code[9] = alu(AluOp::Add, 2);
        assert!(recognize(&code, 0).is_none());
        let mut code = loop_code(Chain::Ip, 14, 6, 3);
        code[5] = ldb_ind(16);
        assert!(recognize(&code, 0).is_none());
        assert!(recognize(&code[..5], 0).is_none());
        let mut code = loop_code(Chain::Ip, 14, 6, 3);
        code[1].jt -= 1;
        assert!(recognize(&code, 0).is_none());
    }
}
