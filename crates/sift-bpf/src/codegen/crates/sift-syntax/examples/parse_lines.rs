//! Reads one expression per line (`\n` and `\t` escapes allowed; a leading `LINKTYPE<TAB>` is
//! skipped with `--tsv`; or NUL-separated raw expressions with `--nul`) and prints `OK<TAB>tree` or `ERR<TAB>message` for each. Used for
//! comparing with libpcap.
use std::io::BufRead;

fn unescape(s: &str) -> String {
    s.replace("\\n", "\n").replace("\\t", "\t")
}

fn show(expr: &str) {
    match sift_syntax::parse(expr) {
        Ok(Some(e)) => println!("OK\t{}", e.to_string().escape_debug()),
        Ok(None) => println!("OK\t<empty>"),
        Err(e) => println!("ERR\t{e}"),
    }
}

fn main() {
    if std::env::args().any(|a| a == "--nul") {
        // NUL-separated raw expressions.
        let mut buf = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut buf).expect("stdin");
        for expr in buf.split_terminator('\0') {
            show(expr);
        }
        return;
    }
    let tsv = std::env::args().any(|a| a == "--tsv");
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let expr = if tsv {
            unescape(line.split_once('\t').map_or(line.as_str(), |(_, e)| e))
        } else {
            line
        };
        show(&expr);
    }
}
