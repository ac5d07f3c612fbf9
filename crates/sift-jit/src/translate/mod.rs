//! Bytecode to Cranelift IR.
//!
//! The sixteen registers and the scratch words become Cranelift variables (the SSA builder
//! turns them into values and block parameters; scratch memory never touches memory, and the
//! verifier's "written before read on every path" rule means no variable is read undefined).
//! Every bytecode block becomes a Cranelift block; constants become immediates.
//!
//! The function is emitted in one of two shapes ([`Shape`]): `filter(packet, caplen, wire_len,
//! ctx) -> u32`, or a batch loop `batch(packets, count, out, ctx)` whose body is the same code
//! with every `ret` storing into `out[i]` and continuing with the next packet, so a batch pays
//! no call per packet. `ctx` is the coprocessor calls' context ([`crate::calls`]): each call is
//! a Cranelift `call_indirect` to a helper at a constant address, with `ctx`, the packet and the
//! operands; its result defines the destination register's variable like any instruction's
//! (Cranelift keeps values live across the call in callee-saved registers or spills them).
//!
//! The only memory the code reads is the packet, below `caplen` (every load is preceded by a
//! check, or covered by an earlier one: [`crate::bounds`]), the packet descriptors of a batch,
//! and the hash tables of large `switch`es (indices masked by construction: [`crate::table`]).

mod plan;
mod values;

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, Block, InstBuilder, MemFlagsData as MemFlags, SigRef, Signature, Value,
};
use cranelift_frontend::{FunctionBuilder, Switch, Variable};
use sift_bytecode::{AluOp, Cond, Insn, Key, Operand, Reg, Width};
use sift_ir::Chain;

use crate::arith;
use crate::bounds::Guard;
use crate::branchless;
use crate::calls::Helper;
use crate::coalesce::Pair;
use crate::membership::{as_set, emit_member, keys_as_read};
use crate::ranges::{as_runs, emit_search};
use crate::table::{emit_lookup, PerfectHash};

pub(crate) use plan::{
    searches, Plan, Shape, PACKET_REF_LEN, PACKET_REF_SIZE, PACKET_REF_WIRE_LEN,
};
pub(crate) use values::{
    compare, exit_with, load_packet_value, native_constant, packet_flags, width_mask, Rhs,
};

/// The per-packet inputs as SSA values, and where results go.
struct Packet {
    data: Value,
    caplen: Value,
    wire_len: Value,
    /// The coprocessor calls' context (null in programs without calls).
    ctx: Value,
    /// Batch: the block taking the result as its parameter.
    finish: Option<Block>,
}

/// Leaves for the reject block (created on first use) when `fails` is nonzero; continues in a
/// fresh block otherwise.
fn branch_to_reject(b: &mut FunctionBuilder<'_>, reject: &mut Option<Block>, fails: Value) {
    let reject = *reject.get_or_insert_with(|| b.create_block());
    let cont = b.create_block();
    b.ins().brif(fails, reject, &[], cont, &[]);
    b.switch_to_block(cont);
}

struct Translator<'a, 'b, 'p> {
    b: &'a mut FunctionBuilder<'b>,
    plan: &'a Plan<'p>,
    regs: [Variable; 16],
    scratch: Vec<Variable>,
    blocks: HashMap<u32, Block>,
    reject: Option<Block>,
    packet: Packet,
    /// Hash tables the code reads; owned by the compiled filter.
    data: &'a mut Vec<Box<[u32]>>,
    /// Imported signatures of the call helpers, by helper.
    signatures: Vec<(Helper, SigRef)>,
}

/// Emits the body of `shape` into `b` (whose entry block is current and has the signature's
/// parameters). Hash tables the code refers to are appended to `data`.
pub(crate) fn translate(
    b: &mut FunctionBuilder<'_>,
    plan: &Plan<'_>,
    shape: Shape,
    data: &mut Vec<Box<[u32]>>,
) {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let regs = std::array::from_fn(|_| b.declare_var(types::I32));
    let scratch = (0..plan.program.scratch_words)
        .map(|_| b.declare_var(types::I32))
        .collect();
    let packet = match shape {
        Shape::Single => Packet {
            data: params[0],
            caplen: params[1],
            wire_len: params[2],
            ctx: params[3],
            finish: None,
        },
        Shape::Batch => {
            let (refs, count, out, ctx) = (params[0], params[1], params[2], params[3]);
            let header = b.create_block();
            let body = b.create_block();
            let finish = b.create_block();
            let done = b.create_block();
            let index = b.append_block_param(header, types::I64);
            let zero = b.ins().iconst(types::I64, 0);
            b.ins().jump(header, &[zero.into()]);
            b.switch_to_block(header);
            let more = b.ins().icmp(IntCC::UnsignedLessThan, index, count);
            b.ins().brif(more, body, &[], done, &[]);
            b.switch_to_block(done);
            b.ins().return_(&[]);
            // finish(result): out[index] = result; continue with index + 1.
            let result = b.append_block_param(finish, types::I32);
            b.switch_to_block(finish);
            let at = b.ins().ishl_imm_u(index, 2);
            let slot = b.ins().iadd(out, at);
            b.ins().store(MemFlags::trusted(), result, slot, 0);
            let next = b.ins().iadd_imm_u(index, 1);
            b.ins().jump(header, &[next.into()]);
            b.switch_to_block(body);
            let at = b.ins().imul_imm_u(index, PACKET_REF_SIZE);
            let desc = b.ins().iadd(refs, at);
            let flags = MemFlags::trusted().with_readonly();
            let data = b.ins().load(types::I64, flags, desc, 0);
            let caplen = b.ins().load(types::I64, flags, desc, PACKET_REF_LEN);
            let wire_len = b.ins().load(types::I32, flags, desc, PACKET_REF_WIRE_LEN);
            Packet {
                data,
                caplen,
                wire_len,
                ctx,
                finish: Some(finish),
            }
        }
    };
    let mut t = Translator {
        b,
        plan,
        regs,
        scratch,
        blocks: HashMap::new(),
        reject: None,
        packet,
        data,
        signatures: Vec::new(),
    };
    if plan.branchless {
        let p = &t.packet;
        let (data, caplen, wire_len, finish) = (p.data, p.caplen, p.wire_len, p.finish);
        branchless::emit(t.b, plan, [data, caplen, wire_len], finish, t.data);
        t.b.seal_all_blocks();
        return;
    }
    if shape == Shape::Batch && searches(plan.program) {
        // Each packet of the batch starts afresh in the memo (the single entry's caller does
        // this before the call).
        let ctx = t.packet.ctx;
        t.call(Helper::NextPacket, &[ctx]);
    }
    t.body();
    // The shared reject block is filled last: Cranelift requires the block being built to be
    // finished before switching to another, so it cannot be filled when first needed.
    if let Some(r) = t.reject {
        t.b.switch_to_block(r);
        let zero = t.b.ins().iconst(types::I32, 0);
        t.exit(zero);
    }
    t.b.seal_all_blocks();
}

impl Translator<'_, '_, '_> {
    fn block(&mut self, target: u32) -> Block {
        let b = &mut *self.b;
        *self
            .blocks
            .entry(target)
            .or_insert_with(|| b.create_block())
    }

    /// Ends the current block with "the result is `value`".
    fn exit(&mut self, value: Value) {
        exit_with(self.b, self.packet.finish, value);
    }

    /// Leaves for the reject block when `fails` is nonzero; continues in a fresh block otherwise.
    fn reject_if(&mut self, fails: Value) {
        branch_to_reject(self.b, &mut self.reject, fails);
    }

    fn var(&self, r: Reg) -> Variable {
        self.regs[r.index() & 15]
    }

    fn body(&mut self) {
        let p = self.plan.program;
        let first = self.block(0);
        self.b.ins().jump(first, &[]);
        let mut open = false; // the current block still needs a terminator
        let mut skip_next = false;
        for i in 0..p.code.len() {
            if self.plan.flow.block_start[i] {
                if open {
                    let next = self.block(i as u32);
                    self.b.ins().jump(next, &[]);
                }
                open = self.plan.bounds.live[i];
                if open {
                    let here = self.block(i as u32);
                    self.b.switch_to_block(here);
                }
                skip_next = false;
            }
            if !open || !self.plan.bounds.live[i] {
                open = false;
                continue;
            }
            if std::mem::take(&mut skip_next) {
                continue;
            }
            if let Some(pair) = self.plan.pairs[i] {
                self.wide_compare(i, &pair);
                open = false;
                continue;
            }
            open = self.insn(i);
        }
        debug_assert!(!open, "verified programs end in ret");
    }

    /// Emits instruction `i`; returns whether the block continues after it.
    fn insn(&mut self, i: usize) -> bool {
        let plan = self.plan;
        match plan.program.code[i] {
            Insn::Mov { dst, src } => {
                let v = self.operand(src);
                self.b.def_var(self.var(dst), v);
            }
            Insn::WireLen { dst } => {
                let v = self.packet.wire_len;
                self.b.def_var(self.var(dst), v);
            }
            Insn::Neg { dst, src } => {
                let v = self.b.use_var(self.var(src));
                let v = self.b.ins().ineg(v);
                self.b.def_var(self.var(dst), v);
            }
            Insn::LoadScratch { dst, slot } => {
                let v = self.b.use_var(self.scratch[usize::from(slot)]);
                self.b.def_var(self.var(dst), v);
            }
            Insn::StoreScratch { slot, src } => {
                let v = self.b.use_var(self.var(src));
                self.b.def_var(self.scratch[usize::from(slot)], v);
            }
            Insn::Load {
                width,
                dst,
                base,
                offset,
            } => return self.load(i, width, dst, base, offset),
            Insn::Alu { op, dst, lhs, rhs } => return self.alu(i, op, dst, lhs, rhs),
            Insn::Jump { target } => {
                let t = self.block(target);
                self.b.ins().jump(t, &[]);
                return false;
            }
            Insn::Branch {
                cond,
                lhs,
                rhs,
                then_,
                else_,
            } => {
                self.branch(i, cond, lhs, rhs, then_, else_);
                return false;
            }
            Insn::Switch {
                key,
                table,
                default,
            } => {
                self.switch(i, key, table, default);
                return false;
            }
            Insn::Return { value } => {
                let v = self.operand(value);
                self.exit(v);
                return false;
            }
            Insn::Contains {
                dst,
                set,
                pattern,
                start,
            } => {
                let start = self.b.use_var(self.var(start));
                let set = self.b.ins().iconst(types::I32, i64::from(set));
                let pattern = self.b.ins().iconst(types::I32, i64::from(pattern));
                let p = &self.packet;
                let args = [p.ctx, p.data, p.caplen, set, pattern, start];
                let v = self.call(Helper::Contains, &args);
                self.b.def_var(self.var(dst), v);
            }
            Insn::Protochain {
                dst,
                chain,
                base,
                proto,
                offset,
                target,
            } => {
                let ip6 = u32::from(chain == Chain::Ip6);
                let [ip6, base, target] =
                    [ip6, base, target].map(|k| self.b.ins().iconst(types::I32, i64::from(k)));
                let proto = self.b.use_var(self.var(proto));
                let offset = self.b.use_var(self.var(offset));
                let p = &self.packet;
                let args = [p.data, p.caplen, ip6, base, proto, offset, target];
                let walked = self.call(Helper::Protochain, &args);
                let rejected = self.b.ins().icmp_imm_u(IntCC::Equal, walked, 0);
                self.reject_if(rejected);
                let v = self.b.ins().ireduce(types::I32, walked);
                self.b.def_var(self.var(dst), v);
            }
            Insn::Member { dst, set, key } => {
                let set = self.b.ins().iconst(types::I32, i64::from(set));
                let mut args = vec![self.packet.ctx, set];
                for &r in key.regs() {
                    args.push(self.b.use_var(self.var(r)));
                }
                let helper = match key {
                    Key::W32(_) => Helper::Member32,
                    Key::W128(_) => Helper::Member128,
                };
                let v = self.call(helper, &args);
                self.b.def_var(self.var(dst), v);
            }
        }
        true
    }

    /// The Cranelift signature of a helper (the function's own calling convention, the host's
    /// C one).
    fn signature(&mut self, helper: Helper) -> SigRef {
        if let Some(&(_, s)) = self.signatures.iter().find(|(h, _)| *h == helper) {
            return s;
        }
        let mut sig = Signature::new(self.b.func.signature.call_conv);
        let (ptrs, words, returns) = match helper {
            Helper::NextPacket => (1, 0, None),
            Helper::Contains => (3, 3, Some(types::I32)),
            Helper::Member32 => (1, 2, Some(types::I32)),
            Helper::Member128 => (1, 5, Some(types::I32)),
            Helper::Protochain => (2, 5, Some(types::I64)),
        };
        sig.params
            .extend((0..ptrs).map(|_| AbiParam::new(types::I64)));
        sig.params
            .extend((0..words).map(|_| AbiParam::new(types::I32)));
        sig.returns.extend(returns.map(AbiParam::new));
        let s = self.b.import_signature(sig);
        self.signatures.push((helper, s));
        s
    }

    /// Calls a helper; returns its result (`next_packet` has none: then a dummy zero).
    fn call(&mut self, helper: Helper, args: &[Value]) -> Value {
        let sig = self.signature(helper);
        let callee = self.b.ins().iconst(types::I64, helper.address() as i64);
        let call = self.b.ins().call_indirect(sig, callee, args);
        match self.b.inst_results(call).first() {
            Some(&v) => v,
            None => self.b.ins().iconst(types::I32, 0),
        }
    }

    fn operand(&mut self, o: Operand) -> Value {
        match o {
            Operand::Reg(r) => self.b.use_var(self.var(r)),
            Operand::Imm(k) => self.b.ins().iconst(types::I32, i64::from(k)),
        }
    }

    /// Emits the guard of a load and returns the address to load from with its displacement.
    /// `None`: the guard rejects unconditionally (the block ends).
    fn guarded_address(&mut self, i: usize, base: Option<Reg>, offset: u32) -> Option<Value> {
        let (data, caplen) = (self.packet.data, self.packet.caplen);
        let base64 = base.map(|r| {
            let v = self.b.use_var(self.var(r));
            self.b.ins().uextend(types::I64, v)
        });
        match self.plan.bounds.guard[i] {
            Guard::Covered => {}
            Guard::Reject => {
                let zero = self.b.ins().iconst(types::I32, 0);
                self.exit(zero);
                return None;
            }
            Guard::Check(n) => {
                // n <= 2^32 + 4: fits an i64 immediate.
                let fails = match base64 {
                    None => self
                        .b
                        .ins()
                        .icmp_imm_u(IntCC::UnsignedLessThan, caplen, n as i64),
                    Some(b64) => {
                        let end = self.b.ins().iadd_imm_u(b64, n as i64);
                        self.b.ins().icmp(IntCC::UnsignedGreaterThan, end, caplen)
                    }
                };
                self.reject_if(fails);
            }
        }
        let address = match base64 {
            None => data,
            Some(b64) => self.b.ins().iadd(data, b64),
        };
        Some(self.b.ins().iadd_imm_u(address, i64::from(offset)))
    }

    fn load(&mut self, i: usize, width: Width, dst: Reg, base: Option<Reg>, offset: u32) -> bool {
        let Some(address) = self.guarded_address(i, base, offset) else {
            return false;
        };
        let native = self.plan.flow.native_order[i].is_some();
        let v = load_packet_value(self.b, address, width, native);
        self.b.def_var(self.var(dst), v);
        true
    }

    fn wide_compare(&mut self, i: usize, pair: &Pair) {
        // The guard of the first load covers both (checked when the pair was formed).
        let Some(address) = self.guarded_address(i, None, pair.offset) else {
            return;
        };
        let ty = match pair.width {
            Width::Word => types::I64,
            _ => types::I32,
        };
        let v = self.b.ins().load(ty, packet_flags(), address, 0);
        let equal = self
            .b
            .ins()
            .icmp_imm_u(IntCC::Equal, v, pair.constant as i64);
        let (t, f) = (self.block(pair.equal), self.block(pair.unequal));
        self.b.ins().brif(equal, t, &[], f, &[]);
    }

    fn native_operand(&self, i: usize) -> Option<Width> {
        self.plan.native_operand(i)
    }

    fn alu(&mut self, i: usize, op: AluOp, dst: Reg, lhs: Reg, rhs: Operand) -> bool {
        let a = self.b.use_var(self.var(lhs));
        let v = match rhs {
            Operand::Imm(k) => {
                // A native-order source of `and`: mask with the native-order constant.
                let k = match self.native_operand(i) {
                    Some(w) if op == AluOp::And && self.plan.flow.native_order[i].is_some() => {
                        native_constant(k & width_mask(w), w)
                    }
                    _ => k,
                };
                match arith::binary_const(self.b, op, a, k) {
                    Some(v) => v,
                    None => {
                        let zero = self.b.ins().iconst(types::I32, 0);
                        self.exit(zero);
                        return false;
                    }
                }
            }
            Operand::Reg(r) => {
                let y = self.b.use_var(self.var(r));
                let reject = &mut self.reject;
                arith::binary(self.b, op, a, y, |b, divisor| {
                    let zero = b.ins().icmp_imm_u(IntCC::Equal, divisor, 0);
                    branch_to_reject(b, reject, zero);
                })
            }
        };
        self.b.def_var(self.var(dst), v);
        true
    }

    fn branch(&mut self, i: usize, cond: Cond, lhs: Reg, rhs: Operand, then_: u32, else_: u32) {
        let (t, f) = (self.block(then_), self.block(else_));
        if then_ == else_ {
            self.b.ins().jump(t, &[]);
            return;
        }
        let a = self.b.use_var(self.var(lhs));
        let rhs = match rhs {
            Operand::Imm(k) => Rhs::Imm(k),
            Operand::Reg(r) => Rhs::Value(self.b.use_var(self.var(r))),
        };
        let holds = match compare(self.b, cond, a, rhs, self.native_operand(i)) {
            Ok(holds) => holds,
            Err(decided) => {
                self.b.ins().jump(if decided { t } else { f }, &[]);
                return;
            }
        };
        self.b.ins().brif(holds, t, &[], f, &[]);
    }

    fn switch(&mut self, i: usize, key: Reg, table: u32, default: u32) {
        let entries = &self.plan.program.tables[table as usize].entries;
        let key = self.b.use_var(self.var(key));
        let default = self.block(default);
        if let Some((keys, target)) = as_set(self.plan.program, table) {
            // One test of membership, then one branch (taken rarely in host sets).
            let keys = keys_as_read(&keys, self.native_operand(i));
            let member = emit_member(self.b, key, &keys);
            let target = self.block(target);
            self.b.ins().brif(member, target, &[], default, &[]);
            return;
        }
        if let Some(runs) = as_runs(entries) {
            let targets: Vec<Block> = runs.iter().map(|r| self.block(r.target)).collect();
            emit_search(self.b, key, &runs, &targets, default);
            return;
        }
        let dense = match (entries.first(), entries.last()) {
            (Some(lo), Some(hi)) => u64::from(hi.0 - lo.0) < 2 * entries.len() as u64,
            _ => true,
        };
        if entries.len() >= self.plan.options.hash_min_keys && !dense {
            let keys: Vec<u32> = entries.iter().map(|e| e.0).collect();
            if let Some(hash) = PerfectHash::build(&keys) {
                let targets: Vec<u32> = entries.iter().map(|e| e.1).collect();
                self.hashed_switch(key, &hash, &targets, default);
                return;
            }
        }
        let mut switch = Switch::new();
        for &(k, target) in entries {
            let block = self.block(target);
            switch.set_entry(u128::from(k), block);
        }
        switch.emit(self.b, key, default);
    }

    /// A lookup in a collision-free hash table ([`crate::table::emit_lookup`]).
    fn hashed_switch(&mut self, key: Value, hash: &PerfectHash, targets: &[u32], default: Block) {
        let lookup = emit_lookup(self.b, key, hash, targets, self.data);
        let Some(number) = lookup.number else {
            let t = self.block(lookup.distinct[0]);
            self.b.ins().brif(lookup.found, t, &[], default, &[]);
            return;
        };
        let dispatch = self.b.create_block();
        self.b.ins().brif(lookup.found, dispatch, &[], default, &[]);
        self.b.switch_to_block(dispatch);
        let mut switch = Switch::new();
        for (n, &t) in lookup.distinct.iter().enumerate() {
            let block = self.block(t);
            switch.set_entry(n as u128, block);
        }
        switch.emit(self.b, number, default);
    }
}
