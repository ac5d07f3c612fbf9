//! Reads one expression per line (`\n` and `\t` escapes allowed; a leading `LINKTYPE<TAB>` is
//! skipped with `--tsv`) and prints `OK<TAB>tree` or `ERR<TAB>message` for each. Used for
//! comparing with libpcap.
use std::io::BufRead;

fn unescape(s: &str) -> String {
    s.replace("\\n", "\n").replace("\\t", "\t")
}

fn main() {
    let tsv = std::env::args().any(|a| a == "--tsv");
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let expr = if tsv {
            unescape(line.split_once('\t').map_or(line.as_str(), |(_, e)| e))
        } else {
            line
        };
        match sift_syntax::parse(&expr) {
            Ok(Some(e)) => println!("OK\t{e}"),
            Ok(None) => println!("OK\t<empty>"),
            Err(e) => println!("ERR\t{e}"),
        }
    }
}
