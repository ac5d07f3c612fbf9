//! The native module of the `sift` Python package (`sift._sift`).
//!
//! sift compiles pcap-filter (tcpdump) expressions with libpcap 1.10's exact semantics and runs
//! them as verified bytecode. This crate sits on top of the pipeline: it exposes the facade's
//! [`sift::Filter`] as `sift.Filter` (per packet, and in batches that run without the GIL and
//! without a Python-level loop), and [`sift_capture`]'s reader and writer as
//! `sift.read_capture` / `sift.CaptureWriter`, and the facade's [`sift::Demux`] as
//! `sift.Demux`. Errors become Python exceptions that keep their positions: `sift.FilterError`
//! (columns in the expression and the caret rendering) and `sift.CaptureError` (byte offset in
//! the file).
//!
//! The pure-Python part of the package (`python/sift/`: re-exports, the exception classes, type
//! stubs) and its pytest suite live at the repository root; `pip install .` builds this crate
//! with maturin (`pyproject.toml`). Its tests are in Python (`scripts/test-python`), because a
//! Rust test harness for an extension module would need libpython to link.

#![forbid(unsafe_code)]

mod batch;
mod capture;
mod demux;
mod errors;
mod filter;
mod indices;
mod packets;
mod results;

use pyo3::prelude::*;

#[pymodule]
fn _sift(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<filter::Filter>()?;
    m.add_class::<capture::Record>()?;
    m.add_class::<capture::CaptureReader>()?;
    m.add_class::<capture::CaptureWriter>()?;
    m.add_class::<demux::Demux>()?;
    m.add_function(wrap_pyfunction!(capture::read_capture, m)?)?;
    Ok(())
}
