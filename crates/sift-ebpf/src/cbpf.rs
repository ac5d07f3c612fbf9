//! Classic BPF to eBPF, the way the kernel converts socket filters (`bpf_convert_filter` in
//! net/core/filter.c), for running libpcap's programs under the same JIT as sift's.
//!
//! `BPF_PROG_LOAD` does not take classic BPF: the kernel converts classic programs internally,
//! when they are attached to sockets, without the verifier, using the socket buffer's fields
//! directly. This translation reproduces that conversion with what a verified program may do:
//!
//! * registers as the kernel assigns them: `A` in `r0`, `X` in `r7`, the context in `r6`, the
//!   scratch words `M[0..16]` in the stack below the frame pointer; `A` and `X` start at 0
//!   (set with moves: the verifier does not let `xor` read them before they are written);
//! * absolute loads: the kernel's converter reads the linear part of the packet inline and
//!   calls a helper only when the bytes are not there. In a tc program ([`ProgramType::SchedCls`])
//!   this is direct packet access with a bounds check, falling back to `LD_ABS`; in a socket
//!   filter (no direct access) it is `LD_ABS`, whose rewrite always calls the helper;
//! * indexed loads: a helper call in the kernel's conversion, `LD_IND` here (the same helper,
//!   without the cached data pointer and head length as arguments);
//! * division or modulo by `X = 0` returns 0; `RET A` is `exit`; constants with the top bit set
//!   go through a register before 64-bit compares; a conditional jump whose true branch is the
//!   next instruction is emitted with the negated condition.
//!
//! The result differs from the kernel's own program in the helpers' arguments and, for socket
//! filters, in the absolute loads; benchmarks should say which they ran.

use std::fmt;

use crate::assembler::{Assembler, Label};
use crate::codegen::CodegenError;
use crate::insn::{AluOp, Insn, JmpOp, Reg, Size, Src};
use crate::moves::mov32_imm;
use crate::program::{Program, ProgramType};

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassicInsn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// Why a classic program could not be translated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CbpfError {
    /// An opcode the kernel does not accept (or that needs a packet-reading context this
    /// program type lacks), at instruction `at`.
    Unsupported {
        at: usize,
        code: u16,
    },
    /// A jump leaves the program, or a scratch index is out of range, at instruction `at`.
    Invalid {
        at: usize,
    },
    /// XDP has no `LD_ABS`/`LD_IND`.
    ProgramType(ProgramType),
    Codegen(CodegenError),
}

impl fmt::Display for CbpfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CbpfError::Unsupported { at, code } => {
                write!(f, "instruction {at}: unsupported opcode {code:#06x}")
            }
            CbpfError::Invalid { at } => write!(f, "instruction {at}: invalid jump or index"),
            CbpfError::ProgramType(t) => {
                write!(f, "classic BPF cannot be translated to a {t} program")
            }
            CbpfError::Codegen(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CbpfError {}

const A: Reg = Reg::R0;
const X: Reg = Reg::R7;
const CTX: Reg = Reg::R6;
const DATA: Reg = Reg::R8;
const DATA_END: Reg = Reg::R9;
const TMP: Reg = Reg::R2;
const MEMWORDS: u32 = 16;

/// The kernel's largest trackable packet offset (see `codegen/packet.rs`).
const MAX_DIRECT: u32 = 0xffff;

fn size_of(code: u16) -> Option<Size> {
    match code & 0x18 {
        0x00 => Some(Size::W),
        0x08 => Some(Size::H),
        0x10 => Some(Size::B),
        _ => None,
    }
}

fn mem_offset(k: u32, at: usize) -> Result<i16, CbpfError> {
    if k >= MEMWORDS {
        return Err(CbpfError::Invalid { at });
    }
    Ok(-4 * (MEMWORDS - k) as i16)
}

fn alu_op(code: u16) -> Option<AluOp> {
    Some(match code & 0xf0 {
        0x00 => AluOp::Add,
        0x10 => AluOp::Sub,
        0x20 => AluOp::Mul,
        0x30 => AluOp::Div,
        0x40 => AluOp::Or,
        0x50 => AluOp::And,
        0x60 => AluOp::Lsh,
        0x70 => AluOp::Rsh,
        0x90 => AluOp::Mod,
        0xa0 => AluOp::Xor,
        _ => return None,
    })
}

fn mov64(dst: Reg, src: Reg) -> Insn {
    Insn::Alu {
        wide: true,
        op: AluOp::Mov,
        dst,
        src: Src::Reg(src),
    }
}

/// Translates a classic program to a socket filter or tc program.
pub fn translate(program: &[ClassicInsn], program_type: ProgramType) -> Result<Program, CbpfError> {
    if program_type == ProgramType::Xdp {
        return Err(CbpfError::ProgramType(program_type));
    }
    let direct = program_type == ProgramType::SchedCls;
    let mut asm = Assembler::default();
    let labels: Vec<Label> = (0..program.len()).map(|_| asm.new_label()).collect();
    let target = |at: usize, delta: u32| -> Result<Label, CbpfError> {
        let to = at as u64 + 1 + u64::from(delta);
        labels
            .get(to as usize)
            .copied()
            .ok_or(CbpfError::Invalid { at })
    };
    let zero = |r: Reg| Insn::Alu {
        wide: false,
        op: AluOp::Xor,
        dst: r,
        src: Src::Reg(r),
    };
    // The kernel's converter clears A and X with `xor`; the verifier wants them written first.
    asm.emit(mov32_imm(A, 0));
    asm.emit(mov32_imm(X, 0));
    asm.emit(mov64(CTX, Reg::R1));
    if direct {
        asm.emit(Insn::Load {
            size: Size::W,
            dst: DATA,
            base: CTX,
            off: 76,
        });
        asm.emit(Insn::Load {
            size: Size::W,
            dst: DATA_END,
            base: CTX,
            off: 80,
        });
    }
    for (at, insn) in program.iter().enumerate() {
        asm.place(labels[at]);
        let code = insn.code;
        let k = insn.k;
        let unsupported = CbpfError::Unsupported { at, code };
        match code & 0x07 {
            // BPF_LD / BPF_LDX
            0x00 | 0x01 => {
                let dst = if code & 0x07 == 0 { A } else { X };
                match (code & 0xe0, code & 0x07) {
                    (0x00, _) => asm.emit(mov32_imm(dst, k)),
                    (0x60, _) => asm.emit(Insn::Load {
                        size: Size::W,
                        dst,
                        base: Reg::FP,
                        off: mem_offset(k, at)?,
                    }),
                    (0x80, _) => asm.emit(Insn::Load {
                        size: Size::W,
                        dst,
                        base: CTX,
                        off: 0,
                    }),
                    (0x20, 0) => {
                        let size = size_of(code).ok_or(unsupported)?;
                        load_abs(&mut asm, size, k, direct);
                    }
                    (0x40, 0) => {
                        let size = size_of(code).ok_or(unsupported)?;
                        asm.emit(Insn::LoadInd {
                            size,
                            src: X,
                            imm: k as i32,
                        });
                    }
                    (0xa0, 1) if code & 0x18 == 0x10 => {
                        // ldxb 4*([k]&0xf): A is saved in X, which is overwritten anyway.
                        asm.emit(mov64(X, A));
                        load_abs(&mut asm, Size::B, k, direct);
                        asm.emit(Insn::Alu {
                            wide: false,
                            op: AluOp::And,
                            dst: A,
                            src: Src::Imm(0xf),
                        });
                        asm.emit(Insn::Alu {
                            wide: false,
                            op: AluOp::Lsh,
                            dst: A,
                            src: Src::Imm(2),
                        });
                        asm.emit(mov64(TMP, X));
                        asm.emit(mov64(X, A));
                        asm.emit(mov64(A, TMP));
                    }
                    _ => return Err(unsupported),
                }
            }
            // BPF_ST / BPF_STX
            0x02 | 0x03 => asm.emit(Insn::Store {
                size: Size::W,
                base: Reg::FP,
                off: mem_offset(k, at)?,
                src: if code & 0x07 == 0x02 { A } else { X },
            }),
            // BPF_ALU
            0x04 => {
                if code & 0xf0 == 0x80 {
                    asm.emit(Insn::Neg32 { dst: A });
                    continue;
                }
                let op = alu_op(code).ok_or(unsupported)?;
                let src = if code & 0x08 != 0 {
                    if matches!(op, AluOp::Div | AluOp::Mod) {
                        // Division by X = 0 ends the program with 0.
                        let ok = asm.new_label();
                        asm.jmp(JmpOp::Ne, X, Src::Imm(0), ok);
                        asm.emit(zero(A));
                        asm.emit(Insn::Exit);
                        asm.place(ok);
                    }
                    Src::Reg(X)
                } else {
                    if k == 0 && matches!(op, AluOp::Div | AluOp::Mod)
                        || k >= 32 && matches!(op, AluOp::Lsh | AluOp::Rsh)
                    {
                        return Err(CbpfError::Invalid { at });
                    }
                    Src::Imm(k as i32)
                };
                asm.emit(Insn::Alu {
                    wide: false,
                    op,
                    dst: A,
                    src,
                });
            }
            // BPF_JMP
            0x05 => {
                let op = match code & 0xf0 {
                    0x00 => {
                        asm.ja(target(at, k)?);
                        continue;
                    }
                    0x10 => JmpOp::Eq,
                    0x20 => JmpOp::Gt,
                    0x30 => JmpOp::Ge,
                    0x40 => JmpOp::Set,
                    _ => return Err(unsupported),
                };
                let src = if code & 0x08 != 0 {
                    Src::Reg(X)
                } else if (k as i32) < 0 {
                    asm.emit(mov32_imm(TMP, k));
                    Src::Reg(TMP)
                } else {
                    Src::Imm(k as i32)
                };
                let t = target(at, u32::from(insn.jt))?;
                let f = target(at, u32::from(insn.jf))?;
                match (insn.jt, insn.jf, op.negated()) {
                    (_, 0, _) => asm.jmp(op, A, src, t),
                    (0, _, Some(neg)) => asm.jmp(neg, A, src, f),
                    _ => {
                        asm.jmp(op, A, src, t);
                        asm.ja(f);
                    }
                }
            }
            // BPF_RET
            0x06 => {
                match code & 0x18 {
                    0x00 => asm.emit(mov32_imm(A, k)),
                    0x10 => {}
                    0x08 => asm.emit(mov64(A, X)),
                    _ => return Err(unsupported),
                }
                asm.emit(Insn::Exit);
            }
            // BPF_MISC
            _ => match code & 0xf8 {
                0x00 => asm.emit(mov64(X, A)),
                0x80 => asm.emit(mov64(A, X)),
                _ => return Err(unsupported),
            },
        }
    }
    Ok(Program {
        program_type,
        insns: asm.finish().map_err(CbpfError::Codegen)?,
    })
}

/// `A = P[k:size]`: inline from the linear part when allowed, else (or when out of it) through
/// `LD_ABS`, which ends the program with 0 if the bytes do not exist.
fn load_abs(asm: &mut Assembler, size: Size, k: u32, direct: bool) {
    let end = u64::from(k) + u64::from(size.bytes());
    if !direct || end > u64::from(MAX_DIRECT) {
        asm.emit(Insn::LoadAbs {
            size,
            imm: k as i32,
        });
        return;
    }
    let slow = asm.new_label();
    let done = asm.new_label();
    asm.emit(mov64(TMP, DATA));
    asm.emit(Insn::Alu {
        wide: true,
        op: AluOp::Add,
        dst: TMP,
        src: Src::Imm(end as i32),
    });
    asm.jmp(JmpOp::Gt, TMP, Src::Reg(DATA_END), slow);
    let (base, off) = match i16::try_from(k) {
        Ok(off) => (DATA, off),
        Err(_) => {
            asm.emit(mov64(TMP, DATA));
            asm.emit(Insn::Alu {
                wide: true,
                op: AluOp::Add,
                dst: TMP,
                src: Src::Imm(k as i32),
            });
            (TMP, 0)
        }
    };
    asm.emit(Insn::Load {
        size,
        dst: A,
        base,
        off,
    });
    match size {
        Size::B => {}
        Size::H => asm.emit(Insn::ToBe { dst: A, bits: 16 }),
        Size::W => asm.emit(Insn::ToBe { dst: A, bits: 32 }),
    }
    asm.ja(done);
    asm.place(slow);
    asm.emit(Insn::LoadAbs {
        size,
        imm: k as i32,
    });
    asm.place(done);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(code: u16, jt: u8, jf: u8, k: u32) -> ClassicInsn {
        ClassicInsn { code, jt, jf, k }
    }

    #[test]
    fn translates_ip_filter() {
        // tcpdump -d ip: ldh [12]; jeq #0x800 jt 2 jf 3; ret #262144; ret #0
        let p = [
            insn(0x28, 0, 0, 12),
            insn(0x15, 0, 1, 0x800),
            insn(0x06, 0, 0, 262144),
            insn(0x06, 0, 0, 0),
        ];
        let socket = translate(&p, ProgramType::SocketFilter).unwrap();
        let text: Vec<String> = socket.insns.iter().map(crate::asm).collect();
        assert_eq!(
            text,
            [
                "w0 = 0",
                "w7 = 0",
                "r6 = r1",
                "r0 = *(u16 *)skb[12]",
                "if r0 != 2048 goto +2",
                "w0 = 262144",
                "exit",
                "w0 = 0",
                "exit"
            ]
        );
        assert!(translate(&p, ProgramType::SchedCls).is_ok());
        assert!(translate(&p, ProgramType::Xdp).is_err());
    }

    #[test]
    fn rejects_bad_programs() {
        let jump_out = [insn(0x05, 0, 0, 5)];
        assert_eq!(
            translate(&jump_out, ProgramType::SocketFilter),
            Err(CbpfError::Invalid { at: 0 })
        );
        let bad_mem = [insn(0x60, 0, 0, 16)];
        assert!(translate(&bad_mem, ProgramType::SocketFilter).is_err());
        let div0 = [insn(0x34, 0, 0, 0)];
        assert!(translate(&div0, ProgramType::SocketFilter).is_err());
    }
}
