//! The model never panics, whatever program it is given: random instruction sequences (every
//! opcode class, random constants and jump offsets, programs that do and do not end in a
//! return) come back as an optimized program or an error.

use sift_bpf::{code, Insn};
use sift_testgen::Rng;

#[path = "common/model_input.rs"]
#[allow(dead_code)] // the fuzz target's decoding and property; only its opcodes are used here
mod model_input;

/// Opcodes libpcap's code generator and optimizer deal in, and a few that are not classic BPF.
fn codes() -> Vec<u16> {
    let mut codes = model_input::CODES.to_vec();
    codes.extend([code::RET | code::A, 0xffff]);
    codes
}

fn program(rng: &mut Rng, codes: &[u16]) -> Vec<Insn> {
    let len = 1 + rng.index(40);
    let mut prog: Vec<Insn> = (0..len)
        .map(|i| {
            let c = codes[rng.index(codes.len())];
            // Mostly small constants (scratch words, shifts, divisors), sometimes any.
            let k = if rng.below(4) == 0 {
                rng.next_u32()
            } else {
                rng.below(40) as u32
            };
            let room = (len - i) as u64;
            let (jt, jf) = (rng.below(room + 2) as u8, rng.below(room + 2) as u8);
            Insn::jump(c, k, jt, jf)
        })
        .collect();
    if rng.below(4) != 0 {
        prog.push(Insn::stmt(code::RET | code::K, 1));
    }
    prog
}

#[test]
fn random_programs_never_panic() {
    let mut rng = Rng::new(0x5eed_0b7f);
    let mut optimized = 0;
    let codes = codes();
    for _ in 0..200_000 {
        let prog = program(&mut rng, &codes);
        if sift_libpcap::optimize(&prog).is_ok() {
            optimized += 1;
        }
        let _ = sift_libpcap::relinearize(&prog);
    }
    eprintln!("{optimized} of 200,000 random programs optimized");
    assert!(
        optimized > 10_000,
        "too few random programs were valid: {optimized}"
    );
}
