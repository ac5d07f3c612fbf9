//! The optimizer's shortcuts (pullups that skip runs, [`super::runs`]; rounds that reuse what
//! pullups cannot change) against the plain algorithm they replace ([`super::reference_mode`]):
//! the whole optimized function must be the same text, on long generated chains (where the
//! runs are long and pullups many) and on the shared random expressions.

use sift_ir::Function;

use super::with_reference_mode;
use crate::{lower, Options};

/// The link types the brief's chains are compiled for: Ethernet and raw IP.
const LINKTYPES: [u32; 2] = [1, 101];

fn optimized(text: &str, linktype: u32) -> Result<String, String> {
    let expr = sift_syntax::parse(text).map_err(|e| format!("parse: {e}"))?;
    lower(expr.as_ref(), &Options::new(linktype, 262_144))
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

/// xorshift64*: deterministic, and enough for picking terms.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// A primitive from a small pool of values, so that chains repeat values and tests.
fn term(rng: &mut Rng, kind: u64, pool: u64) -> String {
    let v = rng.below(pool);
    let dir = rng.pick(&["", "", "src ", "dst ", "src or dst ", "src and dst "]);
    let proto = rng.pick(&["", "", "tcp ", "udp ", "sctp ", "ip ", "ip6 "]);
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
    let op = rng.pick(&["or", "or", "and"]);
    let mut out = String::new();
    let mut open = 0;
    for i in 0..len {
        if i > 0 {
            let joiner = if rich && rng.below(5) == 0 {
                rng.pick(&["or", "and"])
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
    for linktype in LINKTYPES {
        for kind in 0..4 {
            for len in [1, 2, 3, 7, 40, 150, 1000] {
                let text = (0..len)
                    .map(|i| match kind {
                        0 => format!("host 10.0.{}.{}", i / 250, i % 250 + 1),
                        1 => format!("net 10.{}.{}.0/24", i / 250, i % 250),
                        2 => format!("port {}", 1000 + i),
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
}

#[test]
fn generated_chains_match_the_reference() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
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
        let op = rng.pick(&["eq", "eq", "eq", "ne", "gt", "set"]);
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
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for _ in 0..3000 {
        let text = random_chain_function(&mut rng);
        let run = || {
            let mut f = sift_ir::parse_function(&text).expect("generated IR parses");
            // As `lower` leaves it: the reachable blocks, numbered in reverse postorder (the
            // shortcuts may number blocks differently on the way).
            super::apply(&mut f).map(|()| {
                crate::reachable_from(f, sift_ir::Function::ENTRY)
                    .0
                    .to_string()
            })
        };
        let fast = run();
        let reference = with_reference_mode(run);
        assert_eq!(fast, reference, "on\n{text}");
    }
}
