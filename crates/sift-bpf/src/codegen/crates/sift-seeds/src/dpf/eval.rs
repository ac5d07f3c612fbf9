//! A direct evaluator of DPF filters over the syntax tree, as written: the reference the
//! canonicalization and the IR lifting are tested against.
//!
//! It walks the steps in text order with a base offset that starts at 0. A `SHIFT` takes effect
//! for the atoms after it: its amount is computed when the next atom is reached (a `SHIFT` with no
//! atom after it has no effect, as in DPF, whose bounds checks are made for the loads that follow a
//! shift). Loads read big-endian at `base + address`; any load outside the packet, a base past
//! 2^32 - 1, or a division by zero rejects. The packet is accepted when every atom holds.

use super::filter::Filter;
use super::syntax::{Expr, ExprKind, Step};

/// Whether the filter accepts the packet (`packet` holds the captured bytes).
pub fn matches(filter: &Filter, packet: &[u8]) -> bool {
    run(filter.steps(), packet) == Some(true)
}

/// `Some(verdict)`, or `None` if the packet was rejected by a failed load, an overflowing base or
/// a division by zero.
fn run(steps: &[Step], packet: &[u8]) -> Option<bool> {
    let mut base: u64 = 0;
    let mut pending: Vec<&Expr> = Vec::new();
    for step in steps {
        match step {
            Step::Shift { amount, .. } => pending.push(amount),
            Step::Atom { lhs, rel, rhs, .. } => {
                for amount in pending.drain(..) {
                    base += u64::from(value(amount, base, packet)?);
                    if base > u64::from(u32::MAX) {
                        return None;
                    }
                }
                let (l, r) = (value(lhs, base, packet)?, value(rhs, base, packet)?);
                if !rel.holds(l, r) {
                    return Some(false);
                }
            }
        }
    }
    Some(true)
}

fn value(e: &Expr, base: u64, packet: &[u8]) -> Option<u32> {
    Some(match &e.kind {
        ExprKind::Num(k) => *k,
        ExprKind::Load { addr, width } => {
            let start = base + u64::from(value(addr, base, packet)?);
            let end = start + u64::from(width.bytes());
            if end > packet.len() as u64 {
                return None;
            }
            packet[start as usize..end as usize]
                .iter()
                .fold(0, |acc, &b| (acc << 8) | u32::from(b))
        }
        ExprKind::Binary(op, a, b) => op.apply(value(a, base, packet)?, value(b, base, packet)?)?,
        ExprKind::Not(a) => !value(a, base, packet)?,
        ExprKind::Neg(a) => value(a, base, packet)?.wrapping_neg(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    #[test]
    fn shifts_apply_to_later_atoms() {
        let f = parse("(0:8 == 2) & SHIFT(0:8) & (0:8 == 9)").unwrap();
        assert!(matches(&f, &[2, 0, 9]));
        assert!(!matches(&f, &[2, 9, 0]));
        assert!(!matches(&f, &[2, 0]));
        // A trailing shift reads nothing.
        let f = parse("(0:8 == 2) & SHIFT(100:8)").unwrap();
        assert!(matches(&f, &[2]));
    }

    #[test]
    fn bases_and_divisions_reject() {
        let f = parse("SHIFT(0:32) & SHIFT(0:32) & (0:8 == 0xff)").unwrap();
        assert!(!matches(&f, &[0xff; 8]));
        let f = parse("SHIFT(7 / (0:8 - 1)) & (0:8 == 3)").unwrap();
        assert!(!matches(&f, &[1, 0, 0, 3]));
        assert!(matches(&f, &[3, 0, 0, 3]));
    }
}
