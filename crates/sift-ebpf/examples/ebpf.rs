//! Compiles a pcap-filter expression (Ethernet) to eBPF and writes an ELF object.
//!
//! `cargo run -p sift-ebpf --example ebpf -- socket|xdp|tc 'EXPR' [OUT.o] [--no-opt]`

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(ty), Some(expr)) = (args.first(), args.get(1)) else {
        eprintln!("usage: ebpf socket|xdp|tc EXPR [OUT.o] [--no-opt]");
        std::process::exit(2);
    };
    let Some(ty) = sift_ebpf::ProgramType::from_name(ty) else {
        eprintln!("unknown program type {ty}");
        std::process::exit(2);
    };
    let mut f = match sift::compile_ir(expr, &sift::Options::new(1, 262_144)) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{}", e.render(expr));
            std::process::exit(1);
        }
    };
    if !args.iter().any(|a| a == "--no-opt") {
        sift_opt::optimize(&mut f);
    }
    let p = match sift_ebpf::compile(&f, &sift_ebpf::Options::new(ty)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    print!("{}", sift_ebpf::to_text(&p, "sift_filter"));
    if let Some(out) = args.get(2).filter(|a| !a.starts_with("--")) {
        let bytes = sift_ebpf::to_elf(&p, "sift_filter").expect("ELF");
        std::fs::write(out, bytes).expect("write");
    }
}
