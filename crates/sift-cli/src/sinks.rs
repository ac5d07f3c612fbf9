//! The capture files `write` actions write to: pcap, or pcapng when the name ends in `.pcapng`.
//! Rules that name the same file share one writer.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sift_capture::{PcapHeader, PcapWriter, Record};

use crate::captures::Reader;
use crate::pcapng_out::PcapngWriter;

enum Writer {
    /// A pcap file and the link type its header was written for (it holds no other).
    Pcap(PcapWriter<BufWriter<File>>, u32),
    Pcapng(PcapngWriter<BufWriter<File>>),
}

/// One output file.
pub struct Sink {
    path: PathBuf,
    writer: Option<Writer>,
}

/// A packet as an action sees it: its record, with fewer bytes after a `truncate`.
pub struct View<'a> {
    pub record: &'a Record,
    pub captured: &'a [u8],
    pub snaplen: u32,
}

impl Sink {
    pub fn is_pcapng(path: &Path) -> bool {
        path.extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("pcapng"))
    }

    /// Creates the file now, so a bad path fails before any packet is read; the pcap header is
    /// written when the first capture is open (see [`Sink::open`]).
    pub fn create(path: PathBuf) -> Result<Sink> {
        let file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let writer = if Sink::is_pcapng(&path) {
            Some(Writer::Pcapng(
                PcapngWriter::new(BufWriter::new(file))
                    .with_context(|| format!("writing {}", path.display()))?,
            ))
        } else {
            drop(file);
            None
        };
        Ok(Sink { path, writer })
    }

    /// Writes the pcap header as `tcpdump -r CAPTURE -w FILE` would for the first capture.
    pub fn open(&mut self, reader: &Reader, linktype: u32) -> Result<()> {
        if self.writer.is_some() {
            return Ok(());
        }
        let header = PcapHeader::tcpdump_for(reader)
            .with_context(|| format!("writing {}", self.path.display()))?;
        let file = File::create(&self.path)
            .with_context(|| format!("creating {}", self.path.display()))?;
        let writer = PcapWriter::with_header(BufWriter::new(file), header)
            .with_context(|| format!("writing {}", self.path.display()))?;
        self.writer = Some(Writer::Pcap(writer, linktype));
        Ok(())
    }

    /// Writes a packet; `comment` (the tags) goes only into pcapng files.
    pub fn write(&mut self, view: &View<'_>, comment: Option<&str>) -> Result<()> {
        let record = view.record;
        let written = match &mut self.writer {
            Some(Writer::Pcap(w, linktype)) => {
                if record.linktype != *linktype {
                    bail!(
                        "{}: a pcap file holds packets of one link type ({}), not {}; \
                         write to a .pcapng file",
                        self.path.display(),
                        linktype,
                        record.linktype
                    );
                }
                w.write_packet(&record.timestamp, record.wire_len, view.captured)
            }
            Some(Writer::Pcapng(w)) => w.write_packet(
                record.linktype,
                view.snaplen,
                &record.timestamp,
                record.wire_len,
                view.captured,
                comment,
            ),
            None => bail!("{}: written before it was opened", self.path.display()),
        };
        written.with_context(|| format!("writing {}", self.path.display()))
    }

    pub fn flush(&mut self) -> Result<()> {
        let flushed = match &mut self.writer {
            Some(Writer::Pcap(w, _)) => w.flush(),
            Some(Writer::Pcapng(w)) => w.flush(),
            None => Ok(()),
        };
        flushed.with_context(|| format!("writing {}", self.path.display()))
    }
}
