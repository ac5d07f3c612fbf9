//! The reference interpreter: runs an MPF program directly, for one filter or for a group of
//! filters collapsed into one program.
//!
//! A collapsed group runs the common code once, for a *set* of endpoints: a match instruction
//! splits the set into those whose keys equal the scratch words and the rest, and each part
//! continues on its own path (at most one path per endpoint). The result is, per endpoint,
//! exactly what running that endpoint's own program would give — collapsing is an optimization,
//! never a change of meaning (see [`crate::mpf`] for where this differs from Mach).
//!
//! Classic instructions mean what they mean in `sift_bpf::interp` (libpcap's `bpf_filter`): `A`,
//! `X` and `M[]` start at 0, an out-of-packet load or a division by zero rejects.

use std::collections::BTreeSet;

use sift_bpf::interp::{alu, load};
use sift_bpf::{Op, Size, Src};

use super::program::{Insn, Length, Program};

/// A set of endpoints, numbered `0..total`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoints {
    /// Every endpoint but these.
    AllBut {
        total: u32,
        except: BTreeSet<u32>,
    },
    Only(BTreeSet<u32>),
}

impl Endpoints {
    /// All `total` endpoints.
    pub fn all(total: u32) -> Endpoints {
        Endpoints::AllBut {
            total,
            except: BTreeSet::new(),
        }
    }

    pub fn contains(&self, e: u32) -> bool {
        match self {
            Endpoints::AllBut { total, except } => e < *total && !except.contains(&e),
            Endpoints::Only(set) => set.contains(&e),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Endpoints::AllBut { total, except } => except.len() as u64 >= u64::from(*total),
            Endpoints::Only(set) => set.is_empty(),
        }
    }

    /// The members, in increasing order.
    pub fn members(&self) -> Vec<u32> {
        match self {
            Endpoints::AllBut { total, except } => {
                (0..*total).filter(|e| !except.contains(e)).collect()
            }
            Endpoints::Only(set) => set.iter().copied().collect(),
        }
    }

    /// This set without `removed` (a subset of it).
    fn without(&self, removed: &BTreeSet<u32>) -> Endpoints {
        match self {
            Endpoints::AllBut { total, except } => Endpoints::AllBut {
                total: *total,
                except: except.union(removed).copied().collect(),
            },
            Endpoints::Only(set) => Endpoints::Only(set.difference(removed).copied().collect()),
        }
    }
}

/// How a run ended for a set of endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Deliver this many bytes (never 0).
    Deliver(u32),
    Reject,
    /// Run again later; drop `timeout_ms` after the first postponement.
    Postpone {
        timeout_ms: u32,
    },
}

/// What the match and data instructions consult: the key tables and the static memory.
pub(crate) trait Env {
    /// The endpoints among `among` whose keys for the match instruction at `slot` are `values`.
    fn match_keys(&self, slot: usize, values: &[u32], among: &Endpoints) -> BTreeSet<u32>;
    /// `None` if no endpoint of the group has `values` registered; otherwise the endpoints
    /// among `among` that do.
    fn match_data(&self, values: &[u32], among: &Endpoints) -> Option<BTreeSet<u32>>;
    /// Registers `values` for `owners`.
    fn register(&mut self, values: &[u32], owners: &Endpoints, timeout_ms: u32);
}

/// One filter on its own, with no static memory: the keys are the program's own.
struct Alone<'p>(&'p Program);

impl Env for Alone<'_> {
    fn match_keys(&self, slot: usize, values: &[u32], among: &Endpoints) -> BTreeSet<u32> {
        let hit = among.contains(0) && self.0.keys_at(slot) == values;
        hit.then_some(0).into_iter().collect()
    }
    fn match_data(&self, _: &[u32], _: &Endpoints) -> Option<BTreeSet<u32>> {
        None
    }
    fn register(&mut self, _: &[u32], _: &Endpoints, _: u32) {}
}

/// Runs one program alone on a packet and returns its return value (0 rejects), with `ALL`
/// meaning `u32::MAX`. Stateful instructions see an empty static memory (`ret_match_data`
/// never matches, `register_data` is forgotten) and `postpone` rejects: for a stateless program
/// this is its whole meaning, and what [`super::lift()`] computes.
pub fn run(program: &Program, packet: &[u8], wire_len: u32) -> u32 {
    run_with(program, packet, wire_len, u32::MAX)
}

/// [`run`] with `ALL` meaning `all`.
pub fn run_with(program: &Program, packet: &[u8], wire_len: u32, all: u32) -> u32 {
    let fates = execute(
        program,
        &mut Alone(program),
        packet,
        wire_len,
        all,
        Endpoints::all(1),
    );
    fates
        .into_iter()
        .find_map(|(who, fate)| match fate {
            Fate::Deliver(n) if who.contains(0) => Some(n),
            _ => None,
        })
        .unwrap_or(0)
}

fn deliver(len: Length, all: u32) -> Fate {
    match len.value(all) {
        0 => Fate::Reject,
        n => Fate::Deliver(n),
    }
}

/// A path through the program for a set of endpoints.
struct Path {
    pc: usize,
    a: u32,
    x: u32,
    mem: [u32; 16],
    who: Endpoints,
}

/// Runs `program` for the endpoints `who`; returns how it ended for each part of the set (the
/// parts are disjoint; endpoints the program never reached a verdict for do not occur).
pub(crate) fn execute(
    program: &Program,
    env: &mut dyn Env,
    packet: &[u8],
    wire_len: u32,
    all: u32,
    who: Endpoints,
) -> Vec<(Endpoints, Fate)> {
    let insns = program.insns();
    let mut out = Vec::new();
    let mut paths = vec![Path {
        pc: 0,
        a: 0,
        x: 0,
        mem: [0; 16],
        who,
    }];
    while let Some(mut p) = paths.pop() {
        // Each step moves forward (the program was checked), so every path ends.
        let fate = loop {
            if p.who.is_empty() {
                break None;
            }
            let Some(&insn) = insns.get(p.pc) else {
                break Some(Fate::Reject);
            };
            let next = p.pc + 1;
            match insn {
                Insn::Classic(c) => {
                    let k = c.k;
                    let Some(op) = c.decode() else {
                        break Some(Fate::Reject);
                    };
                    match op {
                        Op::LdAbs(s) => match load(packet, 0, k, s) {
                            Some(v) => p.a = v,
                            None => break Some(Fate::Reject),
                        },
                        Op::LdInd(s) => match load(packet, p.x, k, s) {
                            Some(v) => p.a = v,
                            None => break Some(Fate::Reject),
                        },
                        Op::LdLen => p.a = wire_len,
                        Op::LdImm => p.a = k,
                        Op::LdMem => p.a = p.mem[(k & 15) as usize],
                        Op::LdxImm => p.x = k,
                        Op::LdxMem => p.x = p.mem[(k & 15) as usize],
                        Op::LdxLen => p.x = wire_len,
                        Op::LdxMsh => match load(packet, 0, k, Size::Byte) {
                            Some(v) => p.x = (v & 0xf) << 2,
                            None => break Some(Fate::Reject),
                        },
                        Op::St => p.mem[(k & 15) as usize] = p.a,
                        Op::Stx => p.mem[(k & 15) as usize] = p.x,
                        Op::Alu(op, src) => {
                            let b = if src == Src::X { p.x } else { k };
                            match alu(op, src, p.a, b) {
                                Some(v) => p.a = v,
                                None => break Some(Fate::Reject),
                            }
                        }
                        Op::Neg => p.a = p.a.wrapping_neg(),
                        Op::Tax => p.x = p.a,
                        Op::Txa => p.a = p.x,
                        Op::Ja => {
                            p.pc = next.saturating_add(k as usize);
                            continue;
                        }
                        Op::Jmp(cond, src) => {
                            let b = if src == Src::X { p.x } else { k };
                            let off = if cond.eval(p.a, b) { c.jt } else { c.jf };
                            p.pc = next + usize::from(off);
                            continue;
                        }
                        Op::RetK => break Some(deliver(Length::Bytes(k), all)),
                        Op::RetA => break Some(deliver(Length::Bytes(p.a), all)),
                    }
                    p.pc = next;
                }
                Insn::RetAll => break Some(deliver(Length::All, all)),
                Insn::RetMatchImm { count, len } => {
                    let values = &p.mem[..usize::from(count)];
                    let hit = env.match_keys(p.pc, values, &p.who);
                    let rest = p.who.without(&hit);
                    if !hit.is_empty() {
                        out.push((Endpoints::Only(hit), deliver(len, all)));
                    }
                    if !rest.is_empty() {
                        out.push((rest, Fate::Reject));
                    }
                    break None;
                }
                Insn::JmpMatchImm { count, jt, jf } => {
                    let values = &p.mem[..usize::from(count)];
                    let hit = env.match_keys(p.pc, values, &p.who);
                    if !hit.is_empty() {
                        paths.push(Path {
                            pc: next + usize::from(jt),
                            a: p.a,
                            x: p.x,
                            mem: p.mem,
                            who: Endpoints::Only(hit.clone()),
                        });
                    }
                    p.who = p.who.without(&hit);
                    p.pc = next + usize::from(jf);
                }
                Insn::Key(_) => break Some(Fate::Reject),
                Insn::RegisterData { count, timeout_ms } => {
                    env.register(&p.mem[..usize::from(count)], &p.who, timeout_ms);
                    p.pc = next;
                }
                Insn::RetMatchData { count, len } => {
                    // Registered data has an owner: the run ends, delivering to the owners on
                    // this path. Only data nobody registered lets the program continue.
                    match env.match_data(&p.mem[..usize::from(count)], &p.who) {
                        None => p.pc = next,
                        Some(hit) => {
                            let rest = p.who.without(&hit);
                            if !hit.is_empty() {
                                out.push((Endpoints::Only(hit), deliver(len, all)));
                            }
                            if !rest.is_empty() {
                                out.push((rest, Fate::Reject));
                            }
                            break None;
                        }
                    }
                }
                Insn::Postpone { timeout_ms } => break Some(Fate::Postpone { timeout_ms }),
            }
        };
        if let Some(fate) = fate {
            if !p.who.is_empty() {
                out.push((p.who, fate));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpf::parse;

    #[test]
    fn runs_classic_and_match_instructions() {
        let p = parse("ldb [0]\nst M[0]\nldb [1]\nst M[1]\nret_match_imm #2, #ALL\nkey 1\nkey 2\n")
            .unwrap();
        assert_eq!(run(&p, &[1, 2], 2), u32::MAX);
        assert_eq!(run_with(&p, &[1, 2], 2, 96), 96);
        assert_eq!(run(&p, &[1, 3], 2), 0);
        assert_eq!(run(&p, &[1], 2), 0);
    }

    #[test]
    fn jmp_match_imm_keeps_the_accumulator() {
        let p = parse(
            "ldb [0]\nst M[0]\nld #40\njmp_match_imm #1, yes, no\nkey 7\nyes: ret a\nno: ret #1\n",
        )
        .unwrap();
        assert_eq!(run(&p, &[7], 1), 40);
        assert_eq!(run(&p, &[8], 1), 1);
    }

    #[test]
    fn endpoint_sets() {
        let all = Endpoints::all(3);
        let rest = all.without(&[1].into_iter().collect());
        assert_eq!(rest.members(), vec![0, 2]);
        assert!(!rest.contains(1) && !rest.contains(3));
        assert!(rest.without(&[0, 2].into_iter().collect()).is_empty());
    }
}
