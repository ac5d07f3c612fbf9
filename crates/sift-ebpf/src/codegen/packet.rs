//! Packet access: prologues, loads and the wire length, per program type.
//!
//! **Socket filters** cannot read packet memory directly (the verifier refuses `data`/`data_end`
//! for them), so loads are the legacy `LD_ABS`/`LD_IND` instructions. The verifier rewrites
//! each into a call of `bpf_skb_load_helper_*` that reads the packet even when it is not linear
//! and, when the bytes are not there, ends the program returning 0: exactly the IR's
//! out-of-bounds rule (and classic BPF's, which the kernel translates the same way). Their
//! offset is a C `int`: offsets past 2^31 would select the `SKF_*` ancillary areas, so an
//! indexed offset is checked against that bound first (no packet is that long).
//!
//! **XDP and tc** read the packet directly between `data` and `data_end`, with the bounds
//! checks the verifier understands: a pointer `data + E` compared with `data_end` lets every
//! later access below `data + E` through. Since every load of a block executes whenever the
//! block runs, and the first out-of-bounds one rejects, one check of the block's largest
//! constant extent at its entry decides the same as checking each load; a block whose
//! dominating path already checked a larger extent checks nothing. Indexed loads check their
//! own address. The verifier tracks packet ranges only up to 0xffff bytes
//! (`MAX_PACKET_OFF`), so loads reaching beyond reject: always right for XDP (frames are at most
//! a page), a limit for tc on packets over 64 KiB.
//!
//! tc sees socket buffers whose data may not be linear (`data_end` then stops early): the
//! prologue pulls the bytes the filter can read (its largest constant extent, or 0xffff with
//! indexed loads, capped at `skb->len`) into the linear part with `bpf_skb_pull_data` when
//! they are not already there. If the kernel cannot (out of memory), loads past the linear part
//! reject.
//!
//! The wire length is `skb->len` for socket filters and tc, and `data_end - data` for XDP (the
//! frame as the driver received it).

use sift_ir::{Block, Function, Inst, LoadSize, Value};

use super::{Emitter, Machine, DATA, DATA_END, LEGACY_CTX, TEMP_A, TEMP_B};
use crate::insn::{helper, AluOp, Insn, JmpOp, Reg, Size, Src};
use crate::program::ProgramType;
use crate::regalloc::Loc;

/// The largest packet offset the verifier tracks (`MAX_PACKET_OFF`).
pub(crate) const MAX_EXTENT: u64 = 0xffff;

/// `LD_ABS`/`LD_IND` offsets are C ints.
const MAX_LEGACY_END: u64 = i32::MAX as u64;

/// `struct xdp_md` and `struct __sk_buff` field offsets.
const XDP_DATA: i16 = 0;
const XDP_DATA_END: i16 = 4;
const SKB_LEN: i16 = 0;
const SKB_DATA: i16 = 76;
const SKB_DATA_END: i16 = 80;

fn size(s: LoadSize) -> Size {
    match s {
        LoadSize::Byte => Size::B,
        LoadSize::Half => Size::H,
        LoadSize::Word => Size::W,
    }
}

/// The absolute offset of a load whose index is absent or constant.
fn absolute(f: &Function, index: Option<Value>, offset: u32) -> Option<u64> {
    match index {
        None => Some(u64::from(offset)),
        Some(x) => f.const_value(x).map(|k| u64::from(k) + u64::from(offset)),
    }
}

/// The end (offset + size) of each constant-offset load in `b`, and whether `b` has an
/// indexed load.
fn block_loads(f: &Function, b: Block) -> (u64, bool) {
    let mut extent = 0;
    let mut indexed = false;
    for &v in &f.block(b).insts {
        if let Inst::Load {
            index,
            offset,
            size,
        } = *f.inst(v)
        {
            match absolute(f, index, offset) {
                Some(a) => extent = extent.max(a + u64::from(size.bytes())),
                None => indexed = true,
            }
        }
    }
    (extent, indexed)
}

/// Direct access: the extent each block must check on entry (0 for none). A block knows the
/// smallest extent any path to it has checked (the layout is topological, so predecessors come
/// first).
pub(super) fn extent_checks(f: &Function, layout: &[Block], machine: Machine) -> Vec<u64> {
    let mut checks = vec![0u64; f.blocks.len()];
    if machine == Machine::Legacy {
        return checks;
    }
    let mut known_in: Vec<Option<u64>> = vec![None; f.blocks.len()];
    known_in[Function::ENTRY.index()] = Some(0);
    for &b in layout {
        let known = known_in[b.index()].unwrap_or(0);
        let (need, _) = block_loads(f, b);
        if need > known {
            checks[b.index()] = need;
        }
        let out = known.max(need);
        for t in f.block(b).term.targets() {
            let k = &mut known_in[t.block.index()];
            *k = Some(k.map_or(out, |k| k.min(out)));
        }
    }
    checks
}

/// The program's first instructions: context and packet pointers in their registers.
pub(super) fn prologue(e: &mut Emitter<'_>, layout: &[Block]) {
    let load_ctx = |e: &mut Emitter<'_>, dst: Reg, base: Reg, off: i16| {
        e.emit(Insn::Load {
            size: Size::W,
            dst,
            base,
            off,
        })
    };
    match (e.opts.program_type, e.machine) {
        (ProgramType::SocketFilter, _) | (_, Machine::Legacy) => e.mov64(LEGACY_CTX, Reg::R1),
        (ProgramType::Xdp, _) => {
            load_ctx(e, DATA, Reg::R1, XDP_DATA);
            load_ctx(e, DATA_END, Reg::R1, XDP_DATA_END);
        }
        (ProgramType::SchedCls, Machine::Direct { ctx }) => {
            // The context survives the helper call in r9 (kept there for skb->len if needed).
            let ctx = ctx.unwrap_or(Reg::R9);
            e.mov64(ctx, Reg::R1);
            let mut reach = 0u64;
            for &b in layout {
                let (extent, indexed) = block_loads(e.f, b);
                reach = reach.max(if indexed { MAX_EXTENT } else { extent });
            }
            let reach = reach.min(MAX_EXTENT);
            if reach > 0 {
                // r2 = min(skb->len, reach); pull r2 bytes unless data + r2 <= data_end.
                load_ctx(e, Reg::R2, ctx, SKB_LEN);
                let capped = e.new_label();
                e.jmp(JmpOp::Le, Reg::R2, Src::Imm(reach as i32), capped);
                e.emit(crate::moves::mov32_imm(Reg::R2, reach as u32));
                e.place(capped);
            }
            load_ctx(e, DATA, ctx, SKB_DATA);
            load_ctx(e, DATA_END, ctx, SKB_DATA_END);
            if reach > 0 {
                let linear = e.new_label();
                e.mov64(Reg::R3, DATA);
                e.alu(true, AluOp::Add, Reg::R3, Src::Reg(Reg::R2));
                e.jmp(JmpOp::Le, Reg::R3, Src::Reg(DATA_END), linear);
                e.mov64(Reg::R1, ctx);
                e.emit(Insn::Call {
                    helper: helper::SKB_PULL_DATA,
                });
                // The call invalidates packet pointers: fetch them again.
                load_ctx(e, DATA, ctx, SKB_DATA);
                load_ctx(e, DATA_END, ctx, SKB_DATA_END);
                e.place(linear);
            }
        }
    }
}

/// Direct access: the bounds check on entry to `b`.
pub(super) fn entry_check(e: &mut Emitter<'_>, b: Block) {
    let extent = e.checks[b.index()];
    if extent == 0 {
        return;
    }
    if extent > MAX_EXTENT {
        return e.static_reject();
    }
    let reject = e.reject_label();
    e.mov64(TEMP_B, DATA);
    e.alu(true, AluOp::Add, TEMP_B, Src::Imm(extent as i32));
    e.jmp(JmpOp::Gt, TEMP_B, Src::Reg(DATA_END), reject);
}

/// The wire length into `v`'s location.
pub(super) fn wire_len(e: &mut Emitter<'_>, v: Value) {
    if e.loc(v).is_none() {
        return;
    }
    let d = e.def_reg(v);
    match e.machine {
        Machine::Legacy => e.emit(Insn::Load {
            size: Size::W,
            dst: d,
            base: LEGACY_CTX,
            off: SKB_LEN,
        }),
        Machine::Direct { ctx: Some(ctx) } => e.emit(Insn::Load {
            size: Size::W,
            dst: d,
            base: ctx,
            off: SKB_LEN,
        }),
        Machine::Direct { ctx: None } => {
            // XDP: the frame's length (a pointer difference, allowed to privileged programs).
            e.mov64(d, DATA_END);
            e.alu(true, AluOp::Sub, d, Src::Reg(DATA));
            e.alu(false, AluOp::Mov, d, Src::Reg(d));
        }
    }
    e.finish_def(v, d);
}

/// A packet load into `v`'s location (performed even when `v` is dead: it may reject).
pub(super) fn load(
    e: &mut Emitter<'_>,
    v: Value,
    index: Option<Value>,
    offset: u32,
    load_size: LoadSize,
) {
    let size = size(load_size);
    let bytes = u64::from(size.bytes());
    match (e.machine, absolute(e.f, index, offset)) {
        (Machine::Legacy, Some(a)) => {
            if a + bytes > MAX_LEGACY_END {
                return e.static_reject();
            }
            e.emit(Insn::LoadAbs {
                size,
                imm: a as i32,
            });
            legacy_result(e, v);
        }
        (Machine::Legacy, None) => {
            let Some(ix) = index else { return };
            if !indexed_address(e, ix, offset, bytes, MAX_LEGACY_END, TEMP_B) {
                return;
            }
            e.emit(Insn::LoadInd {
                size,
                src: TEMP_B,
                imm: 0,
            });
            legacy_result(e, v);
        }
        (Machine::Direct { .. }, Some(a)) => {
            // The block's entry check covered [0, a + bytes), or rejected statically when that
            // is past what can be checked.
            if e.loc(v).is_none() || a + bytes > MAX_EXTENT {
                return;
            }
            let d = e.def_reg(v);
            match i16::try_from(a) {
                Ok(off) => e.emit(Insn::Load {
                    size,
                    dst: d,
                    base: DATA,
                    off,
                }),
                Err(_) => {
                    e.mov64(TEMP_B, DATA);
                    e.alu(true, AluOp::Add, TEMP_B, Src::Imm(a as i32));
                    e.emit(Insn::Load {
                        size,
                        dst: d,
                        base: TEMP_B,
                        off: 0,
                    });
                }
            }
            to_host(e, d, size);
            e.finish_def(v, d);
        }
        (Machine::Direct { .. }, None) => {
            let Some(ix) = index else { return };
            if !indexed_address(e, ix, offset, bytes, MAX_EXTENT, TEMP_A) {
                return;
            }
            // TEMP_B = data + index; TEMP_A = TEMP_B + size, checked against data_end.
            let reject = e.reject_label();
            e.mov64(TEMP_B, DATA);
            e.alu(true, AluOp::Add, TEMP_B, Src::Reg(TEMP_A));
            e.mov64(TEMP_A, TEMP_B);
            e.alu(true, AluOp::Add, TEMP_A, Src::Imm(bytes as i32));
            e.jmp(JmpOp::Gt, TEMP_A, Src::Reg(DATA_END), reject);
            let d = e.def_reg(v);
            e.emit(Insn::Load {
                size,
                dst: d,
                base: TEMP_B,
                off: 0,
            });
            to_host(e, d, size);
            e.finish_def(v, d);
        }
    }
}

/// `temp = index + offset` as a 64-bit sum, rejecting unless `temp + bytes <= limit`. Returns
/// false when the load can never be in bounds (the rejection is then unconditional).
fn indexed_address(
    e: &mut Emitter<'_>,
    index: Value,
    offset: u32,
    bytes: u64,
    limit: u64,
    temp: Reg,
) -> bool {
    if u64::from(offset) + bytes > limit {
        e.static_reject();
        return false;
    }
    let r = e.use_reg(index, temp);
    e.mov64(temp, r);
    if offset != 0 {
        e.alu(true, AluOp::Add, temp, Src::Imm(offset as i32));
    }
    let reject = e.reject_label();
    e.jmp(JmpOp::Gt, temp, Src::Imm((limit - bytes) as i32), reject);
    true
}

/// Moves an `LD_ABS`/`LD_IND` result (in `r0`, host order) to `v`'s location.
fn legacy_result(e: &mut Emitter<'_>, v: Value) {
    match e.loc(v) {
        Some(Loc::Reg(r)) => e.mov64(r, TEMP_A),
        Some(Loc::Slot(_)) => e.finish_def(v, TEMP_A),
        None => {}
    }
}

/// Network to host order for 2- and 4-byte loads.
fn to_host(e: &mut Emitter<'_>, reg: Reg, size: Size) {
    match size {
        Size::B => {}
        Size::H => e.emit(Insn::ToBe { dst: reg, bits: 16 }),
        Size::W => e.emit(Insn::ToBe { dst: reg, bits: 32 }),
    }
}
