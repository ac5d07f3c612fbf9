//! Times each stage of compiling long `or` chains: parsing, lowering (with libpcap's optimizer
//! semantics), sift-opt, classic BPF code generation, the expression's whole way to classic BPF
//! (`sift compile`), and the whole `sift::Filter::compile` (bytecode and JIT included).
//!
//! ```text
//! cargo run --release -p sift-opt --example chain_time                 # host/net/port/ether x 100, 1,000, 10,000
//! cargo run --release -p sift-opt --example chain_time -- port 10000   # one chain
//! cargo run --release -p sift-opt --example chain_time -- -F FILE      # an expression in a file
//! cargo run --release -p sift-opt --example chain_time -- port 10000 lower  # lowering only, once
//! cargo run --release -p sift-opt --example chain_time -- port 10000 lower 20  # fastest of 20
//! cargo run --release -p sift-opt --example chain_time -- port 10000 gen 20   # code generation only (tcpdump -O)
//! cargo run --release -p sift-opt --example chain_time -- port 10000 opt    # sift-opt only, once
//! cargo run --release -p sift-opt --example chain_time -- port 10000 opt 20 # fastest of 20
//! cargo run --release -p sift-opt --example chain_time -- port 1000 opt0    # sift-opt on the tcpdump -O lowering
//! cargo run --release -p sift-opt --example chain_time -- port 10000 cbpf 5 # classic BPF codegen only
//! cargo run --release -p sift-opt --example chain_time -- port 10000 compile 5 # text to classic BPF
//! cargo run --release -p sift-opt --example chain_time -- port 10000 full   # Filter::compile, once
//! cargo run --release -p sift-opt --example chain_time -- port 10000 full 5 # fastest of 5
//! cargo run --release -p sift-opt --example chain_time -- port 1000 pcap    # libpcap's pcap_compile
//! ```
//!
//! Each figure is the fastest of three runs, in milliseconds.

use std::time::Instant;

/// `kind` chain of `n` terms (`sift_testgen::chains`), as the BENCHMARKS.md figures are made.
fn chain(kind: &str, n: usize) -> String {
    sift_testgen::chains::chain(kind, n)
        .unwrap_or_else(|| panic!("unknown chain kind {kind:?} (host, net, port, ether)"))
}

/// Options for Ethernet captures; `libpcap_optimizer` as tcpdump without `-O`.
fn ethernet(libpcap_optimizer: bool) -> sift::Options {
    sift::Options {
        optimize: libpcap_optimizer,
        ..sift::Options::new(1, 262144)
    }
}

/// This thread's time on the CPU so far (Linux; 0 elsewhere): on a shared machine, less
/// noisy than the wall clock.
fn cpu_ms() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |ns| ns / 1e6)
}

/// The fastest of `n` runs, in milliseconds.
fn best_of(n: usize, mut run: impl FnMut()) -> f64 {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            run();
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
}

/// The expression's way to classic BPF, as `sift compile` takes it (at 10,000 terms the program
/// is over the kernel's size limit, which `sift compile` reports after the work is done).
fn to_classic_bpf(expr: &str) -> usize {
    let ir = sift::compile_optimized_ir(expr, &ethernet(true)).unwrap();
    sift_bpf::compile(&ir).unwrap().insns().len()
}

fn time(name: &str, expr: &str) {
    let opts = ethernet(true);
    let ast = sift_syntax::parse(expr).unwrap();
    let parse = best_of(3, || drop(sift_syntax::parse(expr).unwrap()));
    let lowered = sift_lower::lower(ast.as_ref(), &opts).unwrap();
    let lower = best_of(3, || drop(sift_lower::lower(ast.as_ref(), &opts).unwrap()));
    let mut optimized = lowered.clone();
    sift_opt::optimize(&mut optimized);
    let opt = best_of(3, || {
        let mut f = lowered.clone();
        sift_opt::optimize(&mut f);
    });
    let cbpf = best_of(3, || drop(sift_bpf::compile(&optimized)));
    let compile = best_of(3, || {
        to_classic_bpf(expr);
    });
    let full = best_of(3, || drop(sift::Filter::compile(expr, 1, 262144).unwrap()));
    println!(
        "{name:>12} {parse:>9.1} {lower:>9.1} {opt:>9.1} {cbpf:>9.1} {compile:>9.1} {full:>9.1} {:>8} {:>8}",
        lowered.blocks.len(),
        optimized.blocks.len()
    );
}

fn header() {
    println!(
        "{:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "chain",
        "parse ms",
        "lower ms",
        "opt ms",
        "cbpf ms",
        "cbpf all",
        "full ms",
        "blocks",
        "opt blks"
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [flag, file] if flag == "-F" => {
            header();
            let expr = std::fs::read_to_string(file).unwrap();
            time(file, expr.trim());
        }
        [kind, n, stage, rest @ ..] if (stage == "lower" || stage == "gen") && rest.len() <= 1 => {
            let ast = sift_syntax::parse(&chain(kind, n.parse().unwrap())).unwrap();
            // `gen`: without libpcap's optimizer, as `tcpdump -O`.
            let opts = ethernet(stage == "lower");
            // Repeated, for profiles; the fastest run is reported.
            let repeats: usize = rest.first().map_or(1, |r| r.parse().unwrap());
            let (mut best, mut best_cpu) = (f64::INFINITY, f64::INFINITY);
            let mut blocks = 0;
            for _ in 0..repeats {
                let (t, cpu) = (Instant::now(), cpu_ms());
                let f = sift_lower::lower(ast.as_ref(), &opts).unwrap();
                best = best.min(t.elapsed().as_secs_f64() * 1e3);
                best_cpu = best_cpu.min(cpu_ms() - cpu);
                blocks = f.blocks.len();
            }
            println!("lowered in {best:.1} ms ({best_cpu:.1} ms on the CPU): {blocks} blocks");
        }
        [kind, n, stage, rest @ ..] if stage == "cbpf" && rest.len() <= 1 => {
            let ir = sift::compile_optimized_ir(&chain(kind, n.parse().unwrap()), &ethernet(true))
                .unwrap();
            let repeats: usize = rest.first().map_or(1, |r| r.parse().unwrap());
            let best = best_of(repeats, || drop(sift_bpf::compile(&ir)));
            println!("classic BPF generated in {best:.1} ms");
        }
        [kind, n, stage, rest @ ..] if stage == "compile" && rest.len() <= 1 => {
            let expr = chain(kind, n.parse().unwrap());
            let repeats: usize = rest.first().map_or(1, |r| r.parse().unwrap());
            let mut insns = 0;
            let best = best_of(repeats, || insns = to_classic_bpf(&expr));
            println!("compiled to {insns} classic BPF instructions in {best:.1} ms");
        }
        [kind, n, stage, rest @ ..] if stage == "full" && rest.len() <= 1 => {
            let expr = chain(kind, n.parse().unwrap());
            let repeats: usize = rest.first().map_or(1, |r| r.parse().unwrap());
            let best = best_of(repeats, || {
                drop(sift::Filter::compile(&expr, 1, 262144).unwrap())
            });
            println!("compiled in {best:.1} ms");
        }
        [kind, n, stage, rest @ ..] if (stage == "opt" || stage == "opt0") && rest.len() <= 1 => {
            let ast = sift_syntax::parse(&chain(kind, n.parse().unwrap())).unwrap();
            // `opt0`: on the lowering without libpcap's optimizer, as `tcpdump -O`.
            let lowered = sift_lower::lower(ast.as_ref(), &ethernet(stage == "opt")).unwrap();
            // Repeated, for profiles; the fastest run is reported.
            let repeats: usize = rest.first().map_or(1, |r| r.parse().unwrap());
            let (mut best, mut best_cpu) = (f64::INFINITY, f64::INFINITY);
            let mut stats = None;
            for _ in 0..repeats {
                let mut f = lowered.clone();
                let (t, cpu) = (Instant::now(), cpu_ms());
                stats = Some(sift_opt::optimize(&mut f));
                best = best.min(t.elapsed().as_secs_f64() * 1e3);
                best_cpu = best_cpu.min(cpu_ms() - cpu);
            }
            println!(
                "optimized in {best:.1} ms ({best_cpu:.1} ms on the CPU): {}",
                stats.unwrap()
            );
        }
        [kind, n, stage] if stage == "pcap" => {
            let expr = chain(kind, n.parse().unwrap());
            let oracle = sift_oracle::Oracle::new(1, 262144).unwrap();
            let t = Instant::now();
            let program = oracle.compile(&expr, true, 0).unwrap();
            println!(
                "libpcap compiled in {:.1} ms: {} instructions",
                t.elapsed().as_secs_f64() * 1e3,
                program.instructions().len()
            );
        }
        [kind, n] => {
            header();
            time(&format!("{kind} {n}"), &chain(kind, n.parse().unwrap()));
        }
        _ => {
            header();
            for n in [100, 1_000, 10_000] {
                for kind in ["host", "net", "port", "ether"] {
                    time(&format!("{kind} {n}"), &chain(kind, n));
                }
            }
        }
    }
}
