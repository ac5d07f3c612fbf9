//! Generated test traffic and random pcap-filter expressions for sift's tests and benchmarks.
//!
//! Everything is deterministic from a seed ([`Rng`] is a small SplitMix64 generator; no external
//! dependency, no libpcap, nothing written to disk), so the project's tests do not depend on any
//! external capture corpus:
//!
//! * [`generate_packets`] builds packets for a link type (Ethernet, raw IP, IPv4, IPv6, BSD NULL,
//!   LOOP, Linux SLL and SLL2), covering what the pcap-filter language can test: VLAN/QinQ, MPLS,
//!   PPPoE, 802.3/LLC/SNAP, ARP/RARP, DECnet, AppleTalk, IPX, ISO, STP, IPv4 with options and
//!   fragments, IPv6 extension-header chains, TCP/UDP/SCTP/ICMP/ICMPv6/IGMP/PIM/VRRP/GRE/AH/ESP,
//!   Geneve, plus truncated and mutated packets;
//! * [`random_expression`] produces expressions from the whole filter language, about a fifth of
//!   them invalid in ways libpcap rejects;
//! * [`random_focused_expressions`] tests a few fields with a few values again and again (ports,
//!   port ranges, protocols, hosts, the length), where libpcap's optimizer threads and pulls
//!   tests up;
//! * [`pools`] holds the addresses, ports and numbers both generators draw from, so random filters
//!   actually match random packets;
//! * [`chains::chain`] writes the long `or` chains the compile-time benchmarks use.

#![warn(missing_docs)]

pub mod chains;
pub mod expr;
pub mod focused;
pub mod packet;
pub mod pools;
mod rng;

pub use expr::{random_expression, random_expression_with, random_expressions, ExprConfig};
pub use focused::{
    random_focused_expression, random_focused_expressions, random_index_expressions,
};
pub use packet::{
    ethernet_ports, generate_packet, generate_packets, mutate_packet, supported_linktypes,
    truncate_packet, Packet,
};
pub use rng::Rng;
