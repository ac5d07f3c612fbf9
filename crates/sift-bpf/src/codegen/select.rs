//! Instruction selection: IR blocks to classic BPF instructions with symbolic targets and
//! virtual scratch slots (one per SSA value kept in scratch memory).
//!
//! Values are placed where they are cheapest:
//!
//! * the selector knows what `A` and `X` hold ([`Regs`]), also across blocks (a value stays in a
//!   register when every incoming edge leaves it there), so a value already in place costs
//!   nothing. Registers hold value classes ([`super::classes`]): an instruction whose twin (same
//!   operation on equal operands) is in a register is not emitted, also when the twin was
//!   computed on another path, as happens at a merge of the `tcp` and `udp` paths of `port`;
//! * a value needed again is *rematerialised* when that takes one instruction (constants, the
//!   wire length, packet loads at a constant offset or at `X + k` while `X` holds the index,
//!   and `ldxb 4*([k]&0xf)`): a packet load repeated after its definition cannot fail, since the
//!   definition dominates the use and already read those bytes;
//! * otherwise it is reloaded from the scratch word its definition stored it in. Every value
//!   defined in a register is stored right away; the allocator drops the stores nobody reloads.
//!
//! The IPv4 header length `shl(and(load.b [k], 15), 2)` becomes one `ldxb 4*([k]&0xf)`; the
//! byte load and the mask it subsumes are not emitted when nothing else reads them (a load only
//! when it sits in the same block, so that the packet is still rejected on the same paths). A
//! mask with one other reader, which takes it in `A` or as a load's index, is computed at that
//! reader instead ([`super::patterns`]): `ldb [k]; and #0xf` (`; tax`) there is cheaper than
//! computing, storing and reloading it.
//!
//! A `protochain` walk (libpcap dialect; the kernel's gets it unrolled before selection) is one
//! [`Item::Walk`]: `A` and `X` are loaded with the protocol and offset, the loop leaves the
//! result in `A` and garbage in `X`, and its scratch word is the slot of its own result, which
//! the allocator keeps apart from every value live across the loop.
//!
//! A sum `add(b, #k)` with one reader is computed at that reader ([`super::recompute`]), folded
//! into it when it is an addition (`add x; add #k`).
//!
//! Block parameters are virtual slots written by copies on the incoming edges ([`edges`]), which
//! the allocator elides where a parameter shares its argument's word. Comparisons become `jeq`/`jgt`/`jge`/
//! `jset` with the constant folded into `#k` and the targets swapped for `ne`/`lt`/`le`; a
//! `Switch` becomes a chain of tests whose last falls to the default: a `jeq` per key, except
//! that a run of three or more consecutive keys with one target is one `jge`/`jgt` pair.

use sift_ir::runs::Run;
use sift_ir::{BinOp, Block, Chain, CmpOp, Function, Inst, Target, Terminator, Value};

use super::classes::value_classes;
use super::patterns::{header_lengths, jump_argument_loads};
use super::recompute::placement;
use super::regs::Regs;

mod edges;
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
    /// `stx M[slot of value]`.
    StoreX(Value),
    /// `ld M[slot of value]`.
    LoadA(Value),
    /// `ldx M[slot of value]`.
    LoadX(Value),
    /// The copy of an edge argument into a block parameter: `st` (`stx` with `from_x`) into
    /// the parameter's slot, nothing when the allocator gives both the same word.
    Copy {
        param: Value,
        arg: Value,
        from_x: bool,
    },
    /// A `protochain` loop ([`crate::protochain::loop_code`]) with `A` and `X` loaded; the slot
    /// of `value` (the walk's result) is its scratch word, free of every value live across it.
    Walk {
        chain: Chain,
        base: u32,
        target: u32,
        value: Value,
    },
}

struct Selector<'f> {
    f: &'f Function,
    items: Vec<Item>,
    /// Operand occurrences of each value (instructions, terminators, edge arguments).
    uses: Vec<u32>,
    /// For values of the form `shl(and(load.b [k], 15), 2)` with a use: `k`.
    msh: Vec<Option<u32>>,
    /// Values whose only readers are `ldxb 4*([k]&0xf)` instructions that do their work.
    covered: Vec<bool>,
    /// Header-length masks computed at their one other reader: `ldb [k]; and #0xf`.
    lazy: Vec<Option<u32>>,
    /// Loads read only as arguments of their block's unconditional jump: emitted at the jump,
    /// where the copy needs them in `A` (their block still performs them, so the packet is
    /// rejected on the same paths).
    deferred: Vec<bool>,
    /// Deferred loads not emitted yet.
    pending: Vec<bool>,
    /// Sums `add(b, #k)` computed at their reader ([`super::recompute`]): `(b, k)`.
    sum: Vec<Option<(Value, u32)>>,
    /// Block parameters copied into `X` on every incoming edge.
    index_param: Vec<bool>,
    /// The class of each value ([`super::classes`]): registers hold classes, so a value
    /// is in place when an equal twin is.
    class: Vec<Value>,
    /// What `A` and `X` hold right now (as classes).
    regs: Regs,
    /// Per block: the state every incoming edge seen so far agrees on.
    entry: Vec<Option<Regs>>,
    block_label: Vec<Label>,
    labels: Label,
    /// Edge stubs to emit after the current block: (label, edge, state at the branch).
    stubs: Vec<(Label, Target, Regs)>,
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

/// Selects instructions for every reachable block of a verified function, in reverse postorder.
pub(super) fn select(f: &Function) -> Vec<Item> {
    let order = f.reverse_postorder();
    let mut uses = vec![0u32; f.values.len()];
    let mut def_block = vec![None; f.values.len()];
    for &b in &order {
        let data = f.block(b);
        for &v in &data.insts {
            def_block[v.index()] = Some(b);
            for o in f.inst(v).operands() {
                uses[o.index()] += 1;
            }
        }
        for o in data.term.operands() {
            uses[o.index()] += 1;
        }
    }
    let hl = header_lengths(f, &order, &uses, &def_block);
    let deferred = jump_argument_loads(f, &order, &uses);
    let placed = placement(f, &order, &uses);
    let mut sel = Selector {
        f,
        items: Vec::new(),
        pending: vec![false; uses.len()],
        uses,
        msh: hl.msh,
        covered: hl.covered,
        lazy: hl.lazy,
        deferred,
        sum: placed.sum,
        index_param: placed.index_param,
        class: value_classes(f),
        regs: Regs::default(),
        entry: vec![None; f.blocks.len()],
        block_label: (0..f.blocks.len()).collect(),
        labels: f.blocks.len(),
        stubs: Vec::new(),
    };
    for &b in &order {
        sel.block(b);
    }
    sel.items
}

impl Selector<'_> {
    fn emit(&mut self, op: Op, k: u32) {
        self.items.push(Item::Insn(op.with_k(k)));
    }

    fn fresh_label(&mut self) -> Label {
        self.labels += 1;
        self.labels - 1
    }

    /// Whether `A` holds `v` (or an equal twin).
    fn in_a(&self, v: Value) -> bool {
        self.regs.a.contains(self.class[v.index()])
    }

    /// Whether `X` holds `v` (or an equal twin).
    fn in_x(&self, v: Value) -> bool {
        self.regs.x.contains(self.class[v.index()])
    }

    /// `A` now holds exactly `v`.
    fn set_a(&mut self, v: Value) {
        self.regs.a.set(self.class[v.index()]);
    }

    /// `X` now holds exactly `v`.
    fn set_x(&mut self, v: Value) {
        self.regs.x.set(self.class[v.index()]);
    }

    fn const_of(&self, v: Value) -> Option<u32> {
        self.f.const_value(v)
    }

    /// Puts `v` into `A` without touching `X`: already there, moved from `X`, recomputed in one
    /// instruction, or reloaded from its scratch word.
    fn load_a(&mut self, v: Value) {
        if self.in_a(v) {
            return;
        }
        if self.pending[v.index()] {
            // Only edge copies read deferred loads, and they may clobber `X`.
            self.pending[v.index()] = false;
            if let Inst::Load {
                index: Some(i),
                offset,
                size: s,
            } = *self.f.inst(v)
            {
                self.load_x(i);
                self.emit(Op::LdInd(Size::from_load_size(s)), offset);
                self.set_a(v);
                self.items.push(Item::Store(v));
                return;
            }
        }
        if let (Some(k), false) = (self.lazy[v.index()], self.in_x(v)) {
            self.emit(Op::LdAbs(Size::Byte), k);
            self.emit(Op::Alu(AluOp::And, Src::K), 15);
            self.set_a(v);
            return;
        }
        if let (Some((base, k)), false) = (self.sum[v.index()], self.in_x(v)) {
            self.load_a(base);
            self.emit(Op::Alu(AluOp::Add, Src::K), k);
            self.set_a(v);
            return;
        }
        match *self.f.inst(v) {
            Inst::Const(k) => self.emit(Op::LdImm, k),
            Inst::WireLen => self.emit(Op::LdLen, 0),
            _ if self.in_x(v) => self.emit(Op::Txa, 0),
            Inst::Load {
                index: None,
                offset,
                size: s,
            } => self.emit(Op::LdAbs(Size::from_load_size(s)), offset),
            Inst::Load {
                index: Some(i),
                offset,
                size: s,
            } if self.in_x(i) => self.emit(Op::LdInd(Size::from_load_size(s)), offset),
            _ => self.items.push(Item::LoadA(v)),
        }
        self.set_a(v);
    }

    /// Puts `v` into `X`, without touching `A` unless `v` is a sum or a header-length mask
    /// computed at its reader, or a deferred load not emitted yet (these go through `A`; every
    /// caller loads `A` after `X`, or no longer needs it).
    fn load_x(&mut self, v: Value) {
        if self.in_x(v) {
            return;
        }
        let through_a = self.sum[v.index()].is_some()
            || self.lazy[v.index()].is_some()
            || self.pending[v.index()];
        if through_a && !self.in_a(v) {
            self.load_a(v);
        }
        if self.in_a(v) {
            self.emit(Op::Tax, 0);
        } else if let Some(k) = self.msh[v.index()] {
            self.emit(Op::LdxMsh, k);
        } else {
            match *self.f.inst(v) {
                Inst::Const(k) => self.emit(Op::LdxImm, k),
                Inst::WireLen => self.emit(Op::LdxLen, 0),
                _ => self.items.push(Item::LoadX(v)),
            }
        }
        self.set_x(v);
    }

    fn block(&mut self, b: Block) {
        self.items.push(Item::Label(self.block_label[b.index()]));
        self.regs = self.entry[b.index()].take().unwrap_or_default();
        let data = self.f.block(b);
        for &v in &data.insts {
            self.inst(v);
        }
        self.terminator(&data.term);
        for (label, target, regs) in std::mem::take(&mut self.stubs) {
            self.items.push(Item::Label(label));
            self.regs = regs;
            self.jump(&target);
        }
    }

    fn inst(&mut self, v: Value) {
        let inst = self.f.inst(v).clone();
        let unused = self.uses[v.index()] == 0;
        if self.covered[v.index()]
            || self.lazy[v.index()].is_some()
            || self.sum[v.index()].is_some()
        {
            return;
        }
        if self.deferred[v.index()] {
            self.pending[v.index()] = true;
            return;
        }
        if matches!(inst, Inst::Const(_) | Inst::WireLen | Inst::Param(_)) {
            return;
        }
        // A twin computed on every path here (see `classes`) already did the work, and could
        // not have rejected the packet where this one would not: keep it where it is (stored
        // for later reloads; the allocator drops the store if there are none).
        if self.in_x(v) || self.in_a(v) {
            if !unused {
                let store = if self.in_x(v) {
                    Item::StoreX(v)
                } else {
                    Item::Store(v)
                };
                self.items.push(store);
            }
            return;
        }
        if let Some(k) = self.msh[v.index()] {
            self.emit(Op::LdxMsh, k);
            self.set_x(v);
            self.items.push(Item::StoreX(v));
            return;
        }
        match inst {
            Inst::Const(_) | Inst::WireLen | Inst::Param(_) => return,
            Inst::Contains { .. } | Inst::Member { .. } => {
                unreachable!("compile_for refuses coprocessor calls")
            }
            // The walk may reject the packet, so it stays even when nobody reads its result.
            Inst::Protochain {
                chain,
                base,
                proto,
                offset,
                target,
            } => {
                self.load_x(offset);
                self.load_a(proto);
                self.items.push(Item::Walk {
                    chain,
                    base,
                    target,
                    value: v,
                });
                // The loop leaves its result in A (set below) and the last offset in X.
                self.regs.x.clear();
            }
            Inst::Load {
                index,
                offset,
                size: s,
            } => match index {
                None => self.emit(Op::LdAbs(Size::from_load_size(s)), offset),
                Some(i) => {
                    self.load_x(i);
                    self.emit(Op::LdInd(Size::from_load_size(s)), offset);
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
        self.set_a(v);
        if !unused {
            self.items.push(Item::Store(v));
        }
    }

    fn binary(&mut self, op: BinOp, lhs: Value, rhs: Value) {
        let alu = AluOp::from_binop(op);
        // `div #0` is invalid and `lsh #32` means something else in cBPF: use X for those.
        let k_form_ok = |k: u32| match op {
            BinOp::Div | BinOp::Mod => k != 0,
            BinOp::Shl | BinOp::Shr => k < 32,
            _ => true,
        };
        let commutative = op.is_commutative();
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
                // `l + (b + k)` with the sum computed here: `l + b`, then `add #k`.
                let folded = |v: Value| match self.sum[v.index()] {
                    Some(s) if op == BinOp::Add && !self.in_a(v) && !self.in_x(v) => Some(s),
                    _ => None,
                };
                let (lhs, rhs, k) = match (folded(lhs), folded(rhs)) {
                    (_, Some((b, k))) => (lhs, b, Some(k)),
                    (Some((b, k)), None) => (b, rhs, Some(k)),
                    (None, None) => (lhs, rhs, None),
                };
                // Keep operands where they are: X must end up with one, A with the other.
                let misplaced =
                    (self.in_a(rhs) && !self.in_a(lhs)) || (self.in_x(lhs) && !self.in_x(rhs));
                let (lhs, rhs) = if commutative && misplaced {
                    (rhs, lhs)
                } else {
                    (lhs, rhs)
                };
                self.load_x(rhs);
                self.load_a(lhs);
                self.emit(Op::Alu(alu, Src::X), 0);
                if let Some(k) = k {
                    self.emit(Op::Alu(AluOp::Add, Src::K), k);
                }
            }
        }
        // The result replaces A; X is untouched.
        self.regs.a.clear();
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
                let exchange_operands = (self.const_of(*lhs).is_some()
                    && self.const_of(*rhs).is_none())
                    || (self.const_of(*rhs).is_none() && self.in_a(*rhs) && !self.in_a(*lhs));
                let (op, lhs, rhs) = if exchange_operands {
                    (swapped(*op), *rhs, *lhs)
                } else {
                    (*op, *lhs, *rhs)
                };
                let (jop, exchange) = JmpOp::from_cmp(op);
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
                if cases.is_empty() {
                    return self.jump(default);
                }
                self.load_a(*value);
                let runs = sift_ir::runs::runs(cases.iter().map(|(key, target)| (*key, target)));
                for (i, run) in runs.iter().enumerate() {
                    let last = i + 1 == runs.len();
                    let next = if last {
                        self.edge_label(default)
                    } else {
                        self.fresh_label()
                    };
                    self.switch_run(run, next);
                    if !last {
                        self.items.push(Item::Label(next));
                    }
                }
            }
            // The verifier refuses unset terminators; reject rather than panic.
            Terminator::Unset => self.emit(Op::RetK, 0),
        }
    }

    /// Jumps to `run`'s target when `A` holds one of its keys, else to `next`: a `jeq` per key
    /// for one or two keys, else `jge #lo` and `jgt #hi` (a port list written out is one run).
    fn switch_run(&mut self, run: &Run<&Target>, next: Label) {
        let t = self.edge_label(run.target);
        let jump = |op: JmpOp| Op::Jmp(op, Src::K).code();
        if run.key_count() > 2 {
            let at_least_lo = self.fresh_label();
            self.items.push(Item::Cond {
                code: jump(JmpOp::Jge),
                k: run.lo,
                t: at_least_lo,
                f: next,
            });
            self.items.push(Item::Label(at_least_lo));
            self.items.push(Item::Cond {
                code: jump(JmpOp::Jgt),
                k: run.hi,
                t: next,
                f: t,
            });
            return;
        }
        for key in run.lo..=run.hi {
            let f = if key == run.hi {
                next
            } else {
                self.fresh_label()
            };
            self.items.push(Item::Cond {
                code: jump(JmpOp::Jeq),
                k: key,
                t,
                f,
            });
            if key != run.hi {
                self.items.push(Item::Label(f));
            }
        }
    }
}
