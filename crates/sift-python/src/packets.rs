//! Packet bytes and index arrays taken from Python objects, ready to be used without the GIL.
//!
//! `bytes` objects are immutable, so their contents are borrowed in place and may be read while
//! the GIL is released. Every other buffer (`bytearray`, `memoryview`, NumPy arrays) could be
//! changed by another thread meanwhile, so its contents are copied first: a copy costs far less
//! than a data race, and this crate has no `unsafe` code.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::capture::Record;

/// The bytes of one packet: borrowed from a `bytes` object, or copied from another buffer.
pub enum Held<'py> {
    Bytes(Bound<'py, PyBytes>),
    Copied(Vec<u8>),
}

impl Held<'_> {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Held::Bytes(b) => b.as_bytes(),
            Held::Copied(v) => v,
        }
    }
}

/// The bytes of a bytes-like object (anything with the buffer protocol and one-byte items).
pub fn bytes_like<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Held<'py>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Held::Bytes(b.clone()));
    }
    match PyBuffer::<u8>::get(obj) {
        Ok(buf) => Ok(Held::Copied(buf.to_vec(obj.py())?)),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{what} must be bytes-like (bytes, bytearray, memoryview or a uint8 array), not {}",
            type_name(obj)
        ))),
    }
}

/// A packet argument: a bytes-like object, or a `sift.Record` (which brings its wire length).
pub fn packet<'py>(obj: &Bound<'py, PyAny>) -> PyResult<(Held<'py>, Option<u32>)> {
    if let Ok(record) = obj.cast::<Record>() {
        let record = record.get();
        return Ok((
            Held::Bytes(record.data.bind(obj.py()).clone()),
            Some(record.wire_len),
        ));
    }
    Ok((bytes_like(obj, "a packet")?, None))
}

/// The wire length to use: the one given, else the record's, else the captured length.
pub fn wire_len(given: Option<u64>, from_record: Option<u32>, data: &[u8]) -> PyResult<u32> {
    match (given, from_record) {
        (Some(w), _) => u32::try_from(w)
            .map_err(|_| PyOverflowError::new_err(format!("wirelen {w} does not fit 32 bits"))),
        (None, Some(w)) => Ok(w),
        (None, None) => u32::try_from(data.len())
            .map_err(|_| PyOverflowError::new_err("packet longer than 4 GiB")),
    }
}

pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string())
}
