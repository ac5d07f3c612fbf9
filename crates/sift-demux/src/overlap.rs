//! The exclusivity check: which installed filters may accept a packet a new filter accepts
//! (DPF section 5: a filter must not steal another endpoint's packets).
//!
//! Two conjunctions are reported disjoint only when a field is fixed to a value by one that the
//! other excludes (`port == 80` against `port == 81`, `port != 80`, `port > 1024`, ...). That is
//! exact for keyed conjunctions of the same shape (connection filters: they overlap iff their
//! keys are equal) and for conjunctions whose conflicting fields are the same expression.
//! Otherwise the answer is conservative: an overlap may be reported that no packet realises
//! (fields that alias, like `ether[12:2]` and `ether[12]`, or unsatisfiable combinations of
//! ranges), but an overlap is never missed. Filters run whole (residuals) always overlap.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use sift_ir::Function;

use crate::canon::{Atom, Expr, Rel};
use crate::demux::{Demux, InsertError, Where};
use crate::paths::decompose;
use crate::shape::{key_values, split, ShapeSig};
use crate::FilterId;

/// The constant comparisons of a conjunction, by field.
#[derive(Default)]
struct Facts {
    eq: HashMap<Arc<Expr>, u32>,
    other: Vec<(Rel, Arc<Expr>, u32)>,
}

impl Facts {
    fn add(&mut self, atom: &Atom) {
        if let Atom::Cmp { rel, lhs, rhs } = atom {
            if let Some(k) = rhs.constant() {
                if *rel == Rel::Eq {
                    self.eq.insert(lhs.clone(), k);
                } else {
                    self.other.push((*rel, lhs.clone(), k));
                }
            }
        }
    }

    fn of_checks(sig: &ShapeSig) -> Facts {
        let mut f = Facts::default();
        sig.checks.iter().for_each(|a| f.add(a));
        f
    }

    /// Whether `field == v` contradicts these facts.
    fn excludes(&self, field: &Arc<Expr>, v: u32) -> bool {
        if self.eq.get(field).is_some_and(|&c| c != v) {
            return true;
        }
        self.other
            .iter()
            .any(|(rel, f, k)| f == field && !rel.eval(v, *k))
    }

    fn conflicts(&self, other: &Facts) -> bool {
        self.eq.iter().any(|(f, &v)| other.excludes(f, v))
            || other.eq.iter().any(|(f, &v)| self.excludes(f, v))
    }
}

impl Demux {
    /// Installed filters that may accept some packet `filter` accepts (see the module docs for
    /// when this is exact). Sorted by id.
    ///
    /// Cost: one table lookup per path for filters of the same shape as the new one, plus a
    /// scan of the keys of every other shape.
    pub fn overlaps(&self, filter: &Function) -> Result<Vec<FilterId>, InsertError> {
        sift_ir::verify(filter).map_err(InsertError::InvalidIr)?;
        let mut out: BTreeSet<FilterId> = BTreeSet::new();
        for (id, f) in &self.filters {
            if matches!(f.at, Where::Residual(_)) {
                out.insert(*id);
            }
        }
        let Ok(paths) = decompose(filter, self.limits()) else {
            return Ok(self
                .filters
                .keys()
                .copied()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect());
        };
        for conj in &paths {
            let (sig, key) = split(conj);
            let mut mine = Facts::default();
            conj.atoms.iter().for_each(|a| mine.add(a));
            let same = self.shape_index(&sig);
            if let Some(i) = same {
                let (_, _, table) = self.shape_list().find(|(j, _, _)| *j == i).expect("live");
                if let Some(entries) = table.get(&key) {
                    out.extend(entries.as_slice().iter().map(|e| e.id));
                }
            }
            for (i, other_sig, table) in self.shape_list() {
                if Some(i) == same || mine.conflicts(&Facts::of_checks(other_sig)) {
                    continue;
                }
                table.for_each(&mut |k, entries| {
                    let values = key_values(other_sig, k);
                    if values.iter().all(|(field, v)| !mine.excludes(field, *v)) {
                        out.extend(entries.iter().map(|e| e.id));
                    }
                });
            }
        }
        Ok(out.into_iter().collect())
    }
}
