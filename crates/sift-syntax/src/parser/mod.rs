//! A hand-written parser that accepts exactly the language of libpcap 1.10's bison grammar
//! (`grammar.y`), with the same tree shapes and the same qualifier inheritance.
//!
//! The grammar is LALR(1) and, apart from 38 shift/reduce conflicts that all involve `%` and `^`
//! (which have no declared precedence, so bison shifts), conflict-free. Its awkward spots for a
//! top-down parser are the tokens that can start several things at once: after `and`/`or` a
//! number, `(` or `!` may begin either a *term* (`1 > 0`, `(tcp)`, `not tcp`) or an *id*
//! inheriting the previous qualifiers (`port 1 or 2`, `host a or (b or c)`, `host a or not b`).
//! Here the parser reads such a prefix without committing, as a `Unit`, and decides once the
//! following token settles it, which is what the LALR automaton does too.

use crate::ast::*;
use crate::error::{ParseError, ParseErrorKind};
use crate::extension;
use crate::lexer::{tokenize_with, Kw, Tok, Token};
use crate::{MAX_DEPTH, MAX_TREE_DEPTH};

mod arith;
mod keywords;
mod payload;

use arith::{arith_span, binop, relop};

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
    /// Consumes the current token, returning its span (the final `Eof` is never consumed).
    fn bump(&mut self) -> Span {
        let span = self.span();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        span
    }
    /// Consumes the current token and returns it with its payload (a name, an address, a
    /// string, a set), to be moved into the tree rather than cloned. An `Eof` with the same span
    /// stays behind: the parser never looks back at a consumed token except for its span
    /// ([`Parser::prev_end`]). The final `Eof` is never consumed.
    fn take(&mut self) -> Tok {
        if self.pos + 1 == self.toks.len() {
            return Tok::Eof;
        }
        let tok = std::mem::replace(&mut self.toks[self.pos].tok, Tok::Eof);
        self.pos += 1;
        tok
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

    fn expect(&mut self, t: Tok, what: &str) -> PResult<Span> {
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
        match self.peek() {
            Tok::Id(_) => {
                let Tok::Id(name) = self.take() else {
                    unreachable!("just peeked")
                };
                Ok(name)
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
            let op_span = self.bump();
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
        let unit = match *self.peek() {
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
            Tok::Num(n) => Unit::Pnum(n, self.bump()),
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
        let open = self.bump();
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
            Unit::Pnum(n, _) => Unit::Pnum(n, open.to(close)),
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
            let op_span = self.bump();
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
        let start = self.span();
        let kind = match self.take() {
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
                    match self.peek() {
                        Tok::Hid(_) => {
                            let Tok::Hid(mask) = self.take() else {
                                unreachable!("just peeked")
                            };
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
