//! One instruction line: its mnemonic and operands into an [`Insn`] whose targets and table may
//! still be names.

use sift_ir::Chain;

use crate::insn::{AluOp, Cond, Insn, Key, Width};

use super::operands::{decimal, pattern_ref, Line, Ref, Word};
use super::{AsmError, AsmErrorKind};

/// An instruction whose targets may still be names.
pub(super) struct Parsed {
    pub(super) insn: Insn,
    pub(super) targets: Vec<(usize, Ref)>,
    pub(super) table: Option<Ref>,
}

pub(super) fn alu_op(m: &str) -> Option<AluOp> {
    AluOp::ALL.into_iter().find(|op| op.name() == m)
}

pub(super) fn cond(m: &str) -> Option<Cond> {
    Cond::ALL.into_iter().find(|c| c.mnemonic() == m)
}

pub(super) fn parse_insn(
    line: &Line,
    mnemonic: &str,
    column: usize,
    ops: &[Word<'_>],
) -> Result<Parsed, AsmError> {
    let arity = |n: usize| {
        if ops.len() == n {
            Ok(())
        } else {
            Err(line.err(
                column,
                AsmErrorKind::OperandCount {
                    expected: n,
                    found: ops.len(),
                },
            ))
        }
    };
    let plain = |insn| Parsed {
        insn,
        targets: Vec::new(),
        table: None,
    };
    let width = match mnemonic {
        "ld.b" => Some(Width::Byte),
        "ld.h" => Some(Width::Half),
        "ld.w" => Some(Width::Word),
        _ => None,
    };
    let chain = match mnemonic {
        "protochain.ip" => Some(Chain::Ip),
        "protochain.ip6" => Some(Chain::Ip6),
        _ => None,
    };
    if let Some(chain) = chain {
        arity(4)?;
        let (offset, base) = match line.address(&ops[2])? {
            (Some(offset), base) => (offset, base),
            (None, _) => {
                return Err(line.err(
                    ops[2].column,
                    AsmErrorKind::Expected("a header offset [rN+base]"),
                ))
            }
        };
        return Ok(plain(Insn::Protochain {
            dst: line.reg(&ops[0])?,
            chain,
            base,
            proto: line.reg(&ops[1])?,
            offset,
            target: line.number(&ops[3], "a protocol number")?,
        }));
    }
    if let Some(width) = width {
        arity(2)?;
        let (base, offset) = line.address(&ops[1])?;
        return Ok(plain(Insn::Load {
            width,
            dst: line.reg(&ops[0])?,
            base,
            offset,
        }));
    }
    if let Some(op) = alu_op(mnemonic) {
        arity(3)?;
        return Ok(plain(Insn::Alu {
            op,
            dst: line.reg(&ops[0])?,
            lhs: line.reg(&ops[1])?,
            rhs: line.operand(&ops[2])?,
        }));
    }
    if let Some(cond) = cond(mnemonic) {
        arity(4)?;
        return Ok(Parsed {
            insn: Insn::Branch {
                cond,
                lhs: line.reg(&ops[0])?,
                rhs: line.operand(&ops[1])?,
                then_: 0,
                else_: 0,
            },
            targets: vec![
                (0, line.target(&ops[2], '@')?),
                (1, line.target(&ops[3], '@')?),
            ],
            table: None,
        });
    }
    Ok(match mnemonic {
        "mov" => {
            arity(2)?;
            plain(Insn::Mov {
                dst: line.reg(&ops[0])?,
                src: line.operand(&ops[1])?,
            })
        }
        "len" => {
            arity(1)?;
            plain(Insn::WireLen {
                dst: line.reg(&ops[0])?,
            })
        }
        "neg" => {
            arity(2)?;
            plain(Insn::Neg {
                dst: line.reg(&ops[0])?,
                src: line.reg(&ops[1])?,
            })
        }
        "ldm" => {
            arity(2)?;
            plain(Insn::LoadScratch {
                dst: line.reg(&ops[0])?,
                slot: line.slot(&ops[1])?,
            })
        }
        "stm" => {
            arity(2)?;
            plain(Insn::StoreScratch {
                slot: line.slot(&ops[0])?,
                src: line.reg(&ops[1])?,
            })
        }
        "jmp" => {
            arity(1)?;
            Parsed {
                insn: Insn::Jump { target: 0 },
                targets: vec![(0, line.target(&ops[0], '@')?)],
                table: None,
            }
        }
        "switch" => {
            arity(3)?;
            Parsed {
                insn: Insn::Switch {
                    key: line.reg(&ops[0])?,
                    table: 0,
                    default: 0,
                },
                targets: vec![(0, line.target(&ops[2], '@')?)],
                table: Some(line.target(&ops[1], '#')?),
            }
        }
        "ret" => {
            arity(1)?;
            plain(Insn::Return {
                value: line.operand(&ops[0])?,
            })
        }
        "contains" => {
            arity(3)?;
            let (set, pattern) = pattern_ref(ops[1].text).ok_or_else(|| {
                line.err(ops[1].column, AsmErrorKind::Expected("a pattern (pN.M)"))
            })?;
            plain(Insn::Contains {
                dst: line.reg(&ops[0])?,
                set,
                pattern,
                start: line.reg(&ops[2])?,
            })
        }
        "member" => {
            if ops.len() != 3 && ops.len() != 6 {
                arity(if ops.len() > 3 { 6 } else { 3 })?;
            }
            let set = ops[1]
                .text
                .strip_prefix('s')
                .and_then(decimal)
                .ok_or_else(|| line.err(ops[1].column, AsmErrorKind::Expected("a set (sN)")))?;
            let key = if ops.len() == 3 {
                Key::W32(line.reg(&ops[2])?)
            } else {
                Key::W128([
                    line.reg(&ops[2])?,
                    line.reg(&ops[3])?,
                    line.reg(&ops[4])?,
                    line.reg(&ops[5])?,
                ])
            };
            plain(Insn::Member {
                dst: line.reg(&ops[0])?,
                set,
                key,
            })
        }
        _ => return Err(line.err(column, AsmErrorKind::UnknownMnemonic(mnemonic.to_owned()))),
    })
}
