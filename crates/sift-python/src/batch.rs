//! Batches of packets taken from Python, run by a matcher without the GIL.
//!
//! Both forms are gathered while the GIL is held (borrowing `bytes`, copying other buffers and
//! the index arrays once) and then run in one pass with the GIL released, the matcher (a
//! filter or a demultiplexer) called once per packet. Index problems found during the pass
//! become Python exceptions afterwards.

use pyo3::exceptions::{PyIndexError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::indices::{BadIndex, Indices};
use crate::packets::{bytes_like, packet, wire_len, Held};

/// The packets of a `match_many` call: a sequence of bytes-like objects or records.
pub struct PacketList<'py> {
    held: Vec<Held<'py>>,
    wire: Vec<u32>,
}

impl<'py> PacketList<'py> {
    pub fn extract(
        packets: &Bound<'py, PyAny>,
        wirelens: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<PacketList<'py>> {
        let py = packets.py();
        // A list is walked directly; anything else iterable through its iterator.
        let items: Vec<Bound<'py, PyAny>> = match packets.cast::<PyList>() {
            Ok(list) => list.iter().collect(),
            Err(_) => packets.try_iter()?.collect::<PyResult<_>>()?,
        };
        let given = wirelens
            .map(|w| Indices::extract(w, "wirelens"))
            .transpose()?;
        check_len(given.as_ref(), "wirelens", items.len())?;
        let mut held = Vec::with_capacity(items.len());
        let mut wire = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let (data, record_wire) = packet(item)
                .map_err(|e| PyTypeError::new_err(format!("packets[{i}]: {}", e.value(py))))?;
            let given_wire = match &given {
                Some(g) => Some(g.get(i).map_err(|b| bad_index("wirelens", b))?),
                None => None,
            };
            wire.push(wire_len(given_wire, record_wire, data.as_slice())?);
            held.push(data);
        }
        Ok(PacketList { held, wire })
    }

    /// Runs `matcher` on every packet, with the GIL released.
    pub fn run<M, T>(&self, py: Python<'_>, matcher: M) -> Vec<T>
    where
        M: Fn(&[u8], u32) -> T + Sync,
        T: Send,
    {
        // Plain slices, so that they may cross `Python::detach`.
        let slices: Vec<(&[u8], u32)> = self
            .held
            .iter()
            .zip(&self.wire)
            .map(|(h, &w)| (h.as_slice(), w))
            .collect();
        py.detach(|| slices.iter().map(|&(d, w)| matcher(d, w)).collect())
    }
}

/// The packets of a `match_buffer` call: one buffer, offsets, lengths, optional wire lengths.
pub struct BufferBatch<'py> {
    data: Held<'py>,
    offsets: Indices,
    lengths: Indices,
    wirelens: Option<Indices>,
}

/// What is wrong with one packet of a [`BufferBatch`].
enum BatchError {
    Negative(&'static str, BadIndex),
    TooLong(&'static str, BadIndex),
    OutOfBounds {
        index: usize,
        offset: u64,
        length: u64,
        size: usize,
    },
}

impl<'py> BufferBatch<'py> {
    pub fn extract(
        buffer: &Bound<'py, PyAny>,
        offsets: &Bound<'py, PyAny>,
        lengths: &Bound<'py, PyAny>,
        wirelens: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<BufferBatch<'py>> {
        let data = bytes_like(buffer, "buffer")?;
        let offsets = Indices::extract(offsets, "offsets")?;
        let lengths = Indices::extract(lengths, "lengths")?;
        if offsets.len() != lengths.len() {
            return Err(PyValueError::new_err(format!(
                "offsets has {} entries, lengths {}",
                offsets.len(),
                lengths.len()
            )));
        }
        let wirelens = wirelens
            .map(|w| Indices::extract(w, "wirelens"))
            .transpose()?;
        check_len(wirelens.as_ref(), "wirelens", offsets.len())?;
        Ok(BufferBatch {
            data,
            offsets,
            lengths,
            wirelens,
        })
    }

    /// Runs `matcher` on every packet, with the GIL released; packets are checked against the
    /// buffer as they are reached.
    pub fn run<M, T>(&self, py: Python<'_>, matcher: M) -> PyResult<Vec<T>>
    where
        M: Fn(&[u8], u32) -> T + Sync,
        T: Send,
    {
        let data = self.data.as_slice();
        // Only the plain parts cross into the GIL-free closure (`Held` is tied to the GIL).
        let (offsets, lengths, wirelens) = (&self.offsets, &self.lengths, &self.wirelens);
        let result = py.detach(|| -> Result<Vec<T>, BatchError> {
            let n = offsets.len();
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                let offset = offsets
                    .get(i)
                    .map_err(|b| BatchError::Negative("offsets", b))?;
                let length = lengths
                    .get(i)
                    .map_err(|b| BatchError::Negative("lengths", b))?;
                let packet = usize::try_from(offset)
                    .ok()
                    .zip(usize::try_from(length).ok())
                    .and_then(|(o, l)| data.get(o..o.checked_add(l)?))
                    .ok_or(BatchError::OutOfBounds {
                        index: i,
                        offset,
                        length,
                        size: data.len(),
                    })?;
                let wire = match wirelens {
                    Some(w) => w
                        .get_u32(i)
                        .map_err(|b| BatchError::TooLong("wirelens", b))?,
                    None => u32::try_from(length).map_err(|_| {
                        BatchError::TooLong(
                            "lengths",
                            BadIndex {
                                index: i,
                                value: i128::from(length),
                            },
                        )
                    })?,
                };
                out.push(matcher(packet, wire));
            }
            Ok(out)
        });
        result.map_err(|e| match e {
            BatchError::Negative(what, b) => bad_index(what, b),
            BatchError::TooLong(what, b) => PyOverflowError::new_err(format!(
                "{what}[{}] = {} does not fit 32 bits",
                b.index, b.value
            )),
            BatchError::OutOfBounds {
                index,
                offset,
                length,
                size,
            } => PyIndexError::new_err(format!(
                "packet {index} (offset {offset}, length {length}) runs past the end of the {size}-byte buffer"
            )),
        })
    }
}

fn check_len(indices: Option<&Indices>, what: &str, n: usize) -> PyResult<()> {
    match indices {
        Some(v) if v.len() != n => Err(PyValueError::new_err(format!(
            "{what} has {} entries for {n} packets",
            v.len()
        ))),
        _ => Ok(()),
    }
}

fn bad_index(what: &str, b: BadIndex) -> PyErr {
    PyValueError::new_err(format!("{what}[{}] is negative ({})", b.index, b.value))
}
