//! The canonical form of a DPF filter: a list of atoms.
//!
//! DPF's demultiplexer merges filters into a trie by their atoms (section 3 of the paper): two
//! atoms that read the same field through the same shifts are merged; if they compare it with
//! different constants, they are *disjunctive* and become one hash-table lookup. [`Atom`] is the
//! unit of that merge, with every syntactic variation removed:
//!
//! * constant `SHIFT`s are folded into the offsets of the atoms that follow them (as DPF's
//!   alignment pass does), so `SHIFT(14) & (9:8 == 6)` and `(23:8 == 6)` are the same atom;
//! * only shifts by a packet-dependent amount remain, as the atom's [`Context`];
//! * an indirect load in an atom, `((0:8 & 0xf) << 2):16 == 80`, is a context step too;
//! * masks fold into one, constant expressions are evaluated, and a constant on the left of a
//!   comparison moves to the right.
//!
//! Atoms derive `Eq` and `Hash`, so a trie can key on `(context, offset, width, mask)` and put
//! `value` in a table.

use std::fmt;

use sift_ir::{BinOp, CmpOp, LoadSize};

/// The size of a packet load (`offset:bits`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Width {
    W8,
    W16,
    W32,
}

impl Width {
    pub fn from_bits(bits: u32) -> Option<Width> {
        match bits {
            8 => Some(Width::W8),
            16 => Some(Width::W16),
            32 => Some(Width::W32),
            _ => None,
        }
    }

    pub fn bits(self) -> u32 {
        8 * self.bytes()
    }

    pub fn bytes(self) -> u32 {
        self.load_size().bytes()
    }

    /// All the bits a load of this width can set.
    pub fn mask(self) -> u32 {
        match self {
            Width::W8 => 0xFF,
            Width::W16 => 0xFFFF,
            Width::W32 => u32::MAX,
        }
    }

    pub fn load_size(self) -> LoadSize {
        match self {
            Width::W8 => LoadSize::Byte,
            Width::W16 => LoadSize::Half,
            Width::W32 => LoadSize::Word,
        }
    }
}

/// The comparison of an atom (unsigned).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rel {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Rel {
    /// The relation with its operands swapped (`a < b` is `b > a`).
    pub fn flip(self) -> Rel {
        match self {
            Rel::Lt => Rel::Gt,
            Rel::Le => Rel::Ge,
            Rel::Gt => Rel::Lt,
            Rel::Ge => Rel::Le,
            r => r,
        }
    }

    pub fn cmp_op(self) -> CmpOp {
        match self {
            Rel::Eq => CmpOp::Eq,
            Rel::Ne => CmpOp::Ne,
            Rel::Lt => CmpOp::Lt,
            Rel::Le => CmpOp::Le,
            Rel::Gt => CmpOp::Gt,
            Rel::Ge => CmpOp::Ge,
        }
    }

    pub fn holds(self, a: u32, b: u32) -> bool {
        self.cmp_op().eval(a, b)
    }

    pub fn symbol(self) -> &'static str {
        match self {
            Rel::Eq => "==",
            Rel::Ne => "!=",
            Rel::Lt => "<",
            Rel::Le => "<=",
            Rel::Gt => ">",
            Rel::Ge => ">=",
        }
    }
}

/// A packet-dependent value, in wrapping 32-bit unsigned arithmetic (`sift_ir::BinOp`'s: a division
/// by zero rejects the packet). Loads are relative to the base in effect where the expression is
/// evaluated, and read big-endian.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    Const(u32),
    Load { addr: Box<Expr>, width: Width },
    Binary(BinOp, Box<Expr>, Box<Expr>),
}

impl Expr {
    pub fn as_const(&self) -> Option<u32> {
        match self {
            Expr::Const(k) => Some(*k),
            _ => None,
        }
    }
}

/// One packet-dependent shift of the base: the base first advances by the constant `skip`, then by
/// `amount`, which is evaluated at the advanced base. A base that would pass 2^32 - 1 rejects.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Shift {
    pub skip: u32,
    pub amount: Expr,
}

/// The packet-dependent shifts in effect for an atom, in order, starting from base 0 (the first
/// byte of the packet).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Context {
    pub shifts: Vec<Shift>,
}

/// One comparison: `load(base + offset, width) & mask  rel  value`, where `base` is what
/// `context` computes. It holds only if every load it makes, its context's included, lies within
/// the captured bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Atom {
    pub context: Context,
    /// Byte offset from the context's base (constant shifts folded in).
    pub offset: u32,
    pub width: Width,
    /// Never has bits outside `width.mask()`.
    pub mask: u32,
    pub rel: Rel,
    pub value: u32,
}

fn binop_symbol(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Mod => "%",
        BinOp::And => "&",
        BinOp::Or => "|",
        BinOp::Xor => "^",
        BinOp::Shl => "<<",
        BinOp::Shr => ">>",
    }
}

/// Prints in the DPF syntax, fully parenthesized.
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Const(k) => write!(f, "{k:#x}"),
            Expr::Load { addr, width } => match **addr {
                Expr::Const(k) => write!(f, "{k}:{}", width.bits()),
                ref a => write!(f, "({a}):{}", width.bits()),
            },
            Expr::Binary(op, a, b) => write!(f, "({a} {} {b})", binop_symbol(*op)),
        }
    }
}

/// Prints the atom as a DPF filter that parses back to this atom.
impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for s in &self.context.shifts {
            if s.skip != 0 {
                write!(f, "SHIFT({}) && ", s.skip)?;
            }
            write!(f, "SHIFT({}) && ", s.amount)?;
        }
        write!(f, "({}:{}", self.offset, self.width.bits())?;
        if self.mask != self.width.mask() {
            write!(f, " & {:#x}", self.mask)?;
        }
        write!(f, " {} {:#x})", self.rel.symbol(), self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relations() {
        assert!(Rel::Lt.holds(1, 2) && Rel::Lt.flip().holds(2, 1));
        assert_eq!(Rel::Eq.flip(), Rel::Eq);
        assert_eq!(Width::W16.mask(), 0xFFFF);
        assert_eq!(Width::from_bits(12), None);
    }

    #[test]
    fn display_round_trips_through_the_syntax() {
        let atom = Atom {
            context: Context {
                shifts: vec![Shift {
                    skip: 14,
                    amount: Expr::Binary(
                        BinOp::Shl,
                        Box::new(Expr::Binary(
                            BinOp::And,
                            Box::new(Expr::Load {
                                addr: Box::new(Expr::Const(0)),
                                width: Width::W8,
                            }),
                            Box::new(Expr::Const(15)),
                        )),
                        Box::new(Expr::Const(2)),
                    ),
                }],
            },
            offset: 2,
            width: Width::W16,
            mask: 0xFF00,
            rel: Rel::Ge,
            value: 0x100,
        };
        let text = atom.to_string();
        assert_eq!(
            text,
            "SHIFT(14) && SHIFT(((0:8 & 0xf) << 0x2)) && (2:16 & 0xff00 >= 0x100)"
        );
        let parsed = super::super::parse(&text).unwrap();
        assert_eq!(parsed.atoms(), &[atom]);
    }
}
