//! Fragment dispatch against a model: random fragmented traffic (datagrams of connections that
//! random filters select, fragmented at random sizes, with lost, duplicated, overlapping and
//! repeated-first fragments, on every supported link type) shuffled within a window, with
//! capture-like timestamps. Every fragment must be delivered to exactly the filters that
//! running every filter alone (the IR interpreter, CSPF order) gives its datagram's first
//! fragment — on arrival or when its first arrives — or be dropped at the timeout exactly when
//! its first fragment does not come within it; the counters must add up.

mod common;

use std::collections::HashMap;

use common::{install, oracle};
use sift_demux::{
    Delivery, Demux, DropReason, FilterId, FragmentConfig, FragmentDemux, FragmentOutcome, Matches,
    Verdict,
};
use sift_ir::Cache;
use sift_testgen::{random_expressions, Rng};

const LINKTYPES: &[u32] = &[1, 0, 108, 101, 113, 276, 228, 229];

fn compile(expr: &str, linktype: u32) -> Option<sift_ir::Function> {
    sift::compile_ir(expr, &sift::Options::new(linktype, 65535)).ok()
}

#[derive(Clone, Debug)]
struct Conn {
    v6: bool,
    src: Vec<u8>,
    dst: Vec<u8>,
    proto: u8,
    sport: u16,
    dport: u16,
}

fn addr(a: &[u8]) -> String {
    if a.len() == 4 {
        format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
    } else {
        std::net::Ipv6Addr::from(<[u8; 16]>::try_from(a).unwrap()).to_string()
    }
}

impl Conn {
    fn random(rng: &mut Rng, linktype: u32) -> Conn {
        let v6 = match linktype {
            228 => false,
            229 => true,
            _ => rng.chance(1, 3),
        };
        let (src, dst) = if v6 {
            let a = |rng: &mut Rng| {
                let mut a = vec![0x20, 0x01, 0x0d, 0xb8];
                a.extend(std::iter::repeat_n(0, 11));
                a.push(rng.below(4) as u8);
                a
            };
            (a(rng), a(rng))
        } else {
            let a = |rng: &mut Rng| vec![10, 0, rng.below(2) as u8, rng.below(4) as u8];
            (a(rng), a(rng))
        };
        Conn {
            v6,
            src,
            dst,
            proto: if rng.chance(1, 2) { 17 } else { 6 },
            sport: 1000 + rng.below(4) as u16,
            dport: *rng.pick(&[53u16, 80, 443]),
        }
    }

    /// Filters that accept this connection's first fragments (not its later ones, which carry
    /// no transport header), and broader ones.
    fn filters(&self) -> Vec<String> {
        let (s, d) = (addr(&self.src), addr(&self.dst));
        let p = if self.proto == 17 { "udp" } else { "tcp" };
        if self.v6 {
            // libpcap's `tcp`/`udp` do not look past a Fragment header: test its fields.
            vec![
                format!(
                    "ip6 src {s} and ip6 dst {d} and ip6[6] = 44 and ip6[40] = {} and \
                     ip6[42:2] & 0xfff8 = 0 and ip6[50:2] = {}",
                    self.proto, self.dport
                ),
                format!("ip6 src {s} and ip6 dst {d}"),
                format!("ip6 protochain {}", self.proto),
            ]
        } else {
            vec![
                format!(
                    "ip src {s} and ip dst {d} and {p} src port {} and {p} dst port {}",
                    self.sport, self.dport
                ),
                format!("{p} dst port {}", self.dport),
                format!("ip host {s} and ip[6:2] & 0x1fff != 0"),
            ]
        }
    }

    /// The IP packets of one datagram (whether first, the packet): a transport header and random
    /// payload cut at a random multiple of 8 bytes, sometimes with an overlapping extra piece.
    fn fragments(&self, rng: &mut Rng, id: u32, hop_by_hop: bool) -> Vec<(bool, Vec<u8>)> {
        let mut payload = vec![0u8; 4];
        payload[..2].copy_from_slice(&self.sport.to_be_bytes());
        payload[2..].copy_from_slice(&self.dport.to_be_bytes());
        let header_rest = if self.proto == 17 { 4 } else { 16 };
        payload.extend(std::iter::repeat_n(0x5a, header_rest));
        payload.extend(rng.bytes_between(16, 2400));
        let unit = 8 * rng.range(3, 100) as usize;
        let mut pieces: Vec<(usize, usize)> = (0..payload.len())
            .step_by(unit)
            .map(|o| (o, (o + unit).min(payload.len())))
            .collect();
        if pieces.len() == 1 {
            // Always fragmented: split the single piece.
            let cut = 8 * (payload.len() / 16).max(1);
            pieces = vec![(0, cut), (cut, payload.len())];
        }
        // An overlapping fragment (same bytes at an offset straddling two others).
        if pieces.len() > 2 && rng.chance(1, 5) {
            let o = pieces[1].0 + 8;
            pieces.push((o, (o + unit).min(payload.len())));
        }
        pieces
            .iter()
            .map(|&(start, end)| {
                let more = end < payload.len();
                let body = &payload[start..end];
                (start == 0, self.ip(id, start, more, body, hop_by_hop))
            })
            .collect()
    }

    fn ip(&self, id: u32, offset: usize, more: bool, body: &[u8], hop_by_hop: bool) -> Vec<u8> {
        let mut p = Vec::new();
        if self.v6 {
            let ext = if hop_by_hop { 8 } else { 0 };
            p.extend_from_slice(&[0x60, 0, 0, 0]);
            p.extend_from_slice(&((ext + 8 + body.len()) as u16).to_be_bytes());
            p.extend_from_slice(&[if hop_by_hop { 0 } else { 44 }, 64]);
            p.extend_from_slice(&self.src);
            p.extend_from_slice(&self.dst);
            if hop_by_hop {
                p.extend_from_slice(&[44, 0, 1, 4, 0, 0, 0, 0]);
            }
            p.extend_from_slice(&[self.proto, 0]);
            p.extend_from_slice(&((offset as u16) | u16::from(more)).to_be_bytes());
            p.extend_from_slice(&id.to_be_bytes());
        } else {
            p.extend_from_slice(&[0x45, 0]);
            p.extend_from_slice(&((20 + body.len()) as u16).to_be_bytes());
            p.extend_from_slice(&(id as u16).to_be_bytes());
            let field = (offset / 8) as u16 | if more { 0x2000 } else { 0 };
            p.extend_from_slice(&field.to_be_bytes());
            p.extend_from_slice(&[64, self.proto, 0, 0]);
            p.extend_from_slice(&self.src);
            p.extend_from_slice(&self.dst);
        }
        p.extend_from_slice(body);
        p
    }
}

/// The frame of an IP packet on `linktype`.
fn frame(rng: &mut Rng, linktype: u32, ip: &[u8]) -> Vec<u8> {
    let v6 = ip[0] >> 4 == 6;
    let ethertype: u16 = if v6 { 0x86dd } else { 0x0800 };
    let mut f = match linktype {
        1 => {
            let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
            if rng.chance(1, 8) {
                f.extend_from_slice(&[0x81, 0x00, 0, 10]);
            }
            f.extend_from_slice(&ethertype.to_be_bytes());
            f
        }
        0 => (if v6 { 24u32 } else { 2 }).to_le_bytes().to_vec(),
        108 => (if v6 { 28u32 } else { 2 }).to_be_bytes().to_vec(),
        113 => {
            let mut f = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0];
            f.extend_from_slice(&ethertype.to_be_bytes());
            f
        }
        276 => {
            let mut f = ethertype.to_be_bytes().to_vec();
            f.extend_from_slice(&[0, 0, 0, 0, 0, 2, 0, 1, 0, 0, 1, 6, 2, 0, 0, 0, 0, 1]);
            f
        }
        _ => Vec::new(),
    };
    f.extend_from_slice(ip);
    f
}

/// The datagram a packet belongs to, and whether it is a first fragment; `None`: unfragmented.
type Membership = Option<(usize, bool)>;

/// One packet of the traffic.
struct Arrival {
    frame: Vec<u8>,
    time: u64,
    datagram: Membership,
}

/// What the model says must happen to a later fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    OnArrival,
    Released,
    Dropped,
}

#[derive(Default, Debug)]
struct Tally {
    packets: u64,
    fragments: u64,
    on_arrival: u64,
    released: u64,
    dropped: u64,
    delivered_fragments: u64,
    /// Deliveries to at least one filter.
    nonempty: u64,
    /// Deliveries that differ from matching the fragment alone.
    differs_alone: u64,
    datagrams_without_first: u64,
    evicted: u64,
}

fn run_seed(seed: u64, limits: Option<FragmentConfig>, tally: &mut Tally) {
    let mut rng = Rng::new(seed);
    let linktype = LINKTYPES[(seed as usize) % LINKTYPES.len()];
    let conns: Vec<Conn> = (0..24).map(|_| Conn::random(&mut rng, linktype)).collect();

    // Filters: the connections' own, and random expressions, at random ranks and deliveries.
    let mut exprs: Vec<String> = conns.iter().flat_map(Conn::filters).collect();
    exprs.extend(random_expressions(seed, linktype, 40));
    let mut demux = Demux::new();
    let mut installed = Vec::new();
    for e in &exprs {
        let Some(f) = compile(e, linktype) else {
            continue;
        };
        let priority = rng.range(0, 3) as i32;
        let delivery = if rng.chance(1, 4) {
            Delivery::Copy
        } else {
            Delivery::Exclusive
        };
        install(&mut demux, &mut installed, f, priority, delivery);
    }

    // Datagrams in sending order, each with its fragments; some first fragments lost, some
    // repeated, some later fragments duplicated; unfragmented packets in between.
    let mut sent: Vec<(Membership, Vec<u8>)> = Vec::new();
    let mut firsts: Vec<Option<Vec<u8>>> = Vec::new();
    for d in 0..200usize {
        let c = rng.pick(&conns).clone();
        let hop_by_hop = c.v6 && rng.chance(1, 4);
        let mut frags: Vec<(bool, Vec<u8>)> = c
            .fragments(&mut rng, 0x10000 + d as u32, hop_by_hop)
            .into_iter()
            .map(|(first, ip)| (first, frame(&mut rng, linktype, &ip)))
            .collect();
        let first = frags.iter().find(|f| f.0).map(|f| f.1.clone());
        if rng.chance(1, 6) {
            frags.retain(|f| !f.0);
            tally.datagrams_without_first += 1;
            firsts.push(None);
        } else {
            firsts.push(first);
        }
        if rng.chance(1, 6) {
            let again = rng.pick(&frags).clone();
            frags.push(again);
        }
        for (is_first, f) in frags {
            sent.push((Some((d, is_first)), f));
        }
        if rng.chance(1, 2) {
            let whole = c.ip(0, 0, false, &[0x11; 40], false);
            sent.push((None, frame(&mut rng, linktype, &whole)));
        }
    }
    // Arrival order: shuffled within a window of about 40 packets.
    let mut order: Vec<(u64, usize)> = (0..sent.len())
        .map(|i| (i as u64 + rng.below(40), i))
        .collect();
    order.sort();
    let mut time = 1_000_000u64;
    let arrivals: Vec<Arrival> = order
        .into_iter()
        .map(|(_, i)| {
            time += 1 + rng.below(100);
            Arrival {
                frame: sent[i].1.clone(),
                time,
                datagram: sent[i].0,
            }
        })
        .collect();
    let timeout = 1500; // about 30 packets: some early fragments wait too long.

    // The model: when each datagram's state lives, and each fragment's fate.
    let mut first_times: HashMap<usize, Vec<u64>> = HashMap::new();
    for a in &arrivals {
        if let Some((d, true)) = a.datagram {
            first_times.entry(d).or_default().push(a.time);
        }
    }
    let fate = |d: usize, t: u64| -> Fate {
        let times = first_times.get(&d).map_or(&[][..], |v| v.as_slice());
        // Intervals during which the datagram is remembered.
        let mut end = 0u64;
        let mut live = false;
        for &s in times {
            if s > t {
                break;
            }
            if s >= end {
                end = s + timeout;
            }
            live = t < end;
        }
        if live {
            Fate::OnArrival
        } else if times.iter().any(|&s| s > t && s < t + timeout) {
            Fate::Released
        } else {
            Fate::Dropped
        }
    };
    let mut cache = Cache::new();
    let expected: Vec<Option<(Vec<FilterId>, Option<FilterId>)>> = firsts
        .iter()
        .map(|f| {
            f.as_ref()
                .map(|p| oracle(&installed, p, p.len() as u32, false, &mut cache))
        })
        .collect();

    // Exact mode: limits that never bind, so the model decides every fate. Bounded mode:
    // small limits that evict; then a fragment may lose a fate the model grants (its datagram
    // or itself evicted), but never gains one, and never reaches a wrong filter.
    let exact = limits.is_none();
    let config = FragmentConfig {
        timeout_ns: timeout,
        ..limits.unwrap_or_default()
    };
    let mut frag: FragmentDemux<usize> =
        FragmentDemux::new(&demux.reader(), linktype, config).unwrap();
    let mut m = Matches::new();
    let mut first_seen = 0u64;
    let mut check =
        |i: usize, delivered: &[FilterId], exclusive: Option<FilterId>, tally: &mut Tally| {
            let (d, _) = arrivals[i].datagram.unwrap();
            let want = expected[d]
                .as_ref()
                .expect("delivered, so its first fragment came");
            assert_eq!(
                (delivered, exclusive),
                (want.0.as_slice(), want.1),
                "seed {seed} linktype {linktype}: packet {i} of datagram {d}"
            );
            tally.delivered_fragments += 1;
            tally.nonempty += u64::from(!delivered.is_empty());
            // Would the fragment alone have gone elsewhere? (What dispatch by datagram is for.)
            let a = &arrivals[i];
            let alone = oracle(
                &installed,
                &a.frame,
                a.frame.len() as u32,
                false,
                &mut cache,
            );
            tally.differs_alone += u64::from(alone != *want);
        };
    let (mut released, mut dropped) = (0u64, 0u64);
    for (i, a) in arrivals.iter().enumerate() {
        tally.packets += 1;
        let o = frag.dispatch(&a.frame, a.frame.len() as u32, a.time, || i, &mut m);
        match a.datagram {
            None => {
                let want = oracle(
                    &installed,
                    &a.frame,
                    a.frame.len() as u32,
                    false,
                    &mut Cache::new(),
                );
                assert_eq!(o, FragmentOutcome::Unfragmented);
                assert_eq!((m.delivered(), m.exclusive()), (want.0.as_slice(), want.1));
            }
            Some((_, true)) => {
                first_seen += 1;
                assert!(matches!(
                    o,
                    FragmentOutcome::First | FragmentOutcome::RepeatedFirst
                ));
                check(i, m.delivered(), m.exclusive(), tally);
            }
            Some((d, false)) => {
                tally.fragments += 1;
                let want = fate(d, a.time);
                match o {
                    FragmentOutcome::Following => {
                        assert_eq!(want, Fate::OnArrival, "seed {seed}: packet {i}");
                        check(i, m.delivered(), m.exclusive(), tally);
                        tally.on_arrival += 1;
                    }
                    FragmentOutcome::Postponed => {
                        assert!(!exact || want != Fate::OnArrival, "seed {seed}: packet {i}");
                        assert!(m.is_empty());
                    }
                    FragmentOutcome::Dropped(DropReason::Refused) if !exact => dropped += 1,
                    other => panic!("seed {seed}: packet {i}: {other:?}"),
                }
            }
        }
        // Releases concern earlier packets: delivered with their first's recipients, or
        // dropped, as the model says.
        for r in frag.releases() {
            let (d, _) = arrivals[r.handle].datagram.unwrap();
            let arrived = arrivals[r.handle].time;
            let want = fate(d, arrived);
            assert_eq!(r.arrival_ns, arrived);
            match r.verdict {
                Verdict::Deliver(to) => {
                    // Released only when a first fragment came within the timeout.
                    let ok = want == Fate::Released || (!exact && want == Fate::OnArrival);
                    assert!(ok, "seed {seed}: packet {}: {want:?}", r.handle);
                    assert!(a.time < arrived + timeout);
                    check(r.handle, to.delivered(), to.exclusive(), tally);
                    released += 1;
                }
                Verdict::Drop(DropReason::Timeout) => {
                    assert!(
                        !exact || want == Fate::Dropped,
                        "seed {seed}: packet {}",
                        r.handle
                    );
                    // Dropped no earlier than its timeout.
                    assert!(a.time >= arrived + timeout);
                    dropped += 1;
                }
                Verdict::Drop(DropReason::Evicted) if !exact => dropped += 1,
                Verdict::Drop(why) => panic!("seed {seed}: packet {}: {why:?}", r.handle),
            }
        }
        let st = frag.stats();
        let c = frag.config();
        assert!(
            st.postponed_now <= c.max_postponed && st.postponed_bytes_now <= c.max_postponed_bytes
        );
        assert!(
            st.datagrams_now <= c.max_datagrams && st.datagram_bytes_now <= c.max_datagram_bytes
        );
    }
    // The end: everything still held times out.
    frag.expire(time + timeout);
    for r in frag.releases() {
        let (d, _) = arrivals[r.handle].datagram.unwrap();
        assert!(!exact || fate(d, arrivals[r.handle].time) == Fate::Dropped);
        assert_eq!(r.verdict, Verdict::Drop(DropReason::Timeout));
        dropped += 1;
    }
    frag.flush();
    assert_eq!(frag.releases().count(), 0);

    let st = frag.stats();
    // Every later fragment was delivered on arrival, released or dropped, and counted so.
    assert_eq!(
        st.following + released + dropped,
        tally_fragments(&arrivals)
    );
    assert_eq!((st.released, st.dropped()), (released, dropped));
    assert_eq!(
        st.postponed,
        st.released + st.dropped_timeout + st.dropped_evicted
    );
    assert_eq!(st.first + st.repeated_first, first_seen);
    assert_eq!(
        st.conflicting_first, 0,
        "repeated firsts here are identical"
    );
    assert_eq!((st.postponed_now, st.datagrams_now), (0, 0));
    if exact {
        // Exact counts: the model's and the counters'.
        let mut model = [0u64; 3];
        for a in &arrivals {
            if let Some((d, false)) = a.datagram {
                model[fate(d, a.time) as usize] += 1;
            }
        }
        assert_eq!(
            (st.following, st.released, st.dropped_timeout),
            (model[0], model[1], model[2]),
            "seed {seed}"
        );
        assert_eq!(st.dropped(), st.dropped_timeout);
    } else {
        tally.evicted += st.dropped_evicted + st.datagrams_evicted;
    }
    tally.released += released;
    tally.dropped += dropped;
}

fn tally_fragments(arrivals: &[Arrival]) -> u64 {
    arrivals
        .iter()
        .filter(|a| matches!(a.datagram, Some((_, false))))
        .count() as u64
}

#[test]
fn every_fragment_goes_where_its_first_went_or_is_dropped_at_timeout() {
    let mut tally = Tally::default();
    for seed in 1..=32 {
        run_seed(seed, None, &mut tally);
    }
    eprintln!("{tally:?}");
    // The traffic exercised every path, and dispatch mattered.
    assert!(
        tally.released > 1000 && tally.dropped > 1000 && tally.on_arrival > 1000,
        "{tally:?}"
    );
    assert!(
        tally.nonempty > 1000 && tally.differs_alone > 1000,
        "{tally:?}"
    );
}

#[test]
fn small_limits_evict_but_never_misdeliver() {
    let mut tally = Tally::default();
    let limits = FragmentConfig {
        max_datagrams: 8,
        max_datagram_bytes: 8 * 200,
        max_postponed: 12,
        max_postponed_bytes: 6_000,
        ..FragmentConfig::default()
    };
    for seed in 1..=16 {
        run_seed(seed, Some(limits), &mut tally);
    }
    eprintln!("{tally:?}");
    assert!(tally.evicted > 1000 && tally.released > 100, "{tally:?}");
}
