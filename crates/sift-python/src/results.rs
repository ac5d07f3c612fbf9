//! Batch results handed back to Python.
//!
//! A batch returns an `array.array('I')` (unsigned 32-bit integers, one per packet): it needs no
//! third-party package, supports the buffer protocol (so `numpy.asarray(result)` is a zero-copy
//! NumPy view), and its type does not depend on what happens to be installed. Callers that want
//! the results in an existing array (a preallocated NumPy `uint32` array, say) pass it as `out`.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::packets::type_name;

/// `values` as a new `array.array('I')`, or written into `out` (returned).
pub fn to_array<'py>(
    py: Python<'py>,
    values: &[u32],
    out: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(out) = out {
        let buf = PyBuffer::<u32>::get(&out).map_err(|_| {
            PyTypeError::new_err(format!(
                "out must be a writable buffer of unsigned 32-bit integers (numpy.uint32, array('I')), not {}",
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
    let array = py.import("array")?.getattr("array")?.call1(("I",))?;
    let itemsize: usize = array.getattr("itemsize")?.extract()?;
    if itemsize != 4 {
        // No platform CPython runs on has another `unsigned int` size, but say so if one does.
        return Err(PyTypeError::new_err(format!(
            "array('I') has {itemsize}-byte items on this platform; pass out="
        )));
    }
    let bytes = PyBytes::new_with(py, values.len() * 4, |buf| {
        for (chunk, v) in buf.chunks_exact_mut(4).zip(values) {
            chunk.copy_from_slice(&v.to_ne_bytes());
        }
        Ok(())
    })?;
    array.call_method1("frombytes", (bytes,))?;
    Ok(array)
}
