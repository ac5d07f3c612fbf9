//! Finds packets where libpcap, the bytecode and the IR interpreter disagree on an expression.
use sift_bytecode::{compile, Cache};

fn main() {
    let expr = std::env::args().nth(1).expect("expression");
    let oracle = sift_oracle::Oracle::new(1, 262144).unwrap();
    let bpf = oracle.compile(&expr, true, 0).unwrap();
    let filter = sift::Filter::compile(&expr, 1, 262144).unwrap();
    let ir = sift_ir::Interpreter::new(filter.ir().clone()).unwrap();
    let bc = compile(filter.ir()).unwrap();
    let (mut c1, mut c2) = (sift_ir::Cache::new(), Cache::new());
    for p in sift_testgen::generate_packets(1, 0xbe7c, 4000) {
        let a = bpf.run(&p.data, p.wire_len);
        let b = bc.run(&mut c2, &p.data, p.wire_len);
        let c = ir.run(&mut c1, &p.data, p.wire_len);
        if a != b || b != c {
            println!(
                "bpf {a} bc {b} ir {c}: {:02x?}",
                &p.data[..p.data.len().min(48)]
            );
        }
    }
}
