//! The classic BPF interpreter: libpcap's `bpf_filter`, instruction for instruction, over a
//! [`ValidProgram`].
//!
//! Semantics (those of `bpf_filter` in libpcap 1.10):
//!
//! * `A`, `X` and the 16 scratch words start at 0 (libpcap leaves the scratch words
//!   uninitialised; a program that reads one before storing it gets 0 here);
//! * a packet load that does not lie entirely within the captured bytes ends the run with 0;
//! * `div x` / `mod x` with `X == 0` end the run with 0;
//! * `lsh x` / `rsh x` with `X >= 32` give 0; `lsh #k` / `rsh #k` shift by `k % 32` (what C's
//!   `A <<= k` does on x86-64 and AArch64; only the libpcap dialect admits `k >= 32`);
//! * `ld len` / `ldx len` read the wire length, not the captured length;
//! * ancillary loads (`SKF_AD_OFF + n`) are ordinary out-of-bounds loads, as in user space.
//!
//! Validation guarantees that every jump is in range and forward, except the backward `ja`s
//! of `protochain` loops ([`crate::protochain`]), so a run never indexes outside the program.
//!
//! # Loops and the step budget
//!
//! libpcap's `protochain` loop can circle forever on a crafted chain of AH headers (`bpf_filter`
//! then never returns). Here a run may take at most [`loop_budget`] backward jumps: the sum over
//! the program's loops of [`sift_ir::protochain::step_limit`] for the captured length (5 per
//! captured byte for an IPv6 walk, 1 for IPv4). A walk that ends takes at most its limit in
//! steps (one backward jump each), and each loop runs at most once per packet (control only
//! moves forward outside loops), so a run that exceeds the budget is one that would never end:
//! [`try_run`] reports it as [`Endless`], [`run`] rejects the packet (0), which is the IR's
//! verdict. Between two backward jumps control only moves forward, so a run executes at most
//! `(budget + 1) * len` instructions.

use std::fmt;

use crate::insn::{AluOp, Op, Size, Src};
use crate::validate::ValidProgram;

/// A run that took more backward jumps than [`loop_budget`] allows: a `protochain` walk that
/// would never end (libpcap's `bpf_filter` loops forever on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endless {
    /// The budget that was exceeded.
    pub budget: u64,
}

impl fmt::Display for Endless {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a protochain loop took more than {} steps: the header chain is a cycle",
            self.budget
        )
    }
}

impl std::error::Error for Endless {}

/// How many backward jumps a run over `captured` bytes may take (see the module docs).
pub fn loop_budget(prog: &ValidProgram, captured: usize) -> u64 {
    prog.loops().iter().map(|l| l.step_limit(captured)).sum()
}

/// Reads `size` bytes big-endian at `offset + index` (without wrapping), or `None` when any of
/// them is outside `pkt`: the IR's load.
pub fn load(pkt: &[u8], index: u32, offset: u32, size: Size) -> Option<u32> {
    sift_ir::interp::load(pkt, index, offset, size.load_size())
}

/// Applies an ALU operation as `bpf_filter` does; `None` for division by zero.
pub fn alu(op: AluOp, src: Src, a: u32, b: u32) -> Option<u32> {
    Some(match op {
        AluOp::Add => a.wrapping_add(b),
        AluOp::Sub => a.wrapping_sub(b),
        AluOp::Mul => a.wrapping_mul(b),
        AluOp::Div => a.checked_div(b)?,
        AluOp::Mod => a.checked_rem(b)?,
        AluOp::And => a & b,
        AluOp::Or => a | b,
        AluOp::Xor => a ^ b,
        AluOp::Lsh => match src {
            Src::X => a.checked_shl(b).unwrap_or(0),
            Src::K => a.wrapping_shl(b),
        },
        AluOp::Rsh => match src {
            Src::X => a.checked_shr(b).unwrap_or(0),
            Src::K => a.wrapping_shr(b),
        },
    })
}

/// Runs `prog` on a packet: `pkt` holds the captured bytes, `wire_len` the length on the wire.
/// Returns the number of bytes to accept (0 rejects, also when a loop would never end).
pub fn run(prog: &ValidProgram, pkt: &[u8], wire_len: u32) -> u32 {
    try_run(prog, pkt, wire_len).unwrap_or(0)
}

/// Like [`run`], but tells an endless `protochain` walk (where `bpf_filter` would never
/// return) from a rejection.
pub fn try_run(prog: &ValidProgram, pkt: &[u8], wire_len: u32) -> Result<u32, Endless> {
    let mut budget = loop_budget(prog, pkt.len());
    let insns = prog.insns();
    let ops = prog.ops();
    let mut a: u32 = 0;
    let mut x: u32 = 0;
    let mut mem = [0u32; 16];
    let mut pc = 0usize;
    // Validation makes every index below in range; `get` keeps a broken invariant from turning
    // into a panic (it would reject the packet instead).
    while let (Some(&insn), Some(&op)) = (insns.get(pc), ops.get(pc)) {
        let k = insn.k;
        pc += 1;
        match op {
            Op::RetK => return Ok(k),
            Op::RetA => return Ok(a),
            Op::LdAbs(size) => match load(pkt, 0, k, size) {
                Some(v) => a = v,
                None => return Ok(0),
            },
            Op::LdInd(size) => match load(pkt, x, k, size) {
                Some(v) => a = v,
                None => return Ok(0),
            },
            Op::LdLen => a = wire_len,
            Op::LdxLen => x = wire_len,
            Op::LdImm => a = k,
            Op::LdxImm => x = k,
            Op::LdMem => a = mem[(k & 15) as usize],
            Op::LdxMem => x = mem[(k & 15) as usize],
            Op::St => mem[(k & 15) as usize] = a,
            Op::Stx => mem[(k & 15) as usize] = x,
            Op::LdxMsh => match load(pkt, 0, k, Size::Byte) {
                Some(v) => x = (v & 0xf) << 2,
                None => return Ok(0),
            },
            Op::Alu(op, src) => {
                let b = match src {
                    Src::K => k,
                    Src::X => x,
                };
                match alu(op, src, a, b) {
                    Some(v) => a = v,
                    None => return Ok(0),
                }
            }
            Op::Neg => a = a.wrapping_neg(),
            // `bpf_filter` takes the offset as signed; validation allows negative ones only in
            // loops.
            Op::Ja if (k as i32) < 0 => {
                if budget == 0 {
                    return Err(Endless {
                        budget: loop_budget(prog, pkt.len()),
                    });
                }
                budget -= 1;
                pc = pc.wrapping_sub(k.wrapping_neg() as usize);
            }
            Op::Ja => pc += k as usize,
            Op::Jmp(cond, src) => {
                let b = match src {
                    Src::K => k,
                    Src::X => x,
                };
                pc += usize::from(if cond.eval(a, b) { insn.jt } else { insn.jf });
            }
            Op::Tax => x = a,
            Op::Txa => a = x,
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::assemble;
    use crate::validate::{validate, Dialect};

    fn run_text(text: &str, pkt: &[u8], wire_len: u32) -> u32 {
        let p = validate(&assemble(text).unwrap(), Dialect::Libpcap).unwrap();
        run(&p, pkt, wire_len)
    }

    #[test]
    fn loads_and_bounds() {
        let pkt = [0x45, 0, 0, 1, 2, 3];
        assert_eq!(run_text("ld [0]\nret a\n", &pkt, 100), 0x4500_0001);
        assert_eq!(run_text("ld [3]\nret a\n", &pkt, 100), 0);
        assert_eq!(run_text("ldh [4]\nret a\n", &pkt, 100), 0x0203);
        assert_eq!(run_text("ldb [6]\nret #1\n", &pkt, 100), 0);
        assert_eq!(run_text("ldxb 4*([0]&0xf)\ntxa\nret a\n", &pkt, 100), 20);
        assert_eq!(run_text("ldx #5\nldb [x + 0]\nret a\n", &pkt, 100), 3);
        assert_eq!(
            run_text("ldx #0xffffffff\nldb [x + 1]\nret #1\n", &pkt, 100),
            0
        );
        assert_eq!(run_text("ld len\nret a\n", &pkt, 100), 100);
        assert_eq!(run_text("ldx len\ntxa\nret a\n", &pkt, 77), 77);
    }

    #[test]
    fn arithmetic_edge_cases() {
        assert_eq!(run_text("ld #7\nldx #0\ndiv x\nret #1\n", &[], 0), 0);
        assert_eq!(run_text("ld #7\nldx #0\nmod x\nret #1\n", &[], 0), 0);
        assert_eq!(run_text("ld #1\nldx #32\nlsh x\nret a\n", &[], 0), 0);
        assert_eq!(run_text("ld #1\nlsh #33\nret a\n", &[], 0), 2);
        assert_eq!(run_text("ld #1\nneg\nret a\n", &[], 0), u32::MAX);
        assert_eq!(run_text("ld M[3]\nret a\n", &[], 0), 0);
        assert_eq!(
            run_text("ld #9\nst M[3]\nldx M[3]\ntxa\nret a\n", &[], 0),
            9
        );
    }

    #[test]
    fn endless_protochain_walks_are_rejected() {
        // IPv4 (raw IP) with AH at 20 whose length 3 sends the walk back to (3 + 2) * 4 = 20.
        let mut code = vec![
            crate::Op::LdAbs(Size::Byte).with_k(9),
            crate::Op::LdxMsh.with_k(0),
        ];
        code.extend(crate::protochain::loop_code(sift_ir::Chain::Ip, 0, 6, 0));
        code.push(crate::Op::RetA.with_k(0));
        let p = validate(&crate::Program(code), Dialect::Libpcap).unwrap();
        let mut pkt = vec![0u8; 40];
        pkt[0] = 0x45;
        pkt[9] = 51;
        pkt[20] = 51;
        pkt[21] = 3;
        assert_eq!(loop_budget(&p, 40), 40);
        assert_eq!(try_run(&p, &pkt, 40), Err(Endless { budget: 40 }));
        assert_eq!(run(&p, &pkt, 40), 0);
        // Length 4: to 24, where TCP is announced.
        pkt[21] = 4;
        pkt[24] = 6;
        assert_eq!(try_run(&p, &pkt, 40), Ok(6));
        pkt[24] = 17;
        assert_eq!(run(&p, &pkt, 40), 17);
        assert_eq!(run(&p, &pkt[..24], 40), 0);
    }

    #[test]
    fn jumps() {
        let text = "ld #5\njgt #4, yes, no\nyes: ret #1\nno: ret #2\n";
        assert_eq!(run_text(text, &[], 0), 1);
        let text = "ld #5\njset #2, yes\nja no\nyes: ret #1\nno: ret #2\n";
        assert_eq!(run_text(text, &[], 0), 2);
    }
}
