//! Lifting a DPF filter into the IR, from its canonical atoms.
//!
//! Each atom becomes one compare-and-branch block (DPF's "each atom is a basic block"): its load,
//! an `and` if it has a mask, and a branch to the next atom or to reject. Constant offsets are
//! immediates of the loads. A context's packet-dependent shifts are computed once and reused by
//! the following atoms that share them (a prefix of shifts, as in DPF's trie).
//!
//! The base is kept as a dynamic part (an SSA value, absent until the first packet-dependent
//! shift) plus a constant part folded into load offsets. Adding two dynamic quantities is checked:
//! if the 32-bit sum wraps, the true address is past any captured byte, so the packet is rejected,
//! as the reference evaluator does.

use sift_ir::{BinOp, Block, CmpOp, Function, Inst, Terminator, Value};

use super::atoms::{Atom, Expr, Shift, Width};
use super::filter::Filter;

/// What `lift` returns for an accepted packet: keep the whole packet.
pub const ACCEPT_ALL: u32 = u32::MAX;

/// Lifts a filter; an accepted packet returns [`ACCEPT_ALL`], a rejected one 0.
pub fn lift(filter: &Filter) -> Function {
    lift_atoms(filter.atoms(), ACCEPT_ALL)
}

/// Lifts a filter; an accepted packet returns `accept_len` (a snap length, non-zero).
pub fn lift_with(filter: &Filter, accept_len: u32) -> Function {
    lift_atoms(filter.atoms(), accept_len)
}

/// Lifts the conjunction of `atoms` (accepting every packet if there are none).
pub fn lift_atoms(atoms: &[Atom], accept_len: u32) -> Function {
    let mut b = Builder {
        f: Function::new(),
        cur: Block(0),
        reject: None,
    };
    b.cur = b.f.create_block();
    // The shifts of the previous atom's context and the base after each.
    let mut computed: Vec<(&Shift, Base)> = Vec::new();
    for atom in atoms {
        let shifts = &atom.context.shifts;
        let shared = computed
            .iter()
            .zip(shifts)
            .take_while(|((a, _), b)| *a == *b)
            .count();
        computed.truncate(shared);
        let result = (|| {
            for shift in &shifts[shared..] {
                let base = computed.last().map_or(Base::ZERO, |c| c.1);
                let next = b.shift(base, shift)?;
                computed.push((shift, next));
            }
            let base = computed.last().map_or(Base::ZERO, |c| c.1);
            b.atom(base, atom)
        })();
        if result.is_err() {
            // Statically out of range: the packet is rejected here, and the rest is unreachable.
            let r = b.reject();
            b.f.set_term(b.cur, Terminator::Jump(r.into()));
            return b.f;
        }
    }
    b.f.set_term(b.cur, Terminator::Return(accept_len));
    b.f
}

/// The current base: `dynamic + constant`.
#[derive(Clone, Copy, Debug)]
struct Base {
    dynamic: Option<Value>,
    constant: u64,
}

impl Base {
    const ZERO: Base = Base {
        dynamic: None,
        constant: 0,
    };
}

/// A load or base that is out of range whatever the packet.
struct AlwaysRejects;

struct Builder {
    f: Function,
    cur: Block,
    reject: Option<Block>,
}

impl Builder {
    fn reject(&mut self) -> Block {
        *self.reject.get_or_insert_with(|| {
            let b = self.f.create_block();
            self.f.set_term(b, Terminator::Return(0));
            b
        })
    }

    /// Continues in a new block if `op(lhs, rhs)` holds, else rejects.
    fn check(&mut self, op: CmpOp, lhs: Value, rhs: Value) {
        let next = self.f.create_block();
        let reject = self.reject();
        let term = Terminator::Branch {
            op,
            lhs,
            rhs,
            then_: next.into(),
            else_: reject.into(),
        };
        self.f.set_term(self.cur, term);
        self.cur = next;
    }

    /// `a + b`, rejecting the packet if the sum wraps.
    fn checked_add(&mut self, a: Value, b: Value) -> Value {
        let sum = self.f.push(self.cur, Inst::Binary(BinOp::Add, a, b));
        self.check(CmpOp::Ge, sum, b);
        sum
    }

    fn shift(&mut self, base: Base, shift: &Shift) -> Result<Base, AlwaysRejects> {
        let at = Base {
            constant: base.constant + u64::from(shift.skip),
            ..base
        };
        let amount = self.value(at, &shift.amount)?;
        let dynamic = match at.dynamic {
            None => amount,
            Some(d) => self.checked_add(d, amount),
        };
        Ok(Base {
            dynamic: Some(dynamic),
            constant: at.constant,
        })
    }

    fn load(&mut self, base: Base, addr: &Expr, width: Width) -> Result<Value, AlwaysRejects> {
        let (index, offset) = match addr.as_const() {
            Some(k) => (base.dynamic, base.constant + u64::from(k)),
            None => {
                let a = self.value(base, addr)?;
                let index = match base.dynamic {
                    None => a,
                    Some(d) => self.checked_add(d, a),
                };
                (Some(index), base.constant)
            }
        };
        let offset = u32::try_from(offset).map_err(|_| AlwaysRejects)?;
        Ok(self.f.push(
            self.cur,
            Inst::Load {
                index,
                offset,
                size: width.load_size(),
            },
        ))
    }

    fn value(&mut self, base: Base, e: &Expr) -> Result<Value, AlwaysRejects> {
        Ok(match e {
            Expr::Const(k) => self.f.iconst(self.cur, *k),
            Expr::Load { addr, width } => self.load(base, addr, *width)?,
            Expr::Binary(op, a, b) => {
                let (va, vb) = (self.value(base, a)?, self.value(base, b)?);
                self.f.push(self.cur, Inst::Binary(*op, va, vb))
            }
        })
    }

    fn atom(&mut self, base: Base, atom: &Atom) -> Result<(), AlwaysRejects> {
        let mut v = self.load(base, &Expr::Const(atom.offset), atom.width)?;
        if atom.mask != atom.width.mask() {
            let m = self.f.iconst(self.cur, atom.mask);
            v = self.f.push(self.cur, Inst::Binary(BinOp::And, v, m));
        }
        let k = self.f.iconst(self.cur, atom.value);
        self.check(atom.rel.cmp_op(), v, k);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;
    use sift_ir::{verify, Cache, Interpreter};

    fn run(text: &str, pkt: &[u8]) -> u32 {
        let f = lift(&parse(text).unwrap());
        verify(&f).unwrap();
        Interpreter::new(f)
            .unwrap()
            .run(&mut Cache::new(), pkt, pkt.len() as u32)
    }

    #[test]
    fn atoms_become_branches() {
        let text = "(0:8 == 1) & (1:16 & 0xff00 == 0x200)";
        assert_eq!(run(text, &[1, 2, 9]), ACCEPT_ALL);
        assert_eq!(run(text, &[1, 3, 9]), 0);
        assert_eq!(run(text, &[1, 2]), 0);
        let f = lift(&parse(text).unwrap());
        assert_eq!(f.inst_count(), 6);
    }

    #[test]
    fn shared_contexts_are_computed_once() {
        let text = "SHIFT(0:8) & (0:8 == 1) & (1:8 == 2) & SHIFT(2) & (0:8 == 3)";
        let f = lift(&parse(text).unwrap());
        let loads = f
            .values
            .iter()
            .filter(|i| matches!(i, Inst::Load { .. }))
            .count();
        assert_eq!(loads, 4);
        assert_eq!(run(text, &[2, 0, 1, 2, 3]), ACCEPT_ALL);
        assert_eq!(run(text, &[2, 0, 1, 2, 4]), 0);
    }

    #[test]
    fn wrapping_bases_reject() {
        let text = "SHIFT(0:32) & SHIFT(4:32) & (0:8 == 0)";
        let mut pkt = vec![0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 0x20];
        pkt.extend([0u8; 64]);
        assert_eq!(run(text, &pkt), 0);
    }
}
