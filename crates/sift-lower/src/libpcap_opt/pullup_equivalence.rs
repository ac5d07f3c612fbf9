//! The optimizer's shortcuts (pullups that skip runs, [`super::runs`]; rounds that reuse what
//! pullups cannot change) against the plain algorithm they replace ([`super::reference_mode`]):
//! the whole optimized function must be the same text, on long generated chains (where the
//! runs are long and pullups many) and on the shared random expressions.

use sift_ir::Function;
use sift_testgen::Rng;

use super::with_reference_mode;
use crate::{lower, Options};

/// The link types the brief's chains are compiled for: Ethernet and raw IP.
const LINKTYPES: [u32; 2] = [1, 101];

fn optimized(text: &str, linktype: u32) -> Result<String, String> {
    let expr = sift_syntax::parse(text).map_err(|e| format!("parse: {e}"))?;
    crate::statement_model::emulation_only(|| {
        lower(expr.as_ref(), &Options::new(linktype, 262_144))
    })
    .map(|f: Function| f.to_string())
    .map_err(|e| e.to_string())
}

/// Compiles `text` both ways and fails with the first differing line.
fn assert_same(text: &str, linktype: u32) {
    let fast = optimized(text, linktype);
    let reference = with_reference_mode(|| optimized(text, linktype));
    if fast != reference {
        let shown: String = text.chars().take(300).collect();
        let (a, b) = (fast.unwrap_or_else(|e| e), reference.unwrap_or_else(|e| e));
        let first = a
            .lines()
            .zip(b.lines())
            .position(|(x, y)| x != y)
            .unwrap_or(0);
        panic!(
            "linktype {linktype}: run skipping differs from the reference on `{shown}` at \
             line {first}:\n  fast:      {:?}\n  reference: {:?}",
            a.lines().nth(first),
            b.lines().nth(first)
        );
    }
}

/// A primitive from a small pool of values, so that chains repeat values and tests.
fn term(rng: &mut Rng, kind: u64, pool: u64) -> String {
    let v = rng.below(pool);
    let dir = *rng.pick(&["", "", "src ", "dst ", "src or dst ", "src and dst "]);
    let proto = *rng.pick(&["", "", "tcp ", "udp ", "sctp ", "ip ", "ip6 "]);
    match kind {
        0 => format!("{dir}host 10.0.{}.{}", v / 250, v % 250 + 1),
        1 => format!("{dir}net 10.{}.{}.0/24", v / 250, v % 250),
        2 => format!("{proto}{dir}port {}", 1000 + v),
        3 => format!(
            "{proto}{dir}portrange {}-{}",
            1000 + v,
            1000 + v + rng.below(5)
        ),
        4 => format!("ip6 {dir}host 2001:db8::{:x}", v + 1),
        5 => format!("ip[{}] = {}", rng.below(20), v % 256),
        6 => rng
            .pick(&["tcp", "udp", "icmp", "ip", "ip6", "arp", "vlan"])
            .to_string(),
        7 => format!("{dir}net 10.{}.0.0/16 and {proto}port {}", v % 7, 1000 + v),
        _ => format!("ether {dir}host 00:11:22:33:44:{:02x}", v % 256),
    }
}

/// A chain of `len` terms: one kind or mixed, joined by one operator or a mix, with `not`s
/// and parenthesised groups when `rich`.
fn chain(rng: &mut Rng, len: usize, rich: bool) -> String {
    let mixed = rich && rng.below(2) == 0;
    let fixed_kind = rng.below(9);
    let pool = [3, 10, 50, 1000][rng.below(4) as usize];
    let op = *rng.pick(&["or", "or", "and"]);
    let mut out = String::new();
    let mut open = 0;
    for i in 0..len {
        if i > 0 {
            let joiner = if rich && rng.below(5) == 0 {
                *rng.pick(&["or", "and"])
            } else {
                op
            };
            out.push_str(&format!(" {joiner} "));
        }
        if rich && rng.below(8) == 0 {
            out.push('(');
            open += 1;
        }
        if rich && rng.below(6) == 0 {
            out.push_str("not ");
        }
        let kind = if mixed { rng.below(9) } else { fixed_kind };
        out.push_str(&term(rng, kind, pool));
        if open > 0 && rng.below(4) == 0 {
            out.push(')');
            open -= 1;
        }
    }
    out.push_str(&")".repeat(open));
    out
}

#[test]
fn long_single_kind_chains_match_the_reference() {
    let passed = super::equality_runs::runs_passed();
    for linktype in LINKTYPES {
        for kind in 0..5 {
            for len in [1, 2, 3, 7, 40, 150, 1000] {
                let text = (0..len)
                    .map(|i| match kind {
                        0 => format!("host 10.0.{}.{}", i / 250, i % 250 + 1),
                        1 => format!("net 10.{}.{}.0/24", i / 250, i % 250),
                        2 => format!("port {}", 1000 + i),
                        // Runs of source tests that threading passes whole (`equality_runs`).
                        3 => format!(
                            "(src host 10.0.{}.{} and dst port {})",
                            i / 250,
                            i % 250 + 1,
                            i
                        ),
                        // A different value in every test (and some twice, far apart).
                        _ => format!("ether[{}] = {}", i % 700, i % 3),
                    })
                    .collect::<Vec<_>>();
                for op in [" or ", " and "] {
                    assert_same(&text.join(op), linktype);
                }
                if len > 150 {
                    continue;
                }
                // Repeated values: each term twice, far apart and side by side.
                let twice: Vec<String> = text.iter().chain(&text).cloned().collect();
                assert_same(&twice.join(" or "), linktype);
                let doubled: Vec<String> =
                    text.iter().flat_map(|t| [t.clone(), t.clone()]).collect();
                assert_same(&doubled.join(" or "), linktype);
            }
        }
    }
    let passed = super::equality_runs::runs_passed() - passed;
    assert!(passed > 1000, "threading passed only {passed} runs whole");
}

#[test]
fn generated_chains_match_the_reference() {
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    for round in 0..160 {
        let rich = round % 2 == 1;
        let len = [2, 5, 12, 30, 80, 200][rng.below(6) as usize];
        let text = chain(&mut rng, len, rich);
        for linktype in LINKTYPES {
            assert_same(&text, linktype);
        }
    }
}

/// The shared random expressions (`../shared/exprs/random.txt`, the suite the differential
/// tests run against libpcap), when the shared directory is there.
#[test]
fn shared_random_expressions_match_the_reference() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/exprs/random.txt"
    );
    let Ok(text) = std::fs::read_to_string(path) else {
        eprintln!("NOTE: {path} not found; skipped");
        return;
    };
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        for linktype in LINKTYPES {
            assert_same(line, linktype);
        }
    }
}

/// A random acyclic function shaped like the chains pullups act on: blocks test a load from
/// a small pool of offsets (so that values repeat), most true edges share one successor and
/// most false edges go to the next block, but any block may also be entered from elsewhere
/// (joins, which decide the dominance checks the runs must honour).
fn random_chain_function(rng: &mut Rng) -> String {
    let n = 2 + rng.below(60) as usize;
    let offsets = 1 + rng.below(4);
    let (reject, accept) = (n, n + 1);
    let shared_bias = rng.below(10);
    let mut text = String::new();
    for i in 0..n {
        let forward = |rng: &mut Rng| i + 1 + rng.below((n + 1 - i) as u64) as usize;
        let op = *rng.pick(&["eq", "eq", "eq", "ne", "gt", "set"]);
        let shared = if rng.below(2) == 0 { accept } else { reject };
        let (mut t, mut e) = (
            if rng.below(10) < shared_bias {
                shared
            } else {
                forward(rng)
            },
            if rng.below(10) < 7 {
                i + 1
            } else {
                forward(rng)
            },
        );
        if rng.below(6) == 0 {
            std::mem::swap(&mut t, &mut e);
        }
        text.push_str(&format!(
            "block{i}:\n    v{} = load.b [{}]\n    v{} = const {}\n    br {op} v{}, v{}, block{t}, block{e}\n",
            2 * i,
            14 + rng.below(offsets),
            2 * i + 1,
            rng.below(3),
            2 * i,
            2 * i + 1,
        ));
    }
    text.push_str(&format!(
        "block{reject}:\n    ret 0\nblock{accept}:\n    ret 1\n"
    ));
    text
}

#[test]
fn random_chain_functions_match_the_reference() {
    let mut rng = Rng::new(0x2545_f491_4f6c_dd1d);
    for _ in 0..3000 {
        same_as_reference(&random_chain_function(&mut rng));
    }
}

/// Asserts that `text` comes out of [`super::apply`] as it does in reference mode, compared as
/// `lower` leaves it: the reachable blocks, numbered in reverse postorder (the shortcuts may
/// number blocks differently on the way).
fn same_as_reference(text: &str) {
    let run = || {
        let mut f = sift_ir::parse_function(text).expect("generated IR parses");
        super::apply(&mut f, false).map(|()| {
            crate::reachable_from(f, sift_ir::Function::ENTRY)
                .0
                .to_string()
        })
    };
    let fast = run();
    let reference = with_reference_mode(run);
    assert_eq!(fast, reference, "on\n{text}");
}

/// A random function with a dispatch on top and chains below it shaped like the ones
/// `grouping.rs` sorts directly: tests sharing a return along one edge, each chain comparing
/// loads of its own few offsets, with now and then what makes a chain not closed (an offset
/// the dispatch compares too, a test repeated, an entry into its middle, a held equality).
fn random_grouping_function(rng: &mut Rng) -> String {
    let chains = 1 + rng.below(4) as usize;
    let lens: Vec<usize> = (0..chains).map(|_| 1 + rng.below(40) as usize).collect();
    let dispatch = chains + rng.below(3) as usize;
    let total = dispatch + lens.iter().sum::<usize>();
    let (reject, accept) = (total, total + 1);
    let heads: Vec<usize> = (0..chains)
        .map(|c| dispatch + lens[..c].iter().sum::<usize>())
        .collect();
    let mut text = String::new();
    let mut value = 0;
    let mut test = |text: &mut String, i: usize, offset: u64, k: u64, op: &str, t, e| {
        text.push_str(&format!(
            "block{i}:\n    v{value} = load.b [{offset}]\n    v{} = const {k}\n    \
             br {op} v{value}, v{}, block{t}, block{e}\n",
            value + 1,
            value + 1,
        ));
        value += 2;
    };
    for i in 0..dispatch {
        // Each dispatch block leads to a chain head or a later dispatch block, or a return.
        let pick = |rng: &mut Rng| match rng.below(4) {
            0 if i + 1 < dispatch => i + 1 + rng.below((dispatch - i - 1) as u64) as usize,
            1 => [reject, accept][rng.below(2) as usize],
            _ => heads[rng.below(chains as u64) as usize],
        };
        let (t, e) = (pick(rng), pick(rng));
        let mut e = if t == e { reject + accept - t } else { e };
        if t == e {
            e = reject;
        }
        test(&mut text, i, 12 + rng.below(2), rng.below(3), "eq", t, e);
    }
    for c in 0..chains {
        let or = rng.below(3) != 0;
        let shared = [reject, accept][rng.below(2) as usize];
        let exit = reject + accept - shared;
        let offsets = 2 + rng.below(2);
        let base = if rng.below(8) == 0 {
            12
        } else {
            20 + 4 * c as u64
        };
        for j in 0..lens[c] {
            let i = heads[c] + j;
            let mut next = if j + 1 == lens[c] { exit } else { i + 1 };
            if rng.below(40) == 0 {
                next = heads[rng.below(chains as u64) as usize]
                    .max(i + 1)
                    .min(exit);
            }
            // `ne` holds an equality along the chain: rare, or few chains would be closed.
            let op = match rng.below(30) {
                0 => "ne",
                1..=3 => "gt",
                4..=6 => "set",
                _ => "eq",
            };
            let (t, e) = if or { (shared, next) } else { (next, shared) };
            let range = if rng.below(100) == 0 { 2 } else { 1000 };
            let k = rng.below(range);
            test(&mut text, i, base + rng.below(offsets), k, op, t, e);
        }
    }
    text.push_str(&format!(
        "block{reject}:\n    ret 0\nblock{accept}:\n    ret 1\n"
    ));
    text
}

#[test]
fn random_closed_chains_match_the_reference() {
    let mut rng = Rng::new(0x1234_5678_9abc_def1);
    let before = super::grouping::chains_grouped();
    for _ in 0..3000 {
        same_as_reference(&random_grouping_function(&mut rng));
    }
    let grouped = super::grouping::chains_grouped() - before;
    assert!(grouped > 500, "only {grouped} chains grouped");
}
