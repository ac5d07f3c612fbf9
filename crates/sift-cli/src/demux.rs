//! `sift demux`: one pass over captures, each packet written to the rule it belongs to.
//!
//! The rules file has one rule per line, `NAME [PRIORITY] [copy]: EXPRESSION`, with `#`
//! comments. Rules are ranked by priority (highest first, default 0), then by their order in
//! the file. A packet goes to the first matching rule that is not `copy`, and to every matching
//! `copy` rule ranked before it; with `--all`, to every matching rule. With `--fragments`, an
//! IP fragment goes where its datagram's first fragment went (fragments that come before their
//! first are held until it arrives, with the capture's timestamps as the clock).

use std::collections::hash_map::{Entry, HashMap};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use sift::demux::{FragmentConfig, FragmentDemux, FragmentStats, Verdict};
use sift::{Delivery, Demux, FilterId, Matches, Options};
use sift_capture::{PcapHeader, PcapWriter, Record};

use crate::captures;
use crate::lang::{self, Lang};

/// One line of the rules file.
#[derive(Debug, PartialEq, Eq)]
pub struct Rule {
    pub name: String,
    pub priority: i32,
    pub delivery: Delivery,
    pub expr: String,
    /// 1-based line number, for messages.
    pub line: usize,
}

/// Parses a rules file; errors name the line and column.
pub fn parse_rules(text: &str) -> Result<Vec<Rule>> {
    let mut rules: Vec<Rule> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.split('#').next().unwrap_or("");
        if line.trim().is_empty() {
            continue;
        }
        let Some(colon) = line.find(':') else {
            bail!("rules line {line_no}: expected `NAME [PRIORITY] [copy]: EXPRESSION`");
        };
        let (head, expr) = (&line[..colon], &line[colon + 1..]);
        let mut words = head.split_whitespace();
        let name = words.next().ok_or_else(|| {
            anyhow!("rules line {line_no}, column 1: a rule needs a name before the `:`")
        })?;
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            || name.starts_with('.')
        {
            bail!("rules line {line_no}: name {name:?} must be letters, digits, `-`, `_`, `.`");
        }
        if rules.iter().any(|r| r.name == name) {
            bail!("rules line {line_no}: a rule named {name:?} already exists");
        }
        let (mut priority, mut delivery) = (0, Delivery::Exclusive);
        for word in words {
            let column = word.as_ptr() as usize - raw.as_ptr() as usize + 1;
            if word == "copy" {
                delivery = Delivery::Copy;
            } else if let Ok(p) = word.parse::<i32>() {
                priority = p;
            } else {
                bail!(
                    "rules line {line_no}, column {column}: expected a priority or `copy`, \
                     found {word:?}"
                );
            }
        }
        rules.push(Rule {
            name: name.to_owned(),
            priority,
            delivery,
            expr: expr.trim().to_owned(),
            line: line_no,
        });
    }
    if rules.is_empty() {
        bail!("the rules file has no rules");
    }
    Ok(rules)
}

/// What `sift demux` was asked to do.
pub struct Request<'a> {
    pub rules: &'a Path,
    pub inputs: &'a [PathBuf],
    pub out_dir: &'a Path,
    pub all: bool,
    pub lang: Lang,
    /// Accept sift's language extensions.
    pub extensions: bool,
    /// Dispatch IP fragments with their first fragment, holding early ones this long (ns).
    pub fragment_timeout_ns: Option<u64>,
}

/// The rules compiled for one link type, and which rule each filter id stands for.
struct Compiled {
    demux: Demux,
    rule_of: HashMap<FilterId, usize>,
    /// With `--fragments`: the fragment state in front of `demux`, holding early fragments.
    fragments: Option<FragmentDemux<Record>>,
}

/// The per-rule outputs.
struct Outputs {
    writers: Vec<PcapWriter<BufWriter<File>>>,
    counts: Vec<u64>,
}

impl Outputs {
    fn deliver(
        &mut self,
        ids: &[FilterId],
        rule_of: &HashMap<FilterId, usize>,
        record: &Record,
    ) -> Result<()> {
        for id in ids {
            let i = rule_of[id];
            self.counts[i] += 1;
            self.writers[i].write_record(record)?;
        }
        Ok(())
    }

    /// Writes the held fragments whose fate was decided (dropped ones are only counted).
    fn release(
        &mut self,
        fragments: &mut FragmentDemux<Record>,
        rule_of: &HashMap<FilterId, usize>,
    ) -> Result<()> {
        for release in fragments.releases() {
            if let Verdict::Deliver(recipients) = release.verdict {
                self.deliver(recipients.delivered(), rule_of, &release.handle)?;
            }
        }
        Ok(())
    }
}

fn timestamp_ns(record: &Record) -> u64 {
    let ts = record.timestamp;
    u64::try_from(ts.secs()).unwrap_or(0) * 1_000_000_000 + u64::from(ts.nanos())
}

fn compile_rules(rules: &[Rule], req: &Request<'_>, opts: &Options) -> Result<Compiled> {
    let lang = req.lang;
    let mut demux = Demux::with_options(*opts);
    let mut rule_of = HashMap::new();
    let mut batch = demux.batch();
    for (i, rule) in rules.iter().enumerate() {
        let filter = lang::compile(lang, &rule.expr, opts)
            .with_context(|| format!("rule {} (line {})", rule.name, rule.line))?;
        let id = batch.insert_filter(&filter, rule.priority, rule.delivery)?;
        rule_of.insert(id, i);
    }
    drop(batch);
    let fragments = match req.fragment_timeout_ns {
        Some(timeout_ns) => {
            let config = FragmentConfig {
                timeout_ns,
                match_all: req.all,
                ..FragmentConfig::default()
            };
            Some(
                FragmentDemux::new(&demux.reader(), opts.linktype, config)
                    .map_err(|e| anyhow!("--fragments: {e}"))?,
            )
        }
        None => None,
    };
    Ok(Compiled {
        demux,
        rule_of,
        fragments,
    })
}

pub fn run(req: &Request<'_>) -> Result<ExitCode> {
    let text = std::fs::read_to_string(req.rules)
        .with_context(|| format!("reading {}", req.rules.display()))?;
    let rules = parse_rules(&text)?;
    for rule in &rules {
        lang::check(req.lang, &rule.expr, req.extensions)
            .with_context(|| format!("rule {} (line {})", rule.name, rule.line))?;
    }
    std::fs::create_dir_all(req.out_dir)
        .with_context(|| format!("creating {}", req.out_dir.display()))?;
    let mut outputs = Outputs {
        writers: Vec::new(),
        counts: vec![0u64; rules.len()],
    };
    let mut matches = Matches::new();
    let mut compiled: HashMap<(u32, u32, bool), Compiled> = HashMap::new();
    let damage = captures::for_each_record(req.inputs, |reader, record| {
        if outputs.writers.is_empty() {
            let header = PcapHeader::tcpdump_for(reader)?;
            for rule in &rules {
                let out = req.out_dir.join(format!("{}.pcap", rule.name));
                let f =
                    File::create(&out).with_context(|| format!("creating {}", out.display()))?;
                outputs
                    .writers
                    .push(PcapWriter::with_header(BufWriter::new(f), header)?);
            }
        }
        let snaplen = reader.snaplen().unwrap_or(262144);
        let swapped = captures::swapped(reader);
        let rules_here = match compiled.entry((record.linktype, snaplen, swapped)) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let opts = Options {
                    swapped,
                    extensions: req.extensions,
                    ..Options::new(record.linktype, snaplen)
                };
                e.insert(compile_rules(&rules, req, &opts)?)
            }
        };
        if let Some(fragments) = rules_here.fragments.as_mut() {
            let now = timestamp_ns(&record);
            let outcome = fragments.dispatch(
                &record.data,
                record.wire_len,
                now,
                || record.clone(),
                &mut matches,
            );
            // Held fragments arrived earlier: they go out first, keeping capture order.
            outputs.release(fragments, &rules_here.rule_of)?;
            if outcome.delivers_now() {
                outputs.deliver(matches.delivered(), &rules_here.rule_of, &record)?;
            }
            return Ok(());
        }
        let demux_reader = rules_here.demux.reader();
        if req.all {
            demux_reader.match_all(&record.data, record.wire_len, &mut matches);
        } else {
            demux_reader.match_packet(&record.data, record.wire_len, &mut matches);
        }
        outputs.deliver(matches.delivered(), &rules_here.rule_of, &record)
    })?;
    let mut stats = Vec::new();
    for compiled in compiled.values_mut() {
        if let Some(fragments) = compiled.fragments.as_mut() {
            fragments.flush();
            outputs.release(fragments, &compiled.rule_of)?;
            stats.push(fragments.stats());
        }
    }
    for w in &mut outputs.writers {
        w.flush()?;
    }
    for (rule, count) in rules.iter().zip(&outputs.counts) {
        println!("{count:>10}  {}", rule.name);
    }
    for s in stats {
        report_fragments(&s);
    }
    match damage {
        Some(e) => Err(e),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// What happened to the fragments, on standard error.
fn report_fragments(s: &FragmentStats) {
    eprintln!(
        "fragments: {} first, {} following, {} postponed ({} released); dropped: {} at \
         timeout, {} evicted, {} refused, {} never saw their first fragment",
        s.first,
        s.following,
        s.postponed,
        s.released,
        s.dropped_timeout,
        s.dropped_evicted,
        s.dropped_refused,
        s.dropped_flushed
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_file_syntax() {
        let rules = parse_rules(
            "# web traffic first\nweb 10: tcp port 80\n\nmonitor 20 copy: tcp # all tcp\nrest: \n",
        )
        .unwrap();
        assert_eq!(rules.len(), 3);
        assert_eq!(
            rules[1],
            Rule {
                name: "monitor".into(),
                priority: 20,
                delivery: Delivery::Copy,
                expr: "tcp".into(),
                line: 4,
            }
        );
        assert_eq!(rules[2].expr, "");
        let e = parse_rules("web ten: tcp").unwrap_err().to_string();
        assert!(e.contains("line 1, column 5"), "{e}");
        assert!(parse_rules("a: ip\na: tcp").is_err());
        assert!(parse_rules("../x: ip").is_err());
        assert!(parse_rules("no colon here").is_err());
        assert!(parse_rules("# nothing\n").is_err());
    }
}
