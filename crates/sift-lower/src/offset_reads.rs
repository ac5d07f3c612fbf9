//! Reads of `geneve`'s offsets on paths where that `geneve` did not match.
//!
//! `geneve` keeps the inner packet's offsets in three scratch registers, and every later
//! primitive reads them, also on paths where that `geneve` did not match (`geneve or ip`,
//! `not geneve and tcp`). There the read sees what the path last stored in the register: an
//! earlier arithmetic value libpcap gave the same register, or, when the path stored nothing,
//! memory libpcap never initialized. sift defines that memory as 0 (libpcap's own result
//! depends on what its stack held). [`resolve`] rewrites each such read to the value it sees:
//! it follows the stores to the register through the finished graph and joins the values that
//! differ between incoming paths at block parameters.
//!
//! `protochain`'s loop saves the protocol of each header it steps to in its register, so after a
//! walk that took a step the register holds the protocol the walk stopped at, and otherwise what
//! it held before; that choice is computed without branches where a read needs it
//! ([`walk_saved`]).

use sift_ir::protochain::{Chain, IPPROTO_AH, IPV6_EXTENSIONS};
use sift_ir::verify::{dominators, DominatorTree};
use sift_ir::{BinOp, Block, Function, Inst, Value};

use crate::gen::OffsetUse;
use crate::scratch::{Register, RegisterWrite, Stored};

/// What a register holds at some point of some block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    /// Nothing stored yet: libpcap's uninitialized memory, 0 for sift.
    Zero,
    Value(Value),
    /// Different values on different incoming edges: the block's parameter for the register.
    Joined(Block),
    /// What the `protochain` walk in this block left: see [`Stored::Walk`].
    Walk(Block),
}

/// Rewrites every read in `uses` that its `geneve` does not dominate to the value the read
/// sees. `f` is the finished function, whose blocks are in topological order from block 0;
/// `renumber` maps the blocks that `writes` and `uses` name to its blocks (`None`: never runs).
pub(crate) fn resolve(
    f: &mut Function,
    renumber: &[Option<Block>],
    writes: &[RegisterWrite],
    uses: &[OffsetUse],
) {
    if uses.is_empty() {
        return;
    }
    let tree = DominatorTree::new(&dominators(f).0);
    // (register, block reading it, value the read names) for each read to rewrite.
    let mut reads: Vec<(Register, Block, Value)> = Vec::new();
    for u in uses {
        let Some(used_in) = renumber[u.used_in.index()] else {
            continue;
        };
        let defined =
            renumber[u.offset.defined_in.index()].is_some_and(|d| tree.dominates(d, used_in));
        if !defined {
            reads.push((u.offset.register, used_in, u.offset.value));
        }
    }
    let mut registers: Vec<Register> = reads.iter().map(|r| r.0).collect();
    registers.sort_unstable();
    registers.dedup();
    for register in registers {
        let mut flow = Flow::new(f, renumber, writes, register);
        for &(_, block, named) in reads.iter().filter(|r| r.0 == register) {
            let held = flow.entry[block.index()];
            flow.materialize(f, held);
            let seen = match held {
                Held::Zero => zero_at_start(f, block),
                held => flow.value(f, block, held),
            };
            let rename = |v: Value| if v == named { seen } else { v };
            for i in 0..f.blocks[block.index()].insts.len() {
                let v = f.blocks[block.index()].insts[i];
                f.values[v.index()].map_operands(rename);
            }
            f.blocks[block.index()].term.map_operands(rename);
        }
    }
}

/// What one register holds on entry to each block, and the values materialized for it so far.
struct Flow {
    entry: Vec<Held>,
    exit: Vec<Held>,
    preds: Vec<Vec<Block>>,
    /// The walk stored in each block that has one.
    walks: Vec<Option<Stored>>,
    /// The parameter of each [`Held::Joined`] block, and the saved protocol of each
    /// [`Held::Walk`] block, once materialized.
    values: Vec<Option<Value>>,
}

impl Flow {
    fn new(
        f: &Function,
        renumber: &[Option<Block>],
        writes: &[RegisterWrite],
        register: Register,
    ) -> Flow {
        let n = f.blocks.len();
        let mut last_write = vec![None; n];
        let mut walks = vec![None; n];
        for w in writes.iter().filter(|w| w.register == register) {
            if let Some(b) = renumber[w.block.index()] {
                last_write[b.index()] = Some(match w.value {
                    Stored::Value(v) => Held::Value(v),
                    Stored::Walk { .. } => {
                        walks[b.index()] = Some(w.value);
                        Held::Walk(b)
                    }
                });
            }
        }
        let mut preds = vec![Vec::new(); n];
        for (b, data) in f.blocks.iter().enumerate() {
            for t in data.term.targets() {
                preds[t.block.index()].push(Block(b as u32));
            }
        }
        let mut entry = vec![Held::Zero; n];
        let mut exit = vec![Held::Zero; n];
        // Every edge goes forward, so the predecessors of a block are done before it.
        for b in 0..n {
            if let Some((first, rest)) = preds[b].split_first() {
                let first = exit[first.index()];
                entry[b] = if rest.iter().all(|p| exit[p.index()] == first) {
                    first
                } else {
                    Held::Joined(Block(b as u32))
                };
            }
            exit[b] = last_write[b].unwrap_or(entry[b]);
        }
        Flow {
            entry,
            exit,
            preds,
            walks,
            values: vec![None; n],
        }
    }

    /// Materializes what `held` depends on: block parameters for the joins, with the argument
    /// every incoming edge passes, and the saved protocol of the walks.
    fn materialize(&mut self, f: &mut Function, held: Held) {
        let mut pending = vec![held];
        let mut joins = Vec::new();
        let mut walks = Vec::new();
        while let Some(h) = pending.pop() {
            match h {
                Held::Joined(b) if self.values[b.index()].is_none() => {
                    self.values[b.index()] = Some(f.add_param(b));
                    joins.push(b);
                    pending.extend(self.preds[b.index()].iter().map(|p| self.exit[p.index()]));
                }
                Held::Walk(b) if !walks.contains(&b) && self.values[b.index()].is_none() => {
                    walks.push(b);
                    pending.push(self.entry[b.index()]);
                }
                Held::Zero | Held::Value(_) | Held::Joined(_) | Held::Walk(_) => {}
            }
        }
        // Blocks are in topological order, so a walk's earlier walks come first.
        walks.sort_unstable();
        for b in walks {
            let before = self.value(f, b, self.entry[b.index()]);
            let Some(Stored::Walk {
                chain,
                first,
                last,
                target,
            }) = self.walks[b.index()]
            else {
                unreachable!("a walk block has its walk")
            };
            self.values[b.index()] = Some(walk_saved(f, b, chain, first, last, target, before));
        }
        for b in joins {
            for &p in &self.preds[b.index()] {
                let arg = self.value(f, p, self.exit[p.index()]);
                // `preds` lists `p` once per edge; each visit extends the first edge to `b`
                // that still lacks the argument.
                let want = f.blocks[b.index()].params.len();
                let edge = f.blocks[p.index()]
                    .term
                    .targets_mut()
                    .into_iter()
                    .find(|t| t.block == b && t.args.len() < want)
                    .expect("one edge per listed predecessor");
                edge.args.push(arg);
            }
        }
    }

    /// The value `held` names in `block` (a zero is defined there), once materialized.
    fn value(&self, f: &mut Function, block: Block, held: Held) -> Value {
        match held {
            Held::Zero => f.iconst(block, 0),
            Held::Value(v) => v,
            Held::Joined(b) | Held::Walk(b) => self.values[b.index()].expect("materialized"),
        }
    }
}

/// What `protochain`'s register holds after the walk in `block` from protocol `first` stopped
/// at `last`: `last` if the walk took a step (it steps over `first` unless that is `target` or
/// a protocol it does not walk), else `before`. Computed without branches, as
/// `before ^ ((before ^ last) & -stepped)` with `stepped` 0 or 1.
fn walk_saved(
    f: &mut Function,
    block: Block,
    chain: Chain,
    first: Value,
    last: Value,
    target: u32,
    before: Value,
) -> Value {
    let walked: &[u32] = match chain {
        Chain::Ip => &[],
        Chain::Ip6 => &IPV6_EXTENSIONS,
    };
    let mut stepped = None;
    for &proto in walked.iter().chain(&[IPPROTO_AH]).filter(|&&p| p != target) {
        let is = equals(f, block, first, proto);
        stepped = Some(match stepped {
            None => is,
            Some(s) => f.push(block, Inst::Binary(BinOp::Or, s, is)),
        });
    }
    let Some(stepped) = stepped else {
        return before;
    };
    let mask = f.push(block, Inst::Neg(stepped));
    let differ = f.push(block, Inst::Binary(BinOp::Xor, before, last));
    let change = f.push(block, Inst::Binary(BinOp::And, differ, mask));
    f.push(block, Inst::Binary(BinOp::Xor, before, change))
}

/// 1 if `v == k`, else 0, without a branch: `v ^ k` is zero exactly when `(d | -d)` has its top
/// bit clear.
fn equals(f: &mut Function, block: Block, v: Value, k: u32) -> Value {
    let k = f.iconst(block, k);
    let d = f.push(block, Inst::Binary(BinOp::Xor, v, k));
    let minus = f.push(block, Inst::Neg(d));
    let either = f.push(block, Inst::Binary(BinOp::Or, d, minus));
    let c31 = f.iconst(block, 31);
    let nonzero = f.push(block, Inst::Binary(BinOp::Shr, either, c31));
    let one = f.iconst(block, 1);
    f.push(block, Inst::Binary(BinOp::Xor, nonzero, one))
}

/// A constant 0 defined at the start of `block`, before the reads in it.
fn zero_at_start(f: &mut Function, block: Block) -> Value {
    let v = Value(f.values.len() as u32);
    f.values.push(Inst::Const(0));
    f.blocks[block.index()].insts.insert(0, v);
    v
}
