//! The extractor on hand-written programs: checks and key packing (a load past the entry check
//! checked on its own), division by zero, shifts by 32 or more, and malformed programs refused.

use sift_ir::BinOp;

use super::{KeyProgram, KeyRel, KeyStep, NativeExtractor, KEY_WORDS};
use crate::JitError;

fn ipv4_tcp() -> Vec<u8> {
    let mut p = vec![0u8; 60];
    p[12] = 0x08;
    p[14] = 0x45;
    p[23] = 6;
    p[26..30].copy_from_slice(&[10, 0, 0, 1]);
    p[34..36].copy_from_slice(&80u16.to_be_bytes());
    p
}

#[test]
fn checks_and_packs_a_key() {
    if !crate::supported() {
        return;
    }
    // ether type 0x0800, protocol 6, key: (src address << 16) | source port after the IHL.
    let program = KeyProgram {
        min_caplen: 34,
        steps: vec![
            KeyStep::Load {
                index: None,
                offset: 12,
                bytes: 2,
            },
            KeyStep::Check {
                rel: KeyRel::Eq,
                a: 0,
                k: 0x0800,
            },
            KeyStep::Load {
                index: None,
                offset: 23,
                bytes: 1,
            },
            KeyStep::Check {
                rel: KeyRel::Eq,
                a: 1,
                k: 6,
            },
            KeyStep::Load {
                index: None,
                offset: 14,
                bytes: 1,
            },
            KeyStep::BinK {
                op: BinOp::And,
                a: 2,
                k: 15,
            },
            KeyStep::BinK {
                op: BinOp::Shl,
                a: 3,
                k: 2,
            },
            KeyStep::Load {
                index: None,
                offset: 26,
                bytes: 4,
            },
            KeyStep::Key {
                a: 5,
                word: 0,
                shift: 16,
            },
            KeyStep::Load {
                index: Some(4),
                offset: 14,
                bytes: 2,
            },
            KeyStep::Key {
                a: 6,
                word: 0,
                shift: 0,
            },
            KeyStep::Key {
                a: 1,
                word: 5,
                shift: 60,
            },
        ],
    };
    let x = NativeExtractor::compile(&program).unwrap();
    let p = ipv4_tcp();
    let mut key = [7u64; KEY_WORDS];
    assert!(x.extract(&p, 60, &mut key));
    assert_eq!(key, [0x0a00_0001_0050, 0, 0, 0, 0, 6 << 60]);
    // The port lies beyond 34 bytes: checked on its own.
    assert!(!x.extract(&p[..35], 60, &mut key));
    assert!(!x.extract(&p[..33], 60, &mut key));
    let mut udp = p.clone();
    udp[23] = 17;
    assert!(!x.extract(&udp, 60, &mut key));
    assert!(!x.extract(&[], 0, &mut key));
}

#[test]
fn division_by_zero_and_wide_shifts() {
    if !crate::supported() {
        return;
    }
    let program = KeyProgram {
        min_caplen: 0,
        steps: vec![
            KeyStep::WireLen,
            KeyStep::Const(40),
            KeyStep::Bin {
                op: BinOp::Shl,
                a: 0,
                b: 1,
            },
            KeyStep::Key {
                a: 2,
                word: 1,
                shift: 0,
            },
            KeyStep::Const(7),
            KeyStep::Bin {
                op: BinOp::Div,
                a: 3,
                b: 0,
            },
            KeyStep::Key {
                a: 4,
                word: 0,
                shift: 0,
            },
        ],
    };
    let x = NativeExtractor::compile(&program).unwrap();
    let mut key = [0u64; KEY_WORDS];
    assert!(x.extract(&[], 2, &mut key));
    assert_eq!(key[..2], [3, 0]);
    assert!(!x.extract(&[], 0, &mut key));
}

#[test]
fn malformed_programs_are_refused() {
    let bad = [
        vec![KeyStep::Neg(0)],
        vec![
            KeyStep::Const(1),
            KeyStep::Key {
                a: 0,
                word: 6,
                shift: 0,
            },
        ],
        vec![KeyStep::Load {
            index: None,
            offset: 0,
            bytes: 3,
        }],
    ];
    for steps in bad {
        let program = KeyProgram {
            min_caplen: 0,
            steps,
        };
        assert!(program.validate().is_err());
        assert!(matches!(
            NativeExtractor::compile(&program),
            Err(JitError::KeyProgram(_))
        ));
    }
}
