//! `sift.Demux`: many filters matched in one pass per packet (`sift-demux`).
//!
//! The writer (`sift::Demux`) sits behind a mutex, taken only by `insert` and `remove`;
//! matching goes through a `sift::demux::Reader`, which never blocks and sees each update whole,
//! so one thread may match (with the GIL released) while another installs filters.

use std::cell::RefCell;
use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sift::demux::{Delivery, FilterId, Matches, Placement, Reader};

use crate::batch::{BufferBatch, PacketList};
use crate::errors::filter_error;
use crate::packets::wire_len;
use crate::results::to_array;

thread_local! {
    /// Matching scratch space, one per thread (matching then allocates nothing).
    static SCRATCH: RefCell<Matches> = RefCell::new(Matches::new());
}

/// Many filters, one pass per packet: which installed filters receive a packet.
///
/// ``Demux(linktype=1, snaplen=262144, *, extensions=False)`` starts empty; ``insert`` compiles an expression for
/// that link type and installs it with a priority. Filters are tried by decreasing priority,
/// ties broken by insertion order (earlier first). An accepting filter inserted with
/// ``copy=False`` (exclusive) receives the packet and ends the walk; one inserted with
/// ``copy=True`` receives a copy and the walk continues (CSPF's delivery rule). The result is
/// exactly what running every filter alone in that order would give; filters of the same shape
/// (per-connection filters, say) cost one hash lookup together, whatever their number.
///
/// Ids are positive ints, never reused. Matching releases the GIL in batches and may run in
/// several threads while another thread inserts or removes filters: each match sees the set
/// of filters before or after an update, never a mixture.
#[pyclass(frozen, module = "sift")]
pub struct Demux {
    writer: Mutex<sift::Demux>,
    reader: Reader,
    linktype: u32,
    snaplen: u32,
    extensions: bool,
}

/// Compile options for expressions given to `Filter` and `Demux`.
pub(crate) fn options(linktype: u32, snaplen: u32, extensions: bool) -> sift::Options {
    let mut o = sift::Options::new(linktype, snaplen);
    o.extensions = extensions;
    o
}

impl Demux {
    fn writer(&self) -> PyResult<MutexGuard<'_, sift::Demux>> {
        self.writer
            .lock()
            .map_err(|_| PyRuntimeError::new_err("an earlier update of this Demux panicked"))
    }

    /// The highest-ranked filter that receives the packet (0 if none).
    fn best(&self, data: &[u8], wire: u32) -> u64 {
        SCRATCH.with(|m| {
            let mut m = m.borrow_mut();
            self.reader.match_packet(data, wire, &mut m);
            m.delivered().first().map_or(0, |id| id.0)
        })
    }
}

#[pymethods]
impl Demux {
    #[new]
    #[pyo3(signature = (linktype = 1, snaplen = 262144, *, extensions = false))]
    fn new(linktype: u32, snaplen: u32, extensions: bool) -> Self {
        let writer = sift::Demux::with_options(options(linktype, snaplen, extensions));
        let reader = writer.reader();
        Demux {
            writer: Mutex::new(writer),
            reader,
            linktype,
            snaplen,
            extensions,
        }
    }

    /// The link type (``LINKTYPE_*`` number) expressions are compiled for.
    #[getter]
    fn linktype(&self) -> u32 {
        self.linktype
    }

    /// The snapshot length expressions are compiled for.
    #[getter]
    fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// Compiles ``expression`` and installs it; returns its id (a positive int).
    ///
    /// Higher ``priority`` filters are tried first. ``copy=True`` makes the filter receive a
    /// copy of the packets it accepts without stopping the walk. Raises ``sift.FilterError``
    /// for an invalid expression.
    #[pyo3(signature = (expression, priority = 0, copy = false))]
    fn insert(&self, py: Python<'_>, expression: &str, priority: i32, copy: bool) -> PyResult<u64> {
        // Compiled before the update lock is taken: other updates wait only for the insert.
        let options = options(self.linktype, self.snaplen, self.extensions);
        let ir = py
            .detach(|| sift::compile_optimized_ir(expression, &options))
            .map_err(|e| filter_error(py, &e, expression))?;
        let delivery = if copy {
            Delivery::Copy
        } else {
            Delivery::Exclusive
        };
        let id = py.detach(|| -> PyResult<FilterId> {
            let mut writer = self.writer()?;
            writer
                .insert_ir(&ir, priority, delivery)
                .map_err(|e| PyValueError::new_err(format!("{expression:?}: {e}")))
        })?;
        Ok(id.0)
    }

    /// Removes the filter ``id``; ``False`` if there is no such filter.
    fn remove(&self, py: Python<'_>, id: u64) -> PyResult<bool> {
        py.detach(|| Ok(self.writer()?.remove(FilterId(id))))
    }

    /// The number of installed filters.
    fn __len__(&self) -> PyResult<usize> {
        Ok(self.writer()?.len())
    }

    fn __contains__(&self, id: u64) -> PyResult<bool> {
        Ok(self.writer()?.placement(FilterId(id)).is_some())
    }

    /// The id of the highest-ranked filter that receives the packet, or 0 if none does.
    ///
    /// ``packet`` is bytes-like or a ``sift.Record``; ``wirelen`` defaults to the record's wire
    /// length or ``len(packet)``.
    #[pyo3(signature = (packet, wirelen = None))]
    fn r#match(&self, packet: &Bound<'_, PyAny>, wirelen: Option<u64>) -> PyResult<u64> {
        let (data, record_wire) = crate::packets::packet(packet)?;
        let wire = wire_len(wirelen, record_wire, data.as_slice())?;
        Ok(self.best(data.as_slice(), wire))
    }

    /// The ids of every filter that receives the packet, in matching order: the accepting
    /// copy filters ranked before the first accepting exclusive filter, then that filter.
    /// With ``all=True``, every accepting filter, exclusive or not.
    #[pyo3(signature = (packet, wirelen = None, *, all = false))]
    fn deliver(
        &self,
        packet: &Bound<'_, PyAny>,
        wirelen: Option<u64>,
        all: bool,
    ) -> PyResult<Vec<u64>> {
        let (data, record_wire) = crate::packets::packet(packet)?;
        let wire = wire_len(wirelen, record_wire, data.as_slice())?;
        Ok(SCRATCH.with(|m| {
            let mut m = m.borrow_mut();
            if all {
                self.reader.match_all(data.as_slice(), wire, &mut m);
            } else {
                self.reader.match_packet(data.as_slice(), wire, &mut m);
            }
            m.delivered().iter().map(|id| id.0).collect()
        }))
    }

    /// ``match`` for every packet of a sequence (bytes-like objects or records), without a
    /// Python-level loop and with the GIL released. Returns an ``array.array('Q')`` of ids (0:
    /// no filter), or fills and returns ``out`` (a writable ``uint64`` buffer).
    #[pyo3(signature = (packets, wirelens = None, *, out = None))]
    fn match_many<'py>(
        &self,
        packets: &Bound<'py, PyAny>,
        wirelens: Option<&Bound<'py, PyAny>>,
        out: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = packets.py();
        let batch = PacketList::extract(packets, wirelens)?;
        let ids: Vec<u64> = batch.run(py, |data, wire| self.best(data, wire));
        to_array(py, &ids, out)
    }

    /// ``match`` for packets stored back to back in one buffer (as ``Filter.match_buffer``),
    /// with the GIL released. Returns an ``array.array('Q')`` of ids, or fills ``out``.
    #[pyo3(signature = (buffer, offsets, lengths, wirelens = None, *, out = None))]
    fn match_buffer<'py>(
        &self,
        buffer: &Bound<'py, PyAny>,
        offsets: &Bound<'py, PyAny>,
        lengths: &Bound<'py, PyAny>,
        wirelens: Option<&Bound<'py, PyAny>>,
        out: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = buffer.py();
        let batch = BufferBatch::extract(buffer, offsets, lengths, wirelens)?;
        let ids: Vec<u64> = batch.run(py, |data, wire| self.best(data, wire))?;
        to_array(py, &ids, out)
    }

    /// How filter ``id`` is represented: ``"keyed"`` (decomposed into hashed paths) or
    /// ``"residual"`` (run whole), or ``None`` for an unknown id.
    fn placement(&self, id: u64) -> PyResult<Option<&'static str>> {
        Ok(self.writer()?.placement(FilterId(id)).map(|p| match p {
            Placement::Keyed { .. } => "keyed",
            Placement::Residual(_) => "residual",
        }))
    }

    /// Counts describing the merged structure: ``filters``, ``shapes`` (one extraction and
    /// one lookup each per packet), ``keys``, ``residuals`` (filters run whole),
    /// ``table_bytes``.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.writer()?.stats();
        let d = PyDict::new(py);
        d.set_item("filters", s.filters)?;
        d.set_item("shapes", s.shapes)?;
        d.set_item("keys", s.keys)?;
        d.set_item("residuals", s.residuals)?;
        d.set_item("table_bytes", s.table_bytes)?;
        Ok(d)
    }

    fn __repr__(&self) -> PyResult<String> {
        Ok(format!(
            "sift.Demux(linktype={}, snaplen={}) with {} filters",
            self.linktype,
            self.snaplen,
            self.__len__()?
        ))
    }
}
