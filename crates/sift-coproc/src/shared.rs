//! One search per packet for the pattern sets of many filters.
//!
//! A demultiplexer runs many filters on each packet; searched one filter at a time, a payload
//! is read once per filter that reaches a `contains` call, each time by a smaller automaton.
//! A [`SharedSearch`] is the union of the pattern sets of several filters' [`Coprocessors`]
//! (equal patterns counted once), compiled like a single set: the `aho-corasick` automaton
//! with its prefilters or the hashed window filter for the literals, one `RegexSet` for the
//! regular expressions. The two are searched apart, each when first needed, so packets whose
//! filters ask only for literals never pay for the expressions. Each member keeps a map from
//! its own (set, pattern) to the pattern's index in the union.
//!
//! The filters themselves do not change: their engines (bytecode interpreter, JIT) still call
//! [`Coprocessors::contains`] with their own memo. The demultiplexer runs the filters of one
//! packet inside [`SharedSearch::packet`], which makes the union current on the running
//! thread; while it is, a member's `contains` answers from the union's result for the packet
//! and start offset (a literal search, a regular-expression search), computed by the first
//! call that needs it (a packet no filter searches is
//! never searched). Outside that scope, or for a [`Coprocessors`] that is not a member, calls
//! search as before.
//!
//! Exactness: a pattern occurs in a payload whatever other patterns are searched with it, and
//! results are kept per start offset (filters reading different protocols' payloads of one
//! packet each get theirs), so every answer is the one the filter would compute alone.
//! Regular expressions are merged too: a `RegexSet` reports each expression's match
//! independently of the others (a union too large for one set falls back to one regex at a
//! time, as a single set does).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use foldhash::fast::RandomState;
use sift_ir::Pattern;

use crate::error::CompileError;
use crate::memo::Memo;
use crate::patterns::PatternSearcher;
use crate::Coprocessors;

/// The pattern sets of several [`Coprocessors`], searched together.
#[derive(Debug)]
pub struct SharedSearch {
    /// Tags this union's results in the thread's memo.
    id: u64,
    /// The literals' searcher and the regular expressions' (each absent when the union has
    /// none), indexed by a pattern's [`REGEX_PART_BIT`].
    parts: [Option<PatternSearcher>; 2],
    /// Distinct patterns in the union.
    patterns: usize,
    /// Each member (by [`Coprocessors`] identity): its first entry in `set_starts` and its
    /// number of pattern sets.
    members: HashMap<u64, (u32, u32), RandomState>,
    /// For each member's set, where its patterns start in `indexes` (followed by the end of
    /// the member's last set): two flat arrays rather than a box per member and set, so that
    /// answering a call touches few cache lines however many filters there are.
    set_starts: Vec<u32>,
    /// The union's index of each pattern of each member's sets.
    indexes: Vec<u32>,
}

/// The bit of a union index that tells a regular expression (part 1) from a literal (part 0);
/// the bits below are the index in the part.
const REGEX_PART_BIT: u32 = 31;

/// Source of [`SharedSearch::id`]s. A memo tags results with their owner's id, so these are
/// kept apart from [`Coprocessors`]' ids (which count up from 1) by their top bit.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// The running thread's current union and its results for the current packet.
#[derive(Default)]
struct Scope {
    /// The union made current by the innermost [`SharedSearch::packet`] (kept afterwards, so
    /// that the next packet of the same union does not touch reference counts).
    union: Option<Arc<SharedSearch>>,
    active: bool,
    results: Memo,
}

thread_local! {
    static SCOPE: RefCell<Scope> = RefCell::new(Scope::default());
}

impl SharedSearch {
    /// The union of the pattern sets of `members` (members without pattern sets are
    /// skipped). Marks each member so that its `contains` calls look for a current union.
    pub fn build<'a>(
        members: impl IntoIterator<Item = &'a Coprocessors>,
    ) -> Result<SharedSearch, CompileError> {
        // Literals and regular expressions are searched apart, each on first demand: a packet
        // whose filters only ask for literals never runs the regular expressions.
        let mut parts: [Vec<Pattern>; 2] = [Vec::new(), Vec::new()];
        let mut index: HashMap<&Pattern, u32, RandomState> = HashMap::default();
        let mut marked: Vec<&Coprocessors> = Vec::new();
        let mut set_starts: Vec<u32> = Vec::new();
        let mut indexes: Vec<u32> = Vec::new();
        let mut member_sets: Vec<(u64, (u32, u32))> = Vec::new();
        for member in members {
            if member.sources.is_empty() {
                continue;
            }
            member_sets.push((
                member.id,
                (set_starts.len() as u32, member.sources.len() as u32),
            ));
            for set in &member.sources {
                set_starts.push(indexes.len() as u32);
                for p in set.patterns() {
                    indexes.push(*index.entry(p).or_insert_with(|| {
                        let part = usize::from(matches!(p, Pattern::Regex(_)));
                        parts[part].push(p.clone());
                        (parts[part].len() as u32 - 1) | (part as u32) << REGEX_PART_BIT
                    }));
                }
            }
            set_starts.push(indexes.len() as u32);
            marked.push(member);
        }
        let [literals, regexes] = &parts;
        let part = |patterns: &[Pattern]| -> Result<Option<PatternSearcher>, CompileError> {
            if patterns.is_empty() {
                return Ok(None);
            }
            PatternSearcher::compile(0, patterns).map(Some)
        };
        let parts = [part(literals)?, part(regexes)?];
        // Only once the union exists: a member marked before a failed build would look for a
        // union in vain, which is harmless but slower.
        for member in marked {
            member.mark_shared();
        }
        Ok(SharedSearch {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed) | 1 << 63,
            parts,
            patterns: index.len(),
            members: member_sets.into_iter().collect(),
            set_starts,
            indexes,
        })
    }

    /// The union's index of pattern `pattern` of set `set` of member `member`.
    #[inline]
    fn index(&self, member: u64, set: u32, pattern: u32) -> Option<u32> {
        let &(first, sets) = self.members.get(&member)?;
        if set >= sets {
            return None;
        }
        let at = (first + set) as usize;
        let (start, end) = (*self.set_starts.get(at)?, *self.set_starts.get(at + 1)?);
        let at = start.checked_add(pattern).filter(|&at| at < end)?;
        self.indexes.get(at as usize).copied()
    }

    /// Number of distinct patterns searched.
    pub fn patterns(&self) -> usize {
        self.patterns
    }

    /// Number of members (with at least one pattern set).
    pub fn members(&self) -> usize {
        self.members.len()
    }

    /// Whether `c` is a member.
    pub fn has_member(&self, c: &Coprocessors) -> bool {
        self.members.contains_key(&c.id)
    }

    /// Runs `f` with this union current on this thread for one packet: members' `contains`
    /// calls made by `f` answer from one search per start offset. Every call inside must be
    /// about the same packet (results are kept by start offset, not by packet contents): run
    /// one packet's filters per scope. Nested scopes work (the inner one's packet forgets the
    /// outer one's results, which are searched again if needed).
    pub fn packet<R>(self: &Arc<SharedSearch>, f: impl FnOnce() -> R) -> R {
        let entered = SCOPE.try_with(|scope| {
            let Ok(mut scope) = scope.try_borrow_mut() else {
                return None;
            };
            let current = scope.union.as_ref().is_some_and(|u| Arc::ptr_eq(u, self));
            let replaced = if current {
                None
            } else {
                scope.union.replace(self.clone())
            };
            scope.results.next_packet();
            let was_active = std::mem::replace(&mut scope.active, true);
            Some(Leave {
                previous: replaced.filter(|_| was_active),
                was_active,
            })
        });
        match entered {
            Ok(Some(_leave)) => f(),
            // During thread teardown: every member searches alone.
            _ => f(),
        }
    }
}

/// Ends a [`SharedSearch::packet`] scope (also when `f` unwinds).
struct Leave {
    /// The outer scope's union when scopes nest.
    previous: Option<Arc<SharedSearch>>,
    was_active: bool,
}

impl Drop for Leave {
    fn drop(&mut self) {
        let _ = SCOPE.try_with(|scope| {
            if let Ok(mut scope) = scope.try_borrow_mut() {
                scope.active = self.was_active;
                if let Some(previous) = self.previous.take() {
                    scope.union = Some(previous);
                }
                // The results may be of another packet than the outer scope's.
                scope.results.next_packet();
            }
        });
    }
}

/// Whether pattern `pattern` of set `set` of member `member` occurs in `payload` (which starts
/// at `start` in its packet), from the current union's search; `None` when no union is
/// current on this thread or `member` is not in it (the caller then searches alone).
pub(crate) fn answer(
    member: u64,
    set: u32,
    pattern: u32,
    payload: &[u8],
    start: u32,
) -> Option<bool> {
    SCOPE
        .try_with(|scope| {
            let mut scope = scope.try_borrow_mut().ok()?;
            if !scope.active {
                return None;
            }
            let Scope { union, results, .. } = &mut *scope;
            let union = union.as_ref()?;
            let index = union.index(member, set, pattern)?;
            let part = index >> REGEX_PART_BIT;
            let index = index & !(1 << REGEX_PART_BIT);
            let searcher = union.parts[part as usize].as_ref()?;
            let found = results.results(union.id, part, start, searcher.words(), |found| {
                searcher.search(payload, found)
            });
            Some(found[(index / 64) as usize] >> (index % 64) & 1 == 1)
        })
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::searches_on_this_thread;
    use sift_ir::PatternSet;

    fn literal(text: &str, nocase: bool) -> Pattern {
        Pattern::Literal {
            bytes: text.as_bytes().to_vec(),
            nocase,
        }
    }

    fn tables(sets: Vec<Vec<Pattern>>) -> (Vec<Arc<PatternSet>>, Coprocessors) {
        let sets: Vec<Arc<PatternSet>> = sets
            .into_iter()
            .map(|patterns| {
                let mut set = PatternSet::new();
                for p in patterns {
                    set.add(p).unwrap();
                }
                Arc::new(set)
            })
            .collect();
        let c = Coprocessors::compile(&sets, &[]).unwrap();
        (sets, c)
    }

    /// Every (set, pattern) of `c` answered as the reference does, from `start`.
    fn check(sets: &[Arc<PatternSet>], c: &Coprocessors, packet: &[u8], start: u32) {
        let mut memo = Memo::new();
        for (s, set) in sets.iter().enumerate() {
            for p in 0..set.len() as u32 {
                assert_eq!(
                    c.contains(&mut memo, s as u32, p, packet, start),
                    set.occurs(p, packet, start),
                    "set {s} pattern {p} from {start} in {packet:?}"
                );
            }
        }
    }

    #[test]
    fn members_answer_from_one_search_per_packet_and_start() {
        let (a_sets, a) = tables(vec![
            vec![literal("GET /", false), literal("admin", true)],
            vec![Pattern::Regex("^HTTP/1\\.[01]".into())],
        ]);
        let (b_sets, b) = tables(vec![vec![
            literal("admin", true),
            literal("passwd", false),
            literal("ADMIN", false),
        ]]);
        let union = Arc::new(SharedSearch::build([&a, &b]).unwrap());
        // "admin" nocase is shared; the regex and four other literals stay apart.
        assert_eq!(union.patterns(), 5);
        assert_eq!(union.members(), 2);
        let packets: [&[u8]; 4] = [
            b"xxGET /AdMiN/passwd",
            b"..HTTP/1.1 200 OK ADMIN",
            b"..nothing here",
            b"",
        ];
        for packet in packets {
            let before = searches_on_this_thread();
            union.packet(|| {
                check(&a_sets, &a, packet, 2);
                check(&b_sets, &b, packet, 2);
            });
            // One literal search and one regular-expression search.
            let searched = 2 * u64::from(packet.len() >= 2);
            assert_eq!(searches_on_this_thread() - before, searched, "{packet:?}");
            // Another start offset is another search (both in one packet).
            let before = searches_on_this_thread();
            union.packet(|| {
                check(&a_sets, &a, packet, 0);
                check(&b_sets, &b, packet, 0);
                check(&a_sets, &a, packet, 2);
            });
            let searched = 2 + 2 * u64::from(packet.len() >= 2);
            assert_eq!(searches_on_this_thread() - before, searched, "{packet:?}");
        }
        // Indexes out of range (which the IR verifier rules out) answer false, as alone.
        union.packet(|| {
            let mut memo = Memo::new();
            for (set, pattern) in [(0, 2), (1, 1), (2, 0), (u32::MAX, u32::MAX)] {
                assert!(!a.contains(&mut memo, set, pattern, packets[0], 0));
            }
            assert!(!b.contains(&mut memo, 0, 3, packets[0], 0));
        });
        // Only literals asked for: the regular expressions are not run.
        let before = searches_on_this_thread();
        union.packet(|| check(&b_sets, &b, packets[0], 2));
        assert_eq!(searches_on_this_thread() - before, 1);
        // Outside the scope every member searches alone, with the same answers.
        let before = searches_on_this_thread();
        check(&b_sets, &b, packets[0], 2);
        assert_eq!(searches_on_this_thread() - before, 1);
    }

    #[test]
    fn non_members_and_nested_scopes_keep_their_own_answers() {
        let (a_sets, a) = tables(vec![vec![literal("abc", false)]]);
        let (c_sets, c) = tables(vec![vec![literal("xyz", false)]]);
        let first = Arc::new(SharedSearch::build([&a]).unwrap());
        let second = Arc::new(SharedSearch::build([&c]).unwrap());
        assert!(first.has_member(&a) && !first.has_member(&c));
        first.packet(|| {
            check(&a_sets, &a, b"--abc--", 0);
            // A non-member inside the scope searches alone.
            check(&c_sets, &c, b"--xyz--", 0);
            second.packet(|| check(&c_sets, &c, b"xyz", 0));
            // Back in the outer scope: its member still answers for the outer packet.
            check(&a_sets, &a, b"--abc--", 0);
        });
        first.packet(|| check(&a_sets, &a, b"--ab---", 0));
    }
}
