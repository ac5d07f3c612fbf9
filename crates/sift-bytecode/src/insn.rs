//! The instruction set: registers, operands, instructions, lookup tables and programs.
//!
//! A [`Program`] is plain data: anything the binary decoder or the text assembler can express,
//! including programs that break the machine's rules (a register number of 200, a backward
//! branch). [`crate::verify`] decides whether a program may run.
//!
//! A program also carries the coprocessor tables its `contains` and `member` calls name (the
//! same [`PatternSet`]s and [`ValueSet`]s as the IR's, shared behind `Arc`s).

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use sift_ir::{Chain, PatternSet, ValueSet};

/// Number of general-purpose registers (`r0`..`r15`), each a `u32`.
pub const REGISTERS: usize = 16;
/// Largest scratch memory a program may declare, in 32-bit words.
pub const MAX_SCRATCH: u16 = 256;
/// Largest number of instructions in a program.
pub const MAX_INSNS: usize = 1 << 20;
/// Largest number of lookup tables in a program.
pub const MAX_TABLES: usize = 1 << 16;
/// Largest number of `(key, target)` entries over all tables of a program.
pub const MAX_TABLE_ENTRIES: usize = 1 << 20;
/// Largest number of pattern sets, and of value sets, in a program.
pub const MAX_COPROCESSOR_TABLES: usize = 1 << 16;

/// A register number. Any `u8` is representable; the verifier accepts `0..REGISTERS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reg(pub u8);

impl Reg {
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// The second operand of an ALU operation, branch, move or return: a register or an immediate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    Reg(Reg),
    Imm(u32),
}

/// Width of a packet load; loads are big-endian (network order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Width {
    Byte,
    Half,
    Word,
}

impl Width {
    pub const ALL: [Width; 3] = [Width::Byte, Width::Half, Width::Word];

    pub fn bytes(self) -> u32 {
        match self {
            Width::Byte => 1,
            Width::Half => 2,
            Width::Word => 4,
        }
    }

    /// The suffix of the mnemonic (`ld.b`, `ld.h`, `ld.w`).
    pub fn suffix(self) -> &'static str {
        match self {
            Width::Byte => "b",
            Width::Half => "h",
            Width::Word => "w",
        }
    }
}

/// Arithmetic on `u32`: the IR's binary operators, with the IR's semantics (wrapping; division
/// or remainder by zero rejects the packet; shifts by 32 or more give 0). Their order in
/// `AluOp::ALL` is the encoding order (an opcode is a base plus the position in that list).
pub use sift_ir::BinOp as AluOp;
/// Unsigned comparisons of a branch: the IR's, in the same encoding order (`Cond::ALL`).
/// `Set` tests `(lhs & rhs) != 0` (classic BPF's `jset`).
pub use sift_ir::CmpOp as Cond;

/// The key registers of a `member` call: one word, or four (most significant first) for a
/// 128-bit set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    W32(Reg),
    W128([Reg; 4]),
}

impl Key {
    /// The key's registers, most significant word first.
    pub fn regs(&self) -> &[Reg] {
        match self {
            Key::W32(r) => std::slice::from_ref(r),
            Key::W128(rs) => rs,
        }
    }
}

/// One instruction. Branch, jump and table targets are absolute instruction indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Insn {
    /// `dst = src`.
    Mov { dst: Reg, src: Operand },
    /// `dst =` the packet's length on the wire.
    WireLen { dst: Reg },
    /// `dst =` the `width` bytes at `base + offset` (`base` absent: at `offset`), big-endian,
    /// the sum computed without wrapping. A read outside the captured bytes returns 0 (rejects).
    Load {
        width: Width,
        dst: Reg,
        base: Option<Reg>,
        offset: u32,
    },
    /// `dst = lhs op rhs`.
    Alu {
        op: AluOp,
        dst: Reg,
        lhs: Reg,
        rhs: Operand,
    },
    /// `dst = -src` (two's complement).
    Neg { dst: Reg, src: Reg },
    /// `dst = M[slot]`.
    LoadScratch { dst: Reg, slot: u16 },
    /// `M[slot] = src`.
    StoreScratch { slot: u16, src: Reg },
    /// Continue at `target`.
    Jump { target: u32 },
    /// Continue at `then_` if `cond(lhs, rhs)`, else at `else_`.
    Branch {
        cond: Cond,
        lhs: Reg,
        rhs: Operand,
        then_: u32,
        else_: u32,
    },
    /// Continue at the target `tables[table]` lists for the value of `key`, else at `default`.
    Switch { key: Reg, table: u32, default: u32 },
    /// Stop; the result is the number of bytes to keep (0 rejects the packet).
    Return { value: Operand },
    /// A coprocessor call: `dst = 1` if pattern `pattern` of `patterns[set]` occurs in the
    /// captured bytes from offset `start` on (none do when `start` is past them), else 0.
    /// Never rejects the packet.
    Contains {
        dst: Reg,
        set: u32,
        pattern: u32,
        start: Reg,
    },
    /// A coprocessor call: `dst = 1` if the key is in `sets[set]`, else 0. Never rejects.
    Member { dst: Reg, set: u32, key: Key },
    /// libpcap's `protochain` loop: `dst =` the protocol the walk of the header chain stops at,
    /// starting with protocol `proto` at `offset` from `base` (see `sift_ir::protochain::walk`).
    /// Rejects the packet when a header lies outside the captured bytes (or the walk cycles).
    Protochain {
        dst: Reg,
        chain: Chain,
        base: u32,
        proto: Reg,
        offset: Reg,
        target: u32,
    },
}

impl Insn {
    /// The register this instruction writes, if any.
    pub fn def(&self) -> Option<Reg> {
        match *self {
            Insn::Mov { dst, .. }
            | Insn::WireLen { dst }
            | Insn::Load { dst, .. }
            | Insn::Alu { dst, .. }
            | Insn::Neg { dst, .. }
            | Insn::LoadScratch { dst, .. }
            | Insn::Contains { dst, .. }
            | Insn::Member { dst, .. }
            | Insn::Protochain { dst, .. } => Some(dst),
            _ => None,
        }
    }

    /// The registers this instruction reads (at most [`MAX_USES`], in operand order).
    pub fn uses(&self) -> impl Iterator<Item = Reg> {
        let operand = |o: Operand| match o {
            Operand::Reg(r) => Some(r),
            Operand::Imm(_) => None,
        };
        let one = |r: Option<Reg>| [r, None, None, None];
        let regs: [Option<Reg>; MAX_USES] = match *self {
            Insn::Mov { src, .. } | Insn::Return { value: src } => one(operand(src)),
            Insn::Load { base, .. } => one(base),
            Insn::Alu { lhs, rhs, .. } | Insn::Branch { lhs, rhs, .. } => {
                [Some(lhs), operand(rhs), None, None]
            }
            Insn::Neg { src, .. } | Insn::StoreScratch { src, .. } => one(Some(src)),
            Insn::Switch { key, .. } => one(Some(key)),
            Insn::Contains { start, .. } => one(Some(start)),
            Insn::Member {
                key: Key::W32(k), ..
            } => one(Some(k)),
            Insn::Member {
                key: Key::W128(k), ..
            } => k.map(Some),
            Insn::Protochain { proto, offset, .. } => [Some(proto), Some(offset), None, None],
            Insn::WireLen { .. } | Insn::LoadScratch { .. } | Insn::Jump { .. } => one(None),
        };
        regs.into_iter().flatten()
    }

    /// Whether this is a coprocessor call (`contains` or `member`).
    pub fn is_call(&self) -> bool {
        matches!(self, Insn::Contains { .. } | Insn::Member { .. })
    }

    /// Whether control never continues with the next instruction.
    pub fn is_terminator(&self) -> bool {
        matches!(
            self,
            Insn::Jump { .. } | Insn::Branch { .. } | Insn::Switch { .. } | Insn::Return { .. }
        )
    }
}

/// A lookup table: `(key, target)` pairs. The verifier requires keys in strictly ascending order,
/// so a table has one canonical form and can be searched by bisection.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Table {
    pub entries: Vec<(u32, u32)>,
}

/// Most registers one instruction reads (a `member` call with a 128-bit key).
pub const MAX_USES: usize = 4;

/// A bytecode program: its declared scratch memory, its code, its lookup tables and the
/// coprocessor tables its calls name.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Program {
    /// Words of scratch memory (`M[0]`..`M[scratch_words - 1]`).
    pub scratch_words: u16,
    pub code: Vec<Insn>,
    pub tables: Vec<Table>,
    /// The pattern sets `contains` calls search (`contains rD, pN.M, rS` names pattern `M` of
    /// `patterns[N]`).
    pub patterns: Vec<Arc<PatternSet>>,
    /// The value sets `member` calls look keys up in.
    pub sets: Vec<Arc<ValueSet>>,
}

impl Program {
    /// Whether any instruction calls a coprocessor.
    pub fn has_calls(&self) -> bool {
        self.code.iter().any(Insn::is_call)
    }

    /// Whether the program carries coprocessor tables (it may without calling them).
    pub fn has_coprocessor_tables(&self) -> bool {
        !self.patterns.is_empty() || !self.sets.is_empty()
    }
}

// `PatternSet` is not `Hash` (it holds compiled expressions): hash what equality compares.
impl Hash for Program {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.scratch_words.hash(state);
        self.code.hash(state);
        self.tables.hash(state);
        self.patterns.len().hash(state);
        for set in &self.patterns {
            set.patterns().hash(state);
        }
        self.sets.hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uses_and_defs() {
        let i = Insn::Alu {
            op: AluOp::Add,
            dst: Reg(1),
            lhs: Reg(2),
            rhs: Operand::Reg(Reg(3)),
        };
        assert_eq!(i.def(), Some(Reg(1)));
        assert_eq!(i.uses().collect::<Vec<_>>(), vec![Reg(2), Reg(3)]);
        assert!(!i.is_terminator());
        assert!(Insn::Return {
            value: Operand::Imm(0)
        }
        .is_terminator());
    }
}
