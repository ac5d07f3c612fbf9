//! The data structures of the IR and the methods that build it.

use std::fmt;
use std::sync::Arc;

pub use thin_vec::{thin_vec, ThinVec};

use crate::coproc::{PatternSet, ValueSet};
use crate::protochain::Chain;

/// A block's instructions: up to [`INLINE_INSTS`] of them in the block itself. Most blocks
/// hold a load and a constant; long chains have 10^5 blocks, and a separate allocation for each
/// block's list was a third of the instructions of generating them, and a pointer every pass
/// over the blocks follows.
pub type Insts = smallvec::SmallVec<[Value; INLINE_INSTS]>;

/// Instructions a block holds without a separate allocation (4 measured best of 4, 6 and 8 on
/// 1,000- and 10,000-term chains; the blocks grow by 16 bytes).
pub const INLINE_INSTS: usize = 4;

/// An SSA value: the result of one instruction, or a block parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value(pub u32);

/// A basic block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Block(pub u32);

impl Value {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl Block {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

impl fmt::Display for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "block{}", self.0)
    }
}

/// Width of a packet load. Loads read big-endian (network order), as classic BPF does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoadSize {
    Byte,
    Half,
    Word,
}

impl LoadSize {
    pub fn bytes(self) -> u32 {
        match self {
            LoadSize::Byte => 1,
            LoadSize::Half => 2,
            LoadSize::Word => 4,
        }
    }

    pub fn from_bytes(n: u32) -> Option<LoadSize> {
        match n {
            1 => Some(LoadSize::Byte),
            2 => Some(LoadSize::Half),
            4 => Some(LoadSize::Word),
            _ => None,
        }
    }
}

/// Binary arithmetic on 32-bit unsigned values, wrapping.
///
/// `Div` and `Mod` by zero reject the packet. Shifts by 32 or more give 0. Ordered so that
/// canonical forms (the demultiplexer's atoms) can be sorted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

impl BinOp {
    /// Applies the operator; `None` means the packet is rejected (division by zero). Inlined
    /// across crates: the bytecode interpreter's inner loop calls it.
    #[inline(always)]
    pub fn apply(self, a: u32, b: u32) -> Option<u32> {
        Some(match self {
            BinOp::Add => a.wrapping_add(b),
            BinOp::Sub => a.wrapping_sub(b),
            BinOp::Mul => a.wrapping_mul(b),
            BinOp::Div => a.checked_div(b)?,
            BinOp::Mod => a.checked_rem(b)?,
            BinOp::And => a & b,
            BinOp::Or => a | b,
            BinOp::Xor => a ^ b,
            BinOp::Shl => a.checked_shl(b).unwrap_or(0),
            BinOp::Shr => a.checked_shr(b).unwrap_or(0),
        })
    }

    /// Whether `a op b == b op a` for all operands.
    pub fn is_commutative(self) -> bool {
        matches!(
            self,
            BinOp::Add | BinOp::Mul | BinOp::And | BinOp::Or | BinOp::Xor
        )
    }

    /// Whether [`BinOp::apply`] can fail (reject the packet) for some operands.
    pub fn can_fail(self) -> bool {
        matches!(self, BinOp::Div | BinOp::Mod)
    }
}

/// Unsigned comparisons a branch can test. `Set` is classic BPF's `jset`: `(a & b) != 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Set,
}

impl CmpOp {
    #[inline(always)]
    pub fn eval(self, a: u32, b: u32) -> bool {
        match self {
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Set => a & b != 0,
        }
    }

    /// The comparison with its operands exchanged: `a OP b == b OP.swapped() a`.
    pub fn swapped(self) -> CmpOp {
        match self {
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            c @ (CmpOp::Eq | CmpOp::Ne | CmpOp::Set) => c,
        }
    }
}

/// An instruction that defines one value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Inst {
    /// A constant.
    Const(u32),
    /// The packet's length on the wire (classic BPF's `len`).
    WireLen,
    /// Reads `size` bytes, big-endian, at `index + offset` (computed without wrapping; `index` absent
    /// means 0). A read that does not lie entirely within the captured bytes rejects the packet.
    Load {
        index: Option<Value>,
        offset: u32,
        size: LoadSize,
    },
    Binary(BinOp, Value, Value),
    /// Two's complement negation.
    Neg(Value),
    /// A block parameter (defined on entry to its block by the incoming edge's argument).
    Param(Block),
    /// A coprocessor call: 1 if pattern `pattern` of [`Function::patterns`]`[set]` occurs in
    /// the captured bytes from offset `start` on, else 0 (see [`PatternSet::occurs`]). Never
    /// rejects the packet.
    Contains {
        set: u32,
        pattern: u32,
        start: Value,
    },
    /// A coprocessor call: 1 if the key is in [`Function::sets`]`[set]`, else 0 (see
    /// [`ValueSet::contains`]). `key` has the set's [`KeyWidth::words`](crate::KeyWidth::words)
    /// values, most significant first. Never rejects the packet.
    Member {
        set: u32,
        key: ThinVec<Value>,
    },
    /// libpcap's `protochain` loop: walks the header chain from protocol `proto` at `offset`
    /// (relative to the network header at `base`) and gives the protocol it stops at (see
    /// [`protochain::walk`](crate::protochain::walk)). Rejects the packet when a header lies
    /// outside the captured bytes, as a load does.
    Protochain {
        chain: Chain,
        base: u32,
        proto: Value,
        offset: Value,
        target: u32,
    },
}

impl Inst {
    /// The values this instruction reads.
    pub fn operands(&self) -> Vec<Value> {
        match *self {
            Inst::Const(_) | Inst::WireLen | Inst::Param(_) => vec![],
            Inst::Load { index, .. } => index.into_iter().collect(),
            Inst::Binary(_, a, b) => vec![a, b],
            Inst::Neg(a) | Inst::Contains { start: a, .. } => vec![a],
            Inst::Member { ref key, .. } => key.to_vec(),
            Inst::Protochain { proto, offset, .. } => vec![proto, offset],
        }
    }

    /// Whether `self` and `other` are the same instruction once their operands are matched
    /// by `same` (a relation the caller defines: by position within a block, by a renaming):
    /// the same kind and fields, and related operands in the same places. Compared in place,
    /// without renamed copies (merging equal blocks asks this of every instruction).
    pub fn same_up_to(&self, other: &Inst, mut same: impl FnMut(Value, Value) -> bool) -> bool {
        match (self, other) {
            (Inst::Const(k), Inst::Const(l)) => k == l,
            (Inst::WireLen, Inst::WireLen) => true,
            (
                Inst::Load {
                    index: i,
                    offset: o,
                    size: s,
                },
                Inst::Load {
                    index: j,
                    offset: p,
                    size: t,
                },
            ) => {
                o == p
                    && s == t
                    && match (i, j) {
                        (None, None) => true,
                        (Some(i), Some(j)) => same(*i, *j),
                        _ => false,
                    }
            }
            (Inst::Binary(op, a, b), Inst::Binary(op2, c, d)) => {
                op == op2 && same(*a, *c) && same(*b, *d)
            }
            (Inst::Neg(a), Inst::Neg(b)) => same(*a, *b),
            (Inst::Param(b), Inst::Param(c)) => b == c,
            (
                Inst::Contains {
                    set,
                    pattern,
                    start,
                },
                Inst::Contains {
                    set: set2,
                    pattern: pattern2,
                    start: start2,
                },
            ) => set == set2 && pattern == pattern2 && same(*start, *start2),
            (
                Inst::Member { set, key },
                Inst::Member {
                    set: set2,
                    key: key2,
                },
            ) => {
                set == set2
                    && key.len() == key2.len()
                    && key.iter().zip(key2).all(|(k, l)| same(*k, *l))
            }
            (
                &Inst::Protochain {
                    chain,
                    base,
                    proto,
                    offset,
                    target,
                },
                &Inst::Protochain {
                    chain: chain2,
                    base: base2,
                    proto: proto2,
                    offset: offset2,
                    target: target2,
                },
            ) => {
                (chain, base, target) == (chain2, base2, target2)
                    && same(proto, proto2)
                    && same(offset, offset2)
            }
            _ => false,
        }
    }

    /// Calls `visit` on each value this instruction reads, in the order of
    /// [`Inst::operands`], without building the list (whole-function walks ask this of every
    /// instruction, and the lists' allocations dominated some of them).
    pub fn for_each_operand(&self, mut visit: impl FnMut(Value)) {
        match *self {
            Inst::Const(_) | Inst::WireLen | Inst::Param(_) => {}
            Inst::Load { index, .. } => index.into_iter().for_each(visit),
            Inst::Binary(_, a, b)
            | Inst::Protochain {
                proto: a,
                offset: b,
                ..
            } => {
                visit(a);
                visit(b);
            }
            Inst::Neg(a) | Inst::Contains { start: a, .. } => visit(a),
            Inst::Member { ref key, .. } => key.iter().copied().for_each(visit),
        }
    }

    /// Applies `map` to each operand (in the order of [`Inst::operands`]).
    pub fn map_operands(&mut self, mut map: impl FnMut(Value) -> Value) {
        match self {
            Inst::Const(_) | Inst::WireLen | Inst::Param(_) => {}
            Inst::Load { index, .. } => {
                if let Some(x) = index {
                    *x = map(*x);
                }
            }
            Inst::Binary(_, a, b) => {
                *a = map(*a);
                *b = map(*b);
            }
            Inst::Neg(a) | Inst::Contains { start: a, .. } => *a = map(*a),
            Inst::Member { key, .. } => key.iter_mut().for_each(|k| *k = map(*k)),
            Inst::Protochain { proto, offset, .. } => {
                *proto = map(*proto);
                *offset = map(*offset);
            }
        }
    }

    /// Whether this is a coprocessor call ([`Inst::Contains`] or [`Inst::Member`]), which only
    /// engines with a coprocessor runtime can run (not classic BPF or eBPF).
    pub fn is_call(&self) -> bool {
        matches!(self, Inst::Contains { .. } | Inst::Member { .. })
    }
}

/// An edge to a block, with the arguments for its parameters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    pub block: Block,
    pub args: ThinVec<Value>,
}

impl From<Block> for Target {
    fn from(block: Block) -> Target {
        Target {
            block,
            args: ThinVec::new(),
        }
    }
}

/// How a block ends.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Terminator {
    /// Not yet set (only while building; the verifier rejects it).
    #[default]
    Unset,
    /// `if op(lhs, rhs) goto then_ else goto else_`.
    Branch {
        op: CmpOp,
        lhs: Value,
        rhs: Value,
        then_: Target,
        else_: Target,
    },
    Jump(Target),
    /// Multiway branch (a lookup table): goes to the case whose key equals `value`, else to
    /// `default`. Keys are distinct.
    Switch {
        value: Value,
        cases: Vec<(u32, Target)>,
        default: Target,
    },
    /// Accept `n` bytes of the packet (0 = reject).
    Return(u32),
    /// Accept as many bytes as a computed value says (classic BPF's `ret a`; 0 = reject).
    ReturnValue(Value),
}

impl Terminator {
    /// The edges leaving the block.
    pub fn targets(&self) -> Vec<&Target> {
        match self {
            Terminator::Branch { then_, else_, .. } => vec![then_, else_],
            Terminator::Jump(t) => vec![t],
            Terminator::Switch { cases, default, .. } => {
                cases.iter().map(|(_, t)| t).chain([default]).collect()
            }
            Terminator::Unset | Terminator::Return(_) | Terminator::ReturnValue(_) => vec![],
        }
    }

    /// Visits the edges in the order of [`Terminator::targets`], without building a list.
    pub fn for_each_target(&self, mut visit: impl FnMut(&Target)) {
        match self {
            Terminator::Branch { then_, else_, .. } => {
                visit(then_);
                visit(else_);
            }
            Terminator::Jump(t) => visit(t),
            Terminator::Switch { cases, default, .. } => {
                cases.iter().for_each(|(_, t)| visit(t));
                visit(default);
            }
            Terminator::Unset | Terminator::Return(_) | Terminator::ReturnValue(_) => {}
        }
    }

    /// [`Terminator::for_each_target`] for changing the edges.
    pub fn for_each_target_mut(&mut self, mut visit: impl FnMut(&mut Target)) {
        match self {
            Terminator::Branch { then_, else_, .. } => {
                visit(then_);
                visit(else_);
            }
            Terminator::Jump(t) => visit(t),
            Terminator::Switch { cases, default, .. } => {
                cases.iter_mut().for_each(|(_, t)| visit(t));
                visit(default);
            }
            Terminator::Unset | Terminator::Return(_) | Terminator::ReturnValue(_) => {}
        }
    }

    /// How many edges leave the block (a `switch` counts its default).
    pub fn successor_count(&self) -> usize {
        match self {
            Terminator::Branch { .. } => 2,
            Terminator::Jump(_) => 1,
            Terminator::Switch { cases, .. } => cases.len() + 1,
            Terminator::Unset | Terminator::Return(_) | Terminator::ReturnValue(_) => 0,
        }
    }

    /// The block edge number `i` leads to, in the order of [`Terminator::targets`], without
    /// building the list (graph walks ask for one edge at a time).
    pub fn successor(&self, i: usize) -> Option<Block> {
        match self {
            Terminator::Branch { then_, else_, .. } => match i {
                0 => Some(then_.block),
                1 => Some(else_.block),
                _ => None,
            },
            Terminator::Jump(t) => (i == 0).then_some(t.block),
            Terminator::Switch { cases, default, .. } => match cases.get(i) {
                Some((_, t)) => Some(t.block),
                None => (i == cases.len()).then_some(default.block),
            },
            Terminator::Unset | Terminator::Return(_) | Terminator::ReturnValue(_) => None,
        }
    }

    /// The blocks the edges lead to, in edge order (a block reached by two edges twice).
    pub fn successors(&self) -> impl Iterator<Item = Block> + '_ {
        (0..self.successor_count()).filter_map(move |i| self.successor(i))
    }

    pub fn targets_mut(&mut self) -> Vec<&mut Target> {
        match self {
            Terminator::Branch { then_, else_, .. } => vec![then_, else_],
            Terminator::Jump(t) => vec![t],
            Terminator::Switch { cases, default, .. } => {
                cases.iter_mut().map(|(_, t)| t).chain([default]).collect()
            }
            Terminator::Unset | Terminator::Return(_) | Terminator::ReturnValue(_) => vec![],
        }
    }

    /// Applies `map` to each operand, edge arguments included (in the order of
    /// [`Terminator::operands`]).
    pub fn map_operands(&mut self, mut map: impl FnMut(Value) -> Value) {
        match self {
            Terminator::Branch { lhs, rhs, .. } => {
                *lhs = map(*lhs);
                *rhs = map(*rhs);
            }
            Terminator::Switch { value, .. } | Terminator::ReturnValue(value) => {
                *value = map(*value)
            }
            Terminator::Unset | Terminator::Jump(_) | Terminator::Return(_) => {}
        }
        // Edge by edge: passes map the operands of every block, and building `targets_mut`'s
        // list was an allocation per block.
        self.for_each_target_mut(|t| {
            for a in &mut t.args {
                *a = map(*a);
            }
        });
    }

    /// Calls `visit` on each value the terminator reads, in the order of
    /// [`Terminator::operands`], without building the list.
    pub fn for_each_operand(&self, mut visit: impl FnMut(Value)) {
        match self {
            Terminator::Branch { lhs, rhs, .. } => {
                visit(*lhs);
                visit(*rhs);
            }
            Terminator::Switch { value, .. } | Terminator::ReturnValue(value) => visit(*value),
            Terminator::Unset | Terminator::Jump(_) | Terminator::Return(_) => {}
        }
        self.for_each_target(|t| t.args.iter().copied().for_each(&mut visit));
    }

    /// The values the terminator reads (comparison operands and edge arguments).
    pub fn operands(&self) -> Vec<Value> {
        let mut out = Vec::new();
        self.for_each_operand(|v| out.push(v));
        out
    }
}

/// A basic block: parameters, instructions in order, and a terminator.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct BlockData {
    pub params: ThinVec<Value>,
    pub insts: Insts,
    pub term: Terminator,
}

/// A filter function. `Block(0)` is the entry block.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Function {
    pub blocks: Vec<BlockData>,
    /// The instruction defining each value, indexed by `Value`.
    pub values: Vec<Inst>,
    /// The pattern sets [`Inst::Contains`] calls search.
    pub patterns: Vec<Arc<PatternSet>>,
    /// The value sets [`Inst::Member`] calls look keys up in.
    pub sets: Vec<Arc<ValueSet>>,
}

impl Function {
    pub fn new() -> Function {
        Function::default()
    }

    /// The entry block.
    pub const ENTRY: Block = Block(0);

    pub fn create_block(&mut self) -> Block {
        self.blocks.push(BlockData::default());
        Block(self.blocks.len() as u32 - 1)
    }

    pub fn block(&self, b: Block) -> &BlockData {
        &self.blocks[b.index()]
    }

    pub fn block_mut(&mut self, b: Block) -> &mut BlockData {
        &mut self.blocks[b.index()]
    }

    pub fn inst(&self, v: Value) -> &Inst {
        &self.values[v.index()]
    }

    /// How many operands of instructions and terminators read each value, indexed by
    /// `Value` (every block counts, reached or not).
    pub fn use_counts(&self) -> Vec<u32> {
        let mut uses = vec![0u32; self.values.len()];
        for data in &self.blocks {
            let mut count = |v: Value| uses[v.index()] += 1;
            for &v in &data.insts {
                self.inst(v).for_each_operand(&mut count);
            }
            data.term.for_each_operand(count);
        }
        uses
    }

    /// Appends an instruction to `block` and returns the value it defines.
    pub fn push(&mut self, block: Block, inst: Inst) -> Value {
        let v = Value(self.values.len() as u32);
        self.values.push(inst);
        self.blocks[block.index()].insts.push(v);
        v
    }

    /// Adds a parameter to `block`.
    pub fn add_param(&mut self, block: Block) -> Value {
        let v = Value(self.values.len() as u32);
        self.values.push(Inst::Param(block));
        self.blocks[block.index()].params.push(v);
        v
    }

    /// Splits `block` after its instruction at position `at`, which leaves the block: a new
    /// block, returned, takes the instructions after it and the terminator, and the value the
    /// instruction defined becomes that block's parameter, so every use keeps its name. `block`
    /// is left without a terminator, for the caller to compute the value in its place.
    pub fn split_at_value(&mut self, block: Block, at: usize) -> Block {
        let rest = self.create_block();
        let tail: Insts = self.block_mut(block).insts.drain(at + 1..).collect();
        let v = self
            .block_mut(block)
            .insts
            .pop()
            .expect("the instruction at `at`");
        let term = std::mem::take(&mut self.block_mut(block).term);
        let data = self.block_mut(rest);
        data.insts = tail;
        data.term = term;
        data.params.push(v);
        self.values[v.index()] = Inst::Param(rest);
        rest
    }

    pub fn set_term(&mut self, block: Block, term: Terminator) {
        self.blocks[block.index()].term = term;
    }

    pub fn iconst(&mut self, block: Block, k: u32) -> Value {
        self.push(block, Inst::Const(k))
    }

    /// The constant a value is defined as, if it is a constant.
    pub fn const_value(&self, v: Value) -> Option<u32> {
        match self.values[v.index()] {
            Inst::Const(k) => Some(k),
            _ => None,
        }
    }

    /// The first coprocessor call among the blocks' instructions, if any (values no block
    /// lists, left behind by a pass, do not count).
    pub fn first_call(&self) -> Option<Value> {
        self.blocks
            .iter()
            .flat_map(|b| &b.insts)
            .copied()
            .find(|&v| self.inst(v).is_call())
    }

    /// Number of instructions (excluding parameters) over all blocks.
    pub fn inst_count(&self) -> usize {
        self.blocks.iter().map(|b| b.insts.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swapped_comparisons_agree() {
        for c in CmpOp::ALL {
            for (a, b) in [(1, 2), (2, 1), (3, 3), (0, 7)] {
                assert_eq!(c.eval(a, b), c.swapped().eval(b, a), "{c:?} {a} {b}");
            }
        }
    }

    #[test]
    fn binop_edge_cases() {
        assert_eq!(BinOp::Div.apply(7, 0), None);
        assert_eq!(BinOp::Mod.apply(7, 0), None);
        assert_eq!(BinOp::Shl.apply(1, 32), Some(0));
        assert_eq!(BinOp::Shr.apply(u32::MAX, 31), Some(1));
        assert_eq!(BinOp::Sub.apply(0, 1), Some(u32::MAX));
    }

    /// One instruction of each kind but `Contains` and `Protochain`, reading `Value(1..=3)`.
    fn sample_insts() -> Vec<Inst> {
        let (a, b, c) = (Value(1), Value(2), Value(3));
        vec![
            Inst::Const(4),
            Inst::WireLen,
            Inst::Param(Block(1)),
            Inst::Load {
                index: None,
                offset: 2,
                size: LoadSize::Word,
            },
            Inst::Load {
                index: Some(a),
                offset: 2,
                size: LoadSize::Byte,
            },
            Inst::Binary(BinOp::Sub, b, a),
            Inst::Neg(c),
            Inst::Member {
                set: 0,
                key: thin_vec![c, a, b],
            },
        ]
    }

    /// `same_up_to` with equality as the relation is `==`, and with a renaming it finds each
    /// instruction equal to its renamed copy and to nothing else.
    #[test]
    fn same_up_to_matches_operands_by_the_relation() {
        let insts = sample_insts();
        let shift = |v: Value| Value(v.0 + 10);
        for x in &insts {
            let mut renamed = x.clone();
            renamed.map_operands(shift);
            for y in &insts {
                assert_eq!(x.same_up_to(y, |p, q| p == q), x == y, "{x:?} {y:?}");
                let mut y_renamed = y.clone();
                y_renamed.map_operands(shift);
                assert_eq!(
                    x.same_up_to(&y_renamed, |p, q| shift(p) == q),
                    x == y,
                    "{x:?} {y:?}"
                );
            }
            let no_operands = x.operands().is_empty();
            assert_eq!(x.same_up_to(&renamed, |_, _| false), no_operands, "{x:?}");
        }
    }

    /// `for_each_operand` visits what `operands` lists, in order, for every kind.
    #[test]
    fn operands_visited_as_listed() {
        let (a, b, c) = (Value(1), Value(2), Value(3));
        let insts = sample_insts();
        for inst in &insts {
            let mut seen = Vec::new();
            inst.for_each_operand(|v| seen.push(v));
            assert_eq!(seen, inst.operands(), "{inst:?}");
        }
        let with_args = |block, args: &[Value]| Target {
            block: Block(block),
            args: ThinVec::from(args),
        };
        let terms = [
            Terminator::Unset,
            Terminator::Return(0),
            Terminator::ReturnValue(b),
            Terminator::Jump(with_args(1, &[a, b])),
            Terminator::Branch {
                op: CmpOp::Gt,
                lhs: c,
                rhs: a,
                then_: with_args(1, &[b]),
                else_: with_args(2, &[c, c]),
            },
            Terminator::Switch {
                value: a,
                cases: vec![(1, with_args(1, &[b])), (2, with_args(2, &[]))],
                default: with_args(3, &[c]),
            },
        ];
        // `operands` is built from `for_each_operand`, so the order is spelled out here.
        let expected: [&[Value]; 6] = [&[], &[], &[b], &[a, b], &[c, a, b, c, c], &[a, b, c]];
        for (term, want) in terms.iter().zip(expected) {
            let mut seen = Vec::new();
            term.for_each_operand(|v| seen.push(v));
            assert_eq!(seen, want, "{term:?}");
            assert_eq!(term.operands(), want, "{term:?}");
        }
    }
}
