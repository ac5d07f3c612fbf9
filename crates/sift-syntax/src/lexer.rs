//! The tokenizer, reproducing libpcap 1.10's flex scanner (`scanner.l`): at each position the
//! longest match wins, and among equally long matches the rule listed first (keywords, then
//! operators, `$xx`, MAC addresses, numbers, dotted IPv4, IPv6, malformed MAC addresses, named
//! constants, identifiers, `\escaped` identifiers).

use std::fmt;
use std::net::Ipv6Addr;
use std::str::FromStr;

use crate::ast::{Dir, Proto, Span};
use crate::error::{ParseError, ParseErrorKind};

/// Keyword tokens (the scanner's fixed-string rules). Each carries nothing; the text as written is
/// in [`Token::text`].
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

const KEYWORDS: &[(&str, Kw)] = &[
    ("dst", Kw::Dst),
    ("src", Kw::Src),
    ("link", Kw::Pname(Proto::Link)),
    ("ether", Kw::Pname(Proto::Link)),
    ("ppp", Kw::Pname(Proto::Link)),
    ("slip", Kw::Pname(Proto::Link)),
    ("fddi", Kw::Pname(Proto::Link)),
    ("tr", Kw::Pname(Proto::Link)),
    ("wlan", Kw::Pname(Proto::Link)),
    ("arp", Kw::Pname(Proto::Arp)),
    ("rarp", Kw::Pname(Proto::Rarp)),
    ("ip", Kw::Pname(Proto::Ip)),
    ("sctp", Kw::Pname(Proto::Sctp)),
    ("tcp", Kw::Pname(Proto::Tcp)),
    ("udp", Kw::Pname(Proto::Udp)),
    ("icmp", Kw::Pname(Proto::Icmp)),
    ("igmp", Kw::Pname(Proto::Igmp)),
    ("igrp", Kw::Pname(Proto::Igrp)),
    ("pim", Kw::Pname(Proto::Pim)),
    ("vrrp", Kw::Pname(Proto::Vrrp)),
    ("carp", Kw::Pname(Proto::Carp)),
    ("radio", Kw::Pname(Proto::Radio)),
    ("ip6", Kw::Pname(Proto::Ipv6)),
    ("icmp6", Kw::Pname(Proto::Icmpv6)),
    ("ah", Kw::Pname(Proto::Ah)),
    ("esp", Kw::Pname(Proto::Esp)),
    ("atalk", Kw::Pname(Proto::Atalk)),
    ("aarp", Kw::Pname(Proto::Aarp)),
    ("decnet", Kw::Pname(Proto::Decnet)),
    ("lat", Kw::Pname(Proto::Lat)),
    ("sca", Kw::Pname(Proto::Sca)),
    ("moprc", Kw::Pname(Proto::Moprc)),
    ("mopdl", Kw::Pname(Proto::Mopdl)),
    ("iso", Kw::Pname(Proto::Iso)),
    ("esis", Kw::Pname(Proto::Esis)),
    ("es-is", Kw::Pname(Proto::Esis)),
    ("isis", Kw::Pname(Proto::Isis)),
    ("is-is", Kw::Pname(Proto::Isis)),
    ("l1", Kw::Pname(Proto::IsisL1)),
    ("l2", Kw::Pname(Proto::IsisL2)),
    ("iih", Kw::Pname(Proto::IsisIih)),
    ("lsp", Kw::Pname(Proto::IsisLsp)),
    ("snp", Kw::Pname(Proto::IsisSnp)),
    ("csnp", Kw::Pname(Proto::IsisCsnp)),
    ("psnp", Kw::Pname(Proto::IsisPsnp)),
    ("clnp", Kw::Pname(Proto::Clnp)),
    ("stp", Kw::Pname(Proto::Stp)),
    ("ipx", Kw::Pname(Proto::Ipx)),
    ("netbeui", Kw::Pname(Proto::Netbeui)),
    ("host", Kw::Host),
    ("net", Kw::Net),
    ("mask", Kw::Mask),
    ("port", Kw::Port),
    ("portrange", Kw::Portrange),
    ("proto", Kw::ProtoKw),
    ("protochain", Kw::Protochain),
    ("gateway", Kw::Gateway),
    ("type", Kw::Type),
    ("subtype", Kw::Subtype),
    ("direction", Kw::Dir),
    ("dir", Kw::Dir),
    ("address1", Kw::Addr(Dir::Addr1)),
    ("addr1", Kw::Addr(Dir::Addr1)),
    ("address2", Kw::Addr(Dir::Addr2)),
    ("addr2", Kw::Addr(Dir::Addr2)),
    ("address3", Kw::Addr(Dir::Addr3)),
    ("addr3", Kw::Addr(Dir::Addr3)),
    ("address4", Kw::Addr(Dir::Addr4)),
    ("addr4", Kw::Addr(Dir::Addr4)),
    ("ra", Kw::Addr(Dir::Ra)),
    ("ta", Kw::Addr(Dir::Ta)),
    ("less", Kw::Less),
    ("greater", Kw::Greater),
    ("byte", Kw::Byte),
    ("broadcast", Kw::Broadcast),
    ("multicast", Kw::Multicast),
    ("len", Kw::Len),
    ("length", Kw::Len),
    ("inbound", Kw::Inbound),
    ("outbound", Kw::Outbound),
    ("ifindex", Kw::Ifindex),
    ("vlan", Kw::Vlan),
    ("mpls", Kw::Mpls),
    ("pppoed", Kw::Pppoed),
    ("pppoes", Kw::Pppoes),
    ("geneve", Kw::Geneve),
    ("lane", Kw::AtmType),
    ("llc", Kw::Llc),
    ("metac", Kw::AtmType),
    ("bcc", Kw::AtmType),
    ("oam", Kw::AtmMulti),
    ("oamf4", Kw::AtmMulti),
    ("oamf4ec", Kw::AtmType),
    ("oamf4sc", Kw::AtmType),
    ("sc", Kw::AtmType),
    ("ilmic", Kw::AtmType),
    ("vpi", Kw::AtmField),
    ("vci", Kw::AtmField),
    ("connectmsg", Kw::AtmMulti),
    ("metaconnect", Kw::AtmMulti),
    ("on", Kw::PfIfname),
    ("ifname", Kw::PfIfname),
    ("rset", Kw::PfRset),
    ("ruleset", Kw::PfRset),
    ("rnr", Kw::PfRnr),
    ("rulenum", Kw::PfRnr),
    ("srnr", Kw::PfSrnr),
    ("subrulenum", Kw::PfSrnr),
    ("reason", Kw::PfReason),
    ("action", Kw::PfAction),
    ("fisu", Kw::Mtp2),
    ("lssu", Kw::Mtp2),
    ("lsu", Kw::Mtp2),
    ("msu", Kw::Mtp2),
    ("hfisu", Kw::Mtp2),
    ("hlssu", Kw::Mtp2),
    ("hmsu", Kw::Mtp2),
    ("sio", Kw::Mtp3),
    ("opc", Kw::Mtp3),
    ("dpc", Kw::Mtp3),
    ("sls", Kw::Mtp3),
    ("hsio", Kw::Mtp3),
    ("hopc", Kw::Mtp3),
    ("hdpc", Kw::Mtp3),
    ("hsls", Kw::Mtp3),
];

/// Words the scanner turns into numbers.
const NAMED_NUMBERS: &[(&str, u32)] = &[
    ("icmptype", 0),
    ("icmpcode", 1),
    ("icmp-echoreply", 0),
    ("icmp-unreach", 3),
    ("icmp-sourcequench", 4),
    ("icmp-redirect", 5),
    ("icmp-echo", 8),
    ("icmp-routeradvert", 9),
    ("icmp-routersolicit", 10),
    ("icmp-timxceed", 11),
    ("icmp-paramprob", 12),
    ("icmp-tstamp", 13),
    ("icmp-tstampreply", 14),
    ("icmp-ireq", 15),
    ("icmp-ireqreply", 16),
    ("icmp-maskreq", 17),
    ("icmp-maskreply", 18),
    ("icmp6type", 0),
    ("icmp6code", 1),
    ("icmp6-destinationunreach", 1),
    ("icmp6-packettoobig", 2),
    ("icmp6-timeexceeded", 3),
    ("icmp6-parameterproblem", 4),
    ("icmp6-echo", 128),
    ("icmp6-echoreply", 129),
    ("icmp6-multicastlistenerquery", 130),
    ("icmp6-multicastlistenerreportv1", 131),
    ("icmp6-multicastlistenerdone", 132),
    ("icmp6-routersolicit", 133),
    ("icmp6-routeradvert", 134),
    ("icmp6-neighborsolicit", 135),
    ("icmp6-neighboradvert", 136),
    ("icmp6-redirect", 137),
    ("icmp6-routerrenum", 138),
    ("icmp6-nodeinformationquery", 139),
    ("icmp6-nodeinformationresponse", 140),
    ("icmp6-ineighbordiscoverysolicit", 141),
    ("icmp6-ineighbordiscoveryadvert", 142),
    ("icmp6-multicastlistenerreportv2", 143),
    ("icmp6-homeagentdiscoveryrequest", 144),
    ("icmp6-homeagentdiscoveryreply", 145),
    ("icmp6-mobileprefixsolicit", 146),
    ("icmp6-mobileprefixadvert", 147),
    ("icmp6-certpathsolicit", 148),
    ("icmp6-certpathadvert", 149),
    ("icmp6-multicastrouteradvert", 151),
    ("icmp6-multicastroutersolicit", 152),
    ("icmp6-multicastrouterterm", 153),
    ("tcpflags", 13),
    ("tcp-fin", 0x01),
    ("tcp-syn", 0x02),
    ("tcp-rst", 0x04),
    ("tcp-push", 0x08),
    ("tcp-ack", 0x10),
    ("tcp-urg", 0x20),
    ("tcp-ece", 0x40),
    ("tcp-cwr", 0x80),
];

/// Looks up a keyword (exact, case-sensitive).
pub fn keyword(s: &str) -> Option<(Kw, &'static str)> {
    KEYWORDS
        .iter()
        .find(|(k, _)| *k == s)
        .map(|&(k, kw)| (kw, k))
}

/// Looks up a named constant such as `tcp-syn`.
pub fn named_number(s: &str) -> Option<u32> {
    NAMED_NUMBERS.iter().find(|(k, _)| *k == s).map(|&(_, v)| v)
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

fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// Length of `[0-9A-Fa-f]{1,max}` at `i`: returns every possible end.
fn hex_ends(s: &[u8], i: usize, min: usize, max: usize, out: &mut Vec<usize>) {
    let mut n = 0;
    while n < max && i + n < s.len() && is_hex(s[i + n]) {
        n += 1;
        if n >= min {
            out.push(i + n);
        }
    }
}

/// Every end of a match of `N` (`[0-9]+|0[xX][0-9A-Fa-f]+`) starting at `i`.
fn num_ends(s: &[u8], i: usize, out: &mut Vec<usize>) {
    let mut j = i;
    while j < s.len() && s[j].is_ascii_digit() {
        j += 1;
        out.push(j);
    }
    if i + 2 < s.len() && s[i] == b'0' && (s[i + 1] == b'x' || s[i + 1] == b'X') {
        let mut j = i + 2;
        while j < s.len() && is_hex(s[j]) {
            j += 1;
            out.push(j);
        }
    }
}

/// Pattern elements for the position-set matcher.
#[derive(Clone, Copy)]
enum El {
    /// `{W}`: 1 to 4 hex digits.
    W,
    /// `{B}`: 1 or 2 hex digits.
    B,
    /// `{B2}`: exactly 4 hex digits.
    B2,
    /// `{N}`
    N,
    Lit(u8),
}

/// Longest match of the concatenation `pat` at `i` (`None` if no match).
fn longest(s: &[u8], i: usize, pat: &[El]) -> Option<usize> {
    let mut cur = vec![i];
    for el in pat {
        let mut next = Vec::new();
        for &p in &cur {
            match *el {
                El::W => hex_ends(s, p, 1, 4, &mut next),
                El::B => hex_ends(s, p, 1, 2, &mut next),
                El::B2 => hex_ends(s, p, 4, 4, &mut next),
                El::N => num_ends(s, p, &mut next),
                El::Lit(c) => {
                    if p < s.len() && s[p] == c {
                        next.push(p + 1)
                    }
                }
            }
        }
        next.sort_unstable();
        next.dedup();
        if next.is_empty() {
            return None;
        }
        cur = next;
    }
    cur.last().copied()
}

fn mac_len(s: &[u8], i: usize) -> Option<usize> {
    use El::*;
    let mut best: Option<usize> = None;
    for sep in [b':', b'-', b'.'] {
        let pat = [
            B,
            Lit(sep),
            B,
            Lit(sep),
            B,
            Lit(sep),
            B,
            Lit(sep),
            B,
            Lit(sep),
            B,
        ];
        best = best.max(longest(s, i, &pat));
    }
    best = best.max(longest(s, i, &[B2, Lit(b'.'), B2, Lit(b'.'), B2]));
    best = best.max(longest(s, i, &[B2, B2, B2]));
    best
}

fn hid_len(s: &[u8], i: usize) -> Option<usize> {
    use El::*;
    let mut best = None;
    for parts in 2..=4 {
        let mut pat = vec![N];
        for _ in 1..parts {
            pat.push(Lit(b'.'));
            pat.push(N);
        }
        best = best.max(longest(s, i, &pat));
    }
    best
}

/// The 60 IPv6 patterns of scanner.l (`V680` ... `V6004`).
fn v6_patterns() -> Vec<Vec<El>> {
    use El::*;
    fn groups(n: usize) -> Vec<El> {
        let mut v = Vec::new();
        for k in 0..n {
            if k > 0 {
                v.push(Lit(b':'));
            }
            v.push(W);
        }
        v
    }
    let ipv4 = [N, Lit(b'.'), N, Lit(b'.'), N, Lit(b'.'), N];
    let mut pats = vec![groups(8)];
    // `::` somewhere, 7 down to 0 groups in all.
    for total in (0..=7).rev() {
        for left in 0..=total {
            let mut p = groups(left);
            p.extend([Lit(b':'), Lit(b':')]);
            p.extend(groups(total - left));
            pats.push(p);
        }
    }
    // Six groups, no `::`, then dotted quad.
    let mut p = groups(6);
    p.push(Lit(b':'));
    p.extend(ipv4);
    pats.push(p);
    // `::` and 5 down to 0 groups, then dotted quad.
    for total in (0..=5).rev() {
        for left in 0..=total {
            let mut p = groups(left);
            p.extend([Lit(b':'), Lit(b':')]);
            let right = total - left;
            p.extend(groups(right));
            if right > 0 {
                p.push(Lit(b':'));
            }
            p.extend(ipv4);
            pats.push(p);
        }
    }
    pats
}

fn v6_len(s: &[u8], i: usize, pats: &[Vec<El>]) -> Option<usize> {
    // Every pattern has a `:`, and a match reads only hex digits, `x` (of `0x` numbers), `.`
    // and `:`: without a `:` in that run there is none. This spares numbers and IPv4
    // addresses (most tokens of a long chain) the 60 patterns.
    let colon = s[i..]
        .iter()
        .take_while(|&&b| is_hex(b) || matches!(b, b':' | b'.' | b'x' | b'X'))
        .any(|&b| b == b':');
    if !colon {
        return None;
    }
    pats.iter().filter_map(|p| longest(s, i, p)).max()
}

/// `{B}:+({B}:+)+`
fn bogus_eid_len(s: &[u8], i: usize) -> Option<usize> {
    let step = |starts: &[usize]| -> Vec<usize> {
        let mut out = Vec::new();
        for &p in starts {
            let mut bs = Vec::new();
            hex_ends(s, p, 1, 2, &mut bs);
            for b in bs {
                let mut j = b;
                while j < s.len() && s[j] == b':' {
                    j += 1;
                    out.push(j);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    };
    let mut cur = step(&[i]);
    let mut best = None;
    let mut rounds = 0;
    while !cur.is_empty() {
        cur = step(&cur);
        rounds += 1;
        if let Some(&m) = cur.last() {
            best = best.max(Some(m));
        }
        if rounds > s.len() {
            break;
        }
    }
    best
}

fn is_id_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'
}

/// `[A-Za-z0-9]([-_.A-Za-z0-9]*[.A-Za-z0-9])?`
fn id_len(s: &[u8], i: usize) -> Option<usize> {
    if i >= s.len() || !s[i].is_ascii_alphanumeric() {
        return None;
    }
    let mut j = i + 1;
    while j < s.len() && is_id_char(s[j]) {
        j += 1;
    }
    // Back off to the last character allowed at the end.
    while j > i + 1 && !(s[j - 1].is_ascii_alphanumeric() || s[j - 1] == b'.') {
        j -= 1;
    }
    Some(j)
}

/// Converts a decimal, `0x` hex or leading-`0` octal number as libpcap's `stou` does.
fn convert_number(text: &str) -> Result<u32, ParseErrorKind> {
    let overflow = || ParseErrorKind::NumberOverflow(text.to_string());
    let b = text.as_bytes();
    let (radix, digits) = if b.len() > 1 && b[0] == b'0' && (b[1] == b'x' || b[1] == b'X') {
        (16, &text[2..])
    } else if b[0] == b'0' {
        if digits_non_octal(&text[1..]) {
            return Err(ParseErrorKind::NonOctalDigit(text.to_string()));
        }
        (8, &text[1..])
    } else {
        (10, text)
    };
    let mut n: u32 = 0;
    for c in digits.chars() {
        let d = c.to_digit(radix).ok_or_else(overflow)?;
        n = n
            .checked_mul(radix)
            .and_then(|n| n.checked_add(d))
            .ok_or_else(overflow)?;
    }
    Ok(n)
}

/// libpcap checks digits left to right and stops at the first problem, but for a leading-`0`
/// number both problems make it a lexical error, so only the kind differs: report the first.
fn digits_non_octal(s: &str) -> bool {
    let mut n: u64 = 0;
    for c in s.bytes() {
        if !(b'0'..=b'7').contains(&c) {
            return true;
        }
        n = n * 8 + u64::from(c - b'0');
        if n > u64::from(u32::MAX) {
            return false;
        }
    }
    false
}

/// Whether libc's `getaddrinfo(AI_NUMERICHOST)` would accept this IPv6 text (it has already
/// matched one of the scanner's IPv6 shapes).
fn valid_ipv6(text: &str) -> bool {
    Ipv6Addr::from_str(text).is_ok()
}

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
        let mut ends = Vec::new();
        hex_ends(s, i + 1, 1, 2, &mut ends);
        consider(ends.last().copied(), R_AID);
    }
    if is_hex(c) {
        consider(mac_len(s, i), R_MAC);
        consider(bogus_eid_len(s, i), R_BOGUS_EID);
    }
    if c.is_ascii_digit() {
        let mut ends = Vec::new();
        num_ends(s, i, &mut ends);
        consider(ends.iter().max().copied(), R_NUM);
        consider(hid_len(s, i), R_HID);
    }
    if is_hex(c) || c == b':' {
        consider(v6_len(s, i, v6), R_V6);
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
            if let Some((kw, k)) = keyword(word) {
                match kw {
                    _ if k == "and" => Tok::And,
                    _ => Tok::Kw(kw, k),
                }
            } else if word == "and" {
                Tok::And
            } else if word == "or" {
                Tok::Or
            } else if word == "not" {
                Tok::Not
            } else if let Some(n) = named_number(word) {
                Tok::Num(n)
            } else {
                Tok::Id(word.to_string())
            }
        }
    };
    Ok((tok, end))
}

#[cfg(test)]
mod tests {
    use super::*;

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
