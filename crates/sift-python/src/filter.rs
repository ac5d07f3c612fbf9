//! `sift.Filter`: a compiled pcap-filter expression.

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::batch::{BufferBatch, PacketList};
use crate::errors::filter_error;
use crate::packets::wire_len;
use crate::results::to_array;

/// A packet filter compiled from a pcap-filter (tcpdump) expression, with libpcap 1.10's exact
/// semantics.
///
/// ``Filter(expression, linktype=1, snaplen=262144)`` compiles ``expression`` for packets of
/// link type ``linktype`` (a ``LINKTYPE_*`` number: 1 Ethernet, 101 raw IP, 113 Linux cooked,
/// ...) captured with snapshot length ``snaplen``, as ``tcpdump -r`` does for a capture file
/// with that header. Raises ``sift.FilterError`` (a ``ValueError``) with the position of the
/// problem if the expression is invalid. The empty expression accepts every packet.
/// ``extensions=True`` (``Filter(expression, linktype, snaplen, extensions)``) accepts sift's payload tests and sets (``docs/extensions.md``).
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
    extensions: bool,
}

#[pymethods]
impl Filter {
    #[new]
    #[pyo3(signature = (expression, linktype = 1, snaplen = 262144, extensions = false))]
    fn new(
        py: Python<'_>,
        expression: String,
        linktype: u32,
        snaplen: u32,
        extensions: bool,
    ) -> PyResult<Self> {
        let options = crate::demux::options(linktype, snaplen, extensions);
        // Compiling a long filter (thousands of hosts) takes a while; let other threads run.
        let compiled = py.detach(|| sift::Filter::compile_with(&expression, &options));
        match compiled {
            Ok(filter) => Ok(Filter {
                filter,
                expression,
                linktype,
                snaplen,
                extensions,
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
        let results = batch.run(py, |data, wire| self.filter.run(data, wire));
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
        let batch = BufferBatch::extract(buffer, offsets, lengths, wirelens)?;
        let results = batch.run(py, |data, wire| self.filter.run(data, wire))?;
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
        let extensions = if self.extensions {
            ", extensions=True"
        } else {
            ""
        };
        format!(
            "sift.Filter({:?}, linktype={}, snaplen={}{extensions})",
            self.expression, self.linktype, self.snaplen
        )
    }

    /// Filters pickle as their arguments and are compiled again when unpickled.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let this = slf.get();
        let args = (
            this.expression.clone(),
            this.linktype,
            this.snaplen,
            this.extensions,
        );
        (slf.get_type(), args).into_pyobject(slf.py())
    }
}

impl Filter {
    pub fn inner(&self) -> &sift::Filter {
        &self.filter
    }
}
