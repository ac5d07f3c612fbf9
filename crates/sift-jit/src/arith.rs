//! Cranelift code for the IR's binary operators on 32-bit values ([`BinOp`], with
//! [`BinOp::apply`]'s meaning), shared by the filter translation and the key extractors.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use sift_ir::BinOp;

/// `x op y`. A division or remainder first calls `reject_if_zero(b, y)`, which must continue in
/// a block reached only when `y` is not zero.
pub(crate) fn binary(
    b: &mut FunctionBuilder<'_>,
    op: BinOp,
    x: Value,
    y: Value,
    reject_if_zero: impl FnOnce(&mut FunctionBuilder<'_>, Value),
) -> Value {
    match op {
        BinOp::Add => b.ins().iadd(x, y),
        BinOp::Sub => b.ins().isub(x, y),
        BinOp::Mul => b.ins().imul(x, y),
        BinOp::Div | BinOp::Mod => {
            reject_if_zero(b, y);
            match op {
                BinOp::Div => b.ins().udiv(x, y),
                _ => b.ins().urem(x, y),
            }
        }
        BinOp::And => b.ins().band(x, y),
        BinOp::Or => b.ins().bor(x, y),
        BinOp::Xor => b.ins().bxor(x, y),
        BinOp::Shl | BinOp::Shr => {
            // Cranelift masks the shift amount; the semantics give 0 from 32 on.
            let shifted = match op {
                BinOp::Shl => b.ins().ishl(x, y),
                _ => b.ins().ushr(x, y),
            };
            let big = b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, y, 32);
            let zero = b.ins().iconst(types::I32, 0);
            b.ins().select(big, zero, shifted)
        }
    }
}

/// `x op k`; `None` for a division or remainder by zero, which rejects the packet (the caller
/// ends the block).
pub(crate) fn binary_const(
    b: &mut FunctionBuilder<'_>,
    op: BinOp,
    x: Value,
    k: u32,
) -> Option<Value> {
    let k64 = i64::from(k);
    Some(match op {
        BinOp::Add => b.ins().iadd_imm_u(x, k64),
        BinOp::Sub => b.ins().iadd_imm_u(x, i64::from(k.wrapping_neg())),
        BinOp::Mul => b.ins().imul_imm_u(x, k64),
        BinOp::Div | BinOp::Mod if k == 0 => return None,
        BinOp::Div => b.ins().udiv_imm_u(x, k64),
        BinOp::Mod => b.ins().urem_imm_u(x, k64),
        BinOp::And => b.ins().band_imm_u(x, k64),
        BinOp::Or => b.ins().bor_imm_u(x, k64),
        BinOp::Xor => b.ins().bxor_imm_u(x, k64),
        BinOp::Shl | BinOp::Shr if k >= 32 => b.ins().iconst(types::I32, 0),
        BinOp::Shl => b.ins().ishl_imm_u(x, k64),
        BinOp::Shr => b.ins().ushr_imm_u(x, k64),
    })
}
