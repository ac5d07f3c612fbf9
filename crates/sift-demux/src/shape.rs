//! Shapes: conjunctions with their equality constants abstracted out (MPF's collapse).
//!
//! `ip src A and ip dst B and tcp src port P and tcp dst port Q` decomposes into one conjunction
//! whose `field == constant` atoms (the ethertype, both addresses, the protocol, both ports) are
//! its *key* and whose other atoms (not a fragment; enough bytes captured) are its *checks*. Every
//! connection filter has the same fields and checks, so they share one [`ShapeSig`]; each shape is
//! compiled once into an [`Extractor`] that evaluates the checks and packs the key fields of a
//! packet into a fixed-size [`Key`], looked up in the shape's table. The filter's own constants
//! only ever live in that table, so inserting another connection touches nothing else.

use std::collections::HashMap;
use std::sync::Arc;

use crate::canon::{Atom, Expr, Op, Rel};
use crate::paths::Conjunction;

/// Key size in 64-bit words: enough for an IPv6 4-tuple with its ethertype and next header.
pub(crate) const KEY_WORDS: usize = 6;

/// A packed tuple of key field values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Key(pub(crate) [u64; KEY_WORDS]);

/// What filters sharing a table have in common: the key fields (in packing order) and the
/// checks (constants included).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ShapeSig {
    pub(crate) keys: Vec<Arc<Expr>>,
    pub(crate) checks: Vec<Atom>,
}

/// Where a key field goes in the [`Key`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    word: u8,
    shift: u8,
}

/// Packs fields of the given value masks greedily into words; `None` for fields that no longer
/// fit (they are then compared as checks instead).
fn layout(masks: impl Iterator<Item = u32>) -> Vec<Option<Slot>> {
    let mut bit = 0usize;
    masks
        .map(|mask| {
            let width = 32 - mask.leading_zeros() as usize;
            if bit % 64 + width > 64 {
                bit = (bit / 64 + 1) * 64;
            }
            if bit + width > KEY_WORDS * 64 {
                return None;
            }
            let slot = Slot {
                word: (bit / 64) as u8,
                shift: (bit % 64) as u8,
            };
            bit += width;
            Some(slot)
        })
        .collect()
}

/// Splits a conjunction into its shape and its key.
pub(crate) fn split(conj: &Conjunction) -> (ShapeSig, Key) {
    let keyed: Vec<(&Arc<Expr>, u32)> = conj.atoms.iter().filter_map(Atom::as_key).collect();
    let slots = layout(keyed.iter().map(|(e, _)| e.possible_bits()));
    let mut sig = ShapeSig {
        keys: Vec::new(),
        checks: Vec::new(),
    };
    let mut key = Key::default();
    for (&(field, k), slot) in keyed.iter().zip(&slots) {
        match slot {
            Some(s) => {
                sig.keys.push(field.clone());
                key.0[usize::from(s.word)] |= u64::from(k) << s.shift;
            }
            None => sig.checks.push(Atom::Cmp {
                rel: Rel::Eq,
                lhs: field.clone(),
                rhs: Arc::new(Expr::Const(k)),
            }),
        }
    }
    sig.checks
        .extend(conj.atoms.iter().filter(|a| a.as_key().is_none()).cloned());
    sig.checks.sort();
    (sig, key)
}

/// Rebuilds the conjunction a shape and key stand for (used by the overlap check).
pub(crate) fn key_values(sig: &ShapeSig, key: &Key) -> Vec<(Arc<Expr>, u32)> {
    let slots = layout(sig.keys.iter().map(|e| e.possible_bits()));
    sig.keys
        .iter()
        .zip(slots)
        .map(|(e, s)| {
            let s = s.expect("keys of a signature fit by construction");
            let width = 32 - e.possible_bits().leading_zeros();
            let mask = if width == 0 { 0 } else { u64::MAX >> (64 - width) };
            let v = (key.0[usize::from(s.word)] >> s.shift) & mask;
            (e.clone(), v as u32)
        })
        .collect()
}

/// One computation of the extractor; its result goes to the register with the step's number.
#[derive(Clone, Copy, Debug)]
enum Node {
    Const(u32),
    WireLen,
    /// A fixed-offset load, known in bounds once the capture length check passed.
    Load { offset: u32, bytes: u8 },
    LoadAt { index: u16, offset: u32, bytes: u8 },
    Bin { op: Op, a: u16, b: u16 },
    Neg(u16),
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Eval(Node),
    /// Reject unless `reg rel k`.
    CheckConst { rel: Rel, reg: u16, k: u32 },
    CheckRegs { rel: Rel, a: u16, b: u16 },
}

/// A shape compiled to straight-line code: capture-length check, then the checks (each
/// right after the values it reads, so a failing one stops early), then the key fields.
#[derive(Clone, Debug)]
pub(crate) struct Extractor {
    min_caplen: usize,
    steps: Vec<Step>,
    /// Register of each key field and where it is packed.
    keys: Vec<(u16, Slot)>,
    /// Number of registers (`Eval` steps).
    regs: usize,
    pub(crate) key_words: usize,
}

struct Builder {
    steps: Vec<Step>,
    regs: HashMap<Arc<Expr>, u16>,
    min_caplen: u64,
}

impl Builder {
    fn reg(&mut self, e: &Arc<Expr>) -> u16 {
        if let Some(&r) = self.regs.get(e) {
            return r;
        }
        let node = match &**e {
            Expr::Const(k) => Node::Const(*k),
            Expr::WireLen => Node::WireLen,
            Expr::Load {
                index: None,
                offset,
                bytes,
            } => {
                self.min_caplen = self.min_caplen.max(u64::from(*offset) + u64::from(*bytes));
                Node::Load {
                    offset: *offset,
                    bytes: *bytes,
                }
            }
            Expr::Load {
                index: Some(i),
                offset,
                bytes,
            } => Node::LoadAt {
                index: self.reg(i),
                offset: *offset,
                bytes: *bytes,
            },
            Expr::Bin(op, a, b, _) => Node::Bin {
                op: *op,
                a: self.reg(a),
                b: self.reg(b),
            },
            Expr::Neg(a) => Node::Neg(self.reg(a)),
        };
        let r = self.regs.len() as u16;
        self.steps.push(Step::Eval(node));
        self.regs.insert(e.clone(), r);
        r
    }
}

impl Extractor {
    pub(crate) fn compile(sig: &ShapeSig) -> Extractor {
        let mut b = Builder {
            steps: Vec::new(),
            regs: HashMap::new(),
            min_caplen: 0,
        };
        for check in &sig.checks {
            match check {
                Atom::Cmp { rel, lhs, rhs } => {
                    let reg = b.reg(lhs);
                    let step = match rhs.constant() {
                        Some(k) => Step::CheckConst { rel: *rel, reg, k },
                        None => Step::CheckRegs {
                            rel: *rel,
                            a: reg,
                            b: b.reg(rhs),
                        },
                    };
                    b.steps.push(step);
                }
                Atom::Defined(e) => {
                    b.reg(e);
                }
                Atom::MinCapLen(n) => b.min_caplen = b.min_caplen.max(u64::from(*n)),
            }
        }
        let slots = layout(sig.keys.iter().map(|e| e.possible_bits()));
        let keys: Vec<(u16, Slot)> = sig
            .keys
            .iter()
            .zip(slots)
            .map(|(e, s)| (b.reg(e), s.expect("keys of a signature fit by construction")))
            .collect();
        let key_words = keys.iter().map(|(_, s)| usize::from(s.word) + 1).max().unwrap_or(0);
        Extractor {
            min_caplen: usize::try_from(b.min_caplen).unwrap_or(usize::MAX),
            regs: b.regs.len(),
            steps: b.steps,
            keys,
            key_words,
        }
    }

    /// Runs the checks on a packet and packs its key; `false` when a check fails or a value
    /// cannot be computed (a load out of bounds, a division by zero), which rejects the packet
    /// for every filter of the shape.
    #[inline]
    pub(crate) fn extract(&self, pkt: &[u8], wire_len: u32, regs: &mut Vec<u32>, key: &mut Key) -> bool {
        if pkt.len() < self.min_caplen {
            return false;
        }
        if regs.len() < self.regs {
            regs.resize(self.regs, 0);
        }
        let mut next = 0usize;
        for step in &self.steps {
            match *step {
                Step::Eval(node) => {
                    let v = match node {
                        Node::Const(k) => k,
                        Node::WireLen => wire_len,
                        Node::Load { offset, bytes } => match read(pkt, offset as usize, bytes) {
                            Some(v) => v,
                            None => return false,
                        },
                        Node::LoadAt {
                            index,
                            offset,
                            bytes,
                        } => {
                            let at = u64::from(regs[usize::from(index)]) + u64::from(offset);
                            match usize::try_from(at).ok().and_then(|at| read(pkt, at, bytes)) {
                                Some(v) => v,
                                None => return false,
                            }
                        }
                        Node::Bin { op, a, b } => {
                            match op.apply(regs[usize::from(a)], regs[usize::from(b)]) {
                                Some(v) => v,
                                None => return false,
                            }
                        }
                        Node::Neg(a) => regs[usize::from(a)].wrapping_neg(),
                    };
                    regs[next] = v;
                    next += 1;
                }
                Step::CheckConst { rel, reg, k } => {
                    if !rel.eval(regs[usize::from(reg)], k) {
                        return false;
                    }
                }
                Step::CheckRegs { rel, a, b } => {
                    if !rel.eval(regs[usize::from(a)], regs[usize::from(b)]) {
                        return false;
                    }
                }
            }
        }
        *key = Key::default();
        for &(reg, slot) in &self.keys {
            key.0[usize::from(slot.word)] |= u64::from(regs[usize::from(reg)]) << slot.shift;
        }
        true
    }
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
