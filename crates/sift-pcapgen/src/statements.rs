//! The statements gencode emits for each shape of IR block sift's lowering produces.
//!
//! sift's lowering builds one block per gencode block, with the instructions in the order
//! gencode emits statements. Two families of blocks exist:
//!
//! * header tests (`gen_cmp`, `gen_ncmp`, `gen_mcmp`, `gen_len`, `gen_uncond`, the `jset`s):
//!   the accumulator is loaded (`ld [k]`, `ldxb 4*([k]&0xf)` + `ld [x + k]`, `ld len`,
//!   `ld #k`), maybe masked (`and #m`), and compared with an immediate. No scratch memory.
//! * relations between arithmetic expressions (`gen_relation`): every intermediate value lives
//!   in a scratch slot. Each constant is `ld #k; st M[r]`, `len` is `ld len; st M[r]`, each
//!   operator reloads its operands (`ldx M[right]; ld M[left]; op x; st M[r]`), each indexed
//!   load moves its index to X (`ldx M[i]`, or after an IPv4 header `ldxb ...; ld M[i]; add
//!   x; tax`), and the relation ends `ldx M[right]; ld M[left]` and `jgt x` / `jge x` / `sub
//!   x; jeq #0`.
//!
//! Header tests and relations are told apart by their operands: a relation's packet loads are
//! always indexed by an arithmetic value, while a header test's loads have no index or the
//! IPv4 header length as their index. Only `len` compared with a constant is ambiguous (see
//! [`is_len_relation`]).

use std::collections::HashSet;

use sift_bpf::{code, AluOp, Insn, JmpOp, Op, Size, Src};
use sift_ir::{BinOp, Block, CmpOp, Function, Inst, LoadSize, Terminator, Value};

use crate::error::Unsupported;
use crate::graph::{BlockCode, Exit};
use crate::registers::Registers;

/// The instruction defining `v`; a value out of range (malformed IR) reads as `len`, which
/// no pattern below takes apart, so that a bad operand is refused rather than panicking.
fn inst(f: &Function, v: Value) -> &Inst {
    f.values.get(v.index()).unwrap_or(&Inst::WireLen)
}

fn const_value(f: &Function, v: Value) -> Option<u32> {
    match *inst(f, v) {
        Inst::Const(k) => Some(k),
        _ => None,
    }
}

/// The packet offset `k` of `4 * (pkt[k] & 0xf)` (gencode's `gen_loadx_iphdrlen`, one `ldxb`
/// statement), if `v` computes exactly that.
fn ipv4_header_len(f: &Function, v: Value) -> Option<u32> {
    let Inst::Binary(BinOp::Shl, low, two) = *inst(f, v) else {
        return None;
    };
    let Inst::Binary(BinOp::And, byte, mask) = *inst(f, low) else {
        return None;
    };
    let Inst::Load {
        index: None,
        offset,
        size: LoadSize::Byte,
    } = *inst(f, byte)
    else {
        return None;
    };
    (const_value(f, two) == Some(2) && const_value(f, mask) == Some(0xf)).then_some(offset)
}

/// A packet load of a header test: no index, or the IPv4 header length as index.
fn is_header_load(f: &Function, v: Value) -> bool {
    match *inst(f, v) {
        Inst::Load { index: None, .. } => true,
        Inst::Load { index: Some(i), .. } => ipv4_header_len(f, i).is_some(),
        _ => false,
    }
}

/// Whether `v` is what a header test compares: a header load, maybe masked, `len` (`less`,
/// `greater`; but see [`is_len_relation`]), or a constant (`gen_uncond`).
fn is_header_operand(f: &Function, v: Value) -> bool {
    match *inst(f, v) {
        Inst::Binary(BinOp::And, x, m) => const_value(f, m).is_some() && is_header_load(f, x),
        Inst::WireLen | Inst::Const(_) => true,
        _ => is_header_load(f, v),
    }
}

/// Whether a comparison of `len` with a constant is a relation (`len >= 5`: both in scratch
/// memory, `jge x`) rather than `gen_len` (`greater 5`: `ld len; jge #5`). sift lowers both to
/// the same two instructions and tells them apart by their order: `less`/`greater` create the
/// constant first, a relation creates `len` first (its left operand).
fn is_len_relation(f: &Function, lhs: Value, rhs: Value) -> bool {
    matches!(inst(f, lhs), Inst::WireLen) && lhs < rhs
}

/// Refuses a function whose lowering left behind (in blocks no path reaches, cut off after
/// lowering) instructions that may have been arithmetic in scratch memory: gencode allocated
/// slots for them too, so the slots of everything after them are unknown. Header tests left
/// behind (the protocol checks of `tcp port 80` built and not used, ...) are harmless.
pub(crate) fn check_unlisted(f: &Function) -> Result<(), Unsupported> {
    let mut listed = vec![false; f.values.len()];
    for b in &f.blocks {
        for v in b.insts.iter().chain(&b.params) {
            if let Some(l) = listed.get_mut(v.index()) {
                *l = true;
            }
        }
    }
    let arithmetic = |v: usize| match f.values[v] {
        Inst::Const(_) | Inst::Load { index: None, .. } | Inst::Binary(BinOp::And, ..) => false,
        Inst::Load { index: Some(i), .. } => ipv4_header_len(f, i).is_none(),
        Inst::Binary(BinOp::Shl, ..) => ipv4_header_len(f, Value(v as u32)).is_none(),
        _ => true,
    };
    match (0..listed.len()).find(|&v| !listed[v] && arithmetic(v)) {
        None => Ok(()),
        Some(v) => Err(Unsupported {
            block: None,
            value: Some(Value(v as u32)),
            what: format!(
                "arithmetic in a block no path reaches ({:?}): its scratch slots are unknown",
                f.values[v]
            ),
        }),
    }
}

/// Translates one block, with the allocator's state before it.
pub(crate) struct BlockTranslator<'f, 'r> {
    f: &'f Function,
    block: Block,
    /// The block's instructions not yet translated.
    pending: HashSet<Value>,
    registers: &'r mut Registers,
    stmts: Vec<Insn>,
}

impl<'f, 'r> BlockTranslator<'f, 'r> {
    pub fn new(f: &'f Function, block: Block, registers: &'r mut Registers) -> Self {
        BlockTranslator {
            f,
            block,
            pending: f.block(block).insts.iter().copied().collect(),
            registers,
            stmts: Vec::new(),
        }
    }

    fn unsupported(&self, value: Option<Value>, what: impl Into<String>) -> Unsupported {
        let mut what = what.into();
        if let Some(v) = value {
            if let Some(inst) = self.f.values.get(v.index()) {
                what = format!("{what} ({inst:?})");
            }
        }
        Unsupported {
            block: Some(self.block),
            value,
            what,
        }
    }

    /// The instruction defining `v`, which must be one of this block's not yet translated
    /// (gencode never shares a statement between two uses or two blocks).
    fn take(&mut self, v: Value) -> Result<&'f Inst, Unsupported> {
        if !self.pending.remove(&v) {
            return Err(self.unsupported(Some(v), "operand defined in another block or used twice"));
        }
        self.f
            .values
            .get(v.index())
            .ok_or_else(|| self.unsupported(Some(v), "no such value"))
    }

    fn take_const(&mut self, v: Value) -> Result<u32, Unsupported> {
        match *self.take(v)? {
            Inst::Const(k) => Ok(k),
            _ => Err(self.unsupported(Some(v), "expected a constant")),
        }
    }

    fn emit(&mut self, code: u16, k: u32) {
        self.stmts.push(Insn::stmt(code, k));
    }

    fn alloc(&mut self, v: Value) -> Result<u32, Unsupported> {
        self.registers
            .alloc()
            .ok_or_else(|| self.unsupported(Some(v), "all 16 scratch slots taken"))
    }

    /// The whole block: its statements and exit (successors are IR block numbers).
    pub fn translate(mut self) -> Result<BlockCode, Unsupported> {
        let data = self.f.block(self.block);
        if let Some(&p) = data.params.first() {
            return Err(self.unsupported(Some(p), "block parameter"));
        }
        let exit = match data.term {
            Terminator::Return(k) => Exit::Return(k),
            Terminator::Branch {
                op,
                lhs,
                rhs,
                ref then_,
                ref else_,
            } => {
                if !then_.args.is_empty() || !else_.args.is_empty() {
                    return Err(self.unsupported(None, "edge arguments"));
                }
                let (code, k, swapped) = self.branch(op, lhs, rhs)?;
                let (jt, jf) = (then_.block.index(), else_.block.index());
                let (jt, jf) = if swapped { (jf, jt) } else { (jt, jf) };
                Exit::Branch { code, k, jt, jf }
            }
            ref other => {
                return Err(self.unsupported(None, format!("terminator {other:?}")));
            }
        };
        // Every instruction must have become part of a statement: anything left over is a
        // shape not understood (the statements would be missing its code).
        if let Some(&v) = data.insts.iter().find(|v| self.pending.contains(v)) {
            return Err(self.unsupported(Some(v), "instruction not part of the block's test"));
        }
        Ok(BlockCode {
            stmts: self.stmts,
            exit: Some(exit),
        })
    }

    /// The statements of a branch's test; returns the jump's opcode and `k`, and whether the
    /// IR's `then`/`else` are the jump's `jf`/`jt`.
    fn branch(
        &mut self,
        op: CmpOp,
        lhs: Value,
        rhs: Value,
    ) -> Result<(u16, u32, bool), Unsupported> {
        let f = self.f;
        // gencode negates a block by swapping its successors.
        let (jop, swapped) = JmpOp::from_cmp(op);
        let jop = jop.code();
        let rhs_const = const_value(f, rhs);
        let relation_eq =
            matches!(*inst(f, lhs), Inst::Binary(BinOp::Sub, ..)) && rhs_const == Some(0);
        let ordered = matches!(op, CmpOp::Gt | CmpOp::Ge);
        let header = rhs_const.is_some()
            && !relation_eq
            && is_header_operand(f, lhs)
            && !is_len_relation(f, lhs, rhs)
            // A constant compared by `jgt`/`jge` is a relation between two numbers
            // (`gen_uncond`'s constant is always tested with `jeq #0`).
            && !(ordered && const_value(f, lhs).is_some());
        if header {
            self.header_operand(lhs)?;
            let k = self.take_const(rhs)?;
            return Ok((code::JMP | jop | code::K, k, swapped));
        }
        if relation_eq && op == CmpOp::Eq {
            // `ldx M[y]; ld M[x]; sub x; jeq #0`
            let Inst::Binary(BinOp::Sub, x, y) = *self.take(lhs)? else {
                unreachable!("checked above")
            };
            self.relation_operands(x, y)?;
            self.emit(code::ALU | code::SUB | code::X, 0);
            self.take_const(rhs)?;
            return Ok((code::JMP | code::JEQ | code::K, 0, false));
        }
        if ordered {
            // `ldx M[rhs]; ld M[lhs]; jgt x` / `jge x`
            self.relation_operands(lhs, rhs)?;
            return Ok((code::JMP | jop | code::X, 0, false));
        }
        Err(self.unsupported(Some(lhs), format!("comparison {op:?} of this operand")))
    }

    /// Both sides of a relation in scratch memory, then `ldx M[y]; ld M[x]`; their slots are
    /// given back (gencode frees them once the relation is built, before anything else is
    /// allocated).
    fn relation_operands(&mut self, x: Value, y: Value) -> Result<(), Unsupported> {
        let rx = self.arith(x)?;
        let ry = self.arith(y)?;
        self.emit(code::LDX | code::MEM, ry);
        self.emit(code::LD | code::MEM, rx);
        self.registers.free(rx);
        self.registers.free(ry);
        Ok(())
    }

    /// A header test's accumulator: `ld [k]`, `ldxb 4*([h]&0xf); ld [x + k]`, `ld len` or
    /// `ld #k`, then `and #m` if masked.
    fn header_operand(&mut self, v: Value) -> Result<(), Unsupported> {
        match *self.take(v)? {
            Inst::Binary(BinOp::And, x, m) => {
                self.header_operand(x)?;
                let m = self.take_const(m)?;
                self.emit(code::ALU | code::AND | code::K, m);
            }
            Inst::WireLen => self.emit(code::LD | code::W | code::LEN, 0),
            Inst::Const(k) => self.emit(code::LD | code::IMM, k),
            Inst::Load {
                index: None,
                offset,
                size,
            } => self.emit(Op::LdAbs(Size::from_load_size(size)).code(), offset),
            Inst::Load {
                index: Some(i),
                offset,
                size,
            } => {
                self.ipv4_header_len(i)?;
                self.emit(Op::LdInd(Size::from_load_size(size)).code(), offset);
            }
            _ => return Err(self.unsupported(Some(v), "not a header test's operand")),
        }
        Ok(())
    }

    /// `ldxb 4*([k]&0xf)` for the five instructions computing it.
    fn ipv4_header_len(&mut self, v: Value) -> Result<(), Unsupported> {
        let Some(k) = ipv4_header_len(self.f, v) else {
            return Err(self.unsupported(Some(v), "index is not the IPv4 header length"));
        };
        let Inst::Binary(_, low, two) = *self.take(v)? else {
            unreachable!("matched by ipv4_header_len")
        };
        let Inst::Binary(_, byte, mask) = *self.take(low)? else {
            unreachable!("matched by ipv4_header_len")
        };
        for part in [byte, mask, two] {
            self.take(part)?;
        }
        self.emit(code::LDX | code::B | code::MSH, k);
        Ok(())
    }

    /// The statements computing arithmetic value `v` into a scratch slot, in the order gencode
    /// builds them (operands first), with the allocations and releases gencode makes; returns
    /// the slot.
    fn arith(&mut self, v: Value) -> Result<u32, Unsupported> {
        Ok(match *self.take(v)? {
            // gen_loadi / gen_loadlen
            Inst::Const(k) => {
                let r = self.alloc(v)?;
                self.emit(code::LD | code::IMM, k);
                self.emit(code::ST, r);
                r
            }
            Inst::WireLen => {
                let r = self.alloc(v)?;
                self.emit(code::LD | code::W | code::LEN, 0);
                self.emit(code::ST, r);
                r
            }
            // gen_arth: both operands' slots are freed before the result's is allocated.
            Inst::Binary(op, a, b) => {
                let ra = self.arith(a)?;
                let rb = self.arith(b)?;
                self.emit(code::LDX | code::MEM, rb);
                self.emit(code::LD | code::MEM, ra);
                self.emit(Op::Alu(AluOp::from_binop(op), Src::X).code(), 0);
                self.registers.free(ra);
                self.registers.free(rb);
                let r = self.alloc(v)?;
                self.emit(code::ST, r);
                r
            }
            // gen_neg: in place, in the operand's slot.
            Inst::Neg(a) => {
                let r = self.arith(a)?;
                self.emit(code::LD | code::MEM, r);
                self.emit(code::ALU | code::NEG, 0);
                self.emit(code::ST, r);
                r
            }
            // gen_load: the loaded value's slot is allocated before the index's is freed.
            Inst::Load {
                index: Some(i),
                offset,
                size,
            } => {
                let ri = match *inst(self.f, i) {
                    // After an IPv4 header: `add v_index, v_header_length`.
                    Inst::Binary(BinOp::Add, j, hl) if ipv4_header_len(self.f, hl).is_some() => {
                        self.take(i)?;
                        let rj = self.arith(j)?;
                        self.ipv4_header_len(hl)?;
                        self.emit(code::LD | code::MEM, rj);
                        self.emit(code::ALU | code::ADD | code::X, 0);
                        self.emit(code::MISC | code::TAX, 0);
                        rj
                    }
                    _ => {
                        let ri = self.arith(i)?;
                        self.emit(code::LDX | code::MEM, ri);
                        ri
                    }
                };
                self.emit(Op::LdInd(Size::from_load_size(size)).code(), offset);
                let r = self.alloc(v)?;
                self.registers.free(ri);
                self.emit(code::ST, r);
                r
            }
            _ => return Err(self.unsupported(Some(v), "not an arithmetic value")),
        })
    }
}
