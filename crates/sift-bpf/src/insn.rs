//! The classic BPF instruction: the raw `struct sock_filter` / `struct bpf_insn` layout, its opcode
//! fields, and the decoded form [`Op`] that the rest of the crate matches on.
//!
//! An opcode is `class | size | mode` for loads, `class | op | src` for ALU and jumps, `class |
//! rval` for returns and `class | miscop` for register moves. Only the exact opcodes that
//! libpcap's `bpf_filter` and the Linux kernel execute decode to an [`Op`]; every other 16-bit
//! value (unused bits set, a mode that does not exist for the class, ...) is not an instruction.

use std::fmt;

/// One classic BPF instruction, field for field `struct bpf_insn` (`struct sock_filter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Insn {
    /// Opcode.
    pub code: u16,
    /// Offset added to the next instruction's index when a conditional jump is taken.
    pub jt: u8,
    /// Offset added to the next instruction's index when a conditional jump is not taken.
    pub jf: u8,
    /// Constant operand: immediate, packet offset, scratch index or `ja` offset.
    pub k: u32,
}

impl Insn {
    /// An instruction without jump offsets (libpcap's `BPF_STMT`).
    pub const fn stmt(code: u16, k: u32) -> Insn {
        Insn {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }

    /// A conditional jump (libpcap's `BPF_JUMP`).
    pub const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
        Insn { code, jt, jf, k }
    }

    /// The instruction class (the low three bits of the opcode).
    pub fn class(self) -> Class {
        Class::from_code(self.code)
    }

    /// The instruction with the fields its opcode ignores set to 0 (`k` of `tax`, `jt`/`jf` of
    /// everything but conditional jumps, ...); undecodable instructions are returned unchanged.
    /// Two instructions with the same canonical form behave the same.
    pub fn canonical(self) -> Insn {
        let Some(op) = self.decode() else { return self };
        let uses_k = !matches!(
            op,
            Op::LdLen
                | Op::LdxLen
                | Op::RetA
                | Op::Neg
                | Op::Tax
                | Op::Txa
                | Op::Alu(_, Src::X)
                | Op::Jmp(_, Src::X)
        );
        let (jt, jf) = match op {
            Op::Jmp(..) => (self.jt, self.jf),
            _ => (0, 0),
        };
        Insn {
            code: self.code,
            jt,
            jf,
            k: if uses_k { self.k } else { 0 },
        }
    }

    /// The decoded instruction, or `None` if the opcode is not one that classic BPF executes.
    pub fn decode(self) -> Option<Op> {
        Op::decode(self)
    }
}

/// A classic BPF program: a sequence of instructions (not necessarily valid; see
/// [`crate::validate()`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Program(pub Vec<Insn>);

impl Program {
    /// The instructions.
    pub fn insns(&self) -> &[Insn] {
        &self.0
    }

    /// Number of instructions.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the program has no instructions (never valid).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<Vec<Insn>> for Program {
    fn from(insns: Vec<Insn>) -> Program {
        Program(insns)
    }
}

/// Opcode field values (`pcap/bpf.h`), for building instructions by hand and in tests.
pub mod code {
    #![allow(missing_docs)]
    pub const LD: u16 = 0x00;
    pub const LDX: u16 = 0x01;
    pub const ST: u16 = 0x02;
    pub const STX: u16 = 0x03;
    pub const ALU: u16 = 0x04;
    pub const JMP: u16 = 0x05;
    pub const RET: u16 = 0x06;
    pub const MISC: u16 = 0x07;

    pub const W: u16 = 0x00;
    pub const H: u16 = 0x08;
    pub const B: u16 = 0x10;

    pub const IMM: u16 = 0x00;
    pub const ABS: u16 = 0x20;
    pub const IND: u16 = 0x40;
    pub const MEM: u16 = 0x60;
    pub const LEN: u16 = 0x80;
    pub const MSH: u16 = 0xa0;

    pub const ADD: u16 = 0x00;
    pub const SUB: u16 = 0x10;
    pub const MUL: u16 = 0x20;
    pub const DIV: u16 = 0x30;
    pub const OR: u16 = 0x40;
    pub const AND: u16 = 0x50;
    pub const LSH: u16 = 0x60;
    pub const RSH: u16 = 0x70;
    pub const NEG: u16 = 0x80;
    pub const MOD: u16 = 0x90;
    pub const XOR: u16 = 0xa0;

    pub const JA: u16 = 0x00;
    pub const JEQ: u16 = 0x10;
    pub const JGT: u16 = 0x20;
    pub const JGE: u16 = 0x30;
    pub const JSET: u16 = 0x40;

    pub const K: u16 = 0x00;
    pub const X: u16 = 0x08;
    /// Return operand `A` (`BPF_A`).
    pub const A: u16 = 0x10;

    pub const TAX: u16 = 0x00;
    pub const TXA: u16 = 0x80;

    /// Number of scratch memory words (`BPF_MEMWORDS`).
    pub const MEMWORDS: u32 = 16;
    /// Linux's maximum program length (`BPF_MAXINSNS`).
    pub const MAXINSNS: usize = 4096;
    /// Start of Linux's ancillary-data offsets for absolute loads (`SKF_AD_OFF`, -0x1000).
    pub const SKF_AD_OFF: u32 = 0xffff_f000;
}

/// The instruction class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    Ld,
    Ldx,
    St,
    Stx,
    Alu,
    Jmp,
    Ret,
    Misc,
}

impl Class {
    /// The class of an opcode (every 3-bit value is a class).
    pub fn from_code(code: u16) -> Class {
        match code & 7 {
            0 => Class::Ld,
            1 => Class::Ldx,
            2 => Class::St,
            3 => Class::Stx,
            4 => Class::Alu,
            5 => Class::Jmp,
            6 => Class::Ret,
            _ => Class::Misc,
        }
    }
}

/// Width of a packet load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    Word,
    Half,
    Byte,
}

impl Size {
    /// Number of bytes read.
    pub fn bytes(self) -> u32 {
        self.load_size().bytes()
    }

    /// The width of an IR load.
    pub fn from_load_size(s: sift_ir::LoadSize) -> Size {
        match s {
            sift_ir::LoadSize::Word => Size::Word,
            sift_ir::LoadSize::Half => Size::Half,
            sift_ir::LoadSize::Byte => Size::Byte,
        }
    }

    /// The IR's load of the same width.
    pub fn load_size(self) -> sift_ir::LoadSize {
        match self {
            Size::Word => sift_ir::LoadSize::Word,
            Size::Half => sift_ir::LoadSize::Half,
            Size::Byte => sift_ir::LoadSize::Byte,
        }
    }

    fn code(self) -> u16 {
        match self {
            Size::Word => code::W,
            Size::Half => code::H,
            Size::Byte => code::B,
        }
    }
}

/// Arithmetic operators (`A = A op operand`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AluOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
    Lsh,
    Rsh,
}

impl AluOp {
    /// Every operator, in opcode order.
    pub const ALL: [AluOp; 10] = [
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
    ];

    fn code(self) -> u16 {
        match self {
            AluOp::Add => code::ADD,
            AluOp::Sub => code::SUB,
            AluOp::Mul => code::MUL,
            AluOp::Div => code::DIV,
            AluOp::Mod => code::MOD,
            AluOp::And => code::AND,
            AluOp::Or => code::OR,
            AluOp::Xor => code::XOR,
            AluOp::Lsh => code::LSH,
            AluOp::Rsh => code::RSH,
        }
    }

    fn from_code(op: u16) -> Option<AluOp> {
        AluOp::ALL.into_iter().find(|a| a.code() == op)
    }

    /// The operator of an IR binary operation.
    pub fn from_binop(op: sift_ir::BinOp) -> AluOp {
        use sift_ir::BinOp;
        match op {
            BinOp::Add => AluOp::Add,
            BinOp::Sub => AluOp::Sub,
            BinOp::Mul => AluOp::Mul,
            BinOp::Div => AluOp::Div,
            BinOp::Mod => AluOp::Mod,
            BinOp::And => AluOp::And,
            BinOp::Or => AluOp::Or,
            BinOp::Xor => AluOp::Xor,
            BinOp::Shl => AluOp::Lsh,
            BinOp::Shr => AluOp::Rsh,
        }
    }

    /// The mnemonic (`add`, `sub`, ...).
    pub fn mnemonic(self) -> &'static str {
        match self {
            AluOp::Add => "add",
            AluOp::Sub => "sub",
            AluOp::Mul => "mul",
            AluOp::Div => "div",
            AluOp::Mod => "mod",
            AluOp::And => "and",
            AluOp::Or => "or",
            AluOp::Xor => "xor",
            AluOp::Lsh => "lsh",
            AluOp::Rsh => "rsh",
        }
    }
}

/// Conditions of conditional jumps (all unsigned).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JmpOp {
    /// `A == operand`.
    Jeq,
    /// `A > operand`.
    Jgt,
    /// `A >= operand`.
    Jge,
    /// `A & operand != 0`.
    Jset,
}

impl JmpOp {
    /// Every condition.
    pub const ALL: [JmpOp; 4] = [JmpOp::Jeq, JmpOp::Jgt, JmpOp::Jge, JmpOp::Jset];

    /// The condition for an IR comparison, and whether the edges are exchanged: classic BPF
    /// has only `jeq`/`jgt`/`jge`/`jset`, so `!=`, `<=` and `<` are those with the targets
    /// swapped, as libpcap's code generator writes them.
    pub fn from_cmp(op: sift_ir::CmpOp) -> (JmpOp, bool) {
        use sift_ir::CmpOp;
        match op {
            CmpOp::Eq => (JmpOp::Jeq, false),
            CmpOp::Ne => (JmpOp::Jeq, true),
            CmpOp::Gt => (JmpOp::Jgt, false),
            CmpOp::Ge => (JmpOp::Jge, false),
            CmpOp::Lt => (JmpOp::Jge, true),
            CmpOp::Le => (JmpOp::Jgt, true),
            CmpOp::Set => (JmpOp::Jset, false),
        }
    }

    /// The condition's opcode bits (`BPF_JEQ`, ...).
    pub fn code(self) -> u16 {
        match self {
            JmpOp::Jeq => code::JEQ,
            JmpOp::Jgt => code::JGT,
            JmpOp::Jge => code::JGE,
            JmpOp::Jset => code::JSET,
        }
    }

    /// The mnemonic (`jeq`, ...).
    pub fn mnemonic(self) -> &'static str {
        match self {
            JmpOp::Jeq => "jeq",
            JmpOp::Jgt => "jgt",
            JmpOp::Jge => "jge",
            JmpOp::Jset => "jset",
        }
    }

    /// Evaluates the condition.
    pub fn eval(self, a: u32, b: u32) -> bool {
        match self {
            JmpOp::Jeq => a == b,
            JmpOp::Jgt => a > b,
            JmpOp::Jge => a >= b,
            JmpOp::Jset => a & b != 0,
        }
    }
}

/// The second operand of an ALU operation or conditional jump.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Src {
    /// The constant `k`.
    K,
    /// The index register.
    X,
}

/// A decoded instruction. `k`, `jt` and `jf` stay in the [`Insn`]; `Op` says what they mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `A = P[k:size]`.
    LdAbs(Size),
    /// `A = P[X + k:size]`.
    LdInd(Size),
    /// `A = wire length`.
    LdLen,
    /// `A = k`.
    LdImm,
    /// `A = M[k]`.
    LdMem,
    /// `X = k`.
    LdxImm,
    /// `X = M[k]`.
    LdxMem,
    /// `X = wire length`.
    LdxLen,
    /// `X = 4 * (P[k:1] & 0xf)` (the IPv4 header length idiom).
    LdxMsh,
    /// `M[k] = A`.
    St,
    /// `M[k] = X`.
    Stx,
    /// `A = A op operand`.
    Alu(AluOp, Src),
    /// `A = -A`.
    Neg,
    /// `pc += k`.
    Ja,
    /// `pc += cond(A, operand) ? jt : jf`.
    Jmp(JmpOp, Src),
    /// Accept `k` bytes.
    RetK,
    /// Accept `A` bytes.
    RetA,
    /// `X = A`.
    Tax,
    /// `A = X`.
    Txa,
}

impl Op {
    /// Decodes an opcode; `None` if classic BPF does not execute it.
    pub fn decode(insn: Insn) -> Option<Op> {
        use code::*;
        let c = insn.code;
        if c > 0xff {
            return None;
        }
        let size = |c: u16| match c & 0x18 {
            W => Some(Size::Word),
            H => Some(Size::Half),
            B => Some(Size::Byte),
            _ => None,
        };
        Some(match c & 7 {
            LD => match c & 0xe0 {
                ABS => Op::LdAbs(size(c)?),
                IND => Op::LdInd(size(c)?),
                LEN if c & 0x18 == W => Op::LdLen,
                IMM if c & 0x18 == W => Op::LdImm,
                MEM if c & 0x18 == W => Op::LdMem,
                _ => return None,
            },
            LDX => match c {
                0x01 => Op::LdxImm,
                0x61 => Op::LdxMem,
                0x81 => Op::LdxLen,
                0xb1 => Op::LdxMsh,
                _ => return None,
            },
            ST if c == ST => Op::St,
            STX if c == STX => Op::Stx,
            ALU => {
                if c == ALU | NEG {
                    Op::Neg
                } else {
                    let src = if c & X != 0 { Src::X } else { Src::K };
                    Op::Alu(AluOp::from_code(c & 0xf0)?, src)
                }
            }
            JMP => {
                if c == JMP | JA {
                    Op::Ja
                } else {
                    let src = if c & X != 0 { Src::X } else { Src::K };
                    let op = JmpOp::ALL.into_iter().find(|j| j.code() == c & 0xf0)?;
                    Op::Jmp(op, src)
                }
            }
            RET => match c {
                0x06 => Op::RetK,
                0x16 => Op::RetA,
                _ => return None,
            },
            MISC => match c {
                0x07 => Op::Tax,
                0x87 => Op::Txa,
                _ => return None,
            },
            _ => return None,
        })
    }

    /// The opcode of this operation.
    pub fn code(self) -> u16 {
        use code::*;
        let src = |s: Src| match s {
            Src::K => K,
            Src::X => X,
        };
        match self {
            Op::LdAbs(s) => LD | ABS | s.code(),
            Op::LdInd(s) => LD | IND | s.code(),
            Op::LdLen => LD | W | LEN,
            Op::LdImm => LD | IMM,
            Op::LdMem => LD | MEM,
            Op::LdxImm => LDX | IMM,
            Op::LdxMem => LDX | MEM,
            Op::LdxLen => LDX | W | LEN,
            Op::LdxMsh => LDX | B | MSH,
            Op::St => ST,
            Op::Stx => STX,
            Op::Alu(op, s) => ALU | op.code() | src(s),
            Op::Neg => ALU | NEG,
            Op::Ja => JMP | JA,
            Op::Jmp(op, s) => JMP | op.code() | src(s),
            Op::RetK => RET | K,
            Op::RetA => RET | A,
            Op::Tax => MISC | TAX,
            Op::Txa => MISC | TXA,
        }
    }

    /// An instruction with this opcode and operand `k` (no jump offsets).
    pub fn with_k(self, k: u32) -> Insn {
        Insn::stmt(self.code(), k)
    }

    /// Whether the instruction ends a basic block (a jump or a return).
    pub fn is_terminator(self) -> bool {
        matches!(self, Op::Ja | Op::Jmp(..) | Op::RetK | Op::RetA)
    }
}

impl fmt::Display for Insn {
    /// The `tcpdump -ddd` line: `code jt jf k` in decimal.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {} {}", self.code, self.jt, self.jf, self.k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_opcode_round_trips_or_is_rejected() {
        let mut valid = 0;
        for c in 0..=0xffffu16 {
            if let Some(op) = Insn::stmt(c, 0).decode() {
                assert_eq!(op.code(), c, "{op:?}");
                valid += 1;
            }
        }
        // 6 LD abs/ind + 3 LD len/imm/mem + 4 LDX + ST + STX + 20 ALU + NEG + JA + 8 JMP + 2 RET
        // + 2 MISC = 49: the opcode table of bpf_filter and the kernel's `codes[]`.
        assert_eq!(valid, 49);
    }

    #[test]
    fn well_known_opcodes() {
        assert_eq!(Insn::stmt(0x28, 12).decode(), Some(Op::LdAbs(Size::Half)));
        assert_eq!(Insn::stmt(0xb1, 14).decode(), Some(Op::LdxMsh));
        assert_eq!(
            Insn::stmt(0x15, 0).decode(),
            Some(Op::Jmp(JmpOp::Jeq, Src::K))
        );
        assert_eq!(Insn::stmt(0x16, 0).decode(), Some(Op::RetA));
        assert_eq!(Insn::stmt(0x0e, 0).decode(), None); // RET|X does not exist
        assert_eq!(Insn::stmt(0x08, 0).decode(), None); // LD|H|IMM
        assert_eq!(Insn::stmt(0x128, 0).decode(), None);
        assert_eq!(Insn::stmt(0x8c, 0).decode(), None); // NEG|X
        assert_eq!(Class::from_code(0x15), Class::Jmp);
    }
}
