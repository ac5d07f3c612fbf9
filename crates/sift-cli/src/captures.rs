//! Reading the capture files of a command, in order, record by record.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use sift_capture::{ByteOrder, CaptureReader, Record};

/// The reader of the capture file being read.
pub type Reader = CaptureReader<BufReader<File>>;

/// Calls `each` with every record of `inputs`, in order, and the reader it came from. A file
/// that is damaged part-way stops the reading after every record before the damage has been
/// delivered: that error is returned as `Ok(Some(..))`, so the caller can finish its outputs
/// before reporting it. Other errors (a file that cannot be opened, an error from `each`) are
/// returned at once.
pub fn for_each_record(
    inputs: &[PathBuf],
    mut each: impl FnMut(&Reader, Record) -> Result<()>,
) -> Result<Option<anyhow::Error>> {
    for path in inputs {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut reader = CaptureReader::new(BufReader::new(file))
            .map_err(|e| anyhow!("{}: {e}", path.display()))?;
        loop {
            match reader.next_record() {
                Ok(Some(record)) => each(&reader, record)?,
                Ok(None) => break,
                Err(e) => return Ok(Some(anyhow!("{}: {e}", path.display()))),
            }
        }
    }
    Ok(None)
}

/// Whether a capture's multi-byte header fields are in the other byte order than this
/// machine's (BSD loopback headers then need swapping).
pub fn swapped(reader: &Reader) -> bool {
    let native = if cfg!(target_endian = "little") {
        ByteOrder::Little
    } else {
        ByteOrder::Big
    };
    reader.byte_order() != native
}
