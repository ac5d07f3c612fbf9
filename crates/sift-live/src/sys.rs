//! The system calls live capture needs, as small safe functions over file descriptors.
//!
//! This is one of the two modules allowed to use `unsafe` (the other is [`crate::ring`]): every
//! function here passes pointers to properly sized, initialised local values to one system call
//! and turns its `-1`/`errno` convention into an [`io::Error`]. Nothing here keeps a pointer after
//! the call returns.

use std::ffi::CStr;
use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use sift_bpf::Insn;

/// The last OS error if `ret` is -1.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `setsockopt` with a plain-data option value.
fn set_option<T: Copy>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points to a live, initialised `T` of exactly the length passed; the kernel
    // only reads it during the call.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// A packet socket that receives nothing yet: protocol 0 hooks it to no traffic until
/// [`bind_interface`] names a protocol, so no packet can enter before the filter is in place.
pub fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call without pointers.
    let fd =
        check(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` was just returned by `socket` and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Attaches a classic BPF program (`SO_ATTACH_FILTER`), replacing the previous one atomically.
pub fn attach_filter(fd: BorrowedFd<'_>, insns: &[Insn]) -> io::Result<()> {
    let mut filter: Vec<libc::sock_filter> = insns
        .iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect();
    let len = u16::try_from(filter.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "filter too long"))?;
    let prog = libc::sock_fprog {
        len,
        filter: filter.as_mut_ptr(),
    };
    // `prog.filter` points into `filter`, which outlives the call; the kernel copies it.
    set_option(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog)
}

/// Selects the `TPACKET_V3` ring format.
pub fn set_tpacket_v3(fd: BorrowedFd<'_>) -> io::Result<()> {
    let version = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
    set_option(fd, libc::SOL_PACKET, libc::PACKET_VERSION, &version)
}

/// Asks the kernel for a receive ring (`PACKET_RX_RING`).
pub fn request_rx_ring(fd: BorrowedFd<'_>, req: &libc::tpacket_req3) -> io::Result<()> {
    set_option(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, req)
}

/// The index of the interface called `name` in the calling thread's network namespace.
pub fn interface_index(name: &CStr) -> io::Result<u32> {
    // SAFETY: `name` is a NUL-terminated string that lives through the call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(index)
    }
}

/// Binds the socket to all protocols (`ETH_P_ALL`) on one interface; packets start flowing.
pub fn bind_interface(fd: BorrowedFd<'_>, ifindex: u32) -> io::Result<()> {
    // SAFETY: `sockaddr_ll` is plain data for which all-zero bytes are a valid value.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    addr.sll_ifindex = ifindex as libc::c_int;
    // SAFETY: `addr` is an initialised `sockaddr_ll` of the length passed.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// The hardware type (`ARPHRD_*`) of the interface a packet socket is bound to.
pub fn bound_hardware_type(fd: BorrowedFd<'_>) -> io::Result<u16> {
    // SAFETY: all-zero bytes are a valid `sockaddr_ll`.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: `addr` and `len` are valid for writes; `len` holds the buffer's size.
    check(unsafe {
        libc::getsockname(
            fd.as_raw_fd(),
            (&mut addr as *mut libc::sockaddr_ll).cast(),
            &mut len,
        )
    })?;
    Ok(addr.sll_hatype)
}

/// Puts the interface in promiscuous mode for as long as the socket is open (the kernel counts
/// memberships, so this never turns off a mode someone else asked for).
pub fn add_promiscuous_membership(fd: BorrowedFd<'_>, ifindex: u32) -> io::Result<()> {
    let mreq = libc::packet_mreq {
        mr_ifindex: ifindex as libc::c_int,
        mr_type: libc::PACKET_MR_PROMISC as u16,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    set_option(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
}

/// The socket's counters since the previous call (`PACKET_STATISTICS` resets them):
/// `(tp_packets, tp_drops, tp_freeze_q_cnt)`.
pub fn packet_statistics(fd: BorrowedFd<'_>) -> io::Result<(u32, u32, u32)> {
    let mut stats = MaybeUninit::<libc::tpacket_stats_v3>::zeroed();
    let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
    // SAFETY: `stats` is valid for writes of `len` bytes.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            stats.as_mut_ptr().cast(),
            &mut len,
        )
    })?;
    // SAFETY: zero-initialised plain data, possibly overwritten by the kernel.
    let stats = unsafe { stats.assume_init() };
    Ok((stats.tp_packets, stats.tp_drops, stats.tp_freeze_q_cnt))
}

/// The pending error of a socket (`SO_ERROR`), which reading it clears.
pub fn take_socket_error(fd: BorrowedFd<'_>) -> io::Result<Option<io::Error>> {
    let mut err: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `err` and `len` are valid for writes; `len` holds the buffer's size.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok((err != 0).then(|| io::Error::from_raw_os_error(err)))
}

/// What [`poll_two`] saw on each descriptor (`revents`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Readiness {
    pub first: libc::c_short,
}

/// Waits until one of two descriptors is readable or in error, or `timeout_ms` passes (-1:
/// forever). An interrupted wait (`EINTR`) returns empty readiness so the caller re-checks its
/// state, which is what lets a signal handler stop a capture.
pub fn poll_two(
    first: BorrowedFd<'_>,
    second: BorrowedFd<'_>,
    timeout_ms: libc::c_int,
) -> io::Result<Readiness> {
    let mut fds = [
        libc::pollfd {
            fd: first.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: second.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    // SAFETY: `fds` is an array of two initialised `pollfd`s, valid for the call.
    let ret = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) };
    if ret == -1 {
        let err = io::Error::last_os_error();
        return if err.kind() == io::ErrorKind::Interrupted {
            Ok(Readiness::default())
        } else {
            Err(err)
        };
    }
    // The second descriptor (the stop event) needs no report: the caller checks its flag.
    Ok(Readiness {
        first: fds[0].revents,
    })
}

/// A non-blocking event counter (`eventfd`) used to wake a waiting capture.
pub fn event_fd() -> io::Result<OwnedFd> {
    // SAFETY: plain system call without pointers.
    let fd = check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
    // SAFETY: `fd` was just returned by `eventfd` and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds 1 to an event counter. Only `write(2)`: safe to call from a signal handler. A full
/// counter (`EAGAIN`) already wakes every poller, so errors are ignored.
pub fn signal_event(fd: BorrowedFd<'_>) {
    let one: u64 = 1;
    // SAFETY: `one` is 8 initialised bytes, as an eventfd write requires.
    let _ = unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// The system's page size.
pub fn page_size() -> usize {
    // SAFETY: plain system call without pointers.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|&s| s > 0)
        .unwrap_or(4096)
}
