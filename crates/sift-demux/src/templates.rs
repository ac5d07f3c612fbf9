//! Decompositions reused by filters that differ only in constants.
//!
//! A server installs one connection filter per connection, each the same graph with other
//! addresses and ports. The front end of an insert (verifying the graph and decomposing it
//! into accepting paths, `paths`) costs several microseconds, most of an insert; yet for such
//! a filter its result is a previous filter's with the new constants in place of the old.
//! [`Templates`] keeps the last decompositions, each with its [`Trace`] (how the paths depend
//! on the filter's free constants), and answers for a filter whose graph equals one of them
//! but for constants, when the trace shows the new values change nothing but the atoms they
//! appear in (see [`Trace`] for why that is exact). Anything else, including a new value that
//! the field's width decides (a port above 65535) or a constant the walk depended on (the
//! ethertype compared twice), is a miss, and the filter takes the full path.
//!
//! A hit also stands for `sift_ir::verify`: the verifier's checks do not read constants'
//! values, so a graph equal to a verified one but for them verifies too.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use sift_ir::{Function, Inst};

use crate::canon::{decided_by_bits, Atom, Expr};
use crate::paths::{Conjunction, Trace};

/// Decompositions kept; the oldest goes first. A demultiplexer sees few distinct graphs (one
/// per kind of filter its users install), so a short list is searched by hash.
const MAX_TEMPLATES: usize = 32;

/// A filter's decomposition and what it depends on.
#[derive(Debug)]
struct Template {
    hash: u64,
    function: Function,
    paths: Vec<Conjunction>,
    trace: Trace,
}

/// The recent decompositions (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Templates {
    entries: Vec<Template>,
    hasher: foldhash::fast::FixedState,
}

impl Templates {
    /// The accepting paths of `f`, exactly as `paths::decompose` would give them, if a kept
    /// decomposition answers for it (then `f` also verifies); `None` otherwise.
    pub(crate) fn paths(&self, f: &Function) -> Option<Vec<Conjunction>> {
        let hash = self.skeleton_hash(f)?;
        self.entries
            .iter()
            .rev()
            .filter(|t| t.hash == hash)
            .find_map(|t| t.apply(f))
    }

    /// Keeps `f`'s decomposition (`f` verified, `paths` and `trace` from
    /// `paths::decompose_traced`).
    pub(crate) fn learn(&mut self, f: &Function, paths: &[Conjunction], trace: Trace) {
        let Some(hash) = self.skeleton_hash(f) else {
            return;
        };
        if self.entries.len() >= MAX_TEMPLATES {
            self.entries.remove(0);
        }
        self.entries.push(Template {
            hash,
            function: f.clone(),
            paths: paths.to_vec(),
            trace,
        });
    }

    /// A hash of the graph with constants' values left out; `None` for graphs that are never
    /// kept (coprocessor tables: they do not decompose anyway).
    fn skeleton_hash(&self, f: &Function) -> Option<u64> {
        if !f.patterns.is_empty() || !f.sets.is_empty() {
            return None;
        }
        let mut h = self.hasher.build_hasher();
        f.values.len().hash(&mut h);
        for inst in &f.values {
            match inst {
                Inst::Const(_) => h.write_u8(0xc0),
                other => other.hash(&mut h),
            }
        }
        for b in &f.blocks {
            b.params.hash(&mut h);
            b.insts.hash(&mut h);
            b.term.hash(&mut h);
        }
        Some(h.finish())
    }
}

impl Template {
    /// The paths of `f` from this template's, when `f` is the same graph and its changed
    /// constants are all free, unpinned and compared as before.
    fn apply(&self, f: &Function) -> Option<Vec<Conjunction>> {
        let g = &self.function;
        if f.values.len() != g.values.len() || f.blocks != g.blocks {
            return None;
        }
        let mut changed: Vec<(u32, u32)> = Vec::new();
        for (i, (a, b)) in f.values.iter().zip(&g.values).enumerate() {
            match (a, b) {
                (Inst::Const(new), Inst::Const(old)) if new != old => {
                    let t = &self.trace;
                    if !t.free[i] || t.pinned[i] {
                        return None;
                    }
                    let still_open = t
                        .compares
                        .iter()
                        .filter(|(c, ..)| *c as usize == i)
                        .all(|&(_, rel, bits)| decided_by_bits(rel, bits, *new).is_none());
                    if !still_open {
                        return None;
                    }
                    changed.push((i as u32, *new));
                }
                (Inst::Const(_), Inst::Const(_)) => {}
                (a, b) if a == b => {}
                _ => return None,
            }
        }
        if changed.is_empty() {
            return Some(self.paths.clone());
        }
        let value_of = |origin: Option<u32>| {
            let c = origin?;
            changed.iter().find(|(v, _)| *v == c).map(|&(_, k)| k)
        };
        let paths = self
            .paths
            .iter()
            .zip(&self.trace.origins)
            .map(|(path, origins)| Conjunction {
                atoms: path
                    .atoms
                    .iter()
                    .zip(origins)
                    .map(|(atom, &origin)| match (atom, value_of(origin)) {
                        (Atom::Cmp { rel, lhs, .. }, Some(k)) => Atom::Cmp {
                            rel: *rel,
                            lhs: lhs.clone(),
                            rhs: Arc::new(Expr::Const(k)),
                        },
                        _ => atom.clone(),
                    })
                    .collect(),
            })
            .collect();
        Some(paths)
    }
}

#[cfg(test)]
mod tests {
    //! A template's answer against the full decomposition, for random filters whose constants
    //! are changed at random (some changes are hits, some misses; every hit must be exact).

    use sift_ir::{Function, Inst};
    use sift_testgen::{random_expressions, Rng};

    use super::Templates;
    use crate::paths::{decompose, decompose_traced, Limits};

    const ETHERNET: u32 = 1;

    /// `f` with some constants replaced: nearby values, random ones, and the field-width
    /// boundaries (256, 65536) that a comparison's width decides.
    fn variant(f: &Function, rng: &mut Rng) -> Function {
        let mut g = f.clone();
        for inst in &mut g.values {
            if let Inst::Const(k) = inst {
                if rng.chance(1, 2) {
                    *k = match rng.below(6) {
                        0 => k.wrapping_add(1),
                        1 => rng.next_u32(),
                        2 => rng.next_u32() & 0xffff,
                        3 => [0, 255, 256, 65535, 65536][rng.below(5) as usize],
                        4 => rng.next_u32() & 0xff,
                        _ => *k ^ 0x0101_0000,
                    };
                }
            }
        }
        g
    }

    #[test]
    fn a_hit_is_exactly_the_full_decomposition() {
        let (mut hits, mut misses) = (0, 0);
        for seed in 1..=3u64 {
            let mut exprs = random_expressions(seed, ETHERNET, 200);
            exprs.extend([
                "ip src 10.0.0.1 and ip dst 10.0.0.2 and tcp src port 1000 and tcp dst port 80"
                    .to_string(),
                "ip6 src 2001::1 and udp dst port 53".into(),
                "tcp port 80 and ip src 1.2.3.4".into(),
                "ip src 1.2.3.4 and ip src 1.2.3.4".into(),
                "ip[2:2] > 100 and ip[2:2] < 200".into(),
                "udp src port 53 or udp dst port 53 or ip proto 1".into(),
            ]);
            let mut rng = Rng::new(seed);
            for e in exprs {
                let Ok(f) = sift::compile_ir(&e, &sift::Options::new(ETHERNET, 262144)) else {
                    continue;
                };
                let Ok((paths, trace)) = decompose_traced(&f, Limits::default()) else {
                    continue;
                };
                let mut templates = Templates::default();
                templates.learn(&f, &paths, trace);
                assert_eq!(templates.paths(&f), Some(paths), "{e}: the filter itself");
                for _ in 0..20 {
                    let g = variant(&f, &mut rng);
                    let Some(cached) = templates.paths(&g) else {
                        misses += 1;
                        continue;
                    };
                    hits += 1;
                    sift_ir::verify(&g).expect("a hit verifies");
                    let full = decompose(&g, Limits::default());
                    assert_eq!(Ok(cached), full, "{e}: {g}");
                }
            }
        }
        eprintln!("{hits} hits, {misses} misses");
        assert!(hits > 1000 && misses > 100, "{hits} hits, {misses} misses");
    }

    #[test]
    fn connection_filters_hit() {
        let opts = sift::Options::new(ETHERNET, 262144);
        let conn = |a: u8, p: u16| {
            sift::compile_ir(
                &format!("ip src 10.0.0.{a} and ip dst 10.1.0.1 and tcp src port {p} and tcp dst port 80"),
                &opts,
            )
            .unwrap()
        };
        let f = conn(1, 1000);
        let (paths, trace) = decompose_traced(&f, Limits::default()).unwrap();
        let mut templates = Templates::default();
        templates.learn(&f, &paths, trace);
        let g = conn(7, 2000);
        assert_eq!(
            templates.paths(&g),
            Some(decompose(&g, Limits::default()).unwrap())
        );
    }
}
