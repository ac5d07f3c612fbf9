//! Terms that start with a keyword: `head id`, protocol names, and the `other`, ATM and MTP
//! primitives.

use super::*;

impl Parser<'_> {
    /// Terms that start with a keyword (other than `len` and `proto[...]`): `head id`, `pname`,
    /// and the `other`, ATM and MTP primitives. Returns the qualifiers the term passes on.
    pub(super) fn parse_keyword_term(&mut self) -> PResult<(Expr, Qualifiers)> {
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
                self.bump();
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
                let sub = match self.peek() {
                    Tok::Id(_) => Some(self.expect_id()?),
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
            let start = self.bump().start;
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
}
