//! One captured packet as a capture hands it out: borrowed bytes plus the pcap record fields.

use sift_capture::Timestamp;

/// Where a packet was going, from the kernel's `sll_pkttype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Addressed to this host (`PACKET_HOST`).
    ToHost,
    /// Link-layer broadcast (`PACKET_BROADCAST`).
    Broadcast,
    /// Link-layer multicast (`PACKET_MULTICAST`).
    Multicast,
    /// Addressed to another host, seen in promiscuous mode (`PACKET_OTHERHOST`).
    OtherHost,
    /// Sent by this host (`PACKET_OUTGOING`).
    Outgoing,
    /// Another or no value.
    Unknown,
}

impl Direction {
    pub(crate) fn from_pkt_type(pkt_type: Option<u8>) -> Direction {
        match pkt_type {
            Some(0) => Direction::ToHost,
            Some(1) => Direction::Broadcast,
            Some(2) => Direction::Multicast,
            Some(3) => Direction::OtherHost,
            Some(4) => Direction::Outgoing,
            _ => Direction::Unknown,
        }
    }
}

/// A captured packet, borrowed from the ring (or from the capture's buffer when a VLAN tag had
/// to be put back). Valid until the next call on the capture.
///
/// Write it to a pcap file with
/// `writer.write_packet(&packet.timestamp(), packet.wire_len(), packet.data())`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) wire_len: u32,
    pub(crate) timestamp: Timestamp,
    pub(crate) direction: Direction,
}

impl<'a> Packet<'a> {
    /// The captured bytes (at most the snapshot length), starting with the link-layer header.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// The captured length (`caplen`).
    pub fn captured_len(&self) -> u32 {
        self.data.len() as u32
    }

    /// The packet's length on the wire (`len`).
    pub fn wire_len(&self) -> u32 {
        self.wire_len
    }

    /// When the kernel received the packet, in nanoseconds.
    pub fn timestamp(&self) -> Timestamp {
        self.timestamp
    }

    /// Incoming (and how addressed) or outgoing.
    pub fn direction(&self) -> Direction {
        self.direction
    }
}
