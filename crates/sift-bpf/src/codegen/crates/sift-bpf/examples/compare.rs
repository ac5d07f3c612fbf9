//! Shows one expression's optimized IR, sift's classic BPF for it and libpcap's optimized
//! program side by side (for working on code size).
//!
//! ```text
//! cargo run --release -p sift-bpf --example compare -- [-y LINKTYPE] [--no-ir] EXPRESSION
//! ```

use sift_oracle::{Oracle, DEFAULT_SNAPLEN};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut lt = 1;
    if let Some(i) = args.iter().position(|a| a == "-y") {
        lt = args[i + 1].parse().expect("numeric link type");
        args.drain(i..i + 2);
    }
    let show_ir = !args.iter().any(|a| a == "--no-ir");
    args.retain(|a| a != "--no-ir");
    let expr = args.join(" ");
    let filter = match sift::Filter::compile(&expr, lt, DEFAULT_SNAPLEN) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{}", e.render(&expr));
            std::process::exit(1);
        }
    };
    if show_ir {
        println!("== optimized IR\n{}", filter.optimized_ir());
    }
    match sift_bpf::compile(filter.optimized_ir()) {
        Ok(p) => print!(
            "== sift ({} instructions)\n{}",
            p.len(),
            sift_bpf::disasm::disassemble(&p.to_program())
        ),
        Err(e) => println!("== sift: {e}"),
    }
    match Oracle::new(lt, DEFAULT_SNAPLEN).map(|o| o.compile(&expr, true, 0)) {
        Ok(Ok(p)) => print!("== libpcap ({} instructions)\n{}", p.len(), p.dump()),
        Ok(Err(e)) | Err(e) => println!("== libpcap: {e}"),
    }
}
