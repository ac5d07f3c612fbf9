//! Random IR functions that call coprocessors, and packets for them (shared with sift-jit's
//! tests, which include this file by path).
//!
//! The functions look like payload filters: header lengths computed from loaded bytes become
//! `contains` start offsets, loaded fields and arithmetic on them become `member` keys (32-bit,
//! and 128-bit with some words constant), call results are branched on, added up, passed
//! through block parameters of diamonds and returned; some functions keep many loaded values
//! live across the calls (so the code generator spills, and the JIT keeps values across calls).
//! Constants appear in every operand position. The tables are drawn so that calls hit: patterns
//! are made of the bytes the packets are made of, and sets hold small values, extremes and
//! ranges. Every function passes `sift_ir::verify`.

#![allow(dead_code)]

use std::sync::Arc;

use sift_ir::{
    BinOp, Block, CmpOp, Function, Inst, KeyWidth, LoadSize, Pattern, PatternSet, Target,
    Terminator, Value, ValueSet,
};
use sift_testgen::Rng;

/// The bytes packets and literal patterns are made of.
const ALPHABET: [u8; 9] = [0, 1, 2, b'a', b'A', b'b', b'B', 0x45, 0x50];

/// A random packet over [`ALPHABET`] (half the time) or any bytes, 0 to 95 bytes long.
pub fn packet(rng: &mut Rng) -> Vec<u8> {
    let n = rng.index(96);
    let any = rng.chance(1, 2);
    (0..n)
        .map(|_| {
            if any && rng.chance(1, 3) {
                rng.byte()
            } else {
                *rng.pick(&ALPHABET)
            }
        })
        .collect()
}

fn pattern_set(rng: &mut Rng) -> PatternSet {
    const REGEXES: [&str; 5] = [
        "a+b",
        "(?i)ab",
        "(?-u:\\x00\\x01)",
        "^(?-u:\\x45)",
        "[A-B]{2}(?-u:\\x50)?",
    ];
    let mut set = PatternSet::new();
    for _ in 0..rng.range(1, 4) {
        let pattern = if rng.chance(1, 5) {
            Pattern::Regex((*rng.pick(&REGEXES)).to_owned())
        } else {
            let n = rng.range(1, 3) as usize;
            Pattern::Literal {
                bytes: (0..n).map(|_| *rng.pick(&ALPHABET)).collect(),
                nocase: rng.chance(1, 2),
            }
        };
        set.add(pattern).expect("valid pattern");
    }
    set
}

fn value_set(rng: &mut Rng, width: KeyWidth) -> ValueSet {
    let ranges: Vec<(u128, u128)> = (0..rng.range(0, 6))
        .map(|_| {
            let lo = match rng.below(5) {
                0 => u128::from(rng.next_u32()),
                1 => width.max() - u128::from(rng.below(4) as u32),
                2 => u128::from(rng.below(0x60) as u32) << 8 | u128::from(rng.byte()),
                _ => u128::from(rng.below(0x60) as u32),
            };
            let hi = lo.saturating_add(u128::from(rng.below(40) as u32));
            (lo, hi)
        })
        .collect();
    ValueSet::new(width, ranges)
}

struct Gen<'r> {
    rng: &'r mut Rng,
    f: Function,
    /// The next block to fill and the values available in it (defined in its dominators).
    block: Block,
    pool: Vec<Value>,
    /// Blocks that reject (`ret 0`) and accept, shared by early exits.
    exits: Vec<Block>,
}

impl Gen<'_> {
    fn push(&mut self, inst: Inst) -> Value {
        let v = self.f.push(self.block, inst);
        self.pool.push(v);
        v
    }

    fn konst(&mut self, k: u32) -> Value {
        self.f.iconst(self.block, k)
    }

    /// A value from the pool, or a fresh constant.
    fn operand(&mut self) -> Value {
        if self.pool.is_empty() || self.rng.chance(1, 5) {
            let k = *self.rng.pick(&[0, 1, 2, 14, 20, 0x45, 0x4142, u32::MAX]);
            return self.konst(k);
        }
        *self.rng.pick(&self.pool.clone())
    }

    fn load(&mut self, index: Option<Value>) -> Value {
        let size = *self
            .rng
            .pick(&[LoadSize::Byte, LoadSize::Half, LoadSize::Word]);
        let offset = self.rng.below(48) as u32;
        self.push(Inst::Load {
            index,
            offset,
            size,
        })
    }

    /// `(byte [k] & 15) << 2` plus a constant: a header length as a payload offset.
    fn header_length(&mut self) -> Value {
        let k = self.rng.below(20) as u32;
        let b = self.push(Inst::Load {
            index: None,
            offset: k,
            size: LoadSize::Byte,
        });
        let fifteen = self.konst(15);
        let low = self.push(Inst::Binary(BinOp::And, b, fifteen));
        let two = self.konst(2);
        let len = self.push(Inst::Binary(BinOp::Shl, low, two));
        let base = {
            let k = self.rng.below(16) as u32;
            self.konst(k)
        };
        self.push(Inst::Binary(BinOp::Add, len, base))
    }

    fn contains(&mut self) -> Value {
        let set = self.rng.below(self.f.patterns.len() as u64) as u32;
        let pattern = self.rng.below(self.f.patterns[set as usize].len() as u64) as u32;
        let start = match self.rng.below(3) {
            0 => self.header_length(),
            1 => {
                let k = self.rng.below(8) as u32;
                self.konst(k)
            }
            _ => self.operand(),
        };
        self.push(Inst::Contains {
            set,
            pattern,
            start,
        })
    }

    fn member(&mut self) -> Value {
        let set = self.rng.below(self.f.sets.len() as u64) as u32;
        let words = self.f.sets[set as usize].width().words();
        let key = (0..words)
            .map(|_| {
                if self.rng.chance(1, 3) {
                    self.load(None)
                } else {
                    self.operand()
                }
            })
            .collect();
        self.push(Inst::Member { set, key })
    }

    fn arithmetic(&mut self) -> Value {
        let op = *self.rng.pick(&[
            BinOp::Add,
            BinOp::Sub,
            BinOp::And,
            BinOp::Or,
            BinOp::Xor,
            BinOp::Shr,
            BinOp::Mul,
            BinOp::Div,
        ]);
        let (a, b) = (self.operand(), self.operand());
        self.push(Inst::Binary(op, a, b))
    }

    /// A few straight-line instructions in the current block.
    fn steps(&mut self) {
        for _ in 0..self.rng.range(1, 4) {
            match self.rng.below(8) {
                0 | 1 => {
                    self.contains();
                }
                2 | 3 => {
                    self.member();
                }
                4 => {
                    let index = self.rng.chance(1, 2).then(|| self.header_length());
                    self.load(index);
                }
                _ => {
                    self.arithmetic();
                }
            }
        }
    }

    /// A branch on a call result or a comparison: (op, lhs, rhs).
    fn condition(&mut self) -> (CmpOp, Value, Value) {
        let lhs = match self.rng.below(3) {
            0 => self.contains(),
            1 => self.member(),
            _ => self.operand(),
        };
        let op = *self
            .rng
            .pick(&[CmpOp::Eq, CmpOp::Ne, CmpOp::Gt, CmpOp::Set]);
        let rhs = if self.rng.chance(2, 3) {
            {
                let k = self.rng.below(2) as u32;
                self.konst(k)
            }
        } else {
            self.operand()
        };
        (op, lhs, rhs)
    }

    fn exit(&mut self) -> Block {
        *self.rng.pick(&self.exits.clone())
    }

    /// Either an early exit (`cond` leaves for an exit block) or a diamond joining in a block
    /// parameter; continues in a new block.
    fn segment(&mut self) {
        let (op, lhs, rhs) = self.condition();
        let next = self.f.create_block();
        if self.rng.chance(1, 2) {
            let exit = self.exit();
            let (then_, else_) = if self.rng.chance(1, 2) {
                (exit, next)
            } else {
                (next, exit)
            };
            self.f.set_term(
                self.block,
                Terminator::Branch {
                    op,
                    lhs,
                    rhs,
                    then_: Target::from(then_),
                    else_: Target::from(else_),
                },
            );
            self.block = next;
            return;
        }
        let (then_, else_) = (self.f.create_block(), self.f.create_block());
        self.f.set_term(
            self.block,
            Terminator::Branch {
                op,
                lhs,
                rhs,
                then_: Target::from(then_),
                else_: Target::from(else_),
            },
        );
        let param = self.f.add_param(next);
        let outer = self.pool.clone();
        for arm in [then_, else_] {
            self.block = arm;
            self.pool = outer.clone();
            self.steps();
            let arg = self.operand();
            self.f.set_term(
                arm,
                Terminator::Jump(Target {
                    block: next,
                    args: sift_ir::thin_vec![arg],
                }),
            );
        }
        self.pool = outer;
        self.pool.push(param);
        self.block = next;
    }
}

/// A random function with calls (see the module docs).
pub fn function(rng: &mut Rng) -> Function {
    let mut f = Function::new();
    for _ in 0..rng.range(1, 2) {
        f.patterns.push(Arc::new(pattern_set(rng)));
    }
    let w32 = rng.range(1, 2);
    for i in 0..w32 + rng.below(2) {
        let width = if i < w32 {
            KeyWidth::W32
        } else {
            KeyWidth::W128
        };
        f.sets.push(Arc::new(value_set(rng, width)));
    }
    let entry = f.create_block();
    let reject = f.create_block();
    f.set_term(reject, Terminator::Return(0));
    let accept = f.create_block();
    f.set_term(accept, Terminator::Return(96));
    let mut g = Gen {
        rng,
        f,
        block: entry,
        pool: Vec::new(),
        exits: vec![reject, accept],
    };
    // Register pressure: many loaded values live across every call, summed at the end.
    let pressure: Vec<Value> = if g.rng.chance(1, 4) {
        (0..g.rng.range(10, 20)).map(|_| g.load(None)).collect()
    } else {
        Vec::new()
    };
    for _ in 0..g.rng.range(1, 5) {
        g.steps();
        g.segment();
    }
    g.steps();
    let mut result = g.operand();
    for v in pressure {
        result = g.push(Inst::Binary(BinOp::Add, result, v));
    }
    let term = if g.rng.chance(3, 4) {
        Terminator::ReturnValue(result)
    } else {
        let one = g.konst(1);
        Terminator::Branch {
            op: CmpOp::Ge,
            lhs: result,
            rhs: one,
            then_: Target::from(accept),
            else_: Target::from(reject),
        }
    };
    let block = g.block;
    g.f.set_term(block, term);
    g.f
}
