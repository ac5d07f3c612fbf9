//! The dispatch rules one by one: order, duplicates, overlaps, repeats, timeouts, limits.

use super::*;
use crate::{Delivery, Demux};

const ETHERNET: u32 = 1;
const SEC: u64 = 1_000_000_000;

fn filter(expr: &str) -> sift_ir::Function {
    sift::compile_ir(expr, &sift::Options::new(ETHERNET, 65535)).expect(expr)
}

/// An Ethernet frame with an IPv4 fragment 10.0.0.1 > 10.0.0.2 (UDP) of datagram `id` at
/// `offset` (8-byte units), carrying `body`.
fn v4(id: u16, offset: u16, more: bool, body: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 12];
    p.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
    p.extend_from_slice(&(20 + body.len() as u16).to_be_bytes());
    p.extend_from_slice(&id.to_be_bytes());
    p.extend_from_slice(&(offset | if more { 0x2000 } else { 0 }).to_be_bytes());
    p.extend_from_slice(&[64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    p.extend_from_slice(body);
    p
}

/// The first fragment of a UDP datagram to `dport`.
fn first(id: u16, dport: u16) -> Vec<u8> {
    let mut udp = vec![0x03, 0xe8];
    udp.extend_from_slice(&dport.to_be_bytes());
    udp.extend_from_slice(&[0, 200, 0, 0]);
    udp.extend_from_slice(&[0xab; 16]);
    v4(id, 0, true, &udp)
}

fn later(id: u16, offset: u16) -> Vec<u8> {
    v4(id, offset, offset < 20, &[0xcd; 24])
}

struct Setup {
    demux: Demux,
    dns: FilterId,
    web: FilterId,
    monitor: FilterId,
}

/// `udp dst port 53` and `udp dst port 80` (exclusive), a copy monitor of `udp port 53`.
fn setup() -> Setup {
    let mut demux = Demux::new();
    let monitor = demux
        .insert(&filter("udp port 53"), 10, Delivery::Copy)
        .unwrap();
    let dns = demux
        .insert(&filter("udp dst port 53"), 0, Delivery::Exclusive)
        .unwrap();
    let web = demux
        .insert(&filter("udp dst port 80"), 0, Delivery::Exclusive)
        .unwrap();
    Setup {
        demux,
        dns,
        web,
        monitor,
    }
}

fn frag(s: &Setup, config: FragmentConfig) -> FragmentDemux<usize> {
    FragmentDemux::new(&s.demux.reader(), ETHERNET, config).unwrap()
}

/// Dispatches `pkt` as packet number `n` at `t`; returns the outcome and the delivery.
fn go(
    f: &mut FragmentDemux<usize>,
    pkt: &[u8],
    n: usize,
    t: u64,
) -> (FragmentOutcome, Vec<FilterId>) {
    let mut m = Matches::new();
    let o = f.dispatch(pkt, pkt.len() as u32, t, || n, &mut m);
    (o, m.delivered().to_vec())
}

fn releases(f: &mut FragmentDemux<usize>) -> Vec<(usize, Verdict)> {
    f.releases().map(|r| (r.handle, r.verdict)).collect()
}

#[test]
fn later_fragments_follow_the_first() {
    let s = setup();
    let mut f = frag(&s, FragmentConfig::default());
    // Matched alone, a later fragment reaches nobody: no transport header.
    let mut alone = Matches::new();
    s.demux.reader().match_packet(&later(1, 3), 60, &mut alone);
    assert!(alone.is_empty());
    let (o, d) = go(&mut f, &first(1, 53), 0, 0);
    assert_eq!(
        (o, d.as_slice()),
        (FragmentOutcome::First, &[s.monitor, s.dns][..])
    );
    for (n, off) in [3u16, 6, 3, 1, 20].into_iter().enumerate() {
        // Duplicates (3 twice) and overlaps (1 overlaps the first's 24 bytes) included.
        let (o, d) = go(&mut f, &later(1, off), n + 1, SEC);
        assert_eq!(
            (o, d.as_slice()),
            (FragmentOutcome::Following, &[s.monitor, s.dns][..])
        );
    }
    let (o, d) = go(&mut f, &first(2, 80), 9, SEC);
    assert_eq!((o, d), (FragmentOutcome::First, vec![s.web]));
    assert_eq!(go(&mut f, &later(2, 3), 10, SEC).1, vec![s.web]);
    // An unfragmented packet and a Don't-Fragment one are just matched.
    let mut whole = first(3, 53);
    whole[20] = 0;
    assert_eq!(
        go(&mut f, &whole, 11, SEC),
        (FragmentOutcome::Unfragmented, vec![s.monitor, s.dns])
    );
    whole[20] = 0x40;
    assert_eq!(go(&mut f, &whole, 12, SEC).0, FragmentOutcome::Unfragmented);
    let st = f.stats();
    assert_eq!(
        (st.first, st.following, st.unfragmented, st.postponed),
        (2, 6, 2, 0)
    );
    assert_eq!(st.datagrams_now, 2);
    assert!(releases(&mut f).is_empty());
}

#[test]
fn early_fragments_wait_for_the_first() {
    let s = setup();
    let mut f = frag(&s, FragmentConfig::default());
    let mut made = 0;
    let mut m = Matches::new();
    let pkt = later(7, 3);
    let o = f.dispatch(
        &pkt,
        60,
        5,
        || {
            made += 1;
            100
        },
        &mut m,
    );
    assert_eq!(
        (o, made, m.is_empty()),
        (FragmentOutcome::Postponed, 1, true)
    );
    // Interleaved with another datagram, itself out of order.
    assert_eq!(
        go(&mut f, &later(8, 3), 101, 6).0,
        FragmentOutcome::Postponed
    );
    assert_eq!(
        go(&mut f, &later(7, 6), 102, 7).0,
        FragmentOutcome::Postponed
    );
    assert_eq!(
        go(&mut f, &later(7, 6), 103, 8).0,
        FragmentOutcome::Postponed
    );
    assert_eq!(
        go(&mut f, &first(8, 80), 104, 9),
        (FragmentOutcome::First, vec![s.web])
    );
    assert_eq!(
        releases(&mut f),
        [(
            101,
            Verdict::Deliver(Recipients {
                delivered: vec![s.web].into(),
                exclusive: Some(s.web),
            })
        )]
    );
    assert_eq!(go(&mut f, &first(7, 53), 105, 10).0, FragmentOutcome::First);
    let got = f.releases().collect::<Vec<_>>();
    assert_eq!(
        got.iter().map(|r| r.handle).collect::<Vec<_>>(),
        [100, 102, 103]
    );
    assert_eq!(
        got.iter().map(|r| r.arrival_ns).collect::<Vec<_>>(),
        [5, 7, 8]
    );
    for r in &got {
        let Verdict::Deliver(to) = &r.verdict else {
            panic!("{:?}", r.verdict)
        };
        assert_eq!(
            (to.delivered(), to.exclusive()),
            (&[s.monitor, s.dns][..], Some(s.dns))
        );
        assert_eq!(to.copies().collect::<Vec<_>>(), [s.monitor]);
    }
    let st = f.stats();
    assert_eq!(
        (st.postponed, st.released, st.dropped(), st.postponed_now),
        (4, 4, 0, 0)
    );
    // A first fragment no filter wants is remembered too: its later fragments go nowhere.
    assert_eq!(
        go(&mut f, &first(9, 9999), 106, 11),
        (FragmentOutcome::First, vec![])
    );
    assert_eq!(
        go(&mut f, &later(9, 3), 107, 12),
        (FragmentOutcome::Following, vec![])
    );
}

#[test]
fn missing_first_times_out_exactly() {
    let s = setup();
    let timeout = 2 * SEC;
    let mut f = frag(
        &s,
        FragmentConfig {
            timeout_ns: timeout,
            ..FragmentConfig::default()
        },
    );
    go(&mut f, &later(1, 3), 0, 1000);
    go(&mut f, &later(1, 6), 1, 1500);
    go(&mut f, &later(2, 6), 2, 1500);
    f.expire(1000 + timeout - 1);
    assert_eq!(f.pending_releases(), 0);
    f.expire(1000 + timeout);
    assert_eq!(releases(&mut f), [(0, Verdict::Drop(DropReason::Timeout))]);
    // The first fragment arrives too late for packet 0, in time for packet 1.
    assert_eq!(
        go(&mut f, &first(1, 53), 3, 1499 + timeout).0,
        FragmentOutcome::First
    );
    assert_eq!(
        releases(&mut f)
            .into_iter()
            .map(|r| r.0)
            .collect::<Vec<_>>(),
        [1]
    );
    // The remembered datagram expires `timeout` after its first fragment.
    assert_eq!(
        go(&mut f, &later(1, 9), 4, 1498 + 2 * timeout).0,
        FragmentOutcome::Following
    );
    assert_eq!(
        go(&mut f, &later(1, 9), 5, 1499 + 2 * timeout).0,
        FragmentOutcome::Postponed
    );
    f.flush();
    // Packet 2 timed out at the previous dispatch; packet 5 is flushed.
    assert_eq!(
        releases(&mut f),
        [
            (2, Verdict::Drop(DropReason::Timeout)),
            (5, Verdict::Drop(DropReason::Flushed))
        ]
    );
    let st = f.stats();
    assert_eq!(
        (st.dropped_timeout, st.dropped_flushed, st.released),
        (2, 1, 1)
    );
    assert_eq!((st.datagrams_created, st.datagrams_expired), (1, 1));
}

#[test]
fn the_clock_never_goes_back() {
    let s = setup();
    let mut f = frag(
        &s,
        FragmentConfig {
            timeout_ns: 100,
            ..FragmentConfig::default()
        },
    );
    go(&mut f, &first(1, 53), 0, 1000);
    // A timestamp from the past counts as 1000: still within the datagram's timeout.
    assert_eq!(go(&mut f, &later(1, 3), 1, 5).0, FragmentOutcome::Following);
    assert_eq!(go(&mut f, &later(2, 3), 2, 7).0, FragmentOutcome::Postponed);
    assert_eq!(
        go(&mut f, &later(1, 3), 3, 1100).0,
        FragmentOutcome::Postponed
    );
    assert_eq!(releases(&mut f), [(2, Verdict::Drop(DropReason::Timeout))]);
    let held: Vec<u64> = {
        f.flush();
        f.releases().map(|r| r.arrival_ns).collect()
    };
    assert_eq!(held, [1100]);
}

#[test]
fn a_repeated_first_fragment_cannot_redirect_its_datagram() {
    let s = setup();
    let mut f = frag(&s, FragmentConfig::default());
    go(&mut f, &first(1, 53), 0, 0);
    // The same first fragment again (a retransmitted or duplicated frame).
    assert_eq!(
        go(&mut f, &first(1, 53), 1, 1),
        (FragmentOutcome::RepeatedFirst, vec![s.monitor, s.dns])
    );
    // A first fragment rewriting the port (an overlapping first fragment).
    assert_eq!(
        go(&mut f, &first(1, 80), 2, 2),
        (FragmentOutcome::RepeatedFirst, vec![s.monitor, s.dns])
    );
    assert_eq!(go(&mut f, &later(1, 3), 3, 3).1, vec![s.monitor, s.dns]);
    let st = f.stats();
    assert_eq!(
        (st.first, st.repeated_first, st.conflicting_first),
        (1, 2, 1)
    );
}

#[test]
fn postponed_flood_stays_within_count_and_bytes() {
    let s = setup();
    let n = 10_000usize;
    for overflow in [Overflow::EvictOldest, Overflow::RefuseNew] {
        let config = FragmentConfig {
            max_postponed: 100,
            overflow,
            ..FragmentConfig::default()
        };
        let mut f = frag(&s, config);
        let mut evicted = Vec::new();
        for i in 0..n {
            let o = go(&mut f, &later(i as u16, 3), i, i as u64).0;
            let expect_refused = overflow == Overflow::RefuseNew && i >= 100;
            assert_eq!(
                o == FragmentOutcome::Dropped(DropReason::Refused),
                expect_refused
            );
            evicted.extend(releases(&mut f));
            assert!(f.stats().postponed_now <= 100);
        }
        let st = f.stats();
        assert_eq!(st.peak_postponed, 100);
        assert_eq!(st.postponed_now, 100);
        match overflow {
            Overflow::EvictOldest => {
                assert_eq!(st.dropped_evicted, (n - 100) as u64);
                assert_eq!(st.dropped_refused, 0);
                // The oldest went first, in order.
                let ids: Vec<usize> = evicted.iter().map(|r| r.0).collect();
                assert_eq!(ids, (0..n - 100).collect::<Vec<_>>());
                assert!(evicted
                    .iter()
                    .all(|r| r.1 == Verdict::Drop(DropReason::Evicted)));
            }
            Overflow::RefuseNew => {
                assert_eq!(st.dropped_refused, (n - 100) as u64);
                assert_eq!((st.dropped_evicted, st.postponed), (0, 100));
                assert!(evicted.is_empty());
            }
        }
        // The survivors are the 100 newest (evict) or oldest (refuse); their firsts release them.
        let survivor = if overflow == Overflow::EvictOldest {
            n - 1
        } else {
            0
        };
        go(&mut f, &first(survivor as u16, 53), n, n as u64);
        assert_eq!(
            releases(&mut f)
                .into_iter()
                .map(|r| r.0)
                .collect::<Vec<_>>(),
            [survivor]
        );
        let st = f.stats();
        assert_eq!(
            st.postponed,
            st.released + st.dropped_evicted + st.postponed_now as u64
        );
    }
    // Bytes: each fragment accounts its captured length plus the overhead.
    let each = later(0, 3).len() + POSTPONED_OVERHEAD_BYTES;
    let config = FragmentConfig {
        max_postponed_bytes: 50 * each + each / 2,
        ..FragmentConfig::default()
    };
    let mut f = frag(&s, config);
    for i in 0..1000 {
        go(&mut f, &later(i as u16, 3), i, i as u64);
    }
    let st = f.stats();
    assert_eq!((st.peak_postponed, st.postponed_now), (50, 50));
    assert_eq!(st.peak_postponed_bytes, 50 * each);
    assert_eq!(st.dropped_evicted, 950);
    // A fragment larger than the whole budget is refused whatever the policy.
    let config = FragmentConfig {
        max_postponed_bytes: each - 1,
        ..FragmentConfig::default()
    };
    let mut f = frag(&s, config);
    assert_eq!(
        go(&mut f, &later(1, 3), 0, 0).0,
        FragmentOutcome::Dropped(DropReason::Refused)
    );
}

#[test]
fn datagram_flood_stays_within_count_and_bytes() {
    let s = setup();
    let n = 5_000u16;
    for overflow in [Overflow::EvictOldest, Overflow::RefuseNew] {
        let config = FragmentConfig {
            max_datagrams: 64,
            overflow,
            ..FragmentConfig::default()
        };
        let mut f = frag(&s, config);
        for i in 0..n {
            // Every first fragment is delivered, remembered or not.
            assert_eq!(go(&mut f, &first(i, 53), 0, 0).0, FragmentOutcome::First);
        }
        let st = f.stats();
        assert_eq!(
            (st.peak_datagrams, st.datagrams_now, st.first),
            (64, 64, u64::from(n))
        );
        let (kept, lost) = match overflow {
            Overflow::EvictOldest => {
                assert_eq!(
                    (st.datagrams_evicted, st.datagrams_refused),
                    (u64::from(n) - 64, 0)
                );
                (n - 1, 0)
            }
            Overflow::RefuseNew => {
                assert_eq!(
                    (st.datagrams_evicted, st.datagrams_refused),
                    (0, u64::from(n) - 64)
                );
                (0, n - 1)
            }
        };
        assert_eq!(
            go(&mut f, &later(kept, 3), 0, 0).0,
            FragmentOutcome::Following
        );
        assert_eq!(
            go(&mut f, &later(lost, 3), 0, 0).0,
            FragmentOutcome::Postponed
        );
    }
    // Bytes: 128 per datagram plus 8 per recipient (two here: the monitor and dns).
    let each = DATAGRAM_STATE_BYTES + 16;
    let config = FragmentConfig {
        max_datagram_bytes: 10 * each,
        ..FragmentConfig::default()
    };
    let mut f = frag(&s, config);
    for i in 0..100 {
        go(&mut f, &first(i, 53), 0, 0);
    }
    let st = f.stats();
    assert_eq!(
        (
            st.peak_datagrams,
            st.peak_datagram_bytes,
            st.datagrams_evicted
        ),
        (10, 10 * each, 90)
    );
    let config = FragmentConfig {
        max_datagrams: 0,
        ..FragmentConfig::default()
    };
    let mut f = frag(&s, config);
    go(&mut f, &first(1, 53), 0, 0);
    assert_eq!(f.stats().datagrams_refused, 1);
}

#[test]
fn match_all_records_every_accepting_filter() {
    let mut demux = Demux::new();
    let a = demux
        .insert(&filter("udp dst port 53"), 0, Delivery::Exclusive)
        .unwrap();
    let b = demux
        .insert(&filter("ip src 10.0.0.1"), 0, Delivery::Exclusive)
        .unwrap();
    let config = FragmentConfig {
        match_all: true,
        ..FragmentConfig::default()
    };
    let mut f: FragmentDemux<usize> =
        FragmentDemux::new(&demux.reader(), ETHERNET, config).unwrap();
    assert_eq!(go(&mut f, &later(1, 3), 0, 0).0, FragmentOutcome::Postponed);
    assert_eq!(go(&mut f, &first(1, 53), 1, 0).1, vec![a, b]);
    let Some(Release {
        verdict: Verdict::Deliver(to),
        ..
    }) = f.next_release()
    else {
        panic!()
    };
    assert_eq!((to.delivered(), to.exclusive()), (&[a, b][..], Some(a)));
    assert!(f.next_release().is_none());
}

#[test]
fn unsupported_link_types_are_refused() {
    let demux = Demux::new();
    let err =
        FragmentDemux::<()>::new(&demux.reader(), 147, FragmentConfig::default()).unwrap_err();
    assert_eq!(err, FragmentError::UnsupportedLinkType(147));
    assert!(err.to_string().contains("147"));
}

#[test]
fn dispatch_state_moves_between_threads() {
    fn send<T: Send>() {}
    send::<FragmentDemux<Vec<u8>>>();
    send::<Release<Vec<u8>>>();
}
