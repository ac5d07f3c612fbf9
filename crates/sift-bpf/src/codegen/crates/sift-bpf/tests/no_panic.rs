//! The readers never panic: random token soups and mutated real listings through the
//! assembler and the numeric formats, and random instruction arrays through validation,
//! interpretation, lifting and code generation.

use sift_bpf::{asm::assemble, compile, interp, lift, numeric, validate, Dialect, Insn, Program};
use sift_testgen::Rng;

const TOKENS: &[&str] = &[
    "ld",
    "ldh",
    "ldb",
    "ldx",
    "ldxb",
    "st",
    "stx",
    "jeq",
    "jne",
    "jgt",
    "jset",
    "ja",
    "ret",
    "add",
    "div",
    "lsh",
    "neg",
    "tax",
    "txa",
    "unimp",
    "#",
    "0x",
    "-",
    "[",
    "]",
    "x",
    "+",
    "M",
    "4*(",
    "&0xf)",
    "(",
    ")",
    "jt",
    "jf",
    ",",
    ":",
    "L1",
    "12",
    "255",
    "256",
    "4294967296",
    "0",
    "\t",
    " ",
    "\n",
    ";",
    "{",
    "}",
    "len",
    "#pktlen",
    "proto",
    "é",
    "999999999999999999",
];

#[test]
fn readers_never_panic() {
    let mut rng = Rng::new(1);
    for _ in 0..50_000 {
        let n = rng.below(24) as usize;
        let text: String = (0..n).map(|_| *rng.pick(TOKENS)).collect();
        let _ = assemble(&text);
        let _ = numeric::parse_ddd(&text);
        let _ = numeric::parse_dd(&text);
    }
    let listing = "(000) ldh      [12]\n(001) jeq      #0x800           jt 2\tjf 5\n(002) ldb      [23]\n(003) jeq      #0x6             jt 4\tjf 5\n(004) ret      #262144\n(005) ret      #0\n";
    for _ in 0..20_000 {
        let mut bytes = listing.as_bytes().to_vec();
        for _ in 0..1 + rng.below(4) {
            let i = rng.index(bytes.len());
            bytes[i] = *rng.pick(b"0123456789#[]x+-,:() \tjtfe\n");
        }
        let text = String::from_utf8_lossy(&bytes);
        let _ = assemble(&text);
    }
}

#[test]
fn arbitrary_instructions_never_panic_downstream() {
    let mut rng = Rng::new(2);
    for _ in 0..20_000 {
        let n = 8 * (1 + rng.below(10) as usize);
        let bytes = rng.bytes(n);
        let prog = numeric::from_bytes(&bytes, numeric::ByteOrder::Little).unwrap();
        for dialect in [Dialect::Libpcap, Dialect::Linux] {
            if let Ok(valid) = validate(&prog, dialect) {
                let n = rng.below(40) as usize;
                let pkt = rng.bytes(n);
                let want = interp::run(&valid, &pkt, 40);
                let back = compile(&lift(&valid)).unwrap();
                assert_eq!(interp::run(&back, &pkt, 40), want);
            }
        }
    }
    // Biased: mostly valid opcodes, so that many programs validate.
    let codes: Vec<u16> = (0..=0xffu16)
        .filter(|&c| Insn::stmt(c, 0).decode().is_some())
        .collect();
    let mut validated = 0;
    for _ in 0..20_000 {
        let len = 1 + rng.below(10) as usize;
        let insns: Vec<Insn> = (0..len)
            .map(|i| Insn {
                code: if i + 1 == len {
                    0x16
                } else {
                    *rng.pick(&codes)
                },
                jt: rng.below((len - i) as u64) as u8,
                jf: rng.below((len - i) as u64) as u8,
                k: if rng.chance(1, 2) {
                    rng.below(20) as u32
                } else {
                    rng.next_u32()
                },
            })
            .collect();
        if let Ok(valid) = validate(&Program(insns), Dialect::Libpcap) {
            validated += 1;
            let n = rng.below(40) as usize;
            let pkt = rng.bytes(n);
            let want = interp::run(&valid, &pkt, 7);
            let back = compile(&lift(&valid)).unwrap();
            assert_eq!(interp::run(&back, &pkt, 7), want);
        }
    }
    assert!(validated > 1000, "{validated}");
}
