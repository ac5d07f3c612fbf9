//! A shape compiled to straight-line code: the checks, then the key.
//!
//! The extractor runs once per shape per packet, so it is the demultiplexer's inner loop. It is
//! an interpreter over a short list of steps, shaped for that: one capture-length check covers
//! every fixed-offset load (they are all required by the conjunction), a load read by exactly
//! one check or key field is fused with it (one step instead of two, no register), a constant
//! operand is an immediate, registers are a fixed array in the caller's scratch space, and the
//! checks come first, each right after the values it reads, so a failing one stops early.

use std::collections::HashMap;
use std::sync::Arc;

use crate::canon::{Atom, Expr, Rel};
use crate::shape::{layout, Key, ShapeSig, Slot, KEY_WORDS};
use sift_ir::BinOp;

/// Registers an extractor may use; a shape needing more is not compiled (its filters run whole).
pub(crate) const MAX_REGS: usize = 64;

/// Register file for [`Extractor::interpret`] (in [`crate::Matches`], reused across packets).
pub(crate) type Regs = [u32; MAX_REGS];

#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    Const {
        dst: u8,
        k: u32,
    },
    WireLen {
        dst: u8,
    },
    Load {
        dst: u8,
        offset: u32,
        bytes: u8,
    },
    LoadAt {
        dst: u8,
        index: u8,
        offset: u32,
        bytes: u8,
    },
    Bin {
        dst: u8,
        op: BinOp,
        a: u8,
        b: u8,
    },
    BinK {
        dst: u8,
        op: BinOp,
        a: u8,
        k: u32,
    },
    Neg {
        dst: u8,
        a: u8,
    },
    /// Reject unless `r[a] rel k`.
    Check {
        rel: Rel,
        a: u8,
        k: u32,
    },
    CheckRegs {
        rel: Rel,
        a: u8,
        b: u8,
    },
    /// A fixed-offset load compared once.
    CheckLoad {
        offset: u32,
        bytes: u8,
        rel: Rel,
        k: u32,
    },
    Key {
        a: u8,
        word: u8,
        shift: u8,
    },
    /// A fixed-offset load that is only a key field.
    KeyLoad {
        offset: u32,
        bytes: u8,
        word: u8,
        shift: u8,
    },
    KeyLoadAt {
        index: u8,
        offset: u32,
        bytes: u8,
        word: u8,
        shift: u8,
    },
}

/// The compiled form of a [`ShapeSig`]: the steps, and the same as native code where the
/// host has a JIT (see `native`).
#[derive(Debug)]
pub(crate) struct Extractor {
    pub(crate) min_caplen: usize,
    pub(crate) steps: Vec<Step>,
    pub(crate) key_words: usize,
    /// The steps and the table probe as one native function (see `native`).
    pub(crate) native: Option<crate::native::Matcher>,
}

struct Builder {
    steps: Vec<Step>,
    regs: HashMap<Arc<Expr>, u8>,
    uses: HashMap<Arc<Expr>, usize>,
    min_caplen: u64,
    overflow: bool,
}

impl Builder {
    fn count_uses(&mut self, e: &Arc<Expr>) {
        let n = self.uses.entry(e.clone()).or_insert(0);
        *n += 1;
        if *n > 1 {
            return; // its operands were counted the first time
        }
        match &**e {
            Expr::Load { index: Some(i), .. } | Expr::Neg(i) => self.count_uses(i),
            Expr::Bin(_, a, b, _) => {
                self.count_uses(a);
                if b.constant().is_none() {
                    self.count_uses(b);
                }
            }
            _ => {}
        }
        if let Expr::Load {
            index: None,
            offset,
            bytes,
        } = &**e
        {
            self.min_caplen = self.min_caplen.max(u64::from(*offset) + u64::from(*bytes));
        }
    }

    fn used_once(&self, e: &Arc<Expr>) -> bool {
        self.uses.get(e) == Some(&1)
    }

    fn fresh(&mut self, e: &Arc<Expr>) -> u8 {
        let r = self.regs.len();
        if r >= MAX_REGS {
            self.overflow = true;
        }
        let r = (r % MAX_REGS) as u8;
        self.regs.insert(e.clone(), r);
        r
    }

    /// Emits the computation of `e` (once) and returns its register.
    fn reg(&mut self, e: &Arc<Expr>) -> u8 {
        if let Some(&r) = self.regs.get(e) {
            return r;
        }
        let step = match &**e {
            Expr::Const(k) => Step::Const { dst: 0, k: *k },
            Expr::WireLen => Step::WireLen { dst: 0 },
            Expr::Load {
                index: None,
                offset,
                bytes,
            } => Step::Load {
                dst: 0,
                offset: *offset,
                bytes: *bytes,
            },
            Expr::Load {
                index: Some(i),
                offset,
                bytes,
            } => Step::LoadAt {
                dst: 0,
                index: self.reg(i),
                offset: *offset,
                bytes: *bytes,
            },
            Expr::Bin(op, a, b, _) => match b.constant() {
                Some(k) => Step::BinK {
                    dst: 0,
                    op: *op,
                    a: self.reg(a),
                    k,
                },
                None => Step::Bin {
                    dst: 0,
                    op: *op,
                    a: self.reg(a),
                    b: self.reg(b),
                },
            },
            Expr::Neg(a) => Step::Neg {
                dst: 0,
                a: self.reg(a),
            },
        };
        let r = self.fresh(e);
        self.steps.push(match step {
            Step::Const { k, .. } => Step::Const { dst: r, k },
            Step::WireLen { .. } => Step::WireLen { dst: r },
            Step::Load { offset, bytes, .. } => Step::Load {
                dst: r,
                offset,
                bytes,
            },
            Step::LoadAt {
                index,
                offset,
                bytes,
                ..
            } => Step::LoadAt {
                dst: r,
                index,
                offset,
                bytes,
            },
            Step::Bin { op, a, b, .. } => Step::Bin { dst: r, op, a, b },
            Step::BinK { op, a, k, .. } => Step::BinK { dst: r, op, a, k },
            Step::Neg { a, .. } => Step::Neg { dst: r, a },
            other => other,
        });
        r
    }
}

impl Extractor {
    /// `None` when the shape needs more than [`MAX_REGS`] registers.
    pub(crate) fn compile(sig: &ShapeSig) -> Option<Extractor> {
        let mut b = Builder {
            steps: Vec::new(),
            regs: HashMap::new(),
            uses: HashMap::new(),
            min_caplen: 0,
            overflow: false,
        };
        for check in &sig.checks {
            match check {
                Atom::Cmp { lhs, rhs, .. } => {
                    b.count_uses(lhs);
                    if rhs.constant().is_none() {
                        b.count_uses(rhs);
                    }
                }
                Atom::Defined(e) => {
                    // Never fused: counted twice.
                    b.count_uses(e);
                    b.count_uses(e);
                }
                Atom::MinCapLen(n) => b.min_caplen = b.min_caplen.max(u64::from(*n)),
            }
        }
        sig.keys.iter().for_each(|k| b.count_uses(k));
        for check in &sig.checks {
            match check {
                Atom::Cmp { rel, lhs, rhs } => match (&**lhs, rhs.constant()) {
                    (
                        Expr::Load {
                            index: None,
                            offset,
                            bytes,
                        },
                        Some(k),
                    ) if b.used_once(lhs) => b.steps.push(Step::CheckLoad {
                        offset: *offset,
                        bytes: *bytes,
                        rel: *rel,
                        k,
                    }),
                    (_, Some(k)) => {
                        let a = b.reg(lhs);
                        b.steps.push(Step::Check { rel: *rel, a, k });
                    }
                    (_, None) => {
                        let a = b.reg(lhs);
                        let r = b.reg(rhs);
                        b.steps.push(Step::CheckRegs { rel: *rel, a, b: r });
                    }
                },
                Atom::Defined(e) => {
                    b.reg(e);
                }
                Atom::MinCapLen(_) => {}
            }
        }
        let slots = layout(sig.keys.iter().map(|e| e.possible_bits()));
        let mut key_words = 0;
        for (field, slot) in sig.keys.iter().zip(slots) {
            let Slot { word, shift } = slot?;
            key_words = key_words.max(usize::from(word) + 1);
            let step = match &**field {
                Expr::Load {
                    index: None,
                    offset,
                    bytes,
                } if b.used_once(field) => Step::KeyLoad {
                    offset: *offset,
                    bytes: *bytes,
                    word,
                    shift,
                },
                Expr::Load {
                    index: Some(i),
                    offset,
                    bytes,
                } if b.used_once(field) => Step::KeyLoadAt {
                    index: b.reg(i),
                    offset: *offset,
                    bytes: *bytes,
                    word,
                    shift,
                },
                _ => Step::Key {
                    a: b.reg(field),
                    word,
                    shift,
                },
            };
            b.steps.push(step);
        }
        if b.overflow {
            return None;
        }
        Some(Extractor {
            min_caplen: usize::try_from(b.min_caplen).unwrap_or(usize::MAX),
            steps: b.steps,
            key_words,
            native: None,
        })
    }

    /// Adds native code for the steps and the probe of the shape's table (where the host has a
    /// JIT; otherwise, or if Cranelift fails, the shape stays interpreted). Whether it is
    /// native afterwards.
    pub(crate) fn compile_native(&mut self) -> bool {
        if self.native.is_none() {
            self.native = crate::native::compile(self.min_caplen, &self.steps, self.key_words);
        }
        self.native.is_some()
    }

    /// The order the shape's native matcher computes keys in (see `dispatch`).
    pub(crate) fn packet_order(&self) -> sift_jit::key_extractor::PacketOrder {
        crate::native::program(self.min_caplen, &self.steps)
            .map(|p| p.packet_order())
            .unwrap_or_default()
    }

    pub(crate) fn is_native(&self) -> bool {
        self.native.is_some()
    }

    /// Runs the checks on a packet and packs its key; `false` when a check fails or a value
    /// cannot be computed (a load out of bounds, a division by zero), which rejects the packet
    /// for every filter of the shape (on success `key` is written; on failure it is left as it
    /// was). The fallback where there is no native code (see `dispatch`).
    #[inline(never)]
    pub(crate) fn interpret(&self, pkt: &[u8], wire_len: u32, r: &mut Regs, key: &mut Key) -> bool {
        if pkt.len() < self.min_caplen {
            return false;
        }
        let mut k = [0u64; KEY_WORDS];
        // `% MAX_REGS` and `% KEY_WORDS` let the compiler drop the bounds checks.
        let reg = |x: u8| usize::from(x) % MAX_REGS;
        let word = |w: u8| usize::from(w) % KEY_WORDS;
        for step in &self.steps {
            match *step {
                Step::Const { dst, k } => r[reg(dst)] = k,
                Step::WireLen { dst } => r[reg(dst)] = wire_len,
                Step::Load { dst, offset, bytes } => match read(pkt, offset as usize, bytes) {
                    Some(v) => r[reg(dst)] = v,
                    None => return false,
                },
                Step::LoadAt {
                    dst,
                    index,
                    offset,
                    bytes,
                } => match read_at(pkt, r[reg(index)], offset, bytes) {
                    Some(v) => r[reg(dst)] = v,
                    None => return false,
                },
                Step::Bin { dst, op, a, b } => match op.apply(r[reg(a)], r[reg(b)]) {
                    Some(v) => r[reg(dst)] = v,
                    None => return false,
                },
                Step::BinK { dst, op, a, k } => match apply_const(op, r[reg(a)], k) {
                    Some(v) => r[reg(dst)] = v,
                    None => return false,
                },
                Step::Neg { dst, a } => r[reg(dst)] = r[reg(a)].wrapping_neg(),
                Step::Check { rel, a, k } => {
                    if !rel.eval(r[reg(a)], k) {
                        return false;
                    }
                }
                Step::CheckRegs { rel, a, b } => {
                    if !rel.eval(r[reg(a)], r[reg(b)]) {
                        return false;
                    }
                }
                Step::CheckLoad {
                    offset,
                    bytes,
                    rel,
                    k,
                } => match read(pkt, offset as usize, bytes) {
                    Some(v) if rel.eval(v, k) => {}
                    _ => return false,
                },
                Step::Key { a, word: w, shift } => k[word(w)] |= u64::from(r[reg(a)]) << shift,
                Step::KeyLoad {
                    offset,
                    bytes,
                    word: w,
                    shift,
                } => match read(pkt, offset as usize, bytes) {
                    Some(v) => k[word(w)] |= u64::from(v) << shift,
                    None => return false,
                },
                Step::KeyLoadAt {
                    index,
                    offset,
                    bytes,
                    word: w,
                    shift,
                } => match read_at(pkt, r[reg(index)], offset, bytes) {
                    Some(v) => k[word(w)] |= u64::from(v) << shift,
                    None => return false,
                },
            }
        }
        key.0 = k;
        true
    }
}

/// `a op k` for a constant `k` (the common operators first); `None` for a division by zero,
/// which the constructors never build but which would reject, as in the native code.
#[inline]
fn apply_const(op: BinOp, a: u32, k: u32) -> Option<u32> {
    match op {
        BinOp::And => Some(a & k),
        BinOp::Shl => Some(a.checked_shl(k).unwrap_or(0)),
        BinOp::Shr => Some(a.checked_shr(k).unwrap_or(0)),
        BinOp::Add => Some(a.wrapping_add(k)),
        _ => op.apply(a, k),
    }
}

/// `bytes` big-endian at `index + offset` (no wrapping), or `None` past the captured data.
#[inline]
fn read_at(pkt: &[u8], index: u32, offset: u32, bytes: u8) -> Option<u32> {
    let at = u64::from(index) + u64::from(offset);
    read(pkt, usize::try_from(at).ok()?, bytes)
}

/// `bytes` big-endian at `at`, or `None` past the captured data.
#[inline]
fn read(pkt: &[u8], at: usize, bytes: u8) -> Option<u32> {
    match bytes {
        1 => pkt.get(at).map(|&b| u32::from(b)),
        2 => pkt
            .get(at..at.checked_add(2)?)
            .map(|s| u32::from(u16::from_be_bytes([s[0], s[1]]))),
        _ => pkt
            .get(at..at.checked_add(4)?)
            .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]])),
    }
}
