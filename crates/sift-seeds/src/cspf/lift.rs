//! Lifting a CSPF program into the IR.
//!
//! A CSPF program has no jumps, so the stack is resolved at compile time: each stack slot holds a
//! symbolic expression (`Sym`) instead of a run-time value, and the IR computes only what the
//! verdict needs.
//!
//! * `PUSHWORD+n` emits its half-word load at once, in program order: an out-of-packet word
//!   rejects the packet exactly where the interpreter would, after any short-circuit exit that
//!   precedes it and before any that follows, even when its value turns out not to matter.
//! * Constants and binary operators only build expressions; comparisons become branches when the
//!   verdict is decided, and are materialized as 0/1 (a diamond joining on a block parameter) only
//!   when a comparison result is itself an operand of arithmetic.
//! * A short-circuit operator branches at once to accept, reject, or the rest of the program;
//!   on the continuing edge its result `R` is known, so a constant is pushed.
//! * The verdict "top of stack is non-zero" is compiled into branches: `OR` of anything and `AND`
//!   of two booleans decompose into short-circuit control flow (no loads remain to be made, so
//!   evaluation order no longer matters), `XOR` into an inequality, `AND` with a constant into a
//!   bit test.

use sift_ir::{BinOp, Block, CmpOp, Function, Inst, LoadSize, Terminator, Value};

use super::program::{Action, Operator, Program};

/// What `lift` returns for an accepted packet: keep the whole packet.
pub const ACCEPT_ALL: u32 = u32::MAX;

/// Lifts a program; an accepted packet returns [`ACCEPT_ALL`], a rejected one 0.
pub fn lift(program: &Program) -> Function {
    lift_with(program, ACCEPT_ALL)
}

/// Lifts a program; an accepted packet returns `accept_len` (a snap length; must be non-zero for
/// the verdict to mean accept).
pub fn lift_with(program: &Program, accept_len: u32) -> Function {
    let mut b = Builder::new(accept_len);
    let mut stack: Vec<Sym> = Vec::new();
    for inst in program.instructions() {
        match inst.action {
            Action::NoPush => {}
            Action::PushWord(n) => {
                let v = b.f.push(
                    b.cur,
                    Inst::Load {
                        index: None,
                        offset: 2 * u32::from(n),
                        size: LoadSize::Half,
                    },
                );
                stack.push(Sym::Word(v));
            }
            a => stack.push(Sym::Const(a.constant().unwrap_or(0))),
        }
        if inst.op == Operator::Nop {
            continue;
        }
        // The program passed the static checks: two operands are there.
        let (Some(t1), Some(t2)) = (stack.pop(), stack.pop()) else {
            unreachable!("verified programs do not underflow")
        };
        let result = match inst.op.short_circuit() {
            Some(sc) => {
                if let (Sym::Const(x), Sym::Const(y)) = (&t1, &t2) {
                    // Decided statically: either the program always returns here (and the rest
                    // is dead), or it always continues.
                    if (x == y) == sc.exit_if {
                        let exit = if sc.returns { b.accept() } else { b.reject() };
                        b.f.set_term(b.cur, Terminator::Jump(exit.into()));
                        return b.f;
                    }
                    stack.push(Sym::Const(u16::from(!sc.exit_if)));
                    continue;
                }
                let r = Sym::Cmp(CmpOp::Eq, Box::new(t2), Box::new(t1));
                let cont = b.f.create_block();
                let exit = if sc.returns { b.accept() } else { b.reject() };
                if sc.exit_if {
                    b.cond(r, exit, cont);
                } else {
                    b.cond(r, cont, exit);
                }
                b.cur = cont;
                Sym::Const(u16::from(!sc.exit_if))
            }
            None => {
                let (t2, t1) = (Box::new(t2), Box::new(t1));
                match inst.op {
                    Operator::Eq => Sym::Cmp(CmpOp::Eq, t2, t1),
                    Operator::Neq => Sym::Cmp(CmpOp::Ne, t2, t1),
                    Operator::Lt => Sym::Cmp(CmpOp::Lt, t2, t1),
                    Operator::Le => Sym::Cmp(CmpOp::Le, t2, t1),
                    Operator::Gt => Sym::Cmp(CmpOp::Gt, t2, t1),
                    Operator::Ge => Sym::Cmp(CmpOp::Ge, t2, t1),
                    Operator::And => Sym::Bits(BinOp::And, t2, t1),
                    Operator::Or => Sym::Bits(BinOp::Or, t2, t1),
                    _ => Sym::Bits(BinOp::Xor, t2, t1),
                }
            }
        };
        stack.push(result);
    }
    match stack.pop() {
        // An empty stack leaves the enet interpreter's initial TRUE on top.
        None => {
            let t = b.accept();
            b.f.set_term(b.cur, Terminator::Jump(t.into()));
        }
        Some(top) => {
            let (t, e) = (b.accept(), b.reject());
            b.cond(top, t, e);
        }
    }
    b.f
}

/// A stack slot's contents, known at compile time. All values are 16-bit.
#[derive(Clone, Debug)]
enum Sym {
    Const(u16),
    /// A packet word already loaded.
    Word(Value),
    /// A comparison: 1 if it holds, else 0.
    Cmp(CmpOp, Box<Sym>, Box<Sym>),
    /// `AND`, `OR` or `XOR`.
    Bits(BinOp, Box<Sym>, Box<Sym>),
}

impl Sym {
    /// Whether the value is always 0 or 1.
    fn is_bool(&self) -> bool {
        match self {
            Sym::Const(k) => *k <= 1,
            Sym::Word(_) => false,
            Sym::Cmp(..) => true,
            Sym::Bits(_, a, b) => a.is_bool() && b.is_bool(),
        }
    }
}

struct Builder {
    f: Function,
    cur: Block,
    accept_len: u32,
    accept: Option<Block>,
    reject: Option<Block>,
}

impl Builder {
    fn new(accept_len: u32) -> Builder {
        let mut f = Function::new();
        let cur = f.create_block();
        Builder {
            f,
            cur,
            accept_len,
            accept: None,
            reject: None,
        }
    }

    fn accept(&mut self) -> Block {
        let len = self.accept_len;
        *self.accept.get_or_insert_with(|| {
            let b = self.f.create_block();
            self.f.set_term(b, Terminator::Return(len));
            b
        })
    }

    fn reject(&mut self) -> Block {
        *self.reject.get_or_insert_with(|| {
            let b = self.f.create_block();
            self.f.set_term(b, Terminator::Return(0));
            b
        })
    }

    fn branch(&mut self, op: CmpOp, lhs: Value, rhs: Value, then_: Block, else_: Block) {
        let term = Terminator::Branch {
            op,
            lhs,
            rhs,
            then_: then_.into(),
            else_: else_.into(),
        };
        self.f.set_term(self.cur, term);
    }

    /// Ends the current block with a branch to `t` if `s` is non-zero, else to `e`.
    fn cond(&mut self, s: Sym, t: Block, e: Block) {
        match s {
            Sym::Const(k) => {
                // A branch on constants rather than a jump, so that no block becomes unreachable
                // (values defined in one unreachable block and used in another would not verify);
                // the optimizer folds it.
                let (k, zero) = (
                    self.f.iconst(self.cur, u32::from(k)),
                    self.f.iconst(self.cur, 0),
                );
                self.branch(CmpOp::Ne, k, zero, t, e);
            }
            // A boolean compared with 0 or 1 is that boolean or its negation.
            Sym::Cmp(op @ (CmpOp::Eq | CmpOp::Ne), a, b)
                if a.is_bool() && matches!(*b, Sym::Const(0 | 1)) =>
            {
                let Sym::Const(k) = *b else { unreachable!() };
                let same = (op == CmpOp::Eq) == (k == 1);
                if same {
                    self.cond(*a, t, e)
                } else {
                    self.cond(*a, e, t)
                }
            }
            Sym::Cmp(op @ (CmpOp::Eq | CmpOp::Ne), a, b)
                if b.is_bool() && matches!(*a, Sym::Const(0 | 1)) =>
            {
                self.cond(Sym::Cmp(op, b, a), t, e)
            }
            Sym::Cmp(op, a, b) => {
                let (va, vb) = (self.value(*a), self.value(*b));
                self.branch(op, va, vb, t, e);
            }
            Sym::Bits(BinOp::Or, a, b) => {
                let mid = self.f.create_block();
                self.cond(*a, t, mid);
                self.cur = mid;
                self.cond(*b, t, e);
            }
            Sym::Bits(BinOp::And, a, b) if a.is_bool() && b.is_bool() => {
                let mid = self.f.create_block();
                self.cond(*a, mid, e);
                self.cur = mid;
                self.cond(*b, t, e);
            }
            Sym::Bits(BinOp::And, a, b) => {
                let (va, vb) = (self.value(*a), self.value(*b));
                self.branch(CmpOp::Set, va, vb, t, e);
            }
            Sym::Bits(_, a, b) => {
                // XOR: non-zero exactly when the operands differ.
                let (va, vb) = (self.value(*a), self.value(*b));
                self.branch(CmpOp::Ne, va, vb, t, e);
            }
            Sym::Word(v) => {
                let zero = self.f.iconst(self.cur, 0);
                self.branch(CmpOp::Ne, v, zero, t, e);
            }
        }
    }

    /// Computes `s` into an SSA value (in the current block, which may change).
    fn value(&mut self, s: Sym) -> Value {
        match s {
            Sym::Const(k) => self.f.iconst(self.cur, u32::from(k)),
            Sym::Word(v) => v,
            Sym::Bits(op, a, b) => {
                let (va, vb) = (self.value(*a), self.value(*b));
                self.f.push(self.cur, Inst::Binary(op, va, vb))
            }
            cmp @ Sym::Cmp(..) => {
                let (yes, no, join) = (
                    self.f.create_block(),
                    self.f.create_block(),
                    self.f.create_block(),
                );
                let result = self.f.add_param(join);
                self.cond(cmp, yes, no);
                for (block, k) in [(yes, 1), (no, 0)] {
                    let v = self.f.iconst(block, k);
                    let target = sift_ir::Target {
                        block: join,
                        args: sift_ir::thin_vec![v],
                    };
                    self.f.set_term(block, Terminator::Jump(target));
                }
                self.cur = join;
                result
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::program::*;
    use super::*;
    use sift_ir::{verify, Cache, Interpreter};

    fn run(words: &[u16], pkt: &[u8]) -> u32 {
        let p = Program::new(0, words.to_vec()).unwrap();
        let f = lift(&p);
        verify(&f).unwrap();
        Interpreter::new(f)
            .unwrap()
            .run(&mut Cache::new(), pkt, pkt.len() as u32)
    }

    #[test]
    fn comparison_results_used_as_values() {
        // (w0 == 1) + ... : (w0 == 1) XOR (w1 < 5), compared with 1 via EQ.
        let eq = Operator::Eq.code();
        let words = [
            ENF_PUSHWORD,
            ENF_PUSHONE | eq,
            ENF_PUSHWORD + 1,
            ENF_PUSHLIT | Operator::Lt.code(),
            5,
            Operator::Xor.code(),
            ENF_PUSHLIT | Operator::Ge.code(),
            1,
        ];
        assert_eq!(run(&words, &[0, 1, 0, 9]), ACCEPT_ALL);
        assert_eq!(run(&words, &[0, 1, 0, 2]), 0);
        assert_eq!(run(&words, &[0, 2, 0, 2]), ACCEPT_ALL);
        assert_eq!(run(&words, &[0, 2]), 0);
    }

    #[test]
    fn loads_reject_in_program_order() {
        // COR accepts before the out-of-packet word 10 is reached; otherwise it rejects.
        let words = [
            ENF_PUSHWORD,
            ENF_PUSHONE | Operator::Cor.code(),
            ENF_PUSHWORD + 10,
            Operator::Or.code(),
        ];
        assert_eq!(run(&words, &[0, 1]), ACCEPT_ALL);
        assert_eq!(run(&words, &[0, 2]), 0);
        assert_eq!(run(&[], &[]), ACCEPT_ALL);
        assert_eq!(run(&[ENF_NOPUSH], &[]), ACCEPT_ALL);
    }

    #[test]
    fn snap_length_parameter() {
        let p = Program::new(0, vec![ENF_PUSHONE]).unwrap();
        let f = lift_with(&p, 96);
        assert_eq!(
            Interpreter::new(f).unwrap().run(&mut Cache::new(), &[], 0),
            96
        );
    }
}
