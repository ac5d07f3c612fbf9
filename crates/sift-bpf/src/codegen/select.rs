//! Instruction selection: IR blocks to classic BPF instructions with symbolic targets and
//! virtual scratch slots (one per spilled SSA value).

use sift_ir::{BinOp, Block, CmpOp, Function, Inst, LoadSize, Target, Terminator, Value};

use crate::insn::{AluOp, Insn, JmpOp, Op, Size, Src};

/// A jump target in the item list.
pub(super) type Label = usize;

/// One element of the linear code before slot allocation and label resolution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Item {
    /// A finished instruction (no jump offsets).
    Insn(Insn),
    /// The position of a label.
    Label(Label),
    /// `ja label`.
    Jump(Label),
    /// A conditional jump: `code` (a `jmp` opcode), `k`, taken and not-taken targets.
    Cond {
        code: u16,
        k: u32,
        t: Label,
        f: Label,
    },
    /// `st M[slot of value]`.
    Store(Value),
    /// `ld M[slot of value]`.
    LoadA(Value),
    /// `ldx M[slot of value]`.
    LoadX(Value),
}

struct Selector<'f> {
    f: &'f Function,
    items: Vec<Item>,
    /// Operand occurrences of each value (instructions, terminators, edge arguments).
    uses: Vec<u32>,
    /// Values consumed from `A` by the very next instruction or the terminator, never spilled.
    immediate: Vec<bool>,
    /// What `A` and `X` hold right now, if known.
    a: Option<Value>,
    x: Option<Value>,
    block_label: Vec<Label>,
    labels: Label,
    /// Edge stubs to emit after the current block: (label, edge).
    stubs: Vec<(Label, Target)>,
}

fn alu_op(op: BinOp) -> AluOp {
    match op {
        BinOp::Add => AluOp::Add,
        BinOp::Sub => AluOp::Sub,
        BinOp::Mul => AluOp::Mul,
        BinOp::Div => AluOp::Div,
        BinOp::Mod => AluOp::Mod,
        BinOp::And => AluOp::And,
        BinOp::Or => AluOp::Or,
        BinOp::Xor => AluOp::Xor,
        BinOp::Shl => AluOp::Lsh,
        BinOp::Shr => AluOp::Rsh,
    }
}

fn size(s: LoadSize) -> Size {
    match s {
        LoadSize::Byte => Size::Byte,
        LoadSize::Half => Size::Half,
        LoadSize::Word => Size::Word,
    }
}

/// The comparison with its operands exchanged: `op(a, b) == swapped(op)(b, a)`.
fn swapped(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Ge => CmpOp::Le,
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Le => CmpOp::Ge,
        other => other,
    }
}

/// The cBPF condition for `op`, and whether the targets must be exchanged.
fn jmp_op(op: CmpOp) -> (JmpOp, bool) {
    match op {
        CmpOp::Eq => (JmpOp::Jeq, false),
        CmpOp::Ne => (JmpOp::Jeq, true),
        CmpOp::Gt => (JmpOp::Jgt, false),
        CmpOp::Ge => (JmpOp::Jge, false),
        CmpOp::Lt => (JmpOp::Jge, true),
        CmpOp::Le => (JmpOp::Jgt, true),
        CmpOp::Set => (JmpOp::Jset, false),
    }
}

/// Selects instructions for every reachable block of a verified function, in reverse postorder.
pub(super) fn select(f: &Function) -> Vec<Item> {
    let order = f.reverse_postorder();
    let mut uses = vec![0u32; f.values.len()];
    for &b in &order {
        let data = f.block(b);
        for &v in &data.insts {
            for o in f.inst(v).operands() {
                uses[o.index()] += 1;
            }
        }
        for o in data.term.operands() {
            uses[o.index()] += 1;
        }
    }
    let mut immediate = vec![false; f.values.len()];
    for &b in &order {
        let data = f.block(b);
        for (i, &v) in data.insts.iter().enumerate() {
            if uses[v.index()] != 1 || !is_computed(f.inst(v)) {
                continue;
            }
            let consumer_reads = match data.insts.get(i + 1) {
                Some(&next) => f.inst(next).operands().contains(&v),
                None => match &data.term {
                    Terminator::Branch { lhs, rhs, .. } => *lhs == v || *rhs == v,
                    Terminator::Switch { value, .. } | Terminator::ReturnValue(value) => {
                        *value == v
                    }
                    _ => false,
                },
            };
            immediate[v.index()] = consumer_reads;
        }
    }
    let mut sel = Selector {
        f,
        items: Vec::new(),
        uses,
        immediate,
        a: None,
        x: None,
        block_label: (0..f.blocks.len()).collect(),
        labels: f.blocks.len(),
        stubs: Vec::new(),
    };
    for &b in &order {
        sel.block(b);
    }
    sel.items
}

/// Whether the instruction computes something at run time (as opposed to a constant, the wire
/// length or a parameter, which are rematerialised or live in their slot).
fn is_computed(inst: &Inst) -> bool {
    matches!(inst, Inst::Load { .. } | Inst::Binary(..) | Inst::Neg(_))
}

impl Selector<'_> {
    fn emit(&mut self, op: Op, k: u32) {
        self.items.push(Item::Insn(op.with_k(k)));
    }

    fn fresh_label(&mut self) -> Label {
        self.labels += 1;
        self.labels - 1
    }

    fn const_of(&self, v: Value) -> Option<u32> {
        self.f.const_value(v)
    }

    /// Puts `v` into `A` without touching `X`.
    fn load_a(&mut self, v: Value) {
        if self.a == Some(v) {
            return;
        }
        match *self.f.inst(v) {
            Inst::Const(k) => self.emit(Op::LdImm, k),
            Inst::WireLen => self.emit(Op::LdLen, 0),
            _ => self.items.push(Item::LoadA(v)),
        }
        self.a = Some(v);
    }

    /// Puts `v` into `X` without touching `A`.
    fn load_x(&mut self, v: Value) {
        if self.x == Some(v) {
            return;
        }
        if self.a == Some(v) {
            self.emit(Op::Tax, 0);
        } else {
            match *self.f.inst(v) {
                Inst::Const(k) => self.emit(Op::LdxImm, k),
                Inst::WireLen => self.emit(Op::LdxLen, 0),
                _ => self.items.push(Item::LoadX(v)),
            }
        }
        self.x = Some(v);
    }

    fn block(&mut self, b: Block) {
        self.items.push(Item::Label(self.block_label[b.index()]));
        self.a = None;
        self.x = None;
        let data = self.f.block(b);
        for &v in &data.insts {
            self.inst(v);
        }
        self.terminator(&data.term);
        for (label, target) in std::mem::take(&mut self.stubs) {
            self.items.push(Item::Label(label));
            self.a = None;
            self.x = None;
            self.copies(&target);
            self.items
                .push(Item::Jump(self.block_label[target.block.index()]));
        }
    }

    fn inst(&mut self, v: Value) {
        let inst = self.f.inst(v).clone();
        let unused = self.uses[v.index()] == 0;
        match inst {
            Inst::Const(_) | Inst::WireLen | Inst::Param(_) => return,
            Inst::Load {
                index,
                offset,
                size: s,
            } => match index {
                None => self.emit(Op::LdAbs(size(s)), offset),
                Some(i) => {
                    self.load_x(i);
                    self.emit(Op::LdInd(size(s)), offset);
                }
            },
            // Pure arithmetic nobody reads can go; division may reject the packet, so it stays.
            Inst::Binary(..) | Inst::Neg(_)
                if unused && !matches!(inst, Inst::Binary(BinOp::Div | BinOp::Mod, ..)) =>
            {
                return
            }
            Inst::Binary(op, lhs, rhs) => self.binary(op, lhs, rhs),
            Inst::Neg(a) => {
                self.load_a(a);
                self.emit(Op::Neg, 0);
            }
        }
        self.a = Some(v);
        if !unused && !self.immediate[v.index()] {
            self.items.push(Item::Store(v));
        }
    }

    fn binary(&mut self, op: BinOp, lhs: Value, rhs: Value) {
        let alu = alu_op(op);
        // `div #0` is invalid and `lsh #32` means something else in cBPF: use X for those.
        let k_form_ok = |k: u32| match op {
            BinOp::Div | BinOp::Mod => k != 0,
            BinOp::Shl | BinOp::Shr => k < 32,
            _ => true,
        };
        let commutative = matches!(
            op,
            BinOp::Add | BinOp::Mul | BinOp::And | BinOp::Or | BinOp::Xor
        );
        match (self.const_of(lhs), self.const_of(rhs)) {
            (_, Some(k)) if k_form_ok(k) => {
                self.load_a(lhs);
                self.emit(Op::Alu(alu, Src::K), k);
            }
            (Some(k), None) if commutative => {
                self.load_a(rhs);
                self.emit(Op::Alu(alu, Src::K), k);
            }
            _ => {
                self.load_x(rhs);
                self.load_a(lhs);
                self.emit(Op::Alu(alu, Src::X), 0);
            }
        }
    }

    /// Whether an edge needs copies into block parameters.
    fn needs_copies(&self, t: &Target) -> bool {
        let params = &self.f.block(t.block).params;
        params.iter().any(|p| self.uses[p.index()] > 0)
    }

    /// Writes the edge arguments into the parameters' slots. Parameter slots never share a
    /// word with the arguments of an edge into their block (their intervals overlap at the
    /// copy), so sequential copies are a correct parallel copy.
    fn copies(&mut self, t: &Target) {
        let params = self.f.block(t.block).params.clone();
        for (p, &arg) in params.iter().zip(&t.args) {
            if self.uses[p.index()] > 0 {
                self.load_a(arg);
                self.items.push(Item::Store(*p));
            }
        }
    }

    /// The label to jump to for an edge: the block itself, or a stub doing the copies first.
    fn edge_label(&mut self, t: &Target) -> Label {
        if self.needs_copies(t) {
            let l = self.fresh_label();
            self.stubs.push((l, t.clone()));
            l
        } else {
            self.block_label[t.block.index()]
        }
    }

    fn jump(&mut self, t: &Target) {
        self.copies(t);
        self.items
            .push(Item::Jump(self.block_label[t.block.index()]));
    }

    fn terminator(&mut self, term: &Terminator) {
        match term {
            Terminator::Return(k) => self.emit(Op::RetK, *k),
            Terminator::ReturnValue(v) => match self.const_of(*v) {
                Some(k) => self.emit(Op::RetK, k),
                None => {
                    self.load_a(*v);
                    self.emit(Op::RetA, 0);
                }
            },
            Terminator::Jump(t) => self.jump(t),
            Terminator::Branch { then_, else_, .. } if then_ == else_ => self.jump(then_),
            Terminator::Branch {
                op,
                lhs,
                rhs,
                then_,
                else_,
            } => {
                let (op, lhs, rhs) =
                    if self.const_of(*lhs).is_some() && self.const_of(*rhs).is_none() {
                        (swapped(*op), *rhs, *lhs)
                    } else {
                        (*op, *lhs, *rhs)
                    };
                let (jop, exchange) = jmp_op(op);
                let (t, e) = if exchange {
                    (else_, then_)
                } else {
                    (then_, else_)
                };
                let (src, k) = match self.const_of(rhs) {
                    Some(k) => (Src::K, k),
                    None => {
                        self.load_x(rhs);
                        (Src::X, 0)
                    }
                };
                self.load_a(lhs);
                let t = self.edge_label(t);
                let f = self.edge_label(e);
                self.items.push(Item::Cond {
                    code: Op::Jmp(jop, src).code(),
                    k,
                    t,
                    f,
                });
            }
            Terminator::Switch {
                value,
                cases,
                default,
            } => {
                self.load_a(*value);
                for (key, target) in cases {
                    let t = self.edge_label(target);
                    let next = self.fresh_label();
                    self.items.push(Item::Cond {
                        code: Op::Jmp(JmpOp::Jeq, Src::K).code(),
                        k: *key,
                        t,
                        f: next,
                    });
                    self.items.push(Item::Label(next));
                }
                self.jump(default);
            }
            // The verifier refuses unset terminators; reject rather than panic.
            Terminator::Unset => self.emit(Op::RetK, 0),
        }
    }
}
