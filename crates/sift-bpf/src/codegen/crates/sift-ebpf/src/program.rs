//! What code generation produces: the program type, its verdicts, and the instructions.

use std::fmt;

use crate::insn::Insn;

/// The kind of kernel program, which decides how packets are read and what the return value
/// means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProgramType {
    /// `BPF_PROG_TYPE_SOCKET_FILTER`: attached to a socket (`SO_ATTACH_BPF`), sees the packet
    /// from `skb->data` (the link-layer header on `AF_PACKET` raw sockets, as libpcap uses them)
    /// and returns the number of bytes to keep, 0 to drop, like classic BPF.
    SocketFilter,
    /// `BPF_PROG_TYPE_XDP`: runs on the driver's frame; returns an XDP action.
    Xdp,
    /// `BPF_PROG_TYPE_SCHED_CLS`: a tc classifier in direct-action mode; returns a `TC_ACT_*`.
    SchedCls,
}

impl ProgramType {
    pub const ALL: [ProgramType; 3] = [
        ProgramType::SocketFilter,
        ProgramType::Xdp,
        ProgramType::SchedCls,
    ];

    /// The kernel's `enum bpf_prog_type` number.
    pub fn kernel_type(self) -> u32 {
        match self {
            ProgramType::SocketFilter => 1,
            ProgramType::SchedCls => 3,
            ProgramType::Xdp => 6,
        }
    }

    /// The ELF section name libbpf (and iproute2) associate with the type.
    pub fn section_name(self) -> &'static str {
        match self {
            ProgramType::SocketFilter => "socket",
            ProgramType::Xdp => "xdp",
            ProgramType::SchedCls => "tc",
        }
    }

    /// The name used on command lines (`socket`, `xdp`, `tc`).
    pub fn name(self) -> &'static str {
        match self {
            ProgramType::SocketFilter => "socket",
            ProgramType::Xdp => "xdp",
            ProgramType::SchedCls => "tc",
        }
    }

    /// Parses `socket`, `xdp` or `tc` (also `sched_cls`, `classifier`).
    pub fn from_name(name: &str) -> Option<ProgramType> {
        match name {
            "socket" | "socket_filter" => Some(ProgramType::SocketFilter),
            "xdp" => Some(ProgramType::Xdp),
            "tc" | "sched_cls" | "classifier" => Some(ProgramType::SchedCls),
            _ => None,
        }
    }
}

impl fmt::Display for ProgramType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `XDP_DROP`.
pub const XDP_DROP: u32 = 1;
/// `XDP_PASS`.
pub const XDP_PASS: u32 = 2;
/// `TC_ACT_OK`.
pub const TC_ACT_OK: u32 = 0;
/// `TC_ACT_SHOT`.
pub const TC_ACT_SHOT: u32 = 2;

/// How a program is generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    pub program_type: ProgramType,
    /// XDP and tc: the return value when the filter matches (default `XDP_PASS`/`TC_ACT_OK`).
    /// Ignored by socket filters, which return the filter's result.
    pub on_match: u32,
    /// XDP and tc: the return value when it does not (default `XDP_DROP`/`TC_ACT_SHOT`).
    pub on_no_match: u32,
}

impl Options {
    /// The defaults for a program type: matching packets pass, the others are dropped.
    pub fn new(program_type: ProgramType) -> Options {
        let (on_match, on_no_match) = match program_type {
            ProgramType::SocketFilter => (0, 0),
            ProgramType::Xdp => (XDP_PASS, XDP_DROP),
            ProgramType::SchedCls => (TC_ACT_OK, TC_ACT_SHOT),
        };
        Options {
            program_type,
            on_match,
            on_no_match,
        }
    }
}

/// A generated eBPF program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub program_type: ProgramType,
    pub insns: Vec<Insn>,
}

impl Program {
    /// The instructions in the kernel's binary form (8 bytes each, little-endian).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.insns.iter().flat_map(|i| i.encode()).collect()
    }

    pub fn len(&self) -> usize {
        self.insns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }
}
