//! Capture files: `sift.Record`, `sift.CaptureReader` (`sift.read_capture`) and
//! `sift.CaptureWriter`, over `sift-capture`.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyTuple};
use sift_capture::{Format, PcapWriter, Resolution, Timestamp, TsResolution};

use crate::errors::capture_error;
use crate::packets::{bytes_like, type_name, wire_len};

const NANOS_PER_SEC: i128 = 1_000_000_000;

/// One captured packet.
///
/// ``Record(data, timestamp=None, *, timestamp_ns=None, wirelen=None, linktype=1,
/// interface_id=0)`` builds one (``timestamp`` in seconds as a float or int, or
/// ``timestamp_ns`` as integer nanoseconds; ``wirelen`` defaults to ``len(data)``). Records read
/// from a file keep their time stamp exactly as the file stored it, so writing them back out
/// reproduces the file.
#[pyclass(frozen, module = "sift")]
pub struct Record {
    pub data: Py<PyBytes>,
    pub timestamp: Timestamp,
    pub wire_len: u32,
    pub linktype: u32,
    pub interface_id: u32,
}

#[pymethods]
impl Record {
    #[new]
    #[pyo3(signature = (data, timestamp = None, *, timestamp_ns = None, wirelen = None, linktype = 1, interface_id = 0))]
    fn new(
        data: &Bound<'_, PyAny>,
        timestamp: Option<&Bound<'_, PyAny>>,
        timestamp_ns: Option<i128>,
        wirelen: Option<u64>,
        linktype: u32,
        interface_id: u32,
    ) -> PyResult<Self> {
        let py = data.py();
        let timestamp = match (timestamp, timestamp_ns) {
            (Some(_), Some(_)) => {
                return Err(PyTypeError::new_err(
                    "give timestamp (seconds) or timestamp_ns, not both",
                ))
            }
            (Some(t), None) => timestamp_from_seconds(t)?,
            (None, Some(ns)) => timestamp_from_nanos(ns)?,
            (None, None) => Timestamp::new(0, 0),
        };
        let held = bytes_like(data, "data")?;
        let wire_len = wire_len(wirelen, None, held.as_slice())?;
        Ok(Record {
            data: PyBytes::new(py, held.as_slice()).unbind(),
            timestamp,
            wire_len,
            linktype,
            interface_id,
        })
    }

    /// The captured bytes.
    #[getter]
    fn data(&self, py: Python<'_>) -> Py<PyBytes> {
        self.data.clone_ref(py)
    }

    /// The number of captured bytes (``len(data)``).
    #[getter]
    fn caplen(&self, py: Python<'_>) -> usize {
        self.data.bind(py).as_bytes().len()
    }

    /// The packet's length on the wire (at least ``caplen`` in a sane capture).
    #[getter]
    fn wirelen(&self) -> u32 {
        self.wire_len
    }

    /// The link-layer header type (``LINKTYPE_*`` number, FCS bits removed).
    #[getter]
    fn linktype(&self) -> u32 {
        self.linktype
    }

    /// The pcapng interface the packet was captured on (0 for pcap files).
    #[getter]
    fn interface_id(&self) -> u32 {
        self.interface_id
    }

    /// Seconds since the Unix epoch, as a float (microsecond precision survives; use
    /// ``timestamp_ns`` for exact values).
    #[getter]
    fn timestamp(&self) -> f64 {
        self.timestamp.secs() as f64 + f64::from(self.timestamp.nanos()) * 1e-9
    }

    /// Nanoseconds since the Unix epoch, as an int (exact for pcap files; finer pcapng
    /// resolutions are truncated to nanoseconds).
    #[getter]
    fn timestamp_ns(&self) -> i128 {
        nanos(&self.timestamp)
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> bool {
        let Ok(other) = other.cast::<Record>() else {
            return false;
        };
        let other = other.get();
        nanos(&self.timestamp) == nanos(&other.timestamp)
            && self.wire_len == other.wire_len
            && self.linktype == other.linktype
            && self.interface_id == other.interface_id
            && self.data.bind(py).as_bytes() == other.data.bind(py).as_bytes()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "sift.Record(timestamp_ns={}, caplen={}, wirelen={}, linktype={})",
            nanos(&self.timestamp),
            self.caplen(py),
            self.wire_len,
            self.linktype
        )
    }
}

/// Normalised nanoseconds since the epoch.
fn nanos(t: &Timestamp) -> i128 {
    i128::from(t.secs()) * NANOS_PER_SEC + i128::from(t.nanos())
}

fn timestamp_from_nanos(ns: i128) -> PyResult<Timestamp> {
    let secs = i64::try_from(ns.div_euclid(NANOS_PER_SEC))
        .map_err(|_| PyValueError::new_err(format!("timestamp_ns {ns} out of range")))?;
    // rem_euclid is in 0..10^9, so it fits.
    Ok(Timestamp::new(secs, ns.rem_euclid(NANOS_PER_SEC) as u32))
}

/// Seconds given as an int (exact) or a float (rounded to the nearest nanosecond).
fn timestamp_from_seconds(t: &Bound<'_, PyAny>) -> PyResult<Timestamp> {
    if t.is_instance_of::<PyInt>() {
        let secs: i64 = t.extract()?;
        return Ok(Timestamp::new(secs, 0));
    }
    let secs: f64 = t.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "a timestamp is a number of seconds, not {}",
            type_name(t)
        ))
    })?;
    if !secs.is_finite() || secs.abs() > 9.0e9 {
        return Err(PyValueError::new_err(format!(
            "timestamp {secs} out of range"
        )));
    }
    // |secs| <= 9e9 s = 9e18 ns, inside i128 and exact enough in f64 arithmetic.
    timestamp_from_nanos((secs * 1e9).round() as i128)
}

/// Reads a pcap or pcapng capture file, one ``sift.Record`` at a time.
///
/// Returned by ``sift.read_capture(path)``; iterate over it, use it as a context manager to
/// close the file early. The format is detected from the file's magic number. A file that is
/// not a valid capture raises ``sift.CaptureError`` (with the byte ``offset`` of the problem)
/// after every record before the problem has been delivered; operating-system errors raise
/// ``OSError``.
#[pyclass(module = "sift")]
pub struct CaptureReader {
    reader: Option<sift_capture::CaptureReader<BufReader<File>>>,
    path: String,
    linktype: Option<u32>,
    snaplen: Option<u32>,
    format: Format,
    nanosecond: bool,
}

#[pymethods]
impl CaptureReader {
    #[new]
    fn new(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Self> {
        let shown = path.display().to_string();
        let reader =
            sift_capture::CaptureReader::open(&path).map_err(|e| capture_error(py, e, &shown))?;
        let nanosecond = reader
            .pcap_header()
            .is_some_and(|h| h.resolution == TsResolution::NANO);
        Ok(CaptureReader {
            linktype: reader.linktype(),
            snaplen: reader.snaplen(),
            format: reader.format(),
            nanosecond,
            reader: Some(reader),
            path: shown,
        })
    }

    /// The path the file was opened with.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// ``"pcap"`` or ``"pcapng"``.
    #[getter]
    fn format(&self) -> &'static str {
        match self.format {
            Format::Pcap => "pcap",
            Format::PcapNg => "pcapng",
        }
    }

    /// The file's link type (for pcapng, the first interface's; ``None`` before any interface).
    #[getter]
    fn linktype(&self) -> Option<u32> {
        self.linktype
    }

    /// The snapshot length in the file header (for pcapng, the first interface's).
    #[getter]
    fn snaplen(&self) -> Option<u32> {
        self.snaplen
    }

    /// ``True`` for a pcap file with nanosecond time stamps.
    #[getter]
    fn nanosecond(&self) -> bool {
        self.nanosecond
    }

    /// Bytes of the file consumed so far.
    #[getter]
    fn offset(&self) -> u64 {
        self.reader.as_ref().map_or(0, |r| r.offset())
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Record>> {
        let Some(reader) = self.reader.as_mut() else {
            return Ok(None);
        };
        match reader.next_record() {
            Ok(Some(r)) => Ok(Some(Record {
                data: PyBytes::new(py, &r.data).unbind(),
                timestamp: r.timestamp,
                wire_len: r.wire_len,
                linktype: r.linktype,
                interface_id: r.interface_id,
            })),
            Ok(None) => {
                self.reader = None;
                Ok(None)
            }
            Err(e) => {
                // The records before the problem were delivered; nothing follows it.
                self.reader = None;
                Err(capture_error(py, e, &self.path))
            }
        }
    }

    /// Closes the file; iteration then stops.
    fn close(&mut self) {
        self.reader = None;
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }
}

/// Opens a pcap or pcapng file for reading; iterate over the result for ``sift.Record`` objects.
#[pyfunction]
pub fn read_capture(py: Python<'_>, path: std::path::PathBuf) -> PyResult<CaptureReader> {
    CaptureReader::new(py, path)
}

/// Writes a classic pcap file, byte for byte as ``tcpdump -w`` does.
///
/// ``CaptureWriter(path, linktype=1, snaplen=262144, *, nanosecond=False)`` creates (or
/// truncates) ``path`` and writes the file header in the machine's byte order, with microsecond
/// time stamps unless ``nanosecond`` is true (finer time stamps are truncated, as libpcap does).
/// ``write`` takes a ``sift.Record`` or a tuple ``(timestamp_seconds, data[, wirelen])``.
/// Records are written as given (not cut to ``snaplen``). Use it as a context manager, or call
/// ``close()``, to flush the file.
#[pyclass(module = "sift")]
pub struct CaptureWriter {
    writer: Option<PcapWriter<BufWriter<File>>>,
    path: String,
    linktype: u32,
    snaplen: u32,
    count: u64,
}

#[pymethods]
impl CaptureWriter {
    #[new]
    #[pyo3(signature = (path, linktype = 1, snaplen = 262144, *, nanosecond = false))]
    fn new(
        path: std::path::PathBuf,
        linktype: u32,
        snaplen: u32,
        nanosecond: bool,
    ) -> PyResult<Self> {
        let file = File::create(&path)?;
        let resolution = if nanosecond {
            Resolution::Nano
        } else {
            Resolution::Micro
        };
        let writer = PcapWriter::new(
            BufWriter::with_capacity(64 * 1024, file),
            linktype,
            snaplen,
            resolution,
        )?;
        Ok(CaptureWriter {
            writer: Some(writer),
            path: path.display().to_string(),
            linktype,
            snaplen,
            count: 0,
        })
    }

    /// The path being written.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// The link type in the file header.
    #[getter]
    fn linktype(&self) -> u32 {
        self.linktype
    }

    /// The snapshot length in the file header.
    #[getter]
    fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// The number of packets written so far.
    #[getter]
    fn count(&self) -> u64 {
        self.count
    }

    /// ``True`` once the writer is closed.
    #[getter]
    fn closed(&self) -> bool {
        self.writer.is_none()
    }

    /// Writes one packet: a ``sift.Record`` (its time stamp is kept exactly), or a tuple
    /// ``(timestamp_seconds, data)`` or ``(timestamp_seconds, data, wirelen)``.
    fn write(&mut self, item: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = item.py();
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("write to a closed CaptureWriter"))?;
        if let Ok(record) = item.cast::<Record>() {
            let r = record.get();
            writer.write_packet(&r.timestamp, r.wire_len, r.data.bind(py).as_bytes())?;
        } else if let Ok(tuple) = item.cast::<PyTuple>() {
            if !(2..=3).contains(&tuple.len()) {
                return Err(PyTypeError::new_err(
                    "write takes a Record or a tuple (timestamp, data[, wirelen])",
                ));
            }
            let ts = timestamp_from_seconds(&tuple.get_item(0)?)?;
            let data = bytes_like(&tuple.get_item(1)?, "data")?;
            let given = match tuple.len() {
                3 => Some(tuple.get_item(2)?.extract::<u64>()?),
                _ => None,
            };
            let wire = wire_len(given, None, data.as_slice())?;
            writer.write_packet(&ts, wire, data.as_slice())?;
        } else {
            return Err(PyTypeError::new_err(format!(
                "write takes a Record or a tuple (timestamp, data[, wirelen]), not {}",
                type_name(item)
            )));
        }
        self.count += 1;
        Ok(())
    }

    /// Writes every item of an iterable (records or tuples, as ``write``).
    fn write_all(&mut self, items: &Bound<'_, PyAny>) -> PyResult<()> {
        for item in items.try_iter()? {
            self.write(&item?)?;
        }
        Ok(())
    }

    /// Flushes buffered packets to the file.
    fn flush(&mut self) -> PyResult<()> {
        if let Some(w) = self.writer.as_mut() {
            w.flush()?;
        }
        Ok(())
    }

    /// Flushes and closes the file. Closing twice is harmless.
    fn close(&mut self) -> PyResult<()> {
        if let Some(w) = self.writer.take() {
            // Dropping the file afterwards closes it.
            w.into_inner().flush()?;
        }
        Ok(())
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close()?;
        Ok(false)
    }
}
