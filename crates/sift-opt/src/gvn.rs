//! Global value numbering over the dominator tree, copy propagation of block parameters, and
//! constant hoisting.
//!
//! * A block parameter that receives the same value on every incoming edge is that value (its
//!   definition dominates every predecessor, hence the block); the parameter and its arguments go.
//! * Every constant moves to the entry block, one value per distinct constant. Constants read
//!   nothing and cannot reject, so the entry (which dominates every block) may define them; this
//!   empties blocks that only compared a value with a constant, which is what lets redundant
//!   predicate elimination and lookup-table formation move edges past them. (A final pass sinks
//!   constants used in one block back into it.)
//! * Walking the dominator tree with a scoped table, an instruction identical to one already
//!   computed in a dominating position (same operation, same operand values; commutative
//!   operands in a fixed order) is replaced by it. This includes packet loads: the packet does not
//!   change while a filter runs, and the dominating load has already rejected every packet for
//!   which this one would be out of bounds, so the second load can neither differ nor reject.
//!   The replaced instruction is removed.

use sift_ir::{BinOp, Block, Chain, Function, Inst, Insts, LoadSize, ThinVec, Value};

use crate::cfg::{Analysis, Cfg, Visit};
use crate::hash::FastMap;
use crate::rewrite::Replacements;

/// The identity of a computation, operands already replaced by their representatives.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    WireLen,
    Load(Option<Value>, u32, LoadSize),
    Binary(BinOp, Value, Value),
    Neg(Value),
    Contains(u32, u32, Value),
    Member(u32, Vec<Value>),
    Protochain(Chain, u32, Value, Value, u32),
}

fn key_of(inst: &Inst) -> Option<Key> {
    Some(match *inst {
        Inst::WireLen => Key::WireLen,
        Inst::Load {
            index,
            offset,
            size,
        } => Key::Load(index, offset, size),
        Inst::Binary(op, a, b) => {
            if op.is_commutative() && b < a {
                Key::Binary(op, b, a)
            } else {
                Key::Binary(op, a, b)
            }
        }
        Inst::Neg(a) => Key::Neg(a),
        Inst::Contains {
            set,
            pattern,
            start,
        } => Key::Contains(set, pattern, start),
        Inst::Member { set, ref key } => Key::Member(set, key.to_vec()),
        // The walk is a function of the packet and its operands: a dominating copy has either
        // rejected the packet already or computed the same protocol.
        Inst::Protochain {
            chain,
            base,
            proto,
            offset,
            target,
        } => Key::Protochain(chain, base, proto, offset, target),
        Inst::Const(_) | Inst::Param(_) => return None,
    })
}

/// Runs the pass; returns the number of values replaced.
pub fn run(f: &mut Function) -> usize {
    run_with(f, &mut Analysis::new())
}

/// [`run`], with the control-flow facts kept between passes (the pass changes no edge).
pub fn run_with(f: &mut Function, analysis: &mut Analysis) -> usize {
    analysis.remove_unreachable(f);
    let cfg = analysis.take(f);
    let mut repl = Replacements::new(f);
    propagate_params(f, &cfg.rpo, &mut repl);
    hoist_constants(f, &mut repl);
    number_values(f, &cfg, &mut repl);
    let n = repl.len();
    repl.apply(f);
    analysis.restore(cfg);
    n
}

/// Replaces each parameter whose incoming arguments are all one value.
fn propagate_params(f: &mut Function, rpo: &[Block], repl: &mut Replacements) {
    if f.blocks.iter().all(|data| data.params.is_empty()) {
        return;
    }
    // Incoming edges of each block, as (predecessor, index among its targets).
    let mut incoming: Vec<Vec<(Block, usize)>> = vec![Vec::new(); f.blocks.len()];
    // The arguments of each incoming edge, copied once (a switch's target list is long).
    let mut incoming_args: Vec<Vec<ThinVec<Value>>> = vec![Vec::new(); f.blocks.len()];
    for &b in rpo {
        for (i, t) in crate::cfg::targets(&f.block(b).term).enumerate() {
            if !f.block(t.block).params.is_empty() {
                incoming[t.block.index()].push((b, i));
                incoming_args[t.block.index()].push(t.args.clone());
            }
        }
    }
    for &b in rpo {
        let nparams = f.block(b).params.len();
        if nparams == 0 || incoming[b.index()].is_empty() {
            continue;
        }
        let mut dead = vec![false; nparams];
        for (i, d) in dead.iter_mut().enumerate() {
            let mut same: Option<Value> = None;
            let mut uniform = true;
            for args in &incoming_args[b.index()] {
                let a = repl.resolve(args[i]);
                match same {
                    None => same = Some(a),
                    Some(s) if s == a => {}
                    Some(_) => uniform = false,
                }
            }
            if let (true, Some(v)) = (uniform, same) {
                repl.replace(f.block(b).params[i], v);
                *d = true;
            }
        }
        if !dead.iter().any(|&d| d) {
            continue;
        }
        let keep = |i: usize| !dead[i];
        let params = std::mem::take(&mut f.block_mut(b).params);
        f.block_mut(b).params = params
            .into_iter()
            .enumerate()
            .filter(|&(i, _)| keep(i))
            .map(|(_, v)| v)
            .collect();
        for &(p, e) in &incoming[b.index()] {
            if let Some(t) = f.block_mut(p).term.targets_mut().into_iter().nth(e) {
                t.args = std::mem::take(&mut t.args)
                    .into_iter()
                    .enumerate()
                    .filter(|&(i, _)| keep(i))
                    .map(|(_, v)| v)
                    .collect();
            }
        }
    }
}

/// Moves every constant to the start of the entry block, one value per distinct constant.
fn hoist_constants(f: &mut Function, repl: &mut Replacements) {
    let mut first: FastMap<u32, Value> = FastMap::default();
    let mut hoisted = Insts::new();
    let values = &f.values;
    // In place: a new list per block was most of the pass's time on long chains.
    for data in &mut f.blocks {
        data.insts.retain(|&mut v| {
            let Inst::Const(k) = values[v.index()] else {
                return true;
            };
            match first.get(&k) {
                Some(&w) => repl.replace(v, w),
                None => {
                    first.insert(k, v);
                    hoisted.push(v);
                }
            }
            false
        });
    }
    let entry = &mut f.blocks[Function::ENTRY.index()].insts;
    hoisted.append(entry);
    *entry = hoisted;
}

/// Dominator-based value numbering.
///
/// The table maps each computation to the first value computing it and that value's block.
/// An entry whose block does not dominate the current one was left by a subtree the walk has
/// finished (a depth-first walk never returns to a subtree), so it is overwritten: the same
/// result as a table scoped to the dominator-tree path, without removing entries on the way
/// up.
fn number_values(f: &mut Function, cfg: &Cfg, repl: &mut Replacements) {
    let mut table: FastMap<Key, (Value, Block)> = FastMap::default();
    let (blocks, values) = (&mut f.blocks, &mut f.values);
    for visit in cfg.dom_walk() {
        let Visit::Enter(b) = *visit else { continue };
        blocks[b.index()].insts.retain(|&mut v| {
            values[v.index()].map_operands(|x| repl.resolve(x));
            let Some(k) = key_of(&values[v.index()]) else {
                return true;
            };
            match table.get(&k) {
                Some(&(w, d)) if cfg.dominates(d, b) => {
                    repl.replace(v, w);
                    false
                }
                _ => {
                    table.insert(k, (v, b));
                    true
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_same_semantics, canonical};
    use sift_ir::parse_function;

    fn numbered(text: &str) -> Function {
        let mut f = parse_function(text).unwrap();
        let orig = f.clone();
        run(&mut f);
        sift_ir::verify(&f).unwrap_or_else(|e| panic!("{e}\n{f}"));
        assert_same_semantics(&orig, &f);
        f
    }

    #[test]
    fn dominated_loads_are_reused() {
        let f = numbered(
            "block0:\n v0 = load.h [12]\n v1 = const 0x800\n br eq v0, v1, block1, block2\nblock1:\n v2 = load.h [12]\n v3 = const 0x800\n br eq v2, v3, block3, block2\nblock2:\n ret 0\nblock3:\n ret 1\n",
        );
        assert_eq!(
            canonical(&f),
            canonical(
                &parse_function(
                    "block0:\n v0 = const 0x800\n v1 = load.h [12]\n br eq v1, v0, block1, block2\nblock1:\n br eq v1, v0, block3, block2\nblock2:\n ret 0\nblock3:\n ret 1\n"
                )
                .unwrap()
            )
        );
    }

    #[test]
    fn loads_on_sibling_paths_stay() {
        let f = numbered(
            "block0:\n v0 = load.b [0]\n v1 = const 1\n br eq v0, v1, block1, block2\nblock1:\n v2 = load.b [5]\n ret v2\nblock2:\n v3 = load.b [5]\n ret v3\n",
        );
        assert_eq!(f.to_string().matches("load.b [5]").count(), 2);
    }

    #[test]
    fn uniform_parameters_become_their_argument() {
        let f = numbered(
            "block0:\n v0 = load.b [0]\n v1 = const 1\n br eq v0, v1, block1(v0), block1(v0)\nblock1(v2):\n ret v2\n",
        );
        assert!(f.block(Block(1)).params.is_empty(), "{f}");
    }

    #[test]
    fn commutative_operands_match() {
        let f = numbered(
            "block0:\n v0 = load.b [0]\n v1 = load.b [1]\n v2 = add v0, v1\n v3 = add v1, v0\n v4 = sub v2, v3\n ret v4\n",
        );
        assert_eq!(f.to_string().matches("add").count(), 1, "{f}");
    }
}
