//! Random programs for the property tests: arbitrary ones (any register, target or table,
//! valid or not) and well-formed ones that the verifier should accept.

#![allow(dead_code)]

use std::sync::Arc;

use sift_bytecode::{AluOp, Cond, Insn, Key, Operand, Program, Reg, Table, Width};
use sift_ir::{KeyWidth, Pattern, PatternSet, ValueSet};
use sift_testgen::Rng;

/// Below `max` pattern sets of 0 to 3 distinct patterns: literals (exact or ignoring case, with
/// bytes the text form must escape) and regular expressions.
pub fn pattern_sets(rng: &mut Rng, max: u64) -> Vec<Arc<PatternSet>> {
    let count = rng.below(max);
    const REGEXES: [&str; 4] = ["a+b", "^\\x01", "[0-9]{2}", "(?i)x.y"];
    (0..count)
        .map(|_| {
            let mut set = PatternSet::new();
            for _ in 0..rng.below(4) {
                let pattern = if rng.chance(1, 4) {
                    Pattern::Regex((*rng.pick(&REGEXES)).to_owned())
                } else {
                    let n = rng.range(1, 3) as usize;
                    let bytes = (0..n)
                        .map(|_| *rng.pick(&[0, 1, 7, b'a', b'B', b';', b'"', b'\\', 0xff]))
                        .collect();
                    Pattern::Literal {
                        bytes,
                        nocase: rng.chance(1, 2),
                    }
                };
                set.add(pattern).expect("valid pattern");
            }
            Arc::new(set)
        })
        .collect()
}

/// Below `max` value sets of either width, with small ranges (so random keys hit them) and
/// extremes.
pub fn value_sets(rng: &mut Rng, max: u64) -> Vec<Arc<ValueSet>> {
    let count = rng.below(max);
    (0..count)
        .map(|_| {
            let width = if rng.chance(1, 3) {
                KeyWidth::W128
            } else {
                KeyWidth::W32
            };
            let ranges: Vec<(u128, u128)> = (0..rng.below(5))
                .map(|_| {
                    let lo = match rng.below(4) {
                        0 => u128::from(rng.next_u32()),
                        1 => width.max() - u128::from(rng.below(3) as u32),
                        _ => u128::from(rng.below(10) as u32),
                    };
                    (lo, lo.saturating_add(u128::from(rng.below(3) as u32)))
                })
                .collect();
            Arc::new(ValueSet::new(width, ranges))
        })
        .collect()
}

fn reg(rng: &mut Rng, regs: u8) -> Reg {
    if regs == 0 {
        return Reg(rng.byte());
    }
    Reg(rng.below(u64::from(regs)) as u8)
}

fn imm(rng: &mut Rng) -> u32 {
    match rng.below(4) {
        0 => rng.next_u32(),
        1 => u32::MAX - rng.below(3) as u32,
        _ => rng.below(64) as u32,
    }
}

fn operand(rng: &mut Rng, regs: u8) -> Operand {
    if rng.chance(1, 2) {
        Operand::Reg(reg(rng, regs))
    } else {
        Operand::Imm(imm(rng))
    }
}

/// One instruction at index `i` of `n`. `regs == 0` means any register number; `forward`
/// keeps targets in `i+1..n`; `tables` is the number of tables to refer to.
fn insn(rng: &mut Rng, i: usize, n: usize, regs: u8, forward: bool, tables: u32) -> Insn {
    let target = |rng: &mut Rng| -> u32 {
        if forward {
            rng.range(i as u64 + 1, n as u64 - 1) as u32
        } else {
            rng.below(n as u64 + 3) as u32
        }
    };
    let last = i + 1 >= n;
    let choice = if last { 11 } else { rng.below(14) };
    match choice {
        0 => Insn::Mov {
            dst: reg(rng, regs),
            src: operand(rng, regs),
        },
        1 => Insn::WireLen {
            dst: reg(rng, regs),
        },
        2 | 3 => Insn::Load {
            width: *rng.pick(&Width::ALL),
            dst: reg(rng, regs),
            base: if rng.chance(1, 2) {
                Some(reg(rng, regs))
            } else {
                None
            },
            offset: if rng.chance(7, 8) {
                rng.below(40) as u32
            } else {
                imm(rng)
            },
        },
        4 | 5 => Insn::Alu {
            op: *rng.pick(&AluOp::ALL),
            dst: reg(rng, regs),
            lhs: reg(rng, regs),
            rhs: operand(rng, regs),
        },
        6 => Insn::Neg {
            dst: reg(rng, regs),
            src: reg(rng, regs),
        },
        7 if regs == 0 => Insn::LoadScratch {
            dst: reg(rng, regs),
            slot: rng.below(20) as u16,
        },
        7 => Insn::StoreScratch {
            slot: rng.below(4) as u16,
            src: reg(rng, regs),
        },
        8 if !forward => Insn::Jump {
            target: target(rng),
        },
        8 | 9 => Insn::Branch {
            cond: *rng.pick(&Cond::ALL),
            lhs: reg(rng, regs),
            rhs: operand(rng, regs),
            then_: target(rng),
            else_: target(rng),
        },
        10 if tables > 0 || !forward => Insn::Switch {
            key: reg(rng, regs),
            table: rng.below(u64::from(tables) + if forward { 0 } else { 2 }) as u32,
            default: target(rng),
        },
        12 => Insn::Contains {
            dst: reg(rng, regs),
            set: rng.below(3) as u32,
            pattern: rng.below(4) as u32,
            start: reg(rng, regs),
        },
        13 => Insn::Member {
            dst: reg(rng, regs),
            set: rng.below(3) as u32,
            key: if rng.chance(1, 2) {
                Key::W32(reg(rng, regs))
            } else {
                Key::W128(std::array::from_fn(|_| reg(rng, regs)))
            },
        },
        _ => Insn::Return {
            value: operand(rng, regs),
        },
    }
}

/// Any program: registers, slots, targets and tables may be out of range.
pub fn arbitrary_program(rng: &mut Rng) -> Program {
    let n = rng.below(30) as usize;
    let tables = rng.below(3) as u32;
    Program {
        scratch_words: if rng.chance(1, 8) {
            rng.u16()
        } else {
            rng.below(20) as u16
        },
        code: (0..n).map(|i| insn(rng, i, n, 0, false, tables)).collect(),
        tables: (0..tables)
            .map(|_| Table {
                entries: (0..rng.below(5))
                    .map(|_| (imm(rng), rng.below(n as u64 + 2) as u32))
                    .collect(),
            })
            .collect(),
        patterns: pattern_sets(rng, 3),
        sets: value_sets(rng, 3),
    }
}

/// Makes the coprocessor calls of a program valid: each names an existing pattern or set (with
/// the right key width), or, if the program has none, becomes a move.
pub fn fix_calls(p: &mut Program, rng: &mut Rng) {
    for insn in &mut p.code {
        match *insn {
            Insn::Contains { dst, start, .. } => {
                let sets: Vec<usize> = (0..p.patterns.len())
                    .filter(|&s| !p.patterns[s].is_empty())
                    .collect();
                *insn = match sets.is_empty() {
                    true => Insn::Mov {
                        dst,
                        src: Operand::Reg(start),
                    },
                    false => {
                        let set = *rng.pick(&sets);
                        Insn::Contains {
                            dst,
                            set: set as u32,
                            pattern: rng.below(p.patterns[set].len() as u64) as u32,
                            start,
                        }
                    }
                };
            }
            Insn::Member { dst, key, .. } => {
                if p.sets.is_empty() {
                    *insn = Insn::Mov {
                        dst,
                        src: Operand::Reg(key.regs()[0]),
                    };
                    continue;
                }
                let set = rng.below(p.sets.len() as u64) as u32;
                let k = key.regs();
                let key = match p.sets[set as usize].width() {
                    KeyWidth::W32 => Key::W32(k[0]),
                    KeyWidth::W128 => Key::W128(std::array::from_fn(|i| k[i % k.len()])),
                };
                *insn = Insn::Member { dst, set, key };
            }
            _ => {}
        }
    }
}

/// A program the verifier should accept: registers r0..r3 and scratch m0..m3 are written first,
/// every target is forward, tables are sorted and point past every switch (placed at the
/// start, so tables target the second half).
pub fn valid_program(rng: &mut Rng) -> Program {
    let n = 10 + rng.below(30) as usize;
    let mut code: Vec<Insn> = Vec::new();
    for r in 0..4u8 {
        code.push(Insn::Mov {
            dst: Reg(r),
            src: Operand::Imm(imm(rng)),
        });
        code.push(Insn::StoreScratch {
            slot: u16::from(r),
            src: Reg(r),
        });
    }
    let first = code.len();
    let total = first + n;
    let tables = 1 + rng.below(2) as u32;
    for i in first..total {
        let mut x = insn(rng, i, total, 4, true, tables);
        if let Insn::Switch { .. } = x {
            if i >= total / 2 {
                x = Insn::Return {
                    value: Operand::Imm(1),
                };
            }
        }
        code.push(x);
    }
    let tables = (0..tables)
        .map(|_| {
            let mut keys: Vec<u32> = (0..rng.below(6)).map(|_| rng.below(8) as u32).collect();
            keys.sort_unstable();
            keys.dedup();
            Table {
                entries: keys
                    .into_iter()
                    .map(|k| (k, rng.range(total as u64 / 2 + 1, total as u64 - 1) as u32))
                    .collect(),
            }
        })
        .collect();
    let mut p = Program {
        scratch_words: 4,
        code,
        tables,
        patterns: pattern_sets(rng, 3),
        sets: value_sets(rng, 3),
    };
    fix_calls(&mut p, rng);
    p
}

pub fn random_packet(rng: &mut Rng) -> Vec<u8> {
    let n = rng.index(48);
    (0..n)
        .map(|_| {
            if rng.chance(1, 2) {
                rng.below(8) as u8
            } else {
                rng.byte()
            }
        })
        .collect()
}
