//! Lookup tables as ranges: a `switch` whose keys come in runs of consecutive values with one
//! target (a port list written out, `port 1000 or port 1001 or ... or port 10999`) is tested
//! run by run, each run with one subtraction and one unsigned compare, instead of key by key.
//! Cranelift's `Switch` would make each long run a jump table of one entry per key, all to the
//! same block (10,000 entries for that port list, and as many edges for the register allocator
//! to walk), and a hash ([`crate::table`]) would cost two multiplications and two loads where
//! one compare does.
//!
//! Only tables whose keys are compared in the bytecode's (big-endian) order come here: a range
//! of swapped keys is not a range.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

/// A run of keys whose target is an index into the bytecode's code.
pub(crate) type Run = sift_ir::runs::Run<u32>;

/// The table's `(key, target)` entries as runs ([`sift_ir::runs`]), when that is at most half
/// as many runs as keys (else `None`: the keys are scattered or their targets alternate, and
/// the table's other lowerings do better).
pub(crate) fn as_runs(entries: &[(u32, u32)]) -> Option<Vec<Run>> {
    let runs = sift_ir::runs::runs(entries.iter().copied());
    (runs.len() * 2 <= entries.len()).then_some(runs)
}

/// Emits "`key` (`i32`) is in `run`" as an `i8` 0/1 value, without a branch.
pub(crate) fn emit_in_run(b: &mut FunctionBuilder<'_>, key: Value, run: Run) -> Value {
    if run.lo == run.hi {
        return b.ins().icmp_imm_u(IntCC::Equal, key, i64::from(run.lo));
    }
    // `key - lo`, wrapping: keys below the run become large.
    let offset = b.ins().iadd_imm_u(key, i64::from(run.lo.wrapping_neg()));
    b.ins().icmp_imm_u(
        IntCC::UnsignedLessThanOrEqual,
        offset,
        i64::from(run.hi - run.lo),
    )
}

/// Emits a binary search over `runs` (in key order) that jumps to `targets[i]` for a key in
/// `runs[i]` and to `default` for any other key: one range test per run for up to
/// [`LINEAR_RUNS`] runs, one compare per level above.
pub(crate) fn emit_search(
    b: &mut FunctionBuilder<'_>,
    key: Value,
    runs: &[Run],
    targets: &[Block],
    default: Block,
) {
    if runs.len() > LINEAR_RUNS {
        let half = runs.len() / 2;
        let (low, high) = (b.create_block(), b.create_block());
        let below = b
            .ins()
            .icmp_imm_u(IntCC::UnsignedLessThan, key, i64::from(runs[half].lo));
        b.ins().brif(below, low, &[], high, &[]);
        b.switch_to_block(low);
        emit_search(b, key, &runs[..half], &targets[..half], default);
        b.switch_to_block(high);
        emit_search(b, key, &runs[half..], &targets[half..], default);
        return;
    }
    for (i, (&run, &target)) in runs.iter().zip(targets).enumerate() {
        let inside = emit_in_run(b, key, run);
        if i + 1 == runs.len() {
            b.ins().brif(inside, target, &[], default, &[]);
        } else {
            let next = b.create_block();
            b.ins().brif(inside, target, &[], next, &[]);
            b.switch_to_block(next);
        }
    }
}

/// Most runs tested one after the other; more are bisected first.
const LINEAR_RUNS: usize = 3;

#[cfg(test)]
mod tests {
    use super::*;
    use sift_bytecode::{assemble, verify, Cache};

    use crate::JitFilter;

    #[test]
    fn runs_pay_when_at_most_half_as_many_as_keys() {
        assert_eq!(
            as_runs(&[(1, 1), (2, 1), (3, 2), (4, 2)]).map(|r| r.len()),
            Some(2)
        );
        // Alternating targets and scattered keys do not pay.
        assert_eq!(as_runs(&[(1, 1), (2, 2), (3, 1), (4, 2)]), None);
        assert_eq!(as_runs(&[(1, 1), (3, 1), (5, 1)]), None);
    }

    /// A program that switches on the word at offset 0 over `entries` (`key -> target`, the
    /// targets returning 1, 2, ...; the default 0).
    fn switch_program(entries: &[(u32, u32)]) -> sift_bytecode::VerifiedProgram {
        let targets = entries.iter().map(|e| e.1).max().unwrap_or(0);
        let mut text = String::from("ld.w r0, [0]\n switch r0, T0, L0\nL0:\n ret 0\n");
        for t in 1..=targets {
            text.push_str(&format!("L{t}:\n ret {t}\n"));
        }
        text.push_str(".table T0\n");
        for (k, t) in entries {
            text.push_str(&format!(" {k} -> L{t}\n"));
        }
        verify(assemble(&text).unwrap()).unwrap()
    }

    /// Tables of one to many runs (one and several targets, runs at both ends of the key space,
    /// large enough to be bisected), branch-free and branching: the JIT agrees with the
    /// interpreter on every run's ends, their neighbours and the keys between runs.
    #[test]
    fn range_tests_agree_with_the_interpreter() {
        if !crate::supported() {
            return;
        }
        let span = |lo: u32, hi: u32, t: u32| (lo..=hi).map(move |k| (k, t));
        let tables: Vec<Vec<(u32, u32)>> = vec![
            span(1000, 10999, 1).collect(),
            span(0, 3, 1)
                .chain(span(u32::MAX - 3, u32::MAX, 2))
                .collect(),
            span(80, 81, 1).chain(span(443, 444, 2)).collect(),
            (0..40u32)
                .flat_map(|r| span(r * 100, r * 100 + 7, 1 + r % 3))
                .collect(),
        ];
        let branching = crate::Options {
            branchless: false,
            ..Default::default()
        };
        let mut cache = Cache::new();
        for entries in &tables {
            let program = switch_program(entries);
            let runs = as_runs(entries).expect("runs pay");
            let mut probes: Vec<u32> = Vec::new();
            for run in &runs {
                for k in [run.lo, run.hi] {
                    probes.extend([k, k.wrapping_add(1), k.wrapping_sub(1)]);
                }
            }
            for options in [crate::Options::default(), branching.clone()] {
                let jit = JitFilter::compile_with(&program, &options).unwrap();
                for &k in &probes {
                    let packet = k.to_be_bytes();
                    let want = program.run(&mut cache, &packet, 4);
                    assert_eq!(jit.run(&packet, 4), want, "{} runs, key {k}", runs.len());
                }
            }
        }
    }
}
