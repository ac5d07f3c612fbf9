//! The verifier rejects hand-written bad programs, naming every violation and its instruction.

use sift_bytecode::{assemble, verify, Program, Reg, Violation, ViolationKind as K};

fn violations(text: &str) -> Vec<(Option<usize>, K)> {
    let p = assemble(text).unwrap_or_else(|e| panic!("{e}"));
    violations_of(p)
}

fn violations_of(p: Program) -> Vec<(Option<usize>, K)> {
    match verify(p) {
        Ok(_) => Vec::new(),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            e.violations
                .into_iter()
                .map(|Violation { index, kind }| (index, kind))
                .collect()
        }
    }
}

#[test]
fn every_violation_with_its_index() {
    let got = violations(
        "\
.scratch 2
    mov r1, 5               ; 0
    add r2, r1, r3          ; 1: r3 never written
    ld.b r20, [0]           ; 2: no such register
    ldm r0, m4              ; 3: slot not declared
start:
    jeq r1, 0, start, L6    ; 4: backward
    jmp @99                 ; 5: unreachable, out of bounds
L6:
    switch r1, #3, L7       ; 6: no table 3
L7:
    ldm r0, m1              ; 7: m1 never written
    stm m0, r1              ; 8
    ld.b r0, [0]            ; 9: falls off the end
",
    );
    assert_eq!(
        got,
        vec![
            (Some(1), K::UndefinedRegister(Reg(3))),
            (Some(2), K::RegisterOutOfRange(Reg(20))),
            (Some(3), K::ScratchOutOfRange(4)),
            (Some(4), K::BackwardTarget(4)),
            (Some(5), K::TargetOutOfBounds(99)),
            (Some(6), K::MissingTable(3)),
            (Some(7), K::UndefinedScratch(1)),
            (Some(9), K::FallsOffEnd),
        ]
    );
}

#[test]
fn a_register_written_on_one_path_only() {
    let got = violations(
        "\
    ld.b r0, [0]
    jeq r0, 1, set, use
set:
    mov r1, 7
use:
    ret r1
",
    );
    assert_eq!(got, vec![(Some(3), K::UndefinedRegister(Reg(1)))]);
    // Written on both paths: accepted.
    assert!(violations(
        "\
    ld.b r0, [0]
    jeq r0, 1, a, b
a:
    mov r1, 7
    jmp use
b:
    ld.h r1, [r0+2]
use:
    ret r1
"
    )
    .is_empty());
}

#[test]
fn table_violations() {
    let got = violations(
        "\
    ld.b r0, [0]
L1:
    switch r0, T0, L3
    switch r0, T1, L3
L3:
    ret 0
.table T0
    5 -> L3
    5 -> L3
    1 -> L1
.table T1
    2 -> @40
",
    );
    assert_eq!(
        got,
        vec![
            (None, K::TableKeysNotAscending { table: 0, entry: 1 }),
            (None, K::TableKeysNotAscending { table: 0, entry: 2 }),
            (None, K::TableTargetOutOfBounds { table: 1, entry: 0 }),
            (Some(1), K::TableTargetBackward { table: 0, entry: 2 }),
        ]
    );
}

#[test]
fn limits() {
    assert_eq!(violations_of(Program::default()), vec![(None, K::Empty)]);
    assert_eq!(
        violations(".scratch 300\n ret 0\n"),
        vec![(None, K::ScratchTooLarge(300))]
    );
    let mut big = assemble("ret 0\n").unwrap();
    big.code = vec![big.code[0]; sift_bytecode::insn::MAX_INSNS + 1];
    assert_eq!(
        violations_of(big),
        vec![(
            None,
            K::TooManyInstructions(sift_bytecode::insn::MAX_INSNS + 1)
        )]
    );
}

#[test]
fn division_by_zero_is_defined_not_rejected() {
    let p = verify(assemble("ld.b r0, [0]\n div r1, r0, 0\n ret r1\n").unwrap()).unwrap();
    assert_eq!(p.run(&mut sift_bytecode::Cache::new(), &[9], 1), 0);
}
