//! The native probe of a table leaf ([`crate::demux_table`]: open addressing, linear
//! probing, at most a quarter full): one slot per step, the first step apart from the loop.
//!
//! About 12% of the keys of a quarter-full array are not in their first slot, and a probe that
//! branches on each slot's comparison mispredicts for them (about 0.8 ns per local match:
//! leaves a sixteenth full, which leave nearly every key in its first slot, were that much
//! faster). The first slot is compared by its own code and the loop runs only for keys past
//! it, so the loop's comparison is a branch of its own (which, presumably, predicts a match in
//! a key's second slot rather than sharing the first slot's history). Measured against one
//! loop for every slot (`match_loop N compare`, `BENCHMARKS.md`, demultiplexer, session 13):
//! 1-8% faster from 1,000 to 10^6 keys, 0-3% below (about the noise between runs, but in the
//! same direction in nearly every alternation of the two).
//!
//! Measured and not kept, all slower: the first two slots compared without branches, their
//! outcomes combined with selects (local +0.3 to +1.2 ns, batch +0.7 to +1.4 ns from 10 to 10^5
//! keys), also after a branch leaving all-zero keys to the loop so that a slot whose words
//! match needs no value check (local -0.7 to +0.9 ns, batch +0.1 to +1.3 ns). A select makes
//! the answer wait for the loads and comparisons that a predicted branch lets the processor
//! run past, and its instructions go into a batch loop Cranelift already spills in. Two-choice
//! (cuckoo) slots would take the same selects over two slots in different cache lines.

use cranelift_codegen::ir::Value as ClifValue;
use cranelift_codegen::ir::{types, Block, InstBuilder, MemFlagsData};
use cranelift_frontend::FunctionBuilder;

use crate::demux_table::Slot;

/// Table memory: never trapping (every address is in the table), never written during a call.
pub(super) fn table_flags() -> MemFlagsData {
    MemFlagsData::trusted().with_readonly()
}

/// Address of slot `index` of the leaf at `address`.
pub(super) fn slot_address<const W: usize>(
    b: &mut FunctionBuilder<'_>,
    address: ClifValue,
    index: ClifValue,
) -> ClifValue {
    let offset = b
        .ins()
        .imul_imm_u(index, std::mem::size_of::<Slot<W>>() as i64);
    b.ins().iadd(address, offset)
}

/// What a probe answers when it finds the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// The slot's address (the single lookup: the caller may need the slot's key).
    Slot,
    /// The slot's value word (the batch: the caller reads no slot, so a delivery needs no
    /// load of the table after the call).
    Value,
}

/// Linear probe of the leaf `(address, mask)` for `key` from slot `start`: jumps to `done`
/// with the slot's address or value (`answer`), or 0 when a vacant slot (or a whole round)
/// ends the probe. Every index is masked by `mask`, and the probe visits at most as many
/// slots as the leaf has.
pub(super) fn emit_probe<const W: usize>(
    b: &mut FunctionBuilder<'_>,
    key: &[ClifValue],
    [address, mask]: [ClifValue; 2],
    start: ClifValue,
    done: Block,
    answer: Answer,
) {
    let slots = b.ins().iadd_imm_u(mask, 1);
    let (first, probe) = (b.create_block(), b.create_block());
    for block in [first, probe] {
        b.append_block_param(block, types::I64);
        b.append_block_param(block, types::I64);
    }
    b.ins().jump(first, &[start.into(), slots.into()]);
    // The same step twice: the first slot, then the loop over the others.
    for block in [first, probe] {
        let [i, left] = [b.block_params(block)[0], b.block_params(block)[1]];
        emit_probe_step::<W>(
            b,
            key,
            [address, mask],
            block,
            [i, left],
            probe,
            done,
            answer,
        );
    }
}

/// The OR of the differences between `key` and the key words of the slot at `slot` (0: the
/// same words).
fn key_difference<const W: usize>(
    b: &mut FunctionBuilder<'_>,
    key: &[ClifValue],
    slot: ClifValue,
) -> ClifValue {
    let mut diff = None;
    for (k, &word) in key.iter().enumerate() {
        let stored = b
            .ins()
            .load(types::I64, table_flags(), slot, (8 * k) as i32);
        let d = b.ins().bxor(stored, word);
        diff = Some(match diff {
            None => d,
            Some(acc) => b.ins().bor(acc, d),
        });
    }
    diff.expect("key words")
}

/// One step of the probe, in `probe` (parameters: slot index `i`, slots `left` to visit, at
/// least 1): jumps to `done` with the answer, or to `next_slot` with the next slot's index and
/// `left - 1`.
///
/// The key is compared first and the value (0: vacant) read only then, on the branch each
/// outcome predicts:
/// a key that matches is found unless the slot is vacant (an all-zero key matches a vacant
/// slot's zeros), and a key that does not ends the probe at a vacant slot or goes on.
#[allow(clippy::too_many_arguments)]
fn emit_probe_step<const W: usize>(
    b: &mut FunctionBuilder<'_>,
    key: &[ClifValue],
    [address, mask]: [ClifValue; 2],
    probe: Block,
    [i, left]: [ClifValue; 2],
    next_slot: Block,
    done: Block,
    answer: Answer,
) {
    b.switch_to_block(probe);
    let slot = slot_address::<W>(b, address, i);
    let diff = key_difference::<W>(b, key, slot);
    let (same, other) = (b.create_block(), b.create_block());
    b.ins().brif(diff, other, &[], same, &[]);
    let value_of = |b: &mut FunctionBuilder<'_>| {
        b.ins()
            .load(types::I64, table_flags(), slot, (8 * W) as i32)
    };
    let zero = |b: &mut FunctionBuilder<'_>| b.ins().iconst(types::I64, 0);

    b.switch_to_block(same);
    let value = value_of(b);
    let found = match answer {
        Answer::Slot => {
            let none = zero(b);
            b.ins().select(value, slot, none)
        }
        // A vacant slot's value is 0, the answer for "absent".
        Answer::Value => value,
    };
    b.ins().jump(done, &[found.into()]);

    b.switch_to_block(other);
    let value = value_of(b);
    let next = b.create_block();
    let none = zero(b);
    b.ins().brif(value, next, &[], done, &[none.into()]);
    b.switch_to_block(next);
    let i_next = b.ins().iadd_imm_u(i, 1);
    let i_next = b.ins().band(i_next, mask);
    let left_next = b.ins().iadd_imm_s(left, -1);
    b.ins().brif(
        left_next,
        next_slot,
        &[i_next.into(), left_next.into()],
        done,
        &[none.into()],
    );
}
