//! Value numbering and libpcap's constant folding.

use sift_ir::{BinOp, Block, Function, Inst, Value};

use super::fast_hash::WordMap;
use super::{OptimizerError, Phase};

/// A value number: equal numbers mean equal values on every packet.
pub(super) type Vn = u32;

/// What makes two values of the rarer kinds equal (constants, loads and arithmetic have
/// tables of their own, see [`Tables`]).
#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    Len,
    Neg(Vn),
    Contains(u32, u32, Vn),
    Member(u32, Vec<Vn>),
    /// Block parameters are opaque (they arise only in code libpcap does not optimize).
    Param(Value),
}

impl Key {
    /// The key of `inst`, which defines `v`, given its operands' numbers.
    fn of(inst: &Inst, v: Value, vn: impl Fn(Value) -> Vn) -> Key {
        match *inst {
            Inst::WireLen => Key::Len,
            Inst::Neg(a) => Key::Neg(vn(a)),
            Inst::Contains {
                set,
                pattern,
                start,
            } => Key::Contains(set, pattern, vn(start)),
            Inst::Member { set, ref key } => Key::Member(set, key.iter().map(|&k| vn(k)).collect()),
            // libpcap never optimizes a filter with `protochain`: give the walk a number of
            // its own.
            Inst::Param(_) | Inst::Protochain { .. } => Key::Param(v),
            Inst::Const(_) | Inst::Load { .. } | Inst::Binary(..) => {
                unreachable!("numbered in tables of their own")
            }
        }
    }
}

/// The numbers given out so far, by what makes values equal: a constant, a load's index
/// number (`Vn::MAX`: none), offset and size, an operator and its operands' numbers.
#[derive(Default)]
struct Tables {
    consts: WordMap<u32, Vn>,
    loads: WordMap<(Vn, u32, u8), Vn>,
    binary: WordMap<(u8, Vn, Vn), Vn>,
    other: WordMap<Key, Vn>,
}

/// A table of [`Tables`]: the number of `key`, a new one (whose constant, if any, is
/// `konst`) when the key is new.
trait Numbers<K> {
    fn number(&mut self, key: K, konsts: &mut Vec<Option<u32>>, konst: Option<u32>) -> Vn;
}

impl<K: std::hash::Hash + Eq> Numbers<K> for WordMap<K, Vn> {
    fn number(&mut self, key: K, konsts: &mut Vec<Option<u32>>, konst: Option<u32>) -> Vn {
        let next = konsts.len() as Vn;
        let number = *self.entry(key).or_insert(next);
        if number == next {
            konsts.push(konst);
        }
        number
    }
}

/// Value numbers and known constants of every value reachable in the function.
pub(super) struct Numbering {
    vn: Vec<Vn>,
    /// The constant of each number that is one, indexed by number: a value's constant
    /// follows from its number (equal constants share a key), and the numbers of a long chain
    /// are some 10^4 against 10^6 values, so this stays in cache.
    konst: Vec<Option<u32>>,
    /// The first loop's numbering found that the second loop's folding would leave every
    /// instruction it numbered as it is (see [`Numbering::folds_nothing`]).
    nothing_to_fold: bool,
}

impl Numbering {
    pub(super) fn vn(&self, v: Value) -> Vn {
        self.vn[v.index()]
    }

    pub(super) fn konst(&self, v: Value) -> Option<u32> {
        // Values not numbered (unreachable) have no constant.
        self.konst.get(self.vn(v) as usize).copied().flatten()
    }

    /// A bound on the value numbers, for tables indexed by them.
    pub(super) fn count(&self) -> usize {
        self.konst.len()
    }

    /// Numbers the values in reverse postorder (`rpo`, `f`'s; operands before uses), folding
    /// constants into the instructions as it goes when `phase` allows. Returns whether an
    /// instruction was rewritten.
    pub(super) fn compute(
        f: &mut Function,
        phase: Phase,
        rpo: &[Block],
    ) -> Result<(Numbering, bool), OptimizerError> {
        let n = f.values.len();
        let mut this = Numbering {
            vn: vec![Vn::MAX; n],
            konst: Vec::new(),
            nothing_to_fold: phase == Phase::MoveBranches,
        };
        // Not reserved for every value: long chains repeat a few loads and constants, so
        // 10^6 values have some 10^4 distinct keys, and a table sized for all of them spreads
        // those over megabytes, a cache miss per lookup. The kinds nearly every value has get
        // tables of their own with small entries, which stay in cache.
        let mut tables = Tables::default();
        let mut changed = false;
        // The values this pass folded to constants (few: long chains fold nothing).
        let mut folded_now: Vec<Value> = Vec::new();
        // Those of them libpcap knows only from the next pass on (see `known_next_pass`).
        let mut next_pass: Vec<Value> = Vec::new();
        for &b in rpo {
            let data = &f.blocks[b.index()];
            let (params, insts) = (data.params.len(), data.insts.len());
            for i in 0..params + insts {
                let data = &f.blocks[b.index()];
                let v = if i < params {
                    data.params[i]
                } else {
                    data.insts[i - params]
                };
                if phase == Phase::FoldStatements {
                    let (rewritten, alias) =
                        this.fold_in_place(f, v, &mut folded_now, &mut next_pass)?;
                    changed |= rewritten;
                    if let Some(a) = alias {
                        this.vn[v.index()] = this.vn(a);
                        continue;
                    }
                }
                let inst = &f.values[v.index()];
                if phase == Phase::MoveBranches
                    && this.nothing_to_fold
                    && i >= params
                    && may_fold(inst)
                {
                    // Here, where the instruction was just read, rather than in a walk of
                    // its own over 10^5 blocks when the second loop asks.
                    this.nothing_to_fold = this.keeps(&f.values, inst);
                }
                let (vns, konsts) = (&this.vn, &mut this.konst);
                let vn = |x: Value| vns[x.index()];
                let number = match *inst {
                    Inst::Const(k) => tables.consts.number(k, konsts, Some(k)),
                    Inst::Load {
                        index,
                        offset,
                        size,
                    } => {
                        let key = (index.map_or(Vn::MAX, vn), offset, size as u8);
                        tables.loads.number(key, konsts, None)
                    }
                    Inst::Binary(op, a, b) => {
                        tables.binary.number((op as u8, vn(a), vn(b)), konsts, None)
                    }
                    _ => tables.other.number(Key::of(inst, v, vn), konsts, None),
                };
                this.vn[v.index()] = number;
            }
        }
        Ok((this, changed))
    }

    /// Whether the second loop's folding would leave every instruction of the blocks in
    /// `rpo` as it is, by these numbers: then numbering those blocks with folding gives these
    /// classes again (the keys are the same), and no error.
    ///
    /// A numbering of the first loop answers from what it saw: that loop deletes instructions
    /// but never rewrites one, and its reachable blocks only lose members, so what folded
    /// nothing when numbered still folds nothing (with the same constants) now.
    pub(super) fn folds_nothing(&self, f: &Function, rpo: &[Block]) -> bool {
        self.nothing_to_fold || self.each_folds_to_itself(f, rpo)
    }

    fn each_folds_to_itself(&self, f: &Function, rpo: &[Block]) -> bool {
        rpo.iter().all(|&b| {
            f.block(b).insts.iter().all(|&v| {
                let inst = f.inst(v);
                !may_fold(inst) || self.keeps(&f.values, inst)
            })
        })
    }

    /// Whether folding `inst` by these numbers leaves it as it is, without error.
    fn keeps(&self, values: &[Inst], inst: &Inst) -> bool {
        matches!(self.fold(values, inst), Ok((folded, None)) if folded == *inst)
    }

    /// Whether `v` divides a value that is not a constant by a zero this pass folded (`x % (21
    /// % 3)`): libpcap's `div x` becomes `div #0` now and fails in the next pass (its `div #k`
    /// check), so the error waits for it. A zero known before the pass fails at once, as does
    /// a constant divided by zero (both folded now, as libpcap's `fold_op` does).
    fn zero_divisor_found_now(&self, f: &Function, v: Value, folded_now: &[Value]) -> bool {
        match f.values[v.index()] {
            Inst::Binary(BinOp::Div | BinOp::Mod, a, b) => {
                self.konst(a).is_none() && self.konst(b) == Some(0) && folded_now.contains(&b)
            }
            _ => false,
        }
    }

    /// The second loop's folding of `v` in this pass, in place: whether `v` changed, and the
    /// operand it is equal to when it is an identity. Kept out of line: the first loop's
    /// numbering (most of the time on long chains) runs the same walk without it.
    #[inline(never)]
    fn fold_in_place(
        &self,
        f: &mut Function,
        v: Value,
        folded_now: &mut Vec<Value>,
        next_pass: &mut Vec<Value>,
    ) -> Result<(bool, Option<Value>), OptimizerError> {
        if self.zero_divisor_found_now(f, v, folded_now) {
            // libpcap turns `div x` with a known X into `div #k` and only reports a zero `k`
            // in the next pass, when the block may no longer be reached.
            return Ok((true, None));
        }
        if let Inst::Binary(BinOp::Div | BinOp::Mod, a, divisor) = f.values[v.index()] {
            if next_pass.contains(&divisor) {
                // X is not yet known to be 0: a zero dividend makes `div x` an `ld #0` at
                // once (`00 % ip[7:2] & 80 >> 28`: libpcap 1.10 reports no error), and any
                // other waits for the pass that finds the zero.
                if self.konst(a) == Some(0) {
                    f.values[v.index()] = Inst::Const(0);
                    folded_now.push(v);
                }
                return Ok((true, None));
            }
        }
        let (inst, alias) = self.fold(&f.values, &f.values[v.index()])?;
        let known = alias.is_some() || matches!(inst, Inst::Const(_));
        // A shift that fails only where it folds (a deferred zero is a constant to `fold`).
        if known && self.known_next_pass(f, v, next_pass)? {
            next_pass.push(v);
        }
        let rewritten = inst != f.values[v.index()];
        if rewritten {
            if matches!(inst, Inst::Const(_)) {
                folded_now.push(v);
            }
            f.values[v.index()] = inst;
        }
        Ok((rewritten, alias))
    }

    /// Whether libpcap's accumulator knows `v` as a constant only from the next pass on: `x *
    /// 0` and `x & 0` with `x` unknown become `mul #0`, `and #0` in this pass and `ld #0` in
    /// the next, and so does what is computed from them. A shift of such a value by a constant
    /// over 31 is then a shift of an unknown value, which fails at once (`link[4:4] * 0 << 0 -
    /// 13`, `len * icmp-echoreply >> 31 ^ 2608671479`: libpcap 1.10 reports "shift by more
    /// than 31 bits"), where a shift of a constant would give 0.
    fn known_next_pass(
        &self,
        f: &Function,
        v: Value,
        next_pass: &[Value],
    ) -> Result<bool, OptimizerError> {
        Ok(match f.values[v.index()] {
            Inst::Binary(op, a, b) => {
                let amount = self.konst(b);
                if next_pass.contains(&a)
                    && matches!(op, BinOp::Shl | BinOp::Shr)
                    && amount.is_some_and(|k| k > 31)
                {
                    return Err(OptimizerError::ShiftTooFar);
                }
                matches!(op, BinOp::Mul | BinOp::And)
                    && self.konst(a).is_none()
                    && amount == Some(0)
                    || next_pass.contains(&a)
                    || next_pass.contains(&b)
            }
            Inst::Neg(a) => next_pass.contains(&a),
            _ => false,
        })
    }

    /// libpcap's folding of one instruction: the instruction to keep, and the operand it is
    /// equal to when it is an identity (`x + 0`).
    fn fold(&self, values: &[Inst], inst: &Inst) -> Result<(Inst, Option<Value>), OptimizerError> {
        let folded = match *inst {
            Inst::Load {
                index: Some(x),
                offset,
                size,
            } => match (self.konst(x), &values[x.index()]) {
                // `ld [x + k]` with a known `x` becomes `ld [x + k]` computed modulo 2^32.
                (Some(k), _) => Inst::Load {
                    index: None,
                    offset: k.wrapping_add(offset),
                    size,
                },
                // libpcap's peephole for `tcp[k]`: `ld #k; add x; tax; ld [x + off]` becomes
                // `ld [x + (off + k)]`, the sum modulo 2^32. That is not the same load: the
                // packet's bounds check sees the offset and the index apart, so a "negative"
                // k that made the index wrap back into the packet now rejects it.
                (None, &Inst::Binary(BinOp::Add, a, b)) if self.konst(b).is_none() => {
                    match self.konst(a) {
                        Some(k) => Inst::Load {
                            index: Some(b),
                            offset: k.wrapping_add(offset),
                            size,
                        },
                        None => inst.clone(),
                    }
                }
                _ => inst.clone(),
            },
            Inst::Neg(a) => match self.konst(a) {
                Some(k) => Inst::Const(k.wrapping_neg()),
                None => inst.clone(),
            },
            Inst::Binary(op, a, b) => return self.fold_binary(op, a, b),
            _ => inst.clone(),
        };
        Ok((folded, None))
    }

    fn fold_binary(
        &self,
        op: BinOp,
        a: Value,
        b: Value,
    ) -> Result<(Inst, Option<Value>), OptimizerError> {
        let kept = Inst::Binary(op, a, b);
        Ok(match binary_fold(op, self.konst(a), self.konst(b))? {
            BinaryFold::Const(k) => (Inst::Const(k), None),
            BinaryFold::Left => (kept, Some(a)),
            BinaryFold::Right => (kept, Some(b)),
            BinaryFold::Unchanged => (kept, None),
        })
    }
}

/// Whether libpcap's folding may change `inst`: it passes everything else through as it is
/// (constants and absolute loads, most of a long chain).
fn may_fold(inst: &Inst) -> bool {
    matches!(
        inst,
        Inst::Binary(..) | Inst::Neg(_) | Inst::Load { index: Some(_), .. }
    )
}

/// What libpcap's folding makes of `a op b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BinaryFold {
    Const(u32),
    /// The left operand (`x + 0`).
    Left,
    /// The right operand (`0 | x`).
    Right,
    Unchanged,
}

/// libpcap's folding of `a op b`, given the operands' constants (`None`: not a constant).
pub(super) fn binary_fold(
    op: BinOp,
    a: Option<u32>,
    b: Option<u32>,
) -> Result<BinaryFold, OptimizerError> {
    use BinOp::*;
    match (a, b) {
        (Some(x), Some(y)) => match op.apply(x, y) {
            Some(k) => Ok(BinaryFold::Const(k)),
            None if op == Div => Err(OptimizerError::DivisionByZero),
            None => Err(OptimizerError::ModulusByZero),
        },
        (None, Some(0)) => match op {
            Add | Sub | Shl | Shr | Or | Xor => Ok(BinaryFold::Left),
            Mul | And => Ok(BinaryFold::Const(0)),
            Div => Err(OptimizerError::DivisionByZero),
            Mod => Err(OptimizerError::ModulusByZero),
        },
        (None, Some(k)) if matches!(op, Shl | Shr) && k > 31 => Err(OptimizerError::ShiftTooFar),
        (Some(0), None) => match op {
            Add | Or | Xor => Ok(BinaryFold::Right),
            Mul | Div | Mod | And | Shl | Shr => Ok(BinaryFold::Const(0)),
            Sub => Ok(BinaryFold::Unchanged),
        },
        _ => Ok(BinaryFold::Unchanged),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_ir::parse_function;

    /// The first loop's numbering knows, from the instructions it numbered, what a walk over
    /// them would find: whether the second loop's folding leaves each as it is.
    #[test]
    fn the_first_numbering_knows_whether_anything_folds() {
        let chain = "\
block0:
    v0 = load.w [26]
    v1 = const 0xffffff00
    v2 = and v0, v1
    v3 = const 0xa000100
    br eq v2, v3, block1, block2
block1:
    ret 1
block2:
    ret 0
";
        let folding = [
            // `x & 0`, known as 0 from the next pass on.
            ("v1 = const 0", "v2 = and v0, v1"),
            // Two constants.
            ("v1 = const 1", "v2 = add v1, v1"),
            // A load at a known index.
            ("v1 = const 4", "v2 = load.b [v1+14]"),
            // `x << 0`, an identity.
            ("v1 = const 0", "v2 = shl v0, v1"),
        ];
        let texts = std::iter::once(chain.to_string()).chain(folding.iter().map(|(k, op)| {
            chain
                .replace("v1 = const 0xffffff00", k)
                .replace("v2 = and v0, v1", op)
        }));
        for (i, text) in texts.enumerate() {
            let mut f = parse_function(&text).unwrap();
            let rpo = f.reverse_postorder();
            let (numbers, _) = Numbering::compute(&mut f, Phase::MoveBranches, &rpo).unwrap();
            assert_eq!(numbers.nothing_to_fold, i == 0, "{text}");
            assert_eq!(
                numbers.nothing_to_fold,
                numbers.each_folds_to_itself(&f, &rpo)
            );
        }
    }
}
