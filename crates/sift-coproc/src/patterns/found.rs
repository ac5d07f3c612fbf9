//! The result of one search: which patterns of a set occur, as a bitset.

/// A search's result bitset (bit `i` for pattern `i` of the set), with a count of the literal
/// patterns not found yet so that literal searches can stop once all have been seen.
pub(crate) struct Found<'a> {
    bits: &'a mut [u64],
    literals_missing: usize,
}

impl<'a> Found<'a> {
    /// A result over `bits` (zeroed, one bit per pattern) for a set with `literals` literals.
    pub(crate) fn new(bits: &'a mut [u64], literals: usize) -> Found<'a> {
        Found {
            bits,
            literals_missing: literals,
        }
    }

    pub(crate) fn contains(&self, index: u32) -> bool {
        self.bits
            .get((index / 64) as usize)
            .is_some_and(|w| w >> (index % 64) & 1 == 1)
    }

    fn insert(&mut self, index: u32) -> bool {
        match self.bits.get_mut((index / 64) as usize) {
            Some(word) if *word >> (index % 64) & 1 == 0 => {
                *word |= 1 << (index % 64);
                true
            }
            _ => false,
        }
    }

    /// Records that literal `index` occurs.
    pub(crate) fn insert_literal(&mut self, index: u32) {
        if self.insert(index) {
            self.literals_missing = self.literals_missing.saturating_sub(1);
        }
    }

    /// Records that regular expression `index` matches.
    pub(crate) fn insert_regex(&mut self, index: u32) {
        self.insert(index);
    }

    /// Whether every literal of the set has been found (searching further is pointless).
    pub(crate) fn all_literals_found(&self) -> bool {
        self.literals_missing == 0
    }
}
