//! The `sift` command: tcpdump-compatible filtering of capture files, and views of each stage of
//! the compiler.

use std::collections::hash_map::{Entry, HashMap};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use sift::{Filter, Options};
use sift_capture::{ByteOrder, CaptureReader, PcapWriter};

#[derive(Parser)]
#[command(
    name = "sift",
    version,
    about = "Packet filters with libpcap's exact semantics"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Filter captures like `tcpdump -r FILE -w OUT EXPRESSION`.
    Filter {
        /// Capture files to read (pcap or pcapng); several are read in order.
        #[arg(short = 'r', value_name = "FILE", required = true)]
        read: Vec<PathBuf>,
        /// Write accepted packets to this pcap file.
        #[arg(short = 'w', value_name = "OUT")]
        write: Option<PathBuf>,
        /// Print the number of accepted packets.
        #[arg(short = 'c')]
        count: bool,
        /// Link type to compile for, overriding the capture's (a LINKTYPE number).
        #[arg(short = 'y', value_name = "LINKTYPE")]
        linktype: Option<u32>,
        /// Read the expression from a file.
        #[arg(short = 'F', value_name = "EXPRFILE")]
        expr_file: Option<PathBuf>,
        /// The filter expression (several arguments are joined with spaces, as tcpdump does).
        expression: Vec<String>,
    },
    /// Print a stage of the compiler for an expression.
    Debug {
        /// `ast` or `ir`.
        stage: String,
        /// Link type to compile for (a LINKTYPE number).
        #[arg(short = 'y', default_value_t = 1)]
        linktype: u32,
        /// Snapshot length accepting filters return.
        #[arg(short = 's', default_value_t = 262144)]
        snaplen: u32,
        expression: Vec<String>,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sift: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn expression(args: &[String], file: Option<&PathBuf>) -> Result<String> {
    match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading expression file {}", path.display()))?;
            // tcpdump ignores the command-line expression when -F is given; comments start with #.
            Ok(text
                .lines()
                .map(|l| l.split('#').next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join("\n"))
        }
        None => Ok(args.join(" ")),
    }
}

fn compile(expr: &str, opts: &Options) -> Result<Filter> {
    Filter::compile_with(expr, opts).map_err(|e| anyhow!("{}", e.render(expr)))
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Debug {
            stage,
            linktype,
            snaplen,
            expression: args,
        } => {
            let expr = args.join(" ");
            match stage.as_str() {
                "ast" => match sift::parse(&expr).map_err(|e| anyhow!("{}", e.render(&expr)))? {
                    Some(ast) => println!("{ast}"),
                    None => println!("(empty: matches every packet)"),
                },
                "ir" => print!("{}", compile(&expr, &Options::new(linktype, snaplen))?.ir()),
                other => bail!("unknown stage {other:?} (expected ast or ir)"),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Filter {
            read,
            write,
            count,
            linktype,
            expr_file,
            expression: args,
        } => filter(
            &read,
            write.as_ref(),
            count,
            linktype,
            &expression(&args, expr_file.as_ref())?,
        ),
    }
}

fn filter(
    inputs: &[PathBuf],
    output: Option<&PathBuf>,
    print_count: bool,
    linktype_override: Option<u32>,
    expr: &str,
) -> Result<ExitCode> {
    // Check the expression before touching any file, so a typo costs nothing.
    sift::parse(expr).map_err(|e| anyhow!("{}", e.render(expr)))?;
    let mut writer: Option<PcapWriter<BufWriter<File>>> = None;
    let mut accepted: u64 = 0;
    let mut seen: u64 = 0;
    let progress = io::stderr().is_terminal();
    let native = if cfg!(target_endian = "little") {
        ByteOrder::Little
    } else {
        ByteOrder::Big
    };
    let mut failure = None;
    for path in inputs {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut reader = CaptureReader::new(BufReader::new(file))
            .map_err(|e| anyhow!("{}: {e}", path.display()))?;
        if writer.is_none() {
            if let Some(out) = output {
                let f = File::create(out).with_context(|| format!("creating {}", out.display()))?;
                writer = Some(PcapWriter::tcpdump_compatible(BufWriter::new(f), &reader)?);
            }
        }
        let snaplen = reader.snaplen().unwrap_or(262144);
        let mut filters: HashMap<u32, Filter> = HashMap::new();
        loop {
            let record = match reader.next_record() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    // Every packet before the damage has been delivered; report and stop.
                    failure = Some(anyhow!("{}: {e}", path.display()));
                    break;
                }
            };
            let lt = linktype_override.unwrap_or(record.linktype);
            let filter = match filters.entry(lt) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => {
                    let opts = Options {
                        swapped: reader.byte_order() != native,
                        ..Options::new(lt, snaplen)
                    };
                    e.insert(compile(expr, &opts)?)
                }
            };
            seen += 1;
            if filter.matches(&record.data, record.wire_len) {
                accepted += 1;
                if let Some(w) = writer.as_mut() {
                    w.write_record(&record)?;
                }
            }
            if progress && seen.is_multiple_of(100_000) {
                eprint!("\r{seen} packets read, {accepted} accepted");
            }
        }
        if failure.is_some() {
            break;
        }
    }
    if progress && seen >= 100_000 {
        eprintln!();
    }
    if let Some(mut w) = writer {
        w.flush()?;
    }
    if print_count {
        println!("{accepted}");
        io::stdout().flush()?;
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(ExitCode::SUCCESS),
    }
}
