//! Constant sinking: the inverse of value numbering's constant hoisting, for readability and for
//! back ends that keep values in registers. A constant of the entry block read by exactly one
//! other block moves to the start of that block; constants read by several blocks stay in the
//! entry, which dominates them all.

use sift_ir::{Block, Function, Inst, Insts};

use crate::cfg::Analysis;

/// Runs the pass; returns the number of constants moved.
pub fn run(f: &mut Function) -> usize {
    run_with(f, &mut Analysis::new())
}

/// [`run`], with the control-flow facts kept between passes (the pass changes no edge).
pub fn run_with(f: &mut Function, analysis: &mut Analysis) -> usize {
    let cfg = analysis.take(f);
    const NONE: u32 = u32::MAX;
    const MANY: u32 = u32::MAX - 1;
    let mut user = vec![NONE; f.values.len()];
    let mut note = |v: sift_ir::Value, b: usize| {
        let u = &mut user[v.index()];
        *u = match *u {
            NONE => b as u32,
            x if x == b as u32 => x,
            _ => MANY,
        };
    };
    for &b in &cfg.rpo {
        let data = f.block(b);
        for &v in &data.insts {
            f.inst(v).for_each_operand(|o| note(o, b.index()));
        }
        data.term.for_each_operand(|o| note(o, b.index()));
    }
    let entry = std::mem::take(&mut f.block_mut(Function::ENTRY).insts);
    let mut stay = Insts::with_capacity(entry.len());
    let mut moved: Vec<Insts> = vec![Insts::new(); f.blocks.len()];
    let mut count = 0;
    for v in entry {
        let u = user[v.index()];
        let sinkable = matches!(f.inst(v), Inst::Const(_)) && u != NONE && u != MANY && u != 0;
        if sinkable {
            moved[u as usize].push(v);
            count += 1;
        } else {
            stay.push(v);
        }
    }
    f.block_mut(Function::ENTRY).insts = stay;
    for (i, mut consts) in moved.into_iter().enumerate() {
        if !consts.is_empty() {
            let data = f.block_mut(Block(i as u32));
            consts.append(&mut data.insts);
            data.insts = consts;
        }
    }
    analysis.restore(cfg);
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_ir::parse_function;

    #[test]
    fn constants_follow_their_only_user() {
        let mut f = parse_function(
            "block0:\n v0 = const 1\n v1 = const 2\n v2 = load.b [0]\n br eq v2, v0, block1, block2\nblock1:\n v3 = load.b [1]\n br eq v3, v1, block2, block3\nblock2:\n ret 0\nblock3:\n ret 1\n",
        )
        .unwrap();
        assert_eq!(run(&mut f), 1);
        sift_ir::verify(&f).unwrap();
        assert_eq!(f.block(Block(1)).insts.len(), 2);
    }
}
