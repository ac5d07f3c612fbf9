//! Long `or` chains of one primitive over many values (`host a or host b or ...`, a blocklist)
//! lowered as one set lookup.
//!
//! libpcap's optimizer reorders such a chain: its or-pullups gather the source tests of every
//! term ahead of the destination tests, so the optimized filter tests the source against all
//! the values before it reads the destination (a capture cut inside the destination matches
//! when its source is one of them). That is what sift's set primitive means (`sets.rs`,
//! `docs/extensions.md`). Lowering the chain term by term and then reproducing the optimizer
//! (`libpcap_opt`) gives the same meaning in time linear in the chain, but with a large factor:
//! 23 blocks per `port` term before the rounds start. The set is a handful of blocks, whatever
//! the number of terms.
//!
//! The chain is lowered as `... in SET` is, with one `member` call per field read, and what
//! libpcap's optimizer makes of that is computed as for any set. Each call is then written as
//! a `switch` over the set's values, the form sift-opt gives the chain's equality tests: a
//! filter in libpcap's language calls no coprocessor, whatever the back end.
//!
//! The chains taken are those whose equivalence the tests check, against libpcap's own optimizer
//! (`sift/tests/chain_sets.rs`, up to its reach) and against the term-by-term lowering (this
//! module's tests, up to thousands of terms): every term is the same primitive with the same
//! qualifiers, `host`/`net` over IPv4 with one mask for all, or `port`, with no direction or
//! one direction or `src or dst`. Two shapes are left out because the optimizer does not
//! reorder them so: nets of different lengths, and a network of value 0 under a mask (libpcap's
//! peephole turns its `and; jeq #0` into a `jset`, which the pullups do not move past). Short
//! chains are left too: the exact model of libpcap's optimizer (`statement_model.rs`) lowers
//! them fast, and their code stays as it was.

use sift_ir::set_lookups::tested_alone;
use sift_ir::{Block, Function, Inst, Target, Terminator};
use sift_syntax::ast::{AddrKind, Dir, Expr, PrimitiveKind, Proto, Qualifiers};

use crate::names::atoin;

/// Chains shorter than this are lowered term by term.
pub(crate) const MIN_TERMS: usize = 32;

/// An `or` chain to lower as one set: the qualifiers its terms share, the mask under which
/// they compare an address (all ones for ports), their values, and whether the filter is the
/// chain's negation.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ChainSet {
    pub q: Qualifiers,
    pub mask: u32,
    pub values: Vec<u32>,
    pub negated: bool,
}

impl ChainSet {
    /// The set's items, one per value.
    pub fn ranges(&self) -> Vec<(u128, u128)> {
        self.values
            .iter()
            .map(|&v| (u128::from(v), u128::from(v)))
            .collect()
    }
}

/// `e` as a [`ChainSet`], if it is an `or` of at least [`MIN_TERMS`] terms that the set
/// lowering gives libpcap's optimized meaning (see the module's documentation), or the
/// negation of one: `not (host a or host b ...)`, or `not host a and not host b ...`.
pub(crate) fn chain_set(e: &Expr) -> Option<ChainSet> {
    let (terms, negated) = match e {
        Expr::Or(terms) => (terms, false),
        Expr::Not(inner) => match &**inner {
            Expr::Or(terms) => (terms, true),
            _ => return None,
        },
        Expr::And(terms) => (terms, true),
        Expr::Primitive(_) => return None,
    };
    if terms.len() < MIN_TERMS {
        return None;
    }
    let mut shared: Option<(Qualifiers, u32)> = None;
    let mut values = Vec::with_capacity(terms.len());
    for t in terms {
        let t = match (e, t) {
            (Expr::And(_), Expr::Not(t)) => &**t,
            (Expr::And(_), _) => return None,
            _ => t,
        };
        let Expr::Primitive(p) = t else {
            return None;
        };
        let (q, mask, value) = term(&p.kind)?;
        if *shared.get_or_insert((q, mask)) != (q, mask) || (value == 0 && mask != u32::MAX) {
            return None;
        }
        values.push(value);
    }
    let (q, mask) = shared?;
    let proto_fits = match q.addr {
        AddrKind::Port => matches!(
            q.proto,
            Proto::Default | Proto::Tcp | Proto::Udp | Proto::Sctp
        ),
        _ => matches!(
            q.proto,
            Proto::Default | Proto::Ip | Proto::Arp | Proto::Rarp
        ),
    };
    let dir_fits = matches!(q.dir, Dir::Default | Dir::Src | Dir::Dst | Dir::Or);
    (proto_fits && dir_fits).then_some(ChainSet {
        q,
        mask,
        values,
        negated,
    })
}

/// The qualifiers, mask and value of a term that can join a chain set: what the primitive's
/// own lowering compares (`ncode` and `mcode` in `names.rs`).
fn term(kind: &PrimitiveKind) -> Option<(Qualifiers, u32, u32)> {
    match kind {
        PrimitiveKind::Ipv4 { q, text }
            if matches!(q.addr, AddrKind::Default | AddrKind::Host | AddrKind::Net) =>
        {
            let (value, len) = atoin(text)?;
            let shift = 32 - len;
            let mask = u32::MAX.checked_shl(shift).unwrap_or(0);
            Some((*q, mask, value.checked_shl(shift).unwrap_or(0)))
        }
        PrimitiveKind::Ipv4Cidr {
            q,
            text,
            prefix_len,
        } if q.addr == AddrKind::Net && (1..=32).contains(prefix_len) => {
            let (value, len) = atoin(text)?;
            let value = value.checked_shl(32 - len).unwrap_or(0);
            let mask = u32::MAX << (32 - prefix_len);
            // Bits past the prefix are an error, which the term-by-term lowering reports.
            (value & !mask == 0).then_some((*q, mask, value))
        }
        PrimitiveKind::Number { q, value } if q.addr == AddrKind::Port && *value <= 65535 => {
            Some((*q, u32::MAX, *value))
        }
        _ => None,
    }
}

/// Writes each `member` call of `f` that only its block's branch on it reads (as
/// [`tested_alone`] finds it) as a `switch` over the set's values; returns whether no call is
/// left (`f`'s sets are then dropped). The sets are those of [`ChainSet::ranges`], one value
/// each.
pub(crate) fn lookups_as_switches(f: &mut Function) -> bool {
    // Writing one call as a switch removes only its own uses and its zero's.
    let uses = f.use_counts();
    for b in 0..f.blocks.len() {
        let block = Block(b as u32);
        let Some(pos) = f
            .block(block)
            .insts
            .iter()
            .position(|&v| matches!(f.inst(v), Inst::Member { .. }))
        else {
            continue;
        };
        let hit = f.block(block).insts[pos];
        let Inst::Member { set, ref key } = *f.inst(hit) else {
            unreachable!("found as a member call");
        };
        let (Some(&key), 1) = (key.first(), key.len()) else {
            return false;
        };
        let Some((found, missing)) = tested_alone(f, block, hit, &uses) else {
            return false;
        };
        let Terminator::Branch { rhs: zero, .. } = f.block(block).term else {
            unreachable!("tested_alone finds a branch");
        };
        let cases: Vec<(u32, Target)> = f.sets[set as usize]
            .ranges()
            .iter()
            .flat_map(|&(lo, hi)| lo as u32..=hi as u32)
            .map(|v| (v, Target::from(found)))
            .collect();
        f.block_mut(block).term = Terminator::Switch {
            value: key,
            cases,
            default: missing.into(),
        };
        // The call, and the zero it was compared with where nothing else reads it.
        let zero_unused = uses[zero.index()] == 1;
        f.block_mut(block)
            .insts
            .retain(|v| *v != hit && !(zero_unused && *v == zero));
    }
    // A block with a second call keeps it.
    if f.first_call().is_some() {
        return false;
    }
    f.sets.clear();
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linktype::Dlt;
    use crate::Options;
    use sift_testgen::{generate_packets, Rng};

    fn parsed(text: &str) -> Expr {
        sift_syntax::parse(text)
            .expect("parses")
            .expect("not empty")
    }

    /// `n` terms `prefix VALUE` over the values `value(i)`.
    fn chain(prefix: &str, n: usize, value: impl Fn(usize) -> String) -> String {
        (0..n)
            .map(|i| format!("{prefix}{}", value(i)))
            .collect::<Vec<_>>()
            .join(" or ")
    }

    fn host(i: usize) -> String {
        format!("10.{}.{}.1", i / 256, i % 256)
    }

    #[test]
    fn takes_long_chains_of_one_primitive_over_many_values() {
        let set = chain_set(&parsed(&chain("host ", 40, host))).expect("a set");
        assert_eq!(
            (set.q.addr, set.mask, set.values.len()),
            (AddrKind::Host, u32::MAX, 40)
        );
        assert_eq!(set.values[1], 0x0a00_0101);
        let nets = chain_set(&parsed(&chain("src net ", 32, |i| format!("10.{i}/16"))));
        assert_eq!(nets.expect("a set").mask, 0xffff_0000);
        // `host 10.1` compares under a mask, as the primitive does.
        let short = chain_set(&parsed(&chain("ip dst ", 32, |i| format!("10.{i}"))));
        assert_eq!(short.expect("a set").values[3], 0x0a03_0000);
        let ports = chain_set(&parsed(&chain("tcp src or dst port ", 50, |i| {
            i.to_string()
        })));
        assert_eq!(ports.expect("a set").values[49], 49);
        // Negations: of the whole chain, and of each term under `and`.
        let not = chain_set(&parsed(&format!("not ({})", chain("host ", 40, host))));
        assert!(not.expect("a set").negated && !set.negated);
        let and_not = chain("not host ", 40, host).replace(" or ", " and ");
        assert!(chain_set(&parsed(&and_not)).expect("a set").negated);
    }

    #[test]
    fn leaves_chains_the_optimizer_does_not_regroup() {
        let refused = [
            // Too short.
            chain("host ", MIN_TERMS - 1, host),
            // Not all the same primitive, qualifiers or mask.
            chain("host ", 40, host) + " or port 80",
            chain("host ", 40, host) + " or src host 10.9.9.9",
            chain("net ", 40, |i| format!("10.{i}.0.0/{}", 16 + i % 2)),
            // A network of value 0 under a mask (libpcap makes it a `jset`).
            chain("net ", 40, |i| format!("{i}.0.0.0/8")),
            // Both directions must match, which no set lookup says.
            chain("src and dst host ", 40, host),
            // Protocols whose tests the set lowering does not cover.
            chain("ip6 host ", 40, |i| format!("::{i}")),
            chain("udp src port ", 40, |i| format!("{}-{}", i, i + 1)),
            // Names, `and` chains, and `or` chains of negations.
            chain("host h", 40, |i| i.to_string()),
            chain("host ", 40, host).replace(" or ", " and "),
            chain("not host ", 40, host),
        ];
        for text in refused {
            assert_eq!(chain_set(&parsed(&text)), None, "{text}");
        }
    }

    #[test]
    fn lookups_become_switches_only_where_a_branch_alone_reads_them() {
        let text = |extra: &str| {
            format!(
                "set s0 w32 = 0x5, 0x7-0x8\nblock0:\n    v0 = load.h [12]\n    v1 = member s0, v0\n    \
                 v2 = const 0\n{extra}    br ne v1, v2, block1, block2\nblock1:\n    ret 1\n\
                 block2:\n    ret 0\n"
            )
        };
        let mut f = sift_ir::parse_function(&text("")).expect("parses");
        assert!(lookups_as_switches(&mut f));
        sift_ir::verify(&f).expect("verifies");
        assert!(
            f.sets.is_empty() && f.block(Block(0)).insts.len() == 1,
            "{f}"
        );
        let Terminator::Switch { cases, default, .. } = &f.block(Block(0)).term else {
            panic!("{f}");
        };
        let keys: Vec<u32> = cases.iter().map(|(k, _)| *k).collect();
        assert_eq!((keys, default.block), (vec![5, 7, 8], Block(2)));
        // The call's result read by an instruction too: left alone.
        let mut f = sift_ir::parse_function(&text("    v3 = add v1, v2\n")).expect("parses");
        assert!(!lookups_as_switches(&mut f));
    }

    /// The chain lowered as a set and term by term (with libpcap's optimizer reproduced over
    /// the whole chain) give the same verdict on every packet, cut at every length up to 80
    /// bytes: on chains of up to thousands of terms, beyond libpcap's reach in a test
    /// (`sift/tests/chain_sets.rs` compares with libpcap itself).
    #[test]
    fn sets_mean_what_the_optimized_chains_mean() {
        let mut rng = Rng::new(5);
        for (round, n) in [40, 100, 400, 1500, 40, 100, 400, 3000]
            .into_iter()
            .enumerate()
        {
            let linktype = [1, 113][round % 2];
            let dir = *rng.pick(&["", "src ", "dst ", "src or dst "]);
            // Values the generated packets carry (`10.0.0.x`, ports below 1024) among others.
            let text = match round % 4 {
                0 => chain(
                    &format!("{}{dir}host ", rng.pick(&["", "ip ", "arp "])),
                    n,
                    |i| format!("10.0.{}.{}", i / 250, 1 + i % 250),
                ),
                1 => chain(&format!("{}{dir}net ", rng.pick(&["", "ip "])), n, |i| {
                    format!("{}.{}.0.0/16", 10 + i / 256, i % 256)
                }),
                _ => chain(
                    &format!("{}{dir}port ", rng.pick(&["", "tcp ", "udp "])),
                    n,
                    |i| i.to_string(),
                ),
            };
            let text = match round % 3 {
                0 => text,
                1 => format!("not ({text})"),
                _ => format!("not {}", text.replace(" or ", " and not ")),
            };
            let expr = parsed(&text);
            assert!(chain_set(&expr).is_some(), "{text}");
            let opts = Options::new(linktype, 262_144);
            let dlt = Dlt::from_linktype(linktype).expect("supported");
            let set = sift_ir::Interpreter::new(crate::lower(Some(&expr), &opts).expect("lowers"))
                .expect("verifies");
            let terms = crate::lower_term_by_term(&expr, dlt, &opts).expect("lowers");
            assert!(terms.blocks.len() > n, "{text} lowered term by term");
            let terms = sift_ir::Interpreter::new(terms).expect("verifies");
            let mut cache = sift_ir::Cache::new();
            for p in generate_packets(linktype, round as u64, 60) {
                for cut in 0..=p.data.len().min(80) {
                    let data = &p.data[..cut];
                    assert_eq!(
                        set.run(&mut cache, data, p.wire_len),
                        terms.run(&mut cache, data, p.wire_len),
                        "{n} terms `{}...` on {:02x?}",
                        &text[..40],
                        data
                    );
                }
            }
        }
    }
}
