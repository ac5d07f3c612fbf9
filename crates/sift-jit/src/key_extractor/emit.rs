//! Emitting a validated key program as Cranelift IR: the entry check on the captured length,
//! a bounds check per fixed-offset load past it and one per index (see `Layout::index_ends`),
//! loads, arithmetic, checks that branch to a reject block, and the key's words as values.
//! Both the extractor and the demultiplexer's matchers call [`emit_key`]; what to load
//! together and what to leave out comes from [`super::layout::Layout`].

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::Value as ClifValue;
use cranelift_codegen::ir::{types, Block, InstBuilder, MemFlagsData};
use cranelift_frontend::FunctionBuilder;

use sift_ir::BinOp;

use super::layout::{KeyOrder, Layout};
use super::{KeyProgram, KeyRel, KeyStep, KEY_WORDS};
use crate::arith;

/// Packet memory: never trapping (every load is checked first), never written.
fn packet_flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap().with_readonly()
}

struct Emitter<'a, 'f> {
    b: &'a mut FunctionBuilder<'f>,
    data: ClifValue,
    caplen: ClifValue,
    reject: Block,
}

impl Emitter<'_, '_> {
    /// Continues in a new block when `holds`, else rejects.
    fn require(&mut self, holds: ClifValue) {
        let next = self.b.create_block();
        self.b.ins().brif(holds, next, &[], self.reject, &[]);
        self.b.switch_to_block(next);
    }

    /// `bytes` (1, 2, 4 or 8) big-endian at `index + offset`, zero-extended to 32 bits (64
    /// for 8 bytes). With `check_end`, first requires `index + check_end <= caplen` (which
    /// must cover this load); without, the caller knows the bytes are captured.
    fn load(
        &mut self,
        index: Option<ClifValue>,
        offset: u32,
        bytes: u8,
        check_end: Option<u64>,
    ) -> ClifValue {
        let index64 = index.map(|v| self.b.ins().uextend(types::I64, v));
        if let Some(end) = check_end {
            self.require_captured(index64, end);
        }
        let base = match index64 {
            None => self.data,
            Some(i) => self.b.ins().iadd(self.data, i),
        };
        let address = self.b.ins().iadd_imm_u(base, i64::from(offset));
        self.read(address, bytes)
    }

    /// Rejects unless `index + end <= caplen` (`index64`: zero-extended; none for 0).
    fn require_captured(&mut self, index64: Option<ClifValue>, end: u64) {
        {
            // end < 2^33 and index < 2^32: no 64-bit overflow.
            let fits = match index64 {
                None => self.b.ins().icmp_imm_u(
                    IntCC::UnsignedGreaterThanOrEqual,
                    self.caplen,
                    end as i64,
                ),
                Some(i) => {
                    let at_end = self.b.ins().iadd_imm_u(i, end as i64);
                    self.b
                        .ins()
                        .icmp(IntCC::UnsignedLessThanOrEqual, at_end, self.caplen)
                }
            };
            self.require(fits);
        }
    }

    /// `bytes` (1, 2, 4 or 8) at `index + offset` as they lie in memory (the host's order, no
    /// swap), zero-extended to 64 bits; the caller knows the bytes are captured.
    fn load_raw(&mut self, index: Option<ClifValue>, offset: u32, bytes: u8) -> ClifValue {
        let base = match index {
            None => self.data,
            Some(i) => {
                let i = self.b.ins().uextend(types::I64, i);
                self.b.ins().iadd(self.data, i)
            }
        };
        let address = self.b.ins().iadd_imm_u(base, i64::from(offset));
        let flags = packet_flags();
        match bytes {
            1 => self.b.ins().uload8(types::I64, flags, address, 0),
            2 => self.b.ins().uload16(types::I64, flags, address, 0),
            4 => self.b.ins().uload32(flags, address, 0),
            _ => self.b.ins().load(types::I64, flags, address, 0),
        }
    }

    /// `bytes` big-endian at `address`, zero-extended to 32 bits (64 for 8 bytes).
    fn read(&mut self, address: ClifValue, bytes: u8) -> ClifValue {
        match bytes {
            1 => self.b.ins().uload8(types::I32, packet_flags(), address, 0),
            2 => {
                let v = self.b.ins().load(types::I16, packet_flags(), address, 0);
                let v = if cfg!(target_endian = "little") {
                    self.b.ins().bswap(v)
                } else {
                    v
                };
                self.b.ins().uextend(types::I32, v)
            }
            4 => {
                let v = self.b.ins().load(types::I32, packet_flags(), address, 0);
                if cfg!(target_endian = "little") {
                    self.b.ins().bswap(v)
                } else {
                    v
                }
            }
            _ => {
                let v = self.b.ins().load(types::I64, packet_flags(), address, 0);
                if cfg!(target_endian = "little") {
                    self.b.ins().bswap(v)
                } else {
                    v
                }
            }
        }
    }

    fn binary(&mut self, op: BinOp, a: ClifValue, b: ClifValue) -> ClifValue {
        let reject = self.reject;
        arith::binary(self.b, op, a, b, |builder, divisor| {
            let next = builder.create_block();
            builder.ins().brif(divisor, next, &[], reject, &[]);
            builder.switch_to_block(next);
        })
    }

    fn binary_const(&mut self, op: BinOp, a: ClifValue, k: u32) -> ClifValue {
        arith::binary_const(self.b, op, a, k).unwrap_or_else(|| {
            self.b.ins().jump(self.reject, &[]);
            // Unreachable code still needs a block to continue in.
            let dead = self.b.create_block();
            self.b.switch_to_block(dead);
            self.b.ins().iconst(types::I32, 0)
        })
    }

    fn holds(&mut self, rel: KeyRel, a: ClifValue, b: ClifValue) -> ClifValue {
        let cc = match rel {
            KeyRel::Eq => IntCC::Equal,
            KeyRel::Ne => IntCC::NotEqual,
            KeyRel::Gt => IntCC::UnsignedGreaterThan,
            KeyRel::Ge => IntCC::UnsignedGreaterThanOrEqual,
            KeyRel::Lt => IntCC::UnsignedLessThan,
            KeyRel::Le => IntCC::UnsignedLessThanOrEqual,
            KeyRel::Set | KeyRel::Clear => {
                let m = self.b.ins().band(a, b);
                let cc = if rel == KeyRel::Set {
                    IntCC::NotEqual
                } else {
                    IntCC::Equal
                };
                return self.b.ins().icmp_imm_u(cc, m, 0);
            }
        };
        self.b.ins().icmp(cc, a, b)
    }
}

/// Emits a validated program's entry check and steps into the current block: on every path
/// that accepts, the code continues in the block current on return, with the key's words as
/// the returned values (`i64`); a path that rejects jumps to `reject` (without arguments).
/// `packet` is `[data (i64), caplen (i64), wire_len (i32)]`. Shared by the extractor
/// (`extractor`) and the demultiplexer's matchers (`crate::demux_matcher`), which go on to
/// probe a table and take the key in [`KeyOrder::Packet`].
pub(crate) fn emit_key(
    b: &mut FunctionBuilder<'_>,
    program: &KeyProgram,
    packet: [ClifValue; 3],
    reject: Block,
    order: KeyOrder,
) -> [ClifValue; KEY_WORDS] {
    let [data, caplen, wire_len] = packet;
    let mut e = Emitter {
        b,
        data,
        caplen,
        reject,
    };
    if program.min_caplen > 0 {
        let long_enough = match i64::try_from(program.min_caplen) {
            Ok(n) => {
                e.b.ins()
                    .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, caplen, n)
            }
            Err(_) => e.b.ins().iconst(types::I8, 0),
        };
        e.require(long_enough);
    }
    let zero64 = e.b.ins().iconst(types::I64, 0);
    let mut words = [zero64; KEY_WORDS];
    let mut values: Vec<ClifValue> = Vec::new();
    let layout = Layout::of(program, order);
    // Indexes whose one bounds check has been made (see `Layout::index_ends`).
    let mut checked: Vec<u32> = Vec::new();
    for (at, step) in program.steps.iter().enumerate() {
        let v = |i: u32| values[i as usize];
        let defined = match *step {
            KeyStep::Const(k) => Some(e.b.ins().iconst(types::I32, i64::from(k))),
            KeyStep::WireLen => Some(wire_len),
            KeyStep::Load {
                index,
                offset,
                bytes,
            } => {
                let check = match index {
                    None => {
                        let end = u64::from(offset) + u64::from(bytes);
                        (end > program.min_caplen).then_some(end)
                    }
                    Some(index) => (!checked.contains(&index)).then(|| {
                        checked.push(index);
                        layout.index_end(index)
                    }),
                };
                let index = index.map(v);
                if layout.only_in_packed_words[values.len()] {
                    // Read by a wide word's load instead: only its bounds are checked here.
                    if let Some(end) = check {
                        let index64 = index.map(|i| e.b.ins().uextend(types::I64, i));
                        e.require_captured(index64, end);
                    }
                    Some(e.b.ins().iconst(types::I32, 0))
                } else {
                    Some(e.load(index, offset, bytes, check))
                }
            }
            KeyStep::Key { word, .. } if layout.run_of_step[at].is_some() => {
                let run = layout.runs[layout.run_of_step[at].expect("checked")];
                if run.last_step == at {
                    // Every part was loaded (and bounds-checked) by now: one load for all.
                    let index = run.index.map(v);
                    let raw = e.load_raw(index, run.offset, run.bytes);
                    let placed = if run.shift == 0 {
                        raw
                    } else {
                        e.b.ins().ishl_imm_u(raw, i64::from(run.shift))
                    };
                    let w = &mut words[usize::from(word)];
                    *w = e.b.ins().bor(*w, placed);
                }
                None
            }
            KeyStep::Key { word, .. } if layout.wide[usize::from(word)].is_some() => {
                let wide = layout.wide[usize::from(word)].expect("checked");
                if wide.last_step == at {
                    // Every part was loaded (and bounds-checked) by now: one load for all.
                    let index = wide.index.map(v);
                    let value = e.load(index, wide.offset, wide.bytes, None);
                    words[usize::from(word)] = if wide.bytes == 8 {
                        value
                    } else {
                        e.b.ins().uextend(types::I64, value)
                    };
                }
                None
            }
            KeyStep::Bin { op, a, b } => Some(e.binary(op, v(a), v(b))),
            KeyStep::BinK { op, a, k } => Some(e.binary_const(op, v(a), k)),
            KeyStep::Neg(a) => Some(e.b.ins().ineg(v(a))),
            KeyStep::Check { rel, a, k } => {
                let k = e.b.ins().iconst(types::I32, i64::from(k));
                let holds = e.holds(rel, v(a), k);
                e.require(holds);
                None
            }
            KeyStep::CheckValues { rel, a, b } => {
                let holds = e.holds(rel, v(a), v(b));
                e.require(holds);
                None
            }
            KeyStep::Key { a, word, shift } => {
                let wide = e.b.ins().uextend(types::I64, v(a));
                let placed = e.b.ins().ishl_imm_u(wide, i64::from(shift));
                let w = &mut words[usize::from(word)];
                *w = e.b.ins().bor(*w, placed);
                None
            }
        };
        if let Some(d) = defined {
            values.push(d);
        }
    }
    words
}
