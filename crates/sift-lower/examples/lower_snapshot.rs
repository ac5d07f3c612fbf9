//! Lowers a fixed corpus of filters and prints one hash per group of the IR text (or error)
//! they lower to: the check that a change to the optimizer's speed left its output alone.
//!
//! ```text
//! cargo run --release -p sift-lower --example lower_snapshot            # hashes
//! cargo run --release -p sift-lower --example lower_snapshot -- OUT     # also the texts, to OUT
//! cargo run --release -p sift-lower --example lower_snapshot -- -O [OUT] # without libpcap's optimizer
//! cargo run --release -p sift-lower --example lower_snapshot -- -d [OUT] # classic BPF
//! ```
//!
//! `-O` (as in tcpdump) checks the code generator alone: the IR as generated, before libpcap's
//! optimizer rewrites it. `-d` (as in `sift compile -d`) checks the whole pipeline: the IR
//! optimized by sift-opt and compiled to classic BPF, as a listing.
//!
//! The corpus: every expression of `/work/shared/exprs` (or `$SIFT_EXPRS`) for Ethernet and for
//! the link type its table names, 3,000 generated expressions per link type, and `or` / `and`
//! chains of hosts, nets, ports and bytes at 100, 1,000 and 10,000 terms.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write;

fn linktype_of(name: &str) -> Option<u32> {
    Some(match name {
        "EN10MB" => 1,
        "NULL" => 0,
        "RAW" => 101,
        "LOOP" => 108,
        "LINUX_SLL" => 113,
        "IPV4" => 228,
        "IPV6" => 229,
        "LINUX_SLL2" => 276,
        _ => return None,
    })
}

fn unescape(s: &str) -> String {
    s.replace("\\n", "\n").replace("\\t", "\t")
}

/// What the snapshot records of each filter.
#[derive(Clone, Copy, PartialEq)]
enum Stage {
    /// The IR as generated, before libpcap's optimizer (`-O`).
    Generated,
    /// The IR after libpcap's optimizer.
    Lowered,
    /// The classic BPF compiled from the IR sift-opt optimized (`-d`).
    ClassicBpf,
}

fn snapshot(expr: &str, linktype: u32, stage: Stage) -> String {
    let opts = sift_lower::Options {
        optimize: stage != Stage::Generated,
        ..sift_lower::Options::new(linktype, 262144)
    };
    let ast = match sift_syntax::parse(expr) {
        Ok(ast) => ast,
        Err(e) => return format!("parse error: {e:?}\n"),
    };
    let mut f = match sift_lower::lower(ast.as_ref(), &opts) {
        Ok(f) => f,
        Err(e) => return format!("error: {e}\n"),
    };
    if stage != Stage::ClassicBpf {
        return f.to_string();
    }
    if let Err(e) = sift_opt::try_optimize_with(&mut f, &sift_opt::Options::default()) {
        return format!("optimizer error: {e}\n");
    }
    match sift_bpf::compile(&f) {
        Ok(p) => sift_bpf::disasm::disassemble(&p.to_program()),
        Err(e) => format!("codegen error: {e}\n"),
    }
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let stage = match args.first().map(String::as_str) {
        Some("-O") => Stage::Generated,
        Some("-d") => Stage::ClassicBpf,
        _ => Stage::Lowered,
    };
    if stage != Stage::Lowered {
        args.remove(0);
    }
    let out_path = args.first();
    let mut out = out_path.map(|p| std::io::BufWriter::new(std::fs::File::create(p).unwrap()));
    let dir = std::env::var("SIFT_EXPRS").unwrap_or_else(|_| "/work/shared/exprs".into());
    let mut groups: Vec<(String, Vec<(String, u32)>)> = Vec::new();
    let mut table = Vec::new();
    for file in ["libpcap-accept.tsv", "libpcap-reject.tsv"] {
        let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
        for line in text.lines() {
            let Some((name, expr)) = line.split_once('\t') else {
                continue;
            };
            let expr = unescape(expr);
            table.push((expr.clone(), 1));
            if let Some(lt) = linktype_of(name).filter(|&lt| lt != 1) {
                table.push((expr, lt));
            }
        }
    }
    groups.push(("libpcap tables".into(), table));
    let random = std::fs::read_to_string(format!("{dir}/random.txt")).unwrap();
    groups.push((
        "random.txt".into(),
        random.lines().map(|l| (l.to_string(), 1)).collect(),
    ));
    for lt in [1, 101, 113] {
        groups.push((
            format!("generated, linktype {lt}"),
            sift_testgen::random_expressions(9, lt, 3000)
                .into_iter()
                .map(|e| (e, lt))
                .collect(),
        ));
    }
    for kind in ["host", "net", "port", "ether", "nothost", "mixed"] {
        for n in [100, 1_000, 10_000] {
            groups.push((
                format!("{kind} {n}"),
                vec![(
                    sift_testgen::chains::chain(kind, n).expect("a chain kind"),
                    1,
                )],
            ));
        }
    }
    for (name, exprs) in groups {
        let mut h = DefaultHasher::new();
        for (expr, lt) in &exprs {
            let text = snapshot(expr, *lt, stage);
            text.hash(&mut h);
            if let Some(out) = &mut out {
                writeln!(out, "=== {lt} {expr}\n{text}").unwrap();
            }
        }
        println!("{:016x}  {name} ({} filters)", h.finish(), exprs.len());
    }
}
