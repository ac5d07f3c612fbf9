//! Shows libpcap's optimizer at work on one expression: libpcap's own programs, the model's
//! output, and (with `--trace`) a snapshot after every pass.
//!
//! `cargo run --release -p sift-libpcap --example trace -- LINKTYPE 'EXPR' [--trace]`

use sift_bpf::{disasm, Insn};
use sift_oracle::{Oracle, OracleError, DEFAULT_SNAPLEN};

fn to_insns(p: &sift_oracle::Program) -> Vec<Insn> {
    p.instructions()
        .iter()
        .map(|i| Insn::jump(i.code, i.k, i.jt, i.jf))
        .collect()
}

fn print(title: &str, prog: &[Insn]) {
    println!("--- {title}: {} instructions", prog.len());
    for (i, insn) in prog.iter().enumerate() {
        println!("{}", disasm::image(*insn, i));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(lt), Some(expr)) = (args.first(), args.get(1)) else {
        eprintln!("usage: trace LINKTYPE EXPR [--trace]");
        std::process::exit(2);
    };
    let trace = args.iter().any(|a| a == "--trace");
    let lt: u32 = lt.parse().expect("LINKTYPE must be a number");
    let oracle = Oracle::new(lt, DEFAULT_SNAPLEN).expect("libpcap handle");
    let unopt = match oracle.compile(expr, false, 0) {
        Ok(p) => to_insns(&p),
        Err(e) => {
            println!("libpcap does not compile it: {e}");
            return;
        }
    };
    print("libpcap unoptimized", &unopt);
    match oracle.compile(expr, true, 0) {
        Ok(p) => print("libpcap optimized", &to_insns(&p)),
        Err(OracleError::RejectsAll) => println!("--- libpcap optimized: rejects all packets"),
        Err(e) => println!("--- libpcap optimized: error: {e}"),
    }
    let mut sink = |s: &sift_libpcap::Snapshot| {
        if trace {
            println!("{s}");
        }
    };
    match sift_libpcap::optimize_traced(&unopt, &mut sink) {
        Ok(p) => print("model", &p),
        Err(e) => println!("--- model: error: {e}"),
    }
}
