//! Integer arrays from Python (offsets, lengths, wire lengths), kept in the caller's integer
//! type: one copy of the caller's data, read element by element while the GIL is released.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::packets::type_name;

/// A one-dimensional integer array in its original element type.
pub enum Indices {
    U64(Vec<u64>),
    I64(Vec<i64>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U8(Vec<u8>),
    I8(Vec<i8>),
}

/// An element that is negative (or does not fit the use it is put to).
#[derive(Clone, Copy, Debug)]
pub struct BadIndex {
    pub index: usize,
    pub value: i128,
}

impl Indices {
    /// A buffer of (un)signed 8- to 64-bit integers (NumPy arrays of any integer dtype,
    /// `array.array`, ...), or any sequence of Python ints.
    pub fn extract(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Indices> {
        let py = obj.py();
        macro_rules! try_buffer {
            ($($t:ty => $variant:ident),*) => {$(
                if let Ok(buf) = PyBuffer::<$t>::get(obj) {
                    if buf.dimensions() > 1 {
                        return Err(PyValueError::new_err(format!(
                            "{what} must be one-dimensional, not {}-dimensional",
                            buf.dimensions()
                        )));
                    }
                    return Ok(Indices::$variant(buf.to_vec(py)?));
                }
            )*};
        }
        try_buffer!(u64 => U64, i64 => I64, u32 => U32, i32 => I32, u16 => U16, i16 => I16,
            u8 => U8, i8 => I8);
        obj.extract::<Vec<i64>>().map(Indices::I64).map_err(|_| {
            PyTypeError::new_err(format!(
                "{what} must be an integer array (NumPy, array.array) or a sequence of ints, not {}",
                type_name(obj)
            ))
        })
    }

    pub fn len(&self) -> usize {
        match self {
            Indices::U64(v) => v.len(),
            Indices::I64(v) => v.len(),
            Indices::U32(v) => v.len(),
            Indices::I32(v) => v.len(),
            Indices::U16(v) => v.len(),
            Indices::I16(v) => v.len(),
            Indices::U8(v) => v.len(),
            Indices::I8(v) => v.len(),
        }
    }

    /// Element `i` (`i < len()`), which must not be negative.
    #[inline]
    pub fn get(&self, i: usize) -> Result<u64, BadIndex> {
        let signed = |v: i64| {
            u64::try_from(v).map_err(|_| BadIndex {
                index: i,
                value: i128::from(v),
            })
        };
        match self {
            Indices::U64(v) => Ok(v[i]),
            Indices::I64(v) => signed(v[i]),
            Indices::U32(v) => Ok(u64::from(v[i])),
            Indices::I32(v) => signed(i64::from(v[i])),
            Indices::U16(v) => Ok(u64::from(v[i])),
            Indices::I16(v) => signed(i64::from(v[i])),
            Indices::U8(v) => Ok(u64::from(v[i])),
            Indices::I8(v) => signed(i64::from(v[i])),
        }
    }

    /// Element `i` as a 32-bit unsigned value.
    #[inline]
    pub fn get_u32(&self, i: usize) -> Result<u32, BadIndex> {
        let v = self.get(i)?;
        u32::try_from(v).map_err(|_| BadIndex {
            index: i,
            value: i128::from(v),
        })
    }
}
