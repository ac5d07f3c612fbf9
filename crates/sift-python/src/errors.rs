//! Rust errors as the package's Python exceptions.
//!
//! The exception classes are defined in Python (`sift/_errors.py`), so that they have ordinary
//! constructors, docstrings and pickling; this module builds instances of them carrying the
//! positions the Rust errors know.

use pyo3::prelude::*;
use sift_capture::CaptureError;

/// The Python class `name` from `sift._errors`.
fn error_class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("sift._errors")?.getattr(name)
}

/// The number of characters of `text` before byte offset `byte` (Python indexes strings by
/// code point, the Rust spans count bytes). An offset inside a character counts that character
/// as not yet reached; offsets past the end count the whole text.
pub fn char_column(text: &str, byte: usize) -> usize {
    let mut end = byte.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].chars().count()
}

/// A `sift.FilterError` for an expression `sift::Filter::compile` refused.
pub fn filter_error(py: Python<'_>, err: &sift::Error, expression: &str) -> PyErr {
    let kind = match err {
        sift::Error::Syntax(_) => "syntax",
        sift::Error::Semantic(_) => "semantic",
        sift::Error::InvalidIr(_) => "invalid-ir",
        sift::Error::Codegen(_) => "codegen",
        sift::Error::Optimizer(_) => "internal",
    };
    let (start, end) = match err.span() {
        Some(span) => (
            Some(char_column(expression, span.start)),
            Some(char_column(expression, span.end)),
        ),
        None => (None, None),
    };
    let rendered = err.render(expression);
    let message = err.to_string();
    let build = || -> PyResult<PyErr> {
        let value = error_class(py, "FilterError")?
            .call1((message, expression, start, end, rendered, kind))?;
        Ok(PyErr::from_value(value))
    };
    build().unwrap_or_else(|e| e)
}

/// A Python exception for a capture file problem: `OSError` (or a subclass such as
/// `FileNotFoundError`) for the operating system's errors, `sift.CaptureError` with the byte
/// offset for a file that is not a valid capture.
pub fn capture_error(py: Python<'_>, err: CaptureError, path: &str) -> PyErr {
    let offset = err.offset();
    let truncated = err.is_truncation();
    let message = err.to_string();
    if let CaptureError::Io { source, .. } = err {
        return PyErr::from(source);
    }
    let build = || -> PyResult<PyErr> {
        let value = error_class(py, "CaptureError")?.call1((message, path, offset, truncated))?;
        Ok(PyErr::from_value(value))
    };
    build().unwrap_or_else(|e| e)
}
