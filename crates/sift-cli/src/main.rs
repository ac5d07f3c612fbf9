//! The `sift` command: tcpdump-compatible filtering of capture files, pipelines of rules over
//! them (`sift run`, see `pipeline`), and views of each stage of the compiler.

use std::borrow::Cow;
use std::path::PathBuf;
use std::process::ExitCode;

mod capture;
mod captures;
mod demux;
mod filter;
mod flow;
mod lang;
mod pcapng_out;
mod pipeline;
mod rules;
mod set_paths;
mod sinks;
mod split;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use sift::Options;

use filter::Engine;
use lang::{compile, Lang};

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
        /// Link type to compile for, overriding the capture's: a LINKTYPE number or a name as
        /// `tcpdump -y` takes it (EN10MB, LINUX_SLL, RAW, ...).
        #[arg(short = 'y', value_name = "LINKTYPE", value_parser = parse_linktype)]
        linktype: Option<u32>,
        /// Read the expression from a file.
        #[arg(short = 'F', value_name = "EXPRFILE")]
        expr_file: Option<PathBuf>,
        /// Read a classic BPF program from a file (any text form, or a binary `struct
        /// sock_filter` array).
        #[arg(long = "bpf", value_name = "FILE", conflicts_with = "expr_file")]
        bpf_file: Option<PathBuf>,
        /// Accept sift's extensions to the filter language: payload tests (`payload contains
        /// [nocase] "GET|0d 0a|"`, `payload matches "re"`, `payload[0:4] = "HTTP"`) and sets
        /// (`host in {10.0.0.1, 192.168.0.0/16}`, `port in {22, 8000-8100}`, `host in @FILE`).
        /// Off by default: the language is exactly libpcap's.
        #[arg(long = "extensions", visible_alias = "ext")]
        extensions: bool,
        /// The language of the expression.
        #[arg(long, value_enum, default_value_t = Lang::Pcap)]
        lang: Lang,
        /// Optimization level: 0 (or a bare `-O`, as `tcpdump -O`) gives the filter libpcap's
        /// unoptimized meaning: a packet that a load past its captured end rejects stays
        /// rejected, where libpcap's optimizer may have deleted the load. sift optimizes the
        /// code it runs either way; that never changes a verdict.
        #[arg(short = 'O', value_name = "LEVEL", default_value_t = 1)]
        level: u8,
        /// The engine that runs the filter.
        #[arg(long, value_enum, default_value_t = Engine::Auto)]
        engine: Engine,
        /// The filter expression (several arguments are joined with spaces, as tcpdump does).
        expression: Vec<String>,
    },
    /// Dispatch packets to many filters in one pass, writing `DIR/NAME.pcap` for each rule of
    /// the rules file (`NAME [PRIORITY] [copy]: EXPRESSION` per line) and printing counts.
    Demux {
        /// The rules file.
        #[arg(long, value_name = "FILE")]
        rules: PathBuf,
        /// Capture files to read (pcap or pcapng); several are read in order.
        #[arg(short = 'r', value_name = "FILE", required = true)]
        read: Vec<PathBuf>,
        /// Directory for the output files (created if missing).
        #[arg(long = "out-dir", value_name = "DIR")]
        out_dir: PathBuf,
        /// Deliver each packet to every rule that matches it, not only the first exclusive one.
        #[arg(long)]
        all: bool,
        /// Accept sift's extensions to the filter language: payload tests (`payload contains
        /// [nocase] "GET|0d 0a|"`, `payload matches "re"`, `payload[0:4] = "HTTP"`) and sets
        /// (`host in {10.0.0.1, 192.168.0.0/16}`, `port in {22, 8000-8100}`, `host in @FILE`).
        /// Off by default: the language is exactly libpcap's.
        #[arg(long = "extensions", visible_alias = "ext")]
        extensions: bool,
        /// The language of the rules' filters.
        #[arg(long, value_enum, default_value_t = Lang::Pcap)]
        lang: Lang,
        /// IP fragments go where their datagram's first fragment went; fragments that arrive
        /// before it are held (up to the timeout, by capture time).
        #[arg(long)]
        fragments: bool,
        /// How long fragment state and held fragments live, in milliseconds.
        #[arg(long, value_name = "MS", default_value_t = 30_000)]
        fragment_timeout: u64,
    },
    /// Run a pipeline: every packet goes once through the rules of RULES (`rule NAME: FILTER
    /// => ACTION, ...`; filters in the extension language; actions `write FILE`, `count`,
    /// `sample N`, `truncate N`, `tag NAME`, `stop`), then per-rule statistics are printed.
    /// See docs/pipelines.md.
    Run {
        /// The rules file.
        #[arg(value_name = "RULES")]
        rules: PathBuf,
        /// Capture files to read (pcap or pcapng); several are read in order.
        #[arg(short = 'r', value_name = "FILE", required = true)]
        read: Vec<PathBuf>,
        /// Directory for the files of `write` actions with relative names (created if
        /// missing); the current directory by default.
        #[arg(long = "out-dir", value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
    /// Write one capture per flow (both directions), per direction (`5-tuple`) or per host
    /// pair, in one pass; prints the packet count of each file.
    Split {
        /// Capture files to read (pcap or pcapng); several are read in order.
        #[arg(short = 'r', value_name = "FILE", required = true)]
        read: Vec<PathBuf>,
        /// How to group packets.
        #[arg(long, value_enum, default_value_t = flow::SplitBy::Flow)]
        by: flow::SplitBy,
        /// Directory for the output files (created if missing).
        #[arg(long = "out-dir", value_name = "DIR")]
        out_dir: PathBuf,
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
        /// Optimization level: 0 (or a bare `-O`, as `tcpdump -O`) gives the filter libpcap's
        /// unoptimized meaning (see `sift filter -O`).
        #[arg(short = 'O', value_name = "LEVEL", default_value_t = 1)]
        level: u8,
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
        /// Read a classic BPF program from a file (any text form, or a binary `struct
        /// sock_filter` array) instead of an expression.
        #[arg(long = "bpf", value_name = "FILE", conflicts_with = "expr_file")]
        bpf_file: Option<PathBuf>,
        /// Read the expression (or program) from a file.
        #[arg(short = 'F', value_name = "EXPRFILE")]
        expr_file: Option<PathBuf>,
        /// Optimization level: 0 (or a bare `-O`) compiles without optimizing, as `tcpdump -O`
        /// (which also gives the filter libpcap's unoptimized meaning on truncated packets).
        #[arg(short = 'O', value_name = "LEVEL", default_value_t = 1)]
        level: u8,
        /// Accept sift's extensions to the filter language: payload tests (`payload contains
        /// [nocase] "GET|0d 0a|"`, `payload matches "re"`, `payload[0:4] = "HTTP"`) and sets
        /// (`host in {10.0.0.1, 192.168.0.0/16}`, `port in {22, 8000-8100}`, `host in @FILE`).
        /// Off by default: the language is exactly libpcap's.
        #[arg(long = "extensions", visible_alias = "ext")]
        extensions: bool,
        /// The language of the expression.
        #[arg(long, value_enum, default_value_t = Lang::Pcap)]
        lang: Lang,
        /// Link type to compile for: a LINKTYPE number or a name as `tcpdump -y` takes it
        /// (EN10MB, LINUX_SLL, RAW, ...).
        #[arg(short = 'y', value_name = "LINKTYPE", default_value = "EN10MB", value_parser = parse_linktype)]
        linktype: u32,
        /// Snapshot length accepting filters return.
        #[arg(short = 's', default_value_t = 262144)]
        snaplen: u32,
        expression: Vec<String>,
    },
    /// Print a stage of the compiler for an expression.
    Debug {
        /// `ast`, `ir` (as lowered, with libpcap's semantics: the reference), `ir-opt` (the
        /// optimized IR), `bytecode` (what runs) or `cbpf` (classic BPF, as `tcpdump -d`
        /// prints it).
        stage: String,
        /// Read the expression (or program) from a file.
        #[arg(short = 'F', value_name = "EXPRFILE")]
        expr_file: Option<PathBuf>,
        /// Optimization level: 0 (or a bare `-O`) lowers without libpcap's optimizer semantics,
        /// as `tcpdump -O` (`ir` then shows the code as generated, before the emulation of
        /// libpcap's optimizer).
        #[arg(short = 'O', value_name = "LEVEL", default_value_t = 1)]
        level: u8,
        /// Accept sift's extensions to the filter language: payload tests (`payload contains
        /// [nocase] "GET|0d 0a|"`, `payload matches "re"`, `payload[0:4] = "HTTP"`) and sets
        /// (`host in {10.0.0.1, 192.168.0.0/16}`, `port in {22, 8000-8100}`, `host in @FILE`).
        /// Off by default: the language is exactly libpcap's.
        #[arg(long = "extensions", visible_alias = "ext")]
        extensions: bool,
        /// The language of the expression.
        #[arg(long, value_enum, default_value_t = Lang::Pcap)]
        lang: Lang,
        /// Link type to compile for: a LINKTYPE number or a name as `tcpdump -y` takes it
        /// (EN10MB, LINUX_SLL, RAW, ...).
        #[arg(short = 'y', value_name = "LINKTYPE", default_value = "EN10MB", value_parser = parse_linktype)]
        linktype: u32,
        /// Snapshot length accepting filters return.
        #[arg(short = 's', default_value_t = 262144)]
        snaplen: u32,
        expression: Vec<String>,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse_from(bare_o_as_level_0(std::env::args_os()))) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sift: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Debug {
            stage,
            expr_file,
            level,
            extensions,
            lang,
            linktype,
            snaplen,
            expression: args,
        } => {
            let (lang, expr) = lang::source(&args, expr_file.as_deref(), None, lang)?;
            lang::check_extensions(lang, extensions)?;
            let opts = Options {
                extensions,
                optimize: level > 0,
                ..Options::new(linktype, snaplen)
            };
            // Only `bytecode` needs the runnable filter; the other stages are code.
            let code_ir = |optimize| lang::code_ir(lang, &expr, &opts, optimize);
            match stage.as_str() {
                "ast" if lang == Lang::Pcap => {
                    let ast = sift::sift_syntax::parse_with(&expr, extensions)
                        .map_err(|e| anyhow!("{}", e.render(&expr)))?;
                    match ast {
                        Some(ast) => emit(format_args!("{ast}\n"))?,
                        None => emit(format_args!("(empty: matches every packet)\n"))?,
                    }
                }
                "ir" => emit(format_args!("{}", code_ir(false)?))?,
                "ir-opt" | "opt" => emit(format_args!("{}", code_ir(true)?))?,
                "bytecode" => emit(format_args!("{}", compile(lang, &expr, &opts)?.bytecode()))?,
                "cbpf" => {
                    let ir = code_ir(true)?;
                    let cbpf = sift_bpf::compile(&*without_set_lookups(&ir, true)?)?;
                    let program = sift_bpf::Program(cbpf.insns().to_vec());
                    emit(format_args!("{}", sift_bpf::disasm::disassemble(&program)))?;
                }
                other => bail!(
                    "unknown stage {other:?} for {lang:?} (expected ast, ir, ir-opt, bytecode or cbpf)"
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Split { read, by, out_dir } => split::run(&read, &out_dir, by),
        Command::Run {
            rules,
            read,
            out_dir,
        } => pipeline::run(&pipeline::Request {
            rules: &rules,
            inputs: &read,
            out_dir: out_dir.as_deref(),
        }),
        Command::Demux {
            rules,
            read,
            out_dir,
            all,
            extensions,
            lang,
            fragments,
            fragment_timeout,
        } => {
            lang::check_extensions(lang, extensions)?;
            demux::run(&demux::Request {
                rules: &rules,
                inputs: &read,
                out_dir: &out_dir,
                all,
                lang,
                extensions,
                fragment_timeout_ns: fragments.then(|| fragment_timeout.saturating_mul(1_000_000)),
            })
        }
        Command::Capture {
            interface,
            write,
            count,
            snaplen,
            no_promiscuous,
            level,
            expression: args,
        } => capture::run(&capture::Request {
            interface: &interface,
            write: write.as_deref(),
            count,
            snaplen,
            promiscuous: !no_promiscuous,
            expr: &args.join(" "),
            optimize: level > 0,
        }),
        Command::Compile {
            target,
            program_type,
            output,
            dump,
            bpf_file,
            expr_file,
            level,
            extensions,
            lang,
            linktype,
            snaplen,
            expression: args,
        } => {
            let (lang, expr) =
                lang::source(&args, expr_file.as_deref(), bpf_file.as_deref(), lang)?;
            lang::check_extensions(lang, extensions)?;
            let opts = Options {
                optimize: level > 0,
                extensions,
                ..Options::new(linktype, snaplen)
            };
            let ir = &lang::code_ir(lang, &expr, &opts, level > 0)?;
            if target == Target::Ebpf {
                let ty = sift_ebpf::ProgramType::from_name(&program_type).ok_or_else(|| {
                    anyhow!("unknown eBPF program type {program_type:?} (socket, xdp or tc)")
                })?;
                // eBPF cannot loop or call the coprocessor: with the optimizer on, it gets the
                // unrolled walks and the written-out set lookups optimized.
                let ir = if level > 0 {
                    sift::loop_free(ir)?
                } else {
                    without_set_lookups(ir, false)?
                };
                let ir = &*ir;
                let program = sift_ebpf::compile(ir, &sift_ebpf::Options::new(ty))?;
                emit(format_args!(
                    "{}",
                    sift_ebpf::to_text(&program, "sift_filter")
                ))?;
                if let Some(path) = output {
                    std::fs::write(&path, sift_ebpf::to_elf(&program, "sift_filter")?)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                }
                return Ok(ExitCode::SUCCESS);
            }
            if output.is_some() {
                bail!("-o writes eBPF objects; use --target ebpf");
            }
            let ir = without_set_lookups(ir, level > 0)?;
            let program = sift_bpf::Program(sift_bpf::compile(&ir)?.insns().to_vec());
            match dump {
                0 | 1 => emit(format_args!("{}", sift_bpf::disasm::disassemble(&program)))?,
                2 => emit(format_args!("{}", sift_bpf::numeric::to_dd(&program)))?,
                _ => emit(format_args!("{}", sift_bpf::numeric::to_ddd(&program)))?,
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
            bpf_file,
            extensions,
            lang,
            level,
            engine,
            expression: args,
        } => {
            let (lang, expr) =
                lang::source(&args, expr_file.as_deref(), bpf_file.as_deref(), lang)?;
            lang::check_extensions(lang, extensions)?;
            filter::run(&filter::Request {
                extensions,
                inputs: &read,
                output: write.as_ref(),
                print_count: count,
                linktype,
                lang,
                expr: &expr,
                optimize: level > 0,
                engine,
            })
        }
    }
}

/// The arguments with a bare `-O` (tcpdump's "do not optimize") written `-O0`, which clap
/// reads as the level it means; `-O 0` and `-O 1`, a level given apart, stay as they are.
/// Nothing after `--` is touched.
fn bare_o_as_level_0(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    let mut args: Vec<_> = args.into_iter().collect();
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    for i in 0..end {
        let level_follows = args
            .get(i + 1)
            .and_then(|a| a.to_str())
            .is_some_and(|a| !a.is_empty() && a.bytes().all(|c| c.is_ascii_digit()));
        if args[i] == "-O" && !level_follows {
            args[i] = "-O0".into();
        }
    }
    args
}

/// `-y`: a `LINKTYPE_` number, or a link type's name as `tcpdump -y` takes it.
fn parse_linktype(text: &str) -> Result<u32, String> {
    text.parse()
        .ok()
        .or_else(|| sift::sift_lower::linktype_by_name(text))
        .ok_or_else(|| {
            let names: Vec<&str> = sift::sift_lower::linktype_names().collect();
            format!(
                "not a link type number or a name sift knows ({})",
                names.join(", ")
            )
        })
}

/// Writes to standard output; a reader that went away (`sift debug ir ... | head`) ends the
/// output quietly instead of failing (`print!` would panic).
fn emit(args: std::fmt::Arguments<'_>) -> Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_fmt(args) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// `ir` for back ends without the coprocessor: set lookups written as comparisons, optimized
/// again when `optimized` (as `ir` is).
fn without_set_lookups(
    ir: &sift::sift_ir::Function,
    optimized: bool,
) -> Result<Cow<'_, sift::sift_ir::Function>> {
    Ok(if optimized {
        sift::without_set_lookups(ir)?
    } else {
        sift::sift_ir::set_lookups::without_set_lookups(ir)
    })
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
