//! A shape as native code: its steps handed to `sift-jit`, which compiles them, followed by
//! the probe of the shape's table, into one function (`sift_jit::demux_matcher`).
//!
//! The interpreted steps (`extract`) number registers and fuse a load with its only use;
//! [`sift_jit::key_extractor::KeyProgram`] numbers values in order of definition and has no
//! fused forms (Cranelift's register allocator does that job). The translation keeps the order
//! of the steps, so checks still run before the key loads they guard and a failing check stops
//! early, and the native function accepts exactly the packets the interpreter accepts, with the
//! same key, and finds what a walk of the table in Rust finds (the differential test below).
//!
//! The table is handed to the code at each call, so adding a key to an existing shape never
//! compiles anything; a new shape compiles once when it is created.

use sift_jit::demux_matcher::DemuxMatcher;
use sift_jit::key_extractor::{KeyProgram, KeyStep};

use crate::extract::{Step, MAX_REGS};

const _: () = assert!(crate::shape::KEY_WORDS == sift_jit::key_extractor::KEY_WORDS);

/// A shape's native matcher, for its table's key width (see `dispatch`).
#[derive(Debug)]
pub(crate) enum Matcher {
    Narrow(DemuxMatcher<2>),
    Wide(DemuxMatcher<{ crate::shape::KEY_WORDS }>),
}

/// Compiles the steps of an extractor whose keys use `key_words` words; `None` where the host
/// has no JIT or Cranelift fails (the shape is then interpreted).
pub(crate) fn compile(min_caplen: usize, steps: &[Step], key_words: usize) -> Option<Matcher> {
    if !sift_jit::supported() {
        return None;
    }
    let program = program(min_caplen, steps)?;
    if key_words <= 2 {
        DemuxMatcher::compile(&program).ok().map(Matcher::Narrow)
    } else {
        DemuxMatcher::compile(&program).ok().map(Matcher::Wide)
    }
}

/// The key program for the steps; `None` if a step reads a register no step wrote (never for
/// steps `Extractor::compile` built).
pub(crate) fn program(min_caplen: usize, steps: &[Step]) -> Option<KeyProgram> {
    let mut out = KeyProgram {
        min_caplen: u64::try_from(min_caplen).unwrap_or(u64::MAX),
        steps: Vec::with_capacity(steps.len() + 8),
    };
    // Register -> value number.
    let mut value_of: [Option<u32>; MAX_REGS] = [None; MAX_REGS];
    let mut next = 0u32;
    let mut define = |out: &mut KeyProgram, step: KeyStep| {
        out.steps.push(step);
        next += 1;
        next - 1
    };
    let load = |index, offset, bytes| KeyStep::Load {
        index,
        offset,
        bytes,
    };
    for step in steps {
        let reg = |r: u8| value_of.get(usize::from(r)).copied().flatten();
        let (dst, defined) = match *step {
            Step::Const { dst, k } => (dst, define(&mut out, KeyStep::Const(k))),
            Step::WireLen { dst } => (dst, define(&mut out, KeyStep::WireLen)),
            Step::Load { dst, offset, bytes } => (dst, define(&mut out, load(None, offset, bytes))),
            Step::LoadAt {
                dst,
                index,
                offset,
                bytes,
            } => {
                let index = Some(reg(index)?);
                (dst, define(&mut out, load(index, offset, bytes)))
            }
            Step::Bin { dst, op, a, b } => {
                let (a, b) = (reg(a)?, reg(b)?);
                (dst, define(&mut out, KeyStep::Bin { op, a, b }))
            }
            Step::BinK { dst, op, a, k } => {
                let a = reg(a)?;
                (dst, define(&mut out, KeyStep::BinK { op, a, k }))
            }
            Step::Neg { dst, a } => {
                let a = reg(a)?;
                (dst, define(&mut out, KeyStep::Neg(a)))
            }
            Step::Check { rel, a, k } => {
                let a = reg(a)?;
                out.steps.push(KeyStep::Check { rel, a, k });
                continue;
            }
            Step::CheckRegs { rel, a, b } => {
                let (a, b) = (reg(a)?, reg(b)?);
                out.steps.push(KeyStep::CheckValues { rel, a, b });
                continue;
            }
            Step::CheckLoad {
                offset,
                bytes,
                rel,
                k,
            } => {
                let a = define(&mut out, load(None, offset, bytes));
                out.steps.push(KeyStep::Check { rel, a, k });
                continue;
            }
            Step::Key { a, word, shift } => {
                let a = reg(a)?;
                out.steps.push(KeyStep::Key { a, word, shift });
                continue;
            }
            Step::KeyLoad {
                offset,
                bytes,
                word,
                shift,
            } => {
                let a = define(&mut out, load(None, offset, bytes));
                out.steps.push(KeyStep::Key { a, word, shift });
                continue;
            }
            Step::KeyLoadAt {
                index,
                offset,
                bytes,
                word,
                shift,
            } => {
                let index = Some(reg(index)?);
                let a = define(&mut out, load(index, offset, bytes));
                out.steps.push(KeyStep::Key { a, word, shift });
                continue;
            }
        };
        *value_of.get_mut(usize::from(dst))? = Some(defined);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    //! The native extractors against the interpreted ones: for every shape of random filters
    //! (random expressions, connection filters, the optimizer's graphs), the same verdict and,
    //! on acceptance, the same key on generated, mutated and truncated packets.

    use std::collections::HashSet;

    use sift_testgen::{
        generate_packets, mutate_packet, random_expressions, truncate_packet, Packet, Rng,
    };

    use std::sync::Arc;

    use sift_jit::demux_matcher::BATCH;
    use sift_jit::demux_table::KeyHash;
    use sift_jit::key_extractor::NativeExtractor;
    use sift_jit::PacketRef;

    use super::program;
    use crate::dispatch::{Dispatch, Found};
    use crate::extract::{Extractor, MAX_REGS};
    use crate::paths::{decompose, Limits};
    use crate::shape::{split, Key, ShapeSig};
    use crate::snapshot::ShapeView;
    use crate::table::Entry;
    use crate::{Delivery, FilterId};

    const ETHERNET: u32 = 1;

    fn shapes(seed: u64) -> Vec<ShapeSig> {
        let mut exprs = random_expressions(seed, ETHERNET, 150);
        exprs.extend([
            "ip src 10.0.0.1 and ip dst 10.0.0.2 and tcp src port 1000 and tcp dst port 80".into(),
            "ip6 src 2001::1 and ip6 dst 2001::2 and udp src port 53 and udp dst port 1053".into(),
            "vlan 10 and ip and tcp dst port 22".into(),
            "ip[2:2] / (ip[0] & 0xf) > 17 and ip[ip[0] & 0xf] != 3".into(),
            "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0 and len - 14 >= ip[2:2] % 7".into(),
            "(udp port 53 or tcp port 80) and not ip multicast".into(),
        ]);
        let mut rng = Rng::new(seed);
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for e in exprs {
            let Ok(mut f) = sift::compile_ir(&e, &sift::Options::new(ETHERNET, 262144)) else {
                continue;
            };
            if rng.chance(1, 2) {
                sift_opt::optimize(&mut f);
            }
            let Ok(paths) = decompose(&f, Limits::default()) else {
                continue;
            };
            for p in &paths {
                let (sig, _) = split(p);
                if seen.insert(sig.clone()) {
                    out.push(sig);
                }
            }
        }
        out
    }

    fn packets(seed: u64) -> Vec<Packet> {
        let mut rng = Rng::new(seed ^ 0x7a11);
        let base = generate_packets(ETHERNET, seed, 400);
        let mut out = Vec::new();
        for p in base {
            out.push(mutate_packet(&mut rng, &p));
            out.push(truncate_packet(&mut rng, &p));
            out.push(p);
        }
        out
    }

    /// Native code against interpretation, shape by shape: the same verdict and key from the
    /// key program alone (`NativeExtractor`), and the same filters from the whole matcher
    /// (checks, key, hash, probe) as from the interpreted steps and a Rust walk of the table,
    /// one packet at a time and in batches, with half of the accepted packets' keys installed.
    #[test]
    fn native_matching_equals_interpretation() {
        if !sift_jit::supported() {
            eprintln!("no JIT on this host: nothing to compare");
            return;
        }
        let (mut compared, mut accepted, mut native_shapes, mut found) = (0, 0, 0, 0);
        for seed in 1..=4u64 {
            let packets = packets(seed);
            for sig in shapes(seed) {
                let Some(mut x) = Extractor::compile(&sig) else {
                    continue;
                };
                assert!(x.compile_native(), "the JIT compiles every shape: {sig:?}");
                native_shapes += 1;
                let keys_only = program(x.min_caplen, &x.steps)
                    .and_then(|p| NativeExtractor::compile(&p).ok())
                    .expect("compiles");
                let mut table = Dispatch::new(x.key_words, KeyHash::random(), x.packet_order());
                let mut regs = [0u32; MAX_REGS];
                for (i, p) in packets.iter().enumerate() {
                    let (mut by_steps, mut by_code) = (Key::default(), Key([!0; 6]));
                    let a = x.interpret(&p.data, p.wire_len, &mut regs, &mut by_steps);
                    let b = keys_only.extract(&p.data, p.wire_len, &mut by_code.0);
                    assert_eq!(a, b, "verdicts differ for {sig:?} on {:02x?}", p.data);
                    if a {
                        assert_eq!(by_steps, by_code, "keys differ for {sig:?}");
                        accepted += 1;
                        if i % 2 == 0 && table.get(&by_steps).is_none() {
                            table.insert(&by_steps, entry(i as u64 + 1));
                        }
                    }
                    compared += 1;
                }
                let view = ShapeView {
                    extractor: Arc::new(x),
                    table,
                };
                let ids = |f: Option<Found>| f.map(|f| f.as_slice().to_vec());
                for p in &packets {
                    let native = view.lookup(&p.data, p.wire_len, &mut regs);
                    let interpreted = view.lookup_interpreted(&p.data, p.wire_len, &mut regs);
                    found += usize::from(native.is_some());
                    assert_eq!(ids(native), ids(interpreted), "{sig:?} on {:02x?}", p.data);
                }
                for chunk in packets.chunks(BATCH) {
                    let refs: Vec<PacketRef> = chunk
                        .iter()
                        .map(|p| PacketRef::new(&p.data, p.wire_len))
                        .collect();
                    let mut out = [None; BATCH];
                    view.lookup_batch(&refs, &mut regs, &mut out);
                    for (p, got) in chunk.iter().zip(out) {
                        let want = view.lookup_interpreted(&p.data, p.wire_len, &mut regs);
                        assert_eq!(ids(got), ids(want), "batch: {sig:?}");
                    }
                }
            }
        }
        eprintln!(
            "{native_shapes} shapes, {compared} packets compared, {accepted} accepted, {found} found"
        );
        assert!(native_shapes > 50 && accepted > 1000 && found > 500);
    }

    fn entry(id: u64) -> Entry {
        Entry {
            priority: (id % 7) as i32 - 3,
            id: FilterId(id),
            delivery: if id.is_multiple_of(3) {
                Delivery::Copy
            } else {
                Delivery::Exclusive
            },
        }
    }

    /// The native matcher of the connection filters' shape, in Cranelift IR and machine code
    /// (`cargo test --release -p sift-demux --lib connection_listing -- --ignored --nocapture`).
    #[test]
    #[ignore = "prints the generated code"]
    fn print_connection_listing() {
        let e = "ip src 10.0.0.1 and ip dst 10.0.0.2 and tcp src port 1000 and tcp dst port 80";
        let f = sift::compile_ir(e, &sift::Options::new(ETHERNET, 262144)).unwrap();
        for p in &decompose(&f, Limits::default()).unwrap() {
            let (sig, key) = split(p);
            let x = Extractor::compile(&sig).unwrap();
            let prog = program(x.min_caplen, &x.steps).unwrap();
            println!("{:?}\nkey {:x?}", x.steps, key.0);
            let listing = sift_jit::demux_matcher::DemuxMatcher::<2>::listing(&prog).unwrap();
            println!("{listing}");
        }
    }
}
