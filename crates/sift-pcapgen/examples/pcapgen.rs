//! Shows, for one expression, gencode's block graph as rebuilt from sift's IR and as read back
//! from libpcap's unoptimized program, and the first difference.
//!
//! `cargo run --release -p sift-pcapgen --example pcapgen -- LINKTYPE 'EXPR'`

use sift_bpf::Insn;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(lt), Some(expr)) = (args.first(), args.get(1)) else {
        eprintln!("usage: pcapgen LINKTYPE EXPR");
        std::process::exit(2);
    };
    let lt: u32 = lt.parse().expect("LINKTYPE must be a number");
    let opts = sift::Options {
        optimize: false,
        ..sift::Options::new(lt, 262_144)
    };
    let ir = sift::compile_ir(expr, &opts).unwrap_or_else(|e| fail(&format!("sift: {e}")));
    println!("--- sift IR\n{ir}");
    let oracle = sift_oracle::Oracle::new(lt, 262_144)
        .unwrap_or_else(|e| fail(&format!("libpcap handle: {e}")));
    let program = oracle
        .compile(expr, false, 0)
        .unwrap_or_else(|e| fail(&format!("libpcap: {e}")));
    let insns: Vec<Insn> = program
        .instructions()
        .iter()
        .map(|i| Insn::jump(i.code, i.k, i.jt, i.jf))
        .collect();
    let theirs = sift_pcapgen::from_linear(&insns);
    println!("--- libpcap\n{theirs}");
    match sift_pcapgen::libpcap_code(&ir) {
        Ok(ours) => {
            println!("--- from the IR\n{ours}");
            match sift_pcapgen::same_graph(&ours, 0, &theirs, 0) {
                Ok(()) => println!("same"),
                Err(m) => println!("DIFFERENT: {m}"),
            }
        }
        Err(e) => println!("unsupported: {e}"),
    }
}

fn fail(message: &str) -> ! {
    eprintln!("{message}");
    std::process::exit(1)
}
