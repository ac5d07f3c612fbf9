//! Random expressions over a few transport and address fields with a few values each.
//!
//! [`random_expression`](crate::random_expression) draws from the whole language, so two of its
//! primitives rarely test the same field. libpcap's optimizer acts where they do: an edge is
//! threaded past a test an earlier one decided, an `or` (`and`) chain has its tests of one value
//! pulled together. Here every primitive tests ports (as ports, ranges or numbers), protocols,
//! hosts, networks, IP header bytes or the length, with values from small pools that
//! [`crate::generate_packets`] also uses, so that the same fields are tested again and again
//! under `and`, `or` and `not`, and packets match them.

use crate::Rng;

/// Ports the expressions test (all in [`crate::pools::PORTS`], which packets use).
const PORTS: &[u16] = &[20, 22, 53, 80, 123, 1234, 8080];

/// Hosts the expressions test (in [`crate::pools::IPV4_UNICAST`]).
const HOSTS: &[&str] = &["10.0.0.1", "10.0.0.2", "192.168.1.1", "8.8.8.8"];

/// Networks holding some of [`HOSTS`] (from [`crate::pools::IPV4_NETS`]).
const NETS: &[&str] = &["10.0.0.0/24", "10.0.0.0/8", "192.168.1.0/24", "8.8.8.8/32"];

/// One expression of at most about `max_primitives` primitives, nested at most `max_depth`.
pub fn random_focused_expression(rng: &mut Rng, max_depth: u32, max_primitives: u32) -> String {
    expression(rng, max_depth, max_primitives, primitive)
}

/// `count` focused expressions, deterministic from `seed` (depth 4, about 6 primitives).
pub fn random_focused_expressions(seed: u64, count: usize) -> Vec<String> {
    let mut rng = Rng::new(seed ^ 0xf0c5_0000_0000_0000);
    (0..count)
        .map(|_| random_focused_expression(&mut rng, 4, 6))
        .collect()
}

/// `count` focused expressions (as [`random_focused_expressions`]) of which about a third of
/// the primitives use libpcap's index register in the ways its optimizer loses track of: a
/// transport-layer load that a fold removes (`tcp[22:4] & 0 = 5`), a comparison that puts the
/// length into X (`tcp[0:2] < len`), a load at a computed offset (`tcp[((tcp[12:1] & 0xf0) >>
/// 2):4]`, `ip[ip[0] & 0xf]`), arithmetic on the header length.
pub fn random_index_expressions(seed: u64, count: usize) -> Vec<String> {
    let mut rng = Rng::new(seed ^ 0x1d8e_0000_0000_0000);
    (0..count)
        .map(|_| expression(&mut rng, 4, 6, index_or_focused))
        .collect()
}

/// One expression of at most about `max_primitives` primitives from `primitive`, nested at
/// most `max_depth`.
fn expression(
    rng: &mut Rng,
    max_depth: u32,
    max_primitives: u32,
    primitive: fn(&mut Rng) -> String,
) -> String {
    let mut budget = max_primitives.max(1);
    let depth = rng.range(1, u64::from(max_depth.max(1))) as u32;
    expr(rng, depth, &mut budget, primitive)
}

fn expr(rng: &mut Rng, depth: u32, budget: &mut u32, primitive: fn(&mut Rng) -> String) -> String {
    if depth == 0 || *budget <= 1 || rng.chance(1, 5) {
        *budget = budget.saturating_sub(1);
        return primitive(rng);
    }
    let mut sub = |rng: &mut Rng| expr(rng, depth - 1, budget, primitive);
    match rng.below(8) {
        0..=2 => {
            let (a, b) = (sub(rng), sub(rng));
            format!("({a} and {b})")
        }
        3..=5 => {
            let (a, b) = (sub(rng), sub(rng));
            format!("({a} or {b})")
        }
        6 => format!("not {}", sub(rng)),
        _ => {
            let (a, b) = (sub(rng), sub(rng));
            format!("({a} and not {b})")
        }
    }
}

fn primitive(rng: &mut Rng) -> String {
    let proto = *rng.pick(&["", "tcp ", "udp ", "", "tcp ", "udp ", "sctp "]);
    let dir = *rng.pick(&["", "src ", "dst ", "src or dst ", "src and dst "]);
    let port = |rng: &mut Rng| *rng.pick(PORTS);
    match rng.below(13) {
        0..=3 => format!("{proto}{dir}port {}", port(rng)),
        4..=5 => {
            let (a, b) = (port(rng), port(rng));
            format!("{proto}{dir}portrange {}-{}", a.min(b), a.max(b))
        }
        6 => (*rng.pick(&["tcp", "udp", "ip", "ip6", "icmp", "ip proto 17"])).to_string(),
        7 => format!(
            "{}host {}",
            rng.pick(&["", "src ", "dst ", "ip "]),
            rng.pick(HOSTS)
        ),
        8 => format!(
            "len {} {}",
            rng.pick(&["<", "<=", ">", ">=", "=", "!="]),
            rng.pick(&[60, 64, 100, 1500])
        ),
        9 => format!(
            "tcp[13] & {} != 0",
            rng.pick(&["2", "16", "18", "tcp-syn", "tcp-ack"])
        ),
        10 => format!("{}net {}", rng.pick(&["", "src ", "dst "]), rng.pick(NETS)),
        // The port fields compared as numbers, next to the port tests above.
        11 => format!(
            "{}[{}:2] {} {}",
            rng.pick(&["tcp", "udp"]),
            rng.pick(&[0, 2]),
            rng.pick(&["<", "<=", ">", ">=", "=", "!="]),
            port(rng)
        ),
        _ => format!(
            "ip[{}] {} {}",
            rng.pick(&[1, 8, 9]),
            rng.pick(&[">", "=", "<"]),
            rng.pick(&[6, 17, 32, 64])
        ),
    }
}

/// A primitive using the index register one of the ways [`random_index_expressions`] lists,
/// one time in three; else a focused one.
fn index_or_focused(rng: &mut Rng) -> String {
    if !rng.chance(1, 3) {
        return primitive(rng);
    }
    let proto = *rng.pick(&["tcp", "udp", "icmp", "sctp"]);
    match rng.below(6) {
        0 => format!(
            "{proto}[{}:{}] & {} {} {}",
            rng.pick(&[0, 2, 5, 13, 20]),
            rng.pick(&[1, 2, 4]),
            rng.pick(&["0", "icmptype", "0 * 7"]),
            rng.pick(&["=", "!=", ">", "<="]),
            rng.pick(&[0, 2, 69])
        ),
        1 => format!(
            "{proto}[{}] {} len",
            rng.pick(&["0:2", "2:2", "4"]),
            rng.pick(&["<", ">=", "="])
        ),
        2 => "tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420".to_string(),
        3 => format!("ip[ip[0] & 0xf] {} 0", rng.pick(&["=", "!="])),
        4 => format!(
            "(ip[2:2] - ((ip[0]&0xf)<<2) - ((tcp[12]&0xf0)>>2)) {} 0",
            rng.pick(&["=", "!="])
        ),
        _ => format!(
            "{}{proto}[{}] {} {}",
            rng.pick(&["0 & ", "0 / ", ""]),
            rng.pick(&[1, 7, 13]),
            rng.pick(&["=", ">", "<"]),
            rng.pick(&[0, 6, 17])
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_are_deterministic_and_varied() {
        let a = random_focused_expressions(7, 50);
        assert_eq!(a, random_focused_expressions(7, 50));
        assert!(a.iter().any(|e| e.contains(" or ")), "{a:?}");
        assert!(a.iter().any(|e| e.contains("portrange")), "{a:?}");
        let distinct: std::collections::HashSet<_> = a.iter().collect();
        assert!(distinct.len() > 40, "{a:?}");
        let b = random_index_expressions(7, 50);
        assert_eq!(b, random_index_expressions(7, 50));
        assert!(b.iter().any(|e| e.contains("len")), "{b:?}");
        assert!(b.iter().any(|e| e.contains("port")), "{b:?}");
    }
}
