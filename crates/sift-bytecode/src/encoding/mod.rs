//! The binary encoding (versions 1 and 2) and its decoder.
//!
//! ```text
//! header   "SFBC"  version:u16  scratch_words:u16
//! section  kind:u8  length:u32  payload[length]
//!          (kind 1 = code, then optionally 2 = tables, 3 = patterns, 4 = sets, in that order)
//! code     instructions, back to back, until the end of the payload
//! tables   count:u32, then per table: entries:u32, then (key:u32, target:u32) per entry
//! patterns count:u32, then per set: patterns:u32, then per pattern: kind:u8 len:u32 bytes[len]
//! sets     count:u32, then per set: width:u8 ranges:u32, then (lo, hi) per range (u32 or u128)
//! ```
//!
//! Integers are little-endian. Each instruction is an opcode byte followed by a fixed layout
//! for that opcode (see `docs/bytecode.md`). Version 2 adds the coprocessor calls (`contains`,
//! `member`) and the pattern and set sections; a program is written in the lowest version that
//! expresses it, so programs without coprocessors stay version 1, byte for byte. The decoder
//! accepts exactly the output of the encoder: every accepted input re-encodes to the same bytes
//! (so it refuses version-2 features in a version-1 input, a version-2 input that version 1
//! could express, duplicate patterns and set ranges that are not sorted, disjoint and apart).
//! It checks structure only (opcodes, lengths, section order, that each pattern compiles);
//! whether the program may run is the verifier's business.

mod decode;
mod encode;

pub use decode::{decode, DecodeError, DecodeErrorKind};
pub use encode::encode;

/// The first four bytes of every encoded program.
pub const MAGIC: [u8; 4] = *b"SFBC";
/// The newest encoding version this crate reads and writes (it also reads and writes version
/// 1: programs without coprocessor calls or tables).
pub const VERSION: u16 = 2;
/// The version of programs without coprocessors.
const VERSION_PLAIN: u16 = 1;

const SECTION_CODE: u8 = 1;
const SECTION_TABLES: u8 = 2;
const SECTION_PATTERNS: u8 = 3;
const SECTION_SETS: u8 = 4;

/// Pattern kinds in the patterns section.
const PATTERN_LITERAL: u8 = 0;
const PATTERN_NOCASE: u8 = 1;
const PATTERN_REGEX: u8 = 2;

mod op {
    pub const MOV_REG: u8 = 0x01;
    pub const MOV_IMM: u8 = 0x02;
    pub const WIRE_LEN: u8 = 0x03;
    pub const NEG: u8 = 0x04;
    pub const LOAD_SCRATCH: u8 = 0x05;
    pub const STORE_SCRATCH: u8 = 0x06;
    /// Plus 0 (byte), 1 (half) or 2 (word).
    pub const LOAD_ABS: u8 = 0x10;
    pub const LOAD_IND: u8 = 0x14;
    /// Plus the position of the operation in `AluOp::ALL`.
    pub const ALU_REG: u8 = 0x20;
    pub const ALU_IMM: u8 = 0x30;
    pub const JUMP: u8 = 0x40;
    /// Plus the position of the condition in `Cond::ALL`.
    pub const BRANCH_REG: u8 = 0x50;
    pub const BRANCH_IMM: u8 = 0x58;
    pub const SWITCH: u8 = 0x60;
    pub const RETURN_IMM: u8 = 0x70;
    pub const RETURN_REG: u8 = 0x71;
    /// Version 2: the coprocessor calls.
    pub const CONTAINS: u8 = 0x80;
    pub const MEMBER_W32: u8 = 0x81;
    pub const MEMBER_W128: u8 = 0x82;
    /// The header-chain walks, in every version.
    pub const PROTOCHAIN_IP: u8 = 0x90;
    pub const PROTOCHAIN_IP6: u8 = 0x91;
}

#[cfg(test)]
mod tests {
    use super::encode::encode_insn;
    use super::*;
    use crate::insn::{Insn, Operand, Program, Reg, Table, Width};
    use sift_ir::Chain;

    fn sample() -> Program {
        Program {
            scratch_words: 2,
            code: vec![
                Insn::Load {
                    width: Width::Half,
                    dst: Reg(0),
                    base: None,
                    offset: 12,
                },
                Insn::Switch {
                    key: Reg(0),
                    table: 0,
                    default: 3,
                },
                Insn::Return {
                    value: Operand::Imm(96),
                },
                Insn::Return {
                    value: Operand::Imm(0),
                },
            ],
            tables: vec![Table {
                entries: vec![(0x800, 2), (0x86dd, 2)],
            }],
            ..Program::default()
        }
    }

    #[test]
    fn round_trip() {
        let p = sample();
        let bytes = encode(&p);
        assert_eq!(&bytes[..4], b"SFBC");
        assert_eq!(decode(&bytes).unwrap(), p);
    }

    #[test]
    fn alu_opcodes_follow_the_documented_order() {
        // docs/bytecode.md: 0 add, 1 sub, 2 mul, 3 div, 4 mod, 5 and, 6 or, 7 xor, 8 shl, 9 shr.
        for (i, name) in [
            "add", "sub", "mul", "div", "mod", "and", "or", "xor", "shl", "shr",
        ]
        .into_iter()
        .enumerate()
        {
            let p = crate::assemble(&format!("    {name} r0, r0, 1\n    ret r0\n")).unwrap();
            let mut bytes = Vec::new();
            encode_insn(&p.code[0], &mut bytes);
            assert_eq!(bytes[0], op::ALU_IMM + i as u8, "{name}");
        }
    }

    #[test]
    fn protochain_round_trips_through_binary_and_text() {
        let text = "    ld.b r0, [20]\n    mov r1, 40\n    protochain.ip6 r2, r0, [r1+14], 6\n    ret r2\n";
        let p = crate::assemble(text).unwrap();
        assert!(matches!(
            p.code[2],
            Insn::Protochain {
                chain: Chain::Ip6,
                base: 14,
                target: 6,
                ..
            }
        ));
        assert_eq!(p.to_string(), text);
        let bytes = encode(&p);
        assert_eq!(u16::from_le_bytes([bytes[4], bytes[5]]), VERSION_PLAIN);
        assert_eq!(decode(&bytes).unwrap(), p);
    }

    #[test]
    fn every_prefix_is_an_error_inside_the_input_or_a_whole_program() {
        let bytes = encode(&sample());
        for n in 0..bytes.len() {
            match decode(&bytes[..n]) {
                // Cutting exactly after the code section leaves a program without tables.
                Ok(p) => assert_eq!(encode(&p), &bytes[..n]),
                Err(e) => assert!(e.offset <= n, "{n}: {e}"),
            }
        }
    }

    #[test]
    fn unknown_opcode_names_the_instruction() {
        let mut bytes = encode(&Program {
            scratch_words: 0,
            code: vec![
                Insn::Return {
                    value: Operand::Reg(Reg(1)),
                },
                Insn::Return {
                    value: Operand::Reg(Reg(1)),
                },
            ],
            ..Program::default()
        });
        // header (8) + section header (5) + first instruction (2)
        bytes[15] = 0xff;
        let e = decode(&bytes).unwrap_err();
        assert_eq!(e.offset, 15);
        assert_eq!(
            e.kind,
            DecodeErrorKind::UnknownOpcode {
                index: 1,
                opcode: 0xff
            }
        );
    }

    #[test]
    fn version_and_sections_are_checked() {
        let mut bytes = encode(&sample());
        assert_eq!(bytes[4], 1, "no coprocessors: version 1");
        bytes[4] = 3;
        assert_eq!(
            decode(&bytes).unwrap_err().kind,
            DecodeErrorKind::UnsupportedVersion(3)
        );
        bytes[4] = 2;
        assert_eq!(
            decode(&bytes).unwrap_err().kind,
            DecodeErrorKind::NeedlessVersion
        );
        assert_eq!(
            decode(b"SFBC\x01\x00\x00\x00").unwrap_err().kind,
            DecodeErrorKind::MissingCode
        );
        assert_eq!(
            decode(b"SFBC\x01\x00\x00\x00\x02\x00\x00\x00\x00")
                .unwrap_err()
                .kind,
            DecodeErrorKind::UnexpectedSection(2)
        );
    }
}
