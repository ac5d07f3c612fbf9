//! The rules file of `sift run`: one rule per logical line, `rule NAME: FILTER => ACTION, ...`.
//!
//! A logical line is a physical line, or several joined by a `\` at the end of all but the last
//! (the `\` and the line break read as one space). `#` starts a comment, except inside a
//! double-quoted string (filters of the extension language have strings:
//! `payload contains "#!"`), as `=>` and `,` inside strings are not separators either. Every
//! piece of a logical line remembers where it came from, so an error anywhere (including one the
//! filter compiler reports with a span inside the filter) is shown at its file, line and column.
//! The full format and its semantics are in `docs/pipelines.md`.

use std::fmt;
use std::path::PathBuf;

/// What a rule does with a packet its filter matches, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Write the packet (as the rule's earlier actions left it) to a capture file; pcapng when
    /// the name ends in `.pcapng`, else pcap.
    Write(PathBuf),
    /// Count the packets that reach this action.
    Count,
    /// Let 1 in N of the packets reaching this action go on to the rule's later actions (the
    /// 1st, the N+1st, ...); the others end here (counted as sampled out).
    Sample(u64),
    /// Later actions of the rule see at most this many captured bytes.
    Truncate(u32),
    /// Attach a tag to the packet, for later actions and rules.
    Tag(String),
    /// Later rules do not see the packet.
    Stop,
}

/// One rule of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub name: String,
    /// The filter, in the extension language (may be empty: every packet).
    pub filter: String,
    pub actions: Vec<Action>,
    /// Maps offsets in `filter` back to the file.
    pub(crate) source: LogicalLine,
    /// `filter`'s offset in `source`.
    pub(crate) filter_offset: usize,
    /// The name's offset in `source`.
    name_offset: usize,
}

impl Rule {
    /// Whether every packet that matches the filter is stopped (no `sample` before the
    /// `stop`), so the demultiplexer can end its walk at this rule.
    pub fn always_stops(&self) -> bool {
        for action in &self.actions {
            match action {
                Action::Stop => return true,
                Action::Sample(n) if *n > 1 => return false,
                _ => {}
            }
        }
        false
    }

    /// The file position of byte `offset` of the filter text.
    pub fn filter_position(&self, offset: usize) -> Position {
        self.source.position(self.filter_offset + offset)
    }
}

/// A place in the rules file: 1-based line and column (columns count characters), with the
/// line's text for showing it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub column: usize,
    pub text: String,
}

/// An error in a rules file (or in a filter of one), at a position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RulesError {
    pub file: String,
    pub at: Position,
    pub message: String,
}

impl fmt::Display for RulesError {
    /// `FILE:LINE:COLUMN: MESSAGE`, then the line with a caret under the column.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Position { line, column, text } = &self.at;
        writeln!(f, "{}:{line}:{column}: {}", self.file, self.message)?;
        let gutter = " ".repeat(line.to_string().len());
        let shown: String = text
            .trim_end()
            .chars()
            .map(|c| if c == '\t' { ' ' } else { c })
            .collect();
        writeln!(f, "{gutter} |")?;
        writeln!(f, "{line} | {shown}")?;
        write!(f, "{gutter} | {}^", " ".repeat(column.saturating_sub(1)))
    }
}

impl std::error::Error for RulesError {}

/// A piece of a logical line: where it starts in the logical text, and in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Piece {
    start: usize,
    line: usize,
    /// Byte offset in the physical line where the piece begins.
    line_offset: usize,
    line_text: String,
}

/// The text of one logical line and the physical pieces it was joined from.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) struct LogicalLine {
    text: String,
    pieces: Vec<Piece>,
}

impl LogicalLine {
    /// The file position of a byte offset in the logical text (offsets past a piece's end,
    /// such as the space that joined two lines, fall on the end of that piece).
    fn position(&self, offset: usize) -> Position {
        let Some(piece) = self.pieces.iter().rev().find(|p| p.start <= offset) else {
            return Position {
                line: 1,
                column: 1,
                text: String::new(),
            };
        };
        let mut at = (piece.line_offset + (offset - piece.start)).min(piece.line_text.len());
        while !piece.line_text.is_char_boundary(at) {
            at -= 1;
        }
        Position {
            line: piece.line,
            column: piece.line_text[..at].chars().count() + 1,
            text: piece.line_text.clone(),
        }
    }
}

/// Where each byte of `text` is: outside strings, `#` and the separators count.
pub(crate) struct Scanner<'a> {
    pub(crate) text: &'a str,
}

impl Scanner<'_> {
    /// Byte offsets of the characters outside double-quoted strings (a `\` inside a string
    /// escapes the next character).
    pub(crate) fn outside(&self) -> impl Iterator<Item = (usize, char)> + '_ {
        let mut in_string = false;
        let mut escaped = false;
        self.text.char_indices().filter(move |&(_, c)| {
            if in_string {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    in_string = false;
                }
                false
            } else {
                if c == '"' {
                    in_string = true;
                }
                c != '"'
            }
        })
    }

    fn find(&self, wanted: char) -> Option<usize> {
        self.outside().find(|&(_, c)| c == wanted).map(|(i, _)| i)
    }

    /// The first `=>` outside strings.
    fn find_arrow(&self) -> Option<usize> {
        self.outside()
            .find(|&(i, c)| c == '=' && self.text[i + 1..].starts_with('>'))
            .map(|(i, _)| i)
    }
}

/// Joins physical lines into logical ones (comments removed, `\` continuations joined).
fn logical_lines(text: &str) -> Vec<LogicalLine> {
    let mut lines = Vec::new();
    let mut current = LogicalLine::default();
    for (i, raw) in text.lines().enumerate() {
        let code = match (Scanner { text: raw }).find('#') {
            Some(hash) => &raw[..hash],
            None => raw,
        };
        let trimmed = code.trim_end();
        let (content, continues) = match trimmed.strip_suffix('\\') {
            Some(before) => (before, true),
            None => (code, false),
        };
        if !current.text.is_empty() {
            current.text.push(' ');
        }
        current.pieces.push(Piece {
            start: current.text.len(),
            line: i + 1,
            line_offset: 0,
            line_text: raw.to_owned(),
        });
        current.text.push_str(content);
        if !continues {
            lines.push(std::mem::take(&mut current));
        }
    }
    if !current.pieces.is_empty() {
        lines.push(current);
    }
    lines
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Parses a rules file; `file` names it in errors.
pub fn parse(file: &str, text: &str) -> Result<Vec<Rule>, RulesError> {
    let mut rules: Vec<Rule> = Vec::new();
    for line in logical_lines(text) {
        if line.text.trim().is_empty() {
            continue;
        }
        let rule = parse_rule(&line).map_err(|(offset, message)| RulesError {
            file: file.to_owned(),
            at: line.position(offset),
            message,
        })?;
        if rules.iter().any(|r| r.name == rule.name) {
            return Err(RulesError {
                file: file.to_owned(),
                at: line.position(rule.name_offset),
                message: format!("a rule named {:?} already exists", rule.name),
            });
        }
        rules.push(rule);
    }
    if rules.is_empty() {
        return Err(RulesError {
            file: file.to_owned(),
            at: Position {
                line: 1,
                column: 1,
                text: text.lines().next().unwrap_or("").to_owned(),
            },
            message: "the rules file has no rules".to_owned(),
        });
    }
    Ok(rules)
}

/// An error inside a logical line: the byte offset and the message.
type LineError = (usize, String);

fn parse_rule(line: &LogicalLine) -> Result<Rule, LineError> {
    let text = line.text.as_str();
    let start = text.len() - text.trim_start().len();
    let rest = &text[start..];
    let Some(after_keyword) = rest.strip_prefix("rule") else {
        return Err((start, "expected `rule NAME: FILTER => ACTIONS`".to_owned()));
    };
    if !after_keyword.starts_with(char::is_whitespace) {
        return Err((start, "expected `rule NAME: FILTER => ACTIONS`".to_owned()));
    }
    let scanner = Scanner { text };
    let Some(colon) = scanner.find(':').filter(|&c| c > start + 4) else {
        return Err((
            text.trim_end().len(),
            "expected `:` after the rule's name".to_owned(),
        ));
    };
    let name_at = start + 4 + (after_keyword.len() - after_keyword.trim_start().len());
    let name = text[name_at..colon].trim_end();
    if !valid_name(name) {
        return Err((
            name_at,
            format!("a rule's name is letters, digits, `-`, `_` and `.`, found {name:?}"),
        ));
    }
    let arrow = scanner.find_arrow().filter(|&a| a > colon);
    let filter_end = arrow.unwrap_or(text.len());
    let raw_filter = &text[colon + 1..filter_end];
    let filter_offset = colon + 1 + (raw_filter.len() - raw_filter.trim_start().len());
    let filter = raw_filter.trim().to_owned();
    let actions = match arrow {
        Some(a) => parse_actions(text, a + 2)?,
        None => Vec::new(),
    };
    Ok(Rule {
        name: name.to_owned(),
        filter,
        actions,
        source: line.clone(),
        filter_offset,
        name_offset: name_at,
    })
}

/// The words of an action list: `(offset, word)`, with `,` as its own word; a double-quoted
/// word loses its quotes (`\"` and `\\` inside stand for `"` and `\`).
fn action_words(text: &str, from: usize) -> Result<Vec<(usize, String)>, LineError> {
    let mut words = Vec::new();
    let mut chars = text[from..].char_indices().map(|(i, c)| (i + from, c));
    let mut pending: Option<(usize, String)> = None;
    while let Some((i, c)) = chars.next() {
        if c == '"' {
            let mut word = String::new();
            let mut closed = false;
            while let Some((_, c)) = chars.next() {
                match c {
                    '"' => {
                        closed = true;
                        break;
                    }
                    '\\' => match chars.next() {
                        Some((_, c)) => word.push(c),
                        None => break,
                    },
                    c => word.push(c),
                }
            }
            if !closed {
                return Err((i, "unterminated string".to_owned()));
            }
            words.extend(pending.take());
            words.push((i, word));
        } else if c == ',' || c.is_whitespace() {
            words.extend(pending.take());
            if c == ',' {
                words.push((i, ",".to_owned()));
            }
        } else {
            pending.get_or_insert_with(|| (i, String::new())).1.push(c);
        }
    }
    words.extend(pending);
    Ok(words)
}

fn parse_actions(text: &str, from: usize) -> Result<Vec<Action>, LineError> {
    let words = action_words(text, from)?;
    let mut actions = Vec::new();
    let mut i = 0;
    let end = text.trim_end().len();
    loop {
        let Some((at, verb)) = words.get(i) else {
            return Err((end, "expected an action".to_owned()));
        };
        let argument = |what: &str| -> Result<(usize, &str), LineError> {
            match words.get(i + 1) {
                Some((at, w)) if w != "," => Ok((*at, w.as_str())),
                _ => Err((*at, format!("`{verb}` needs {what}"))),
            }
        };
        let number = |what: &str, min: u64, max: u64| -> Result<u64, LineError> {
            let (at, w) = argument(what)?;
            match w.parse::<u64>() {
                Ok(n) if (min..=max).contains(&n) => Ok(n),
                _ => Err((
                    at,
                    format!("expected {what} from {min} to {max}, found {w:?}"),
                )),
            }
        };
        let (action, used) = match verb.as_str() {
            "count" => (Action::Count, 1),
            "stop" => (Action::Stop, 1),
            "write" => {
                let (at, path) = argument("a file name")?;
                if path.is_empty() {
                    return Err((at, "empty file name".to_owned()));
                }
                (Action::Write(PathBuf::from(path)), 2)
            }
            "sample" => (Action::Sample(number("a count N", 1, u64::MAX)?), 2),
            "truncate" => {
                let n = number("a length in bytes", 0, u64::from(u32::MAX))?;
                (Action::Truncate(n as u32), 2)
            }
            "tag" => {
                let (at, tag) = argument("a name")?;
                if !valid_name(tag) {
                    return Err((
                        at,
                        format!("a tag is letters, digits, `-`, `_` and `.`, found {tag:?}"),
                    ));
                }
                (Action::Tag(tag.to_owned()), 2)
            }
            "," => return Err((*at, "expected an action before `,`".to_owned())),
            other => {
                return Err((
                    *at,
                    format!(
                        "unknown action {other:?} (write FILE, count, sample N, truncate N, \
                         tag NAME, stop)"
                    ),
                ))
            }
        };
        actions.push(action);
        i += used;
        match words.get(i) {
            None => return Ok(actions),
            Some((_, w)) if w == "," => i += 1,
            Some((at, w)) => {
                return Err((*at, format!("expected `,` between actions, found {w:?}")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> (usize, usize, String) {
        let e = parse("r", text).unwrap_err();
        (e.at.line, e.at.column, e.message)
    }

    #[test]
    fn rules_with_actions_comments_and_continuations() {
        let rules = parse(
            "r",
            "# IDS\n\nrule web: tcp dst port 80 and payload contains \"#=>,\" # x\\\n\
             rule tls: tcp \\\n   and payload[0] = 0x16 => sample 10, truncate 128, \\\n\
             write \"tls sample.pcapng\"\nrule all:\nrule dns: udp port 53 => tag dns,stop\n",
        )
        .unwrap();
        assert_eq!(rules.len(), 4);
        assert_eq!(
            rules[0].filter,
            "tcp dst port 80 and payload contains \"#=>,\""
        );
        assert!(rules[0].actions.is_empty());
        assert_eq!(rules[1].filter, "tcp     and payload[0] = 0x16");
        assert_eq!(
            rules[1].actions,
            vec![
                Action::Sample(10),
                Action::Truncate(128),
                Action::Write("tls sample.pcapng".into())
            ]
        );
        // "and" is on line 5, after three spaces.
        let at = rules[1].filter_position(rules[1].filter.find("and").unwrap());
        assert_eq!((at.line, at.column), (5, 4));
        assert_eq!(rules[2].filter, "");
        assert_eq!(
            rules[3].actions,
            vec![Action::Tag("dns".into()), Action::Stop]
        );
        assert!(rules[3].always_stops());
        assert!(!rules[1].always_stops());
    }

    #[test]
    fn errors_point_at_line_and_column() {
        assert_eq!(error("rule a: ip\nrule b: ip => jump").0, 2);
        assert_eq!(error("rule a: ip\nrule b: ip => jump").1, 15);
        assert_eq!(error("rule a: ip => sample 0").1, 22);
        assert_eq!(error("rule a: ip => sample").1, 15);
        assert_eq!(error("rule a: ip => count count").1, 21);
        assert_eq!(error("rule a: ip => count,").1, 21);
        assert_eq!(error("rule a: ip => tag x/y").1, 19);
        assert_eq!(error("rule a: ip => write \"x").1, 21);
        assert_eq!(error("  rules a: ip").1, 3);
        assert_eq!(error("rule a b: ip").1, 6);
        assert_eq!(error("rule a ip").1, 10);
        assert_eq!(error("rule a: ip\nrule a: tcp").0, 2);
        assert!(error("# nothing\n").2.contains("no rules"));
        assert_eq!(error("rule é: ip").1, 6);
        assert_eq!(error("rule a: \"é\" =>").1, 15);
    }

    #[test]
    fn random_text_is_parsed_or_refused_without_panics() {
        let alphabet: Vec<char> = "rule :=>,#\\\"@{}()ab0 9é\n\t.-sample truncate write tag"
            .chars()
            .collect();
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for i in 0..20_000 {
            let len = next() % 50;
            let body: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let text = if i % 2 == 0 {
                format!("rule x: {body}")
            } else {
                body
            };
            match parse("r", &text) {
                Ok(rules) => {
                    for rule in &rules {
                        let rebased =
                            crate::set_paths::rebased_filter(rule, std::path::Path::new("/d"));
                        for offset in 0..=rebased.text.len() + 1 {
                            let original = rebased.original_offset(offset);
                            rule.filter_position(original);
                        }
                    }
                }
                Err(e) => assert!(e.at.line >= 1 && e.at.column >= 1, "{text:?}"),
            }
        }
    }

    #[test]
    fn errors_render_with_a_caret() {
        let e = parse("x.rules", "rule a: ip => jump").unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.rules:1:15: unknown action \"jump\" (write FILE, count, sample N, truncate N, \
             tag NAME, stop)\n  |\n1 | rule a: ip => jump\n  |               ^"
        );
    }
}
