//! The tokenizer, reproducing libpcap 1.10's flex scanner (`scanner.l`): at each position the
//! longest match wins, and among equally long matches the rule listed first (keywords, then
//! operators, `$xx`, MAC addresses, numbers, dotted IPv4, IPv6, malformed MAC addresses, named
//! constants, identifiers, `\escaped` identifiers).

mod keywords;
mod shapes;

use std::fmt;

use crate::ast::{Dir, Proto, Span};
use crate::error::{ParseError, ParseErrorKind};
use keywords::fixed_word_token;
pub use keywords::{keyword, named_number};
use shapes::*;

/// Keyword tokens (the scanner's fixed-string rules). Each carries nothing; the text as written is
/// in the source at [`Token::span`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kw {
    Dst,
    Src,
    /// A protocol name usable as a qualifier (`pname` in the grammar).
    Pname(Proto),
    Host,
    Net,
    Mask,
    Port,
    Portrange,
    ProtoKw,
    Protochain,
    Gateway,
    Type,
    Subtype,
    Dir,
    /// `addr1`..`addr4`, `ra`, `ta`.
    Addr(Dir),
    Less,
    Greater,
    Byte,
    Broadcast,
    Multicast,
    Len,
    Inbound,
    Outbound,
    Ifindex,
    Vlan,
    Mpls,
    Pppoed,
    Pppoes,
    Geneve,
    Llc,
    /// `lane`, `metac`, `bcc`, `oamf4ec`, `oamf4sc`, `sc`, `ilmic`.
    AtmType,
    /// `oam`, `oamf4`, `connectmsg`, `metaconnect`.
    AtmMulti,
    /// `vpi`, `vci`.
    AtmField,
    PfIfname,
    PfRset,
    PfRnr,
    PfSrnr,
    PfReason,
    PfAction,
    /// `fisu`, `lssu`, `lsu`, `msu`, `hfisu`, `hlssu`, `hmsu`.
    Mtp2,
    /// `sio`, `opc`, `dpc`, `sls`, `hsio`, `hopc`, `hdpc`, `hsls`.
    Mtp3,
}

/// A token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    /// A keyword; the string is the keyword as written (for messages and `Unsupported`).
    Kw(Kw, &'static str),
    /// A number, or a named constant such as `tcp-syn`.
    Num(u32),
    /// An identifier; for `\name` the backslash is removed.
    Id(String),
    /// Dotted IPv4 with 2 to 4 parts.
    Hid(String),
    /// IPv6 address (validated).
    Hid6(String),
    /// MAC address.
    Eid(String),
    /// ARCnet address `$xx`.
    Aid(String),
    And,
    Or,
    Not,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Colon,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Amp,
    Pipe,
    Caret,
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
    Lsh,
    Rsh,
    /// A quoted string (extension).
    Str(Vec<u8>),
    /// A `{...}` set literal (extension).
    SetLit(Vec<crate::ast::SetItem>),
    /// An `@path` set file (extension).
    FileRef(String),
    Eof,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = |f: &mut fmt::Formatter<'_>, s: &str| write!(f, "`{s}`");
        match self {
            Tok::Kw(_, s) => write!(f, "keyword `{s}`"),
            Tok::Num(n) => write!(f, "number {n}"),
            Tok::Id(s) => write!(f, "name `{s}`"),
            Tok::Hid(s) => write!(f, "IPv4 address `{s}`"),
            Tok::Hid6(s) => write!(f, "IPv6 address `{s}`"),
            Tok::Eid(s) => write!(f, "MAC address `{s}`"),
            Tok::Aid(s) => write!(f, "ARCnet address `{s}`"),
            Tok::Str(s) => write!(f, "string \"{}\"", s.escape_ascii()),
            Tok::SetLit(_) => write!(f, "a set"),
            Tok::FileRef(p) => write!(f, "set file `@{p}`"),
            Tok::And => op(f, "and"),
            Tok::Or => op(f, "or"),
            Tok::Not => op(f, "not"),
            Tok::LParen => op(f, "("),
            Tok::RParen => op(f, ")"),
            Tok::LBracket => op(f, "["),
            Tok::RBracket => op(f, "]"),
            Tok::Colon => op(f, ":"),
            Tok::Plus => op(f, "+"),
            Tok::Minus => op(f, "-"),
            Tok::Star => op(f, "*"),
            Tok::Slash => op(f, "/"),
            Tok::Percent => op(f, "%"),
            Tok::Amp => op(f, "&"),
            Tok::Pipe => op(f, "|"),
            Tok::Caret => op(f, "^"),
            Tok::Gt => op(f, ">"),
            Tok::Ge => op(f, ">="),
            Tok::Lt => op(f, "<"),
            Tok::Le => op(f, "<="),
            Tok::Eq => op(f, "="),
            Tok::Ne => op(f, "!="),
            Tok::Lsh => op(f, "<<"),
            Tok::Rsh => op(f, ">>"),
            Tok::Eof => write!(f, "end of expression"),
        }
    }
}

/// A token with its span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

// Rule numbers, in scanner.l order: ties between equally long matches go to the lowest.
const R_KEYWORD: u8 = 0;
const R_OP: u8 = 1;
const R_AID: u8 = 2;
const R_MAC: u8 = 3;
const R_NUM: u8 = 4;
const R_HID: u8 = 5;
const R_V6: u8 = 6;
const R_BOGUS_EID: u8 = 7;
const R_ID: u8 = 9;

/// Tokenizes the whole expression. The token list ends with [`Tok::Eof`]. A lexical error is
/// returned as well, the tokens then ending with an `Eof` at the error's position, so that a syntax error earlier in the
/// text is still reported first, as libpcap (which lexes on demand) does.
pub fn tokenize(text: &str) -> (Vec<Token>, Option<ParseError>) {
    tokenize_with(text, false)
}

/// Like [`tokenize`]; with `extensions`, also the tokens of sift's extensions (strings, set
/// literals, set files), which start with characters libpcap rejects.
pub fn tokenize_with(text: &str, extensions: bool) -> (Vec<Token>, Option<ParseError>) {
    static V6: std::sync::OnceLock<Vec<Vec<El>>> = std::sync::OnceLock::new();
    let s = text.as_bytes();
    let v6 = V6.get_or_init(v6_patterns);
    let mut toks = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if matches!(c, b' ' | b'\r' | b'\n' | b'\t') {
            i += 1;
            continue;
        }
        let next = match extensions.then(|| crate::extension::lex(text, i)).flatten() {
            Some(t) => t,
            None => next_token(text, i, v6),
        };
        match next {
            Ok((tok, end)) => {
                toks.push(Token {
                    tok,
                    span: Span::new(i, end),
                });
                i = end;
            }
            Err(e) => {
                toks.push(Token {
                    tok: Tok::Eof,
                    span: e.span,
                });
                return (toks, Some(e));
            }
        }
    }
    toks.push(Token {
        tok: Tok::Eof,
        span: Span::new(s.len(), s.len()),
    });
    (toks, None)
}

fn next_token(text: &str, i: usize, v6: &[Vec<El>]) -> Result<(Tok, usize), ParseError> {
    let s = text.as_bytes();
    let c = s[i];
    // Backslash-escaped identifier: the only rule starting with `\`.
    if c == b'\\' {
        let rest = &text[i + 1..];
        let n = rest
            .find([' ', '!', '(', ')', '\n', '\t'])
            .unwrap_or(rest.len());
        if n == 0 {
            return Err(ParseError::new(
                ParseErrorKind::IllegalCharacter('\\'),
                Span::new(i, i + 1),
            ));
        }
        return Ok((Tok::Id(rest[..n].to_string()), i + 1 + n));
    }
    // (length, rule) of the best match so far.
    let mut best: Option<(usize, u8)> = None;
    let mut consider = |end: Option<usize>, rule: u8| {
        if let Some(end) = end {
            let len = end - i;
            if len > 0 && best.is_none_or(|(l, r)| len > l || (len == l && rule < r)) {
                best = Some((len, rule));
            }
        }
    };
    // Operators. `&&` and `||` are keyword rules (listed first), the others follow the
    // single-character rule; two-character matches are longer anyway.
    let two = if i + 1 < s.len() {
        match (c, s[i + 1]) {
            (b'&', b'&') => Some((Tok::And, R_KEYWORD)),
            (b'|', b'|') => Some((Tok::Or, R_KEYWORD)),
            (b'>', b'=') => Some((Tok::Ge, R_OP)),
            (b'<', b'=') => Some((Tok::Le, R_OP)),
            (b'!', b'=') => Some((Tok::Ne, R_OP)),
            (b'=', b'=') => Some((Tok::Eq, R_OP)),
            (b'<', b'<') => Some((Tok::Lsh, R_OP)),
            (b'>', b'>') => Some((Tok::Rsh, R_OP)),
            _ => None,
        }
    } else {
        None
    };
    if let Some((tok, _)) = two {
        return Ok((tok, i + 2));
    }
    let single = match c {
        b'+' => Some(Tok::Plus),
        b'-' => Some(Tok::Minus),
        b'*' => Some(Tok::Star),
        b'/' => Some(Tok::Slash),
        b'%' => Some(Tok::Percent),
        b':' => Some(Tok::Colon),
        b'[' => Some(Tok::LBracket),
        b']' => Some(Tok::RBracket),
        b'!' => Some(Tok::Not),
        b'<' => Some(Tok::Lt),
        b'>' => Some(Tok::Gt),
        b'(' => Some(Tok::LParen),
        b')' => Some(Tok::RParen),
        b'&' => Some(Tok::Amp),
        b'|' => Some(Tok::Pipe),
        b'^' => Some(Tok::Caret),
        b'=' => Some(Tok::Eq),
        _ => None,
    };
    if single.is_some() {
        consider(Some(i + 1), R_OP);
    }
    if c == b'$' {
        consider(hex_end(s, i + 1, 1, 2), R_AID);
    }
    // The address and number shapes start with a hex digit, or (IPv6 only) a colon.
    if is_hex(c) || c == b':' {
        let run = AddressRun::at(s, i);
        if is_hex(c) {
            consider(mac_len(s, i, run), R_MAC);
            // `{B}:+({B}:+)+` has two colons at least.
            if run.colons >= 2 {
                consider(bogus_eid_len(s, i), R_BOGUS_EID);
            }
        }
        if c.is_ascii_digit() {
            consider(num_end(s, i), R_NUM);
            if run.dots >= 1 {
                consider(hid_len(s, i), R_HID);
            }
        }
        // Every IPv6 pattern has two colons at least.
        if run.colons >= 2 {
            consider(v6_len(s, i, v6), R_V6);
        }
    }
    let id_end = id_len(s, i);
    consider(id_end, R_ID);
    let Some((len, rule)) = best else {
        let ch = text[i..].chars().next().unwrap_or('\u{fffd}');
        return Err(ParseError::new(
            ParseErrorKind::IllegalCharacter(ch),
            Span::new(i, i + ch.len_utf8()),
        ));
    };
    let end = i + len;
    let word = &text[i..end];
    let span = Span::new(i, end);
    let tok = match rule {
        R_OP => single.expect("operator"),
        R_AID => Tok::Aid(word.to_string()),
        R_MAC => Tok::Eid(word.to_string()),
        R_NUM => match convert_number(word) {
            Ok(n) => Tok::Num(n),
            Err(k) => return Err(ParseError::new(k, span)),
        },
        R_HID => Tok::Hid(word.to_string()),
        R_V6 => {
            if !valid_ipv6(word) {
                return Err(ParseError::new(
                    ParseErrorKind::BogusIpv6(word.to_string()),
                    span,
                ));
            }
            Tok::Hid6(word.to_string())
        }
        R_BOGUS_EID => {
            return Err(ParseError::new(
                ParseErrorKind::BogusEthernet(word.to_string()),
                span,
            ))
        }
        _ => {
            // Keywords and named constants are exact words that the identifier rule also
            // matches, with the same length; they come first.
            fixed_word_token(word).unwrap_or_else(|| Tok::Id(word.to_string()))
        }
    };
    Ok((tok, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The address-run check only skips patterns that cannot match: on every position of
    /// pseudo-random address-like text, skipping gives the same matches as trying them all,
    /// and the shortcuts give the ends the general matcher gives.
    #[test]
    fn address_run_check_skips_only_impossible_matches() {
        const ALPHABET: &[u8] = b"0123456789abcdefABxX:.-:. ";
        let every = AddressRun {
            colons: usize::MAX,
            dots: usize::MAX,
            dashes: usize::MAX,
            leading_hex: usize::MAX,
        };
        let v6 = v6_patterns();
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..3000 {
            let len = 1 + (state % 24) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    ALPHABET[(state % ALPHABET.len() as u64) as usize]
                })
                .collect();
            for i in 0..text.len() {
                let run = AddressRun::at(&text, i);
                let shown = String::from_utf8_lossy(&text);
                assert_eq!(
                    mac_len(&text, i, run),
                    mac_len(&text, i, every),
                    "{shown} at {i}"
                );
                if run.colons < 2 {
                    assert_eq!(v6_len(&text, i, &v6), None, "{shown} at {i}");
                    assert_eq!(bogus_eid_len(&text, i), None, "{shown} at {i}");
                }
                if run.dots == 0 {
                    assert_eq!(hid_len(&text, i), None, "{shown} at {i}");
                }
                let dotted = (2..=4)
                    .filter_map(|parts| {
                        use El::*;
                        let pat = [N, Lit(b'.'), N, Lit(b'.'), N, Lit(b'.'), N];
                        longest(&text, i, &pat[..2 * parts - 1])
                    })
                    .max();
                assert_eq!(hid_len(&text, i), dotted, "{shown} at {i}");
                let mut ends = Vec::new();
                num_ends(&text, i, &mut ends);
                assert_eq!(
                    num_end(&text, i),
                    ends.iter().max().copied(),
                    "{shown} at {i}"
                );
                for (min, max) in [(1, 2), (1, 4), (4, 4)] {
                    ends.clear();
                    hex_ends(&text, i, min, max, &mut ends);
                    assert_eq!(
                        hex_end(&text, i, min, max),
                        ends.last().copied(),
                        "{shown} at {i}"
                    );
                }
            }
        }
    }

    fn toks(s: &str) -> Vec<Tok> {
        let (t, e) = tokenize(s);
        assert!(e.is_none(), "{s}: {e:?}");
        t.into_iter()
            .map(|t| t.tok)
            .filter(|t| *t != Tok::Eof)
            .collect()
    }

    fn err(s: &str) -> ParseErrorKind {
        tokenize(s).1.expect("error").kind
    }

    fn id(s: &str) -> Tok {
        Tok::Id(s.into())
    }

    #[test]
    fn longest_match() {
        assert_eq!(
            toks("10.0.0.1/24"),
            vec![Tok::Hid("10.0.0.1".into()), Tok::Slash, Tok::Num(24)]
        );
        assert_eq!(toks("tcp-syn"), vec![Tok::Num(2)]);
        assert_eq!(toks("icmp-echo"), vec![Tok::Num(8)]);
        assert_eq!(toks("icmp-echoreply"), vec![Tok::Num(0)]);
        assert_eq!(toks("tcp-synx"), vec![id("tcp-synx")]);
        assert_eq!(toks("1.2.3"), vec![Tok::Hid("1.2.3".into())]);
        assert_eq!(toks("1.2.3.4.5"), vec![id("1.2.3.4.5")]);
        assert_eq!(toks("1.2.3."), vec![id("1.2.3.")]);
        assert_eq!(
            toks("00:11:22:33:44:55"),
            vec![Tok::Eid("00:11:22:33:44:55".into())]
        );
        assert_eq!(toks("001122334455"), vec![Tok::Eid("001122334455".into())]);
        assert_eq!(
            toks("0011.2233.4455"),
            vec![Tok::Eid("0011.2233.4455".into())]
        );
        assert_eq!(toks("1.2.3.4.5.6"), vec![Tok::Eid("1.2.3.4.5.6".into())]);
        assert_eq!(toks("a-b"), vec![id("a-b")]);
        assert_eq!(toks("1-2"), vec![id("1-2")]);
        assert_eq!(toks("a-"), vec![id("a"), Tok::Minus]);
        assert_eq!(toks("2001::1"), vec![Tok::Hid6("2001::1".into())]);
        assert_eq!(toks("::"), vec![Tok::Hid6("::".into())]);
        assert_eq!(
            toks("::ffff:1.2.3.4"),
            vec![Tok::Hid6("::ffff:1.2.3.4".into())]
        );
        assert_eq!(toks("0x0800"), vec![Tok::Num(0x800)]);
        assert_eq!(toks("0x1g"), vec![id("0x1g")]);
        assert_eq!(toks("010"), vec![Tok::Num(8)]);
        assert_eq!(toks("$1f"), vec![Tok::Aid("$1f".into())]);
        assert_eq!(toks("$1fa"), vec![Tok::Aid("$1f".into()), id("a")]);
        assert_eq!(toks("\\ip"), vec![id("ip")]);
        assert_eq!(toks("\\a(b"), vec![id("a"), Tok::LParen, id("b")]);
        assert_eq!(
            toks("es-is is-is"),
            vec![
                Tok::Kw(Kw::Pname(Proto::Esis), "es-is"),
                Tok::Kw(Kw::Pname(Proto::Isis), "is-is")
            ]
        );
        assert_eq!(toks("TCP"), vec![id("TCP")]);
        assert_eq!(toks("&&||!"), vec![Tok::And, Tok::Or, Tok::Not]);
        assert_eq!(toks("a&&b"), vec![id("a"), Tok::And, id("b")]);
        assert_eq!(toks(">>= <<"), vec![Tok::Rsh, Tok::Eq, Tok::Lsh]);
        assert_eq!(toks("=="), vec![Tok::Eq]);
        assert_eq!(
            toks("tcp[1:2]"),
            vec![
                Tok::Kw(Kw::Pname(Proto::Tcp), "tcp"),
                Tok::LBracket,
                Tok::Num(1),
                Tok::Colon,
                Tok::Num(2),
                Tok::RBracket
            ]
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(toks("4294967295"), vec![Tok::Num(u32::MAX)]);
        assert_eq!(toks("0xffffffff"), vec![Tok::Num(u32::MAX)]);
        assert_eq!(toks("0377"), vec![Tok::Num(255)]);
        // Twelve hex digits are a MAC address (an earlier rule than numbers).
        assert_eq!(toks("037777777777"), vec![Tok::Eid("037777777777".into())]);
        assert_eq!(toks("0037777777777"), vec![Tok::Num(u32::MAX)]);
        assert!(matches!(
            err("4294967296"),
            ParseErrorKind::NumberOverflow(_)
        ));
        assert!(matches!(
            err("0x100000000"),
            ParseErrorKind::NumberOverflow(_)
        ));
        assert!(matches!(
            err("0040000000000"),
            ParseErrorKind::NumberOverflow(_)
        ));
        assert!(matches!(err("08"), ParseErrorKind::NonOctalDigit(_)));
    }

    #[test]
    fn lexical_errors() {
        assert!(matches!(err("."), ParseErrorKind::IllegalCharacter('.')));
        assert!(matches!(err("a ~"), ParseErrorKind::IllegalCharacter('~')));
        assert!(matches!(err("é"), ParseErrorKind::IllegalCharacter('é')));
        assert!(matches!(err("\\"), ParseErrorKind::IllegalCharacter('\\')));
        assert!(matches!(err("1:2:3:"), ParseErrorKind::BogusEthernet(_)));
        assert!(matches!(err("::0x1.2.3.4"), ParseErrorKind::BogusIpv6(_)));
        let (t, e) = tokenize("tcp ~");
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].tok, Tok::Eof);
        assert_eq!(e.unwrap().span, Span::new(4, 5));
    }
}
