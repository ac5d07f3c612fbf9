//! The interpreter: a verified program, pre-decoded once, run by a tight dispatch loop.
//!
//! Verification fixes everything the loop would otherwise check: register numbers are below 16
//! (so `r[x & 15]` needs no bounds check and the mask changes nothing), scratch slots are below
//! 256 (the [`Cache`] holds a fixed array of 256 words, indexed by a `u8`), targets lie inside the
//! code, and every path ends in a return. Only packet loads are checked at run time, each with
//! one comparison against the captured length.
//!
//! [`predecode`] turns the program into one [`Op`] per instruction, fusing the sequences filter
//! code is made of (load, mask, compare and branch; the IP header length; two equality tests of
//! one value; range tests) into superinstructions, and [`lookup`] picks each table's search.
//!
//! Two details of the loop matter as much as the op count:
//! * a branch stays a branch. Written as a select, the next slot number would be computed from
//!   the packet byte just loaded (a conditional move), chaining every step's dispatch behind the
//!   previous step's packet load; as a predicted branch, the processor runs ahead;
//! * the op array has a power-of-two length and is indexed through a mask, so dispatch has no
//!   bounds check.
//!
//! Coprocessor calls (`contains`, `member`) go to the program's compiled
//! [`sift_coproc::Coprocessors`] with the [`Cache`]'s [`Memo`], which is told about each new
//! packet at the start of a run, only in programs that call (the others pay nothing for it).

mod fuse;
mod lookup;
mod op;
mod predecode;

use op::Op;
pub(crate) use predecode::Code;

use sift_coproc::Memo;
use sift_ir::protochain;

use crate::insn::{Width, MAX_SCRATCH};
use crate::verify::VerifiedProgram;

/// Per-thread state for [`VerifiedProgram::run`], kept out of the shared program (as the regex
/// crate's `Cache`): scratch memory, and the coprocessors' per-packet memo. One cache serves any
/// number of programs, one run at a time.
#[derive(Debug)]
pub struct Cache {
    scratch: Box<[u32; MAX_SCRATCH as usize]>,
    memo: Memo,
}

impl Cache {
    pub fn new() -> Cache {
        Cache {
            scratch: Box::new([0; MAX_SCRATCH as usize]),
            memo: Memo::new(),
        }
    }
}

/// A copy of the scratch memory with a fresh memo (a memo only holds the current packet's
/// results, and every run that calls starts a new packet).
impl Clone for Cache {
    fn clone(&self) -> Cache {
        Cache {
            scratch: self.scratch.clone(),
            memo: Memo::new(),
        }
    }
}

impl Default for Cache {
    fn default() -> Cache {
        Cache::new()
    }
}

/// The byte at `at`, if captured.
#[inline(always)]
fn byte(pkt: &[u8], at: usize) -> Option<u32> {
    pkt.get(at).map(|&b| u32::from(b))
}

/// The big-endian half-word at `at`, if captured. (`at + 2` cannot wrap for an absolute
/// offset, a `u32`; for a computed one near `usize::MAX` the range is empty and rejects.)
#[inline(always)]
fn half(pkt: &[u8], at: usize) -> Option<u32> {
    let b = pkt.get(at..at.wrapping_add(2))?;
    Some(u32::from(b[0]) << 8 | u32::from(b[1]))
}

/// The big-endian word at `at`, if captured.
#[inline(always)]
fn word(pkt: &[u8], at: usize) -> Option<u32> {
    let b: [u8; 4] = pkt.get(at..at.wrapping_add(4))?.try_into().ok()?;
    Some(u32::from_be_bytes(b))
}

#[inline(always)]
fn load(pkt: &[u8], at: usize, w: Width) -> Option<u32> {
    match w {
        Width::Byte => byte(pkt, at),
        Width::Half => half(pkt, at),
        Width::Word => word(pkt, at),
    }
}

/// `base + offset` without wrapping; an address beyond `usize` is outside any packet.
#[inline(always)]
fn indexed(base: u32, offset: u32) -> usize {
    usize::try_from(u64::from(base) + u64::from(offset)).unwrap_or(usize::MAX)
}

impl VerifiedProgram {
    /// Runs the program on a packet: `packet` holds the captured bytes, `wire_len` the length
    /// on the wire. Returns the number of bytes to keep; 0 rejects (also on an out-of-bounds
    /// load or a division by zero).
    #[inline]
    pub fn run(&self, cache: &mut Cache, packet: &[u8], wire_len: u32) -> u32 {
        if self.code.has_calls {
            self.run_with_calls(cache, packet, wire_len)
        } else {
            self.run_plain(cache, packet, wire_len)
        }
    }

    #[inline(never)]
    fn run_plain(&self, cache: &mut Cache, packet: &[u8], wire_len: u32) -> u32 {
        self.run_loop::<false>(cache, packet, wire_len)
    }

    /// The loop of programs with calls (with `run_plain`, kept apart so that each is compiled
    /// for itself; `run` is the test between them, inlined into callers).
    #[inline(never)]
    fn run_with_calls(&self, cache: &mut Cache, packet: &[u8], wire_len: u32) -> u32 {
        cache.memo.next_packet();
        self.run_loop::<true>(cache, packet, wire_len)
    }

    /// The dispatch loop, compiled twice: with `CALLS` false the call ops are not compiled in
    /// (verified programs without calls have none), so a loop that never calls out keeps its
    /// registers as it did before calls existed (a call in the loop cost such programs about
    /// 1.3 ns per packet).
    #[inline(always)]
    fn run_loop<const CALLS: bool>(&self, cache: &mut Cache, packet: &[u8], wire_len: u32) -> u32 {
        let code = &self.code;
        // A power of two (at least one op): the mask keeps every index in bounds.
        let mask = code.ops.len() - 1;
        let ops = &code.ops[..=mask];
        let scratch = &mut *cache.scratch;
        let memo = &mut cache.memo;
        // Verified: a program with calls carries the tables they name.
        let coprocessors = self.coprocessors.as_deref();
        let mut r = [0u32; 16];
        let mut pc = 0usize;
        // Register numbers are verified below 16: the mask only tells the compiler so.
        macro_rules! reg {
            ($x:expr) => {
                r[usize::from($x & 15)]
            };
        }
        // Writes a loaded (or computed) value and continues, or rejects the packet.
        macro_rules! set {
            ($d:expr, $v:expr) => {{
                let Some(x) = $v else { return 0 };
                reg!($d) = x;
                pc += 1;
            }};
        }
        // The empty `black_box` on one arm keeps this a branch (see the module comment).
        macro_rules! branch {
            ($c:expr, $t:expr, $f:expr) => {
                if $c {
                    pc = $t as usize
                } else {
                    std::hint::black_box(());
                    pc = $f as usize
                }
            };
        }
        // A loaded value, written to its register, or a rejection.
        macro_rules! loaded {
            ($d:expr, $v:expr) => {{
                let Some(x) = $v else { return 0 };
                reg!($d) = x;
                x
            }};
        }
        macro_rules! eq2 {
            ($x:expr, $k1:expr, $t1:expr, $k2:expr, $t2:expr, $f:expr) => {{
                let x = $x;
                if x == $k1 {
                    pc = $t1 as usize
                } else if x == $k2 {
                    pc = $t2 as usize
                } else {
                    std::hint::black_box(());
                    pc = $f as usize
                }
            }};
        }
        macro_rules! lookup {
            ($x:expr, $table:expr, $default:expr) => {
                pc = code.lookups[$table as usize].find($x).unwrap_or($default) as usize
            };
        }
        loop {
            match ops[pc & mask] {
                Op::LdHJeq { d, off, k, t, f } => {
                    let x = loaded!(d, half(packet, off as usize));
                    branch!(x == k, t, f)
                }
                Op::LdBJeq { d, off, k, t, f } => {
                    let x = loaded!(d, byte(packet, off as usize));
                    branch!(x == k, t, f)
                }
                Op::LdWJeq { d, off, k, t, f } => {
                    let x = loaded!(d, word(packet, off as usize));
                    branch!(x == k, t, f)
                }
                Op::LdHJset { d, off, k, t, f } => {
                    let x = loaded!(d, half(packet, off as usize));
                    branch!(x & k != 0, t, f)
                }
                Op::LdHJeq2 {
                    d,
                    off,
                    k1,
                    t1,
                    k2,
                    t2,
                    f,
                } => eq2!(loaded!(d, half(packet, off as usize)), k1, t1, k2, t2, f),
                Op::LdBJeq2 {
                    d,
                    off,
                    k1,
                    t1,
                    k2,
                    t2,
                    f,
                } => eq2!(loaded!(d, byte(packet, off as usize)), k1, t1, k2, t2, f),
                Op::LdWAndJeq {
                    d,
                    off,
                    mask,
                    k,
                    t,
                    f,
                } => {
                    let x = loaded!(d, word(packet, off as usize).map(|x| x & mask));
                    branch!(x == k, t, f)
                }
                Op::LdBr {
                    w,
                    cond,
                    d,
                    off,
                    mask,
                    k,
                    t,
                    f,
                } => {
                    let x = loaded!(d, load(packet, off as usize, w).map(|x| x & mask));
                    branch!(cond.eval(x, k), t, f)
                }
                Op::LdXHJeq { d, b, off, k, t, f } => {
                    let x = loaded!(d, half(packet, indexed(reg!(b), off)));
                    branch!(x == k, t, f)
                }
                Op::LdXBJset { d, b, off, k, t, f } => {
                    let x = loaded!(d, byte(packet, indexed(reg!(b), off)));
                    branch!(x & k != 0, t, f)
                }
                Op::LdXBr {
                    w,
                    cond,
                    d,
                    b,
                    off,
                    k,
                    t,
                    f,
                } => {
                    let x = loaded!(d, load(packet, indexed(reg!(b), off), w));
                    branch!(cond.eval(x, k), t, f)
                }
                Op::LdXRange {
                    w,
                    d,
                    b,
                    off,
                    lo,
                    span,
                    t,
                    f,
                } => {
                    let x = loaded!(d, load(packet, indexed(reg!(b), off), w));
                    branch!(x.wrapping_sub(lo) < span, t, f)
                }
                Op::LdHIn3 { d, off, keys, t, f } => {
                    let x = loaded!(d, half(packet, off as usize));
                    // One branch, not three: `|` rather than `||`.
                    branch!((x == keys[0]) | (x == keys[1]) | (x == keys[2]), t, f)
                }
                Op::MshLdXHJeq {
                    xd,
                    xoff,
                    d,
                    off,
                    k,
                    t,
                    f,
                } => {
                    let base = loaded!(xd, byte(packet, xoff as usize).map(|x| (x & 15) << 2));
                    let x = loaded!(d, half(packet, indexed(base, off)));
                    branch!(x == k, t, f)
                }
                Op::MshLdXBJset {
                    xd,
                    xoff,
                    d,
                    off,
                    k,
                    t,
                    f,
                } => {
                    let base = loaded!(xd, byte(packet, xoff as usize).map(|x| (x & 15) << 2));
                    let x = loaded!(d, byte(packet, indexed(base, off)));
                    branch!(x & k != 0, t, f)
                }
                Op::MshLdXHRange {
                    xd,
                    xoff,
                    d,
                    off,
                    lo,
                    span,
                    t,
                    f,
                } => {
                    let base = loaded!(xd, byte(packet, xoff as usize).map(|x| (x & 15) << 2));
                    let x = loaded!(d, half(packet, indexed(base, off)));
                    branch!(x.wrapping_sub(lo) < span, t, f)
                }
                Op::JeqI { a, k, t, f } => branch!(reg!(a) == k, t, f),
                Op::JgtI { a, k, t, f } => branch!(reg!(a) > k, t, f),
                Op::JgeI { a, k, t, f } => branch!(reg!(a) >= k, t, f),
                Op::JsetI { a, k, t, f } => branch!(reg!(a) & k != 0, t, f),
                Op::BrR { cond, a, b, t, f } => branch!(cond.eval(reg!(a), reg!(b)), t, f),
                Op::Jeq2 {
                    a,
                    k1,
                    t1,
                    k2,
                    t2,
                    f,
                } => eq2!(reg!(a), k1, t1, k2, t2, f),
                Op::InRange { a, lo, span, t, f } => {
                    branch!(reg!(a).wrapping_sub(lo) < span, t, f)
                }
                Op::Msh { d, off } => {
                    let _ = loaded!(d, byte(packet, off as usize).map(|x| (x & 15) << 2));
                    pc += 3; // past the `and` and the `shl` it stands for
                }
                Op::LdB { d, k } => set!(d, byte(packet, k as usize)),
                Op::LdH { d, k } => set!(d, half(packet, k as usize)),
                Op::LdW { d, k } => set!(d, word(packet, k as usize)),
                Op::LdXB { d, b, k } => set!(d, byte(packet, indexed(reg!(b), k))),
                Op::LdXH { d, b, k } => set!(d, half(packet, indexed(reg!(b), k))),
                Op::LdXW { d, b, k } => set!(d, word(packet, indexed(reg!(b), k))),
                Op::AndI { d, a, k } => set!(d, Some(reg!(a) & k)),
                Op::AddI { d, a, k } => set!(d, Some(reg!(a).wrapping_add(k))),
                Op::ShlI { d, a, k } => set!(d, Some(reg!(a).checked_shl(k).unwrap_or(0))),
                Op::ShrI { d, a, k } => set!(d, Some(reg!(a).checked_shr(k).unwrap_or(0))),
                Op::AluI { op, d, a, k } => set!(d, op.apply(reg!(a), k)),
                Op::AluR { op, d, a, b } => set!(d, op.apply(reg!(a), reg!(b))),
                Op::Jmp { t } => pc = t as usize,
                Op::RetI { k } => return k,
                Op::RetR { s } => return reg!(s),
                Op::MovR { d, s } => set!(d, Some(reg!(s))),
                Op::MovI { d, k } => set!(d, Some(k)),
                Op::Len { d } => set!(d, Some(wire_len)),
                Op::Neg { d, s } => set!(d, Some(reg!(s).wrapping_neg())),
                Op::Ldm { d, slot } => set!(d, Some(scratch[usize::from(slot)])),
                Op::Stm { slot, s } => {
                    scratch[usize::from(slot)] = reg!(s);
                    pc += 1;
                }
                Op::Switch {
                    key,
                    table,
                    default,
                } => lookup!(reg!(key), table, default),
                Op::LdSwitch {
                    w,
                    d,
                    off,
                    table,
                    default,
                } => lookup!(loaded!(d, load(packet, off as usize, w)), table, default),
                Op::Protochain {
                    d,
                    p,
                    x,
                    chain,
                    base,
                    target,
                } => set!(
                    d,
                    protochain::walk(packet, chain, base, reg!(p), reg!(x), target)
                ),
                Op::Contains { .. } | Op::Member { .. } | Op::Member4 { .. } if !CALLS => {
                    return 0; // not reached: the program has no calls
                }
                Op::Contains { d, s, set, pattern } => {
                    let start = reg!(s);
                    let found =
                        coprocessors.is_some_and(|c| c.contains(memo, set, pattern, packet, start));
                    set!(d, Some(u32::from(found)))
                }
                Op::Member { d, k, set } => {
                    let key = [reg!(k)];
                    let found = coprocessors.is_some_and(|c| c.member(set, &key));
                    set!(d, Some(u32::from(found)))
                }
                Op::Member4 { d, k, set } => {
                    let key = k.map(|r| reg!(r));
                    let found = coprocessors.is_some_and(|c| c.member(set, &key));
                    set!(d, Some(u32::from(found)))
                }
            }
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::{assemble, verify};

    fn run(text: &str, pkt: &[u8]) -> u32 {
        let p = verify(assemble(text).unwrap()).unwrap();
        p.run(&mut Cache::new(), pkt, pkt.len() as u32)
    }

    #[test]
    fn op_is_one_aligned_32_byte_slot() {
        // The largest ops (a load and two compare-and-branch pairs) take 25 bytes of fields; the
        // alignment makes the slot 32 so that indexing is a shift.
        assert_eq!(std::mem::size_of::<Op>(), 32);
        assert_eq!(std::mem::align_of::<Op>(), 32);
    }

    #[test]
    fn fused_load_branch_writes_its_register_and_keeps_the_branch_slot() {
        let text = "ld.h r0, [0]\n jeq r0, 258, L3, L2\nL2:\n ret 0\nL3:\n ret r0\n";
        assert_eq!(run(text, &[1, 2]), 258);
        assert_eq!(run(text, &[1, 3]), 0);
        assert_eq!(run(text, &[1]), 0, "short packet");
        // A jump straight to the branch still works (its slot is not fused away).
        let text = "mov r0, 7\n jset r0, 1, L3, L2\nL2:\n ld.b r0, [0]\n jeq r0, 7, L3, L4\nL3:\n ret 1\nL4:\n ret 2\n";
        assert_eq!(run(text, &[7]), 1);
    }

    #[test]
    fn loads_at_the_edge_of_the_packet_and_of_the_address_space() {
        assert_eq!(run("ld.w r0, [0]\n ret r0\n", &[0, 0, 1, 2]), 258);
        assert_eq!(run("ld.w r0, [1]\n ret r0\n", &[0, 0, 1, 2]), 0);
        let far = "mov r1, 4294967295\n ld.b r0, [r1+4294967295]\n ret 1\n";
        assert_eq!(run(far, &[0; 8]), 0);
        let wrap = "mov r1, 4294967295\n ld.b r0, [r1+1]\n ret 1\n";
        assert_eq!(run(wrap, &[0; 8]), 0, "no wrap-around to offset 0");
    }

    #[test]
    fn coprocessor_calls() {
        let text = "\
.pattern p0 = \"GET\"
.pattern p0 = nocase \"admin\\x3b\"
.set s0 w32 = 0x50, 0x1f40-0x1fa4
.set s1 w128 = 0x1-0x2
    mov r0, 1
    contains r1, p0.1, r0
    ld.h r2, [0]
    member r3, s0, r2
    add r4, r1, r3
    mov r5, 0
    member r6, s1, r5, r5, r5, r4
    add r4, r4, r6
    ret r4
";
        assert_eq!(run(text, b"\x00\x50ADMIN;"), 3);
        assert_eq!(run(text, b"\x1f\x90ADMIN;"), 3);
        assert_eq!(run(text, b"\x00\x51ADMIN;"), 2);
        assert_eq!(run(text, b"\x00\x51ADMIN"), 0);
        assert_eq!(run(text, b"\x00\x50"), 2);
        assert_eq!(run(text, b"\x00"), 0, "the load rejects");
    }

    #[test]
    fn switch_finds_keys_and_defaults() {
        let text = "ld.b r0, [0]\n switch r0, T0, L4\nL2:\n ret 2\nL3:\n ret 3\nL4:\n ret 4\n.table T0\n 1 -> L2\n 9 -> L3\n 200 -> L2\n";
        assert_eq!(run(text, &[1]), 2);
        assert_eq!(run(text, &[9]), 3);
        assert_eq!(run(text, &[200]), 2);
        assert_eq!(run(text, &[5]), 4);
    }
}
