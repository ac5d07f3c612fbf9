//! Fixed-width bit sets in 32-bit words, one row per block or edge, as libpcap sizes them
//! (`n / 32 + 1` words): the block dominators.

/// `rows` sets of the same width.
#[derive(Clone, Debug)]
pub struct BitMatrix {
    words: usize,
    bits: Vec<u32>,
}

impl BitMatrix {
    /// `rows` sets able to hold members `0..width`, all empty.
    pub fn new(rows: usize, width: usize) -> BitMatrix {
        let words = width / 32 + 1;
        BitMatrix {
            words,
            bits: vec![0; rows * words],
        }
    }

    /// Makes every set full.
    pub fn fill(&mut self) {
        self.bits.fill(!0);
    }

    /// Empties one set.
    pub fn clear_row(&mut self, row: usize) {
        self.row_mut(row).fill(0);
    }

    /// Adds `member` to set `row`.
    pub fn insert(&mut self, row: usize, member: usize) {
        self.row_mut(row)[member / 32] |= 1 << (member % 32);
    }

    /// Whether `member` is in set `row`.
    pub fn contains(&self, row: usize, member: usize) -> bool {
        self.row(row)[member / 32] & (1 << (member % 32)) != 0
    }

    /// `dst &= src`.
    pub fn intersect(&mut self, dst: usize, src: usize) {
        for w in 0..self.words {
            let s = self.bits[src * self.words + w];
            self.bits[dst * self.words + w] &= s;
        }
    }

    fn row(&self, row: usize) -> &[u32] {
        &self.bits[row * self.words..(row + 1) * self.words]
    }

    fn row_mut(&mut self, row: usize) -> &mut [u32] {
        &mut self.bits[row * self.words..(row + 1) * self.words]
    }
}
