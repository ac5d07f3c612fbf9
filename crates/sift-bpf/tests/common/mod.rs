//! Shared helpers of the differential tests: libpcap's `bpf_validate`, `bpf_filter` and
//! `bpf_image` on arbitrary instruction arrays (through `sift_oracle::raw`), the expression
//! lists, and a random program generator.

#![allow(dead_code)]

use sift_bpf::{code, Insn};
use sift_oracle::BpfInsn;
use sift_testgen::Rng;

pub fn to_c(insns: &[Insn]) -> Vec<BpfInsn> {
    insns
        .iter()
        .map(|i| BpfInsn {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect()
}

pub fn from_c(insns: &[BpfInsn]) -> Vec<Insn> {
    insns
        .iter()
        .map(|i| Insn {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect()
}

/// libpcap's `bpf_validate`.
pub fn libpcap_validate(insns: &[Insn]) -> bool {
    sift_oracle::raw::validate_insns(&to_c(insns))
}

/// libpcap's `bpf_filter`. Only for programs that `bpf_validate` accepts, that jump only forward,
/// whose opcodes all decode, and that never read a scratch word before storing it (libpcap
/// leaves them uninitialised).
pub fn libpcap_filter(insns: &[Insn], pkt: &[u8], wire_len: u32) -> u32 {
    sift_oracle::raw::run_insns(&to_c(insns), pkt, wire_len)
        .expect("a valid, forward-only, decodable program")
}

/// libpcap's `bpf_filter` on a program that sift's validator accepted, `protochain` loops
/// included (`sift_oracle::raw::run_insns` refuses backward jumps, not knowing whether they
/// stop). Where the walk is a cycle (sift's interpreter reports it endless) `bpf_filter` would
/// never return: it is not called, and the result is the IR's verdict, 0.
pub fn libpcap_filter_valid(prog: &sift_bpf::ValidProgram, pkt: &[u8], wire_len: u32) -> u32 {
    if prog.loops().is_empty() {
        return libpcap_filter(prog.insns(), pkt, wire_len);
    }
    if sift_bpf::interp::try_run(prog, pkt, wire_len).is_err() {
        return 0;
    }
    extern "C" {
        fn bpf_filter(pc: *const BpfInsn, p: *const u8, wirelen: u32, buflen: u32) -> u32;
    }
    let insns = to_c(prog.insns());
    let caplen = u32::try_from(pkt.len()).expect("packet shorter than 4 GiB");
    // SAFETY: the program passed sift's validator (every opcode is one `bpf_filter` executes,
    // every jump stays inside the program, the only backward jumps close protochain loops) and
    // sift's interpreter, executing the same instructions, terminated on this packet, so
    // bpf_filter does too; it reads `insns` and at most `caplen` bytes of `pkt`.
    unsafe { bpf_filter(insns.as_ptr(), pkt.as_ptr(), wire_len, caplen) }
}

/// libpcap's `bpf_image` for instruction `insn` at index `n`.
pub fn libpcap_image(insn: Insn, n: usize) -> String {
    sift_oracle::raw::image(&to_c(&[insn])[0], n)
}

/// `(linktype, expression)` pairs: the shared lists when present (`/work/shared/exprs`, the
/// accept table with its link types, `random.txt` on Ethernet), then `per_linktype` random
/// expressions for each link type.
pub fn expressions(linktypes: &[u32], per_linktype: usize, seed: u64) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let dir = std::path::Path::new("/work/shared/exprs");
    if let Ok(list) = sift_oracle::diff::load_shared_exprs(dir) {
        for (name, e) in list {
            if let Some(lt) = sift_oracle::linktype::from_name(&name) {
                out.push((lt, e));
            }
        }
    }
    if let Ok(text) = std::fs::read_to_string(dir.join("random.txt")) {
        out.extend(text.lines().map(|l| (1, l.to_string())));
    }
    for &lt in linktypes {
        for e in sift_testgen::random_expressions(seed ^ u64::from(lt), lt, per_linktype) {
            out.push((lt, e));
        }
    }
    out
}

/// Every opcode classic BPF executes.
pub fn valid_opcodes() -> Vec<u16> {
    (0..=0xffu16)
        .filter(|&c| Insn::stmt(c, 0).decode().is_some())
        .collect()
}

fn random_k(rng: &mut Rng) -> u32 {
    match rng.below(8) {
        0..=2 => rng.below(64) as u32,
        3 => *rng.pick(&[
            0,
            1,
            2,
            15,
            16,
            31,
            32,
            33,
            0xff,
            0xffff,
            u32::MAX,
            0x8000_0000,
        ]),
        4 => code::SKF_AD_OFF + 4 * rng.below(18) as u32,
        _ => rng.next_u32(),
    }
}

/// A random instruction sequence, biased towards valid-looking programs but with every kind of
/// defect (bad opcodes, jumps out of range or backwards, big scratch indices, missing `ret`).
pub fn random_insns(rng: &mut Rng, opcodes: &[u16]) -> Vec<Insn> {
    let len = 1 + rng.below(12) as usize;
    (0..len)
        .map(|i| {
            let code = match rng.below(10) {
                0 => rng.u16(),
                1 => rng.below(256) as u16,
                2 if i + 1 == len => 0x06,
                _ => *rng.pick(opcodes),
            };
            let left = (len - i) as u64;
            Insn {
                code,
                jt: rng.below(left + 1) as u8,
                jf: rng.below(left + 1) as u8,
                k: if code & 7 == 5 && rng.chance(1, 2) {
                    // ja: forward, out of range, or "negative".
                    (rng.below(left + 2) as u32).wrapping_sub(rng.below(3) as u32 * 2)
                } else if matches!(code, 0x60 | 0x61 | 0x02 | 0x03) {
                    rng.below(20) as u32
                } else {
                    random_k(rng)
                },
            }
        })
        .collect()
}

/// A random program that `bpf_filter` runs without undefined behaviour: valid, forward-only, and
/// every scratch word stored (with a random value) before the body runs.
pub fn random_valid_program(rng: &mut Rng, opcodes: &[u16]) -> Vec<Insn> {
    let mut insns = Vec::new();
    for m in 0..16 {
        insns.push(Insn::stmt(0x00, random_k(rng))); // ld #k
        insns.push(Insn::stmt(0x02, m)); // st M[m]
    }
    insns.push(Insn::stmt(0x01, rng.below(40) as u32)); // ldx #k
    let body = 1 + rng.below(40) as usize;
    let start = insns.len();
    let total = start + body + 1;
    for i in start..start + body {
        let left = (total - i - 1) as u64; // instructions after this one
        let mut code = *rng.pick(opcodes);
        let mut k = random_k(rng);
        // Loads at small offsets, so that some succeed.
        if matches!(code & 7, 0 | 1)
            && matches!(code & 0xe0, 0x20 | 0x40 | 0xa0)
            && rng.chance(3, 4)
        {
            k = rng.below(70) as u32;
        }
        if matches!(code, 0x60 | 0x61 | 0x02 | 0x03) {
            k &= 15;
        }
        if matches!(code, 0x34 | 0x94) && k == 0 {
            k = 1;
        }
        let (mut jt, mut jf) = (0u8, 0u8);
        if code & 7 == 5 {
            if code == 0x05 {
                k = rng.below(left.min(8)) as u32;
            } else {
                jt = rng.below(left.min(20)) as u8;
                jf = rng.below(left.min(20)) as u8;
            }
        }
        if (code == 0x06 || code == 0x16) && rng.chance(1, 2) {
            code = 0x04; // fewer early returns: longer paths
        }
        insns.push(Insn { code, jt, jf, k });
    }
    insns.push(if rng.chance(1, 2) {
        Insn::stmt(0x16, 0)
    } else {
        Insn::stmt(0x06, rng.next_u32())
    });
    insns
}

/// Random packets of 0..90 bytes, half of them starting like IPv4.
pub fn random_packets(rng: &mut Rng, n: usize) -> Vec<(Vec<u8>, u32)> {
    (0..n)
        .map(|_| {
            let len = rng.below(91) as usize;
            let mut p = rng.bytes(len);
            if len > 0 && rng.chance(1, 2) {
                p[0] = 0x45;
            }
            let wire = len as u32 + rng.below(3) as u32 * 100;
            (p, wire)
        })
        .collect()
}
