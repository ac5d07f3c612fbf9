//! The interpreter fuses instruction sequences into superinstructions and picks a search per
//! lookup table at load time. These tests hold it to a plain, one-instruction-at-a-time
//! evaluator written here from the specification (`docs/bytecode.md`), on random programs made
//! of exactly the sequences it fuses (and near misses: another register, a jump landing inside a
//! sequence, a mask other than 15, bounds in the wrong order), over random short packets, many
//! of them too short for the loads.

mod common;

use sift_bytecode::{verify, AluOp, Cache, Cond, Insn, Operand, Program, Reg, Table, Width};
use sift_testgen::Rng;

/// The specification, one instruction at a time.
fn reference(p: &Program, pkt: &[u8], wire_len: u32) -> u32 {
    let mut r = [0u32; 16];
    let mut m = vec![0u32; usize::from(p.scratch_words)];
    let mut pc = 0usize;
    let value = |r: &[u32; 16], o: Operand| match o {
        Operand::Reg(x) => r[x.index()],
        Operand::Imm(k) => k,
    };
    loop {
        match p.code[pc] {
            Insn::Mov { dst, src } => r[dst.index()] = value(&r, src),
            Insn::WireLen { dst } => r[dst.index()] = wire_len,
            Insn::Load {
                width,
                dst,
                base,
                offset,
            } => {
                let at = base.map_or(0, |b| u64::from(r[b.index()])) + u64::from(offset);
                let n = u64::from(width.bytes());
                if at + n > pkt.len() as u64 {
                    return 0;
                }
                let bytes = &pkt[at as usize..(at + n) as usize];
                r[dst.index()] = bytes.iter().fold(0, |acc, &b| acc << 8 | u32::from(b));
            }
            Insn::Alu { op, dst, lhs, rhs } => {
                let Some(x) = op.apply(r[lhs.index()], value(&r, rhs)) else {
                    return 0;
                };
                r[dst.index()] = x;
            }
            Insn::Neg { dst, src } => r[dst.index()] = r[src.index()].wrapping_neg(),
            Insn::LoadScratch { dst, slot } => r[dst.index()] = m[usize::from(slot)],
            Insn::StoreScratch { slot, src } => m[usize::from(slot)] = r[src.index()],
            Insn::Jump { target } => {
                pc = target as usize;
                continue;
            }
            Insn::Branch {
                cond,
                lhs,
                rhs,
                then_,
                else_,
            } => {
                let taken = cond.eval(r[lhs.index()], value(&r, rhs));
                pc = if taken { then_ } else { else_ } as usize;
                continue;
            }
            Insn::Switch {
                key,
                table,
                default,
            } => {
                let entries = &p.tables[table as usize].entries;
                let k = r[key.index()];
                pc = entries
                    .iter()
                    .find(|&&(x, _)| x == k)
                    .map_or(default, |&(_, t)| t) as usize;
                continue;
            }
            Insn::Return { value: v } => return value(&r, v),
            Insn::Contains {
                dst,
                set,
                pattern,
                start,
            } => {
                let found = p.patterns[set as usize].occurs(pattern, pkt, r[start.index()]);
                r[dst.index()] = u32::from(found);
            }
            Insn::Member { dst, set, key } => {
                let words: Vec<u32> = key.regs().iter().map(|k| r[k.index()]).collect();
                let found = p.sets[set as usize].contains(sift_ir::ValueSet::key(&words));
                r[dst.index()] = u32::from(found);
            }
            Insn::Protochain {
                dst,
                chain,
                base,
                proto,
                offset,
                target,
            } => {
                let (p, x) = (r[proto.index()], r[offset.index()]);
                let Some(found) = sift_ir::protochain::walk(pkt, chain, base, p, x, target) else {
                    return 0;
                };
                r[dst.index()] = found;
            }
        }
        pc += 1;
    }
}

/// Builds programs of `n` instructions whose targets all lie in `i + 1 .. n`.
struct Builder<'a> {
    rng: &'a mut Rng,
    n: usize,
    code: Vec<Insn>,
    tables: Vec<Table>,
}

impl Builder<'_> {
    fn here(&self) -> usize {
        self.code.len()
    }

    /// A forward target from the instruction about to be pushed at `at`.
    fn target(&mut self, at: usize) -> u32 {
        self.rng.range(at as u64 + 1, self.n as u64 - 1) as u32
    }

    /// A constant that packet bytes often equal.
    fn imm(&mut self) -> u32 {
        match self.rng.below(7) {
            0 => self.rng.next_u32(),
            1 => u32::MAX - self.rng.below(2) as u32,
            2 => self.rng.below(0x300) as u32,
            // A half-word of two small bytes.
            3 => (self.rng.below(8) << 8 | self.rng.below(8)) as u32,
            _ => self.rng.below(8) as u32,
        }
    }

    fn reg(&mut self) -> Reg {
        Reg(self.rng.below(4) as u8)
    }

    /// A register: usually `r`, sometimes another (a sequence that must not fuse).
    fn mostly(&mut self, r: Reg) -> Reg {
        if self.rng.chance(7, 8) {
            r
        } else {
            self.reg()
        }
    }

    fn test(&mut self, reg: Reg, then_: u32, else_: u32) -> Insn {
        let cond = *self.rng.pick(&Cond::ALL);
        let k = self.imm();
        Insn::Branch {
            cond,
            lhs: reg,
            rhs: Operand::Imm(k),
            then_,
            else_,
        }
    }

    /// A branch or a pair of branches testing `reg`, ending the sequence.
    fn tests(&mut self, reg: Reg) {
        let i = self.here();
        match self.rng.below(4) {
            0 => {
                let (t, f) = (self.target(i), self.target(i));
                let insn = self.test(reg, t, f);
                self.code.push(insn);
            }
            1 => {
                // jeq k1 else jeq k2 (jne with swapped targets, sometimes).
                let (t1, t2, f) = (self.target(i + 1), self.target(i + 1), self.target(i + 1));
                let (k1, k2) = (self.imm(), self.imm());
                let first = if self.rng.chance(1, 2) {
                    (Cond::Eq, t1, i as u32 + 1)
                } else {
                    (Cond::Ne, i as u32 + 1, t1)
                };
                self.code.push(Insn::Branch {
                    cond: first.0,
                    lhs: reg,
                    rhs: Operand::Imm(k1),
                    then_: first.1,
                    else_: first.2,
                });
                let second = self.mostly(reg);
                self.code.push(Insn::Branch {
                    cond: Cond::Eq,
                    lhs: second,
                    rhs: Operand::Imm(k2),
                    then_: t2,
                    else_: f,
                });
            }
            _ => {
                // A range: lower bound then upper bound, or the reverse, in any spelling.
                let (inside, outside) = (self.target(i + 1), self.target(i + 1));
                let (mut lo, mut hi) = (self.imm(), self.imm());
                if self.rng.chance(7, 8) && lo > hi {
                    std::mem::swap(&mut lo, &mut hi);
                }
                let next = i as u32 + 1;
                let second = self.mostly(reg);
                let (a, b) = if self.rng.chance(1, 2) {
                    let a = match self.rng.below(2) {
                        0 => (Cond::Ge, lo, next, outside),
                        _ => (Cond::Lt, lo, outside, next),
                    };
                    let b = match self.rng.below(3) {
                        0 => (Cond::Gt, hi, outside, inside),
                        1 => (Cond::Le, hi, inside, outside),
                        _ => (Cond::Ge, hi, outside, inside),
                    };
                    (a, b)
                } else {
                    let a = match self.rng.below(2) {
                        0 => (Cond::Gt, hi, outside, next),
                        _ => (Cond::Le, hi, next, outside),
                    };
                    let b = match self.rng.below(2) {
                        0 => (Cond::Ge, lo, inside, outside),
                        _ => (Cond::Gt, lo, inside, outside),
                    };
                    (a, b)
                };
                for (r, (cond, k, then_, else_)) in [(reg, a), (second, b)] {
                    self.code.push(Insn::Branch {
                        cond,
                        lhs: r,
                        rhs: Operand::Imm(k),
                        then_,
                        else_,
                    });
                }
            }
        }
    }

    fn switch(&mut self, key: Reg) {
        let i = self.here();
        let size = *self.rng.pick(&[1usize, 2, 3, 3, 4, 5, 8, 20, 40]);
        let mut keys: Vec<u32> = (0..size).map(|_| self.imm()).collect();
        keys.sort_unstable();
        keys.dedup();
        let shared = self.rng.chance(1, 2).then(|| self.target(i));
        let entries = keys
            .into_iter()
            .map(|k| (k, shared.unwrap_or_else(|| self.target(i))))
            .collect();
        let default = self.target(i);
        self.code.push(Insn::Switch {
            key,
            table: self.tables.len() as u32,
            default,
        });
        self.tables.push(Table { entries });
    }

    /// A load, perhaps masked (perhaps the IP header length idiom), then a test or a switch.
    fn load_sequence(&mut self) {
        let dst = self.reg();
        let width = *self.rng.pick(&Width::ALL);
        let base = self.rng.chance(1, 3).then(|| self.reg());
        let offset = self.rng.below(24) as u32;
        self.code.push(Insn::Load {
            width,
            dst,
            base,
            offset,
        });
        if self.rng.chance(1, 3) {
            let m = if self.rng.chance(1, 2) {
                15
            } else {
                self.imm()
            };
            let lhs = self.mostly(dst);
            self.code.push(Insn::Alu {
                op: AluOp::And,
                dst,
                lhs,
                rhs: Operand::Imm(m),
            });
            if self.rng.chance(1, 2) {
                let k = if self.rng.chance(3, 4) { 2 } else { self.imm() };
                let shifted = self.mostly(dst);
                self.code.push(Insn::Alu {
                    op: AluOp::Shl,
                    dst: shifted,
                    lhs: dst,
                    rhs: Operand::Imm(k),
                });
                if self.rng.chance(1, 2) {
                    return;
                }
                // The transport-header idiom: a load indexed by the header length, then a test.
                let (base, loaded) = (self.mostly(dst), self.reg());
                let width = *self.rng.pick(&Width::ALL);
                let offset = self.rng.below(24) as u32;
                self.code.push(Insn::Load {
                    width,
                    dst: loaded,
                    base: Some(base),
                    offset,
                });
                let reg = self.mostly(loaded);
                self.tests(reg);
                return;
            }
        }
        match self.rng.below(5) {
            0 => {}
            1 => {
                let key = self.mostly(dst);
                self.switch(key);
            }
            _ => {
                let reg = self.mostly(dst);
                self.tests(reg);
            }
        }
    }

    fn build(mut self) -> Program {
        for r in 0..4u8 {
            let k = self.imm();
            self.code.push(Insn::Mov {
                dst: Reg(r),
                src: Operand::Imm(k),
            });
        }
        while self.here() + 6 < self.n {
            let i = self.here();
            match self.rng.below(8) {
                0 => {
                    let target = self.target(i);
                    self.code.push(Insn::Jump { target });
                }
                1 => {
                    let value = if self.rng.chance(1, 2) {
                        Operand::Reg(self.reg())
                    } else {
                        Operand::Imm(self.imm())
                    };
                    self.code.push(Insn::Return { value });
                }
                2 => {
                    let (dst, lhs) = (self.reg(), self.reg());
                    let rhs = Operand::Imm(self.imm());
                    let op = *self.rng.pick(&AluOp::ALL);
                    self.code.push(Insn::Alu { op, dst, lhs, rhs });
                }
                _ => self.load_sequence(),
            }
        }
        while self.here() < self.n {
            let value = Operand::Reg(self.reg());
            self.code.push(Insn::Return { value });
        }
        Program {
            scratch_words: 0,
            code: self.code,
            tables: self.tables,
            ..Program::default()
        }
    }
}

fn packet(rng: &mut Rng) -> Vec<u8> {
    let n = rng.index(32);
    (0..n)
        .map(|_| {
            if rng.chance(2, 3) {
                rng.below(8) as u8
            } else {
                rng.byte()
            }
        })
        .collect()
}

fn agree(p: &Program, rng: &mut Rng, cache: &mut Cache) {
    let v = verify(p.clone()).unwrap_or_else(|e| panic!("{e}\n{p}"));
    for _ in 0..40 {
        let pkt = packet(rng);
        let wire = rng.below(100) as u32;
        let want = reference(p, &pkt, wire);
        let got = v.run(cache, &pkt, wire);
        assert_eq!(got, want, "packet {pkt:?}\n{p}");
    }
}

#[test]
fn fused_sequences_agree_with_the_specification() {
    let mut rng = Rng::new(0x5eed);
    let mut cache = Cache::new();
    for _ in 0..20_000 {
        let n = 12 + rng.below(40) as usize;
        let p = Builder {
            rng: &mut rng,
            n,
            code: Vec::new(),
            tables: Vec::new(),
        }
        .build();
        agree(&p, &mut rng, &mut cache);
    }
}

#[test]
fn random_valid_programs_agree_with_the_specification() {
    let mut rng = Rng::new(0xfeed);
    let mut cache = Cache::new();
    for _ in 0..4000 {
        let p = common::valid_program(&mut rng);
        agree(&p, &mut rng, &mut cache);
    }
}

#[test]
fn range_bounds_at_the_edges_of_u32() {
    // `x > 4294967295` never holds, so it cannot be rewritten as `x >= 4294967296`.
    let text = "ld.b r0, [0]\n jge r0, 0, L2, L4\nL2:\n jgt r0, 4294967295, L4, L3\nL3:\n ret 1\nL4:\n ret 2\n";
    let p = sift_bytecode::assemble(text).unwrap();
    let v = verify(p.clone()).unwrap();
    for b in [0u8, 1, 255] {
        assert_eq!(v.run(&mut Cache::new(), &[b], 1), reference(&p, &[b], 1));
    }
}
