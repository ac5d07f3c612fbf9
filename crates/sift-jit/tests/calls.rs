//! Coprocessor calls in native code: random IR functions with `contains` and `member` calls
//! (sift-bytecode's `tests/common/random_calls.rs`), as generated and after sift-opt, run on
//! random packets by `sift_ir::Interpreter`, the bytecode interpreter and the JIT (single entry
//! with each packet against a guard page, and whole batches, whose loop must start a new packet
//! in the memo each time), under every option set; all must agree. Plus filters shared between
//! threads, each thread with its own memo.

mod common;

#[path = "../../sift-bytecode/tests/common/random_calls.rs"]
mod random_calls;

use common::{option_sets, GuardedPage};
use sift_bytecode::{compile, Cache};
use sift_jit::{JitFilter, PacketRef};
use sift_testgen::Rng;

#[test]
fn jit_equals_both_interpreters_on_random_functions_with_calls() {
    if !sift_jit::supported() {
        return;
    }
    let mut rng = Rng::new(0x0c0_9a11);
    let options = option_sets();
    let mut guard = GuardedPage::new();
    let mut ir_cache = sift_ir::Cache::new();
    let mut cache = Cache::new();
    let (mut runs, mut accepted) = (0usize, 0usize);
    for case in 0..600 {
        let mut f = random_calls::function(&mut rng);
        if case % 2 == 1 {
            sift_opt::optimize(&mut f);
        }
        let reference = sift_ir::Interpreter::new(f.clone()).unwrap();
        let program = compile(&f).unwrap_or_else(|e| panic!("case {case}: {e}\n{f}"));
        let jit = JitFilter::compile_with(&program, &options[case % options.len()])
            .unwrap_or_else(|e| panic!("case {case}: {e}\n{program}"));
        let mut packets: Vec<Vec<u8>> = (0..12).map(|_| random_calls::packet(&mut rng)).collect();
        // Truncated copies: the same bytes, fewer of them (a memo kept from the longer packet
        // would find matches past the end).
        for i in 0..6 {
            let p = packets[i].clone();
            packets.push(p[..rng.index(p.len() + 1)].to_vec());
        }
        let wires: Vec<u32> = packets.iter().map(|p| p.len() as u32 + 4).collect();
        let mut want = Vec::new();
        for (p, &wire) in packets.iter().zip(&wires) {
            let w = reference.run(&mut ir_cache, p, wire);
            let interpreted = program.run(&mut cache, p, wire);
            let native = jit.run(guard.place(p), wire);
            assert!(
                interpreted == w && native == w,
                "case {case}: IR {w}, bytecode {interpreted}, jit {native} on {p:02x?}\n{f}\n{program}"
            );
            want.push(w);
            accepted += usize::from(w != 0);
            runs += 1;
        }
        let slices: Vec<&[u8]> = packets.iter().map(Vec::as_slice).collect();
        let mut out = vec![u32::MAX; packets.len()];
        jit.run_batch(&slices, &wires, &mut out);
        assert_eq!(out, want, "case {case}: batch\n{program}");
        let refs: Vec<PacketRef<'_>> = slices
            .iter()
            .zip(&wires)
            .map(|(p, &w)| PacketRef::new(p, w))
            .collect();
        out.fill(u32::MAX);
        jit.run_refs(&refs, &mut out);
        assert_eq!(out, want, "case {case}: refs\n{program}");
    }
    eprintln!("{runs} packets through IR, bytecode and JIT (plus batches), {accepted} accepted");
    assert!(accepted > runs / 10 && accepted < runs * 9 / 10);
}

#[test]
fn filters_with_calls_are_shared_between_threads() {
    if !sift_jit::supported() {
        return;
    }
    let text = "\
.pattern p0 = nocase \"admin\"
.set s0 w32 = 0x50, 0x1f40-0x1fa4
    ld.h r0, [0]
    member r1, s0, r0
    mov r2, 2
    contains r3, p0.0, r2
    add r1, r1, r3
    ret r1
";
    let program = sift_bytecode::verify(sift_bytecode::assemble(text).unwrap()).unwrap();
    let jit = std::sync::Arc::new(JitFilter::compile(&program).unwrap());
    let handles: Vec<_> = (0..4u8)
        .map(|t| {
            let jit = jit.clone();
            std::thread::spawn(move || {
                let mut total = 0;
                for i in 0..2000u32 {
                    let hit = (i + u32::from(t)) % 3 == 0;
                    let mut p = vec![0x00, 0x50, b'x', b'y'];
                    p.extend_from_slice(if hit { b"ADMIN" } else { b"ADMIX" });
                    let got = jit.run(&p, p.len() as u32);
                    assert_eq!(got, 1 + u32::from(hit));
                    total += got;
                }
                total
            })
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap() > 2000);
    }
}
