//! Batch matching (two phases over chunks of packets) gives every packet exactly the delivery
//! single matching gives it, from one filter to 10^4, with copies, priorities, several filters
//! under one key, several shapes and run-whole (residual) filters; and against the oracle
//! (every filter run alone) where that is cheap.

mod common;

use common::*;
use sift_demux::{Delivery, Demux, FilterId, Matches, PacketRef, Placement};
use sift_ir::{Cache, Function, Inst};
use sift_testgen::{generate_packets, random_expressions, truncate_packet, Packet, Rng};

const TEMPLATE: &str =
    "ip src 1.2.3.4 and ip dst 5.6.7.8 and tcp src port 1111 and tcp dst port 2222";

/// Connection `i` of a set (distinct for distinct `i`).
fn conn(i: u64) -> Conn {
    let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    Conn {
        src: (0x0a00_0000 | (i as u32 & 0x00ff_ffff))
            .to_be_bytes()
            .to_vec(),
        dst: (0xc0a8_0000 | ((x >> 40) as u32 & 0xffff))
            .to_be_bytes()
            .to_vec(),
        sport: 1024 + (i % 50_000) as u16,
        dport: [80u16, 443, 8080, 25][(i / 50_000 % 4) as usize],
        udp: false,
    }
}

/// The template's IR with `c`'s constants (what compiling `c.expr()` gives; checked below).
fn filter_for(template: &Function, c: &Conn) -> Function {
    let word = |a: &[u8]| u32::from_be_bytes([a[0], a[1], a[2], a[3]]);
    let mut f = template.clone();
    for inst in &mut f.values {
        if let Inst::Const(k) = inst {
            *k = match *k {
                0x0102_0304 => word(&c.src),
                0x0506_0708 => word(&c.dst),
                1111 => u32::from(c.sport),
                2222 => u32::from(c.dport),
                other => other,
            };
        }
    }
    f
}

struct Setup {
    demux: Demux,
    installed: Vec<Installed>,
    packets: Vec<Packet>,
}

/// `n` connection filters (random priorities, about a quarter copies, every tenth key shared
/// by a second filter); with `mixed`, IPv6 and UDP connection filters (other shapes) and
/// random expressions (some run whole) too, keeping at most about 16 shapes if `few_shapes`.
fn setup(n: u64, seed: u64, mixed: bool, few_shapes: bool, interpreted: bool) -> Setup {
    let template = compile(TEMPLATE).unwrap();
    let mut rng = Rng::new(seed);
    let mut demux = if interpreted {
        Demux::interpreted()
    } else {
        Demux::new()
    };
    let mut installed = Vec::new();
    let mut packets = Vec::new();
    let add = |demux: &mut Demux, installed: &mut Vec<Installed>, f, rng: &mut Rng| {
        let priority = rng.below(4) as i32 - 1;
        let delivery = if rng.chance(1, 4) {
            Delivery::Copy
        } else {
            Delivery::Exclusive
        };
        install(demux, installed, f, priority, delivery);
    };
    for i in 0..n {
        let c = conn(i);
        if i < 3 {
            assert_eq!(filter_for(&template, &c), compile(&c.expr()).unwrap());
        }
        add(
            &mut demux,
            &mut installed,
            filter_for(&template, &c),
            &mut rng,
        );
        if i % 10 == 0 {
            add(
                &mut demux,
                &mut installed,
                filter_for(&template, &c),
                &mut rng,
            );
        }
    }
    if mixed {
        for i in 0..40 {
            let mut c = Conn::random(&mut rng, i % 2 == 0);
            c.udp = i % 3 == 0;
            add(
                &mut demux,
                &mut installed,
                compile(&c.expr()).unwrap(),
                &mut rng,
            );
            packets.push(Packet::new(c.packet(0, 0, 4)));
        }
        for e in random_expressions(seed, ETHERNET, 200) {
            if let Some(f) = compile(&e) {
                add(&mut demux, &mut installed, f, &mut rng);
                // Few shapes: the two-phase path (many shapes are matched packet by packet).
                let last = installed.last().unwrap().id;
                let keyed = matches!(demux.placement(last), Some(Placement::Keyed { .. }));
                if few_shapes && keyed && demux.stats().shapes > 16 {
                    demux.remove(last);
                    installed.pop();
                }
            }
        }
        let residuals = installed
            .iter()
            .filter(|f| matches!(demux.placement(f.id), Some(Placement::Residual(_))))
            .count();
        assert!(residuals > 0, "the mixed set must have run-whole filters");
    }
    // Hits (some with IP options, fragments, truncated), misses, and generated traffic.
    for _ in 0..1500 {
        let c = conn(rng.below(n));
        let frag = *rng.pick(&[0u16, 0, 0, 0, 0x4000, 0x0010]);
        let options = if rng.chance(1, 8) { 1 } else { 0 };
        let full = Packet::new(c.packet(options, frag, rng.index(8)));
        if rng.chance(1, 10) {
            packets.push(truncate_packet(&mut rng, &full));
        }
        packets.push(full);
        if rng.chance(1, 4) {
            packets.push(Packet::new(conn(n + rng.below(1000)).packet(0, 0, 0)));
        }
    }
    packets.extend(generate_packets(ETHERNET, seed, 300));
    packets.push(Packet::new(Vec::new()));
    Setup {
        demux,
        installed,
        packets,
    }
}

/// Batch deliveries of `packets[..count]` against single matches (and the oracle when
/// `oracle_too`); the number of packets delivered to some filter.
fn compare(s: &Setup, count: usize, oracle_too: bool) -> usize {
    type Delivered = (Vec<FilterId>, Option<FilterId>);
    let packets = &s.packets[..count];
    let reader = s.demux.reader();
    let mut scratch = Matches::new();
    let batch = || packets.iter().map(|p| (&p.data[..], p.wire_len));
    let mut shared: Vec<Delivered> = Vec::new();
    reader.match_batch(batch(), &mut scratch, |i, m| {
        assert_eq!(i, shared.len(), "in order, each once");
        shared.push((m.delivered().to_vec(), m.exclusive()));
    });
    let mut local: Vec<Delivered> = Vec::new();
    reader.local().match_batch(batch(), &mut scratch, |i, m| {
        assert_eq!(i, local.len(), "in order, each once");
        local.push((m.delivered().to_vec(), m.exclusive()));
    });
    // The same packets as descriptors.
    let refs: Vec<PacketRef> = packets
        .iter()
        .map(|p| PacketRef::new(&p.data, p.wire_len))
        .collect();
    let mut from_refs: Vec<Delivered> = Vec::new();
    reader.match_batch_refs(&refs, &mut scratch, |i, m| {
        assert_eq!(i, from_refs.len(), "in order, each once");
        from_refs.push((m.delivered().to_vec(), m.exclusive()));
    });
    let mut local_refs: Vec<Delivered> = Vec::new();
    reader
        .local()
        .match_batch_refs(&refs, &mut scratch, |_, m| {
            local_refs.push((m.delivered().to_vec(), m.exclusive()));
        });
    assert_eq!(from_refs, shared);
    assert_eq!(local_refs, shared);
    assert_eq!((shared.len(), local.len()), (count, count));
    let mut single = Matches::new();
    let mut cache = Cache::new();
    let mut delivered = 0;
    for (i, p) in packets.iter().enumerate() {
        reader.match_packet(&p.data, p.wire_len, &mut single);
        let want = (single.delivered().to_vec(), single.exclusive());
        assert_eq!(shared[i], want, "packet {i} of {count}: {:02x?}", p.data);
        assert_eq!(local[i], want, "packet {i} of {count}: {:02x?}", p.data);
        if oracle_too {
            let oracle = oracle(&s.installed, &p.data, p.wire_len, false, &mut cache);
            assert_eq!(want, oracle, "packet {i}: {:02x?}", p.data);
        }
        delivered += usize::from(!want.0.is_empty());
    }
    delivered
}

#[test]
fn batch_equals_single_matches_from_one_filter_to_ten_thousand() {
    for (n, seed) in [(1u64, 1u64), (10, 2), (100, 3), (1_000, 4), (10_000, 5)] {
        for (mixed, few_shapes) in [(false, true), (true, true), (true, false)] {
            let s = setup(n, seed, mixed, few_shapes, false);
            let stats = s.demux.stats();
            if !mixed {
                assert_eq!((stats.shapes, stats.residuals), (1, 0), "{stats:?}");
            } else if few_shapes {
                assert!(stats.shapes <= 17, "{stats:?}");
            }
            // Batch lengths around the chunk size too.
            for count in [0, 1, 31, 32, 33, 65] {
                compare(&s, count, n <= 100);
            }
            let hits = compare(&s, s.packets.len(), n <= 100);
            assert!(hits > 1000, "N={n} mixed={mixed}: only {hits} hits");
        }
    }
}

#[test]
fn batch_equals_single_matches_interpreted() {
    for mixed in [false, true] {
        let s = setup(300, 9, mixed, true, true);
        assert_eq!(s.demux.stats().native_shapes, 0);
        compare(&s, s.packets.len(), true);
    }
}

/// More shapes than a chunk has lookups: matched packet by packet, same results.
#[test]
fn batch_with_many_shapes() {
    let mut demux = Demux::new();
    let mut installed = Vec::new();
    let mut packets = Vec::new();
    let mut rng = Rng::new(11);
    // Distinct shapes: different fixed-offset fields and checks.
    for i in 0..40u32 {
        let e = format!(
            "ether[{}] = {} and ether[{}:2] = {}",
            20 + i,
            i,
            60 + i,
            i * 3
        );
        let f = compile(&e).unwrap();
        install(&mut demux, &mut installed, f, 0, Delivery::Copy);
    }
    assert!(demux.stats().shapes > 32, "{:?}", demux.stats());
    for _ in 0..300 {
        let mut p = vec![0u8; 130];
        let i = rng.below(40) as usize;
        p[20 + i] = i as u8;
        p[60 + i..62 + i].copy_from_slice(&((i * 3) as u16).to_be_bytes());
        packets.push(Packet::new(p));
    }
    let s = Setup {
        demux,
        installed,
        packets,
    };
    let hits = compare(&s, s.packets.len(), true);
    assert!(hits > 100);
}
