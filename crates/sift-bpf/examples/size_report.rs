//! Instruction counts of sift's classic BPF (from the optimized IR) against libpcap's optimized
//! output, over the shared expression suite (`/work/shared/exprs`, every link type it names, and
//! `random.txt` on Ethernet) and sift-testgen's random expressions.
//!
//! ```text
//! cargo run --release -p sift-bpf --example size_report [-- --all] [--random N]
//! ```
//!
//! Prints the expressions where sift is larger (or, with `--all`, every expression), then per
//! suite: the number of expressions both compile, the totals, the saving, how many are larger,
//! and how many exceed the Linux (4096) and BSD (512) instruction limits. sift's size is that of
//! its libpcap dialect (`sift compile -d`), where `protochain` is libpcap's loop like in
//! libpcap's output; the last line gives the protochain expressions' size in the kernel
//! dialect too, where the loop is unrolled to 32 headers.

use sift_oracle::{Oracle, OracleError, DEFAULT_SNAPLEN};

const LINUX_LIMIT: usize = 4096;
const BSD_LIMIT: usize = 512;
const RANDOM_LINKTYPES: [u32; 6] = [1, 101, 113, 228, 229, 276];

#[derive(Default)]
struct Totals {
    compared: usize,
    sift: usize,
    libpcap: usize,
    larger: usize,
    smaller: usize,
    sift_over_linux: usize,
    sift_over_bsd: usize,
    libpcap_over_linux: usize,
    libpcap_over_bsd: usize,
    codegen_errors: usize,
}

impl Totals {
    fn print(&self, suite: &str) {
        let saving = 100.0 * (1.0 - self.sift as f64 / self.libpcap.max(1) as f64);
        println!(
            "{suite}: {} expressions, sift {} vs libpcap {} instructions ({saving:.1}% fewer), \
             sift larger on {}, smaller on {}; over 4096: sift {} libpcap {}; over 512: sift {} \
             libpcap {}; codegen errors {}",
            self.compared,
            self.sift,
            self.libpcap,
            self.larger,
            self.smaller,
            self.sift_over_linux,
            self.libpcap_over_linux,
            self.sift_over_bsd,
            self.libpcap_over_bsd,
            self.codegen_errors
        );
    }

    fn add(&mut self, other: &Totals) {
        self.compared += other.compared;
        self.sift += other.sift;
        self.libpcap += other.libpcap;
        self.larger += other.larger;
        self.smaller += other.smaller;
        self.sift_over_linux += other.sift_over_linux;
        self.sift_over_bsd += other.sift_over_bsd;
        self.libpcap_over_linux += other.libpcap_over_linux;
        self.libpcap_over_bsd += other.libpcap_over_bsd;
        self.codegen_errors += other.codegen_errors;
    }
}

/// libpcap's optimized size; a filter its optimizer proves empty is its one `ret #0`.
fn libpcap_size(o: &Oracle, e: &str) -> Option<usize> {
    match o.compile(e, true, 0) {
        Ok(p) => Some(p.len()),
        Err(OracleError::RejectsAll) => Some(1),
        Err(_) => None,
    }
}

/// Totals over every expression, over those without `protochain`, and (sift's column in the
/// Linux dialect, where the kernel refuses loops and sift unrolls them) over those with it.
fn measure(list: &[(u32, String)], all: bool) -> (Totals, Totals, Totals) {
    let mut t = Totals::default();
    let mut no_loop = Totals::default();
    let mut unrolled = Totals::default();
    let mut oracles = std::collections::HashMap::new();
    for (lt, e) in list {
        let Ok(filter) = sift::Filter::compile(e, *lt, DEFAULT_SNAPLEN) else {
            continue;
        };
        let o = oracles
            .entry(*lt)
            .or_insert_with(|| Oracle::new(*lt, DEFAULT_SNAPLEN).expect("libpcap handle"));
        let Some(theirs) = libpcap_size(o, e) else {
            continue;
        };
        let ours = match sift_bpf::compile(filter.optimized_ir()) {
            Ok(p) => p.len(),
            Err(err) => {
                println!("codegen error ({lt}) {e:?}: {err}");
                t.codegen_errors += 1;
                continue;
            }
        };
        let mut one = Totals::default();
        let t_all = &mut t;
        let t = &mut one;
        t.compared += 1;
        t.sift += ours;
        t.libpcap += theirs;
        t.larger += usize::from(ours > theirs);
        t.smaller += usize::from(ours < theirs);
        t.sift_over_linux += usize::from(ours > LINUX_LIMIT);
        t.sift_over_bsd += usize::from(ours > BSD_LIMIT);
        t.libpcap_over_linux += usize::from(theirs > LINUX_LIMIT);
        t.libpcap_over_bsd += usize::from(theirs > BSD_LIMIT);
        t_all.add(t);
        if !e.contains("protochain") {
            no_loop.add(t);
        } else if let Some(p) = filter
            .loop_free_ir()
            .ok()
            .and_then(|f| sift_bpf::compile_for(&f, sift_bpf::Dialect::Linux).ok())
        {
            let mut u = Totals::default();
            u.add(t);
            u.sift = p.len();
            u.larger = usize::from(p.len() > theirs);
            u.smaller = usize::from(p.len() < theirs);
            u.sift_over_linux = usize::from(p.len() > LINUX_LIMIT);
            u.sift_over_bsd = usize::from(p.len() > BSD_LIMIT);
            unrolled.add(&u);
        }
        if all || ours > theirs {
            let mark = if ours > theirs { "LARGER " } else { "" };
            println!("{mark}{lt:>3} {ours:>5} {theirs:>5}  {e:?}");
        }
    }
    (t, no_loop, unrolled)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let all = args.iter().any(|a| a == "--all");
    let random_n = args
        .iter()
        .position(|a| a == "--random")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);

    let dir = std::path::Path::new("/work/shared/exprs");
    let mut shared = Vec::new();
    match sift_oracle::diff::load_shared_exprs(dir) {
        Ok(list) => {
            for (name, e) in list {
                if let Some(lt) = sift_oracle::linktype::from_name(&name) {
                    shared.push((lt, e));
                }
            }
        }
        Err(err) => eprintln!("no shared expressions: {err}"),
    }
    if let Ok(text) = std::fs::read_to_string(dir.join("random.txt")) {
        shared.extend(text.lines().map(|l| (1, l.to_string())));
    }
    let mut generated = Vec::new();
    for lt in RANDOM_LINKTYPES {
        for e in sift_testgen::random_expressions(0x5175 ^ u64::from(lt), lt, random_n) {
            generated.push((lt, e));
        }
    }

    println!("lt   sift libpcap  expression");
    let (a, a_no_loop, a_unrolled) = measure(&shared, all);
    let (b, b_no_loop, b_unrolled) = measure(&generated, all);
    a.print("shared suite");
    b.print(&format!("sift-testgen random ({random_n} per link type)"));
    let mut total = Totals::default();
    total.add(&a);
    total.add(&b);
    total.print("all");
    let mut total_no_loop = Totals::default();
    total_no_loop.add(&a_no_loop);
    total_no_loop.add(&b_no_loop);
    total_no_loop.print("all without protochain");
    let mut total_unrolled = Totals::default();
    total_unrolled.add(&a_unrolled);
    total_unrolled.add(&b_unrolled);
    total_unrolled.print("protochain only, sift's Linux dialect (unrolled to 32 headers)");
}
