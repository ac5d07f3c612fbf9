//! The `sift` command: tcpdump-compatible filtering of capture files, and views of each stage of
//! the compiler.

use std::collections::hash_map::{Entry, HashMap};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

mod capture;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
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

/// The language a filter is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Lang {
    /// The tcpdump/libpcap filter language.
    Pcap,
    /// CSPF (1987) stack programs, as the words of a `struct enfilter` initializer.
    Cspf,
    /// DPF (1996) atoms: `(offset:bits == value) && ...`.
    Dpf,
    /// Classic BPF in `tcpdump -d` or bpf_asm text.
    #[value(alias = "bpf")]
    Cbpf,
    /// MPF (1994): classic BPF text with `ret_match_imm`, `jmp_match_imm` and `key`.
    Mpf,
}

/// What `sift compile` produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Target {
    /// Classic BPF (SO_ATTACH_FILTER, libpcap's bpf_filter).
    Cbpf,
    /// eBPF for the Linux kernel (socket filter, XDP, tc).
    Ebpf,
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
        /// The language of the expression.
        #[arg(long, value_enum, default_value_t = Lang::Pcap)]
        lang: Lang,
        /// The filter expression (several arguments are joined with spaces, as tcpdump does).
        expression: Vec<String>,
    },
    /// Capture live on a Linux interface, the filter running in the kernel (like `tcpdump -i`).
    Capture {
        /// The interface to capture on.
        #[arg(short = 'i', value_name = "IFACE")]
        interface: String,
        /// Write packets to this pcap file instead of printing a line for each.
        #[arg(short = 'w', value_name = "OUT")]
        write: Option<PathBuf>,
        /// Stop after this many packets (otherwise at SIGINT).
        #[arg(short = 'c', value_name = "COUNT")]
        count: Option<u64>,
        /// Bytes kept of each packet.
        #[arg(short = 's', default_value_t = 262144)]
        snaplen: u32,
        /// Do not put the interface into promiscuous mode.
        #[arg(short = 'p')]
        no_promiscuous: bool,
        /// The filter expression (several arguments are joined with spaces).
        expression: Vec<String>,
    },
    /// Compile a filter to classic BPF (printed like `tcpdump -d`, `-dd` or `-ddd`) or to eBPF
    /// (printed as assembly; `-o` writes an ELF object for standard loaders).
    Compile {
        /// What to compile to.
        #[arg(long, value_enum, default_value_t = Target::Cbpf)]
        target: Target,
        /// eBPF program type: `socket` (socket filter), `xdp` or `tc`.
        #[arg(long = "type", value_name = "TYPE", default_value = "socket")]
        program_type: String,
        /// Write the eBPF program as an ELF object to this file (section named after the type).
        #[arg(short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
        /// Output format, as tcpdump's: `-d` readable assembly (the default), `-dd` C array
        /// initializers, `-ddd` the instruction count then one `code jt jf k` line each.
        #[arg(short = 'd', action = clap::ArgAction::Count)]
        dump: u8,
        /// Optimization level: 0 compiles without optimizing, as `tcpdump -O` (which also gives
        /// the filter libpcap's unoptimized meaning on truncated packets).
        #[arg(short = 'O', value_name = "LEVEL", default_value_t = 1)]
        level: u8,
        /// The language of the expression.
        #[arg(long, value_enum, default_value_t = Lang::Pcap)]
        lang: Lang,
        /// Link type to compile for (a LINKTYPE number).
        #[arg(short = 'y', default_value_t = 1)]
        linktype: u32,
        /// Snapshot length accepting filters return.
        #[arg(short = 's', default_value_t = 262144)]
        snaplen: u32,
        expression: Vec<String>,
    },
    /// Print a stage of the compiler for an expression.
    Debug {
        /// `ast`, `ir` (as lowered, with libpcap's semantics: the reference), `opt` (the
        /// optimized IR), `bytecode` (what runs) or `cbpf` (classic BPF, as `tcpdump -d`
        /// prints it).
        stage: String,
        /// The language of the expression.
        #[arg(long, value_enum, default_value_t = Lang::Pcap)]
        lang: Lang,
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

fn expression(args: &[String], file: Option<&PathBuf>, lang: Lang) -> Result<String> {
    match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading expression file {}", path.display()))?;
            if lang != Lang::Pcap {
                // The other languages have comment syntaxes of their own.
                return Ok(text);
            }
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

/// Compiles a filter written in `lang` (only pcap-filter expressions depend on the link type).
fn compile(lang: Lang, expr: &str, opts: &Options) -> Result<Filter> {
    let ir = match lang {
        Lang::Pcap => {
            return Filter::compile_with(expr, opts).map_err(|e| anyhow!("{}", e.render(expr)))
        }
        Lang::Cspf => {
            let program = sift_seeds::cspf::parse(expr).map_err(|e| anyhow!(e.render(expr)))?;
            sift_seeds::cspf::lift_with(&program, opts.snaplen)
        }
        Lang::Dpf => {
            let filter = sift_seeds::dpf::parse(expr).map_err(|e| anyhow!(e.render(expr)))?;
            sift_seeds::dpf::lift_with(&filter, opts.snaplen)
        }
        Lang::Mpf => {
            let program = sift_seeds::mpf::parse(expr).map_err(|e| anyhow!(e.render(expr)))?;
            sift_seeds::mpf::lift_with(&program, opts.snaplen)
                .map_err(|e| anyhow!(e.render(expr)))?
        }
        Lang::Cbpf => {
            let program = sift_bpf::asm::assemble(expr).map_err(|e| anyhow!("{e}"))?;
            let valid = sift_bpf::validate(&program, sift_bpf::Dialect::Libpcap)
                .map_err(|e| anyhow!("{e}"))?;
            sift_bpf::lift(&valid)
        }
    };
    Ok(Filter::from_ir(ir)?)
}

/// Checks a filter's text before any file is opened, so a typo costs nothing.
fn check(lang: Lang, expr: &str) -> Result<()> {
    match lang {
        Lang::Pcap => {
            sift::parse(expr).map_err(|e| anyhow!("{}", e.render(expr)))?;
        }
        other => {
            compile(other, expr, &Options::new(1, 262144))?;
        }
    }
    Ok(())
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Debug {
            stage,
            lang,
            linktype,
            snaplen,
            expression: args,
        } => {
            let expr = args.join(" ");
            let filter = || compile(lang, &expr, &Options::new(linktype, snaplen));
            match stage.as_str() {
                "ast" if lang == Lang::Pcap => {
                    match sift::parse(&expr).map_err(|e| anyhow!("{}", e.render(&expr)))? {
                        Some(ast) => println!("{ast}"),
                        None => println!("(empty: matches every packet)"),
                    }
                }
                "ir" => print!("{}", filter()?.ir()),
                "ir-opt" | "opt" => print!("{}", filter()?.optimized_ir()),
                "bytecode" => print!("{}", filter()?.bytecode()),
                "cbpf" => {
                    let cbpf = sift_bpf::compile(filter()?.optimized_ir())?;
                    let program = sift_bpf::Program(cbpf.insns().to_vec());
                    print!("{}", sift_bpf::disasm::disassemble(&program));
                }
                other => bail!(
                    "unknown stage {other:?} for {lang:?} (expected ast, ir, ir-opt, bytecode or cbpf)"
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Capture {
            interface,
            write,
            count,
            snaplen,
            no_promiscuous,
            expression: args,
        } => capture::run(&capture::Request {
            interface: &interface,
            write: write.as_deref(),
            count,
            snaplen,
            promiscuous: !no_promiscuous,
            expr: &args.join(" "),
        }),
        Command::Compile {
            target,
            program_type,
            output,
            dump,
            level,
            lang,
            linktype,
            snaplen,
            expression: args,
        } => {
            let expr = args.join(" ");
            let opts = Options {
                optimize: level > 0,
                ..Options::new(linktype, snaplen)
            };
            let filter = compile(lang, &expr, &opts)?;
            let ir = if level > 0 {
                filter.optimized_ir()
            } else {
                filter.ir()
            };
            if target == Target::Ebpf {
                let ty = sift_ebpf::ProgramType::from_name(&program_type).ok_or_else(|| {
                    anyhow!("unknown eBPF program type {program_type:?} (socket, xdp or tc)")
                })?;
                let program = sift_ebpf::compile(ir, &sift_ebpf::Options::new(ty))?;
                print!("{}", sift_ebpf::to_text(&program, "sift_filter"));
                if let Some(path) = output {
                    std::fs::write(&path, sift_ebpf::to_elf(&program, "sift_filter")?)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                }
                return Ok(ExitCode::SUCCESS);
            }
            if output.is_some() {
                bail!("-o writes eBPF objects; use --target ebpf");
            }
            let program = sift_bpf::Program(sift_bpf::compile(ir)?.insns().to_vec());
            match dump {
                0 | 1 => print!("{}", sift_bpf::disasm::disassemble(&program)),
                2 => print!("{}", sift_bpf::numeric::to_dd(&program)),
                _ => print!("{}", sift_bpf::numeric::to_ddd(&program)),
            }
            report_size_limits(program.0.len());
            Ok(ExitCode::SUCCESS)
        }
        Command::Filter {
            read,
            write,
            count,
            linktype,
            expr_file,
            lang,
            expression: args,
        } => filter(
            &read,
            write.as_ref(),
            count,
            linktype,
            lang,
            &expression(&args, expr_file.as_ref(), lang)?,
        ),
    }
}

/// Warns on standard error when a program is too long for a kernel to accept.
fn report_size_limits(len: usize) {
    const LINUX_MAX: usize = 4096;
    const BSD_MAX: usize = 512;
    if len > LINUX_MAX {
        eprintln!("warning: {len} instructions: over Linux's limit of {LINUX_MAX}");
    } else if len > BSD_MAX {
        eprintln!("warning: {len} instructions: over the BSDs' limit of {BSD_MAX} (Linux takes up to {LINUX_MAX})");
    }
}

fn filter(
    inputs: &[PathBuf],
    output: Option<&PathBuf>,
    print_count: bool,
    linktype_override: Option<u32>,
    lang: Lang,
    expr: &str,
) -> Result<ExitCode> {
    check(lang, expr)?;
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
                    e.insert(compile(lang, expr, &opts)?)
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
