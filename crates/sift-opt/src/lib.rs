//! The optimizer: global data-flow optimization of sift's predicate IR, after BPF+ (Begel,
//! McCanne, Graham 1999) and NetVM (2008).
//!
//! It sits between lowering and the back ends:
//!
//! ```text
//! pcap-filter text -> sift-syntax -> sift-lower -> IR -> sift-opt -> IR -> bytecode / classic BPF
//! ```
//!
//! [`optimize`] rewrites a [`Function`] in place into one that returns the same value for every
//! packet — including the packets it rejects because a load falls outside the captured bytes or
//! a division is by zero — with fewer instructions and tests. The passes, one module each:
//!
//! | pass | module | does |
//! |---|---|---|
//! | simplify | [`simplify`] | constant folding, algebraic identities, offset reassociation, branch canonicalization |
//! | gvn | [`gvn`] | value numbering over the dominator tree, parameter copy propagation, constant hoisting |
//! | predicates | [`predicate`] | redundant predicate elimination: assertion propagation over edge dominators, static predicate prediction |
//! | threading | [`thread`] | jump threading, block merging, unreachable block removal |
//! | dce | [`dce`] | dead instructions and parameters (loads only when proven in bounds) |
//! | merge | [`merge`] | equivalent subgraphs (per-path copies made by lowering) merge into one |
//! | tables | [`table`] | equality chains become `switch` lookup tables |
//! | tables | [`join_table`] | a test of one key made on every way into a table becomes one of its cases |
//!
//! The first six run in rounds until a round changes nothing (or [`Options::max_rounds`] is
//! reached: the optimizer always terminates, and every pass is linear or near-linear in the
//! function's size, so a 10,000-term `or` chain optimizes in milliseconds). Lookup tables are
//! formed after the rounds (and then take in the tests their ways in share), and chains of 64
//! keys or more already in the first round, right after value numbering (so that the passes
//! after it meet one `switch`, not thousands of tests); then [`sink`] moves constants next to
//! their only user and the function is renumbered. With [`Options::verify`] (on in debug
//! builds) the IR verifier runs after every pass and a failure names the pass.
//!
//! The predicate algebra is in [`facts`], value ranges in [`range`], the dominator tree in
//! [`cfg`](mod@cfg), the shared rewriting helpers in [`rewrite`], and the hash of the passes' tables in
//! [`hash`]. The passes share one [`cfg::Analysis`] (reverse postorder, dominators, incoming
//! edges), kept until a pass changes an edge; when most values are dead (lowering's own
//! optimization and then value numbering each leave nine in ten behind on a long chain) they are
//! renumbered compactly ([`rewrite::compact_values`]) before the next pass, which changes no
//! output.
//!
//! Testing: `tests/differential.rs` checks optimized against unoptimized IR on lowered
//! pcap-filter expressions; `tests/translation_validation.rs` runs every pass alone, random
//! combinations and the whole pipeline on thousands of random functions (filter-shaped and
//! fully random, from `tests/common/random_ir.rs`) and compares verdicts on random packets and
//! their truncations; `tests/regressions/*.ir` keep the cases those found. The `fuzz/` crate
//! (`cargo +nightly fuzz run random_ir` / `expression`) drives the same generator from fuzzer
//! input, and pcap-filter text through `sift::Filter::compile` comparing the JIT, the bytecode
//! interpreter and the reference interpreter.

#![forbid(unsafe_code)]

pub mod cfg;
pub mod dce;
pub mod facts;
pub mod gvn;
pub mod hash;
pub mod join_table;
pub mod merge;
pub mod predicate;
pub mod range;
pub mod rewrite;
pub mod simplify;
pub mod sink;
pub mod table;
pub mod thread;

#[cfg(test)]
mod testutil;

mod stats;

use std::fmt;

use sift_ir::{Function, VerifyError};

use crate::cfg::Analysis;

pub use stats::{Counts, PassChanges, Stats};

/// Which passes run, and their limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub simplify: bool,
    pub gvn: bool,
    pub predicates: bool,
    pub threading: bool,
    pub dce: bool,
    pub merge: bool,
    pub tables: bool,
    /// Sink constants back next to their only user at the end.
    pub sink_constants: bool,
    /// Smallest number of keys a `switch` is built for.
    pub min_table_keys: usize,
    /// Upper bound on optimization rounds (each round runs every enabled pass once).
    pub max_rounds: usize,
    /// Run the IR verifier after every pass.
    pub verify: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            simplify: true,
            gvn: true,
            predicates: true,
            threading: true,
            dce: true,
            merge: true,
            tables: true,
            sink_constants: true,
            min_table_keys: 3,
            max_rounds: 16,
            verify: cfg!(debug_assertions),
        }
    }
}

impl Options {
    /// Every pass off: `optimize_with` only renumbers.
    pub fn none() -> Options {
        Options {
            simplify: false,
            gvn: false,
            predicates: false,
            threading: false,
            dce: false,
            merge: false,
            tables: false,
            sink_constants: false,
            ..Options::default()
        }
    }
}

/// A pass produced IR the verifier rejects: a bug in the optimizer, reported with the pass.
#[derive(Clone, Debug)]
pub struct PassError {
    pub pass: &'static str,
    pub round: usize,
    pub error: VerifyError,
    /// The function as the pass left it, in text form.
    pub function: String,
}

impl fmt::Display for PassError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "optimizer pass `{}` (round {}) produced invalid IR: {}\n{}",
            self.pass, self.round, self.error, self.function
        )
    }
}

impl std::error::Error for PassError {}

/// The fewest keys of a table formed in the first round, before predicate elimination and
/// threading. A shorter chain waits for the end: those passes decide its tests one by one on
/// each way in (`ether proto` tests known false after an earlier one held, say), where a
/// switch is only decided whole; a chain this long costs them more than it could gain.
const EARLY_TABLE_KEYS: usize = 64;

/// Optimizes `f` with every pass.
///
/// # Panics
///
/// In debug builds, if a pass produces IR the verifier rejects (an optimizer bug).
pub fn optimize(f: &mut Function) -> Stats {
    optimize_with(f, &Options::default())
}

/// Optimizes `f` with the passes `opts` enables.
///
/// # Panics
///
/// If `opts.verify` is set and a pass produces IR the verifier rejects (an optimizer bug).
pub fn optimize_with(f: &mut Function, opts: &Options) -> Stats {
    match try_optimize_with(f, opts) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

/// Optimizes `f`; with `opts.verify`, stops at the first pass whose output fails verification.
/// `f` must verify on entry.
pub fn try_optimize_with(f: &mut Function, opts: &Options) -> Result<Stats, PassError> {
    if f.blocks.is_empty() {
        return Ok(Stats {
            before: Counts::of(f),
            ..Stats::default()
        });
    }
    // The control-flow facts, kept from pass to pass while the edges stay the same.
    let mut analysis = Analysis::new();
    // Compacted first, the values are counted from a few dense pages instead of many sparse ones.
    compact_if_sparse(f, &mut analysis);
    let mut stats = Stats {
        before: Counts::over(f, &analysis.cfg(f).rpo),
        ..Stats::default()
    };
    let check = |f: &Function, analysis: &Analysis, pass: &'static str, round: usize| {
        if !opts.verify {
            return Ok(());
        }
        analysis.check(f, pass);
        sift_ir::verify(f).map_err(|error| PassError {
            pass,
            round,
            error,
            function: f.to_string(),
        })
    };
    for round in 0..opts.max_rounds {
        if round > 0 {
            compact_if_sparse(f, &mut analysis);
        }
        let mut changed = 0;
        if opts.simplify {
            let n = simplify::run_with(f, &mut analysis);
            stats.changes.simplify += n;
            changed += n;
            check(f, &analysis, "simplify", round)?;
        }
        if opts.gvn {
            let n = gvn::run_with(f, &mut analysis);
            stats.changes.gvn += n;
            changed += n;
            check(f, &analysis, "gvn", round)?;
            compact_if_sparse(f, &mut analysis);
            // Long chains become tables as soon as numbering has made their tests read one
            // value, so that the passes below meet one switch instead of every test.
            if round == 0 && opts.tables {
                let min_keys = opts.min_table_keys.max(EARLY_TABLE_KEYS);
                stats.changes.tables += table::run_with(f, min_keys, &mut analysis);
                check(f, &analysis, "tables", round)?;
            }
        }
        if opts.predicates {
            let n = predicate::run_with(f, &mut analysis);
            stats.changes.predicates += n;
            changed += n;
            check(f, &analysis, "predicates", round)?;
        }
        if opts.threading {
            let n = thread::run_with(f, &mut analysis);
            stats.changes.threading += n;
            changed += n;
            check(f, &analysis, "threading", round)?;
        }
        if opts.dce {
            let n = dce::run_with(f, &mut analysis);
            stats.changes.dce += n;
            changed += n;
            check(f, &analysis, "dce", round)?;
        }
        if opts.merge {
            let n = merge::run_with(f, &mut analysis);
            stats.changes.merge += n;
            changed += n;
            check(f, &analysis, "merge", round)?;
        }
        stats.rounds = round + 1;
        if changed == 0 {
            break;
        }
    }
    compact_if_sparse(f, &mut analysis);
    if opts.tables {
        let min_keys = opts.min_table_keys.max(2);
        stats.changes.tables += table::run_with(f, min_keys, &mut analysis);
        check(f, &analysis, "tables", stats.rounds)?;
        stats.changes.tables += join_table::run_with(f, &mut analysis);
        check(f, &analysis, "join tables", stats.rounds)?;
        if opts.threading {
            stats.changes.threading += thread::run_with(f, &mut analysis);
            check(f, &analysis, "threading", stats.rounds)?;
        }
        if opts.dce {
            stats.changes.dce += dce::run_with(f, &mut analysis);
            check(f, &analysis, "dce", stats.rounds)?;
        }
    }
    if opts.sink_constants {
        sink::run_with(f, &mut analysis);
        check(f, &analysis, "sink", stats.rounds)?;
    }
    rewrite::canonicalize_over(f, &analysis.take(f).rpo);
    check(f, &Analysis::new(), "canonicalize", stats.rounds)?;
    // Canonical numbering is reverse postorder: every block is reachable, in order.
    let blocks: Vec<sift_ir::Block> = (0..f.blocks.len() as u32).map(sift_ir::Block).collect();
    debug_assert_eq!(blocks, crate::cfg::rpo(f));
    stats.after = Counts::over(f, &blocks);
    Ok(stats)
}

/// Compacts the values of `f` (see [`rewrite::compact_values`]) when most of them are no longer
/// defined by any block.
fn compact_if_sparse(f: &mut Function, analysis: &mut Analysis) {
    let defined: usize = f
        .blocks
        .iter()
        .map(|data| data.params.len() + data.insts.len())
        .sum();
    if defined * 2 < f.values.len() {
        rewrite::compact_values(f, &analysis.cfg(f).rpo);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::assert_same_semantics;
    use sift_ir::parse_function;

    #[test]
    fn every_option_combination_preserves_semantics() {
        let text = "block0:
    v0 = load.h [12]
    v1 = const 0x800
    br eq v0, v1, block1, block2
block1:
    v2 = load.b [23]
    v3 = const 6
    br eq v2, v3, block5, block2
block2:
    v4 = load.h [12]
    v5 = const 0x800
    br ne v4, v5, block4, block3
block3:
    v6 = load.b [23]
    v7 = const 17
    br eq v6, v7, block5, block4
block4:
    ret 0
block5:
    ret 96
";
        let orig = parse_function(text).unwrap();
        for mask in 0..128u32 {
            let opts = Options {
                simplify: mask & 1 != 0,
                gvn: mask & 2 != 0,
                predicates: mask & 4 != 0,
                threading: mask & 8 != 0,
                dce: mask & 16 != 0,
                tables: mask & 32 != 0,
                merge: mask & 64 != 0,
                verify: true,
                ..Options::default()
            };
            let mut f = orig.clone();
            try_optimize_with(&mut f, &opts).unwrap();
            assert_same_semantics(&orig, &f);
        }
        let mut f = orig.clone();
        let stats = optimize(&mut f);
        assert!(stats.after.branches < stats.before.branches, "{stats}\n{f}");
    }

    /// A chain of `n` tests of one byte, each block loading it again (as libpcap's optimizer
    /// leaves `host` chains), then one more test.
    fn byte_chain(n: u32) -> Function {
        let mut text = String::new();
        for i in 0..n {
            let (v, next) = (2 * i, if i + 1 == n { n } else { i + 1 });
            text += &format!(
                "block{i}:\n    v{v} = load.b [14]\n    v{} = const {i}\n    br eq v{v}, v{}, block{}, block{next}\n",
                v + 1,
                v + 1,
                n + 1
            );
        }
        text += &format!(
            "block{n}:\n    v{} = load.b [15]\n    v{} = const 7\n    br eq v{}, v{}, block{}, block{}\n",
            2 * n,
            2 * n + 1,
            2 * n,
            2 * n + 1,
            n + 2,
            n + 3
        );
        text += &format!(
            "block{}:\n    ret 1\nblock{}:\n    ret 2\nblock{}:\n    ret 0\n",
            n + 1,
            n + 2,
            n + 3
        );
        parse_function(&text).unwrap()
    }

    #[test]
    fn chains_become_one_table_whether_formed_early_or_late() {
        for n in [EARLY_TABLE_KEYS as u32 - 1, EARLY_TABLE_KEYS as u32] {
            let orig = byte_chain(n);
            let mut f = orig.clone();
            let stats = optimize_with(
                &mut f,
                &Options {
                    verify: true,
                    ..Options::default()
                },
            );
            assert_same_semantics(&orig, &f);
            let switches: Vec<usize> = table::switches(&f)
                .into_iter()
                .map(|b| f.block(b).term.successor_count() - 1)
                .collect();
            assert_eq!(switches, [n as usize], "{n} keys\n{stats}\n{f}");
        }
    }
}
