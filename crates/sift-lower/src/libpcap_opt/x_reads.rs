//! What libpcap's code for a block's comparison does with the index register: the reads of X
//! before it first puts into X something other than a header length, and what X holds at the
//! end.
//!
//! libpcap emits a comparison's left side, then its right side (then `tax` when that is
//! computed), then the jump; an operation `a op b` as a's code, b's code, then `ldx M[b]` when
//! b is computed (X written, also when b is the filter's own `((ip[0]&0xf)<<2)`), `ld M[a]`,
//! `op x`; a load at a computed transport-layer offset,
//! `tcp[e]`, as e's code, the header length's `ldxb`, `add x`, `tax` (X written), `ld [x + k]`;
//! any other computed offset as its code and `tax`. Every load through the header length comes
//! with its own `ldxb`, which libpcap deletes when it believes X holds that already: until X
//! is first written otherwise, those loads and the `add x` read the X the block was entered
//! with (the soak's seed 0x3505eef: in `tcp[((tcp[12:1] & 0xf0) >> 2):4]` both the inner
//! load and the `add x` read an unset X).

use sift_ir::{BinOp, Block, Function, Inst, Terminator, Value};

use super::header_length::header_length;
use super::unset_index::writes_x;

/// Where a read of X is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Site {
    /// Every packet load of the block through the index value.
    AllLoads,
    /// This packet load.
    Load(Value),
    /// This `add` of a computed offset and the header length (libpcap's `add x`).
    AddOperand(Value),
}

/// A read of X as libpcap's code makes it: the index value sift computes there, and where.
#[derive(Clone, Copy)]
pub(super) struct Read {
    pub(super) index: Value,
    pub(super) site: Site,
}

/// How many expression nodes a walk visits at most (it follows shared values as often as
/// libpcap's code recomputes them); past that it reports no read.
const BUDGET: u32 = 256;

/// What libpcap's code for a block's comparison does with X.
#[derive(Default)]
pub(super) struct XCode {
    /// The reads of X before anything else is put into it, in libpcap's order; a read that
    /// sift shares with code after that write (one value for two of libpcap's loads) is left
    /// out.
    pub(super) reads: Vec<Read>,
    /// What X holds at the end, when the comparison's code is all the block puts into X.
    pub(super) last_write: Option<Value>,
}

/// [`XCode`] of `b`'s comparison.
pub(super) fn x_code(f: &Function, b: Block) -> XCode {
    let Terminator::Branch { lhs, rhs, .. } = f.block(b).term else {
        return XCode::default();
    };
    let mut walk = Walk {
        f,
        in_block: &f.block(b).insts,
        written: false,
        budget: BUDGET,
        before: Vec::new(),
        after: Vec::new(),
        last_write: None,
        writers: Vec::new(),
    };
    walk.visit(lhs);
    walk.visit(rhs);
    if f.const_value(rhs).is_none() {
        // The computed right side goes into X for the jump (`jge x`).
        walk.write(rhs);
    }
    if walk.budget == 0 {
        return XCode::default();
    }
    let mut reads: Vec<Read> = Vec::new();
    for read in walk.before {
        if !walk.after.contains(&read.site) && !reads.iter().any(|r| r.site == read.site) {
            reads.push(read);
        }
    }
    // Another instruction putting something into X leaves X unknown.
    let every_writer_seen = f
        .block(b)
        .insts
        .iter()
        .all(|&v| !writes_x(f, v) || walk.writers.contains(&v));
    XCode {
        reads,
        last_write: walk.last_write.filter(|_| every_writer_seen),
    }
}

struct Walk<'a> {
    f: &'a Function,
    in_block: &'a [Value],
    /// Whether X holds something other than a header length by now.
    written: bool,
    budget: u32,
    before: Vec<Read>,
    /// The sites of reads after X was written.
    after: Vec<Site>,
    /// What X holds after the last write so far.
    last_write: Option<Value>,
    /// The instructions whose code puts something into X.
    writers: Vec<Value>,
}

impl Walk<'_> {
    fn visit(&mut self, v: Value) {
        if self.budget == 0 || !self.in_block.contains(&v) {
            return;
        }
        self.budget -= 1;
        let f = self.f;
        match *f.inst(v) {
            Inst::Load { index: Some(x), .. } => {
                if header_length(f, x).is_some() {
                    self.read(x, Site::Load(v));
                } else if let Some((offset, length)) = transport_offset(f, x) {
                    self.visit(offset);
                    self.read(length, Site::AddOperand(x));
                    self.write(x);
                    self.writers.push(v);
                } else {
                    self.visit(x);
                    self.write(x);
                    self.writers.push(v);
                }
            }
            Inst::Binary(_, a, c) => {
                self.visit(a);
                self.visit(c);
                // A computed right operand goes into X, a header length too: reached here, it
                // is the filter's own arithmetic (`ip[2:2] - ((ip[0]&0xf)<<2)`, computed in
                // the accumulator and `tax`), not the `add x` of a load's offset.
                if f.const_value(c).is_none() {
                    self.write(c);
                    self.writers.push(v);
                }
            }
            Inst::Neg(a) => self.visit(a),
            _ => {}
        }
    }

    /// X now holds `value` (an index, a right operand), not a header length.
    fn write(&mut self, value: Value) {
        self.written = true;
        self.last_write = Some(value);
    }

    fn read(&mut self, index: Value, site: Site) {
        if self.written {
            self.after.push(site);
        } else {
            self.before.push(Read { index, site });
        }
    }
}

/// `(e, h)` when `x` is `e + h`, a computed offset plus a header length (libpcap's `add x`
/// before the `tax` of `tcp[e]`).
fn transport_offset(f: &Function, x: Value) -> Option<(Value, Value)> {
    let Inst::Binary(BinOp::Add, a, c) = *f.inst(x) else {
        return None;
    };
    let computed = |v: Value| f.const_value(v).is_none();
    if computed(a) && header_length(f, c).is_some_and(|(_, added)| added == 0) {
        Some((a, c))
    } else if computed(c) && header_length(f, a).is_some_and(|(_, added)| added == 0) {
        Some((c, a))
    } else {
        None
    }
}
