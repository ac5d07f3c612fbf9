//! The model never panics, whatever program it is given: random instruction sequences (every
//! opcode class, random constants and jump offsets, programs that do and do not end in a
//! return) come back as an optimized program or an error.

use sift_bpf::{code, Insn};
use sift_testgen::Rng;

/// Opcodes libpcap's code generator and optimizer deal in, and a few that are not classic BPF.
const CODES: &[u16] = &[
    code::LD | code::W | code::ABS,
    code::LD | code::H | code::ABS,
    code::LD | code::B | code::ABS,
    code::LD | code::W | code::IND,
    code::LD | code::H | code::IND,
    code::LD | code::B | code::IND,
    code::LD | code::W | code::LEN,
    code::LD | code::IMM,
    code::LD | code::MEM,
    code::LDX | code::IMM,
    code::LDX | code::MEM,
    code::LDX | code::W | code::LEN,
    code::LDX | code::B | code::MSH,
    code::ST,
    code::STX,
    code::ALU | code::ADD | code::K,
    code::ALU | code::SUB | code::X,
    code::ALU | code::MUL | code::K,
    code::ALU | code::DIV | code::K,
    code::ALU | code::DIV | code::X,
    code::ALU | code::MOD | code::K,
    code::ALU | code::AND | code::K,
    code::ALU | code::OR | code::X,
    code::ALU | code::LSH | code::K,
    code::ALU | code::RSH | code::X,
    code::ALU | code::NEG,
    code::ALU | code::XOR | code::K,
    code::JMP | code::JA,
    code::JMP | code::JEQ | code::K,
    code::JMP | code::JGT | code::X,
    code::JMP | code::JGE | code::K,
    code::JMP | code::JSET | code::K,
    code::RET | code::K,
    code::RET | code::A,
    code::MISC | code::TAX,
    code::MISC | code::TXA,
    0xffff,
];

fn program(rng: &mut Rng) -> Vec<Insn> {
    let len = 1 + rng.index(40);
    let mut prog: Vec<Insn> = (0..len)
        .map(|i| {
            let c = CODES[rng.index(CODES.len())];
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
    for _ in 0..200_000 {
        let prog = program(&mut rng);
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
