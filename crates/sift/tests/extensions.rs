//! sift's language extensions (sets, payload tests) checked against what they are defined as.
//!
//! * A set primitive is the `or` of the primitive over its items (for `src and dst`, the `and`
//!   of the `src` and `dst` sets), so random sets over generated traffic are compared with
//!   libpcap running the expanded expression.
//! * `vlan in {...}` is `vlan` with its ID in the set: libpcap runs `vlan and (ether[14:2] &
//!   0xfff = a or ...)`, and the later primitive sees the moved offsets in both.
//! * `payload[OFF:LEN] = VALUE` over IPv4 is libpcap's `tcp[((tcp[12] & 0xf0) >> 2) + OFF : 4] =
//!   ...` (or `udp[8 + OFF ...]`), four bytes at a time; this also checks where the payload
//!   starts, which `contains` and `matches` share.
//! * `contains` and `matches` have no libpcap counterpart: the compiled engines (JIT, bytecode
//!   with the automata of `sift-coproc`) are compared with the lowered IR's reference
//!   interpreter, whose search is a plain window-by-window scan, on payloads with planted
//!   patterns.

use sift::{Filter, Options};
use sift_oracle::Oracle;
use sift_testgen::pools::{ipv4_text, IPV4_NETS, IPV4_UNICAST, IPV6_NETS, IPV6_TEXT, PORTS};
use sift_testgen::{generate_packets, Packet, Rng};

const SNAPLEN: u32 = 262_144;

fn ext_options(linktype: u32, optimize: bool) -> Options {
    let mut o = Options::new(linktype, SNAPLEN);
    o.extensions = true;
    o.optimize = optimize;
    o
}

/// Compiles `ext` with extensions, runs it on every packet with every engine (which must agree
/// with each other; classic BPF, with the set lookups written as comparisons, when the filter
/// has no payload test) and returns the verdicts.
fn sift_verdicts(ext: &str, linktype: u32, optimize: bool, packets: &[Packet]) -> Vec<bool> {
    let f = Filter::compile_with(ext, &ext_options(linktype, optimize))
        .unwrap_or_else(|e| panic!("`{ext}`: {}", e.render(ext)));
    let comparisons = sift::without_set_lookups(f.optimized_ir()).expect("optimizes");
    let cbpf = (comparisons.first_call().is_none())
        .then(|| sift_bpf::compile(&comparisons).unwrap_or_else(|e| panic!("`{ext}`: {e}")));
    packets
        .iter()
        .map(|p| {
            let r = f.run(&p.data, p.wire_len);
            let (i, reference) = (
                f.run_interpreted(&p.data, p.wire_len),
                f.run_reference(&p.data, p.wire_len),
            );
            let classic = cbpf
                .as_ref()
                .map_or(r, |prog| sift_bpf::interp::run(prog, &p.data, p.wire_len));
            assert!(
                r == i && r == reference && r == classic,
                "engines disagree on `{ext}` for {:02x?}: {} {r}, bytecode {i}, IR {reference}, \
                 classic BPF {classic}",
                p.data,
                f.engine()
            );
            r != 0
        })
        .collect()
}

/// Checks that `ext` (sift, extensions on) and `plain` (libpcap) agree on every packet, with
/// and without libpcap's optimizer.
fn same_as_libpcap(ext: &str, plain: &str, linktype: u32, packets: &[Packet]) {
    let oracle = Oracle::new(linktype, SNAPLEN).expect("libpcap");
    for optimize in [true, false] {
        let prog = match oracle.compile(plain, optimize, 0) {
            Ok(prog) => prog,
            // libpcap refuses a filter its optimizer reduces to `ret 0`; sift compiles it.
            Err(e) if e.message().contains("rejects all packets") => {
                let ours = sift_verdicts(ext, linktype, optimize, packets);
                assert!(
                    ours.iter().all(|&v| !v),
                    "`{ext}` accepts, `{plain}` cannot"
                );
                continue;
            }
            Err(e) => {
                let ours = sift::compile_ir(ext, &ext_options(linktype, optimize));
                assert!(
                    ours.is_err(),
                    "libpcap refuses `{plain}` ({}), sift accepts `{ext}`",
                    e.message()
                );
                continue;
            }
        };
        let ours = sift_verdicts(ext, linktype, optimize, packets);
        for (p, ours) in packets.iter().zip(ours) {
            let theirs = prog.run(&p.data, p.wire_len) != 0;
            assert_eq!(
                ours, theirs,
                "`{ext}` vs libpcap `{plain}` (optimize {optimize}) on {:02x?}",
                p.data
            );
        }
    }
}

/// A random subset of `items` (at least one), in random order.
fn subset<T: Clone>(rng: &mut Rng, items: &[T], max: usize) -> Vec<T> {
    let n = 1 + rng.index(max.min(items.len()));
    (0..n).map(|_| rng.pick(items).clone()).collect()
}

/// An address set item and its libpcap primitive keyword (`host` or `net`).
fn address_items(rng: &mut Rng, v6: bool) -> Vec<(String, &'static str)> {
    let mut all: Vec<(String, &'static str)> = IPV4_UNICAST
        .iter()
        .map(|a| (ipv4_text(*a), "host"))
        .chain(
            IPV4_NETS
                .iter()
                .filter(|n| n.contains('/') && !n.ends_with("/0"))
                .map(|n| (n.to_string(), "net")),
        )
        .collect();
    if v6 {
        all.extend(IPV6_TEXT.iter().map(|a| (a.to_string(), "host")));
        all.extend(
            IPV6_NETS
                .iter()
                .filter(|n| !n.ends_with("/0"))
                .map(|n| (n.to_string(), "net")),
        );
    }
    subset(rng, &all, 6)
}

fn set_text(items: &[String]) -> String {
    format!("{{{}}}", items.join(", "))
}

/// The libpcap expression a set primitive stands for: with one direction, the `or` of
/// `prim(item)`; with both, the `src` and `dst` expansions combined by `or` (`and` for `src
/// and dst`).
fn expansion(dir: &str, items: &[String], prim: &dyn Fn(&str, &str) -> String) -> String {
    let or_over = |d: &str| {
        let terms: Vec<String> = items.iter().map(|i| prim(d, i)).collect();
        format!("({})", terms.join(" or "))
    };
    match dir {
        "src and dst " => format!("({} and {})", or_over("src "), or_over("dst ")),
        "" | "src or dst " => format!("({} or {})", or_over("src "), or_over("dst ")),
        _ => or_over(dir),
    }
}

#[test]
fn address_sets_are_or_chains() {
    let mut rng = Rng::new(7);
    for linktype in [1, 101, 113] {
        let all_packets = generate_packets(linktype, 11, 1500);
        // An IPv6 address set reads the whole address, where libpcap's `or` of single hosts and
        // nets reads it word by word (and skips words a prefix masks off): they differ on
        // captures that end inside an IPv6 address, which these tests leave out.
        let full_headers: Vec<Packet> = all_packets
            .iter()
            .filter(|p| p.data.len() >= 56)
            .cloned()
            .collect();
        for round in 0..40 {
            let v6 = round % 3 == 0;
            let items = address_items(&mut rng, v6);
            let packets = if v6 { &full_headers } else { &all_packets };
            let protos: &[&str] = if items.iter().any(|(i, _)| i.contains(':')) {
                &[""]
            } else {
                &["", "ip ", "arp "]
            };
            let proto = *rng.pick(protos);
            let dir = *rng.pick(&["", "src ", "dst ", "src or dst ", "src and dst "]);
            let keyword = *rng.pick(&["host", "net"]);
            let texts: Vec<String> = items.iter().map(|(t, _)| t.clone()).collect();
            let ext = format!("{proto}{dir}{keyword} in {}", set_text(&texts));
            let kinds: std::collections::HashMap<&str, &str> =
                items.iter().map(|(t, k)| (t.as_str(), *k)).collect();
            let plain = expansion(dir, &texts, &|d, item| {
                format!("{proto}{d}{} {item}", kinds[item])
            });
            // Also under a later primitive, so that offsets and `and` chains are exercised.
            same_as_libpcap(&ext, &plain, linktype, packets);
            same_as_libpcap(
                &format!("tcp and {ext} or udp"),
                &format!("tcp and {plain} or udp"),
                linktype,
                packets,
            );
        }
    }
}

#[test]
fn host_names_in_sets_resolve_as_host_does() {
    // Every address the resolver gives for the name, filtered by family as `host NAME` does
    // (`localhost` is in /etc/hosts on any machine that runs these tests).
    let mut packets = generate_packets(1, 5, 300);
    packets.push(udp_packet([127, 0, 0, 1], [10, 0, 0, 2]));
    packets.push(udp_packet([10, 0, 0, 2], [127, 0, 0, 1]));
    packets.push(udp_packet([10, 0, 0, 1], [10, 0, 0, 3]));
    for (ext, plain) in [
        (
            "host in {localhost, 10.0.0.1}",
            "host localhost or host 10.0.0.1",
        ),
        ("src host in {localhost}", "src host localhost"),
        ("ip dst host in {localhost}", "ip dst host localhost"),
        ("ip6 host in {localhost}", "ip6 host localhost"),
    ] {
        same_as_libpcap(ext, plain, 1, &packets);
    }
    // `net` items are addresses only, as `net NAME` reads /etc/networks, not hosts.
    assert!(sift::compile_ir("net in {localhost}", &ext_options(1, true)).is_err());
    let unknown = sift::compile_ir(
        "host in {10.0.0.1, no-such-host.invalid}",
        &ext_options(1, true),
    );
    assert!(unknown
        .unwrap_err()
        .to_string()
        .contains("unknown host 'no-such-host.invalid'"));
}

#[test]
fn port_sets_are_or_chains() {
    let mut rng = Rng::new(8);
    for linktype in [1, 113, 228] {
        let packets = generate_packets(linktype, 12, 1500);
        for _ in 0..40 {
            let proto = *rng.pick(&["", "tcp ", "udp ", "sctp "]);
            let dir = *rng.pick(&["", "src ", "dst ", "src or dst ", "src and dst "]);
            let mut items: Vec<String> = subset(&mut rng, PORTS, 5)
                .into_iter()
                .map(|p| p.to_string())
                .collect();
            if rng.chance(1, 2) {
                let a = *rng.pick(PORTS);
                let b = *rng.pick(PORTS);
                items.push(format!("{a}-{b}"));
            }
            let ext = format!("{proto}{dir}port in {}", set_text(&items));
            let plain = expansion(dir, &items, &|d, item| {
                let kw = if item.contains('-') {
                    "portrange"
                } else {
                    "port"
                };
                format!("{proto}{d}{kw} {item}")
            });
            same_as_libpcap(&ext, &plain, linktype, &packets);
            same_as_libpcap(
                &format!("{ext} and host 10.0.0.1"),
                &format!("{plain} and host 10.0.0.1"),
                linktype,
                &packets,
            );
        }
    }
}

#[test]
fn vlan_sets_move_offsets_once() {
    let packets = generate_packets(1, 13, 3000);
    for (set, ids) in [
        ("{10}", vec![10]),
        ("{10, 100-4095}", vec![10]),
        ("{0, 20}", vec![0, 20]),
    ] {
        let mut tests: Vec<String> = ids
            .iter()
            .map(|id| format!("ether[14:2] & 0xfff = {id}"))
            .collect();
        if set.contains("100-4095") {
            tests.push("ether[14:2] & 0xfff >= 100".into());
        }
        let plain = format!("vlan and ({})", tests.join(" or "));
        same_as_libpcap(&format!("vlan in {set}"), &plain, 1, &packets);
        same_as_libpcap(
            &format!("vlan in {set} and ip and tcp port 80"),
            &format!("{plain} and ip and tcp port 80"),
            1,
            &packets,
        );
    }
}

/// libpcap's spelling of `payload[offset:len] = bytes` over IPv4 for one transport protocol.
fn libpcap_payload_bytes(proto: &str, header: &str, offset: u32, bytes: &[u8]) -> String {
    let mut terms = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let n = match bytes.len() - at {
            n if n >= 4 => 4,
            n if n >= 2 => 2,
            _ => 1,
        };
        let v = bytes[at..at + n]
            .iter()
            .fold(0u32, |v, &b| (v << 8) | u32::from(b));
        terms.push(format!(
            "{proto}[{header} + {}:{n}] = {v:#x}",
            offset as usize + at
        ));
        at += n;
    }
    format!("({})", terms.join(" and "))
}

#[test]
fn anchored_payload_is_transport_relative_load() {
    let mut rng = Rng::new(9);
    for linktype in [1, 101, 276] {
        let packets = generate_packets(linktype, 14, 2000);
        for _ in 0..30 {
            // Bytes taken from a real packet's tail, so that some packets match.
            let p = rng.pick(&packets);
            let len = 1 + rng.index(9);
            let from = rng.index(p.data.len().max(1));
            let mut bytes: Vec<u8> = p.data.iter().skip(from).take(len).copied().collect();
            if bytes.is_empty() {
                bytes.push(0);
            }
            let offset = rng.below(24) as u32;
            let negated = rng.chance(1, 4);
            let value: String = bytes.iter().map(|b| format!("\\x{b:02x}")).collect();
            let op = if negated { "!=" } else { "=" };
            let ext = format!("ip and payload[{offset}:{}] {op} \"{value}\"", bytes.len());
            let tcp = libpcap_payload_bytes("tcp", "((tcp[12] & 0xf0) >> 2)", offset, &bytes);
            let udp = libpcap_payload_bytes("udp", "8", offset, &bytes);
            let (tcp, udp) = if negated {
                (format!("not {tcp}"), format!("not {udp}"))
            } else {
                (tcp, udp)
            };
            let first = "ip[6:2] & 0x1fff = 0";
            let plain = format!(
                "ip and ((ip proto 6 and {first} and {tcp}) or (ip proto 17 and {first} and {udp}))"
            );
            same_as_libpcap(&ext, &plain, linktype, &packets);
        }
    }
}

/// Payload-carrying packets: generated frames with a pattern planted at a random place (or a
/// near miss, one byte changed).
fn planted(packets: &[Packet], patterns: &[Vec<u8>], rng: &mut Rng) -> Vec<Packet> {
    packets
        .iter()
        .map(|p| {
            let mut p = p.clone();
            if !p.data.is_empty() && rng.chance(2, 3) {
                let mut pat = rng.pick(patterns).clone();
                if rng.chance(1, 3) {
                    let i = rng.index(pat.len());
                    pat[i] ^= 0x20;
                }
                let at = rng.index(p.data.len());
                let end = (at + pat.len()).min(p.data.len());
                p.data[at..end].copy_from_slice(&pat[..end - at]);
            }
            p
        })
        .collect()
}

#[test]
fn contains_and_matches_agree_with_the_reference_search() {
    let mut rng = Rng::new(10);
    let words: Vec<Vec<u8>> = [
        "GET /admin",
        "union select",
        "\x00\x01\x02",
        "HTTP/1.1",
        "ab",
        "a",
    ]
    .iter()
    .map(|w| w.as_bytes().to_vec())
    .collect();
    for linktype in [1, 101, 229] {
        let packets = planted(&generate_packets(linktype, 15, 2000), &words, &mut rng);
        let filters = [
            r#"payload contains "GET /admin""#,
            r#"payload contains nocase "UNION SELECT" or payload contains "|00 01 02|""#,
            r#"tcp and payload contains "ab" and not payload contains "a""#,
            r#"payload matches "(?i)http/1\\.[01]" and udp"#,
            r#"payload matches "^GET" or payload[0:2] = "ab""#,
            r#"ip6 and payload contains "a" and payload contains nocase "B""#,
        ];
        for f in filters {
            let verdicts = sift_verdicts(f, linktype, true, &packets);
            let hits = verdicts.iter().filter(|&&v| v).count();
            eprintln!(
                "linktype {linktype}: `{f}` matched {hits} of {}",
                packets.len()
            );
        }
    }
}

#[test]
fn extensions_are_off_by_default() {
    for text in [
        r#"payload contains "x""#,
        "host in {10.0.0.1}",
        "port in @ports.txt",
    ] {
        assert!(sift::Filter::compile(text, 1, SNAPLEN).is_err(), "{text}");
    }
    // `in` and `payload` are names in libpcap's language.
    assert!(sift::compile_ir("host payload", &Options::new(1, SNAPLEN)).is_err());
}

#[test]
fn extension_errors_point_at_the_problem() {
    let cases = [
        (r#"payload contains "abc"#, 17),
        ("tcp and host in {10.0.0.1,, 10.0.0.2}", 26),
        (r#"payload[0:3] = "ab""#, 10),
        ("payload[0] = 256", 13),
        (r#"payload contains """#, 17),
        ("port in {http, 99999}", 9),
        ("port in {80, 99999}", 13),
        ("host in @/nonexistent/list.txt", 8),
    ];
    for (text, column) in cases {
        let err = match Filter::compile_with(text, &ext_options(1, true)) {
            Ok(_) => panic!("`{text}` compiled"),
            Err(e) => e,
        };
        let span = err.span().expect("a span");
        assert_eq!(span.start, column, "`{text}`: {}", err.render(text));
    }
}

/// An Ethernet/IPv4/UDP packet from `src` to `dst`.
fn udp_packet(src: [u8; 4], dst: [u8; 4]) -> Packet {
    let mut p = vec![0u8; 42];
    p[12..14].copy_from_slice(&[0x08, 0x00]);
    p[14] = 0x45;
    p[23] = 17;
    p[26..30].copy_from_slice(&src);
    p[30..34].copy_from_slice(&dst);
    Packet::new(p)
}

#[test]
fn large_set_from_a_file() {
    let mut rng = Rng::new(21);
    let entries: Vec<[u8; 4]> = (0..200_000).map(|_| rng.next_u32().to_be_bytes()).collect();
    let dir = std::env::temp_dir().join(format!("sift-set-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("blocklist.txt");
    let mut text = String::from("# a blocklist\n\n");
    for (i, e) in entries.iter().enumerate() {
        text.push_str(&ipv4_text(*e));
        text.push_str(if i % 7 == 0 {
            "   # with a comment\n"
        } else {
            "\n"
        });
    }
    text.push_str("198.51.100.0/24\n");
    std::fs::write(&path, text).unwrap();
    let expr = format!("src host in @{}", path.display());
    let f = Filter::compile_with(&expr, &ext_options(1, true)).unwrap();
    let member: std::collections::HashSet<[u8; 4]> = entries.iter().copied().collect();
    let mut candidates: Vec<[u8; 4]> = (0..2000).map(|i| entries[i * 97]).collect();
    candidates.extend((0..2000).map(|_| rng.next_u32().to_be_bytes()));
    candidates.extend([[198, 51, 100, 0], [198, 51, 100, 255], [198, 51, 101, 0]]);
    for src in candidates {
        let p = udp_packet(src, [10, 0, 0, 1]);
        let want = member.contains(&src) || src[..3] == [198, 51, 100];
        let got = f.run(&p.data, p.wire_len) != 0;
        assert_eq!(got, want, "{src:?}");
        assert_eq!(f.run_reference(&p.data, p.wire_len) != 0, want, "{src:?}");
    }
    // An error in the file names its line and column.
    std::fs::write(&path, "10.0.0.1\n  10.0.0.300\n").unwrap();
    let err = Filter::compile_with(&expr, &ext_options(1, true)).unwrap_err();
    assert!(
        err.to_string()
            .contains("blocklist.txt:2:3: invalid IPv4 address '10.0.0.300'"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
