//! `sift.Filter`: a compiled pcap-filter expression.

use pyo3::exceptions::{PyIndexError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::errors::filter_error;
use crate::packets::{bytes_like, index_array, packet, wire_len, wire_lens, Held};
use crate::results::to_array;

/// A packet filter compiled from a pcap-filter (tcpdump) expression, with libpcap 1.10's exact
/// semantics.
///
/// ``Filter(expression, linktype=1, snaplen=262144)`` compiles ``expression`` for packets of
/// link type ``linktype`` (a ``LINKTYPE_*`` number: 1 Ethernet, 101 raw IP, 113 Linux cooked,
/// ...) captured with snapshot length ``snaplen``, as ``tcpdump -r`` does for a capture file
/// with that header. Raises ``sift.FilterError`` (a ``ValueError``) with the position of the
/// problem if the expression is invalid. The empty expression accepts every packet.
///
/// Matching returns what libpcap's ``bpf_filter`` returns: 0 to reject the packet, otherwise the
/// number of bytes to keep (usually ``snaplen``). Filters are immutable and thread-safe; batch
/// methods release the GIL while they run.
#[pyclass(frozen, module = "sift")]
pub struct Filter {
    filter: sift::Filter,
    expression: String,
    linktype: u32,
    snaplen: u32,
}

#[pymethods]
impl Filter {
    #[new]
    #[pyo3(signature = (expression, linktype = 1, snaplen = 262144))]
    fn new(py: Python<'_>, expression: String, linktype: u32, snaplen: u32) -> PyResult<Self> {
        // Compiling a long filter (thousands of hosts) takes a while; let other threads run.
        let compiled = py.detach(|| sift::Filter::compile(&expression, linktype, snaplen));
        match compiled {
            Ok(filter) => Ok(Filter {
                filter,
                expression,
                linktype,
                snaplen,
            }),
            Err(e) => Err(filter_error(py, &e, &expression)),
        }
    }

    /// The expression the filter was compiled from.
    #[getter]
    fn expression(&self) -> &str {
        &self.expression
    }

    /// The link type (``LINKTYPE_*`` number) the filter expects packets of.
    #[getter]
    fn linktype(&self) -> u32 {
        self.linktype
    }

    /// The snapshot length the filter was compiled for (what an accepting filter returns).
    #[getter]
    fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// Runs the filter on one packet: 0 rejects, anything else is the number of bytes to keep.
    ///
    /// ``packet`` is bytes-like (``bytes``, ``bytearray``, ``memoryview``, a ``uint8`` array) or a
    /// ``sift.Record``. ``wirelen`` is the packet's length on the wire; it defaults to the
    /// record's wire length, or to ``len(packet)``. Loads past the captured bytes reject the
    /// packet, as in libpcap.
    #[pyo3(signature = (packet, wirelen = None))]
    fn r#match(&self, packet: &Bound<'_, PyAny>, wirelen: Option<u64>) -> PyResult<u32> {
        let (data, record_wire_len) = crate::packets::packet(packet)?;
        let data = data.as_slice();
        let wire = wire_len(wirelen, record_wire_len, data)?;
        Ok(self.filter.run(data, wire))
    }

    /// ``True`` if the filter accepts the packet (``match(...) != 0``).
    #[pyo3(signature = (packet, wirelen = None))]
    fn matches(&self, packet: &Bound<'_, PyAny>, wirelen: Option<u64>) -> PyResult<bool> {
        Ok(self.r#match(packet, wirelen)? != 0)
    }

    /// Runs the filter on every packet of a sequence, without a Python-level loop.
    ///
    /// ``packets`` is a sequence (list, tuple, ...) of bytes-like objects or ``sift.Record``
    /// objects. ``wirelens`` (optional) gives each packet's wire length (an integer array or
    /// sequence); by default a record's own wire length or the packet's length is used.
    /// Returns an ``array.array('I')`` with one result per packet (``numpy.asarray`` views it
    /// without copying), or fills and returns ``out`` (a writable ``uint32`` buffer of the same
    /// length) if given. The GIL is released while the filter runs.
    #[pyo3(signature = (packets, wirelens = None, *, out = None))]
    fn match_many<'py>(
        &self,
        packets: &Bound<'py, PyAny>,
        wirelens: Option<&Bound<'py, PyAny>>,
        out: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = packets.py();
        let batch = PacketList::extract(packets, wirelens)?;
        let slices = batch.slices();
        let results: Vec<u32> = py.detach(|| {
            slices
                .iter()
                .map(|&(data, wire)| self.filter.run(data, wire))
                .collect()
        });
        to_array(py, &results, out)
    }

    /// Runs the filter on packets stored back to back in one buffer, without a Python-level
    /// loop.
    ///
    /// Packet ``i`` is ``buffer[offsets[i] : offsets[i] + lengths[i]]``. ``buffer`` is bytes-like
    /// (``bytes`` is used in place; other buffers are copied once); ``offsets``, ``lengths`` and
    /// the optional ``wirelens`` are integer arrays (NumPy arrays of any integer type,
    /// ``array.array``) or sequences of ints, all of the same length. ``wirelens`` defaults to
    /// ``lengths``. Returns an ``array.array('I')``, or fills and returns ``out``. The GIL is
    /// released while the filter runs.
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
        let data = bytes_like(buffer, "buffer")?;
        let ranges = packet_ranges(data.as_slice(), offsets, lengths, wirelens)?;
        let data = data.as_slice();
        let results: Vec<u32> = py.detach(|| {
            ranges
                .iter()
                .map(|&(start, end, wire)| self.filter.run(&data[start..end], wire))
                .collect()
        });
        to_array(py, &results, out)
    }

    /// The filter's IR as lowered from the expression (text form; the semantic reference).
    fn ir(&self) -> String {
        self.filter.ir().to_string()
    }

    /// The optimized IR, from which the bytecode is generated (text form).
    fn optimized_ir(&self) -> String {
        self.filter.optimized_ir().to_string()
    }

    /// The verified bytecode the filter runs (text form).
    fn bytecode(&self) -> String {
        self.filter.bytecode().to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "sift.Filter({:?}, linktype={}, snaplen={})",
            self.expression, self.linktype, self.snaplen
        )
    }

    /// Filters pickle as their arguments and are compiled again when unpickled.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let this = slf.get();
        let args = (this.expression.clone(), this.linktype, this.snaplen);
        (slf.get_type(), args).into_pyobject(slf.py())
    }
}

impl Filter {
    pub fn inner(&self) -> &sift::Filter {
        &self.filter
    }
}

/// The packets of a `match_many` call, held so that their bytes can be read without the GIL.
pub struct PacketList<'py> {
    held: Vec<Held<'py>>,
    wire: Vec<u32>,
}

impl<'py> PacketList<'py> {
    pub fn extract(
        packets: &Bound<'py, PyAny>,
        wirelens: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<PacketList<'py>> {
        // A list is walked directly; anything else iterable is walked through its iterator.
        let items: Vec<Bound<'py, PyAny>> = match packets.cast::<PyList>() {
            Ok(list) => list.iter().collect(),
            Err(_) => packets.try_iter()?.collect::<PyResult<_>>()?,
        };
        let py = packets.py();
        let given = wire_lens(wirelens, items.len())?;
        let mut held = Vec::with_capacity(items.len());
        let mut wire = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let (data, record_wire) = packet(item)
                .map_err(|e| PyTypeError::new_err(format!("packets[{i}]: {}", e.value(py))))?;
            let w = wire_len(
                given.as_ref().map(|g| u64::from(g[i])),
                record_wire,
                data.as_slice(),
            )?;
            held.push(data);
            wire.push(w);
        }
        Ok(PacketList { held, wire })
    }

    /// `(bytes, wire length)` per packet; plain slices, so they may cross `Python::detach`.
    pub fn slices(&self) -> Vec<(&[u8], u32)> {
        self.held
            .iter()
            .zip(&self.wire)
            .map(|(h, &w)| (h.as_slice(), w))
            .collect()
    }
}

/// `(start, end, wire length)` per packet of a `match_buffer` call, checked against the buffer.
pub fn packet_ranges(
    data: &[u8],
    offsets: &Bound<'_, PyAny>,
    lengths: &Bound<'_, PyAny>,
    wirelens: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<(usize, usize, u32)>> {
    let offsets = index_array(offsets, "offsets")?;
    let lengths = index_array(lengths, "lengths")?;
    if offsets.len() != lengths.len() {
        return Err(PyValueError::new_err(format!(
            "offsets has {} entries, lengths {}",
            offsets.len(),
            lengths.len()
        )));
    }
    let given = wire_lens(wirelens, offsets.len())?;
    offsets
        .iter()
        .zip(&lengths)
        .enumerate()
        .map(|(i, (&off, &len))| {
            let end = off.checked_add(len).filter(|&e| e <= data.len() as u64);
            let Some(end) = end else {
                return Err(PyIndexError::new_err(format!(
                    "packet {i} (offset {off}, length {len}) runs past the end of the {}-byte buffer",
                    data.len()
                )));
            };
            let wire = match &given {
                Some(g) => g[i],
                None => u32::try_from(len).map_err(|_| {
                    PyOverflowError::new_err(format!(
                        "lengths[{i}] = {len} does not fit 32 bits"
                    ))
                })?,
            };
            // Both fit in usize: end <= data.len().
            Ok((off as usize, end as usize, wire))
        })
        .collect()
}
