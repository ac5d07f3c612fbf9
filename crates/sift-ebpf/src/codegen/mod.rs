//! Code generation: IR [`Function`] to an eBPF [`Program`] the kernel verifier accepts.
//!
//! 1. Layout: the reachable blocks in reverse postorder (topological, so every jump is forward
//!    and the program is loop-free, as the verifier wants); a jump to the next block falls
//!    through.
//! 2. Register allocation ([`crate::regalloc`]) over the registers the program type leaves free
//!    (see [`Machine`]); values that do not fit live in stack slots.
//! 3. Emission: 32-bit ALU instructions (which zero-extend, so every value register holds a
//!    `u32` zero-extended to 64 bits and 64-bit compares are `u32` compares), packet access per
//!    program type ([`packet`]), block arguments as parallel moves at the end of the predecessor
//!    or in a stub on the edge, `Switch` as a binary search over its sorted keys ([`switch`]).
//!    Division by zero and out-of-bounds loads jump to one shared "reject" exit, as in the IR.
//! 4. Labels are resolved into 16-bit relative offsets.
//!
//! The verifier rejects code it cannot reach, so anything known at compile time to reject (a
//! load past the largest packet, a division by constant 0) becomes a jump on a register the
//! verifier knows to be 0: it follows only the taken edge, while its control-flow check sees the
//! code behind it as reachable.

mod packet;
mod switch;

use std::collections::HashMap;
use std::fmt;

use sift_ir::{BinOp, Block, CmpOp, Function, Inst, Target, Terminator, Value};

use crate::assembler::{Assembler, Label};
use crate::insn::{AluOp, Insn, JmpOp, Reg, Size, Src};
use crate::moves::{self, mov32_imm, slot_offset, Source};
use crate::program::{Options, Program, ProgramType};
use crate::regalloc::{self, Allocation, Loc, RegisterSet};

/// The kernel's limit on the number of instructions of a privileged program
/// (`BPF_COMPLEXITY_LIMIT_INSNS`).
pub const MAX_INSNS: usize = 1_000_000;

/// Why a function could not be compiled to eBPF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodegenError {
    /// The function breaks the IR's invariants.
    InvalidIr(sift_ir::VerifyError),
    /// More values are live at once than registers and the 512-byte stack can hold.
    TooManyLiveValues,
    /// A jump spans more than the 32767 instructions a 16-bit offset reaches.
    JumpTooFar { from: usize, to: usize },
    /// The program exceeds the kernel's instruction limit.
    TooLarge { instructions: usize },
    /// The function calls a coprocessor (payload search or set lookup, sift extensions); eBPF
    /// output does not implement them yet.
    CoprocessorCall(Value),
}

impl fmt::Display for CodegenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodegenError::InvalidIr(e) => write!(f, "invalid IR: {e}"),
            CodegenError::TooManyLiveValues => write!(
                f,
                "too many live values for the eBPF registers and the 512-byte stack"
            ),
            CodegenError::JumpTooFar { from, to } => write!(
                f,
                "jump from instruction {from} to {to} exceeds the 16-bit offset of eBPF jumps"
            ),
            CodegenError::TooLarge { instructions } => write!(
                f,
                "{instructions} instructions exceed the kernel's limit of {MAX_INSNS}"
            ),
            CodegenError::CoprocessorCall(v) => write!(
                f,
                "{v} calls a coprocessor (payload matching or a set lookup), which eBPF output does not support"
            ),
        }
    }
}

impl std::error::Error for CodegenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CodegenError::InvalidIr(e) => Some(e),
            _ => None,
        }
    }
}

/// Scratch registers of every program type: operands that are constants or in stack slots are
/// brought into them, and they carry addresses during packet loads. `r0` is also the return
/// value and the result of `LD_ABS`.
pub(crate) const TEMP_A: Reg = Reg::R0;
pub(crate) const TEMP_B: Reg = Reg::R1;

/// The register roles of a program type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Machine {
    /// Socket filters: `LD_ABS`/`LD_IND` with the context in `r6` (where they require it);
    /// `r7`-`r9` survive loads, `r2`-`r5` do not.
    Legacy,
    /// XDP and tc: packet start in [`DATA`], end in [`DATA_END`]; for tc programs that read
    /// `skb->len`, the context stays in `r9`.
    Direct { ctx: Option<Reg> },
}

/// Direct access: the packet's first byte and one past its last.
pub(crate) const DATA: Reg = Reg::R8;
pub(crate) const DATA_END: Reg = Reg::R7;
/// The socket filter's context register (`LD_ABS` requires `r6`).
pub(crate) const LEGACY_CTX: Reg = Reg::R6;

impl Machine {
    fn for_function(f: &Function, program_type: ProgramType) -> Machine {
        match program_type {
            ProgramType::SocketFilter => Machine::Legacy,
            ProgramType::Xdp => Machine::Direct { ctx: None },
            ProgramType::SchedCls => {
                let reads_len = f.values.iter().any(|i| matches!(i, Inst::WireLen));
                Machine::Direct {
                    ctx: reads_len.then_some(Reg::R9),
                }
            }
        }
    }

    fn registers(self) -> RegisterSet {
        match self {
            Machine::Legacy => RegisterSet {
                preserved: vec![Reg::R7, Reg::R8, Reg::R9],
                clobbered: vec![Reg::R2, Reg::R3, Reg::R4, Reg::R5],
            },
            Machine::Direct { ctx } => RegisterSet {
                preserved: [Reg::R2, Reg::R3, Reg::R4, Reg::R5, Reg::R6, Reg::R9]
                    .into_iter()
                    .filter(|&r| Some(r) != ctx)
                    .collect(),
                clobbered: Vec::new(),
            },
        }
    }

    /// Whether an instruction destroys `r0`-`r5` (packet loads in socket filters).
    fn clobbers(self, inst: &Inst) -> bool {
        self == Machine::Legacy && matches!(inst, Inst::Load { .. })
    }
}

/// Compiles a verified-or-not IR function (it is verified first) to an eBPF program.
pub fn compile(f: &Function, opts: &Options) -> Result<Program, CodegenError> {
    sift_ir::verify(f).map_err(CodegenError::InvalidIr)?;
    if let Some(v) = f.first_call() {
        return Err(CodegenError::CoprocessorCall(v));
    }
    // eBPF programs may not loop without bounds the kernel can see: walk a bounded chain.
    let f = &*sift_ir::protochain::without_loops(f);
    let layout = f.reverse_postorder();
    let machine = Machine::for_function(f, opts.program_type);
    let alloc = regalloc::allocate(f, &layout, &machine.registers(), &|i| machine.clobbers(i))
        .map_err(|_| CodegenError::TooManyLiveValues)?;
    let mut e = Emitter {
        f,
        opts: *opts,
        machine,
        alloc: &alloc,
        asm: Assembler::default(),
        block_label: Vec::new(),
        reject: None,
        checks: packet::extent_checks(f, &layout, machine),
    };
    // Unreachable blocks keep a label that is never placed nor used.
    e.block_label = (0..f.blocks.len()).map(|_| e.asm.new_label()).collect();
    packet::prologue(&mut e, &layout);
    for (i, &b) in layout.iter().enumerate() {
        e.block(b, layout.get(i + 1).copied());
    }
    if let Some(reject) = e.reject {
        e.place(reject);
        let value = match opts.program_type {
            ProgramType::SocketFilter => 0,
            _ => opts.on_no_match,
        };
        e.emit(mov32_imm(TEMP_A, value));
        e.emit(Insn::Exit);
    }
    e.finish()
}

pub(crate) struct Emitter<'a> {
    f: &'a Function,
    opts: Options,
    machine: Machine,
    alloc: &'a Allocation,
    asm: Assembler,
    block_label: Vec<Label>,
    /// The shared exit for rejected packets, created on first use.
    reject: Option<Label>,
    /// Direct access: the packet extent to check on entry to each block (0 = none needed).
    checks: Vec<u64>,
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

fn jmp_op(op: CmpOp) -> JmpOp {
    match op {
        CmpOp::Eq => JmpOp::Eq,
        CmpOp::Ne => JmpOp::Ne,
        CmpOp::Gt => JmpOp::Gt,
        CmpOp::Ge => JmpOp::Ge,
        CmpOp::Lt => JmpOp::Lt,
        CmpOp::Le => JmpOp::Le,
        CmpOp::Set => JmpOp::Set,
    }
}

/// The comparison with its operands exchanged.
fn swapped(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Ge => CmpOp::Le,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Eq | CmpOp::Ne | CmpOp::Set => op,
    }
}

/// Where an edge enters: directly at the block, or through a stub that first moves the block
/// arguments.
struct Stub {
    label: Label,
    target: Block,
    moves: Vec<(Loc, Source)>,
}

impl<'a> Emitter<'a> {
    pub(crate) fn new_label(&mut self) -> Label {
        self.asm.new_label()
    }

    pub(crate) fn place(&mut self, label: Label) {
        self.asm.place(label)
    }

    pub(crate) fn emit(&mut self, insn: Insn) {
        self.asm.emit(insn)
    }

    pub(crate) fn ja(&mut self, target: Label) {
        self.asm.ja(target)
    }

    pub(crate) fn jmp(&mut self, op: JmpOp, dst: Reg, src: Src, target: Label) {
        self.asm.jmp(op, dst, src, target)
    }

    /// `if reg op k goto target` for any `u32` constant: immediates are sign-extended in 64-bit
    /// compares, so large ones go through [`TEMP_B`] (`jset` only looks at bits that are zero
    /// in the register anyway).
    pub(crate) fn jmp_const(&mut self, op: JmpOp, reg: Reg, k: u32, target: Label) {
        let src = self.cmp_imm(op, k);
        self.jmp(op, reg, src, target);
    }

    fn cmp_imm(&mut self, op: JmpOp, k: u32) -> Src {
        if i32::try_from(k).is_ok() || op == JmpOp::Set {
            Src::Imm(k as i32)
        } else {
            self.emit(mov32_imm(TEMP_B, k));
            Src::Reg(TEMP_B)
        }
    }

    pub(crate) fn reject_label(&mut self) -> Label {
        match self.reject {
            Some(l) => l,
            None => {
                let l = self.new_label();
                self.reject = Some(l);
                l
            }
        }
    }

    /// Rejects unconditionally, in a form the verifier's reachability check accepts.
    pub(crate) fn static_reject(&mut self) {
        let reject = self.reject_label();
        self.emit(mov32_imm(TEMP_A, 0));
        self.jmp(JmpOp::Eq, TEMP_A, Src::Imm(0), reject);
    }

    pub(crate) fn mov64(&mut self, dst: Reg, src: Reg) {
        if dst != src {
            self.emit(Insn::Alu {
                wide: true,
                op: AluOp::Mov,
                dst,
                src: Src::Reg(src),
            });
        }
    }

    pub(crate) fn alu(&mut self, wide: bool, op: AluOp, dst: Reg, src: Src) {
        self.emit(Insn::Alu { wide, op, dst, src });
    }

    pub(crate) fn loc(&self, v: Value) -> Option<Loc> {
        self.alloc.locs[v.index()]
    }

    /// The value in a register: its own, or `temp` loaded from its slot or with its constant.
    pub(crate) fn use_reg(&mut self, v: Value, temp: Reg) -> Reg {
        if let Some(k) = self.f.const_value(v) {
            self.emit(mov32_imm(temp, k));
            return temp;
        }
        match self.loc(v) {
            Some(Loc::Reg(r)) => r,
            Some(Loc::Slot(slot)) => {
                self.emit(Insn::Load {
                    size: Size::W,
                    dst: temp,
                    base: Reg::FP,
                    off: slot_offset(slot),
                });
                temp
            }
            // Every used value has a location; an unused one is never asked for.
            None => temp,
        }
    }

    /// The register a definition of `v` is computed into (its own, or [`TEMP_A`] when it lives
    /// in a slot or is dead); [`Emitter::finish_def`] stores it.
    pub(crate) fn def_reg(&self, v: Value) -> Reg {
        match self.loc(v) {
            Some(Loc::Reg(r)) => r,
            _ => TEMP_A,
        }
    }

    pub(crate) fn finish_def(&mut self, v: Value, reg: Reg) {
        if let Some(Loc::Slot(slot)) = self.loc(v) {
            self.emit(Insn::Store {
                size: Size::W,
                base: Reg::FP,
                off: slot_offset(slot),
                src: reg,
            });
        }
    }

    fn is_live(&self, v: Value) -> bool {
        self.loc(v).is_some()
    }

    fn inst(&mut self, v: Value) {
        match *self.f.inst(v) {
            Inst::Const(_) | Inst::Param(_) => {}
            Inst::Contains { .. } | Inst::Member { .. } => {
                unreachable!("compile refuses coprocessor calls")
            }
            Inst::Protochain { .. } => unreachable!("compile unrolls protochain walks"),
            Inst::WireLen => packet::wire_len(self, v),
            Inst::Load {
                index,
                offset,
                size,
            } => packet::load(self, v, index, offset, size),
            Inst::Binary(op, a, b) => self.binary(v, op, a, b),
            Inst::Neg(a) => {
                if self.is_live(v) {
                    let src = self.use_reg(a, TEMP_A);
                    let d = self.def_reg(v);
                    if d != src {
                        self.alu(false, AluOp::Mov, d, Src::Reg(src));
                    }
                    self.emit(Insn::Neg32 { dst: d });
                    self.finish_def(v, d);
                }
            }
        }
    }

    fn binary(&mut self, v: Value, op: BinOp, a: Value, b: Value) {
        let (a, b) = match (self.f.const_value(a), self.f.const_value(b)) {
            (Some(_), None) if op.is_commutative() => (b, a),
            _ => (a, b),
        };
        let kb = self.f.const_value(b);
        let live = self.is_live(v);
        match (op, kb) {
            (BinOp::Div | BinOp::Mod, Some(0)) => return self.static_reject(),
            (BinOp::Div | BinOp::Mod, None) => {
                // Division by zero rejects the packet (eBPF would give 0 and carry on).
                let rb = self.use_reg(b, TEMP_B);
                let reject = self.reject_label();
                self.jmp(JmpOp::Eq, rb, Src::Imm(0), reject);
            }
            (BinOp::Shl | BinOp::Shr, Some(k)) if k >= 32 => {
                // The IR shifts everything out; eBPF forbids such shift counts.
                if live {
                    let d = self.def_reg(v);
                    self.emit(mov32_imm(d, 0));
                    self.finish_def(v, d);
                }
                return;
            }
            _ => {}
        }
        if !live {
            return;
        }
        let lhs = self.use_reg(a, TEMP_A);
        let rhs = match kb {
            Some(k) => Src::Imm(k as i32),
            None => Src::Reg(self.use_reg(b, TEMP_B)),
        };
        let d = self.def_reg(v);
        let work = if rhs == Src::Reg(d) && lhs != d {
            TEMP_A
        } else {
            d
        };
        let op = alu_op(op);
        match rhs {
            Src::Reg(r) if matches!(op, AluOp::Lsh | AluOp::Rsh) => {
                // Counts of 32 or more give 0 in the IR; eBPF leaves them undefined.
                let zero = self.new_label();
                let done = self.new_label();
                self.jmp(JmpOp::Gt, r, Src::Imm(31), zero);
                if work != lhs {
                    self.alu(false, AluOp::Mov, work, Src::Reg(lhs));
                }
                self.alu(false, op, work, rhs);
                self.ja(done);
                self.place(zero);
                self.emit(mov32_imm(work, 0));
                self.place(done);
            }
            _ => {
                if work != lhs {
                    self.alu(false, AluOp::Mov, work, Src::Reg(lhs));
                }
                self.alu(false, op, work, rhs);
            }
        }
        if work != d {
            self.alu(false, AluOp::Mov, d, Src::Reg(work));
        }
        self.finish_def(v, d);
    }

    /// The moves an edge needs (dead parameters get none).
    fn edge_moves(&self, t: &Target) -> Vec<(Loc, Source)> {
        let params = &self.f.block(t.block).params;
        params
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
            .collect()
    }

    /// The label an edge jumps to: the block's, or a new stub's (shared between identical
    /// edges of the same terminator).
    fn edge_label(
        &mut self,
        t: &Target,
        stubs: &mut Vec<Stub>,
        seen: &mut HashMap<Target, Label>,
    ) -> Label {
        let moves = self.edge_moves(t);
        if moves.is_empty() {
            return self.block_label[t.block.index()];
        }
        if let Some(&l) = seen.get(t) {
            return l;
        }
        let label = self.new_label();
        seen.insert(t.clone(), label);
        stubs.push(Stub {
            label,
            target: t.block,
            moves,
        });
        label
    }

    /// Emits the stubs after a terminator; the last one falls through into `next` if it
    /// continues there.
    fn emit_stubs(&mut self, stubs: Vec<Stub>, next: Option<Block>) {
        let n = stubs.len();
        for (i, stub) in stubs.into_iter().enumerate() {
            self.place(stub.label);
            let mut code = Vec::new();
            moves::sequentialize(&stub.moves, TEMP_B, TEMP_A, &mut code);
            for insn in code {
                self.emit(insn);
            }
            if !(i + 1 == n && Some(stub.target) == next) {
                self.ja(self.block_label[stub.target.index()]);
            }
        }
    }

    fn block(&mut self, b: Block, next: Option<Block>) {
        self.place(self.block_label[b.index()]);
        packet::entry_check(self, b);
        let data = self.f.block(b);
        for &v in &data.insts {
            self.inst(v);
        }
        let mut stubs = Vec::new();
        let mut seen = HashMap::new();
        match &data.term {
            Terminator::Return(k) => self.ret_const(*k),
            Terminator::ReturnValue(v) => self.ret_value(*v),
            Terminator::Jump(t) => {
                let mut code = Vec::new();
                moves::sequentialize(&self.edge_moves(t), TEMP_B, TEMP_A, &mut code);
                for insn in code {
                    self.emit(insn);
                }
                if Some(t.block) != next {
                    self.ja(self.block_label[t.block.index()]);
                }
            }
            Terminator::Branch {
                op,
                lhs,
                rhs,
                then_,
                else_,
            } => {
                let (mut op, mut l, mut r) = (*op, *lhs, *rhs);
                if self.f.const_value(l).is_some() && self.f.const_value(r).is_none() {
                    (op, l, r) = (swapped(op), r, l);
                }
                let op = jmp_op(op);
                let lhs = self.use_reg(l, TEMP_A);
                let rhs = match self.f.const_value(r) {
                    Some(k) => self.cmp_imm(op, k),
                    None => Src::Reg(self.use_reg(r, TEMP_B)),
                };
                // The else edge's stub (if any) comes first, so the branch falls into it.
                let else_label = self.edge_label(else_, &mut stubs, &mut seen);
                let then_label = self.edge_label(then_, &mut stubs, &mut seen);
                let else_direct = stubs.is_empty() || stubs[0].label != else_label;
                let falls_to = |t: &Target| Some(t.block) == next;
                if stubs.is_empty() && falls_to(then_) && op.negated().is_some() {
                    let neg = op.negated().unwrap_or(op);
                    self.jmp(neg, lhs, rhs, else_label);
                } else {
                    self.jmp(op, lhs, rhs, then_label);
                    if else_direct && !(stubs.is_empty() && falls_to(else_)) {
                        self.ja(else_label);
                    }
                }
            }
            Terminator::Switch {
                value,
                cases,
                default,
            } => {
                let key = self.use_reg(*value, TEMP_A);
                let mut table: Vec<(u32, Label)> = Vec::with_capacity(cases.len());
                for (k, t) in cases {
                    let l = self.edge_label(t, &mut stubs, &mut seen);
                    table.push((*k, l));
                }
                let default_label = self.edge_label(default, &mut stubs, &mut seen);
                // What comes next: the first stub, or with none the next block.
                let default_follows = match stubs.first() {
                    Some(stub) => stub.label == default_label,
                    None => Some(default.block) == next,
                };
                let runs = sift_ir::runs::runs(table);
                switch::emit(self, key, &runs, default_label, default_follows);
            }
            Terminator::Unset => {} // rejected by the IR verifier
        }
        self.emit_stubs(stubs, next);
    }

    fn ret_const(&mut self, k: u32) {
        let value = match self.opts.program_type {
            ProgramType::SocketFilter => k,
            _ if k != 0 => self.opts.on_match,
            _ => self.opts.on_no_match,
        };
        self.emit(mov32_imm(TEMP_A, value));
        self.emit(Insn::Exit);
    }

    fn ret_value(&mut self, v: Value) {
        let r = self.use_reg(v, TEMP_A);
        if self.opts.program_type == ProgramType::SocketFilter {
            self.mov64(TEMP_A, r);
        } else {
            let reject = self.reject_label();
            self.jmp(JmpOp::Eq, r, Src::Imm(0), reject);
            self.emit(mov32_imm(TEMP_A, self.opts.on_match));
        }
        self.emit(Insn::Exit);
    }

    fn finish(self) -> Result<Program, CodegenError> {
        Ok(Program {
            program_type: self.opts.program_type,
            insns: self.asm.finish()?,
        })
    }
}
