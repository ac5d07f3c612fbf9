//! Snapshots of the optimizer's output, to check that a change to sift-opt leaves its output
//! byte-identical independently of changes to lowering.
//!
//! ```text
//! # lowered IR of the shared expressions, random expressions and long or-chains, into one file
//! cargo run --release -p sift-opt --example opt_snapshot -- lower /tmp/lowered.ir
//! # the optimized IR of each function in that file (run before and after a change, then diff)
//! cargo run --release -p sift-opt --example opt_snapshot -- optimize /tmp/lowered.ir > /tmp/opt.ir
//! ```
//!
//! Functions are separated by lines `### NAME`.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

const LINKTYPES: [(&str, u32); 6] = [
    ("EN10MB", 1),
    ("RAW", 101),
    ("LINUX_SLL", 113),
    ("IPV4", 228),
    ("IPV6", 229),
    ("LINUX_SLL2", 276),
];

fn lower(out: &Path) {
    let shared = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/exprs"
    ));
    let mut exprs: Vec<(String, u32)> = Vec::new();
    for (name, expr) in sift_oracle::diff::load_shared_exprs(shared).unwrap() {
        if let Some(&(_, lt)) = LINKTYPES.iter().find(|(n, _)| *n == name) {
            exprs.push((expr, lt));
        }
    }
    for line in std::fs::read_to_string(shared.join("random.txt"))
        .unwrap()
        .lines()
    {
        exprs.push((line.to_owned(), 1));
    }
    for (i, &(_, lt)) in LINKTYPES.iter().enumerate() {
        for e in sift_testgen::random_expressions(0x5eed + i as u64, lt, 300) {
            exprs.push((e, lt));
        }
    }
    for kind in ["host", "net", "port"] {
        for n in [3, 100, 1_000, 10_000] {
            exprs.push((
                sift_testgen::chains::chain(kind, n).expect("a chain kind"),
                1,
            ));
        }
    }
    let mut text = String::new();
    let mut count = 0;
    for (expr, lt) in &exprs {
        let Ok(filter) = sift::Filter::compile(expr, *lt, 262144) else {
            continue;
        };
        let name: String = expr.chars().take(80).collect();
        let name = name.replace('\n', " ");
        writeln!(text, "### [{lt}] {name}\n{}", filter.ir()).unwrap();
        count += 1;
    }
    std::fs::write(out, text).unwrap();
    eprintln!("{count} functions written to {}", out.display());
}

fn optimize(input: &Path) {
    let text = std::fs::read_to_string(input).unwrap();
    let mut total = 0.0;
    let mut out = String::new();
    for section in text.split("### ").skip(1) {
        let (name, body) = section.split_once('\n').unwrap();
        let mut f = sift_ir::parse_function(body).unwrap();
        let t = Instant::now();
        sift_opt::optimize(&mut f);
        total += t.elapsed().as_secs_f64();
        writeln!(out, "### {name}\n{f}").unwrap();
    }
    print!("{out}");
    eprintln!("optimized in {:.1} ms in total", total * 1e3);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [mode, file] if mode == "lower" => lower(Path::new(file)),
        [mode, file] if mode == "optimize" => optimize(Path::new(file)),
        _ => eprintln!("usage: opt_snapshot lower FILE | optimize FILE"),
    }
}
