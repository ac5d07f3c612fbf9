//! Writing pcapng files whose packets may carry comments (`sift run` writes a packet's tags as
//! its comment; classic pcap has nowhere to put them).
//!
//! The file is one section in the machine's byte order: a Section Header Block, an Interface
//! Description Block for each (link type, snapshot length) seen, with nanosecond time stamps
//! (`if_tsresol` 9, so no input's resolution is lost), then an Enhanced Packet Block per
//! packet with the captured bytes as given and an `opt_comment` when there is a comment.

use std::collections::HashMap;
use std::io::{self, Write};

use sift_capture::Timestamp;

const SECTION_HEADER: u32 = 0x0A0D_0D0A;
const INTERFACE_DESCRIPTION: u32 = 1;
const ENHANCED_PACKET: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
const OPT_END: u16 = 0;
const OPT_COMMENT: u16 = 1;
const IF_TSRESOL: u16 = 9;

/// A pcapng writer; interfaces are declared as packets of new link types arrive.
#[derive(Debug)]
pub struct PcapngWriter<W: Write> {
    out: W,
    interfaces: HashMap<(u32, u32), u32>,
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// Appends an option (code, length, value padded to 4 bytes).
fn push_option(block: &mut Vec<u8>, code: u16, value: &[u8]) -> io::Result<()> {
    let len = u16::try_from(value.len())
        .map_err(|_| invalid(format!("pcapng option of {} bytes", value.len())))?;
    block.extend(code.to_ne_bytes());
    block.extend(len.to_ne_bytes());
    block.extend(value);
    block.resize(block.len().next_multiple_of(4), 0);
    Ok(())
}

impl<W: Write> PcapngWriter<W> {
    /// Writes the section header.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut body = Vec::with_capacity(16);
        body.extend(BYTE_ORDER_MAGIC.to_ne_bytes());
        body.extend(1u16.to_ne_bytes());
        body.extend(0u16.to_ne_bytes());
        // Section length unknown.
        body.extend((-1i64).to_ne_bytes());
        write_block(&mut out, SECTION_HEADER, &body)?;
        Ok(PcapngWriter {
            out,
            interfaces: HashMap::new(),
        })
    }

    /// The interface for packets of `linktype` captured with `snaplen`, declared on first use.
    fn interface(&mut self, linktype: u32, snaplen: u32) -> io::Result<u32> {
        if let Some(&id) = self.interfaces.get(&(linktype, snaplen)) {
            return Ok(id);
        }
        let field = u16::try_from(linktype)
            .map_err(|_| invalid(format!("link type {linktype} does not fit pcapng")))?;
        let mut body = Vec::with_capacity(20);
        body.extend(field.to_ne_bytes());
        body.extend(0u16.to_ne_bytes());
        body.extend(snaplen.to_ne_bytes());
        push_option(&mut body, IF_TSRESOL, &[9])?;
        push_option(&mut body, OPT_END, &[])?;
        write_block(&mut self.out, INTERFACE_DESCRIPTION, &body)?;
        let id = self.interfaces.len() as u32;
        self.interfaces.insert((linktype, snaplen), id);
        Ok(id)
    }

    /// Writes one packet: `data` are the captured bytes, `wire_len` the original length.
    pub fn write_packet(
        &mut self,
        linktype: u32,
        snaplen: u32,
        ts: &Timestamp,
        wire_len: u32,
        data: &[u8],
        comment: Option<&str>,
    ) -> io::Result<()> {
        let interface = self.interface(linktype, snaplen)?;
        let caplen = u32::try_from(data.len())
            .map_err(|_| invalid("packet longer than 4 GiB".to_owned()))?;
        let (secs, nanos) = ts.to_nanos();
        // Time stamps before 1970 cannot be written in pcapng; they become 0.
        let units =
            u64::try_from(i128::from(secs) * 1_000_000_000 + i128::from(nanos)).unwrap_or(0);
        let mut body = Vec::with_capacity(20 + data.len() + 8);
        body.extend(interface.to_ne_bytes());
        body.extend(((units >> 32) as u32).to_ne_bytes());
        body.extend((units as u32).to_ne_bytes());
        body.extend(caplen.to_ne_bytes());
        body.extend(wire_len.to_ne_bytes());
        body.extend(data);
        body.resize(body.len().next_multiple_of(4), 0);
        if let Some(comment) = comment {
            push_option(&mut body, OPT_COMMENT, comment.as_bytes())?;
            push_option(&mut body, OPT_END, &[])?;
        }
        write_block(&mut self.out, ENHANCED_PACKET, &body)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Writes a block: type, total length, body (a multiple of 4 bytes), total length again.
fn write_block(out: &mut impl Write, block_type: u32, body: &[u8]) -> io::Result<()> {
    let total = u32::try_from(body.len() + 12)
        .map_err(|_| invalid("pcapng block longer than 4 GiB".to_owned()))?;
    out.write_all(&block_type.to_ne_bytes())?;
    out.write_all(&total.to_ne_bytes())?;
    out.write_all(body)?;
    out.write_all(&total.to_ne_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_capture::CaptureReader;

    #[test]
    fn packets_read_back_identically() {
        let mut w = PcapngWriter::new(Vec::new()).unwrap();
        let ts = Timestamp::new(1_700_000_000, 123_456_789);
        w.write_packet(1, 65535, &ts, 60, &[1, 2, 3], Some("dns,web"))
            .unwrap();
        w.write_packet(101, 65535, &ts, 5, &[4, 5, 6, 7, 8], None)
            .unwrap();
        w.write_packet(1, 65535, &ts, 1, &[9], None).unwrap();
        let bytes = w.out;
        let mut r = CaptureReader::new(&bytes[..]).unwrap();
        let mut got = Vec::new();
        while let Some(rec) = r.next_record().unwrap() {
            got.push((
                rec.linktype,
                rec.wire_len,
                rec.data,
                rec.timestamp.to_nanos(),
            ));
        }
        assert_eq!(
            got,
            vec![
                (1, 60, vec![1, 2, 3], (1_700_000_000, 123_456_789)),
                (101, 5, vec![4, 5, 6, 7, 8], (1_700_000_000, 123_456_789)),
                (1, 1, vec![9], (1_700_000_000, 123_456_789)),
            ]
        );
        assert_eq!(r.interfaces().len(), 2);
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("dns,web"));
    }
}
