//! Value pools shared by the packet and expression generators.
//!
//! Packets draw their addresses, ports and numbers mostly from these small pools, and expressions
//! mention the same values, so that random filters actually match random packets.

/// Unicast IPv4 addresses.
pub const IPV4_UNICAST: &[[u8; 4]] = &[
    [10, 0, 0, 1],
    [10, 0, 0, 2],
    [10, 0, 0, 3],
    [10, 0, 0, 4],
    [192, 168, 1, 1],
    [192, 168, 1, 2],
    [192, 168, 1, 3],
    [172, 16, 5, 4],
    [8, 8, 8, 8],
];

/// Multicast and broadcast IPv4 addresses.
pub const IPV4_SPECIAL: &[[u8; 4]] = &[
    [224, 0, 0, 5],
    [224, 0, 0, 1],
    [239, 1, 2, 3],
    [255, 255, 255, 255],
    [0, 0, 0, 0],
    [10, 0, 0, 255],
];

/// IPv4 networks as text (for `net`), matching some of [`IPV4_UNICAST`] / [`IPV4_SPECIAL`].
pub const IPV4_NETS: &[&str] = &[
    "10",
    "10.0.0",
    "10.0.0.0/8",
    "10.0.0.0/24",
    "10.0.0.4/30",
    "10.0.0.0/30",
    "192.168",
    "192.168.1.0/24",
    "192.168.0.0/16",
    "172.16.0.0/12",
    "224.0.0.0/4",
    "0.0.0.0/0",
    "8.8.8.8/32",
    "10 mask 255.0.0.0",
    "192.168 mask 255.255.0.0",
    "10.0.0.0 mask 255.255.255.0",
    "172.16.5.4/32",
];

/// IPv6 addresses (16 bytes each).
pub const IPV6_ADDRS: &[[u8; 16]] = &[
    [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
    [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3],
    [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
];

/// Text forms of [`IPV6_ADDRS`], in the same order.
pub const IPV6_TEXT: &[&str] = &[
    "2001:db8::1",
    "2001:db8::2",
    "2001:db8::3",
    "fe80::1",
    "::1",
    "ff02::1",
    "ff02::2",
];

/// IPv6 networks as text.
pub const IPV6_NETS: &[&str] = &[
    "2001:db8::/32",
    "2001:db8::/126",
    "2001:db8::/64",
    "fe80::/10",
    "ff00::/8",
    "::1/128",
    "::/0",
];

/// MAC addresses; the last two are broadcast and an IPv4 multicast MAC.
pub const MACS: &[[u8; 6]] = &[
    [0x00, 0x11, 0x22, 0x33, 0x44, 0x00],
    [0x00, 0x11, 0x22, 0x33, 0x44, 0x01],
    [0x00, 0x11, 0x22, 0x33, 0x44, 0x02],
    [0x00, 0x11, 0x22, 0x33, 0x44, 0x03],
    [0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    [0x01, 0x00, 0x5e, 0x00, 0x00, 0x05],
];

/// Text forms of [`MACS`], in the same order.
pub const MAC_TEXT: &[&str] = &[
    "00:11:22:33:44:00",
    "00:11:22:33:44:01",
    "00:11:22:33:44:02",
    "00:11:22:33:44:03",
    "ff:ff:ff:ff:ff:ff",
    "01:00:5e:00:00:05",
];

/// Ports packets use (plus occasional random ones).
pub const PORTS: &[u16] = &[
    20, 21, 22, 53, 80, 123, 443, 8080, 1234, 4321, 6081, 0, 65535,
];

/// Port names libpcap resolves through `/etc/services` (present on every test host).
pub const PORT_NAMES: &[&str] = &["http", "domain", "ssh", "https", "ntp", "ftp", "ftp-data"];

/// VLAN ids.
pub const VLAN_IDS: &[u16] = &[10, 20, 100, 0, 4095];

/// MPLS labels.
pub const MPLS_LABELS: &[u32] = &[16, 17, 100, 0, 1048575];

/// PPPoE session ids.
pub const PPPOE_SESSIONS: &[u16] = &[0x1234, 1, 0xffff];

/// Geneve VNIs.
pub const GENEVE_VNIS: &[u32] = &[0, 1, 100, 0xffffff];

/// DECnet addresses as `(area, node)`, text `area.node`.
pub const DECNET_ADDRS: &[(u16, u16)] = &[(1, 2), (10, 5), (63, 1023)];

/// IPv4 protocol numbers used in packets and expressions.
pub const IP_PROTOS: &[u8] = &[1, 2, 4, 6, 17, 41, 47, 50, 51, 103, 112, 132];

/// IPv6 next-header values used in packets and expressions (upper layers and extension headers).
pub const IP6_PROTOS: &[u8] = &[0, 6, 17, 43, 44, 50, 51, 58, 59, 60, 132];

/// Ethernet types used in packets and expressions.
pub const ETHERTYPES: &[u16] = &[
    0x0800, 0x86dd, 0x0806, 0x8035, 0x6003, 0x809b, 0x80f3, 0x8137, 0x8100, 0x88a8, 0x9100, 0x8847,
    0x8848, 0x8863, 0x8864, 0x88cc, 0x6001, 0x6002, 0x6004, 0x6007, 0x9000,
];

/// ICMP types.
pub const ICMP_TYPES: &[u8] = &[0, 3, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18];

/// ICMPv6 types.
pub const ICMP6_TYPES: &[u8] = &[
    1, 2, 3, 4, 128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 143,
];

/// Packet lengths that `len`, `less` and `greater` compare against.
pub const LENGTHS: &[u32] = &[0, 14, 40, 42, 54, 60, 64, 100, 128, 200, 1500];

/// Text form of an IPv4 address.
pub fn ipv4_text(a: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_forms_agree() {
        assert_eq!(IPV6_ADDRS.len(), IPV6_TEXT.len());
        assert_eq!(MACS.len(), MAC_TEXT.len());
        for (mac, text) in MACS.iter().zip(MAC_TEXT) {
            let s: Vec<String> = mac.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(s.join(":"), *text);
        }
        for (a, t) in IPV6_ADDRS.iter().zip(IPV6_TEXT) {
            let parsed: std::net::Ipv6Addr = t.parse().unwrap();
            assert_eq!(parsed.octets(), *a);
        }
        assert_eq!(ipv4_text(IPV4_UNICAST[0]), "10.0.0.1");
    }
}
