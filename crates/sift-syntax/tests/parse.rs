//! Expected tree shapes (fully parenthesized `Display` form) for representative expressions.

use sift_syntax::ast::*;
use sift_syntax::{parse, ParseErrorKind};

fn show(text: &str) -> String {
    match parse(text) {
        Ok(Some(e)) => e.to_string(),
        Ok(None) => "<empty>".to_string(),
        Err(e) => panic!("{text:?} failed:\n{}", e.render(text)),
    }
}

#[test]
fn shapes() {
    let cases: &[(&str, &str)] = &[
        (r#"tcp"#, r#"tcp"#),
        (r#"host a or b"#, r#"([host]a or [host]b)"#),
        (
            r#"host a or b and c"#,
            r#"(([host]a or [host]b) and [host]c)"#,
        ),
        (r#"port 80 or 443"#, r#"([port]#80 or [port]#443)"#),
        (r#"src or dst host a"#, r#"[src-or-dst host]a"#),
        (r#"dst and src net 10"#, r#"[src-and-dst net]#10"#),
        (
            r#"src host a or dst host b"#,
            r#"([src host]a or [dst host]b)"#,
        ),
        (
            r#"tcp src port 80 and dst 1.2.3.4"#,
            r#"([tcp src port]#80 and [dst]1.2.3.4)"#,
        ),
        (
            r#"host a and (tcp) or b"#,
            r#"(([host]a and tcp) or [host]b)"#,
        ),
        (
            r#"host a and (b or c) or d"#,
            r#"(([host]a and ([host]b or [host]c)) or [host]d)"#,
        ),
        (r#"host (a or b)"#, r#"([host]a or [host]b)"#),
        (
            r#"host (1 or b and not c)"#,
            r#"(([host]#1 or [host]b) and (not [host]c))"#,
        ),
        (r#"port (80)"#, r#"[port]#80"#),
        (r#"not host a and b"#, r#"((not [host]a) and [host]b)"#),
        (r#"host a and not b"#, r#"([host]a and (not [host]b))"#),
        (r#"! tcp and udp"#, r#"((not tcp) and udp)"#),
        (r#"not not tcp"#, r#"(not (not tcp))"#),
        (
            r#"host a or not (b or 1)"#,
            r#"([host]a or (not ([host]b or [host]#1)))"#,
        ),
        (r#"1 + 2 * 3 = 7"#, r#"((1 + (2 * 3)) = 7)"#),
        (r#"1 + 2 % 3 + 4 = 0"#, r#"((1 + (2 % (3 + 4))) = 0)"#),
        (r#"1 % 2 + 3 = 0"#, r#"((1 % (2 + 3)) = 0)"#),
        (r#"1 ^ 2 & 3 = 0"#, r#"((1 ^ (2 & 3)) = 0)"#),
        (r#"1 & 2 ^ 3 = 0"#, r#"((1 & (2 ^ 3)) = 0)"#),
        (
            r#"1 | 2 & 3 << 4 + 5 * 6 = 0"#,
            r#"((1 | (2 & (3 << (4 + (5 * 6))))) = 0)"#,
        ),
        (r#"-1 + 2 = 0"#, r#"(((-1) + 2) = 0)"#),
        (r#"-1 % 2 = 0"#, r#"((-(1 % 2)) = 0)"#),
        (r#"- - len > 1"#, r#"((-(-len)) > 1)"#),
        (r#"(1) < 2"#, r#"(1 < 2)"#),
        (r#"((1) + (2)) <= 3"#, r#"((1 + 2) <= 3)"#),
        (r#"(1 + 2) != 3"#, r#"((1 + 2) != 3)"#),
        (r#"ip[0] & 0xf0 = 0x40"#, r#"((ip[0:1] & 240) = 64)"#),
        (
            r#"tcp[tcpflags] & tcp-syn != 0"#,
            r#"((tcp[13:1] & 2) != 0)"#,
        ),
        (r#"ether[0:2] >= 0x0800"#, r#"(link[0:2] >= 2048)"#),
        (r#"icmp[icmptype] = icmp-echo"#, r#"(icmp[0:1] = 8)"#),
        (
            r#"len >= 100 and less 200 and greater 10"#,
            r#"(((len >= 100) and less 200) and greater 10)"#,
        ),
        (
            r#"ip broadcast or ether multicast or broadcast"#,
            r#"((ip broadcast or link multicast) or broadcast)"#,
        ),
        (r#"byte 3 & 4"#, r#"byte 3 & 4"#),
        (r#"byte 3 = 4"#, r#"byte 3 = 4"#),
        (
            r#"vlan and vlan 10 and vlan (20)"#,
            r#"((vlan and vlan 10) and vlan 20)"#,
        ),
        (
            r#"mpls 1 or pppoes 2 or pppoed or geneve or geneve 3"#,
            r#"((((mpls 1 or pppoes 2) or pppoed) or geneve) or geneve 3)"#,
        ),
        (
            r#"inbound or outbound or ifindex 2"#,
            r#"((inbound or outbound) or ifindex 2)"#,
        ),
        (
            r#"llc or llc i or llc rnr or llc rulenum"#,
            r#"(((llc or llc i) or llc rnr) or llc rnr)"#,
        ),
        (
            r#"type mgt subtype beacon or dir tods or on eth0 or lane or vpi (1 or 2) or sio > 3"#,
            r#"(((((unsupported(type) or unsupported(dir)) or unsupported(on)) or unsupported(lane)) or unsupported(vpi)) or unsupported(sio))"#,
        ),
        (r#"host 10.0.0.1/24"#, r#"[host]10.0.0.1/24"#),
        (
            r#"net 10.0.0.0 mask 255.0.0.0"#,
            r#"[net]10.0.0.0 mask 255.0.0.0"#,
        ),
        (r#"net 10"#, r#"[net]#10"#),
        (r#"host 2001:db8::1"#, r#"[host]2001:db8::1/128"#),
        (r#"net 2001:db8::/32"#, r#"[net]2001:db8::/32"#),
        (
            r#"ether host 00:11:22:33:44:55 or ether src 0011.2233.4455 or ether dst 001122334455"#,
            r#"(([link host]00:11:22:33:44:55 or [link src]0011.2233.4455) or [link dst]001122334455)"#,
        ),
        (r#"host $1f"#, r#"[host]$1f"#),
        (r#"ether proto \ip"#, r#"[link proto]ip"#),
        (r#"ip proto \tcp"#, r#"[ip proto]tcp"#),
        (
            r#"tcp port http or udp port domain"#,
            r#"([tcp port]http or [udp port]domain)"#,
        ),
        (r#"portrange 1-1024"#, r#"[portrange]1-1024"#),
        (r#"wlan addr1 a or ra b"#, r#"([link addr1]a or [ra]b)"#),
        (
            r#"ip6 protochain 6 and ip gateway g"#,
            r#"([ip6 protochain]#6 and [ip gateway]g)"#,
        ),
        (
            r#"es-is or is-is or l1 or iih"#,
            r#"(((esis or isis) or l1) or iih)"#,
        ),
    ];
    for (text, want) in cases {
        assert_eq!(show(text), *want, "{text}");
    }
}

#[test]
fn empty() {
    assert_eq!(parse("").unwrap(), None);
    assert_eq!(parse(" \n\t\r ").unwrap(), None);
}

#[test]
fn errors() {
    for text in [
        "a",
        "tcp or 80",
        "(tcp) or 1",
        "80",
        "host ((a))",
        "ip proto tcp",
        "src or host a",
        "tcp src or udp",
        "port 1.2.3.4",
        "less (10)",
        "vlan (tcp)",
        "1 > 2 > 3",
        "byte 1 >= 2",
        "tcp and",
        "(tcp",
        "tcp)",
        "ip[1:]",
        "1:2:3:",
        "::0x1.2.3.4",
        "08",
        "4294967296",
        "a ~ b",
        "\\",
    ] {
        assert!(parse(text).is_err(), "{text:?} should not parse");
    }
}

#[test]
fn error_kinds_and_spans() {
    let e = parse("port 1.2.3.4").unwrap_err();
    assert_eq!(e.kind, ParseErrorKind::AddressAfterQualifier("port"));
    assert_eq!(e.span, Span::new(5, 12));
    let e = parse("tcp or 80").unwrap_err();
    assert_eq!(e.kind, ParseErrorKind::NoQualifiers("80".into()));
    assert_eq!(e.span, Span::new(7, 9));
    let e = parse("host a and\n  tcp )").unwrap_err();
    assert_eq!(e.span, Span::new(17, 18));
    let r = e.render("host a and\n  tcp )");
    assert!(r.contains("2 |   tcp )"), "{r}");
    assert!(r.ends_with("  |       ^"), "{r}");
    let e = parse("tcp and 08").unwrap_err();
    assert_eq!(e.kind, ParseErrorKind::NonOctalDigit("08".into()));
    // A syntax error before a lexical one is reported first.
    let e = parse("tcp tcp ~").unwrap_err();
    assert_eq!(e.span, Span::new(4, 7));
}

#[test]
fn qualifiers_and_spans() {
    let e = parse("ip src host 10.0.0.1 or 10.0.0.2").unwrap().unwrap();
    let Expr::Or(v) = e else { panic!() };
    let [a, b] = &v[..] else { panic!() };
    let q = Qualifiers {
        proto: Proto::Ip,
        dir: Dir::Src,
        addr: AddrKind::Host,
    };
    assert_eq!(
        *a,
        Expr::Primitive(Primitive {
            kind: PrimitiveKind::Ipv4 {
                q,
                text: "10.0.0.1".into()
            },
            span: Span::new(12, 20),
        })
    );
    assert_eq!(
        *b,
        Expr::Primitive(Primitive {
            kind: PrimitiveKind::Ipv4 {
                q,
                text: "10.0.0.2".into()
            },
            span: Span::new(24, 32),
        })
    );
    let e = parse("tcp[13] <= 4").unwrap().unwrap();
    let Expr::Primitive(Primitive {
        kind: PrimitiveKind::Relation {
            op, negated, lhs, ..
        },
        span,
    }) = e
    else {
        panic!()
    };
    assert_eq!((op, negated), (RelOp::Gt, true));
    assert_eq!(span, Span::new(0, 12));
    assert!(matches!(
        lhs,
        Arith::Load {
            proto: Proto::Tcp,
            size: 1,
            ..
        }
    ));
    let e = parse("less 10").unwrap().unwrap();
    assert!(
        matches!(e, Expr::Primitive(Primitive { kind: PrimitiveKind::Less(10), span }) if span == Span::new(0, 7))
    );
}

#[test]
fn depth_limits() {
    let deep = format!("{}tcp{}", "(".repeat(100), ")".repeat(100));
    assert!(parse(&deep).is_ok());
    for text in [
        format!("{}tcp{}", "(".repeat(100_000), ")".repeat(100_000)),
        format!("{}tcp", "not ".repeat(100_000)),
        format!("{}1 > 0", "-".repeat(100_000)),
        format!("host {}a{}", "(".repeat(100_000), ")".repeat(100_000)),
        format!("vlan {}1{}", "(".repeat(100_000), ")".repeat(100_000)),
        format!("ip[{}1{}] = 0", "ip[".repeat(100_000), "]".repeat(100_000)),
        format!("1{} = 0", " % 1".repeat(100_000)),
        // `and` and `or` alternating: each switch nests the tree one level deeper.
        format!("tcp{}", " or tcp and tcp".repeat(100_000)),
    ] {
        let e = parse(&text).unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::TooDeep, "{}", &text[..20]);
    }
    // A run of one operator is one node, however long.
    let long = format!("tcp{}", " or tcp".repeat(100_000));
    let Some(Expr::Or(v)) = parse(&long).unwrap() else {
        panic!("an or chain")
    };
    assert_eq!(v.len(), 100_001);
}
