//! Value classes: SSA values that hold the same number wherever both have been computed.
//!
//! The packet does not change while a filter runs, so two instructions with the same operation
//! on the same operands (recursively: the same constant, the wire length, a load of the same
//! bytes at the same index, the same arithmetic) compute the same number, even when neither
//! dominates the other. Lowering and the optimizer leave such twins on sibling paths (the IPv4
//! header length of `port 80` is computed once under `tcp` and once under `udp`); when the paths
//! meet, a register that holds one of them on every incoming edge holds the other's value too.
//!
//! The selector's register state ([`super::regs`]) records classes instead of values, so that
//! the code after such a merge reuses the register (libpcap's optimizer does the same with its
//! global value numbers). Reusing is sound for instructions that may reject the packet too (a
//! load beyond the captured bytes, a division by zero): a register holds a class only after an
//! instruction of that class completed on every path to this point, so the skipped twin would
//! have completed as well, with the same result. Once the code after a merge no longer depends
//! on which twin reached it, [`super::machine`]'s tail merging can share it between the paths.
//!
//! Block parameters, `protochain` walks and coprocessor calls are classes of their own.

use std::collections::HashMap;

use sift_ir::{Function, Inst, Value};

/// The class of every value, named by one of its members (the first one met in reverse
/// postorder). Values of unreachable blocks are their own class.
pub(super) fn value_classes(f: &Function) -> Vec<Value> {
    let mut class: Vec<Value> = (0..f.values.len() as u32).map(Value).collect();
    let mut by_shape: HashMap<Inst, Value> = HashMap::new();
    // Reverse postorder visits every definition before its uses (the IR has no loops).
    for b in f.reverse_postorder() {
        for &v in &f.block(b).insts {
            let mut shape = f.inst(v).clone();
            if matches!(
                shape,
                Inst::Param(_)
                    | Inst::Protochain { .. }
                    | Inst::Contains { .. }
                    | Inst::Member { .. }
            ) {
                continue;
            }
            shape.map_operands(|o| class[o.index()]);
            if let Inst::Binary(op, a, b) = &mut shape {
                if op.is_commutative() && b < a {
                    std::mem::swap(a, b);
                }
            }
            class[v.index()] = *by_shape.entry(shape).or_insert(v);
        }
    }
    class
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_ir::parse_function;

    #[test]
    fn twins_on_sibling_paths_share_a_class() {
        let f = parse_function(
            "block0:
    v0 = load.b [0]
    v1 = const 1
    br eq v0, v1, block1, block2
block1:
    v2 = load.b [14]
    v3 = const 15
    v4 = and v2, v3
    jump block3(v4)
block2:
    v5 = load.b [14]
    v6 = const 15
    v7 = and v6, v5
    v8 = load.b [v7+2]
    v9 = load.b [v7+3]
    jump block3(v5)
block3(v10):
    v11 = sub v10, v1
    v12 = sub v1, v10
    ret v11
",
        )
        .unwrap();
        let c = value_classes(&f);
        let class = |i: u32| c[i as usize];
        assert_eq!(class(5), class(2));
        assert_eq!(class(6), class(3));
        // `and` commutes; the loads read different bytes; a parameter is its own class.
        assert_eq!(class(7), class(4));
        assert_ne!(class(8), class(9));
        assert_eq!(class(10), Value(10));
        assert_ne!(class(11), class(12));
    }
}
