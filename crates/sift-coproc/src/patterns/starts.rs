//! Literal search for small sets (and for literals too short for the window filter): the
//! `aho-corasick` crate finds where matches start, with its SIMD prefilters (Teddy for up to a
//! few dozen patterns, memchr-style scans for rare bytes).
//!
//! Those prefilters only serve leftmost searches, which report one match per start and skip
//! matches overlapping an earlier one. So a leftmost search finds the next position where some
//! pattern starts, and a second automaton, anchored at that position and in overlapping mode,
//! lists every pattern starting there; the leftmost search then resumes one byte further. Every
//! occurrence of every pattern is seen, and the payload is scanned by the fast search only.

use aho_corasick::automaton::OverlappingState;
use aho_corasick::{AhoCorasick, AhoCorasickKind, Anchored, Input, MatchKind, StartKind};

use super::found::Found;
use super::Literal;

/// Above this many literal bytes the automata stay NFAs: a DFA's transition table grows with
/// states × byte classes and would stop fitting in cache.
const DFA_MAX_LITERAL_BYTES: usize = 64 * 1024;

#[derive(Debug)]
pub(crate) struct StartSearch {
    /// Finds the leftmost position at which some literal starts.
    starts: AhoCorasick,
    /// Lists the literals starting at a given position (anchored, overlapping).
    at: AhoCorasick,
    literals: Vec<Literal>,
}

impl StartSearch {
    /// Builds both automata; the error is the `aho-corasick` crate's.
    pub(crate) fn new(literals: Vec<Literal>) -> Result<StartSearch, String> {
        let nocase = literals.iter().any(|l| l.nocase);
        let total: usize = literals.iter().map(|l| l.bytes.len()).sum();
        let kind = (total <= DFA_MAX_LITERAL_BYTES).then_some(AhoCorasickKind::DFA);
        let bytes: Vec<&[u8]> = literals.iter().map(|l| &*l.bytes).collect();
        let starts = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .ascii_case_insensitive(nocase)
            .kind(kind)
            .build(&bytes)
            .map_err(|e| e.to_string())?;
        let at = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .start_kind(StartKind::Anchored)
            .ascii_case_insensitive(nocase)
            .kind(kind)
            .build(&bytes)
            .map_err(|e| e.to_string())?;
        // Whether a search can run depends on the automata's configuration, never on the
        // haystack: checking once here lets `search` rely on it.
        starts
            .try_find(Input::new(b""))
            .map_err(|e| e.to_string())?;
        at.try_find_overlapping(
            Input::new(b"").anchored(Anchored::Yes),
            &mut OverlappingState::start(),
        )
        .map_err(|e| e.to_string())?;
        Ok(StartSearch {
            starts,
            at,
            literals,
        })
    }

    pub(crate) fn search(&self, hay: &[u8], found: &mut Found) {
        let mut from = 0;
        while from < hay.len() && !found.all_literals_found() {
            // Cannot fail (checked in `new`); no match ends the search.
            let Ok(Some(m)) = self.starts.try_find(Input::new(hay).range(from..)) else {
                return;
            };
            let start = m.start();
            // (The iterator API refuses anchored overlapping searches; stepping through them
            // with a state is allowed.)
            let anchored = Input::new(hay).range(start..).anchored(Anchored::Yes);
            let mut state = OverlappingState::start();
            while let (Ok(()), Some(m)) = (
                self.at.try_find_overlapping(anchored.clone(), &mut state),
                state.get_match(),
            ) {
                // Every reported match is a real occurrence (an automaton state also reports
                // the literals that are suffixes of its path, which occur too).
                let literal = &self.literals[m.pattern().as_usize()];
                if literal.matches(&hay[m.range()]) {
                    found.insert_literal(literal.index);
                }
            }
            from = start + 1;
        }
    }
}
