//! Code generation: sift IR to classic BPF, the back end behind `sift compile` and kernel socket
//! filters.
//!
//! Four steps, one module each (and their helpers: [`regs`], [`classes`], [`patterns`],
//! [`recompute`], [`coalesce`], [`deadregs`], [`bounds`], [`forward`], [`unthread`],
//! [`suffix`]):
//!
//! 1. [`select`] walks the blocks in reverse postorder (a topological order, so every jump is
//!    forward) and emits instructions with symbolic jump targets and virtual scratch slots. It
//!    tracks what `A` and `X` hold ([`regs`]), also across blocks and as value classes
//!    ([`classes`]: equal twins on sibling paths count as one), rematerialises values that
//!    take one instruction, turns the IPv4 header length into `ldxb 4*([k]&0xf)` ([`patterns`];
//!    a mask it shares with one other reader is computed at that reader), computes a sum
//!    `b + k` with one reader at that reader and copies a parameter read first as a load's
//!    index into `X` on every edge ([`recompute`]), and lowers a `Switch` to a `jeq` chain (the
//!    smallest form: a binary search tree only adds `jgt`s), with a `jge`/`jgt` pair for each
//!    run of three or more consecutive keys with one target ([`sift_ir::runs`]).
//! 2. [`alloc`] drops stores nobody reloads, gives block parameters their arguments' words
//!    where no reload can tell ([`coalesce`], which elides those copies), and maps the virtual
//!    slots to `M[0..16]` by interval colouring over the linear order (sound because the order is
//!    topological: a value is only live between its definition and its last use in that
//!    order). More than 16 values live at once is an error.
//! 3. [`machine`] splits the code into pieces, drops register writes nobody reads
//!    ([`deadregs`]: the loads of elided copies, and packet loads [`bounds`] proves can not
//!    fail), turns a store reloaded into `X` soon after into a `tax` ([`forward`]), threads
//!    jumps, merges identical tails (sending a jump through a decided wire-length test where
//!    that makes two tails one, [`unthread`]), shares common suffixes of pieces ([`suffix`],
//!    cross-jumping) and lays the pieces out so that unconditional jumps fall through.
//! 4. [`layout`] resolves labels into offsets, drops jumps to the next instruction, and sends a
//!    conditional jump whose target is more than 255 instructions away through a shared `ja`
//!    (or `ret`) island, or a trampoline right behind it.
//!
//! The result is validated ([`crate::validate()`], libpcap dialect) before it is returned, so a
//! bug here is an error, never an invalid program.
//!
//! # `protochain`
//!
//! For [`Dialect::Libpcap`] (what `sift compile -d` prints) each [`sift_ir::Inst::Protochain`]
//! becomes libpcap's loop ([`crate::protochain::loop_code`], 11 instructions for IPv4, 24 for
//! IPv6), exact on every packet: the interpreter rejects a walk that would never end, as the
//! IR does. The Linux kernel refuses backward jumps, so for [`Dialect::Linux`] every walk is
//! first unrolled to [`UNROLLED_HEADERS`] headers (`sift_ir::protochain::without_loops`, about
//! 21 instructions per header): exact on every chain of at most that many headers; a packet
//! whose chain goes on is rejected.

// The module doc walks maintainers through the private steps, so it links to them.
#![allow(rustdoc::private_intra_doc_links)]

mod alloc;
mod bounds;
mod classes;
mod coalesce;
mod deadregs;
mod forward;
#[cfg(test)]
mod geneve_tests;
mod layout;
mod machine;
mod patterns;
mod recompute;
mod regs;
mod select;
mod suffix;
mod unthread;

use std::fmt;

use sift_ir::{Function, Value};

/// How many headers the kernel form of a `protochain` walk follows ([`Dialect::Linux`]).
pub const UNROLLED_HEADERS: usize = sift_ir::protochain::UNROLLED_HEADERS;

use crate::insn::{Insn, Op, Program};
use crate::validate::{validate, Dialect, ValidProgram, ValidationError};

/// Why a function could not be compiled to classic BPF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodegenError {
    /// The function does not pass `sift_ir::verify`.
    InvalidIr(sift_ir::VerifyError),
    /// More values are live at once than classic BPF has scratch words (16).
    TooManyLiveValues {
        /// The value that found no free word.
        value: Value,
        /// How many were live.
        live: usize,
    },
    /// The program would exceed the kernel's 4096-instruction limit ([`Dialect::Linux`]; libpcap's
    /// dialect has none), or the generated code failed validation (a bug in this module).
    Invalid(ValidationError),
    /// The function calls a coprocessor (payload search or set lookup, sift extensions), which
    /// classic BPF has no instruction for.
    CoprocessorCall(Value),
    /// [`Dialect::Linux`]: compiling the function with its `protochain` walks unrolled to
    /// [`UNROLLED_HEADERS`] headers (the kernel refuses loops) failed, mostly because the
    /// unrolled code exceeds 4096 instructions.
    Unrolled(Box<CodegenError>),
}

impl fmt::Display for CodegenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodegenError::InvalidIr(e) => write!(f, "{e}"),
            CodegenError::TooManyLiveValues { value, live } => write!(
                f,
                "{value} needs a scratch word while {live} values are live (classic BPF has 16)"
            ),
            CodegenError::Invalid(e) => write!(f, "generated code is not valid: {e}"),
            CodegenError::CoprocessorCall(v) => write!(
                f,
                "{v} calls a coprocessor (payload matching or a set lookup), which classic BPF cannot express"
            ),
            CodegenError::Unrolled(e) => write!(
                f,
                "for the Linux kernel, which refuses loops, protochain is unrolled to \
                 {UNROLLED_HEADERS} headers (longer chains are rejected): {e}"
            ),
        }
    }
}

impl std::error::Error for CodegenError {}

/// Compiles a verified IR function into a classic BPF program returning the same value on
/// every packet, valid under libpcap's rules (see [`compile_for`] for the kernel's).
pub fn compile(func: &Function) -> Result<ValidProgram, CodegenError> {
    compile_for(func, Dialect::Libpcap)
}

/// Like [`compile`], for a given validator dialect. For [`Dialect::Linux`], `protochain`
/// walks are unrolled to [`UNROLLED_HEADERS`] headers (the kernel refuses the loop; a packet
/// whose chain is longer is rejected), and when the kernel's conservative scratch-flow check
/// (which does not forget the state after a `ret`) would refuse the program, every scratch word
/// used is first stored with 0 (`A` is 0 on entry), which costs one instruction per word and
/// changes no result.
pub fn compile_for(func: &Function, dialect: Dialect) -> Result<ValidProgram, CodegenError> {
    sift_ir::verify(func).map_err(CodegenError::InvalidIr)?;
    if let Some(v) = func.first_call() {
        return Err(CodegenError::CoprocessorCall(v));
    }
    match dialect {
        Dialect::Libpcap => generate(func, dialect),
        Dialect::Linux => match sift_ir::protochain::without_loops(func) {
            std::borrow::Cow::Borrowed(f) => generate(f, dialect),
            std::borrow::Cow::Owned(f) => {
                generate(&f, dialect).map_err(|e| CodegenError::Unrolled(Box::new(e)))
            }
        },
    }
}

/// Selection, allocation, layout and validation of a verified function without calls.
fn generate(func: &Function, dialect: Dialect) -> Result<ValidProgram, CodegenError> {
    let items = select::select(func);
    let items = alloc::allocate(items)?;
    let items = machine::optimize(&items);
    let insns = layout::resolve(&items);
    match validate(&Program(insns.clone()), dialect) {
        Err(_) if dialect == Dialect::Linux => {
            let mut used: Vec<u32> = insns
                .iter()
                .filter(|i| matches!(i.decode(), Some(Op::St | Op::LdMem | Op::LdxMem)))
                .map(|i| i.k)
                .collect();
            used.sort_unstable();
            used.dedup();
            let mut prologue: Vec<Insn> = used.into_iter().map(|k| Op::St.with_k(k)).collect();
            prologue.extend(insns);
            validate(&Program(prologue), dialect).map_err(CodegenError::Invalid)
        }
        result => result.map_err(CodegenError::Invalid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{disasm::disassemble, interp};
    use sift_ir::{parse_function, Cache, Interpreter};

    /// Compiles IR text and checks the program against the IR interpreter on `packets`.
    pub(super) fn check(text: &str, packets: &[Vec<u8>]) -> ValidProgram {
        let f = parse_function(text).unwrap();
        let p = compile(&f).unwrap_or_else(|e| panic!("{e}\n{f}"));
        let ir = Interpreter::new(f).unwrap();
        for pkt in packets {
            let want = ir.run(&mut Cache::new(), pkt, pkt.len() as u32);
            let got = interp::run(&p, pkt, pkt.len() as u32);
            assert_eq!(got, want, "{}\n{pkt:?}", disassemble(&p.to_program()));
        }
        p
    }

    #[test]
    fn simple_filter_is_tight() {
        let p = check(
            "block0:\n v0 = load.h [12]\n v1 = const 0x800\n br eq v0, v1, block1, block2\nblock1:\n ret 100\nblock2:\n ret 0\n",
            &[vec![0; 14], {
                let mut v = vec![0; 14];
                v[12] = 8;
                v
            }],
        );
        assert_eq!(
            disassemble(&p.to_program()),
            "(000) ldh      [12]\n(001) jeq      #0x800           jt 3\tjf 2\n(002) ret      #0\n(003) ret      #100\n"
        );
    }

    #[test]
    fn parameters_switch_and_spills() {
        let text = "\
block0:
    v0 = load.b [0]
    v1 = load.b [1]
    v2 = const 3
    switch v0, default block3, 1: block1, 2: block2(v1), 3: block2(v0)
block1:
    v3 = const 7
    jump block2(v3)
block2(v4):
    v5 = add v4, v1
    v6 = const 2
    v7 = div v5, v6
    v8 = const 0
    br ne v7, v8, block4, block3
block3:
    ret 0
block4:
    ret v7
";
        let mut pkts = Vec::new();
        for a in 0..5u8 {
            for b in [0u8, 1, 9, 200] {
                pkts.push(vec![a, b]);
            }
        }
        pkts.push(vec![1]);
        check(text, &pkts);
    }

    #[test]
    fn division_by_constant_zero_and_big_shifts_keep_ir_semantics() {
        let text = "\
block0:
    v0 = load.b [0]
    v1 = const 33
    v2 = shl v0, v1
    v3 = const 0
    v4 = add v2, v0
    v5 = mod v4, v3
    ret v4
";
        check(text, &[vec![1], vec![0], vec![]]);
    }

    #[test]
    fn far_branches_get_trampolines() {
        let mut text = String::from(
            "block0:\n v0 = load.b [0]\n v1 = const 1\n br eq v0, v1, block1, block2\nblock1:\n",
        );
        // Distinct offsets: a dead load of bytes read before cannot fail and is dropped.
        for i in 0..300 {
            text.push_str(&format!(" v{} = load.b [{}]\n", i + 2, i));
        }
        text.push_str(" jump block2\nblock2:\n ret 5\n");
        let p = check(&text, &[vec![1; 300], vec![0; 300], vec![1; 3]]);
        assert!(p.len() > 300);
    }

    #[test]
    fn header_length_is_one_ldxb_and_values_stay_in_registers() {
        let text = "\
block0:
    v0 = load.h [12]
    v1 = const 0x800
    br eq v0, v1, block3, block1
block1:
    v2 = const 0x86dd
    br eq v0, v2, block2, block2
block2:
    ret 0
block3:
    v3 = load.b [14]
    v4 = const 15
    v5 = and v3, v4
    v6 = const 2
    v7 = shl v5, v6
    v8 = load.h [v7+14]
    v9 = const 80
    br eq v8, v9, block5, block4
block4:
    v10 = const 21
    br eq v8, v10, block5, block6
block6:
    v11 = load.h [v7+16]
    br eq v11, v9, block5, block2
block5:
    ret 100
";
        let mut pkt = vec![0u8; 40];
        pkt[12] = 8;
        pkt[14] = 0x45;
        pkt[37] = 80;
        let p = check(text, &[pkt.clone(), pkt[..30].to_vec(), vec![0; 14]]);
        assert_eq!(
            disassemble(&p.to_program()),
            "(000) ldh      [12]\n(001) jeq      #0x800           jt 2\tjf 8\n\
             (002) ldxb     4*([14]&0xf)\n(003) ldh      [x + 14]\n\
             (004) jeq      #0x50            jt 9\tjf 5\n(005) jeq      #0x15            jt 9\tjf 6\n\
             (006) ldh      [x + 16]\n(007) jeq      #0x50            jt 9\tjf 8\n\
             (008) ret      #0\n(009) ret      #100\n"
        );
    }

    /// TCP and UDP packets, IPv4 header length 20 or 24, with the given ports.
    fn tcp_udp_packets() -> Vec<Vec<u8>> {
        let mut pkts = vec![vec![0u8; 14], vec![0u8; 36]];
        for proto in [6u8, 17, 1] {
            for ihl in [5u8, 6] {
                for (src, dst) in [(80u16, 1u16), (53, 2), (7, 80), (7, 8)] {
                    let mut p = vec![0u8; 14 + 4 * ihl as usize + 8];
                    p[12] = 8;
                    p[14] = 0x40 | ihl;
                    p[23] = proto;
                    let l4 = 14 + 4 * ihl as usize;
                    p[l4..l4 + 2].copy_from_slice(&src.to_be_bytes());
                    p[l4 + 2..l4 + 4].copy_from_slice(&dst.to_be_bytes());
                    pkts.push(p.clone());
                    pkts.push(p[..l4 + 3].to_vec());
                }
            }
        }
        pkts
    }

    #[test]
    fn header_length_twins_meet_in_x() {
        // `tcp src port 80 or udp src port 53`, then `dst port 80` for both: block4 recomputes
        // the header length that both of its predecessors leave in X (as different values).
        let text = "\
block0:
    v0 = load.h [12]
    v1 = const 0x800
    v5 = const 15
    v7 = const 2
    v10 = const 80
    br eq v0, v1, block1, block5
block1:
    v2 = load.b [23]
    v3 = const 6
    br eq v2, v3, block2, block3
block2:
    v4 = load.b [14]
    v6 = and v4, v5
    v8 = shl v6, v7
    v9 = load.h [v8+14]
    br eq v9, v10, block6, block4
block3:
    v11 = const 17
    br eq v2, v11, block7, block5
block7:
    v12 = load.b [14]
    v13 = and v12, v5
    v14 = shl v13, v7
    v15 = load.h [v14+14]
    v16 = const 53
    br eq v15, v16, block6, block4
block4:
    v17 = load.b [14]
    v18 = and v17, v5
    v19 = shl v18, v7
    v20 = load.h [v19+16]
    br eq v20, v10, block6, block5
block5:
    ret 0
block6:
    ret 1
";
        let p = check(text, &tcp_udp_packets());
        let listing = disassemble(&p.to_program());
        assert_eq!(listing.matches("ldxb").count(), 2, "{listing}");
        assert_eq!(p.len(), 15, "{listing}");
    }

    #[test]
    fn code_after_equal_registers_is_shared() {
        // `dst port 80` is emitted under `tcp` (block4) and under `udp` (block5); block5 is
        // also reached from block3 with a twin of the header length in X, so only with twins
        // recognised is its code that of block4 (and merged with it).
        let text = "\
block0:
    v0 = load.h [12]
    v1 = const 0x800
    v5 = const 15
    v7 = const 2
    v10 = const 80
    br eq v0, v1, block1, block8
block1:
    v2 = load.b [23]
    v3 = const 6
    br eq v2, v3, block2, block3
block2:
    v4 = load.b [14]
    v6 = and v4, v5
    v8 = shl v6, v7
    v9 = load.h [v8+14]
    br eq v9, v10, block9, block4
block4:
    v11 = load.h [v8+16]
    br eq v11, v10, block9, block8
block3:
    v12 = const 17
    br eq v2, v12, block6, block8
block6:
    v13 = load.b [14]
    v14 = and v13, v5
    v15 = shl v14, v7
    v16 = load.h [v15+14]
    v17 = const 53
    br eq v16, v17, block7, block5
block7:
    v18 = load.h [20]
    br eq v18, v1, block9, block5
block5:
    v19 = load.b [14]
    v20 = and v19, v5
    v21 = shl v20, v7
    v22 = load.h [v21+16]
    br eq v22, v10, block9, block8
block8:
    ret 0
block9:
    ret 1
";
        let p = check(text, &tcp_udp_packets());
        let listing = disassemble(&p.to_program());
        assert_eq!(listing.matches("ldh      [x + 16]").count(), 1, "{listing}");
        assert_eq!(listing.matches("ldxb").count(), 2, "{listing}");
    }

    #[test]
    fn header_length_twin_of_a_join_block_stays_in_x() {
        // The shape of `(udp port 443 ...) or port 1024` after libpcap's block interning:
        // block6 (`dst port 1024`) is reached from block2's `src port 443` test and from
        // block5's `src port 1024` test; block5 is itself a join (from block3, which has the
        // header length in X, and block4, which has not) and so recomputes it. Both edges into
        // block6 leave a twin in X: 2 `ldxb`, not 3.
        let text = "\
block0:
    v0 = load.h [12]
    v1 = const 0x800
    v2 = const 15
    v3 = const 2
    v4 = const 443
    v5 = const 1024
    br eq v0, v1, block1, block8
block1:
    v6 = load.b [23]
    v7 = const 17
    br eq v6, v7, block2, block4
block2:
    v8 = load.b [14]
    v9 = and v8, v2
    v10 = shl v9, v3
    v11 = load.h [v10+14]
    br eq v11, v4, block6, block3
block3:
    v12 = load.h [v10+16]
    br eq v12, v4, block5, block4
block4:
    v13 = const 6
    br eq v6, v13, block5, block8
block5:
    v14 = load.b [14]
    v15 = and v14, v2
    v16 = shl v15, v3
    v17 = load.h [v16+14]
    br eq v17, v5, block7, block6
block6:
    v18 = load.b [14]
    v19 = and v18, v2
    v20 = shl v19, v3
    v21 = load.h [v20+16]
    br eq v21, v5, block7, block8
block7:
    ret 0
block8:
    ret 1
";
        let mut pkts = tcp_udp_packets();
        for proto in [6u8, 17] {
            for (src, dst) in [
                (443u16, 1024u16),
                (443, 5),
                (1024, 1024),
                (1024, 1),
                (5, 443),
            ] {
                let mut p = vec![0u8; 14 + 24 + 8];
                p[12] = 8;
                p[14] = 0x46;
                p[23] = proto;
                p[38..40].copy_from_slice(&src.to_be_bytes());
                p[40..42].copy_from_slice(&dst.to_be_bytes());
                pkts.push(p.clone());
                pkts.push(p[..41].to_vec());
            }
        }
        let p = check(text, &pkts);
        let listing = disassemble(&p.to_program());
        assert_eq!(listing.matches("ldxb").count(), 2, "{listing}");
    }

    #[test]
    fn header_length_mask_with_one_other_reader_is_recomputed_there() {
        // `tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420 && ip[0] & 0xf > 5` after value
        // numbering: v3 is both the header length's mask and `ip[0] & 0xf`. Computing it in
        // block0 costs `ldb; and; st` and a reload in block1; recomputed in block1 it is
        // `ldb [14]; and #0xf` (libpcap's code), two instructions fewer.
        let text = "\
block0:
    v0 = const 15
    v1 = const 2
    v2 = load.b [14]
    v3 = and v2, v0
    v4 = shl v3, v1
    v5 = load.b [v4+26]
    v6 = const 240
    v7 = and v5, v6
    v8 = shr v7, v1
    v9 = add v8, v4
    v10 = load.w [v9+14]
    v11 = const 0x47455420
    br eq v10, v11, block1, block3
block1:
    v12 = const 5
    br gt v3, v12, block2, block3
block2:
    ret 1
block3:
    ret 0
";
        let mut pkts = vec![vec![0u8; 14], vec![0u8; 15]];
        for (ihl, off) in [(5u8, 5u8), (6, 5), (5, 6)] {
            let mut p = vec![0u8; 14 + 4 * ihl as usize + 4 * off as usize + 4];
            p[14] = 0x40 | ihl;
            p[14 + 4 * ihl as usize + 12] = off << 4;
            let at = 14 + 4 * ihl as usize + 4 * off as usize;
            p[at..at + 4].copy_from_slice(b"GET ");
            pkts.push(p.clone());
            pkts.push(p[..p.len() - 1].to_vec());
        }
        let p = check(text, &pkts);
        let listing = disassemble(&p.to_program());
        assert!(!listing.contains("M["), "{listing}");
        assert_eq!(p.len(), 13, "{listing}");
    }

    #[test]
    fn far_branches_share_islands() {
        // Forty tests in a row, each 20 instructions apart, all rejecting to one far block.
        let mut text = String::from("block0:\n v0 = const 1\n jump block1\n");
        let mut v = 1;
        for i in 1..=40 {
            text.push_str(&format!("block{i}:\n"));
            for j in 0..20 {
                text.push_str(&format!(" v{v} = load.b [{}]\n", 20 * i + j));
                v += 1;
            }
            text.push_str(&format!(" br eq v{}, v0, block{}, block41\n", v - 1, i + 1));
        }
        text.push_str("block41:\n");
        for j in 0..300 {
            text.push_str(&format!(" v{v} = load.b [{}]\n", 1000 + j));
            v += 1;
        }
        text.push_str(" ret 7\nblock42:\n ret 9\n");
        let p = check(&text, &[vec![1; 1400], vec![0; 1400], vec![1; 5]]);
        // Without sharing, each test needs its own trampoline (40); three islands serve all.
        assert!(p.len() < 40 * 21 + 301 + 1 + 15, "{}", p.len());
    }
}
