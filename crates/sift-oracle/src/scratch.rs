//! Programs that read a scratch word before storing it.
//!
//! libpcap's `bpf_filter` leaves its scratch memory (`M[0]`..`M[15]`) uninitialized, and libpcap
//! 1.10 compiles some filters into programs that read it on some paths: after `geneve`, the
//! inner packet's offsets live in scratch words that only a matching `geneve` writes, and a test
//! that also runs where it did not match (`geneve or ip`) reads them there. Their result then
//! depends on what the stack held. sift defines that memory as 0; to compare with it, such
//! programs run behind a prologue that zeroes every word ([`with_zeroed_scratch`]), which leaves
//! everything else about them unchanged.

use crate::BpfInsn;

const BPF_MEMWORDS: u32 = 16;

/// Whether some path through `insns` (forward jumps only; others count as reading) loads a
/// scratch word (`ld M[k]`, `ldx M[k]`) that no earlier instruction on that path stored.
pub fn reads_unstored_scratch(insns: &[BpfInsn]) -> bool {
    // For each instruction, the words stored on every path to it (all ones: not reached yet).
    let mut stored = vec![u16::MAX; insns.len() + 1];
    stored[0] = 0;
    for (i, insn) in insns.iter().enumerate() {
        let mut now = stored[i];
        let word = |k: u32| (k < BPF_MEMWORDS).then(|| 1u16 << k);
        match insn.code {
            0x60 | 0x61 if word(insn.k).is_none_or(|w| now & w == 0) => return true,
            0x02 | 0x03 => now |= word(insn.k).unwrap_or(0),
            _ => {}
        }
        let class = insn.code & 0x07;
        let successors: Vec<usize> = match (class, insn.code) {
            (0x06, _) => vec![],
            (0x05, 0x05) => {
                if (insn.k as i32) < 0 {
                    return true;
                }
                vec![i + 1 + insn.k as usize]
            }
            (0x05, _) => vec![i + 1 + usize::from(insn.jt), i + 1 + usize::from(insn.jf)],
            _ => vec![i + 1],
        };
        for s in successors {
            if let Some(slot) = stored.get_mut(s) {
                *slot &= now;
            }
        }
    }
    false
}

/// `insns` behind a prologue that stores 0 in every scratch word. Jumps are relative, so the
/// program itself is unchanged.
pub fn with_zeroed_scratch(insns: &[BpfInsn]) -> Vec<BpfInsn> {
    let insn = |code, k| BpfInsn {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let mut out = vec![insn(0x00, 0)]; // ld #0
    out.extend((0..BPF_MEMWORDS).map(|k| insn(0x02, k))); // st M[k]
    out.extend_from_slice(insns);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(code: u16, jt: u8, jf: u8, k: u32) -> BpfInsn {
        BpfInsn { code, jt, jf, k }
    }

    #[test]
    fn a_load_on_a_path_without_the_store_is_found() {
        // ldb [0]; jeq #1, store, skip; st M[3]; ldx M[3]; ret #1
        let maybe = [
            insn(0x30, 0, 0, 0),
            insn(0x15, 0, 1, 1),
            insn(0x02, 0, 0, 3),
            insn(0x61, 0, 0, 3),
            insn(0x06, 0, 0, 1),
        ];
        assert!(reads_unstored_scratch(&maybe));
        // The same with the store before the branch.
        let always = [
            insn(0x02, 0, 0, 3),
            insn(0x15, 0, 0, 1),
            insn(0x61, 0, 0, 3),
            insn(0x06, 0, 0, 1),
        ];
        assert!(!reads_unstored_scratch(&always));
        let zeroed = with_zeroed_scratch(&maybe);
        assert_eq!(zeroed.len(), maybe.len() + 17);
        assert!(!reads_unstored_scratch(&zeroed));
    }
}
