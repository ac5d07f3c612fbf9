//! Link-layer header type rules that libpcap applies when reading and writing
//! savefiles: the FCS bits of the pcap link-type field, the per-link-type
//! packet size limits, snapshot-length fix-ups and the `LINKTYPE_*` values it
//! can write back out.

/// Bits of a pcap header's link-type field that hold the link type itself
/// (libpcap's `LT_LINKTYPE`); the upper six bits describe the FCS.
pub const LINKTYPE_MASK: u32 = 0x03FF_FFFF;

/// Bits of a pcap header's link-type field with extra information
/// (libpcap's `LT_LINKTYPE_EXT`): bit 26 = "FCS length present", bits 28..31 =
/// FCS length in 16-bit units.
pub const LINKTYPE_EXT_MASK: u32 = 0xFC00_0000;

/// `LINKTYPE_ETHERNET`.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// `LINKTYPE_RAW`.
pub const LINKTYPE_RAW: u32 = 101;

/// The largest snapshot length libpcap accepts for most link types.
pub const MAXIMUM_SNAPLEN: u32 = 262_144;

const LINKTYPE_DBUS: u32 = 231;
const LINKTYPE_USBPCAP: u32 = 249;
const LINKTYPE_EBHSCR: u32 = 279;

/// The link type from a pcap header's link-type field, FCS bits removed.
pub fn linktype_from_field(field: u32) -> u32 {
    field & LINKTYPE_MASK
}

/// The largest captured length libpcap considers sane for a link type
/// (`max_snaplen_for_dlt`): 128 MiB for D-Bus, 8 MiB for EBHSCR, 1 MiB for
/// USBPcap, 262144 for everything else. Longer records are rejected as corrupt.
pub fn max_snaplen_for_linktype(linktype: u32) -> u32 {
    match linktype {
        LINKTYPE_DBUS => 128 * 1024 * 1024,
        LINKTYPE_EBHSCR => 8 * 1024 * 1024,
        LINKTYPE_USBPCAP => 1024 * 1024,
        _ => MAXIMUM_SNAPLEN,
    }
}

/// The snapshot length libpcap works with for a file header or interface that
/// declares `snaplen` (`pcap_adjust_snapshot`): 0 and values above `i32::MAX`
/// are bogus and replaced by [`max_snaplen_for_linktype`].
pub fn adjust_snaplen(linktype: u32, snaplen: u32) -> u32 {
    if snaplen == 0 || snaplen > i32::MAX as u32 {
        max_snaplen_for_linktype(linktype)
    } else {
        snaplen
    }
}

/// The link-type header value tcpdump (libpcap 1.10, Linux) writes to a pcap
/// file for an input whose link type is `linktype` (FCS bits removed), or
/// `None` if it refuses to write such a file ("unknown data link type").
///
/// libpcap translates the file's `LINKTYPE_` value into a host `DLT_` value on
/// reading and back on writing. Values in the "matching" range 104..=289 and the
/// classic 0, 1, 6..=10, 50, 51, 99..=103 survive unchanged; five old values
/// that are `DLT_` numbers on Linux (11, 12, 15, 16, 19) come back as their
/// proper `LINKTYPE_` values (100, 101, 102, 103, 106); everything else is
/// rejected. (Verified against tcpdump 4.99.3 / libpcap 1.10.3 for 0..=419.)
pub fn tcpdump_savefile_linktype(linktype: u32) -> Option<u32> {
    match linktype {
        11 => Some(100),
        12 => Some(101),
        15 => Some(102),
        16 => Some(103),
        19 => Some(106),
        0 | 1 | 6..=10 | 50 | 51 | 99..=289 => Some(linktype),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks() {
        assert_eq!(linktype_from_field(0x5000_0001), 1);
        assert_eq!(
            linktype_from_field(0x0400_0001),
            0x0400_0001 & LINKTYPE_MASK
        );
        assert_eq!(LINKTYPE_MASK | LINKTYPE_EXT_MASK, u32::MAX);
        assert_eq!(LINKTYPE_MASK & LINKTYPE_EXT_MASK, 0);
    }

    #[test]
    fn snaplen_limits() {
        assert_eq!(max_snaplen_for_linktype(1), 262_144);
        assert_eq!(max_snaplen_for_linktype(231), 128 << 20);
        assert_eq!(adjust_snaplen(1, 0), 262_144);
        assert_eq!(adjust_snaplen(1, 0x8000_0000), 262_144);
        assert_eq!(adjust_snaplen(1, 2_098_998), 2_098_998);
        assert_eq!(adjust_snaplen(1, 65535), 65535);
    }

    #[test]
    fn savefile_linktypes() {
        assert_eq!(tcpdump_savefile_linktype(1), Some(1));
        assert_eq!(tcpdump_savefile_linktype(12), Some(101));
        assert_eq!(tcpdump_savefile_linktype(113), Some(113));
        assert_eq!(tcpdump_savefile_linktype(2), None);
        assert_eq!(tcpdump_savefile_linktype(290), None);
    }
}
