//! The reference interpreter: the paper's semantics, run straightforwardly word by word with the
//! run-time checks the 1987 interpreter made (section 7: "the interpreter verifies that the
//! instruction is valid, that it doesn't overflow or underflow the evaluation stack, and that it
//! doesn't refer to a field outside the current packet"). It runs unchecked word arrays, so it
//! also shows that a [`Program`] that passed the static checks never fails the dynamic ones
//! except for packet bounds; and it is the oracle the IR lifting is tested against.

use super::program::{decode_word, Action, Decoded, Limits, Operator, Program};

/// Why the program stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Ran off the end; the verdict is the top of the stack (TRUE if the stack is empty, as the
    /// enet interpreter's stack starts with a TRUE below the program's values).
    End,
    /// A short-circuit operator at this word returned.
    ShortCircuit {
        word: usize,
    },
    /// `PUSHWORD+n` at this word named a word not entirely within the captured bytes.
    OutOfPacket {
        word: usize,
    },
    InvalidInstruction {
        word: usize,
    },
    MissingLiteral {
        word: usize,
    },
    StackUnderflow {
        word: usize,
    },
    StackOverflow {
        word: usize,
    },
}

/// The result of running a program on a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub accept: bool,
    pub exit: Exit,
}

/// Packet word `n`: bytes `2n` and `2n+1` in network byte order, if both were captured.
pub fn packet_word(packet: &[u8], n: u16) -> Option<u16> {
    let i = 2 * usize::from(n);
    Some(u16::from_be_bytes([*packet.get(i)?, *packet.get(i + 1)?]))
}

/// Runs a verified program.
pub fn run(program: &Program, packet: &[u8]) -> Outcome {
    // The static checks are the ones `run_words` makes at run time, with no lower limits.
    run_words(
        program.words(),
        packet,
        &Limits {
            max_words: usize::MAX,
            max_stack: usize::MAX,
        },
    )
}

/// Runs raw words with every check made at run time; any failed check rejects.
pub fn run_words(words: &[u16], packet: &[u8], limits: &Limits) -> Outcome {
    let reject = |exit| Outcome {
        accept: false,
        exit,
    };
    let mut stack: Vec<u16> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let word = i;
        let (action, op) = match decode_word(words[i]) {
            Decoded::Valid(a, o) => (a, o),
            Decoded::InvalidAction(_) | Decoded::InvalidOperator(_) => {
                return reject(Exit::InvalidInstruction { word })
            }
        };
        i += 1;
        let pushed = match action {
            Action::NoPush => None,
            Action::PushLit(_) => {
                let Some(&lit) = words.get(i) else {
                    return reject(Exit::MissingLiteral { word });
                };
                i += 1;
                Some(lit)
            }
            Action::PushWord(n) => match packet_word(packet, n) {
                Some(x) => Some(x),
                None => return reject(Exit::OutOfPacket { word }),
            },
            a => a.constant(),
        };
        if let Some(x) = pushed {
            if stack.len() >= limits.max_stack {
                return reject(Exit::StackOverflow { word });
            }
            stack.push(x);
        }
        if op == Operator::Nop {
            continue;
        }
        let (Some(t1), Some(t2)) = (stack.pop(), stack.pop()) else {
            return reject(Exit::StackUnderflow { word });
        };
        let result = match op.short_circuit() {
            Some(sc) => {
                let r = t1 == t2;
                if r == sc.exit_if {
                    return Outcome {
                        accept: sc.returns,
                        exit: Exit::ShortCircuit { word },
                    };
                }
                // The paper: "evaluate R := (T1 == T2) and push the result R on the stack".
                u16::from(r)
            }
            None => op.apply(t2, t1).unwrap_or(0),
        };
        stack.push(result);
    }
    Outcome {
        accept: !matches!(stack.last(), Some(0)),
        exit: Exit::End,
    }
}

#[cfg(test)]
mod tests {
    use super::super::program::*;
    use super::*;

    const EQ: u16 = 1 << 10;

    #[test]
    fn operators_follow_figure_9() {
        let lt = Operator::Lt.code();
        // T2 = 3 (pushed first), T1 = 5: LT computes T2 < T1.
        let prog = [ENF_PUSHLIT, 3, ENF_PUSHLIT | lt, 5];
        assert!(run_words(&prog, &[], &Limits::default()).accept);
        let prog = [ENF_PUSHLIT, 5, ENF_PUSHLIT | lt, 3];
        assert!(!run_words(&prog, &[], &Limits::default()).accept);
    }

    #[test]
    fn short_circuits_return_or_push() {
        let run = |op: Operator, a: u16, b: u16| {
            run_words(
                &[ENF_PUSHLIT, a, ENF_PUSHLIT | op.code(), b],
                &[],
                &Limits::default(),
            )
        };
        let sc = |word| Exit::ShortCircuit { word };
        assert_eq!(
            run(Operator::Cor, 1, 1),
            Outcome {
                accept: true,
                exit: sc(2)
            }
        );
        // Not equal: COR pushes R = FALSE and the program ends with it on top.
        assert_eq!(
            run(Operator::Cor, 1, 2),
            Outcome {
                accept: false,
                exit: Exit::End
            }
        );
        assert_eq!(
            run(Operator::Cand, 1, 2),
            Outcome {
                accept: false,
                exit: sc(2)
            }
        );
        assert_eq!(
            run(Operator::Cand, 2, 2),
            Outcome {
                accept: true,
                exit: Exit::End
            }
        );
        assert_eq!(
            run(Operator::Cnor, 2, 2),
            Outcome {
                accept: false,
                exit: sc(2)
            }
        );
        assert_eq!(
            run(Operator::Cnor, 1, 2),
            Outcome {
                accept: false,
                exit: Exit::End
            }
        );
        assert_eq!(
            run(Operator::Cnand, 1, 2),
            Outcome {
                accept: true,
                exit: sc(2)
            }
        );
        assert_eq!(
            run(Operator::Cnand, 2, 2),
            Outcome {
                accept: true,
                exit: Exit::End
            }
        );
    }

    #[test]
    fn dynamic_checks_reject() {
        let l = Limits::default();
        let pkt = [0u8, 1, 0, 2, 7];
        assert_eq!(packet_word(&pkt, 1), Some(2));
        // Word 2 would need byte 5, which is not there (odd-length packet).
        assert_eq!(
            run_words(&[ENF_PUSHWORD + 2], &pkt, &l).exit,
            Exit::OutOfPacket { word: 0 }
        );
        assert_eq!(
            run_words(&[EQ], &pkt, &l).exit,
            Exit::StackUnderflow { word: 0 }
        );
        assert_eq!(
            run_words(&[8], &pkt, &l).exit,
            Exit::InvalidInstruction { word: 0 }
        );
        assert_eq!(
            run_words(&[ENF_PUSHLIT], &pkt, &l).exit,
            Exit::MissingLiteral { word: 0 }
        );
        let many = vec![ENF_PUSHONE; 39];
        assert_eq!(
            run_words(&many, &pkt, &l).exit,
            Exit::StackOverflow { word: 38 }
        );
        // An empty program accepts (enet: "null filters always accept all packets").
        assert!(run_words(&[], &pkt, &l).accept);
    }
}
