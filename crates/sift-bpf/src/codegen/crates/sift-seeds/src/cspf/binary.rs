//! Reading CSPF programs as binary word arrays.
//!
//! [`decode_words`] reads an array of 16-bit words in a byte order the caller names: big-endian
//! (network order, for a file meant to be portable) or little-endian (the layout of an
//! `enf_Filter` array in the memory of a VAX or an x86; [`ByteOrder::NATIVE`] is this machine's).
//! [`parse_enfilter_image`] reads the bytes of a whole `struct enfilter` (priority byte, length
//! byte, then the words). Errors name the offending word by index.

use std::fmt;

use super::program::{Limits, Program, ProgramError};

/// The byte order of 16-bit words in a binary program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteOrder {
    Big,
    Little,
}

impl ByteOrder {
    /// The order of this machine's memory (how a C program's `u_short` array is laid out).
    pub const NATIVE: ByteOrder = if cfg!(target_endian = "big") {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    };
}

/// A binary program that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BinaryError {
    /// The byte count is odd: the last word is incomplete.
    OddLength { len: usize },
    /// A `struct enfilter` image shorter than its header or than its length field says.
    Truncated { needed: usize, len: usize },
    /// A static check failed at a word (counted from the first filter word).
    Program(ProgramError),
}

impl fmt::Display for BinaryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BinaryError::OddLength { len } => {
                write!(f, "{len} bytes is not a whole number of 16-bit words")
            }
            BinaryError::Truncated { needed, len } => {
                write!(f, "struct enfilter needs {needed} bytes, got {len}")
            }
            BinaryError::Program(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for BinaryError {}

/// Splits bytes into 16-bit words.
pub fn decode_words(bytes: &[u8], order: ByteOrder) -> Result<Vec<u16>, BinaryError> {
    if !bytes.chunks_exact(2).remainder().is_empty() {
        return Err(BinaryError::OddLength { len: bytes.len() });
    }
    Ok(bytes
        .chunks_exact(2)
        .map(|c| match order {
            ByteOrder::Big => u16::from_be_bytes([c[0], c[1]]),
            ByteOrder::Little => u16::from_le_bytes([c[0], c[1]]),
        })
        .collect())
}

/// Encodes words in the given byte order (the inverse of [`decode_words`]).
pub fn encode_words(words: &[u16], order: ByteOrder) -> Vec<u8> {
    words
        .iter()
        .flat_map(|w| match order {
            ByteOrder::Big => w.to_be_bytes(),
            ByteOrder::Little => w.to_le_bytes(),
        })
        .collect()
}

/// Reads a bare word array and checks it as a program with the given priority.
pub fn parse_binary(
    bytes: &[u8],
    order: ByteOrder,
    priority: u8,
    limits: &Limits,
) -> Result<Program, BinaryError> {
    let words = decode_words(bytes, order)?;
    Program::with_limits(priority, words, limits).map_err(BinaryError::Program)
}

/// Reads the bytes of a `struct enfilter`: `enf_Priority` and `enf_FilterLen` (one byte each),
/// then `enf_FilterLen` words. Bytes after those words (the unused rest of `enf_Filter`) are
/// ignored.
pub fn parse_enfilter_image(
    bytes: &[u8],
    order: ByteOrder,
    limits: &Limits,
) -> Result<Program, BinaryError> {
    let &[priority, len, ..] = bytes else {
        return Err(BinaryError::Truncated {
            needed: 2,
            len: bytes.len(),
        });
    };
    let needed = 2 + 2 * usize::from(len);
    let Some(body) = bytes.get(2..needed) else {
        return Err(BinaryError::Truncated {
            needed,
            len: bytes.len(),
        });
    };
    parse_binary(body, order, priority, limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_forms() {
        let words = [17u16, 1 | 1 << 10, 2];
        for order in [ByteOrder::Big, ByteOrder::Little] {
            let bytes = encode_words(&words, order);
            assert_eq!(decode_words(&bytes, order).unwrap(), words);
            let p = parse_binary(&bytes, order, 5, &Limits::default()).unwrap();
            assert_eq!(p.words(), &words);
            let mut image = vec![9, 3];
            image.extend(&bytes);
            image.extend([0; 10]);
            let p = parse_enfilter_image(&image, order, &Limits::default()).unwrap();
            assert_eq!((p.priority(), p.words()), (9, &words[..]));
        }
        assert_eq!(
            decode_words(&[1, 2, 3], ByteOrder::Big),
            Err(BinaryError::OddLength { len: 3 })
        );
        assert!(matches!(
            parse_enfilter_image(&[1, 4, 0, 17], ByteOrder::Big, &Limits::default()),
            Err(BinaryError::Truncated { needed: 10, len: 4 })
        ));
        let e = parse_binary(&[0, 3, 4, 0], ByteOrder::Big, 0, &Limits::default());
        assert!(matches!(e, Err(BinaryError::Program(p)) if p.word == 1));
    }
}
