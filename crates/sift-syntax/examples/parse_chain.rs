//! Parses a long `or` chain, as `sift-opt`'s `chain_time` builds them, and prints the fastest of
//! `runs` parses in milliseconds. Small enough to profile the parser alone:
//!
//! ```text
//! cargo run --release -p sift-syntax --example parse_chain -- host 10000 [runs]   # host, net, port, ether
//! valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
//!     target/release/examples/parse_chain host 10000 1                          # instruction count
//! ```

use std::time::Instant;

/// `kind` chain of `n` terms (the same text as `chain_time`'s).
fn chain(kind: &str, n: usize) -> String {
    let term = |i: usize| match kind {
        "host" => format!("host 10.{}.{}.1", i / 256, i % 256),
        "net" => format!("net 10.{}.{}.0/24", i / 256, i % 256),
        "port" => format!("port {}", 1000 + i),
        "ether" => format!("ether[{i}]=1"),
        _ => panic!("unknown chain kind {kind:?} (host, net, port, ether)"),
    };
    (0..n).map(term).collect::<Vec<_>>().join(" or ")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let kind = args.first().map_or("host", String::as_str);
    let n = args
        .get(1)
        .map_or(10_000, |s| s.parse().expect("number of terms"));
    let runs = args
        .get(2)
        .map_or(5, |s| s.parse().expect("number of runs"));
    let expr = chain(kind, n);
    let best = (0..runs)
        .map(|_| {
            let t = Instant::now();
            drop(sift_syntax::parse(&expr).expect("parses"));
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min);
    println!("{kind} {n}: {} bytes, parse {best:.3} ms", expr.len());
}
