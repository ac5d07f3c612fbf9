//! Packet bytes and index arrays taken from Python objects, ready to be used without the GIL.
//!
//! `bytes` objects are immutable, so their contents are borrowed in place and may be read while
//! the GIL is released. Every other buffer (`bytearray`, `memoryview`, NumPy arrays) could be
//! changed by another thread meanwhile, so its contents are copied first: a copy costs far less
//! than a data race, and this crate has no `unsafe` code.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
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

/// A one-dimensional array of non-negative integers: a buffer of (un)signed 8- to 64-bit
/// integers (NumPy arrays, `array.array`), or any sequence of Python ints.
pub fn index_array(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u64>> {
    let py = obj.py();
    macro_rules! try_buffer {
        ($($t:ty),*) => {$(
            if let Ok(buf) = PyBuffer::<$t>::get(obj) {
                if buf.dimensions() > 1 {
                    return Err(PyValueError::new_err(format!(
                        "{what} must be one-dimensional, not {}-dimensional",
                        buf.dimensions()
                    )));
                }
                return buf
                    .to_vec(py)?
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| {
                        u64::try_from(v).map_err(|_| {
                            PyValueError::new_err(format!("{what}[{i}] is negative"))
                        })
                    })
                    .collect();
            }
        )*};
    }
    try_buffer!(u64, u32, i64, i32, u16, i16, u8, i8);
    obj.extract::<Vec<u64>>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be an integer array (NumPy, array.array) or a sequence of non-negative ints, not {}",
            type_name(obj)
        ))
    })
}

/// Optional wire lengths for a batch of `n` packets, checked to fit 32 bits.
pub fn wire_lens(obj: Option<&Bound<'_, PyAny>>, n: usize) -> PyResult<Option<Vec<u32>>> {
    let Some(obj) = obj else { return Ok(None) };
    let values = index_array(obj, "wirelens")?;
    if values.len() != n {
        return Err(PyValueError::new_err(format!(
            "wirelens has {} entries for {n} packets",
            values.len()
        )));
    }
    values
        .into_iter()
        .enumerate()
        .map(|(i, w)| {
            u32::try_from(w).map_err(|_| {
                PyOverflowError::new_err(format!("wirelens[{i}] = {w} does not fit 32 bits"))
            })
        })
        .collect::<PyResult<Vec<u32>>>()
        .map(Some)
}

pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string())
}
