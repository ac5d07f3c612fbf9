//! Batch results handed back to Python.
//!
//! A batch returns an `array.array` (typecode `'I'`, unsigned 32-bit, for filter results; `'Q'`,
//! unsigned 64-bit, for demultiplexer ids), one entry per packet: it needs no third-party
//! package, supports the buffer protocol (so `numpy.asarray(result)` is a zero-copy NumPy view),
//! and its type does not depend on what happens to be installed. Callers that want the results
//! in an existing array (a preallocated NumPy array, say) pass it as `out`.

use pyo3::buffer::{Element, PyBuffer};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::packets::type_name;

/// An element type of result arrays.
pub trait ResultItem: Element + Copy {
    /// The `array.array` typecode.
    const TYPECODE: &'static str;
    /// The NumPy dtype name, for error messages.
    const DTYPE: &'static str;
    const SIZE: usize;
    fn write_ne(self, out: &mut [u8]);
}

impl ResultItem for u32 {
    const TYPECODE: &'static str = "I";
    const DTYPE: &'static str = "uint32";
    const SIZE: usize = 4;
    fn write_ne(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_ne_bytes());
    }
}

impl ResultItem for u64 {
    const TYPECODE: &'static str = "Q";
    const DTYPE: &'static str = "uint64";
    const SIZE: usize = 8;
    fn write_ne(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_ne_bytes());
    }
}

/// `values` as a new `array.array`, or written into `out` (returned).
pub fn to_array<'py, T: ResultItem>(
    py: Python<'py>,
    values: &[T],
    out: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(out) = out {
        let buf = PyBuffer::<T>::get(&out).map_err(|_| {
            PyTypeError::new_err(format!(
                "out must be a writable buffer of {} (numpy.{}, array('{}')), not {}",
                T::DTYPE,
                T::DTYPE,
                T::TYPECODE,
                type_name(&out)
            ))
        })?;
        if buf.readonly() {
            return Err(PyValueError::new_err("out is read-only"));
        }
        if buf.item_count() != values.len() {
            return Err(PyValueError::new_err(format!(
                "out has {} entries for {} packets",
                buf.item_count(),
                values.len()
            )));
        }
        buf.copy_from_slice(py, values)?;
        return Ok(out);
    }
    let array = py
        .import("array")?
        .getattr("array")?
        .call1((T::TYPECODE,))?;
    let itemsize: usize = array.getattr("itemsize")?.extract()?;
    if itemsize != T::SIZE {
        // No platform CPython runs on has other sizes, but say so if one does.
        return Err(PyTypeError::new_err(format!(
            "array('{}') has {itemsize}-byte items on this platform; pass out=",
            T::TYPECODE
        )));
    }
    let bytes = PyBytes::new_with(py, values.len() * T::SIZE, |buf| {
        for (chunk, &v) in buf.chunks_exact_mut(T::SIZE).zip(values) {
            v.write_ne(chunk);
        }
        Ok(())
    })?;
    array.call_method1("frombytes", (bytes,))?;
    Ok(array)
}
