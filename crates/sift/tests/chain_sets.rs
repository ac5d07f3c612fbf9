//! Long `or` chains of one primitive (`host a or host b or ...`), which sift lowers as one set
//! lookup written as a `switch` (sift-lower's `chain_sets.rs`), against libpcap's optimizer on
//! the same chains.
//!
//! The set tests the source against every value before it reads the destination; libpcap's
//! optimized chain must do the same on every packet, truncated ones included, for the lowering
//! to be exact. Each round draws a link type, a primitive (`host`, `net` with one prefix length,
//! `port`), its protocol and direction qualifiers and 32 to 80 values (some repeated), writes
//! the chain or its negation (`not (a or b ...)`, `not a and not b ...`), and
//! compares every engine with libpcap's `bpf_filter` on generated packets cut at every length
//! up to 80 bytes. sift-lower's own tests compare the set with the term-by-term lowering on
//! chains of thousands of terms, beyond what libpcap compiles in reasonable time.

use sift::Filter;
use sift_oracle::Oracle;
use sift_testgen::pools::{ipv4_text, IPV4_UNICAST, PORTS};
use sift_testgen::{generate_packets, Packet, Rng};

const SNAPLEN: u32 = 262_144;

/// Every packet cut at each length up to 80 bytes (where the headers are), and whole.
fn all_truncations(packets: &[Packet]) -> Vec<Packet> {
    let mut out = Vec::new();
    for p in packets {
        for cut in 0..=p.data.len().min(80) {
            out.push(Packet {
                data: p.data[..cut].to_vec(),
                wire_len: p.wire_len,
            });
        }
        out.push(p.clone());
    }
    out
}

/// A chain's primitive: its keyword with protocol and direction, and the values to draw from
/// (those the generated packets carry first, so that terms match).
fn primitive(rng: &mut Rng) -> (String, Vec<String>) {
    let dir = *rng.pick(&["", "src ", "dst ", "src or dst "]);
    match rng.index(3) {
        0 => {
            let proto = *rng.pick(&["", "ip ", "arp ", "rarp "]);
            let keyword = *rng.pick(&["host ", ""]);
            let values = IPV4_UNICAST
                .iter()
                .map(|a| ipv4_text(*a))
                .chain((0..100).map(|_| ipv4_text(rng.next_u32().to_be_bytes())))
                .collect();
            (format!("{proto}{dir}{keyword}"), values)
        }
        1 => {
            let proto = *rng.pick(&["", "ip ", "arp "]);
            let len = *rng.pick(&[8u32, 16, 20, 24, 30, 32]);
            let mask = if len == 32 {
                u32::MAX
            } else {
                !(u32::MAX >> len)
            };
            let values = IPV4_UNICAST
                .iter()
                .map(|a| u32::from_be_bytes(*a))
                .chain((0..100).map(|_| rng.next_u32()))
                .map(|v| v & mask)
                // A network of value 0 keeps a chain out of the set (see chain_sets.rs).
                .filter(|&v| v != 0)
                .map(|v| format!("{}/{len}", ipv4_text(v.to_be_bytes())))
                .collect();
            (format!("{proto}{dir}net "), values)
        }
        _ => {
            let proto = *rng.pick(&["", "tcp ", "udp ", "sctp "]);
            let values = PORTS
                .iter()
                .map(|p| p.to_string())
                .chain((0..100).map(|_| rng.u16().to_string()))
                .collect();
            (format!("{proto}{dir}port "), values)
        }
    }
}

#[test]
fn chains_of_one_primitive_agree_with_libpcap() {
    let mut rng = Rng::new(31);
    let (mut compared, mut refused) = (0, 0);
    for round in 0..300 {
        let linktype = *rng.pick(&[1u32, 101, 113, 228]);
        let (prefix, mut values) = primitive(&mut rng);
        values.sort();
        values.dedup();
        let n = 32 + rng.index(49);
        // Mostly distinct values, with a repeat now and then.
        let mut chosen: Vec<&str> = Vec::with_capacity(n);
        while chosen.len() < n {
            let v = rng.pick(&values).as_str();
            if !chosen.contains(&v) || rng.chance(1, 10) {
                chosen.push(v);
            }
        }
        let terms: Vec<String> = chosen.iter().map(|v| format!("{prefix}{v}")).collect();
        // The chain, or its negation in either spelling.
        let chain = match rng.index(3) {
            0 => terms.join(" or "),
            1 => format!("not ({})", terms.join(" or ")),
            _ => format!("not {}", terms.join(" and not ")),
        };
        let oracle = Oracle::new(linktype, SNAPLEN).expect("libpcap");
        let prog = match oracle.compile(&chain, true, 0) {
            Ok(prog) => Some(prog),
            // libpcap refuses a filter its optimizer reduces to `ret 0` (`rarp` on a link type
            // that cannot carry it); sift compiles it, and it must reject every packet.
            Err(e) if e.message().contains("rejects all packets") => None,
            Err(e) => {
                assert!(
                    Filter::compile(&chain, linktype, SNAPLEN).is_err(),
                    "libpcap refuses `{chain}` ({}), sift accepts it",
                    e.message()
                );
                refused += 1;
                continue;
            }
        };
        let f = Filter::compile(&chain, linktype, SNAPLEN)
            .unwrap_or_else(|e| panic!("`{chain}`: {}", e.render(&chain)));
        // Lowered as a set: a few blocks (one switch per field read), where the chain
        // lowered term by term keeps blocks per term (four per `host` term, say).
        assert!(f.ir().blocks.len() < 32, "`{chain}` lowered term by term");
        assert!(
            f.optimized_ir().first_call().is_none(),
            "`{chain}` calls the coprocessor"
        );
        let cbpf = sift_bpf::compile(f.optimized_ir()).expect("classic BPF");
        for p in all_truncations(&generate_packets(linktype, round, 40)) {
            let theirs = prog
                .as_ref()
                .is_some_and(|prog| prog.run(&p.data, p.wire_len) != 0);
            let ours = f.run(&p.data, p.wire_len);
            let reference = f.run_reference(&p.data, p.wire_len);
            let classic = sift_bpf::interp::run(&cbpf, &p.data, p.wire_len);
            assert!(
                ours == reference && ours == classic,
                "engines disagree on `{chain}` for {:02x?}",
                p.data
            );
            assert_eq!(
                ours != 0,
                theirs,
                "`{chain}` on link type {linktype}: sift {ours}, libpcap {theirs} on {:02x?}",
                p.data
            );
        }
        compared += 1;
    }
    eprintln!("{compared} chains compared with libpcap, {refused} refused by both");
    assert!(compared >= 250, "only {compared} chains compared");
}
