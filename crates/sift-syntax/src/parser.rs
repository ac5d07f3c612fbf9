//! A hand-written parser that accepts exactly the language of libpcap 1.10's bison grammar
//! (`grammar.y`), with the same tree shapes and the same qualifier inheritance.
//!
//! The grammar is LALR(1) and, apart from 38 shift/reduce conflicts that all involve `%` and `^`
//! (which have no declared precedence, so bison shifts), conflict-free. Its awkward spots for a
//! top-down parser are the tokens that can start several things at once: after `and`/`or` a
//! number, `(` or `!` may begin either a *term* (`1 > 0`, `(tcp)`, `not tcp`) or an *id*
//! inheriting the previous qualifiers (`port 1 or 2`, `host a or (b or c)`, `host a or not b`).
//! Here the parser reads such a prefix without committing, as a [`Unit`], and decides once the
//! following token settles it, which is what the LALR automaton does too.

use crate::ast::*;
use crate::error::{ParseError, ParseErrorKind};
use crate::extension;
use crate::lexer::{tokenize_with, Kw, Tok, Token};
use crate::{MAX_DEPTH, MAX_TREE_DEPTH};

type PResult<T> = Result<T, ParseError>;

/// Something parsed before knowing which grammar symbol it ends up as.
enum Unit {
    /// A complete `term`, with the qualifiers it passes on.
    Term(Expr, Qualifiers, usize),
    /// A complete `id` (an `nid`, `not id`, or `( pid )`), with its qualifiers.
    Id(Expr, Qualifiers, usize),
    /// A `pnum`: a number, possibly in parentheses.
    Pnum(u32, Span),
    /// An arithmetic expression that is not a bare `pnum` (`narth`).
    Arith(Arith, usize),
}

/// What a position admits.
#[derive(Clone, Copy, Default)]
struct Allow {
    term: bool,
    id: bool,
    /// Whether an id may be `( pid )` (not so for the first element of a `pid`).
    paren_pid: bool,
    arith: bool,
}

const TERM: Allow = Allow {
    term: true,
    id: false,
    paren_pid: false,
    arith: false,
};
const TERM_OR_ID: Allow = Allow {
    term: true,
    id: true,
    paren_pid: true,
    arith: false,
};
const ID: Allow = Allow {
    term: false,
    id: true,
    paren_pid: true,
    arith: false,
};
const ARITH: Allow = Allow {
    term: false,
    id: false,
    paren_pid: false,
    arith: true,
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum StackOp {
    Bin(ArithOp),
    Neg(usize),
}

struct Parser<'a> {
    text: &'a str,
    toks: Vec<Token>,
    pos: usize,
    lex_err: Option<ParseError>,
    depth: usize,
    /// Whether sift's extensions (payload tests, sets) are accepted.
    extensions: bool,
}

fn prim(kind: PrimitiveKind, span: Span) -> Expr {
    Expr::Primitive(Primitive { kind, span })
}

fn arith_span(a: &Arith) -> Span {
    match a {
        Arith::Num(_, s) | Arith::Len(s) | Arith::Neg(_, s) => *s,
        Arith::Load { span, .. } | Arith::Binary { span, .. } => *span,
    }
}

fn binop(t: &Tok) -> Option<ArithOp> {
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

fn relop(t: &Tok) -> Option<(RelOp, bool)> {
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

/// Whether libpcap's `__pcap_atoin` accepts a dotted IPv4 text (decimal parts up to 255), in
/// which case an unqualified one is a syntax error rather than an invalid address.
fn plain_ipv4(text: &str) -> bool {
    text.split('.').all(|p| {
        !p.is_empty()
            && p.bytes().all(|b| b.is_ascii_digit())
            && p.parse::<u32>().is_ok_and(|n| n <= 255)
    })
}

fn is_nid_start(t: &Tok) -> bool {
    matches!(
        t,
        Tok::Id(_) | Tok::Hid(_) | Tok::Hid6(_) | Tok::Eid(_) | Tok::Aid(_)
    )
}

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }
    fn peek_at(&self, n: usize) -> &Tok {
        let i = (self.pos + n).min(self.toks.len() - 1);
        &self.toks[i].tok
    }
    fn span(&self) -> Span {
        self.toks[self.pos].span
    }
    fn prev_end(&self) -> usize {
        if self.pos == 0 {
            0
        } else {
            self.toks[self.pos - 1].span.end
        }
    }
    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    /// The error for an unexpected current token. At the end of the tokens a pending lexical
    /// error is what stopped the lexer, so that is reported instead.
    fn unexpected(&self, expected: &str) -> ParseError {
        if *self.peek() == Tok::Eof {
            if let Some(e) = &self.lex_err {
                return e.clone();
            }
        }
        ParseError::new(
            ParseErrorKind::Unexpected {
                found: self.peek().to_string(),
                expected: expected.to_string(),
            },
            self.span(),
        )
    }

    fn expect(&mut self, t: Tok, what: &str) -> PResult<Token> {
        if *self.peek() == t {
            Ok(self.bump())
        } else {
            Err(self.unexpected(what))
        }
    }

    fn expect_num(&mut self) -> PResult<u32> {
        match *self.peek() {
            Tok::Num(n) => {
                self.bump();
                Ok(n)
            }
            _ => Err(self.unexpected("a number")),
        }
    }

    fn expect_id(&mut self) -> PResult<String> {
        match self.peek().clone() {
            Tok::Id(s) => {
                self.bump();
                Ok(s)
            }
            _ => Err(self.unexpected("a name")),
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ParseError::new(ParseErrorKind::TooDeep, self.span()));
        }
        Ok(())
    }
    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// `e and rhs` (or `e or rhs`) with their tree depths; extends `e` when it is already a
    /// run of the same operator.
    fn chain(
        &self,
        is_and: bool,
        e: Expr,
        d: usize,
        rhs: Expr,
        rd: usize,
        op_span: Span,
    ) -> PResult<(Expr, usize)> {
        Ok(match (is_and, e) {
            (true, Expr::And(mut v)) => {
                v.push(rhs);
                (Expr::And(v), self.check_tree(d.max(rd + 1), op_span)?)
            }
            (false, Expr::Or(mut v)) => {
                v.push(rhs);
                (Expr::Or(v), self.check_tree(d.max(rd + 1), op_span)?)
            }
            (true, e) => (
                Expr::And(vec![e, rhs]),
                self.check_tree(d.max(rd) + 1, op_span)?,
            ),
            (false, e) => (
                Expr::Or(vec![e, rhs]),
                self.check_tree(d.max(rd) + 1, op_span)?,
            ),
        })
    }

    fn check_tree(&self, depth: usize, span: Span) -> PResult<usize> {
        if depth > MAX_TREE_DEPTH {
            Err(ParseError::new(ParseErrorKind::TooDeep, span))
        } else {
            Ok(depth)
        }
    }

    // ----- top level -------------------------------------------------------------------------

    fn parse_prog(&mut self) -> PResult<Option<Expr>> {
        if *self.peek() == Tok::Eof {
            return match &self.lex_err {
                Some(e) => Err(e.clone()),
                None => Ok(None),
            };
        }
        let u = self.parse_unit(TERM, Qualifiers::UNDEF)?;
        let (e, q, d) = self.want_term(u)?;
        let (e, _, _) = self.parse_expr_rest(e, q, d)?;
        if *self.peek() != Tok::Eof || self.lex_err.is_some() {
            return Err(self.unexpected("`and`, `or` or the end of the expression"));
        }
        Ok(Some(e))
    }

    /// A unit where only a term is allowed.
    fn want_term(&self, u: Unit) -> PResult<(Expr, Qualifiers, usize)> {
        match u {
            Unit::Term(e, q, d) => Ok((e, q, d)),
            Unit::Pnum(..) | Unit::Arith(..) => {
                Err(self.unexpected("a comparison operator or an arithmetic operator"))
            }
            Unit::Id(..) => Err(self.unexpected("a term")),
        }
    }

    /// `expr: expr and term | expr and id | expr or term | expr or id` (left-associative, `and`
    /// and `or` at the same precedence). `q` is the qualifiers the expression so far passes on.
    fn parse_expr_rest(
        &mut self,
        mut e: Expr,
        mut q: Qualifiers,
        mut d: usize,
    ) -> PResult<(Expr, Qualifiers, usize)> {
        loop {
            let is_and = match self.peek() {
                Tok::And => true,
                Tok::Or => false,
                _ => return Ok((e, q, d)),
            };
            let op_span = self.bump().span;
            let u = self.parse_unit(TERM_OR_ID, q)?;
            let (rhs, rq, rd) = match u {
                Unit::Term(r, rq, rd) | Unit::Id(r, rq, rd) => (r, rq, rd),
                Unit::Pnum(n, span) => (self.number(q, n, span)?, q, 1),
                Unit::Arith(..) => {
                    return Err(self.unexpected("a comparison operator or an arithmetic operator"))
                }
            };
            (e, d) = self.chain(is_and, e, d, rhs, rd, op_span)?;
            q = rq;
        }
    }

    // ----- units -----------------------------------------------------------------------------

    fn parse_unit(&mut self, allow: Allow, q: Qualifiers) -> PResult<Unit> {
        self.enter()?;
        let r = self.parse_unit_inner(allow, q);
        self.leave();
        r
    }

    fn parse_unit_inner(&mut self, allow: Allow, q: Qualifiers) -> PResult<Unit> {
        let start = self.span();
        let tok = self.peek().clone();
        let unit = match tok {
            Tok::Not if allow.term || allow.id => {
                self.bump();
                let inner_allow = Allow {
                    term: allow.term,
                    id: allow.id,
                    paren_pid: true,
                    arith: false,
                };
                let inner = self.parse_unit(inner_allow, q)?;
                return match inner {
                    Unit::Term(e, iq, d) => {
                        let d = self.check_tree(d + 1, start)?;
                        Ok(Unit::Term(Expr::Not(Box::new(e)), iq, d))
                    }
                    Unit::Id(e, iq, d) => {
                        let d = self.check_tree(d + 1, start)?;
                        Ok(Unit::Id(Expr::Not(Box::new(e)), iq, d))
                    }
                    Unit::Pnum(n, span) if allow.id => {
                        let e = self.number(q, n, span)?;
                        Ok(Unit::Id(Expr::Not(Box::new(e)), q, 2))
                    }
                    Unit::Pnum(..) | Unit::Arith(..) => {
                        Err(self.unexpected("a comparison operator or an arithmetic operator"))
                    }
                };
            }
            Tok::Num(n) => {
                let t = self.bump();
                Unit::Pnum(n, t.span)
            }
            Tok::LParen => self.parse_group(allow, q)?,
            Tok::Minus | Tok::Kw(Kw::Len, _) if allow.term || allow.arith => {
                let (a, d) = self.parse_arith_from(None)?;
                Unit::Arith(a, d)
            }
            Tok::Kw(Kw::Pname(_), _)
                if (allow.term || allow.arith) && *self.peek_at(1) == Tok::LBracket =>
            {
                let (a, d) = self.parse_arith_from(None)?;
                Unit::Arith(a, d)
            }
            Tok::Id(ref w) if allow.term && self.extensions && w == extension::PAYLOAD => {
                let e = self.parse_payload()?;
                Unit::Term(e, Qualifiers::UNDEF, 1)
            }
            ref t if allow.id && is_nid_start(t) => {
                let e = self.parse_nid(q)?;
                Unit::Id(e, q, 1)
            }
            Tok::Kw(..) if allow.term => {
                let (e, tq) = self.parse_keyword_term()?;
                Unit::Term(e, tq, 1)
            }
            _ => {
                let what = match (allow.term, allow.id, allow.arith) {
                    (true, true, _) => "an expression or an address",
                    (true, false, _) => "an expression",
                    (false, true, _) => "an address, a name or a number",
                    _ => "an arithmetic expression",
                };
                return Err(self.unexpected(what));
            }
        };
        self.continue_unit(allow, unit)
    }

    /// Extends a number or arithmetic unit with binary operators and, where a term is allowed,
    /// a comparison.
    fn continue_unit(&mut self, allow: Allow, mut unit: Unit) -> PResult<Unit> {
        if !(allow.term || allow.arith) {
            return Ok(unit);
        }
        if let Unit::Pnum(..) | Unit::Arith(..) = unit {
            if binop(self.peek()).is_some() {
                let first = match unit {
                    Unit::Pnum(n, s) => (Arith::Num(n, s), 1),
                    Unit::Arith(a, d) => (a, d),
                    _ => unreachable!(),
                };
                let (a, d) = self.parse_arith_from(Some(first))?;
                unit = Unit::Arith(a, d);
            }
            if allow.term {
                if let Some((op, negated)) = relop(self.peek()) {
                    self.bump();
                    let (lhs, ld) = match unit {
                        Unit::Pnum(n, s) => (Arith::Num(n, s), 1),
                        Unit::Arith(a, d) => (a, d),
                        _ => unreachable!(),
                    };
                    let (rhs, rd) = self.parse_arith()?;
                    let span = arith_span(&lhs).to(arith_span(&rhs));
                    let d = self.check_tree(ld.max(rd) + 1, span)?;
                    let e = prim(
                        PrimitiveKind::Relation {
                            op,
                            negated,
                            lhs,
                            rhs,
                        },
                        span,
                    );
                    unit = Unit::Term(e, Qualifiers::UNDEF, d);
                }
            }
        }
        Ok(unit)
    }

    fn parse_group_nested(&mut self, allow: Allow) -> PResult<Unit> {
        self.enter()?;
        let r = self.parse_group(allow, Qualifiers::UNDEF);
        self.leave();
        r
    }

    /// `( ... )` where `allow` says what the whole parenthesized thing may be: `paren expr ')'`
    /// (a term), `paren narth ')'` (arithmetic), `paren pnum ')'`, `paren pid ')'` (an id).
    fn parse_group(&mut self, allow: Allow, q: Qualifiers) -> PResult<Unit> {
        let open = self.bump().span;
        let expr_ok = allow.term;
        let narth_ok = allow.term || allow.arith;
        let pid_ok = allow.id && allow.paren_pid;
        let first_allow = Allow {
            term: expr_ok,
            id: pid_ok,
            paren_pid: false,
            arith: narth_ok,
        };
        let u = self.parse_unit(first_allow, q)?;
        let unit = match u {
            Unit::Term(e, tq, d) => {
                let (e, _, d) = self.parse_expr_rest(e, tq, d)?;
                // `paren expr ')'` passes on the qualifiers in force before the `(`.
                Unit::Term(e, q, d)
            }
            Unit::Id(e, iq, d) => {
                let (e, iq, d) = self.parse_pid_rest(e, iq, d)?;
                Unit::Id(e, iq, d)
            }
            Unit::Pnum(n, span) => {
                if pid_ok && matches!(self.peek(), Tok::And | Tok::Or) {
                    let e = self.number(q, n, span)?;
                    let (e, iq, d) = self.parse_pid_rest(e, q, 1)?;
                    Unit::Id(e, iq, d)
                } else {
                    Unit::Pnum(n, span)
                }
            }
            Unit::Arith(a, d) => Unit::Arith(a, d),
        };
        let close = self.expect(Tok::RParen, "`)`")?;
        Ok(match unit {
            Unit::Pnum(n, _) => Unit::Pnum(n, open.to(close.span)),
            u => u,
        })
    }

    /// The rest of a `pid`: `(and|or) id` repeated, each id inheriting from the one before.
    fn parse_pid_rest(
        &mut self,
        mut e: Expr,
        mut q: Qualifiers,
        mut d: usize,
    ) -> PResult<(Expr, Qualifiers, usize)> {
        loop {
            let is_and = match self.peek() {
                Tok::And => true,
                Tok::Or => false,
                _ => return Ok((e, q, d)),
            };
            let op_span = self.bump().span;
            let (rhs, rq, rd) = self.parse_id(q)?;
            (e, d) = self.chain(is_and, e, d, rhs, rd, op_span)?;
            q = rq;
        }
    }

    /// `id: nid | pnum | paren pid ')'`, inheriting `q`.
    fn parse_id(&mut self, q: Qualifiers) -> PResult<(Expr, Qualifiers, usize)> {
        match self.parse_unit(ID, q)? {
            Unit::Id(e, iq, d) => Ok((e, iq, d)),
            Unit::Pnum(n, span) => Ok((self.number(q, n, span)?, q, 1)),
            _ => Err(self.unexpected("an address, a name or a number")),
        }
    }

    /// `nid` without the `not id` alternative (handled by [`Parser::parse_unit`]).
    fn parse_nid(&mut self, q: Qualifiers) -> PResult<Expr> {
        let t = self.bump();
        let start = t.span;
        let kind = match t.tok {
            Tok::Id(name) => {
                if q.addr == AddrKind::Undef {
                    return Err(self.no_qualifiers(start));
                }
                PrimitiveKind::Name { q, name }
            }
            Tok::Hid(text) => match self.peek() {
                Tok::Slash => {
                    self.bump();
                    let prefix_len = self.expect_num()?;
                    PrimitiveKind::Ipv4Cidr {
                        q,
                        text,
                        prefix_len,
                    }
                }
                Tok::Kw(Kw::Mask, _) => {
                    self.bump();
                    match self.peek().clone() {
                        Tok::Hid(mask) => {
                            self.bump();
                            PrimitiveKind::Ipv4Masked { q, text, mask }
                        }
                        _ => return Err(self.unexpected("a dotted network mask")),
                    }
                }
                _ => {
                    let bad = match q.addr {
                        AddrKind::Port => Some("port"),
                        AddrKind::PortRange => Some("portrange"),
                        AddrKind::Proto => Some("proto"),
                        AddrKind::Protochain => Some("protochain"),
                        _ => None,
                    };
                    if let Some(b) = bad {
                        return Err(ParseError::new(
                            ParseErrorKind::AddressAfterQualifier(b),
                            start,
                        ));
                    }
                    if q.addr == AddrKind::Undef && plain_ipv4(&text) {
                        return Err(self.no_qualifiers(start));
                    }
                    PrimitiveKind::Ipv4 { q, text }
                }
            },
            Tok::Hid6(text) => {
                let mut prefix_len = 128;
                if *self.peek() == Tok::Slash {
                    self.bump();
                    prefix_len = self.expect_num()?;
                }
                PrimitiveKind::Ipv6 {
                    q,
                    text,
                    prefix_len,
                }
            }
            Tok::Eid(text) => PrimitiveKind::Ether { q, text },
            Tok::Aid(text) => PrimitiveKind::Arcnet { q, text },
            _ => unreachable!("caller checked is_nid_start"),
        };
        let span = Span::new(start.start, self.prev_end());
        Ok(prim(kind, span))
    }

    /// `pnum` in identifier position (`gen_ncode(NULL, n, q)`).
    fn number(&self, q: Qualifiers, value: u32, span: Span) -> PResult<Expr> {
        if q.addr == AddrKind::Undef {
            return Err(self.no_qualifiers(span));
        }
        Ok(prim(PrimitiveKind::Number { q, value }, span))
    }

    fn no_qualifiers(&self, span: Span) -> ParseError {
        let text = self.text[span.start..span.end].to_string();
        ParseError::new(ParseErrorKind::NoQualifiers(text), span)
    }

    // ----- keyword terms ---------------------------------------------------------------------

    /// Terms that start with a keyword (other than `len` and `proto[...]`): `head id`, `pname`,
    /// and the `other`, ATM and MTP primitives. Returns the qualifiers the term passes on.
    fn parse_keyword_term(&mut self) -> PResult<(Expr, Qualifiers)> {
        let start = self.span().start;
        let Tok::Kw(kw, _) = *self.peek() else {
            unreachable!("caller checked for a keyword")
        };
        let done = |p: &Parser<'_>, kind: PrimitiveKind| {
            (
                prim(kind, Span::new(start, p.prev_end())),
                Qualifiers::UNDEF,
            )
        };
        // An optional protocol qualifier first.
        let mut proto = Proto::Default;
        if let Kw::Pname(p) = kw {
            proto = p;
            self.bump();
        }
        let Tok::Kw(kw, text) = *self.peek() else {
            if proto != Proto::Default {
                return Ok(done(self, PrimitiveKind::ProtoAbbrev(proto)));
            }
            unreachable!()
        };
        if proto != Proto::Default || matches!(kw, Kw::Pname(_)) {
            // After a pname only a head, broadcast/multicast or an 802.11 primitive may follow;
            // anything else ends the `pname` term.
            let continues = matches!(
                kw,
                Kw::Src
                    | Kw::Dst
                    | Kw::Addr(_)
                    | Kw::Host
                    | Kw::Net
                    | Kw::Port
                    | Kw::Portrange
                    | Kw::ProtoKw
                    | Kw::Protochain
                    | Kw::Gateway
                    | Kw::Broadcast
                    | Kw::Multicast
                    | Kw::Type
                    | Kw::Subtype
                    | Kw::Dir
            );
            if !continues && proto != Proto::Default {
                return Ok(done(self, PrimitiveKind::ProtoAbbrev(proto)));
            }
        }
        match kw {
            Kw::Src | Kw::Dst | Kw::Addr(_) => {
                let t = self.bump();
                let dir = match kw {
                    Kw::Src | Kw::Dst => {
                        let other = if kw == Kw::Src { Kw::Dst } else { Kw::Src };
                        match self.peek() {
                            Tok::Or | Tok::And => {
                                let is_or = *self.peek() == Tok::Or;
                                self.bump();
                                match self.peek() {
                                    Tok::Kw(k, _) if *k == other => {
                                        self.bump();
                                    }
                                    _ => {
                                        return Err(self.unexpected(if other == Kw::Dst {
                                            "`dst`"
                                        } else {
                                            "`src`"
                                        }))
                                    }
                                }
                                if is_or {
                                    Dir::Or
                                } else {
                                    Dir::And
                                }
                            }
                            _ if kw == Kw::Src => Dir::Src,
                            _ => Dir::Dst,
                        }
                    }
                    Kw::Addr(d) => d,
                    _ => unreachable!(),
                };
                let _ = t;
                let addr = match self.peek() {
                    Tok::Kw(Kw::Host, _) => AddrKind::Host,
                    Tok::Kw(Kw::Net, _) => AddrKind::Net,
                    Tok::Kw(Kw::Port, _) => AddrKind::Port,
                    Tok::Kw(Kw::Portrange, _) => AddrKind::PortRange,
                    _ => AddrKind::Default,
                };
                if addr != AddrKind::Default {
                    self.bump();
                }
                self.head_id(Qualifiers { proto, dir, addr })
            }
            Kw::Host
            | Kw::Net
            | Kw::Port
            | Kw::Portrange
            | Kw::ProtoKw
            | Kw::Protochain
            | Kw::Gateway => {
                self.bump();
                let addr = match kw {
                    Kw::Host => AddrKind::Host,
                    Kw::Net => AddrKind::Net,
                    Kw::Port => AddrKind::Port,
                    Kw::Portrange => AddrKind::PortRange,
                    Kw::ProtoKw => AddrKind::Proto,
                    Kw::Protochain => AddrKind::Protochain,
                    _ => AddrKind::Gateway,
                };
                self.head_id(Qualifiers {
                    proto,
                    dir: Dir::Default,
                    addr,
                })
            }
            Kw::Broadcast => {
                self.bump();
                Ok(done(self, PrimitiveKind::Broadcast(proto)))
            }
            Kw::Multicast => {
                self.bump();
                Ok(done(self, PrimitiveKind::Multicast(proto)))
            }
            Kw::Type => {
                self.bump();
                self.num_or_id("an 802.11 type")?;
                if let Tok::Kw(Kw::Subtype, _) = self.peek() {
                    self.bump();
                    self.num_or_id("an 802.11 subtype")?;
                }
                Ok(done(self, PrimitiveKind::Unsupported(text)))
            }
            Kw::Subtype => {
                self.bump();
                self.expect_id()?;
                Ok(done(self, PrimitiveKind::Unsupported(text)))
            }
            Kw::Dir => {
                self.bump();
                self.num_or_id("an 802.11 direction")?;
                Ok(done(self, PrimitiveKind::Unsupported(text)))
            }
            _ if proto != Proto::Default => Ok(done(self, PrimitiveKind::ProtoAbbrev(proto))),
            Kw::Less | Kw::Greater => {
                self.bump();
                let n = self.expect_num()?;
                let kind = if kw == Kw::Less {
                    PrimitiveKind::Less(n)
                } else {
                    PrimitiveKind::Greater(n)
                };
                Ok(done(self, kind))
            }
            Kw::Byte => {
                self.bump();
                let index = self.expect_num()?;
                let op = match self.peek() {
                    Tok::Amp => ByteOp::And,
                    Tok::Pipe => ByteOp::Or,
                    Tok::Lt => ByteOp::Lt,
                    Tok::Gt => ByteOp::Gt,
                    Tok::Eq => ByteOp::Eq,
                    _ => return Err(self.unexpected("one of `&`, `|`, `<`, `>`, `=`")),
                };
                self.bump();
                let value = self.expect_num()?;
                Ok(done(self, PrimitiveKind::Byte { index, op, value }))
            }
            Kw::Inbound => {
                self.bump();
                Ok(done(self, PrimitiveKind::Inbound))
            }
            Kw::Outbound => {
                self.bump();
                Ok(done(self, PrimitiveKind::Outbound))
            }
            Kw::Ifindex => {
                self.bump();
                let n = self.expect_num()?;
                Ok(done(self, PrimitiveKind::Ifindex(n)))
            }
            Kw::Vlan | Kw::Mpls | Kw::Pppoes | Kw::Geneve => {
                self.bump();
                let n = match self.peek() {
                    Tok::Num(_) | Tok::LParen => Some(self.parse_pnum()?),
                    _ => None,
                };
                if kw == Kw::Vlan && n.is_none() && self.at_word(extension::IN) {
                    self.bump();
                    let set = self.parse_set_source()?;
                    return Ok(done(self, PrimitiveKind::VlanIn(set)));
                }
                let kind = match kw {
                    Kw::Vlan => PrimitiveKind::Vlan(n),
                    Kw::Mpls => PrimitiveKind::Mpls(n),
                    Kw::Pppoes => PrimitiveKind::Pppoes(n),
                    _ => PrimitiveKind::Geneve(n),
                };
                Ok(done(self, kind))
            }
            Kw::Pppoed => {
                self.bump();
                Ok(done(self, PrimitiveKind::Pppoed))
            }
            Kw::Llc => {
                self.bump();
                let sub = match self.peek().clone() {
                    Tok::Id(s) => {
                        self.bump();
                        Some(s)
                    }
                    Tok::Kw(Kw::PfRnr, _) => {
                        self.bump();
                        Some("rnr".to_string())
                    }
                    _ => None,
                };
                Ok(done(self, PrimitiveKind::Llc(sub)))
            }
            Kw::PfIfname | Kw::PfRset | Kw::PfAction => {
                self.bump();
                self.expect_id()?;
                Ok(done(self, PrimitiveKind::Unsupported(text)))
            }
            Kw::PfRnr | Kw::PfSrnr => {
                self.bump();
                self.expect_num()?;
                Ok(done(self, PrimitiveKind::Unsupported(text)))
            }
            Kw::PfReason => {
                self.bump();
                self.num_or_id("a reason")?;
                Ok(done(self, PrimitiveKind::Unsupported(text)))
            }
            Kw::AtmType | Kw::AtmMulti | Kw::Mtp2 => {
                self.bump();
                Ok(done(self, PrimitiveKind::Unsupported(text)))
            }
            Kw::AtmField | Kw::Mtp3 => {
                self.bump();
                self.field_value()?;
                Ok(done(self, PrimitiveKind::Unsupported(text)))
            }
            _ => Err(self.unexpected("an expression")),
        }
    }

    fn head_id(&mut self, q: Qualifiers) -> PResult<(Expr, Qualifiers)> {
        if self.at_word(extension::IN) {
            let start = self.bump().span.start;
            let set = self.parse_set_source()?;
            let span = Span::new(start, self.prev_end());
            return Ok((prim(PrimitiveKind::InSet { q, set }, span), q));
        }
        let (e, iq, _) = self.parse_id(q)?;
        Ok((e, iq))
    }

    fn num_or_id(&mut self, what: &str) -> PResult<()> {
        match self.peek() {
            Tok::Num(_) | Tok::Id(_) => {
                self.bump();
                Ok(())
            }
            _ => Err(self.unexpected(what)),
        }
    }

    /// ATM/MTP3 field values: `NUM`, `relop NUM`, `irelop NUM`, `( NUM or NUM ... )`.
    fn field_value(&mut self) -> PResult<()> {
        match self.peek() {
            Tok::Num(_) => {
                self.bump();
            }
            t if relop(t).is_some() => {
                self.bump();
                self.expect_num()?;
            }
            Tok::LParen => {
                self.bump();
                self.expect_num()?;
                while *self.peek() == Tok::Or {
                    self.bump();
                    self.expect_num()?;
                }
                self.expect(Tok::RParen, "`or` or `)`")?;
            }
            _ => return Err(self.unexpected("a number, a comparison or `(`")),
        }
        Ok(())
    }

    /// `pnum: NUM | paren pnum ')'`
    fn parse_pnum(&mut self) -> PResult<u32> {
        match self.peek() {
            Tok::Num(n) => {
                let n = *n;
                self.bump();
                Ok(n)
            }
            Tok::LParen => {
                self.enter()?;
                self.bump();
                let n = self.parse_pnum()?;
                self.expect(Tok::RParen, "`)`")?;
                self.leave();
                Ok(n)
            }
            _ => Err(self.unexpected("a number")),
        }
    }

    // ----- arithmetic ------------------------------------------------------------------------

    fn parse_arith(&mut self) -> PResult<(Arith, usize)> {
        self.parse_arith_from(None)
    }

    /// Operator-precedence parsing with yacc's conflict resolution: precedence and left
    /// associativity for the declared operators, unary minus above all of them, and shifting
    /// (grouping to the right) whenever `%` or `^` is involved.
    fn parse_arith_from(&mut self, first: Option<(Arith, usize)>) -> PResult<(Arith, usize)> {
        let mut vals: Vec<(Arith, usize)> = Vec::new();
        let mut ops: Vec<StackOp> = Vec::new();
        match first {
            Some(f) => vals.push(f),
            None => self.arith_operand(&mut vals, &mut ops)?,
        }
        while let Some(op) = binop(self.peek()) {
            while let Some(&top) = ops.last() {
                if !should_reduce(top, op) {
                    break;
                }
                self.reduce(&mut vals, &mut ops)?;
            }
            self.bump();
            ops.push(StackOp::Bin(op));
            self.arith_operand(&mut vals, &mut ops)?;
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

    /// Unary minuses, then a primary: `NUM`, `len`, `proto [ arth ]`, `proto [ arth : NUM ]`,
    /// `( narth )`, `( pnum )`.
    fn arith_operand(
        &mut self,
        vals: &mut Vec<(Arith, usize)>,
        ops: &mut Vec<StackOp>,
    ) -> PResult<()> {
        while *self.peek() == Tok::Minus {
            ops.push(StackOp::Neg(self.span().start));
            self.bump();
        }
        if ops.len() > MAX_DEPTH {
            return Err(ParseError::new(ParseErrorKind::TooDeep, self.span()));
        }
        let start = self.span();
        let v = match self.peek().clone() {
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
        vals.push(v);
        Ok(())
    }
}

impl Parser<'_> {
    // ----- sift extensions ---------------------------------------------------------------------

    /// Whether the next token is the extension keyword `word` (extensions on).
    fn at_word(&self, word: &str) -> bool {
        self.extensions && matches!(self.peek(), Tok::Id(w) if w == word)
    }

    fn payload_error(&self, message: &str, span: Span) -> ParseError {
        ParseError::new(ParseErrorKind::BadPayload(message.to_string()), span)
    }

    /// `payload contains [nocase] STRING | payload matches STRING | payload[OFF[:LEN]] op VALUE`
    fn parse_payload(&mut self) -> PResult<Expr> {
        let start = self.bump().span.start;
        let test = if self.at_word(extension::CONTAINS) {
            self.bump();
            let nocase = self.at_word(extension::NOCASE);
            if nocase {
                self.bump();
            }
            let (bytes, span) = self.expect_string()?;
            if bytes.is_empty() {
                return Err(self.payload_error("empty pattern", span));
            }
            PayloadTest::Contains { bytes, nocase }
        } else if self.at_word(extension::MATCHES) {
            self.bump();
            let (bytes, span) = self.expect_string()?;
            let re = String::from_utf8(bytes)
                .map_err(|_| self.payload_error("a regular expression must be UTF-8", span))?;
            PayloadTest::Matches(re)
        } else if *self.peek() == Tok::LBracket {
            self.bump();
            let offset = self.expect_num()?;
            let len = if *self.peek() == Tok::Colon {
                self.bump();
                let at = self.span();
                let n = self.expect_num()?;
                Some((n, at))
            } else {
                None
            };
            self.expect(Tok::RBracket, "`:` or `]`")?;
            let negated = match self.peek() {
                Tok::Eq => false,
                Tok::Ne => true,
                _ => return Err(self.unexpected("`=`, `==` or `!=`")),
            };
            self.bump();
            let bytes = self.payload_value(len)?;
            if offset.checked_add(bytes.len() as u32).is_none() {
                let span = Span::new(start, self.prev_end());
                return Err(self.payload_error("offset and length overflow 32 bits", span));
            }
            PayloadTest::Equals {
                offset,
                bytes,
                negated,
            }
        } else {
            return Err(self.unexpected("`contains`, `matches` or `[`"));
        };
        Ok(prim(
            PrimitiveKind::Payload(test),
            Span::new(start, self.prev_end()),
        ))
    }

    /// The bytes a `payload[...]` comparison expects: a string (its length must be `len` when
    /// given), or a number written in `len` bytes (1 when not given; at most 4), big-endian.
    fn payload_value(&mut self, len: Option<(u32, Span)>) -> PResult<Vec<u8>> {
        let at = self.span();
        match self.peek().clone() {
            Tok::Str(bytes) => {
                self.bump();
                if bytes.is_empty() {
                    return Err(self.payload_error("empty string", at));
                }
                match len {
                    Some((n, span)) if n as usize != bytes.len() => Err(self.payload_error(
                        &format!(
                            "length {n} does not match the string's {} bytes",
                            bytes.len()
                        ),
                        span,
                    )),
                    _ => Ok(bytes),
                }
            }
            Tok::Num(value) => {
                self.bump();
                let (n, len_span) = len.unwrap_or((1, at));
                if !(1..=4).contains(&n) {
                    return Err(self.payload_error(
                        "a number compares 1 to 4 bytes (use a string for more)",
                        len_span,
                    ));
                }
                if n < 4 && value >> (8 * n) != 0 {
                    return Err(
                        self.payload_error(&format!("{value} does not fit in {n} bytes"), at)
                    );
                }
                Ok(value.to_be_bytes()[4 - n as usize..].to_vec())
            }
            _ => Err(self.unexpected("a string or a number")),
        }
    }

    fn expect_string(&mut self) -> PResult<(Vec<u8>, Span)> {
        match self.peek().clone() {
            Tok::Str(bytes) => Ok((bytes, self.bump().span)),
            _ => Err(self.unexpected("a quoted string")),
        }
    }

    /// `{ item, ... }` or `@file` after `in`.
    fn parse_set_source(&mut self) -> PResult<SetSource> {
        match self.peek().clone() {
            Tok::SetLit(items) => {
                self.bump();
                Ok(SetSource::Items(items))
            }
            Tok::FileRef(path) => {
                let span = self.bump().span;
                Ok(SetSource::File { path, span })
            }
            _ => Err(self.unexpected("a set `{...}` or a set file `@path`")),
        }
    }
}

/// Parses a filter expression. `Ok(None)` for an empty (or whitespace-only) expression, which
/// libpcap accepts and which matches every packet.
pub fn parse(text: &str) -> Result<Option<Expr>, ParseError> {
    parse_with(text, false)
}

/// Like [`parse`]; with `extensions`, the language also has sift's payload tests and sets
/// (see the `extension` module). Without, it is exactly libpcap's.
pub fn parse_with(text: &str, extensions: bool) -> Result<Option<Expr>, ParseError> {
    let (toks, lex_err) = tokenize_with(text, extensions);
    let mut p = Parser {
        text,
        toks,
        pos: 0,
        lex_err,
        depth: 0,
        extensions,
    };
    p.parse_prog()
}
