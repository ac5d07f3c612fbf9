//! `sift split`: one capture file per flow, direction or host pair, in one pass.
//!
//! Open files are bounded: past [`MAX_OPEN`], the least recently written file is closed and
//! reopened for appending when its flow speaks again, so a capture with a million flows needs
//! no more descriptors than that.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use sift_capture::{PcapHeader, PcapWriter, Record};

use crate::captures;
use crate::flow::{endpoints, SplitBy};

const MAX_OPEN: usize = 256;

/// Packets without an IPv4/IPv6 packet inside go here.
const OTHER: &str = "other";

struct Output {
    writer: Option<PcapWriter<BufWriter<File>>>,
    packets: u64,
    last_use: u64,
}

struct Outputs {
    dir: PathBuf,
    header: PcapHeader,
    files: HashMap<String, Output>,
    open: usize,
    clock: u64,
}

impl Outputs {
    fn write(&mut self, name: &str, record: &Record) -> Result<()> {
        self.clock += 1;
        if !self.files.contains_key(name) || self.files[name].writer.is_none() {
            if self.open >= MAX_OPEN {
                self.close_least_recent()?;
            }
            let path = self.dir.join(format!("{name}.pcap"));
            let writer = match self.files.get(name) {
                // Seen before: its header is written; continue the file.
                Some(_) => {
                    let f = OpenOptions::new()
                        .append(true)
                        .open(&path)
                        .with_context(|| format!("reopening {}", path.display()))?;
                    PcapWriter::resume(BufWriter::new(f), self.header)
                }
                None => {
                    let f = File::create(&path)
                        .with_context(|| format!("creating {}", path.display()))?;
                    PcapWriter::with_header(BufWriter::new(f), self.header)?
                }
            };
            let entry = self.files.entry(name.to_owned()).or_insert(Output {
                writer: None,
                packets: 0,
                last_use: 0,
            });
            entry.writer = Some(writer);
            self.open += 1;
        }
        let out = self.files.get_mut(name).expect("just opened");
        out.last_use = self.clock;
        out.packets += 1;
        out.writer
            .as_mut()
            .expect("open")
            .write_record(record)
            .with_context(|| format!("writing {name}.pcap"))
    }

    fn close_least_recent(&mut self) -> Result<()> {
        let victim = self
            .files
            .iter()
            .filter(|(_, o)| o.writer.is_some())
            .min_by_key(|(_, o)| o.last_use)
            .map(|(n, _)| n.clone());
        if let Some(name) = victim {
            if let Some(mut w) = self.files.get_mut(&name).and_then(|o| o.writer.take()) {
                w.flush()?;
            }
            self.open -= 1;
        }
        Ok(())
    }
}

pub fn run(inputs: &[PathBuf], dir: &Path, by: SplitBy) -> Result<ExitCode> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut outputs: Option<Outputs> = None;
    let damage = captures::for_each_record(inputs, |reader, record| {
        let outputs = match &mut outputs {
            Some(o) => o,
            None => outputs.insert(Outputs {
                dir: dir.to_owned(),
                header: PcapHeader::tcpdump_for(reader)?,
                files: HashMap::new(),
                open: 0,
                clock: 0,
            }),
        };
        let name = match endpoints(record.linktype, &record.data) {
            Some(e) => e.group_name(by),
            None => OTHER.to_owned(),
        };
        outputs.write(&name, &record)
    })?;
    if let Some(mut outputs) = outputs {
        let mut names: Vec<(String, u64)> = Vec::new();
        for (name, out) in &mut outputs.files {
            if let Some(w) = out.writer.as_mut() {
                w.flush()?;
            }
            names.push((name.clone(), out.packets));
        }
        names.sort();
        for (name, packets) in names {
            println!("{packets:>10}  {name}.pcap");
        }
    }
    match damage {
        Some(e) => Err(e),
        None => Ok(ExitCode::SUCCESS),
    }
}
