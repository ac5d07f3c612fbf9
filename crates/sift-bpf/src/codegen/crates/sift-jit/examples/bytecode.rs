//! Prints the optimized bytecode of a pcap-filter expression (Ethernet), as the JIT receives it.
fn main() {
    let expr = std::env::args().nth(1).expect("expression");
    let mut ir = sift::compile_ir(&expr, &sift::Options::new(1, 262144)).expect("compiles");
    sift_opt::optimize(&mut ir);
    let bc = sift_bytecode::compile(&ir).expect("codegen");
    print!("{bc}");
}
