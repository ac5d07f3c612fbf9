//! The JIT against the interpreter on random verified bytecode: every instruction form, every
//! condition and operation, switches of every size, loads at the packet's edge and beyond, shift
//! amounts and divisors at their edge cases, and equality chains over adjacent fields (the
//! shapes coalescing and byte-order swapping rewrite), each run at every truncation of a packet
//! whose contents the program's constants are drawn from.

mod common;

use common::{compare, option_sets, GuardedPage};
use std::sync::Arc;

use sift_bytecode::{verify, AluOp, Cache, Cond, Insn, Key, Operand, Program, Reg, Table, Width};
use sift_ir::{KeyWidth, Pattern, PatternSet, ValueSet};
use sift_jit::JitFilter;
use sift_testgen::Rng;

/// A constant the program may compare a field with: often the packet's own bytes.
fn constant(rng: &mut Rng, packet: &[u8], width: Width) -> u32 {
    let w = width.bytes() as usize;
    if packet.len() >= w && rng.chance(2, 3) {
        let at = rng.index(packet.len() - w + 1);
        packet[at..at + w]
            .iter()
            .fold(0u32, |acc, &b| (acc << 8) | u32::from(b))
    } else {
        let random = rng.next_u32();
        *rng.pick(&[0, 1, 2, 4, 6, 17, 0x800, 0xffff, 0x1_0000, u32::MAX, random])
    }
}

fn reg(rng: &mut Rng) -> Reg {
    Reg(rng.below(16) as u8)
}

fn offset(rng: &mut Rng) -> u32 {
    match rng.below(10) {
        0 => rng.next_u32(),
        1 => u32::MAX - rng.below(4) as u32,
        _ => rng.below(72) as u32,
    }
}

fn operand(rng: &mut Rng, packet: &[u8]) -> Operand {
    if rng.chance(1, 2) {
        Operand::Reg(reg(rng))
    } else {
        Operand::Imm(match rng.below(4) {
            0 => rng.below(40) as u32,
            1 => {
                let width = *rng.pick(&Width::ALL);
                constant(rng, packet, width)
            }
            _ => rng.below(8) as u32,
        })
    }
}

/// A random program whose reads are all defined: the prologue writes every register and
/// scratch slot, the body only branches forward.
fn program(rng: &mut Rng, packet: &[u8]) -> Program {
    let mut code = Vec::new();
    let scratch_words = rng.below(4) as u16;
    for r in 0..16 {
        let dst = Reg(r);
        code.push(match rng.below(3) {
            0 => Insn::WireLen { dst },
            1 => Insn::Load {
                width: *rng.pick(&Width::ALL),
                dst,
                base: None,
                offset: rng.below(40) as u32,
            },
            _ => Insn::Mov {
                dst,
                src: Operand::Imm(rng.below(64) as u32),
            },
        });
    }
    for slot in 0..scratch_words {
        code.push(Insn::StoreScratch {
            slot,
            src: reg(rng),
        });
    }
    let body = 4 + rng.index(40);
    let end = code.len() + body; // index of the first return
    let returns = 4;
    let total = end + returns;
    let mut tables = Vec::new();
    let target = |rng: &mut Rng, at: usize| (at + 1 + rng.index(total - at - 1)) as u32;
    while code.len() < end {
        let at = code.len();
        let insn = match rng.below(16) {
            0..=2 => {
                let base = rng.chance(1, 3).then(|| reg(rng));
                Insn::Load {
                    width: *rng.pick(&Width::ALL),
                    dst: reg(rng),
                    base,
                    offset: offset(rng),
                }
            }
            3..=5 => Insn::Alu {
                op: *rng.pick(&AluOp::ALL),
                dst: reg(rng),
                lhs: reg(rng),
                rhs: operand(rng, packet),
            },
            6 => Insn::Neg {
                dst: reg(rng),
                src: reg(rng),
            },
            7 if scratch_words > 0 => {
                let slot = rng.below(u64::from(scratch_words)) as u16;
                if rng.chance(1, 2) {
                    Insn::LoadScratch {
                        dst: reg(rng),
                        slot,
                    }
                } else {
                    Insn::StoreScratch {
                        slot,
                        src: reg(rng),
                    }
                }
            }
            8..=10 => Insn::Branch {
                cond: *rng.pick(&Cond::ALL),
                lhs: reg(rng),
                rhs: operand(rng, packet),
                then_: target(rng, at),
                else_: target(rng, at),
            },
            11 if at + 4 < end => {
                // An equality chain over adjacent fields with a common exit.
                let width = *rng.pick(&[Width::Half, Width::Word]);
                let k = rng.below(40) as u32;
                let exit = target(rng, at + 3);
                let second = k + width.bytes();
                for (i, off) in [k, second].into_iter().enumerate() {
                    let dst = Reg(i as u8);
                    code.push(Insn::Load {
                        width,
                        dst,
                        base: None,
                        offset: off,
                    });
                    let c = if rng.chance(3, 4) && packet.len() >= (off + width.bytes()) as usize {
                        packet[off as usize..(off + width.bytes()) as usize]
                            .iter()
                            .fold(0u32, |acc, &b| (acc << 8) | u32::from(b))
                    } else {
                        constant(rng, packet, width)
                    };
                    let next = code.len() as u32 + 1;
                    let (cond, then_, else_) = if rng.chance(1, 2) {
                        (Cond::Eq, next, exit)
                    } else {
                        (Cond::Ne, exit, next)
                    };
                    code.push(Insn::Branch {
                        cond,
                        lhs: dst,
                        rhs: Operand::Imm(c),
                        then_,
                        else_,
                    });
                }
                continue;
            }
            12 if rng.chance(1, 2) && at + 6 < end => {
                // A branch, and on each side a load and a `switch` on one table (as a host set
                // tests IPv4 and ARP fields: the JIT may share such lookups).
                let n = *rng.pick(&[1usize, 2, 3, 5, 20]);
                let mut keys: Vec<u32> = (0..n)
                    .map(|_| match rng.below(2) {
                        0 => constant(rng, packet, Width::Word),
                        _ => rng.below(4) as u32,
                    })
                    .collect();
                keys.sort_unstable();
                keys.dedup();
                let entries: Vec<(u32, u32)> =
                    keys.into_iter().map(|k| (k, target(rng, at + 4))).collect();
                code.push(Insn::Branch {
                    cond: *rng.pick(&Cond::ALL),
                    lhs: reg(rng),
                    rhs: operand(rng, packet),
                    then_: at as u32 + 1,
                    else_: at as u32 + 3,
                });
                let width = *rng.pick(&Width::ALL);
                for _side in 0..2 {
                    let dst = reg(rng);
                    code.push(Insn::Load {
                        width,
                        dst,
                        base: None,
                        offset: offset(rng),
                    });
                    tables.push(Table {
                        entries: entries.clone(),
                    });
                    code.push(Insn::Switch {
                        key: dst,
                        table: tables.len() as u32 - 1,
                        default: target(rng, at + 4),
                    });
                }
                continue;
            }
            12 => {
                let n = *rng.pick(&[1usize, 2, 3, 5, 8, 20, 70, 200]);
                let mut keys: Vec<u32> = (0..n)
                    .map(|_| match rng.below(3) {
                        0 => rng.below(n as u64 * 2) as u32,
                        1 => constant(rng, packet, Width::Word),
                        _ => rng.next_u32(),
                    })
                    .collect();
                keys.sort_unstable();
                keys.dedup();
                let entries = keys.into_iter().map(|k| (k, target(rng, at))).collect();
                tables.push(Table { entries });
                Insn::Switch {
                    key: reg(rng),
                    table: tables.len() as u32 - 1,
                    default: target(rng, at),
                }
            }
            13 if rng.chance(1, 2) => Insn::Jump {
                target: target(rng, at),
            },
            13 => {
                // A coprocessor call (the tables are below), its operands any registers.
                if rng.chance(1, 2) {
                    Insn::Contains {
                        dst: reg(rng),
                        set: 0,
                        pattern: rng.below(3) as u32,
                        start: reg(rng),
                    }
                } else {
                    let set = rng.below(2) as u32;
                    let key = match set {
                        0 => Key::W32(reg(rng)),
                        _ => Key::W128(std::array::from_fn(|_| reg(rng))),
                    };
                    Insn::Member {
                        dst: reg(rng),
                        set,
                        key,
                    }
                }
            }
            14 => Insn::Return {
                value: operand(rng, packet),
            },
            _ => Insn::Mov {
                dst: reg(rng),
                src: operand(rng, packet),
            },
        };
        code.push(insn);
    }
    code.truncate(end);
    for _ in 0..returns {
        code.push(Insn::Return {
            value: if rng.chance(1, 2) {
                Operand::Imm(rng.below(3) as u32)
            } else {
                Operand::Reg(reg(rng))
            },
        });
    }
    // Chains may have overshot `end` before the truncation: retarget out-of-range targets.
    let n = code.len() as u32;
    for insn in &mut code {
        let fix = |t: &mut u32| *t = (*t).min(n - 1);
        match insn {
            Insn::Jump { target } => fix(target),
            Insn::Branch { then_, else_, .. } => {
                fix(then_);
                fix(else_);
            }
            Insn::Switch { default, .. } => fix(default),
            _ => {}
        }
    }
    Program {
        scratch_words,
        code,
        tables,
        patterns: vec![Arc::new(patterns(rng, packet))],
        sets: vec![
            Arc::new(values(rng, packet, KeyWidth::W32)),
            Arc::new(values(rng, packet, KeyWidth::W128)),
        ],
    }
}

/// Three patterns, mostly pieces of the packet.
fn patterns(rng: &mut Rng, packet: &[u8]) -> PatternSet {
    let mut set = PatternSet::new();
    while set.len() < 3 {
        let bytes = if packet.len() >= 2 && rng.chance(3, 4) {
            let at = rng.index(packet.len() - 1);
            packet[at..at + 1 + rng.index(2)].to_vec()
        } else {
            let n = 1 + rng.index(2);
            rng.bytes(n)
        };
        let pattern = if rng.chance(1, 6) {
            Pattern::Regex("(?-u:[\\x00-\\x10]{2})".into())
        } else {
            Pattern::Literal {
                bytes,
                nocase: rng.chance(1, 2),
            }
        };
        let _ = set.add(pattern);
    }
    set
}

/// Keys the registers may hold: packet fields, small numbers, wire lengths.
fn values(rng: &mut Rng, packet: &[u8], width: KeyWidth) -> ValueSet {
    let ranges: Vec<(u128, u128)> = (0..rng.below(6))
        .map(|_| {
            let lo = match rng.below(3) {
                0 => {
                    let width = *rng.pick(&Width::ALL);
                    u128::from(constant(rng, packet, width))
                }
                1 => u128::from(rng.below(64) as u32),
                _ => u128::from(rng.next_u32()),
            };
            (lo, lo + u128::from(rng.below(4) as u32))
        })
        .collect();
    ValueSet::new(width, ranges)
}

#[test]
fn jit_equals_interpreter_on_random_programs() {
    if !sift_jit::supported() {
        return;
    }
    let mut rng = Rng::new(0x0b17_c0de);
    let (mut verified, mut runs) = (0, 0);
    let mut cache = Cache::new();
    let mut guard = GuardedPage::new();
    let options = option_sets();
    for case in 0..3000 {
        let len = rng.index(90);
        let mut packet = rng.bytes(len);
        let program = program(&mut rng, &packet);
        let Ok(program) = verify(program) else {
            continue;
        };
        verified += 1;
        let jit = JitFilter::compile_with(&program, &options[case % options.len()])
            .unwrap_or_else(|e| panic!("{e}\n{program}"));
        for round in 0..3 {
            let wire = packet.len() as u32 + rng.below(3) as u32;
            match compare(&mut guard, &program, &jit, &packet, wire, true, &mut cache) {
                Ok(n) => runs += n,
                Err(e) => panic!("case {case}: {e}"),
            }
            // Mutate a byte, so the other sides of the branches run too.
            if !packet.is_empty() && round < 2 {
                let i = rng.index(packet.len());
                packet[i] = rng.byte();
            }
        }
    }
    eprintln!("{verified} verified random programs, {runs} runs compared");
    assert!(
        verified > 2000,
        "the generator should mostly produce valid programs"
    );
}
