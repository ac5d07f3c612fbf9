//! Why opening or reading a live capture failed.

use std::fmt;
use std::io;

use sift_bpf::ValidationError;

use crate::linktype::hardware_type_name;

/// The step of setting up or running a capture that a system call failed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// `socket(AF_PACKET, SOCK_RAW, 0)`.
    Socket,
    /// `SO_ATTACH_FILTER`.
    AttachFilter,
    /// `PACKET_VERSION` = `TPACKET_V3`.
    SetVersion,
    /// `PACKET_RX_RING`.
    RequestRing,
    /// `mmap` of the ring.
    MapRing,
    /// `bind` to the interface.
    Bind,
    /// `getsockname` for the interface's hardware type.
    HardwareType,
    /// `PACKET_ADD_MEMBERSHIP` with `PACKET_MR_PROMISC`.
    Promiscuous,
    /// `PACKET_STATISTICS`.
    Statistics,
    /// `eventfd` for the stop handle.
    StopEvent,
    /// `poll` while waiting for a block.
    Wait,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::Socket => "creating the packet socket",
            Step::AttachFilter => "attaching the filter",
            Step::SetVersion => "selecting TPACKET_V3",
            Step::RequestRing => "setting up the receive ring",
            Step::MapRing => "mapping the receive ring",
            Step::Bind => "binding to the interface",
            Step::HardwareType => "reading the interface's hardware type",
            Step::Promiscuous => "enabling promiscuous mode",
            Step::Statistics => "reading the socket's statistics",
            Step::StopEvent => "creating the stop event",
            Step::Wait => "waiting for packets",
        })
    }
}

/// Why a capture could not be opened or continued.
#[derive(Debug)]
pub enum Error {
    /// The interface name is empty, longer than 15 bytes or contains a NUL byte.
    InterfaceName {
        /// The name given.
        name: String,
    },
    /// No interface of that name in the calling thread's network namespace.
    NoSuchInterface {
        /// The name given.
        name: String,
        /// What `if_nametoindex` said.
        source: io::Error,
    },
    /// The interface's hardware type has no link type this crate can capture (see
    /// [`crate::linktype`]).
    UnsupportedHardware {
        /// The interface.
        interface: String,
        /// Its `ARPHRD_*` value.
        arphrd: u16,
    },
    /// The filter is not a program the kernel accepts (`Dialect::Linux`); every violation with
    /// its instruction index.
    InvalidFilter(ValidationError),
    /// The ring geometry does not fit the kernel's 32-bit fields.
    RingTooLarge {
        /// Bytes per block.
        block_size: usize,
        /// Number of blocks.
        block_count: usize,
    },
    /// A system call failed.
    System {
        /// What was being done.
        step: Step,
        /// The system call's error.
        source: io::Error,
    },
    /// The socket reported an error while capturing (the interface went down or was removed).
    Interface {
        /// The interface.
        interface: String,
        /// The socket's error (`ENETDOWN`, `ENODEV`, ...).
        source: io::Error,
    },
}

impl Error {
    pub(crate) fn system(step: Step) -> impl FnOnce(io::Error) -> Error {
        move |source| Error::System { step, source }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InterfaceName { name } => write!(
                f,
                "{name:?} is not an interface name (1 to 15 bytes, no NUL)"
            ),
            Error::NoSuchInterface { name, source } => {
                write!(f, "no interface {name:?}: {source}")
            }
            Error::UnsupportedHardware { interface, arphrd } => {
                write!(f, "cannot capture on {interface}: hardware type {arphrd}")?;
                if let Some(name) = hardware_type_name(*arphrd) {
                    write!(f, " ({name})")?;
                }
                f.write_str(" has no link type a raw packet socket can deliver")
            }
            Error::InvalidFilter(e) => write!(f, "the kernel would refuse the filter: {e}"),
            Error::RingTooLarge {
                block_size,
                block_count,
            } => write!(
                f,
                "ring of {block_count} blocks of {block_size} bytes is too large"
            ),
            Error::System { step, source } => write!(f, "{step}: {source}"),
            Error::Interface { interface, source } => write!(f, "{interface}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::NoSuchInterface { source, .. }
            | Error::System { source, .. }
            | Error::Interface { source, .. } => Some(source),
            Error::InvalidFilter(e) => Some(e),
            _ => None,
        }
    }
}
