//! Tail duplication of generated functions, as lowering copies tests per path.

use super::*;

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
