//! Frame elision: a leaf function that uses no stack runs without Cranelift's x86-64 frame.
//!
//! Cranelift 0.135 gives every x86-64 function a frame, whatever the settings or calling
//! convention: `push rbp; mov rbp, rsp` on entry and `mov rsp, rbp; pop rbp` before each `ret`.
//! A filter is a handful of instructions (`ip` is eight between the two), so those four are a
//! large share of each call, and the push/pop pair adds a store and a load to it. When the
//! function keeps nothing on the stack (no callee-saved registers, spills, stack slots or
//! outgoing arguments: Cranelift's frame layout puts nothing below the frame pointer) and calls
//! nothing (a call needs the stack aligned as the frame aligns it), the frame is never used:
//! nothing else reads `rbp` (Cranelift never allocates it) or `rsp`.
//!
//! Then the entry skips the prologue (whose bytes become a 4-byte NOP, so a jump back to the
//! entry block would still be harmless), and each epilogue is overwritten with `ret` (and
//! `int3` padding). The epilogues are found without decoding x86: each `return` instruction
//! gets a source location of its own ([`mark_returns`]), Cranelift records the byte range its
//! code (epilogue included) occupies, and the epilogue is the last five bytes of that range. Any
//! doubt — a range not ending in those five bytes, an unexpected prologue, a call — keeps the
//! frame: elision only ever removes instructions that provably do nothing.

use std::ops::Range;

use cranelift_codegen::ir::{Function, Opcode, SourceLoc};

/// `push rbp; mov rbp, rsp`.
const PROLOGUE: [u8; 4] = [0x55, 0x48, 0x89, 0xe5];
/// A 4-byte NOP (`nop dword [rax + 0]`), written over the prologue.
const NOP4: [u8; 4] = [0x0f, 0x1f, 0x40, 0x00];
/// `mov rsp, rbp; pop rbp; ret`: the whole epilogue when nothing lies below the frame pointer.
const EPILOGUE: [u8; 5] = [0x48, 0x89, 0xec, 0x5d, 0xc3];
/// `ret` and four `int3` (never reached).
const BARE_RETURN: [u8; 5] = [0xc3, 0xcc, 0xcc, 0xcc, 0xcc];

/// First source location given to `return` instructions (the generated code has no other
/// source locations).
const FIRST_RETURN_MARK: u32 = 1;

/// Gives every `return` instruction of `func` a source location of its own, so that the byte
/// range of its code can be found after compilation. Call before compiling.
pub(crate) fn mark_returns(func: &mut Function) {
    let mut returns = Vec::new();
    for block in func.layout.blocks() {
        for inst in func.layout.block_insts(block) {
            if func.dfg.insts[inst].opcode() == Opcode::Return {
                returns.push(inst);
            }
        }
    }
    for (k, inst) in returns.into_iter().enumerate() {
        func.set_srcloc(inst, SourceLoc::new(FIRST_RETURN_MARK + k as u32));
    }
}

/// Whether `func` calls anything (directly, indirectly, or as a tail call).
pub(crate) fn makes_calls(func: &Function) -> bool {
    func.layout.blocks().any(|block| {
        func.layout
            .block_insts(block)
            .any(|inst| func.dfg.insts[inst].opcode().is_call())
    })
}

/// What Cranelift reports about one compiled function, besides its bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Compiled {
    /// Bytes between the stack pointer and the frame pointer after the prologue (callee-saved
    /// registers, spills, stack slots, outgoing arguments); `None` when not reported.
    pub(crate) below_frame_pointer: Option<u32>,
    /// The function calls something, or has relocations (which only calls and symbols need).
    pub(crate) calls_or_relocations: bool,
    /// The byte range of each marked `return` instruction's code, in any order.
    pub(crate) return_ranges: Vec<Range<u32>>,
}

/// Removes the frame from the x86-64 machine code `code` when that is safe (see the module
/// docs), and returns the offset at which calls must enter the code: 4 past the prologue when
/// the frame was removed, else 0 (and `code` is unchanged).
pub(crate) fn elide(code: &mut [u8], compiled: &Compiled) -> usize {
    if !cfg!(target_arch = "x86_64")
        || compiled.below_frame_pointer != Some(0)
        || compiled.calls_or_relocations
        || compiled.return_ranges.is_empty()
        || !code.starts_with(&PROLOGUE)
    {
        return 0;
    }
    let mut epilogues = Vec::with_capacity(compiled.return_ranges.len());
    for range in &compiled.return_ranges {
        let (start, end) = (range.start as usize, range.end as usize);
        let Some(epilogue) = end.checked_sub(EPILOGUE.len()) else {
            return 0;
        };
        if end > code.len() || start < PROLOGUE.len() || epilogue < start {
            return 0;
        }
        if code[epilogue..end] != EPILOGUE {
            return 0;
        }
        epilogues.push(epilogue);
    }
    // Ranges of distinct instructions do not overlap; anything else is not understood.
    epilogues.sort_unstable();
    if epilogues.windows(2).any(|w| w[1] - w[0] < EPILOGUE.len()) {
        return 0;
    }
    code[..PROLOGUE.len()].copy_from_slice(&NOP4);
    for at in epilogues {
        code[at..at + EPILOGUE.len()].copy_from_slice(&BARE_RETURN);
    }
    PROLOGUE.len()
}

/// The byte ranges of the marked `return` instructions among Cranelift's source-location ranges
/// `(start, end, location)`.
pub(crate) fn return_ranges(
    ranges: impl IntoIterator<Item = (u32, u32, SourceLoc)>,
) -> Vec<Range<u32>> {
    ranges
        .into_iter()
        .filter(|&(_, _, loc)| !loc.is_default() && loc.bits() >= FIRST_RETURN_MARK)
        .map(|(start, end, _)| start..end)
        .collect()
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// `push rbp; mov rbp,rsp; xor eax,eax; mov rsp,rbp; pop rbp; ret`.
    fn leaf() -> Vec<u8> {
        let mut code = PROLOGUE.to_vec();
        code.extend([0x31, 0xc0]);
        code.extend(EPILOGUE);
        code
    }

    /// Facts of a leaf without stack, its returns at these `(start, end)` byte ranges.
    fn facts(ranges: &[(u32, u32)]) -> Compiled {
        Compiled {
            below_frame_pointer: Some(0),
            calls_or_relocations: false,
            return_ranges: ranges.iter().map(|&(s, e)| s..e).collect(),
        }
    }

    #[test]
    fn a_leaf_without_stack_loses_its_frame() {
        let mut code = leaf();
        let entry = elide(&mut code, &facts(&[(4, 11)]));
        assert_eq!(entry, 4);
        assert_eq!(&code[..4], &NOP4);
        assert_eq!(&code[4..6], &[0x31, 0xc0]);
        assert_eq!(&code[6..], &BARE_RETURN);
    }

    #[test]
    fn every_return_is_patched() {
        // Two returns: `xor eax,eax; <epilogue>` and `mov eax,1; <epilogue>`.
        let mut code = leaf();
        code.extend([0xb8, 1, 0, 0, 0]);
        code.extend(EPILOGUE);
        let entry = elide(&mut code, &facts(&[(16, 21), (6, 11)]));
        assert_eq!(entry, 4);
        assert_eq!(&code[6..11], &BARE_RETURN);
        assert_eq!(&code[16..21], &BARE_RETURN);
        assert!(!code.windows(5).any(|w| w == EPILOGUE));
    }

    #[test]
    fn any_doubt_keeps_the_frame() {
        let original = leaf();
        let cases = [
            // Something below the frame pointer (spills, saved registers), or not reported.
            Compiled {
                below_frame_pointer: Some(16),
                ..facts(&[(4, 11)])
            },
            Compiled {
                below_frame_pointer: None,
                ..facts(&[(4, 11)])
            },
            // Calls need the frame's stack alignment.
            Compiled {
                calls_or_relocations: true,
                ..facts(&[(4, 11)])
            },
            // No return found, a range that does not end in the epilogue, one out of bounds,
            // one inside the prologue, overlapping ones.
            facts(&[]),
            facts(&[(4, 10)]),
            facts(&[(4, 12)]),
            facts(&[(0, 11)]),
            facts(&[(6, 11), (6, 11)]),
        ];
        for compiled in cases {
            let mut code = original.clone();
            assert_eq!(elide(&mut code, &compiled), 0, "{compiled:?}");
            assert_eq!(code, original, "{compiled:?}");
        }
        // A prologue that is not the expected one.
        let mut code = original.clone();
        code[1] = 0x90;
        let before = code.clone();
        assert_eq!(elide(&mut code, &facts(&[(4, 11)])), 0);
        assert_eq!(code, before);
    }

    fn listing(text: &str) -> String {
        let program = sift_bytecode::verify(sift_bytecode::assemble(text).unwrap()).unwrap();
        crate::JitFilter::listing(&program, &crate::Options::default()).unwrap()
    }

    /// `ip` (branch-free) and an early-exit filter (two returns) run without a frame, in both
    /// entry points, and still agree with the interpreter (the guard-page, differential and
    /// random-program tests run such code on many more programs and packets).
    #[test]
    fn filters_run_without_a_frame() {
        if !crate::supported() {
            return;
        }
        let ip = "ld.h r0, [12]\n jeq r0, 2048, L3, L2\nL2:\n ret 0\nL3:\n ret 96\n";
        let exit = "ld.h r0, [12]\n jeq r0, 2048, L2, L8\nL2:\n ld.w r0, [26]\n jeq r0, 167837953, L4, L8\nL4:\n ld.b r0, [23]\n jeq r0, 6, L6, L8\nL6:\n ld.b r0, [22]\n jgt r0, 3, L9, L8\nL8:\n ret 0\nL9:\n ret 96\n";
        for text in [ip, exit] {
            let l = listing(text);
            assert!(l.contains("; filter: frame elided"), "{l}");
            assert!(l.contains("; batch: frame elided"), "{l}");
            let program = sift_bytecode::verify(sift_bytecode::assemble(text).unwrap()).unwrap();
            let jit = crate::JitFilter::compile(&program).unwrap();
            let mut cache = sift_bytecode::Cache::new();
            let mut p = [0u8; 40];
            p[12] = 8;
            p[23] = 6;
            p[22] = 9;
            p[26..30].copy_from_slice(&[10, 1, 1, 1]);
            let mut out = [7u32; 41];
            let packets: Vec<_> = (0..=40)
                .map(|n| crate::PacketRef::new(&p[..n], 40))
                .collect();
            jit.run_refs(&packets, &mut out);
            for n in 0..=40 {
                let want = program.run(&mut cache, &p[..n], 40);
                assert_eq!(jit.run(&p[..n], 40), want, "{text} caplen {n}");
                assert_eq!(out[n], want, "{text} batch, caplen {n}");
            }
        }
    }

    /// A program that calls a coprocessor keeps its frame (the call needs its alignment).
    #[test]
    fn code_that_calls_keeps_its_frame() {
        if !crate::supported() {
            return;
        }
        let l = listing(
            ".set s0 w32 = 0x50, 0x1f40-0x1fa4\n ld.h r0, [0]\n member r1, s0, r0\n ret r1\n",
        );
        assert!(l.contains("call"), "{l}");
        assert!(!l.contains("frame elided"), "{l}");
    }

    #[test]
    fn only_marked_locations_are_returns() {
        let ranges = return_ranges([
            (0, 4, SourceLoc::default()),
            (4, 9, SourceLoc::new(FIRST_RETURN_MARK)),
            (9, 20, SourceLoc::new(FIRST_RETURN_MARK + 3)),
        ]);
        assert_eq!(ranges, vec![4..9, 9..20]);
    }
}
