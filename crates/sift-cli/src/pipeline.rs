//! `sift run RULES -r CAPTURE...`: NetVM-style processing pipelines over captures.
//!
//! Every rule's filter (in the extension language) is installed in one [`sift::Demux`], with
//! the rule's position as its priority (earlier rules first) and copy delivery, so one match
//! per packet lists every rule that sees it, in rule order; a rule whose every match ends in
//! `stop` is installed as exclusive, which ends the demultiplexer's walk there. The packet then
//! goes through the actions of those rules in order ([`Actions`]); a `stop` reached after a
//! `sample` ends the walk here instead. See `docs/pipelines.md`.

use std::collections::hash_map::{Entry, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use sift::demux::LocalReader;
use sift::{Delivery, Demux, Filter, FilterId, Matches, Options};
use sift_capture::Record;

use crate::captures;
use crate::rules::{self, Action, Rule, RulesError};
use crate::set_paths::{rebased_filter, Rebased};
use crate::sinks::{Sink, View};

/// What `sift run` was asked to do.
pub struct Request<'a> {
    pub rules: &'a Path,
    pub inputs: &'a [PathBuf],
    /// Where relative `write` paths go (the current directory if `None`).
    pub out_dir: Option<&'a Path>,
}

/// An action with what it refers to resolved to indices, and its state.
enum Step {
    Write(usize),
    Count,
    Sample { every: u64, seen: u64 },
    Truncate(u32),
    Tag(usize),
    Stop,
}

/// What happened to the packets a rule matched.
#[derive(Clone, Debug, Default)]
struct RuleStats {
    matched: u64,
    /// Wire bytes of the matched packets.
    bytes: u64,
    counted: u64,
    written: u64,
    sampled_out: u64,
    stopped: u64,
    /// For each tag: matched packets that carried it when they reached this rule.
    tags_seen: Vec<u64>,
}

/// The rules' actions, outputs and statistics (the same whatever the link type).
struct Actions {
    steps: Vec<Vec<Step>>,
    has_count: Vec<bool>,
    sinks: Vec<Sink>,
    tags: Vec<String>,
    stats: Vec<RuleStats>,
    /// The current packet's tags, in the order they were attached.
    packet_tags: Vec<usize>,
}

/// The rules compiled for one kind of capture (link type, snapshot length, byte order).
struct Compiled {
    /// Owns the filters `reader` matches against.
    _demux: Demux,
    reader: LocalReader,
    /// The rule each filter stands for, sorted by filter id (a binary search per delivery
    /// costs less than hashing).
    rule_of: Vec<(FilterId, usize)>,
}

impl Compiled {
    fn rule_of(&self, id: FilterId) -> usize {
        match self.rule_of.binary_search_by_key(&id, |&(f, _)| f) {
            Ok(i) => self.rule_of[i].1,
            Err(_) => unreachable!("the demultiplexer reported a filter it was not given"),
        }
    }
}

fn rules_error(file: &str, rule: &Rule, offset: usize, message: String) -> RulesError {
    RulesError {
        file: file.to_owned(),
        at: rule.filter_position(offset),
        message,
    }
}

/// Compiles a rule's filter; errors point into the rules file.
fn compile_filter(
    file: &str,
    rule: &Rule,
    filter: &Rebased,
    opts: &Options,
) -> Result<Filter, RulesError> {
    Filter::compile_with(&filter.text, opts).map_err(|e| {
        let offset = filter.original_offset(e.span().map_or(0, |s| s.start));
        let message = match e {
            sift::Error::Semantic(_) => format!("{e} (link type {})", opts.linktype),
            _ => e.to_string(),
        };
        rules_error(file, rule, offset, message)
    })
}

/// Checks every filter's syntax before any file is opened.
fn check_syntax(file: &str, rules: &[Rule]) -> Result<(), RulesError> {
    for rule in rules {
        sift::sift_syntax::parse_with(&rule.filter, true)
            .map_err(|e| rules_error(file, rule, e.span.start, e.to_string()))?;
    }
    Ok(())
}

fn compile_rules(
    file: &str,
    rules: &[Rule],
    filters: &[Rebased],
    opts: &Options,
) -> Result<Compiled, RulesError> {
    let mut demux = Demux::with_options(*opts);
    let mut batch = demux.batch();
    let mut rule_of = Vec::new();
    let last = rules.len().saturating_sub(1);
    for (i, (rule, filter)) in rules.iter().zip(filters).enumerate() {
        let filter = compile_filter(file, rule, filter, opts)?;
        let delivery = if rule.always_stops() {
            Delivery::Exclusive
        } else {
            Delivery::Copy
        };
        // Earlier rules first: the first rule has the highest priority.
        let priority = i32::try_from(last - i).unwrap_or(i32::MAX);
        let id = batch
            .insert_filter(&filter, priority, delivery)
            .map_err(|e| rules_error(file, rule, 0, e.to_string()))?;
        rule_of.push((id, i));
    }
    drop(batch);
    rule_of.sort_unstable();
    let reader = demux.reader().local();
    Ok(Compiled {
        _demux: demux,
        reader,
        rule_of,
    })
}

impl Actions {
    fn new(rules: &[Rule], out_dir: Option<&Path>) -> Result<Actions> {
        let mut sinks: Vec<Sink> = Vec::new();
        let mut sink_of: HashMap<PathBuf, usize> = HashMap::new();
        let mut tags: Vec<String> = Vec::new();
        let mut steps = Vec::new();
        for rule in rules {
            let mut rule_steps = Vec::new();
            for action in &rule.actions {
                rule_steps.push(match action {
                    Action::Write(path) => {
                        let path = match out_dir {
                            Some(dir) => dir.join(path),
                            None => path.clone(),
                        };
                        let index = match sink_of.entry(same_file_key(&path)) {
                            Entry::Occupied(e) => *e.get(),
                            Entry::Vacant(e) => {
                                sinks.push(Sink::create(path)?);
                                *e.insert(sinks.len() - 1)
                            }
                        };
                        Step::Write(index)
                    }
                    Action::Count => Step::Count,
                    Action::Sample(every) => Step::Sample {
                        every: *every,
                        seen: 0,
                    },
                    Action::Truncate(n) => Step::Truncate(*n),
                    Action::Tag(name) => Step::Tag(match tags.iter().position(|t| t == name) {
                        Some(i) => i,
                        None => {
                            tags.push(name.clone());
                            tags.len() - 1
                        }
                    }),
                    Action::Stop => Step::Stop,
                });
            }
            steps.push(rule_steps);
        }
        let stats = vec![
            RuleStats {
                tags_seen: vec![0; tags.len()],
                ..RuleStats::default()
            };
            rules.len()
        ];
        Ok(Actions {
            has_count: rules
                .iter()
                .map(|r| r.actions.contains(&Action::Count))
                .collect(),
            steps,
            sinks,
            tags,
            stats,
            packet_tags: Vec::new(),
        })
    }

    /// Runs rule `rule`'s actions on a packet; `true` if the packet stops here.
    fn apply(&mut self, rule: usize, record: &Record, snaplen: u32) -> Result<bool> {
        let stats = &mut self.stats[rule];
        stats.matched += 1;
        stats.bytes += u64::from(record.wire_len);
        for &tag in &self.packet_tags {
            stats.tags_seen[tag] += 1;
        }
        let mut captured = record.data.len();
        for step in &mut self.steps[rule] {
            let stats = &mut self.stats[rule];
            match step {
                Step::Write(sink) => {
                    let comment = (!self.packet_tags.is_empty()).then(|| {
                        let names: Vec<&str> = self
                            .packet_tags
                            .iter()
                            .map(|&t| self.tags[t].as_str())
                            .collect();
                        names.join(",")
                    });
                    let view = View {
                        record,
                        captured: &record.data[..captured],
                        snaplen,
                    };
                    self.sinks[*sink].write(&view, comment.as_deref())?;
                    stats.written += 1;
                }
                Step::Count => stats.counted += 1,
                Step::Sample { every, seen } => {
                    let passes = seen.is_multiple_of(*every);
                    *seen += 1;
                    if !passes {
                        stats.sampled_out += 1;
                        return Ok(false);
                    }
                }
                Step::Truncate(n) => captured = captured.min(*n as usize),
                Step::Tag(tag) => {
                    if !self.packet_tags.contains(tag) {
                        self.packet_tags.push(*tag);
                    }
                }
                Step::Stop => {
                    stats.stopped += 1;
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

/// What tells two names of one output file apart: `a.pcap` and `./a.pcap` are one file.
fn same_file_key(path: &Path) -> PathBuf {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(dir), path.file_name()) {
        (Ok(dir), Some(name)) => dir.join(name),
        _ => path.to_owned(),
    }
}

/// Totals over the whole run.
#[derive(Default)]
struct Totals {
    packets: u64,
    bytes: u64,
    matched: u64,
    stopped: u64,
}

pub fn run(req: &Request<'_>) -> Result<ExitCode> {
    let file = req.rules.display().to_string();
    let text = std::fs::read_to_string(req.rules).with_context(|| format!("reading {file}"))?;
    let rules = rules::parse(&file, &text)?;
    check_syntax(&file, &rules)?;
    let base = req.rules.parent().unwrap_or(Path::new(""));
    let filters: Vec<Rebased> = rules.iter().map(|r| rebased_filter(r, base)).collect();
    if let Some(dir) = req.out_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut actions = Actions::new(&rules, req.out_dir)?;
    // Captures rarely mix more than a few kinds of packets: a list searched from the last
    // kind used is cheaper than hashing per packet.
    let mut compiled: Vec<((u32, u32, bool), Compiled)> = Vec::new();
    let mut last_kind = 0;
    let mut matches = Matches::new();
    let mut totals = Totals::default();
    let mut opened = false;
    let started = Instant::now();
    let damage = captures::for_each_record(req.inputs, |reader, record| {
        if !opened {
            let linktype = reader.linktype().unwrap_or(record.linktype);
            for sink in &mut actions.sinks {
                sink.open(reader, linktype)?;
            }
            opened = true;
        }
        let snaplen = reader
            .interfaces()
            .get(record.interface_id as usize)
            .map(|i| i.snaplen)
            .or(reader.snaplen())
            .unwrap_or(262144);
        let swapped = captures::swapped(reader);
        let kind = (record.linktype, snaplen, swapped);
        if compiled.get(last_kind).is_none_or(|(k, _)| *k != kind) {
            last_kind = match compiled.iter().position(|(k, _)| *k == kind) {
                Some(i) => i,
                None => {
                    let opts = Options {
                        swapped,
                        extensions: true,
                        ..Options::new(record.linktype, snaplen)
                    };
                    compiled.push((kind, compile_rules(&file, &rules, &filters, &opts)?));
                    compiled.len() - 1
                }
            };
        }
        let engine = &mut compiled[last_kind].1;
        totals.packets += 1;
        totals.bytes += u64::from(record.wire_len);
        engine
            .reader
            .match_packet(&record.data, record.wire_len, &mut matches);
        if !matches.delivered().is_empty() {
            totals.matched += 1;
        }
        actions.packet_tags.clear();
        for id in matches.delivered() {
            if actions.apply(engine.rule_of(*id), &record, snaplen)? {
                totals.stopped += 1;
                break;
            }
        }
        Ok(())
    })?;
    for sink in &mut actions.sinks {
        sink.flush()?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    report(&rules, &actions, &totals, elapsed)?;
    match damage {
        Some(e) => Err(e),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// Prints the per-rule table and the totals on standard output.
fn report(rules: &[Rule], actions: &Actions, totals: &Totals, elapsed: f64) -> Result<()> {
    let width = rules.iter().map(|r| r.name.len()).max().unwrap_or(0).max(4);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<width$} {:>10} {:>12} {:>8} {:>8} {:>11} {:>8}  tags",
        "rule", "matched", "bytes", "counted", "written", "sampled-out", "stopped"
    )?;
    for (i, rule) in rules.iter().enumerate() {
        let s = &actions.stats[i];
        let counted = if actions.has_count[i] {
            s.counted.to_string()
        } else {
            "-".to_owned()
        };
        let tags: Vec<String> = actions
            .tags
            .iter()
            .zip(&s.tags_seen)
            .filter(|(_, &n)| n > 0)
            .map(|(t, n)| format!("{t}={n}"))
            .collect();
        let tags = if tags.is_empty() {
            "-".to_owned()
        } else {
            tags.join(" ")
        };
        writeln!(
            out,
            "{:<width$} {:>10} {:>12} {:>8} {:>8} {:>11} {:>8}  {tags}",
            rule.name, s.matched, s.bytes, counted, s.written, s.sampled_out, s.stopped
        )?;
    }
    let rate = if elapsed > 0.0 {
        totals.packets as f64 / elapsed
    } else {
        0.0
    };
    writeln!(
        out,
        "total: {} packets, {} bytes; {} matched a rule, {} stopped; {:.3} s, {:.0} packets/s",
        totals.packets, totals.bytes, totals.matched, totals.stopped, elapsed, rate
    )?;
    out.flush()?;
    Ok(())
}
