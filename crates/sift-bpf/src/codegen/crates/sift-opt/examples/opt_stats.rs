//! Prints what the optimizer does to typical filters and to long `or` chains: IR size before and
//! after, optimizer time, and libpcap's optimized classic BPF instruction count beside them.
//!
//! ```text
//! cargo run --release -p sift-opt --example opt_stats            # table
//! cargo run --release -p sift-opt --example opt_stats -- --ir 'tcp port 80'   # show the IR
//! SIFT_PCAP_10K=1 cargo run ...   # also time libpcap on 10,000 terms (takes very long)
//! SIFT_NO_PCAP=1 cargo run ...    # sift only
//! SIFT_LOWER_10K=1 cargo run ...  # also lower 10,000-term chains with sift-lower (slow there)
//! ```
//!
//! "IR size" counts non-constant instructions, two-way tests and switch cases (constants are
//! immediates in every back end). It is not classic BPF: the classic BPF back end's output is
//! the number to hold against libpcap's; the libpcap column is here for scale.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use sift_opt::{optimize, Counts};

const TYPICAL: &[&str] = &[
    "ip",
    "tcp",
    "tcp port 80",
    "udp port 53",
    "host 10.0.0.1",
    "src host 10.0.0.1 and dst host 10.0.0.2",
    "(src host 10.0.0.1 and dst host 10.0.0.2) or (src host 10.0.0.2 and dst host 10.0.0.1)",
    "host 10.0.0.1 or host 10.0.0.2 or host 10.0.0.3",
    "port 22 or port 80 or port 443",
    "net 192.168.0.0/16 and not net 192.168.1.0/24",
    "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0",
    "icmp or icmp6 or arp",
    "vlan and tcp port 80",
    "ip6 and tcp dst port 443",
    "portrange 1000-2000",
    "ether host 00:11:22:33:44:55",
    "tcp port 80 and (((ip[2:2] - ((ip[0]&0xf)<<2)) - ((tcp[12]&0xf0)>>2)) != 0)",
    "ip proto 47 or ip proto 50 or ip proto 51",
    "greater 1000 and udp",
    "tcp and (port 80 or port 8080) and not host 10.0.0.1",
];

fn size(c: &Counts) -> usize {
    c.ops + c.branches + c.switch_cases
}

fn pcap_len(expr: &str) -> String {
    if std::env::var_os("SIFT_NO_PCAP").is_some() {
        return "-".into();
    }
    match sift_oracle::Oracle::new(1, 262144).and_then(|o| o.compile(expr, true, 0)) {
        Ok(p) => p.len().to_string(),
        Err(_) => "error".into(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--ir") {
        for e in &args[1..] {
            let mut f = sift::Filter::compile(e, 1, 262144)
                .expect("compiles")
                .ir()
                .clone();
            println!("# {e}\n## before\n{f}");
            let stats = optimize(&mut f);
            println!("## after\n{f}\n## {stats}\n");
        }
        return;
    }
    println!(
        "{:<60} {:>8} {:>8} {:>9} {:>9} {:>8}",
        "expression (EN10MB)", "IR size", "opt", "tests", "opt µs", "libpcap"
    );
    for e in TYPICAL {
        let mut f = sift::Filter::compile(e, 1, 262144)
            .expect("compiles")
            .ir()
            .clone();
        let t = Instant::now();
        let stats = optimize(&mut f);
        let us = t.elapsed().as_secs_f64() * 1e6;
        let shown: String = e.chars().take(60).collect();
        println!(
            "{:<60} {:>8} {:>8} {:>4}->{:<4} {:>9.0} {:>8}",
            shown,
            size(&stats.before),
            size(&stats.after),
            stats.before.branches,
            stats.after.branches + stats.after.switch_cases,
            us,
            pcap_len(e)
        );
    }
    println!();
    println!(
        "{:<22} {:>9} {:>8} {:>10} {:>12} {:>10} {:>12}",
        "chain", "IR size", "opt", "switches", "opt ms", "libpcap", "libpcap ms"
    );
    let pcap_10k = std::env::var_os("SIFT_PCAP_10K").is_some();
    // Unoptimized code-generator output, built directly (no lowering time, no lowering-side
    // optimization): the optimizer does all the work.
    for n in [100, 1_000, 10_000, 100_000] {
        let mut f = common::raw_host_chain(n);
        let t = Instant::now();
        let stats = optimize(&mut f);
        let ms = t.elapsed().as_secs_f64() * 1e3;
        println!(
            "{:<22} {:>9} {:>8} {:>10} {:>12.2} {:>10} {:>12}",
            format!("raw host x {n}"),
            size(&stats.before),
            size(&stats.after),
            stats.after.switches,
            ms,
            "",
            ""
        );
        if std::env::var_os("SIFT_VERBOSE").is_some() {
            println!("{stats}");
        }
    }
    for (name, term) in [
        ("host", common::host_term as fn(usize) -> String),
        ("net", common::net_term),
        ("port", common::port_term),
    ] {
        for n in [100, 1_000, 10_000] {
            if n == 10_000 && std::env::var_os("SIFT_LOWER_10K").is_none() {
                // sift-lower currently takes minutes on 10^4-term chains; opt in.
                continue;
            }
            let mut f = common::lower_chain(n, 1, term);
            let t = Instant::now();
            let stats = optimize(&mut f);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let skip = std::env::var_os("SIFT_NO_PCAP").is_some();
            let (pcap, pcap_ms) = if !skip && (n < 10_000 || pcap_10k) {
                let text = (0..n).map(term).collect::<Vec<_>>().join(" or ");
                let t = Instant::now();
                let len = pcap_len(&text);
                (len, format!("{:.0}", t.elapsed().as_secs_f64() * 1e3))
            } else {
                ("-".into(), "-".into())
            };
            println!(
                "{:<22} {:>9} {:>8} {:>10} {:>12.2} {:>10} {:>12}",
                format!("{name} x {n}"),
                size(&stats.before),
                size(&stats.after),
                stats.after.switches,
                ms,
                pcap,
                pcap_ms
            );
        }
    }
}
