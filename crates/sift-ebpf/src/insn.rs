//! eBPF instructions: the subset sift emits, their 8-byte encoding and decoding.
//!
//! The encoding is the kernel's `struct bpf_insn` on a little-endian host: opcode byte, then
//! `dst_reg` in the low nibble and `src_reg` in the high nibble of the second byte, a signed
//! 16-bit offset and a signed 32-bit immediate. Only little-endian targets are supported (the
//! register nibbles swap on big-endian ones).

use std::fmt;

/// An eBPF register, `r0` to `r10` (`r10` is the read-only frame pointer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reg(pub u8);

impl Reg {
    pub const R0: Reg = Reg(0);
    pub const R1: Reg = Reg(1);
    pub const R2: Reg = Reg(2);
    pub const R3: Reg = Reg(3);
    pub const R4: Reg = Reg(4);
    pub const R5: Reg = Reg(5);
    pub const R6: Reg = Reg(6);
    pub const R7: Reg = Reg(7);
    pub const R8: Reg = Reg(8);
    pub const R9: Reg = Reg(9);
    /// The frame pointer: the stack is the 512 bytes below it.
    pub const FP: Reg = Reg(10);
}

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// Arithmetic operations (`BPF_ALU` / `BPF_ALU64` classes). Division and modulo are unsigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AluOp {
    Add,
    Sub,
    Mul,
    Div,
    Or,
    And,
    Lsh,
    Rsh,
    Mod,
    Xor,
    Mov,
}

impl AluOp {
    const ALL: [AluOp; 11] = [
        AluOp::Add,
        AluOp::Sub,
        AluOp::Mul,
        AluOp::Div,
        AluOp::Or,
        AluOp::And,
        AluOp::Lsh,
        AluOp::Rsh,
        AluOp::Mod,
        AluOp::Xor,
        AluOp::Mov,
    ];

    fn code(self) -> u8 {
        match self {
            AluOp::Add => 0x00,
            AluOp::Sub => 0x10,
            AluOp::Mul => 0x20,
            AluOp::Div => 0x30,
            AluOp::Or => 0x40,
            AluOp::And => 0x50,
            AluOp::Lsh => 0x60,
            AluOp::Rsh => 0x70,
            AluOp::Mod => 0x90,
            AluOp::Xor => 0xa0,
            AluOp::Mov => 0xb0,
        }
    }

    /// The operator in LLVM's BPF assembly (`r1 += r2`).
    pub fn symbol(self) -> &'static str {
        match self {
            AluOp::Add => "+=",
            AluOp::Sub => "-=",
            AluOp::Mul => "*=",
            AluOp::Div => "/=",
            AluOp::Or => "|=",
            AluOp::And => "&=",
            AluOp::Lsh => "<<=",
            AluOp::Rsh => ">>=",
            AluOp::Mod => "%=",
            AluOp::Xor => "^=",
            AluOp::Mov => "=",
        }
    }
}

/// Conditions of conditional jumps (`BPF_JMP` class, 64-bit compares).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JmpOp {
    Eq,
    Gt,
    Ge,
    Set,
    Ne,
    Lt,
    Le,
    /// Signed `>=` (used only by the classic BPF translation's load checks).
    Sge,
}

impl JmpOp {
    const ALL: [JmpOp; 8] = [
        JmpOp::Eq,
        JmpOp::Gt,
        JmpOp::Ge,
        JmpOp::Set,
        JmpOp::Ne,
        JmpOp::Lt,
        JmpOp::Le,
        JmpOp::Sge,
    ];

    fn code(self) -> u8 {
        match self {
            JmpOp::Eq => 0x10,
            JmpOp::Gt => 0x20,
            JmpOp::Ge => 0x30,
            JmpOp::Set => 0x40,
            JmpOp::Ne => 0x50,
            JmpOp::Sge => 0x70,
            JmpOp::Lt => 0xa0,
            JmpOp::Le => 0xb0,
        }
    }

    /// The comparison in LLVM's BPF assembly (`if r1 > r2 goto ...`).
    pub fn symbol(self) -> &'static str {
        match self {
            JmpOp::Eq => "==",
            JmpOp::Gt => ">",
            JmpOp::Ge => ">=",
            JmpOp::Set => "&",
            JmpOp::Ne => "!=",
            JmpOp::Lt => "<",
            JmpOp::Le => "<=",
            JmpOp::Sge => "s>=",
        }
    }

    /// The condition that holds exactly when `self` does not (`Set` and `Sge` have none among
    /// these and return `None`).
    pub fn negated(self) -> Option<JmpOp> {
        Some(match self {
            JmpOp::Eq => JmpOp::Ne,
            JmpOp::Ne => JmpOp::Eq,
            JmpOp::Gt => JmpOp::Le,
            JmpOp::Le => JmpOp::Gt,
            JmpOp::Ge => JmpOp::Lt,
            JmpOp::Lt => JmpOp::Ge,
            JmpOp::Set | JmpOp::Sge => return None,
        })
    }
}

/// Access width of memory and packet loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    B,
    H,
    W,
}

impl Size {
    const ALL: [Size; 3] = [Size::B, Size::H, Size::W];

    fn code(self) -> u8 {
        match self {
            Size::W => 0x00,
            Size::H => 0x08,
            Size::B => 0x10,
        }
    }

    pub fn bytes(self) -> u32 {
        match self {
            Size::B => 1,
            Size::H => 2,
            Size::W => 4,
        }
    }

    /// The C type LLVM prints in memory operands.
    pub fn c_type(self) -> &'static str {
        match self {
            Size::B => "u8",
            Size::H => "u16",
            Size::W => "u32",
        }
    }
}

/// The second operand of ALU and jump instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Src {
    Reg(Reg),
    /// Sign-extended to 64 bits by 64-bit operations; used as is by 32-bit ones.
    Imm(i32),
}

/// One eBPF instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Insn {
    /// `dst op= src`; `wide` selects 64-bit (`BPF_ALU64`) over 32-bit (`BPF_ALU`, which
    /// zero-extends its result into the upper half).
    Alu {
        wide: bool,
        op: AluOp,
        dst: Reg,
        src: Src,
    },
    /// 32-bit two's complement negation (zero-extends).
    Neg32 {
        dst: Reg,
    },
    /// Host to big-endian conversion of the low `bits` (16 or 32) bits, zero-extending.
    ToBe {
        dst: Reg,
        bits: u8,
    },
    /// `dst = *(size *)(base + off)`, zero-extending.
    Load {
        size: Size,
        dst: Reg,
        base: Reg,
        off: i16,
    },
    /// `*(size *)(base + off) = src`.
    Store {
        size: Size,
        base: Reg,
        off: i16,
        src: Reg,
    },
    /// Legacy packet load `r0 = ntoh(*(size *)(skb->data + imm))`; aborts the program with
    /// return value 0 when out of bounds. Needs the context in `r6`; clobbers `r1`-`r5`.
    LoadAbs {
        size: Size,
        imm: i32,
    },
    /// As [`Insn::LoadAbs`] at `src + imm`.
    LoadInd {
        size: Size,
        src: Reg,
        imm: i32,
    },
    /// Unconditional jump by `off` instructions (relative to the next one).
    Ja {
        off: i16,
    },
    /// `if dst op src goto +off` (64-bit comparison).
    Jmp {
        op: JmpOp,
        dst: Reg,
        src: Src,
        off: i16,
    },
    /// Call of a kernel helper by number.
    Call {
        helper: i32,
    },
    Exit,
}

const CLASS_LD: u8 = 0x00;
const CLASS_LDX: u8 = 0x01;
const CLASS_STX: u8 = 0x03;
const CLASS_ALU: u8 = 0x04;
const CLASS_JMP: u8 = 0x05;
const CLASS_ALU64: u8 = 0x07;
const MODE_ABS: u8 = 0x20;
const MODE_IND: u8 = 0x40;
const MODE_MEM: u8 = 0x60;
const SRC_X: u8 = 0x08;
const OP_NEG: u8 = 0x80;
const OP_END: u8 = 0xd0;
const OP_CALL: u8 = 0x80;
const OP_EXIT: u8 = 0x90;

impl Insn {
    /// Whether the instruction transfers control somewhere other than the next instruction
    /// (with its relative offset for jumps).
    pub fn jump_offset(&self) -> Option<i16> {
        match *self {
            Insn::Ja { off } | Insn::Jmp { off, .. } => Some(off),
            _ => None,
        }
    }

    /// The 8 bytes of the instruction.
    pub fn encode(&self) -> [u8; 8] {
        let (code, dst, src, off, imm): (u8, u8, u8, i16, i32) = match *self {
            Insn::Alu { wide, op, dst, src } => {
                let class = if wide { CLASS_ALU64 } else { CLASS_ALU };
                match src {
                    Src::Reg(s) => (class | op.code() | SRC_X, dst.0, s.0, 0, 0),
                    Src::Imm(k) => (class | op.code(), dst.0, 0, 0, k),
                }
            }
            Insn::Neg32 { dst } => (CLASS_ALU | OP_NEG, dst.0, 0, 0, 0),
            Insn::ToBe { dst, bits } => (CLASS_ALU | OP_END | SRC_X, dst.0, 0, 0, i32::from(bits)),
            Insn::Load {
                size,
                dst,
                base,
                off,
            } => (CLASS_LDX | MODE_MEM | size.code(), dst.0, base.0, off, 0),
            Insn::Store {
                size,
                base,
                off,
                src,
            } => (CLASS_STX | MODE_MEM | size.code(), base.0, src.0, off, 0),
            Insn::LoadAbs { size, imm } => (CLASS_LD | MODE_ABS | size.code(), 0, 0, 0, imm),
            Insn::LoadInd { size, src, imm } => {
                (CLASS_LD | MODE_IND | size.code(), 0, src.0, 0, imm)
            }
            Insn::Ja { off } => (CLASS_JMP, 0, 0, off, 0),
            Insn::Jmp { op, dst, src, off } => match src {
                Src::Reg(s) => (CLASS_JMP | op.code() | SRC_X, dst.0, s.0, off, 0),
                Src::Imm(k) => (CLASS_JMP | op.code(), dst.0, 0, off, k),
            },
            Insn::Call { helper } => (CLASS_JMP | OP_CALL, 0, 0, 0, helper),
            Insn::Exit => (CLASS_JMP | OP_EXIT, 0, 0, 0, 0),
        };
        let mut out = [0u8; 8];
        out[0] = code;
        out[1] = (dst & 0x0f) | (src << 4);
        out[2..4].copy_from_slice(&off.to_le_bytes());
        out[4..8].copy_from_slice(&imm.to_le_bytes());
        out
    }

    /// Decodes one instruction of the subset this crate emits (`None` for anything else).
    pub fn decode(bytes: [u8; 8]) -> Option<Insn> {
        let code = bytes[0];
        let dst = Reg(bytes[1] & 0x0f);
        let src = Reg(bytes[1] >> 4);
        let off = i16::from_le_bytes([bytes[2], bytes[3]]);
        let imm = i32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        let class = code & 0x07;
        let operand = if code & SRC_X != 0 {
            Src::Reg(src)
        } else {
            Src::Imm(imm)
        };
        let size = || Size::ALL.into_iter().find(|s| s.code() == code & 0x18);
        let insn = match class {
            CLASS_ALU | CLASS_ALU64 => {
                let wide = class == CLASS_ALU64;
                match code & 0xf0 {
                    OP_NEG if !wide => Insn::Neg32 { dst },
                    OP_END if !wide && code & SRC_X != 0 => Insn::ToBe {
                        dst,
                        bits: u8::try_from(imm).ok()?,
                    },
                    op => Insn::Alu {
                        wide,
                        op: AluOp::ALL.into_iter().find(|o| o.code() == op)?,
                        dst,
                        src: operand,
                    },
                }
            }
            CLASS_LDX if code & 0xe0 == MODE_MEM => Insn::Load {
                size: size()?,
                dst,
                base: src,
                off,
            },
            CLASS_STX if code & 0xe0 == MODE_MEM => Insn::Store {
                size: size()?,
                base: dst,
                off,
                src,
            },
            CLASS_LD if code & 0xe0 == MODE_ABS => Insn::LoadAbs { size: size()?, imm },
            CLASS_LD if code & 0xe0 == MODE_IND => Insn::LoadInd {
                size: size()?,
                src,
                imm,
            },
            CLASS_JMP => match code & 0xf0 {
                0x00 => Insn::Ja { off },
                OP_CALL => Insn::Call { helper: imm },
                OP_EXIT => Insn::Exit,
                op => Insn::Jmp {
                    op: JmpOp::ALL.into_iter().find(|o| o.code() == op)?,
                    dst,
                    src: operand,
                    off,
                },
            },
            _ => return None,
        };
        Some(insn)
    }
}

/// Kernel helper numbers (`enum bpf_func_id`) this crate calls.
pub mod helper {
    /// `long bpf_skb_load_bytes(const void *skb, u32 offset, void *to, u32 len)`.
    pub const SKB_LOAD_BYTES: i32 = 26;
    /// `long bpf_skb_pull_data(struct sk_buff *skb, u32 len)`.
    pub const SKB_PULL_DATA: i32 = 39;

    /// The helper's name, for listings.
    pub fn name(id: i32) -> Option<&'static str> {
        match id {
            SKB_LOAD_BYTES => Some("bpf_skb_load_bytes"),
            SKB_PULL_DATA => Some("bpf_skb_pull_data"),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Insn> {
        let mut v = vec![
            Insn::Neg32 { dst: Reg::R3 },
            Insn::ToBe {
                dst: Reg::R2,
                bits: 16,
            },
            Insn::ToBe {
                dst: Reg::R2,
                bits: 32,
            },
            Insn::LoadInd {
                size: Size::B,
                src: Reg::R1,
                imm: 14,
            },
            Insn::Ja { off: -1 },
            Insn::Call { helper: 39 },
            Insn::Exit,
        ];
        for size in Size::ALL {
            v.push(Insn::Load {
                size,
                dst: Reg::R0,
                base: Reg::R8,
                off: 12,
            });
            v.push(Insn::Store {
                size,
                base: Reg::FP,
                off: -4,
                src: Reg::R9,
            });
            v.push(Insn::LoadAbs { size, imm: 23 });
        }
        for op in AluOp::ALL {
            for wide in [false, true] {
                v.push(Insn::Alu {
                    wide,
                    op,
                    dst: Reg::R4,
                    src: Src::Imm(-7),
                });
                v.push(Insn::Alu {
                    wide,
                    op,
                    dst: Reg::R4,
                    src: Src::Reg(Reg::R5),
                });
            }
        }
        for op in JmpOp::ALL {
            v.push(Insn::Jmp {
                op,
                dst: Reg::R1,
                src: Src::Imm(i32::MIN),
                off: 300,
            });
            v.push(Insn::Jmp {
                op,
                dst: Reg::R1,
                src: Src::Reg(Reg::R7),
                off: -2,
            });
        }
        v
    }

    #[test]
    fn encode_decode_round_trip() {
        for insn in samples() {
            assert_eq!(Insn::decode(insn.encode()), Some(insn), "{insn:?}");
        }
    }

    #[test]
    fn known_encodings() {
        // r6 = r1 ; r0 = *(u16 *)skb[12] ; exit (as clang and the kernel's converter emit them)
        let mov = Insn::Alu {
            wide: true,
            op: AluOp::Mov,
            dst: Reg::R6,
            src: Src::Reg(Reg::R1),
        };
        assert_eq!(mov.encode(), [0xbf, 0x16, 0, 0, 0, 0, 0, 0]);
        let ld = Insn::LoadAbs {
            size: Size::H,
            imm: 12,
        };
        assert_eq!(ld.encode(), [0x28, 0, 0, 0, 12, 0, 0, 0]);
        assert_eq!(Insn::Exit.encode(), [0x95, 0, 0, 0, 0, 0, 0, 0]);
        let be = Insn::ToBe {
            dst: Reg::R1,
            bits: 16,
        };
        assert_eq!(be.encode(), [0xdc, 0x01, 0, 0, 16, 0, 0, 0]);
    }

    #[test]
    fn negation_is_complementary() {
        for op in JmpOp::ALL {
            if let Some(n) = op.negated() {
                assert_eq!(n.negated(), Some(op));
            }
        }
    }
}
