//! Cost of coprocessor calls: ns/packet of the bytecode interpreter and the JIT (single entry
//! and batch) on programs that test a port with a compare (no call) and with `member` (small and
//! large 32-bit sets, a 128-bit set), and that search the payload with `contains` (one search,
//! and two calls on one search thanks to the memo).
//!
//! Run with `CARGO_TARGET_DIR=target-sift-jit cargo bench -p sift-jit --bench calls`.
//!
//! Packets: 2,000 Ethernet/IPv4/TCP packets of 60 to 250 bytes, destination ports drawn from the
//! sets' members and others, payloads of random text of which a quarter starts with an HTTP
//! request line. Each cell is the best of 7 timed passes (after a warm-up) of `REPS` rounds
//! over all packets; the JIT's results are checked against the interpreter's first.

mod common;

use std::hint::black_box;

use common::{best_ns, time_batch};
use sift_bytecode::{assemble, verify, Cache, VerifiedProgram};
use sift_jit::{JitFilter, PacketRef};
use sift_testgen::Rng;

const REPS: usize = 50;

fn packets(rng: &mut Rng) -> Vec<Vec<u8>> {
    (0..2000)
        .map(|_| {
            let mut p = vec![0u8; 54];
            p[12] = 0x08;
            p[14] = 0x45;
            p[23] = 6;
            for b in &mut p[26..34] {
                *b = rng.byte();
            }
            let other = rng.u16();
            let port: u16 = *rng.pick(&[80, 443, 8080, 22, 53, 1234, other]);
            p[36..38].copy_from_slice(&port.to_be_bytes());
            if rng.chance(1, 4) {
                p.extend_from_slice(b"GET /index.html HTTP/1.1\r\n");
            }
            let n = rng.index(200);
            p.extend((0..n).map(|_| b'a' + rng.below(26) as u8));
            p
        })
        .collect()
}

/// Best ns per packet over 7 passes, each running `f` over all packets `REPS` times.
fn time(packets: &[Vec<u8>], mut f: impl FnMut(&[u8], u32) -> u32) -> f64 {
    best_ns(REPS * packets.len(), || {
        let mut acc = 0u32;
        for _ in 0..REPS {
            for p in packets {
                acc = acc.wrapping_add(f(black_box(p), black_box(p.len() as u32)));
            }
        }
        black_box(acc);
    })
}

/// The same calls made straight from Rust (`Coprocessors::member`/`contains` on the fields the
/// program reads, a memo moved to the next packet each time): the coprocessors' own cost.
fn direct(program: &VerifiedProgram, packets: &[Vec<u8>]) -> f64 {
    use sift_bytecode::{Insn, Key};
    let Some(c) = program.coprocessors() else {
        return 0.0;
    };
    let code = &program.program().code;
    let mut memo = sift_coproc::Memo::new();
    let wide = code.iter().any(|i| {
        matches!(
            i,
            Insn::Member {
                key: Key::W128(_),
                ..
            }
        )
    });
    let searches = code
        .iter()
        .filter(|i| matches!(i, Insn::Contains { .. }))
        .count() as u32;
    let word = |p: &[u8], at: usize| u32::from_be_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]]);
    time(packets, |p, _| {
        if searches > 0 {
            memo.next_packet();
            (0..searches).fold(1, |acc, i| {
                acc & u32::from(c.contains(&mut memo, 0, i, p, 54))
            })
        } else if wide {
            let key = [word(p, 26), word(p, 30), word(p, 22), word(p, 18)];
            u32::from(c.member(0, &key))
        } else {
            u32::from(c.member(0, &[u32::from(p[36]) << 8 | u32::from(p[37])]))
        }
    })
}

fn programs(rng: &mut Rng) -> Vec<(&'static str, VerifiedProgram)> {
    let large: Vec<String> = (0..10_000)
        .map(|i| format!("{:#x}", if i == 0 { 80 } else { rng.next_u32() }))
        .collect();
    let texts = [
        (
            "jeq port (no call)",
            "    ld.h r0, [36]\n    jeq r0, 80, L3, L2\nL2:\n    ret 0\nL3:\n    ret 1\n"
                .to_string(),
        ),
        (
            "member, 3 ranges",
            ".set s0 w32 = 0x50, 0x1bb, 0x1f40-0x1fa4\n    ld.h r0, [36]\n    member r1, s0, r0\n    ret r1\n"
                .to_string(),
        ),
        (
            "member, 10,000 keys",
            format!(
                ".set s0 w32 = {}\n    ld.h r0, [36]\n    member r1, s0, r0\n    ret r1\n",
                large.join(", ")
            ),
        ),
        (
            "member, 128-bit",
            ".set s0 w128 = 0x0-0xffffffffffffffff0000000000000000\n    ld.w r0, [26]\n    ld.w r1, [30]\n    ld.w r2, [22]\n    ld.w r3, [18]\n    member r4, s0, r0, r1, r2, r3\n    ret r4\n"
                .to_string(),
        ),
        (
            "contains \"GET /\" from 54",
            ".pattern p0 = \"GET /\"\n    mov r0, 54\n    contains r1, p0.0, r0\n    ret r1\n"
                .to_string(),
        ),
        (
            "2 contains, one search",
            ".pattern p0 = \"GET /\"\n.pattern p0 = \"HTTP/1.1\"\n    mov r0, 54\n    contains r1, p0.0, r0\n    contains r2, p0.1, r0\n    and r1, r1, r2\n    ret r1\n"
                .to_string(),
        ),
    ];
    texts
        .into_iter()
        .map(|(name, text)| {
            let program = verify(assemble(&text).expect("assembles")).expect("verifies");
            (name, program)
        })
        .collect()
}

fn main() {
    if !sift_jit::supported() {
        println!("JIT not supported on this host");
        return;
    }
    let mut rng = Rng::new(0xbe7c);
    let packets = packets(&mut rng);
    let refs: Vec<PacketRef> = packets
        .iter()
        .map(|p| PacketRef::new(p, p.len() as u32))
        .collect();
    let mut out = vec![0u32; refs.len()];
    let mut cache = Cache::new();
    println!(
        "{} packets, best of 7 passes x {REPS}; ns/packet\n",
        packets.len()
    );
    println!("| program | interp | jit | jit batch | Rust calls | match % |");
    println!("|---|---:|---:|---:|---:|---:|");
    let rounds: Vec<PacketRef> = refs
        .iter()
        .cycle()
        .take(REPS * refs.len())
        .copied()
        .collect();
    for (name, program) in programs(&mut rng) {
        let jit = JitFilter::compile(&program).expect("jit");
        jit.run_refs(&refs, &mut out);
        let mut matched = 0;
        for (p, &batch) in packets.iter().zip(&out) {
            let want = program.run(&mut cache, p, p.len() as u32);
            assert_eq!(jit.run(p, p.len() as u32), want, "{name}");
            assert_eq!(batch, want, "{name}: batch");
            matched += usize::from(want != 0);
        }
        let t_interp = time(&packets, |d, w| program.run(&mut cache, d, w));
        let t_jit = time(&packets, |d, w| jit.run(d, w));
        let t_batch = time_batch(&jit, &rounds, &mut out);
        let t_rust = direct(&program, &packets);
        println!(
            "| {name} | {t_interp:.2} | {t_jit:.2} | {t_batch:.2} | {t_rust:.2} | {:.1} |",
            100.0 * matched as f64 / packets.len() as f64
        );
    }
}
