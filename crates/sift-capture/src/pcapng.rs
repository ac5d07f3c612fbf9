//! The pcapng format: a sequence of blocks, grouped into sections that each
//! start with a Section Header Block (SHB) declaring the section's byte order.
//!
//! Read here: SHBs (either byte order, any number of sections; interface ids
//! restart in each section), Interface Description Blocks (link type, snapshot
//! length, `if_tsresol` in powers of 10 or 2, `if_tsoffset`), Enhanced Packet
//! Blocks, Simple Packet Blocks and the obsolete Packet Blocks. Every other
//! block type is skipped by its length. Unlike libpcap, interfaces with
//! different link types may be mixed: each record carries its own interface's
//! link type. Structural checks (block lengths, option encoding, caplen
//! against the interface's snapshot length) follow libpcap 1.10.

use std::io::Read;

use crate::error::CaptureError;
use crate::input::{ByteOrder, Input};
use crate::linktype::{adjust_snaplen, max_snaplen_for_linktype};
use crate::record::{Record, Timestamp, TsResolution};

/// Block type of a Section Header Block (the same in both byte orders).
pub const BT_SHB: u32 = 0x0A0D_0D0A;
/// Block type of an Interface Description Block.
pub const BT_IDB: u32 = 0x0000_0001;
/// Block type of the obsolete Packet Block.
pub const BT_PB: u32 = 0x0000_0002;
/// Block type of a Simple Packet Block.
pub const BT_SPB: u32 = 0x0000_0003;
/// Block type of an Enhanced Packet Block.
pub const BT_EPB: u32 = 0x0000_0006;
/// The byte-order magic in a Section Header Block.
pub const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;

const SHB_BYTES: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];
/// Smallest SHB: header (8) + BOM, versions, section length (16) + trailer (4).
const SHB_MIN_LEN: u32 = 28;
/// libpcap's `BT_SHB_INSANE_MAX`.
const SHB_MAX_LEN: u32 = 1024 * 1024;
/// Smallest block: header and trailer.
const BLOCK_MIN_LEN: u32 = 12;
/// The block size bound before any interface asks for more (libpcap's value).
const INITIAL_MAX_BLOCK: u32 = 16 * 1024 * 1024;

const OPT_ENDOFOPT: u16 = 0;
const IF_TSRESOL: u16 = 9;
const IF_TSOFFSET: u16 = 14;

/// The largest block accepted once an interface of this link type exists: an
/// EPB carrying a maximum-size packet plus 128 KiB of options (libpcap).
fn max_block_for_linktype(linktype: u32) -> u32 {
    8 + 20 + max_snaplen_for_linktype(linktype) + 131_072 + 4
}

/// The fields of a Section Header Block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionHeader {
    /// Byte order of the section.
    pub byte_order: ByteOrder,
    /// Major version (1).
    pub version_major: u16,
    /// Minor version (0, or 2 as some writers use).
    pub version_minor: u16,
    /// Section length, -1 if not specified.
    pub section_length: i64,
}

/// An interface described by an Interface Description Block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Link-layer header type (`LINKTYPE_*`).
    pub linktype: u32,
    /// Snapshot length as stored (0 = unlimited).
    pub snaplen: u32,
    /// Time stamp resolution (`if_tsresol`, default microseconds).
    pub ts_resolution: TsResolution,
    /// Seconds added to every time stamp (`if_tsoffset`, default 0).
    pub ts_offset: i64,
}

impl Interface {
    /// The snapshot length libpcap enforces: 0 and values above `i32::MAX`
    /// replaced by the link type's maximum.
    pub fn effective_snaplen(&self) -> u32 {
        adjust_snaplen(self.linktype, self.snaplen)
    }

    fn timestamp(&self, t: u64) -> Timestamp {
        let units = self.ts_resolution.units_per_second();
        let secs = ((t / units) as i64).wrapping_add(self.ts_offset);
        Timestamp::from_raw(secs, t % units, self.ts_resolution)
    }
}

enum Step {
    Record(Record),
    Interface,
    Other,
    Eof,
}

/// Reads the blocks of a pcapng file.
#[derive(Debug)]
pub(crate) struct PcapNgReader {
    section: SectionHeader,
    interfaces: Vec<Interface>,
    first_interface: Option<Interface>,
    max_block: u32,
    buf: Vec<u8>,
    pending: Option<Record>,
}

impl PcapNgReader {
    /// Parses the first SHB (its block type, `magic`, already read) and reads
    /// ahead to the first Interface Description Block, so that the file's
    /// link type is known before the first packet.
    pub(crate) fn open<R: Read>(
        magic: [u8; 4],
        input: &mut Input<R>,
    ) -> Result<Option<PcapNgReader>, CaptureError> {
        if magic != SHB_BYTES {
            return Ok(None);
        }
        let offset = input.offset() - 4;
        let mut len = [0u8; 4];
        let got = input.fill(&mut len)?;
        if got < 4 {
            return Err(CaptureError::TruncatedHeader {
                offset,
                expected: u64::from(SHB_MIN_LEN),
                available: 4 + got as u64,
            });
        }
        let mut reader = PcapNgReader {
            section: SectionHeader {
                byte_order: ByteOrder::NATIVE,
                version_major: 0,
                version_minor: 0,
                section_length: -1,
            },
            interfaces: Vec::new(),
            first_interface: None,
            max_block: INITIAL_MAX_BLOCK,
            buf: Vec::new(),
            pending: None,
        };
        reader.read_section(offset, len, true, input)?;
        loop {
            match reader.step(input)? {
                Step::Interface | Step::Eof => break,
                Step::Record(r) => {
                    // Not reachable (a packet needs an interface), but harmless.
                    reader.pending = Some(r);
                    break;
                }
                Step::Other => {}
            }
        }
        Ok(Some(reader))
    }

    pub(crate) fn section(&self) -> &SectionHeader {
        &self.section
    }

    pub(crate) fn interfaces(&self) -> &[Interface] {
        &self.interfaces
    }

    pub(crate) fn first_interface(&self) -> Option<&Interface> {
        self.first_interface.as_ref()
    }

    /// Reads the next packet; `Ok(None)` at a clean end of file.
    pub(crate) fn next_record<R: Read>(
        &mut self,
        input: &mut Input<R>,
    ) -> Result<Option<Record>, CaptureError> {
        if let Some(r) = self.pending.take() {
            return Ok(Some(r));
        }
        loop {
            match self.step(input)? {
                Step::Record(r) => return Ok(Some(r)),
                Step::Eof => return Ok(None),
                Step::Interface | Step::Other => {}
            }
        }
    }

    /// Reads the rest of an SHB whose first 8 bytes (type, `len`) were read at `offset`.
    fn read_section<R: Read>(
        &mut self,
        offset: u64,
        len: [u8; 4],
        first: bool,
        input: &mut Input<R>,
    ) -> Result<(), CaptureError> {
        let truncated = |expected: u64, available: u64| {
            if first {
                CaptureError::TruncatedHeader {
                    offset,
                    expected,
                    available,
                }
            } else {
                CaptureError::TruncatedBlock {
                    offset,
                    expected,
                    available,
                }
            }
        };
        let mut bom = [0u8; 4];
        let got = input.fill(&mut bom)?;
        if got < 4 {
            return Err(truncated(u64::from(SHB_MIN_LEN), 8 + got as u64));
        }
        let order = if u32::from_le_bytes(bom) == BYTE_ORDER_MAGIC {
            ByteOrder::Little
        } else if u32::from_be_bytes(bom) == BYTE_ORDER_MAGIC {
            ByteOrder::Big
        } else {
            return Err(CaptureError::BadByteOrderMagic {
                offset: offset + 8,
                value: bom,
            });
        };
        let length = order.u32(&len);
        if length < SHB_MIN_LEN || length % 4 != 0 {
            return Err(CaptureError::BadBlockLength {
                offset,
                block_type: BT_SHB,
                length,
            });
        }
        if length > SHB_MAX_LEN {
            return Err(CaptureError::BlockTooLarge {
                offset,
                block_type: BT_SHB,
                length,
                max: SHB_MAX_LEN,
            });
        }
        self.buf.clear();
        let rest = u64::from(length) - 12;
        let got = input.read_into(rest, &mut self.buf)?;
        if got < rest {
            return Err(truncated(u64::from(length), 12 + got));
        }
        let trailer = order.u32(&self.buf[self.buf.len() - 4..]);
        if trailer != length {
            return Err(CaptureError::BlockLengthMismatch {
                offset,
                header: length,
                trailer,
            });
        }
        let major = order.u16(&self.buf[0..]);
        let minor = order.u16(&self.buf[2..]);
        let supported = major == 1 && (!first || minor == 0 || minor == 2);
        if !supported {
            return Err(CaptureError::UnsupportedVersion {
                offset: offset + 12,
                major,
                minor,
            });
        }
        self.section = SectionHeader {
            byte_order: order,
            version_major: major,
            version_minor: minor,
            section_length: order.u64(&self.buf[4..]) as i64,
        };
        self.interfaces.clear();
        Ok(())
    }

    /// Reads and interprets one block.
    fn step<R: Read>(&mut self, input: &mut Input<R>) -> Result<Step, CaptureError> {
        let offset = input.offset();
        let mut hdr = [0u8; 8];
        let got = input.fill(&mut hdr)?;
        if got == 0 {
            return Ok(Step::Eof);
        }
        if got < 8 {
            return Err(CaptureError::TruncatedBlockHeader {
                offset,
                expected: 8,
                available: got as u64,
            });
        }
        if hdr[0..4] == SHB_BYTES {
            self.read_section(offset, [hdr[4], hdr[5], hdr[6], hdr[7]], false, input)?;
            return Ok(Step::Other);
        }
        let o = self.section.byte_order;
        let block_type = o.u32(&hdr[0..]);
        let length = o.u32(&hdr[4..]);
        if length < BLOCK_MIN_LEN || !length.is_multiple_of(4) {
            return Err(CaptureError::BadBlockLength {
                offset,
                block_type,
                length,
            });
        }
        if length > self.max_block {
            return Err(CaptureError::BlockTooLarge {
                offset,
                block_type,
                length,
                max: self.max_block,
            });
        }
        let body_len = u64::from(length) - 12;
        let wanted = matches!(block_type, BT_IDB | BT_EPB | BT_SPB | BT_PB);
        self.buf.clear();
        let got = if wanted {
            input.read_into(body_len, &mut self.buf)?
        } else {
            input.skip(body_len)?
        };
        let mut trailer = [0u8; 4];
        let tgot = if got == body_len {
            input.fill(&mut trailer)?
        } else {
            0
        };
        if tgot < 4 {
            return Err(CaptureError::TruncatedBlock {
                offset,
                expected: u64::from(length),
                available: 8 + got + tgot as u64,
            });
        }
        let trailer = o.u32(&trailer);
        if trailer != length {
            return Err(CaptureError::BlockLengthMismatch {
                offset,
                header: length,
                trailer,
            });
        }
        let block = Block {
            offset,
            block_type,
            order: o,
        };
        let body = std::mem::take(&mut self.buf);
        let result = self.interpret(&block, &body);
        self.buf = body;
        result
    }

    fn interpret(&mut self, b: &Block, body: &[u8]) -> Result<Step, CaptureError> {
        let o = b.order;
        match b.block_type {
            BT_IDB => {
                b.need(body, 8)?;
                let mut iface = Interface {
                    linktype: u32::from(o.u16(&body[0..])),
                    snaplen: o.u32(&body[4..]),
                    ts_resolution: TsResolution::MICRO,
                    ts_offset: 0,
                };
                parse_idb_options(b, &body[8..], &mut iface)?;
                self.max_block = self.max_block.max(max_block_for_linktype(iface.linktype));
                if self.first_interface.is_none() {
                    self.first_interface = Some(iface.clone());
                }
                self.interfaces.push(iface);
                Ok(Step::Interface)
            }
            BT_EPB | BT_PB => {
                b.need(body, 20)?;
                let interface_id = if b.block_type == BT_EPB {
                    o.u32(&body[0..])
                } else {
                    u32::from(o.u16(&body[0..]))
                };
                let t = (u64::from(o.u32(&body[4..])) << 32) | u64::from(o.u32(&body[8..]));
                let caplen = o.u32(&body[12..]);
                let wire_len = o.u32(&body[16..]);
                let iface = self.interface(b, interface_id)?;
                let snaplen = iface.effective_snaplen();
                if caplen > snaplen {
                    return Err(CaptureError::CaplenExceedsSnaplen {
                        offset: b.offset,
                        caplen,
                        snaplen,
                    });
                }
                b.need(body, 20 + u64::from(caplen))?;
                Ok(Step::Record(Record {
                    timestamp: iface.timestamp(t),
                    wire_len,
                    linktype: iface.linktype,
                    interface_id,
                    data: body[20..20 + caplen as usize].to_vec(),
                }))
            }
            BT_SPB => {
                b.need(body, 4)?;
                let wire_len = o.u32(&body[0..]);
                let iface = self.interface(b, 0)?;
                let caplen = wire_len.min(iface.effective_snaplen());
                b.need(body, 4 + u64::from(caplen))?;
                Ok(Step::Record(Record {
                    timestamp: iface.timestamp(0),
                    wire_len,
                    linktype: iface.linktype,
                    interface_id: 0,
                    data: body[4..4 + caplen as usize].to_vec(),
                }))
            }
            _ => Ok(Step::Other),
        }
    }

    fn interface(&self, b: &Block, interface_id: u32) -> Result<&Interface, CaptureError> {
        self.interfaces
            .get(interface_id as usize)
            .ok_or(CaptureError::UnknownInterface {
                offset: b.offset,
                interface_id,
                defined: self.interfaces.len() as u32,
            })
    }
}

struct Block {
    offset: u64,
    block_type: u32,
    order: ByteOrder,
}

impl Block {
    fn need(&self, body: &[u8], needed: u64) -> Result<(), CaptureError> {
        if (body.len() as u64) < needed {
            return Err(CaptureError::BlockTooShort {
                offset: self.offset,
                block_type: self.block_type,
                needed,
                available: body.len() as u64,
            });
        }
        Ok(())
    }
}

/// Interprets the options of an IDB (`opts` starts after the fixed fields),
/// with libpcap's checks.
fn parse_idb_options(b: &Block, opts: &[u8], iface: &mut Interface) -> Result<(), CaptureError> {
    let o = b.order;
    let mut pos = 0usize;
    let mut saw_tsresol = false;
    let mut saw_tsoffset = false;
    // Body offset of the options: 8 bytes of block header + 8 of fixed fields.
    let base = b.offset + 16;
    while pos < opts.len() {
        let opt_offset = base + pos as u64;
        b.need(opts, pos as u64 + 4).map_err(|e| add_fixed(e, 8))?;
        let code = o.u16(&opts[pos..]);
        let len = o.u16(&opts[pos + 2..]) as usize;
        let padded = len.div_ceil(4) * 4;
        b.need(opts, (pos + 4 + padded) as u64)
            .map_err(|e| add_fixed(e, 8))?;
        let value = &opts[pos + 4..pos + 4 + len];
        pos += 4 + padded;
        let bad = |reason| CaptureError::BadOption {
            offset: opt_offset,
            code,
            reason,
        };
        match code {
            OPT_ENDOFOPT => {
                if len != 0 {
                    return Err(bad("opt_endofopt with a non-zero length"));
                }
                break;
            }
            IF_TSRESOL => {
                if len != 1 {
                    return Err(bad("if_tsresol length is not 1"));
                }
                if saw_tsresol {
                    return Err(bad("more than one if_tsresol"));
                }
                saw_tsresol = true;
                let v = value[0];
                iface.ts_resolution = if v & 0x80 != 0 {
                    let n = v & 0x7F;
                    if n > 63 {
                        return Err(bad("if_tsresol finer than 2^-63"));
                    }
                    TsResolution::Binary(n)
                } else {
                    if v > 19 {
                        return Err(bad("if_tsresol finer than 10^-19"));
                    }
                    TsResolution::Decimal(v)
                };
            }
            IF_TSOFFSET => {
                if len != 8 {
                    return Err(bad("if_tsoffset length is not 8"));
                }
                if saw_tsoffset {
                    return Err(bad("more than one if_tsoffset"));
                }
                saw_tsoffset = true;
                iface.ts_offset = o.u64(value) as i64;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Adjusts a `BlockTooShort` computed on the options slice to count the
/// block's `fixed` leading body bytes too.
fn add_fixed(e: CaptureError, fixed: u64) -> CaptureError {
    match e {
        CaptureError::BlockTooShort {
            offset,
            block_type,
            needed,
            available,
        } => CaptureError::BlockTooShort {
            offset,
            block_type,
            needed: needed + fixed,
            available: available + fixed,
        },
        other => other,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! Tests build pcapng files with the small writer below.
    use super::*;

    /// Builds pcapng blocks in one byte order.
    pub(crate) struct NgBuilder {
        pub(crate) order: ByteOrder,
        pub(crate) out: Vec<u8>,
    }

    impl NgBuilder {
        pub(crate) fn new(order: ByteOrder) -> NgBuilder {
            NgBuilder {
                order,
                out: Vec::new(),
            }
        }
        pub(crate) fn u16b(&self, v: u16) -> [u8; 2] {
            match self.order {
                ByteOrder::Little => v.to_le_bytes(),
                ByteOrder::Big => v.to_be_bytes(),
            }
        }
        pub(crate) fn u32b(&self, v: u32) -> [u8; 4] {
            match self.order {
                ByteOrder::Little => v.to_le_bytes(),
                ByteOrder::Big => v.to_be_bytes(),
            }
        }
        pub(crate) fn u64b(&self, v: u64) -> [u8; 8] {
            match self.order {
                ByteOrder::Little => v.to_le_bytes(),
                ByteOrder::Big => v.to_be_bytes(),
            }
        }
        pub(crate) fn block(&mut self, block_type: u32, mut body: Vec<u8>) -> &mut Self {
            while !body.len().is_multiple_of(4) {
                body.push(0);
            }
            let len = body.len() as u32 + 12;
            let (t, l) = (self.u32b(block_type), self.u32b(len));
            self.out.extend(t);
            self.out.extend(l);
            self.out.extend(body);
            self.out.extend(l);
            self
        }
        pub(crate) fn option(&self, code: u16, value: &[u8]) -> Vec<u8> {
            let mut v = Vec::new();
            v.extend(self.u16b(code));
            v.extend(self.u16b(value.len() as u16));
            v.extend_from_slice(value);
            while v.len() % 4 != 0 {
                v.push(0);
            }
            v
        }
        pub(crate) fn shb(&mut self) -> &mut Self {
            let mut body = Vec::new();
            body.extend(self.u32b(BYTE_ORDER_MAGIC));
            body.extend(self.u16b(1));
            body.extend(self.u16b(0));
            body.extend(self.u64b(u64::MAX));
            self.block(BT_SHB, body)
        }
        pub(crate) fn idb(&mut self, linktype: u16, snaplen: u32, opts: &[Vec<u8>]) -> &mut Self {
            let mut body = Vec::new();
            body.extend(self.u16b(linktype));
            body.extend(self.u16b(0));
            body.extend(self.u32b(snaplen));
            for o in opts {
                body.extend(o);
            }
            if !opts.is_empty() {
                body.extend(self.option(0, &[]));
            }
            self.block(BT_IDB, body)
        }
        pub(crate) fn epb(&mut self, ifid: u32, t: u64, wire_len: u32, data: &[u8]) -> &mut Self {
            let mut body = Vec::new();
            body.extend(self.u32b(ifid));
            body.extend(self.u32b((t >> 32) as u32));
            body.extend(self.u32b(t as u32));
            body.extend(self.u32b(data.len() as u32));
            body.extend(self.u32b(wire_len));
            body.extend_from_slice(data);
            self.block(BT_EPB, body)
        }
        pub(crate) fn spb(&mut self, wire_len: u32, data: &[u8]) -> &mut Self {
            let mut body = Vec::new();
            body.extend(self.u32b(wire_len));
            body.extend_from_slice(data);
            self.block(BT_SPB, body)
        }
        pub(crate) fn pb(&mut self, ifid: u16, t: u64, wire_len: u32, data: &[u8]) -> &mut Self {
            let mut body = Vec::new();
            body.extend(self.u16b(ifid));
            body.extend(self.u16b(0));
            body.extend(self.u32b((t >> 32) as u32));
            body.extend(self.u32b(t as u32));
            body.extend(self.u32b(data.len() as u32));
            body.extend(self.u32b(wire_len));
            body.extend_from_slice(data);
            self.block(BT_PB, body)
        }
    }

    fn open(bytes: &[u8]) -> Result<(PcapNgReader, Input<&[u8]>), CaptureError> {
        let mut input = Input::new(bytes);
        let mut magic = [0u8; 4];
        input.fill(&mut magic).unwrap();
        let r = PcapNgReader::open(magic, &mut input)?.expect("pcapng");
        Ok((r, input))
    }

    fn read_all(bytes: &[u8]) -> (Vec<Record>, Option<CaptureError>) {
        let (mut r, mut input) = match open(bytes) {
            Ok(x) => x,
            Err(e) => return (Vec::new(), Some(e)),
        };
        let mut recs = Vec::new();
        loop {
            match r.next_record(&mut input) {
                Ok(Some(rec)) => recs.push(rec),
                Ok(None) => return (recs, None),
                Err(e) => return (recs, Some(e)),
            }
        }
    }

    #[test]
    fn all_packet_block_kinds_both_orders() {
        let d: Vec<u8> = (0..60).collect();
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let mut b = NgBuilder::new(order);
            b.shb()
                .idb(1, 0, &[])
                .epb(0, 1_234_567_890_123_456, 60, &d)
                .spb(80, &[d.clone(), d.clone()].concat())
                .pb(0, 1_234_567_890_123_457, 61, &d);
            let (recs, err) = read_all(&b.out);
            assert!(err.is_none(), "{err:?}");
            assert_eq!(recs.len(), 3);
            assert_eq!(recs[0].timestamp.secs(), 1_234_567_890);
            assert_eq!(recs[0].timestamp.nanos(), 123_456_000);
            assert_eq!(recs[0].data, d);
            assert_eq!(recs[1].caplen(), 80);
            assert_eq!(recs[1].wire_len, 80);
            assert_eq!(recs[1].timestamp.secs(), 0);
            assert_eq!(recs[2].wire_len, 61);
            assert!(recs.iter().all(|r| r.linktype == 1));
        }
    }

    #[test]
    fn two_interfaces_with_different_link_types() {
        let mut b = NgBuilder::new(ByteOrder::Little);
        b.shb()
            .idb(1, 100, &[])
            .idb(101, 100, &[])
            .epb(1, 5, 20, &[0x45; 20])
            .epb(0, 6, 14, &[0xFF; 14]);
        let (recs, err) = read_all(&b.out);
        assert!(err.is_none());
        assert_eq!(recs[0].linktype, 101);
        assert_eq!(recs[0].interface_id, 1);
        assert_eq!(recs[1].linktype, 1);
        assert_eq!(recs[1].interface_id, 0);
        let (r, _) = open(&b.out).unwrap();
        assert_eq!(r.first_interface().unwrap().linktype, 1);
    }

    #[test]
    fn tsresol_and_tsoffset() {
        let mut b = NgBuilder::new(ByteOrder::Big);
        let ns = b.option(IF_TSRESOL, &[9]);
        let off = b.option(IF_TSOFFSET, &b.u64b(100));
        let bin = b.option(IF_TSRESOL, &[0x94]);
        let ms = b.option(IF_TSRESOL, &[3]);
        b.shb()
            .idb(1, 0, &[ns, off])
            .idb(1, 0, &[bin])
            .idb(1, 0, &[ms])
            .epb(0, 1_234_567_890_123_456_789, 60, &[0; 4])
            .epb(1, (1000 << 20) + 12345, 60, &[0; 4])
            .epb(2, 1_000_123, 60, &[0; 4]);
        let (recs, err) = read_all(&b.out);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(recs[0].timestamp.secs(), 1_234_567_990);
        assert_eq!(recs[0].timestamp.nanos(), 123_456_789);
        assert_eq!(recs[0].timestamp.to_micros(), (1_234_567_990, 123_456));
        assert_eq!(recs[1].timestamp.to_micros(), (1000, 11773));
        assert_eq!(recs[1].timestamp.resolution(), TsResolution::Binary(20));
        assert_eq!(recs[2].timestamp.to_micros(), (1000, 123_000));
    }

    #[test]
    fn multiple_sections_mixed_byte_orders() {
        let mut b = NgBuilder::new(ByteOrder::Little);
        b.shb().idb(1, 0, &[]).epb(0, 1, 4, &[1; 4]);
        let mut c = NgBuilder::new(ByteOrder::Big);
        c.shb()
            .idb(101, 0, &[])
            .epb(0, 2, 4, &[2; 4])
            .block(0x0BAD, vec![9; 7]);
        b.out.extend(c.out);
        let (recs, err) = read_all(&b.out);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].linktype, 101);
        assert_eq!(recs[1].data, [2; 4]);
    }

    #[test]
    fn interfaces_restart_per_section() {
        let mut b = NgBuilder::new(ByteOrder::Little);
        b.shb().idb(1, 0, &[]).idb(1, 0, &[]).shb().idb(1, 0, &[]);
        let before = b.out.len() as u64;
        b.epb(1, 0, 4, &[0; 4]);
        let (recs, err) = read_all(&b.out);
        assert!(recs.is_empty());
        match err {
            Some(CaptureError::UnknownInterface {
                offset,
                interface_id: 1,
                defined: 1,
            }) => assert_eq!(offset, before),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_blocks_are_skipped() {
        let mut b = NgBuilder::new(ByteOrder::Little);
        b.shb()
            .block(0x8000_0001, vec![1, 2, 3])
            .idb(1, 0, &[])
            .block(5, vec![0; 40])
            .epb(0, 0, 1, &[7]);
        let (recs, err) = read_all(&b.out);
        assert!(err.is_none());
        assert_eq!(recs.len(), 1);
    }

    #[test]
    fn snaplen_enforced() {
        let mut b = NgBuilder::new(ByteOrder::Little);
        b.shb().idb(1, 30, &[]).spb(60, &[1; 60]);
        let at = b.out.len() as u64;
        b.epb(0, 5, 60, &[1; 60]);
        let (recs, err) = read_all(&b.out);
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].caplen(), 30);
        match err {
            Some(CaptureError::CaplenExceedsSnaplen {
                offset,
                caplen: 60,
                snaplen: 30,
            }) => assert_eq!(offset, at),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_options() {
        let mut b = NgBuilder::new(ByteOrder::Little);
        let o1 = b.option(IF_TSRESOL, &[6]);
        let o2 = b.option(IF_TSRESOL, &[6]);
        b.shb().idb(1, 0, &[o1, o2]);
        assert!(matches!(
            read_all(&b.out).1,
            Some(CaptureError::BadOption { code: 9, .. })
        ));
        let mut b = NgBuilder::new(ByteOrder::Little);
        let o = b.option(IF_TSRESOL, &[20]);
        b.shb().idb(1, 0, &[o]);
        assert!(matches!(
            read_all(&b.out).1,
            Some(CaptureError::BadOption { offset: 44, .. })
        ));
        let mut b = NgBuilder::new(ByteOrder::Little);
        let o = b.option(IF_TSOFFSET, &[1, 2]);
        b.shb().idb(1, 0, &[o]);
        assert!(matches!(
            read_all(&b.out).1,
            Some(CaptureError::BadOption { code: 14, .. })
        ));
    }

    #[test]
    fn bad_block_lengths() {
        let mut b = NgBuilder::new(ByteOrder::Little);
        b.shb().idb(1, 0, &[]);
        let at = b.out.len();
        b.epb(0, 0, 4, &[0; 4]);
        let mut f = b.out.clone();
        f[at + 4] = 13; // not a multiple of 4
        assert!(matches!(
            read_all(&f).1,
            Some(CaptureError::BadBlockLength { length: 13, .. })
        ));
        let mut f = b.out.clone();
        f[at + 4..at + 8].copy_from_slice(&0x7000_0000u32.to_le_bytes());
        assert!(matches!(
            read_all(&f).1,
            Some(CaptureError::BlockTooLarge { .. })
        ));
        let mut f = b.out.clone();
        let end = f.len();
        f[end - 4] ^= 4;
        assert!(matches!(
            read_all(&f).1,
            Some(CaptureError::BlockLengthMismatch { .. })
        ));
        // EPB whose caplen runs past the block.
        let mut f = b.out.clone();
        f[at + 8 + 12] = 200;
        assert!(matches!(
            read_all(&f).1,
            Some(CaptureError::BlockTooShort { needed: 220, .. })
        ));
    }

    #[test]
    fn bad_byte_order_magic_and_version() {
        let mut b = NgBuilder::new(ByteOrder::Little);
        b.shb();
        let mut f = b.out.clone();
        f[8] = 0;
        assert!(matches!(
            open(&f).err(),
            Some(CaptureError::BadByteOrderMagic { offset: 8, .. })
        ));
        let mut f = b.out.clone();
        f[12] = 2;
        assert!(matches!(
            open(&f).err(),
            Some(CaptureError::UnsupportedVersion { major: 2, .. })
        ));
    }

    #[test]
    fn no_interfaces() {
        let mut b = NgBuilder::new(ByteOrder::Little);
        b.shb();
        let (r, _) = open(&b.out).unwrap();
        assert!(r.first_interface().is_none());
        b.spb(4, &[0; 4]);
        assert!(matches!(
            open(&b.out).err(),
            Some(CaptureError::UnknownInterface { offset: 28, .. })
        ));
    }
}
