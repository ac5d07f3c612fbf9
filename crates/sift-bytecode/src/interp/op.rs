//! One pre-decoded step of the interpreter's loop: an instruction with its width, operation,
//! condition and operand kind folded into the variant, or a superinstruction ([`super::fuse`]).

use sift_ir::Chain;

use crate::insn::{AluOp, Cond, Width};

/// One pre-decoded step. Registers are `u8` (verified `< 16`), slots `u8` (verified `< 256`),
/// targets absolute slot indices (verified in bounds and forward). Aligned to 32 bytes, so that
/// finding slot `i` is a shift (at 28 bytes it took three instructions on the dispatch path) and
/// no op straddles a cache line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(align(32))]
pub(crate) enum Op {
    MovR {
        d: u8,
        s: u8,
    },
    MovI {
        d: u8,
        k: u32,
    },
    Len {
        d: u8,
    },
    Neg {
        d: u8,
        s: u8,
    },
    Ldm {
        d: u8,
        slot: u8,
    },
    Stm {
        slot: u8,
        s: u8,
    },
    LdB {
        d: u8,
        k: u32,
    },
    LdH {
        d: u8,
        k: u32,
    },
    LdW {
        d: u8,
        k: u32,
    },
    LdXB {
        d: u8,
        b: u8,
        k: u32,
    },
    LdXH {
        d: u8,
        b: u8,
        k: u32,
    },
    LdXW {
        d: u8,
        b: u8,
        k: u32,
    },
    /// `d = (byte [off] & 15) << 2`, then continue after the three instructions it stands for.
    Msh {
        d: u8,
        off: u32,
    },
    AndI {
        d: u8,
        a: u8,
        k: u32,
    },
    AddI {
        d: u8,
        a: u8,
        k: u32,
    },
    ShlI {
        d: u8,
        a: u8,
        k: u32,
    },
    ShrI {
        d: u8,
        a: u8,
        k: u32,
    },
    AluI {
        op: AluOp,
        d: u8,
        a: u8,
        k: u32,
    },
    AluR {
        op: AluOp,
        d: u8,
        a: u8,
        b: u8,
    },
    Jmp {
        t: u32,
    },
    JeqI {
        a: u8,
        k: u32,
        t: u32,
        f: u32,
    },
    JgtI {
        a: u8,
        k: u32,
        t: u32,
        f: u32,
    },
    JgeI {
        a: u8,
        k: u32,
        t: u32,
        f: u32,
    },
    JsetI {
        a: u8,
        k: u32,
        t: u32,
        f: u32,
    },
    BrR {
        cond: Cond,
        a: u8,
        b: u8,
        t: u32,
        f: u32,
    },
    /// `a == k1` to `t1`, else `a == k2` to `t2`, else `f`.
    Jeq2 {
        a: u8,
        k1: u32,
        t1: u32,
        k2: u32,
        t2: u32,
        f: u32,
    },
    /// `a - lo < span` (wrapping; that is, `lo <= a < lo + span`) to `t`, else `f`.
    InRange {
        a: u8,
        lo: u32,
        span: u32,
        t: u32,
        f: u32,
    },
    LdHJeq {
        d: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    LdBJeq {
        d: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    LdWJeq {
        d: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    LdHJset {
        d: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    LdHJeq2 {
        d: u8,
        off: u32,
        k1: u32,
        t1: u32,
        k2: u32,
        t2: u32,
        f: u32,
    },
    LdBJeq2 {
        d: u8,
        off: u32,
        k1: u32,
        t1: u32,
        k2: u32,
        t2: u32,
        f: u32,
    },
    /// `d = word [off] & mask`, then `d == k`.
    LdWAndJeq {
        d: u8,
        off: u32,
        mask: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    /// Any other absolute load, masked (`mask` is all ones without an `and`), then a branch.
    LdBr {
        w: Width,
        cond: Cond,
        d: u8,
        off: u32,
        mask: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    LdXHJeq {
        d: u8,
        b: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    LdXBJset {
        d: u8,
        b: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    LdXBr {
        w: Width,
        cond: Cond,
        d: u8,
        b: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    LdXRange {
        w: Width,
        d: u8,
        b: u8,
        off: u32,
        lo: u32,
        span: u32,
        t: u32,
        f: u32,
    },
    /// `d = half [off]`, then `d` in `keys` (a table of one to three keys, one target).
    LdHIn3 {
        d: u8,
        off: u32,
        keys: [u32; 3],
        t: u32,
        f: u32,
    },
    /// `Msh` (writing `xd`) and then the op after it, an indexed load based on `xd` and a test:
    /// the transport-port idiom `ldx 4*([14]&0xf); ldh [x+k]; jeq`.
    MshLdXHJeq {
        xd: u8,
        xoff: u32,
        d: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    MshLdXBJset {
        xd: u8,
        xoff: u32,
        d: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    MshLdXHRange {
        xd: u8,
        xoff: u32,
        d: u8,
        off: u32,
        lo: u32,
        span: u32,
        t: u32,
        f: u32,
    },
    Switch {
        key: u8,
        table: u32,
        default: u32,
    },
    LdSwitch {
        w: Width,
        d: u8,
        off: u32,
        table: u32,
        default: u32,
    },
    RetI {
        k: u32,
    },
    RetR {
        s: u8,
    },
    /// `d = contains p<set>.<pattern>, s`.
    Contains {
        d: u8,
        s: u8,
        set: u32,
        pattern: u32,
    },
    /// `d = member s<set>, k` (a 32-bit key).
    Member {
        d: u8,
        k: u8,
        set: u32,
    },
    /// `d = member s<set>, k[0], k[1], k[2], k[3]` (a 128-bit key).
    Member4 {
        d: u8,
        k: [u8; 4],
        set: u32,
    },
    /// `d = protochain.<chain> p, [x+base], target`.
    Protochain {
        d: u8,
        p: u8,
        x: u8,
        chain: Chain,
        base: u32,
        target: u32,
    },
}
