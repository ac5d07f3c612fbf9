//! The classic libpcap savefile format ("pcap"): a 24-byte file header, then
//! records of a 16-byte header and the captured bytes.
//!
//! Accepted like libpcap 1.10 accepts them: both byte orders; microsecond
//! (`a1b2c3d4`), nanosecond (`a1b23c4d`) and Alexey Kuznetzov's patched
//! (`a1b2cd34`, 24-byte record headers) magic numbers; versions 2.0 to 2.4 and
//! DG/UX's 543.0 (before 2.3 and in 543.0 the caplen and len fields are
//! swapped, in 2.3 they may be). A record whose captured length exceeds the
//! snapshot length (but not the link type's sanity limit) is cut to the
//! snapshot length, the rest is skipped.

use crate::error::CaptureError;
use crate::input::{ByteOrder, Input};
use crate::linktype::{adjust_snaplen, linktype_from_field, max_snaplen_for_linktype};
use crate::record::{Record, Timestamp, TsResolution};
use std::io::Read;

/// Magic number of microsecond-resolution pcap files.
pub const MAGIC_MICRO: u32 = 0xA1B2_C3D4;
/// Magic number of nanosecond-resolution pcap files.
pub const MAGIC_NANO: u32 = 0xA1B2_3C4D;
/// Magic number of files written by Alexey Kuznetzov's patched libpcap.
pub const MAGIC_KUZNETZOV: u32 = 0xA1B2_CD34;

/// Size of the pcap file header.
pub const FILE_HEADER_LEN: usize = 24;
/// Size of a standard pcap record header.
pub const RECORD_HEADER_LEN: usize = 16;
/// Size of a record header in Kuznetzov's patched format.
const PATCHED_RECORD_HEADER_LEN: usize = 24;

/// The link type `DLT_EN10MB`/`LINKTYPE_ETHERNET`.
const LINKTYPE_ETHERNET: u32 = 1;

/// The fields of a pcap file header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapFileHeader {
    /// Byte order of the file.
    pub byte_order: ByteOrder,
    /// The magic number, in the file's byte order.
    pub magic: u32,
    /// Time stamp resolution (micro- or nanoseconds).
    pub resolution: TsResolution,
    /// Major version (2, or 543 for DG/UX).
    pub version_major: u16,
    /// Minor version.
    pub version_minor: u16,
    /// Time zone correction (always 0 in practice).
    pub thiszone: i32,
    /// Time stamp accuracy (always 0 in practice).
    pub sigfigs: u32,
    /// Snapshot length as stored.
    pub snaplen: u32,
    /// The link-type field as stored, FCS bits included.
    pub linktype_field: u32,
}

impl PcapFileHeader {
    /// The link type, FCS bits masked off (`field & 0x03FFFFFF`, as libpcap).
    pub fn linktype(&self) -> u32 {
        linktype_from_field(self.linktype_field)
    }

    /// True for Kuznetzov's patched format (24-byte record headers).
    pub fn is_patched(&self) -> bool {
        self.magic == MAGIC_KUZNETZOV
    }

    /// The snapshot length libpcap enforces for this file: bogus values
    /// replaced by the link type's maximum, plus 14 for patched Ethernet files.
    pub fn effective_snaplen(&self) -> u32 {
        let snap = adjust_snaplen(self.linktype(), self.snaplen);
        if self.is_patched() && self.linktype() == LINKTYPE_ETHERNET {
            snap.saturating_add(14).min(i32::MAX as u32)
        } else {
            snap
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LengthOrder {
    Normal,
    Swapped,
    MaybeSwapped,
}

/// Reads records of a pcap file after its header.
#[derive(Debug)]
pub(crate) struct PcapReader {
    header: PcapFileHeader,
    snapshot: u32,
    max_caplen: u32,
    lengths: LengthOrder,
    record_header_len: usize,
}

impl PcapReader {
    /// Parses the file header; `magic` holds the first four bytes, already read.
    pub(crate) fn open<R: Read>(
        magic: [u8; 4],
        input: &mut Input<R>,
    ) -> Result<Option<PcapReader>, CaptureError> {
        let is_magic = |m: u32| m == MAGIC_MICRO || m == MAGIC_NANO || m == MAGIC_KUZNETZOV;
        let byte_order = if is_magic(u32::from_le_bytes(magic)) {
            ByteOrder::Little
        } else if is_magic(u32::from_be_bytes(magic)) {
            ByteOrder::Big
        } else {
            return Ok(None);
        };
        let start = input.offset() - 4;
        let mut rest = [0u8; FILE_HEADER_LEN - 4];
        let got = input.fill(&mut rest)?;
        if got < rest.len() {
            return Err(CaptureError::TruncatedHeader {
                offset: start,
                expected: FILE_HEADER_LEN as u64,
                available: 4 + got as u64,
            });
        }
        let o = byte_order;
        let magic = o.u32(&magic);
        let header = PcapFileHeader {
            byte_order,
            magic,
            resolution: if magic == MAGIC_NANO {
                TsResolution::NANO
            } else {
                TsResolution::MICRO
            },
            version_major: o.u16(&rest[0..]),
            version_minor: o.u16(&rest[2..]),
            thiszone: o.u32(&rest[4..]) as i32,
            sigfigs: o.u32(&rest[8..]),
            snaplen: o.u32(&rest[12..]),
            linktype_field: o.u32(&rest[16..]),
        };
        let lengths = match (header.version_major, header.version_minor) {
            (2, 0..=2) | (543, 0) => LengthOrder::Swapped,
            (2, 3) => LengthOrder::MaybeSwapped,
            (2, 4) => LengthOrder::Normal,
            (major, minor) => {
                return Err(CaptureError::UnsupportedVersion {
                    offset: start + 4,
                    major,
                    minor,
                })
            }
        };
        Ok(Some(PcapReader {
            snapshot: header.effective_snaplen(),
            max_caplen: max_snaplen_for_linktype(header.linktype()),
            record_header_len: if header.is_patched() {
                PATCHED_RECORD_HEADER_LEN
            } else {
                RECORD_HEADER_LEN
            },
            lengths,
            header,
        }))
    }

    pub(crate) fn header(&self) -> &PcapFileHeader {
        &self.header
    }

    /// Reads the next record; `Ok(None)` at a clean end of file.
    pub(crate) fn next_record<R: Read>(
        &mut self,
        input: &mut Input<R>,
    ) -> Result<Option<Record>, CaptureError> {
        let offset = input.offset();
        let mut hdr = [0u8; PATCHED_RECORD_HEADER_LEN];
        let hdr = &mut hdr[..self.record_header_len];
        let got = input.fill(hdr)?;
        if got == 0 {
            return Ok(None);
        }
        if got < hdr.len() {
            return Err(CaptureError::TruncatedRecordHeader {
                offset,
                expected: hdr.len() as u64,
                available: got as u64,
            });
        }
        let o = self.header.byte_order;
        let ts_sec = o.u32(&hdr[0..]);
        let ts_frac = o.u32(&hdr[4..]);
        let mut caplen = o.u32(&hdr[8..]);
        let mut wire_len = o.u32(&hdr[12..]);
        let swap = match self.lengths {
            LengthOrder::Normal => false,
            LengthOrder::Swapped => true,
            LengthOrder::MaybeSwapped => caplen > wire_len,
        };
        if swap {
            std::mem::swap(&mut caplen, &mut wire_len);
        }
        if caplen > self.max_caplen {
            return Err(CaptureError::RecordTooLarge {
                offset,
                caplen,
                max: self.max_caplen,
            });
        }
        let keep = caplen.min(self.snapshot);
        let mut data = Vec::new();
        let got = input.read_into(u64::from(keep), &mut data)?;
        let skipped = if got == u64::from(keep) {
            input.skip(u64::from(caplen - keep))?
        } else {
            0
        };
        if got + skipped < u64::from(caplen) {
            return Err(CaptureError::TruncatedRecord {
                offset,
                expected: u64::from(caplen),
                available: got + skipped,
            });
        }
        Ok(Some(Record {
            timestamp: Timestamp::from_raw(
                i64::from(ts_sec),
                u64::from(ts_frac),
                self.header.resolution,
            ),
            wire_len,
            linktype: self.header.linktype(),
            interface_id: 0,
            data,
        }))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a pcap file: header fields, then records of
    /// `(ts_sec, ts_frac, caplen, wire_len, data)`.
    pub(crate) fn build(
        order: ByteOrder,
        magic: u32,
        version: (u16, u16),
        snaplen: u32,
        linktype: u32,
        records: &[(u32, u32, u32, u32, &[u8])],
    ) -> Vec<u8> {
        let u16b = |v: u16| match order {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        };
        let u32b = |v: u32| match order {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        };
        let mut out = Vec::new();
        out.extend(u32b(magic));
        out.extend(u16b(version.0));
        out.extend(u16b(version.1));
        out.extend(u32b(0));
        out.extend(u32b(0));
        out.extend(u32b(snaplen));
        out.extend(u32b(linktype));
        for &(s, f, c, l, d) in records {
            out.extend(u32b(s));
            out.extend(u32b(f));
            out.extend(u32b(c));
            out.extend(u32b(l));
            out.extend_from_slice(d);
        }
        out
    }

    fn read_all(bytes: &[u8]) -> (PcapFileHeader, Vec<Record>, Option<CaptureError>) {
        let mut input = Input::new(bytes);
        let mut magic = [0u8; 4];
        assert_eq!(input.fill(&mut magic).unwrap(), 4);
        let mut r = PcapReader::open(magic, &mut input).unwrap().unwrap();
        let mut recs = Vec::new();
        loop {
            match r.next_record(&mut input) {
                Ok(Some(rec)) => recs.push(rec),
                Ok(None) => return (r.header().clone(), recs, None),
                Err(e) => return (r.header().clone(), recs, Some(e)),
            }
        }
    }

    #[test]
    fn little_and_big_endian() {
        let d: &[u8] = &[1, 2, 3, 4, 5];
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let f = build(order, MAGIC_MICRO, (2, 4), 65535, 1, &[(10, 20, 5, 9, d)]);
            let (h, recs, err) = read_all(&f);
            assert!(err.is_none());
            assert_eq!(h.byte_order, order);
            assert_eq!(h.snaplen, 65535);
            assert_eq!(h.linktype(), 1);
            assert_eq!(recs.len(), 1);
            assert_eq!(recs[0].data, d);
            assert_eq!(recs[0].wire_len, 9);
            assert_eq!(recs[0].timestamp.secs(), 10);
            assert_eq!(recs[0].timestamp.nanos(), 20_000);
        }
    }

    #[test]
    fn nanosecond_file() {
        let f = build(
            ByteOrder::Big,
            MAGIC_NANO,
            (2, 4),
            100,
            101,
            &[(7, 123_456_789, 1, 1, &[0x45])],
        );
        let (h, recs, err) = read_all(&f);
        assert!(err.is_none());
        assert_eq!(h.resolution, TsResolution::NANO);
        assert_eq!(recs[0].timestamp.nanos(), 123_456_789);
        assert_eq!(recs[0].timestamp.to_micros(), (7, 123_456));
        assert_eq!(recs[0].linktype, 101);
    }

    #[test]
    fn fcs_bits_are_masked() {
        let f = build(
            ByteOrder::Little,
            MAGIC_MICRO,
            (2, 4),
            100,
            0x5000_0001,
            &[],
        );
        let (h, _, _) = read_all(&f);
        assert_eq!(h.linktype(), 1);
        assert_eq!(h.linktype_field, 0x5000_0001);
    }

    #[test]
    fn old_versions_swap_lengths() {
        let d = [0u8; 10];
        let f = build(
            ByteOrder::Little,
            MAGIC_MICRO,
            (2, 2),
            100,
            1,
            &[(0, 0, 20, 10, &d)],
        );
        let (_, recs, err) = read_all(&f);
        assert!(err.is_none());
        assert_eq!((recs[0].caplen(), recs[0].wire_len), (10, 20));
        // 2.3: swapped only when caplen > len.
        let f = build(
            ByteOrder::Little,
            MAGIC_MICRO,
            (2, 3),
            100,
            1,
            &[(0, 0, 20, 10, &d), (0, 0, 10, 20, &d)],
        );
        let (_, recs, err) = read_all(&f);
        assert!(err.is_none());
        assert_eq!((recs[0].caplen(), recs[0].wire_len), (10, 20));
        assert_eq!((recs[1].caplen(), recs[1].wire_len), (10, 20));
    }

    #[test]
    fn unsupported_versions() {
        for v in [(1, 0), (2, 5), (3, 0), (543, 1)] {
            let f = build(ByteOrder::Little, MAGIC_MICRO, v, 100, 1, &[]);
            let mut input = Input::new(&f[..]);
            let mut magic = [0u8; 4];
            input.fill(&mut magic).unwrap();
            match PcapReader::open(magic, &mut input) {
                Err(CaptureError::UnsupportedVersion { offset: 4, .. }) => {}
                other => panic!("{v:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn caplen_over_snaplen_is_cut() {
        let d: Vec<u8> = (0..60).collect();
        let f = build(
            ByteOrder::Little,
            MAGIC_MICRO,
            (2, 4),
            40,
            1,
            &[(1, 1, 60, 60, &d), (2, 2, 3, 3, &d[..3])],
        );
        let (_, recs, err) = read_all(&f);
        assert!(err.is_none());
        assert_eq!(recs[0].data, &d[..40]);
        assert_eq!(recs[0].wire_len, 60);
        assert_eq!(recs[1].data, &d[..3]);
    }

    #[test]
    fn caplen_over_maximum_is_an_error() {
        let d = [0u8; 4];
        let f = build(
            ByteOrder::Little,
            MAGIC_MICRO,
            (2, 4),
            300_000,
            1,
            &[(1, 1, 4, 4, &d), (1, 1, 270_000, 270_000, &d)],
        );
        let (_, recs, err) = read_all(&f);
        assert_eq!(recs.len(), 1);
        match err {
            Some(CaptureError::RecordTooLarge {
                offset: 44,
                caplen: 270_000,
                max: 262_144,
            }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn truncated_record() {
        let d = [0u8; 60];
        let mut f = build(
            ByteOrder::Little,
            MAGIC_MICRO,
            (2, 4),
            65535,
            1,
            &[(1, 1, 60, 60, &d), (1, 1, 60, 60, &d)],
        );
        f.truncate(f.len() - 30);
        let (_, recs, err) = read_all(&f);
        assert_eq!(recs.len(), 1);
        match err {
            Some(CaptureError::TruncatedRecord {
                offset: 100,
                expected: 60,
                available: 30,
            }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn patched_format() {
        // Kuznetzov: 8 extra bytes per record header, snaplen + 14 for Ethernet.
        let mut f = build(ByteOrder::Little, MAGIC_KUZNETZOV, (2, 4), 50, 1, &[]);
        f.extend(5u32.to_le_bytes());
        f.extend(6u32.to_le_bytes());
        f.extend(64u32.to_le_bytes());
        f.extend(64u32.to_le_bytes());
        f.extend([0u8; 8]);
        f.extend([0xAAu8; 64]);
        let (h, recs, err) = read_all(&f);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(h.effective_snaplen(), 64);
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].data, [0xAA; 64]);
    }
}
