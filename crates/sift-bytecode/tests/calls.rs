//! Coprocessor calls end to end: random IR functions with `contains` and `member` calls
//! (`common/random_calls.rs`), as generated and after sift-opt, compiled to bytecode and run by
//! the interpreter against `sift_ir::Interpreter` on random packets and every truncation of
//! them; each program also survives the binary and text forms. Plus the verifier's and the
//! assembler's errors for calls and tables.

mod common;

#[path = "common/random_calls.rs"]
mod random_calls;

use sift_bytecode::{
    assemble, compile, decode, verify, AsmErrorKind, Cache, DecodeErrorKind, Insn, Key, Program,
    Reg, ViolationKind,
};
use sift_testgen::Rng;

#[test]
fn random_functions_with_calls_agree_with_the_ir_interpreter() {
    let mut rng = Rng::new(0xca11);
    let (mut runs, mut accepted, mut spilled, mut calls) = (0usize, 0usize, 0usize, 0usize);
    let mut wide_in_temps = 0;
    let mut ir_cache = sift_ir::Cache::new();
    let mut cache = Cache::new();
    for case in 0..1500 {
        let mut f = random_calls::function(&mut rng);
        sift_ir::verify(&f).unwrap_or_else(|e| panic!("case {case}: generator: {e}\n{f}"));
        if case % 2 == 1 {
            sift::sift_opt::optimize(&mut f);
        }
        let reference = sift_ir::Interpreter::new(f.clone()).unwrap();
        let program = compile(&f).unwrap_or_else(|e| panic!("case {case}: {e}\n{f}"));
        let p = program.program();
        calls += p.code.iter().filter(|i| i.is_call()).count();
        // 128-bit keys with constant or spilled words go through the extra temporaries.
        wide_in_temps += p
            .code
            .iter()
            .filter(|i| matches!(i, Insn::Member { key: Key::W128(k), .. } if k.contains(&Reg(12))))
            .count();
        if p.scratch_words > 0 {
            spilled += 1;
        }
        assert_eq!(&decode(&program.encode()).unwrap(), p, "case {case}");
        assert_eq!(&assemble(&program.to_string()).unwrap(), p, "case {case}");
        for _ in 0..8 {
            let packet = random_calls::packet(&mut rng);
            for n in (0..=packet.len()).rev().step_by(3) {
                let s = &packet[..n];
                let wire = packet.len() as u32;
                let want = reference.run(&mut ir_cache, s, wire);
                let got = program.run(&mut cache, s, wire);
                assert_eq!(got, want, "case {case}: packet {s:02x?}\n{f}\n{program}");
                runs += 1;
                accepted += usize::from(got != 0);
            }
        }
    }
    eprintln!(
        "{runs} runs, {accepted} accepted, {calls} calls ({wide_in_temps} with four key \
         temporaries), {spilled} programs spill"
    );
    assert!(wide_in_temps > 10);
    assert!(
        accepted > runs / 10 && accepted < runs * 9 / 10,
        "{accepted} of {runs}"
    );
    assert!(spilled > 50, "{spilled} programs spill");
}

fn violations(text: &str) -> Vec<(Option<usize>, ViolationKind)> {
    let p = assemble(text).unwrap_or_else(|e| panic!("{e}"));
    verify(p)
        .unwrap_err()
        .violations
        .into_iter()
        .map(|v| (v.index, v.kind))
        .collect()
}

#[test]
fn verifier_checks_calls() {
    let tables = ".pattern p0 = \"ab\"\n.pattern p1\n.set s0 w32 = 1\n.set s1 w128 = 2\n";
    let v = violations(&format!(
        "{tables} mov r0, 0\n contains r1, p0.1, r0\n contains r1, p1.0, r0\n contains r1, p2.0, r0\n \
         member r1, s0, r0, r0, r0, r0\n member r1, s1, r0\n member r1, s2, r0\n \
         contains r1, p0.0, r7\n member r16, s0, r0\n ret r1\n"
    ));
    assert_eq!(
        v,
        vec![
            (
                Some(1),
                ViolationKind::MissingPattern { set: 0, pattern: 1 }
            ),
            (
                Some(2),
                ViolationKind::MissingPattern { set: 1, pattern: 0 }
            ),
            (Some(3), ViolationKind::MissingPatternSet(2)),
            (
                Some(4),
                ViolationKind::KeyWidth {
                    set: 0,
                    expected: 1,
                    found: 4
                }
            ),
            (
                Some(5),
                ViolationKind::KeyWidth {
                    set: 1,
                    expected: 4,
                    found: 1
                }
            ),
            (Some(6), ViolationKind::MissingValueSet(2)),
            (Some(7), ViolationKind::UndefinedRegister(Reg(7))),
            (Some(8), ViolationKind::RegisterOutOfRange(Reg(16))),
        ]
    );
    // Calls without any tables.
    let v = violations(" mov r0, 0\n member r0, s0, r0\n ret r0\n");
    assert_eq!(v, vec![(Some(1), ViolationKind::MissingValueSet(0))]);
    // A call's result is defined afterwards; a 128-bit key reads all four registers.
    let v = violations(".set s0 w128 = 2\n mov r0, 0\n member r1, s0, r0, r0, r2, r0\n ret r1\n");
    assert_eq!(v, vec![(Some(1), ViolationKind::UndefinedRegister(Reg(2)))]);
    let ok = ".set s0 w128 = 2\n mov r0, 0\n mov r1, 2\n member r1, s0, r0, r0, r0, r1\n ret r1\n";
    let p = verify(assemble(ok).unwrap()).unwrap();
    assert_eq!(p.run(&mut Cache::new(), &[], 0), 1);
    assert!(p.has_calls() && p.coprocessors().is_some());
}

#[test]
fn text_form_of_tables_round_trips() {
    let text = "\
.scratch 1
.pattern p0 = \"GET \"
.pattern p0 = nocase \"host:\\x3b\\x22\\x5c\\x00\\xff\"
.pattern p0 = regex \"^HTTP/1\\x5c.[01]\"
.pattern p1
.pattern p2 = \"x\"
.set s0 w32 = 0x50, 0x1f40-0x1fa4
.set s1 w128 = 0x20010db8000000000000000000000000-0x20010db8ffffffffffffffffffffffff
.set s2 w32 =
    ld.b r0, [0]
    contains r1, p0.2, r0
    member r2, s1, r0, r1, r0, r1
    member r3, s0, r2
    ret r3
";
    let p = assemble(text).unwrap();
    assert_eq!(p.to_string(), text);
    assert_eq!(p.patterns.len(), 3);
    assert_eq!(p.patterns[0].len(), 3);
    assert!(p.patterns[1].is_empty());
    assert_eq!(p.sets[1].ranges().len(), 1);
    assert!(p.sets[2].ranges().is_empty());
    assert_eq!(
        p.code[2],
        Insn::Member {
            dst: Reg(2),
            set: 1,
            key: Key::W128([Reg(0), Reg(1), Reg(0), Reg(1)])
        }
    );
    let bytes = sift_bytecode::encode(&p);
    assert_eq!(bytes[4], 2, "coprocessors: version 2");
    assert_eq!(decode(&bytes).unwrap(), p);
    // The IR's text for the same tables reads back to the same sets.
    let ir = sift_ir::parse_function(
        "pattern p0 = \"GET \"\nset s0 w32 = 0x50, 0x1f40-0x1fa4\nblock0:\n    ret 0\n",
    )
    .unwrap();
    assert_eq!(
        ir.patterns[0],
        p.patterns[0].patterns()[..1]
            .iter()
            .fold(sift_ir::PatternSet::new(), |mut s, x| {
                s.add(x.clone()).unwrap();
                s
            })
            .into()
    );
    assert_eq!(ir.sets[0], p.sets[0]);
}

#[test]
fn assembler_errors_for_tables_and_calls() {
    let kind = |text: &str| assemble(text).unwrap_err().kind;
    assert_eq!(
        kind(" ret 0\n.pattern p0 = \"a\"\n"),
        AsmErrorKind::MisplacedCoprocessorTable
    );
    assert_eq!(
        kind(".pattern p1 = \"a\"\n ret 0\n"),
        AsmErrorKind::TableOutOfOrder("p1".into())
    );
    assert_eq!(
        kind(".set s0 w32 = 1\n.set s0 w32 = 2\n ret 0\n"),
        AsmErrorKind::TableOutOfOrder("s0".into())
    );
    assert_eq!(
        kind(".pattern p0 = \"a\"\n.pattern p0 = \"a\"\n ret 0\n"),
        AsmErrorKind::DuplicatePattern
    );
    assert_eq!(
        kind(".pattern p0 = \"\"\n ret 0\n"),
        AsmErrorKind::InvalidPattern(sift_ir::PatternError::Empty)
    );
    assert!(matches!(
        kind(".pattern p0 = regex \"(\"\n ret 0\n"),
        AsmErrorKind::InvalidPattern(sift_ir::PatternError::Regex(_))
    ));
    assert!(matches!(
        kind(".set s0 w64 = 1\n ret 0\n"),
        AsmErrorKind::Expected(_)
    ));
    assert!(matches!(
        kind(".pattern p0 = \"a\\q\"\n ret 0\n"),
        AsmErrorKind::Expected(_)
    ));
    assert!(matches!(
        kind(" contains r0, p0, r1\n ret 0\n"),
        AsmErrorKind::Expected(_)
    ));
    assert_eq!(
        kind(" member r0, s0, r1, r2\n ret 0\n"),
        AsmErrorKind::OperandCount {
            expected: 6,
            found: 4
        }
    );
}

#[test]
fn decoder_refuses_bad_tables() {
    let base = assemble(".pattern p0 = \"ab\"\n.pattern p0 = \"cd\"\n.set s0 w32 = 1-2, 5\n mov r0, 0\n member r0, s0, r0\n ret r0\n").unwrap();
    let bytes = sift_bytecode::encode(&base);
    // The second pattern made equal to the first.
    let at = bytes.windows(2).rposition(|w| w == b"cd").unwrap();
    let mut dup = bytes.clone();
    dup[at..at + 2].copy_from_slice(b"ab");
    assert!(matches!(
        decode(&dup).unwrap_err().kind,
        DecodeErrorKind::DuplicatePattern { set: 0, pattern: 1 }
    ));
    // An empty pattern: the length of the first pattern set to zero (and its bytes dropped).
    let mut kind_byte = bytes.clone();
    let first = bytes.windows(2).position(|w| w == b"ab").unwrap();
    kind_byte[first - 5] = 7;
    assert!(matches!(
        decode(&kind_byte).unwrap_err().kind,
        DecodeErrorKind::UnknownPatternKind(7)
    ));
    // Ranges out of order: swap the two ranges' bytes (1-2 and 5-5).
    let ranges_at = bytes.len() - 16;
    let mut unsorted = bytes.clone();
    let (a, b) = unsorted[ranges_at..].split_at_mut(8);
    a.swap_with_slice(b);
    assert_eq!(
        decode(&unsorted).unwrap_err().kind,
        DecodeErrorKind::NonCanonicalSet(0)
    );
    // Version 1 has no calls.
    let mut v1 = bytes.clone();
    v1[4] = 1;
    assert!(decode(&v1).is_err());
    assert!(decode(&bytes).is_ok());
    let _ = Program::default();
}
