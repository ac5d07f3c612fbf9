//! Dead code elimination: instructions and block parameters whose values nothing reads.
//!
//! An unused instruction is removed only when removing it cannot change a verdict:
//!
//! * constants, `len`, `neg` and arithmetic other than division never reject: removable;
//! * `div`/`mod` reject on a zero divisor: removable only when the divisor is a non-zero
//!   constant;
//! * a packet load rejects when out of bounds: removable only when proven in bounds, i.e. when an
//!   earlier load on every path (a load earlier in the block or in a dominating block) used the
//!   same index value and reached at least as far (`offset + size` no smaller); or, for any
//!   index, when an earlier load at a constant position reached past the largest address the
//!   index's range allows. Loads used as proofs are never themselves removed by a weaker proof:
//!   a load is only covered by one reaching at least as far, so the farthest one stays.
//!
//! A parameter nothing reads goes, with the matching argument of every incoming edge (which may
//! make the argument's definition dead in turn).

use sift_ir::{BinOp, Block, Function, Inst, Value};

use crate::cfg::{Analysis, Cfg, Visit};
use crate::hash::FastMap;
use crate::range::{self, Range};

/// Runs the pass; returns the number of instructions and parameters removed.
pub fn run(f: &mut Function) -> usize {
    run_with(f, &mut Analysis::new())
}

/// [`run`], with the control-flow facts kept between passes (the pass changes no edge).
pub fn run_with(f: &mut Function, analysis: &mut Analysis) -> usize {
    analysis.remove_unreachable(f);
    let cfg = analysis.take(f);
    let removed = remove_dead(f, &cfg);
    analysis.restore(cfg);
    removed
}

fn remove_dead(f: &mut Function, cfg: &Cfg) -> usize {
    let covered = covered_loads(f, cfg);
    let n = f.values.len();
    let mut uses = vec![0u32; n];
    // Which block and parameter position defines each parameter.
    let mut param_of: Vec<Option<(Block, usize)>> = vec![None; n];
    // The edges into each block with parameters (their arguments are the parameters' uses);
    // listed only for those blocks, as most functions have none.
    let has_params = f.blocks.iter().any(|data| !data.params.is_empty());
    let lists = if has_params { f.blocks.len() } else { 0 };
    let mut incoming: Vec<Vec<(Block, usize)>> = vec![Vec::new(); lists];
    for &b in &cfg.rpo {
        let data = f.block(b);
        for (i, &p) in data.params.iter().enumerate() {
            param_of[p.index()] = Some((b, i));
        }
        let mut count = |o: Value| uses[o.index()] += 1;
        for &v in &data.insts {
            f.inst(v).for_each_operand(&mut count);
        }
        data.term.for_each_operand(count);
        if has_params {
            for (e, t) in crate::cfg::targets(&data.term).enumerate() {
                incoming[t.block.index()].push((b, e));
            }
        }
    }
    let removable = |f: &Function, v: Value| -> bool {
        match *f.inst(v) {
            Inst::Const(_) | Inst::WireLen | Inst::Neg(_) | Inst::Param(_) => true,
            // Calls are pure and never reject.
            Inst::Contains { .. } | Inst::Member { .. } => true,
            Inst::Binary(BinOp::Div | BinOp::Mod, _, d) => f.const_value(d).is_some_and(|k| k != 0),
            Inst::Binary(..) => true,
            Inst::Load { .. } => covered[v.index()],
            // A walk may reject the packet (a header outside it).
            Inst::Protochain { .. } => false,
        }
    };
    let mut dead = vec![false; n];
    let mut work: Vec<Value> = Vec::new();
    for &b in &cfg.rpo {
        let data = f.block(b);
        for &v in data.params.iter().chain(&data.insts) {
            if uses[v.index()] == 0 {
                work.push(v);
            }
        }
    }
    let mut removed = 0;
    while let Some(v) = work.pop() {
        if dead[v.index()] || uses[v.index()] != 0 || !removable(f, v) {
            continue;
        }
        dead[v.index()] = true;
        removed += 1;
        let mut release = |o: Value, work: &mut Vec<Value>| {
            uses[o.index()] -= 1;
            if uses[o.index()] == 0 {
                work.push(o);
            }
        };
        if let Some((b, i)) = param_of[v.index()] {
            for &(p, e) in &incoming[b.index()] {
                let a = f.block(p).term.targets()[e].args[i];
                release(a, &mut work);
            }
        } else {
            f.inst(v).for_each_operand(|o| release(o, &mut work));
        }
    }
    if removed == 0 {
        return 0;
    }
    for &b in &cfg.rpo {
        let params = &f.block(b).params;
        let keep: Vec<bool> = params.iter().map(|p| !dead[p.index()]).collect();
        if keep.iter().any(|k| !k) {
            for &(p, e) in &incoming[b.index()] {
                let mut term = std::mem::take(&mut f.block_mut(p).term);
                let t = &mut term.targets_mut()[e];
                t.args = t
                    .args
                    .iter()
                    .zip(&keep)
                    .filter(|(_, &k)| k)
                    .map(|(a, _)| *a)
                    .collect();
                f.block_mut(p).term = term;
            }
        }
        let data = f.block_mut(b);
        data.params.retain(|p| !dead[p.index()]);
        data.insts.retain(|v| !dead[v.index()]);
    }
    removed
}

/// Loads proven in bounds by an earlier load on every path (see the module documentation).
fn covered_loads(f: &Function, cfg: &Cfg) -> Vec<bool> {
    let ranges = range::compute_over(f, &cfg.rpo);
    let mut covered = vec![false; f.values.len()];
    // Farthest end (index + offset + size, minus the index) reached by a load with this index.
    let mut reach: FastMap<Option<Value>, u64> = FastMap::default();
    // Old reaches to restore when the walk leaves a block, and where each block's start.
    let mut undo: Vec<(Option<Value>, Option<u64>)> = Vec::new();
    let mut marks: Vec<usize> = Vec::new();
    for &visit in cfg.dom_walk() {
        match visit {
            Visit::Enter(b) => {
                marks.push(undo.len());
                for &v in &f.block(b).insts {
                    let Inst::Load {
                        index,
                        offset,
                        size,
                    } = *f.inst(v)
                    else {
                        continue;
                    };
                    let end = u64::from(offset) + u64::from(size.bytes());
                    let same = reach.get(&index).copied();
                    let by_constant = index.and_then(|x| {
                        let r: Range = ranges.get(x.index()).copied().unwrap_or(Range::FULL);
                        let far = u64::from(r.hi) + end;
                        reach.get(&None).map(|&c| c >= far)
                    });
                    covered[v.index()] =
                        same.is_some_and(|s| s >= end) || by_constant.unwrap_or(false);
                    if !matches!(same, Some(s) if s >= end) {
                        undo.push((index, same));
                        reach.insert(index, end);
                    }
                }
            }
            Visit::Exit(_) => {
                let mark = marks.pop().unwrap_or(0);
                while undo.len() > mark {
                    let Some((k, old)) = undo.pop() else { break };
                    match old {
                        Some(e) => reach.insert(k, e),
                        None => reach.remove(&k),
                    };
                }
            }
        }
    }
    covered
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::assert_same_semantics;
    use sift_ir::parse_function;

    fn cleaned(text: &str) -> Function {
        let mut f = parse_function(text).unwrap();
        let orig = f.clone();
        run(&mut f);
        sift_ir::verify(&f).unwrap_or_else(|e| panic!("{e}\n{f}"));
        assert_same_semantics(&orig, &f);
        f
    }

    #[test]
    fn unproven_loads_stay() {
        let f = cleaned("block0:\n v0 = load.w [40]\n v1 = const 3\n ret 1\n");
        assert_eq!(f.to_string(), "block0:\n    v0 = load.w [40]\n    ret 1\n");
    }

    #[test]
    fn loads_covered_by_farther_loads_go() {
        let f = cleaned(
            "block0:\n v0 = load.w [40]\n v1 = load.h [42]\n v2 = load.b [43]\n v3 = load.b [44]\n ret v0\n",
        );
        let text = f.to_string();
        assert!(!text.contains("[42]") && !text.contains("[43]"), "{text}");
        assert!(text.contains("[44]"), "{text}");
    }

    #[test]
    fn indexed_loads_and_constant_reach() {
        // hl <= 60, and a load reached byte 80: [hl + 14] (2 bytes, ends by 76) is in bounds.
        let f = cleaned(
            "block0:\n v0 = load.b [14]\n v1 = const 15\n v2 = and v0, v1\n v3 = const 2\n v4 = shl v2, v3\n v5 = load.b [79]\n v6 = load.h [v4+14]\n v7 = load.h [v4+16]\n ret v5\n",
        );
        let text = f.to_string();
        assert!(!text.contains("v4+14") && !text.contains("v4+16"), "{text}");
    }

    #[test]
    fn division_by_unknown_stays() {
        let f = cleaned(
            "block0:\n v0 = load.b [0]\n v1 = div v0, v0\n v2 = const 2\n v3 = div v0, v2\n ret 1\n",
        );
        let text = f.to_string();
        assert!(
            text.contains("div v0, v0") && !text.contains("v2"),
            "{text}"
        );
    }

    #[test]
    fn unused_parameters_go_with_their_arguments() {
        let f = cleaned(
            "block0:\n v0 = load.b [0]\n v1 = const 5\n v2 = add v0, v1\n jump block1(v2)\nblock1(v3):\n ret 1\n",
        );
        assert_eq!(f.inst_count(), 1, "{f}");
    }
}
