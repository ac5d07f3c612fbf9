#![no_main]

//! The first byte picks a link type, the rest is a pcap-filter expression. Whatever compiles
//! (lowering, the optimizer, bytecode, the JIT: `sift::Filter::compile`) must give the same
//! result on the JIT (`run`), the bytecode interpreter (`run_interpreted`) and the lowered IR's
//! reference interpreter (`run_reference`), on generated packets and truncations of them.
//! Nothing may panic, whatever the text.

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

const LINKTYPES: [u32; 6] = [1, 101, 113, 228, 229, 276];

fn packets(i: usize) -> &'static [sift_testgen::Packet] {
    static PACKETS: [OnceLock<Vec<sift_testgen::Packet>>; LINKTYPES.len()] =
        [const { OnceLock::new() }; LINKTYPES.len()];
    PACKETS[i].get_or_init(|| sift_testgen::generate_packets(LINKTYPES[i], 0xf022 + i as u64, 24))
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, text)) = data.split_first() else {
        return;
    };
    let Ok(expr) = std::str::from_utf8(text) else {
        return;
    };
    let i = usize::from(which) % LINKTYPES.len();
    let lt = LINKTYPES[i];
    let Ok(filter) = sift::Filter::compile(expr, lt, 262144) else {
        return;
    };
    for p in packets(i) {
        let n = p.data.len();
        for cut in [n, 0, 14, 20, 34, n / 2, n.saturating_sub(1)] {
            let pkt = &p.data[..cut.min(n)];
            let reference = filter.run_reference(pkt, p.wire_len);
            let jit = filter.run(pkt, p.wire_len);
            let interpreted = filter.run_interpreted(pkt, p.wire_len);
            assert!(
                reference == jit && reference == interpreted,
                "linktype {lt}, {expr:?}: reference {reference}, jit {jit}, bytecode \
                 {interpreted} on packet {} (wire {})\noptimized IR:\n{}",
                hex(pkt),
                p.wire_len,
                filter.optimized_ir()
            );
        }
    }
});
