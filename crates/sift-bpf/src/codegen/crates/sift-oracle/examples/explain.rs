//! Shows libpcap's optimized and unoptimized programs for an expression, and, given packet hex,
//! both verdicts.
//!
//! `cargo run -p sift-oracle --example explain -- LINKTYPE 'EXPR' [HEX [WIRE_LEN]]`

use sift_oracle::{Oracle, DEFAULT_SNAPLEN};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(lt), Some(expr)) = (args.first(), args.get(1)) else {
        eprintln!("usage: explain LINKTYPE EXPR [HEX [WIRE_LEN]]");
        std::process::exit(2);
    };
    let lt: u32 = lt.parse().expect("LINKTYPE must be a number");
    let pkt: Option<Vec<u8>> = args.get(2).map(|h| {
        (0..h.len() / 2)
            .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).expect("hex"))
            .collect()
    });
    let wire = args
        .get(3)
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| pkt.as_ref().map_or(0, |p| p.len() as u32));
    let oracle = Oracle::new(lt, DEFAULT_SNAPLEN).expect("pcap_open_dead");
    for optimize in [true, false] {
        match oracle.compile(expr, optimize, 0) {
            Ok(p) => {
                print!(
                    "--- optimize={optimize}: {} instructions\n{}",
                    p.len(),
                    p.dump()
                );
                if let Some(pkt) = &pkt {
                    println!("=> returns {}", p.run(pkt, wire));
                }
            }
            Err(e) => println!("--- optimize={optimize}: error: {e}"),
        }
    }
}
