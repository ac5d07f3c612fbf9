//! `sift filter`: tcpdump-compatible filtering of capture files.

use std::collections::hash_map::{Entry, HashMap};
use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use sift::{Filter, Options};
use sift_capture::PcapWriter;

use crate::captures;
use crate::lang::{self, Lang};

/// Which engine runs the filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Engine {
    /// The fastest available: native code where the host allows, else the interpreter.
    Auto,
    /// The IR's reference interpreter, on the IR as lowered (slowest; the semantic reference).
    Ir,
    /// The bytecode interpreter.
    Interp,
    /// Native code (x86-64 and aarch64).
    Jit,
}

impl Engine {
    fn run(self, filter: &Filter, packet: &[u8], wire_len: u32) -> u32 {
        match self {
            Engine::Auto | Engine::Jit => filter.run(packet, wire_len),
            Engine::Ir => filter.run_reference(packet, wire_len),
            Engine::Interp => filter.run_interpreted(packet, wire_len),
        }
    }
}

/// What `sift filter` was asked to do.
pub struct Request<'a> {
    pub inputs: &'a [PathBuf],
    pub output: Option<&'a PathBuf>,
    pub print_count: bool,
    pub linktype: Option<u32>,
    pub lang: Lang,
    /// Accept sift's language extensions.
    pub extensions: bool,
    pub expr: &'a str,
    /// libpcap's optimized meaning (tcpdump without `-O`).
    pub optimize: bool,
    pub engine: Engine,
}

pub fn run(req: &Request<'_>) -> Result<ExitCode> {
    lang::check(req.lang, req.expr, req.extensions)?;
    if req.engine == Engine::Jit && !sift::sift_jit::supported() {
        bail!("--engine jit: this machine has no JIT (x86-64 and aarch64 only)");
    }
    let mut writer: Option<PcapWriter<BufWriter<File>>> = None;
    let mut filters: HashMap<(u32, u32, bool), Filter> = HashMap::new();
    let (mut accepted, mut seen) = (0u64, 0u64);
    let progress = io::stderr().is_terminal();
    let damage = captures::for_each_record(req.inputs, |reader, record| {
        if writer.is_none() {
            if let Some(out) = req.output {
                let f = File::create(out).with_context(|| format!("creating {}", out.display()))?;
                writer = Some(PcapWriter::tcpdump_compatible(BufWriter::new(f), reader)?);
            }
        }
        let lt = req.linktype.unwrap_or(record.linktype);
        let snaplen = reader.snaplen().unwrap_or(262144);
        let swapped = captures::swapped(reader);
        let filter = match filters.entry((lt, snaplen, swapped)) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let opts = Options {
                    swapped,
                    extensions: req.extensions,
                    optimize: req.optimize,
                    ..Options::new(lt, snaplen)
                };
                e.insert(lang::compile(req.lang, req.expr, &opts)?)
            }
        };
        seen += 1;
        if req.engine.run(filter, &record.data, record.wire_len) != 0 {
            accepted += 1;
            if let Some(w) = writer.as_mut() {
                w.write_record(&record)?;
            }
        }
        if progress && seen.is_multiple_of(100_000) {
            eprint!("\r{seen} packets read, {accepted} accepted");
        }
        Ok(())
    })?;
    if progress && seen >= 100_000 {
        eprintln!();
    }
    if let Some(mut w) = writer {
        w.flush()?;
    }
    if req.print_count {
        println!("{accepted}");
        io::stdout().flush()?;
    }
    match damage {
        Some(e) => Err(e),
        None => Ok(ExitCode::SUCCESS),
    }
}
