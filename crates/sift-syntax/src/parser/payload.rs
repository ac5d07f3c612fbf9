//! sift's extensions to the language: payload tests and sets (see the `extension` module).

use super::*;

impl Parser<'_> {
    // ----- sift extensions ---------------------------------------------------------------------

    /// Whether the next token is the extension keyword `word` (extensions on).
    pub(super) fn at_word(&self, word: &str) -> bool {
        self.extensions && matches!(self.peek(), Tok::Id(w) if w == word)
    }

    fn payload_error(&self, message: &str, span: Span) -> ParseError {
        ParseError::new(ParseErrorKind::BadPayload(message.to_string()), span)
    }

    /// `payload contains [nocase] STRING | payload matches STRING | payload[OFF[:LEN]] op VALUE`
    pub(super) fn parse_payload(&mut self) -> PResult<Expr> {
        let start = self.bump().start;
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
        match self.peek() {
            Tok::Str(_) => {
                let Tok::Str(bytes) = self.take() else {
                    unreachable!("just peeked")
                };
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
            &Tok::Num(value) => {
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
        match self.peek() {
            Tok::Str(_) => {
                let span = self.span();
                let Tok::Str(bytes) = self.take() else {
                    unreachable!("just peeked")
                };
                Ok((bytes, span))
            }
            _ => Err(self.unexpected("a quoted string")),
        }
    }

    /// `{ item, ... }` or `@file` after `in`.
    pub(super) fn parse_set_source(&mut self) -> PResult<SetSource> {
        match self.peek() {
            Tok::SetLit(_) | Tok::FileRef(_) => {
                let span = self.span();
                match self.take() {
                    Tok::SetLit(items) => Ok(SetSource::Items(items)),
                    Tok::FileRef(path) => Ok(SetSource::File { path, span }),
                    _ => unreachable!("just peeked"),
                }
            }
            _ => Err(self.unexpected("a set `{...}` or a set file `@path`")),
        }
    }
}
