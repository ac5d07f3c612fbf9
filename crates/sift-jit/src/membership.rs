//! Small sets as one vector compare: a `switch` of at most [`MAX_SET_KEYS`] keys that all lead
//! to the same block (`ip src A or ip src B or ...`, a host set of ten addresses) is a
//! membership test. The key is copied to the four 32-bit lanes of a vector, compared lane by
//! lane with the set's keys held four to a vector constant, the comparisons ORed, and "any lane
//! equal" is the answer: on x86-64 five instructions for four keys and two more per further
//! four, with no branch. A compare per key costs three (compare, set, or), and a tree of
//! compares costs mispredicted branches on traffic nobody can foresee.
//!
//! Like an equality, the test may read the key in the packet's byte order: the keys are then
//! swapped at compile time, and a key wider than the loaded field is left out (it can never
//! match), so [`crate::flow`] lets such switches keep native order.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, ConstantData, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use sift_bytecode::{Program, Width};

use crate::translate::{native_constant, width_mask};

/// Largest set tested with vectors (four vector compares).
pub(crate) const MAX_SET_KEYS: usize = 16;
/// Keys per vector (32-bit lanes of 128 bits).
const LANES: usize = 4;

/// The keys of table `table` and their one target, when the table is a small set.
pub(crate) fn as_set(p: &Program, table: u32) -> Option<(Vec<u32>, u32)> {
    let entries = &p.tables.get(table as usize)?.entries;
    let target = entries.first()?.1;
    (entries.len() >= 2
        && entries.len() <= MAX_SET_KEYS
        && entries.iter().all(|&(_, t)| t == target))
    .then(|| (entries.iter().map(|&(k, _)| k).collect(), target))
}

/// The set's keys as they compare with a key read in native byte order of `width` (`None`: in
/// the bytecode's big-endian order): swapped, without those that cannot fit the field.
pub(crate) fn keys_as_read(keys: &[u32], native: Option<Width>) -> Vec<u32> {
    match native {
        None => keys.to_vec(),
        Some(w) => keys
            .iter()
            .filter(|&&k| k <= width_mask(w))
            .map(|&k| native_constant(k, w))
            .collect(),
    }
}

/// Emits "`key` (`i32`) is one of `keys`" as an `i8` 0/1 value, without a branch.
pub(crate) fn emit_member(b: &mut FunctionBuilder<'_>, key: Value, keys: &[u32]) -> Value {
    let Some(&first) = keys.first() else {
        return b.ins().iconst(types::I8, 0);
    };
    if keys.len() == 1 {
        return b.ins().icmp_imm_u(IntCC::Equal, key, i64::from(first));
    }
    let lanes = b.ins().splat(types::I32X4, key);
    let mut any: Option<Value> = None;
    for chunk in keys.chunks(LANES) {
        // A short last chunk repeats the first key: a lane equal to it adds nothing.
        let bytes: Vec<u8> = (0..LANES)
            .flat_map(|n| chunk.get(n).copied().unwrap_or(first).to_le_bytes())
            .collect();
        let constant = b.func.dfg.constants.insert(ConstantData::from(bytes));
        let set = b.ins().vconst(types::I32X4, constant);
        let equal = b.ins().icmp(IntCC::Equal, lanes, set);
        any = Some(match any {
            None => equal,
            Some(a) => b.ins().bor(a, equal),
        });
    }
    let any = any.expect("at least one chunk");
    b.ins().vany_true(any)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_bytecode::{assemble, verify, Cache};

    use crate::JitFilter;

    fn set_program(keys: &[u32], width: &str) -> sift_bytecode::VerifiedProgram {
        let mut text = format!(
            "ld.{width} r0, [0]\n switch r0, T0, L1\nL1:\n ret 0\nL2:\n ret 7\n.table T0\n"
        );
        for k in keys {
            text.push_str(&format!(" {k} -> L2\n"));
        }
        verify(assemble(&text).unwrap()).unwrap()
    }

    #[test]
    fn small_single_target_tables_are_sets() {
        let p = set_program(&[1, 2, 3], "w");
        assert_eq!(as_set(p.program(), 0), Some((vec![1, 2, 3], 3)));
        let many: Vec<u32> = (0..17).map(|k| k * 1000).collect();
        assert_eq!(as_set(set_program(&many, "w").program(), 0), None);
    }

    #[test]
    fn native_keys_drop_what_cannot_fit() {
        assert_eq!(
            keys_as_read(&[0x0800, 0x1_0000], Some(Width::Half)),
            vec![native_constant(0x0800, Width::Half)]
        );
        assert_eq!(keys_as_read(&[5, 6], None), vec![5, 6]);
    }

    /// Every set size from 2 to 16, words and half-words (native order), every key, its
    /// neighbours and keys too wide for the field: the JIT agrees with the interpreter.
    #[test]
    fn members_and_non_members_agree_with_the_interpreter() {
        if !crate::supported() {
            return;
        }
        let mut cache = Cache::new();
        for n in 2..=MAX_SET_KEYS {
            for width in ["w", "h"] {
                let mut keys: Vec<u32> = (0..n as u32).map(|k| 0x0a00_0101 + k * 0x0101).collect();
                if width == "h" {
                    keys = keys.iter().map(|k| k & 0xffff).collect();
                    keys.push(0x1_0800);
                }
                let program = set_program(&keys, width);
                let branching = crate::Options {
                    branchless: false,
                    ..Default::default()
                };
                for options in [crate::Options::default(), branching] {
                    let jit = JitFilter::compile_with(&program, &options).unwrap();
                    for &k in &keys {
                        for probe in [k, k.wrapping_add(1), k.wrapping_sub(1), k & 0xffff] {
                            for packet in [probe.to_be_bytes(), probe.to_le_bytes()] {
                                for len in [0, 1, 2, 4] {
                                    let want = program.run(&mut cache, &packet[..len], 4);
                                    assert_eq!(
                                        jit.run(&packet[..len], 4),
                                        want,
                                        "{n} keys, ld.{width}, {packet:02x?}[..{len}]"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
