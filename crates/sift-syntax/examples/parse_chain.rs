//! Parses a long `or` chain (`sift_testgen::chains`, as `chain_time` uses) and prints the
//! fastest of `runs` parses in milliseconds. Small enough to profile the parser alone:
//!
//! ```text
//! cargo run --release -p sift-syntax --example parse_chain -- host 10000 [runs]   # host, net, port, ether
//! valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
//!     target/release/examples/parse_chain host 10000 1                          # instruction count
//! ```

use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let kind = args.first().map_or("host", String::as_str);
    let n = args
        .get(1)
        .map_or(10_000, |s| s.parse().expect("number of terms"));
    let runs = args
        .get(2)
        .map_or(5, |s| s.parse().expect("number of runs"));
    let expr = sift_testgen::chains::chain(kind, n)
        .unwrap_or_else(|| panic!("unknown chain kind {kind:?} (host, net, port, ether)"));
    let best = (0..runs)
        .map(|_| {
            let t = Instant::now();
            drop(sift_syntax::parse(&expr).expect("parses"));
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min);
    println!("{kind} {n}: {} bytes, parse {best:.3} ms", expr.len());
}
