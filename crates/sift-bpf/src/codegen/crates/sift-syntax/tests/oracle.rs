//! Agreement with libpcap 1.10.3 on whether an expression is syntactically valid. The verdicts
//! in `oracle_cases.tsv` were recorded with `pcap_compile` (see the file's header).

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn agrees_with_libpcap() {
    let data = include_str!("oracle_cases.tsv");
    let mut failures = Vec::new();
    let mut n = 0;
    for line in data
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (verdict, text) = line.split_once('\t').expect("verdict<TAB>expression");
        let text = unescape(text);
        let parsed = sift_syntax::parse(&text);
        let want_ok = verdict != "ERR";
        if parsed.is_ok() != want_ok {
            failures.push(format!("{verdict}: {text:?} -> {parsed:?}"));
        }
        n += 1;
    }
    assert!(n > 5000);
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
