//! [`PcapWriter`]: writes records as a classic pcap file, byte for byte the
//! way `tcpdump -r IN -w OUT` does.
//!
//! What tcpdump 4.99 / libpcap 1.10 write (checked with `cmp` on real files):
//! a 24-byte header in the machine's native byte order with the microsecond
//! magic `a1b2c3d4` (also for nanosecond and pcapng inputs: time stamps are
//! scaled down, truncating), version 2.4, `thiszone` 0, `sigfigs` 0, the
//! input's snapshot length (0 and values above 2^31-1 replaced by 262144, or
//! the link type's maximum), and the input's link-type field with its FCS bits
//! (a few obsolete values renumbered, see
//! [`tcpdump_savefile_linktype`]). For pcapng
//! input the first interface's link type and snapshot length are used.
//! Each record is `ts_sec`, `ts_usec` (both 32 bits, not normalised), `caplen`,
//! `len`, then the captured bytes.

use std::io::{self, Read, Write};

use crate::error::WriterError;
use crate::linktype::{linktype_from_field, tcpdump_savefile_linktype, LINKTYPE_EXT_MASK};
use crate::pcap::{MAGIC_MICRO, MAGIC_NANO};
use crate::reader::CaptureReader;
use crate::record::{Record, Timestamp, TsResolution};

/// Time stamp resolution of a written pcap file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Resolution {
    /// Microseconds (magic `a1b2c3d4`), what tcpdump writes by default.
    #[default]
    Micro,
    /// Nanoseconds (magic `a1b23c4d`).
    Nano,
}

impl Resolution {
    fn ts_resolution(self) -> TsResolution {
        match self {
            Resolution::Micro => TsResolution::MICRO,
            Resolution::Nano => TsResolution::NANO,
        }
    }

    fn magic(self) -> u32 {
        match self {
            Resolution::Micro => MAGIC_MICRO,
            Resolution::Nano => MAGIC_NANO,
        }
    }
}

/// The header values of a pcap file to be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PcapHeader {
    /// The link-type field (may include FCS bits).
    pub linktype: u32,
    /// The snapshot length.
    pub snaplen: u32,
    /// The time stamp resolution.
    pub resolution: Resolution,
}

impl PcapHeader {
    /// The header `tcpdump -r INPUT -w OUTPUT` writes for `reader`'s input.
    pub fn tcpdump_for<R: Read>(reader: &CaptureReader<R>) -> Result<PcapHeader, WriterError> {
        let (field, snaplen) = if let Some(h) = reader.pcap_header() {
            (h.linktype_field, h.effective_snaplen())
        } else {
            let iface = reader.first_interface().ok_or(WriterError::NoLinkType)?;
            (iface.linktype, iface.effective_snaplen())
        };
        let linktype = linktype_from_field(field);
        let out = tcpdump_savefile_linktype(linktype)
            .ok_or(WriterError::UnsupportedLinkType { linktype })?;
        Ok(PcapHeader {
            linktype: out | (field & LINKTYPE_EXT_MASK),
            snaplen,
            resolution: Resolution::Micro,
        })
    }

    /// The 24 header bytes, in native byte order.
    pub fn to_bytes(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[0..4].copy_from_slice(&self.resolution.magic().to_ne_bytes());
        b[4..6].copy_from_slice(&2u16.to_ne_bytes());
        b[6..8].copy_from_slice(&4u16.to_ne_bytes());
        // thiszone and sigfigs stay 0.
        b[16..20].copy_from_slice(&self.snaplen.to_ne_bytes());
        b[20..24].copy_from_slice(&self.linktype.to_ne_bytes());
        b
    }
}

/// Writes a pcap file in the machine's native byte order.
///
/// Records are written as given: the writer neither truncates them to the
/// snapshot length nor checks their link type.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    header: PcapHeader,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header and returns the writer.
    pub fn new(out: W, linktype: u32, snaplen: u32, resolution: Resolution) -> io::Result<Self> {
        PcapWriter::with_header(
            out,
            PcapHeader {
                linktype,
                snaplen,
                resolution,
            },
        )
    }

    /// Writes the given file header and returns the writer.
    pub fn with_header(mut out: W, header: PcapHeader) -> io::Result<Self> {
        out.write_all(&header.to_bytes())?;
        Ok(PcapWriter { out, header })
    }

    /// A writer that continues a file whose `header` has already been written (`out` opened
    /// for appending): no header is written.
    pub fn resume(out: W, header: PcapHeader) -> Self {
        PcapWriter { out, header }
    }

    /// A writer whose output matches `tcpdump -r INPUT -w OUTPUT` for the
    /// capture `reader` is reading (see [`PcapHeader::tcpdump_for`]).
    pub fn tcpdump_compatible<R: Read>(
        out: W,
        reader: &CaptureReader<R>,
    ) -> Result<Self, WriterError> {
        let header = PcapHeader::tcpdump_for(reader)?;
        Ok(PcapWriter::with_header(out, header)?)
    }

    /// The header written.
    pub fn header(&self) -> &PcapHeader {
        &self.header
    }

    /// Writes one record (its link type and interface are not recorded).
    pub fn write_record(&mut self, record: &Record) -> io::Result<()> {
        self.write_packet(&record.timestamp, record.wire_len, &record.data)
    }

    /// Writes one packet. The time stamp is converted to the file's resolution
    /// as libpcap does (truncating); seconds are stored in 32 bits.
    pub fn write_packet(&mut self, ts: &Timestamp, wire_len: u32, data: &[u8]) -> io::Result<()> {
        let caplen = u32::try_from(data.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "packet longer than 4 GiB"))?;
        let frac = ts.frac_in(self.header.resolution.ts_resolution());
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&(ts.raw_secs() as u32).to_ne_bytes());
        h[4..8].copy_from_slice(&(frac as u32).to_ne_bytes());
        h[8..12].copy_from_slice(&caplen.to_ne_bytes());
        h[12..16].copy_from_slice(&wire_len.to_ne_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(data)
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// Gives the underlying writer back (without flushing).
    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::ByteOrder;
    use crate::pcap::tests::build;
    use crate::pcapng::tests::NgBuilder;

    fn copy_like_tcpdump(input: &[u8]) -> Vec<u8> {
        let mut reader = CaptureReader::new(input).unwrap();
        let mut w = PcapWriter::tcpdump_compatible(Vec::new(), &reader).unwrap();
        while let Some(r) = reader.next_record().unwrap() {
            w.write_record(&r).unwrap();
        }
        w.into_inner()
    }

    #[test]
    fn round_trip_native_micro() {
        let d: &[u8] = &[1, 2, 3];
        let f = build(
            ByteOrder::NATIVE,
            MAGIC_MICRO,
            (2, 4),
            65535,
            1,
            &[(1, 999_999, 3, 3, d), (u32::MAX, 1_500_000, 3, 60, d)],
        );
        assert_eq!(copy_like_tcpdump(&f), f);
    }

    #[test]
    fn swapped_input_becomes_native() {
        let d: &[u8] = &[9; 7];
        let rec = [(100, 5, 7, 7, d)];
        let big = build(ByteOrder::Big, MAGIC_MICRO, (2, 4), 1500, 0x5000_0001, &rec);
        let native = build(
            ByteOrder::NATIVE,
            MAGIC_MICRO,
            (2, 4),
            1500,
            0x5000_0001,
            &rec,
        );
        assert_eq!(copy_like_tcpdump(&big), native);
    }

    #[test]
    fn nano_input_writes_micro() {
        let d: &[u8] = &[9; 7];
        let nano = build(
            ByteOrder::Little,
            MAGIC_NANO,
            (2, 4),
            0,
            12,
            &[(100, 123_456_789, 7, 7, d), (101, 999_999_999, 7, 7, d)],
        );
        let expect = build(
            ByteOrder::NATIVE,
            MAGIC_MICRO,
            (2, 4),
            262_144,
            101,
            &[(100, 123_456, 7, 7, d), (101, 999_999, 7, 7, d)],
        );
        assert_eq!(copy_like_tcpdump(&nano), expect);
    }

    #[test]
    fn nano_writer_round_trip() {
        let d: &[u8] = &[1, 2];
        let f = build(
            ByteOrder::NATIVE,
            MAGIC_NANO,
            (2, 4),
            100,
            1,
            &[(1, 123_456_789, 2, 2, d)],
        );
        let mut reader = CaptureReader::new(&f[..]).unwrap();
        let mut w = PcapWriter::new(Vec::new(), 1, 100, Resolution::Nano).unwrap();
        while let Some(r) = reader.next_record().unwrap() {
            w.write_record(&r).unwrap();
        }
        assert_eq!(w.into_inner(), f);
    }

    #[test]
    fn pcapng_input() {
        let mut b = NgBuilder::new(ByteOrder::Big);
        let ms = b.option(9, &[3]);
        b.shb()
            .idb(1, 0, &[])
            .idb(1, 0, &[ms])
            .epb(0, 1_234_567_890_123_456, 60, &[1; 4])
            .spb(8, &[2; 8])
            .epb(1, 1_000_123, 5, &[3; 5]);
        let expect = build(
            ByteOrder::NATIVE,
            MAGIC_MICRO,
            (2, 4),
            262_144,
            1,
            &[
                (1_234_567_890, 123_456, 4, 60, &[1; 4]),
                (0, 0, 8, 8, &[2; 8]),
                (1000, 123_000, 5, 5, &[3; 5]),
            ],
        );
        assert_eq!(copy_like_tcpdump(&b.out), expect);
    }

    #[test]
    fn unsupported_outputs() {
        let f = build(ByteOrder::Little, MAGIC_MICRO, (2, 4), 100, 300, &[]);
        let r = CaptureReader::new(&f[..]).unwrap();
        assert!(matches!(
            PcapHeader::tcpdump_for(&r),
            Err(WriterError::UnsupportedLinkType { linktype: 300 })
        ));
        let mut b = NgBuilder::new(ByteOrder::Little);
        b.shb();
        let r = CaptureReader::new(&b.out[..]).unwrap();
        assert!(matches!(
            PcapHeader::tcpdump_for(&r),
            Err(WriterError::NoLinkType)
        ));
    }
}
