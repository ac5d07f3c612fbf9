//! Multi-pattern search throughput: sift-coproc against a naive per-pattern search and (with
//! `--features hyperscan`) Hyperscan.
//!
//! Run: `cargo bench -p sift-coproc --bench search --features hyperscan`
//!
//! Data: 64 MiB of synthetic, deterministic protocol-like traffic (HTTP requests and responses,
//! JSON bodies, DNS-like names, 10% binary noise) built by `synthetic_traffic` below. Patterns:
//! deterministic pseudo-random lowercase "protocol words" of 4 to 16 bytes, built from
//! syllables, so that they rarely occur; one in 50 is planted once in the data.

#[cfg(feature = "hyperscan")]
#[path = "hyperscan/ffi.rs"]
mod hyperscan;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sift_coproc::{Coprocessors, Memo};
use sift_ir::{Pattern, PatternSet};
use sift_testgen::Rng;

const DATA_BYTES: usize = 64 << 20;
const PACKET_BYTES: usize = 1500;

const WORDS: &[&str] = &[
    "index",
    "api",
    "v1",
    "v2",
    "users",
    "login",
    "static",
    "images",
    "content",
    "length",
    "accept",
    "encoding",
    "gzip",
    "deflate",
    "session",
    "cookie",
    "json",
    "html",
    "text",
    "plain",
    "charset",
    "utf-8",
    "keep-alive",
    "close",
    "cache",
    "control",
    "max-age",
    "no-cache",
    "server",
    "nginx",
    "apache",
    "host",
    "example",
    "www",
    "cdn",
    "mail",
    "search",
    "query",
    "token",
    "status",
    "ok",
    "error",
    "message",
    "data",
    "items",
    "id",
    "name",
    "value",
    "true",
    "false",
    "null",
    "time",
    "date",
    "mozilla",
    "windows",
    "linux",
    "chrome",
    "safari",
    "favicon",
    "ico",
    "png",
    "jpeg",
    "style",
    "css",
    "script",
    "js",
];

const TLDS: &[&str] = &["com", "net", "org", "io", "de"];

/// Deterministic protocol-like traffic of `len` bytes.
pub fn synthetic_traffic(len: usize) -> Vec<u8> {
    let mut rng = Rng::new(0x5eed);
    let mut out = String::with_capacity(len + 4096);
    let mut binary = Vec::new();
    let mut data = Vec::with_capacity(len + 4096);
    while data.len() < len {
        out.clear();
        match rng.index(10) {
            0..=3 => {
                let (a, b, c) = (*rng.pick(WORDS), *rng.pick(WORDS), *rng.pick(WORDS));
                let n = rng.index(100_000);
                out += &format!("GET /{a}/{b}?{c}={n} HTTP/1.1\r\n");
                out += &format!(
                    "Host: {}.{}.{}\r\n",
                    *rng.pick(WORDS),
                    *rng.pick(WORDS),
                    *rng.pick(TLDS)
                );
                out += &format!(
                    "User-Agent: {}/5.0 ({}; {})\r\n",
                    *rng.pick(WORDS),
                    *rng.pick(WORDS),
                    *rng.pick(WORDS)
                );
                out += &format!(
                    "Accept-Encoding: {}, {}\r\nCookie: {}={:x}\r\n\r\n",
                    *rng.pick(WORDS),
                    *rng.pick(WORDS),
                    *rng.pick(WORDS),
                    rng.next_u64()
                );
            }
            4..=6 => {
                out += &format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {}/{}; charset=utf-8\r\n",
                    *rng.pick(WORDS),
                    *rng.pick(WORDS)
                );
                out += &format!("Content-Length: {}\r\n\r\n{{", rng.index(10_000));
                for _ in 0..rng.index(12) {
                    out += &format!(
                        "\"{}\": \"{} {}\", ",
                        *rng.pick(WORDS),
                        *rng.pick(WORDS),
                        *rng.pick(WORDS)
                    );
                }
                out += "}\n";
            }
            7 | 8 => {
                for _ in 0..4 {
                    out += &format!(
                        "{}.{}.{} ",
                        *rng.pick(WORDS),
                        *rng.pick(WORDS),
                        *rng.pick(TLDS)
                    );
                }
            }
            _ => {
                binary.clear();
                binary.extend((0..200).map(|_| rng.next_u64() as u8));
                data.extend_from_slice(&binary);
                continue;
            }
        }
        data.extend_from_slice(out.as_bytes());
    }
    data.truncate(len);
    data
}

const SYLLABLES: &[&str] = &[
    "ba", "ke", "zu", "qo", "vy", "xi", "ju", "fo", "wa", "gri", "pla", "tro", "sna", "kvo", "zel",
    "mux", "dab", "yop", "-", ".", "/", "=",
];

/// `count` distinct pseudo-random protocol-like words of 4 to 16 bytes.
pub fn patterns(count: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(count as u64);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let target = 4 + rng.index(13);
        let mut word = String::new();
        while word.len() < target {
            word += *rng.pick(SYLLABLES);
        }
        word.truncate(target);
        if seen.insert(word.clone()) {
            out.push(word.into_bytes());
        }
    }
    out
}

/// Throughput in GB/s of `bytes` processed in `time`.
fn gbps(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / time.as_secs_f64() / 1e9
}

/// The best of three runs (the first also warms caches up).
fn best_of_3(mut run: impl FnMut()) -> Duration {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            run();
            t.elapsed()
        })
        .min()
        .unwrap()
}

fn main() {
    let mut data = synthetic_traffic(DATA_BYTES);
    println!(
        "data: {} MiB of synthetic protocol-like traffic; packets of {PACKET_BYTES} bytes",
        data.len() >> 20
    );
    println!();
    println!("| patterns | compile sift | sift whole | sift packets | naive memmem | hyperscan whole | hyperscan packets | sift/hs whole | sift/hs packets | sift/naive | found |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for count in [10, 100, 2500] {
        let words = patterns(count);
        // Plant one in fifty patterns once, spread over the data.
        for (i, word) in words.iter().enumerate().step_by(50) {
            let at = (i * 7919 * 4099) % (data.len() - 64);
            data[at..at + word.len()].copy_from_slice(word);
        }
        let mut set = PatternSet::new();
        for word in &words {
            set.add(Pattern::Literal {
                bytes: word.clone(),
                nocase: false,
            })
            .unwrap();
        }
        let set = Arc::new(set);
        let t = Instant::now();
        let coproc = Coprocessors::compile(std::slice::from_ref(&set), &[]).unwrap();
        let compile = t.elapsed();

        let mut memo = Memo::new();
        let whole = best_of_3(|| {
            memo.next_packet();
            black_box(coproc.contains(&mut memo, 0, 0, &data, 0));
        });
        let found: Vec<bool> = {
            memo.next_packet();
            (0..count as u32)
                .map(|p| coproc.contains(&mut memo, 0, p, &data, 0))
                .collect()
        };
        let packets = best_of_3(|| {
            for chunk in data.chunks(PACKET_BYTES) {
                memo.next_packet();
                black_box(coproc.contains(&mut memo, 0, 0, chunk, 0));
            }
        });

        // The naive search runs one memmem pass per pattern, over a slice small enough that
        // the run stays short (its throughput does not depend on the slice size much).
        let naive_bytes = (DATA_BYTES / count.div_ceil(10)).max(1 << 20);
        let finders: Vec<_> = words.iter().map(memchr::memmem::Finder::new).collect();
        let naive = best_of_3(|| {
            for finder in &finders {
                black_box(finder.find(&data[..naive_bytes]));
            }
        });

        let found_count = found.iter().filter(|&&f| f).count();
        let (sift_whole, sift_packets, naive_rate) = (
            gbps(data.len(), whole),
            gbps(data.len(), packets),
            gbps(naive_bytes, naive),
        );
        #[cfg(feature = "hyperscan")]
        let hs = {
            let literals: Vec<(Vec<u8>, bool)> = words.iter().map(|w| (w.clone(), false)).collect();
            let mut hs = hyperscan::Hyperscan::compile(&literals).expect("hyperscan compiles");
            let mut hs_found = vec![false; count];
            let hs_whole = best_of_3(|| {
                hs_found.fill(false);
                black_box(hs.scan(&data, &mut hs_found));
            });
            assert_eq!(
                hs_found, found,
                "sift and Hyperscan disagree on which patterns occur"
            );
            let hs_packets = best_of_3(|| {
                for chunk in data.chunks(PACKET_BYTES) {
                    black_box(hs.scan(chunk, &mut hs_found));
                }
            });
            Some((gbps(data.len(), hs_whole), gbps(data.len(), hs_packets)))
        };
        #[cfg(not(feature = "hyperscan"))]
        let hs: Option<(f64, f64)> = None;
        let (hs_cols, ratio_cols) = match hs {
            Some((w, p)) => (
                format!("{w:.2} GB/s | {p:.2} GB/s"),
                format!("{:.2} | {:.2}", sift_whole / w, sift_packets / p),
            ),
            None => ("n/a | n/a".to_string(), "n/a | n/a".to_string()),
        };
        println!(
            "| {count} | {:.2} ms | {sift_whole:.2} GB/s | {sift_packets:.2} GB/s | {naive_rate:.3} GB/s | {hs_cols} | {ratio_cols} | {:.0}x | {found_count} |",
            compile.as_secs_f64() * 1e3,
            sift_whole / naive_rate,
        );
    }
}
