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
//! The one store sift cannot reproduce is `protochain`'s (its loop saves protocol numbers in
//! its register); a read that may see it is refused.

use sift_ir::verify::{dominators, DominatorTree};
use sift_ir::{Block, Function, Inst, Value};

use crate::gen::OffsetUse;
use crate::scratch::{Register, RegisterWrite};
use crate::LowerError;

/// What a register holds at some point of some block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    /// Nothing stored yet: libpcap's uninitialized memory, 0 for sift.
    Zero,
    Value(Value),
    /// A value sift does not compute.
    Unknown,
    /// Different values on different incoming edges: the block's parameter for the register.
    Joined(Block),
}

/// Rewrites every read in `uses` that its `geneve` does not dominate to the value the read
/// sees. `f` is the finished function, whose blocks are in topological order from block 0;
/// `renumber` maps the blocks that `writes` and `uses` name to its blocks (`None`: never runs).
pub(crate) fn resolve(
    f: &mut Function,
    renumber: &[Option<Block>],
    writes: &[RegisterWrite],
    uses: &[OffsetUse],
) -> Result<(), LowerError> {
    if uses.is_empty() {
        return Ok(());
    }
    let tree = DominatorTree::new(&dominators(f).0);
    // (register, block reading it, value the read names) for each read to rewrite.
    let mut reads: Vec<(Register, Block, Value, &OffsetUse)> = Vec::new();
    for u in uses {
        let Some(used_in) = renumber[u.used_in.index()] else {
            continue;
        };
        let defined =
            renumber[u.offset.defined_in.index()].is_some_and(|d| tree.dominates(d, used_in));
        if !defined {
            reads.push((u.offset.register, used_in, u.offset.value, u));
        }
    }
    let mut registers: Vec<Register> = reads.iter().map(|r| r.0).collect();
    registers.sort_unstable();
    registers.dedup();
    for register in registers {
        let flow = Flow::new(f, renumber, writes, register);
        let mut params = vec![None; f.blocks.len()];
        for &(_, block, _, u) in reads.iter().filter(|r| r.0 == register) {
            flow.materialize_joins(f, flow.entry[block.index()], &mut params)
                .map_err(|()| unknown_value(u))?;
        }
        for &(_, block, named, u) in reads.iter().filter(|r| r.0 == register) {
            let seen = match flow.entry[block.index()] {
                Held::Zero => zero_at_start(f, block),
                Held::Value(v) => v,
                Held::Joined(j) => params[j.index()].expect("materialized above"),
                Held::Unknown => return Err(unknown_value(u)),
            };
            let rename = |v: Value| if v == named { seen } else { v };
            for i in 0..f.blocks[block.index()].insts.len() {
                let v = f.blocks[block.index()].insts[i];
                f.values[v.index()].map_operands(rename);
            }
            f.blocks[block.index()].term.map_operands(rename);
        }
    }
    Ok(())
}

/// What one register holds on entry to each block.
struct Flow {
    entry: Vec<Held>,
    exit: Vec<Held>,
    preds: Vec<Vec<Block>>,
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
        for w in writes.iter().filter(|w| w.register == register) {
            if let Some(b) = renumber[w.block.index()] {
                last_write[b.index()] = Some(w.value.map_or(Held::Unknown, Held::Value));
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
        Flow { entry, exit, preds }
    }

    /// Gives the joins `held` depends on their block parameters, with the arguments every
    /// incoming edge passes; `Err` if one of them would receive an unknown value.
    fn materialize_joins(
        &self,
        f: &mut Function,
        held: Held,
        params: &mut [Option<Value>],
    ) -> Result<(), ()> {
        let mut pending = vec![held];
        let mut joins = Vec::new();
        while let Some(h) = pending.pop() {
            match h {
                Held::Unknown => return Err(()),
                Held::Joined(b) if params[b.index()].is_none() => {
                    params[b.index()] = Some(f.add_param(b));
                    joins.push(b);
                    pending.extend(self.preds[b.index()].iter().map(|p| self.exit[p.index()]));
                }
                Held::Zero | Held::Value(_) | Held::Joined(_) => {}
            }
        }
        for b in joins {
            for &p in &self.preds[b.index()] {
                let arg = match self.exit[p.index()] {
                    Held::Zero => f.iconst(p, 0),
                    Held::Value(v) => v,
                    Held::Joined(j) => params[j.index()].expect("materialized above"),
                    Held::Unknown => unreachable!("refused above"),
                };
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
        Ok(())
    }
}

/// A constant 0 defined at the start of `block`, before the reads in it.
fn zero_at_start(f: &mut Function, block: Block) -> Value {
    let v = Value(f.values.len() as u32);
    f.values.push(Inst::Const(0));
    f.blocks[block.index()].insts.insert(0, v);
    v
}

fn unknown_value(u: &OffsetUse) -> LowerError {
    LowerError {
        span: u.span,
        message: "this test reads the inner packet's offsets where the 'geneve' that computes \
                  them did not match; libpcap then reads a scratch register that a 'protochain' \
                  loop may have written, which sift does not reproduce"
            .into(),
    }
}
