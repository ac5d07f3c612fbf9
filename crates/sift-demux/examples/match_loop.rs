//! A matching loop to profile (`perf record`): N connection filters, then
//! `MODE` (reader, local, batch, refs: batch from descriptors built once, hand: the bench's
//! hand-written demultiplexer) over hits for `SECONDS`; `compare`: local, batch, refs and hand
//! in turn, rounds of 5 ms for `SECONDS`, the minimum of each (for a shared machine); or
//! `update`: insert and remove 1,000
//! more connections, one published update each, for `SECONDS`.
//! `cargo run --release -p sift-demux --example match_loop -- 1000 local 3`

use std::hint::black_box;
use std::time::Instant;

use sift_demux::{Delivery, Demux, Matches, PacketRef};

#[path = "../benches/common/hand_written.rs"]
mod hand_written;
use hand_written::HandWritten;

fn packet(i: u64) -> (Vec<u8>, String) {
    let src = 0x0a00_0000 | (i as u32 & 0x00ff_ffff);
    let dst = 0xc0a8_0000 | ((i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as u32 & 0xffff);
    let (sport, dport) = (1024 + (i % 50_000) as u16, 80u16);
    let mut p = vec![0u8; 60];
    p[12] = 0x08;
    p[14] = 0x45;
    p[23] = 6;
    p[26..30].copy_from_slice(&src.to_be_bytes());
    p[30..34].copy_from_slice(&dst.to_be_bytes());
    p[34..36].copy_from_slice(&sport.to_be_bytes());
    p[36..38].copy_from_slice(&dport.to_be_bytes());
    let ip = |a: u32| {
        let b = a.to_be_bytes();
        format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
    };
    let e = format!(
        "ip src {} and ip dst {} and tcp src port {sport} and tcp dst port {dport}",
        ip(src),
        ip(dst)
    );
    (p, e)
}

/// Connection `i`'s filter: compiled for the first connections, then the first one's graph
/// with its constants replaced (what compiling gives, checked for those; compiling 10^6
/// expressions would take most of a run).
fn filter(i: u64, opts: &sift::Options) -> sift_ir::Function {
    const CHECKED: u64 = 16;
    let compiled = |i| sift::compile_ir(&packet(i).1, opts).unwrap();
    if i < CHECKED {
        let f = compiled(i);
        if i > 0 {
            assert_eq!(patched(i, opts), f, "patching constants");
        }
        return f;
    }
    patched(i, opts)
}

fn patched(i: u64, opts: &sift::Options) -> sift_ir::Function {
    thread_local! {
        static TEMPLATE: std::cell::OnceCell<sift_ir::Function> = const { std::cell::OnceCell::new() };
    }
    let constants = |i: u64| {
        let p = packet(i).0;
        [
            u32::from_be_bytes([p[26], p[27], p[28], p[29]]),
            u32::from_be_bytes([p[30], p[31], p[32], p[33]]),
            u32::from(u16::from_be_bytes([p[34], p[35]])),
        ]
    };
    let mut f = TEMPLATE.with(|t| {
        t.get_or_init(|| sift::compile_ir(&packet(0).1, opts).unwrap())
            .clone()
    });
    let (from, to) = (constants(0), constants(i));
    for inst in &mut f.values {
        if let sift_ir::Inst::Const(k) = inst {
            if let Some(j) = from.iter().position(|c| c == k) {
                *k = to[j];
            }
        }
    }
    f
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let mode = args.get(2).map_or("local", |s| s.as_str()).to_string();
    let seconds: f64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let mut demux = Demux::new();
    let opts = sift::Options::new(1, 262144);
    let mut hand = HandWritten::new();
    {
        let mut batch = demux.batch();
        for i in 0..n {
            let id = batch
                .insert(&filter(i, &opts), 0, Delivery::Exclusive)
                .unwrap();
            if mode == "hand" || mode == "compare" {
                let p = packet(i).0;
                let be32 = |at: usize| u32::from_be_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]]);
                let be16 = |at: usize| u16::from_be_bytes([p[at], p[at + 1]]);
                hand.insert(be32(26), be32(30), be16(34), be16(36), id);
            }
        }
    }
    let mut x = 0x1234_5678_u64;
    let packets: Vec<Vec<u8>> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            packet(x % n).0
        })
        .collect();
    if mode == "update" {
        let extra: Vec<_> = (n..n + 1000).map(|i| filter(i, &opts)).collect();
        let start = Instant::now();
        let mut updates = 0u64;
        let mut ids = Vec::with_capacity(extra.len());
        while start.elapsed().as_secs_f64() < seconds {
            for f in &extra {
                ids.push(demux.insert(f, 0, Delivery::Exclusive).unwrap());
            }
            for id in ids.drain(..) {
                demux.remove(id);
            }
            updates += 2 * extra.len() as u64;
        }
        let us = start.elapsed().as_secs_f64() * 1e6 / updates as f64;
        println!("{n} filters, update: {us:.2} us per insert or remove");
        return;
    }
    // The packets as a capture buffer's descriptors, for `refs`.
    let refs: Vec<PacketRef> = packets
        .iter()
        .map(|p| PacketRef::new(p, p.len() as u32))
        .collect();
    let reader = demux.reader();
    let mut local = reader.local();
    let mut m = Matches::new();
    let mut run = |mode: &str| match mode {
        "reader" => {
            for p in &packets {
                reader.match_packet(black_box(p), p.len() as u32, &mut m);
                black_box(m.exclusive());
            }
        }
        "batch" => reader.match_batch(
            packets.iter().map(|p| (&p[..], p.len() as u32)),
            &mut m,
            |_, m| {
                black_box(m.exclusive());
            },
        ),
        "refs" => reader.match_batch_refs(&refs, &mut m, |_, m| {
            black_box(m.exclusive());
        }),
        "hand" => {
            for p in &packets {
                black_box(hand.lookup(black_box(p)));
            }
        }
        _ => {
            for p in &packets {
                local.match_packet(black_box(p), p.len() as u32, &mut m);
                black_box(m.exclusive());
            }
        }
    };
    // ns/packet of `mode` over `seconds`.
    let mut time = |mode: &str, seconds: f64| {
        let start = Instant::now();
        let mut matched = 0u64;
        while start.elapsed().as_secs_f64() < seconds {
            run(mode);
            matched += packets.len() as u64;
        }
        start.elapsed().as_nanos() as f64 / matched as f64
    };
    if mode == "compare" {
        // Short rounds, each mode in turn; the minimum per mode. On a shared machine most
        // rounds of a mode are slowed by other processes; short rounds make it likely that
        // some run undisturbed.
        const ROUND: f64 = 0.005;
        let modes = ["local", "batch", "refs", "hand"];
        let mut best = [f64::MAX; 4];
        for _ in 0..(seconds / (ROUND * modes.len() as f64)).ceil() as usize {
            for (b, mode) in best.iter_mut().zip(modes) {
                *b = b.min(time(mode, ROUND));
            }
        }
        let hand = best[3];
        println!(
            "{n} filters: local {:.2} batch {:.2} hand {:.2} ns/packet; local/hand {:.2} batch/hand {:.2}; refs {:.2} refs/hand {:.2}",
            best[0],
            best[1],
            hand,
            best[0] / hand,
            best[1] / hand,
            best[2],
            best[2] / hand
        );
        return;
    }
    let ns = time(&mode, seconds);
    println!("{n} filters, {mode}: {ns:.1} ns/packet");
}
