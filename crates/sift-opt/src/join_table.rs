//! Equality tests that every way into a table makes become a case of the table.
//!
//! libpcap's optimizer (and `merge`) shares the common tail of two chains: `host A or host B or
//! …` tests the IPv4 destination against `A` and the ARP target against `A`, and both then go on
//! to one block that tests the value they pass it against `B`, `C`, …. Table formation cannot
//! take the first tests into that block's table (the block has two ways in and a parameter),
//! so the table is entered through two separate tests of one key. When every edge into a join
//! `J(p)` with no instructions comes from a block ending in `if x == K goto T else goto J(x)`,
//! with the same `K` and the same `T` each time, and `J` tests `p` against constants, the test
//! moves into `J`: each predecessor jumps to `J(x)`, and `J` sends `p == K` to `T`. On every
//! path the packet goes where it went before: `x == K` reaches `T` (now through `J`, which
//! computes nothing), and `x != K` reaches `J` as before, where the new case cannot hold. A
//! case `K` that `J` already had could not hold on any path, so it is redirected to `T`.
//!
//! The back ends then see one table instead of a test in front of it on every path: the JIT
//! compares one vector of keys instead of one more scalar per predecessor, and classic BPF
//! needs no more instructions than before.

use sift_ir::{Block, Function, Target, Terminator, Value};

use crate::cfg::Analysis;
use crate::table::{link, Keys, Link};

/// A predecessor's test: `if value == key goto exit else goto` the join.
struct Test {
    value: Value,
    key: u32,
    exit: Target,
    join: Target,
}

/// `term` as a [`Test`]: a branch on equality with a constant.
fn test(f: &Function, term: &Terminator) -> Option<Test> {
    let Link {
        value,
        keys: Keys::One(key),
        exit,
        next,
    } = link(f, term)?
    else {
        return None;
    };
    Some(Test {
        value,
        key,
        exit: exit.clone(),
        join: next.clone(),
    })
}

/// The parameter position `join`'s terminator tests against constants, if it does.
fn tested_param(f: &Function, join: Block) -> Option<usize> {
    let data = f.block(join);
    let tested = match &data.term {
        Terminator::Switch { value, .. } => *value,
        branch => link(f, branch)?.value,
    };
    data.params.iter().position(|&p| p == tested)
}

/// Runs the pass; returns the number of tests moved into a join.
pub fn run(f: &mut Function) -> usize {
    run_with(f, &mut Analysis::new())
}

/// [`run`], with the control-flow facts kept between passes.
pub fn run_with(f: &mut Function, analysis: &mut Analysis) -> usize {
    let cfg = analysis.cfg(f);
    // For each join, the predecessors whose test qualifies so far (`None` once one does not).
    let mut entering: Vec<Option<Vec<Block>>> = vec![Some(Vec::new()); f.blocks.len()];
    for &b in &cfg.rpo {
        let term = &f.block(b).term;
        let candidate = test(f, term).filter(|t| {
            t.exit.args.is_empty()
                && t.exit.block != t.join.block
                && tested_param(f, t.join.block).is_some_and(|i| t.join.args[i] == t.value)
        });
        match candidate {
            Some(t) => {
                if let Some(list) = &mut entering[t.join.block.index()] {
                    list.push(b);
                }
                // The exit is entered from here too, but not by a qualifying test edge.
                entering[t.exit.block.index()] = None;
            }
            None => term.for_each_target(|t| entering[t.block.index()] = None),
        }
    }
    let mut moved = 0;
    for &join in &cfg.rpo {
        let Some(preds) = &entering[join.index()] else {
            continue;
        };
        if preds.is_empty() || preds.len() != cfg.incoming[join.index()] as usize {
            continue;
        }
        if join == Function::ENTRY || !f.block(join).insts.is_empty() {
            continue;
        }
        // Read again: a join handled before may be one of these tests, now a table.
        let Some(param) = tested_param(f, join) else {
            continue;
        };
        let Some(tests) = preds
            .iter()
            .map(|&p| test(f, &f.block(p).term))
            .collect::<Option<Vec<Test>>>()
        else {
            continue;
        };
        let first = &tests[0];
        if tests.iter().any(|t| {
            t.key != first.key
                || t.exit != first.exit
                || t.join.block != join
                || t.join.args[param] != t.value
        }) {
            continue;
        }
        let (key, exit) = (first.key, first.exit.clone());
        for (&p, t) in preds.iter().zip(tests) {
            f.block_mut(p).term = Terminator::Jump(t.join);
        }
        add_case(f, join, key, exit);
        moved += preds.len();
    }
    if moved > 0 {
        analysis.edges_changed();
    }
    moved
}

/// Makes `join`'s test of its parameter send `key` to `exit`.
fn add_case(f: &mut Function, join: Block, key: u32, exit: Target) {
    let term = std::mem::take(&mut f.block_mut(join).term);
    f.block_mut(join).term = match term {
        Terminator::Switch {
            value,
            mut cases,
            default,
        } => {
            match cases.iter_mut().find(|(k, _)| *k == key) {
                Some(case) => case.1 = exit,
                None => cases.insert(0, (key, exit)),
            }
            Terminator::Switch {
                value,
                cases,
                default,
            }
        }
        branch => {
            let Some(Link {
                value,
                keys: Keys::One(theirs),
                exit: equal,
                next: other,
            }) = link(f, &branch)
            else {
                unreachable!("tested_param checked the terminator");
            };
            let cases = if theirs == key {
                vec![(key, exit)]
            } else {
                vec![(key, exit), (theirs, equal.clone())]
            };
            Terminator::Switch {
                value,
                cases,
                default: other.clone(),
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_same_semantics, canonical};
    use sift_ir::parse_function;

    /// `host`'s shape: two loads each test `A`, then share a test of `B` and `C`.
    const SHARED_TAIL: &str = "block0:
    v0 = const 1
    v1 = const 2
    v2 = const 3
    v3 = load.b [0]
    br eq v3, v0, block1, block2
block1:
    v4 = load.b [1]
    br eq v4, v0, block5, block3(v4)
block2:
    v5 = load.b [2]
    br ne v5, v0, block3(v5), block5
block3(v6):
    switch v6, default block4, 2: block5, 3: block5
block4:
    ret 0
block5:
    ret 1
";

    fn moved(text: &str) -> (usize, Function) {
        let original = parse_function(text).unwrap();
        let mut f = original.clone();
        let n = run(&mut f);
        sift_ir::verify(&f).unwrap();
        assert_same_semantics(&original, &f);
        (n, f)
    }

    #[test]
    fn a_test_every_way_in_makes_joins_the_table() {
        let (n, f) = moved(SHARED_TAIL);
        assert_eq!(n, 2);
        let text = canonical(&f);
        assert!(text.contains("jump block3(v4)"), "{text}");
        assert!(text.contains("jump block3(v5)"), "{text}");
        assert!(
            text.contains("switch v6, default block4, 1: block5, 2: block5, 3: block5"),
            "{text}"
        );
    }

    #[test]
    fn a_branch_in_the_join_becomes_a_switch() {
        let text = SHARED_TAIL.replace(
            "switch v6, default block4, 2: block5, 3: block5",
            "br ne v6, v1, block4, block5",
        );
        let (n, f) = moved(&text);
        assert_eq!(n, 2);
        assert!(canonical(&f).contains("switch v6, default block4, 1: block5, 2: block5"));
    }

    #[test]
    fn a_key_the_join_had_goes_where_the_tests_went() {
        // Case 1 of the join could not hold (both ways in had found `x != 1`).
        let text = SHARED_TAIL.replace("2: block5, 3: block5", "1: block4, 2: block5");
        let (n, f) = moved(&text);
        assert_eq!(n, 2);
        assert!(canonical(&f).contains("switch v6, default block4, 1: block5, 2: block5"));
    }

    #[test]
    fn a_join_whose_test_leads_to_another_join() {
        // block3 is a join and, ending in `p == 2`, also a way into block6, whose other way
        // in (block4) tests the same key: block3 takes its ways' tests first and is then no
        // longer a test, so block6 keeps its own.
        let text = "block0:
    v0 = const 1
    v1 = const 2
    v2 = load.b [0]
    br eq v2, v0, block1, block4
block1:
    v3 = load.b [1]
    br eq v3, v0, block5, block3(v3)
block2:
    ret 0
block3(v4):
    br eq v4, v1, block7, block6(v4)
block4:
    v5 = load.b [2]
    br eq v5, v0, block5, block3(v5)
block5:
    v6 = load.b [3]
    br eq v6, v1, block7, block6(v6)
block6(v7):
    br eq v7, v0, block2, block7
block7:
    ret 1
";
        let (n, f) = moved(text);
        assert_eq!(n, 2, "{f}");
    }

    /// A function of joins and their ways in, drawn from `seed`: the entry picks one of
    /// several ways by a byte; each loads a byte and (mostly) tests it against a shared key
    /// with a shared exit before passing it to a join, whose own test may make it a way into
    /// a second join. Some draws break the rule (another key or exit, a plain jump in, a load
    /// in the join) so that both outcomes are exercised.
    fn random_joins(seed: u64) -> String {
        let mut rng = sift_testgen::Rng::new(seed);
        let mut next = move |n: u64| rng.below(n);
        // Blocks: 0 entry, 1-4 returns, 5.. ways into the first join, its join, ways into the
        // second, the second join.
        let ways = 1 + next(3) as usize;
        let second_ways = next(3) as usize;
        let join = 5 + ways;
        let join2 = join + 1 + second_ways;
        let mut text = String::from("block0:\n v0 = const 1\n v1 = const 2\n v2 = const 3\n v3 = load.b [0]\n switch v3, default block1");
        // In a drawn order, so that the ways of the two joins come in either order.
        let mut entered: Vec<usize> = (5..join).chain(join + 1..join2).collect();
        for i in (1..entered.len()).rev() {
            entered.swap(i, next(i as u64 + 1) as usize);
        }
        for (key, way) in entered.into_iter().enumerate() {
            text += &format!(", {key}: block{way}");
        }
        text += "\nblock1:\n ret 0\nblock2:\n ret 1\nblock3:\n ret 2\nblock4:\n ret 262144\n";
        let mut value = 4;
        // A way from `block` into `to`, mostly testing the constant `v{key}` with exit `exit`.
        fn way(
            text: &mut String,
            (block, to): (usize, usize),
            (key, exit): (u64, u64),
            value: &mut usize,
            next: &mut dyn FnMut(u64) -> u64,
        ) {
            let x = *value;
            *value += 1;
            *text += &format!("block{block}:\n v{x} = load.b [{}]\n", 1 + next(6));
            let key = if next(4) == 0 { next(3) } else { key };
            let exit = if next(4) == 0 { 3 } else { exit };
            *text += &match next(8) {
                0 => format!(" jump block{to}(v{x})\n"),
                1 | 2 => format!(" br ne v{x}, v{key}, block{to}(v{x}), block{exit}\n"),
                _ => format!(" br eq v{x}, v{key}, block{exit}, block{to}(v{x})\n"),
            };
        }
        for b in 5..join {
            way(&mut text, (b, join), (0, 2), &mut value, &mut next);
        }
        let p = value;
        value += 1;
        text += &format!("block{join}(v{p}):\n");
        if next(6) == 0 {
            text += &format!(" v{} = load.b [9]\n", value);
            value += 1;
        }
        let leads_on = second_ways > 0 && next(2) == 0;
        text += &match (leads_on, next(3)) {
            (true, _) => format!(" br eq v{p}, v1, block4, block{join2}(v{p})\n"),
            (false, 0) => format!(" br ne v{p}, v{}, block1, block4\n", next(3)),
            _ => format!(
                " switch v{p}, default block1, 2: block4, 3: block{}\n",
                2 + next(3)
            ),
        };
        for b in join + 1..join2 {
            // The key and exit of the first join's test when it leads on.
            way(&mut text, (b, join2), (1, 4), &mut value, &mut next);
        }
        let q = value;
        text +=
            &format!("block{join2}(v{q}):\n switch v{q}, default block1, 1: block4, 3: block3\n");
        text
    }

    #[test]
    fn random_joins_keep_their_meaning() {
        let mut moved_some = 0;
        for seed in 0..400u64 {
            let text = random_joins(seed);
            let (n, _) = moved(&text);
            moved_some += usize::from(n > 0);
            let original = parse_function(&text).unwrap();
            let mut optimized = original.clone();
            crate::optimize(&mut optimized);
            assert_same_semantics(&original, &optimized);
        }
        assert!(moved_some > 50, "{moved_some} of 400 moved a test");
    }

    #[test]
    fn tests_that_differ_or_another_way_in_stay() {
        let other_key = SHARED_TAIL.replace("br ne v5, v0,", "br ne v5, v1,");
        let other_exit = SHARED_TAIL.replace(
            "br ne v5, v0, block3(v5), block5",
            "br ne v5, v0, block3(v5), block4",
        );
        let other_value = SHARED_TAIL.replace("block3(v4)", "block3(v3)");
        let computes = SHARED_TAIL.replace(
            "block3(v6):\n    switch",
            "block3(v6):\n    v7 = load.b [9]\n    switch",
        );
        let jump_in = SHARED_TAIL.replace(
            "    v3 = load.b [0]\n    br eq v3, v0, block1, block2",
            "    v3 = load.b [0]\n    br eq v3, v1, block3(v3), block6\nblock6:\n    br eq v3, v0, block1, block2",
        );
        for text in [other_key, other_exit, other_value, computes, jump_in] {
            let (n, f) = moved(&text);
            assert_eq!(n, 0, "{f}");
        }
    }
}
