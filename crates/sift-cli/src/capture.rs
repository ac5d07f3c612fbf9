//! `sift capture`: live capture on a Linux interface, the filter running in the kernel.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{anyhow, Context, Result};
use sift::sift_syntax::ast::{Expr, PrimitiveKind};
use sift_capture::{PcapWriter, Resolution};
use sift_live::{Capture, Config, TagView};

/// What `sift capture` was asked to do.
pub struct Request<'a> {
    pub interface: &'a str,
    pub write: Option<&'a Path>,
    pub count: Option<u64>,
    pub snaplen: u32,
    pub promiscuous: bool,
    pub expr: &'a str,
    /// libpcap's optimized meaning (tcpdump without `-O`).
    pub optimize: bool,
}

/// Whether the expression tests VLAN tags, which the Linux kernel strips before socket
/// filters run: such a filter must see the frames with their tags put back.
fn mentions_vlan(e: &Expr) -> bool {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match e {
            Expr::And(v) | Expr::Or(v) => stack.extend(v),
            Expr::Not(e) => stack.push(e),
            Expr::Primitive(p) => {
                if matches!(p.kind, PrimitiveKind::Vlan(_)) {
                    return true;
                }
            }
        }
    }
    false
}

pub fn run(req: &Request<'_>) -> Result<ExitCode> {
    let ast = sift::parse(req.expr).map_err(|e| anyhow!("{}", e.render(req.expr)))?;
    let view = if ast.as_ref().is_some_and(mentions_vlan) {
        TagView::Restored
    } else {
        TagView::Stripped
    };
    let config = Config::new(req.interface)
        .snaplen(req.snaplen)
        .promiscuous(req.promiscuous);
    let mut capture =
        Capture::open(&config).with_context(|| format!("cannot capture on {}", req.interface))?;
    let options = sift::Options {
        optimize: req.optimize,
        ..sift::Options::new(capture.linktype(), capture.snaplen())
    };
    let filter = sift::Filter::compile_with(req.expr, &options)
        .map_err(|e| anyhow!("{}", e.render(req.expr)))?;
    let program = sift_bpf::compile_for(&*filter.loop_free_ir()?, sift_bpf::Dialect::Linux)?;
    capture.set_filter_with(&program.to_program(), view)?;

    let stopper = capture.stopper();
    ctrlc::set_handler(move || stopper.stop()).context("cannot install the SIGINT handler")?;

    let mut writer = match req.write {
        Some(path) => Some(PcapWriter::new(
            BufWriter::new(
                File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
            ),
            capture.linktype(),
            capture.snaplen(),
            Resolution::Micro,
        )?),
        None => None,
    };
    eprintln!(
        "sift: listening on {}, link type {}, snapshot length {} bytes",
        req.interface,
        capture.linktype(),
        capture.snaplen()
    );
    let stdout = io::stdout();
    let mut seen = 0u64;
    while req.count.is_none_or(|n| seen < n) {
        let Some(packet) = capture.next_packet()? else {
            break; // stopped by SIGINT
        };
        let ts = packet.timestamp();
        match writer.as_mut() {
            Some(w) => w.write_packet(&ts, packet.wire_len(), packet.data())?,
            None => writeln!(
                stdout.lock(),
                "{}.{:06} length {} captured {}",
                ts.secs(),
                ts.nanos() / 1000,
                packet.wire_len(),
                packet.captured_len()
            )?,
        }
        seen += 1;
    }
    if let Some(mut w) = writer {
        w.flush()?;
    }
    let stats = capture.stats()?;
    eprintln!(
        "{seen} packets captured\n{} packets received by filter\n{} packets dropped by kernel",
        stats.received, stats.dropped
    );
    Ok(ExitCode::SUCCESS)
}
