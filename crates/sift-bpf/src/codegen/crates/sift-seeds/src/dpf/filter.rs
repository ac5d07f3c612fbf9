//! A parsed DPF filter and its canonicalization into [`Atom`]s.

use sift_ir::BinOp;

use super::atoms::{Atom, Context, Expr, Rel, Shift, Width};
use super::syntax::{self, ExprKind, ParseError, ParseErrorKind, Step};
use crate::span::Span;

/// A DPF filter: the conjunction of its atoms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    steps: Vec<Step>,
    atoms: Vec<Atom>,
    spans: Vec<Span>,
}

impl Filter {
    /// The atoms in text order. The filter accepts a packet exactly when every atom holds; the
    /// order does not change the verdict (see the [module docs](super)).
    pub fn atoms(&self) -> &[Atom] {
        &self.atoms
    }

    /// Where each atom is in the text.
    pub fn atom_spans(&self) -> &[Span] {
        &self.spans
    }

    /// The syntax tree, as written.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }
}

/// Parses a filter and brings it to canonical form.
pub fn parse(text: &str) -> Result<Filter, ParseError> {
    let steps = syntax::parse_steps(text)?;
    let err = |kind, span| ParseError::new(text, kind, span);
    let mut context = Context::default();
    // Constant shifts since the last packet-dependent one.
    let mut pending: u64 = 0;
    let mut atoms = Vec::new();
    let mut spans = Vec::new();
    for step in &steps {
        match step {
            Step::Shift { amount, span } => match fold(text, amount)? {
                Expr::Const(k) => {
                    pending += u64::from(k);
                    if pending > u64::from(u32::MAX) {
                        return Err(err(ParseErrorKind::OffsetTooLarge, *span));
                    }
                }
                amount => {
                    let skip = pending as u32;
                    context.shifts.push(Shift { skip, amount });
                    pending = 0;
                }
            },
            Step::Atom {
                lhs,
                rel,
                rhs,
                span,
            } => {
                let (lhs, rhs) = (fold(text, lhs)?, fold(text, rhs)?);
                let (field, rel, value) = match (field(&lhs), rhs.as_const()) {
                    (Some(f), Some(v)) => (f, *rel, v),
                    _ => match (field(&rhs), lhs.as_const()) {
                        (Some(f), Some(v)) => (f, rel.flip(), v),
                        _ => return Err(err(ParseErrorKind::NotCanonical, *span)),
                    },
                };
                let (addr, width, mask) = field;
                if matches!(rel, Rel::Eq | Rel::Ne) && value & !mask != 0 {
                    return Err(err(ParseErrorKind::ValueOutsideMask { value, mask }, *span));
                }
                let (context, offset) = match addr.as_const() {
                    Some(a) => {
                        let offset = u32::try_from(pending + u64::from(a))
                            .map_err(|_| err(ParseErrorKind::OffsetTooLarge, *span))?;
                        (context.clone(), offset)
                    }
                    None => {
                        // An indirect load is a shift that lasts for this atom only.
                        let mut c = context.clone();
                        c.shifts.push(Shift {
                            skip: pending as u32,
                            amount: addr.clone(),
                        });
                        (c, 0)
                    }
                };
                atoms.push(Atom {
                    context,
                    offset,
                    width,
                    mask,
                    rel,
                    value,
                });
                spans.push(*span);
            }
        }
    }
    if atoms.is_empty() {
        return Err(err(ParseErrorKind::Empty, Span::new(0, text.len())));
    }
    Ok(Filter {
        steps,
        atoms,
        spans,
    })
}

/// A load, possibly masked: its address, width and (combined) mask.
fn field(e: &Expr) -> Option<(&Expr, Width, u32)> {
    match e {
        Expr::Load { addr, width } => Some((addr, *width, width.mask())),
        Expr::Binary(BinOp::And, a, b) => {
            let (inner, m) = match (a.as_const(), b.as_const()) {
                (Some(m), None) => (b, m),
                (None, Some(m)) => (a, m),
                _ => return None,
            };
            let (addr, width, mask) = field(inner)?;
            Some((addr, width, mask & m))
        }
        _ => None,
    }
}

/// Converts a syntax expression, evaluating constant subexpressions.
fn fold(text: &str, e: &syntax::Expr) -> Result<Expr, ParseError> {
    Ok(match &e.kind {
        ExprKind::Num(k) => Expr::Const(*k),
        ExprKind::Load { addr, width } => Expr::Load {
            addr: Box::new(fold(text, addr)?),
            width: *width,
        },
        ExprKind::Binary(op, a, b) => binary(text, *op, fold(text, a)?, fold(text, b)?, e.span)?,
        ExprKind::Not(a) => binary(
            text,
            BinOp::Xor,
            fold(text, a)?,
            Expr::Const(u32::MAX),
            e.span,
        )?,
        ExprKind::Neg(a) => binary(text, BinOp::Sub, Expr::Const(0), fold(text, a)?, e.span)?,
    })
}

fn binary(text: &str, op: BinOp, a: Expr, b: Expr, span: Span) -> Result<Expr, ParseError> {
    match (a.as_const(), b.as_const()) {
        (Some(x), Some(y)) => match op.apply(x, y) {
            Some(k) => Ok(Expr::Const(k)),
            None => Err(ParseError::new(text, ParseErrorKind::DivisionByZero, span)),
        },
        _ => Ok(Expr::Binary(op, Box::new(a), Box::new(b))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn atoms(text: &str) -> Vec<Atom> {
        parse(text).unwrap().atoms().to_vec()
    }

    fn kind(text: &str) -> ParseErrorKind {
        parse(text).unwrap_err().kind
    }

    #[test]
    fn constant_shifts_fold_into_offsets() {
        assert_eq!(atoms("SHIFT(6 + 6 + 2) & (9:8 == 6)"), atoms("(23:8 == 6)"));
        let a = &atoms("(0x10 > 12:16 & 0xff00)")[0];
        assert_eq!(
            (a.offset, a.mask, a.rel, a.value),
            (12, 0xff00, Rel::Lt, 0x10)
        );
        let a = &atoms("(12:32 & 0xff & 0xf0 == 0x40)")[0];
        assert_eq!(a.mask, 0xf0);
        let a = &atoms("(1:8 & 0x1ff != 3)")[0];
        assert_eq!(a.mask, 0xff);
    }

    #[test]
    fn indirect_shifts_and_loads_form_contexts() {
        let f = atoms("SHIFT(14) & SHIFT((0:8 & 0xf) << 2) & SHIFT(2) & (0:16 == 80)");
        assert_eq!(f[0].context.shifts.len(), 1);
        assert_eq!(f[0].context.shifts[0].skip, 14);
        assert_eq!(f[0].offset, 2);
        // The same field read through an indirect load.
        let g = atoms("SHIFT(14) & ((((0:8 & 0xf) << 2) + 2):16 == 80)");
        assert_eq!(g[0].offset, 0);
        assert_eq!(g[0].context.shifts.len(), 1);
        assert_ne!(f, g);
    }

    #[test]
    fn non_canonical_atoms_are_errors() {
        assert_eq!(kind("(1:8 == 2:8)"), ParseErrorKind::NotCanonical);
        assert_eq!(kind("(1:8 + 1 == 2)"), ParseErrorKind::NotCanonical);
        assert_eq!(kind("(1 == 2)"), ParseErrorKind::NotCanonical);
        assert_eq!(
            kind("(12:16 == 0x10000)"),
            ParseErrorKind::ValueOutsideMask {
                value: 0x10000,
                mask: 0xffff
            }
        );
        assert_eq!(kind("(1:8 == 1 / 0)"), ParseErrorKind::DivisionByZero);
        assert_eq!(
            kind("SHIFT(0xffffffff) & (1:8 == 1)"),
            ParseErrorKind::OffsetTooLarge
        );
        assert_eq!(kind("SHIFT(14) # nothing else"), ParseErrorKind::Empty);
        // Order comparisons may use any constant.
        assert!(parse("(12:16 < 0x10000)").is_ok());
    }
}
