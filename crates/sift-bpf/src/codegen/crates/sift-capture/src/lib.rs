//! Reading pcap and pcapng capture files, and writing pcap files.
//!
//! In the sift pipeline this crate sits at both ends of the filter engines:
//! [`CaptureReader`] turns a capture file (classic pcap or pcapng, detected
//! from the magic number) into a stream of [`Record`]s, each carrying its
//! time stamp, lengths, link-layer type and bytes, which a compiled filter
//! then accepts or rejects; [`PcapWriter`] writes the accepted records back
//! out as a pcap file identical to what `tcpdump -r IN -w OUT` would produce.
//!
//! The reader follows libpcap 1.10's rules for what is valid (see
//! [`pcap`] and [`pcapng`]) and is robust against hostile input: it never
//! panics, never allocates memory in proportion to a length field before the
//! data is actually there, delivers every record before a problem, and then
//! reports a [`CaptureError`] naming the byte offset of the problem.
//!
//! ```
//! use sift_capture::{CaptureReader, PcapWriter};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let mut file = Vec::new();
//! # file.extend(0xA1B2_C3D4u32.to_le_bytes());
//! # file.extend([2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0, 1, 0, 0, 0]);
//! let mut reader = CaptureReader::new(&file[..])?;
//! let mut writer = PcapWriter::tcpdump_compatible(Vec::new(), &reader)?;
//! while let Some(record) = reader.next_record()? {
//!     if record.linktype == 1 {
//!         writer.write_record(&record)?;
//!     }
//! }
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod error;
mod input;
pub mod linktype;
pub mod pcap;
pub mod pcapng;
pub mod reader;
pub mod record;
pub mod writer;

pub use error::{CaptureError, WriterError};
pub use input::ByteOrder;
pub use pcap::PcapFileHeader;
pub use pcapng::{Interface, SectionHeader};
pub use reader::{CaptureReader, Format};
pub use record::{Record, Timestamp, TsResolution};
pub use writer::{PcapHeader, PcapWriter, Resolution};
