//! The link-layer type of a capture: which `LINKTYPE_*` value (the number written into pcap files
//! and given to the filter compiler) describes the frames a raw packet socket delivers on an
//! interface of a given hardware type (`ARPHRD_*`), as libpcap 1.10's `map_arphrd_to_dlt` decides
//! for raw (not cooked) sockets.
//!
//! Only hardware types whose frames a raw socket delivers with a known header are mapped. The rest
//! (PPP, ATM, IP-over-GRE, ...) are the ones libpcap captures in "cooked" mode with a synthesised
//! `LINUX_SLL` header, which this crate does not do; opening such an interface is refused with
//! the hardware type named, rather than producing frames a filter would misread.

/// `LINKTYPE_ETHERNET`.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// `LINKTYPE_RAW`: the frame is an IPv4 or IPv6 packet.
pub const LINKTYPE_RAW: u32 = 101;

const ARPHRD_ETHER: u16 = 1;
const ARPHRD_DLCI: u16 = 15;
const ARPHRD_METRICOM: u16 = 23;
const ARPHRD_SLIP: u16 = 256;
const ARPHRD_CSLIP: u16 = 257;
const ARPHRD_SLIP6: u16 = 258;
const ARPHRD_CSLIP6: u16 = 259;
const ARPHRD_ADAPT: u16 = 264;
const ARPHRD_RAWHDLC: u16 = 518;
const ARPHRD_CISCO: u16 = 513;
const ARPHRD_TUNNEL: u16 = 768;
const ARPHRD_LOOPBACK: u16 = 772;
const ARPHRD_SIT: u16 = 776;
const ARPHRD_IEEE80211: u16 = 801;
const ARPHRD_IEEE80211_PRISM: u16 = 802;
const ARPHRD_IEEE80211_RADIOTAP: u16 = 803;
const ARPHRD_IEEE802154: u16 = 804;
const ARPHRD_NETLINK: u16 = 824;
const ARPHRD_NONE: u16 = 0xfffe;

/// The `LINKTYPE_*` value of frames captured by a raw packet socket on an interface whose
/// hardware type is `arphrd`, or `None` if this crate cannot capture it (see the module docs).
pub fn linktype_for_hardware_type(arphrd: u16) -> Option<u32> {
    Some(match arphrd {
        // Loopback frames carry a (zeroed) Ethernet header on Linux.
        ARPHRD_ETHER | ARPHRD_LOOPBACK | ARPHRD_METRICOM => LINKTYPE_ETHERNET,
        // Devices without a link-layer header (tun, IP-in-IP, SIT, SLIP, ...) deliver IP packets.
        ARPHRD_NONE | ARPHRD_TUNNEL | ARPHRD_SIT | ARPHRD_SLIP | ARPHRD_CSLIP | ARPHRD_SLIP6
        | ARPHRD_CSLIP6 | ARPHRD_ADAPT | ARPHRD_RAWHDLC | ARPHRD_DLCI => LINKTYPE_RAW,
        ARPHRD_CISCO => 104,              // LINKTYPE_C_HDLC
        ARPHRD_IEEE80211 => 105,          // LINKTYPE_IEEE802_11
        ARPHRD_IEEE80211_PRISM => 119,    // LINKTYPE_PRISM_HEADER
        ARPHRD_IEEE80211_RADIOTAP => 127, // LINKTYPE_IEEE802_11_RADIOTAP
        ARPHRD_IEEE802154 => 230,         // LINKTYPE_IEEE802_15_4_NOFCS
        ARPHRD_NETLINK => 253,            // LINKTYPE_NETLINK
        _ => return None,
    })
}

/// A short name for common hardware types, for error messages.
pub fn hardware_type_name(arphrd: u16) -> Option<&'static str> {
    Some(match arphrd {
        ARPHRD_ETHER => "Ethernet",
        ARPHRD_LOOPBACK => "loopback",
        ARPHRD_NONE => "none (tun)",
        ARPHRD_TUNNEL => "IP-in-IP tunnel",
        ARPHRD_SIT => "SIT tunnel",
        512 => "PPP",
        19 => "ATM",
        778 => "GRE tunnel",
        823 => "IP6GRE tunnel",
        769 => "IPv6-in-IPv6 tunnel",
        280 => "CAN",
        ARPHRD_IEEE80211_RADIOTAP => "802.11 radiotap",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libpcap_raw_socket_mapping() {
        assert_eq!(
            linktype_for_hardware_type(ARPHRD_ETHER),
            Some(LINKTYPE_ETHERNET)
        );
        assert_eq!(
            linktype_for_hardware_type(ARPHRD_LOOPBACK),
            Some(LINKTYPE_ETHERNET)
        );
        assert_eq!(linktype_for_hardware_type(ARPHRD_NONE), Some(LINKTYPE_RAW));
        assert_eq!(
            linktype_for_hardware_type(ARPHRD_TUNNEL),
            Some(LINKTYPE_RAW)
        );
        assert_eq!(linktype_for_hardware_type(ARPHRD_SIT), Some(LINKTYPE_RAW));
        assert_eq!(
            linktype_for_hardware_type(ARPHRD_IEEE80211_RADIOTAP),
            Some(127)
        );
    }

    #[test]
    fn cooked_mode_types_are_refused() {
        // PPP, ATM, GRE, IP6GRE, IPv6 tunnels, CAN and unknown values: libpcap cooks or
        // special-cases them.
        for arphrd in [512, 19, 778, 823, 769, 280, 0, 0xffff] {
            assert_eq!(linktype_for_hardware_type(arphrd), None, "{arphrd}");
        }
    }
}
