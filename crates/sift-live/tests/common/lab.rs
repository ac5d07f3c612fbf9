//! A throw-away network: a namespace holding one end of a veth pair, the other end in the test's
//! own namespace, IPv6 off on both and ARP answers off on our end, so the kernel sends nothing by itself, and a raw sender that
//! injects frames from inside the namespace. Everything is removed on drop, also when a test
//! fails.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Runs a command, panicking with its output if it fails.
pub fn run(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether the namespace tests are to be skipped (`SIFT_SKIP_NETNS_TESTS=1`); otherwise, lacking
/// root is a failure, not a silent pass.
pub fn skip() -> bool {
    if std::env::var("SIFT_SKIP_NETNS_TESTS").as_deref() == Ok("1") {
        eprintln!("SIFT_SKIP_NETNS_TESTS=1: skipping a network-namespace test");
        return true;
    }
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the live-capture tests create network namespaces and need root \
         (set SIFT_SKIP_NETNS_TESTS=1 to skip them)"
    );
    false
}

/// A namespace with a veth pair: `host` in our namespace, `peer` inside `ns`.
pub struct Lab {
    pub ns: String,
    pub host: String,
    pub peer: String,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

impl Lab {
    /// Creates the namespace and the pair, both ends up. `up = false` leaves them down.
    pub fn new(up: bool) -> Lab {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let lab = Lab {
            ns: format!("sift-test-{pid}-{n}"),
            host: format!("sl{}h{n}", pid % 1_000_000),
            peer: format!("sl{}p{n}", pid % 1_000_000),
        };
        // The guard exists before the first command, so a failure below still cleans up.
        run(&["ip", "netns", "add", &lab.ns]);
        run(&[
            "ip", "link", "add", &lab.host, "type", "veth", "peer", "name", &lab.peer, "netns",
            &lab.ns,
        ]);
        run(&[
            "sysctl",
            "-q",
            "-w",
            &format!("net.ipv6.conf.{}.disable_ipv6=1", lab.host),
        ]);
        // The host may own the test frames' addresses (on another interface): never answer ARP.
        run(&[
            "sysctl",
            "-q",
            "-w",
            &format!("net.ipv4.conf.{}.arp_ignore=8", lab.host),
        ]);
        run(&[
            "ip",
            "netns",
            "exec",
            &lab.ns,
            "sysctl",
            "-q",
            "-w",
            &format!("net.ipv6.conf.{}.disable_ipv6=1", lab.peer),
        ]);
        if up {
            run(&["ip", "link", "set", &lab.host, "up"]);
            run(&["ip", "-n", &lab.ns, "link", "set", &lab.peer, "up"]);
        }
        lab
    }

    /// Runs `f` on a thread that has entered the namespace.
    pub fn inside<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/var/run/netns/{}", self.ns);
        std::thread::spawn(move || {
            let ns = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // SAFETY: a valid namespace descriptor; setns only changes this thread's namespace.
            let ret = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(ret, 0, "setns: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("thread inside the namespace panicked")
    }

    /// Sends `frames` out of the namespace's end, in order, from one CPU (so that the receiving
    /// side's per-CPU backlog keeps them in order).
    pub fn inject(&self, frames: &[Vec<u8>]) {
        let frames = frames.to_vec();
        let peer = self.peer.clone();
        self.inside(move || send_frames(&peer, &frames));
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Deleting the namespace destroys the pair only asynchronously; delete it explicitly.
        let _ = Command::new("ip")
            .args(["link", "del", &self.host])
            .output();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
    }
}

/// Pins the calling thread to the CPU it runs on.
fn pin_to_current_cpu() {
    // SAFETY: sched_getcpu has no preconditions; the cpu_set_t is zeroed, then one bit set within
    // its size, and passed with its exact size.
    unsafe {
        let cpu = libc::sched_getcpu();
        assert!(
            cpu >= 0,
            "sched_getcpu: {}",
            std::io::Error::last_os_error()
        );
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        let ret = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        assert_eq!(
            ret,
            0,
            "sched_setaffinity: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Sends raw frames on `iface` (in the calling thread's namespace) with an `AF_PACKET` socket of
/// protocol 0, which receives nothing itself.
fn send_frames(iface: &str, frames: &[Vec<u8>]) {
    pin_to_current_cpu();
    let name = std::ffi::CString::new(iface).unwrap();
    // SAFETY: plain system calls; `name` is NUL-terminated; the socket is closed below.
    let (fd, ifindex) = unsafe {
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        (fd, libc::if_nametoindex(name.as_ptr()))
    };
    assert_ne!(ifindex, 0, "{iface}: {}", std::io::Error::last_os_error());
    // SAFETY: all-zero bytes are a valid sockaddr_ll.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_ifindex = ifindex as i32;
    addr.sll_halen = 6;
    for frame in frames {
        addr.sll_addr[..6].copy_from_slice(&frame[..6]);
        // SAFETY: `frame` and `addr` are valid for reads of the lengths given.
        let sent = unsafe {
            libc::sendto(
                fd,
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(
            sent,
            frame.len() as isize,
            "sendto: {}",
            std::io::Error::last_os_error()
        );
    }
    // SAFETY: `fd` is ours and not used afterwards.
    unsafe { libc::close(fd) };
}
