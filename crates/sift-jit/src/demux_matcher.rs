//! A demultiplexer shape as one native function: checks, key, hash and table probe.
//!
//! [`crate::key_extractor`] compiles a shape's checks and key packing (here with the fields
//! that are plain loads kept as they lie in the packet, without byte swaps, and adjacent ones
//! read with one load: [`crate::key_extractor::PacketOrder`]; the table's keys are converted
//! the same way); the table lookup that
//! follows is most of what is left of a match (hashing the key, walking the trie, probing the
//! leaf, and the Rust glue around a call). [`DemuxMatcher::compile`] emits all of it into one
//! function per shape, `match(packet, caplen, wire_len, header) -> slot`, over the fixed
//! layout of [`crate::demux_table`]: the table is not part of the code but handed over at each
//! call (its [`Header`]: root and hash seeds), so keys inserted or removed after the code was
//! generated are seen at once and never cost code generation. A second function matches a
//! batch of up to [`BATCH`] packets, writing each one's slot value rather than its address:
//! over a table of at most [`ONE_PASS_KEYS`] keys (in cache)
//! one packet after the other in a loop of generated code; over a larger one in three passes
//! over the whole batch (check, key, hash and walk every packet; read the first slot of every
//! probe, a short loop whose loads are all in flight together; then probe), so that the cache
//! misses of a large table's leaves overlap. The probe of a leaf is `demux_matcher_probe.rs`
//! (the first slot compared apart from the loop over the others, and why).
//!
//! Safety: on top of the extractor's guarantees (packet reads bounds-checked), the code reads
//! only the header it is given and what the header leads to: every node reference it follows
//! is one the table keeps valid (see `demux_table`), every child index is as many hash bits
//! as the branch at its level has children (`demux_table::level_bits`), every slot index is
//! masked by its leaf's mask, a probe visits at most as many slots as the leaf has, and the
//! walk stops after [`MAX_LEVEL`] levels. It writes only its own stack and, in the batch
//! function, `out[..count]`. The slot it returns lies in the table borrowed for the call, so
//! [`DemuxMatcher::lookup`] can hand out a reference to it.

#![allow(unsafe_code)]

use std::fmt;
use std::sync::Arc;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::Value as ClifValue;
use cranelift_codegen::ir::{
    types, Block, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind,
};
use cranelift_frontend::FunctionBuilder;

use crate::demux_table::{level_bits, level_shift, Header, Slot, Table, Value, BRANCH, MAX_LEVEL};
use crate::key_extractor::{emit_key, KeyOrder, KeyProgram, KeyStep};
use crate::native::{CodeMemory, Functions};
use crate::{JitError, PacketRef};
use probe::{emit_probe, slot_address, table_flags, Answer};

#[path = "demux_matcher_probe.rs"]
mod probe;

/// Packets per call of the batch function.
pub const BATCH: usize = 32;

/// `(packet, caplen, wire_len, header) -> slot address or 0`.
type MatchFn = unsafe extern "C" fn(*const u8, u64, u32, *const Header) -> u64;
/// `(packets, count, header, out) -> (a value to ignore)`; `out[i]`: the value word or 0.
type BatchFn = unsafe extern "C" fn(*const PacketRef<'static>, u64, *const Header, *mut u64) -> u64;

/// A shape's key program and table probe compiled for tables of `W`-word keys. Immutable and
/// `Send + Sync`; frees its code when the last clone is dropped. Cloning is cheap (the code is
/// shared), so that a caller can keep the function pointers where its matching loop finds
/// them with the fewest loads.
#[derive(Clone)]
pub struct DemuxMatcher<const W: usize> {
    single: MatchFn,
    batch: BatchFn,
    /// Frees the code when the last clone is dropped.
    _memory: Arc<CodeMemory>,
}

impl<const W: usize> fmt::Debug for DemuxMatcher<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DemuxMatcher")
            .field("key_words", &W)
            .field("address", &format_args!("{:#x}", self.single as usize))
            .finish_non_exhaustive()
    }
}

impl<const W: usize> DemuxMatcher<W> {
    /// Compiles `program` followed by a probe of a table of `W`-word keys;
    /// [`JitError::Unsupported`] where the host cannot run generated code,
    /// [`JitError::KeyProgram`] for a malformed program, [`JitError::KeyWidth`] for one that
    /// writes a key word `>= W`.
    pub fn compile(program: &KeyProgram) -> Result<DemuxMatcher<W>, JitError> {
        DemuxMatcher::compile_listing(program, ONE_PASS_KEYS, None)
    }

    /// [`DemuxMatcher::compile`] with another bound than [`ONE_PASS_KEYS`] on the tables whose
    /// batches are matched in one pass (0: every batch in passes; for tests of both ways).
    pub fn compile_one_pass_up_to(
        program: &KeyProgram,
        one_pass_keys: u64,
    ) -> Result<DemuxMatcher<W>, JitError> {
        DemuxMatcher::compile_listing(program, one_pass_keys, None)
    }

    /// Compiles `program` and returns the Cranelift IR and the machine code of both functions
    /// (for inspecting what the code generator does).
    pub fn listing(program: &KeyProgram) -> Result<String, JitError> {
        let mut text = String::new();
        DemuxMatcher::<W>::compile_listing(program, ONE_PASS_KEYS, Some(&mut text))?;
        Ok(text)
    }

    fn compile_listing(
        program: &KeyProgram,
        one_pass_keys: u64,
        mut listing: Option<&mut String>,
    ) -> Result<DemuxMatcher<W>, JitError> {
        program.validate()?;
        let widest = program
            .steps
            .iter()
            .filter_map(|s| match s {
                KeyStep::Key { word, .. } => Some(usize::from(*word)),
                _ => None,
            })
            .max();
        let too_wide = widest.is_some_and(|w| w >= W);
        if too_wide || W == 0 || W > crate::demux_table::MAX_KEY_WORDS {
            return Err(JitError::KeyWidth {
                word: widest.unwrap_or(0),
                table_words: W,
            });
        }
        let mut functions = Functions::new()?;
        functions.add(
            "demux_match",
            &[types::I64, types::I64, types::I32, types::I64],
            &[types::I64],
            |b| emit_single::<W>(b, program),
            listing.as_deref_mut(),
        )?;
        functions.add(
            "demux_batch",
            &[types::I64; 4],
            &[types::I64],
            |b| emit_batch::<W>(b, program, one_pass_keys),
            listing,
        )?;
        let (addresses, memory) = functions.finish()?;
        let (single, batch) = (addresses[0], addresses[1]);
        // SAFETY: Cranelift just compiled and mapped these functions with exactly these
        // signatures in the host's default (C) calling convention; they stay mapped until
        // `Drop` frees the module.
        let (single, batch) = unsafe {
            (
                std::mem::transmute::<*const u8, MatchFn>(single),
                std::mem::transmute::<*const u8, BatchFn>(batch),
            )
        };
        Ok(DemuxMatcher {
            single,
            batch,
            _memory: Arc::new(memory),
        })
    }

    /// Runs the checks on a packet (`packet`: the captured bytes) and, if they hold, looks its
    /// key up in `table`: the slot holding the key, `None` when a check fails or the key is
    /// absent. The same answer as extracting the key, converting it with the program's
    /// [`KeyProgram::packet_order`] and calling [`Table::slot`] (so the table's keys must be
    /// converted that way too).
    #[inline]
    pub fn lookup<'t>(
        &self,
        table: &'t Table<W>,
        packet: &[u8],
        wire_len: u32,
    ) -> Option<&'t Slot<W>> {
        // SAFETY: the code reads only `packet[..packet.len()]` (bounds-checked loads) and the
        // table's header and nodes (see the module docs); `table` is borrowed for `'t`, so the
        // slot whose address it returns lives as long, unchanged. `self` keeps the code mapped.
        unsafe {
            let slot = (self.single)(
                packet.as_ptr(),
                packet.len() as u64,
                wire_len,
                table.header(),
            );
            (slot as *const Slot<W>).as_ref()
        }
    }

    /// [`DemuxMatcher::lookup`] of a packet given by its descriptor.
    #[inline]
    pub fn lookup_ref<'t>(
        &self,
        table: &'t Table<W>,
        packet: &PacketRef<'_>,
    ) -> Option<&'t Slot<W>> {
        self.lookup(table, packet.data(), packet.wire_len())
    }

    /// The value of the slot [`DemuxMatcher::lookup`] finds for each of `packets` (at most
    /// [`BATCH`]; the rest are left out) into `out[i]`, with the probes' cache misses
    /// overlapped. Values rather than slots, so that the caller's use of each answer is not
    /// another load from the table (where a slot's key is needed, [`DemuxMatcher::lookup_ref`]
    /// finds the slot). Returns how many packets it matched (the shorter of the two lengths,
    /// at most [`BATCH`]).
    pub fn lookup_batch(
        &self,
        table: &Table<W>,
        packets: &[PacketRef<'_>],
        out: &mut [Option<Value>],
    ) -> usize {
        let n = packets.len().min(out.len()).min(BATCH);
        // SAFETY: the code reads `packets[..n]` (each a valid `PacketRef`: pointer and length
        // of a live borrowed slice) and, through each, only that packet's captured bytes, plus
        // the table (as in `lookup`); it writes `out[..n]`, each a slot's value word or 0,
        // which is the layout of `Option<Value>` (`Value` is a `NonZeroU64`: 0 is `None`).
        let ignored = unsafe {
            (self.batch)(
                packets.as_ptr().cast(),
                n as u64,
                table.header(),
                out.as_mut_ptr().cast(),
            )
        };
        std::hint::black_box(ignored);
        n
    }
}

/// The packet a descriptor stands for: what a caller that holds a batch as descriptors (the
/// demultiplexer's batch, on its paths that do not go through native code) reads back.
// Beside the native matchers that read descriptors, rather than with the type in the crate
// root, to keep the demultiplexer's additions in its own modules.
impl<'a> PacketRef<'a> {
    /// The captured bytes.
    #[inline]
    pub fn data(&self) -> &'a [u8] {
        // SAFETY: `PacketRef::new`, the only constructor, took `data` and `caplen` from a
        // slice borrowed for `'a`.
        unsafe { std::slice::from_raw_parts(self.data, self.caplen) }
    }

    /// The length on the wire.
    #[inline]
    pub fn wire_len(&self) -> u32 {
        self.wire_len
    }
}

const SEED0: i32 = std::mem::offset_of!(Header, seeds) as i32;
const SEED1: i32 = SEED0 + 8;
const KEYS: i32 = std::mem::offset_of!(Header, keys) as i32;
const REF_META: i32 = 8;
const REF_BYTES: i64 = 16;

/// `h = fold((a ^ h) ^ s0, b ^ s1)` over the key's word pairs (see `demux_table`).
fn emit_hash(b: &mut FunctionBuilder<'_>, words: &[ClifValue], seeds: [ClifValue; 2]) -> ClifValue {
    let mut h = None;
    for pair in words.chunks(2) {
        let mut a = b.ins().bxor(pair[0], seeds[0]);
        if let Some(h) = h {
            a = b.ins().bxor(a, h);
        }
        let second = match pair.get(1) {
            Some(&w) => b.ins().bxor(w, seeds[1]),
            None => seeds[1],
        };
        let lo = b.ins().imul(a, second);
        let hi = b.ins().umulhi(a, second);
        h = Some(b.ins().bxor(lo, hi));
    }
    h.expect("a key has at least one word")
}

/// Walks the trie from the node `(address, meta)` by the hash `h`; continues in a new block
/// with the leaf's `(address, mask)` and the probe's first slot (`h & mask`) as its
/// parameters (returned), or jumps to `miss`. The first slot is computed on each path into
/// the leaf block rather than in it: the leaf block does not need `h` then, which Cranelift
/// would compute again there (it places a value at each use not dominated by an earlier one).
fn emit_walk(
    b: &mut FunctionBuilder<'_>,
    h: ClifValue,
    mut node: [ClifValue; 2],
    miss: Block,
) -> ([ClifValue; 2], ClifValue) {
    let leaf = b.create_block();
    let address = b.append_block_param(leaf, types::I64);
    let mask = b.append_block_param(leaf, types::I64);
    let start = b.append_block_param(leaf, types::I64);
    for level in 0..=MAX_LEVEL {
        let is_branch = b.ins().icmp_imm_s(IntCC::Equal, node[1], BRANCH as i64);
        let first = b.ins().band(h, node[1]);
        let args = [node[0].into(), node[1].into(), first.into()];
        if level == MAX_LEVEL {
            // Never a branch this deep (the table splits no further): defensively a miss.
            b.ins().brif(is_branch, miss, &[], leaf, &args);
            break;
        }
        let down = b.create_block();
        b.ins().brif(is_branch, down, &[], leaf, &args);
        b.switch_to_block(down);
        node = emit_child_ref(b, node[0], h, level);
    }
    b.switch_to_block(leaf);
    ([address, mask], start)
}

/// Loads the header's hash seeds and root reference.
fn emit_header(b: &mut FunctionBuilder<'_>, header: ClifValue) -> ([ClifValue; 2], [ClifValue; 2]) {
    let seeds = [
        b.ins().load(types::I64, table_flags(), header, SEED0),
        b.ins().load(types::I64, table_flags(), header, SEED1),
    ];
    let root = [
        b.ins().load(types::I64, table_flags(), header, 0),
        b.ins().load(types::I64, table_flags(), header, REF_META),
    ];
    (seeds, root)
}

fn emit_single<const W: usize>(b: &mut FunctionBuilder<'_>, program: &KeyProgram) {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let (packet, header) = ([params[0], params[1], params[2]], params[3]);
    let done = b.create_block();
    let result = b.append_block_param(done, types::I64);
    let miss = b.create_block();
    let words = emit_key(b, program, packet, miss, KeyOrder::Packet);
    let (seeds, root) = emit_header(b, header);
    let h = emit_hash(b, &words[..W], seeds);
    let (leaf, start) = emit_walk(b, h, root, miss);
    emit_probe::<W>(b, &words[..W], leaf, start, done, Answer::Slot);
    b.switch_to_block(miss);
    let zero = b.ins().iconst(types::I64, 0);
    b.ins().jump(done, &[zero.into()]);
    b.switch_to_block(done);
    b.ins().return_(&[result]);
    b.seal_all_blocks();
}

/// Tables with at most this many keys are matched in one pass per batch (each packet checked,
/// hashed, walked and probed before the next): their nodes and slots stay in cache (a few
/// hundred KB), so there are few misses to overlap and the state the passes keep between them
/// costs more than it saves (measured: one pass faster up to 10^4 keys, even at 3 * 10^4, the
/// passes 5% faster at 10^5).
pub const ONE_PASS_KEYS: u64 = 16_384;

/// Per packet of a batch, on the stack: its leaf (address, 0 for a packet with nothing to
/// probe, and mask), the key's hash, the key.
const fn state_words<const W: usize>() -> usize {
    3 + W
}

const STATE_ADDRESS: i32 = 0;
const STATE_MASK: i32 = 8;
const STATE_HASH: i32 = 16;
const STATE_KEY: i32 = 24;

/// The batch function. Small tables: one pass. Larger ones, in three passes over the whole
/// batch: check, key, hash and walk every packet to its leaf; then read every probe's first
/// slot (a short loop of independent loads, whose cache misses overlap instead of queueing);
/// then probe. (Walking one trie level per pass as well, so that the misses on branch nodes
/// overlap too, was measured slower up to 10^5 keys and no faster at 10^6: the upper levels
/// are in cache, and each pass costs a store and a load of every packet's state.)
fn emit_batch<const W: usize>(
    b: &mut FunctionBuilder<'_>,
    program: &KeyProgram,
    one_pass_keys: u64,
) {
    let stride = (8 * state_words::<W>()) as i64;
    let state = b.create_sized_stack_slot(StackSlotData::new(
        StackSlotKind::ExplicitSlot,
        (BATCH as i64 * stride) as u32,
        3,
    ));
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let (refs, count, header, out) = (params[0], params[1], params[2], params[3]);
    let batch = b.ins().iconst(types::I64, BATCH as i64);
    let count = b.ins().umin(count, batch);
    let keys = b.ins().load(types::I64, table_flags(), header, KEYS);
    let stack = MemFlagsData::trusted();
    let out_flags = MemFlagsData::trusted();
    let store_out = |b: &mut FunctionBuilder<'_>, i: ClifValue, v: ClifValue| {
        let at = b.ins().imul_imm_u(i, 8);
        let at = b.ins().iadd(out, at);
        b.ins().store(out_flags, v, at, 0);
    };
    let (one_pass, passes, finish) = (b.create_block(), b.create_block(), b.create_block());
    let small = b
        .ins()
        .icmp_imm_u(IntCC::UnsignedLessThanOrEqual, keys, one_pass_keys as i64);
    b.ins().brif(small, one_pass, &[], passes, &[]);

    // One pass: the single function's body per packet. The header's seeds and root are read
    // per packet, as in the single function, rather than once before the loop: four values
    // live through the loop left too few registers, and the allocator spilled them and others
    // (reloading each per packet anyway; at 1,000 keys the batch measured 5.4 -> 4.5 ns).
    b.switch_to_block(one_pass);
    counted_loop(b, count, |b, i| {
        let packet = packet_at(b, refs, i);
        let (done, miss) = (b.create_block(), b.create_block());
        let result = b.append_block_param(done, types::I64);
        let words = emit_key(b, program, packet, miss, KeyOrder::Packet);
        let (seeds, root) = emit_header(b, header);
        let h = emit_hash(b, &words[..W], seeds);
        let (leaf, start) = emit_walk(b, h, root, miss);
        emit_probe::<W>(b, &words[..W], leaf, start, done, Answer::Value);
        b.switch_to_block(miss);
        let zero = b.ins().iconst(types::I64, 0);
        b.ins().jump(done, &[zero.into()]);
        b.switch_to_block(done);
        store_out(b, i, result);
    });
    b.ins().jump(finish, &[]);

    // Pass 1: check, key, hash and walk every packet down to its leaf (the walk's nodes are
    // few and mostly in cache; its leaves are not). The header is read per packet too.
    b.switch_to_block(passes);
    let base = b.ins().stack_addr(types::I64, state, 0);
    let state_at = |b: &mut FunctionBuilder<'_>, i: ClifValue| {
        let at = b.ins().imul_imm_u(i, stride);
        b.ins().iadd(base, at)
    };
    counted_loop(b, count, |b, i| {
        let st = state_at(b, i);
        let packet = packet_at(b, refs, i);
        let (next, no_probe) = (b.create_block(), b.create_block());
        let words = emit_key(b, program, packet, no_probe, KeyOrder::Packet);
        let (seeds, root) = emit_header(b, header);
        let h = emit_hash(b, &words[..W], seeds);
        let ([address, mask], _) = emit_walk(b, h, root, no_probe);
        b.ins().store(stack, address, st, STATE_ADDRESS);
        b.ins().store(stack, mask, st, STATE_MASK);
        b.ins().store(stack, h, st, STATE_HASH);
        for (k, &w) in words[..W].iter().enumerate() {
            b.ins().store(stack, w, st, STATE_KEY + 8 * k as i32);
        }
        b.ins().jump(next, &[]);
        b.switch_to_block(no_probe);
        let zero = b.ins().iconst(types::I64, 0);
        b.ins().store(stack, zero, st, STATE_ADDRESS);
        b.ins().jump(next, &[]);
        b.switch_to_block(next);
    });
    let touch = b.create_block();
    b.ins().jump(touch, &[]);

    // Read the first slot of every probe (independent loads, all in flight at once); the word
    // read is stored in `out`, which the next pass overwrites, so that the load stays.
    b.switch_to_block(touch);
    let leaf_of = |b: &mut FunctionBuilder<'_>, st: ClifValue| {
        let address = b.ins().load(types::I64, stack, st, STATE_ADDRESS);
        let mask = b.ins().load(types::I64, stack, st, STATE_MASK);
        let probes = b.ins().icmp_imm_u(IntCC::NotEqual, address, 0);
        (address, mask, probes)
    };
    counted_loop(b, count, |b, i| {
        let st = state_at(b, i);
        let (address, mask, probes) = leaf_of(b, st);
        let (read, join) = (b.create_block(), b.create_block());
        b.ins().brif(probes, read, &[], join, &[]);
        b.switch_to_block(read);
        let h = b.ins().load(types::I64, stack, st, STATE_HASH);
        let start = b.ins().band(h, mask);
        let slot = slot_address::<W>(b, address, start);
        let word = b.ins().load(types::I64, table_flags(), slot, 0);
        store_out(b, i, word);
        b.ins().jump(join, &[]);
        b.switch_to_block(join);
    });

    // Probe, now in cache, and write each packet's slot (or 0).
    counted_loop(b, count, |b, i| {
        let st = state_at(b, i);
        let (address, mask, probes) = leaf_of(b, st);
        let (has_leaf, done) = (b.create_block(), b.create_block());
        let result = b.append_block_param(done, types::I64);
        let zero = b.ins().iconst(types::I64, 0);
        b.ins().brif(probes, has_leaf, &[], done, &[zero.into()]);
        b.switch_to_block(has_leaf);
        let h = b.ins().load(types::I64, stack, st, STATE_HASH);
        let start = b.ins().band(h, mask);
        let key: Vec<ClifValue> = (0..W)
            .map(|k| {
                b.ins()
                    .load(types::I64, stack, st, STATE_KEY + 8 * k as i32)
            })
            .collect();
        emit_probe::<W>(b, &key, [address, mask], start, done, Answer::Value);
        b.switch_to_block(done);
        store_out(b, i, result);
    });
    b.ins().jump(finish, &[]);

    b.switch_to_block(finish);
    let zero = b.ins().iconst(types::I64, 0);
    b.ins().return_(&[zero]);
    b.seal_all_blocks();
}

/// The reference to the child of the branch at `address` that the hash `h` selects at
/// `level`.
fn emit_child_ref(
    b: &mut FunctionBuilder<'_>,
    address: ClifValue,
    h: ClifValue,
    level: u32,
) -> [ClifValue; 2] {
    let shift = i64::from(level_shift(level));
    let bits = b.ins().ushr_imm_u(h, shift);
    let index = b.ins().band_imm_u(bits, (1 << level_bits(level)) - 1);
    let offset = b.ins().imul_imm_u(index, REF_BYTES);
    let at = b.ins().iadd(address, offset);
    [
        b.ins().load(types::I64, table_flags(), at, 0),
        b.ins().load(types::I64, table_flags(), at, REF_META),
    ]
}

/// `[data, caplen, wire_len]` of the `i`-th packet descriptor at `refs`.
fn packet_at(b: &mut FunctionBuilder<'_>, refs: ClifValue, i: ClifValue) -> [ClifValue; 3] {
    let offset = b
        .ins()
        .imul_imm_u(i, std::mem::size_of::<PacketRef>() as i64);
    let desc = b.ins().iadd(refs, offset);
    let flags = MemFlagsData::trusted().with_readonly();
    [
        b.ins().load(types::I64, flags, desc, 0),
        b.ins().load(types::I64, flags, desc, PACKET_REF_CAPLEN),
        b.ins().load(types::I32, flags, desc, PACKET_REF_WIRE_LEN),
    ]
}

/// Emits `for i in 0..count { body(i) }` from the current block; continues after the loop.
/// `body` may leave the builder in another block than it found it in.
fn counted_loop(
    b: &mut FunctionBuilder<'_>,
    count: ClifValue,
    body: impl FnOnce(&mut FunctionBuilder<'_>, ClifValue),
) {
    let head = b.create_block();
    let i = b.append_block_param(head, types::I64);
    let zero = b.ins().iconst(types::I64, 0);
    b.ins().jump(head, &[zero.into()]);
    b.switch_to_block(head);
    let (body_block, exit) = (b.create_block(), b.create_block());
    let more = b.ins().icmp(IntCC::UnsignedLessThan, i, count);
    b.ins().brif(more, body_block, &[], exit, &[]);
    b.switch_to_block(body_block);
    body(b, i);
    let i_next = b.ins().iadd_imm_u(i, 1);
    b.ins().jump(head, &[i_next.into()]);
    b.switch_to_block(exit);
}

/// The test fixtures of the demultiplexer's native code (`demux_fixtures.rs`), here rather than
/// in the crate root so that they stay with the code they test.
#[doc(hidden)]
#[path = "demux_fixtures.rs"]
pub mod fixtures;

const PACKET_REF_CAPLEN: i32 = std::mem::offset_of!(PacketRef, caplen) as i32;
const PACKET_REF_WIRE_LEN: i32 = std::mem::offset_of!(PacketRef, wire_len) as i32;
const _: () = assert!(std::mem::offset_of!(PacketRef, data) == 0);

#[cfg(test)]
#[path = "demux_matcher_tests.rs"]
mod tests;
