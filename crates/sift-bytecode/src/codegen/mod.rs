//! Code generation: IR [`Function`] to a verified bytecode program.
//!
//! 1. Layout: the reachable blocks in reverse postorder (topological, so every branch is
//!    forward); a jump to the next block falls through.
//! 2. Register allocation ([`alloc`]): linear scan over live intervals, spilling to scratch.
//! 3. Emission: one instruction per IR instruction (constants become immediates), block
//!    arguments become parallel moves ([`moves`]) at the end of the predecessor for a jump, or in
//!    a stub placed after a branching block for each edge that carries arguments; a `Switch`
//!    becomes the `switch` instruction with a sorted table.
//! 4. The result goes through [`verify`]: code generation cannot hand out an unchecked program.

mod alloc;
mod moves;

use std::fmt;

use sift_ir::{Block, Function, Inst, LoadSize, Target, Terminator, Value};

use crate::insn::{Insn, Key, Operand, Program, Reg, Table, Width, MAX_INSNS};
use crate::verify::{verify, VerifiedProgram, VerifyError};
use alloc::{Allocation, TEMP_A, TEMP_B};
use moves::{Loc, Source};

/// Why a function could not be compiled to bytecode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodegenError {
    /// The function breaks the IR's invariants.
    InvalidIr(sift_ir::VerifyError),
    /// More values are live at once than registers and scratch slots can hold.
    TooManyLiveValues,
    /// The program would exceed the bytecode's size limits.
    TooLarge { instructions: usize },
    /// The generated program failed verification (a bug in the code generator).
    Internal(VerifyError),
}

impl fmt::Display for CodegenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodegenError::InvalidIr(e) => write!(f, "invalid IR: {e}"),
            CodegenError::TooManyLiveValues => {
                write!(
                    f,
                    "too many live values for the registers and scratch memory"
                )
            }
            CodegenError::TooLarge { instructions } => write!(
                f,
                "{instructions} instructions exceed the limit of {MAX_INSNS}"
            ),
            CodegenError::Internal(e) => write!(f, "internal error, generated code rejected: {e}"),
        }
    }
}

impl std::error::Error for CodegenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CodegenError::InvalidIr(e) => Some(e),
            CodegenError::Internal(e) => Some(e),
            _ => None,
        }
    }
}

/// Compiles an IR function to a verified bytecode program.
pub fn compile(f: &Function) -> Result<VerifiedProgram, CodegenError> {
    sift_ir::verify(f).map_err(CodegenError::InvalidIr)?;
    let layout = f.reverse_postorder();
    let key_temps = alloc::key_temps(f);
    let alloc = alloc::allocate(f, &layout, key_temps.len())
        .map_err(|_| CodegenError::TooManyLiveValues)?;
    let mut e = Emitter {
        f,
        alloc: &alloc,
        key_temps,
        code: Vec::new(),
        tables: Vec::new(),
        labels: Vec::new(),
        block_label: vec![usize::MAX; f.blocks.len()],
    };
    for &b in &layout {
        e.block_label[b.index()] = e.new_label();
    }
    for (i, &b) in layout.iter().enumerate() {
        e.block(b, layout.get(i + 1).copied());
    }
    if e.code.len() > MAX_INSNS {
        return Err(CodegenError::TooLarge {
            instructions: e.code.len(),
        });
    }
    let program = e.finish();
    verify(program).map_err(CodegenError::Internal)
}

struct Emitter<'a> {
    f: &'a Function,
    alloc: &'a Allocation,
    /// Registers for call operands that are constants or spilled: r14, r15, and, in functions
    /// with 128-bit `member` calls, r12 and r13.
    key_temps: &'static [Reg],
    /// Targets hold label numbers until [`Emitter::finish`] patches them.
    code: Vec<Insn>,
    tables: Vec<Table>,
    /// Instruction index of each label, once placed.
    labels: Vec<u32>,
    block_label: Vec<usize>,
}

fn width(size: LoadSize) -> Width {
    match size {
        LoadSize::Byte => Width::Byte,
        LoadSize::Half => Width::Half,
        LoadSize::Word => Width::Word,
    }
}

/// An edge leaving a block: where control goes, and the moves it needs first.
struct Edge {
    label: usize,
    moves: Vec<(Loc, Source)>,
}

impl Emitter<'_> {
    fn new_label(&mut self) -> usize {
        self.labels.push(u32::MAX);
        self.labels.len() - 1
    }

    fn place(&mut self, label: usize) {
        self.labels[label] = self.code.len() as u32;
    }

    fn loc(&self, v: Value) -> Option<Loc> {
        self.alloc.locs[v.index()]
    }

    /// The value in a register: its own, or `temp` loaded from its slot or with its constant.
    fn use_reg(&mut self, v: Value, temp: Reg) -> Reg {
        if let Some(k) = self.f.const_value(v) {
            self.code.push(Insn::Mov {
                dst: temp,
                src: Operand::Imm(k),
            });
            return temp;
        }
        match self.loc(v) {
            Some(Loc::Reg(r)) => r,
            Some(Loc::Slot(slot)) => {
                self.code.push(Insn::LoadScratch { dst: temp, slot });
                temp
            }
            // A used value always has a location (allocation covers every used value).
            None => temp,
        }
    }

    /// The value as an operand: an immediate for a constant.
    fn operand(&mut self, v: Value, temp: Reg) -> Operand {
        match self.f.const_value(v) {
            Some(k) => Operand::Imm(k),
            None => Operand::Reg(self.use_reg(v, temp)),
        }
    }

    /// Emits `make(dst)` for the definition of `v`, storing to its slot if it was spilled.
    /// A dead value still gets its instruction when that may reject the packet.
    fn define(&mut self, v: Value, may_reject: bool, make: impl FnOnce(Reg) -> Insn) {
        match self.loc(v) {
            Some(Loc::Reg(r)) => self.code.push(make(r)),
            Some(Loc::Slot(slot)) => {
                self.code.push(make(TEMP_A));
                self.code.push(Insn::StoreScratch { slot, src: TEMP_A });
            }
            None if may_reject => self.code.push(make(TEMP_A)),
            None => {}
        }
    }

    fn inst(&mut self, v: Value) {
        let f = self.f;
        match *f.inst(v) {
            Inst::Const(_) | Inst::Param(_) => {}
            Inst::Protochain {
                chain,
                base,
                proto,
                offset,
                target,
            } => {
                let proto = self.use_reg(proto, TEMP_A);
                let offset = self.use_reg(offset, TEMP_B);
                self.define(v, true, |dst| Insn::Protochain {
                    dst,
                    chain,
                    base,
                    proto,
                    offset,
                    target,
                });
            }
            // Calls are pure and never reject: a dead one gets no code (not even its operands).
            Inst::Contains { .. } | Inst::Member { .. } if self.loc(v).is_none() => {}
            Inst::Contains {
                set,
                pattern,
                start,
            } => {
                let start = self.use_reg(start, TEMP_A);
                self.define(v, false, |dst| Insn::Contains {
                    dst,
                    set,
                    pattern,
                    start,
                });
            }
            Inst::Member { set, ref key } => {
                let temps = self.key_temps;
                let regs: Vec<Reg> = key
                    .iter()
                    .zip(temps)
                    .map(|(&k, &temp)| self.use_reg(k, temp))
                    .collect();
                let key = match regs[..] {
                    [k] => Key::W32(k),
                    [a, b, c, d] => Key::W128([a, b, c, d]),
                    // The IR verifier checked the arity against the set's width.
                    _ => Key::W32(regs.first().copied().unwrap_or(TEMP_A)),
                };
                self.define(v, false, |dst| Insn::Member { dst, set, key });
            }
            Inst::WireLen => self.define(v, false, |dst| Insn::WireLen { dst }),
            Inst::Load {
                index,
                offset,
                size,
            } => {
                let w = width(size);
                let absolute = match index {
                    None => Some(offset),
                    Some(x) => self.f.const_value(x).and_then(|k| k.checked_add(offset)),
                };
                let (base, offset) = match (absolute, index) {
                    (Some(a), _) => (None, a),
                    (None, Some(x)) => (Some(self.use_reg(x, TEMP_A)), offset),
                    (None, None) => (None, offset),
                };
                self.define(v, true, |dst| Insn::Load {
                    width: w,
                    dst,
                    base,
                    offset,
                });
            }
            Inst::Binary(op, a, b) => {
                let (a, b) = match (self.f.const_value(a), self.f.const_value(b)) {
                    (Some(_), None) if op.is_commutative() => (b, a),
                    _ => (a, b),
                };
                let lhs = self.use_reg(a, TEMP_A);
                let rhs = self.operand(b, TEMP_B);
                self.define(v, op.can_fail(), |dst| Insn::Alu { op, dst, lhs, rhs });
            }
            Inst::Neg(a) => {
                let src = self.use_reg(a, TEMP_A);
                self.define(v, false, |dst| Insn::Neg { dst, src });
            }
        }
    }

    /// The moves an edge needs (dead parameters get none).
    fn edge(&self, t: &Target) -> Edge {
        let params = &self.f.block(t.block).params;
        let moves = params
            .iter()
            .zip(&t.args)
            .filter_map(|(&p, &a)| {
                let dst = self.loc(p)?;
                let src = match self.f.const_value(a) {
                    Some(k) => Source::Imm(k),
                    None => Source::Loc(self.loc(a)?),
                };
                Some((dst, src))
            })
            .collect();
        Edge {
            label: self.block_label[t.block.index()],
            moves,
        }
    }

    /// For a branching terminator: the label each edge jumps to (a fresh stub label when the
    /// edge carries moves), and the stubs to emit after it.
    fn stub(&mut self, t: &Target, stubs: &mut Vec<(usize, Edge)>) -> u32 {
        let edge = self.edge(t);
        if edge.moves.is_empty() {
            return edge.label as u32;
        }
        let label = self.new_label();
        stubs.push((label, edge));
        label as u32
    }

    fn emit_stubs(&mut self, mut stubs: Vec<(usize, Edge)>, next: Option<Block>) {
        // The stub that continues with the next block goes last and falls through.
        let next_label = next.map(|b| self.block_label[b.index()]);
        if let Some(i) = stubs.iter().position(|(_, e)| Some(e.label) == next_label) {
            let s = stubs.remove(i);
            stubs.push(s);
        }
        let n = stubs.len();
        for (i, (label, edge)) in stubs.into_iter().enumerate() {
            self.place(label);
            moves::sequentialize(&edge.moves, TEMP_B, TEMP_A, &mut self.code);
            if !(i + 1 == n && Some(edge.label) == next_label) {
                self.code.push(Insn::Jump {
                    target: edge.label as u32,
                });
            }
        }
    }

    fn block(&mut self, b: Block, next: Option<Block>) {
        self.place(self.block_label[b.index()]);
        let data = self.f.block(b);
        for &v in &data.insts {
            self.inst(v);
        }
        let mut stubs = Vec::new();
        match &data.term {
            Terminator::Return(k) => self.code.push(Insn::Return {
                value: Operand::Imm(*k),
            }),
            Terminator::ReturnValue(v) => {
                let value = self.operand(*v, TEMP_A);
                self.code.push(Insn::Return { value });
            }
            Terminator::Jump(t) => {
                let edge = self.edge(t);
                moves::sequentialize(&edge.moves, TEMP_B, TEMP_A, &mut self.code);
                if Some(t.block) != next {
                    self.code.push(Insn::Jump {
                        target: edge.label as u32,
                    });
                }
            }
            Terminator::Branch {
                op,
                lhs,
                rhs,
                then_,
                else_,
            } => {
                let (mut c, mut l, mut r) = (*op, *lhs, *rhs);
                if self.f.const_value(l).is_some() && self.f.const_value(r).is_none() {
                    (c, l, r) = (c.swapped(), r, l);
                }
                let lhs = self.use_reg(l, TEMP_A);
                let rhs = self.operand(r, TEMP_B);
                let then_ = self.stub(then_, &mut stubs);
                let else_ = self.stub(else_, &mut stubs);
                self.code.push(Insn::Branch {
                    cond: c,
                    lhs,
                    rhs,
                    then_,
                    else_,
                });
            }
            Terminator::Switch {
                value,
                cases,
                default,
            } => {
                let key = self.use_reg(*value, TEMP_A);
                let mut entries: Vec<(u32, u32)> = Vec::with_capacity(cases.len());
                for (k, t) in cases {
                    entries.push((*k, self.stub(t, &mut stubs)));
                }
                entries.sort_by_key(|&(k, _)| k);
                let default = self.stub(default, &mut stubs);
                self.code.push(Insn::Switch {
                    key,
                    table: self.tables.len() as u32,
                    default,
                });
                self.tables.push(Table { entries });
            }
            Terminator::Unset => {} // rejected by the IR verifier
        }
        self.emit_stubs(stubs, next);
    }

    /// Replaces label numbers by instruction indices.
    fn finish(mut self) -> Program {
        let labels = &self.labels;
        let at = |l: u32| labels[l as usize];
        for insn in &mut self.code {
            match insn {
                Insn::Jump { target } => *target = at(*target),
                Insn::Branch { then_, else_, .. } => {
                    *then_ = at(*then_);
                    *else_ = at(*else_);
                }
                Insn::Switch { default, .. } => *default = at(*default),
                _ => {}
            }
        }
        for t in &mut self.tables {
            for (_, target) in &mut t.entries {
                *target = at(*target);
            }
        }
        Program {
            scratch_words: self.alloc.slots,
            code: self.code,
            tables: self.tables,
            patterns: self.f.patterns.clone(),
            sets: self.f.sets.clone(),
        }
    }
}
