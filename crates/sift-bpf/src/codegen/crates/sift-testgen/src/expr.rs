//! Random pcap-filter expressions.
//!
//! [`random_expression`] draws from the whole filter language: boolean structure (`and`/`or`/`not`
//! and their `&&`/`||`/`!` spellings, parentheses, implicit-qualifier continuation such as
//! `host 10.0.0.1 or 10.0.0.2`), every primitive family (host/net/port/portrange with protocol and
//! direction qualifiers, ether/ip/ip6/arp/... primitives, `proto`/`protochain`, vlan/mpls/pppoe/
//! geneve, length tests, broadcast/multicast, LLC/ISO/DECnet/AppleTalk/IPX, arithmetic relations
//! with packet loads, every operator and the named constants). The values come from
//! [`crate::pools`], so random filters match random packets.
//!
//! About a fifth of the expressions (configurable) are deliberately invalid: syntax errors (dangling
//! operators, unbalanced parentheses, stray tokens) and semantic errors libpcap rejects (division
//! by a zero constant, load sizes other than 1/2/4, out-of-range ports, non-network bits in a
//! network, mismatched qualifiers, 802.11-only qualifiers on other links, ...). Some of these depend
//! on the link type (e.g. `vlan` on raw IP); libpcap is the judge either way.

use crate::pools::*;
use crate::Rng;

/// Shape of the generated expressions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprConfig {
    /// LINKTYPE the expressions are meant for (biases which primitives appear).
    pub linktype: u32,
    /// Maximum nesting depth of boolean structure.
    pub max_depth: u32,
    /// Maximum number of primitives in one expression (approximate).
    pub max_primitives: u32,
    /// Per mille of expressions that are made invalid on purpose.
    pub invalid_per_mille: u32,
}

impl ExprConfig {
    /// Defaults for `linktype`: depth 4, up to 8 primitives, 200 per mille invalid.
    pub fn new(linktype: u32) -> ExprConfig {
        ExprConfig {
            linktype,
            max_depth: 4,
            max_primitives: 8,
            invalid_per_mille: 200,
        }
    }
}

/// One random expression for `linktype`, with the default [`ExprConfig`].
pub fn random_expression(rng: &mut Rng, linktype: u32) -> String {
    random_expression_with(rng, &ExprConfig::new(linktype))
}

/// `count` expressions for `linktype`, deterministic from `seed`.
pub fn random_expressions(seed: u64, linktype: u32, count: usize) -> Vec<String> {
    let mut rng = Rng::new(seed ^ 0x5eed_0000_0000_0000 ^ u64::from(linktype));
    (0..count)
        .map(|_| random_expression(&mut rng, linktype))
        .collect()
}

/// One random expression with an explicit configuration.
pub fn random_expression_with(rng: &mut Rng, cfg: &ExprConfig) -> String {
    let mut g = Gen {
        rng,
        cfg,
        budget: cfg.max_primitives.max(1),
    };
    let invalid = g.rng.chance(u64::from(cfg.invalid_per_mille), 1000);
    let depth = g.rng.range(0, u64::from(cfg.max_depth)) as u32;
    let e = g.expr(depth);
    if invalid {
        g.make_invalid(e)
    } else {
        e
    }
}

struct Gen<'a> {
    rng: &'a mut Rng,
    cfg: &'a ExprConfig,
    budget: u32,
}

fn is_ethernet_like(linktype: u32) -> bool {
    matches!(linktype, 1 | 113 | 276)
}

fn is_raw(linktype: u32) -> bool {
    matches!(linktype, 0 | 12 | 14 | 101 | 108 | 228 | 229)
}

impl Gen<'_> {
    fn expr(&mut self, depth: u32) -> String {
        if depth == 0 || self.budget <= 1 || self.rng.chance(1, 4) {
            self.budget = self.budget.saturating_sub(1);
            return self.primitive();
        }
        match self.rng.below(12) {
            0..=2 => format!("{} and {}", self.expr(depth - 1), self.expr(depth - 1)),
            3..=4 => format!("{} or {}", self.expr(depth - 1), self.expr(depth - 1)),
            5 => format!("{} && {}", self.expr(depth - 1), self.expr(depth - 1)),
            6 => format!("{} || {}", self.expr(depth - 1), self.expr(depth - 1)),
            7 => format!("not {}", self.expr(depth - 1)),
            8 => format!("!{}", self.expr(depth - 1)),
            9 => format!("({})", self.expr(depth - 1)),
            10 => format!(
                "({}) and not ({})",
                self.expr(depth - 1),
                self.expr(depth - 1)
            ),
            _ => {
                let op = *self.rng.pick(&["and", "or", "&&", "||"]);
                format!("{} {op} ({})", self.expr(depth - 1), self.expr(depth - 1))
            }
        }
    }

    fn primitive(&mut self) -> String {
        let lt = self.cfg.linktype;
        let eth = is_ethernet_like(lt);
        let table: &[(u32, u8)] = &[
            (14, 0),                      // host
            (8, 1),                       // net
            (12, 2),                      // port / portrange
            (10, 3),                      // bare protocol
            (6, 4),                       // proto / protochain
            (if eth { 8 } else { 2 }, 5), // ether
            (if eth { 6 } else { 2 }, 6), // vlan / mpls / pppoe / geneve
            (5, 7),                       // lengths
            (4, 8),                       // broadcast / multicast
            (if eth { 4 } else { 1 }, 9), // llc / iso / decnet / atalk / ipx
            (16, 10),                     // relation
            (6, 11),                      // idioms seen in real filters
        ];
        match self.rng.weighted(table) {
            0 => self.host(),
            1 => self.net(),
            2 => self.port(),
            3 => self.bare_proto(),
            4 => self.proto_num(),
            5 => self.ether(),
            6 => self.encap(),
            7 => self.length(),
            8 => self.cast(),
            9 => self.legacy(),
            10 => self.relation(),
            _ => self.idiom(),
        }
    }

    fn dir(&mut self) -> &'static str {
        self.rng.weighted(&[
            (6, ""),
            (3, "src "),
            (3, "dst "),
            (2, "src or dst "),
            (2, "src and dst "),
        ])
    }

    fn v4(&mut self) -> String {
        if self.rng.chance(4, 5) {
            ipv4_text(*self.rng.pick(IPV4_UNICAST))
        } else {
            ipv4_text(*self.rng.pick(IPV4_SPECIAL))
        }
    }

    fn v6(&mut self) -> String {
        self.rng.pick(IPV6_TEXT).to_string()
    }

    /// `host`, with optional protocol and direction, and sometimes implicit continuation.
    fn host(&mut self) -> String {
        let dir = self.dir();
        let v6 = is_raw(self.cfg.linktype) && self.cfg.linktype == 229 || self.rng.chance(1, 3);
        let (proto, addr) = if v6 {
            (*self.rng.pick(&["", "", "ip6 "]), self.v6())
        } else {
            (*self.rng.pick(&["", "", "ip ", "arp ", "rarp "]), self.v4())
        };
        let kw = if self.rng.chance(1, 8) && !dir.is_empty() {
            ""
        } else {
            "host "
        };
        let mut s = format!("{proto}{dir}{kw}{addr}");
        if self.rng.chance(1, 6) {
            let more = if v6 { self.v6() } else { self.v4() };
            let op = *self.rng.pick(&["or", "and", "or not"]);
            s = format!("{s} {op} {more}");
        }
        s
    }

    fn net(&mut self) -> String {
        let dir = self.dir();
        if self.rng.chance(1, 3) {
            let n = *self.rng.pick(IPV6_NETS);
            let proto = *self.rng.pick(&["", "ip6 "]);
            format!("{proto}{dir}net {n}")
        } else {
            let n = *self.rng.pick(IPV4_NETS);
            let proto = *self.rng.pick(&["", "", "ip ", "arp ", "rarp "]);
            let mut s = format!("{proto}{dir}net {n}");
            if self.rng.chance(1, 8) {
                s = format!(
                    "{s} or {}",
                    self.rng.pick(&["192.168", "10.0.0.0/24", "172.16"])
                );
            }
            s
        }
    }

    fn port_value(&mut self) -> String {
        if self.rng.chance(1, 5) {
            self.rng.pick(PORT_NAMES).to_string()
        } else if self.rng.chance(1, 10) {
            self.rng.below(65536).to_string()
        } else {
            self.rng.pick(PORTS).to_string()
        }
    }

    fn port(&mut self) -> String {
        let proto = self.rng.weighted(&[
            (6, ""),
            (5, "tcp "),
            (5, "udp "),
            (2, "sctp "),
            (1, "ip and tcp "),
            (1, "ip6 and udp "),
            (1, "ip6 and tcp "),
        ]);
        let dir = self.dir();
        if self.rng.chance(1, 4) {
            let a = self.rng.below(8000);
            let b = a + self.rng.below(3000);
            let range = if self.rng.chance(1, 8) {
                format!(
                    "{}-{}",
                    self.rng.pick(PORT_NAMES),
                    self.rng.pick(&["https", "8080"])
                )
            } else {
                format!("{a}-{b}")
            };
            return format!("{proto}{dir}portrange {range}");
        }
        let mut s = format!("{proto}{dir}port {}", self.port_value());
        if self.rng.chance(1, 6) {
            let op = *self.rng.pick(&["or", "and not", "or"]);
            s = format!("{s} {op} {}", self.port_value());
        }
        s
    }

    fn bare_proto(&mut self) -> String {
        let v = self.rng.weighted(&[
            (8, "ip"),
            (6, "ip6"),
            (4, "arp"),
            (2, "rarp"),
            (8, "tcp"),
            (8, "udp"),
            (4, "icmp"),
            (4, "icmp6"),
            (2, "igmp"),
            (1, "igrp"),
            (2, "pim"),
            (2, "vrrp"),
            (1, "carp"),
            (2, "sctp"),
            (2, "ah"),
            (2, "esp"),
            (1, "ip and tcp"),
            (1, "ip6 and udp"),
            (1, "ip6 and icmp6"),
            (1, "ip and not tcp"),
        ]);
        v.to_string()
    }

    fn proto_num(&mut self) -> String {
        match self.rng.below(10) {
            0 | 1 => format!("ip proto {}", self.ip_proto()),
            2 | 3 => format!("ip6 proto {}", self.ip6_proto()),
            4 => format!("proto {}", self.ip_proto()),
            5 => format!("ip protochain {}", self.ip_proto()),
            6 => format!("ip6 protochain {}", self.ip6_proto()),
            7 => format!("protochain {}", self.ip6_proto()),
            8 => format!("ether proto {}", self.ether_type()),
            _ => self
                .rng
                .pick(&[
                    "ip proto \\tcp",
                    "ip proto \\udp",
                    "ip6 proto \\icmp6",
                    "proto \\tcp",
                    "ether proto \\ip",
                    "ether proto \\ip6",
                    "ether proto \\arp",
                    "ether proto \\rarp",
                    "link proto \\ip",
                    "iso proto \\clnp",
                    "iso proto \\isis",
                    "ip proto icmp",
                    "ip proto tcp",
                    "ip6 proto udp",
                ])
                .to_string(),
        }
    }

    fn ip_proto(&mut self) -> String {
        if self.rng.chance(1, 5) {
            self.rng
                .pick(&["tcp", "udp", "icmp", "\\tcp", "sctp"])
                .to_string()
        } else {
            self.rng.pick(IP_PROTOS).to_string()
        }
    }

    fn ip6_proto(&mut self) -> String {
        if self.rng.chance(1, 5) {
            self.rng.pick(&["tcp", "udp", "icmp6", "\\udp"]).to_string()
        } else {
            self.rng.pick(IP6_PROTOS).to_string()
        }
    }

    fn ether_type(&mut self) -> String {
        match self.rng.below(4) {
            0 => format!("{}", self.rng.pick(ETHERTYPES)),
            1 => format!("{:#06x}", self.rng.pick(ETHERTYPES)),
            2 => format!("{}", self.rng.pick(&[46, 1500, 1501, 0, 0xffff])),
            _ => format!(
                "\\{}",
                self.rng.pick(&[
                    "ip", "ip6", "arp", "rarp", "decnet", "atalk", "aarp", "ipx", "iso", "netbeui",
                    "lat", "sca", "mopdl", "moprc", "stp"
                ])
            ),
        }
    }

    fn ether(&mut self) -> String {
        let mac = *self.rng.pick(MAC_TEXT);
        match self.rng.below(9) {
            0 => format!("ether host {mac}"),
            1 => format!("ether src {mac}"),
            2 => format!("ether dst {mac}"),
            3 => format!("ether src or dst host {mac}"),
            4 => format!("ether src and dst {mac}"),
            5 => "ether broadcast".to_string(),
            6 => "ether multicast".to_string(),
            7 => format!("ether proto {}", self.ether_type()),
            _ => format!("ether host {mac} or {}", self.rng.pick(MAC_TEXT)),
        }
    }

    fn encap(&mut self) -> String {
        match self.rng.below(11) {
            0 => "vlan".to_string(),
            1 | 2 => format!("vlan {}", self.rng.pick(VLAN_IDS)),
            3 => "mpls".to_string(),
            4 | 5 => format!("mpls {}", self.rng.pick(MPLS_LABELS)),
            6 => "pppoed".to_string(),
            7 => "pppoes".to_string(),
            8 => format!("pppoes {}", self.rng.pick(PPPOE_SESSIONS)),
            9 => "geneve".to_string(),
            _ => format!("geneve {}", self.rng.pick(GENEVE_VNIS)),
        }
    }

    fn length(&mut self) -> String {
        let n = *self.rng.pick(LENGTHS);
        match self.rng.below(4) {
            0 => format!("less {n}"),
            1 => format!("greater {n}"),
            _ => format!("{} {} {n}", self.rng.pick(&["len", "length"]), self.relop()),
        }
    }

    fn cast(&mut self) -> String {
        self.rng
            .pick(&[
                "broadcast",
                "multicast",
                "ip broadcast",
                "ip multicast",
                "ip6 multicast",
                "ether broadcast",
                "ether multicast",
            ])
            .to_string()
    }

    fn legacy(&mut self) -> String {
        match self.rng.below(4) {
            0 => {
                let (a, n) = *self.rng.pick(DECNET_ADDRS);
                format!(
                    "decnet {}host {a}.{n}",
                    self.rng.pick(&["", "src ", "dst ", "src or dst "])
                )
            }
            1 => self
                .rng
                .pick(&[
                    "llc",
                    "llc i",
                    "llc s",
                    "llc u",
                    "llc rr",
                    "llc ui",
                    "llc sabme",
                ])
                .to_string(),
            _ => self
                .rng
                .pick(&[
                    "stp", "ipx", "netbeui", "iso", "clnp", "esis", "es-is", "isis", "is-is", "l1",
                    "l2", "iih", "lsp", "snp", "csnp", "psnp", "atalk", "aarp", "decnet", "lat",
                    "sca", "moprc", "mopdl",
                ])
                .to_string(),
        }
    }

    fn relop(&mut self) -> &'static str {
        self.rng.weighted(&[
            (4, "="),
            (1, "=="),
            (3, "!="),
            (2, "<"),
            (2, "<="),
            (2, ">"),
            (2, ">="),
        ])
    }

    fn load_proto(&mut self) -> &'static str {
        let lt = self.cfg.linktype;
        let eth = is_ethernet_like(lt);
        self.rng.weighted(&[
            (8, "ip"),
            (3, "ip6"),
            (8, "tcp"),
            (6, "udp"),
            (4, "icmp"),
            (3, "icmp6"),
            (if eth { 6 } else { 1 }, "ether"),
            (2, "link"),
            (1, "igmp"),
            (1, "pim"),
            (1, "vrrp"),
            (1, "sctp"),
            (if eth { 2 } else { 0 }, "arp"),
            (1, "rarp"),
        ])
    }

    /// `proto[index]`, `proto[index:size]`.
    fn load(&mut self, depth: u32) -> String {
        let p = self.load_proto();
        let idx = if depth > 0 && self.rng.chance(1, 8) {
            self.arith(depth - 1)
        } else {
            self.rng.below(24).to_string()
        };
        match self.rng.below(3) {
            0 => format!("{p}[{idx}]"),
            _ => format!("{p}[{idx}:{}]", self.rng.pick(&[1, 2, 4])),
        }
    }

    fn constant(&mut self) -> String {
        match self.rng.below(10) {
            0 => format!(
                "{:#x}",
                self.rng.pick(&[0xffu32, 0x1fff, 0xf0, 0x0800, 0x86dd, 2])
            ),
            1 => self
                .rng
                .pick(&[
                    "tcpflags",
                    "tcp-syn",
                    "tcp-ack",
                    "tcp-fin",
                    "tcp-rst",
                    "tcp-push",
                    "tcp-urg",
                    "tcp-ece",
                    "tcp-cwr",
                    "icmptype",
                    "icmpcode",
                    "icmp-echo",
                    "icmp-echoreply",
                    "icmp-unreach",
                    "icmp-timxceed",
                    "icmp6type",
                    "icmp6code",
                    "icmp6-echo",
                    "icmp6-echoreply",
                    "icmp6-neighborsolicit",
                    "icmp6-routeradvert",
                ])
                .to_string(),
            2 => format!("0{}", self.rng.below(64)), // octal
            3 => self.rng.next_u32().to_string(),
            _ => self
                .rng
                .pick(&[
                    0u32, 1, 2, 4, 5, 6, 8, 13, 15, 17, 20, 31, 53, 69, 80, 255, 4321,
                ])
                .to_string(),
        }
    }

    fn arith(&mut self, depth: u32) -> String {
        if depth == 0 || self.rng.chance(1, 2) {
            return match self.rng.below(7) {
                0..=2 => self.load(depth),
                3 => "len".to_string(),
                _ => self.constant(),
            };
        }
        match self.rng.below(10) {
            0 => format!("-{}", self.arith(depth - 1)),
            1 => format!("({})", self.arith(depth - 1)),
            _ => {
                let op = *self
                    .rng
                    .pick(&["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"]);
                let rhs = if matches!(op, "/" | "%") {
                    // Non-zero constant or a load (which may be zero at run time).
                    if self.rng.chance(2, 3) {
                        self.rng.range(1, 32).to_string()
                    } else {
                        self.load(depth - 1)
                    }
                } else if matches!(op, "<<" | ">>") {
                    self.rng.below(33).to_string()
                } else {
                    self.arith(depth - 1)
                };
                format!("{} {op} {rhs}", self.arith(depth - 1))
            }
        }
    }

    fn relation(&mut self) -> String {
        let depth = self.rng.range(0, 2) as u32;
        let lhs = if self.rng.chance(4, 5) {
            let l = self.load(depth);
            if self.rng.chance(1, 2) {
                format!("{l} & {}", self.constant())
            } else {
                l
            }
        } else {
            self.arith(depth + 1)
        };
        let rhs = if self.rng.chance(4, 5) {
            self.constant()
        } else {
            self.arith(depth)
        };
        format!("{lhs} {} {rhs}", self.relop())
    }

    fn idiom(&mut self) -> String {
        self.rng
            .pick(&[
                "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0",
                "tcp[tcpflags] & tcp-syn != 0 and tcp[tcpflags] & tcp-ack = 0",
                "tcp[13] & 2 = 2",
                "icmp[icmptype] != icmp-echo and icmp[icmptype] != icmp-echoreply",
                "icmp[icmptype] = icmp-unreach",
                "icmp6[icmp6type] = icmp6-echo",
                "icmp6[icmp6type] = icmp6-neighborsolicit",
                "ip[6:2] & 0x1fff != 0",
                "ip[6:2] & 0x1fff = 0",
                "ip[0] & 0xf > 5",
                "ip[1] & 0xfc = 0xb8",
                "ip[8] < 2",
                "(ip[2:2] - ((ip[0]&0xf)<<2) - ((tcp[12]&0xf0)>>2)) != 0",
                "ether[0] & 1 = 1",
                "ether[12:2] = 0x8100",
                "ip6[6] = 58",
                "udp[8:4] = 0x12345678",
                "ip[ip[0] & 0xf] = 0",
                "tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420",
            ])
            .to_string()
    }

    /// Turns a valid expression into one libpcap rejects (most of the time).
    fn make_invalid(&mut self, e: String) -> String {
        match self.rng.below(14) {
            0 => format!(
                "{e} {}",
                self.rng.pick(&["and", "or", "&&", "not", "and not"])
            ),
            1 => format!("({e}"),
            2 => format!("{e})"),
            3 => format!("{} {e}", self.rng.pick(&["and", "or"])),
            4 => format!(
                "{e} and {}",
                self.rng
                    .pick(&["tcp[0] / 0 = 1", "ip[2] % 0 = 0", "1 / 0 = 1"])
            ),
            5 => format!(
                "{e} or {}",
                self.rng
                    .pick(&["ip[0:3] = 1", "tcp[2:8] = 0", "ip[0:0] = 1"])
            ),
            6 => format!(
                "{e} and {}",
                self.rng.pick(&[
                    "port 99999",
                    "portrange 80-70000",
                    "tcp port -1",
                    "port bogusname"
                ])
            ),
            7 => format!(
                "{e} or {}",
                self.rng.pick(&[
                    "net 10.0.0.1/8",
                    "net 10.0.0.0/33",
                    "net 192.168.1.1 mask 255.255.0.0",
                    "ip6 net 2001:db8::1/32",
                    "net 2001:db8::/129",
                ])
            ),
            8 => format!(
                "{e} and {}",
                self.rng.pick(&[
                    "ip host 2001:db8::1",
                    "ip6 host 10.0.0.1",
                    "tcp host 10.0.0.1",
                    "udp net 10",
                    "ether host 10.0.0.1",
                    "arp host 2001:db8::1",
                    "ip6 proto 300",
                    "ip proto 256",
                    "ether proto 99999999",
                    "tcp src net 10",
                    "icmp port 80",
                    "ip6 broadcast",
                    "sctp portrange 10",
                ])
            ),
            9 => format!(
                "{e} or {}",
                self.rng.pick(&[
                    "ra host 00:11:22:33:44:00",
                    "ta 00:11:22:33:44:00",
                    "addr1 00:11:22:33:44:00",
                    "type mgt",
                    "subtype beacon",
                    "dir fromds",
                    "wlan host 00:11:22:33:44:00",
                    "inbound",
                    "ifname eth0",
                    "gateway 10.0.0.1",
                    "ip6 gateway ::1",
                    "vpi 1",
                    "lane",
                    "fisu",
                ])
            ),
            10 => format!(
                "{e} {}",
                self.rng
                    .pick(&["foo", "= 1", "[1]", "10.0.0.1.5", "and ()", "$"])
            ),
            11 => format!(
                "{e} and {}",
                self.rng
                    .pick(&["less", "greater abc", "len >", "vlan x", "mpls -1", "proto"])
            ),
            12 => format!(
                "{e} and {}",
                self.rng
                    .pick(&["ip[1 = 2", "tcp[] = 1", "ip[0] == ", "ether[0] & = 1"])
            ),
            _ => format!("{} and ({e}", self.rng.pick(&["not", "!", "ip"])),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic() {
        assert_eq!(random_expressions(1, 1, 100), random_expressions(1, 1, 100));
        assert_ne!(random_expressions(1, 1, 100), random_expressions(2, 1, 100));
    }

    #[test]
    fn covers_the_language() {
        let all = random_expressions(7, 1, 3000).join("\n");
        for needle in [
            " and ",
            " or ",
            "&&",
            "||",
            "not ",
            "!",
            "(",
            "src or dst ",
            "src and dst ",
            "portrange ",
            "ether host ",
            "ether broadcast",
            "vlan",
            "mpls",
            "pppoes",
            "pppoed",
            "ip protochain",
            "ip6 protochain",
            "proto \\tcp",
            "net 192.168 mask",
            "fe80::/10",
            "less ",
            "greater ",
            "len ",
            "ip broadcast",
            "ip6 multicast",
            "llc",
            "stp",
            "ipx",
            "clnp",
            "decnet ",
            "atalk",
            " << ",
            " >> ",
            " % ",
            " ^ ",
            " | ",
            "tcpflags",
            "icmp6type",
            "http",
            "geneve",
            "-",
        ] {
            assert!(all.contains(needle), "never generated {needle:?}");
        }
    }

    #[test]
    fn bounded_size() {
        let mut rng = Rng::new(3);
        let cfg = ExprConfig {
            max_depth: 2,
            max_primitives: 3,
            invalid_per_mille: 0,
            ..ExprConfig::new(1)
        };
        for _ in 0..500 {
            let e = random_expression_with(&mut rng, &cfg);
            assert!(e.len() < 400, "{e}");
            assert_eq!(e.matches('(').count(), e.matches(')').count(), "{e}");
        }
    }
}
