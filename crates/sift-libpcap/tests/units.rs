//! Hand-checked pieces: graph recovery and layout, a few optimizations worked out on paper,
//! errors for programs libpcap could not have produced, and the trace.

use sift_bpf::{code, Insn};
use sift_libpcap::{optimize, optimize_traced, rejects_all, relinearize, OptimizeError, Stage};

const LDH: u16 = code::LD | code::H | code::ABS;
const LD: u16 = code::LD | code::W | code::ABS;
const JEQ: u16 = code::JMP | code::JEQ | code::K;
const RET: u16 = code::RET | code::K;
const JA: u16 = code::JMP | code::JA;

fn s(c: u16, k: u32) -> Insn {
    Insn::stmt(c, k)
}

fn j(c: u16, k: u32, jt: u8, jf: u8) -> Insn {
    Insn::jump(c, k, jt, jf)
}

/// A branch whose false target is 302 instructions away: libpcap lays it out with a `ja`.
fn far_branch_program() -> Vec<Insn> {
    let mut p = vec![s(LD, 0), j(JEQ, 1, 1, 0), s(JA, 301)];
    p.extend((0..300).map(|i| s(LD, i)));
    p.push(s(RET, 1));
    p.push(s(RET, 0));
    p
}

#[test]
fn layout_round_trips_with_trampolines() {
    let p = far_branch_program();
    assert_eq!(relinearize(&p).unwrap(), p);
}

#[test]
fn layout_round_trips_shared_targets() {
    // ldh [12]; jeq #0x800 -> (ld [26]; jeq #1 -> ret #1 / ret #0) / ret #0
    let p = vec![
        s(LDH, 12),
        j(JEQ, 0x800, 0, 3),
        s(LD, 26),
        j(JEQ, 1, 0, 1),
        s(RET, 1),
        s(RET, 0),
    ];
    assert_eq!(relinearize(&p).unwrap(), p);
}

#[test]
fn return_block_statements_are_dropped() {
    // The 300 loads before `ret #1` are useless: the second loop empties return blocks, and
    // then the branch fits without a trampoline.
    let p = far_branch_program();
    assert_eq!(
        optimize(&p).unwrap(),
        vec![s(LD, 0), j(JEQ, 1, 0, 1), s(RET, 1), s(RET, 0)]
    );
}

#[test]
fn repeated_test_is_skipped_by_edge_dominators() {
    let p = vec![
        s(LDH, 12),
        j(JEQ, 0x800, 0, 3),
        s(LDH, 12),
        j(JEQ, 0x800, 0, 1),
        s(RET, 1),
        s(RET, 0),
    ];
    assert_eq!(
        optimize(&p).unwrap(),
        vec![s(LDH, 12), j(JEQ, 0x800, 0, 1), s(RET, 1), s(RET, 0)]
    );
}

#[test]
fn constant_accumulator_decides_the_branch() {
    let imm = code::LD | code::IMM;
    let taken = vec![s(imm, 5), j(JEQ, 5, 0, 1), s(RET, 1), s(RET, 0)];
    assert_eq!(optimize(&taken).unwrap(), vec![s(RET, 1)]);
    let never = vec![s(imm, 5), j(JEQ, 6, 0, 1), s(RET, 1), s(RET, 0)];
    let out = optimize(&never).unwrap();
    assert!(rejects_all(&out), "{out:?}");
}

#[test]
fn and_then_compare_with_zero_becomes_jset() {
    let and = code::ALU | code::AND | code::K;
    let p = vec![
        s(LDH, 20),
        s(and, 0x1fff),
        j(JEQ, 0, 0, 1),
        s(RET, 1),
        s(RET, 0),
    ];
    let jset = code::JMP | code::JSET | code::K;
    // The targets swap, and the layout follows: the false target (now `ret #1`) goes last.
    assert_eq!(
        optimize(&p).unwrap(),
        vec![s(LDH, 20), j(jset, 0x1fff, 0, 1), s(RET, 0), s(RET, 1)]
    );
}

#[test]
fn constant_division_by_zero_is_libpcaps_error() {
    let div = code::ALU | code::DIV | code::K;
    let p = vec![s(LD, 0), s(div, 0), j(JEQ, 1, 0, 1), s(RET, 1), s(RET, 0)];
    let err = optimize(&p).unwrap_err();
    assert_eq!(err, OptimizeError::DivisionByZero);
    assert_eq!(err.to_string(), "division by zero");
    assert!(err.is_libpcap_error());
}

#[test]
fn malformed_programs_are_errors() {
    assert_eq!(optimize(&[]), Err(OptimizeError::Empty));
    assert_eq!(
        optimize(&[s(0xffff, 0)]),
        Err(OptimizeError::UnknownOpcode {
            index: 0,
            code: 0xffff
        })
    );
    assert_eq!(
        optimize(&[j(JEQ, 1, 5, 0), s(RET, 0)]),
        Err(OptimizeError::JumpOutOfRange { index: 0 })
    );
    assert_eq!(
        optimize(&[s(LD, 0)]),
        Err(OptimizeError::FallsOffEnd { index: 0 })
    );
    // A "backward" trampoline: its offset wraps around.
    assert_eq!(
        optimize(&[
            s(LD, 0),
            j(JEQ, 1, 0, 1),
            s(RET, 1),
            s(JA, u32::MAX),
            s(RET, 0)
        ]),
        Err(OptimizeError::JumpOutOfRange { index: 3 })
    );
    assert_eq!(
        optimize(&[s(JA, 0), s(RET, 0)]),
        Err(OptimizeError::StrayJa { index: 0 })
    );
    assert_eq!(
        optimize(&[s(code::LD | code::MEM, 16), s(code::RET | code::A, 0)]),
        Err(OptimizeError::ScratchOutOfRange { index: 0, k: 16 })
    );
    // Straight-line code running into a branch target (Geneve's code, never optimized).
    assert_eq!(
        optimize(&[s(LD, 0), j(JEQ, 1, 0, 1), s(LD, 4), s(RET, 1), s(RET, 0)]),
        Err(OptimizeError::FallsThrough { index: 3 })
    );
}

#[test]
fn trace_reports_every_stage() {
    let p = far_branch_program();
    let mut stages = Vec::new();
    let mut last_program = Vec::new();
    let out = optimize_traced(&p, &mut |snap| {
        stages.push(snap.stage);
        last_program = snap.program.clone();
        assert!(snap.to_string().contains("B0"));
    })
    .unwrap();
    assert_eq!(stages.first(), Some(&Stage::Input));
    assert_eq!(stages.last(), Some(&Stage::Rooted));
    assert!(stages.contains(&Stage::Pass {
        do_stmts: true,
        pass: 0
    }));
    assert_eq!(last_program, out);
}
