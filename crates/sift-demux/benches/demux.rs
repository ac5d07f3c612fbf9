//! N per-connection filters (`ip src A and ip dst B and tcp src port P and tcp dst port Q`):
//! ns/packet of the demultiplexer, of the N filters run one after another (verified bytecode,
//! stopping at the first match, as CSPF/BPF do), and of a hand-written 4-tuple hash-table
//! demultiplexer with the same semantics and the same hasher; insert and delete latency; memory
//! per filter; the same with interpreted extractors (`interp`, up to 100,000); the latency of an
//! insert that creates a shape (compiling its extractor). Run with
//! `cargo bench -p sift-demux --bench demux` (`DEMUX_MAX_N=100000` to stop earlier).

use std::hint::black_box;
use std::time::Instant;

use sift_demux::{Delivery, Demux, Matches};
use sift_ir::{Function, Inst};

const TEMPLATE: &str =
    "ip src 1.2.3.4 and ip dst 5.6.7.8 and tcp src port 1111 and tcp dst port 2222";
const T_SRC: u32 = 0x0102_0304;
const T_DST: u32 = 0x0506_0708;
const T_SPORT: u32 = 1111;
const T_DPORT: u32 = 2222;

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Conn {
    src: u32,
    dst: u32,
    sport: u16,
    dport: u16,
}

fn conn(i: u64) -> Conn {
    // Distinct 4-tuples spread over all fields.
    let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    Conn {
        src: 0x0a00_0000 | (i as u32 & 0x00ff_ffff),
        dst: 0xc0a8_0000 | ((x >> 40) as u32 & 0xffff),
        sport: 1024 + (i % 50_000) as u16,
        dport: [80u16, 443, 8080, 25][(i / 50_000 % 4) as usize],
    }
}

/// The template's IR with its constants replaced (what compiling the expression for `c` gives;
/// checked below against the compiler for a few connections).
fn filter_for(template: &Function, c: Conn) -> Function {
    let mut f = template.clone();
    for inst in &mut f.values {
        if let Inst::Const(k) = inst {
            *k = match *k {
                T_SRC => c.src,
                T_DST => c.dst,
                T_SPORT => u32::from(c.sport),
                T_DPORT => u32::from(c.dport),
                other => other,
            };
        }
    }
    f
}

fn ip(a: u32) -> String {
    let b = a.to_be_bytes();
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
}

fn compile(c: Conn) -> Function {
    let e = format!(
        "ip src {} and ip dst {} and tcp src port {} and tcp dst port {}",
        ip(c.src),
        ip(c.dst),
        c.sport,
        c.dport
    );
    sift::compile_ir(&e, &sift::Options::new(1, 262144)).expect("compiles")
}

fn packet(c: Conn) -> Vec<u8> {
    let mut p = vec![0u8; 14 + 20 + 20 + 6];
    p[12] = 0x08;
    p[14] = 0x45;
    p[23] = 6;
    p[26..30].copy_from_slice(&c.src.to_be_bytes());
    p[30..34].copy_from_slice(&c.dst.to_be_bytes());
    p[34..36].copy_from_slice(&c.sport.to_be_bytes());
    p[36..38].copy_from_slice(&c.dport.to_be_bytes());
    p
}

#[path = "common/hand_written.rs"]
mod hand_written;
use hand_written::HandWritten;

fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|x| x.parse::<usize>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

fn ns_per(iters: usize, f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_nanos() as f64 / iters as f64
}

fn main() {
    let max_n: usize = std::env::var("DEMUX_MAX_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let template = sift::compile_ir(TEMPLATE, &sift::Options::new(1, 262144)).unwrap();
    for i in [0u64, 7, 123_456] {
        assert_eq!(
            filter_for(&template, conn(i)),
            compile(conn(i)),
            "template patching"
        );
    }
    new_shape_latency(&template);
    println!(
        "{:>8} | {:>7} {:>7} {:>7} {:>7} {:>7} {:>8} | {:>7} {:>7} {:>7} {:>7} | {:>8} {:>8} | {:>8} {:>6} {:>7}",
        "N", "reader", "local", "batch", "interp", "hand", "seq", "r/hand", "l/hand", "b/hand", "seq/l", "ins us", "del us", "B/filter", "tbl B", "bulk s"
    );
    let mut n = 1usize;
    while n <= max_n {
        run(n, &template);
        n *= 10;
    }
}

/// An insert that creates a shape compiles its extractor (native code where there is a JIT):
/// the first filter into an empty demultiplexer, native and interpreted.
fn new_shape_latency(template: &Function) {
    let f = filter_for(template, conn(1));
    let rounds = 50;
    let time = |make: fn() -> Demux| {
        let mut total = 0.0;
        for _ in 0..rounds {
            let mut d = make();
            total += ns_per(1, || {
                d.insert(&f, 0, Delivery::Exclusive).unwrap();
            });
            black_box(d.stats());
        }
        total / rounds as f64 / 1000.0
    };
    let native = time(Demux::new);
    let interpreted = time(Demux::interpreted);
    println!(
        "insert creating a shape: {native:.0} us with native code ({} native shapes), \
         {interpreted:.0} us interpreted",
        {
            let mut d = Demux::new();
            d.insert(&f, 0, Delivery::Exclusive).unwrap();
            d.stats().native_shapes
        }
    );
}

fn run(n: usize, template: &Function) {
    let rss0 = rss_bytes();
    let mut demux = Demux::new();
    let bulk = Instant::now();
    let mut ids = Vec::with_capacity(n);
    {
        let mut batch = demux.batch();
        for i in 0..n as u64 {
            ids.push(
                batch
                    .insert(&filter_for(template, conn(i)), 0, Delivery::Exclusive)
                    .unwrap(),
            );
        }
    }
    let bulk_s = bulk.elapsed().as_secs_f64();
    let per_filter = (rss_bytes().saturating_sub(rss0)) as f64 / n as f64;
    let stats = demux.stats();
    assert_eq!((stats.shapes, stats.residuals), (1, 0));

    let mut hand = HandWritten::new();
    for (i, id) in ids.iter().enumerate() {
        let c = conn(i as u64);
        hand.insert(c.src, c.dst, c.sport, c.dport, *id);
    }

    // Packets: 4096 hits on random installed connections, in random order.
    let mut x = 0x1234_5678_u64;
    let packets: Vec<Vec<u8>> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            packet(conn(x % n as u64))
        })
        .collect();
    let reader = demux.reader();
    let mut m = Matches::new();
    for p in &packets {
        reader.match_packet(p, p.len() as u32, &mut m);
        assert_eq!(m.exclusive(), hand.lookup(p), "same answers");
        assert!(m.exclusive().is_some());
    }
    let rounds = 200usize;
    let total = rounds * packets.len();
    let demux_ns = ns_per(total, || {
        for _ in 0..rounds {
            for p in &packets {
                reader.match_packet(black_box(p), p.len() as u32, &mut m);
                black_box(m.exclusive());
            }
        }
    });
    let mut local = reader.local();
    let local_ns = ns_per(total, || {
        for _ in 0..rounds {
            for p in &packets {
                local.match_packet(black_box(p), p.len() as u32, &mut m);
                black_box(m.exclusive());
            }
        }
    });
    let batch_ns = ns_per(total, || {
        let mut scratch = Matches::new();
        for _ in 0..rounds {
            reader.match_batch(
                packets.iter().map(|p| (&p[..], p.len() as u32)),
                &mut scratch,
                |_, m| {
                    black_box(m.exclusive());
                },
            );
        }
    });
    // The same filters with interpreted extractors (not at 10^6: memory and time).
    let interp_ns = (n <= 100_000).then(|| {
        let mut interpreted = Demux::interpreted();
        {
            let mut batch = interpreted.batch();
            for i in 0..n as u64 {
                batch
                    .insert(&filter_for(template, conn(i)), 0, Delivery::Exclusive)
                    .unwrap();
            }
        }
        let mut local = interpreted.reader().local();
        ns_per(total, || {
            for _ in 0..rounds {
                for p in &packets {
                    local.match_packet(black_box(p), p.len() as u32, &mut m);
                    black_box(m.exclusive());
                }
            }
        })
    });
    let hand_ns = ns_per(total, || {
        for _ in 0..rounds {
            for p in &packets {
                black_box(hand.lookup(black_box(p)));
            }
        }
    });
    let seq_ns = if n <= 1000 {
        let programs: Vec<_> = (0..n as u64)
            .map(|i| sift_bytecode::compile(&filter_for(template, conn(i))).unwrap())
            .collect();
        let mut cache = sift_bytecode::Cache::new();
        let sample = &packets[..packets.len().min(512)];
        let seq_rounds = (200_000 / n).clamp(1, 200);
        Some(ns_per(seq_rounds * sample.len(), || {
            for _ in 0..seq_rounds {
                for p in sample {
                    let hit = programs
                        .iter()
                        .position(|f| f.run(&mut cache, black_box(p), p.len() as u32) != 0);
                    black_box(hit);
                }
            }
        }))
    } else {
        None
    };

    // Live insert and delete latency: 1000 more connections, one update (and publication) each.
    let extra: Vec<Function> = (0..1000u64)
        .map(|i| filter_for(template, conn(n as u64 + i)))
        .collect();
    let mut new_ids = Vec::with_capacity(extra.len());
    let ins_us = ns_per(extra.len(), || {
        for f in &extra {
            new_ids.push(demux.insert(f, 0, Delivery::Exclusive).unwrap());
        }
    }) / 1000.0;
    let del_us = ns_per(new_ids.len(), || {
        for id in &new_ids {
            assert!(demux.remove(*id));
        }
    }) / 1000.0;

    let seq_text = seq_ns.map_or("-".to_string(), |s| format!("{s:.0}"));
    let interp_text = interp_ns.map_or("-".to_string(), |s| format!("{s:.1}"));
    let seq_ratio = seq_ns.map_or("-".to_string(), |s| format!("{:.0}x", s / local_ns));
    println!(
        "{:>8} | {:>7.1} {:>7.1} {:>7.1} {:>7} {:>7.1} {:>8} | {:>7.2} {:>7.2} {:>7.2} {:>7} | {:>8.2} {:>8.2} | {:>8.0} {:>6.0} {:>7.2}",
        n,
        demux_ns,
        local_ns,
        batch_ns,
        interp_text,
        hand_ns,
        seq_text,
        demux_ns / hand_ns,
        local_ns / hand_ns,
        batch_ns / hand_ns,
        seq_ratio,
        ins_us,
        del_us,
        per_filter,
        stats.table_bytes as f64 / n as f64,
        bulk_s
    );
}
