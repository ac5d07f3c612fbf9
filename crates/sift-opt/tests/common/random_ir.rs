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
//! target (which includes this file by path). Every loop is bounded by a count drawn up front, so
//! an exhausted input (all zeros) still gives a small, valid function.

#![allow(dead_code)]

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

/// Gives one edge into a block with several incoming edges its own copy of everything reachable
/// from that block (at most 40 blocks), as lowering copies tests per path (`port 80` after `tcp`
/// and again after `udp`). The copy is entered only by that edge, and every value it uses from
/// outside is defined in a strict dominator of the original block (or in the copied region),
/// so the result is valid.
pub fn duplicate_tail(e: &mut impl Entropy, f: &mut Function) {
    let live = f.reverse_postorder();
    let mut edges: Vec<(Block, usize, Block)> = Vec::new();
    let mut incoming = vec![0usize; f.blocks.len()];
    for &b in &live {
        for (i, t) in f.block(b).term.targets().into_iter().enumerate() {
            edges.push((b, i, t.block));
            incoming[t.block.index()] += 1;
        }
    }
    edges.retain(|&(_, _, t)| incoming[t.index()] >= 2);
    if edges.is_empty() {
        return;
    }
    let (pred, which, head) = edges[e.below(edges.len())];
    // The region: every block reachable from `head`.
    let mut region = vec![head];
    let mut in_region = vec![false; f.blocks.len()];
    in_region[head.index()] = true;
    let mut i = 0;
    while i < region.len() {
        for t in f.block(region[i]).term.targets() {
            if !in_region[t.block.index()] {
                in_region[t.block.index()] = true;
                region.push(t.block);
            }
        }
        i += 1;
        if region.len() > 40 {
            return;
        }
    }
    let mut block_map: HashMap<Block, Block> = HashMap::new();
    for &b in &region {
        block_map.insert(b, f.create_block());
    }
    // Allocate every copied value first: operands may be defined later in `region` order.
    let mut value_map: HashMap<Value, Value> = HashMap::new();
    for &b in &region {
        let data = f.block(b).clone();
        for &v in data.params.iter().chain(&data.insts) {
            let copy = Value(f.values.len() as u32);
            f.values.push(Inst::Const(0));
            value_map.insert(v, copy);
        }
    }
    let map = |v: Value| value_map.get(&v).copied().unwrap_or(v);
    for &b in &region {
        let data = f.block(b).clone();
        let nb = block_map[&b];
        for &v in data.params.iter().chain(&data.insts) {
            let inst = match f.inst(v).clone() {
                Inst::Param(_) => Inst::Param(nb),
                Inst::Load {
                    index,
                    offset,
                    size,
                } => Inst::Load {
                    index: index.map(map),
                    offset,
                    size,
                },
                Inst::Binary(op, a, c) => Inst::Binary(op, map(a), map(c)),
                Inst::Neg(a) => Inst::Neg(map(a)),
                Inst::Protochain {
                    chain,
                    base,
                    proto,
                    offset,
                    target,
                } => Inst::Protochain {
                    chain,
                    base,
                    proto: map(proto),
                    offset: map(offset),
                    target,
                },
                other => other,
            };
            f.values[map(v).index()] = inst;
        }
        let mut term = data.term.clone();
        match &mut term {
            Terminator::Branch { lhs, rhs, .. } => {
                *lhs = map(*lhs);
                *rhs = map(*rhs);
            }
            Terminator::Switch { value, .. } | Terminator::ReturnValue(value) => {
                *value = map(*value)
            }
            _ => {}
        }
        for t in term.targets_mut() {
            t.block = block_map[&t.block];
            for a in &mut t.args {
                *a = map(*a);
            }
        }
        let copy = f.block_mut(nb);
        copy.params = data.params.iter().map(|&v| map(v)).collect();
        copy.insts = data.insts.iter().map(|&v| map(v)).collect();
        copy.term = term;
    }
    let copy_head = block_map[&head];
    if let Some(t) = f.block_mut(pred).term.targets_mut().into_iter().nth(which) {
        t.block = copy_head;
    }
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

    // ---- skeletons ----

    /// A random acyclic graph: block `i` only targets blocks after it.
    fn random_skeleton(&mut self, size: Size) -> Vec<Node> {
        let n = 1 + self.e.below(size.blocks);
        let mut nodes = Vec::with_capacity(n);
        for i in 0..n {
            let params = if i == 0 || !self.e.chance(25) {
                0
            } else {
                1 + self.e.below(2)
            };
            let later = n - i - 1;
            let kind = if later == 0 {
                if self.e.chance(70) {
                    Kind::Return(self.return_constant())
                } else {
                    Kind::ReturnValue
                }
            } else {
                match self.e.below(20) {
                    0..=8 => Kind::Branch(self.maybe_field(50)),
                    9..=10 => Kind::Switch(self.maybe_field(50)),
                    11..=13 => Kind::Jump,
                    14..=17 => Kind::Return(self.return_constant()),
                    _ => Kind::ReturnValue,
                }
            };
            let count = match kind {
                Kind::Branch(_) => 2,
                Kind::Switch(_) => 2 + self.e.below(4),
                Kind::Jump => 1,
                Kind::Return(_) | Kind::ReturnValue => 0,
            };
            let targets = (0..count)
                .map(|_| {
                    let reach = if self.e.chance(70) {
                        later.min(3)
                    } else {
                        later
                    };
                    i + 1 + self.e.below(reach)
                })
                .collect();
            nodes.push(Node {
                params,
                kind,
                targets,
                clean: false,
            });
        }
        nodes
    }

    fn maybe_field(&mut self, percent: u32) -> Option<usize> {
        if self.e.chance(percent) {
            Some(self.e.below(self.fields.len()))
        } else {
            None
        }
    }

    fn return_constant(&mut self) -> u32 {
        if self.e.chance(30) {
            0
        } else {
            self.e.pick(&ACCEPT)
        }
    }

    /// A predicate tree laid out as lowering does. Nodes are allocated targets first, so
    /// reversing the allocation order numbers them topologically.
    fn filter_skeleton(&mut self, size: Size) -> Vec<Node> {
        let mut alloc: Vec<Node> = Vec::new();
        let reject = push(&mut alloc, 0, Kind::Return(0), vec![]);
        let accept_kind = if self.e.chance(85) {
            Kind::Return(self.e.pick(&ACCEPT))
        } else {
            Kind::ReturnValue
        };
        let accept = push(&mut alloc, 0, accept_kind, vec![]);
        let mut budget = 4 + self.e.below(size.tests.saturating_sub(4));
        let root = self.predicate(&mut alloc, size.depth, &mut budget, accept, reject);
        // The root must become block 0, so it must have been allocated last.
        if root + 1 != alloc.len() {
            push(&mut alloc, 0, Kind::Jump, vec![root]);
        }
        let n = alloc.len();
        alloc
            .into_iter()
            .rev()
            .map(|mut node| {
                for t in &mut node.targets {
                    *t = n - 1 - *t;
                }
                node
            })
            .collect()
    }

    /// Allocates the blocks of a random predicate going to `t` when it holds and to `f`
    /// otherwise; returns its entry.
    fn predicate(
        &mut self,
        alloc: &mut Vec<Node>,
        depth: usize,
        budget: &mut usize,
        t: usize,
        f: usize,
    ) -> usize {
        if depth == 0 || *budget <= 1 {
            return self.atom(alloc, budget, None, t, f);
        }
        match self.e.below(16) {
            0..=2 => self.atom(alloc, budget, None, t, f),
            3 => self.predicate(alloc, depth - 1, budget, f, t), // not
            choice @ 4..=9 => {
                // `and` (4..=6) or `or` (7..=9) of 2..=4 operands, folded right to left.
                let is_and = choice <= 6;
                let k = 2 + self.e.below(3);
                let mut cur = self.predicate(alloc, depth - 1, budget, t, f);
                for _ in 1..k {
                    cur = if is_and {
                        self.predicate(alloc, depth - 1, budget, cur, f)
                    } else {
                        self.predicate(alloc, depth - 1, budget, t, cur)
                    };
                }
                cur
            }
            10..=11 => {
                // An equality chain on one field: a lookup table in the making.
                let field = Some(self.e.below(self.fields.len()));
                let k = 2 + self.e.below(6);
                let clean = self.e.chance(50);
                let mut cur = f;
                for i in 0..k {
                    cur = self.atom(alloc, budget, field, t, cur);
                    // The head (allocated last) loads the field for the others.
                    alloc[cur].clean = clean && i + 1 < k;
                }
                cur
            }
            12 => {
                // The same test twice on one path (redundant predicate).
                let field = Some(self.e.below(self.fields.len()));
                let second = self.atom(alloc, budget, field, t, f);
                self.atom(alloc, budget, field, second, f)
            }
            13..=14 => {
                // A diamond joining in a block parameter: `join(p)` tests something (often a
                // load indexed by `p`), its predecessors pass different values.
                let join_rest = self.predicate(alloc, depth - 1, budget, t, f);
                let join = push(alloc, 1, Kind::Branch(None), vec![join_rest, f]);
                *budget = budget.saturating_sub(1);
                if self.e.chance(50) {
                    let left = push(alloc, 0, Kind::Jump, vec![join]);
                    let right = push(alloc, 0, Kind::Jump, vec![join]);
                    push(
                        alloc,
                        0,
                        Kind::Branch(self.maybe_field(70)),
                        vec![left, right],
                    )
                } else {
                    // Both edges of one branch to the join, with different arguments.
                    push(
                        alloc,
                        0,
                        Kind::Branch(self.maybe_field(70)),
                        vec![join, join],
                    )
                }
            }
            _ => {
                // A switch on a field with predicates behind its cases.
                let field = Some(self.e.below(self.fields.len()));
                let cases = 1 + self.e.below(4);
                let mut targets = Vec::new();
                for _ in 0..cases {
                    let target = if self.e.chance(50) {
                        t
                    } else {
                        self.predicate(alloc, depth - 1, budget, t, f)
                    };
                    targets.push(target);
                }
                targets.push(f);
                *budget = budget.saturating_sub(1);
                push(alloc, 0, Kind::Switch(field), targets)
            }
        }
    }

    fn atom(
        &mut self,
        alloc: &mut Vec<Node>,
        budget: &mut usize,
        field: Option<usize>,
        t: usize,
        f: usize,
    ) -> usize {
        *budget = budget.saturating_sub(1);
        let field = field.or_else(|| self.maybe_field(85));
        push(alloc, 0, Kind::Branch(field), vec![t, f])
    }

    // ---- filling ----

    fn fill(mut self, nodes: Vec<Node>) -> Program {
        for node in &nodes {
            let b = self.f.create_block();
            for _ in 0..node.params {
                self.f.add_param(b);
            }
        }
        // Placeholder terminators with the real edges, for the dominator tree.
        for (i, node) in nodes.iter().enumerate() {
            let cases = node
                .targets
                .iter()
                .enumerate()
                .map(|(k, &t)| (k as u32, Target::from(Block(t as u32))))
                .collect();
            let term = if node.targets.is_empty() {
                Terminator::Return(0)
            } else {
                Terminator::Switch {
                    value: Value(0),
                    cases,
                    default: Block(node.targets[0] as u32).into(),
                }
            };
            self.f.set_term(Block(i as u32), term);
        }
        let (idom, _) = sift_ir::verify::dominators(&self.f);
        if self.e.chance(40) {
            // Every key defined once in the entry, as value numbering hoists constants.
            let mut keys: Vec<u32> = self.fields.iter().flat_map(|f| f.keys.clone()).collect();
            keys.sort_unstable();
            keys.dedup();
            for k in keys {
                self.f.iconst(Function::ENTRY, k);
            }
        }
        for (i, node) in nodes.iter().enumerate() {
            let b = Block(i as u32);
            let mut avail: Vec<Value> = Vec::new();
            let mut d = idom[i];
            while let Some(x) = d {
                let data = self.f.block(x);
                avail.extend(data.params.iter().chain(&data.insts));
                d = idom[x.index()];
            }
            avail.extend(self.f.block(b).params.clone());
            self.fill_block(b, node, &nodes, &mut avail);
        }
        Program {
            function: self.f,
            fields: self.fields,
            header_lengths: self.header_lengths,
        }
    }

    fn fill_block(&mut self, b: Block, node: &Node, nodes: &[Node], avail: &mut Vec<Value>) {
        let filler = if node.clean {
            0
        } else if matches!(node.kind, Kind::Branch(Some(_)) | Kind::Switch(Some(_))) {
            self.e.below(3)
        } else {
            self.e.below(6)
        };
        let params = if node.clean {
            Vec::new()
        } else {
            self.f.block(b).params.clone()
        };
        for p in params {
            if self.e.chance(60) {
                // A load indexed by the joined value, as after a variable-length header.
                let offset = self.e.below(24) as u32;
                let size = self
                    .e
                    .pick(&[LoadSize::Byte, LoadSize::Half, LoadSize::Word]);
                let v = self.f.push(
                    b,
                    Inst::Load {
                        index: Some(p),
                        offset,
                        size,
                    },
                );
                avail.push(v);
            }
        }
        for _ in 0..filler {
            let v = self.random_inst(b, avail);
            avail.push(v);
        }
        let mut targets = Vec::new();
        for &t in &node.targets {
            let args = (0..nodes[t].params)
                .map(|_| self.argument(b, avail))
                .collect();
            targets.push(Target {
                block: Block(t as u32),
                args,
            });
        }
        let term = match node.kind {
            Kind::Return(k) => Terminator::Return(k),
            Kind::ReturnValue => Terminator::ReturnValue(self.operand(b, avail)),
            Kind::Jump => Terminator::Jump(targets.pop().expect("a jump has a target")),
            Kind::Branch(field) => {
                let (op, lhs, rhs) = self.test(b, avail, field, node.clean);
                let else_ = targets.pop().expect("else");
                let then_ = targets.pop().expect("then");
                Terminator::Branch {
                    op,
                    lhs,
                    rhs,
                    then_,
                    else_,
                }
            }
            Kind::Switch(field) => {
                let default = targets.pop().expect("default");
                let value = match field {
                    Some(fi) => self.field_value(b, avail, fi),
                    None => self.operand(b, avail),
                };
                let mut cases: Vec<(u32, Target)> = Vec::new();
                for t in targets {
                    let mut key = match field {
                        Some(fi) if self.e.chance(80) => self.e.pick(&self.fields[fi].keys),
                        _ => self.constant(),
                    };
                    // Every edge of the skeleton must stay (the dominators were computed with
                    // it), so a repeated key is moved rather than dropped.
                    while cases.iter().any(|(k, _)| *k == key) {
                        key = key.wrapping_add(1);
                    }
                    cases.push((key, t));
                }
                Terminator::Switch {
                    value,
                    cases,
                    default,
                }
            }
        };
        self.f.set_term(b, term);
    }

    /// A comparison: on a field against one of its keys, or on anything.
    fn test(
        &mut self,
        b: Block,
        avail: &mut Vec<Value>,
        field: Option<usize>,
        clean: bool,
    ) -> (CmpOp, Value, Value) {
        let Some(fi) = field else {
            let op = self.e.pick(&CmpOp::ALL);
            let lhs = self.operand(b, avail);
            let rhs = self.operand(b, avail);
            return (op, lhs, rhs);
        };
        if clean {
            let loaded = avail
                .iter()
                .find(|v| self.field_of.get(v) == Some(&fi))
                .copied();
            let key = self.e.pick(&self.fields[fi].keys);
            let k = avail
                .iter()
                .find(|&&v| self.f.const_value(v) == Some(key))
                .copied();
            if let (Some(lhs), Some(rhs)) = (loaded, k) {
                let op = if self.e.chance(90) {
                    CmpOp::Eq
                } else {
                    CmpOp::Ne
                };
                return (op, lhs, rhs);
            }
        }
        let mut lhs = self.field_value(b, avail, fi);
        let key = self.e.pick(&self.fields[fi].keys);
        let op = self.e.weighted(&[
            (12, CmpOp::Eq),
            (2, CmpOp::Ne),
            (2, CmpOp::Gt),
            (2, CmpOp::Ge),
            (2, CmpOp::Lt),
            (2, CmpOp::Le),
            (3, CmpOp::Set),
        ]);
        if op != CmpOp::Set && self.e.chance(15) {
            // A masked field, as `tcp[13] & 2 = 2` or `ip[6:2] & 0x1fff = 0`.
            let mask = self.e.pick(&[0xf, 0xf0, 0x1fff, 0x3, key, 0]);
            let m = self.f.iconst(b, mask);
            lhs = self.f.push(b, Inst::Binary(BinOp::And, lhs, m));
            avail.push(lhs);
        } else if op != CmpOp::Set && self.e.chance(10) {
            // Arithmetic on the field, as `len - 1 = 4321` (which wraps for len 0), compared
            // with the key moved the same way, so that packets carrying the key take both edges.
            let arith = self.e.pick(&[BinOp::Add, BinOp::Sub, BinOp::Xor]);
            let c = self.e.pick(&[1, 13, 0xffff_fff3, key]);
            let moved = arith.apply(key, c).expect("add, sub and xor are total");
            let key = if self.e.chance(80) { moved } else { key };
            let c = self.f.iconst(b, c);
            lhs = self.f.push(b, Inst::Binary(arith, lhs, c));
            avail.push(lhs);
            let rhs = self.reuse_or_const(b, avail, key);
            return (op, lhs, rhs);
        }
        let rhs = self.reuse_or_const(b, avail, key);
        (op, lhs, rhs)
    }

    /// A load of field `fi`: an available one, or a new load (computing its header length
    /// first if needed).
    fn field_value(&mut self, b: Block, avail: &mut Vec<Value>, fi: usize) -> Value {
        if self.e.chance(50) {
            if let Some(&v) = avail.iter().find(|v| self.field_of.get(v) == Some(&fi)) {
                return v;
            }
        }
        let field = self.fields[fi].clone();
        let index = field.header.map(|h| self.header_length(b, avail, h));
        let v = self.f.push(
            b,
            Inst::Load {
                index,
                offset: field.offset,
                size: field.size,
            },
        );
        self.field_of.insert(v, fi);
        avail.push(v);
        v
    }

    /// `(load.b [at] & 15) << 2` (or an equivalent spelling): an available one or a new one.
    fn header_length(&mut self, b: Block, avail: &mut Vec<Value>, h: usize) -> Value {
        if self.e.chance(60) {
            if let Some(&v) = avail.iter().find(|v| self.header_of.get(v) == Some(&h)) {
                return v;
            }
        }
        let at = self.header_lengths[h];
        let byte = self.f.push(
            b,
            Inst::Load {
                index: None,
                offset: at,
                size: LoadSize::Byte,
            },
        );
        let fifteen = self.f.iconst(b, 15);
        let low = self.f.push(b, Inst::Binary(BinOp::And, byte, fifteen));
        let v = if self.e.chance(70) {
            let two = self.f.iconst(b, 2);
            self.f.push(b, Inst::Binary(BinOp::Shl, low, two))
        } else {
            let four = self.f.iconst(b, 4);
            self.f.push(b, Inst::Binary(BinOp::Mul, low, four))
        };
        avail.extend([byte, fifteen, low, v]);
        self.header_of.insert(v, h);
        v
    }

    /// The constant `k`: an available definition of it, or a new one.
    fn reuse_or_const(&mut self, b: Block, avail: &mut Vec<Value>, k: u32) -> Value {
        if self.e.chance(30) {
            if let Some(&v) = avail.iter().find(|&&v| self.f.const_value(v) == Some(k)) {
                return v;
            }
        }
        let v = self.f.iconst(b, k);
        avail.push(v);
        v
    }

    fn constant(&mut self) -> u32 {
        match self.e.below(4) {
            0 => self.e.pick(&SPECIAL),
            1 => {
                let fi = self.e.below(self.fields.len());
                self.e.pick(&self.fields[fi].keys)
            }
            2 => self.e.below(64) as u32,
            _ => self.e.word(),
        }
    }

    /// Any value: mostly an available one, else a new constant or load.
    fn operand(&mut self, b: Block, avail: &mut Vec<Value>) -> Value {
        if !avail.is_empty() && self.e.chance(70) {
            return self.e.pick(avail);
        }
        let v = self.random_inst(b, avail);
        avail.push(v);
        v
    }

    /// An edge argument: a header length, a field, a constant or anything.
    fn argument(&mut self, b: Block, avail: &mut Vec<Value>) -> Value {
        match self.e.below(4) {
            0 if !self.header_lengths.is_empty() => {
                let h = self.e.below(self.header_lengths.len());
                self.header_length(b, avail, h)
            }
            1 => {
                let fi = self.e.below(self.fields.len());
                self.field_value(b, avail, fi)
            }
            2 => {
                let k = self.constant();
                self.reuse_or_const(b, avail, k)
            }
            _ => self.operand(b, avail),
        }
    }

    /// One random instruction appended to `b`.
    fn random_inst(&mut self, b: Block, avail: &mut Vec<Value>) -> Value {
        let pick = |e: &mut E, avail: &[Value]| -> Option<Value> {
            (!avail.is_empty()).then(|| e.pick(avail))
        };
        match self.e.below(20) {
            0..=3 => {
                let k = self.constant();
                self.f.iconst(b, k)
            }
            4 => self.f.push(b, Inst::WireLen),
            5..=7 => {
                let fi = self.e.below(self.fields.len());
                self.field_value(b, avail, fi)
            }
            8..=9 => {
                let index = if self.e.chance(50) {
                    pick(self.e, avail)
                } else {
                    None
                };
                let offset = if self.e.chance(5) {
                    u32::MAX - self.e.below(8) as u32
                } else {
                    self.e.below(72) as u32
                };
                let size = self
                    .e
                    .pick(&[LoadSize::Byte, LoadSize::Half, LoadSize::Word]);
                self.f.push(
                    b,
                    Inst::Load {
                        index,
                        offset,
                        size,
                    },
                )
            }
            10..=17 => {
                let op = self.e.pick(&BinOp::ALL);
                let lhs = match pick(self.e, avail) {
                    Some(v) => v,
                    None => {
                        let k = self.constant();
                        self.f.iconst(b, k)
                    }
                };
                let rhs = match pick(self.e, avail) {
                    Some(v) if self.e.chance(40) => v,
                    _ => {
                        let k = self.constant();
                        self.reuse_or_const(b, avail, k)
                    }
                };
                self.f.push(b, Inst::Binary(op, lhs, rhs))
            }
            18 => match pick(self.e, avail) {
                Some(v) => self.f.push(b, Inst::Neg(v)),
                None => self.f.push(b, Inst::WireLen),
            },
            19 if self.e.chance(40) => {
                // A header-chain walk: protocols the walk steps over are likely.
                let protocols = [0, 43, 44, 51, 59, 60, 6, 17];
                let proto = match pick(self.e, avail) {
                    Some(v) if self.e.chance(50) => v,
                    _ => {
                        let k = self.e.pick(&protocols);
                        self.f.iconst(b, k)
                    }
                };
                let offset = match pick(self.e, avail) {
                    Some(v) if self.e.chance(30) => v,
                    _ => {
                        let k = self.e.below(48) as u32;
                        self.f.iconst(b, k)
                    }
                };
                let inst = Inst::Protochain {
                    chain: self.e.pick(&[Chain::Ip, Chain::Ip6]),
                    base: self.e.below(24) as u32,
                    proto,
                    offset,
                    target: self.e.pick(&protocols),
                };
                self.f.push(b, inst)
            }
            _ if !self.header_lengths.is_empty() => {
                let h = self.e.below(self.header_lengths.len());
                self.header_length(b, avail, h)
            }
            _ => self.f.push(b, Inst::WireLen),
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
