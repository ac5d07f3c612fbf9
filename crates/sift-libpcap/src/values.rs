//! Value numbering: libpcap's hash-consed table of (opcode, operand value, operand value).
//!
//! Each distinct triple gets the next number, starting at 1; 0 means "unknown". The table is
//! emptied at the start of every pass, so numbers are only comparable within a pass. Constants
//! are the triples of `ld #k` (opcode 0, operand `k`): number equality of constants is value
//! equality, which the branch folding relies on.
//!
//! The keys mix kinds freely: a packet load is keyed by its offset, an indexed load by its
//! offset and the value number of X, so two `ld [x + 14]` with X unknown (0) at both places
//! get the *same* number even if X differs at run time. libpcap's optimizer treats them as
//! equal, and so must the model.

use foldhash::HashMap;
use foldhash::HashMapExt;
use sift_bpf::code;

/// The value table of one pass.
#[derive(Clone, Debug, Default)]
pub struct Values {
    table: HashMap<(u16, u32, u32), u32>,
    /// `constants[v]`: the constant value number `v` stands for, if any (index 0 unused).
    constants: Vec<Option<u32>>,
}

impl Values {
    /// An empty table (libpcap's `init_val`).
    pub fn new() -> Values {
        Values {
            table: HashMap::new(),
            constants: vec![None],
        }
    }

    /// The number of `(op, v0, v1)`, allocating the next one if the triple is new.
    pub fn number(&mut self, op: u16, v0: u32, v1: u32) -> u32 {
        if let Some(&v) = self.table.get(&(op, v0, v1)) {
            return v;
        }
        let v = self.constants.len() as u32;
        let is_imm_load = op & 0xe0 == code::IMM && matches!(op & 0x07, code::LD | code::LDX);
        self.constants.push(is_imm_load.then_some(v0));
        self.table.insert((op, v0, v1), v);
        v
    }

    /// The number of the constant `k`.
    pub fn constant_number(&mut self, k: u32) -> u32 {
        self.number(code::LD | code::IMM | code::W, k, 0)
    }

    /// The constant a value number stands for.
    pub fn constant(&self, v: u32) -> Option<u32> {
        self.constants.get(v as usize).copied().flatten()
    }
}
