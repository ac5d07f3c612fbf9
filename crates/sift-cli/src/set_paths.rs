//! Set files named in a rules file's filters (`host in @blocklist.txt`) are relative to the
//! rules file's directory, so a rule set and its set files move together; the filter compiler
//! reads them relative to the current directory. [`rebased_filter`] rewrites the names and
//! keeps the edits, so that error offsets map back to the filter as written.

use std::path::Path;

use crate::rules::{Rule, Scanner};

/// A rule's filter as compiled: relative set files (`@FILE`) made relative to the rules
/// file's directory, with the edits that did it so offsets map back to the filter as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rebased {
    pub text: String,
    /// `(start, end)` of each replaced `@FILE` in `text`, then in the filter as written.
    edits: Vec<((usize, usize), (usize, usize))>,
}

impl Rebased {
    /// The offset in the filter as written of byte `offset` of `text`.
    pub fn original_offset(&self, offset: usize) -> usize {
        let mut delta: isize = 0;
        for &((new_start, new_end), (old_start, old_end)) in &self.edits {
            if offset < new_start {
                break;
            }
            if offset < new_end {
                return old_start;
            }
            delta = old_end as isize - new_end as isize;
        }
        offset.saturating_add_signed(delta)
    }
}

/// The filter with each relative `@FILE` (a set file, read when the filter is compiled)
/// resolved against `base`, the rules file's directory. `@` occurs nowhere else in the
/// language outside strings; the name ends as the lexer ends it, at white space or a
/// parenthesis. A path that the lexer could not read back unchanged is left as written.
pub fn rebased_filter(rule: &Rule, base: &Path) -> Rebased {
    let ends_name = |c: char| c.is_whitespace() || c == '(' || c == ')';
    let mut text = String::with_capacity(rule.filter.len());
    let mut edits = Vec::new();
    let mut copied = 0;
    let ats: Vec<usize> = Scanner { text: &rule.filter }
        .outside()
        .filter(|&(_, c)| c == '@')
        .map(|(i, _)| i)
        .collect();
    for at in ats {
        if at < copied {
            continue;
        }
        let rest = &rule.filter[at + 1..];
        let end = at + 1 + rest.find(ends_name).unwrap_or(rest.len());
        let name = Path::new(&rule.filter[at + 1..end]);
        let joined = base.join(name);
        let Some(joined) = joined.to_str().filter(|j| {
            name.is_relative() && !name.as_os_str().is_empty() && !j.contains(ends_name)
        }) else {
            continue;
        };
        text.push_str(&rule.filter[copied..at + 1]);
        let new_start = text.len() - 1;
        text.push_str(joined);
        edits.push(((new_start, text.len()), (at, end)));
        copied = end;
    }
    text.push_str(&rule.filter[copied..]);
    Rebased { text, edits }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_files_are_relative_to_the_rules_file() {
        let rules = crate::rules::parse(
            "r",
            "rule a: host in @bad.txt and payload contains \"@x\" or port in @/abs/p(\n\
             rule b: tcp\n",
        )
        .unwrap();
        let rebased = rebased_filter(&rules[0], Path::new("/etc/rules"));
        assert_eq!(
            rebased.text,
            "host in @/etc/rules/bad.txt and payload contains \"@x\" or port in @/abs/p("
        );
        let and_now = rebased.text.find(" and").unwrap();
        assert_eq!(
            rebased.original_offset(and_now),
            rules[0].filter.find(" and").unwrap()
        );
        assert_eq!(rebased.original_offset(12), 8);
        assert_eq!(rebased.original_offset(3), 3);
        assert_eq!(rebased_filter(&rules[1], Path::new("d")).text, "tcp");
    }
}
