//! Random IR for translation validation of the optimizer, and packets to run it on.
//!
//! Every function generated here passes `sift_ir::verify`: the generator first draws a
//! control-flow skeleton whose blocks are numbered in topological order, then fills the blocks in
//! that order, so every block's dominators are already filled and their values can be used.
//!
//! Two skeletons, because the passes only fire on some shapes:
//!
//! * **filter-shaped**: a random and/or/not tree of tests, laid out as lowering lays out
//!   pcap-filter expressions (each test a block branching to the true or false continuation),
//!   with equality chains on one field (lookup tables), the same field loaded and tested again
//!   (redundant predicates), masks and `set` tests, header lengths computed from a byte and used
//!   as load indexes, and diamonds joining in a block parameter;
//! * **fully random**: a random acyclic graph whose edges go forward, with every terminator kind,
//!   edges passing arguments, both edges of a branch to one block, unreachable blocks, and
//!   arithmetic on anything (division by zero, shifts by 32 or more, huge load offsets).
//!
//! Choices come from an [`Entropy`]: a seeded PRNG in the tests, the input bytes in the fuzz
//! target (which includes this module by path). Every loop is bounded by a count drawn up front, so
//! an exhausted input (all zeros) still gives a small, valid function.

#![allow(dead_code)]

mod duplicate;
mod fill;
mod skeleton;

pub use duplicate::duplicate_tail;

use std::collections::HashMap;

use sift_ir::{BinOp, Block, Chain, CmpOp, Function, Inst, LoadSize, Target, Terminator, Value};

/// A source of choices.
pub trait Entropy {
    /// A small choice (8 bits).
    fn byte(&mut self) -> u8;
    /// A wide choice (32 bits), for constants.
    fn word(&mut self) -> u32;

    /// Uniform-ish in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n <= 256 {
            (usize::from(self.byte()) * n) >> 8
        } else {
            ((self.word() as u64 * n as u64) >> 32) as usize
        }
    }

    /// True with roughly `percent`% probability (always true for a zero source when
    /// `percent > 0`).
    fn chance(&mut self, percent: u32) -> bool {
        (u32::from(self.byte()) * 100) >> 8 < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// An item chosen with the given weights (the first one for a zero source).
    fn weighted<T: Copy>(&mut self, items: &[(u32, T)]) -> T {
        let total: u32 = items.iter().map(|(w, _)| w).sum();
        let mut r = self.below(total as usize) as u32;
        for &(w, x) in items {
            if r < w {
                return x;
            }
            r -= w;
        }
        items[items.len() - 1].1
    }
}

/// SplitMix64, for the tests.
pub struct SplitMix(pub u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl Entropy for SplitMix {
    fn byte(&mut self) -> u8 {
        (self.next() >> 56) as u8
    }
    fn word(&mut self) -> u32 {
        (self.next() >> 32) as u32
    }
}

/// The fuzzer's input, read front to back; zeros once exhausted.
pub struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    pub fn new(data: &'a [u8]) -> Bytes<'a> {
        Bytes { data }
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

impl Entropy for Bytes<'_> {
    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }
    fn word(&mut self) -> u32 {
        u32::from_be_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }
}

/// A packet field the filter tests: a load and the constants it is compared with.
#[derive(Clone, Debug)]
pub struct Field {
    /// The header length this field's offset is relative to (an index into `header_lengths`).
    pub header: Option<usize>,
    pub offset: u32,
    pub size: LoadSize,
    pub keys: Vec<u32>,
}

/// A generated function with what the packet generator needs to make its tests succeed.
#[derive(Clone, Debug)]
pub struct Program {
    pub function: Function,
    pub fields: Vec<Field>,
    /// Offsets of the bytes header lengths are computed from: `(byte & 15) << 2`.
    pub header_lengths: Vec<u32>,
}

/// How a skeleton block ends; operands are chosen when the block is filled.
#[derive(Clone, Debug)]
enum Kind {
    /// A two-way test, on `field` when given.
    Branch(Option<usize>),
    /// A lookup on `field` when given (one target per case, then the default).
    Switch(Option<usize>),
    Jump,
    Return(u32),
    ReturnValue,
}

#[derive(Clone, Debug)]
struct Node {
    params: usize,
    kind: Kind,
    targets: Vec<usize>,
    /// Compute nothing: test an available load against an available constant (a chain link
    /// as value numbering leaves it, which table formation needs).
    clean: bool,
}

const ACCEPT: [u32; 5] = [1, 96, 65535, 262144, u32::MAX];
const SPECIAL: [u32; 12] = [0, 1, 2, 3, 4, 15, 31, 32, 33, 0xff, 0xffff, u32::MAX];

/// Generates one function: filter-shaped most of the time, fully random otherwise.
pub fn generate(e: &mut impl Entropy) -> Program {
    generate_sized(e, Size::SMALL)
}

/// Upper bounds on a generated function's size.
#[derive(Clone, Copy, Debug)]
pub struct Size {
    /// Tests in a filter-shaped function.
    pub tests: usize,
    /// Nesting of and/or/not in a filter-shaped function.
    pub depth: usize,
    /// Blocks of a fully random function.
    pub blocks: usize,
}

impl Size {
    pub const SMALL: Size = Size {
        tests: 40,
        depth: 4,
        blocks: 20,
    };
    pub const LARGE: Size = Size {
        tests: 600,
        depth: 7,
        blocks: 300,
    };
}

/// Generates one function no larger than `size`.
pub fn generate_sized(e: &mut impl Entropy, size: Size) -> Program {
    let mut g = Gen::new(e);
    let filter_shaped = g.e.chance(70);
    let nodes = if filter_shaped {
        g.filter_skeleton(size)
    } else {
        g.random_skeleton(size)
    };
    let mut p = g.fill(nodes);
    if e.chance(if filter_shaped { 40 } else { 15 }) {
        for _ in 0..1 + e.below(3) {
            duplicate_tail(e, &mut p.function);
        }
    }
    p
}

struct Gen<'e, E: Entropy> {
    e: &'e mut E,
    fields: Vec<Field>,
    header_lengths: Vec<u32>,
    f: Function,
    /// Loads of pool fields, by value (for reusing a field already loaded).
    field_of: HashMap<Value, usize>,
    /// Computed header lengths, by value.
    header_of: HashMap<Value, usize>,
}

impl<'e, E: Entropy> Gen<'e, E> {
    fn new(e: &'e mut E) -> Gen<'e, E> {
        let header_lengths: Vec<u32> = (0..e.below(3)).map(|_| e.below(24) as u32).collect();
        let nfields = 1 + e.below(5);
        let mut fields = Vec::new();
        for _ in 0..nfields {
            let size = e.pick(&[LoadSize::Byte, LoadSize::Half, LoadSize::Word]);
            let header = if !header_lengths.is_empty() && e.chance(30) {
                Some(e.below(header_lengths.len()))
            } else {
                None
            };
            let offset = e.below(if header.is_some() { 24 } else { 48 }) as u32;
            let max = match size {
                LoadSize::Byte => 0xff,
                LoadSize::Half => 0xffff,
                LoadSize::Word => u32::MAX,
            };
            let nkeys = 1 + e.below(8);
            let mut keys: Vec<u32> = Vec::new();
            for _ in 0..nkeys {
                let k = if e.chance(20) {
                    e.pick(&SPECIAL) & max
                } else {
                    e.word() & max
                };
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
            fields.push(Field {
                header,
                offset,
                size,
                keys,
            });
        }
        Gen {
            e,
            fields,
            header_lengths,
            f: Function::new(),
            field_of: HashMap::new(),
            header_of: HashMap::new(),
        }
    }
}

fn push(alloc: &mut Vec<Node>, params: usize, kind: Kind, targets: Vec<usize>) -> usize {
    alloc.push(Node {
        params,
        kind,
        targets,
        clean: false,
    });
    alloc.len() - 1
}

/// A packet for `p`: bytes from a few patterns, with the fields' keys planted at their offsets
/// often enough that tests succeed, and a wire length that is often the captured length.
pub fn packet(e: &mut impl Entropy, p: &Program) -> (Vec<u8>, u32) {
    let len = if e.chance(10) {
        e.below(8)
    } else {
        e.below(96)
    };
    let fill = e.pick(&[0u8, 0x45, 0xff, 0x11]);
    let mut data: Vec<u8> = (0..len)
        .map(|_| match e.below(4) {
            0 => fill,
            1 => e.pick(&[0, 1, 2, 4, 6, 0x45, 0x80, 0xff]),
            _ => e.byte(),
        })
        .collect();
    for &at in &p.header_lengths {
        if e.chance(50) {
            if let Some(b) = data.get_mut(at as usize) {
                *b = e.pick(&[0x45, 0x46, 0x4f, 0x40, 0x60]);
            }
        }
    }
    for field in &p.fields {
        if !e.chance(60) {
            continue;
        }
        let base = match field.header {
            None => 0,
            Some(h) => match data.get(p.header_lengths[h] as usize) {
                Some(&byte) => usize::from(byte & 15) << 2,
                None => continue,
            },
        };
        let at = base + field.offset as usize;
        let n = field.size.bytes() as usize;
        let key = e.pick(&field.keys);
        if let Some(slot) = data.get_mut(at..at + n) {
            slot.copy_from_slice(&key.to_be_bytes()[4 - n..]);
        }
    }
    let wire = match e.below(6) {
        0 => 1500,
        1 => len as u32 + e.below(64) as u32,
        2 => e.word(),
        _ => len as u32,
    };
    (data, wire)
}
