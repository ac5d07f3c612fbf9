//! Link-type names and numbers.
//!
//! Two numbering schemes exist: LINKTYPE values (what pcap/pcapng files carry, stable across
//! platforms) and DLT values (what libpcap uses internally and what `pcap_open_dead` takes). They
//! are equal except for a few historical values; the important one here is raw IP, LINKTYPE 101 vs
//! `DLT_RAW` 12 on Linux (14 on OpenBSD).

/// LINKTYPE_NULL: BSD loopback, 4-byte host-order address family.
pub const NULL: u32 = 0;
/// LINKTYPE_ETHERNET (DLT_EN10MB).
pub const EN10MB: u32 = 1;
/// LINKTYPE_RAW: raw IPv4 or IPv6.
pub const RAW: u32 = 101;
/// LINKTYPE_LOOP: OpenBSD loopback, 4-byte network-order address family.
pub const LOOP: u32 = 108;
/// LINKTYPE_LINUX_SLL: Linux cooked capture v1.
pub const LINUX_SLL: u32 = 113;
/// LINKTYPE_IPV4: raw IPv4 only.
pub const IPV4: u32 = 228;
/// LINKTYPE_IPV6: raw IPv6 only.
pub const IPV6: u32 = 229;
/// LINKTYPE_LINUX_SLL2: Linux cooked capture v2.
pub const LINUX_SLL2: u32 = 276;

/// DLT names (as in `pcap_datalink_name_to_val`, without the `DLT_` prefix) and LINKTYPE values.
const NAMES: &[(&str, u32)] = &[
    ("NULL", 0),
    ("EN10MB", 1),
    ("ETHERNET", 1),
    ("EN3MB", 2),
    ("AX25", 3),
    ("PRONET", 4),
    ("CHAOS", 5),
    ("IEEE802", 6),
    ("IEEE802_5", 6),
    ("ARCNET", 7),
    ("SLIP", 8),
    ("PPP", 9),
    ("FDDI", 10),
    ("PPP_SERIAL", 50),
    ("PPP_HDLC", 50),
    ("PPP_ETHER", 51),
    ("SYMANTEC_FIREWALL", 99),
    ("ATM_RFC1483", 100),
    ("RAW", 101),
    ("SLIP_BSDOS", 102),
    ("PPP_BSDOS", 103),
    ("C_HDLC", 104),
    ("IEEE802_11", 105),
    ("ATM_CLIP", 106),
    ("FRELAY", 107),
    ("LOOP", 108),
    ("ENC", 109),
    ("LINUX_SLL", 113),
    ("LTALK", 114),
    ("PFLOG", 117),
    ("PRISM_HEADER", 119),
    ("IP_OVER_FC", 122),
    ("SUNATM", 123),
    ("IEEE802_11_RADIO", 127),
    ("ARCNET_LINUX", 129),
    ("LINUX_IRDA", 144),
    ("IEEE802_11_RADIO_AVS", 163),
    ("BACNET_MS_TP", 165),
    ("PPP_PPPD", 166),
    ("GPRS_LLC", 169),
    ("LINUX_LAPD", 177),
    ("MFR", 182),
    ("IEEE802_15_4", 195),
    ("IPNET", 226),
    ("IPV4", 228),
    ("IPV6", 229),
    ("NETANALYZER", 240),
    ("NETANALYZER_TRANSPARENT", 241),
    ("IPOIB", 242),
    ("MPEG_2_TS", 243),
    ("NFLOG", 239),
    ("PFSYNC", 246),
    ("NETLINK", 253),
    ("PKTAP", 258),
    ("IEEE802_15_4_NOFCS", 230),
    ("LINUX_SLL2", 276),
];

/// The LINKTYPE value for a DLT name such as `EN10MB`, `RAW`, `LINUX_SLL2` (case-insensitive,
/// with or without a `DLT_`/`LINKTYPE_` prefix).
pub fn from_name(name: &str) -> Option<u32> {
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper
        .strip_prefix("DLT_")
        .or_else(|| upper.strip_prefix("LINKTYPE_"))
        .unwrap_or(&upper);
    NAMES.iter().find(|(n, _)| *n == bare).map(|&(_, v)| v)
}

/// The canonical DLT name for a LINKTYPE value, if known.
pub fn name(linktype: u32) -> Option<&'static str> {
    NAMES.iter().find(|(_, v)| *v == linktype).map(|&(n, _)| n)
}

/// `DLT_RAW` on this platform.
pub const DLT_RAW: u32 = if cfg!(target_os = "openbsd") { 14 } else { 12 };

/// Converts a LINKTYPE value to the DLT value `pcap_open_dead` expects (libpcap's internal
/// `linktype_to_dlt` for this platform, which is not exported).
///
/// Also accepts the platform DLT values for raw IP (12, 14) and maps them to `DLT_RAW`, so that
/// the "raw IP" link types all compile the same way.
pub fn linktype_to_dlt(linktype: u32) -> u32 {
    match linktype {
        101 | 12 | 14 => DLT_RAW,
        100 => 11,      // ATM_RFC1483
        102 => 15,      // SLIP_BSDOS
        103 => 16,      // PPP_BSDOS
        106 => 19,      // ATM_CLIP
        other => other, // identical, including the 104..=289 "matching" range
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (n, v) in [
            ("EN10MB", 1),
            ("RAW", 101),
            ("IPV4", 228),
            ("IPV6", 229),
            ("NULL", 0),
            ("LOOP", 108),
            ("LINUX_SLL", 113),
            ("LINUX_SLL2", 276),
        ] {
            assert_eq!(from_name(n), Some(v));
            assert_eq!(name(v), Some(n));
        }
        assert_eq!(from_name("dlt_en10mb"), Some(1));
        assert_eq!(from_name("LINKTYPE_RAW"), Some(101));
        assert_eq!(from_name("NOPE"), None);
    }

    #[test]
    fn dlt_mapping() {
        assert_eq!(linktype_to_dlt(RAW), DLT_RAW);
        assert_eq!(linktype_to_dlt(EN10MB), 1);
        assert_eq!(linktype_to_dlt(LINUX_SLL2), 276);
        assert_eq!(linktype_to_dlt(106), 19);
    }
}
