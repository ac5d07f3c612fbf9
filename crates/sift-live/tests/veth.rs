//! Live capture end to end: frames injected on one end of a veth pair (inside a network namespace
//! made for the test) and captured on the other with a filter running in the kernel.
//!
//! Every run ends with a terminator frame that the capture filter also accepts (`ether src TERM
//! or (EXPR)`); the frames before it are exactly what the kernel let through, so the tests can
//! check the full list without timing anything. A watchdog stops a capture that never sees its
//! terminator, turning a hang into a failure. These tests need root; without it they fail unless
//! `SIFT_SKIP_NETNS_TESTS=1`.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::frames::{self, TERM, TERM_EXPR};
use common::lab::{self, Lab};
use sift_bpf::Dialect;
use sift_live::{Capture, Config, Direction, Error, Stats, Stopper, TagView};

/// One captured packet, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Got {
    data: Vec<u8>,
    wire_len: u32,
    direction: Direction,
    ts: (i64, u32),
}

fn program(expr: &str, linktype: u32, snaplen: u32) -> sift_bpf::Program {
    let ir = sift::compile_ir(expr, &sift::Options::new(linktype, snaplen))
        .unwrap_or_else(|e| panic!("{}", e.render(expr)));
    sift_bpf::compile_for(&ir, Dialect::Linux)
        .unwrap_or_else(|e| panic!("{expr}: {e}"))
        .to_program()
}

/// Stops `stopper` if `done` is not signalled (or dropped) within a minute: a safety net against
/// a hang, not a measurement.
fn watchdog(stopper: Stopper) -> mpsc::Sender<()> {
    let (done, wait) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(Duration::from_secs(60)) {
            stopper.stop();
        }
    });
    done
}

/// Reads packets up to and excluding the terminator.
fn read_until_terminator(capture: &mut Capture) -> Vec<Got> {
    let _done = watchdog(capture.stopper());
    let mut got = Vec::new();
    loop {
        let packet = capture
            .next_packet()
            .expect("capture failed")
            .unwrap_or_else(|| {
                panic!("watchdog stopped the capture before the terminator; got {got:#?}")
            });
        if packet.data().get(6..12) == Some(&TERM[..]) {
            return got;
        }
        got.push(Got {
            data: packet.data().to_vec(),
            wire_len: packet.wire_len(),
            direction: packet.direction(),
            ts: (packet.timestamp().secs(), packet.timestamp().nanos()),
        });
    }
}

/// Opens a capture on the lab's host end with `config`, filter `TERM or (expr)`.
fn open(lab: &Lab, config: Config, expr: &str, view: TagView) -> Capture {
    let mut capture = Capture::open(&config).expect("open");
    let full = format!("{TERM_EXPR} or ({expr})");
    capture
        .set_filter_with(&program(&full, capture.linktype(), capture.snaplen()), view)
        .expect("set_filter");
    let _ = lab;
    capture
}

/// Injects `sent` plus the terminator and returns what the capture saw before it.
fn capture_run(lab: &Lab, config: Config, expr: &str, sent: &[Vec<u8>]) -> (Vec<Got>, Stats) {
    capture_run_with(lab, config, expr, TagView::Stripped, sent)
}

/// [`capture_run`] with the filter seeing stripped VLAN tags as `view` says.
fn capture_run_with(
    lab: &Lab,
    config: Config,
    expr: &str,
    view: TagView,
    sent: &[Vec<u8>],
) -> (Vec<Got>, Stats) {
    let mut capture = open(lab, config, expr, view);
    let mut all = sent.to_vec();
    all.push(frames::terminator());
    lab.inject(&all);
    let got = read_until_terminator(&mut capture);
    let stats = capture.stats().expect("stats");
    (got, stats)
}

/// What libpcap semantics say the kernel should deliver: the frames `expr` accepts, cut to the
/// filter's return value.
fn expected(expr: &str, snaplen: u32, sent: &[Vec<u8>]) -> Vec<(Vec<u8>, u32)> {
    let filter = sift::Filter::compile(expr, 1, snaplen).expect("compile");
    sent.iter()
        .filter_map(|f| {
            let keep = filter.run(f, f.len() as u32) as usize;
            (keep > 0).then(|| (f[..keep.min(f.len())].to_vec(), f.len() as u32))
        })
        .collect()
}

fn assert_same(got: &[Got], want: &[(Vec<u8>, u32)], what: &str) {
    let got_pairs: Vec<(Vec<u8>, u32)> = got.iter().map(|g| (g.data.clone(), g.wire_len)).collect();
    assert_eq!(
        got_pairs.len(),
        want.len(),
        "{what}: packet count; got {got:#?}"
    );
    for (i, (g, w)) in got_pairs.iter().zip(want).enumerate() {
        assert_eq!(g, w, "{what}: packet {i} differs");
    }
}

#[test]
fn kernel_filters_deliver_exactly_the_matching_frames_in_order() {
    if lab::skip() {
        return;
    }
    let lab = Lab::new(true);
    let sent = frames::mix();
    // Hand-checked positions (see frames::mix) so the test does not only compare sift with
    // itself.
    let cases: &[(&str, &[usize])] = &[
        ("tcp port 80", &[0, 4, 7]),
        ("udp", &[1, 5, 6, 9]),
        ("arp", &[2]),
        ("ip6", &[4, 5]),
        ("tcp port 80 or udp port 53", &[0, 1, 4, 5, 7]),
        ("ip and not tcp", &[1, 6, 9]),
        ("port 80", &[0, 4, 7, 9]),
        ("ip[2:2] > 100", &[6, 7]),
        (
            "ether src 02:00:00:00:00:01",
            &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        ),
        ("tcp port 443", &[]),
    ];
    for &(expr, positions) in cases {
        let (got, stats) = capture_run(&lab, Config::new(&lab.host), expr, &sent);
        let want: Vec<(Vec<u8>, u32)> = positions
            .iter()
            .map(|&i| (sent[i].clone(), sent[i].len() as u32))
            .collect();
        assert_same(&got, &want, expr);
        assert_eq!(
            want,
            expected(expr, 262_144, &sent),
            "{expr}: sift's own verdicts"
        );
        for g in &got {
            let broadcast = g.data[..6] == frames::BROADCAST;
            let dir = if broadcast {
                Direction::Broadcast
            } else {
                Direction::OtherHost
            };
            assert_eq!(g.direction, dir, "{expr}");
            assert!(g.ts.0 > 1_600_000_000, "{expr}: time stamp {:?}", g.ts);
        }
        assert!(
            got.windows(2).all(|w| w[0].ts <= w[1].ts),
            "{expr}: time stamps in order"
        );
        // The terminator is the one packet beyond the matches.
        assert_eq!(
            stats,
            Stats {
                received: positions.len() as u64 + 1,
                ..Stats::default()
            },
            "{expr}"
        );
    }
}

#[test]
fn snaplen_truncates_the_captured_length_only() {
    if lab::skip() {
        return;
    }
    let lab = Lab::new(true);
    let sent = frames::mix();
    let snaplen = 64;
    let mut capture = Capture::open(&Config::new(&lab.host).snaplen(snaplen)).unwrap();
    assert_eq!(capture.snaplen(), 64);
    let expr = format!("{TERM_EXPR} or udp");
    capture.set_filter(&program(&expr, 1, snaplen)).unwrap();
    let mut all = sent.clone();
    all.push(frames::terminator());
    lab.inject(&all);
    let got = read_until_terminator(&mut capture);
    let want: Vec<(Vec<u8>, u32)> = [1, 5, 6, 9]
        .iter()
        .map(|&i| {
            (
                sent[i][..sent[i].len().min(64)].to_vec(),
                sent[i].len() as u32,
            )
        })
        .collect();
    assert_same(&got, &want, "udp, snaplen 64");
    assert_eq!(want, expected("udp", snaplen, &sent));
    // 342-byte UDP frame: 64 captured; 60-byte one: whole.
    assert_eq!((got[2].data.len(), got[2].wire_len), (64, 342));
    assert_eq!((got[0].data.len(), got[0].wire_len), (62, 62));
}

#[test]
fn count_limit_keeps_the_rest_and_stopper_ends_a_waiting_capture() {
    if lab::skip() {
        return;
    }
    let lab = Lab::new(true);
    let sent = frames::mix();
    let mut capture = open(
        &lab,
        Config::new(&lab.host),
        "tcp or udp",
        TagView::Stripped,
    );
    let mut all = sent.clone();
    all.push(frames::terminator());
    lab.inject(&all);
    // `-c 3`: take three packets, then stop reading.
    let mut first = Vec::new();
    for _ in 0..3 {
        let p = capture.next_packet().unwrap().unwrap();
        first.push(p.data().to_vec());
    }
    assert_eq!(
        first,
        vec![sent[0].clone(), sent[1].clone(), sent[3].clone()]
    );
    // Nothing was lost by stopping in the middle of a block: the rest follows in order.
    let rest: Vec<Vec<u8>> = read_until_terminator(&mut capture)
        .into_iter()
        .map(|g| g.data)
        .collect();
    let want: Vec<Vec<u8>> = [4, 5, 6, 7, 8, 9]
        .iter()
        .map(|&i| sent[i].clone())
        .collect();
    assert_eq!(rest, want);

    // No traffic: a stop from another thread ends the wait (whether it comes before or during
    // the wait), and the capture stays stopped.
    let stopper = capture.stopper();
    let stopping = std::thread::spawn(move || stopper.stop());
    assert!(capture.next_packet().unwrap().is_none());
    stopping.join().unwrap();
    assert!(capture.stopper().is_stopped());
    assert!(capture.next_packet().unwrap().is_none());
}

#[test]
fn counters_report_drops_when_the_ring_is_full() {
    if lab::skip() {
        return;
    }
    let lab = Lab::new(true);
    // Two one-page blocks: room for a few dozen of these frames.
    let config = Config::new(&lab.host).snaplen(128).buffer(4096, 2);
    let mut capture = Capture::open(&config).unwrap();
    assert_eq!(capture.ring_geometry(), (2, 4096));
    capture
        .set_filter(&program("ether src 02:00:00:00:00:01", 1, 128))
        .unwrap();
    let sent: Vec<Vec<u8>> = (0..300).map(|i| frames::udp4(1000 + i, 60)).collect();
    lab.inject(&sent);
    // Wait (on counts, not on time) until the kernel has handled all 300.
    let mut stats = capture.stats().unwrap();
    for _ in 0..30_000 {
        if stats.received >= 300 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
        stats = capture.stats().unwrap();
    }
    assert_eq!(stats.received, 300, "{stats:?}");
    assert!(stats.dropped > 0, "{stats:?}");
    assert!(stats.queue_freezes > 0, "{stats:?}");
    let delivered = (stats.received - stats.dropped) as usize;
    // What fit in the ring is the beginning of the sequence, in order.
    let mut got = Vec::new();
    for _ in 0..delivered {
        got.push(capture.next_packet().unwrap().unwrap().data().to_vec());
    }
    assert_eq!(got, sent[..delivered].to_vec(), "{stats:?}");
    // And nothing else is left: the next packet is the next one sent.
    let after = frames::udp4(7, 1);
    lab.inject(std::slice::from_ref(&after));
    assert_eq!(capture.next_packet().unwrap().unwrap().data(), &after[..]);
    let total = capture.stats().unwrap();
    assert_eq!((total.received, total.dropped), (301, stats.dropped));
}

#[test]
fn replacing_the_filter_drops_queued_packets_the_new_one_rejects() {
    if lab::skip() {
        return;
    }
    let lab = Lab::new(true);
    let mut capture = open(
        &lab,
        Config::new(&lab.host),
        "udp or tcp port 80",
        TagView::Stripped,
    );
    // Batch 1 lands in the ring under the old filter: udp 53, tcp 80 (tcp 22 is rejected).
    let batch1 = vec![
        frames::udp4(53, 1),
        frames::tcp4(80, 1),
        frames::tcp4(22, 1),
    ];
    lab.inject(&batch1);
    let mut stats = capture.stats().unwrap();
    for _ in 0..30_000 {
        if stats.received >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
        stats = capture.stats().unwrap();
    }
    assert_eq!(stats.received, 2);
    capture
        .set_filter(&program(&format!("{TERM_EXPR} or tcp"), 1, 262_144))
        .unwrap();
    let batch2 = vec![
        frames::udp4(53, 2),
        frames::tcp4(22, 2),
        frames::tcp4(443, 2),
    ];
    let mut all = batch2.clone();
    all.push(frames::terminator());
    lab.inject(&all);
    let got: Vec<Vec<u8>> = read_until_terminator(&mut capture)
        .into_iter()
        .map(|g| g.data)
        .collect();
    // The queued udp packet is gone; the queued tcp one passes the new filter too.
    assert_eq!(
        got,
        vec![batch1[1].clone(), batch2[1].clone(), batch2[2].clone()]
    );
}

#[test]
fn vlan_tags_stripped_by_the_kernel_are_put_back() {
    if lab::skip() {
        return;
    }
    let lab = Lab::new(true);
    let tagged = frames::vlan_tagged(&frames::udp4(53, 10), 42);
    let (got, _) = capture_run(
        &lab,
        Config::new(&lab.host),
        "ether src 02:00:00:00:00:01",
        std::slice::from_ref(&tagged),
    );
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].data, tagged);
    assert_eq!(got[0].wire_len, tagged.len() as u32);
}

#[test]
fn vlan_filters_see_the_tags_the_kernel_stripped() {
    if lab::skip() {
        return;
    }
    let lab = Lab::new(true);
    let sent = vec![
        frames::vlan_tagged(&frames::udp4(53, 10), 42),
        frames::vlan_tagged(&frames::tcp4(80, 20), 42),
        frames::vlan_tagged(&frames::udp4(53, 30), 43),
        frames::udp4(53, 40),
        frames::vlan_tagged(&frames::arp(), 7),
        frames::tcp4(80, 50),
    ];
    // With the tag restored, the kernel and user space together give exactly what the filter
    // says about the frames as sent (and as written to a file).
    for expr in [
        "vlan 42",
        "vlan 42 and udp",
        "vlan and tcp port 80",
        "not vlan",
        "vlan 43 or tcp",
        "vlan and arp",
        "udp port 53",
    ] {
        let (got, _) =
            capture_run_with(&lab, Config::new(&lab.host), expr, TagView::Restored, &sent);
        assert_same(&got, &expected(expr, 262_144, &sent), expr);
    }
    // The kernel really strips the tags here: without them the filter sees untagged frames, so
    // `vlan 42` finds nothing and `udp port 53` finds every UDP frame, tagged or not.
    let (got, _) = capture_run(&lab, Config::new(&lab.host), "vlan 42", &sent);
    assert_eq!(got.len(), 0, "vlan 42 without the tags: {got:#?}");
    let (got, _) = capture_run(&lab, Config::new(&lab.host), "udp port 53", &sent);
    assert_eq!(got.len(), 3, "udp port 53 without the tags: {got:#?}");
}

#[test]
fn link_types_and_refusals() {
    if lab::skip() {
        return;
    }
    let lab = Lab::new(true);
    let veth = Capture::open(&Config::new(&lab.host)).unwrap();
    assert_eq!((veth.linktype(), veth.hardware_type()), (1, 1));
    drop(veth);

    let ns = lab.ns.clone();
    lab::run(&["ip", "-n", &ns, "link", "set", "lo", "up"]);
    lab::run(&[
        "ip", "-n", &ns, "tuntap", "add", "mode", "tun", "name", "siftun0",
    ]);
    lab::run(&["ip", "-n", &ns, "link", "set", "siftun0", "up"]);
    let (lo, tun) = lab.inside(|| {
        let lo = Capture::open(&Config::new("lo")).unwrap();
        let tun = Capture::open(&Config::new("siftun0")).unwrap();
        (
            (lo.linktype(), lo.hardware_type()),
            (tun.linktype(), tun.hardware_type()),
        )
    });
    assert_eq!(lo, (1, 772), "loopback is Ethernet");
    assert_eq!(tun, (101, 0xfffe), "tun is raw IP");

    let down = Lab::new(false);
    match Capture::open(&Config::new(&down.host)) {
        Err(Error::Interface { source, .. }) => {
            assert_eq!(source.raw_os_error(), Some(libc::ENETDOWN))
        }
        other => panic!("down interface: {other:?}"),
    }
    assert!(matches!(
        Capture::open(&Config::new("sift-no-such")),
        Err(Error::NoSuchInterface { .. })
    ));
    for bad in ["", "sixteen-bytes-xx", "a\0b"] {
        assert!(matches!(
            Capture::open(&Config::new(bad)),
            Err(Error::InterfaceName { .. })
        ));
    }

    // A program the kernel would refuse is refused before it gets there.
    let mut capture = Capture::open(&Config::new(&lab.host)).unwrap();
    let ld_mem = sift_bpf::Insn::stmt(sift_bpf::code::LD | sift_bpf::code::MEM, 0);
    let ret_a = sift_bpf::Insn::stmt(sift_bpf::code::RET | sift_bpf::code::A, 0);
    let err = capture
        .set_filter(&sift_bpf::Program(vec![ld_mem, ret_a]))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidFilter(_)), "{err}");
    assert!(
        err.to_string()
            .contains("M[0] may be read before it is stored"),
        "{err}"
    );
}

#[test]
fn promiscuous_mode_lasts_as_long_as_the_capture() {
    if lab::skip() {
        return;
    }
    let lab = Lab::new(true);
    let promiscuity = || {
        let out = lab::run(&["ip", "-d", "link", "show", &lab.host]);
        let at = out.find("promiscuity ").expect("ip -d shows promiscuity");
        out[at + 12..]
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(promiscuity(), "0");
    let capture = Capture::open(&Config::new(&lab.host)).unwrap();
    assert_eq!(promiscuity(), "1");
    drop(capture);
    assert_eq!(promiscuity(), "0");
    let capture = Capture::open(&Config::new(&lab.host).promiscuous(false)).unwrap();
    assert_eq!(promiscuity(), "0");
    drop(capture);
}
