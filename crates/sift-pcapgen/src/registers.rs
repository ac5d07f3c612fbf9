//! gencode's scratch-register allocator (`alloc_reg` / `free_reg`), replayed.
//!
//! The slot a value gets depends on every allocation and release since the start of the
//! filter, not only on its own expression: the search for a free slot starts at the last slot
//! handed out. So one allocator is run over all the filter's arithmetic, in the order gencode
//! parsed it.

/// Number of scratch memory words (`BPF_MEMWORDS`).
const SLOTS: usize = sift_bpf::code::MEMWORDS as usize;

/// Which slots are taken and where the next search starts.
#[derive(Clone, Debug, Default)]
pub struct Registers {
    used: [bool; SLOTS],
    current: usize,
}

impl Registers {
    /// The first free slot from the current one on, wrapping around; it becomes the current
    /// one, so a slot freed and asked for again at once comes straight back. `None` when all
    /// 16 are taken (gencode's "too many registers needed").
    pub fn alloc(&mut self) -> Option<u32> {
        for _ in 0..SLOTS {
            if self.used[self.current] {
                self.current = (self.current + 1) % SLOTS;
            } else {
                self.used[self.current] = true;
                return Some(self.current as u32);
            }
        }
        None
    }

    /// Gives a slot back (the current slot does not move).
    pub fn free(&mut self, slot: u32) {
        if let Some(u) = self.used.get_mut(slot as usize) {
            *u = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_starts_at_the_last_slot_handed_out() {
        let mut r = Registers::default();
        assert_eq!((r.alloc(), r.alloc()), (Some(0), Some(1)));
        r.free(0);
        // 1 is current and taken: the search goes on to 2, not back to the free 0.
        assert_eq!(r.alloc(), Some(2));
        r.free(2);
        assert_eq!(r.alloc(), Some(2));
        for k in 3..16 {
            assert_eq!(r.alloc(), Some(k));
        }
        assert_eq!(r.alloc(), Some(0));
        assert_eq!(r.alloc(), None);
    }
}
