//! A byte source that knows its offset and never trusts a length field with
//! an up-front allocation.

use std::io::{self, Read};

use crate::error::CaptureError;

/// How many bytes to reserve up front when a length field asks for more;
/// beyond this the buffer grows only as data actually arrives.
const RESERVE_LIMIT: u64 = 64 * 1024;

/// Byte order of a file or pcapng section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// Little-endian.
    Little,
    /// Big-endian.
    Big,
}

impl ByteOrder {
    /// The byte order of the machine running this code.
    pub const NATIVE: ByteOrder = if cfg!(target_endian = "big") {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    };

    pub(crate) fn u16(self, b: &[u8]) -> u16 {
        let a = [b[0], b[1]];
        match self {
            ByteOrder::Little => u16::from_le_bytes(a),
            ByteOrder::Big => u16::from_be_bytes(a),
        }
    }

    pub(crate) fn u32(self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        match self {
            ByteOrder::Little => u32::from_le_bytes(a),
            ByteOrder::Big => u32::from_be_bytes(a),
        }
    }

    pub(crate) fn u64(self, b: &[u8]) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        match self {
            ByteOrder::Little => u64::from_le_bytes(a),
            ByteOrder::Big => u64::from_be_bytes(a),
        }
    }
}

/// Wraps a reader and counts the bytes consumed.
#[derive(Debug)]
pub(crate) struct Input<R> {
    inner: R,
    offset: u64,
}

impl<R: Read> Input<R> {
    pub(crate) fn new(inner: R) -> Input<R> {
        Input { inner, offset: 0 }
    }

    /// Bytes consumed so far.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    pub(crate) fn get_ref(&self) -> &R {
        &self.inner
    }

    pub(crate) fn into_inner(self) -> R {
        self.inner
    }

    fn io_error(&self, source: io::Error) -> CaptureError {
        CaptureError::Io {
            offset: self.offset,
            source,
        }
    }

    /// Fills `buf` as far as the input allows; returns how many bytes were read
    /// (less than `buf.len()` only at end of input).
    pub(crate) fn fill(&mut self, buf: &mut [u8]) -> Result<usize, CaptureError> {
        let mut done = 0;
        while done < buf.len() {
            match self.inner.read(&mut buf[done..]) {
                Ok(0) => break,
                Ok(n) => {
                    done += n;
                    self.offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_error(e)),
            }
        }
        Ok(done)
    }

    /// Appends up to `n` bytes to `out`; returns how many were read (less than
    /// `n` only at end of input). Memory grows with the data actually read,
    /// not with `n`.
    pub(crate) fn read_into(&mut self, n: u64, out: &mut Vec<u8>) -> Result<u64, CaptureError> {
        out.reserve(n.min(RESERVE_LIMIT) as usize);
        let start = out.len();
        let result = (&mut self.inner).take(n).read_to_end(out);
        let got = (out.len() - start) as u64;
        self.offset += got;
        match result {
            Ok(_) => Ok(got),
            Err(e) => Err(self.io_error(e)),
        }
    }

    /// Skips up to `n` bytes; returns how many were skipped.
    pub(crate) fn skip(&mut self, n: u64) -> Result<u64, CaptureError> {
        let result = io::copy(&mut (&mut self.inner).take(n), &mut io::sink());
        match result {
            Ok(got) => {
                self.offset += got;
                Ok(got)
            }
            Err(e) => Err(self.io_error(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_offsets() {
        let data = [1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        let mut input = Input::new(&data[..]);
        let mut b = [0u8; 3];
        assert_eq!(input.fill(&mut b).unwrap(), 3);
        assert_eq!(input.offset(), 3);
        assert_eq!(input.skip(2).unwrap(), 2);
        let mut v = Vec::new();
        assert_eq!(input.read_into(100, &mut v).unwrap(), 5);
        assert_eq!(v, [6, 7, 8, 9, 10]);
        assert_eq!(input.offset(), 10);
        assert_eq!(input.fill(&mut b).unwrap(), 0);
    }

    #[test]
    fn huge_length_does_not_allocate() {
        let data = [0u8; 4];
        let mut input = Input::new(&data[..]);
        let mut v = Vec::new();
        assert_eq!(input.read_into(u64::MAX, &mut v).unwrap(), 4);
        assert!(v.capacity() <= RESERVE_LIMIT as usize * 2);
    }

    #[test]
    fn byte_orders() {
        let b = [1u8, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(ByteOrder::Little.u16(&b), 0x0201);
        assert_eq!(ByteOrder::Big.u32(&b), 0x0102_0304);
        assert_eq!(ByteOrder::Big.u64(&b), 0x0102_0304_0506_0708);
    }
}
