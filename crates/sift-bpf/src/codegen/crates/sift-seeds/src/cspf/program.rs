//! The CSPF program model: the instruction encoding, decoded instructions, and the static checks
//! of the paper's section 7 that make a [`Program`] safe to run without per-word checks.
//!
//! # Encoding
//!
//! A program is an array of 16-bit words. Each instruction word holds a *stack action* in its low
//! bits and a *binary operator* in its high bits (figure 9); a `PUSHLIT` action takes the next word
//! as its literal. The numeric values are those of the Stanford `enet.h` lineage that the paper's
//! authors wrote, as preserved in Ultrix's `<net/pfilt.h>` ("based on pfilt.h 4.2.1.1 (ULTRIX)",
//! whose history runs from Accetta's 1980 CMU version through Mogul's 1984 short-circuit
//! operators and 1986 constant pushes):
//!
//! * `ENF_NBPA = 10` bits of action, `ENF_NBPO = 6` bits of operator ("these must sum to 16!");
//! * actions `NOPUSH 0, PUSHLIT 1, PUSHZERO 2, PUSHONE 3, PUSHFFFF 4, PUSH00FF 5, PUSHFF00 6,
//!   PUSHWORD 16` (`PUSHWORD+n` pushes packet word `n`, so `n <= 1007`);
//! * operators `NOP 0, EQ 1, LT 2, LE 3, GT 4, GE 5, AND 6, OR 7, XOR 8, COR 9, CAND 10, CNOR 11,
//!   CNAND 12, NEQ 13`, each shifted left by `ENF_NBPA`;
//! * `ENMAXFILTERS = 40` words per filter, an 8-bit priority (`u_char enf_Priority`).
//!
//! Two discrepancies are worth knowing. Figure 9 draws the fields as 10 bits of operator over 6 bits
//! of action; every header we know of gives the action 10 bits, and the operator values above only
//! make sense that way round. SunOS's NIT and Solaris's `pfmod` swap `PUSHFF00` (5) and `PUSH00FF`
//! (6); we follow the Stanford/Ultrix order, which is also the order of the 1986 change log
//! ("push common constants: 1, 0xFFFF, 0x00FF, 0xFF00").

use std::fmt;

/// Number of low bits holding the stack action (`ENF_NBPA`).
pub const ACTION_BITS: u32 = 10;
/// Mask of the stack-action field.
pub const ACTION_MASK: u16 = (1 << ACTION_BITS) - 1;

pub const ENF_NOPUSH: u16 = 0;
pub const ENF_PUSHLIT: u16 = 1;
pub const ENF_PUSHZERO: u16 = 2;
pub const ENF_PUSHONE: u16 = 3;
pub const ENF_PUSHFFFF: u16 = 4;
pub const ENF_PUSH00FF: u16 = 5;
pub const ENF_PUSHFF00: u16 = 6;
pub const ENF_PUSHWORD: u16 = 16;
/// The largest `n` in `PUSHWORD+n` that fits the action field.
pub const MAX_PUSHWORD: u16 = ACTION_MASK - ENF_PUSHWORD;

/// Maximum filter length in words in the paper-era headers (`ENMAXFILTERS`).
pub const ENMAXFILTERS: usize = 40;

/// A stack action: what an instruction pushes before its operator runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    NoPush,
    /// Pushes the following program word.
    PushLit(u16),
    PushZero,
    PushOne,
    PushFfff,
    PushFf00,
    Push00ff,
    /// Pushes 16-bit packet word `n` (bytes `2n` and `2n+1`, network byte order).
    PushWord(u16),
}

impl Action {
    /// The value pushed by a constant action (`PUSHLIT` and the `PUSH` constants).
    pub fn constant(self) -> Option<u16> {
        match self {
            Action::PushLit(k) => Some(k),
            Action::PushZero => Some(0),
            Action::PushOne => Some(1),
            Action::PushFfff => Some(0xFFFF),
            Action::PushFf00 => Some(0xFF00),
            Action::Push00ff => Some(0x00FF),
            Action::NoPush | Action::PushWord(_) => None,
        }
    }

    /// The action field's code.
    pub fn code(self) -> u16 {
        match self {
            Action::NoPush => ENF_NOPUSH,
            Action::PushLit(_) => ENF_PUSHLIT,
            Action::PushZero => ENF_PUSHZERO,
            Action::PushOne => ENF_PUSHONE,
            Action::PushFfff => ENF_PUSHFFFF,
            Action::PushFf00 => ENF_PUSHFF00,
            Action::Push00ff => ENF_PUSH00FF,
            Action::PushWord(n) => ENF_PUSHWORD + n,
        }
    }

    pub fn pushes(self) -> bool {
        self != Action::NoPush
    }
}

/// A binary operator. All pop two values (T1 the top, T2 below it) and push one result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    Nop,
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Xor,
    Cor,
    Cand,
    Cnor,
    Cnand,
    Neq,
}

/// When a short-circuit operator ends the program: if `R = (T1 == T2)` equals `exit_if`, the
/// program returns `returns` at once; otherwise it pushes `R` and continues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShortCircuit {
    pub exit_if: bool,
    pub returns: bool,
}

impl Operator {
    /// All operators, in code order.
    pub const ALL: [Operator; 14] = [
        Operator::Nop,
        Operator::Eq,
        Operator::Lt,
        Operator::Le,
        Operator::Gt,
        Operator::Ge,
        Operator::And,
        Operator::Or,
        Operator::Xor,
        Operator::Cor,
        Operator::Cand,
        Operator::Cnor,
        Operator::Cnand,
        Operator::Neq,
    ];

    /// The operator's number (before shifting into place).
    pub fn number(self) -> u16 {
        Operator::ALL.iter().position(|&o| o == self).unwrap_or(0) as u16
    }

    /// The operator field's value, in place (`ENF_EQ` = `1 << 10`, ...).
    pub fn code(self) -> u16 {
        self.number() << ACTION_BITS
    }

    pub fn from_number(n: u16) -> Option<Operator> {
        Operator::ALL.get(usize::from(n)).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            Operator::Nop => "NOP",
            Operator::Eq => "EQ",
            Operator::Lt => "LT",
            Operator::Le => "LE",
            Operator::Gt => "GT",
            Operator::Ge => "GE",
            Operator::And => "AND",
            Operator::Or => "OR",
            Operator::Xor => "XOR",
            Operator::Cor => "COR",
            Operator::Cand => "CAND",
            Operator::Cnor => "CNOR",
            Operator::Cnand => "CNAND",
            Operator::Neq => "NEQ",
        }
    }

    /// The short-circuit behaviour (figure 9's table), for `COR`, `CAND`, `CNOR` and `CNAND`.
    pub fn short_circuit(self) -> Option<ShortCircuit> {
        let (exit_if, returns) = match self {
            Operator::Cor => (true, true),
            Operator::Cand => (false, false),
            Operator::Cnor => (true, false),
            Operator::Cnand => (false, true),
            _ => return None,
        };
        Some(ShortCircuit { exit_if, returns })
    }

    /// Applies a non-short-circuit operator to `t2` (below) and `t1` (top). `None` for `NOP` and
    /// the short-circuit operators.
    pub fn apply(self, t2: u16, t1: u16) -> Option<u16> {
        Some(match self {
            Operator::Eq => u16::from(t2 == t1),
            Operator::Neq => u16::from(t2 != t1),
            Operator::Lt => u16::from(t2 < t1),
            Operator::Le => u16::from(t2 <= t1),
            Operator::Gt => u16::from(t2 > t1),
            Operator::Ge => u16::from(t2 >= t1),
            Operator::And => t2 & t1,
            Operator::Or => t2 | t1,
            Operator::Xor => t2 ^ t1,
            Operator::Nop | Operator::Cor | Operator::Cand | Operator::Cnor | Operator::Cnand => {
                return None
            }
        })
    }
}

/// One decoded instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Instruction {
    pub action: Action,
    pub op: Operator,
    /// Index of the instruction word in the program (its literal, if any, follows it).
    pub word: usize,
}

/// How one program word decodes, before any stack bookkeeping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A valid instruction; `PushLit` still needs its literal from the next word.
    Valid(Action, Operator),
    InvalidAction(u16),
    InvalidOperator(u16),
}

/// Decodes one instruction word (a `PushLit` comes back with literal 0, to be filled in).
pub fn decode_word(word: u16) -> Decoded {
    let op_number = word >> ACTION_BITS;
    let Some(op) = Operator::from_number(op_number) else {
        return Decoded::InvalidOperator(op_number);
    };
    let action = match word & ACTION_MASK {
        ENF_NOPUSH => Action::NoPush,
        ENF_PUSHLIT => Action::PushLit(0),
        ENF_PUSHZERO => Action::PushZero,
        ENF_PUSHONE => Action::PushOne,
        ENF_PUSHFFFF => Action::PushFfff,
        ENF_PUSH00FF => Action::Push00ff,
        ENF_PUSHFF00 => Action::PushFf00,
        a if a >= ENF_PUSHWORD => Action::PushWord(a - ENF_PUSHWORD),
        a => return Decoded::InvalidAction(a),
    };
    Decoded::Valid(action, op)
}

/// Limits enforced by [`Program::with_limits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Maximum program length in words (`ENMAXFILTERS`; the length field is a byte, so at most 255).
    pub max_words: usize,
    /// Maximum number of values on the stack. The enet interpreter keeps `ENMAXFILTERS + 1` slots,
    /// one holding its initial TRUE and two kept as a "yellow zone", so 38 by default.
    pub max_stack: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_words: ENMAXFILTERS,
            max_stack: ENMAXFILTERS - 2,
        }
    }
}

/// A static check that failed, at the word it concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramError {
    /// Index of the offending word (for `TooLong`, the first word past the limit).
    pub word: usize,
    pub kind: ProgramErrorKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProgramErrorKind {
    TooLong {
        len: usize,
        max: usize,
    },
    InvalidAction(u16),
    InvalidOperator(u16),
    /// A `PUSHLIT` is the last word: its literal is missing.
    MissingLiteral,
    /// A binary operator with fewer than two values on the stack.
    StackUnderflow {
        depth: usize,
        op: Operator,
    },
    StackOverflow {
        max: usize,
    },
}

impl fmt::Display for ProgramErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProgramErrorKind::TooLong { len, max } => {
                write!(f, "program has {len} words, more than the limit of {max}")
            }
            ProgramErrorKind::InvalidAction(a) => write!(f, "invalid stack action {a}"),
            ProgramErrorKind::InvalidOperator(o) => write!(f, "invalid binary operator {o}"),
            ProgramErrorKind::MissingLiteral => {
                write!(f, "PUSHLIT is the last word: its literal is missing")
            }
            ProgramErrorKind::StackUnderflow { depth, op } => write!(
                f,
                "stack underflow: {} needs two values, the stack holds {depth}",
                op.name()
            ),
            ProgramErrorKind::StackOverflow { max } => {
                write!(f, "stack overflow: more than {max} values")
            }
        }
    }
}

impl fmt::Display for ProgramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "word {}: {}", self.word, self.kind)
    }
}

impl std::error::Error for ProgramError {}

/// A CSPF filter that passed every static check: valid instructions, literals present, no stack
/// underflow or overflow, within the length limit. Only packet bounds remain to check at run time.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Program {
    priority: u8,
    words: Vec<u16>,
    insts: Vec<Instruction>,
    max_depth: usize,
}

impl Program {
    /// Checks `words` with the default [`Limits`].
    pub fn new(priority: u8, words: Vec<u16>) -> Result<Program, ProgramError> {
        Program::with_limits(priority, words, &Limits::default())
    }

    /// Checks `words` ahead of time (section 7: without jumps, the stack depth at every word is
    /// known statically) and reports the first error by word index.
    pub fn with_limits(
        priority: u8,
        words: Vec<u16>,
        limits: &Limits,
    ) -> Result<Program, ProgramError> {
        if words.len() > limits.max_words {
            return Err(ProgramError {
                word: limits.max_words,
                kind: ProgramErrorKind::TooLong {
                    len: words.len(),
                    max: limits.max_words,
                },
            });
        }
        let mut insts = Vec::new();
        let mut depth = 0usize;
        let mut max_depth = 0usize;
        let mut i = 0;
        while i < words.len() {
            let err = |kind| Err(ProgramError { word: i, kind });
            let (mut action, op) = match decode_word(words[i]) {
                Decoded::Valid(a, o) => (a, o),
                Decoded::InvalidAction(a) => return err(ProgramErrorKind::InvalidAction(a)),
                Decoded::InvalidOperator(o) => return err(ProgramErrorKind::InvalidOperator(o)),
            };
            let word = i;
            if let Action::PushLit(_) = action {
                let Some(&lit) = words.get(i + 1) else {
                    return err(ProgramErrorKind::MissingLiteral);
                };
                action = Action::PushLit(lit);
                i += 1;
            }
            if action.pushes() {
                depth += 1;
                if depth > limits.max_stack {
                    return Err(ProgramError {
                        word,
                        kind: ProgramErrorKind::StackOverflow {
                            max: limits.max_stack,
                        },
                    });
                }
            }
            max_depth = max_depth.max(depth);
            if op != Operator::Nop {
                if depth < 2 {
                    return Err(ProgramError {
                        word,
                        kind: ProgramErrorKind::StackUnderflow { depth, op },
                    });
                }
                // Every operator, short-circuit ones included, pops two and pushes one (figure 9).
                depth -= 1;
            }
            insts.push(Instruction { action, op, word });
            i += 1;
        }
        Ok(Program {
            priority,
            words,
            insts,
            max_depth,
        })
    }

    /// The filter's priority: filters are applied in decreasing priority (section 3.2). It is
    /// metadata for the demultiplexer; the predicate does not depend on it.
    pub fn priority(&self) -> u8 {
        self.priority
    }

    /// The encoded words (literals included), as `enf_Filter` holds them.
    pub fn words(&self) -> &[u16] {
        &self.words
    }

    pub fn instructions(&self) -> &[Instruction] {
        &self.insts
    }

    /// The deepest the stack gets.
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// The highest packet word any instruction pushes, if any. A packet shorter than
    /// `2 * (n + 1)` bytes may still be decided by a short-circuit operator before that word.
    pub fn max_packet_word(&self) -> Option<u16> {
        self.insts
            .iter()
            .filter_map(|i| match i.action {
                Action::PushWord(n) => Some(n),
                _ => None,
            })
            .max()
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::NoPush => write!(f, "NOPUSH"),
            Action::PushLit(_) => write!(f, "PUSHLIT"),
            Action::PushZero => write!(f, "PUSHZERO"),
            Action::PushOne => write!(f, "PUSHONE"),
            Action::PushFfff => write!(f, "PUSHFFFF"),
            Action::PushFf00 => write!(f, "PUSHFF00"),
            Action::Push00ff => write!(f, "PUSH00FF"),
            Action::PushWord(n) => write!(f, "PUSHWORD+{n}"),
        }
    }
}

impl fmt::Display for Instruction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.action, self.op) {
            (Action::NoPush, op) => write!(f, "{}", op.name())?,
            (a, Operator::Nop) => write!(f, "{a}")?,
            (a, op) => write!(f, "{a} | {}", op.name())?,
        }
        if let Action::PushLit(k) = self.action {
            write!(f, ", {k:#06x}")?;
        }
        Ok(())
    }
}

/// Prints the program in the paper's notation, as a `struct enfilter` initializer that
/// [`super::parse`] reads back.
impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "struct enfilter f = {{")?;
        write!(f, "    {}, {},", self.priority, self.words.len())?;
        for inst in &self.insts {
            write!(f, "\n    {inst},")?;
        }
        write!(f, "\n}};")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_matches_the_headers() {
        assert_eq!(Operator::Eq.code(), 1 << 10);
        assert_eq!(Operator::Neq.code(), 13 << 10);
        assert_eq!(Operator::Cnand.code(), 12 << 10);
        assert_eq!(Action::PushWord(3).code(), 19);
        assert_eq!(decode_word(ENF_PUSHLIT | Operator::Cand.code()), {
            Decoded::Valid(Action::PushLit(0), Operator::Cand)
        });
        assert_eq!(decode_word(7), Decoded::InvalidAction(7));
        assert_eq!(decode_word(14 << 10), Decoded::InvalidOperator(14));
        assert_eq!(
            decode_word(ACTION_MASK),
            Decoded::Valid(Action::PushWord(MAX_PUSHWORD), Operator::Nop)
        );
    }

    #[test]
    fn static_checks_report_word_indexes() {
        let eq = Operator::Eq.code();
        let err = |words: Vec<u16>| Program::new(0, words).unwrap_err();
        assert_eq!(
            err(vec![ENF_PUSHONE, ENF_PUSHLIT | eq]).kind,
            ProgramErrorKind::MissingLiteral
        );
        let e = err(vec![ENF_PUSHONE, ENF_PUSHZERO | eq, eq]);
        assert_eq!(e.word, 2);
        assert!(matches!(
            e.kind,
            ProgramErrorKind::StackUnderflow { depth: 1, .. }
        ));
        assert_eq!(
            err(vec![ENF_PUSHONE, 9]).kind,
            ProgramErrorKind::InvalidAction(9)
        );
        assert_eq!(
            err(vec![40 << 10]).kind,
            ProgramErrorKind::InvalidOperator(40)
        );
        let e = err(vec![ENF_PUSHONE; 41]);
        assert_eq!(
            (e.word, e.kind),
            (40, ProgramErrorKind::TooLong { len: 41, max: 40 })
        );
        let e = err(vec![ENF_PUSHONE; 39]);
        assert_eq!(
            (e.word, e.kind),
            (38, ProgramErrorKind::StackOverflow { max: 38 })
        );
        let p = Program::new(3, vec![ENF_PUSHWORD + 1, ENF_PUSHLIT | eq, 2]).unwrap();
        assert_eq!(
            (p.priority(), p.max_depth(), p.max_packet_word()),
            (3, 2, Some(1))
        );
        assert_eq!(p.instructions().len(), 2);
        // A literal that looks like an invalid instruction is data, not an instruction.
        assert!(Program::new(0, vec![ENF_PUSHLIT, 0xFFFF]).is_ok());
    }
}
