//! Checks sift-testgen's generators against libpcap: the random expressions have the intended
//! share of invalid ones, and the generated traffic exercises what the filter language can test.

use sift_oracle::{Oracle, OracleError, DEFAULT_SNAPLEN};
use sift_testgen::{generate_packets, random_expressions, Packet};

fn rejected_share(linktype: u32) -> f64 {
    let oracle = Oracle::new(linktype, DEFAULT_SNAPLEN).unwrap();
    let exprs = random_expressions(11, linktype, 1000);
    let rejected = exprs
        .iter()
        .filter(|e| {
            !matches!(
                oracle.compile(e, true, 0),
                Ok(_) | Err(OracleError::RejectsAll)
            )
        })
        .count();
    rejected as f64 / exprs.len() as f64
}

#[test]
fn random_expressions_are_mostly_valid() {
    let eth = rejected_share(1);
    assert!((0.12..=0.35).contains(&eth), "Ethernet: {eth}");
    for lt in [0, 101, 108, 113, 228, 229, 276] {
        let share = rejected_share(lt);
        assert!((0.12..=0.6).contains(&share), "linktype {lt}: {share}");
    }
}

fn hits(oracle: &Oracle, packets: &[Packet], expr: &str) -> usize {
    let prog = oracle
        .compile(expr, true, 0)
        .unwrap_or_else(|e| panic!("{expr}: {e}"));
    // run_bounded: `protochain` programs can loop forever in libpcap 1.10 on some packets.
    packets
        .iter()
        .filter(|p| {
            prog.run_bounded(&p.data, p.wire_len, 1_000_000)
                .unwrap_or(0)
                != 0
        })
        .count()
}

#[test]
fn ethernet_traffic_hits_every_primitive() {
    let oracle = Oracle::new(1, DEFAULT_SNAPLEN).unwrap();
    let packets = generate_packets(1, 5, 4000);
    for expr in [
        "vlan",
        "vlan 10",
        "vlan and vlan",
        "vlan and ip6",
        "mpls",
        "mpls 100",
        "mpls and ip",
        "mpls and ip6",
        "mpls and mpls",
        "pppoed",
        "pppoes",
        "pppoes 0x1234",
        "pppoes and ip",
        "pppoes and ip6",
        "arp",
        "rarp",
        "arp host 10.0.0.1",
        "decnet",
        "decnet host 1.2",
        "decnet src 10.5",
        "atalk",
        "aarp",
        "ipx",
        "stp",
        "netbeui",
        "iso",
        "clnp",
        "esis",
        "isis",
        "l1",
        "llc",
        "llc u",
        "ip",
        "ip6",
        "tcp",
        "udp",
        "sctp",
        "icmp",
        "icmp6",
        "igmp",
        "pim",
        "vrrp",
        "ah",
        "esp",
        "ip proto 47",
        "ip protochain 6",
        "ip protochain 17",
        "ip6 protochain 6",
        "ip6 protochain 58",
        "ip6 proto 0",
        "ip6 proto 44",
        "ip6[6] = 60",
        "geneve",
        "geneve 100",
        "ip[6:2] & 0x1fff != 0",
        "ip[6] & 0x20 != 0 and ip[6:2] & 0x1fff = 0",
        "ip[0] & 0xf > 5",
        "ip broadcast",
        "ip multicast",
        "ip6 multicast",
        "ether broadcast",
        "ether multicast",
        "ether host 00:11:22:33:44:03",
        "host 10.0.0.1",
        "src net 192.168",
        "ip6 host 2001:db8::2",
        "ip6 dst host ff02::1",
        "net fe80::/10",
        "tcp port 80",
        "tcp src port 443",
        "udp port domain",
        "sctp port 22",
        "portrange 20-22",
        "tcp[tcpflags] & tcp-syn != 0",
        "tcp[tcpflags] & (tcp-syn|tcp-ack) = (tcp-syn|tcp-ack)",
        "tcp[tcpflags] & tcp-rst != 0",
        "icmp[icmptype] = icmp-echo",
        "icmp[icmptype] = icmp-unreach",
        "icmp6[icmp6type] = icmp6-neighborsolicit",
        "less 60",
        "greater 200",
        "len = 60",
        "ether proto 0x88cc",
    ] {
        assert!(
            hits(&oracle, &packets, expr) > 0,
            "no packet matches `{expr}`"
        );
        assert!(
            hits(&oracle, &packets, &format!("not ({expr})")) > 0,
            "every packet matches `{expr}`"
        );
    }
}

#[test]

fn other_link_types_hit_the_basics() {
    let cases: &[(u32, &[&str])] = &[
        (
            101,
            &[
                "ip",
                "ip6",
                "tcp port 80",
                "ip6 protochain 17",
                "icmp6",
                "ip[6:2] & 0x1fff != 0",
            ],
        ),
        (228, &["ip", "udp", "host 10.0.0.2", "ip broadcast"]),
        (229, &["ip6", "icmp6", "ip6 multicast", "ip6 protochain 6"]),
        (0, &["ip", "ip6", "tcp", "link[0] = 2"]),
        (108, &["ip", "ip6", "udp", "link[3] = 2"]),
        (
            113,
            &[
                "ip", "ip6", "arp", "vlan", "mpls", "pppoes", "llc", "stp", "ipx",
            ],
        ),
        (
            276,
            &["ip", "ip6", "arp", "vlan", "mpls", "pppoes", "llc", "iso"],
        ),
    ];
    for &(lt, exprs) in cases {
        let oracle = Oracle::new(lt, DEFAULT_SNAPLEN).unwrap();
        let packets = generate_packets(lt, 5, 3000);
        for expr in exprs {
            // libpcap 1.10 supports fewer encapsulations on some links (no vlan/mpls/llc on SLL).
            if oracle.compile(expr, true, 0).is_err() {
                continue;
            }
            assert!(
                hits(&oracle, &packets, expr) > 0,
                "linktype {lt}: no packet matches `{expr}`"
            );
        }
    }
}
