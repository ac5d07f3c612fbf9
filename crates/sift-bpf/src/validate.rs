//! The classic BPF validator: the only way to obtain a [`ValidProgram`], which is the only thing
//! the interpreter, the lifter and the code generator's output are.
//!
//! # Rules
//!
//! Both [`Dialect`]s check, listing every violation with its instruction index:
//!
//! * the program has at least one instruction;
//! * every opcode is one that `bpf_filter` and the kernel execute (exact 16-bit match, see
//!   [`crate::Op`]);
//! * scratch indices (`ld M[k]`, `ldx M[k]`, `st`, `stx`) are below 16;
//! * `div #0` and `mod #0` are refused;
//! * every jump lands inside the program and goes forward (`ja` offsets are compared without
//!   wrapping), except, in [`Dialect::Libpcap`], the backward `ja`s that close a `protochain`
//!   loop (below);
//! * the last instruction is a `ret`.
//!
//! # Loops
//!
//! libpcap compiles `protochain` into a loop closed by a backward `ja` (see
//! [`crate::protochain`]). [`Dialect::Libpcap`] accepts a backward `ja` only when it closes a
//! loop of that exact shape (libpcap's or sift's form), and then checks that:
//!
//! * the loops do not overlap, and no jump from outside a loop lands inside it except at its
//!   first instruction ([`Violation::IntoLoop`]);
//! * after the loop, `X` and the loop's scratch word are written before they are read
//!   ([`Violation::LoopStateRead`]): the loop leaves only its result, the protocol in `A`.
//!
//! Everything else that jumps backward is refused ([`Violation::BackwardJump`]), whatever it
//! would compute: a program of this crate therefore always terminates within a bound the
//! interpreter knows (see [`crate::interp`]), and lifts to the IR
//! (one [`sift_ir::Inst::Protochain`] per loop). Arbitrary loops from untrusted input never run.
//!
//! [`Dialect::Linux`] adds what the kernel's `bpf_check_classic` checks on top:
//!
//! * at most 4096 instructions (`BPF_MAXINSNS`; libpcap's user-space `bpf_validate` has no
//!   limit, and `tcpdump -d` prints a program of any length);
//! * `lsh #k` / `rsh #k` need `k < 32`;
//! * an absolute load at an offset `>= SKF_AD_OFF` (0xfffff000) must name a known ancillary
//!   field (`SKF_AD_PROTOCOL` .. `SKF_AD_VLAN_TPID`);
//! * no scratch word is read (`ld M[k]`, `ldx M[k]`) on a path where it has not been stored
//!   (`check_load_and_stores`, same conservative flow: masks are intersected at jump targets and
//!   reset to "all valid" after a jump).
//!
//! # Where libpcap's `bpf_validate` differs (and why sift is stricter)
//!
//! libpcap 1.10's `bpf_validate` accepts everything [`Dialect::Libpcap`] accepts, plus:
//!
//! 1. opcodes it only checks by class and mode/operator: unknown bits (`code > 0xff`), loads with
//!    an impossible size or mode combination (`ld|msh`, `ldh #k`), `ret x`, any `MISC` opcode,
//!    `neg` with the `x` bit, jumps with the `x` bit on `ja`. `bpf_filter` calls `abort()` on
//!    all of them, so sift refuses them;
//! 2. backward `ja`: its check `from + k >= len` wraps around in 32 bits, so a `ja` with a
//!    "negative" offset passes (libpcap relies on it for `protochain`), and any loop, endless or
//!    not, is accepted. sift accepts only the `protochain` loop (above), like the kernel refuses
//!    all.
//!
//! Everything the kernel refuses beyond [`Dialect::Libpcap`] is listed above under
//! [`Dialect::Linux`]. The interpreter runs both dialects identically; for `lsh #k`/`rsh #k` with
//! `k >= 32` (libpcap dialect only) it shifts by `k % 32`, which is what `bpf_filter`'s
//! `A <<= pc->k` does on x86-64 and AArch64.

use std::fmt;

use crate::insn::{code, Insn, Op, Program, Src};
use crate::protochain::{recognize, ProtochainLoop};

/// Which rule set to validate against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Dialect {
    /// libpcap's `bpf_validate`, tightened where `bpf_filter` would abort or loop (see the module
    /// docs). What `tcpdump -ddd` output needs.
    #[default]
    Libpcap,
    /// The Linux kernel's `bpf_check_classic` (what `SO_ATTACH_FILTER` accepts).
    Linux,
}

/// One broken rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// The program has no instruction.
    Empty,
    /// Linux: more than 4096 instructions.
    TooLong { len: usize },
    /// Not an opcode classic BPF executes.
    UnknownOpcode { code: u16 },
    /// Scratch index 16 or more.
    ScratchIndex { k: u32 },
    /// `div #0` or `mod #0`.
    DivisionByZero,
    /// A jump whose target is past the end of the program (or behind the jump).
    JumpOutOfRange { target: u64 },
    /// The last instruction is not a `ret`.
    NoFinalReturn,
    /// Linux: shift by a constant of 32 or more.
    ShiftTooLarge { k: u32 },
    /// Linux: an absolute load in the ancillary range that names no ancillary field.
    UnknownAncillary { k: u32 },
    /// Linux: a scratch word read before it is stored on some path.
    UninitializedScratch { k: u32 },
    /// A backward `ja` to `target` that does not close a `protochain` loop (Linux: any
    /// backward `ja`).
    BackwardJump { target: usize },
    /// A jump into the middle of the `protochain` loop starting at `head`.
    IntoLoop { head: usize },
    /// `X` or the scratch word of the `protochain` loop starting at `head` is read after the
    /// loop before being written (the loop only leaves its result in `A`).
    LoopStateRead { head: usize },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Empty => f.write_str("empty program"),
            Violation::TooLong { len } => {
                write!(f, "{len} instructions, more than the limit of 4096")
            }
            Violation::UnknownOpcode { code } => write!(f, "unknown opcode {code:#x}"),
            Violation::ScratchIndex { k } => write!(f, "scratch index {k} is not below 16"),
            Violation::DivisionByZero => f.write_str("division by the constant 0"),
            Violation::JumpOutOfRange { target } => {
                write!(f, "jump to {target}, outside the program or backwards")
            }
            Violation::NoFinalReturn => f.write_str("the last instruction is not a return"),
            Violation::ShiftTooLarge { k } => write!(f, "shift by {k}, not below 32"),
            Violation::UnknownAncillary { k } => {
                write!(f, "load at {k:#x}: not a known ancillary field")
            }
            Violation::UninitializedScratch { k } => {
                write!(f, "M[{k}] may be read before it is stored")
            }
            Violation::BackwardJump { target } => write!(
                f,
                "backward jump to {target}: only libpcap's protochain loop may jump backward"
            ),
            Violation::IntoLoop { head } => {
                write!(
                    f,
                    "jump into the protochain loop at {head}, past its first instruction"
                )
            }
            Violation::LoopStateRead { head } => write!(
                f,
                "X or the scratch word of the protochain loop at {head} is read after the loop"
            ),
        }
    }
}

/// Every violation of a program, each with the index of its instruction (`None` for the whole
/// program).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationError {
    pub violations: Vec<(Option<usize>, Violation)>,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid classic BPF program:")?;
        for (i, v) in &self.violations {
            match i {
                Some(i) => write!(f, "\n  ({i:03}) {v}")?,
                None => write!(f, "\n  {v}")?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for ValidationError {}

/// A program that passed [`validate`]: every instruction decodes, every jump is in range and
/// forward except the backward `ja`s of its `protochain` loops, every path ends in a `ret`,
/// every scratch index is in range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidProgram {
    insns: Vec<Insn>,
    ops: Vec<Op>,
    dialect: Dialect,
    loops: Vec<ProtochainLoop>,
}

impl ValidProgram {
    /// The instructions.
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// The decoded opcode of every instruction.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The rules it was validated with.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Number of instructions (at least 1).
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    /// Always false: a valid program has a `ret`.
    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    /// A copy of the instructions as a plain program.
    pub fn to_program(&self) -> Program {
        Program(self.insns.clone())
    }

    /// The `protochain` loops, in program order (empty for the Linux dialect).
    pub fn loops(&self) -> &[ProtochainLoop] {
        &self.loops
    }

    /// The loop starting at instruction `i`, if one does.
    pub fn loop_at(&self, i: usize) -> Option<&ProtochainLoop> {
        self.loops.iter().find(|l| l.head == i)
    }

    /// The targets of the jump at `i` (`None` if `i` is not a jump): `(taken, not taken)`, equal
    /// for `ja` (behind `i` for the backward `ja` of a loop).
    pub fn jump_targets(&self, i: usize) -> Option<(usize, usize)> {
        let insn = self.insns[i];
        match self.ops[i] {
            Op::Ja => {
                let t = ja_target(i, insn.k) as usize;
                Some((t, t))
            }
            Op::Jmp(..) => Some((i + 1 + usize::from(insn.jt), i + 1 + usize::from(insn.jf))),
            _ => None,
        }
    }
}

/// Where the `ja` at `i` with offset `k` goes: `i + 1 + k`, with `k` taken as signed (as
/// `bpf_filter` does); negative when it leaves the program backwards.
fn ja_target(i: usize, k: u32) -> i64 {
    i as i64 + 1 + i64::from(k as i32)
}

/// Known `SKF_AD_*` offsets: `SKF_AD_OFF + 4 * i` for `i` in `0..16`.
fn is_known_ancillary(k: u32) -> bool {
    let off = k.wrapping_sub(code::SKF_AD_OFF);
    off < 64 && off.is_multiple_of(4)
}

/// Validates `prog` against `dialect`'s rules.
pub fn validate(prog: &Program, dialect: Dialect) -> Result<ValidProgram, ValidationError> {
    let insns = prog.insns();
    let len = insns.len();
    let mut violations: Vec<(Option<usize>, Violation)> = Vec::new();
    if len == 0 {
        violations.push((None, Violation::Empty));
    }
    if dialect == Dialect::Linux && len > code::MAXINSNS {
        violations.push((None, Violation::TooLong { len }));
    }
    let mut ops = Vec::with_capacity(len);
    // Backward `ja`s (libpcap dialect): (index, target).
    let mut backward: Vec<(usize, usize)> = Vec::new();
    for (i, &insn) in insns.iter().enumerate() {
        let mut bad = |v| violations.push((Some(i), v));
        let Some(op) = insn.decode() else {
            bad(Violation::UnknownOpcode { code: insn.code });
            continue;
        };
        ops.push(op);
        let in_range = |off: u64| {
            let target = i as u64 + 1 + off;
            (target < len as u64).then_some(()).ok_or(target)
        };
        match op {
            Op::LdMem | Op::LdxMem | Op::St | Op::Stx if insn.k >= code::MEMWORDS => {
                bad(Violation::ScratchIndex { k: insn.k })
            }
            Op::Alu(crate::AluOp::Div | crate::AluOp::Mod, Src::K) if insn.k == 0 => {
                bad(Violation::DivisionByZero)
            }
            Op::Alu(crate::AluOp::Lsh | crate::AluOp::Rsh, Src::K)
                if dialect == Dialect::Linux && insn.k >= 32 =>
            {
                bad(Violation::ShiftTooLarge { k: insn.k })
            }
            Op::LdAbs(_)
                if dialect == Dialect::Linux
                    && insn.k >= code::SKF_AD_OFF
                    && !is_known_ancillary(insn.k) =>
            {
                bad(Violation::UnknownAncillary { k: insn.k })
            }
            Op::Ja if dialect == Dialect::Libpcap && (insn.k as i32) < 0 => {
                match usize::try_from(ja_target(i, insn.k)) {
                    Ok(target) => backward.push((i, target)),
                    Err(_) => bad(Violation::JumpOutOfRange {
                        target: i as u64 + 1 + u64::from(insn.k),
                    }),
                }
            }
            Op::Ja => {
                if let Err(target) = in_range(u64::from(insn.k)) {
                    bad(Violation::JumpOutOfRange { target });
                }
            }
            Op::Jmp(..) => {
                for off in [insn.jt, insn.jf] {
                    if let Err(target) = in_range(u64::from(off)) {
                        bad(Violation::JumpOutOfRange { target });
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(last) = insns.last() {
        if !matches!(last.decode(), Some(Op::RetK | Op::RetA)) {
            violations.push((Some(len - 1), Violation::NoFinalReturn));
        }
    }
    let loops = find_loops(insns, &backward, &mut violations);
    // The flow checks only make sense on an otherwise valid program (targets in range).
    if violations.is_empty() && dialect == Dialect::Linux {
        check_scratch_flow(insns, &ops, &mut violations);
    }
    if violations.is_empty() && !loops.is_empty() {
        check_loop_entries(insns, &ops, &loops, &mut violations);
        if violations.is_empty() {
            check_loop_results_only(insns, &ops, &loops, &mut violations);
        }
    }
    violations.sort_by_key(|&(i, _)| i);
    if violations.is_empty() {
        Ok(ValidProgram {
            insns: insns.to_vec(),
            ops,
            dialect,
            loops,
        })
    } else {
        Err(ValidationError { violations })
    }
}

/// The loops that the backward jumps close, in program order; a backward jump that closes none
/// is a violation.
fn find_loops(
    insns: &[Insn],
    backward: &[(usize, usize)],
    out: &mut Vec<(Option<usize>, Violation)>,
) -> Vec<ProtochainLoop> {
    let mut loops: Vec<ProtochainLoop> = Vec::new();
    for &(j, target) in backward {
        match recognize(insns, target) {
            Some((found, closing)) if closing.contains(&j) => {
                if !loops.contains(&found) {
                    loops.push(found);
                }
            }
            _ => out.push((Some(j), Violation::BackwardJump { target })),
        }
    }
    loops.sort_by_key(|l| l.head);
    loops
}

/// Loops do not overlap, and every jump (or fall-through) into a loop from outside lands on its
/// first instruction.
fn check_loop_entries(
    insns: &[Insn],
    ops: &[Op],
    loops: &[ProtochainLoop],
    out: &mut Vec<(Option<usize>, Violation)>,
) {
    for w in loops.windows(2) {
        if w[1].head < w[0].end {
            out.push((Some(w[1].head), Violation::IntoLoop { head: w[0].head }));
        }
    }
    let inside = |i: usize| loops.iter().find(|l| l.contains(i) && l.head != i);
    for (i, (&insn, &op)) in insns.iter().zip(ops).enumerate() {
        if loops.iter().any(|l| l.contains(i)) {
            continue;
        }
        let targets: Vec<usize> = match op {
            Op::Ja => vec![ja_target(i, insn.k) as usize],
            Op::Jmp(..) => vec![i + 1 + usize::from(insn.jt), i + 1 + usize::from(insn.jf)],
            Op::RetK | Op::RetA => vec![],
            _ => vec![i + 1],
        };
        if let Some(l) = targets.into_iter().find_map(inside) {
            out.push((Some(i), Violation::IntoLoop { head: l.head }));
        }
    }
}

/// After every loop, `X` and the loop's scratch word are written before being read. One
/// backward liveness pass: with each loop taken as one instruction that reads `A` and `X` and
/// continues at its end, control only moves forward.
fn check_loop_results_only(
    insns: &[Insn],
    ops: &[Op],
    loops: &[ProtochainLoop],
    out: &mut Vec<(Option<usize>, Violation)>,
) {
    // Bit 16: X; bits 0..16: scratch words.
    const X: u32 = 1 << 16;
    let n = insns.len();
    let mut live = vec![0u32; n + 1];
    let mut i = n;
    while i > 0 {
        i -= 1;
        if let Some(l) = loops.iter().find(|l| l.contains(i)) {
            if l.head == i {
                let after = live[l.end];
                if after & (X | 1 << l.scratch) != 0 {
                    out.push((Some(l.end), Violation::LoopStateRead { head: l.head }));
                }
                // The walk reads X (and A); a step overwrites the scratch word, but a walk may
                // take none, so the word stays as live as after the loop.
                live[i] = after | X;
            }
            continue;
        }
        let (insn, op) = (insns[i], ops[i]);
        let next = |t: usize| live.get(t).copied().unwrap_or(0);
        let word = 1u32 << (insn.k & 15);
        live[i] = match op {
            Op::RetK | Op::RetA => 0,
            Op::Ja => next(ja_target(i, insn.k) as usize),
            Op::Jmp(_, src) => {
                let l = next(i + 1 + usize::from(insn.jt)) | next(i + 1 + usize::from(insn.jf));
                if src == Src::X {
                    l | X
                } else {
                    l
                }
            }
            Op::LdInd(_) | Op::Alu(_, Src::X) | Op::Txa => next(i + 1) | X,
            Op::LdxImm | Op::LdxLen | Op::LdxMsh => next(i + 1) & !X,
            Op::LdxMem => (next(i + 1) & !X) | word,
            Op::LdMem => next(i + 1) | word,
            Op::St => next(i + 1) & !word,
            Op::Stx => (next(i + 1) & !word) | X,
            Op::Tax => next(i + 1) & !X,
            _ => next(i + 1),
        };
    }
}

/// The kernel's `check_load_and_stores`: one forward pass with a 16-bit "stored" mask per
/// instruction, intersected at jump targets.
fn check_scratch_flow(insns: &[Insn], ops: &[Op], out: &mut Vec<(Option<usize>, Violation)>) {
    let mut masks = vec![u16::MAX; insns.len()];
    let mut valid: u16 = 0;
    for (pc, (&insn, &op)) in insns.iter().zip(ops).enumerate() {
        valid &= masks[pc];
        match op {
            Op::St | Op::Stx => valid |= 1 << insn.k,
            Op::LdMem | Op::LdxMem if valid & (1 << insn.k) == 0 => {
                out.push((Some(pc), Violation::UninitializedScratch { k: insn.k }));
            }
            Op::Ja => {
                masks[pc + 1 + insn.k as usize] &= valid;
                valid = u16::MAX;
            }
            Op::Jmp(..) => {
                masks[pc + 1 + usize::from(insn.jt)] &= valid;
                masks[pc + 1 + usize::from(insn.jf)] &= valid;
                valid = u16::MAX;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(insns: Vec<Insn>, dialect: Dialect) -> Result<ValidProgram, ValidationError> {
        validate(&Program(insns), dialect)
    }

    #[test]
    fn accepts_a_filter() {
        let p = check(
            vec![
                Insn::stmt(0x28, 12),
                Insn::jump(0x15, 0x800, 0, 1),
                Insn::stmt(0x06, 262144),
                Insn::stmt(0x06, 0),
            ],
            Dialect::Linux,
        )
        .unwrap();
        assert_eq!(p.len(), 4);
        assert_eq!(p.jump_targets(1), Some((2, 3)));
    }

    #[test]
    fn lists_every_violation() {
        let e = check(
            vec![
                Insn::stmt(0x60, 16),          // ld M[16]
                Insn::stmt(0x34, 0),           // div #0
                Insn::jump(0x15, 0, 0, 9),     // jf out of range
                Insn::stmt(0x05, 0xffff_fffe), // backward ja
                Insn::stmt(0x0e, 0),           // ret x: no such opcode
                Insn::stmt(0x04, 1),           // add #1, last is not ret
            ],
            Dialect::Libpcap,
        )
        .unwrap_err();
        let indices: Vec<_> = e.violations.iter().map(|(i, _)| *i).collect();
        assert_eq!(
            indices,
            vec![Some(0), Some(1), Some(2), Some(3), Some(4), Some(5)],
            "{e}"
        );
        assert!(e.to_string().contains("(001) division by the constant 0"));
    }

    #[test]
    fn linux_rules() {
        let shift = vec![Insn::stmt(0x64, 32), Insn::stmt(0x16, 0)];
        assert!(check(shift.clone(), Dialect::Libpcap).is_ok());
        assert!(check(shift, Dialect::Linux).is_err());
        let anc = vec![Insn::stmt(0x30, 0xffff_f004), Insn::stmt(0x16, 0)];
        assert!(check(anc, Dialect::Linux).is_ok());
        let bad_anc = vec![Insn::stmt(0x30, 0xffff_f100), Insn::stmt(0x16, 0)];
        assert!(check(bad_anc.clone(), Dialect::Libpcap).is_ok());
        assert!(check(bad_anc, Dialect::Linux).is_err());
        // M[1] stored on one path only.
        let scratch = vec![
            Insn::jump(0x15, 0, 0, 1),
            Insn::stmt(0x02, 1),
            Insn::stmt(0x60, 1),
            Insn::stmt(0x16, 0),
        ];
        assert!(check(scratch.clone(), Dialect::Libpcap).is_ok());
        assert_eq!(
            check(scratch, Dialect::Linux).unwrap_err().violations,
            vec![(Some(2), Violation::UninitializedScratch { k: 1 })]
        );
    }

    /// `ldb [23]; ldxb 4*([14]&0xf); <loop>; jeq #6; ret #1; ret #0` with `extra` before the
    /// `jeq`.
    fn with_loop(extra: &[Insn]) -> Vec<Insn> {
        use crate::protochain::loop_code;
        let mut p = vec![Insn::stmt(0x30, 23), Insn::stmt(0xb1, 14)];
        p.extend(loop_code(sift_ir::Chain::Ip, 14, 6, 2));
        p.extend_from_slice(extra);
        p.extend([
            Insn::jump(0x15, 6, 0, 1),
            Insn::stmt(0x06, 1),
            Insn::stmt(0x06, 0),
        ]);
        p
    }

    #[test]
    fn protochain_loops_only() {
        let p = check(with_loop(&[]), Dialect::Libpcap).unwrap();
        assert_eq!(p.loops().len(), 1);
        assert_eq!((p.loops()[0].head, p.loops()[0].end), (2, 13));
        assert_eq!(p.jump_targets(12), Some((2, 2)));
        let e = check(with_loop(&[]), Dialect::Linux).unwrap_err();
        assert!(matches!(
            e.violations[0],
            (Some(12), Violation::JumpOutOfRange { .. })
        ));
        // X, then the loop's scratch word, read after the loop.
        for read in [Insn::stmt(0x87, 0), Insn::stmt(0x60, 2)] {
            let e = check(with_loop(&[read]), Dialect::Libpcap).unwrap_err();
            assert_eq!(
                e.violations,
                vec![(Some(13), Violation::LoopStateRead { head: 2 })]
            );
        }
        // Written first, then read: fine; another scratch word: fine.
        let ok = [
            Insn::stmt(0x01, 3),
            Insn::stmt(0x87, 0),
            Insn::stmt(0x60, 5),
        ];
        assert!(check(with_loop(&ok), Dialect::Libpcap).is_ok());
        // A jump into the loop's AH step.
        let mut into = with_loop(&[]);
        into[1] = Insn::jump(0x15, 0, 3, 0);
        let e = check(into, Dialect::Libpcap).unwrap_err();
        assert_eq!(
            e.violations,
            vec![(Some(1), Violation::IntoLoop { head: 2 })]
        );
        // A loop that is not protochain's: `ld #1; ja -2` (endless).
        let e = check(
            vec![
                Insn::stmt(0x00, 1),
                Insn::stmt(0x05, u32::MAX - 1),
                Insn::stmt(0x06, 0),
            ],
            Dialect::Libpcap,
        )
        .unwrap_err();
        assert_eq!(
            e.violations,
            vec![(Some(1), Violation::BackwardJump { target: 0 })]
        );
        // A changed step (X += 2) is not the loop either.
        let mut changed = with_loop(&[]);
        changed[5 + 3] = Insn::stmt(0x04, 3);
        assert!(check(changed, Dialect::Libpcap).is_err());
    }

    #[test]
    fn limits() {
        assert!(check(vec![], Dialect::Libpcap).is_err());
        let long = vec![Insn::stmt(0x06, 0); 4097];
        assert_eq!(
            check(long.clone(), Dialect::Linux).unwrap_err().violations,
            vec![(None, Violation::TooLong { len: 4097 })]
        );
        assert!(check(vec![Insn::stmt(0x06, 0); 4096], Dialect::Linux).is_ok());
        // As libpcap's own `bpf_validate`: no limit outside the kernel.
        assert!(check(long, Dialect::Libpcap).is_ok());
    }
}
