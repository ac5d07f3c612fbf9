//! The text form of a program: one line per instruction with its index, its 8 bytes and its
//! meaning in LLVM's BPF assembly syntax, as `llvm-objdump -d` prints an object (the tests
//! compare the two line by line when `llvm-objdump` is installed). Fields are separated by tabs
//! (shown as spaces here):
//!
//! ```text
//! 0000000000000000 <sift_filter>:
//!        0:    bf 16 00 00 00 00 00 00    r6 = r1
//!        1:    28 00 00 00 0c 00 00 00    r0 = *(u16 *)skb[12]
//!        2:    55 00 01 00 00 08 00 00    if r0 != 2048 goto +1 <sift_filter+0x20>
//! ```
//!
//! Helper calls carry the helper's name as a comment (`call 39 ; bpf_skb_pull_data`), which
//! llvm-objdump does not print.

use std::fmt::Write as _;

use crate::insn::{helper, AluOp, Insn, Reg, Src};
use crate::program::Program;

/// The whole listing under a `<name>:` header.
pub fn to_text(program: &Program, name: &str) -> String {
    let mut out = format!("{:016x} <{name}>:\n", 0);
    for (i, insn) in program.insns.iter().enumerate() {
        let bytes: Vec<String> = insn.encode().iter().map(|b| format!("{b:02x}")).collect();
        let _ = write!(out, "{i:>8}:\t{}\t{}", bytes.join(" "), asm(insn));
        if let Some(off) = insn.jump_offset() {
            // The target as llvm-objdump symbolizes it: a byte offset from the symbol.
            let to = i as i64 + 1 + i64::from(off);
            let _ = write!(out, " <{name}+0x{:x}>", to * 8);
        }
        out.push('\n');
    }
    out
}

fn reg(r: Reg, wide: bool) -> String {
    if wide {
        format!("r{}", r.0)
    } else {
        format!("w{}", r.0)
    }
}

fn operand(src: Src, wide: bool) -> String {
    match src {
        Src::Reg(r) => reg(r, wide),
        Src::Imm(k) => k.to_string(),
    }
}

fn mem(base: Reg, off: i16) -> String {
    if off < 0 {
        format!("r{} - {}", base.0, -i32::from(off))
    } else {
        format!("r{} + {}", base.0, off)
    }
}

fn target(off: i16) -> String {
    if off < 0 {
        format!("-{}", -i32::from(off))
    } else {
        format!("+{off}")
    }
}

/// One instruction in LLVM's syntax (`w` registers for 32-bit operations).
pub fn asm(insn: &Insn) -> String {
    match *insn {
        Insn::Alu {
            wide,
            op: AluOp::Mov,
            dst,
            src,
        } => format!("{} = {}", reg(dst, wide), operand(src, wide)),
        Insn::Alu { wide, op, dst, src } => {
            format!("{} {} {}", reg(dst, wide), op.symbol(), operand(src, wide))
        }
        Insn::Neg32 { dst } => format!("w{0} = -w{0}", dst.0),
        Insn::ToBe { dst, bits } => format!("r{0} = be{bits} r{0}", dst.0),
        Insn::Load {
            size,
            dst,
            base,
            off,
        } => format!("r{} = *({} *)({})", dst.0, size.c_type(), mem(base, off)),
        Insn::Store {
            size,
            base,
            off,
            src,
        } => format!("*({} *)({}) = r{}", size.c_type(), mem(base, off), src.0),
        Insn::LoadAbs { size, imm } => format!("r0 = *({} *)skb[{imm}]", size.c_type()),
        Insn::LoadInd { size, src, imm } => {
            if imm == 0 {
                format!("r0 = *({} *)skb[r{}]", size.c_type(), src.0)
            } else {
                format!("r0 = *({} *)skb[r{} + {imm}]", size.c_type(), src.0)
            }
        }
        Insn::Ja { off } => format!("goto {}", target(off)),
        Insn::Jmp { op, dst, src, off } => format!(
            "if r{} {} {} goto {}",
            dst.0,
            op.symbol(),
            operand(src, true),
            target(off)
        ),
        Insn::Call { helper: id } => match helper::name(id) {
            Some(name) => format!("call {id} ; {name}"),
            None => format!("call {id}"),
        },
        Insn::Exit => "exit".to_owned(),
    }
}
