//! The residual filters' payload searches merged into one search per packet: deliveries equal
//! running each filter alone (the IR's reference interpreter, CSPF order) on random filters
//! with random patterns over random payloads; the payload is searched once per packet whatever
//! the number of searching filters; removing a filter drops its patterns.

mod common;

use common::{install, oracle, Installed, ETHERNET, SNAPLEN};
use sift_coproc::searches_on_this_thread;
use sift_demux::{Delivery, Demux, FilterId, Matches};
use sift_ir::{Cache, Function};
use sift_testgen::Rng;

/// Payload bytes and pattern letters: few, so that patterns occur.
const ALPHABET: &[u8] = b"abcAB/ ";

fn options() -> sift::Options {
    sift::Options {
        extensions: true,
        ..sift::Options::new(ETHERNET, SNAPLEN)
    }
}

fn compile(expr: &str, optimized: bool) -> Function {
    let opts = options();
    let ir = if optimized {
        sift::compile_optimized_ir(expr, &opts)
    } else {
        sift::compile_ir(expr, &opts)
    };
    ir.unwrap_or_else(|e| panic!("{expr}: {e}"))
}

fn word(rng: &mut Rng, lo: usize, hi: usize) -> String {
    let n = rng.range(lo as u64, hi as u64) as usize;
    (0..n).map(|_| char::from(*rng.pick(ALPHABET))).collect()
}

/// A random payload test: literal (exact or nocase, text or hex), regular expression, or an
/// anchored comparison.
fn payload_test(rng: &mut Rng) -> String {
    match rng.below(10) {
        0..=3 => format!("payload contains \"{}\"", word(rng, 1, 6)),
        4 | 5 => format!("payload contains nocase \"{}\"", word(rng, 2, 6)),
        6 => {
            let w = word(rng, 2, 4);
            let hex: Vec<String> = w.bytes().map(|b| format!("{b:02x}")).collect();
            format!("payload contains \"|{}|\"", hex.join(" "))
        }
        7 | 8 => {
            let (a, b) = (word(rng, 1, 2), word(rng, 1, 2));
            let re = match rng.below(3) {
                0 => format!("{a}[ab]+{b}"),
                1 => format!("^{a}"),
                _ => format!("({a}\\|{b})c"),
            };
            format!("payload matches \"{re}\"")
        }
        _ => format!("payload[{}:2] = \"{}\"", rng.below(3), word(rng, 2, 2)),
    }
}

/// A random filter: an optional header test and one to four payload tests.
fn random_filter(rng: &mut Rng) -> String {
    let header = *rng.pick(&[
        "",
        "tcp",
        "udp",
        "ip",
        "ip6",
        "tcp dst port 80",
        "not tcp port 443",
        "ip src 10.0.0.1",
    ]);
    let mut expr = payload_test(rng);
    for _ in 0..rng.below(4) {
        let op = *rng.pick(&[" and ", " or ", " and not "]);
        expr = format!("{expr}{op}{}", payload_test(rng));
    }
    if header.is_empty() {
        expr
    } else {
        format!("{header} and ({expr})")
    }
}

/// A TCP or UDP packet over IPv4 or IPv6 with a random payload from [`ALPHABET`], sometimes
/// truncated.
fn random_packet(rng: &mut Rng) -> (Vec<u8>, u32) {
    let payload: Vec<u8> = (0..rng.below(80)).map(|_| *rng.pick(ALPHABET)).collect();
    let mut p = packet(
        rng.chance(1, 4),
        rng.chance(1, 4),
        rng.below(3) as u8,
        *rng.pick(&[80, 443, 8080]),
        rng.range(1, 2) as u8,
        &payload,
    );
    let wire_len = p.len() as u32;
    if rng.chance(1, 6) {
        p.truncate(rng.index(p.len() + 1));
    }
    (p, wire_len)
}

/// An Ethernet frame: IPv4 (source 10.0.0.`src`) or IPv6, TCP (with `options` words of TCP
/// options) or UDP to port `dport`, then `payload`.
fn packet(v6: bool, udp: bool, options: u8, dport: u16, src: u8, payload: &[u8]) -> Vec<u8> {
    let mut l4 = Vec::new();
    l4.extend_from_slice(&1234u16.to_be_bytes());
    l4.extend_from_slice(&dport.to_be_bytes());
    if udp {
        l4.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        l4.extend_from_slice(&[0, 0]);
    } else {
        l4.extend_from_slice(&[0; 8]);
        l4.extend_from_slice(&[(5 + options) << 4, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        l4.extend(std::iter::repeat_n(1u8, usize::from(options) * 4));
    }
    l4.extend_from_slice(payload);
    let proto = if udp { 17 } else { 6 };
    let mut p = vec![0u8; 12];
    if v6 {
        p.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        p.extend_from_slice(&(l4.len() as u16).to_be_bytes());
        p.extend_from_slice(&[proto, 64]);
        p.extend_from_slice(&[0x20, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p.extend_from_slice(&[0x20, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    } else {
        p.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
        p.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        p.extend_from_slice(&[0, 1, 0, 0, 64, proto, 0, 0]);
        p.extend_from_slice(&[10, 0, 0, src]);
        p.extend_from_slice(&[10, 0, 0, 9]);
    }
    p.extend_from_slice(&l4);
    p
}

fn check_against_oracle(
    demux: &Demux,
    installed: &[Installed],
    packets: &[(Vec<u8>, u32)],
    what: &str,
) {
    let reader = demux.reader();
    let mut m = Matches::new();
    let mut cache = Cache::new();
    for (i, (pkt, wire_len)) in packets.iter().enumerate() {
        for all in [false, true] {
            let expected = oracle(installed, pkt, *wire_len, all, &mut cache);
            if all {
                reader.match_all(pkt, *wire_len, &mut m);
            } else {
                reader.match_packet(pkt, *wire_len, &mut m);
            }
            assert_eq!(
                (m.delivered().to_vec(), m.exclusive()),
                expected,
                "{what}: packet {i} (all: {all}) {pkt:?}"
            );
        }
    }
    let mut batch = Vec::new();
    reader.match_batch(
        packets.iter().map(|(p, w)| (p.as_slice(), *w)),
        &mut m,
        |_, m| batch.push((m.delivered().to_vec(), m.exclusive())),
    );
    for (i, ((pkt, wire_len), got)) in packets.iter().zip(batch).enumerate() {
        let expected = oracle(installed, pkt, *wire_len, false, &mut cache);
        assert_eq!(got, expected, "{what}: batch packet {i}");
    }
}

#[test]
fn shared_search_delivers_as_each_filter_alone() {
    let mut rng = Rng::new(0x5ea4c4);
    for round in 0..6 {
        // Rounds alternate the engines: native residuals and interpreted ones.
        let mut demux = if round % 2 == 0 {
            Demux::new()
        } else {
            Demux::interpreted()
        };
        let mut installed = Vec::new();
        let count = [3, 20, 60, 120, 40, 200][round];
        for _ in 0..count {
            // Some keyed (decomposable) filters among the searching ones.
            let expr = if rng.chance(1, 6) {
                format!("tcp dst port {}", rng.pick(&[80, 443, 8080]))
            } else {
                random_filter(&mut rng)
            };
            let ir = compile(&expr, rng.chance(1, 2));
            let priority = rng.below(4) as i32;
            let delivery = if rng.chance(1, 3) {
                Delivery::Exclusive
            } else {
                Delivery::Copy
            };
            install(&mut demux, &mut installed, ir, priority, delivery);
        }
        let stats = demux.stats();
        assert!(
            stats.shared_search_filters >= 2,
            "round {round}: {stats:?} shares no search"
        );
        let packets: Vec<_> = (0..400).map(|_| random_packet(&mut rng)).collect();
        check_against_oracle(&demux, &installed, &packets, &format!("round {round}"));

        // Removing filters rebuilds the union from the others.
        let before = demux.stats().shared_search_patterns;
        let mut kept = Vec::new();
        for f in installed {
            if rng.chance(1, 2) {
                assert!(demux.remove(f.id));
            } else {
                kept.push(f);
            }
        }
        assert!(demux.stats().shared_search_patterns <= before);
        check_against_oracle(&demux, &kept, &packets, &format!("round {round}, removed"));

        // The same deliveries with every filter searching alone.
        demux.share_searches(false);
        assert_eq!(demux.stats().shared_search_filters, 0);
        check_against_oracle(&demux, &kept, &packets, &format!("round {round}, alone"));
    }
}

/// Searches made while matching `pkt` (the counter is per thread, and matching runs on this
/// one).
fn searches_for(demux: &Demux, pkt: &[u8], all: bool) -> (u64, Vec<FilterId>) {
    let mut m = Matches::new();
    let before = searches_on_this_thread();
    if all {
        demux.reader().match_all(pkt, pkt.len() as u32, &mut m);
    } else {
        demux.reader().match_packet(pkt, pkt.len() as u32, &mut m);
    }
    (searches_on_this_thread() - before, m.delivered().to_vec())
}

#[test]
fn one_search_per_packet_whatever_the_number_of_filters() {
    let packet = packet(false, false, 0, 80, 1, b"....word-0017....");
    for native in [true, false] {
        let mut demux = if native {
            Demux::new()
        } else {
            Demux::interpreted()
        };
        let mut ids = Vec::new();
        for i in 0..100 {
            let expr = format!(
                "tcp and (payload contains \"word-{i:04}\" or payload contains nocase \"other-{i}\")"
            );
            ids.push(
                demux
                    .insert(&compile(&expr, true), 0, Delivery::Copy)
                    .unwrap(),
            );
        }
        let stats = demux.stats();
        assert_eq!(stats.shared_search_filters, 100);
        assert_eq!(stats.shared_search_patterns, 200);
        if native && sift_jit::supported() {
            assert_eq!(stats.native_residuals, 100);
        }
        for all in [false, true] {
            let (searches, delivered) = searches_for(&demux, &packet, all);
            assert_eq!(searches, 1, "100 searching filters, one search");
            assert_eq!(delivered, vec![ids[17]]);
        }
        demux.share_searches(false);
        let (searches, delivered) = searches_for(&demux, &packet, false);
        assert_eq!(searches, 100, "each filter alone searches");
        assert_eq!(delivered, vec![ids[17]]);
        demux.share_searches(true);

        // Removing filters drops their patterns; one searching filter left shares nothing.
        for &id in &ids[..50] {
            demux.remove(id);
        }
        assert_eq!(demux.stats().shared_search_patterns, 100);
        assert_eq!(searches_for(&demux, &packet, false), (1, Vec::new()));
        for &id in &ids[50..99] {
            demux.remove(id);
        }
        assert_eq!(demux.stats().shared_search_filters, 0);
        assert_eq!(demux.stats().shared_search_patterns, 0);
    }
}

#[test]
fn filters_ranked_after_an_exclusive_winner_cause_no_search() {
    let mut demux = Demux::new();
    // A keyed exclusive filter outranks every searching residual.
    let winner = demux
        .insert(&compile("tcp", true), 10, Delivery::Exclusive)
        .unwrap();
    for i in 0..10 {
        let expr = format!("payload contains \"x{i}\"");
        demux
            .insert(&compile(&expr, true), 0, Delivery::Copy)
            .unwrap();
    }
    let p = packet(false, false, 0, 80, 1, b"x1 x2 x3");
    let (searches, delivered) = searches_for(&demux, &p, false);
    assert_eq!((searches, delivered), (0, vec![winner]));
}
