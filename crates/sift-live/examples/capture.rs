//! `capture IFACE COUNT EXPRESSION [OUT.pcap]`: captures COUNT packets (0: until Ctrl-C) matching
//! a pcap-filter EXPRESSION on IFACE, prints one line per packet on standard error, writes them
//! to OUT.pcap if given, and prints the counters at the end. This is the wiring of
//! `sift capture -i IFACE [-w OUT] [-c N] EXPRESSION`.
//!
//! ```text
//! cargo run -p sift-live --example capture -- eth0 10 'tcp port 443' /tmp/out.pcap
//! ```

use std::process::ExitCode;
use std::sync::OnceLock;

use sift_bpf::Dialect;
use sift_capture::{PcapWriter, Resolution};
use sift_live::{Capture, Config, Stopper};

/// The stopper the SIGINT handler reaches; set before the handler is installed.
static STOPPER: OnceLock<Stopper> = OnceLock::new();

extern "C" fn on_sigint(_: libc::c_int) {
    // Only an atomic load, an atomic store and write(2): async-signal-safe.
    if let Some(stopper) = STOPPER.get() {
        stopper.stop();
    }
}

fn install_sigint_handler() {
    // SAFETY: `sigaction` is given a zeroed struct with a valid handler address and an empty
    // mask; the handler only does async-signal-safe work.
    #[allow(unsafe_code)]
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
    }
}

fn run(
    iface: &str,
    count: u64,
    expr: &str,
    out: Option<&str>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut capture = Capture::open(&Config::new(iface))?;
    let options = sift::Options::new(capture.linktype(), capture.snaplen());
    let ir = sift::compile_ir(expr, &options).map_err(|e| e.render(expr))?;
    let program = sift_bpf::compile_for(&ir, Dialect::Linux)?;
    capture.set_filter(&program.to_program())?;

    let _ = STOPPER.set(capture.stopper());
    install_sigint_handler();

    let mut writer = match out {
        Some(path) => Some(PcapWriter::new(
            std::io::BufWriter::new(std::fs::File::create(path)?),
            capture.linktype(),
            capture.snaplen(),
            Resolution::Micro,
        )?),
        None => None,
    };
    let mut seen = 0u64;
    while count == 0 || seen < count {
        let Some(packet) = capture.next_packet()? else {
            break; // stopped by Ctrl-C
        };
        let ts = packet.timestamp();
        eprintln!(
            "{}.{:09} {:?} caplen {} len {}",
            ts.secs(),
            ts.nanos(),
            packet.direction(),
            packet.captured_len(),
            packet.wire_len()
        );
        if let Some(w) = writer.as_mut() {
            w.write_packet(&ts, packet.wire_len(), packet.data())?;
        }
        seen += 1;
    }
    if let Some(w) = writer.as_mut() {
        w.flush()?;
    }
    let stats = capture.stats()?;
    eprintln!(
        "{seen} packets captured\n{} packets received by filter\n{} packets dropped by kernel",
        stats.received, stats.dropped
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 || args.len() > 4 {
        eprintln!("usage: capture IFACE COUNT EXPRESSION [OUT.pcap]");
        return ExitCode::from(2);
    }
    let Ok(count) = args[1].parse::<u64>() else {
        eprintln!("capture: COUNT must be a number, not {:?}", args[1]);
        return ExitCode::from(2);
    };
    match run(&args[0], count, &args[2], args.get(3).map(String::as_str)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("capture: {e}");
            ExitCode::FAILURE
        }
    }
}
