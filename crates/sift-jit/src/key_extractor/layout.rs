//! What the emitter decides about a key program before emitting it ([`Layout`]): how far the
//! one bounds check per index reaches, which key words are adjacent big-endian loads read with
//! one wide load, which packet-order fields share one load ([`KeyOrder::Packet`], see
//! `key_order`), and which loads are then left out. Pure analysis of the steps; no code.

use super::program::defines_value;
use super::{key_order, KeyProgram, KeyStep, KEY_WORDS};

/// What the emitter knows about a program before emitting it.
pub(super) struct Layout {
    /// Per indexed load's index value: the furthest byte past the index any load at that index
    /// reads. The first load at an index checks that far, which covers every later one: the
    /// program is straight-line and any failed check rejects, so checking earlier changes only
    /// which check rejects, not whether the packet is rejected.
    index_ends: Vec<(u32, u64)>,
    /// Key words made of adjacent loads, in big-endian order (addresses, ports): read with one
    /// wide load instead of one load, swap, shift and or per field.
    pub(super) wide: [Option<WideWord>; KEY_WORDS],
    /// In [`KeyOrder::Packet`]: runs of fields read as they lie in the packet, each with one
    /// load (see `key_order`), and per step the run a `Key` step belongs to.
    pub(super) runs: Vec<Run>,
    pub(super) run_of_step: Vec<Option<usize>>,
    /// Per value: whether it is a load used only by `Key` steps into wide words or runs (its
    /// own load is then left out).
    pub(super) only_in_packed_words: Vec<bool>,
}

/// The order of the key's fields (see `key_order`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyOrder {
    /// The program's own key: big-endian field values.
    BigEndian,
    /// Fields that are plain loads as they lie in the packet ([`super::PacketOrder`]).
    Packet,
}

/// Fields adjacent in the packet and in their key word, in packet order: one load of
/// `bytes` (1, 2, 4 or 8) at `index + offset`, placed at bit `shift`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Run {
    pub(super) index: Option<u32>,
    pub(super) offset: u32,
    pub(super) bytes: u8,
    pub(super) shift: u8,
    /// The last `Key` step of the run, where the load is emitted.
    pub(super) last_step: usize,
}

/// The runs of a program's packet-order fields (`raw`: per step, see
/// `key_order::raw_key_steps`), and per step its run.
fn packet_runs(program: &KeyProgram, raw: &[bool]) -> (Vec<Run>, Vec<Option<usize>>) {
    // Per word: (index, offset, bytes, shift, step) of each field.
    type Field = (Option<u32>, u32, u8, u8, usize);
    let mut parts: [Vec<Field>; KEY_WORDS] = Default::default();
    for (at, step) in program.steps.iter().enumerate() {
        if let (true, KeyStep::Key { a, word, shift }) = (raw[at], *step) {
            if let Some((index, offset, bytes)) = key_order::load_of(program, a) {
                parts[usize::from(word)].push((index, offset, bytes, shift, at));
            }
        }
    }
    let mut runs = Vec::new();
    let mut run_of_step = vec![None; program.steps.len()];
    for mut word in parts {
        word.sort_by_key(|&(index, offset, ..)| (index, offset));
        let mut i = 0;
        while i < word.len() {
            // The longest stretch from `i` of fields that follow each other in the packet and
            // in the word whose bytes a single load can read.
            let (index, offset, _, shift, _) = word[i];
            let (mut end, mut total, mut take) = (i, 0u32, 0);
            while end < word.len() {
                let (ix, off, bytes, sh, _) = word[end];
                let follows = ix == index
                    && off == offset + total
                    && u32::from(sh) == u32::from(shift) + 8 * total;
                if !follows {
                    break;
                }
                total += u32::from(bytes);
                end += 1;
                if matches!(total, 1 | 2 | 4 | 8) {
                    take = end;
                }
            }
            let take = take.max(i + 1);
            let bytes: u32 = word[i..take].iter().map(|p| u32::from(p.2)).sum();
            for p in &word[i..take] {
                run_of_step[p.4] = Some(runs.len());
            }
            runs.push(Run {
                index,
                offset,
                bytes: bytes as u8,
                shift,
                last_step: word[i..take].iter().map(|p| p.4).max().expect("a field"),
            });
            i = take;
        }
    }
    (runs, run_of_step)
}

/// A load packed into a key word: `(offset, bytes, shift, index)`.
type Part = (u32, u8, u8, Option<u32>);

#[derive(Clone, Copy, Debug)]
pub(super) struct WideWord {
    pub(super) index: Option<u32>,
    pub(super) offset: u32,
    /// 2, 4 or 8.
    pub(super) bytes: u8,
    /// The last `Key` step into the word, where the load is emitted.
    pub(super) last_step: usize,
}

impl Layout {
    pub(super) fn of(program: &KeyProgram, order: KeyOrder) -> Layout {
        // Value number -> its load (index, offset, bytes).
        let mut loads: Vec<Option<(Option<u32>, u32, u8)>> = Vec::new();
        let mut index_ends: Vec<(u32, u64)> = Vec::new();
        // Per word: each part, and the last step.
        let mut parts: [Vec<Part>; KEY_WORDS] = Default::default();
        let mut plain = [false; KEY_WORDS];
        let mut last = [0usize; KEY_WORDS];
        for (at, step) in program.steps.iter().enumerate() {
            match *step {
                KeyStep::Load {
                    index,
                    offset,
                    bytes,
                } => {
                    if let Some(i) = index {
                        let end = u64::from(offset) + u64::from(bytes);
                        match index_ends.iter_mut().find(|(x, _)| *x == i) {
                            Some((_, e)) => *e = (*e).max(end),
                            None => index_ends.push((i, end)),
                        }
                    }
                    loads.push(Some((index, offset, bytes)));
                }
                KeyStep::Key { a, word, shift } => {
                    let w = usize::from(word);
                    last[w] = at;
                    match loads.get(a as usize).copied().flatten() {
                        Some((index, offset, bytes)) => {
                            parts[w].push((offset, bytes, shift, index))
                        }
                        None => plain[w] = true,
                    }
                }
                ref other if defines_value(other) => loads.push(None),
                _ => {}
            }
        }
        let wide: [Option<WideWord>; KEY_WORDS] = std::array::from_fn(|w| {
            if plain[w] || parts[w].len() < 2 {
                return None;
            }
            let mut p = parts[w].clone();
            p.sort_by_key(|&(offset, ..)| offset);
            let index = p[0].3;
            let total: u32 = p.iter().map(|&(_, bytes, ..)| u32::from(bytes)).sum();
            // Big-endian order: each part follows the previous in memory and sits just below
            // it in the word; the last part at bit 0.
            let adjacent = p.windows(2).all(|x| {
                x[1].0 == x[0].0 + u32::from(x[0].1)
                    && u32::from(x[0].2) == u32::from(x[1].2) + 8 * u32::from(x[1].1)
            });
            let same_index = p.iter().all(|x| x.3 == index);
            let ok = adjacent && same_index && p[p.len() - 1].2 == 0 && matches!(total, 2 | 4 | 8);
            ok.then_some(WideWord {
                index,
                offset: p[0].0,
                bytes: total as u8,
                last_step: last[w],
            })
        });
        let (wide, runs, run_of_step) = match order {
            KeyOrder::BigEndian => (wide, Vec::new(), vec![None; program.steps.len()]),
            KeyOrder::Packet => {
                let (runs, run_of_step) = packet_runs(program, &key_order::raw_key_steps(program));
                ([None; KEY_WORDS], runs, run_of_step)
            }
        };
        // Per value: (is a load, uses outside wide words and runs).
        let mut uses: Vec<(bool, usize)> = loads.iter().map(|l| (l.is_some(), 0)).collect();
        let mut count = |v: u32| {
            if let Some(u) = uses.get_mut(v as usize) {
                u.1 += 1;
            }
        };
        for (at, step) in program.steps.iter().enumerate() {
            match *step {
                KeyStep::Load { index, .. } => index.into_iter().for_each(&mut count),
                KeyStep::Bin { a, b, .. } | KeyStep::CheckValues { a, b, .. } => {
                    count(a);
                    count(b);
                }
                KeyStep::BinK { a, .. } | KeyStep::Neg(a) | KeyStep::Check { a, .. } => count(a),
                KeyStep::Key { a, word, .. } => {
                    if wide[usize::from(word)].is_none() && run_of_step[at].is_none() {
                        count(a);
                    }
                }
                KeyStep::Const(_) | KeyStep::WireLen => {}
            }
        }
        let only_in_packed_words = uses.iter().map(|&(load, n)| load && n == 0).collect();
        Layout {
            index_ends,
            wide,
            runs,
            run_of_step,
            only_in_packed_words,
        }
    }

    pub(super) fn index_end(&self, index: u32) -> u64 {
        self.index_ends
            .iter()
            .find(|(i, _)| *i == index)
            .map_or(0, |&(_, end)| end)
    }
}
