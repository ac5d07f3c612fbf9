//! The filter languages the CLI accepts, where their text comes from, and compiling them.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use clap::ValueEnum;
use sift::sift_ir::Function;
use sift::{Filter, Options};

/// The language a filter is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// The tcpdump/libpcap filter language.
    Pcap,
    /// CSPF (1987) stack programs, as the words of a `struct enfilter` initializer.
    Cspf,
    /// DPF (1996) atoms: `(offset:bits == value) && ...`.
    Dpf,
    /// Classic BPF: bpf_asm or `tcpdump -d` text, `tcpdump -ddd` numbers, `tcpdump -dd` C
    /// arrays (a binary `struct sock_filter` array with `--bpf FILE`).
    #[value(alias = "bpf")]
    Cbpf,
    /// MPF (1994): classic BPF text with `ret_match_imm`, `jmp_match_imm` and `key`.
    Mpf,
}

/// The filter text: the arguments joined by spaces (as tcpdump does), or the contents of `-F
/// FILE` (tcpdump ignores the arguments then), or of `--bpf FILE` (classic BPF in any of its
/// forms; a binary array is turned into `-ddd` text).
pub fn source(
    args: &[String],
    expr_file: Option<&Path>,
    bpf_file: Option<&Path>,
    lang: Lang,
) -> Result<(Lang, String)> {
    if let Some(path) = bpf_file {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let order = if cfg!(target_endian = "little") {
                    sift_bpf::numeric::ByteOrder::Little
                } else {
                    sift_bpf::numeric::ByteOrder::Big
                };
                let program = sift_bpf::numeric::from_bytes(e.as_bytes(), order)
                    .map_err(|e| anyhow!("{}: {e}", path.display()))?;
                sift_bpf::numeric::to_ddd(&program)
            }
        };
        return Ok((Lang::Cbpf, text));
    }
    let Some(path) = expr_file else {
        return Ok((lang, args.join(" ")));
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading expression file {}", path.display()))?;
    if lang != Lang::Pcap {
        // The other languages have comment syntaxes of their own.
        return Ok((lang, text));
    }
    // Comments in a pcap expression file start with #.
    let text = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    Ok((lang, text))
}

/// Classic BPF in whichever text form it is written: `tcpdump -dd` C initializers, `tcpdump
/// -ddd` numbers (a count, then `code jt jf k` groups), or assembler text.
fn classic_program(text: &str) -> Result<sift_bpf::Program> {
    let trimmed = text.trim_start();
    let numeric = |c: char| c.is_ascii_digit() || c.is_ascii_whitespace() || c == ',';
    let parsed = if trimmed.starts_with('{') {
        sift_bpf::numeric::parse_dd(text)
    } else if !trimmed.is_empty() && trimmed.chars().all(numeric) {
        sift_bpf::numeric::parse_ddd(text)
    } else {
        sift_bpf::asm::assemble(text)
    };
    parsed.map_err(|e| anyhow!("{e}"))
}

/// Compiles a filter written in `lang` (only pcap-filter expressions depend on the link type).
pub fn compile(lang: Lang, expr: &str, opts: &Options) -> Result<Filter> {
    Ok(Filter::from_ir(lower(lang, expr, opts)?)?)
}

/// The IR of a filter written in `lang`, as lowered (pcap-filter expressions with libpcap's
/// optimizer applied unless `opts.optimize` is off), before sift's optimizer.
pub fn lower(lang: Lang, expr: &str, opts: &Options) -> Result<Function> {
    Ok(match lang {
        Lang::Pcap => sift::compile_ir(expr, opts).map_err(|e| anyhow!("{}", e.render(expr)))?,
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
            let program = classic_program(expr)?;
            let valid = sift_bpf::validate(&program, sift_bpf::Dialect::Libpcap)
                .map_err(|e| anyhow!("{e}"))?;
            sift_bpf::lift(&valid)
        }
    })
}

/// The IR the back ends compile, without building a runnable filter (no bytecode, no native
/// code): optimized by sift-opt when `optimize`, else as lowered; verified either way.
pub fn code_ir(lang: Lang, expr: &str, opts: &Options, optimize: bool) -> Result<Function> {
    let lowered = lower(lang, expr, opts)?;
    if optimize {
        return Ok(sift::optimized_ir(&lowered)?);
    }
    sift::sift_ir::verify(&lowered).map_err(sift::Error::InvalidIr)?;
    Ok(lowered)
}

/// `--extensions` extends the pcap language only.
pub fn check_extensions(lang: Lang, extensions: bool) -> Result<()> {
    if extensions && lang != Lang::Pcap {
        let name = format!("{lang:?}").to_lowercase();
        bail!("--extensions extends the pcap filter language, not {name}");
    }
    Ok(())
}

/// Checks a filter's text before any file is opened, so a typo costs nothing.
pub fn check(lang: Lang, expr: &str, extensions: bool) -> Result<()> {
    match lang {
        Lang::Pcap => {
            sift::sift_syntax::parse_with(expr, extensions)
                .map_err(|e| anyhow!("{}", e.render(expr)))?;
        }
        other => {
            compile(other, expr, &Options::new(1, 262144))?;
        }
    }
    Ok(())
}
