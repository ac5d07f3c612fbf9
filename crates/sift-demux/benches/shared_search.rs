//! Payload-searching filters in the demultiplexer: ns/packet with every residual filter
//! searching the payload alone (before) and with their patterns merged into one search per
//! packet (after, [`Demux::share_searches`]), for 10, 100 and 1,000 filters of three patterns
//! each (`tcp and (payload contains A or payload contains B or payload contains nocase C)`),
//! all copy filters (every filter runs on every packet), over 512-byte TCP payloads of which
//! one in eight holds some filter's pattern. Residuals run as native code (`native`) or
//! interpreted bytecode (`interp`). Also the time to install the filters (one batch, one
//! union build). Run with `cargo bench -p sift-demux --bench shared_search`
//! (`SHARED_MAX_N=100` to stop earlier, `SHARED_SKIP_ALONE=1` to measure only the shared search).

use std::hint::black_box;
use std::time::Instant;

use sift_demux::{Delivery, Demux, Matches};
use sift_testgen::Rng;

const PAYLOAD: usize = 512;
const PACKETS: usize = 256;

fn options() -> sift::Options {
    sift::Options {
        extensions: true,
        ..sift::Options::new(1, 262144)
    }
}

/// A word of 6 to 10 lowercase letters (distinct enough that patterns rarely occur by chance).
fn word(rng: &mut Rng) -> String {
    let n = rng.range(6, 10) as usize;
    (0..n)
        .map(|_| char::from(b'a' + rng.below(26) as u8))
        .collect()
}

/// A TCP/IPv4 frame with `payload`.
fn packet(payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 14 + 20 + 20];
    p[12] = 0x08;
    p[14] = 0x45;
    p[16..18].copy_from_slice(&((40 + payload.len()) as u16).to_be_bytes());
    p[14 + 9] = 6;
    p[14 + 20 + 12] = 0x50;
    p.extend_from_slice(payload);
    p
}

/// Text-like payloads; every eighth holds one filter's first pattern.
fn packets(rng: &mut Rng, patterns: &[[String; 3]]) -> Vec<Vec<u8>> {
    const TEXT: &[u8] = b"GET /index.html HTTP/1.1\r\nHost: example.org\r\nAccept: */*\r\n";
    (0..PACKETS)
        .map(|i| {
            let mut payload: Vec<u8> = (0..PAYLOAD)
                .map(|j| TEXT[(j + rng.index(3)) % TEXT.len()])
                .collect();
            if i % 8 == 0 {
                let w = &patterns[rng.index(patterns.len())][0];
                let at = rng.index(PAYLOAD - w.len());
                payload[at..at + w.len()].copy_from_slice(w.as_bytes());
            }
            packet(&payload)
        })
        .collect()
}

/// Median over 5 rounds of ns per packet.
fn ns_per_packet(demux: &Demux, packets: &[Vec<u8>]) -> f64 {
    let reader = demux.reader();
    let mut m = Matches::new();
    let mut rounds: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            for p in packets {
                reader.match_packet(black_box(p), p.len() as u32, &mut m);
                black_box(m.delivered());
            }
            t.elapsed().as_nanos() as f64 / packets.len() as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[2]
}

fn main() {
    let max: usize = std::env::var("SHARED_MAX_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    // For profiling the shared search alone.
    let skip_alone = std::env::var_os("SHARED_SKIP_ALONE").is_some();
    println!(
        "{:>6} {:>7} {:>12} {:>12} {:>8} {:>10} {:>9}",
        "N", "engine", "alone ns/p", "shared ns/p", "speedup", "install ms", "patterns"
    );
    let mut rng = Rng::new(2500);
    for n in [10, 100, 1000].into_iter().filter(|&n| n <= max) {
        let patterns: Vec<[String; 3]> = (0..n)
            .map(|_| [word(&mut rng), word(&mut rng), word(&mut rng)])
            .collect();
        let filters: Vec<sift_ir::Function> = patterns
            .iter()
            .map(|[a, b, c]| {
                let expr = format!(
                    "tcp and (payload contains \"{a}\" or payload contains \"{b}\" \
                     or payload contains nocase \"{c}\")"
                );
                sift::compile_optimized_ir(&expr, &options()).expect("compiles")
            })
            .collect();
        let traffic = packets(&mut rng, &patterns);
        for native in [true, false] {
            let mut demux = if native {
                Demux::new()
            } else {
                Demux::interpreted()
            };
            let t = Instant::now();
            {
                let mut batch = demux.batch();
                for f in &filters {
                    batch.insert(f, 0, Delivery::Copy).expect("installs");
                }
            }
            let install = t.elapsed().as_secs_f64() * 1e3;
            let shared = ns_per_packet(&demux, &traffic);
            let stats = demux.stats();
            demux.share_searches(false);
            let alone = if skip_alone {
                f64::NAN
            } else {
                ns_per_packet(&demux, &traffic)
            };
            println!(
                "{:>6} {:>7} {:>12.0} {:>12.0} {:>7.1}x {:>10.1} {:>9}",
                n,
                if native { "native" } else { "interp" },
                alone,
                shared,
                alone / shared,
                install,
                stats.shared_search_patterns
            );
        }
    }
}
