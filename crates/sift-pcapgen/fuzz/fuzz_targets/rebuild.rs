#![no_main]

//! A pcap-filter expression, lowered with libpcap's optimizer off (`Options::optimize = false`),
//! is rebuilt as libpcap's unoptimized classic BPF (`sift_pcapgen::libpcap_code`, then
//! `Graph::to_linear`). Nothing may panic; when the rebuild succeeds, the program must pass
//! `sift_bpf::validate` (libpcap dialect) and return what the IR it was rebuilt from returns
//! (`sift_ir::Interpreter` against `sift_bpf::interp::run`) on generated packets, truncations of
//! them, and packets from the input.
//!
//! Byte 0 picks the link type. Byte 1 picks where the expression comes from: `% 4 == 0`, the
//! text up to the first NUL byte (as sift-opt's `expression` target takes it); otherwise a
//! sift-testgen generator (whole language, focused, index register) seeded by the next 8 bytes.
//! The bytes after that are packets, each a length byte and that many bytes.

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sift_bpf::{Dialect, Program};
use sift_ir::{Cache, Interpreter};
use sift_testgen::Rng;

const LINKTYPES: [u32; 7] = [1, 101, 113, 0, 228, 276, 108];

fn packets(i: usize) -> &'static [sift_testgen::Packet] {
    static PACKETS: [OnceLock<Vec<sift_testgen::Packet>>; LINKTYPES.len()] =
        [const { OnceLock::new() }; LINKTYPES.len()];
    PACKETS[i].get_or_init(|| sift_testgen::generate_packets(LINKTYPES[i], 0x9c6e + i as u64, 24))
}

/// The expression and the bytes after it.
fn expression(kind: u8, linktype: u32, data: &[u8]) -> Option<(String, &[u8])> {
    if kind % 4 == 0 {
        let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
        let text = std::str::from_utf8(&data[..end]).ok()?;
        return Some((text.to_string(), data.get(end + 1..).unwrap_or_default()));
    }
    let (seed, rest) = data.split_at(data.len().min(8));
    let mut bytes = [0; 8];
    bytes[..seed.len()].copy_from_slice(seed);
    let seed = u64::from_le_bytes(bytes);
    let text = match kind % 4 {
        1 => sift_testgen::random_expression(&mut Rng::new(seed), linktype),
        2 => sift_testgen::random_focused_expression(&mut Rng::new(seed), 4, 6),
        _ => sift_testgen::random_index_expressions(seed, 1).remove(0),
    };
    Some((text, rest))
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fuzz_target!(|data: &[u8]| {
    let [which, kind, rest @ ..] = data else {
        return;
    };
    let i = usize::from(*which) % LINKTYPES.len();
    let lt = LINKTYPES[i];
    let Some((expr, mut rest)) = expression(*kind, lt, rest) else {
        return;
    };
    let Ok(ast) = sift_syntax::parse(&expr) else {
        return;
    };
    let opts = sift_lower::Options {
        optimize: false,
        ..sift_lower::Options::new(lt, 262_144)
    };
    let Ok(ir) = sift_lower::lower(ast.as_ref(), &opts) else {
        return;
    };
    let Ok(graph) = sift_pcapgen::libpcap_code(&ir) else {
        return;
    };
    let Some(linear) = graph.to_linear(0) else {
        return;
    };
    let prog = match sift_bpf::validate(&Program(linear), Dialect::Libpcap) {
        Ok(prog) => prog,
        Err(err) => panic!("linktype {lt}, {expr:?}: the rebuilt program is invalid: {err}"),
    };
    let mut cases: Vec<(&[u8], u32)> = Vec::new();
    for p in packets(i) {
        let n = p.data.len();
        for cut in [n, 0, 14, 20, 34, n / 2, n.saturating_sub(1)] {
            cases.push((&p.data[..cut.min(n)], p.wire_len));
        }
    }
    while let [len, tail @ ..] = rest {
        let (pkt, after) = tail.split_at(tail.len().min(usize::from(*len)));
        cases.push((pkt, pkt.len() as u32));
        rest = after;
    }
    let interp = Interpreter::new(ir).expect("lowered IR verifies");
    let mut cache = Cache::new();
    for (pkt, wire) in cases {
        let ir_verdict = interp.run(&mut cache, pkt, wire);
        let bpf_verdict = sift_bpf::interp::run(&prog, pkt, wire);
        assert_eq!(
            ir_verdict,
            bpf_verdict,
            "linktype {lt}, {expr:?} on packet {} (wire {wire})\nIR:\n{}\nrebuilt:\n{graph}",
            hex(pkt),
            interp.function()
        );
    }
});
