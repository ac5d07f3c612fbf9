#![no_main]

//! Arbitrary bytes: the first byte splits the input into a packet and an encoded program (given
//! a valid header, so the decoder looks at the code). Whatever decodes and verifies is compiled
//! by the JIT, and on every prefix of the packet the JIT's single and batch entries must return
//! exactly what the interpreter returns. Each prefix is placed so that it ends at a PROT_NONE
//! page: sanitizers do not instrument generated code, the guard page catches its over-reads.
//! Each program is compiled three ways: the default (branch-free small programs with early
//! exits), branch-free without early exits, and branching.

#[path = "../../tests/common/guarded_page.rs"]
mod guarded_page;

use guarded_page::GuardedPage;
use libfuzzer_sys::fuzz_target;
use sift_bytecode::{decode, verify, Cache};
use sift_jit::{JitFilter, Options, PacketRef};

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let split = usize::from(split).min(rest.len());
    let (packet, program) = rest.split_at(split);
    let mut bytes = b"SFBC\x01\x00\x04\x00".to_vec();
    bytes.extend_from_slice(program);
    let Ok(p) = decode(&bytes) else { return };
    let Ok(v) = verify(p) else { return };
    let modes = [
        Options::default(),
        Options {
            early_exits: false,
            ..Options::default()
        },
        Options {
            branchless: false,
            ..Options::default()
        },
        Options {
            long_packet_path: false,
            ..Options::default()
        },
    ];
    let mut cache = Cache::new();
    let mut guard = GuardedPage::new();
    let wire = packet.len() as u32;
    for options in &modes {
        let jit = JitFilter::compile_with(&v, options).expect("every verified program compiles");
        for n in 0..=packet.len() {
            let prefix = guard.place(&packet[..n]);
            let want = v.run(&mut cache, prefix, wire);
            assert_eq!(jit.run(prefix, wire), want, "caplen {n} {options:?}\n{v}");
            let mut out = [u32::MAX];
            jit.run_refs(&[PacketRef::new(prefix, wire)], &mut out);
            assert_eq!(out[0], want, "batch, caplen {n} {options:?}\n{v}");
        }
    }
});
