//! The verifier: the only way to obtain a [`VerifiedProgram`].
//!
//! Rules (each broken rule is reported, with the instruction's index, and checking goes on):
//!
//! 1. size limits: 1 to [`MAX_INSNS`] instructions, at most [`MAX_TABLES`] tables and
//!    [`MAX_TABLE_ENTRIES`] entries, at most [`MAX_SCRATCH`] scratch words;
//! 2. register numbers below [`REGISTERS`], scratch slots below the declared `scratch_words`;
//! 3. jump, branch and switch targets lie after the instruction and inside the code (so every
//!    program terminates, after at most one visit of each instruction);
//! 4. switches name an existing table; table keys are strictly ascending; table targets lie
//!    inside the code and after every switch that uses the table;
//! 5. the last instruction is a `ret` (no path falls off the end: every other instruction
//!    either continues with the next one or branches forward);
//! 6. no instruction reads a register or scratch slot that is not written on every path from
//!    the entry to it. (Registers and scratch therefore need no initialization, and the
//!    interpreter's zeroed registers are unobservable.) Unreachable instructions are only
//!    checked for rules 1-5;
//! 7. coprocessor calls name an existing pattern (`contains`) or value set (`member`), a
//!    `member` passes as many key registers as its set's width takes (1 or 4), at most
//!    [`MAX_COPROCESSOR_TABLES`] pattern sets and value sets, and the tables compile
//!    (`sift_coproc::Coprocessors::compile`).
//!
//! Division by zero needs no rule: it is defined to reject the packet.

use std::fmt;
use std::sync::Arc;

use sift_coproc::Coprocessors;

use crate::insn::{
    Insn, Program, Reg, MAX_COPROCESSOR_TABLES, MAX_INSNS, MAX_SCRATCH, MAX_TABLES,
    MAX_TABLE_ENTRIES, REGISTERS,
};
use crate::interp::Code;

/// A program that passed [`verify`]: the only thing the interpreter (and later the JIT and the
/// demultiplexer) accepts. Immutable, `Send + Sync`; share it between threads and give each
/// thread its own [`crate::Cache`].
#[derive(Clone, Debug)]
pub struct VerifiedProgram {
    pub(crate) program: Program,
    pub(crate) code: Code,
    /// The compiled coprocessor tables, when the program carries any.
    pub(crate) coprocessors: Option<Arc<Coprocessors>>,
}

impl VerifiedProgram {
    /// The verified program (for encoding, printing, or a JIT).
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The program's coprocessor tables, compiled (for a JIT's calls); `None` when the program
    /// carries no tables (it then has no calls).
    pub fn coprocessors(&self) -> Option<&Arc<Coprocessors>> {
        self.coprocessors.as_ref()
    }

    /// Whether the program calls a coprocessor (runs then need a fresh [`sift_coproc::Memo`]
    /// state per packet).
    pub fn has_calls(&self) -> bool {
        self.code.has_calls
    }

    /// The binary encoding of the program.
    pub fn encode(&self) -> Vec<u8> {
        crate::encoding::encode(&self.program)
    }

    pub fn into_program(self) -> Program {
        self.program
    }
}

impl fmt::Display for VerifiedProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.program.fmt(f)
    }
}

/// One broken rule, at an instruction (`index`) or, for limits and tables, at the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub index: Option<usize>,
    pub kind: ViolationKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ViolationKind {
    Empty,
    TooManyInstructions(usize),
    TooManyTables(usize),
    TooManyTableEntries(usize),
    ScratchTooLarge(u16),
    RegisterOutOfRange(Reg),
    ScratchOutOfRange(u16),
    /// A jump, branch or switch default at or before its instruction.
    BackwardTarget(u32),
    TargetOutOfBounds(u32),
    MissingTable(u32),
    /// Entry `entry` of `table` does not lie after this switch.
    TableTargetBackward {
        table: u32,
        entry: usize,
    },
    TableTargetOutOfBounds {
        table: u32,
        entry: usize,
    },
    /// The key of entry `entry` is not greater than the previous key.
    TableKeysNotAscending {
        table: u32,
        entry: usize,
    },
    /// The last instruction is not a `ret`.
    FallsOffEnd,
    UndefinedRegister(Reg),
    UndefinedScratch(u16),
    TooManyPatternSets(usize),
    TooManyValueSets(usize),
    /// A `contains` names a pattern set the program does not carry.
    MissingPatternSet(u32),
    /// A `contains` names a pattern its set does not have.
    MissingPattern {
        set: u32,
        pattern: u32,
    },
    /// A `member` names a value set the program does not carry.
    MissingValueSet(u32),
    /// A `member` passes `found` key registers to a set whose keys take `expected` words.
    KeyWidth {
        set: u32,
        expected: usize,
        found: usize,
    },
    /// The coprocessor runtime cannot compile the tables (its message).
    CoprocessorTables(String),
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(i) = self.index {
            write!(f, "instruction {i}: ")?;
        }
        match &self.kind {
            ViolationKind::Empty => write!(f, "empty program"),
            ViolationKind::TooManyInstructions(n) => {
                write!(f, "{n} instructions (at most {MAX_INSNS})")
            }
            ViolationKind::TooManyTables(n) => write!(f, "{n} tables (at most {MAX_TABLES})"),
            ViolationKind::TooManyTableEntries(n) => {
                write!(f, "{n} table entries (at most {MAX_TABLE_ENTRIES})")
            }
            ViolationKind::ScratchTooLarge(n) => {
                write!(f, "{n} scratch words (at most {MAX_SCRATCH})")
            }
            ViolationKind::RegisterOutOfRange(r) => {
                write!(f, "register {r} out of range (r0..r{})", REGISTERS - 1)
            }
            ViolationKind::ScratchOutOfRange(s) => write!(f, "scratch slot m{s} not declared"),
            ViolationKind::BackwardTarget(t) => write!(f, "target {t} is not forward"),
            ViolationKind::TargetOutOfBounds(t) => write!(f, "target {t} is outside the code"),
            ViolationKind::MissingTable(t) => write!(f, "table {t} does not exist"),
            ViolationKind::TableTargetBackward { table, entry } => {
                write!(f, "entry {entry} of table {table} is not forward")
            }
            ViolationKind::TableTargetOutOfBounds { table, entry } => {
                write!(f, "entry {entry} of table {table} targets outside the code")
            }
            ViolationKind::TableKeysNotAscending { table, entry } => {
                write!(f, "keys of table {table} not ascending at entry {entry}")
            }
            ViolationKind::FallsOffEnd => write!(f, "the last instruction is not a return"),
            ViolationKind::UndefinedRegister(r) => {
                write!(f, "reads {r}, not written on every path")
            }
            ViolationKind::UndefinedScratch(s) => {
                write!(f, "reads m{s}, not written on every path")
            }
            ViolationKind::TooManyPatternSets(n) => {
                write!(f, "{n} pattern sets (at most {MAX_COPROCESSOR_TABLES})")
            }
            ViolationKind::TooManyValueSets(n) => {
                write!(f, "{n} value sets (at most {MAX_COPROCESSOR_TABLES})")
            }
            ViolationKind::MissingPatternSet(s) => write!(f, "pattern set p{s} does not exist"),
            ViolationKind::MissingPattern { set, pattern } => {
                write!(f, "pattern p{set}.{pattern} does not exist")
            }
            ViolationKind::MissingValueSet(s) => write!(f, "value set s{s} does not exist"),
            ViolationKind::KeyWidth {
                set,
                expected,
                found,
            } => write!(
                f,
                "set s{set} takes {expected} key registers, the call passes {found}"
            ),
            ViolationKind::CoprocessorTables(m) => {
                write!(f, "coprocessor tables do not compile: {m}")
            }
        }
    }
}

/// Every violation of a rejected program, in instruction order (program-level ones first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    pub violations: Vec<Violation>,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bytecode verification failed:")?;
        for v in &self.violations {
            write!(f, "\n  {v}")?;
        }
        Ok(())
    }
}

impl std::error::Error for VerifyError {}

/// Registers and scratch slots written on every path to a point (bit sets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Defined {
    regs: u16,
    scratch: [u64; MAX_SCRATCH as usize / 64],
}

impl Defined {
    const NONE: Defined = Defined {
        regs: 0,
        scratch: [0; MAX_SCRATCH as usize / 64],
    };

    fn meet(&mut self, other: &Defined) {
        self.regs &= other.regs;
        for (a, b) in self.scratch.iter_mut().zip(&other.scratch) {
            *a &= b;
        }
    }

    fn has_scratch(&self, slot: u16) -> bool {
        self.scratch[usize::from(slot) / 64] & (1 << (slot % 64)) != 0
    }
}

/// Checks every rule and, if all hold, returns the program ready to run.
pub fn verify(program: Program) -> Result<VerifiedProgram, VerifyError> {
    let mut violations = check(&program);
    if !violations.is_empty() {
        return Err(VerifyError { violations });
    }
    let coprocessors = if program.has_coprocessor_tables() {
        match Coprocessors::compile(&program.patterns, &program.sets) {
            Ok(c) => Some(Arc::new(c)),
            Err(e) => {
                violations.push(Violation {
                    index: None,
                    kind: ViolationKind::CoprocessorTables(e.to_string()),
                });
                return Err(VerifyError { violations });
            }
        }
    } else {
        None
    };
    let code = Code::new(&program);
    Ok(VerifiedProgram {
        program,
        code,
        coprocessors,
    })
}

/// Whether a call names an existing pattern or set with the right key width.
fn check_call(p: &Program, insn: &Insn) -> Option<ViolationKind> {
    match *insn {
        Insn::Contains { set, pattern, .. } => match p.patterns.get(set as usize) {
            None => Some(ViolationKind::MissingPatternSet(set)),
            Some(s) if pattern as usize >= s.len() => {
                Some(ViolationKind::MissingPattern { set, pattern })
            }
            Some(_) => None,
        },
        Insn::Member { set, key, .. } => match p.sets.get(set as usize) {
            None => Some(ViolationKind::MissingValueSet(set)),
            Some(s) if s.width().words() != key.regs().len() => Some(ViolationKind::KeyWidth {
                set,
                expected: s.width().words(),
                found: key.regs().len(),
            }),
            Some(_) => None,
        },
        _ => None,
    }
}

fn check(p: &Program) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut at = |index: Option<usize>, kind| out.push(Violation { index, kind });
    let n = p.code.len();
    if n == 0 {
        at(None, ViolationKind::Empty);
    }
    if n > MAX_INSNS {
        at(None, ViolationKind::TooManyInstructions(n));
    }
    if p.tables.len() > MAX_TABLES {
        at(None, ViolationKind::TooManyTables(p.tables.len()));
    }
    let entries: usize = p.tables.iter().map(|t| t.entries.len()).sum();
    if entries > MAX_TABLE_ENTRIES {
        at(None, ViolationKind::TooManyTableEntries(entries));
    }
    if p.scratch_words > MAX_SCRATCH {
        at(None, ViolationKind::ScratchTooLarge(p.scratch_words));
    }
    if p.patterns.len() > MAX_COPROCESSOR_TABLES {
        at(None, ViolationKind::TooManyPatternSets(p.patterns.len()));
    }
    if p.sets.len() > MAX_COPROCESSOR_TABLES {
        at(None, ViolationKind::TooManyValueSets(p.sets.len()));
    }
    for (ti, t) in p.tables.iter().enumerate() {
        for (e, w) in t.entries.windows(2).enumerate() {
            if w[1].0 <= w[0].0 {
                let kind = ViolationKind::TableKeysNotAscending {
                    table: ti as u32,
                    entry: e + 1,
                };
                at(None, kind);
            }
        }
        for (e, &(_, target)) in t.entries.iter().enumerate() {
            if target as usize >= n {
                let kind = ViolationKind::TableTargetOutOfBounds {
                    table: ti as u32,
                    entry: e,
                };
                at(None, kind);
            }
        }
    }
    if n == 0 || n > MAX_INSNS {
        return out; // nothing more is worth checking
    }

    let scratch_words = p.scratch_words.min(MAX_SCRATCH);
    let mut defined: Vec<Option<Defined>> = vec![None; n];
    defined[0] = Some(Defined::NONE);
    let mut successors: Vec<u32> = Vec::new();
    for (i, insn) in p.code.iter().enumerate() {
        let here = Some(i);
        let state = defined[i];
        // Registers and slots: range (always) and definedness (where reachable).
        for r in insn.uses() {
            if r.index() >= REGISTERS {
                at(here, ViolationKind::RegisterOutOfRange(r));
            } else if state.is_some_and(|s| s.regs & (1 << r.0) == 0) {
                at(here, ViolationKind::UndefinedRegister(r));
            }
        }
        if let Some(r) = insn.def() {
            if r.index() >= REGISTERS {
                at(here, ViolationKind::RegisterOutOfRange(r));
            }
        }
        match *insn {
            Insn::LoadScratch { slot, .. } => {
                if slot >= scratch_words {
                    at(here, ViolationKind::ScratchOutOfRange(slot));
                } else if state.is_some_and(|s| !s.has_scratch(slot)) {
                    at(here, ViolationKind::UndefinedScratch(slot));
                }
            }
            Insn::StoreScratch { slot, .. } if slot >= scratch_words => {
                at(here, ViolationKind::ScratchOutOfRange(slot));
            }
            _ => {}
        }
        if let Some(kind) = check_call(p, insn) {
            at(here, kind);
        }

        // Successors: each must be forward and in bounds.
        successors.clear();
        let target = |t: u32, out: &mut Vec<u32>, at: &mut dyn FnMut(_, _)| {
            if t as usize <= i {
                at(here, ViolationKind::BackwardTarget(t));
            } else if t as usize >= n {
                at(here, ViolationKind::TargetOutOfBounds(t));
            } else {
                out.push(t);
            }
        };
        match *insn {
            Insn::Jump { target: t } => target(t, &mut successors, &mut at),
            Insn::Branch { then_, else_, .. } => {
                target(then_, &mut successors, &mut at);
                target(else_, &mut successors, &mut at);
            }
            Insn::Switch { table, default, .. } => {
                target(default, &mut successors, &mut at);
                match p.tables.get(table as usize) {
                    None => at(here, ViolationKind::MissingTable(table)),
                    Some(t) => {
                        for (e, &(_, dest)) in t.entries.iter().enumerate() {
                            if dest as usize <= i {
                                let kind = ViolationKind::TableTargetBackward { table, entry: e };
                                at(here, kind);
                            } else if (dest as usize) < n {
                                successors.push(dest);
                            }
                        }
                    }
                }
            }
            Insn::Return { .. } => {}
            _ if i + 1 == n => at(here, ViolationKind::FallsOffEnd),
            _ => successors.push(i as u32 + 1),
        }

        // Propagate what is defined after this instruction to its successors.
        let Some(mut after) = state else { continue };
        match *insn {
            Insn::StoreScratch { slot, .. } if slot < scratch_words => {
                after.scratch[usize::from(slot) / 64] |= 1 << (slot % 64);
            }
            _ => {
                if let Some(r) = insn.def().filter(|r| r.index() < REGISTERS) {
                    after.regs |= 1 << r.0;
                }
            }
        }
        for &s in &successors {
            match &mut defined[s as usize] {
                Some(d) => d.meet(&after),
                slot @ None => *slot = Some(after),
            }
        }
    }
    out
}
