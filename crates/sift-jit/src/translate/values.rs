//! Packet loads, constants in the packet's byte order, comparisons and results: the pieces of
//! Cranelift IR that the translator and the branch-free emitter ([`crate::branchless`]) share.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, InstBuilder, MemFlagsData as MemFlags, Value};
use cranelift_frontend::FunctionBuilder;
use sift_bytecode::{Cond, Width};

/// Ends the current block with "the result is `value`": returns it (single shape), or passes it
/// to the batch loop's `finish` block.
pub(crate) fn exit_with(b: &mut FunctionBuilder<'_>, finish: Option<Block>, value: Value) {
    match finish {
        None => {
            b.ins().return_(&[value]);
        }
        Some(finish) => {
            b.ins().jump(finish, &[value.into()]);
        }
    }
}

/// Memory flags for the packet: never traps (checked), never written during a run.
pub(crate) fn packet_flags() -> MemFlags {
    MemFlags::new().with_notrap().with_readonly()
}

/// The integer that native-order loads of `c`'s big-endian bytes produce.
pub(crate) fn native_constant(c: u32, width: Width) -> u32 {
    match width {
        Width::Byte => c,
        Width::Half => u32::from(u16::from_ne_bytes((c as u16).to_be_bytes())),
        Width::Word => u32::from_ne_bytes(c.to_be_bytes()),
    }
}

pub(crate) fn width_mask(width: Width) -> u32 {
    match width {
        Width::Byte => 0xff,
        Width::Half => 0xffff,
        Width::Word => u32::MAX,
    }
}

pub(crate) fn int_cc(cond: Cond) -> IntCC {
    match cond {
        Cond::Eq => IntCC::Equal,
        Cond::Ne | Cond::Set => IntCC::NotEqual,
        Cond::Gt => IntCC::UnsignedGreaterThan,
        Cond::Ge => IntCC::UnsignedGreaterThanOrEqual,
        Cond::Lt => IntCC::UnsignedLessThan,
        Cond::Le => IntCC::UnsignedLessThanOrEqual,
    }
}

/// Loads a `width` packet value at `address` as an `i32`: big-endian (as the bytecode defines
/// it), or left in the host's order when `native` (its uses compare with swapped constants).
pub(crate) fn load_packet_value(
    b: &mut FunctionBuilder,
    address: Value,
    width: Width,
    native: bool,
) -> Value {
    let flags = packet_flags();
    match width {
        Width::Byte => b.ins().uload8(types::I32, flags, address, 0),
        Width::Half if native || cfg!(target_endian = "big") => {
            b.ins().uload16(types::I32, flags, address, 0)
        }
        Width::Half => {
            let v = b.ins().load(types::I16, flags, address, 0);
            let v = b.ins().bswap(v);
            b.ins().uextend(types::I32, v)
        }
        Width::Word => {
            let v = b.ins().load(types::I32, flags, address, 0);
            if native || cfg!(target_endian = "big") {
                v
            } else {
                b.ins().bswap(v)
            }
        }
    }
}

/// The right-hand side of a comparison: a constant, or a value already read.
pub(crate) enum Rhs {
    Imm(u32),
    Value(Value),
}

/// `a cond rhs` as an `i8` value, or `Err(outcome)` when the outcome is known at compile time.
/// `native` is the width of `a` when it was loaded in native byte order: the constant is
/// swapped to match, and one wider than that width can never equal `a`.
pub(crate) fn compare(
    b: &mut FunctionBuilder,
    cond: Cond,
    a: Value,
    rhs: Rhs,
    native: Option<Width>,
) -> Result<Value, bool> {
    Ok(match rhs {
        Rhs::Imm(mut k) => {
            if let Some(w) = native {
                // Only eq, ne and set read native-order values (see `flow`).
                if cond != Cond::Set && k > width_mask(w) {
                    return Err(cond != Cond::Eq);
                }
                k = native_constant(k & width_mask(w), w);
            }
            match cond {
                Cond::Set => {
                    let m = b.ins().band_imm_u(a, i64::from(k));
                    b.ins().icmp_imm_u(IntCC::NotEqual, m, 0)
                }
                _ => b.ins().icmp_imm_u(int_cc(cond), a, i64::from(k)),
            }
        }
        Rhs::Value(y) => match cond {
            Cond::Set => {
                let m = b.ins().band(a, y);
                b.ins().icmp_imm_u(IntCC::NotEqual, m, 0)
            }
            _ => b.ins().icmp(int_cc(cond), a, y),
        },
    })
}
