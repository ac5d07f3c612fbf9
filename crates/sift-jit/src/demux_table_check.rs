//! The check of a dispatch table's invariants (for tests): what native code relies on to read
//! only inside the table, and what the Rust probe relies on to find every key.

use super::leaf::{fits, occupied, probe};
use super::trie::{level_bits, Node};
use super::{KeyHash, Table, MAX_LEVEL};

impl<const W: usize> Table<W> {
    /// Checks the invariants native code relies on; the first broken one (for tests): every
    /// reference names exactly the memory of the node it stands for (so a masked index stays
    /// inside it), leaves are power-of-two arrays at most a quarter full, keys sit where a probe
    /// finds them, and the counts add up.
    pub fn check_layout(&self) -> Result<(), String> {
        fn walk<const W: usize>(
            n: &Node<W>,
            level: u32,
            hash: &KeyHash,
            seen: &mut usize,
        ) -> Result<(), String> {
            match n {
                Node::Leaf { slots, count } => {
                    if !slots.is_empty() && !slots.len().is_power_of_two() {
                        return Err(format!("leaf of {} slots", slots.len()));
                    }
                    let real = occupied(slots).count();
                    if real != *count || !fits(real, slots.len()) {
                        return Err(format!(
                            "leaf of {} slots: {real} keys, counted {count}",
                            slots.len()
                        ));
                    }
                    for s in occupied(slots) {
                        let h = hash.hash(&s.key);
                        if probe(slots, h, &s.key)
                            != slots
                                .iter()
                                .position(|x| std::ptr::eq(x, s))
                                .unwrap_or(usize::MAX)
                        {
                            return Err(format!("key {:x?} not where its probe leads", s.key));
                        }
                    }
                    if slots.iter().any(|s| s.is_vacant() && s.key != [0; W]) {
                        return Err("vacant slot with key words".into());
                    }
                    *seen += real;
                    Ok(())
                }
                Node::Branch(b) => {
                    if level >= MAX_LEVEL {
                        return Err(format!("branch at level {level}"));
                    }
                    let fanout = 1 << level_bits(level);
                    if b.refs.len() != fanout || b.each_child().count() != fanout {
                        return Err(format!("branch of {} at level {level}", b.refs.len()));
                    }
                    for (i, (r, c)) in b.refs.iter().zip(b.each_child()).enumerate() {
                        if *r != c.native_ref() {
                            return Err(format!("stale reference {i} at level {level}"));
                        }
                        walk(c, level + 1, hash, seen)?;
                    }
                    Ok(())
                }
            }
        }
        if self.header.root != self.root.native_ref()
            || self.header.seeds != self.hash.seeds()
            || self.header.keys != self.len as u64
        {
            return Err("stale header".into());
        }
        let mut seen = 0;
        walk(&self.root, 0, &self.hash, &mut seen)?;
        if seen != self.len {
            return Err(format!("{seen} keys, counted {}", self.len));
        }
        Ok(())
    }
}
