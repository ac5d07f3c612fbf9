//! Runs of a `switch`'s keys: consecutive keys with one target. A back end tests a run as one
//! range (a subtraction and an unsigned compare, or two compares) instead of key by key, so a
//! port list written out (`port 1000 or port 1001 or ... or port 10999`, one table of 10,000
//! keys after sift-opt) is one test instead of thousands of instructions or a jump table.

/// Keys `lo..=hi`, all going to `target`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run<T> {
    pub lo: u32,
    pub hi: u32,
    pub target: T,
}

impl<T> Run<T> {
    /// How many keys the run holds (at least 1).
    pub fn key_count(&self) -> u64 {
        u64::from(self.hi - self.lo) + 1
    }
}

/// `cases` (distinct keys with their targets, in any order) as maximal runs of consecutive
/// keys with one target, in key order.
pub fn runs<T: Copy + PartialEq>(cases: impl IntoIterator<Item = (u32, T)>) -> Vec<Run<T>> {
    let mut sorted: Vec<(u32, T)> = cases.into_iter().collect();
    sorted.sort_unstable_by_key(|&(key, _)| key);
    let mut runs: Vec<Run<T>> = Vec::new();
    for (key, target) in sorted {
        match runs.last_mut() {
            Some(run) if run.target == target && run.hi.checked_add(1) == Some(key) => {
                run.hi = key;
            }
            _ => runs.push(Run {
                lo: key,
                hi: key,
                target,
            }),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(lo: u32, hi: u32, target: u8) -> Run<u8> {
        Run { lo, hi, target }
    }

    #[test]
    fn consecutive_keys_with_one_target_join() {
        let cases = [
            (5, 1),
            (1, 1),
            (2, 1),
            (6, 1),
            (3, 2),
            (4, 2),
            (9, 1),
            (10, 1),
        ];
        assert_eq!(
            runs(cases),
            vec![run(1, 2, 1), run(3, 4, 2), run(5, 6, 1), run(9, 10, 1)]
        );
        assert_eq!(runs(cases)[0].key_count(), 2);
        assert_eq!(runs([(7, 0)]), vec![run(7, 7, 0)]);
        assert_eq!(runs::<u8>([]), vec![]);
    }

    #[test]
    fn a_run_ending_at_the_largest_key_does_not_wrap_to_zero() {
        let cases = [(u32::MAX - 1, 1), (u32::MAX, 1), (0, 1), (1, 1)];
        assert_eq!(
            runs(cases),
            vec![run(0, 1, 1), run(u32::MAX - 1, u32::MAX, 1)]
        );
        assert_eq!(run(0, u32::MAX, 0).key_count(), 1 << 32);
    }
}
