//! A fully parenthesized, unambiguous rendering of the tree (for `sift debug ast` and tests).
//!
//! Primitives with qualifiers print them in brackets, omitting defaults and showing libpcap's
//! "undefined" (inherited after a qualifier-less primitive) as `?`: `[ip src host]10.0.0.1`,
//! `[port]80`, `[]foo`, `[? ? ?]80`. Relations print the operator as written (`<=` for a negated
//! `>`), arithmetic is parenthesized per operator, `and`/`or`/`not` per node.

use std::fmt;

use crate::ast::*;

fn dir_name(d: Dir) -> &'static str {
    match d {
        Dir::Default => "",
        Dir::Src => "src",
        Dir::Dst => "dst",
        Dir::Or => "src-or-dst",
        Dir::And => "src-and-dst",
        Dir::Addr1 => "addr1",
        Dir::Addr2 => "addr2",
        Dir::Addr3 => "addr3",
        Dir::Addr4 => "addr4",
        Dir::Ra => "ra",
        Dir::Ta => "ta",
        Dir::Undef => "?",
    }
}

fn addr_name(a: AddrKind) -> &'static str {
    match a {
        AddrKind::Default => "",
        AddrKind::Host => "host",
        AddrKind::Net => "net",
        AddrKind::Port => "port",
        AddrKind::PortRange => "portrange",
        AddrKind::Gateway => "gateway",
        AddrKind::Proto => "proto",
        AddrKind::Protochain => "protochain",
        AddrKind::Undef => "?",
    }
}

impl fmt::Display for Qualifiers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<&str> = [
            Proto::keyword(self.proto),
            dir_name(self.dir),
            addr_name(self.addr),
        ]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
        write!(f, "[{}]", parts.join(" "))
    }
}

impl fmt::Display for SetSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetSource::Items(items) => {
                let texts: Vec<&str> = items.iter().map(|i| i.text.as_str()).collect();
                write!(f, "{{{}}}", texts.join(", "))
            }
            SetSource::File { path, .. } => write!(f, "@{path}"),
        }
    }
}

impl fmt::Display for ArithOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
            ArithOp::Mod => "%",
            ArithOp::And => "&",
            ArithOp::Or => "|",
            ArithOp::Xor => "^",
            ArithOp::Lsh => "<<",
            ArithOp::Rsh => ">>",
        })
    }
}

impl fmt::Display for Arith {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arith::Num(n, _) => write!(f, "{n}"),
            Arith::Len(_) => f.write_str("len"),
            Arith::Load {
                proto, index, size, ..
            } => write!(f, "{}[{index}:{size}]", Proto::keyword(*proto)),
            Arith::Binary { op, lhs, rhs, .. } => write!(f, "({lhs} {op} {rhs})"),
            Arith::Neg(a, _) => write!(f, "(-{a})"),
        }
    }
}

fn opt(f: &mut fmt::Formatter<'_>, kw: &str, n: &Option<u32>) -> fmt::Result {
    match n {
        Some(n) => write!(f, "{kw} {n}"),
        None => f.write_str(kw),
    }
}

impl fmt::Display for PrimitiveKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrimitiveKind::Name { q, name } => write!(f, "{q}{name}"),
            PrimitiveKind::Number { q, value } => write!(f, "{q}#{value}"),
            PrimitiveKind::Ipv4 { q, text } => write!(f, "{q}{text}"),
            PrimitiveKind::Ipv4Cidr {
                q,
                text,
                prefix_len,
            } => write!(f, "{q}{text}/{prefix_len}"),
            PrimitiveKind::Ipv4Masked { q, text, mask } => write!(f, "{q}{text} mask {mask}"),
            PrimitiveKind::Ipv6 {
                q,
                text,
                prefix_len,
            } => write!(f, "{q}{text}/{prefix_len}"),
            PrimitiveKind::Ether { q, text } => write!(f, "{q}{text}"),
            PrimitiveKind::Arcnet { q, text } => write!(f, "{q}{text}"),
            PrimitiveKind::ProtoAbbrev(p) => f.write_str(Proto::keyword(*p)),
            PrimitiveKind::Relation {
                op,
                negated,
                lhs,
                rhs,
            } => {
                let op = match (op, negated) {
                    (RelOp::Gt, false) => ">",
                    (RelOp::Ge, false) => ">=",
                    (RelOp::Eq, false) => "=",
                    (RelOp::Gt, true) => "<=",
                    (RelOp::Ge, true) => "<",
                    (RelOp::Eq, true) => "!=",
                };
                write!(f, "({lhs} {op} {rhs})")
            }
            PrimitiveKind::Broadcast(p) | PrimitiveKind::Multicast(p) => {
                let kw = if matches!(self, PrimitiveKind::Broadcast(_)) {
                    "broadcast"
                } else {
                    "multicast"
                };
                match p {
                    Proto::Default => f.write_str(kw),
                    p => write!(f, "{} {kw}", Proto::keyword(*p)),
                }
            }
            PrimitiveKind::Less(n) => write!(f, "less {n}"),
            PrimitiveKind::Greater(n) => write!(f, "greater {n}"),
            PrimitiveKind::Byte { index, op, value } => {
                let op = match op {
                    ByteOp::And => "&",
                    ByteOp::Or => "|",
                    ByteOp::Lt => "<",
                    ByteOp::Gt => ">",
                    ByteOp::Eq => "=",
                };
                write!(f, "byte {index} {op} {value}")
            }
            PrimitiveKind::Inbound => f.write_str("inbound"),
            PrimitiveKind::Outbound => f.write_str("outbound"),
            PrimitiveKind::Ifindex(n) => write!(f, "ifindex {n}"),
            PrimitiveKind::Vlan(n) => opt(f, "vlan", n),
            PrimitiveKind::Mpls(n) => opt(f, "mpls", n),
            PrimitiveKind::Pppoed => f.write_str("pppoed"),
            PrimitiveKind::Pppoes(n) => opt(f, "pppoes", n),
            PrimitiveKind::Geneve(n) => opt(f, "geneve", n),
            PrimitiveKind::Llc(None) => f.write_str("llc"),
            PrimitiveKind::Llc(Some(s)) => write!(f, "llc {s}"),
            PrimitiveKind::Unsupported(k) => write!(f, "unsupported({k})"),
            PrimitiveKind::Payload(PayloadTest::Contains { bytes, nocase }) => {
                let nocase = if *nocase { "nocase " } else { "" };
                write!(f, "payload contains {nocase}\"{}\"", bytes.escape_ascii())
            }
            PrimitiveKind::Payload(PayloadTest::Matches(re)) => {
                write!(f, "payload matches {re:?}")
            }
            PrimitiveKind::Payload(PayloadTest::Equals {
                offset,
                bytes,
                negated,
            }) => {
                let op = if *negated { "!=" } else { "=" };
                let len = bytes.len();
                write!(
                    f,
                    "payload[{offset}:{len}] {op} \"{}\"",
                    bytes.escape_ascii()
                )
            }
            PrimitiveKind::InSet { q, set } => write!(f, "{q}in {set}"),
            PrimitiveKind::VlanIn(set) => write!(f, "vlan in {set}"),
        }
    }
}

impl fmt::Display for Primitive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kind.fmt(f)
    }
}

fn chain(f: &mut fmt::Formatter<'_>, operands: &[Expr], op: &str) -> fmt::Result {
    for _ in 1..operands.len() {
        f.write_str("(")?;
    }
    for (i, e) in operands.iter().enumerate() {
        match i {
            0 => write!(f, "{e}")?,
            _ => write!(f, " {op} {e})")?,
        }
    }
    Ok(())
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // As the binary tree it stands for: `a or b or c` is `((a or b) or c)`.
            Expr::And(v) => chain(f, v, "and"),
            Expr::Or(v) => chain(f, v, "or"),
            Expr::Not(a) => write!(f, "(not {a})"),
            Expr::Primitive(p) => p.fmt(f),
        }
    }
}
