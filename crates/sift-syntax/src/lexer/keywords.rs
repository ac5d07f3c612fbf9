//! The scanner's fixed-string rules: keywords and named constants (`tcp-syn`, `icmp-echo`).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use super::{Kw, Tok};
use crate::ast::{Dir, Proto};

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
    match fixed_words().get(s)? {
        FixedWord::Keyword(kw, k) => Some((*kw, k)),
        _ => None,
    }
}

/// Looks up a named constant such as `tcp-syn`.
pub fn named_number(s: &str) -> Option<u32> {
    match fixed_words().get(s)? {
        FixedWord::Number(n) => Some(*n),
        _ => None,
    }
}

/// The token the scanner's fixed-string rules make of an identifier-shaped word (`and`, `or` and
/// `not` included), or `None` for a plain identifier.
pub(super) fn fixed_word_token(word: &str) -> Option<Tok> {
    Some(match *fixed_words().get(word)? {
        FixedWord::Keyword(kw, k) => Tok::Kw(kw, k),
        FixedWord::And => Tok::And,
        FixedWord::Or => Tok::Or,
        FixedWord::Not => Tok::Not,
        FixedWord::Number(n) => Tok::Num(n),
    })
}

/// What one of the scanner's fixed strings stands for.
#[derive(Clone, Copy)]
enum FixedWord {
    Keyword(Kw, &'static str),
    And,
    Or,
    Not,
    Number(u32),
}

/// FNV-1a: the map's keys are fixed and short, so the standard library's SipHash, which resists
/// chosen keys, would only make every lookup several times slower.
struct WordHasher(u64);

impl Default for WordHasher {
    fn default() -> Self {
        WordHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type WordMap = HashMap<&'static str, FixedWord, BuildHasherDefault<WordHasher>>;

/// Every fixed string in one map: the lexer looks up each identifier-shaped word, and scanning
/// the ~190 entries for it was a large part of the lexing time of long expressions.
fn fixed_words() -> &'static WordMap {
    static WORDS: OnceLock<WordMap> = OnceLock::new();
    WORDS.get_or_init(|| {
        let keywords = KEYWORDS
            .iter()
            .map(|&(k, kw)| (k, FixedWord::Keyword(kw, k)));
        let operators = [
            ("and", FixedWord::And),
            ("or", FixedWord::Or),
            ("not", FixedWord::Not),
        ];
        let numbers = NAMED_NUMBERS
            .iter()
            .map(|&(k, n)| (k, FixedWord::Number(n)));
        let mut words = WordMap::default();
        // The first entry of a word wins, as the earliest rule does in the scanner (the tables
        // have no word twice, so this only keeps the lookup order of the lexer's rules).
        for (word, meaning) in keywords.chain(operators).chain(numbers) {
            words.entry(word).or_insert(meaning);
        }
        words
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The map gives every table entry its own meaning (no word is listed twice).
    #[test]
    fn map_holds_every_table_entry() {
        for &(k, kw) in KEYWORDS {
            assert_eq!(keyword(k), Some((kw, k)), "{k}");
            assert_eq!(named_number(k), None, "{k}");
        }
        for &(k, n) in NAMED_NUMBERS {
            assert_eq!(named_number(k), Some(n), "{k}");
            assert_eq!(keyword(k), None, "{k}");
        }
        for (word, tok) in [("and", Tok::And), ("or", Tok::Or), ("not", Tok::Not)] {
            assert_eq!(fixed_word_token(word), Some(tok));
        }
        for word in ["", "TCP", "hostx", "tcp-synx", "a"] {
            assert_eq!(fixed_word_token(word), None, "{word}");
        }
    }
}
