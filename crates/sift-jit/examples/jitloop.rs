//! Runs one filter's JIT over generated Ethernet packets in a loop (for `perf stat` and for
//! placement effects): `jitloop EXPR [OPTION...] [shuffled] [packets=N]`
//! (the options of `common/mod.rs`; 4,000 packets unless N is given).
//!
//! Six copies of the same code at different addresses are timed in turn, seven times each; each
//! line is a copy's lowest time, because single timings swing with other work on the machine
//! (one copy at 17 ns among copies at 1.8); so measured, the copies of one process agree within
//! 3%, wherever in memory the code lies (BENCHMARKS.md, JIT section). With one fixed order
//! of packets, the branch predictor learns the sequence of outcomes; `shuffled` visits the
//! packets in a new random order each round, which nothing can learn.
mod common;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let expr = args.first().expect("expression");
    let mut ir = sift::compile_ir(expr, &sift::Options::new(1, 262144)).expect("compiles");
    sift_opt::optimize(&mut ir);
    let bc = sift_bytecode::compile(&ir).expect("codegen");
    let options = common::options_from(&args[1..]);
    let shuffled = args.iter().any(|a| a == "shuffled");
    let count = args
        .iter()
        .find_map(|a| a.strip_prefix("packets=")?.parse().ok())
        .unwrap_or(4000);
    let packets = sift_testgen::generate_packets(1, 0xbe7c, count);
    const ROUNDS: usize = 30;
    let mut rng = sift_testgen::Rng::new(0x5eed);
    let mut order = Vec::with_capacity(ROUNDS * packets.len());
    for _ in 0..ROUNDS {
        let mut round: Vec<usize> = (0..packets.len()).collect();
        if shuffled {
            for i in (1..round.len()).rev() {
                round.swap(i, rng.index(i + 1));
            }
        }
        order.extend(round);
    }
    let copies: Vec<_> = (0..6)
        .map(|_| sift_jit::JitFilter::compile_with(&bc, &options).expect("jit"))
        .collect();
    let mut best = vec![f64::INFINITY; copies.len()];
    for _ in 0..7 {
        for (b, jit) in best.iter_mut().zip(&copies) {
            let start = std::time::Instant::now();
            let mut acc = 0u32;
            for &i in &order {
                let p = &packets[i];
                acc = acc.wrapping_add(jit.run(std::hint::black_box(&p.data), p.wire_len));
            }
            *b = b.min(start.elapsed().as_nanos() as f64 / order.len() as f64);
            std::hint::black_box(acc);
        }
    }
    for (ns, jit) in best.iter().zip(&copies) {
        println!("{ns:.2} ({jit:?})");
    }
    println!(
        "ns/packet ({})",
        if shuffled { "shuffled" } else { "fixed order" }
    );
}
