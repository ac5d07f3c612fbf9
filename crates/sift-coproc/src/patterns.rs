//! Multi-pattern payload search: one pass over the payload finds every pattern of a
//! [`PatternSet`] that occurs in it.
//!
//! Literals go into one Aho-Corasick automaton per set (with its SIMD prefilters), regular
//! expressions into one `RegexSet`. The automaton runs in overlapping mode with standard match
//! semantics: that is the only mode that reports every pattern occurring in the payload (a
//! leftmost search would skip a pattern hidden inside, or overlapping, another's match). When a
//! set mixes exact and case-insensitive literals, a single case-insensitive automaton finds
//! candidates for both and the exact ones are confirmed by comparing the matched bytes, so the
//! payload is still read once.

use std::sync::Arc;

use aho_corasick::{AhoCorasick, AhoCorasickKind, Input, MatchKind};
use regex::bytes::{Regex, RegexSet, RegexSetBuilder};
use sift_ir::{Pattern, PatternSet};

use crate::error::{CompileError, CompileErrorReason};

/// Above this many literal bytes the automaton stays a (contiguous) NFA: a DFA's transition
/// table grows with states × byte classes and would stop fitting in cache.
const DFA_MAX_LITERAL_BYTES: usize = 64 * 1024;

/// The compiled form of one [`PatternSet`].
#[derive(Debug)]
pub(crate) struct PatternSearcher {
    /// Number of patterns in the set.
    len: u32,
    literals: Option<LiteralSearch>,
    regexes: Option<RegexSearch>,
}

#[derive(Debug)]
struct LiteralSearch {
    automaton: AhoCorasick,
    /// The set's index of each automaton pattern.
    index: Vec<u32>,
    /// For each automaton pattern: the bytes a match must equal exactly, when the automaton
    /// ignores case but the pattern does not.
    exact: Vec<Option<Box<[u8]>>>,
}

#[derive(Debug)]
struct RegexSearch {
    engine: RegexEngine,
    /// The set's index of each regular expression of the engine.
    index: Vec<u32>,
}

#[derive(Debug)]
enum RegexEngine {
    /// All expressions in one pass.
    Set(RegexSet),
    /// One pass per expression: used only when the combined set exceeds the `regex` crate's
    /// size limits although each expression fits alone.
    Each(Vec<Regex>),
}

impl PatternSearcher {
    /// Compiles set number `set_index` (the index only labels errors).
    pub(crate) fn compile(
        set_index: u32,
        set: &Arc<PatternSet>,
    ) -> Result<PatternSearcher, CompileError> {
        let error = |pattern: Option<u32>, reason| CompileError {
            set: set_index,
            pattern,
            reason,
        };
        let mut literal_bytes = Vec::new();
        let mut literal_index = Vec::new();
        let mut literal_nocase = Vec::new();
        let mut regex_exprs = Vec::new();
        let mut regex_index = Vec::new();
        for (i, pattern) in set.patterns().iter().enumerate() {
            let i = i as u32;
            pattern
                .validate()
                .map_err(|e| error(Some(i), CompileErrorReason::Pattern(e)))?;
            match pattern {
                Pattern::Literal { bytes, nocase } => {
                    literal_bytes.push(bytes.as_slice());
                    literal_index.push(i);
                    literal_nocase.push(*nocase);
                }
                Pattern::Regex(expr) => {
                    regex_exprs.push(expr.as_str());
                    regex_index.push(i);
                }
            }
        }
        let literals = if literal_bytes.is_empty() {
            None
        } else {
            let any_nocase = literal_nocase.iter().any(|&n| n);
            let total: usize = literal_bytes.iter().map(|b| b.len()).sum();
            let kind = (total <= DFA_MAX_LITERAL_BYTES).then_some(AhoCorasickKind::DFA);
            let automaton = AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                .ascii_case_insensitive(any_nocase)
                .kind(kind)
                .build(&literal_bytes)
                .map_err(|e| error(None, CompileErrorReason::Automaton(e.to_string())))?;
            // Whether an overlapping search can run depends on the automaton's configuration,
            // never on the haystack: checking once here lets `search` rely on it.
            if let Err(e) = automaton.try_find_overlapping_iter(Input::new(b"")) {
                return Err(error(None, CompileErrorReason::Automaton(e.to_string())));
            }
            let exact = literal_bytes
                .iter()
                .zip(&literal_nocase)
                .map(|(bytes, &nocase)| (any_nocase && !nocase).then(|| Box::from(*bytes)))
                .collect();
            Some(LiteralSearch {
                automaton,
                index: literal_index,
                exact,
            })
        };
        let regexes = if regex_exprs.is_empty() {
            None
        } else {
            let engine = match RegexSetBuilder::new(&regex_exprs).build() {
                Ok(set) => RegexEngine::Set(set),
                Err(_) => {
                    let mut each = Vec::with_capacity(regex_exprs.len());
                    for (expr, &i) in regex_exprs.iter().zip(&regex_index) {
                        let re = Regex::new(expr).map_err(|e| {
                            error(Some(i), CompileErrorReason::Regex(e.to_string()))
                        })?;
                        each.push(re);
                    }
                    RegexEngine::Each(each)
                }
            };
            Some(RegexSearch {
                engine,
                index: regex_index,
            })
        };
        Ok(PatternSearcher {
            len: set.len() as u32,
            literals,
            regexes,
        })
    }

    /// Number of patterns of the set.
    pub(crate) fn len(&self) -> u32 {
        self.len
    }

    /// Number of 64-bit words of a result bitset.
    pub(crate) fn words(&self) -> usize {
        (self.len as usize).div_ceil(64)
    }

    /// Sets bit `i` of `found` (zeroed by the caller, [`words`](Self::words) long) for every
    /// pattern `i` that occurs in `hay`.
    pub(crate) fn search(&self, hay: &[u8], found: &mut [u64]) {
        if let Some(literals) = &self.literals {
            literals.search(hay, found);
        }
        if let Some(regexes) = &self.regexes {
            regexes.search(hay, found);
        }
    }
}

fn set_bit(found: &mut [u64], index: u32) -> bool {
    let (word, bit) = ((index / 64) as usize, index % 64);
    let was_clear = found[word] & (1 << bit) == 0;
    found[word] |= 1 << bit;
    was_clear
}

impl LiteralSearch {
    fn search(&self, hay: &[u8], found: &mut [u64]) {
        let mut missing = self.index.len();
        // Cannot fail: `compile` checked that this automaton supports overlapping search.
        let Ok(matches) = self.automaton.try_find_overlapping_iter(Input::new(hay)) else {
            return;
        };
        for m in matches {
            let id = m.pattern().as_usize();
            if let Some(exact) = &self.exact[id] {
                if hay[m.range()] != **exact {
                    continue;
                }
            }
            if set_bit(found, self.index[id]) {
                missing -= 1;
                if missing == 0 {
                    break;
                }
            }
        }
    }
}

impl RegexSearch {
    fn search(&self, hay: &[u8], found: &mut [u64]) {
        match &self.engine {
            RegexEngine::Set(set) => {
                for i in set.matches(hay).iter() {
                    set_bit(found, self.index[i]);
                }
            }
            RegexEngine::Each(each) => {
                for (re, &i) in each.iter().zip(&self.index) {
                    if re.is_match(hay) {
                        set_bit(found, i);
                    }
                }
            }
        }
    }
}
