//! Switch lowering for the if-converted code: a small set (keys with one target) becomes one
//! vector membership test ([`crate::membership`]), a `switch` of a few keys one equality per
//! key, one whose keys form a few runs of consecutive keys one range test per run
//! ([`crate::ranges`]), a larger one a branch-free lookup in a collision-free hash
//! ([`crate::table`]); each run or distinct target gets one edge condition, the default the
//! rest. Two `switch`es with one table on paths that never meet share one lookup
//! ([`super::shared_tests`]).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value};
use sift_bytecode::Reg;

use super::shared_tests::Tests;
use super::{Emitter, Pred, State, SMALL_SWITCH};
use crate::membership::{as_set, emit_member, keys_as_read};
use crate::outcome::Term;
use crate::ranges::{as_runs, emit_in_run, Run};
use crate::table::{emit_lookup, PerfectHash};

impl Emitter<'_, '_, '_> {
    /// A `switch`: one equality per key for a few keys, one range test per run for a few runs,
    /// else a hashed lookup; each key, run or distinct target gets one condition, and the
    /// default the rest.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn switch(
        &mut self,
        i: usize,
        reach: Pred,
        state: &State,
        rare: bool,
        key: Reg,
        table: u32,
        default: u32,
    ) {
        let (cases, any) = match self.shared.remove(&i) {
            // An earlier `switch` on a path that never meets this one made the lookup.
            Some(tests) => tests,
            None => {
                let key = self.reg(state, key);
                let key = self.shared_key(i, reach, state, key);
                let tests = self.tests(i, key, table);
                if let Some(partner) = self.partners[i] {
                    self.shared.insert(partner.later, tests.clone());
                }
                tests
            }
        };
        let rare_case = rare || self.reads_word(i);
        for &(cond, target) in &cases {
            let edge = self.and(reach, cond);
            self.push(target, edge, state, rare_case);
        }
        let edge = match any {
            None => reach,
            Some(m) => self.and_not(reach, m),
        };
        self.push(default, edge, state, rare);
        self.end(Term::Cases {
            cases: cases.iter().map(|&(c, t)| (c, t as usize)).collect(),
            default: default as usize,
        });
    }

    /// The conditions of the `switch` at `i` on `key`: the membership of a small set, an
    /// equality per key or a range test per run, or a hashed lookup.
    fn tests(&mut self, i: usize, key: Value, table: u32) -> Tests {
        let entries = &self.plan.program.tables[table as usize].entries;
        if let Some((keys, target)) = as_set(self.plan.program, table) {
            let keys = keys_as_read(&keys, self.plan.native_operand(i));
            let member = emit_member(self.b, key, &keys);
            return (vec![(member, target)], Some(member));
        }
        let runs = as_runs(entries).filter(|runs| runs.len() <= SMALL_SWITCH);
        let hash = (runs.is_none() && entries.len() > SMALL_SWITCH)
            .then(|| PerfectHash::build(&entries.iter().map(|e| e.0).collect::<Vec<_>>()))
            .flatten();
        if let Some(hash) = hash {
            let targets: Vec<u32> = entries.iter().map(|e| e.1).collect();
            let lookup = emit_lookup(self.b, key, &hash, &targets, self.tables);
            let cases = lookup
                .distinct
                .iter()
                .enumerate()
                .map(|(n, &target)| match lookup.number {
                    None => (lookup.found, target),
                    Some(number) => {
                        let is = self.b.ins().icmp_imm_u(IntCC::Equal, number, n as i64);
                        (self.b.ins().band(lookup.found, is), target)
                    }
                })
                .collect();
            return (cases, Some(lookup.found));
        }
        // A few runs, or a few keys: each key a run of one (one equality).
        let runs = runs.unwrap_or_else(|| {
            entries
                .iter()
                .map(|&(k, target)| Run {
                    lo: k,
                    hi: k,
                    target,
                })
                .collect()
        });
        let mut cases = Vec::new();
        let mut any: Option<Value> = None;
        for run in runs {
            let inside = emit_in_run(self.b, key, run);
            cases.push((inside, run.target));
            any = Some(match any {
                None => inside,
                Some(m) => self.b.ins().bor(m, inside),
            });
        }
        (cases, any)
    }
}
