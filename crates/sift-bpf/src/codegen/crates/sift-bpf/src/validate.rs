//! The classic BPF validator: the only way to obtain a [`ValidProgram`], which is the only thing
//! the interpreter, the lifter and the code generator's output are.
//!
//! # Rules
//!
//! Both [`Dialect`]s check, listing every violation with its instruction index:
//!
//! * the program has 1 to 4096 instructions (Linux's `BPF_MAXINSNS`);
//! * every opcode is one that `bpf_filter` and the kernel execute (exact 16-bit match, see
//!   [`crate::Op`]);
//! * scratch indices (`ld M[k]`, `ldx M[k]`, `st`, `stx`) are below 16;
//! * `div #0` and `mod #0` are refused;
//! * every jump lands inside the program and goes forward (`ja` offsets are compared without
//!   wrapping);
//! * the last instruction is a `ret`.
//!
//! [`Dialect::Linux`] adds what the kernel's `bpf_check_classic` checks on top:
//!
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
//!    "negative" offset passes (libpcap relies on it for `protochain`). sift's programs are
//!    acyclic by construction, so it refuses them, like the kernel;
//! 3. more than 4096 instructions (userland `bpf_validate` has no limit).
//!
//! Everything the kernel refuses beyond [`Dialect::Libpcap`] is listed above under
//! [`Dialect::Linux`]. The interpreter runs both dialects identically; for `lsh #k`/`rsh #k` with
//! `k >= 32` (libpcap dialect only) it shifts by `k % 32`, which is what `bpf_filter`'s
//! `A <<= pc->k` does on x86-64 and AArch64.

use std::fmt;

use crate::insn::{code, Insn, Op, Program, Src};

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
    /// More than 4096 instructions.
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

/// A program that passed [`validate`]: every instruction decodes, every jump is forward and in
/// range, every path ends in a `ret`, every scratch index is in range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidProgram {
    insns: Vec<Insn>,
    ops: Vec<Op>,
    dialect: Dialect,
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

    /// The targets of the jump at `i` (`None` if `i` is not a jump): `(taken, not taken)`, equal
    /// for `ja`.
    pub fn jump_targets(&self, i: usize) -> Option<(usize, usize)> {
        let insn = self.insns[i];
        match self.ops[i] {
            Op::Ja => {
                let t = i + 1 + insn.k as usize;
                Some((t, t))
            }
            Op::Jmp(..) => Some((i + 1 + usize::from(insn.jt), i + 1 + usize::from(insn.jf))),
            _ => None,
        }
    }
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
    if len > code::MAXINSNS {
        violations.push((None, Violation::TooLong { len }));
    }
    let mut ops = Vec::with_capacity(len);
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
    // The scratch flow check only makes sense on an otherwise valid program (targets in range).
    if violations.is_empty() && dialect == Dialect::Linux {
        check_scratch_flow(insns, &ops, &mut violations);
    }
    if violations.is_empty() {
        Ok(ValidProgram {
            insns: insns.to_vec(),
            ops,
            dialect,
        })
    } else {
        Err(ValidationError { violations })
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

    #[test]
    fn limits() {
        assert!(check(vec![], Dialect::Libpcap).is_err());
        let long = vec![Insn::stmt(0x06, 0); 4097];
        assert!(check(long, Dialect::Libpcap).is_err());
        assert!(check(vec![Insn::stmt(0x06, 0); 4096], Dialect::Linux).is_ok());
    }
}
