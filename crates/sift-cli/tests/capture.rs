//! `sift capture` end to end: a network namespace with a veth pair, UDP datagrams sent into it
//! from outside, captured inside with a kernel filter. Needs root (CI runs as root); set
//! SIFT_SKIP_NETNS_TESTS=1 to skip where namespaces are unavailable.

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A namespace `ns` holding `inner`, with `outer` on the host side; removed on drop.
struct Netns {
    ns: String,
    outer: String,
    inner: String,
}

impl Netns {
    fn new() -> Netns {
        let id = std::process::id() % 100_000;
        let n = Netns {
            ns: format!("sift-cli-{id}"),
            outer: format!("scli{id}a"),
            inner: format!("scli{id}b"),
        };
        let inner = &n.inner;
        let ok = ip(&["netns", "add", &n.ns])
            && ip(&[
                "link", "add", &n.outer, "type", "veth", "peer", "name", inner,
            ])
            && ip(&["link", "set", inner, "netns", &n.ns])
            && ip(&["addr", "add", "10.213.0.1/24", "dev", &n.outer])
            && ip(&["link", "set", &n.outer, "up"])
            && ip(&["-n", &n.ns, "addr", "add", "10.213.0.2/24", "dev", inner])
            && ip(&["-n", &n.ns, "link", "set", inner, "up"]);
        assert!(
            ok,
            "cannot create a network namespace with a veth pair (root needed?)"
        );
        n
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        ip(&["link", "del", &self.outer]);
        ip(&["netns", "del", &self.ns]);
    }
}

fn send_udp(port: u16, payload: &str) {
    let s = std::net::UdpSocket::bind("10.213.0.1:0").unwrap();
    s.send_to(payload.as_bytes(), ("10.213.0.2", port)).unwrap();
}

/// Runs `sift capture ARGS -c 3 -w FILE FILTER` in a new namespace while `send(i)` sends the
/// `i`th round of datagrams every 50 ms; the captured UDP payloads. `None` when namespaces
/// are unavailable (SIFT_SKIP_NETNS_TESTS set).
fn capture_three(args: &[&str], filter: &str, mut send: impl FnMut(usize)) -> Option<Vec<String>> {
    if std::env::var_os("SIFT_SKIP_NETNS_TESTS").is_some() {
        eprintln!("SKIPPED: SIFT_SKIP_NETNS_TESTS is set");
        return None;
    }
    // One namespace at a time: they share names and addresses.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let net = Netns::new();
    let out = std::env::temp_dir().join(format!("sift-capture-{}.pcap", net.ns));
    let mut child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &net.ns,
            env!("CARGO_BIN_EXE_sift"),
            "capture",
        ])
        .args(args)
        .args(["-i", &net.inner, "-c", "3", "-w", out.to_str().unwrap()])
        .arg(filter)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the capture is listening (it says so on standard error).
    let mut stderr = child.stderr.take().unwrap();
    let mut banner = [0u8; 20];
    std::io::Read::read_exact(&mut stderr, &mut banner).unwrap();
    assert!(banner.starts_with(b"sift: listening"), "{banner:?}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut i = 0;
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "capture did not stop after -c 3");
        send(i);
        i += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(child.wait().unwrap().success());
    let mut reader = sift_capture::CaptureReader::open(&out).unwrap();
    let mut payloads = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        assert_eq!(r.data.len() as u32, r.wire_len);
        // Ethernet 14 + IPv4 20 + UDP 8.
        assert_eq!(&r.data[36..38], &7777u16.to_be_bytes());
        payloads.push(String::from_utf8_lossy(&r.data[42..]).into_owned());
    }
    std::fs::remove_file(&out).ok();
    Some(payloads)
}

#[test]
fn captures_exactly_the_matching_packets() {
    // Other ports are filtered out in the kernel; the three on 7777 are kept, in order.
    let Some(payloads) = capture_three(&[], "udp dst port 7777", |i| {
        send_udp(7778, "other port");
        send_udp(7777, &format!("datagram {i}"));
    }) else {
        return;
    };
    assert_eq!(payloads.len(), 3, "{payloads:?}");
    // Every datagram sent after the banner is captured: the first three, in order.
    for (k, p) in payloads.iter().enumerate() {
        assert_eq!(p, &format!("datagram {k}"));
    }
}

/// `udp[100] & 0 = 0` holds for every UDP datagram once libpcap's optimizer has folded it
/// (the load is deleted), and with `-O` only for those with 101 bytes after the UDP header's
/// start (the load past a shorter packet's end rejects it, in the kernel too).
#[test]
fn a_bare_o_keeps_the_loads_libpcaps_optimizer_deletes() {
    const FILTER: &str = "udp dst port 7777 and udp[100] & 0 = 0";
    let long = |i: usize| format!("long {i} {}", "x".repeat(100));
    let send = |i: usize| {
        send_udp(7777, &format!("short {i}"));
        send_udp(7777, &long(i));
    };
    let Some(optimized) = capture_three(&[], FILTER, send) else {
        return;
    };
    assert_eq!(optimized, ["short 0", &long(0), "short 1"]);
    let unoptimized = capture_three(&["-O"], FILTER, send).unwrap();
    assert_eq!(unoptimized, [long(0), long(1), long(2)]);
}
