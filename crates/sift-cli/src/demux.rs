//! `sift demux`: one pass over captures, each packet written to the rule it belongs to.
//!
//! The rules file has one rule per line, `NAME [PRIORITY] [copy]: EXPRESSION`, with `#`
//! comments. Rules are ranked by priority (highest first, default 0), then by their order in
//! the file. A packet goes to the first matching rule that is not `copy`, and to every matching
//! `copy` rule ranked before it; with `--all`, to every matching rule.

use std::collections::hash_map::{Entry, HashMap};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use sift::{Delivery, Demux, FilterId, Matches, Options};
use sift_capture::{PcapHeader, PcapWriter};

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
}

/// The rules compiled for one link type, and which rule each filter id stands for.
struct Compiled {
    demux: Demux,
    rule_of: HashMap<FilterId, usize>,
}

fn compile_rules(rules: &[Rule], lang: Lang, opts: &Options) -> Result<Compiled> {
    let mut demux = Demux::with_options(*opts);
    let mut rule_of = HashMap::new();
    for (i, rule) in rules.iter().enumerate() {
        let filter = lang::compile(lang, &rule.expr, opts)
            .with_context(|| format!("rule {} (line {})", rule.name, rule.line))?;
        let id = demux.insert_filter(&filter, rule.priority, rule.delivery)?;
        rule_of.insert(id, i);
    }
    Ok(Compiled { demux, rule_of })
}

pub fn run(req: &Request<'_>) -> Result<ExitCode> {
    let text = std::fs::read_to_string(req.rules)
        .with_context(|| format!("reading {}", req.rules.display()))?;
    let rules = parse_rules(&text)?;
    for rule in &rules {
        lang::check(req.lang, &rule.expr)
            .with_context(|| format!("rule {} (line {})", rule.name, rule.line))?;
    }
    std::fs::create_dir_all(req.out_dir)
        .with_context(|| format!("creating {}", req.out_dir.display()))?;
    let mut writers: Vec<PcapWriter<BufWriter<File>>> = Vec::new();
    let mut counts = vec![0u64; rules.len()];
    let mut matches = Matches::new();
    let mut compiled: HashMap<(u32, u32, bool), Compiled> = HashMap::new();
    let damage = captures::for_each_record(req.inputs, |reader, record| {
        if writers.is_empty() {
            let header = PcapHeader::tcpdump_for(reader)?;
            for rule in &rules {
                let out = req.out_dir.join(format!("{}.pcap", rule.name));
                let f =
                    File::create(&out).with_context(|| format!("creating {}", out.display()))?;
                writers.push(PcapWriter::with_header(BufWriter::new(f), header)?);
            }
        }
        let snaplen = reader.snaplen().unwrap_or(262144);
        let swapped = captures::swapped(reader);
        let rules_here = match compiled.entry((record.linktype, snaplen, swapped)) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let opts = Options {
                    swapped,
                    ..Options::new(record.linktype, snaplen)
                };
                e.insert(compile_rules(&rules, req.lang, &opts)?)
            }
        };
        let demux_reader = rules_here.demux.reader();
        if req.all {
            demux_reader.match_all(&record.data, record.wire_len, &mut matches);
        } else {
            demux_reader.match_packet(&record.data, record.wire_len, &mut matches);
        }
        for id in matches.delivered() {
            let i = rules_here.rule_of[id];
            counts[i] += 1;
            writers[i].write_record(&record)?;
        }
        Ok(())
    })?;
    for w in &mut writers {
        w.flush()?;
    }
    for (rule, count) in rules.iter().zip(&counts) {
        println!("{count:>10}  {}", rule.name);
    }
    match damage {
        Some(e) => Err(e),
        None => Ok(ExitCode::SUCCESS),
    }
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
