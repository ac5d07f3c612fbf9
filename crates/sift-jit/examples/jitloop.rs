//! Runs one filter's JIT over generated Ethernet packets in a loop (for `perf stat`).
fn main() {
    let expr = std::env::args().nth(1).expect("expression");
    let mut ir = sift::compile_ir(&expr, &sift::Options::new(1, 262144)).expect("compiles");
    sift_opt::optimize(&mut ir);
    let bc = sift_bytecode::compile(&ir).expect("codegen");
    let mut options = sift_jit::Options::default();
    match std::env::args().nth(2).as_deref() {
        Some("nocoalesce") => options.coalesce = false,
        Some("nonative") => options.native_byte_order = false,
        Some("noaggregate") => options.aggregate_bounds = false,
        Some("baseline") => options = sift_jit::Options::baseline(),
        _ => {}
    }
    let packets = sift_testgen::generate_packets(1, 0xbe7c, 4000);
    // Several copies of the same code at different addresses: placement effects show up as
    // different times for identical code.
    let copies: Vec<_> = (0..6)
        .map(|_| sift_jit::JitFilter::compile_with(&bc, &options).expect("jit"))
        .collect();
    for jit in &copies {
        let start = std::time::Instant::now();
        let mut acc = 0u32;
        for _ in 0..200 {
            for p in &packets {
                acc = acc.wrapping_add(jit.run(std::hint::black_box(&p.data), p.wire_len));
            }
        }
        let ns = start.elapsed().as_nanos() as f64 / (200.0 * packets.len() as f64);
        println!("{ns:.2} ({jit:?})");
        std::hint::black_box(acc);
    }
    println!("ns/packet");
}
