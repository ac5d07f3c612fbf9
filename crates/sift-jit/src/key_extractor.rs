//! Native code for the demultiplexer's key extractors (`sift-demux`).
//!
//! The demultiplexer groups filters that differ only in constants into *shapes* (MPF's
//! collapse): per packet and shape it runs a few checks (ethertype, protocol, not a fragment)
//! and packs the fields the filters compare with constants (addresses, ports) into a fixed-size
//! key, which it then looks up in the shape's hash table. That extraction is the
//! demultiplexer's inner loop. [`KeyProgram`] describes it as straight-line code over
//! numbered values; [`NativeExtractor::compile`] turns it into one machine-code function
//! `extract(packet, caplen, wire_len, key) -> accepted` with Cranelift. The table stays on the
//! Rust side, so adding a key to a shape never touches the code.
//!
//! Semantics (those of the demultiplexer's interpreter, which remains the fallback where
//! [`crate::supported`] is false): a load reads `bytes` (1, 2 or 4) big-endian at
//! `index + offset` (computed without wrapping) and rejects the packet unless that lies within
//! the captured bytes; a division or remainder by zero rejects; shifts by 32 or more give 0;
//! arithmetic wraps; a check that does not hold rejects. On acceptance every key word is
//! written (words no [`KeyStep::Key`] touches are 0); on rejection the key is unspecified.
//!
//! Safety: [`NativeExtractor::compile`] validates the program (operands defined before use,
//! key words and shifts in range, load sizes 1, 2 or 4), and the generated code reads the packet
//! only after a bounds check that covers the load (a fixed-offset load within
//! [`KeyProgram::min_caplen`] is covered by the one check on entry; loads at one index share
//! one check, made at the first of them, as far as the furthest reads: the program is
//! straight-line and every failure rejects, so checking earlier changes nothing but which check
//! rejects), writes only the [`KEY_WORDS`] words of the key it is given, has no loops and calls
//! nothing. A key word packed from adjacent big-endian loads of one index (two addresses, two
//! ports) is read with one wide load, covered by its parts' checks.

#![allow(unsafe_code)]

use std::fmt;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::Value as ClifValue;
use cranelift_codegen::ir::{types, Block, InstBuilder, MemFlagsData};
use cranelift_frontend::FunctionBuilder;

use sift_ir::{BinOp, CmpOp};

use crate::arith;
use crate::native::{CodeMemory, Functions};
use crate::JitError;

#[path = "demux_key_order.rs"]
mod key_order;
pub use key_order::PacketOrder;

/// Words in a key (enough for an IPv6 4-tuple with its ethertype and next header).
pub const KEY_WORDS: usize = 6;

/// A comparison a check makes (unsigned; `Set`: `a & b != 0`, `Clear`: `a & b == 0`): sift-ir's
/// [`CmpOp`] closed under negation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyRel {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Set,
    Clear,
}

impl KeyRel {
    pub fn from_ir(op: CmpOp) -> KeyRel {
        match op {
            CmpOp::Eq => KeyRel::Eq,
            CmpOp::Ne => KeyRel::Ne,
            CmpOp::Gt => KeyRel::Gt,
            CmpOp::Ge => KeyRel::Ge,
            CmpOp::Lt => KeyRel::Lt,
            CmpOp::Le => KeyRel::Le,
            CmpOp::Set => KeyRel::Set,
        }
    }

    pub fn eval(self, a: u32, b: u32) -> bool {
        match self {
            KeyRel::Eq => a == b,
            KeyRel::Ne => a != b,
            KeyRel::Gt => a > b,
            KeyRel::Ge => a >= b,
            KeyRel::Lt => a < b,
            KeyRel::Le => a <= b,
            KeyRel::Set => a & b != 0,
            KeyRel::Clear => a & b == 0,
        }
    }

    pub fn negate(self) -> KeyRel {
        match self {
            KeyRel::Eq => KeyRel::Ne,
            KeyRel::Ne => KeyRel::Eq,
            KeyRel::Gt => KeyRel::Le,
            KeyRel::Ge => KeyRel::Lt,
            KeyRel::Lt => KeyRel::Ge,
            KeyRel::Le => KeyRel::Gt,
            KeyRel::Set => KeyRel::Clear,
            KeyRel::Clear => KeyRel::Set,
        }
    }

    /// The relation with its operands swapped: `a R b` iff `b R.mirror() a`.
    pub fn mirror(self) -> KeyRel {
        match self {
            KeyRel::Gt => KeyRel::Lt,
            KeyRel::Ge => KeyRel::Le,
            KeyRel::Lt => KeyRel::Gt,
            KeyRel::Le => KeyRel::Ge,
            symmetric => symmetric,
        }
    }
}

/// One step of a [`KeyProgram`]. The steps that compute a value (`Const` to `Neg`) define the
/// program's values in order: the first defines value 0, the next value 1, and so on; operands
/// name values defined earlier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyStep {
    Const(u32),
    WireLen,
    /// `bytes` big-endian at `index + offset` (`index`: a value, or none for 0).
    Load {
        index: Option<u32>,
        offset: u32,
        bytes: u8,
    },
    Bin {
        op: BinOp,
        a: u32,
        b: u32,
    },
    BinK {
        op: BinOp,
        a: u32,
        k: u32,
    },
    Neg(u32),
    /// Rejects unless `value[a] rel k`.
    Check {
        rel: KeyRel,
        a: u32,
        k: u32,
    },
    /// Rejects unless `value[a] rel value[b]`.
    CheckValues {
        rel: KeyRel,
        a: u32,
        b: u32,
    },
    /// `key[word] |= u64::from(value[a]) << shift`.
    Key {
        a: u32,
        word: u8,
        shift: u8,
    },
}

/// Straight-line key extraction: an entry check on the captured length, then the steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyProgram {
    /// Packets with fewer captured bytes are rejected before any step runs.
    pub min_caplen: u64,
    pub steps: Vec<KeyStep>,
}

/// Why a [`KeyProgram`] is malformed (the step's position and what is wrong with it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyProgramError {
    pub step: usize,
    pub problem: &'static str,
}

impl fmt::Display for KeyProgramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key program step {}: {}", self.step, self.problem)
    }
}

impl std::error::Error for KeyProgramError {}

impl KeyProgram {
    /// Checks what the code generator relies on.
    pub fn validate(&self) -> Result<(), KeyProgramError> {
        let mut defined: u64 = 0;
        for (i, step) in self.steps.iter().enumerate() {
            let fail = |problem| Err(KeyProgramError { step: i, problem });
            let operand_ok = |v: u32| u64::from(v) < defined;
            let ok = match *step {
                KeyStep::Const(_) | KeyStep::WireLen => true,
                KeyStep::Load { index, bytes, .. } => {
                    if !matches!(bytes, 1 | 2 | 4) {
                        return fail("load size is not 1, 2 or 4");
                    }
                    index.is_none_or(operand_ok)
                }
                KeyStep::Bin { a, b, .. } | KeyStep::CheckValues { a, b, .. } => {
                    operand_ok(a) && operand_ok(b)
                }
                KeyStep::BinK { a, .. } | KeyStep::Neg(a) | KeyStep::Check { a, .. } => {
                    operand_ok(a)
                }
                KeyStep::Key { a, word, shift } => {
                    if usize::from(word) >= KEY_WORDS || shift >= 64 {
                        return fail("key word or shift out of range");
                    }
                    operand_ok(a)
                }
            };
            if !ok {
                return fail("operand not defined by an earlier step");
            }
            if defines_value(step) {
                defined += 1;
            }
        }
        Ok(())
    }
}

fn defines_value(step: &KeyStep) -> bool {
    !matches!(
        step,
        KeyStep::Check { .. } | KeyStep::CheckValues { .. } | KeyStep::Key { .. }
    )
}

/// `(packet, caplen, wire_len, key) -> 1 accepted / 0 rejected`.
type ExtractFn = unsafe extern "C" fn(*const u8, u64, u32, *mut u64) -> u32;

/// A [`KeyProgram`] compiled to machine code. Immutable and `Send + Sync`; frees its code when
/// dropped.
pub struct NativeExtractor {
    function: ExtractFn,
    /// Frees the code when dropped.
    _memory: CodeMemory,
}

impl fmt::Debug for NativeExtractor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeExtractor")
            .field("address", &format_args!("{:#x}", self.function as usize))
            .finish_non_exhaustive()
    }
}

impl NativeExtractor {
    /// Compiles `program`; [`JitError::Unsupported`] where the host cannot run generated code,
    /// [`JitError::KeyProgram`] for a malformed program (see [`KeyProgram::validate`]).
    pub fn compile(program: &KeyProgram) -> Result<NativeExtractor, JitError> {
        program.validate()?;
        let mut functions = Functions::new()?;
        functions.add(
            "extract_key",
            &[types::I64, types::I64, types::I32, types::I64],
            &[types::I32],
            |b| emit(b, program),
            None,
        )?;
        let (addresses, memory) = functions.finish()?;
        let address = addresses[0];
        // SAFETY: Cranelift just compiled and mapped this function with exactly this signature
        // in the host's default (C) calling convention; it stays mapped until `Drop` frees the
        // module.
        let function = unsafe { std::mem::transmute::<*const u8, ExtractFn>(address) };
        Ok(NativeExtractor {
            function,
            _memory: memory,
        })
    }

    /// Runs the checks on a packet (`packet`: the captured bytes) and, if they hold, writes its
    /// key and returns `true`.
    #[inline]
    pub fn extract(&self, packet: &[u8], wire_len: u32, key: &mut [u64; KEY_WORDS]) -> bool {
        // SAFETY: the code reads only `packet[..packet.len()]` (every load is bounds-checked
        // against the length passed here, see the module docs) and writes only the
        // `KEY_WORDS` words of `key`; `self` keeps the code mapped for the call.
        unsafe {
            (self.function)(
                packet.as_ptr(),
                packet.len() as u64,
                wire_len,
                key.as_mut_ptr(),
            ) != 0
        }
    }
}

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

/// Emits the function body: entry check, steps, key stores.
fn emit(b: &mut FunctionBuilder<'_>, program: &KeyProgram) {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let (data, caplen, wire_len, key_out) = (params[0], params[1], params[2], params[3]);
    let reject = b.create_block();
    let words = emit_key(
        b,
        program,
        [data, caplen, wire_len],
        reject,
        KeyOrder::BigEndian,
    );
    let key_flags = MemFlagsData::trusted();
    for (i, w) in words.iter().enumerate() {
        b.ins().store(key_flags, *w, key_out, (i * 8) as i32);
    }
    let one = b.ins().iconst(types::I32, 1);
    b.ins().return_(&[one]);
    b.switch_to_block(reject);
    let zero = b.ins().iconst(types::I32, 0);
    b.ins().return_(&[zero]);
    b.seal_all_blocks();
}

/// Emits a validated program's entry check and steps into the current block: on every path
/// that accepts, the code continues in the block current on return, with the key's words as
/// the returned values (`i64`); a path that rejects jumps to `reject` (without arguments).
/// `packet` is `[data (i64), caplen (i64), wire_len (i32)]`. Shared by the extractor above
/// and the demultiplexer's matchers (`crate::demux_matcher`), which go on to probe a table
/// and take the key in [`KeyOrder::Packet`].
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

/// What the emitter knows about a program before emitting it.
struct Layout {
    /// Per indexed load's index value: the furthest byte past the index any load at that index
    /// reads. The first load at an index checks that far, which covers every later one: the
    /// program is straight-line and any failed check rejects, so checking earlier changes only
    /// which check rejects, not whether the packet is rejected.
    index_ends: Vec<(u32, u64)>,
    /// Key words made of adjacent loads, in big-endian order (addresses, ports): read with one
    /// wide load instead of one load, swap, shift and or per field.
    wide: [Option<WideWord>; KEY_WORDS],
    /// In [`KeyOrder::Packet`]: runs of fields read as they lie in the packet, each with one
    /// load (see `key_order`), and per step the run a `Key` step belongs to.
    runs: Vec<Run>,
    run_of_step: Vec<Option<usize>>,
    /// Per value: whether it is a load used only by `Key` steps into wide words or runs (its
    /// own load is then left out).
    only_in_packed_words: Vec<bool>,
}

/// The order of the key's fields (see `key_order`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyOrder {
    /// The program's own key: big-endian field values.
    BigEndian,
    /// Fields that are plain loads as they lie in the packet ([`PacketOrder`]).
    Packet,
}

/// Fields adjacent in the packet and in their key word, in packet order: one load of
/// `bytes` (1, 2, 4 or 8) at `index + offset`, placed at bit `shift`.
#[derive(Clone, Copy, Debug)]
struct Run {
    index: Option<u32>,
    offset: u32,
    bytes: u8,
    shift: u8,
    /// The last `Key` step of the run, where the load is emitted.
    last_step: usize,
}

/// The runs of a program's packet-order fields (`raw`: per step, see
/// `key_order::raw_key_steps`), and per step its run.
fn packet_runs(program: &KeyProgram, raw: &[bool]) -> (Vec<Run>, Vec<Option<usize>>) {
    // Per word: (index, offset, bytes, shift, step) of each field.
    type Field = (Option<u32>, u32, u8, u8, usize);
    let mut parts: [Vec<Field>; KEY_WORDS] = Default::default();
    for (at, step) in program.steps.iter().enumerate() {
        if let (true, KeyStep::Key { a, word, shift }) = (raw[at], *step) {
            if let Some((index, offset, bytes)) = key_order::load_of(program, a) {
                parts[usize::from(word)].push((index, offset, bytes, shift, at));
            }
        }
    }
    let mut runs = Vec::new();
    let mut run_of_step = vec![None; program.steps.len()];
    for mut word in parts {
        word.sort_by_key(|&(index, offset, ..)| (index, offset));
        let mut i = 0;
        while i < word.len() {
            // The longest stretch from `i` of fields that follow each other in the packet and
            // in the word whose bytes a single load can read.
            let (index, offset, _, shift, _) = word[i];
            let (mut end, mut total, mut take) = (i, 0u32, 0);
            while end < word.len() {
                let (ix, off, bytes, sh, _) = word[end];
                let follows = ix == index
                    && off == offset + total
                    && u32::from(sh) == u32::from(shift) + 8 * total;
                if !follows {
                    break;
                }
                total += u32::from(bytes);
                end += 1;
                if matches!(total, 1 | 2 | 4 | 8) {
                    take = end;
                }
            }
            let take = take.max(i + 1);
            let bytes: u32 = word[i..take].iter().map(|p| u32::from(p.2)).sum();
            for p in &word[i..take] {
                run_of_step[p.4] = Some(runs.len());
            }
            runs.push(Run {
                index,
                offset,
                bytes: bytes as u8,
                shift,
                last_step: word[i..take].iter().map(|p| p.4).max().expect("a field"),
            });
            i = take;
        }
    }
    (runs, run_of_step)
}

/// A load packed into a key word: `(offset, bytes, shift, index)`.
type Part = (u32, u8, u8, Option<u32>);

#[derive(Clone, Copy, Debug)]
struct WideWord {
    index: Option<u32>,
    offset: u32,
    /// 2, 4 or 8.
    bytes: u8,
    /// The last `Key` step into the word, where the load is emitted.
    last_step: usize,
}

impl Layout {
    fn of(program: &KeyProgram, order: KeyOrder) -> Layout {
        // Value number -> its load (index, offset, bytes).
        let mut loads: Vec<Option<(Option<u32>, u32, u8)>> = Vec::new();
        let mut index_ends: Vec<(u32, u64)> = Vec::new();
        // Per word: each part, and the last step.
        let mut parts: [Vec<Part>; KEY_WORDS] = Default::default();
        let mut plain = [false; KEY_WORDS];
        let mut last = [0usize; KEY_WORDS];
        for (at, step) in program.steps.iter().enumerate() {
            match *step {
                KeyStep::Load {
                    index,
                    offset,
                    bytes,
                } => {
                    if let Some(i) = index {
                        let end = u64::from(offset) + u64::from(bytes);
                        match index_ends.iter_mut().find(|(x, _)| *x == i) {
                            Some((_, e)) => *e = (*e).max(end),
                            None => index_ends.push((i, end)),
                        }
                    }
                    loads.push(Some((index, offset, bytes)));
                }
                KeyStep::Key { a, word, shift } => {
                    let w = usize::from(word);
                    last[w] = at;
                    match loads.get(a as usize).copied().flatten() {
                        Some((index, offset, bytes)) => {
                            parts[w].push((offset, bytes, shift, index))
                        }
                        None => plain[w] = true,
                    }
                }
                ref other if defines_value(other) => loads.push(None),
                _ => {}
            }
        }
        let wide: [Option<WideWord>; KEY_WORDS] = std::array::from_fn(|w| {
            if plain[w] || parts[w].len() < 2 {
                return None;
            }
            let mut p = parts[w].clone();
            p.sort_by_key(|&(offset, ..)| offset);
            let index = p[0].3;
            let total: u32 = p.iter().map(|&(_, bytes, ..)| u32::from(bytes)).sum();
            // Big-endian order: each part follows the previous in memory and sits just below
            // it in the word; the last part at bit 0.
            let adjacent = p.windows(2).all(|x| {
                x[1].0 == x[0].0 + u32::from(x[0].1)
                    && u32::from(x[0].2) == u32::from(x[1].2) + 8 * u32::from(x[1].1)
            });
            let same_index = p.iter().all(|x| x.3 == index);
            let ok = adjacent && same_index && p[p.len() - 1].2 == 0 && matches!(total, 2 | 4 | 8);
            ok.then_some(WideWord {
                index,
                offset: p[0].0,
                bytes: total as u8,
                last_step: last[w],
            })
        });
        let (wide, runs, run_of_step) = match order {
            KeyOrder::BigEndian => (wide, Vec::new(), vec![None; program.steps.len()]),
            KeyOrder::Packet => {
                let (runs, run_of_step) = packet_runs(program, &key_order::raw_key_steps(program));
                ([None; KEY_WORDS], runs, run_of_step)
            }
        };
        // Per value: (is a load, uses outside wide words and runs).
        let mut uses: Vec<(bool, usize)> = loads.iter().map(|l| (l.is_some(), 0)).collect();
        let mut count = |v: u32| {
            if let Some(u) = uses.get_mut(v as usize) {
                u.1 += 1;
            }
        };
        for (at, step) in program.steps.iter().enumerate() {
            match *step {
                KeyStep::Load { index, .. } => index.into_iter().for_each(&mut count),
                KeyStep::Bin { a, b, .. } | KeyStep::CheckValues { a, b, .. } => {
                    count(a);
                    count(b);
                }
                KeyStep::BinK { a, .. } | KeyStep::Neg(a) | KeyStep::Check { a, .. } => count(a),
                KeyStep::Key { a, word, .. } => {
                    if wide[usize::from(word)].is_none() && run_of_step[at].is_none() {
                        count(a);
                    }
                }
                KeyStep::Const(_) | KeyStep::WireLen => {}
            }
        }
        let only_in_packed_words = uses.iter().map(|&(load, n)| load && n == 0).collect();
        Layout {
            index_ends,
            wide,
            runs,
            run_of_step,
            only_in_packed_words,
        }
    }

    fn index_end(&self, index: u32) -> u64 {
        self.index_ends
            .iter()
            .find(|(i, _)| *i == index)
            .map_or(0, |&(_, end)| end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_tcp() -> Vec<u8> {
        let mut p = vec![0u8; 60];
        p[12] = 0x08;
        p[14] = 0x45;
        p[23] = 6;
        p[26..30].copy_from_slice(&[10, 0, 0, 1]);
        p[34..36].copy_from_slice(&80u16.to_be_bytes());
        p
    }

    #[test]
    fn checks_and_packs_a_key() {
        if !crate::supported() {
            return;
        }
        // ether type 0x0800, protocol 6, key: (src address << 16) | source port after the IHL.
        let program = KeyProgram {
            min_caplen: 34,
            steps: vec![
                KeyStep::Load {
                    index: None,
                    offset: 12,
                    bytes: 2,
                },
                KeyStep::Check {
                    rel: KeyRel::Eq,
                    a: 0,
                    k: 0x0800,
                },
                KeyStep::Load {
                    index: None,
                    offset: 23,
                    bytes: 1,
                },
                KeyStep::Check {
                    rel: KeyRel::Eq,
                    a: 1,
                    k: 6,
                },
                KeyStep::Load {
                    index: None,
                    offset: 14,
                    bytes: 1,
                },
                KeyStep::BinK {
                    op: BinOp::And,
                    a: 2,
                    k: 15,
                },
                KeyStep::BinK {
                    op: BinOp::Shl,
                    a: 3,
                    k: 2,
                },
                KeyStep::Load {
                    index: None,
                    offset: 26,
                    bytes: 4,
                },
                KeyStep::Key {
                    a: 5,
                    word: 0,
                    shift: 16,
                },
                KeyStep::Load {
                    index: Some(4),
                    offset: 14,
                    bytes: 2,
                },
                KeyStep::Key {
                    a: 6,
                    word: 0,
                    shift: 0,
                },
                KeyStep::Key {
                    a: 1,
                    word: 5,
                    shift: 60,
                },
            ],
        };
        let x = NativeExtractor::compile(&program).unwrap();
        let p = ipv4_tcp();
        let mut key = [7u64; KEY_WORDS];
        assert!(x.extract(&p, 60, &mut key));
        assert_eq!(key, [0x0a00_0001_0050, 0, 0, 0, 0, 6 << 60]);
        // The port lies beyond 34 bytes: checked on its own.
        assert!(!x.extract(&p[..35], 60, &mut key));
        assert!(!x.extract(&p[..33], 60, &mut key));
        let mut udp = p.clone();
        udp[23] = 17;
        assert!(!x.extract(&udp, 60, &mut key));
        assert!(!x.extract(&[], 0, &mut key));
    }

    #[test]
    fn division_by_zero_and_wide_shifts() {
        if !crate::supported() {
            return;
        }
        let program = KeyProgram {
            min_caplen: 0,
            steps: vec![
                KeyStep::WireLen,
                KeyStep::Const(40),
                KeyStep::Bin {
                    op: BinOp::Shl,
                    a: 0,
                    b: 1,
                },
                KeyStep::Key {
                    a: 2,
                    word: 1,
                    shift: 0,
                },
                KeyStep::Const(7),
                KeyStep::Bin {
                    op: BinOp::Div,
                    a: 3,
                    b: 0,
                },
                KeyStep::Key {
                    a: 4,
                    word: 0,
                    shift: 0,
                },
            ],
        };
        let x = NativeExtractor::compile(&program).unwrap();
        let mut key = [0u64; KEY_WORDS];
        assert!(x.extract(&[], 2, &mut key));
        assert_eq!(key[..2], [3, 0]);
        assert!(!x.extract(&[], 0, &mut key));
    }

    #[test]
    fn malformed_programs_are_refused() {
        let bad = [
            vec![KeyStep::Neg(0)],
            vec![
                KeyStep::Const(1),
                KeyStep::Key {
                    a: 0,
                    word: 6,
                    shift: 0,
                },
            ],
            vec![KeyStep::Load {
                index: None,
                offset: 0,
                bytes: 3,
            }],
        ];
        for steps in bad {
            let program = KeyProgram {
                min_caplen: 0,
                steps,
            };
            assert!(program.validate().is_err());
            assert!(matches!(
                NativeExtractor::compile(&program),
                Err(JitError::KeyProgram(_))
            ));
        }
    }
}
