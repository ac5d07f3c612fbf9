//! Parsing one `TPACKET_V3` block: the block descriptor (`struct tpacket_block_desc`) and the
//! chain of packet headers (`struct tpacket3_hdr`, followed by a `struct sockaddr_ll`) in it.
//!
//! The block's bytes are shared with the kernel and are treated as untrusted: every offset and
//! length read from them is checked against the block's extent before use, so a malformed header
//! yields a [`Malformed`] error, never a read outside the block. Every offset moves forward, so
//! walking a block always ends.

use std::fmt;

/// `struct tpacket_block_desc`: `version`, `offset_to_priv`, then `struct tpacket_hdr_v1`
/// (`block_status`, `num_pkts`, `offset_to_first_pkt`, `blk_len`, `seq_num`, two time stamps).
pub const BLOCK_HEADER_LEN: usize = 48;
const NUM_PACKETS_AT: usize = 12;
const FIRST_PACKET_AT: usize = 16;
const BLOCK_LEN_AT: usize = 20;

/// `struct tpacket3_hdr`, 48 bytes, already a multiple of `TPACKET_ALIGNMENT` (16).
pub const FRAME_HEADER_LEN: usize = 48;
const NEXT_OFFSET_AT: usize = 0;
const SEC_AT: usize = 4;
const NSEC_AT: usize = 8;
const SNAPLEN_AT: usize = 12;
const LEN_AT: usize = 16;
const STATUS_AT: usize = 20;
const MAC_AT: usize = 24;
const VLAN_TCI_AT: usize = 32;
const VLAN_TPID_AT: usize = 36;

/// The `struct sockaddr_ll` the kernel writes right after the packet header; only its
/// `sll_pkttype` byte (offset 10) is used.
const SLL_AT: usize = FRAME_HEADER_LEN;
const SLL_LEN: usize = 20;
const SLL_PKTTYPE_AT: usize = SLL_AT + 10;

/// What is wrong with a block or a packet header in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// `blk_len` is smaller than the descriptor or larger than the block.
    BlockLength {
        /// The field's value.
        blk_len: u32,
    },
    /// `offset_to_first_pkt` points into the descriptor or past `blk_len`.
    FirstPacketOffset {
        /// The field's value.
        offset: u32,
    },
    /// A packet header does not fit before `blk_len`.
    FrameHeader,
    /// `tp_mac` points into the packet header or past `blk_len`.
    MacOffset {
        /// The field's value.
        tp_mac: u16,
    },
    /// `tp_snaplen` bytes from `tp_mac` run past `blk_len`.
    CapturedLength {
        /// The field's value.
        tp_snaplen: u32,
    },
    /// `tp_next_offset` is 0 (or overflows) although more packets are announced.
    NextOffset {
        /// The field's value.
        tp_next_offset: u32,
    },
}

/// A malformed block: where and what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed {
    /// Byte offset in the block of the header holding the bad field.
    pub offset: usize,
    /// The bad field.
    pub problem: Problem,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed ring block at byte {}: ", self.offset)?;
        match self.problem {
            Problem::BlockLength { blk_len } => write!(f, "block length {blk_len}"),
            Problem::FirstPacketOffset { offset } => write!(f, "first packet at {offset}"),
            Problem::FrameHeader => f.write_str("packet header past the block's end"),
            Problem::MacOffset { tp_mac } => write!(f, "packet data offset {tp_mac}"),
            Problem::CapturedLength { tp_snaplen } => {
                write!(f, "captured length {tp_snaplen} past the block's end")
            }
            Problem::NextOffset { tp_next_offset } => {
                write!(f, "next packet offset {tp_next_offset}")
            }
        }
    }
}

impl std::error::Error for Malformed {}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    let mut b = [0; 2];
    b.copy_from_slice(&bytes[at..at + 2]);
    u16::from_ne_bytes(b)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_ne_bytes(b)
}

/// One packet header, checked: `data_start + snaplen` lies within the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Offset of the header in the block.
    pub offset: usize,
    /// `tp_sec`: seconds of the time stamp.
    pub sec: u32,
    /// `tp_nsec`: nanoseconds of the time stamp.
    pub nsec: u32,
    /// `tp_snaplen`: bytes stored.
    pub snaplen: u32,
    /// `tp_len`: the packet's length on the wire.
    pub len: u32,
    /// `tp_status` (`TP_STATUS_*` bits such as `TP_STATUS_VLAN_VALID`).
    pub status: u32,
    /// Offset of the packet data in the block.
    pub data_start: usize,
    /// `tp_vlan_tci`: the VLAN tag the kernel stripped, if `TP_STATUS_VLAN_VALID`.
    pub vlan_tci: u16,
    /// `tp_vlan_tpid`: its tag protocol, if `TP_STATUS_VLAN_TPID_VALID`.
    pub vlan_tpid: u16,
    /// `sll_pkttype` (`PACKET_HOST`, `PACKET_OUTGOING`, ...), when the kernel left room for the
    /// address before the data.
    pub pkt_type: Option<u8>,
}

impl Frame {
    /// The packet data in `block`.
    pub fn data<'a>(&self, block: &'a [u8]) -> &'a [u8] {
        &block[self.data_start..self.data_start + self.snaplen as usize]
    }
}

/// The packets of one block, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frames {
    /// Packets not yet returned.
    remaining: u32,
    /// Offset of the next packet header.
    offset: usize,
    /// `blk_len`: bytes of the block in use.
    limit: usize,
}

impl Frames {
    /// Reads a block descriptor. `block` is the whole block.
    pub fn new(block: &[u8]) -> Result<Frames, Malformed> {
        if block.len() < BLOCK_HEADER_LEN {
            return Err(Malformed {
                offset: 0,
                problem: Problem::BlockLength { blk_len: 0 },
            });
        }
        let blk_len = u32_at(block, BLOCK_LEN_AT);
        let limit = blk_len as usize;
        if limit < BLOCK_HEADER_LEN || limit > block.len() {
            return Err(Malformed {
                offset: BLOCK_LEN_AT,
                problem: Problem::BlockLength { blk_len },
            });
        }
        let remaining = u32_at(block, NUM_PACKETS_AT);
        let first = u32_at(block, FIRST_PACKET_AT);
        if remaining > 0 && ((first as usize) < BLOCK_HEADER_LEN || first as usize >= limit) {
            return Err(Malformed {
                offset: FIRST_PACKET_AT,
                problem: Problem::FirstPacketOffset { offset: first },
            });
        }
        Ok(Frames {
            remaining,
            offset: first as usize,
            limit,
        })
    }

    /// Packets not yet returned.
    pub fn remaining(&self) -> u32 {
        self.remaining
    }

    /// The next packet header of `block` (the block this cursor was made from), or `None` after
    /// the last. After an error the cursor is exhausted.
    pub fn next_frame(&mut self, block: &[u8]) -> Option<Result<Frame, Malformed>> {
        if self.remaining == 0 {
            return None;
        }
        let result = self.parse(block);
        if result.is_err() {
            self.remaining = 0;
        }
        Some(result)
    }

    fn parse(&mut self, block: &[u8]) -> Result<Frame, Malformed> {
        let limit = self.limit.min(block.len());
        let offset = self.offset;
        let fail = |problem| Malformed { offset, problem };
        let header_end = offset
            .checked_add(FRAME_HEADER_LEN)
            .filter(|&e| e <= limit)
            .ok_or(fail(Problem::FrameHeader))?;
        let header = &block[offset..header_end];
        let tp_mac = u16_at(header, MAC_AT);
        let snaplen = u32_at(header, SNAPLEN_AT);
        if usize::from(tp_mac) < FRAME_HEADER_LEN {
            return Err(fail(Problem::MacOffset { tp_mac }));
        }
        let data_start = offset + usize::from(tp_mac);
        if data_start > limit {
            return Err(fail(Problem::MacOffset { tp_mac }));
        }
        if snaplen as usize > limit - data_start {
            return Err(fail(Problem::CapturedLength {
                tp_snaplen: snaplen,
            }));
        }
        let pkt_type =
            (offset + SLL_AT + SLL_LEN <= data_start).then(|| block[offset + SLL_PKTTYPE_AT]);
        let frame = Frame {
            offset,
            sec: u32_at(header, SEC_AT),
            nsec: u32_at(header, NSEC_AT),
            snaplen,
            len: u32_at(header, LEN_AT),
            status: u32_at(header, STATUS_AT),
            data_start,
            // The kernel stores the TCI in a 32-bit field; only the low 16 bits are a tag.
            vlan_tci: u32_at(header, VLAN_TCI_AT) as u16,
            vlan_tpid: u16_at(header, VLAN_TPID_AT),
            pkt_type,
        };
        self.remaining -= 1;
        if self.remaining > 0 {
            let next = u32_at(header, NEXT_OFFSET_AT);
            self.offset = offset
                .checked_add(next as usize)
                .filter(|_| next != 0)
                .ok_or(fail(Problem::NextOffset {
                    tp_next_offset: next,
                }))?;
        }
        Ok(frame)
    }
}

/// Builds blocks the way the kernel lays them out, for tests here and in [`crate::capture`].
#[cfg(test)]
pub mod testing {
    use super::*;

    /// One packet to place in a test block.
    pub struct TestFrame<'a> {
        /// The captured bytes.
        pub data: &'a [u8],
        /// `tp_len`.
        pub wire_len: u32,
        /// `sll_pkttype`.
        pub pkt_type: u8,
    }

    /// A block of `size` bytes holding `frames` as `tpacket_rcv` writes them (header, address,
    /// data at a 16-aligned offset, next header 16-aligned after the data).
    pub fn block(size: usize, frames: &[TestFrame<'_>]) -> Vec<u8> {
        let mut b = vec![0u8; size];
        let mut at = BLOCK_HEADER_LEN;
        b[NUM_PACKETS_AT..NUM_PACKETS_AT + 4].copy_from_slice(&(frames.len() as u32).to_ne_bytes());
        b[FIRST_PACKET_AT..FIRST_PACKET_AT + 4].copy_from_slice(&(at as u32).to_ne_bytes());
        for (i, f) in frames.iter().enumerate() {
            let mac = 80usize; // header 48 + sockaddr_ll 20, aligned to 16
            let next = (mac + f.data.len()).next_multiple_of(16);
            let h = &mut b[at..at + FRAME_HEADER_LEN];
            let last = i + 1 == frames.len();
            h[0..4].copy_from_slice(&(if last { 0 } else { next as u32 }).to_ne_bytes());
            h[SEC_AT..SEC_AT + 4].copy_from_slice(&(1000 + i as u32).to_ne_bytes());
            h[NSEC_AT..NSEC_AT + 4].copy_from_slice(&(i as u32 * 7).to_ne_bytes());
            h[SNAPLEN_AT..SNAPLEN_AT + 4].copy_from_slice(&(f.data.len() as u32).to_ne_bytes());
            h[LEN_AT..LEN_AT + 4].copy_from_slice(&f.wire_len.to_ne_bytes());
            h[STATUS_AT..STATUS_AT + 4].copy_from_slice(&1u32.to_ne_bytes());
            h[MAC_AT..MAC_AT + 2].copy_from_slice(&(mac as u16).to_ne_bytes());
            b[at + SLL_PKTTYPE_AT] = f.pkt_type;
            b[at + mac..at + mac + f.data.len()].copy_from_slice(f.data);
            at += if last { mac + f.data.len() } else { next };
        }
        b[BLOCK_LEN_AT..BLOCK_LEN_AT + 4].copy_from_slice(&(at as u32).to_ne_bytes());
        b[8..12].copy_from_slice(&1u32.to_ne_bytes());
        b
    }

    /// Overwrites a native-endian 32-bit field.
    pub fn put_u32(b: &mut [u8], at: usize, v: u32) {
        b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    fn frames(block: &[u8]) -> Result<Vec<Frame>, Malformed> {
        let mut cursor = Frames::new(block)?;
        let mut out = Vec::new();
        while let Some(f) = cursor.next_frame(block) {
            out.push(f?);
        }
        Ok(out)
    }

    fn sample() -> Vec<u8> {
        block(
            4096,
            &[
                TestFrame {
                    data: &[1; 60],
                    wire_len: 60,
                    pkt_type: 0,
                },
                TestFrame {
                    data: &[2; 33],
                    wire_len: 1514,
                    pkt_type: 4,
                },
                TestFrame {
                    data: &[3; 1],
                    wire_len: 1,
                    pkt_type: 3,
                },
            ],
        )
    }

    #[test]
    fn well_formed_block_yields_every_packet_in_order() {
        let b = sample();
        let fs = frames(&b).unwrap();
        assert_eq!(fs.len(), 3);
        assert_eq!(fs[0].data(&b), &[1; 60][..]);
        assert_eq!(fs[1].data(&b), &[2; 33][..]);
        assert_eq!((fs[1].snaplen, fs[1].len), (33, 1514));
        assert_eq!(fs[2].data(&b), &[3][..]);
        assert_eq!(
            fs.iter().map(|f| f.pkt_type).collect::<Vec<_>>(),
            [Some(0), Some(4), Some(3)]
        );
        assert_eq!((fs[1].sec, fs[1].nsec), (1001, 7));
    }

    #[test]
    fn empty_block_has_no_packets() {
        let b = block(4096, &[]);
        assert!(frames(&b).unwrap().is_empty());
    }

    #[test]
    fn bad_block_lengths_are_refused() {
        let mut b = sample();
        put_u32(&mut b, BLOCK_LEN_AT, 4097);
        assert!(matches!(
            frames(&b).unwrap_err().problem,
            Problem::BlockLength { blk_len: 4097 }
        ));
        put_u32(&mut b, BLOCK_LEN_AT, 10);
        assert!(matches!(
            frames(&b).unwrap_err().problem,
            Problem::BlockLength { .. }
        ));
        assert!(Frames::new(&b[..20]).is_err());
    }

    #[test]
    fn bad_offsets_stop_at_the_bad_header() {
        let mut b = sample();
        put_u32(&mut b, FIRST_PACKET_AT, 4);
        assert!(matches!(
            frames(&b).unwrap_err().problem,
            Problem::FirstPacketOffset { offset: 4 }
        ));

        // Captured length past the block's used part.
        let mut b = sample();
        let second = BLOCK_HEADER_LEN + 144;
        put_u32(&mut b, second + SNAPLEN_AT, 4000);
        let mut cursor = Frames::new(&b).unwrap();
        assert!(cursor.next_frame(&b).unwrap().is_ok());
        let err = cursor.next_frame(&b).unwrap().unwrap_err();
        assert_eq!(err.offset, second);
        assert!(matches!(
            err.problem,
            Problem::CapturedLength { tp_snaplen: 4000 }
        ));
        assert!(cursor.next_frame(&b).is_none(), "exhausted after an error");

        // Zero next offset while packets remain: no infinite loop.
        let mut b = sample();
        put_u32(&mut b, BLOCK_HEADER_LEN, 0);
        assert!(matches!(
            frames(&b).unwrap_err().problem,
            Problem::NextOffset { tp_next_offset: 0 }
        ));

        // Next offset past the end, or a huge packet count.
        let mut b = sample();
        put_u32(&mut b, BLOCK_HEADER_LEN, u32::MAX);
        assert!(matches!(
            frames(&b).unwrap_err().problem,
            Problem::FrameHeader
        ));
        let mut b = sample();
        put_u32(&mut b, NUM_PACKETS_AT, u32::MAX);
        assert!(frames(&b).is_err());

        // Data offset inside the header.
        let mut b = sample();
        b[BLOCK_HEADER_LEN + MAC_AT..BLOCK_HEADER_LEN + MAC_AT + 2]
            .copy_from_slice(&8u16.to_ne_bytes());
        assert!(matches!(
            frames(&b).unwrap_err().problem,
            Problem::MacOffset { tp_mac: 8 }
        ));
    }

    #[test]
    fn arbitrary_bytes_never_read_outside_the_block() {
        // A cheap deterministic generator: every outcome must be Ok or Err, never a panic.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for round in 0..20_000 {
            let mut b = sample();
            for _ in 0..(round % 6 + 1) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let at = (state % 400) as usize;
                b[at] = (state >> 32) as u8;
            }
            let len = 64 + (state >> 40) as usize % 4032;
            let _ = frames(&b[..len]);
            let _ = frames(&b);
        }
    }
}
