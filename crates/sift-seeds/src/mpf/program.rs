//! An MPF program: classic BPF instructions and MPF's additions in one slot array, and the static
//! checks that make every later stage (lifting, the interpreter, the session runtime) total.
//!
//! Slots are numbered as the paper's programs count instructions: a `key` occupies a slot after
//! its match instruction, and jump offsets count key slots, as in Mach's `struct bpf_insn`
//! encoding (`ret_match_imm` carries its key count in `jt`, each key is a `BPF_MISC|BPF_KEY`
//! instruction whose `k` is the immediate).

use std::fmt;

use crate::span::Span;
use sift_bpf::{validate, Dialect, Insn as BpfInsn, Op, Program as BpfProgram, Violation};

/// The most keys (and registered data words) one instruction may name: the 16 scratch words.
pub const MAX_KEYS: u8 = 16;

/// How many bytes a successful return delivers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Length {
    /// `ALL`: the whole packet (the snap length chosen when lifting; `u32::MAX` otherwise).
    All,
    /// A byte count (0 rejects, as for `ret #0`).
    Bytes(u32),
}

impl Length {
    /// The return value: `all` for [`Length::All`].
    pub fn value(self, all: u32) -> u32 {
        match self {
            Length::All => all,
            Length::Bytes(k) => k,
        }
    }
}

impl fmt::Display for Length {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Length::All => f.write_str("#ALL"),
            Length::Bytes(k) => write!(f, "#{k}"),
        }
    }
}

/// One slot of an MPF program. Jump offsets are relative to the next slot, as in classic BPF.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Insn {
    /// A classic BPF instruction (decodes to a [`sift_bpf::Op`]).
    Classic(BpfInsn),
    /// `ret #ALL`: accept the whole packet.
    RetAll,
    /// `ret_match_imm #count, #len`: accept `len` bytes if `M[i]` equals key `i` for every
    /// `i < count` (the `count` keys follow), reject otherwise.
    RetMatchImm { count: u8, len: Length },
    /// `jmp_match_imm #count, Lt, Lf`: jump to `Lt` if `M[i]` equals key `i` for every
    /// `i < count` (the keys follow), to `Lf` otherwise.
    JmpMatchImm { count: u8, jt: u8, jf: u8 },
    /// `key #k`: an immediate of the match instruction before it; never executed.
    Key(u32),
    /// `register_data #count, #timeout_ms`: record `M[0..count]` in the filter's static memory
    /// for the endpoint the last `jmp_match_imm` matched, for `timeout_ms` milliseconds.
    RegisterData { count: u8, timeout_ms: u32 },
    /// `ret_match_data #count, #len`: accept `len` bytes if `M[0..count]` is registered
    /// static memory; otherwise continue with the next instruction.
    RetMatchData { count: u8, len: Length },
    /// `postpone #timeout_ms`: stop, and run the packet again later (dropped `timeout_ms`
    /// milliseconds after it first arrived).
    Postpone { timeout_ms: u32 },
}

impl Insn {
    /// Whether this instruction needs per-filter state (static memory or the postponed queue).
    pub fn is_stateful(self) -> bool {
        matches!(
            self,
            Insn::RegisterData { .. } | Insn::RetMatchData { .. } | Insn::Postpone { .. }
        )
    }

    /// The number of key slots that follow this instruction.
    pub fn key_count(self) -> usize {
        match self {
            Insn::RetMatchImm { count, .. } | Insn::JmpMatchImm { count, .. } => count.into(),
            _ => 0,
        }
    }

    /// The mnemonic, as the text form writes it.
    pub fn mnemonic(self) -> &'static str {
        match self {
            Insn::Classic(_) => "classic",
            Insn::RetAll => "ret",
            Insn::RetMatchImm { .. } => "ret_match_imm",
            Insn::JmpMatchImm { .. } => "jmp_match_imm",
            Insn::Key(_) => "key",
            Insn::RegisterData { .. } => "register_data",
            Insn::RetMatchData { .. } => "ret_match_data",
            Insn::Postpone { .. } => "postpone",
        }
    }

    /// A classic instruction that the classic validator can judge in this slot's place: same
    /// control flow (terminates, falls through, or jumps with the same offsets).
    fn stand_in(self) -> BpfInsn {
        const RET_K: u16 = 0x06;
        const TAX: u16 = 0x07;
        const JEQ_K: u16 = 0x15;
        match self {
            Insn::Classic(i) => i,
            Insn::JmpMatchImm { jt, jf, .. } => BpfInsn::jump(JEQ_K, 0, jt, jf),
            Insn::RegisterData { .. } | Insn::RetMatchData { .. } => BpfInsn::stmt(TAX, 0),
            Insn::RetAll | Insn::RetMatchImm { .. } | Insn::Key(_) | Insn::Postpone { .. } => {
                BpfInsn::stmt(RET_K, 0)
            }
        }
    }

    /// The same instruction with its key immediate cleared: two programs whose slots have the
    /// same shape differ only in their keys.
    fn shape(self) -> Insn {
        match self {
            Insn::Key(_) => Insn::Key(0),
            Insn::Classic(i) => Insn::Classic(i.canonical()),
            other => other,
        }
    }
}

/// What a static check found wrong, at one slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProgramErrorKind {
    /// A classic BPF rule (jump range, scratch index, `div #0`, final return, length).
    Classic(Violation),
    /// A match instruction names 0 keys or more than [`MAX_KEYS`].
    KeyCount { count: u8 },
    /// A match instruction is not followed by as many `key` slots as it names.
    MissingKeys { expected: u8, found: usize },
    /// A `key` that belongs to no match instruction.
    StrayKey,
    /// A jump lands on a `key` slot (keys are data, not instructions).
    JumpIntoKeys { target: usize },
    /// `M[index]` is read by a match or data instruction on a path where it was never stored.
    ScratchNotStored { index: u8 },
    /// `register_data` on a path where no `jmp_match_imm` has matched (table 2 requires one).
    RegisterWithoutMatch,
}

impl fmt::Display for ProgramErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProgramErrorKind::Classic(v) => write!(f, "{v}"),
            ProgramErrorKind::KeyCount { count } => {
                write!(f, "{count} keys: a match names 1 to {MAX_KEYS} keys")
            }
            ProgramErrorKind::MissingKeys { expected, found } => write!(
                f,
                "the match names {expected} keys but {found} `key` instructions follow it"
            ),
            ProgramErrorKind::StrayKey => {
                f.write_str("`key` without a match instruction before it")
            }
            ProgramErrorKind::JumpIntoKeys { target } => {
                write!(f, "jump to instruction {target}, which is a `key`")
            }
            ProgramErrorKind::ScratchNotStored { index } => write!(
                f,
                "M[{index}] is compared here but not stored on every path to this instruction"
            ),
            ProgramErrorKind::RegisterWithoutMatch => {
                f.write_str("register_data needs a jmp_match_imm that matched on every path to it")
            }
        }
    }
}

/// A failed static check: what, and at which slot (`None` for the whole program).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramError {
    pub slot: Option<usize>,
    pub kind: ProgramErrorKind,
}

impl fmt::Display for ProgramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.slot {
            Some(s) => write!(f, "instruction {s}: {}", self.kind),
            None => write!(f, "{}", self.kind),
        }
    }
}

impl std::error::Error for ProgramError {}

/// A checked MPF program: every jump forward and in range, every path ending in a return or a
/// postponement, keys exactly where match instructions put them, every compared scratch word
/// stored first, every `register_data` after a successful `jmp_match_imm`.
///
/// Equality and hashing look at the instructions only, not at where they came from.
#[derive(Clone, Debug)]
pub struct Program {
    insns: Vec<Insn>,
    /// Source spans of the slots, when the program was parsed from text.
    spans: Vec<Span>,
}

impl PartialEq for Program {
    fn eq(&self, other: &Program) -> bool {
        self.insns == other.insns
    }
}

impl Eq for Program {}

impl std::hash::Hash for Program {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.insns.hash(state);
    }
}

impl Program {
    /// Checks `insns` (see the type's docs); the first failed check is returned.
    pub fn new(insns: Vec<Insn>) -> Result<Program, ProgramError> {
        check_keys(&insns)?;
        let stand_ins = BpfProgram(insns.iter().map(|i| i.stand_in()).collect());
        if let Err(e) = validate(&stand_ins, Dialect::Libpcap) {
            let (slot, v) = e
                .violations
                .into_iter()
                .next()
                .expect("errors list violations");
            return Err(ProgramError {
                slot,
                kind: ProgramErrorKind::Classic(v),
            });
        }
        check_flow(&insns)?;
        Ok(Program {
            insns,
            spans: Vec::new(),
        })
    }

    /// The program with the source spans of its slots.
    pub(crate) fn with_spans(mut self, spans: Vec<Span>) -> Program {
        self.spans = spans;
        self
    }

    /// The source text of a slot, when the program was parsed.
    pub fn span(&self, slot: usize) -> Option<Span> {
        self.spans.get(slot).copied()
    }

    /// The slots.
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// Number of slots (keys included).
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    /// Never true for a checked program.
    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    /// Whether any instruction needs per-filter state ([`Insn::is_stateful`]).
    pub fn is_stateful(&self) -> bool {
        self.first_stateful().is_some()
    }

    /// The slot of the first stateful instruction.
    pub fn first_stateful(&self) -> Option<usize> {
        self.insns.iter().position(|i| i.is_stateful())
    }

    /// The program with every key cleared (and classic fields the opcode ignores zeroed): the
    /// part that filters collapsed into one program share.
    pub fn shape(&self) -> Vec<Insn> {
        self.insns.iter().map(|i| i.shape()).collect()
    }

    /// The key immediates, in slot order: what the collapsed program's hash table holds for
    /// this filter.
    pub fn keys(&self) -> Vec<u32> {
        self.insns
            .iter()
            .filter_map(|i| match i {
                Insn::Key(k) => Some(*k),
                _ => None,
            })
            .collect()
    }

    /// The keys of the match instruction at `slot` (empty if it is not one).
    pub fn keys_at(&self, slot: usize) -> Vec<u32> {
        let n = self.insns.get(slot).map_or(0, |i| i.key_count());
        self.insns
            .get(slot + 1..slot + 1 + n)
            .unwrap_or_default()
            .iter()
            .map(|i| match i {
                Insn::Key(k) => *k,
                _ => 0,
            })
            .collect()
    }

    /// Slots a path may go to after `slot` (none for returns, postponements and keys).
    pub fn successors(&self, slot: usize) -> Vec<usize> {
        successors(&self.insns, slot)
    }
}

fn successors(insns: &[Insn], i: usize) -> Vec<usize> {
    let next = i + 1;
    match insns[i] {
        Insn::Classic(c) => match c.decode() {
            Some(Op::Ja) => vec![next.saturating_add(c.k as usize)],
            Some(Op::Jmp(..)) => vec![next + usize::from(c.jt), next + usize::from(c.jf)],
            Some(Op::RetK | Op::RetA) | None => vec![],
            Some(_) => vec![next],
        },
        Insn::JmpMatchImm { jt, jf, .. } => vec![next + usize::from(jt), next + usize::from(jf)],
        Insn::RegisterData { .. } | Insn::RetMatchData { .. } => vec![next],
        Insn::RetAll | Insn::RetMatchImm { .. } | Insn::Key(_) | Insn::Postpone { .. } => vec![],
    }
}

/// Keys sit right after their match instruction, and nowhere else.
fn check_keys(insns: &[Insn]) -> Result<(), ProgramError> {
    let err = |slot, kind| Err(ProgramError { slot, kind });
    let mut i = 0;
    while i < insns.len() {
        let n = insns[i].key_count();
        match insns[i] {
            Insn::Key(_) => return err(Some(i), ProgramErrorKind::StrayKey),
            Insn::RetMatchImm { count, .. } | Insn::JmpMatchImm { count, .. }
                if count == 0 || count > MAX_KEYS =>
            {
                return err(Some(i), ProgramErrorKind::KeyCount { count });
            }
            _ => {}
        }
        let found = insns[i + 1..]
            .iter()
            .take(n)
            .take_while(|k| matches!(k, Insn::Key(_)))
            .count();
        if found < n {
            return err(
                Some(i),
                ProgramErrorKind::MissingKeys {
                    expected: n as u8,
                    found,
                },
            );
        }
        i += 1 + n;
    }
    for (i, _) in insns.iter().enumerate() {
        if matches!(insns[i], Insn::Key(_)) {
            continue;
        }
        for t in successors(insns, i) {
            if matches!(insns.get(t), Some(Insn::Key(_))) {
                return err(Some(i), ProgramErrorKind::JumpIntoKeys { target: t });
            }
        }
    }
    Ok(())
}

/// Facts that hold on every path into a slot: scratch words stored, and whether a
/// `jmp_match_imm` has matched. Slots only jump forward (the classic check ran first), so one
/// pass in slot order sees every predecessor before its successors.
fn check_flow(insns: &[Insn]) -> Result<(), ProgramError> {
    #[derive(Clone, Copy)]
    struct Facts {
        stored: u16,
        matched: bool,
    }
    let mut facts: Vec<Option<Facts>> = vec![None; insns.len()];
    facts[0] = Some(Facts {
        stored: 0,
        matched: false,
    });
    let merge = |slot: &mut Option<Facts>, f: Facts| {
        *slot = Some(match *slot {
            None => f,
            Some(old) => Facts {
                stored: old.stored & f.stored,
                matched: old.matched && f.matched,
            },
        });
    };
    for i in 0..insns.len() {
        let Some(mut here) = facts[i] else { continue };
        let needs = match insns[i] {
            Insn::RetMatchImm { count, .. }
            | Insn::JmpMatchImm { count, .. }
            | Insn::RegisterData { count, .. }
            | Insn::RetMatchData { count, .. } => count,
            _ => 0,
        };
        if let Some(index) = (0..needs).find(|&k| here.stored & (1 << k) == 0) {
            return Err(ProgramError {
                slot: Some(i),
                kind: ProgramErrorKind::ScratchNotStored { index },
            });
        }
        if matches!(insns[i], Insn::RegisterData { .. }) && !here.matched {
            return Err(ProgramError {
                slot: Some(i),
                kind: ProgramErrorKind::RegisterWithoutMatch,
            });
        }
        if let Insn::Classic(c) = insns[i] {
            if matches!(c.decode(), Some(Op::St | Op::Stx)) {
                here.stored |= 1 << (c.k & 15);
            }
        }
        let succs = successors(insns, i);
        if let Insn::JmpMatchImm { .. } = insns[i] {
            merge(
                &mut facts[succs[0]],
                Facts {
                    matched: true,
                    ..here
                },
            );
            merge(&mut facts[succs[1]], here);
        } else {
            for s in succs {
                merge(&mut facts[s], here);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ST0: Insn = Insn::Classic(BpfInsn::stmt(0x02, 0));
    const RET0: Insn = Insn::Classic(BpfInsn::stmt(0x06, 0));

    fn kind(insns: Vec<Insn>) -> ProgramErrorKind {
        Program::new(insns).unwrap_err().kind
    }

    #[test]
    fn keys_must_follow_their_match() {
        let m = Insn::RetMatchImm {
            count: 2,
            len: Length::All,
        };
        assert!(Program::new(vec![ST0, m, Insn::Key(1), Insn::Key(2)]).is_err()); // M[1]
        assert_eq!(
            kind(vec![ST0, m, Insn::Key(1), RET0]),
            ProgramErrorKind::MissingKeys {
                expected: 2,
                found: 1
            }
        );
        assert_eq!(kind(vec![Insn::Key(1), RET0]), ProgramErrorKind::StrayKey);
        let zero = Insn::RetMatchImm {
            count: 0,
            len: Length::All,
        };
        assert_eq!(kind(vec![zero]), ProgramErrorKind::KeyCount { count: 0 });
    }

    #[test]
    fn compared_scratch_must_be_stored() {
        let m = Insn::RetMatchImm {
            count: 1,
            len: Length::All,
        };
        let p = Program::new(vec![ST0, m, Insn::Key(7)]).unwrap();
        assert_eq!(p.keys(), vec![7]);
        assert_eq!(p.keys_at(1), vec![7]);
        assert!(!p.is_stateful());
        assert_eq!(
            kind(vec![m, Insn::Key(7)]),
            ProgramErrorKind::ScratchNotStored { index: 0 }
        );
    }

    #[test]
    fn register_needs_a_match_and_jumps_avoid_keys() {
        let reg = Insn::RegisterData {
            count: 1,
            timeout_ms: 10,
        };
        assert_eq!(
            kind(vec![ST0, reg, RET0]),
            ProgramErrorKind::RegisterWithoutMatch
        );
        let jm = Insn::JmpMatchImm {
            count: 1,
            jt: 1,
            jf: 2,
        };
        let p = Program::new(vec![ST0, jm, Insn::Key(5), reg, RET0, RET0]).unwrap();
        assert!(p.is_stateful());
        assert_eq!(p.first_stateful(), Some(3));
        let into_key = Insn::JmpMatchImm {
            count: 1,
            jt: 0,
            jf: 2,
        };
        assert_eq!(
            kind(vec![ST0, into_key, Insn::Key(5), RET0, RET0]),
            ProgramErrorKind::JumpIntoKeys { target: 2 }
        );
        // Falling off the end is a classic violation.
        assert!(matches!(
            kind(vec![ST0]),
            ProgramErrorKind::Classic(Violation::NoFinalReturn)
        ));
    }

    #[test]
    fn shapes_ignore_keys_only() {
        let m = Insn::RetMatchImm {
            count: 1,
            len: Length::All,
        };
        let a = Program::new(vec![ST0, m, Insn::Key(1), RET0]).unwrap();
        let b = Program::new(vec![ST0, m, Insn::Key(2), RET0]).unwrap();
        assert_eq!(a.shape(), b.shape());
        assert_ne!(a, b);
    }
}
