//! Constant folding and propagation, algebraic simplification, offset reassociation and branch
//! canonicalization: one forward pass in reverse postorder.
//!
//! Rules (each preserves the interpreter's result for every packet):
//!
//! * operations on constants fold; a division or remainder by the constant 0 always rejects, so
//!   the rest of its block becomes `ret 0`;
//! * identities: `x+0`, `x-0`, `x*1`, `x/1`, `x|0`, `x^0`, `x<<0`, `x>>0`, `x&~0`, `x&x`, `x|x`
//!   give `x`; `x*0`, `x&0`, `x%1`, `x-x`, `x^x`, shifts by 32 or more, and `x>>k` of a value
//!   below `2^k` give 0; `x & m` gives `x` when `m` keeps every bit `x`'s range allows;
//!   `(x & a) & b` is `x & (a & b)`; `x - c` is written `x + (-c)`;
//! * reassociation (NetVM §5): `(x + a) + b` is `x + (a + b)` (both wrap modulo 2^32, so this
//!   always holds);
//! * load/index folding: the IR adds a load's index and offset *without* wrapping, while `add`
//!   wraps. So `load [(x + c) + off]` becomes `load [x + (off + c)]` only when `x + c` provably
//!   does not wrap (`x`'s range ends at most `2^32 - 1 - c`) and `off + c` fits the offset field,
//!   or `load [x + (off - d)]` when `x + c` provably always wraps (it is `x - d`, `d = 2^32 - c`)
//!   and `off >= d`. A constant index folds into the offset when the sum fits;
//! * comparisons: constants move to the right (`eq 5, x` is `eq x, 5`), and `ne`, `lt`, `le`
//!   become `eq`, `ge`, `gt` with the targets swapped, so later passes see one form, and
//!   `(x & k) == 0` becomes `set x, k` with the targets swapped; `x + c == k`, `x - c == k`,
//!   `x ^ c == k` and `-x == k` compare `x` with the constant moved over (every one of them a
//!   bijection modulo 2^32; not for orderings, where `x + c` may wrap), when the comparison is
//!   the only reader of the arithmetic; a comparison
//!   decided by the operands' ranges (or equal operands) becomes a jump; a `switch` drops keys its
//!   value's range excludes, and on a constant becomes a jump; `ret v` of a constant is `ret k`.

use sift_ir::{BinOp, Block, CmpOp, Function, Inst, Insts, Terminator, Value};

use crate::cfg::Analysis;
use crate::facts::{decide_range, mirror_op};
use crate::range::{self, low_mask, Range};
use crate::rewrite::Replacements;

/// What a rewrite rule concluded about one instruction.
enum Outcome {
    Keep,
    /// The instruction now reads differently (same value).
    Changed(Inst),
    /// Every use reads this value instead.
    Same(Value),
    /// The instruction always rejects the packet.
    Rejects,
}

struct Simplifier<'f> {
    f: &'f mut Function,
    ranges: Vec<Range>,
    repl: Replacements,
    /// Constants created by rules, to be placed before the instruction being rewritten.
    fresh: Vec<Value>,
    /// How many operands read each value when the pass started. An instruction found equal to
    /// another is left for dead-code elimination; once nothing reads it, finding it again is no
    /// change (counting it would keep the pipeline from ever reaching its fixed point).
    uses: Vec<u32>,
    changes: usize,
    /// Whether a terminator's successors changed.
    edges_changed: bool,
    /// Scratch: the successors of the terminator being rewritten, as they were.
    successors: Vec<Block>,
}

/// Runs the pass; returns the number of rewrites.
pub fn run(f: &mut Function) -> usize {
    run_with(f, &mut Analysis::new())
}

/// [`run`], with the control-flow facts kept between passes.
pub fn run_with(f: &mut Function, analysis: &mut Analysis) -> usize {
    let cfg = analysis.take(f);
    let ranges = range::compute_over(f, &cfg.rpo);
    let repl = Replacements::new(f);
    let uses = f.use_counts();
    let mut s = Simplifier {
        f,
        ranges,
        repl,
        fresh: Vec::new(),
        uses,
        changes: 0,
        edges_changed: false,
        successors: Vec::new(),
    };
    for &b in &cfg.rpo {
        s.block(b);
    }
    let mut repl = s.repl;
    let changes = s.changes;
    if !s.edges_changed {
        analysis.restore(cfg);
    }
    repl.apply(f);
    analysis.remove_unreachable(f);
    changes
}

impl Simplifier<'_> {
    fn konst(&self, v: Value) -> Option<u32> {
        self.f.const_value(v)
    }

    fn range(&self, v: Value) -> Range {
        self.ranges.get(v.index()).copied().unwrap_or(Range::FULL)
    }

    fn new_const(&mut self, k: u32) -> Value {
        let v = Value(self.f.values.len() as u32);
        self.f.values.push(Inst::Const(k));
        self.ranges.push(Range::exact(k));
        self.fresh.push(v);
        v
    }

    fn block(&mut self, b: Block) {
        let insts = std::mem::take(&mut self.f.block_mut(b).insts);
        let mut kept = Insts::with_capacity(insts.len());
        let mut rejected = false;
        let count = insts.len();
        for (position, &v) in insts.iter().enumerate() {
            let repl = &mut self.repl;
            if !repl.is_empty() {
                self.f.values[v.index()].map_operands(|x| repl.resolve(x));
            }
            let inst = self.f.values[v.index()].clone();
            // Rules may chain (a fold exposes an identity), so apply them until none fires.
            let mut outcome = self.inst(&inst);
            let mut guard = 0;
            while let Outcome::Changed(new) = outcome {
                self.changes += 1;
                self.f.values[v.index()] = new.clone();
                guard += 1;
                outcome = if guard < 8 {
                    self.inst(&new)
                } else {
                    Outcome::Keep
                };
            }
            kept.extend(self.fresh.drain(..));
            match outcome {
                Outcome::Keep | Outcome::Changed(_) => {
                    let r = range::of_inst(self.f.inst(v), |o| self.range(o));
                    self.ranges[v.index()] = r;
                    kept.push(v);
                }
                Outcome::Same(w) => {
                    if self.uses.get(v.index()).is_some_and(|&n| n > 0) {
                        self.changes += 1;
                    }
                    self.repl.replace(v, w);
                    kept.push(v); // left for dead-code elimination
                }
                Outcome::Rejects => {
                    // Already the last instruction of a block returning 0: nothing changes.
                    let last = position + 1 == count;
                    if !last || self.f.block(b).term != Terminator::Return(0) {
                        self.changes += 1;
                    }
                    kept.push(v);
                    rejected = true;
                    break;
                }
            }
        }
        self.f.block_mut(b).insts = kept;
        if rejected {
            if self.f.block(b).term.successor_count() != 0 {
                self.edges_changed = true;
            }
            self.f.set_term(b, Terminator::Return(0));
            return;
        }
        let mut term = std::mem::take(&mut self.f.block_mut(b).term);
        if !self.repl.is_empty() {
            term.map_operands(|x| self.repl.resolve(x));
        }
        let mut before = std::mem::take(&mut self.successors);
        before.clear();
        before.extend(term.successors());
        let term = self.terminator(b, term);
        if term.successor_count() != before.len() || !term.successors().eq(before.iter().copied()) {
            self.edges_changed = true;
        }
        self.successors = before;
        let fresh = std::mem::take(&mut self.fresh);
        self.f.block_mut(b).insts.extend(fresh);
        self.f.set_term(b, term);
    }

    fn inst(&mut self, inst: &Inst) -> Outcome {
        match *inst {
            Inst::Binary(op, a, b) => self.binary(op, a, b),
            Inst::Neg(a) => match self.konst(a) {
                Some(k) => Outcome::Changed(Inst::Const(k.wrapping_neg())),
                None => match *self.f.inst(a) {
                    Inst::Neg(x) => Outcome::Same(x),
                    _ => Outcome::Keep,
                },
            },
            Inst::Load {
                index: Some(x),
                offset,
                size,
            } => self.load(x, offset, size),
            _ => Outcome::Keep,
        }
    }

    fn load(&mut self, x: Value, offset: u32, size: sift_ir::LoadSize) -> Outcome {
        if let Some(c) = self.konst(x) {
            if let Some(off) = offset.checked_add(c) {
                return Outcome::Changed(Inst::Load {
                    index: None,
                    offset: off,
                    size,
                });
            }
            return Outcome::Keep;
        }
        if let Inst::Binary(BinOp::Add, y, c) = *self.f.inst(x) {
            let Some(c) = self.konst(c) else {
                return Outcome::Keep;
            };
            let ry = self.range(y);
            let never_wraps = ry.hi.checked_add(c).is_some();
            let always_wraps = c != 0 && u64::from(ry.lo) + u64::from(c) > u64::from(u32::MAX);
            let new_offset = if never_wraps {
                offset.checked_add(c)
            } else if always_wraps {
                // x + c wraps to x - d, d = 2^32 - c.
                offset.checked_sub(c.wrapping_neg())
            } else {
                None
            };
            if let Some(offset) = new_offset {
                return Outcome::Changed(Inst::Load {
                    index: Some(y),
                    offset,
                    size,
                });
            }
        }
        Outcome::Keep
    }

    fn binary(&mut self, op: BinOp, a: Value, b: Value) -> Outcome {
        use BinOp::*;
        let (ka, kb) = (self.konst(a), self.konst(b));
        if let (Some(x), Some(y)) = (ka, kb) {
            return match op.apply(x, y) {
                Some(k) => Outcome::Changed(Inst::Const(k)),
                None => Outcome::Rejects,
            };
        }
        let commutative = matches!(op, Add | Mul | And | Or | Xor);
        if commutative && ka.is_some() {
            return Outcome::Changed(Inst::Binary(op, b, a));
        }
        if a == b {
            match op {
                Sub | Xor => return Outcome::Changed(Inst::Const(0)),
                And | Or => return Outcome::Same(a),
                _ => {}
            }
        }
        if let Some(k) = ka {
            // Only shifts of zero are decided by a constant left operand (`0 / x` still rejects
            // when x is 0).
            if k == 0 && matches!(op, Shl | Shr) {
                return Outcome::Changed(Inst::Const(0));
            }
            return Outcome::Keep;
        }
        let Some(k) = kb else {
            return Outcome::Keep;
        };
        let ra = self.range(a);
        let zero = Outcome::Changed(Inst::Const(0));
        match op {
            Add if k == 0 => Outcome::Same(a),
            Add => match *self.f.inst(a) {
                Inst::Binary(Add, x, c) => match self.konst(c) {
                    Some(c) => {
                        let sum = self.new_const(c.wrapping_add(k));
                        Outcome::Changed(Inst::Binary(Add, x, sum))
                    }
                    None => Outcome::Keep,
                },
                _ => Outcome::Keep,
            },
            Sub if k == 0 => Outcome::Same(a),
            Sub => {
                let neg = self.new_const(k.wrapping_neg());
                Outcome::Changed(Inst::Binary(Add, a, neg))
            }
            Mul if k == 0 => zero,
            Mul if k == 1 => Outcome::Same(a),
            Div | Mod if k == 0 => Outcome::Rejects,
            Div if k == 1 => Outcome::Same(a),
            Mod if k == 1 => zero,
            And if k == 0 => zero,
            And if low_mask(ra.hi) & !k == 0 => Outcome::Same(a),
            And => match *self.f.inst(a) {
                Inst::Binary(And, x, c) => match self.konst(c) {
                    Some(c) => {
                        let both = self.new_const(c & k);
                        Outcome::Changed(Inst::Binary(And, x, both))
                    }
                    None => Outcome::Keep,
                },
                _ => Outcome::Keep,
            },
            Or if k == 0 => Outcome::Same(a),
            Or if k == u32::MAX => Outcome::Changed(Inst::Const(u32::MAX)),
            Xor if k == 0 => Outcome::Same(a),
            Shl | Shr if k == 0 => Outcome::Same(a),
            Shl | Shr if k >= 32 => zero,
            Shr if ra.hi >> k == 0 => zero,
            _ => Outcome::Keep,
        }
    }

    /// `v == k` as `x == k'` when `v` is an invertible function of `x` and the comparison is
    /// `v`'s only reader (else `v` stays computed and `x` would be one more value to keep).
    /// The operations wrap modulo 2^32 and are bijections, so each inversion holds for every
    /// `x`: `x + c == k` iff `x == k - c`, `x ^ c == k` iff `x == k ^ c`, `-x == k` iff
    /// `x == -k`. Orderings (`>`, `>=`) have no such rule: `x + c` may wrap.
    fn invert_for_equality(&self, v: Value, k: u32) -> Option<(Value, u32)> {
        if self.uses.get(v.index()).copied().unwrap_or(0) != 1 {
            return None;
        }
        let (x, k) = match *self.f.inst(v) {
            Inst::Binary(BinOp::Add, x, c) => (x, k.wrapping_sub(self.konst(c)?)),
            Inst::Binary(BinOp::Sub, x, c) => (x, k.wrapping_add(self.konst(c)?)),
            Inst::Binary(BinOp::Xor, x, c) => (x, k ^ self.konst(c)?),
            Inst::Neg(x) => (x, k.wrapping_neg()),
            _ => return None,
        };
        // Comparing two constants is left to constant folding.
        self.konst(x).is_none().then_some((x, k))
    }

    fn terminator(&mut self, _b: Block, term: Terminator) -> Terminator {
        match term {
            Terminator::Branch {
                op,
                lhs,
                rhs,
                then_,
                else_,
            } => {
                // Constants to the right.
                let (op, lhs, rhs) = if self.konst(lhs).is_some() && self.konst(rhs).is_none() {
                    self.changes += 1;
                    (mirror_op(op), rhs, lhs)
                } else {
                    (op, lhs, rhs)
                };
                let decided = if lhs == rhs && op != CmpOp::Set {
                    Some(matches!(op, CmpOp::Eq | CmpOp::Le | CmpOp::Ge))
                } else if let Some(k) = self.konst(rhs) {
                    decide_range(self.range(lhs), op, k)
                } else {
                    None
                };
                if let Some(outcome) = decided {
                    self.changes += 1;
                    return Terminator::Jump(if outcome { then_ } else { else_ });
                }
                // One form per test: eq, gt, ge, set.
                let (op, then_, else_) = match op {
                    CmpOp::Ne => (CmpOp::Eq, else_, then_),
                    CmpOp::Lt => (CmpOp::Ge, else_, then_),
                    CmpOp::Le => (CmpOp::Gt, else_, then_),
                    other => (other, then_, else_),
                };
                if then_ == else_ {
                    self.changes += 1;
                    return Terminator::Jump(then_);
                }
                // `(x & k) == 0` is `x` not having a bit of `k` set: one test, no `and`.
                if let (CmpOp::Eq, Some(0), &Inst::Binary(BinOp::And, x, mask)) =
                    (op, self.konst(rhs), self.f.inst(lhs))
                {
                    if self.konst(mask).is_some() && self.konst(x).is_none() {
                        self.changes += 1;
                        return Terminator::Branch {
                            op: CmpOp::Set,
                            lhs: x,
                            rhs: mask,
                            then_: else_,
                            else_: then_,
                        };
                    }
                }
                // `x + c == k` is `x == k - c`: one instruction less (libpcap folds its
                // `sub #c; jeq #k` the same way).
                if let (CmpOp::Eq, Some(k)) = (op, self.konst(rhs)) {
                    if let Some((x, k)) = self.invert_for_equality(lhs, k) {
                        self.changes += 1;
                        let rhs = self.new_const(k);
                        return Terminator::Branch {
                            op,
                            lhs: x,
                            rhs,
                            then_,
                            else_,
                        };
                    }
                }
                Terminator::Branch {
                    op,
                    lhs,
                    rhs,
                    then_,
                    else_,
                }
            }
            Terminator::Switch {
                value,
                mut cases,
                default,
            } => {
                let r = self.range(value);
                if let Some(k) = self.konst(value) {
                    self.changes += 1;
                    let t = cases.into_iter().find(|(key, _)| *key == k);
                    return Terminator::Jump(t.map_or(default, |(_, t)| t));
                }
                let before = cases.len();
                cases.retain(|(key, _)| *key >= r.lo && *key <= r.hi);
                if cases.len() != before {
                    self.changes += 1;
                }
                if cases.is_empty() {
                    return Terminator::Jump(default);
                }
                Terminator::Switch {
                    value,
                    cases,
                    default,
                }
            }
            Terminator::ReturnValue(v) => match self.konst(v) {
                Some(k) => {
                    self.changes += 1;
                    Terminator::Return(k)
                }
                None => Terminator::ReturnValue(v),
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_same_semantics, canonical};
    use sift_ir::parse_function;

    fn simplified(text: &str) -> Function {
        let mut f = parse_function(text).unwrap();
        let orig = f.clone();
        run(&mut f);
        sift_ir::verify(&f).unwrap();
        crate::dce::run(&mut f);
        assert_same_semantics(&orig, &f);
        f
    }

    #[test]
    fn folds_constants_and_decides_branches() {
        let f = simplified(
            "block0:\n v0 = const 6\n v1 = const 7\n v2 = mul v0, v1\n v3 = const 42\n br eq v2, v3, block1, block2\nblock1:\n ret 1\nblock2:\n ret 0\n",
        );
        assert_eq!(
            canonical(&f),
            canonical(&parse_function("block0:\n jump block1\nblock1:\n ret 1\n").unwrap())
        );
    }

    #[test]
    fn identities_vanish() {
        let f = simplified(
            "block0:\n v0 = load.b [0]\n v1 = const 0\n v2 = add v0, v1\n v3 = const 1\n v4 = mul v2, v3\n v5 = const 255\n v6 = and v4, v5\n ret v6\n",
        );
        assert_eq!(
            canonical(&f),
            canonical(&parse_function("block0:\n v0 = load.b [0]\n ret v0\n").unwrap())
        );
    }

    #[test]
    fn offsets_reassociate_only_without_wrapping() {
        // (hl + 4) + 2 with hl <= 60 never wraps: one load at hl + 6 + 14.
        let f = simplified(
            "block0:\n v0 = load.b [14]\n v1 = const 15\n v2 = and v0, v1\n v3 = const 2\n v4 = shl v2, v3\n v5 = const 4\n v6 = add v4, v5\n v7 = const 2\n v8 = add v6, v7\n v9 = load.h [v8+14]\n ret v9\n",
        );
        let text = f.to_string();
        assert!(
            text.contains("load.h [v4+20]") || text.contains("+20]"),
            "{text}"
        );
        // A full 32-bit index may wrap: the add must stay.
        let g = simplified(
            "block0:\n v0 = load.w [0]\n v1 = const 4\n v2 = add v0, v1\n v3 = load.b [v2+2]\n ret v3\n",
        );
        assert!(g.to_string().contains("add"), "{g}");
    }

    #[test]
    fn division_by_constant_zero_rejects() {
        let f = simplified(
            "block0:\n v0 = load.b [0]\n v1 = const 0\n v2 = div v0, v1\n v3 = load.b [1]\n ret v3\n",
        );
        assert!(f.to_string().contains("ret 0"), "{f}");
        assert!(
            f.to_string().contains("load.b [0]"),
            "the first load may still reject: {f}"
        );
    }

    #[test]
    fn comparisons_take_one_form() {
        let f = simplified(
            "block0:\n v0 = load.b [0]\n v1 = const 3\n br lt v1, v0, block1, block2\nblock1:\n ret 1\nblock2:\n ret 0\n",
        );
        assert!(f.to_string().contains("br gt v0, v1"), "{f}");
    }

    #[test]
    fn equality_sees_through_wrapping_add_xor_and_neg() {
        // `len - 1 == 4321` is `len == 4322`; x + 0xfffffff3 == 80 is x == 93 (wrapping);
        // x ^ 5 == 6 is x == 3; -x == 1 is x == 0xffffffff.
        for (inst, k, want) in [
            ("add v0, v1", "0xffffffff", "0x10e2"),
            ("sub v0, v1", "1", "0x10e2"),
            ("add v0, v1", "13", "0x10d4"),
            ("xor v0, v1", "0x10e0", "1"),
            ("neg v0", "0", "0xffffef1f"),
        ] {
            let f = simplified(&format!(
                "block0:\n v0 = len\n v1 = const {k}\n v2 = {inst}\n v3 = const 4321\n br ne v2, v3, block1, block2\nblock1:\n ret 1\nblock2:\n ret 0\n"
            ));
            let text = f.to_string();
            assert!(!text.contains(&inst[..4]), "{inst}: {text}");
            assert!(text.contains(&format!("const {want}")), "{inst}: {text}");
        }
        // A value read elsewhere keeps its comparison (the add stays anyway).
        let g = simplified(
            "block0:\n v0 = len\n v1 = const 1\n v2 = add v0, v1\n v3 = const 7\n br eq v2, v3, block1, block2\nblock1:\n ret v2\nblock2:\n ret 0\n",
        );
        assert!(g.to_string().contains("br eq v2"), "{g}");
        // Orderings are not folded: x + 1 > 0 is false for x = 0xffffffff.
        let h = simplified(
            "block0:\n v0 = load.w [0]\n v1 = const 1\n v2 = add v0, v1\n v3 = const 0\n br gt v2, v3, block1, block2\nblock1:\n ret 1\nblock2:\n ret 0\n",
        );
        assert!(h.to_string().contains("add"), "{h}");
    }

    #[test]
    fn mask_test_against_zero_is_a_bit_test() {
        let f = simplified(
            "block0:\n v0 = load.w [0]\n v1 = const 0xfffffffc\n v2 = and v0, v1\n v3 = const 0\n br eq v2, v3, block1, block2\nblock1:\n ret 1\nblock2:\n ret 0\n",
        );
        assert!(
            f.to_string().contains("br set v0, v1, block2, block1"),
            "{f}"
        );
    }
}
