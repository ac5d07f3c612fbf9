//! Inputs the `model` fuzz target (`fuzz/fuzz_targets/model.rs`) found, run through the same
//! decoding and property (`common/model_input.rs`), each within a time limit since the first
//! was a program the model never finished.

#[path = "common/model_input.rs"]
mod model_input;

use std::sync::mpsc;
use std::time::Duration;

use sift_bpf::{code::*, Insn};
use sift_libpcap::OptimizeError;

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|d| u8::from_str_radix(std::str::from_utf8(d).unwrap(), 16).unwrap())
        .collect()
}

/// `optimize(prog)`, failing the test instead of hanging when it does not return in time.
fn optimize_in_time(prog: Vec<Insn>) -> Result<Vec<Insn>, OptimizeError> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        model_input::check(&prog);
        let _ = tx.send(sift_libpcap::optimize(&prog));
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the model did not finish within 60 s")
}

/// `ld #1; jeq #0x2e` at the root (both targets the next block), then a `jeq #0` block
/// without statements. Every pass of libpcap's first loop, the peephole decides the root's
/// branch by its constant A and points both edges at the next block (a change that is not
/// only an edge move), and `opt_j` moves the true edge past that block, whose test the
/// decided `jeq` settles but which, having no statements, the peephole leaves alone. libpcap's
/// loop counts only passes that move edges alone, so it never stops; the model followed it
/// (libFuzzer's first input, raw decoding: an IPv4 `tcp port 0`-like program behind that root).
#[test]
fn constant_branch_before_an_empty_block_never_finishes() {
    let input = hex(
        "01 0000000001000000 150000002e000000 15000c0000000000 2000000000000000
            1500000b00000002 300000000d000000 1500000906000000 280000000a000000
            45000700ff1f0000 b100000004000000 4800000004000000 1500000400000000
            b100000004000000 4800000006000000 1500000100000000 0600000000000000
            0600000000000400",
    );
    let prog = model_input::program(&input);
    assert_eq!(prog.len(), 17);
    assert_eq!(optimize_in_time(prog), Err(OptimizeError::NeverFinishes));
    // The same cycle in five instructions.
    let small = vec![
        Insn::stmt(LD | IMM, 1),
        Insn::jump(JMP | JEQ | K, 0x2e, 0, 0),
        Insn::jump(JMP | JEQ | K, 0, 0, 1),
        Insn::stmt(RET | K, 0),
        Insn::stmt(RET | K, 262_144),
    ];
    assert_eq!(optimize_in_time(small), Err(OptimizeError::NeverFinishes));
}
