//! Long chains of one primitive (`host A or host B or ...`): the inputs of the compile-time
//! benchmarks and of the snapshot tools, one definition so that their figures stay comparable.

/// The chain of `n` terms of `kind`, or `None` for an unknown kind:
///
/// * `host`: `host 10.X.Y.1`, `net`: `net 10.X.Y.0/24`, `port`: `port 1000+i`, `ether`:
///   `ether[i]=1`, joined by `or`;
/// * `nothost`: `not host 10.X.Y.1` joined by `and`;
/// * `mixed`: host, port, `udp port`, `tcp and net` in turn, joined by `or`.
///
/// Term `i` has `X = i / 256`, `Y = i % 256`.
pub fn chain(kind: &str, n: usize) -> Option<String> {
    term(kind, 0)?;
    let joiner = if kind == "nothost" { " and " } else { " or " };
    let terms: Option<Vec<String>> = (0..n).map(|i| term(kind, i)).collect();
    Some(terms?.join(joiner))
}

/// Term `i` of a `kind` chain.
fn term(kind: &str, i: usize) -> Option<String> {
    let (x, y) = (i / 256, i % 256);
    Some(match (kind, i % 4) {
        ("host", _) | ("mixed", 0) => format!("host 10.{x}.{y}.1"),
        ("net", _) => format!("net 10.{x}.{y}.0/24"),
        ("port", _) | ("mixed", 1) => format!("port {}", 1000 + i),
        ("ether", _) => format!("ether[{i}]=1"),
        ("nothost", _) => format!("not host 10.{x}.{y}.1"),
        ("mixed", 2) => format!("udp port {}", 2000 + i),
        ("mixed", _) => format!("tcp and net 10.{x}.{y}.0/24"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::chain;

    #[test]
    fn chains_join_their_terms() {
        assert_eq!(chain("host", 2).unwrap(), "host 10.0.0.1 or host 10.0.1.1");
        assert_eq!(
            chain("nothost", 2).unwrap(),
            "not host 10.0.0.1 and not host 10.0.1.1"
        );
        assert_eq!(
            chain("mixed", 4).unwrap(),
            "host 10.0.0.1 or port 1001 or udp port 2002 or tcp and net 10.0.3.0/24"
        );
        assert_eq!(chain("ether", 300).unwrap().matches(" or ").count(), 299);
        assert!(chain("bogus", 3).is_none());
    }
}
