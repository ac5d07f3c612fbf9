//! [`Capture`]: a packet socket bound to one interface, its receive ring, its kernel filter, and
//! the reading of packets out of the ring in order.
//!
//! Opening follows the order that keeps unwanted packets out: the socket is created with
//! protocol 0 (hooked to no traffic), a drop-everything filter is attached, the ring is set up,
//! and only then is the socket bound to the interface. Until [`Capture::set_filter`] (or
//! [`Capture::accept_all`]) replaces that filter, the kernel queues nothing.
//!
//! Replacing a filter later is atomic in the kernel, but the ring may still hold packets the old
//! filter accepted: the blocks already handed over and the one being filled. As libpcap does,
//! those blocks are then filtered again in user space with the new program (sift's interpreter,
//! identical to `bpf_filter`), so that no packet the new filter rejects is ever returned.

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};

use sift_bpf::{code, interp, validate, Dialect, Insn, Program, ValidProgram};
use sift_capture::Timestamp;

use crate::block::{Frame, Frames, BLOCK_HEADER_LEN};
use crate::config::Config;
use crate::error::{Error, Step};
use crate::linktype::{linktype_for_hardware_type, LINKTYPE_ETHERNET};
use crate::packet::{Direction, Packet};
use crate::ring::{Ring, RingLayout};
use crate::stop::Stopper;
use crate::sys;
use crate::vlan::{self, TagView};

const ARPHRD_LOOPBACK: u16 = 772;
const PACKET_OUTGOING: u8 = 4;
/// Room per packet besides its data: `tpacket3_hdr`, `sockaddr_ll`, the alignment the kernel adds
/// before the network header, and slack for link-layer headers longer than Ethernet's.
const PACKET_OVERHEAD: usize = 256;

/// Counters since the capture was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets the kernel filter accepted, including those then dropped for lack of room in the
    /// ring (libpcap's `ps_recv`: `tp_packets`, to which the kernel adds `tp_drops`).
    pub received: u64,
    /// Accepted packets dropped because the ring was full (`tp_drops`, libpcap's `ps_drop`).
    pub dropped: u64,
    /// Times the kernel found the ring full and froze the queue (`tp_freeze_q_cnt`).
    pub queue_freezes: u64,
    /// Ring blocks whose headers were malformed; their packets after the bad header were skipped.
    pub malformed_blocks: u64,
}

/// The new filter applied in user space to blocks that may hold packets an older filter accepted.
#[derive(Debug)]
struct UserlandFilter {
    program: ValidProgram,
    blocks_left: usize,
}

/// A packet located in the current block, accepted.
#[derive(Clone, Copy, Debug)]
struct Accepted {
    frame: Frame,
    /// Its captured length: of the frame as the kernel holds it, or, when `restored`, of the
    /// frame with its VLAN tag put back (already in `Capture::scratch`).
    caplen: usize,
    restored: bool,
}

/// A live capture on one interface (see the crate docs for the whole flow).
#[derive(Debug)]
pub struct Capture {
    // Field order: the mapping is dropped before the socket is closed.
    ring: Ring,
    socket: OwnedFd,
    stopper: Stopper,
    interface: String,
    ifindex: u32,
    hardware_type: u16,
    linktype: u32,
    snaplen: u32,
    /// The block to read next (or being read, when `frames` is set).
    block: usize,
    /// The packets left in `block`, once it is user-owned and its descriptor parsed.
    frames: Option<Frames>,
    /// Whether the attached filter may have let packets into the ring (false for drop-all).
    filter_accepts: bool,
    userland: Option<UserlandFilter>,
    /// The filter, for frames whose stripped VLAN tag it must see ([`TagView::Restored`]).
    tagged_filter: Option<ValidProgram>,
    stats: Stats,
    /// A frame with its VLAN tag put back.
    scratch: Vec<u8>,
}

/// The ring geometry for `config`: blocks of a power-of-two number of pages, big enough for one
/// packet of the snapshot length.
fn ring_layout(config: &Config) -> RingLayout {
    let page = sys::page_size();
    let frame_size = (config.snaplen as usize + PACKET_OVERHEAD).next_multiple_of(16);
    let need = config.block_size.max(BLOCK_HEADER_LEN + frame_size);
    let mut block_size = page;
    while block_size < need {
        block_size *= 2;
    }
    RingLayout {
        block_size,
        block_count: config.block_count,
        frame_size,
        retire_timeout_ms: config.block_timeout_ms,
    }
}

/// `ret #0`.
fn drop_all() -> [Insn; 1] {
    [Insn::stmt(code::RET | code::K, 0)]
}

impl Capture {
    /// Opens a capture on `config`'s interface (in the calling thread's network namespace). It
    /// delivers nothing until a filter is set with [`Capture::set_filter`] or
    /// [`Capture::accept_all`]; [`Capture::linktype`] says what to compile the filter for.
    pub fn open(config: &Config) -> Result<Capture, Error> {
        let name = &config.interface;
        let c_name = CString::new(name.as_str())
            .ok()
            .filter(|n| !n.as_bytes().is_empty() && n.as_bytes().len() < libc::IFNAMSIZ)
            .ok_or_else(|| Error::InterfaceName { name: name.clone() })?;
        let ifindex = sys::interface_index(&c_name).map_err(|source| Error::NoSuchInterface {
            name: name.clone(),
            source,
        })?;
        let socket = sys::packet_socket().map_err(Error::system(Step::Socket))?;
        let fd = socket.as_fd();
        sys::attach_filter(fd, &drop_all()).map_err(Error::system(Step::AttachFilter))?;
        sys::set_tpacket_v3(fd).map_err(Error::system(Step::SetVersion))?;
        let layout = ring_layout(config);
        let request = layout.request().ok_or(Error::RingTooLarge {
            block_size: layout.block_size,
            block_count: layout.block_count,
        })?;
        sys::request_rx_ring(fd, &request).map_err(Error::system(Step::RequestRing))?;
        let ring = Ring::map(fd, &layout).map_err(Error::system(Step::MapRing))?;
        sys::bind_interface(fd, ifindex).map_err(Error::system(Step::Bind))?;
        // Binding to an interface that is down succeeds but leaves ENETDOWN pending.
        if let Some(source) = sys::take_socket_error(fd).map_err(Error::system(Step::Bind))? {
            return Err(Error::Interface {
                interface: name.clone(),
                source,
            });
        }
        let hardware_type =
            sys::bound_hardware_type(fd).map_err(Error::system(Step::HardwareType))?;
        let linktype = linktype_for_hardware_type(hardware_type).ok_or_else(|| {
            Error::UnsupportedHardware {
                interface: name.clone(),
                arphrd: hardware_type,
            }
        })?;
        if config.promiscuous {
            sys::add_promiscuous_membership(fd, ifindex)
                .map_err(Error::system(Step::Promiscuous))?;
        }
        let stopper = Stopper::new().map_err(Error::system(Step::StopEvent))?;
        Ok(Capture {
            ring,
            socket,
            stopper,
            interface: name.clone(),
            ifindex,
            hardware_type,
            linktype,
            snaplen: config.snaplen,
            block: 0,
            frames: None,
            filter_accepts: false,
            userland: None,
            tagged_filter: None,
            stats: Stats::default(),
            scratch: Vec::new(),
        })
    }

    /// The `LINKTYPE_*` value of the captured frames (for the filter compiler and the pcap
    /// file header).
    pub fn linktype(&self) -> u32 {
        self.linktype
    }

    /// The interface's hardware type (`ARPHRD_*`).
    pub fn hardware_type(&self) -> u16 {
        self.hardware_type
    }

    /// The snapshot length: no packet's captured length exceeds it.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// The interface name.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Number of ring blocks and bytes per block actually used.
    pub fn ring_geometry(&self) -> (usize, usize) {
        (self.ring.block_count(), self.ring.block_size())
    }

    /// A handle that stops this capture from another thread or a signal handler.
    pub fn stopper(&self) -> Stopper {
        self.stopper.clone()
    }

    /// Runs `program` in the kernel from now on. It must pass the Linux kernel's rules
    /// (`sift_bpf::validate(program, Dialect::Linux)`; use `sift_bpf::compile_for(&ir,
    /// Dialect::Linux)` to generate one); its return value is the number of bytes kept, so compile
    /// it with this capture's snapshot length. Packets already in the ring that the previous
    /// filter accepted are filtered again with `program` before they are returned. Frames whose
    /// VLAN tag the kernel stripped are filtered without it ([`TagView::Stripped`]).
    pub fn set_filter(&mut self, program: &Program) -> Result<(), Error> {
        self.set_filter_with(program, TagView::Stripped)
    }

    /// [`Capture::set_filter`], choosing what the filter sees of frames whose VLAN tag the
    /// kernel stripped: use [`TagView::Restored`] for filters that test `vlan`. On link types
    /// other than Ethernet no tag is put back, and both views are the same.
    pub fn set_filter_with(&mut self, program: &Program, view: TagView) -> Result<(), Error> {
        let valid = validate(program, Dialect::Linux).map_err(Error::InvalidFilter)?;
        let restore = view == TagView::Restored && self.linktype == LINKTYPE_ETHERNET;
        let kernel = if restore {
            validate(&vlan::kernel_program(program, self.snaplen), Dialect::Linux)
                .map_err(Error::InvalidFilter)?
        } else {
            valid.clone()
        };
        sys::attach_filter(self.socket.as_fd(), kernel.insns())
            .map_err(Error::system(Step::AttachFilter))?;
        self.tagged_filter = restore.then(|| valid.clone());
        if self.filter_accepts {
            // Every block not owned by the kernel holds old packets, and so may the one it is
            // filling; blocks after that only receive packets the new filter accepted.
            let held = (0..self.ring.block_count())
                .filter(|&b| self.ring.status(b) != libc::TP_STATUS_KERNEL)
                .count();
            self.userland = Some(UserlandFilter {
                program: valid,
                blocks_left: (held + 1).min(self.ring.block_count()),
            });
        }
        self.filter_accepts = true;
        Ok(())
    }

    /// Accepts every packet (a kernel filter returning the snapshot length).
    pub fn accept_all(&mut self) -> Result<(), Error> {
        self.set_filter(&Program(vec![Insn::stmt(
            code::RET | code::K,
            self.snaplen,
        )]))
    }

    /// The counters since the capture was opened.
    pub fn stats(&mut self) -> Result<Stats, Error> {
        let (packets, drops, freezes) =
            sys::packet_statistics(self.socket.as_fd()).map_err(Error::system(Step::Statistics))?;
        // The kernel resets its counters on every read; keep running totals.
        self.stats.received += u64::from(packets);
        self.stats.dropped += u64::from(drops);
        self.stats.queue_freezes += u64::from(freezes);
        Ok(self.stats)
    }

    /// The next packet, waiting for one if needed; `Ok(None)` once the capture is stopped (see
    /// [`Capture::stopper`]). Packets come in the order the kernel queued them. A ring block is
    /// given back to the kernel as soon as its last packet has been returned and this is called
    /// again.
    pub fn next_packet(&mut self) -> Result<Option<Packet<'_>>, Error> {
        match self.advance()? {
            Some(accepted) => Ok(Some(self.packet(accepted))),
            None => Ok(None),
        }
    }

    /// Moves to the next packet to return.
    fn advance(&mut self) -> Result<Option<Accepted>, Error> {
        loop {
            if self.stopper.is_stopped() {
                return Ok(None);
            }
            if let Some(frames) = &mut self.frames {
                let block = self.ring.block(self.block);
                match frames.next_frame(block) {
                    Some(Ok(frame)) => {
                        if let Some(accepted) = self.accept(frame) {
                            return Ok(Some(accepted));
                        }
                    }
                    Some(Err(_)) => self.stats.malformed_blocks += 1,
                    None => self.release_block(),
                }
                continue;
            }
            if self.ring.is_user_owned(self.block) {
                match Frames::new(self.ring.block(self.block)) {
                    Ok(frames) => self.frames = Some(frames),
                    Err(_) => {
                        self.stats.malformed_blocks += 1;
                        self.release_block();
                    }
                }
                continue;
            }
            self.wait()?;
        }
    }

    /// Whether to return `frame`, and how many of its bytes. A frame whose VLAN tag the kernel
    /// stripped gets it back in `scratch` here when the filter must see it.
    fn accept(&mut self, frame: Frame) -> Option<Accepted> {
        // On loopback every packet is seen twice, going out and coming in; libpcap keeps the
        // incoming copy.
        if self.hardware_type == ARPHRD_LOOPBACK && frame.pkt_type == Some(PACKET_OUTGOING) {
            return None;
        }
        let data = frame.data(self.ring.block(self.block));
        if let (Some(program), Some(tag)) = (&self.tagged_filter, vlan::stripped_tag(&frame)) {
            if vlan::restore(data, tag, &mut self.scratch) {
                let wire_len = frame.len.saturating_add(4);
                let keep = interp::run(program, &self.scratch, wire_len) as usize;
                self.scratch.truncate(keep);
                return (keep > 0).then_some(Accepted {
                    frame,
                    caplen: self.scratch.len(),
                    restored: true,
                });
            }
        }
        let mut caplen = frame.snaplen as usize;
        if let Some(userland) = &self.userland {
            let keep = interp::run(&userland.program, data, frame.len);
            if keep == 0 {
                return None;
            }
            caplen = caplen.min(keep as usize);
        }
        Some(Accepted {
            frame,
            caplen,
            restored: false,
        })
    }

    /// The packet for an accepted frame, with its VLAN tag put back where the kernel stripped
    /// it (as libpcap does, so that files match tcpdump's).
    fn packet(&mut self, accepted: Accepted) -> Packet<'_> {
        let Accepted {
            frame,
            caplen,
            restored,
        } = accepted;
        let timestamp = Timestamp::new(i64::from(frame.sec), frame.nsec);
        let direction = Direction::from_pkt_type(frame.pkt_type);
        let snaplen = self.snaplen as usize;
        // A tag the filter did not see goes back now, in front of the bytes it kept.
        let restored = restored
            || self.linktype == LINKTYPE_ETHERNET
                && vlan::stripped_tag(&frame).is_some_and(|tag| {
                    let kept = &frame.data(self.ring.block(self.block))[..caplen];
                    vlan::restore(kept, tag, &mut self.scratch)
                });
        if restored {
            self.scratch.truncate(snaplen);
            return Packet {
                data: &self.scratch,
                wire_len: frame.len.saturating_add(4),
                timestamp,
                direction,
            };
        }
        let block = self.ring.block(self.block);
        let data = &frame.data(block)[..caplen.min(snaplen)];
        Packet {
            data,
            wire_len: frame.len,
            timestamp,
            direction,
        }
    }

    /// Gives the current block back to the kernel and moves to the next.
    fn release_block(&mut self) {
        self.frames = None;
        self.ring.release(self.block);
        self.block = (self.block + 1) % self.ring.block_count();
        if let Some(userland) = &mut self.userland {
            userland.blocks_left -= 1;
            if userland.blocks_left == 0 {
                self.userland = None;
            }
        }
    }

    /// Sleeps until the socket has a block ready, reports an error, or the capture is stopped.
    fn wait(&mut self) -> Result<(), Error> {
        let ready = sys::poll_two(self.socket.as_fd(), self.stopper.wake_fd(), -1)
            .map_err(Error::system(Step::Wait))?;
        if ready.first & (libc::POLLERR | libc::POLLNVAL) != 0 {
            let pending =
                sys::take_socket_error(self.socket.as_fd()).map_err(Error::system(Step::Wait))?;
            if let Some(source) = pending {
                return Err(Error::Interface {
                    interface: self.interface.clone(),
                    source,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_can_move_to_another_thread_and_stoppers_can_be_shared() {
        fn send<T: Send>() {}
        fn send_sync<T: Send + Sync>() {}
        send::<Capture>();
        send_sync::<Stopper>();
    }

    #[test]
    fn ring_blocks_fit_a_whole_packet_of_the_snapshot_length() {
        let layout = ring_layout(&Config::new("x").buffer(4096, 2).snaplen(262_144));
        assert!(layout.block_size.is_power_of_two());
        assert!(layout.block_size >= BLOCK_HEADER_LEN + 262_144 + PACKET_OVERHEAD);
        assert!(layout.frame_size.is_multiple_of(16) && layout.frame_size <= layout.block_size);
        let small = ring_layout(&Config::new("x").buffer(1, 3).snaplen(64));
        assert_eq!((small.block_size, small.block_count), (sys::page_size(), 3));
        assert!(small.request().is_some());
    }
}
