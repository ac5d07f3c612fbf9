//! Lifting a stateless MPF program into the IR, through classic BPF.
//!
//! The paper defines `ret_match_imm` by its classic BPF equivalent (table 1): load each scratch
//! word, compare it with its key, return the length if all match and 0 otherwise. This module
//! writes that expansion out — and the same for `jmp_match_imm`, with the accumulator saved in a
//! scratch word the program does not use, because the instruction does not change `A` — then
//! validates the classic program and lifts it with `sift_bpf::lift`. The keys become the
//! constants of `jeq` instructions and nothing else, so programs that differ only in their keys
//! lift to functions that differ only in those constants (the demultiplexer's condition for
//! collapsing them).
//!
//! Expansion changes distances, so a conditional jump whose target moves more than 255
//! instructions away goes through `ja` trampolines (`jeq #k, 0, 1; ja T; ja F`). Stateful
//! programs are refused: their meaning depends on the filter's static memory and postponed
//! queue, which [`super::Session`] holds.

use std::fmt;

use sift_bpf::{validate, Dialect, Insn as BpfInsn, Op, Program as BpfProgram, ValidProgram};
use sift_ir::Function;

use super::program::{Insn, Program};
use crate::span::Span;

const LD_MEM: u16 = 0x60;
const ST: u16 = 0x02;
const RET_K: u16 = 0x06;
const JA: u16 = 0x05;
const JEQ_K: u16 = 0x15;

/// What [`lift`] returns for `ALL` when no snap length is given: keep the whole packet.
pub const ACCEPT_ALL: u32 = u32::MAX;

/// Why a program cannot be lifted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LiftErrorKind {
    /// The program uses per-filter state (`register_data`, `ret_match_data`, `postpone`).
    Stateful { mnemonic: &'static str },
    /// A `jmp_match_imm` in a program that uses all 16 scratch words: there is none left to
    /// keep `A` in.
    NoFreeScratch,
    /// The classic expansion is longer than classic BPF allows.
    TooLong { instructions: usize },
}

/// A lifting error at an instruction slot (with the slot's source span when the program was
/// parsed from text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiftError {
    pub kind: LiftErrorKind,
    pub slot: Option<usize>,
    pub span: Option<Span>,
}

impl fmt::Display for LiftErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LiftErrorKind::Stateful { mnemonic } => write!(
                f,
                "`{mnemonic}` needs the filter's state: run the program with mpf::Session"
            ),
            LiftErrorKind::NoFreeScratch => f.write_str(
                "jmp_match_imm needs a scratch word the program does not use, and all 16 are used",
            ),
            LiftErrorKind::TooLong { instructions } => write!(
                f,
                "the classic BPF expansion has {instructions} instructions, more than 4096"
            ),
        }
    }
}

impl fmt::Display for LiftError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.slot {
            Some(s) => write!(f, "instruction {s}: {}", self.kind),
            None => write!(f, "{}", self.kind),
        }
    }
}

impl std::error::Error for LiftError {}

impl LiftError {
    /// The error with the source line and a caret, when the span is known.
    pub fn render(&self, text: &str) -> String {
        match self.span {
            Some(span) => crate::span::render(text, span, &self.kind.to_string()),
            None => self.to_string(),
        }
    }
}

/// Lifts a stateless program; `ALL` returns [`ACCEPT_ALL`].
pub fn lift(program: &Program) -> Result<Function, LiftError> {
    lift_with(program, ACCEPT_ALL)
}

/// Lifts a stateless program; `ALL` (in `ret #ALL`, `ret_match_imm`) returns `snaplen`.
pub fn lift_with(program: &Program, snaplen: u32) -> Result<Function, LiftError> {
    Ok(sift_bpf::lift(&to_classic(program, snaplen)?))
}

/// Where a classic jump goes before layout.
#[derive(Clone, Copy)]
enum Dest {
    Slot(usize),
    Item(usize),
}

enum Item {
    Plain(BpfInsn),
    Cond { code: u16, k: u32, t: Dest, f: Dest },
    Ja(Dest),
}

/// The classic BPF program a stateless MPF program means (match instructions expanded as in
/// table 1; `ALL` is `snaplen`).
pub fn to_classic(program: &Program, snaplen: u32) -> Result<ValidProgram, LiftError> {
    let error = |kind, slot: Option<usize>| LiftError {
        kind,
        slot,
        span: slot.and_then(|s| program.span(s)),
    };
    if let Some(slot) = program.first_stateful() {
        let mnemonic = program.insns()[slot].mnemonic();
        return Err(error(LiftErrorKind::Stateful { mnemonic }, Some(slot)));
    }
    let insns = program.insns();
    let spare = spare_scratch(program);
    let mut items: Vec<Item> = Vec::new();
    let mut slot_item = Vec::with_capacity(insns.len() + 1);
    for (i, &insn) in insns.iter().enumerate() {
        slot_item.push(items.len());
        let next = i + 1;
        match insn {
            Insn::Classic(c) => items.push(match c.decode() {
                Some(Op::Ja) => Item::Ja(Dest::Slot(next + c.k as usize)),
                Some(Op::Jmp(..)) => Item::Cond {
                    code: c.code,
                    k: c.k,
                    t: Dest::Slot(next + usize::from(c.jt)),
                    f: Dest::Slot(next + usize::from(c.jf)),
                },
                _ => Item::Plain(c),
            }),
            Insn::RetAll => items.push(Item::Plain(BpfInsn::stmt(RET_K, snaplen))),
            Insn::Key(_) => {}
            Insn::RetMatchImm { len, .. } => {
                let keys = program.keys_at(i);
                let ok = items.len() + 2 * keys.len();
                compare_chain(&mut items, &keys, Dest::Item(ok), Dest::Item(ok + 1));
                items.push(Item::Plain(BpfInsn::stmt(RET_K, len.value(snaplen))));
                items.push(Item::Plain(BpfInsn::stmt(RET_K, 0)));
            }
            Insn::JmpMatchImm { jt, jf, .. } => {
                let Some(s) = spare else {
                    return Err(error(LiftErrorKind::NoFreeScratch, Some(i)));
                };
                let keys = program.keys_at(i);
                items.push(Item::Plain(BpfInsn::stmt(ST, s)));
                let restore_t = items.len() + 2 * keys.len();
                let restore_f = restore_t + 2;
                compare_chain(
                    &mut items,
                    &keys,
                    Dest::Item(restore_t),
                    Dest::Item(restore_f),
                );
                for target in [next + usize::from(jt), next + usize::from(jf)] {
                    items.push(Item::Plain(BpfInsn::stmt(LD_MEM, s)));
                    items.push(Item::Ja(Dest::Slot(target)));
                }
            }
            Insn::RegisterData { .. } | Insn::RetMatchData { .. } | Insn::Postpone { .. } => {
                unreachable!("stateful programs were refused above")
            }
        }
    }
    slot_item.push(items.len());
    let classic = layout(&items, &slot_item);
    // Refused at the kernel's size, as before libpcap's dialect had no limit: an MPF program is
    // a kernel filter.
    let len = classic.len();
    if len > sift_bpf::code::MAXINSNS {
        return Err(error(LiftErrorKind::TooLong { instructions: len }, None));
    }
    validate(&classic, Dialect::Libpcap)
        .map_err(|_| error(LiftErrorKind::TooLong { instructions: len }, None))
}

/// `ld M[j]; jeq #key_j` for each key: all equal goes to `ok`, the first difference to `fail`.
fn compare_chain(items: &mut Vec<Item>, keys: &[u32], ok: Dest, fail: Dest) {
    let base = items.len();
    for (j, &key) in keys.iter().enumerate() {
        items.push(Item::Plain(BpfInsn::stmt(LD_MEM, j as u32)));
        let t = if j + 1 < keys.len() {
            Dest::Item(base + 2 * (j + 1))
        } else {
            ok
        };
        items.push(Item::Cond {
            code: JEQ_K,
            k: key,
            t,
            f: fail,
        });
    }
}

/// The lowest scratch word the program neither reads nor writes nor compares.
fn spare_scratch(program: &Program) -> Option<u32> {
    let mut used = 0u32;
    for insn in program.insns() {
        match *insn {
            Insn::Classic(c) => {
                if matches!(c.decode(), Some(Op::LdMem | Op::LdxMem | Op::St | Op::Stx)) {
                    used |= 1 << (c.k & 15);
                }
            }
            other => used |= (1u32 << other.key_count()) - 1,
        }
    }
    (0..16).find(|s| used & (1 << s) == 0)
}

/// Places the items, widening conditional jumps whose targets end up more than 255 away into
/// trampolines, until every offset fits.
fn layout(items: &[Item], slot_item: &[usize]) -> BpfProgram {
    let resolve = |d: Dest| match d {
        Dest::Slot(s) => slot_item[s.min(slot_item.len() - 1)],
        Dest::Item(i) => i,
    };
    let mut wide = vec![false; items.len()];
    let positions = |wide: &[bool]| -> Vec<usize> {
        let mut pos = Vec::with_capacity(items.len() + 1);
        let mut at = 0;
        for (i, _) in items.iter().enumerate() {
            pos.push(at);
            at += if wide[i] { 3 } else { 1 };
        }
        pos.push(at);
        pos
    };
    let pos = loop {
        let pos = positions(&wide);
        let mut changed = false;
        for (i, item) in items.iter().enumerate() {
            if let Item::Cond { t, f, .. } = item {
                let far = [*t, *f]
                    .iter()
                    .any(|&d| pos[resolve(d)] - (pos[i] + 1) > 255);
                if far && !wide[i] {
                    wide[i] = true;
                    changed = true;
                }
            }
        }
        if !changed {
            break pos;
        }
    };
    let mut out = Vec::with_capacity(pos[items.len()]);
    let ja = |from: usize, to: usize| BpfInsn::stmt(JA, (to - from - 1) as u32);
    for (i, item) in items.iter().enumerate() {
        match *item {
            Item::Plain(insn) => out.push(insn),
            Item::Ja(d) => out.push(ja(pos[i], pos[resolve(d)])),
            Item::Cond { code, k, t, f } if wide[i] => {
                out.push(BpfInsn::jump(code, k, 0, 1));
                out.push(ja(pos[i] + 1, pos[resolve(t)]));
                out.push(ja(pos[i] + 2, pos[resolve(f)]));
            }
            Item::Cond { code, k, t, f } => {
                let off = |d: Dest| (pos[resolve(d)] - pos[i] - 1) as u8;
                out.push(BpfInsn::jump(code, k, off(t), off(f)));
            }
        }
    }
    BpfProgram(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpf::{interp, parse};
    use sift_ir::{Cache, Interpreter};

    #[test]
    fn table_1_expansion() {
        let p = parse("ldb [0]\nst M[0]\nret_match_imm #1, #ALL\nkey #9\n").unwrap();
        let classic = to_classic(&p, 1500).unwrap();
        let text = sift_bpf::disasm::disassemble(&classic.to_program());
        assert!(text.contains("ld       M[0]"), "{text}");
        assert!(text.contains("jeq      #0x9"), "{text}");
        assert!(text.contains("ret      #1500"), "{text}");
    }

    #[test]
    fn long_jumps_get_trampolines() {
        // A jump over fourteen 15-key matches, whose expansions push its target past 255.
        let mut text = String::from("ldb [0]\njeq #1, far, near\nnear: ldb [1]\n");
        for j in 0..15 {
            text.push_str(&format!("st M[{j}]\n"));
        }
        for i in 0..14 {
            text.push_str(&format!("jmp_match_imm #15, n{i}, n{i}\n"));
            for j in 0..15 {
                text.push_str(&format!("key #{j}\n"));
            }
            text.push_str(&format!("n{i}: tax\n"));
        }
        text.push_str("ret #5\nfar: ret #7\n");
        let p = parse(&text).unwrap_or_else(|e| panic!("{}", e.render(&text)));
        let f = lift(&p).unwrap();
        let ir = Interpreter::new(f).unwrap();
        for pkt in [[1u8, 0], [2, 0], [2, 5]] {
            let want = interp::run(&p, &pkt, 2);
            assert_eq!(ir.run(&mut Cache::new(), &pkt, 2), want, "{pkt:?}");
        }
    }

    #[test]
    fn stateful_programs_are_refused() {
        let text = "ld [0]\nst M[0]\nret_match_data #1, #ALL\npostpone #10\n";
        let p = parse(text).unwrap();
        let e = lift(&p).unwrap_err();
        assert!(matches!(e.kind, LiftErrorKind::Stateful { .. }));
        assert!(e.render(text).starts_with("3:1:"), "{}", e.render(text));
    }
}
