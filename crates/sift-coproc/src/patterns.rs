//! Multi-pattern payload search: one pass over the payload finds every pattern of a
//! [`PatternSet`](sift_ir::PatternSet) that occurs in it.
//!
//! Literals go to one of two searches, both finding every occurrence of every literal (a plain
//! leftmost search would skip a literal hidden inside, or overlapping, another's match):
//! - up to [`STARTS_MAX_LITERALS`] literals: the `aho-corasick` crate's leftmost search with
//!   its SIMD prefilters, plus an anchored automaton listing all literals at each match start
//!   (module `starts`);
//! - more: a hashed filter over 4-byte windows with exact confirmation, whose cost per byte
//!   does not grow with the number of literals (module `window`); literals shorter than the
//!   window still go to the first search.
//!
//! When a set mixes exact and case-insensitive literals, each search ignores case and the exact
//! literals are confirmed by comparing the matched bytes, so the payload is read once.
//! Regular expressions go into one `RegexSet`, searched in one more pass. The search stops as
//! soon as every literal has been seen.

use std::cell::Cell;

mod found;
mod starts;
mod window;

use regex::bytes::{Regex, RegexSet, RegexSetBuilder};
use sift_ir::Pattern;

use crate::error::{CompileError, CompileErrorReason};
use found::Found;
use starts::StartSearch;
use window::{WindowFilter, WINDOW};

thread_local! {
    /// Passes over a payload made by this thread (see [`searches_on_this_thread`]).
    static SEARCHES: Cell<u64> = const { Cell::new(0) };
}

/// How many searches (passes of a compiled pattern set, or of a shared union of sets, over a
/// payload) this thread has run so far: lets tests see how many times a packet was read. A
/// thread-local counter, so that counting costs no shared write.
pub fn searches_on_this_thread() -> u64 {
    SEARCHES.with(Cell::get)
}

/// Sets with more literals of at least [`WINDOW`] bytes than this use the window filter: the
/// prefilters of the `aho-corasick` crate (Teddy) stop paying off around here.
const STARTS_MAX_LITERALS: usize = 64;

/// The compiled form of one [`PatternSet`](sift_ir::PatternSet) (or of the union of several).
#[derive(Debug)]
pub(crate) struct PatternSearcher {
    /// Number of patterns in the set.
    len: u32,
    /// Number of literals in the set.
    literal_count: usize,
    starts: Option<StartSearch>,
    window: Option<WindowFilter>,
    regexes: Option<RegexSearch>,
}

/// A literal pattern and its index in the set.
#[derive(Debug)]
struct Literal {
    bytes: Box<[u8]>,
    nocase: bool,
    index: u32,
}

impl Literal {
    /// Whether `candidate` (as long as the literal) is an occurrence of it.
    fn matches(&self, candidate: &[u8]) -> bool {
        if self.nocase {
            candidate.eq_ignore_ascii_case(&self.bytes)
        } else {
            *candidate == *self.bytes
        }
    }
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
    /// Compiles the patterns of set number `set_index` (the index only labels errors).
    pub(crate) fn compile(
        set_index: u32,
        patterns: &[Pattern],
    ) -> Result<PatternSearcher, CompileError> {
        let error = |pattern: Option<u32>, reason| CompileError {
            set: set_index,
            pattern,
            reason,
        };
        let mut literals = Vec::new();
        let mut regex_exprs = Vec::new();
        let mut regex_index = Vec::new();
        for (i, pattern) in patterns.iter().enumerate() {
            let i = i as u32;
            pattern
                .validate()
                .map_err(|e| error(Some(i), CompileErrorReason::Pattern(e)))?;
            match pattern {
                Pattern::Literal { bytes, nocase } => literals.push(Literal {
                    bytes: bytes.as_slice().into(),
                    nocase: *nocase,
                    index: i,
                }),
                Pattern::Regex(expr) => {
                    regex_exprs.push(expr.as_str());
                    regex_index.push(i);
                }
            }
        }
        let literal_count = literals.len();
        let long = literals.iter().filter(|l| l.bytes.len() >= WINDOW).count();
        let (for_window, for_starts): (Vec<Literal>, Vec<Literal>) = if long > STARTS_MAX_LITERALS {
            literals.into_iter().partition(|l| l.bytes.len() >= WINDOW)
        } else {
            (Vec::new(), literals)
        };
        let window = (!for_window.is_empty()).then(|| WindowFilter::new(for_window));
        let starts = if for_starts.is_empty() {
            None
        } else {
            Some(
                StartSearch::new(for_starts)
                    .map_err(|e| error(None, CompileErrorReason::Automaton(e)))?,
            )
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
            len: patterns.len() as u32,
            literal_count,
            starts,
            window,
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
        SEARCHES.with(|n| n.set(n.get() + 1));
        let mut found = Found::new(found, self.literal_count);
        if let Some(window) = &self.window {
            window.search(hay, &mut found);
        }
        if let Some(starts) = &self.starts {
            starts.search(hay, &mut found);
        }
        if let Some(regexes) = &self.regexes {
            regexes.search(hay, &mut found);
        }
    }
}

impl RegexSearch {
    fn search(&self, hay: &[u8], found: &mut Found) {
        match &self.engine {
            RegexEngine::Set(set) => {
                for i in set.matches(hay).iter() {
                    found.insert_regex(self.index[i]);
                }
            }
            RegexEngine::Each(each) => {
                for (re, &i) in each.iter().zip(&self.index) {
                    if re.is_match(hay) {
                        found.insert_regex(i);
                    }
                }
            }
        }
    }
}
