//! Prints the optimized bytecode of a pcap-filter expression (Ethernet), as the JIT receives it;
//! with `--asm`, also the Cranelift IR and machine code the JIT makes of it:
//! `bytecode [--asm] EXPRESSION [OPTION...]` (the options of `common/mod.rs`).
mod common;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let asm = args.iter().any(|a| a == "--asm");
    let mut words = args.iter().filter(|a| *a != "--asm").cloned();
    let expr = words
        .next()
        .expect("usage: bytecode [--asm] EXPRESSION [OPTION...]");
    let options = common::options_from(&words.collect::<Vec<_>>());
    let mut ir = sift::compile_ir(&expr, &sift::Options::new(1, 262144)).expect("compiles");
    sift_opt::optimize(&mut ir);
    let bc = sift_bytecode::compile(&ir).expect("codegen");
    print!("{bc}");
    if asm {
        let text = sift_jit::JitFilter::listing(&bc, &options).expect("jit");
        print!("{text}");
    }
}
