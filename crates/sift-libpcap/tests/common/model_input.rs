//! Bytes to a classic BPF program, and the property the `model` fuzz target checks on it
//! (`fuzz/fuzz_targets/model.rs` includes this file; `tests/fuzz_regressions.rs` runs what the
//! fuzzer found through it).
//!
//! The first byte picks the decoding. Odd: 8 bytes per instruction as in `struct sock_filter`
//! (code u16, jt u8, jf u8, k u32, little-endian), anything goes. Even: 4 bytes per instruction
//! (opcode, constant, jt, jf), the opcode one of those libpcap's code generator emits, small
//! constants (scratch words in range) or ones header tests use, jumps that stay inside the
//! program, and a final `ret`: programs that get past the model's input checks into its passes.

use sift_bpf::{code::*, Dialect, Insn, Program};

/// What libpcap's code generator emits (`ja` only as a long-jump trampoline).
#[rustfmt::skip]
pub const CODES: &[u16] = &[
    LD | W | ABS, LD | H | ABS, LD | B | ABS, LD | W | IND, LD | H | IND, LD | B | IND,
    LD | W | LEN, LD | IMM, LD | MEM, LDX | IMM, LDX | MEM, LDX | W | LEN, LDX | B | MSH, ST, STX,
    ALU | ADD | K, ALU | ADD | X, ALU | SUB | K, ALU | SUB | X, ALU | MUL | K, ALU | MUL | X,
    ALU | DIV | K, ALU | DIV | X, ALU | MOD | K, ALU | MOD | X, ALU | AND | K, ALU | AND | X,
    ALU | OR | K, ALU | OR | X, ALU | XOR | K, ALU | XOR | X, ALU | LSH | K, ALU | LSH | X,
    ALU | RSH | K, ALU | RSH | X, ALU | NEG, MISC | TAX, MISC | TXA, JMP | JA,
    JMP | JEQ | K, JMP | JEQ | X, JMP | JGT | K, JMP | JGT | X, JMP | JGE | K, JMP | JGE | X,
    JMP | JSET | K, JMP | JSET | X, RET | K,
];

/// Constants header tests use, for the constant bytes 192 and up.
#[rustfmt::skip]
const WIDE: [u32; 16] = [
    0x800, 0x86dd, 0x806, 0x8100, 0x1fff, 0xf0, 0xff, 0xffff, 0xffff_ffff, 0x8000_0000,
    0x0a00_0001, 0xffff_ff00, 262_144, 1500, 31, 32,
];

/// At most this many instructions (the model is quadratic in a long chain, as libpcap is).
const MAX_LEN: usize = 512;

/// The program `data` stands for.
pub fn program(data: &[u8]) -> Vec<Insn> {
    match data.split_first() {
        Some((mode, rest)) if mode & 1 == 1 => raw(rest),
        Some((_, rest)) => structured(rest),
        None => Vec::new(),
    }
}

fn raw(data: &[u8]) -> Vec<Insn> {
    let insn = |b: &[u8]| {
        let k = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        Insn::jump(u16::from_le_bytes([b[0], b[1]]), k, b[2], b[3])
    };
    data.chunks_exact(8).take(MAX_LEN).map(insn).collect()
}

fn structured(data: &[u8]) -> Vec<Insn> {
    let chunks: Vec<&[u8]> = data.chunks_exact(4).take(MAX_LEN).collect();
    let n = chunks.len();
    let mut prog: Vec<Insn> = chunks
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let code = CODES[usize::from(b[0]) % CODES.len()];
            // How many instructions a jump may skip: up to the final `ret`.
            let room = (n - 1 - i).min(255) as u16 + 1;
            let skip = |b: u8| (u16::from(b) % room) as u8;
            let k = if [LD | MEM, LDX | MEM, ST, STX].contains(&code) {
                u32::from(b[1] % 16)
            } else if code == JMP | JA {
                u32::from(skip(b[1]))
            } else if b[1] < 192 {
                u32::from(b[1] % 48)
            } else {
                WIDE[usize::from(b[1] % 16)]
            };
            Insn::jump(code, k, skip(b[2]), skip(b[3]))
        })
        .collect();
    prog.push(Insn::stmt(RET | K, 262_144));
    prog
}

/// The model returns (a program or an error) without panicking, and a program that passes
/// `sift_bpf::validate` (libpcap dialect) optimizes to one that passes it too.
pub fn check(prog: &[Insn]) {
    let _ = sift_libpcap::relinearize(prog);
    let optimized = sift_libpcap::optimize(prog);
    let valid = sift_bpf::validate(&Program(prog.to_vec()), Dialect::Libpcap).is_ok();
    if let (true, Ok(out)) = (valid, optimized) {
        if let Err(err) = sift_bpf::validate(&Program(out.clone()), Dialect::Libpcap) {
            panic!("valid input {prog:?}\noptimized to an invalid program {out:?}\n{err}");
        }
    }
}
