//! Coprocessor tables: the data behind [`Inst::Contains`](crate::Inst::Contains) and
//! [`Inst::Member`](crate::Inst::Member), and their reference semantics.
//!
//! NetVM gives filters "coprocessors" for work that loads and compares do badly: string matching
//! and table lookups. In sift they are pure functions of the packet and of argument values, so
//! every pass can treat a call like an arithmetic instruction that never rejects. A function
//! carries the tables its calls refer to ([`Function::patterns`](crate::Function::patterns),
//! [`Function::sets`](crate::Function::sets)), shared behind `Arc`s because a set can hold a
//! million entries.
//!
//! This module defines what a call computes, as plainly as possible (a window-by-window search,
//! a binary search over sorted ranges): it is the reference the fast engines (`sift-coproc`'s
//! automata and hashed sets) are tested against.

use std::fmt;
use std::sync::OnceLock;

/// One pattern of a [`PatternSet`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// A byte string, compared exactly or ignoring ASCII case.
    Literal { bytes: Vec<u8>, nocase: bool },
    /// A regular expression in the `regex` crate's syntax, matched over bytes anywhere in the
    /// payload (unanchored unless the expression anchors itself).
    Regex(String),
}

/// The patterns searched for by `contains` calls of one function.
#[derive(Debug, Default)]
pub struct PatternSet {
    patterns: Vec<Pattern>,
    /// The compiled regular expressions of the reference search, built on first use.
    regexes: OnceLock<Vec<Option<regex::bytes::Regex>>>,
}

/// A pattern that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatternError {
    /// A literal with no bytes (it would match every payload, including an absent one).
    Empty,
    /// The regular expression does not compile; the message is the `regex` crate's.
    Regex(String),
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternError::Empty => write!(f, "empty pattern"),
            PatternError::Regex(m) => write!(f, "invalid regular expression: {m}"),
        }
    }
}

impl std::error::Error for PatternError {}

impl Pattern {
    /// Checks that the pattern can be searched for.
    pub fn validate(&self) -> Result<(), PatternError> {
        match self {
            Pattern::Literal { bytes, .. } if bytes.is_empty() => Err(PatternError::Empty),
            Pattern::Literal { .. } => Ok(()),
            Pattern::Regex(re) => regex::bytes::Regex::new(re)
                .map(drop)
                .map_err(|e| PatternError::Regex(e.to_string())),
        }
    }
}

impl PatternSet {
    pub fn new() -> PatternSet {
        PatternSet::default()
    }

    /// Adds a pattern (validated) and returns its index; an equal pattern already present is
    /// reused.
    pub fn add(&mut self, pattern: Pattern) -> Result<u32, PatternError> {
        pattern.validate()?;
        if let Some(i) = self.patterns.iter().position(|p| *p == pattern) {
            return Ok(i as u32);
        }
        self.patterns.push(pattern);
        self.regexes = OnceLock::new();
        Ok(self.patterns.len() as u32 - 1)
    }

    pub fn patterns(&self) -> &[Pattern] {
        &self.patterns
    }

    pub fn len(&self) -> usize {
        self.patterns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The reference semantics of `contains`: whether pattern `index` occurs in `packet` from
    /// byte `start` on. A start past the captured bytes means there is no payload: nothing
    /// occurs in it.
    pub fn occurs(&self, index: u32, packet: &[u8], start: u32) -> bool {
        let Some(hay) = packet.get(start as usize..) else {
            return false;
        };
        match &self.patterns[index as usize] {
            Pattern::Literal { bytes, nocase } => hay.windows(bytes.len()).any(|w| {
                if *nocase {
                    w.eq_ignore_ascii_case(bytes)
                } else {
                    w == bytes.as_slice()
                }
            }),
            Pattern::Regex(_) => {
                let regexes = self.regexes.get_or_init(|| {
                    self.patterns
                        .iter()
                        .map(|p| match p {
                            Pattern::Regex(re) => regex::bytes::Regex::new(re).ok(),
                            Pattern::Literal { .. } => None,
                        })
                        .collect()
                });
                regexes[index as usize]
                    .as_ref()
                    .is_some_and(|re| re.is_match(hay))
            }
        }
    }
}

impl Clone for PatternSet {
    fn clone(&self) -> PatternSet {
        PatternSet {
            patterns: self.patterns.clone(),
            regexes: OnceLock::new(),
        }
    }
}

impl PartialEq for PatternSet {
    fn eq(&self, other: &PatternSet) -> bool {
        self.patterns == other.patterns
    }
}

impl Eq for PatternSet {}

/// The width of the keys of a [`ValueSet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyWidth {
    /// One 32-bit word: ports, VLAN IDs, IPv4 addresses.
    W32,
    /// Four words, most significant first: IPv6 addresses.
    W128,
}

impl KeyWidth {
    /// Number of 32-bit argument values a `member` call of this width takes.
    pub fn words(self) -> usize {
        match self {
            KeyWidth::W32 => 1,
            KeyWidth::W128 => 4,
        }
    }

    pub fn max(self) -> u128 {
        match self {
            KeyWidth::W32 => u128::from(u32::MAX),
            KeyWidth::W128 => u128::MAX,
        }
    }
}

/// A set of keys, as sorted, disjoint, non-adjacent inclusive ranges (an address prefix is a
/// range, a single value a range of one).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ValueSet {
    width: KeyWidth,
    ranges: Vec<(u128, u128)>,
}

impl ValueSet {
    /// The set covering `ranges` (inclusive, in any order, possibly overlapping); bounds beyond
    /// the width are clipped, empty ranges (`lo > hi`) ignored.
    pub fn new(width: KeyWidth, ranges: impl IntoIterator<Item = (u128, u128)>) -> ValueSet {
        let max = width.max();
        let mut ranges: Vec<(u128, u128)> = ranges
            .into_iter()
            .filter(|&(lo, hi)| lo <= hi && lo <= max)
            .map(|(lo, hi)| (lo, hi.min(max)))
            .collect();
        ranges.sort_unstable();
        let mut merged: Vec<(u128, u128)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        ValueSet {
            width,
            ranges: merged,
        }
    }

    pub fn width(&self) -> KeyWidth {
        self.width
    }

    /// The sorted, disjoint, non-adjacent ranges.
    pub fn ranges(&self) -> &[(u128, u128)] {
        &self.ranges
    }

    /// The reference semantics of `member`: whether `key` lies in one of the ranges.
    pub fn contains(&self, key: u128) -> bool {
        let i = self.ranges.partition_point(|&(lo, _)| lo <= key);
        i > 0 && key <= self.ranges[i - 1].1
    }

    /// The key a `member` call's argument words form (most significant first).
    pub fn key(words: &[u32]) -> u128 {
        words
            .iter()
            .fold(0u128, |acc, &w| (acc << 32) | u128::from(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_search() {
        let mut s = PatternSet::new();
        let get = s
            .add(Pattern::Literal {
                bytes: b"GET".to_vec(),
                nocase: false,
            })
            .unwrap();
        let get_ci = s
            .add(Pattern::Literal {
                bytes: b"get".to_vec(),
                nocase: true,
            })
            .unwrap();
        assert_eq!(
            s.add(Pattern::Literal {
                bytes: b"GET".to_vec(),
                nocase: false
            }),
            Ok(get)
        );
        let pkt = b"xxGeT /";
        assert!(!s.occurs(get, pkt, 0));
        assert!(s.occurs(get_ci, pkt, 0));
        assert!(s.occurs(get_ci, pkt, 2));
        assert!(!s.occurs(get_ci, pkt, 3));
        assert!(!s.occurs(get_ci, pkt, 100));
        assert_eq!(
            s.add(Pattern::Literal {
                bytes: vec![],
                nocase: false
            }),
            Err(PatternError::Empty)
        );
    }

    #[test]
    fn regex_search() {
        let mut s = PatternSet::new();
        let re = s.add(Pattern::Regex("^HTTP/1\\.[01]".into())).unwrap();
        assert!(s.occurs(re, b"..HTTP/1.1 200", 2));
        assert!(!s.occurs(re, b"..HTTP/1.1 200", 0));
        assert!(matches!(
            s.add(Pattern::Regex("(".into())),
            Err(PatternError::Regex(_))
        ));
    }

    #[test]
    fn ranges_merge_and_lookup() {
        let s = ValueSet::new(
            KeyWidth::W32,
            [(80, 80), (8000, 8100), (81, 81), (8050, 9000), (5, 4)],
        );
        assert_eq!(s.ranges(), &[(80, 81), (8000, 9000)]);
        for (k, want) in [
            (79, false),
            (80, true),
            (81, true),
            (82, false),
            (9000, true),
        ] {
            assert_eq!(s.contains(k), want, "{k}");
        }
        let full = ValueSet::new(KeyWidth::W32, [(0, u128::MAX)]);
        assert_eq!(full.ranges(), &[(0, u128::from(u32::MAX))]);
        assert_eq!(ValueSet::key(&[1, 2]), (1 << 32) | 2);
    }
}
