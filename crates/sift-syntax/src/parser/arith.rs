//! Arithmetic expressions (`ip[0] & 0xf > 4`): an operator-precedence parser that reduces exactly
//! where bison's tables do, including its shifts on `%` and `^`, which have no precedence.

use super::*;

#[derive(Clone, Copy, PartialEq, Eq)]
enum StackOp {
    Bin(ArithOp),
    Neg(usize),
}

pub(super) fn arith_span(a: &Arith) -> Span {
    match a {
        Arith::Num(_, s) | Arith::Len(s) | Arith::Neg(_, s) => *s,
        Arith::Load { span, .. } | Arith::Binary { span, .. } => *span,
    }
}

pub(super) fn binop(t: &Tok) -> Option<ArithOp> {
    Some(match t {
        Tok::Plus => ArithOp::Add,
        Tok::Minus => ArithOp::Sub,
        Tok::Star => ArithOp::Mul,
        Tok::Slash => ArithOp::Div,
        Tok::Percent => ArithOp::Mod,
        Tok::Amp => ArithOp::And,
        Tok::Pipe => ArithOp::Or,
        Tok::Caret => ArithOp::Xor,
        Tok::Lsh => ArithOp::Lsh,
        Tok::Rsh => ArithOp::Rsh,
        _ => return None,
    })
}

/// Declared precedence (`%left` lines of the grammar); `None` for `%` and `^`, which have none.
fn prec(op: ArithOp) -> Option<u8> {
    match op {
        ArithOp::Or => Some(1),
        ArithOp::And => Some(2),
        ArithOp::Lsh | ArithOp::Rsh => Some(3),
        ArithOp::Add | ArithOp::Sub => Some(4),
        ArithOp::Mul | ArithOp::Div => Some(5),
        ArithOp::Mod | ArithOp::Xor => None,
    }
}

/// Whether yacc reduces the operator on top of the stack when `look` is the next token.
/// A conflict involving an operator without precedence is resolved by shifting.
fn should_reduce(top: StackOp, look: ArithOp) -> bool {
    let Some(lp) = prec(look) else { return false };
    match top {
        StackOp::Neg(_) => true,
        StackOp::Bin(op) => match prec(op) {
            None => false,
            Some(tp) => tp >= lp,
        },
    }
}

pub(super) fn relop(t: &Tok) -> Option<(RelOp, bool)> {
    Some(match t {
        Tok::Gt => (RelOp::Gt, false),
        Tok::Ge => (RelOp::Ge, false),
        Tok::Eq => (RelOp::Eq, false),
        Tok::Le => (RelOp::Gt, true),
        Tok::Lt => (RelOp::Ge, true),
        Tok::Ne => (RelOp::Eq, true),
        _ => return None,
    })
}

impl Parser<'_> {
    pub(super) fn parse_arith(&mut self) -> PResult<(Arith, usize)> {
        self.parse_arith_from(None)
    }

    /// Operator-precedence parsing with yacc's conflict resolution: precedence and left
    /// associativity for the declared operators, unary minus above all of them, and shifting
    /// (grouping to the right) whenever `%` or `^` is involved.
    pub(super) fn parse_arith_from(
        &mut self,
        first: Option<(Arith, usize)>,
    ) -> PResult<(Arith, usize)> {
        let mut ops: Vec<StackOp> = Vec::new();
        let first = match first {
            Some(f) => f,
            None => self.arith_operand(&mut ops)?,
        };
        // Most arithmetic is one operand (`ether[0]`, the `1` of `= 1`): nothing to reduce, and
        // no value stack to allocate.
        if ops.is_empty() && binop(self.peek()).is_none() {
            return Ok(first);
        }
        let mut vals = vec![first];
        while let Some(op) = binop(self.peek()) {
            while let Some(&top) = ops.last() {
                if !should_reduce(top, op) {
                    break;
                }
                self.reduce(&mut vals, &mut ops)?;
            }
            self.bump();
            ops.push(StackOp::Bin(op));
            let operand = self.arith_operand(&mut ops)?;
            vals.push(operand);
        }
        while !ops.is_empty() {
            self.reduce(&mut vals, &mut ops)?;
        }
        Ok(vals.pop().expect("one value left"))
    }

    fn reduce(&self, vals: &mut Vec<(Arith, usize)>, ops: &mut Vec<StackOp>) -> PResult<()> {
        let op = ops.pop().expect("operator");
        let (rhs, rd) = vals.pop().expect("operand");
        let (a, d) = match op {
            StackOp::Neg(start) => {
                let span = Span::new(start, arith_span(&rhs).end);
                (Arith::Neg(Box::new(rhs), span), rd + 1)
            }
            StackOp::Bin(op) => {
                let (lhs, ld) = vals.pop().expect("operand");
                let span = arith_span(&lhs).to(arith_span(&rhs));
                (
                    Arith::Binary {
                        op,
                        lhs: Box::new(lhs),
                        rhs: Box::new(rhs),
                        span,
                    },
                    ld.max(rd) + 1,
                )
            }
        };
        let d = self.check_tree(d, arith_span(&a))?;
        vals.push((a, d));
        Ok(())
    }

    /// Unary minuses, pushed on `ops`, then a primary, returned: `NUM`, `len`, `proto [ arth ]`,
    /// `proto [ arth : NUM ]`, `( narth )`, `( pnum )`.
    fn arith_operand(&mut self, ops: &mut Vec<StackOp>) -> PResult<(Arith, usize)> {
        while *self.peek() == Tok::Minus {
            ops.push(StackOp::Neg(self.span().start));
            self.bump();
        }
        if ops.len() > MAX_DEPTH {
            return Err(ParseError::new(ParseErrorKind::TooDeep, self.span()));
        }
        let start = self.span();
        let v = match *self.peek() {
            Tok::Num(n) => {
                self.bump();
                (Arith::Num(n, start), 1)
            }
            Tok::Kw(Kw::Len, _) => {
                self.bump();
                (Arith::Len(start), 1)
            }
            Tok::Kw(Kw::Pname(proto), _) => {
                self.bump();
                self.expect(Tok::LBracket, "`[`")?;
                self.enter()?;
                let (index, d) = self.parse_arith()?;
                self.leave();
                let mut size = 1;
                if *self.peek() == Tok::Colon {
                    self.bump();
                    size = self.expect_num()?;
                }
                self.expect(Tok::RBracket, "`]`")?;
                let span = Span::new(start.start, self.prev_end());
                (
                    Arith::Load {
                        proto,
                        index: Box::new(index),
                        size,
                        span,
                    },
                    d + 1,
                )
            }
            // Only the parenthesized group itself: the operators after it belong to this loop.
            Tok::LParen => match self.parse_group_nested(ARITH)? {
                Unit::Pnum(n, span) => (Arith::Num(n, span), 1),
                Unit::Arith(a, d) => (a, d),
                _ => unreachable!("arithmetic context"),
            },
            _ => return Err(self.unexpected("a number, `len`, `proto[...]` or `(`")),
        };
        Ok(v)
    }
}
