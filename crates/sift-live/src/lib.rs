//! Live capture on Linux for sift: packets from a network interface, filtered by the kernel.
//!
//! In the sift pipeline this crate is a source of packets, like `sift-capture`'s file reader,
//! except that the filter runs before the packets reach user space: a pcap-filter expression is
//! compiled to sift's IR (`sift::compile_ir`), the IR to classic BPF
//! (`sift_bpf::compile_for(&ir, Dialect::Linux)`), and that program is attached to an `AF_PACKET`
//! socket with `SO_ATTACH_FILTER`. Packets it rejects are never copied out of the kernel;
//! accepted ones are written by the kernel into a memory-mapped `TPACKET_V3` ring of blocks and
//! read from there without a system call per packet. The packets come out as [`Packet`] values
//! carrying what a pcap record needs, so `sift_capture::PcapWriter` writes them as tcpdump does.
//!
//! ```no_run
//! use sift_live::{Capture, Config};
//! use sift_capture::{PcapWriter, Resolution};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = Config::new("eth0").snaplen(262144);
//! let mut capture = Capture::open(&config)?; // nothing is queued until a filter is set
//! let ir = sift::compile_ir("tcp port 80", &sift::Options::new(capture.linktype(), capture.snaplen()))?;
//! let program = sift_bpf::compile_for(&ir, sift_bpf::Dialect::Linux)?;
//! capture.set_filter(&program.to_program())?;
//! let stopper = capture.stopper(); // stopper.stop() from a signal handler or another thread
//! let mut out = PcapWriter::new(std::io::stdout(), capture.linktype(), capture.snaplen(), Resolution::Micro)?;
//! let mut count = 0;
//! while count < 10 {
//!     let Some(packet) = capture.next_packet()? else { break }; // None: stopped
//!     out.write_packet(&packet.timestamp(), packet.wire_len(), packet.data())?;
//!     count += 1;
//! }
//! let stats = capture.stats()?;
//! eprintln!("{} received, {} dropped", stats.received, stats.dropped);
//! # drop(stopper);
//! # Ok(())
//! # }
//! ```
//!
//! Modules, one concept each:
//!
//! * [`config`]: what to capture and the ring's geometry;
//! * [`capture`]: opening (socket, drop-all filter, ring, bind, promiscuous mode), replacing the
//!   filter without letting old packets through, reading packets in order, counters;
//! * [`block`]: parsing a ring block's headers, treating them as untrusted;
//! * [`linktype`]: the interface's hardware type to a `LINKTYPE_*` value, refusing the ones it
//!   cannot deliver faithfully;
//! * [`packet`]: the packet handed out;
//! * [`stop`]: the [`Stopper`] handle (signal-safe);
//! * [`vlan`]: VLAN tags the kernel stripped, put back for filters that test them;
//! * `sys` and `ring`: the only modules with `unsafe` code (system calls, the mapping and its
//!   atomic status words), each block with its safety argument.
//!
//! Privileges: opening a capture needs `CAP_NET_RAW` (and `CAP_NET_ADMIN` for promiscuous mode
//! on some kernels).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod block;
pub mod capture;
pub mod config;
pub mod error;
pub mod linktype;
pub mod packet;
#[allow(unsafe_code)]
mod ring;
pub mod stop;
#[allow(unsafe_code)]
mod sys;
pub mod vlan;

pub use capture::{Capture, Stats};
pub use config::Config;
pub use error::{Error, Step};
pub use packet::{Direction, Packet};
pub use stop::Stopper;
pub use vlan::TagView;
