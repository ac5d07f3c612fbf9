//! Randomized translation validation: thousands of random functions (see
//! `common/random_ir.rs`), each optimized by every pass alone, by one random combination of
//! passes, and by the whole pipeline (then once more, on its own output), with the verifier on
//! after every pass; the optimized function must return exactly what the original returns on
//! random packets and on every truncation of some of them (a load out of bounds rejects, and
//! that must be preserved exactly).
//!
//! A divergence prints what reproduces it: the seed, the pass, the original and optimized IR
//! text and the packet. Reduced cases go into `tests/regressions/` (see `regressions.rs`).
//!
//! `SIFT_TV_FUNCTIONS=n` and `SIFT_TV_LARGE_FUNCTIONS=n` change the number of functions,
//! `SIFT_TV_SEED=s` the first seed, `SIFT_TV_DEBUG=1` prints each function that sets a new
//! record of rounds.

mod common;

use std::time::{Duration, Instant};

use common::random_ir::{self, Entropy, Program, Size, SplitMix};
use sift_ir::{Cache, Function, Interpreter};
use sift_opt::{try_optimize_with, Options};

use common::passes::configurations;

/// A packet, its wire length, and what the original function returns on it.
struct Case {
    data: Vec<u8>,
    wire: u32,
    expected: u32,
}

/// Random packets for `p`; every truncation of the first few, two cuts of the others.
fn cases(p: &Program, interp: &Interpreter, seed: u64, count: usize) -> Vec<Case> {
    let mut e = SplitMix(seed ^ 0x5eed_0f9a_c7c7);
    let mut cache = Cache::new();
    let mut out = Vec::new();
    for i in 0..count {
        let (data, wire) = random_ir::packet(&mut e, p);
        let cuts: Vec<usize> = if i < 3 {
            (0..=data.len()).collect()
        } else {
            vec![
                data.len(),
                data.len() / 2,
                data.len().saturating_sub(1 + (i % 3)),
            ]
        };
        for cut in cuts {
            let data = data[..cut].to_vec();
            let expected = interp.run(&mut cache, &data, wire);
            out.push(Case {
                data,
                wire,
                expected,
            });
        }
    }
    out
}

#[derive(Default)]
struct Tally {
    functions: usize,
    blocks: usize,
    optimizations: usize,
    runs: usize,
    cases: usize,
    accepted: usize,
    max_time: Duration,
    max_time_seed: u64,
    size_before: usize,
    size_after: usize,
    /// Most rounds the whole pipeline took (any configuration: `max_rounds_any`; combinations
    /// without threading converge slowly, by design).
    max_rounds: usize,
    max_rounds_any: usize,
    /// Per pass: rewrites over all functions, and functions it rewrote (pass alone).
    changes: Vec<(&'static str, usize, usize)>,
    failures: Vec<String>,
}

fn hex(data: &[u8]) -> String {
    data.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Optimizes `orig` with `opts` and compares it on every case; returns a report on failure.
fn validate(
    tally: &mut Tally,
    seed: u64,
    name: &str,
    opts: &Options,
    orig: &Function,
    cases: &[Case],
) -> Result<Function, String> {
    let mut opt = orig.clone();
    let start = Instant::now();
    let result = try_optimize_with(&mut opt, opts);
    let took = start.elapsed();
    if let Ok(stats) = &result {
        if stats.rounds > tally.max_rounds && std::env::var_os("SIFT_TV_DEBUG").is_some() {
            eprintln!(
                "{name}: {} rounds on seed {seed:#x}\n{orig}\n{stats}",
                stats.rounds
            );
        }
        tally.max_rounds_any = tally.max_rounds_any.max(stats.rounds);
        if name == "all" {
            tally.max_rounds = tally.max_rounds.max(stats.rounds);
        }
        record_changes(tally, name, &stats.changes);
    }
    tally.optimizations += 1;
    if took > tally.max_time {
        tally.max_time = took;
        tally.max_time_seed = seed;
    }
    if let Err(e) = result {
        return Err(format!(
            "seed {seed:#x}, pass {name}: {e}\noriginal:\n{orig}"
        ));
    }
    let interp = Interpreter::new(opt.clone())
        .map_err(|e| format!("seed {seed:#x}, pass {name}: {e}\n{opt}"))?;
    let mut cache = Cache::new();
    for c in cases {
        tally.runs += 1;
        let got = interp.run(&mut cache, &c.data, c.wire);
        if got != c.expected {
            return Err(format!(
                "seed {seed:#x}, pass {name}: original returns {}, optimized {got}\n\
                 packet {} (wire {})\noriginal:\n{orig}\noptimized:\n{opt}",
                c.expected,
                hex(&c.data),
                c.wire
            ));
        }
    }
    Ok(opt)
}

/// Adds what the pass `name` (alone) did to the tally.
fn record_changes(tally: &mut Tally, name: &str, c: &sift_opt::PassChanges) {
    let n = match name {
        "simplify" => c.simplify,
        "gvn" => c.gvn,
        "predicates" => c.predicates,
        "threading" => c.threading,
        "dce" => c.dce,
        "merge" => c.merge,
        "tables" | "tables-2" => c.tables,
        "all" => c.tables,
        _ => return,
    };
    let i = match tally.changes.iter().position(|(p, ..)| *p == name) {
        Some(i) => i,
        None => {
            let name: &'static str = Box::leak(name.to_owned().into_boxed_str());
            tally.changes.push((name, 0, 0));
            tally.changes.len() - 1
        }
    };
    tally.changes[i].1 += n;
    tally.changes[i].2 += usize::from(n > 0);
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| {
            let s = s.trim();
            match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => s.parse().ok(),
            }
        })
        .unwrap_or(default)
}

/// A combination of passes chosen by `seed`, named by the passes it enables.
fn random_combination(seed: u64) -> (String, Options) {
    let bits = SplitMix(seed ^ 0xc0_4b15).word();
    let on = |i: u32| bits >> i & 1 == 1;
    let opts = Options {
        simplify: on(0),
        gvn: on(1),
        predicates: on(2),
        threading: on(3),
        dce: on(4),
        merge: on(5),
        tables: on(6),
        sink_constants: on(7),
        min_table_keys: if on(8) { 2 } else { 3 },
        verify: true,
        ..Options::default()
    };
    let names = [
        "simplify",
        "gvn",
        "predicates",
        "threading",
        "dce",
        "merge",
        "tables",
        "sink",
    ];
    let enabled: Vec<&str> = (0..8)
        .filter(|&i| on(i))
        .map(|i| names[i as usize])
        .collect();
    (format!("combination {}", enabled.join("+")), opts)
}

/// Validates `count` functions of at most `size` from consecutive seeds and reports.
fn suite(label: &str, size: Size, first: u64, count: u64) {
    let configs = configurations();
    let mut tally = Tally::default();
    let mut largest = 0;
    for seed in first..first + count {
        let program = random_ir::generate_sized(&mut SplitMix(seed), size);
        let orig = program.function.clone();
        if let Err(e) = sift_ir::verify(&orig) {
            panic!("the generator made invalid IR (seed {seed:#x}): {e}\n{orig}");
        }
        let interp = Interpreter::new(orig.clone()).expect("verified");
        let cases = cases(&program, &interp, seed, 24);
        tally.functions += 1;
        tally.blocks += orig.blocks.len();
        largest = largest.max(orig.blocks.len());
        tally.cases += cases.len();
        tally.accepted += cases.iter().filter(|c| c.expected != 0).count();
        for (name, opts) in &configs {
            match validate(&mut tally, seed, name, opts, &orig, &cases) {
                Ok(opt) if *name == "all" => {
                    tally.size_before += orig.inst_count();
                    tally.size_after += opt.inst_count();
                    // Optimizing optimized code must preserve its meaning too.
                    if let Err(e) = validate(&mut tally, seed, "all (again)", opts, &opt, &cases) {
                        tally.failures.push(e);
                    }
                }
                Ok(_) => {}
                Err(e) => tally.failures.push(e),
            }
        }
        // And one random combination of passes per function.
        let (name, opts) = random_combination(seed);
        if let Err(e) = validate(&mut tally, seed, &name, &opts, &orig, &cases) {
            tally.failures.push(e);
        }
    }
    eprintln!(
        "[{label}] {} functions ({} blocks, largest {largest}), {} optimizations, {} runs \
         ({:.1}% of packets accepted), instructions {} -> {} (whole pipeline), slowest \
         optimization {:?} (seed {:#x}), at most {} rounds ({} in any configuration), \
         {} failures",
        tally.functions,
        tally.blocks,
        tally.optimizations,
        tally.runs,
        100.0 * tally.accepted as f64 / tally.cases.max(1) as f64,
        tally.size_before,
        tally.size_after,
        tally.max_time,
        tally.max_time_seed,
        tally.max_rounds,
        tally.max_rounds_any,
        tally.failures.len()
    );
    eprintln!("[{label}] each pass alone: rewrites (functions rewritten)");
    for (name, n, fns) in &tally.changes {
        eprintln!("  {name:10} {n:8} ({fns})");
    }
    for f in tally.failures.iter().take(3) {
        eprintln!("----\n{f}");
    }
    assert!(
        tally.failures.is_empty(),
        "[{label}] the optimizer changed verdicts"
    );
}

#[test]
fn every_pass_preserves_verdicts_on_random_ir() {
    // Debug builds run a tenth (about as long as the release run).
    let default = if cfg!(debug_assertions) {
        2_000
    } else {
        20_000
    };
    let count = env_number("SIFT_TV_FUNCTIONS", default);
    let first = env_number("SIFT_TV_SEED", 0x7a11_0000);
    suite("small", Size::SMALL, first, count);
}

/// Fewer, larger functions (up to 600 tests or 300 random blocks): the rounds and passes must
/// still converge, and the slowest optimization is reported (not asserted: no timed tests).
#[test]
fn every_pass_preserves_verdicts_on_large_random_ir() {
    let default = if cfg!(debug_assertions) { 30 } else { 300 };
    let count = env_number("SIFT_TV_LARGE_FUNCTIONS", default);
    let first = env_number("SIFT_TV_SEED", 0x1a46_0000);
    suite("large", Size::LARGE, first, count);
}
