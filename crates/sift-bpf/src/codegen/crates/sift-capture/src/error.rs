//! The error type of this crate: every problem names the byte offset where it was found.

use std::fmt;
use std::io;

/// Something went wrong while reading a capture file.
///
/// Every variant carries `offset`, the byte offset in the input at which the
/// offending structure (file header, record header, block, option, ...) starts,
/// so a user can look at the file with a hex dump. Records before the problem
/// have already been delivered when a reader returns one of these.
#[derive(Debug)]
#[non_exhaustive]
pub enum CaptureError {
    /// The underlying reader failed (not an end-of-file condition).
    Io {
        /// Offset at which the failed read started.
        offset: u64,
        /// The I/O error.
        source: io::Error,
    },
    /// The first four bytes are neither a pcap nor a pcapng magic number.
    BadMagic {
        /// Always 0.
        offset: u64,
        /// The bytes found.
        magic: [u8; 4],
    },
    /// The file header (pcap) or first Section Header Block (pcapng) ends early.
    TruncatedHeader {
        /// Offset of the header.
        offset: u64,
        /// Bytes the header needs.
        expected: u64,
        /// Bytes the file had.
        available: u64,
    },
    /// A version number this reader does not understand.
    UnsupportedVersion {
        /// Offset of the header carrying the version.
        offset: u64,
        /// Major version.
        major: u16,
        /// Minor version.
        minor: u16,
    },
    /// A pcap record header ends early (the file ends within it).
    TruncatedRecordHeader {
        /// Offset of the record header.
        offset: u64,
        /// Bytes the record header needs.
        expected: u64,
        /// Bytes the file had.
        available: u64,
    },
    /// A pcap record's packet data ends early.
    TruncatedRecord {
        /// Offset of the record header.
        offset: u64,
        /// Packet bytes the record header announced.
        expected: u64,
        /// Packet bytes the file had.
        available: u64,
    },
    /// A record's captured length is larger than this link type may ever have
    /// (libpcap: `max_snaplen_for_dlt`, 262144 for most link types).
    RecordTooLarge {
        /// Offset of the record header.
        offset: u64,
        /// The captured length found.
        caplen: u32,
        /// The largest captured length accepted.
        max: u32,
    },
    /// A pcapng packet's captured length is larger than its interface's snapshot length.
    CaplenExceedsSnaplen {
        /// Offset of the packet block.
        offset: u64,
        /// The captured length found.
        caplen: u32,
        /// The interface's (adjusted) snapshot length.
        snaplen: u32,
    },
    /// A pcapng block header ends early.
    TruncatedBlockHeader {
        /// Offset of the block.
        offset: u64,
        /// Bytes the block header needs.
        expected: u64,
        /// Bytes the file had.
        available: u64,
    },
    /// A pcapng block ends early (the file ends before its total length).
    TruncatedBlock {
        /// Offset of the block.
        offset: u64,
        /// The block's total length.
        expected: u64,
        /// Bytes of it the file had.
        available: u64,
    },
    /// A pcapng block total length that cannot be right (too small, not a multiple of 4).
    BadBlockLength {
        /// Offset of the block.
        offset: u64,
        /// Block type.
        block_type: u32,
        /// The length found.
        length: u32,
    },
    /// A pcapng block larger than the sanity bound (16 MiB, more for a few link types).
    BlockTooLarge {
        /// Offset of the block.
        offset: u64,
        /// Block type.
        block_type: u32,
        /// The length found.
        length: u32,
        /// The largest accepted length.
        max: u32,
    },
    /// The total length in a pcapng block's trailer differs from the one in its header.
    BlockLengthMismatch {
        /// Offset of the block.
        offset: u64,
        /// Length in the header.
        header: u32,
        /// Length in the trailer.
        trailer: u32,
    },
    /// A pcapng block's body is too short for the fields it must contain
    /// (fixed fields, announced packet data, or options).
    BlockTooShort {
        /// Offset of the block.
        offset: u64,
        /// Block type.
        block_type: u32,
        /// Body bytes needed.
        needed: u64,
        /// Body bytes available.
        available: u64,
    },
    /// A Section Header Block's byte-order magic is neither 0x1A2B3C4D nor its swap.
    BadByteOrderMagic {
        /// Offset of the Section Header Block.
        offset: u64,
        /// The four bytes found.
        value: [u8; 4],
    },
    /// A packet refers to an interface that has no Interface Description Block
    /// in the current section.
    UnknownInterface {
        /// Offset of the packet block.
        offset: u64,
        /// The interface id in the packet block.
        interface_id: u32,
        /// Number of interfaces defined in the current section.
        defined: u32,
    },
    /// An Interface Description Block option that is malformed.
    BadOption {
        /// Offset of the option (not of its block).
        offset: u64,
        /// Option code.
        code: u16,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl CaptureError {
    /// Byte offset in the input where the problem was found.
    pub fn offset(&self) -> u64 {
        match *self {
            CaptureError::Io { offset, .. }
            | CaptureError::BadMagic { offset, .. }
            | CaptureError::TruncatedHeader { offset, .. }
            | CaptureError::UnsupportedVersion { offset, .. }
            | CaptureError::TruncatedRecordHeader { offset, .. }
            | CaptureError::TruncatedRecord { offset, .. }
            | CaptureError::RecordTooLarge { offset, .. }
            | CaptureError::CaplenExceedsSnaplen { offset, .. }
            | CaptureError::TruncatedBlockHeader { offset, .. }
            | CaptureError::TruncatedBlock { offset, .. }
            | CaptureError::BadBlockLength { offset, .. }
            | CaptureError::BlockTooLarge { offset, .. }
            | CaptureError::BlockLengthMismatch { offset, .. }
            | CaptureError::BlockTooShort { offset, .. }
            | CaptureError::BadByteOrderMagic { offset, .. }
            | CaptureError::UnknownInterface { offset, .. }
            | CaptureError::BadOption { offset, .. } => offset,
        }
    }

    /// True when the error means the input simply ended too early
    /// (a capture that was cut off), as opposed to corrupt contents.
    pub fn is_truncation(&self) -> bool {
        matches!(
            self,
            CaptureError::TruncatedHeader { .. }
                | CaptureError::TruncatedRecordHeader { .. }
                | CaptureError::TruncatedRecord { .. }
                | CaptureError::TruncatedBlockHeader { .. }
                | CaptureError::TruncatedBlock { .. }
        )
    }
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaptureError::Io { offset, source } => {
                write!(f, "offset {offset}: read error: {source}")
            }
            CaptureError::BadMagic { offset, magic } => write!(
                f,
                "offset {offset}: not a pcap or pcapng file (magic bytes {:02x}{:02x}{:02x}{:02x})",
                magic[0], magic[1], magic[2], magic[3]
            ),
            CaptureError::TruncatedHeader {
                offset,
                expected,
                available,
            } => write!(
                f,
                "offset {offset}: truncated file header: need {expected} bytes, file has {available}"
            ),
            CaptureError::UnsupportedVersion {
                offset,
                major,
                minor,
            } => write!(f, "offset {offset}: unsupported file version {major}.{minor}"),
            CaptureError::TruncatedRecordHeader {
                offset,
                expected,
                available,
            } => write!(
                f,
                "offset {offset}: truncated record header: need {expected} bytes, file has {available}"
            ),
            CaptureError::TruncatedRecord {
                offset,
                expected,
                available,
            } => write!(
                f,
                "offset {offset}: truncated record: captured length is {expected} bytes, file has {available}"
            ),
            CaptureError::RecordTooLarge {
                offset,
                caplen,
                max,
            } => write!(
                f,
                "offset {offset}: invalid captured length {caplen}, bigger than the maximum of {max}"
            ),
            CaptureError::CaplenExceedsSnaplen {
                offset,
                caplen,
                snaplen,
            } => write!(
                f,
                "offset {offset}: invalid captured length {caplen}, bigger than the interface's snapshot length {snaplen}"
            ),
            CaptureError::TruncatedBlockHeader {
                offset,
                expected,
                available,
            } => write!(
                f,
                "offset {offset}: truncated pcapng block header: need {expected} bytes, file has {available}"
            ),
            CaptureError::TruncatedBlock {
                offset,
                expected,
                available,
            } => write!(
                f,
                "offset {offset}: truncated pcapng block: block length is {expected} bytes, file has {available}"
            ),
            CaptureError::BadBlockLength {
                offset,
                block_type,
                length,
            } => write!(
                f,
                "offset {offset}: pcapng block of type {block_type:#x} has invalid length {length}"
            ),
            CaptureError::BlockTooLarge {
                offset,
                block_type,
                length,
                max,
            } => write!(
                f,
                "offset {offset}: pcapng block of type {block_type:#x} has length {length}, more than the maximum of {max}"
            ),
            CaptureError::BlockLengthMismatch {
                offset,
                header,
                trailer,
            } => write!(
                f,
                "offset {offset}: pcapng block length {header} in header differs from {trailer} in trailer"
            ),
            CaptureError::BlockTooShort {
                offset,
                block_type,
                needed,
                available,
            } => write!(
                f,
                "offset {offset}: pcapng block of type {block_type:#x} is too short: needs {needed} body bytes, has {available}"
            ),
            CaptureError::BadByteOrderMagic { offset, value } => write!(
                f,
                "offset {offset}: bad byte-order magic {:02x}{:02x}{:02x}{:02x} in section header",
                value[0], value[1], value[2], value[3]
            ),
            CaptureError::UnknownInterface {
                offset,
                interface_id,
                defined,
            } => write!(
                f,
                "offset {offset}: packet on interface {interface_id}, but the section defines only {defined} interface(s)"
            ),
            CaptureError::BadOption {
                offset,
                code,
                reason,
            } => write!(f, "offset {offset}: bad option {code}: {reason}"),
        }
    }
}

impl std::error::Error for CaptureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CaptureError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Why a pcap writer could not be set up to match tcpdump's output.
#[derive(Debug)]
#[non_exhaustive]
pub enum WriterError {
    /// The capture declares no link type (a pcapng file without any
    /// Interface Description Block); tcpdump refuses to read such a file.
    NoLinkType,
    /// tcpdump (libpcap 1.10) cannot write this link type to a pcap file
    /// ("unknown data link type").
    UnsupportedLinkType {
        /// The link type of the input.
        linktype: u32,
    },
    /// Writing the file header failed.
    Io(io::Error),
}

impl fmt::Display for WriterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriterError::NoLinkType => {
                write!(f, "the capture has no interface, so no link type to write")
            }
            WriterError::UnsupportedLinkType { linktype } => write!(
                f,
                "link type {linktype} cannot be written to a pcap file by tcpdump"
            ),
            WriterError::Io(e) => write!(f, "cannot write pcap header: {e}"),
        }
    }
}

impl std::error::Error for WriterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WriterError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for WriterError {
    fn from(e: io::Error) -> Self {
        WriterError::Io(e)
    }
}
