//! What the filters of `tests/data/libpcap_unset_x.txt` have in common: libpcap's optimized
//! program reads its index register X on a path where no instruction set it, so the indexed
//! load sees X's initial value 0 instead of the header length the filter means. libpcap's code
//! generator never does that (its unoptimized program loads X before every use); its optimizer
//! deletes the `ldx` (the dead-store pass, with use-def data from the start of the pass, or
//! `opt_root`, which drops the statements of the undecided blocks it skips) after a later block
//! dropped its own `ldx` of the same value because X was meant to hold it already.
//!
//! sift agrees with libpcap on them (`soak_findings_agree`); this test keeps the list honest:
//! every line in it must be this libpcap bug.

use sift_oracle::{BpfInsn, Oracle, DEFAULT_SNAPLEN};

const BPF_LD: u16 = 0x00;
const BPF_LDX: u16 = 0x01;
const BPF_STX: u16 = 0x03;
const BPF_ALU: u16 = 0x04;
const BPF_JMP: u16 = 0x05;
const BPF_RET: u16 = 0x06;
const BPF_MISC: u16 = 0x07;
const BPF_IND: u16 = 0x40;
const BPF_X: u16 = 0x08;
const BPF_JA: u16 = 0x00;
const BPF_TAX: u16 = 0x00;
const BPF_TXA: u16 = 0x80;

/// Whether `insn` reads X.
fn reads_x(insn: &BpfInsn) -> bool {
    let code = insn.code;
    match code & 0x07 {
        BPF_LD => code & 0xe0 == BPF_IND,
        BPF_STX => true,
        BPF_ALU => code & BPF_X != 0,
        BPF_JMP => code & 0xf0 != BPF_JA && code & BPF_X != 0,
        BPF_RET => code & 0x18 == BPF_X,
        BPF_MISC => code & 0xf8 == BPF_TXA,
        _ => false,
    }
}

/// Whether `insn` sets X.
fn sets_x(insn: &BpfInsn) -> bool {
    match insn.code & 0x07 {
        BPF_LDX => true,
        BPF_MISC => insn.code & 0xf8 == BPF_TAX,
        _ => false,
    }
}

/// The instructions that read X on some path from the start on which nothing set it. libpcap's
/// programs only jump forward, so one pass in order sees every predecessor first.
fn unset_x_reads(insns: &[BpfInsn]) -> Vec<usize> {
    let n = insns.len();
    // Whether some path reaches the instruction with X never set.
    let mut unset = vec![false; n];
    if n > 0 {
        unset[0] = true;
    }
    let mut reads = Vec::new();
    for (pc, insn) in insns.iter().enumerate() {
        if !unset[pc] {
            continue;
        }
        if reads_x(insn) {
            reads.push(pc);
        }
        if sets_x(insn) {
            continue;
        }
        let next: Vec<usize> = match insn.code & 0x07 {
            BPF_RET => vec![],
            BPF_JMP if insn.code & 0xf0 == BPF_JA => vec![pc + 1 + insn.k as usize],
            BPF_JMP => vec![pc + 1 + insn.jt as usize, pc + 1 + insn.jf as usize],
            _ => vec![pc + 1],
        };
        for s in next {
            assert!(s < n, "jump past the end at {pc}");
            unset[s] = true;
        }
    }
    reads
}

/// The `LINKTYPE SEED EXPRESSION` lines of a findings list.
fn findings(list: &str) -> impl Iterator<Item = (u32, &str)> {
    list.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|line| {
            let mut fields = line.splitn(3, ' ');
            let (Some(lt), Some(_seed), Some(expr)) = (fields.next(), fields.next(), fields.next())
            else {
                panic!("bad line {line:?}")
            };
            (lt.parse().unwrap(), expr)
        })
}

#[test]
fn listed_filters_are_libpcaps_unset_index_register() {
    let mut count = 0;
    for (lt, expr) in findings(include_str!("data/libpcap_unset_x.txt")) {
        let oracle = Oracle::new(lt, DEFAULT_SNAPLEN).unwrap();
        let optimized = oracle.compile(expr, true, 0).unwrap();
        let reads = unset_x_reads(optimized.instructions());
        assert!(
            !reads.is_empty(),
            "`{expr}` (link type {lt}): libpcap's optimized program sets X before every use, \
             so this is not the X-register bug:\n{}",
            optimized.dump()
        );
        let unoptimized = oracle.compile(expr, false, 0).unwrap();
        assert_eq!(
            unset_x_reads(unoptimized.instructions()),
            Vec::<usize>::new(),
            "`{expr}`: libpcap's code generator itself reads an unset X"
        );
        count += 1;
    }
    assert!(count > 0, "no filters were checked");
}

/// The check itself: `ldxb 4*([0]&0xf); ldh [x+2]` sets X first, `ldh [x+2]` alone does not,
/// and X set on only one side of a branch leaves the join unset.
#[test]
fn unset_reads_follow_every_path() {
    let insn = |code: u16, jt: u8, jf: u8, k: u32| BpfInsn { code, jt, jf, k };
    let ldxb_msh = insn(0xb1, 0, 0, 0);
    let ldh_ind = insn(0x48, 0, 0, 2);
    let ret = insn(0x06, 0, 0, 0);
    assert!(unset_x_reads(&[ldxb_msh, ldh_ind, ret]).is_empty());
    assert_eq!(unset_x_reads(&[ldh_ind, ret]), vec![0]);
    // jeq #0 jt 0 jf 1: the true edge sets X, the false edge skips the ldx.
    let jeq = insn(0x15, 0, 1, 0);
    assert_eq!(unset_x_reads(&[jeq, ldxb_msh, ldh_ind, ret]), vec![2]);
    // tax sets X; txa reads it.
    assert!(unset_x_reads(&[insn(0x07, 0, 0, 0), insn(0x87, 0, 0, 0), ret]).is_empty());
    assert_eq!(unset_x_reads(&[insn(0x87, 0, 0, 0), ret]), vec![0]);
}
