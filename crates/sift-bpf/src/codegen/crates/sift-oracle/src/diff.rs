//! Engine-agnostic differential testing against libpcap.
//!
//! An [`Engine`] compiles a pcap-filter expression for a link type into a matcher
//! (`Fn(&[u8], wire_len) -> bool`). [`run_diff`] compiles every expression with the engine and with
//! libpcap (optimized, netmask 0, exactly like `tcpdump -r FILE -w OUT EXPR`), then runs every
//! packet through both and collects every disagreement into a [`DiffReport`]. libpcap's
//! "expression rejects all packets" counts as an accepted filter that matches nothing.
//!
//! [`load_shared_exprs`] reads the shared expression tables (`LINKTYPE-name TAB expression`).

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::{linktype, Oracle, OracleError, DEFAULT_SNAPLEN};

/// Instruction budget for programs with backward jumps (libpcap's `protochain`), which may not
/// terminate on some packets; see [`crate::Program::run_bounded`].
pub const MAX_STEPS: u64 = 1_000_000;

/// A compiled filter of the engine under test: `(captured bytes, wire length) -> accept?`.
pub type Matcher = Box<dyn Fn(&[u8], u32) -> bool>;

/// An engine under test.
///
/// Any closure `Fn(&str, u32, u32) -> Result<Matcher, String>` (expression, LINKTYPE, snaplen) is
/// an engine.
pub trait Engine {
    /// Compiles `expr` for `linktype` and `snaplen`; `Err` carries the engine's error message.
    fn compile(&self, expr: &str, linktype: u32, snaplen: u32) -> Result<Matcher, String>;

    /// A name for reports.
    fn name(&self) -> String {
        "engine under test".to_string()
    }
}

impl<F> Engine for F
where
    F: Fn(&str, u32, u32) -> Result<Matcher, String>,
{
    fn compile(&self, expr: &str, linktype: u32, snaplen: u32) -> Result<Matcher, String> {
        self(expr, linktype, snaplen)
    }
}

/// libpcap itself as an engine under test (e.g. unoptimized, to diff against the optimized oracle).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LibpcapEngine {
    /// Whether to run libpcap's optimizer.
    pub optimize: bool,
    /// Netmask given to `pcap_compile`.
    pub netmask: u32,
}

impl Engine for LibpcapEngine {
    fn compile(&self, expr: &str, linktype: u32, snaplen: u32) -> Result<Matcher, String> {
        let oracle = Oracle::new(linktype, snaplen).map_err(|e| e.to_string())?;
        match oracle.compile(expr, self.optimize, self.netmask) {
            Ok(prog) => Ok(Box::new(move |pkt: &[u8], wire: u32| {
                prog.run_bounded(pkt, wire, MAX_STEPS).unwrap_or(0) != 0
            })),
            Err(OracleError::RejectsAll) => Ok(Box::new(|_: &[u8], _: u32| false)),
            Err(e) => Err(e.to_string()),
        }
    }

    fn name(&self) -> String {
        format!(
            "libpcap (optimize={}, netmask={:#x})",
            u8::from(self.optimize),
            self.netmask
        )
    }
}

/// Something that can be fed to a filter: captured bytes plus the original wire length.
pub trait PacketRef {
    /// The captured bytes.
    fn bytes(&self) -> &[u8];
    /// The length on the wire (>= `bytes().len()` for truncated captures).
    fn wire_len(&self) -> u32;
}

impl PacketRef for sift_testgen::Packet {
    fn bytes(&self) -> &[u8] {
        &self.data
    }
    fn wire_len(&self) -> u32 {
        self.wire_len
    }
}

impl PacketRef for (Vec<u8>, u32) {
    fn bytes(&self) -> &[u8] {
        &self.0
    }
    fn wire_len(&self) -> u32 {
        self.1
    }
}

impl PacketRef for (&[u8], u32) {
    fn bytes(&self) -> &[u8] {
        self.0
    }
    fn wire_len(&self) -> u32 {
        self.1
    }
}

/// How to run a differential test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffOptions {
    /// Snapshot length given to both sides (default [`DEFAULT_SNAPLEN`], like tcpdump).
    pub snaplen: u32,
    /// Whether the oracle optimizes (default `true`, like tcpdump).
    pub optimize: bool,
    /// Oracle netmask (default `0`, like `tcpdump -r`).
    pub netmask: u32,
    /// Verdict mismatches recorded in full per expression; further ones are only counted.
    pub max_verdicts_per_expr: usize,
    /// Divergences printed in full by `Display`; the rest are summarized as counts.
    pub display_limit: usize,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            snaplen: DEFAULT_SNAPLEN,
            optimize: true,
            netmask: 0,
            max_verdicts_per_expr: 1,
            display_limit: 10,
        }
    }
}

/// One disagreement between the engine and libpcap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// The expression.
    pub expr: String,
    /// What differed.
    pub kind: DivergenceKind,
}

/// What differed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DivergenceKind {
    /// One side compiled the expression and the other rejected it. Exactly one message is `Some`.
    AcceptReject {
        /// libpcap's error message, if libpcap rejected it.
        libpcap_error: Option<String>,
        /// The engine's error message, if the engine rejected it.
        engine_error: Option<String>,
    },
    /// Both compiled it, but they disagree on a packet.
    Verdict {
        /// Index of the packet in the list given to [`run_diff`].
        packet_index: usize,
        /// Its wire length.
        wire_len: u32,
        /// Its captured bytes, in hex.
        packet_hex: String,
        /// libpcap's verdict.
        expected: bool,
        /// libpcap's raw return value (snapshot length or 0).
        libpcap_return: u32,
        /// The engine's verdict.
        got: bool,
        /// Further packets on which this expression also diverges (not listed).
        more_packets: usize,
    },
}

/// The outcome of [`run_diff`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffReport {
    /// The engine's name.
    pub engine: String,
    /// The LINKTYPE tested.
    pub linktype: u32,
    /// Expressions tried.
    pub expressions: usize,
    /// Packets per expression.
    pub packets: usize,
    /// Expressions both sides compiled (including libpcap's "rejects all packets").
    pub both_accepted: usize,
    /// Expressions both sides rejected.
    pub both_rejected: usize,
    /// Expressions libpcap's optimizer reported as "expression rejects all packets".
    pub rejects_all: usize,
    /// (expression, packet) pairs run through both sides.
    pub pairs_compared: u64,
    /// Of those, pairs libpcap accepted.
    pub pairs_matched: u64,
    /// Every disagreement (verdicts capped per expression, see [`DiffOptions`]).
    pub divergences: Vec<Divergence>,
    /// (expression, packet) pairs skipped because libpcap's program does not terminate on the
    /// packet (the `protochain` AH loop bug; see [`crate::Program::run_bounded`]).
    pub oracle_nonterminating: u64,
    /// The first few of those: (expression, packet index, packet hex).
    pub nonterminating_examples: Vec<(String, usize, String)>,
    /// How many divergences `Display` prints in full.
    pub display_limit: usize,
}

impl DiffReport {
    /// No disagreement at all.
    pub fn is_clean(&self) -> bool {
        self.divergences.is_empty()
    }

    /// Number of accept/reject disagreements.
    pub fn accept_reject_count(&self) -> usize {
        self.divergences
            .iter()
            .filter(|d| matches!(d.kind, DivergenceKind::AcceptReject { .. }))
            .count()
    }

    /// Number of (expression, packet) pairs with different verdicts, including the unlisted ones.
    pub fn verdict_pair_count(&self) -> usize {
        self.divergences
            .iter()
            .map(|d| match d.kind {
                DivergenceKind::Verdict { more_packets, .. } => 1 + more_packets,
                DivergenceKind::AcceptReject { .. } => 0,
            })
            .sum()
    }

    /// Adds another report's counts and divergences to this one (e.g. across link types).
    pub fn merge(&mut self, other: DiffReport) {
        self.expressions += other.expressions;
        self.packets = self.packets.max(other.packets);
        self.both_accepted += other.both_accepted;
        self.both_rejected += other.both_rejected;
        self.rejects_all += other.rejects_all;
        self.pairs_compared += other.pairs_compared;
        self.pairs_matched += other.pairs_matched;
        self.divergences.extend(other.divergences);
        self.oracle_nonterminating += other.oracle_nonterminating;
        self.nonterminating_examples
            .extend(other.nonterminating_examples);
    }
}

fn quote(s: &str) -> String {
    s.escape_debug().to_string()
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: ", quote(&self.expr))?;
        match &self.kind {
            DivergenceKind::AcceptReject {
                libpcap_error,
                engine_error,
            } => match (libpcap_error, engine_error) {
                (Some(l), None) => write!(f, "libpcap rejects ({l}), engine accepts"),
                (None, Some(e)) => write!(f, "libpcap accepts, engine rejects ({e})"),
                (l, e) => write!(f, "accept/reject mismatch (libpcap: {l:?}, engine: {e:?})"),
            },
            DivergenceKind::Verdict {
                packet_index,
                wire_len,
                packet_hex,
                expected,
                libpcap_return,
                got,
                more_packets,
            } => {
                let verb = |b: bool| if b { "matches" } else { "does not match" };
                write!(
                    f,
                    "packet #{packet_index} (caplen {}, wire_len {wire_len}): libpcap {} \
                     (ret {libpcap_return}), engine {}",
                    packet_hex.len() / 2,
                    verb(*expected),
                    verb(*got)
                )?;
                if *more_packets > 0 {
                    write!(f, " [+{more_packets} more packets]")?;
                }
                write!(f, "\n      {packet_hex}")
            }
        }
    }
}

impl fmt::Display for DiffReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lt_name = linktype::name(self.linktype).unwrap_or("?");
        writeln!(
            f,
            "{} vs libpcap, linktype {} ({lt_name}): {} expressions ({} compiled by both, {} \
             rejected by both, {} reject-all), {} packets, {} pairs compared ({} matched): {} \
             divergences ({} accept/reject, {} verdict pairs)",
            self.engine,
            self.linktype,
            self.expressions,
            self.both_accepted,
            self.both_rejected,
            self.rejects_all,
            self.packets,
            self.pairs_compared,
            self.pairs_matched,
            self.divergences.len(),
            self.accept_reject_count(),
            self.verdict_pair_count(),
        )?;
        if self.oracle_nonterminating > 0 {
            writeln!(
                f,
                "  {} pairs skipped: libpcap's program does not terminate (protochain AH loop)",
                self.oracle_nonterminating
            )?;
            for (expr, index, hex) in self.nonterminating_examples.iter().take(3) {
                writeln!(f, "    `{}` on packet #{index}: {hex}", quote(expr))?;
            }
        }
        for (i, d) in self.divergences.iter().take(self.display_limit).enumerate() {
            writeln!(f, "  [{}] {d}", i + 1)?;
        }
        let rest = &self.divergences[self.divergences.len().min(self.display_limit)..];
        if !rest.is_empty() {
            let ar = rest
                .iter()
                .filter(|d| matches!(d.kind, DivergenceKind::AcceptReject { .. }))
                .count();
            writeln!(
                f,
                "  ... and {} more ({ar} accept/reject, {} verdict)",
                rest.len(),
                rest.len() - ar
            )?;
        }
        Ok(())
    }
}

/// Runs `exprs` over `packets` (all of LINKTYPE `linktype`) with `engine` and with libpcap, and
/// reports every disagreement.
///
/// Fails only if libpcap cannot open a handle for `linktype`.
pub fn run_diff<E, S, P>(
    engine: &E,
    linktype: u32,
    exprs: &[S],
    packets: &[P],
    opts: &DiffOptions,
) -> Result<DiffReport, OracleError>
where
    E: Engine + ?Sized,
    S: AsRef<str>,
    P: PacketRef,
{
    let oracle = Oracle::new(linktype, opts.snaplen)?;
    let mut report = DiffReport {
        engine: engine.name(),
        linktype,
        expressions: exprs.len(),
        packets: packets.len(),
        both_accepted: 0,
        both_rejected: 0,
        rejects_all: 0,
        pairs_compared: 0,
        pairs_matched: 0,
        divergences: Vec::new(),
        oracle_nonterminating: 0,
        nonterminating_examples: Vec::new(),
        display_limit: opts.display_limit,
    };
    for expr in exprs {
        let expr = expr.as_ref();
        let expected = oracle.compile(expr, opts.optimize, opts.netmask);
        let got = engine.compile(expr, linktype, opts.snaplen);
        let program = match (expected, got) {
            (Err(OracleError::RejectsAll), Ok(m)) => {
                report.rejects_all += 1;
                report.both_accepted += 1;
                (None, m)
            }
            (Ok(p), Ok(m)) => {
                report.both_accepted += 1;
                (Some(p), m)
            }
            (Err(_), Err(_)) => {
                report.both_rejected += 1;
                continue;
            }
            (Err(e), Ok(_)) => {
                if e == OracleError::RejectsAll {
                    report.rejects_all += 1;
                }
                report.divergences.push(Divergence {
                    expr: expr.to_string(),
                    kind: DivergenceKind::AcceptReject {
                        libpcap_error: Some(e.to_string()),
                        engine_error: None,
                    },
                });
                continue;
            }
            (Ok(_), Err(msg)) => {
                report.divergences.push(Divergence {
                    expr: expr.to_string(),
                    kind: DivergenceKind::AcceptReject {
                        libpcap_error: None,
                        engine_error: Some(msg),
                    },
                });
                continue;
            }
        };
        let (program, matcher) = program;
        let mut listed = 0usize;
        let mut last_listed: Option<usize> = None;
        for (index, pkt) in packets.iter().enumerate() {
            let data = pkt.bytes();
            let wire = pkt.wire_len();
            let ret = match program
                .as_ref()
                .map(|p| p.run_bounded(data, wire, MAX_STEPS))
            {
                None => 0,
                Some(Some(ret)) => ret,
                Some(None) => {
                    report.oracle_nonterminating += 1;
                    if report.nonterminating_examples.len() < 10 {
                        report
                            .nonterminating_examples
                            .push((expr.to_string(), index, hex(data)));
                    }
                    continue;
                }
            };
            let want = ret != 0;
            let have = matcher(data, wire);
            report.pairs_compared += 1;
            report.pairs_matched += u64::from(want);
            if want == have {
                continue;
            }
            if listed < opts.max_verdicts_per_expr.max(1) {
                listed += 1;
                report.divergences.push(Divergence {
                    expr: expr.to_string(),
                    kind: DivergenceKind::Verdict {
                        packet_index: index,
                        wire_len: wire,
                        packet_hex: hex(data),
                        expected: want,
                        libpcap_return: ret,
                        got: have,
                        more_packets: 0,
                    },
                });
                last_listed = Some(report.divergences.len() - 1);
            } else if let Some(DivergenceKind::Verdict { more_packets, .. }) =
                last_listed.map(|i| &mut report.divergences[i].kind)
            {
                *more_packets += 1;
            }
        }
    }
    Ok(report)
}

/// Lowercase hex of `bytes`, no separators.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// Why the shared expression tables could not be read.
#[derive(Debug)]
pub enum LoadError {
    /// Reading the directory or a file failed.
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A line lacks the TAB between link-type name and expression.
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            LoadError::Malformed { path, line } => {
                write!(
                    f,
                    "{}:{line}: expected `LINKTYPE<TAB>expression`",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoadError::Io { source, .. } => Some(source),
            LoadError::Malformed { .. } => None,
        }
    }
}

/// Undoes the TSV escaping of an expression: `\n` -> newline, `\t` -> tab, `\\` -> `\`.
///
/// A backslash right after the keyword `proto` is pcap-filter syntax (`proto \tcp`,
/// `ether proto \netbeui`), not an escape, and is kept as is.
pub fn unescape_expr(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let after_proto = out.trim_end().ends_with("proto") && out.ends_with(char::is_whitespace);
        match chars.peek() {
            Some('n') if !after_proto => {
                chars.next();
                out.push('\n');
            }
            Some('t') if !after_proto => {
                chars.next();
                out.push('\t');
            }
            Some('\\') => {
                chars.next();
                out.push('\\');
            }
            _ => out.push('\\'),
        }
    }
    out
}

/// Reads every `*.tsv` file in `dir` (sorted by name): lines `LINKTYPE-name TAB expression`, the
/// expression with `\n`/`\t` escapes (see [`unescape_expr`]). Blank lines and lines starting with
/// `#` are skipped. Returns `(linktype name, expression)` pairs; map names with
/// [`linktype::from_name`].
pub fn load_shared_exprs(dir: impl AsRef<Path>) -> Result<Vec<(String, String)>, LoadError> {
    let dir = dir.as_ref();
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LoadError::Io { path, source }
    };
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(io_err(dir))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io_err(dir))?;
    files.retain(|p| p.extension().is_some_and(|e| e == "tsv"));
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let text = fs::read_to_string(&path).map_err(io_err(&path))?;
        out.extend(parse_tsv(&text).map_err(|line| LoadError::Malformed {
            path: path.clone(),
            line,
        })?);
    }
    Ok(out)
}

/// Parses one TSV table (see [`load_shared_exprs`]); `Err` holds the 1-based malformed line.
pub fn parse_tsv(text: &str) -> Result<Vec<(String, String)>, usize> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, expr) = line.split_once('\t').ok_or(i + 1)?;
        out.push((name.trim().to_string(), unescape_expr(expr)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth_ipv4_udp(dport: u16) -> Vec<u8> {
        let mut p = vec![0xff; 6];
        p.extend_from_slice(&[0, 0x11, 0x22, 0x33, 0x44, 0, 8, 0]);
        p.extend_from_slice(&[
            0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        p.extend_from_slice(&[0x30, 0x39]);
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&[0, 8, 0, 0]);
        p
    }

    #[test]
    fn unescape() {
        assert_eq!(unescape_expr(r"\n\tip and\n\ttcp"), "\n\tip and\n\ttcp");
        assert_eq!(unescape_expr(r"proto \tcp"), r"proto \tcp");
        assert_eq!(
            unescape_expr(r"ether proto \netbeui"),
            r"ether proto \netbeui"
        );
        assert_eq!(unescape_expr(r"a\\b"), r"a\b");
        assert_eq!(
            parse_tsv("EN10MB\tip\n\nRAW\tproto \\tcp\n").unwrap(),
            vec![
                ("EN10MB".to_string(), "ip".to_string()),
                ("RAW".to_string(), r"proto \tcp".to_string())
            ]
        );
        assert_eq!(parse_tsv("EN10MB ip\n"), Err(1));
    }

    #[test]
    fn libpcap_against_itself_is_clean() {
        let packets = vec![(eth_ipv4_udp(53), 42u32), (eth_ipv4_udp(80), 42)];
        let exprs = [
            "udp port 53",
            "tcp",
            "ip and not ip",
            "bogus junk",
            "ip broadcast",
        ];
        let engine = LibpcapEngine {
            optimize: false,
            netmask: 0,
        };
        let r = run_diff(&engine, 1, &exprs, &packets, &DiffOptions::default()).unwrap();
        assert!(r.is_clean(), "{r}");
        assert_eq!(r.both_accepted, 4);
        assert_eq!(r.both_rejected, 1);
        assert_eq!(r.rejects_all, 1);
        assert_eq!(r.pairs_compared, 8);
        // Only `udp port 53` on the first packet: with netmask 0, `ip broadcast` means
        // 255.255.255.255 or 0.0.0.0.
        assert_eq!(r.pairs_matched, 1);
    }

    #[test]
    fn divergences_are_reported() {
        let packets: Vec<(Vec<u8>, u32)> = (0..5).map(|i| (eth_ipv4_udp(50 + i), 42)).collect();
        // An engine that accepts everything and rejects expressions mentioning "tcp".
        let engine = |expr: &str, _lt: u32, _snap: u32| -> Result<Matcher, String> {
            if expr.contains("tcp") {
                Err("no tcp here".to_string())
            } else {
                Ok(Box::new(|_: &[u8], _: u32| true))
            }
        };
        let opts = DiffOptions {
            display_limit: 2,
            ..DiffOptions::default()
        };
        let exprs = ["udp port 53", "tcp", "syntax (", "ip and not ip"];
        let r = run_diff(&engine, 1, &exprs, &packets, &opts).unwrap();
        assert_eq!(r.accept_reject_count(), 2, "{r}");
        assert_eq!(r.verdict_pair_count(), 4 + 5, "{r}");
        let text = r.to_string();
        assert!(
            text.contains("libpcap accepts, engine rejects (no tcp here)"),
            "{text}"
        );
        assert!(
            text.contains("... and 2 more (1 accept/reject, 1 verdict)"),
            "{text}"
        );
        let DivergenceKind::Verdict {
            packet_index,
            more_packets,
            ..
        } = r.divergences[0].kind
        else {
            panic!("{r}")
        };
        assert_eq!((packet_index, more_packets), (0, 3));
    }

    #[test]
    fn loads_shared_tables_if_present() {
        let dir = Path::new("/work/shared/exprs");
        if !dir.exists() {
            return;
        }
        let exprs = load_shared_exprs(dir).unwrap();
        assert!(exprs.len() > 100);
        for (name, _) in &exprs {
            assert!(
                linktype::from_name(name).is_some(),
                "unknown linktype {name}"
            );
        }
        assert!(exprs.iter().any(|(_, e)| e == r"proto \tcp"));
        assert!(exprs.iter().any(|(_, e)| e.contains("\n\t")));
    }
}
