//! The `tcpdump -d` disassembly, byte for byte what libpcap 1.10's `bpf_image` prints (including
//! its quirks: some operands in signed decimal, `unimp 0x81` for `ldx len`, which `bpf_image`
//! does not know, trailing blanks after operand-less instructions, and jump targets as absolute
//! instruction numbers).

use std::fmt::Write as _;

use crate::insn::{code, Class, Insn, JmpOp, Op, Program, Size, Src};

/// Names `bpf_image` gives to Linux's ancillary-data offsets (`SKF_AD_OFF + 4 * i`).
pub(crate) const ANCILLARY_NAMES: [&str; 16] = [
    "proto",
    "type",
    "ifidx",
    "nla",
    "nlan",
    "mark",
    "queue",
    "hatype",
    "rxhash",
    "cpu",
    "xor_x",
    "vlan_tci",
    "vlanp",
    "poff",
    "random",
    "vlan_tpid",
];

fn ancillary_name(k: u32) -> Option<&'static str> {
    let off = k.checked_sub(code::SKF_AD_OFF)?;
    if off % 4 != 0 {
        return None;
    }
    ANCILLARY_NAMES.get((off / 4) as usize).copied()
}

fn size_suffix(s: Size) -> &'static str {
    match s {
        Size::Word => "ld",
        Size::Half => "ldh",
        Size::Byte => "ldb",
    }
}

/// One line of `tcpdump -d`: instruction `insn` at index `n`, without a newline.
pub fn image(insn: Insn, n: usize) -> String {
    let k = insn.k;
    let signed = k as i32;
    let (op, operand): (&str, String) = match insn.decode() {
        // bpf_image has no case for `ldx len`; it falls into `default`.
        None | Some(Op::LdxLen) => ("unimp", format!("0x{:x}", insn.code)),
        Some(op) => match op {
            Op::RetK => ("ret", format!("#{signed}")),
            Op::RetA => ("ret", String::new()),
            Op::LdAbs(s) => (
                size_suffix(s),
                match ancillary_name(k) {
                    Some(name) => format!("[{name}]"),
                    None => format!("[{signed}]"),
                },
            ),
            Op::LdLen => ("ld", "#pktlen".to_string()),
            Op::LdInd(s) => (size_suffix(s), format!("[x + {signed}]")),
            Op::LdImm => ("ld", format!("#0x{k:x}")),
            Op::LdxImm => ("ldx", format!("#0x{k:x}")),
            Op::LdxMsh => ("ldxb", format!("4*([{signed}]&0xf)")),
            Op::LdMem => ("ld", format!("M[{signed}]")),
            Op::LdxMem => ("ldx", format!("M[{signed}]")),
            Op::St => ("st", format!("M[{signed}]")),
            Op::Stx => ("stx", format!("M[{signed}]")),
            // `n + 1 + k` in C: int plus u_int is u_int, printed with %d.
            Op::Ja => (
                "ja",
                format!("{}", (n as u32).wrapping_add(1).wrapping_add(k) as i32),
            ),
            Op::Jmp(j, Src::K) => (j.mnemonic(), format!("#0x{k:x}")),
            Op::Jmp(j, Src::X) => (j.mnemonic(), "x".to_string()),
            Op::Alu(a, Src::X) => (a.mnemonic(), "x".to_string()),
            Op::Alu(a, Src::K) => {
                use crate::insn::AluOp::*;
                match a {
                    And | Or | Xor => (a.mnemonic(), format!("#0x{k:x}")),
                    _ => (a.mnemonic(), format!("#{signed}")),
                }
            }
            Op::Neg => ("neg", String::new()),
            Op::Tax => ("tax", String::new()),
            Op::Txa => ("txa", String::new()),
            Op::LdxLen => unreachable!("handled above"),
        },
    };
    // Every jump-class opcode but `ja` gets the jt/jf columns, even an undecodable one.
    let is_cond_jump = insn.class() == Class::Jmp && insn.code & 0xf0 != code::JA;
    if is_cond_jump {
        format!(
            "({:03}) {:<8} {:<16} jt {}\tjf {}",
            n,
            op,
            operand,
            n + 1 + usize::from(insn.jt),
            n + 1 + usize::from(insn.jf)
        )
    } else {
        format!("({n:03}) {op:<8} {operand}")
    }
}

/// The whole program as `tcpdump -d` prints it (one line per instruction, each ending in `\n`).
pub fn disassemble(prog: &Program) -> String {
    let mut out = String::new();
    for (n, &insn) in prog.insns().iter().enumerate() {
        let _ = writeln!(out, "{}", image(insn, n));
    }
    out
}

/// The jump condition, for the assembler's reverse mapping.
pub(crate) fn jmp_by_mnemonic(m: &str) -> Option<JmpOp> {
    JmpOp::ALL.into_iter().find(|j| j.mnemonic() == m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_bpf_image_on_samples() {
        let cases: &[(Insn, usize, &str)] = &[
            (Insn::stmt(0x28, 12), 0, "(000) ldh      [12]"),
            (
                Insn::jump(0x15, 0x86dd, 0, 6),
                1,
                "(001) jeq      #0x86dd          jt 2\tjf 8",
            ),
            (Insn::stmt(0x30, 0xffff_f000), 0, "(000) ldb      [proto]"),
            (Insn::stmt(0x06, 0xffff_ffff), 2, "(002) ret      #-1"),
            (Insn::stmt(0x05, 0xffff_fffe), 3, "(003) ja       2"),
            (Insn::stmt(0x16, 0), 5, "(005) ret      "),
            (Insn::stmt(0x1234, 5), 6, "(006) unimp    0x1234"),
            (
                Insn::stmt(0x04, 0x8000_0000),
                7,
                "(007) add      #-2147483648",
            ),
            (Insn::stmt(0xb1, 14), 1000, "(1000) ldxb     4*([14]&0xf)"),
            (Insn::stmt(0x81, 0), 0, "(000) unimp    0x81"),
            (
                Insn::jump(0x65, 0, 1, 1),
                0,
                "(000) unimp    0x65             jt 2\tjf 2",
            ),
        ];
        for &(insn, n, want) in cases {
            assert_eq!(image(insn, n), want);
        }
    }
}
