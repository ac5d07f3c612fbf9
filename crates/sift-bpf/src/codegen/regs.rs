//! What the accumulator `A` and the index register `X` are known to hold at a point of the
//! generated code, as sets of value classes ([`super::classes`], each named by one SSA value; a
//! register holds several classes at once when they are equal: a block parameter and the edge
//! argument copied into it).
//!
//! At the entry of a block the state is the intersection of the states its incoming edges leave:
//! a value stays in a register across a merge only when every predecessor leaves it there. The
//! selector visits blocks in a topological order, so every incoming edge is known by then.

use sift_ir::Value;

/// The values one register holds (a few at most; a plain vector is the fastest set).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Holds(Vec<Value>);

impl Holds {
    pub(super) fn contains(&self, v: Value) -> bool {
        self.0.contains(&v)
    }

    /// The register now holds exactly `v`.
    pub(super) fn set(&mut self, v: Value) {
        self.0.clear();
        self.0.push(v);
    }

    /// The register holds nothing known.
    pub(super) fn clear(&mut self) {
        self.0.clear();
    }

    /// `v` is equal to what the register holds (a parameter receiving a held argument).
    pub(super) fn alias(&mut self, v: Value) {
        if !self.0.contains(&v) {
            self.0.push(v);
        }
    }

    fn intersect(&mut self, other: &Holds) {
        self.0.retain(|v| other.0.contains(v));
    }
}

/// The known contents of `A` and `X`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Regs {
    pub(super) a: Holds,
    pub(super) x: Holds,
}

impl Regs {
    /// The state after the edge's parameters receive their arguments (the copies into scratch
    /// words, if any, are already emitted and reflected in `self`).
    pub(super) fn through_edge(&self, params: &[Value], args: &[Value]) -> Regs {
        let mut out = self.clone();
        for (&p, &arg) in params.iter().zip(args) {
            if self.a.contains(arg) {
                out.a.alias(p);
            }
            if self.x.contains(arg) {
                out.x.alias(p);
            }
        }
        out
    }

    /// Merges the state an edge leaves (`from.through_edge(params, args)`) into its target's
    /// entry state, without building that state when the target already has one: a block
    /// entered by the thousand cases of a lookup table would otherwise clone and drop the
    /// registers' lists once per case.
    pub(super) fn merge_edge_into(
        slot: &mut Option<Regs>,
        from: &Regs,
        params: &[Value],
        args: impl Iterator<Item = Value>,
    ) {
        let Some(s) = slot else {
            let args: Vec<Value> = args.collect();
            *slot = Some(from.through_edge(params, &args));
            return;
        };
        if params.is_empty() {
            s.a.intersect(&from.a);
            s.x.intersect(&from.x);
            return;
        }
        // What `through_edge` adds: each parameter whose argument a register holds.
        let pairs: Vec<(Value, Value)> = params.iter().copied().zip(args).collect();
        let keeps = |held: &Holds, v: Value| {
            held.contains(v) || pairs.iter().any(|&(p, arg)| p == v && held.contains(arg))
        };
        s.a.0.retain(|&v| keeps(&from.a, v));
        s.x.0.retain(|&v| keeps(&from.x, v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_keeps_only_common_values() {
        let mut one = Regs::default();
        one.a.set(Value(1));
        one.a.alias(Value(2));
        one.x.set(Value(3));
        let mut two = Regs::default();
        two.a.set(Value(2));
        let mut entry = None;
        Regs::merge_edge_into(&mut entry, &one, &[], std::iter::empty());
        Regs::merge_edge_into(&mut entry, &two, &[], std::iter::empty());
        let entry = entry.unwrap();
        assert!(entry.a.contains(Value(2)) && !entry.a.contains(Value(1)));
        assert!(!entry.x.contains(Value(3)));
    }

    #[test]
    fn parameters_alias_held_arguments() {
        let mut r = Regs::default();
        r.a.set(Value(4));
        let after = r.through_edge(&[Value(9), Value(10)], &[Value(4), Value(5)]);
        assert!(after.a.contains(Value(9)) && after.a.contains(Value(4)));
        assert!(!after.a.contains(Value(10)));
    }
}
