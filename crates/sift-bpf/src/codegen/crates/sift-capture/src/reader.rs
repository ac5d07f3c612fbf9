//! [`CaptureReader`]: opens a capture of either format, recognised by its
//! magic number, and hands out [`Record`]s one at a time.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use crate::error::CaptureError;
use crate::input::{ByteOrder, Input};
use crate::linktype::linktype_from_field;
use crate::pcap::{PcapFileHeader, PcapReader};
use crate::pcapng::{Interface, PcapNgReader, SectionHeader};
use crate::record::Record;

/// The container format of a capture file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Classic libpcap savefile.
    Pcap,
    /// pcapng.
    PcapNg,
}

#[derive(Debug)]
enum Inner {
    Pcap(PcapReader),
    PcapNg(PcapNgReader),
}

/// Reads a pcap or pcapng capture from any [`Read`].
///
/// Records come out in file order. When the file is truncated or corrupt,
/// every record before the problem is returned first, then the error (which
/// names the byte offset); after an error the reader is finished and returns
/// `Ok(None)`. Memory use is bounded by the largest record the format allows,
/// however large the length fields claim to be.
///
/// The reader does its own buffering only for pcapng blocks; wrap unbuffered
/// sources (like a [`File`]) in a [`BufReader`], as [`CaptureReader::open`] does.
#[derive(Debug)]
pub struct CaptureReader<R> {
    input: Input<R>,
    inner: Inner,
    done: bool,
}

impl CaptureReader<BufReader<File>> {
    /// Opens the capture file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CaptureError> {
        let file = File::open(path).map_err(|source| CaptureError::Io { offset: 0, source })?;
        CaptureReader::new(BufReader::with_capacity(64 * 1024, file))
    }
}

impl<R: Read> CaptureReader<R> {
    /// Reads the file header (pcap) or first section header (pcapng; the
    /// reader also reads ahead to the first Interface Description Block).
    pub fn new(reader: R) -> Result<Self, CaptureError> {
        let mut input = Input::new(reader);
        let mut magic = [0u8; 4];
        let got = input.fill(&mut magic)?;
        if got < 4 {
            return Err(CaptureError::TruncatedHeader {
                offset: 0,
                expected: 4,
                available: got as u64,
            });
        }
        let inner = if let Some(r) = PcapReader::open(magic, &mut input)? {
            Inner::Pcap(r)
        } else if let Some(r) = PcapNgReader::open(magic, &mut input)? {
            Inner::PcapNg(r)
        } else {
            return Err(CaptureError::BadMagic { offset: 0, magic });
        };
        Ok(CaptureReader {
            input,
            inner,
            done: false,
        })
    }

    /// The next record, `Ok(None)` at the end of the capture (or after an error).
    pub fn next_record(&mut self) -> Result<Option<Record>, CaptureError> {
        if self.done {
            return Ok(None);
        }
        let result = match &mut self.inner {
            Inner::Pcap(r) => r.next_record(&mut self.input),
            Inner::PcapNg(r) => r.next_record(&mut self.input),
        };
        if !matches!(result, Ok(Some(_))) {
            self.done = true;
        }
        result
    }

    /// The container format.
    pub fn format(&self) -> Format {
        match self.inner {
            Inner::Pcap(_) => Format::Pcap,
            Inner::PcapNg(_) => Format::PcapNg,
        }
    }

    /// The file's link type (`LINKTYPE_*`, FCS bits removed): the pcap header's,
    /// or the first pcapng interface's. `None` only for a pcapng file without
    /// any Interface Description Block.
    pub fn linktype(&self) -> Option<u32> {
        match &self.inner {
            Inner::Pcap(r) => Some(linktype_from_field(r.header().linktype_field)),
            Inner::PcapNg(r) => r.first_interface().map(|i| i.linktype),
        }
    }

    /// The file's snapshot length as stored: the pcap header's, or the first
    /// pcapng interface's. `None` only for a pcapng file without interfaces.
    pub fn snaplen(&self) -> Option<u32> {
        match &self.inner {
            Inner::Pcap(r) => Some(r.header().snaplen),
            Inner::PcapNg(r) => r.first_interface().map(|i| i.snaplen),
        }
    }

    /// Byte order of the file (pcapng: of the current section).
    pub fn byte_order(&self) -> ByteOrder {
        match &self.inner {
            Inner::Pcap(r) => r.header().byte_order,
            Inner::PcapNg(r) => r.section().byte_order,
        }
    }

    /// The pcap file header, for pcap files.
    pub fn pcap_header(&self) -> Option<&PcapFileHeader> {
        match &self.inner {
            Inner::Pcap(r) => Some(r.header()),
            Inner::PcapNg(_) => None,
        }
    }

    /// The current section header, for pcapng files.
    pub fn section_header(&self) -> Option<&SectionHeader> {
        match &self.inner {
            Inner::Pcap(_) => None,
            Inner::PcapNg(r) => Some(r.section()),
        }
    }

    /// The interfaces of the current pcapng section read so far (empty for pcap).
    pub fn interfaces(&self) -> &[Interface] {
        match &self.inner {
            Inner::Pcap(_) => &[],
            Inner::PcapNg(r) => r.interfaces(),
        }
    }

    /// The first interface of the file, for pcapng files (what libpcap and
    /// tcpdump use as "the" link type and snapshot length).
    pub fn first_interface(&self) -> Option<&Interface> {
        match &self.inner {
            Inner::Pcap(_) => None,
            Inner::PcapNg(r) => r.first_interface(),
        }
    }

    /// Number of bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.input.offset()
    }

    /// The underlying reader.
    pub fn get_ref(&self) -> &R {
        self.input.get_ref()
    }

    /// Gives the underlying reader back.
    pub fn into_inner(self) -> R {
        self.input.into_inner()
    }
}

impl<R: Read> Iterator for CaptureReader<R> {
    type Item = Result<Record, CaptureError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

impl<R: Read> std::iter::FusedIterator for CaptureReader<R> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcap::tests::build;
    use crate::pcap::{MAGIC_MICRO, MAGIC_NANO};
    use crate::pcapng::tests::NgBuilder;

    /// Reads everything; returns the records and the error that ended them.
    fn read_all(bytes: &[u8]) -> (Vec<Record>, Option<CaptureError>) {
        let mut r = match CaptureReader::new(bytes) {
            Ok(r) => r,
            Err(e) => return (Vec::new(), Some(e)),
        };
        let mut recs = Vec::new();
        loop {
            match r.next_record() {
                Ok(Some(rec)) => recs.push(rec),
                Ok(None) => return (recs, None),
                Err(e) => {
                    assert!(r.next_record().unwrap().is_none(), "reader must stop");
                    return (recs, Some(e));
                }
            }
        }
    }

    fn small_pcap(order: ByteOrder, magic: u32) -> Vec<u8> {
        build(
            order,
            magic,
            (2, 4),
            65535,
            1,
            &[
                (1, 2, 5, 5, &[1, 2, 3, 4, 5]),
                (3, 4, 0, 9, &[]),
                (5, 6, 3, 70, &[7, 8, 9]),
            ],
        )
    }

    fn small_pcapng(order: ByteOrder) -> Vec<u8> {
        let mut b = NgBuilder::new(order);
        let ns = b.option(9, &[9]);
        b.shb()
            .block(0x0000_0BAD, vec![1, 2, 3, 4, 5])
            .idb(1, 0, &[ns])
            .idb(101, 64, &[])
            .epb(0, 1_000_000_001, 5, &[1, 2, 3, 4, 5])
            .spb(3, &[7, 8, 9])
            .epb(1, 77, 20, &[0x45; 6])
            .pb(1, 78, 5, &[6; 5])
            .shb()
            .idb(113, 0, &[])
            .epb(0, 3, 2, &[4, 4]);
        b.out
    }

    #[test]
    fn detects_formats() {
        let f = small_pcap(ByteOrder::Big, MAGIC_NANO);
        let r = CaptureReader::new(&f[..]).unwrap();
        assert_eq!(r.format(), Format::Pcap);
        assert_eq!(r.byte_order(), ByteOrder::Big);
        assert_eq!((r.linktype(), r.snaplen()), (Some(1), Some(65535)));
        let f = small_pcapng(ByteOrder::Little);
        let r = CaptureReader::new(&f[..]).unwrap();
        assert_eq!(r.format(), Format::PcapNg);
        assert_eq!((r.linktype(), r.snaplen()), (Some(1), Some(0)));
        assert_eq!(r.interfaces().len(), 1);
    }

    #[test]
    fn iterator() {
        let f = small_pcapng(ByteOrder::Big);
        let recs: Vec<Record> = CaptureReader::new(&f[..])
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let lts: Vec<u32> = recs.iter().map(|r| r.linktype).collect();
        assert_eq!(lts, [1, 1, 101, 101, 113]);
        assert_eq!(recs[0].timestamp.secs(), 1);
        assert_eq!(recs[0].timestamp.nanos(), 1);
    }

    /// Offsets at which a capture of `len` bytes may end cleanly: the end of
    /// the file header and the end of every record (pcap) or block (pcapng).
    fn boundaries(full: &[u8], order: ByteOrder) -> Vec<u64> {
        let mut out = Vec::new();
        if full[0] == 0x0A {
            let mut at = 0usize;
            while at < full.len() {
                at += order.u32(&full[at + 4..]) as usize;
                out.push(at as u64);
            }
        } else {
            let mut r = CaptureReader::new(full).unwrap();
            out.push(r.offset());
            while r.next_record().unwrap().is_some() {
                out.push(r.offset());
            }
        }
        out
    }

    /// Cuts a capture at every byte offset: the reader must return exactly the
    /// records that end before the cut, then an error naming an offset inside
    /// the file, or a clean end when the cut falls on a record boundary.
    fn check_every_cut(full: &[u8], order: ByteOrder) {
        let (all, err) = read_all(full);
        assert!(err.is_none(), "{err:?}");
        let mut ends = Vec::new();
        let mut r = CaptureReader::new(full).unwrap();
        while r.next_record().unwrap().is_some() {
            ends.push(r.offset());
        }
        let clean_points = boundaries(full, order);
        for cut in 0..full.len() {
            let (recs, err) = read_all(&full[..cut]);
            let expect = ends.iter().filter(|&&e| e as usize <= cut).count();
            assert_eq!(recs.len(), expect, "cut at {cut}");
            assert_eq!(recs[..], all[..expect], "cut at {cut}");
            match err {
                None => assert!(
                    clean_points.contains(&(cut as u64)),
                    "cut at {cut}: no error"
                ),
                Some(e) => {
                    assert!(!clean_points.contains(&(cut as u64)), "cut at {cut}: {e}");
                    assert!(e.offset() <= cut as u64, "cut at {cut}: {e}");
                    assert!(e.is_truncation(), "cut at {cut}: {e}");
                }
            }
        }
    }

    #[test]
    fn truncated_pcap_at_every_offset() {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            for magic in [MAGIC_MICRO, MAGIC_NANO] {
                check_every_cut(&small_pcap(order, magic), order);
            }
        }
    }

    #[test]
    fn truncated_pcapng_at_every_offset() {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            check_every_cut(&small_pcapng(order), order);
        }
    }

    #[test]
    fn garbage() {
        assert!(matches!(
            CaptureReader::new(&b""[..]),
            Err(CaptureError::TruncatedHeader { offset: 0, .. })
        ));
        assert!(matches!(
            CaptureReader::new(&b"GIF89a garbage"[..]),
            Err(CaptureError::BadMagic { offset: 0, .. })
        ));
        // Deterministic pseudo-random garbage after valid magic numbers.
        let mut seed = 0x1234_5678_u32;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        for prefix in [
            &[0xD4u8, 0xC3, 0xB2, 0xA1][..],
            &[0xA1, 0xB2, 0x3C, 0x4D],
            &[
                0x0A, 0x0D, 0x0D, 0x0A, 0x1C, 0, 0, 0, 0x4D, 0x3C, 0x2B, 0x1A,
            ],
        ] {
            for _ in 0..300 {
                let mut f = prefix.to_vec();
                let n = next() % 600;
                f.extend((0..n).map(|_| next() as u8));
                let _ = read_all(&f);
            }
        }
    }

    #[test]
    fn flipped_bytes_never_panic() {
        let files = [
            small_pcap(ByteOrder::Little, MAGIC_MICRO),
            small_pcapng(ByteOrder::Little),
            small_pcapng(ByteOrder::Big),
        ];
        for f in files {
            for i in 0..f.len() {
                for v in [0x00, 0xFF, 0x80, 0x01] {
                    let mut g = f.clone();
                    g[i] = v;
                    let (_, err) = read_all(&g);
                    if let Some(e) = err {
                        assert!(e.offset() <= g.len() as u64);
                        let _ = e.to_string();
                    }
                }
            }
        }
    }
}
