//! Differential tests of the classic BPF tools against libpcap 1.10 itself: disassembly against
//! `bpf_image`, the validator against `bpf_validate`, the interpreter and the lifted IR against
//! `bpf_filter`, on the programs libpcap compiles for the shared and random expressions and on
//! random programs.

mod common;

use std::sync::OnceLock;

use common::*;
use sift_bpf::{
    asm::assemble, disasm, interp, lift, numeric, validate, Dialect, Insn, Program, Violation,
};
use sift_ir::{Cache, Interpreter};
use sift_oracle::{Oracle, DEFAULT_SNAPLEN};
use sift_testgen::Rng;

const LINKTYPES: [u32; 4] = [1, 101, 113, 276];

/// libpcap's programs (optimized and not) for the test expressions, compiled once for all the
/// tests of this file (compiling is the slow part, and libpcap serialises it).
fn libpcap_programs() -> &'static [(u32, String, bool, sift_oracle::Program)] {
    static PROGRAMS: OnceLock<Vec<(u32, String, bool, sift_oracle::Program)>> = OnceLock::new();
    PROGRAMS.get_or_init(|| {
        let mut out = Vec::new();
        let mut oracles = std::collections::HashMap::new();
        for (lt, e) in expressions(&LINKTYPES, 150, 0x5eed) {
            let o = oracles
                .entry(lt)
                .or_insert_with(|| Oracle::new(lt, DEFAULT_SNAPLEN).ok());
            let Some(o) = o else { continue };
            for optimize in [true, false] {
                if let Ok(p) = o.compile(&e, optimize, 0) {
                    out.push((lt, e.clone(), optimize, p));
                }
            }
        }
        out
    })
}

/// Calls `each` with the link type, the expression, whether optimized, and the program, for
/// every libpcap program. Returns the number of programs.
fn for_each_libpcap_program(mut each: impl FnMut(u32, &str, bool, &sift_oracle::Program)) -> usize {
    let programs = libpcap_programs();
    for (lt, e, optimize, p) in programs {
        each(*lt, e, *optimize, p);
    }
    programs.len()
}

#[test]
fn disassembly_is_byte_identical_and_round_trips() {
    let mut lines = 0;
    let n = for_each_libpcap_program(|_, e, optimize, p| {
        let prog = Program(from_c(p.instructions()));
        let ours = disasm::disassemble(&prog);
        let theirs = p.dump();
        assert_eq!(ours, theirs, "{e} (optimize={optimize})");
        lines += prog.len();
        // The text drops fields the opcode ignores (libpcap's optimizer leaves `k` in `tax`).
        let canonical = |p: &Program| p.insns().iter().map(|i| i.canonical()).collect::<Vec<_>>();
        assert_eq!(
            canonical(&assemble(&ours).unwrap()),
            canonical(&prog),
            "{e}: assembler round trip"
        );
        assert_eq!(numeric::parse_ddd(&numeric::to_ddd(&prog)).unwrap(), prog);
        assert_eq!(numeric::parse_dd(&numeric::to_dd(&prog)).unwrap(), prog);
    });
    eprintln!("disassembly: {n} libpcap programs, {lines} lines identical");
    assert!(n > 1000, "{n}");
}

#[test]
fn disassembly_of_random_instructions_matches_bpf_image() {
    let mut rng = Rng::new(7);
    let opcodes = valid_opcodes();
    for i in 0..100_000 {
        let code = if i % 4 == 0 {
            rng.u16()
        } else {
            *rng.pick(&opcodes)
        };
        let insn = Insn {
            code,
            jt: rng.byte(),
            jf: rng.byte(),
            k: if rng.chance(1, 3) {
                sift_bpf::code::SKF_AD_OFF + rng.below(80) as u32
            } else {
                rng.next_u32()
            },
        };
        let n = rng.below(5000) as usize;
        assert_eq!(
            disasm::image(insn, n),
            libpcap_image(insn, n),
            "{insn:?} at {n}"
        );
    }
}

#[test]
fn validator_agrees_with_bpf_validate_up_to_documented_differences() {
    let mut rng = Rng::new(11);
    let opcodes = valid_opcodes();
    let (mut both_ok, mut both_bad, mut stricter) = (0, 0, 0);
    for _ in 0..300_000 {
        let insns = random_insns(&mut rng, &opcodes);
        let theirs = libpcap_validate(&insns);
        match validate(&Program(insns.clone()), Dialect::Libpcap) {
            Ok(_) => {
                assert!(theirs, "sift accepts what libpcap refuses: {insns:?}");
                both_ok += 1;
            }
            Err(e) if theirs => {
                // Only the documented extra rules may refuse a program libpcap accepts: opcodes
                // bpf_filter cannot execute, and backward (wrapping) `ja`.
                for (i, v) in &e.violations {
                    let i = i.expect("per-instruction");
                    let documented = match v {
                        Violation::UnknownOpcode { .. } => true,
                        // libpcap only looks at the class of the last opcode.
                        Violation::NoFinalReturn => insns[i].code & 7 == 6,
                        Violation::JumpOutOfRange { target } => {
                            insns[i].code == 0x05 && *target >= 1 << 32
                        }
                        // Backward `ja`s other than protochain's loop.
                        Violation::BackwardJump { .. } => insns[i].code == 0x05,
                        _ => false,
                    };
                    assert!(documented, "{v} at {i} in {insns:?}");
                }
                stricter += 1;
            }
            Err(_) => both_bad += 1,
        }
    }
    eprintln!("validator: {both_ok} both accept, {both_bad} both refuse, {stricter} refused by sift only (documented rules)");
    assert!(both_ok > 10_000 && both_bad > 10_000);
}

#[test]
fn every_libpcap_program_validates() {
    let mut with_loops = 0;
    let n = for_each_libpcap_program(|_, e, _, p| {
        let insns = from_c(p.instructions());
        match validate(&Program(insns), Dialect::Libpcap) {
            // protochain's loop is the one backward jump libpcap emits, and sift recognises it.
            Ok(valid) => {
                assert_eq!(!valid.loops().is_empty(), p.has_backward_jumps(), "{e}");
                with_loops += usize::from(p.has_backward_jumps());
            }
            Err(err) => panic!("{e}: {err}"),
        }
    });
    eprintln!("validation: {n} libpcap programs, all valid, {with_loops} with protochain loops");
}

/// Packets for a link type: generated, truncated and mutated ones included.
fn packets(lt: u32, seed: u64) -> Vec<(Vec<u8>, u32)> {
    sift_testgen::generate_packets(lt, seed, 60)
        .into_iter()
        .map(|p| (p.data, p.wire_len))
        .collect()
}

#[test]
fn interpreter_and_lifted_ir_match_bpf_filter_on_libpcap_programs() {
    let mut pkts = std::collections::HashMap::new();
    let mut pairs = 0u64;
    let n = for_each_libpcap_program(|lt, e, optimize, p| {
        let insns = from_c(p.instructions());
        let valid = validate(&Program(insns), Dialect::Libpcap).expect("every libpcap program");
        let f = lift(&valid);
        sift_ir::verify(&f).unwrap_or_else(|err| panic!("{e}: {err}\n{f}"));
        let ir = Interpreter::new(f).unwrap();
        let mut cache = Cache::new();
        let packets = pkts.entry(lt).or_insert_with(|| packets(lt, 99));
        for (pkt, wire) in packets.iter() {
            // protochain's loop may never end in bpf_filter; sift rejects exactly those packets.
            let want = match p.run_bounded(pkt, *wire, 1 << 24) {
                Some(v) => v,
                None => {
                    assert!(interp::try_run(&valid, pkt, *wire).is_err(), "{e}");
                    0
                }
            };
            assert_eq!(
                interp::run(&valid, pkt, *wire),
                want,
                "{e} (opt={optimize}) interp"
            );
            assert_eq!(
                ir.run(&mut cache, pkt, *wire),
                want,
                "{e} (opt={optimize}) lifted"
            );
            pairs += 1;
        }
    });
    eprintln!("bpf_filter: {n} libpcap programs, {pairs} (program, packet) pairs agree");
    assert!(pairs > 50_000);
}

#[test]
fn interpreter_and_lifted_ir_match_bpf_filter_on_random_programs() {
    let mut rng = Rng::new(3);
    let opcodes = valid_opcodes();
    let mut pairs = 0;
    for round in 0..3_000 {
        let insns = random_valid_program(&mut rng, &opcodes);
        assert!(libpcap_validate(&insns), "{insns:?}");
        let valid = validate(&Program(insns.clone()), Dialect::Libpcap).unwrap();
        let f = lift(&valid);
        sift_ir::verify(&f).unwrap_or_else(|err| panic!("{err}\n{f}"));
        let ir = Interpreter::new(f).unwrap();
        let mut cache = Cache::new();
        for (pkt, wire) in random_packets(&mut rng, 40) {
            let want = libpcap_filter(&insns, &pkt, wire);
            let text = disasm::disassemble(&valid.to_program());
            assert_eq!(
                interp::run(&valid, &pkt, wire),
                want,
                "round {round}\n{text}{pkt:02x?}"
            );
            assert_eq!(
                ir.run(&mut cache, &pkt, wire),
                want,
                "round {round} lifted\n{text}{pkt:02x?}"
            );
            pairs += 1;
        }
    }
    eprintln!("random programs: {pairs} pairs agree");
}
