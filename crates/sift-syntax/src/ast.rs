//! The abstract syntax tree of a pcap-filter expression.
//!
//! The tree mirrors libpcap's grammar closely, because libpcap's semantics depend on it: every
//! primitive corresponds to one code-generation entry point of libpcap (`gen_scode`, `gen_ncode`,
//! `gen_mcode`, `gen_relation`, ...), and the lowering stage must visit primitives in source order
//! (left to right), since `vlan`, `mpls` and `pppoes` change the offsets used by everything after
//! them. Qualifiers that libpcap inherits from an earlier primitive (`host a or b`) are resolved by
//! the parser: each primitive carries its complete qualifier set.

/// A byte range `start..end` in the expression text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }
    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// A boolean filter expression.
///
/// `and` and `or` are left-associative at the same precedence, so `a or b or c` is
/// `(a or b) or c`; a run of the same operator is kept as one node with its operands in order
/// (at least two), so a chain of 10^5 `or host` terms is a shallow tree that no tree walk
/// (including `Drop`) recurses down.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
    Primitive(Primitive),
}

/// Protocol qualifier (libpcap `Q_*` protocol values). `Default` = none given, `Undef` = libpcap's
/// `qerr` (inherited after a primitive that has no qualifiers, e.g. `tcp or 80`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Proto {
    Default,
    Link,
    Ip,
    Arp,
    Rarp,
    Sctp,
    Tcp,
    Udp,
    Icmp,
    Igmp,
    Igrp,
    Atalk,
    Decnet,
    Lat,
    Sca,
    Moprc,
    Mopdl,
    Ipv6,
    Icmpv6,
    Ah,
    Esp,
    Pim,
    Vrrp,
    Aarp,
    Iso,
    Esis,
    Isis,
    Clnp,
    Stp,
    Ipx,
    Netbeui,
    IsisL1,
    IsisL2,
    IsisIih,
    IsisSnp,
    IsisCsnp,
    IsisPsnp,
    IsisLsp,
    Radio,
    Carp,
    Undef,
}

impl Proto {
    /// The keyword of the qualifier as written in expressions (`ip6`, `icmp6`, `l1`, ...); empty
    /// for `Default` and `?` for `Undef`.
    pub fn keyword(self) -> &'static str {
        match self {
            Proto::Default => "",
            Proto::Link => "link",
            Proto::Ip => "ip",
            Proto::Arp => "arp",
            Proto::Rarp => "rarp",
            Proto::Sctp => "sctp",
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Icmp => "icmp",
            Proto::Igmp => "igmp",
            Proto::Igrp => "igrp",
            Proto::Atalk => "atalk",
            Proto::Decnet => "decnet",
            Proto::Lat => "lat",
            Proto::Sca => "sca",
            Proto::Moprc => "moprc",
            Proto::Mopdl => "mopdl",
            Proto::Ipv6 => "ip6",
            Proto::Icmpv6 => "icmp6",
            Proto::Ah => "ah",
            Proto::Esp => "esp",
            Proto::Pim => "pim",
            Proto::Vrrp => "vrrp",
            Proto::Aarp => "aarp",
            Proto::Iso => "iso",
            Proto::Esis => "esis",
            Proto::Isis => "isis",
            Proto::Clnp => "clnp",
            Proto::Stp => "stp",
            Proto::Ipx => "ipx",
            Proto::Netbeui => "netbeui",
            Proto::IsisL1 => "l1",
            Proto::IsisL2 => "l2",
            Proto::IsisIih => "iih",
            Proto::IsisSnp => "snp",
            Proto::IsisCsnp => "csnp",
            Proto::IsisPsnp => "psnp",
            Proto::IsisLsp => "lsp",
            Proto::Radio => "radio",
            Proto::Carp => "carp",
            Proto::Undef => "?",
        }
    }
}

/// Direction qualifier (`Q_SRC`, `Q_DST`, `Q_OR`, `Q_AND`, 802.11 address qualifiers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    Default,
    Src,
    Dst,
    /// `src or dst`
    Or,
    /// `src and dst`
    And,
    Addr1,
    Addr2,
    Addr3,
    Addr4,
    Ra,
    Ta,
    Undef,
}

/// Address-type qualifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddrKind {
    Default,
    Host,
    Net,
    Port,
    PortRange,
    Gateway,
    Proto,
    Protochain,
    Undef,
}

/// The qualifiers in force for an identifier (libpcap's `struct qual`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Qualifiers {
    pub proto: Proto,
    pub dir: Dir,
    pub addr: AddrKind,
}

impl Qualifiers {
    /// No qualifiers given (`Q_DEFAULT` everywhere).
    pub const DEFAULT: Qualifiers = Qualifiers {
        proto: Proto::Default,
        dir: Dir::Default,
        addr: AddrKind::Default,
    };
    /// libpcap's `qerr`: what an identifier inherits after a primitive without qualifiers.
    pub const UNDEF: Qualifiers = Qualifiers {
        proto: Proto::Undef,
        dir: Dir::Undef,
        addr: AddrKind::Undef,
    };
}

/// Comparison operators of a relation. `a <= b` is parsed as `not (a > b)`, as libpcap does, so only
/// the three BPF jump conditions appear, with a `negated` flag on the relation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RelOp {
    /// `>` (negated: `<=`)
    Gt,
    /// `>=` (negated: `<`)
    Ge,
    /// `=` or `==` (negated: `!=`)
    Eq,
}

/// Binary arithmetic operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
    Lsh,
    Rsh,
}

/// An arithmetic expression (libpcap's `arth`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arith {
    /// A number (`gen_loadi`).
    Num(u32, Span),
    /// `len`: the packet's wire length.
    Len(Span),
    /// `proto[index]` or `proto[index:size]` (`gen_load`). `size` is as written (libpcap accepts only
    /// 1, 2 and 4; the lowering rejects the others). `span` covers the whole load.
    Load {
        proto: Proto,
        index: Box<Arith>,
        size: u32,
        span: Span,
    },
    Binary {
        op: ArithOp,
        lhs: Box<Arith>,
        rhs: Box<Arith>,
        span: Span,
    },
    /// Unary minus.
    Neg(Box<Arith>, Span),
}

/// Operator of the `byte` primitive (`byte NUM OP NUM`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteOp {
    And,
    Or,
    Lt,
    Gt,
    Eq,
}

/// A payload test (sift extension). The payload is what follows the TCP or UDP header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PayloadTest {
    /// `payload contains [nocase] STRING`
    Contains { bytes: Vec<u8>, nocase: bool },
    /// `payload matches STRING`: a regular expression (the `regex` crate's syntax).
    Matches(String),
    /// `payload[offset:len] = VALUE` (`!=` when `negated`): the bytes at a fixed offset.
    Equals {
        offset: u32,
        bytes: Vec<u8>,
        negated: bool,
    },
}

/// The items of a set (sift extension), as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetSource {
    /// `{ item, ... }`
    Items(Vec<SetItem>),
    /// `@path`: one item per line of a file; the span is the `@path` token's.
    File { path: String, span: Span },
}

/// One item of a set literal: an address, a prefix, a number, a name or a range, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetItem {
    pub text: String,
    pub span: Span,
}

/// A primitive: one call into libpcap's code generator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Primitive {
    pub kind: PrimitiveKind,
    /// The source text the primitive came from (for errors).
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrimitiveKind {
    /// An `ID` token with its qualifiers (`gen_scode`): host names, port/protocol names, network
    /// names, `\escaped` keywords with the backslash removed.
    Name {
        q: Qualifiers,
        name: String,
    },
    /// A number in identifier position (`gen_ncode(NULL, v, q)`): `port 80`, `proto 6`, `net 10`...
    Number {
        q: Qualifiers,
        value: u32,
    },
    /// A dotted IPv4 address or prefix like `10.1` (`HID`, `gen_ncode(s, 0, q)`). The text is as
    /// written.
    Ipv4 {
        q: Qualifiers,
        text: String,
    },
    /// `HID/NUM` (`gen_mcode(s, NULL, len, q)`).
    Ipv4Cidr {
        q: Qualifiers,
        text: String,
        prefix_len: u32,
    },
    /// `HID mask HID` (`gen_mcode(s, m, 0, q)`).
    Ipv4Masked {
        q: Qualifiers,
        text: String,
        mask: String,
    },
    /// An IPv6 address with an optional `/NUM` (`gen_mcode6`); `prefix_len` is 128 when absent.
    Ipv6 {
        q: Qualifiers,
        text: String,
        prefix_len: u32,
    },
    /// A MAC address (`EID`, `gen_ecode`), as written (`00:11:22:33:44:55`, `0011.2233.4455`, ...).
    Ether {
        q: Qualifiers,
        text: String,
    },
    /// An ARCnet address (`AID`, `$` followed by hex, `gen_acode`).
    Arcnet {
        q: Qualifiers,
        text: String,
    },
    /// A bare protocol name: `tcp`, `ip6`, `arp`, ... (`gen_proto_abbrev`).
    ProtoAbbrev(Proto),
    /// `lhs op rhs`, or its negation for `<=`, `<`, `!=` (`gen_relation`).
    Relation {
        op: RelOp,
        negated: bool,
        lhs: Arith,
        rhs: Arith,
    },
    /// `[proto] broadcast`
    Broadcast(Proto),
    /// `[proto] multicast`
    Multicast(Proto),
    Less(u32),
    Greater(u32),
    /// `byte IDX OP VAL` (`gen_byteop`).
    Byte {
        index: u32,
        op: ByteOp,
        value: u32,
    },
    Inbound,
    Outbound,
    Ifindex(u32),
    Vlan(Option<u32>),
    Mpls(Option<u32>),
    Pppoed,
    Pppoes(Option<u32>),
    Geneve(Option<u32>),
    /// `llc`, `llc i`, `llc s`, `llc u`, `llc <subtype>` (the name as written, `None` for bare `llc`).
    Llc(Option<String>),
    /// `payload ...` (sift extension).
    Payload(PayloadTest),
    /// `[qualifiers] in SET` (sift extension): true when the primitive with these qualifiers
    /// holds for some item of the set (`host in {a, b}` is `host a or host b`).
    InSet {
        q: Qualifiers,
        set: SetSource,
    },
    /// `vlan in SET` (sift extension): one VLAN tag, with its ID in the set.
    VlanIn(SetSource),
    /// Primitives that exist in libpcap but only for link types sift does not support (pf, 802.11
    /// `type/subtype/dir`, ATM, MTP2/MTP3). Lowering rejects them with libpcap's reasoning; the
    /// keyword is kept for the message.
    Unsupported(&'static str),
}
