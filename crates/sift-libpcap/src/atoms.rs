//! The "atoms" of libpcap's use/def analysis: the 16 scratch words, the accumulator A and the
//! index register X, and which of them one instruction reads and writes.
//!
//! libpcap assumes an instruction writes at most one atom and reports an instruction reading
//! both A and X (`add x`, `jeq x`) as a single "both" answer; the model keeps that shape
//! because the dead-store pass and the block summaries depend on exactly these answers (for
//! example `ret a` is *not* counted as a use of A by the block summaries, only by the dead-store
//! pass).

use sift_bpf::code;

/// Number of scratch memory words (`BPF_MEMWORDS`).
pub const MEM_WORDS: usize = 16;
/// Atom number of the accumulator.
pub const A: usize = MEM_WORDS;
/// Atom number of the index register.
pub const X: usize = MEM_WORDS + 1;
/// Number of atoms.
pub const N_ATOMS: usize = MEM_WORDS + 2;

/// A set of atoms, bit `n` for atom `n`.
pub type AtomSet = u32;

/// The bit of one atom.
pub const fn bit(atom: usize) -> AtomSet {
    1 << atom
}

/// What an instruction reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// Nothing.
    Nothing,
    /// One atom.
    One(usize),
    /// Both A and X.
    Both,
}

/// The opcode's class bits.
pub const fn class(c: u16) -> u16 {
    c & 0x07
}

/// The opcode's mode bits (loads).
pub const fn mode(c: u16) -> u16 {
    c & 0xe0
}

/// The opcode's operation bits (ALU and jumps).
pub const fn op(c: u16) -> u16 {
    c & 0xf0
}

/// The opcode's source bit: `code::K` or `code::X`.
pub const fn src(c: u16) -> u16 {
    c & 0x08
}

/// The atom(s) an instruction (statement or branch) reads. Only valid opcodes are passed in;
/// the graph recovery rejects the others.
pub fn uses(c: u16, k: u32) -> Use {
    match class(c) {
        code::RET => match c & 0x18 {
            0x10 => Use::One(A),
            0x08 => Use::One(X),
            _ => Use::Nothing,
        },
        code::LD | code::LDX => match mode(c) {
            code::IND => Use::One(X),
            code::MEM => Use::One(k as usize),
            _ => Use::Nothing,
        },
        code::ST => Use::One(A),
        code::STX => Use::One(X),
        code::JMP | code::ALU => {
            if src(c) == code::X {
                Use::Both
            } else {
                Use::One(A)
            }
        }
        // MISC: txa reads X, tax reads A.
        _ => {
            if c & 0xf8 == code::TXA {
                Use::One(X)
            } else {
                Use::One(A)
            }
        }
    }
}

/// The atom an instruction writes, if any.
pub fn defines(c: u16, k: u32) -> Option<usize> {
    match class(c) {
        code::LD | code::ALU => Some(A),
        code::LDX => Some(X),
        code::ST | code::STX => Some(k as usize),
        code::MISC => Some(if c & 0xf8 == code::TAX { X } else { A }),
        _ => None,
    }
}
