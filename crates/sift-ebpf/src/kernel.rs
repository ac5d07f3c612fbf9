//! Loading programs into the running Linux kernel (`bpf(BPF_PROG_LOAD)`) and running them on
//! packets (`bpf(BPF_PROG_TEST_RUN)`), for tests and benchmarks. This module is the only place
//! in the crate with `unsafe` code: the two `bpf` system calls and taking ownership of the file
//! descriptor the first returns.
//!
//! What the kernel hands a program under `BPF_PROG_TEST_RUN` (net/bpf/test_run.c): it builds a
//! socket buffer from the data, runs `eth_type_trans` on it (which needs at least 14 bytes and
//! pulls the Ethernet header), then pushes the header back for tc programs only. A socket filter
//! therefore sees the data after its first 14 bytes, while on an `AF_PACKET` socket it sees the
//! whole frame: [`LoadedProgram::run`] prepends a dummy Ethernet header for socket filters so
//! that every program type sees exactly the packet it is given (its EtherType is a local
//! experimental one, because the kernel refuses IPv4 and IPv6 test packets whose network header
//! is incomplete). For the same reason tc programs cannot be run on such packets, and XDP and tc
//! programs need a packet of at least 14 bytes ([`test_run_accepts`]); all types refuse packets
//! larger than about a page.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::program::{Program, ProgramType};

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;

/// `union bpf_attr` as `BPF_PROG_LOAD` reads it (fields up to `expected_attach_type`; the
/// kernel requires the rest of the size it is given to be zero).
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    padding: [u64; 8],
}

/// `union bpf_attr` as `BPF_PROG_TEST_RUN` reads it.
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    padding: [u32; 9],
}

/// Why the kernel refused.
#[derive(Debug)]
pub enum KernelError {
    /// `BPF_PROG_LOAD` failed; `log` is the verifier's log (empty when the kernel gave none).
    Load { error: io::Error, log: String },
    /// `BPF_PROG_TEST_RUN` failed.
    TestRun { error: io::Error },
    /// The packet is too short for the program type (XDP and tc need an Ethernet header).
    PacketTooShort { len: usize },
}

impl KernelError {
    /// Whether the kernel refused for lack of privilege (`EPERM`), rather than because of the
    /// program or the packet.
    pub fn is_permission_denied(&self) -> bool {
        let error = match self {
            KernelError::Load { error, .. } | KernelError::TestRun { error } => error,
            KernelError::PacketTooShort { .. } => return false,
        };
        error.raw_os_error() == Some(libc::EPERM)
    }
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelError::Load { error, log } if log.is_empty() => {
                write!(f, "BPF_PROG_LOAD failed: {error}")
            }
            KernelError::Load { error, log } => {
                write!(f, "BPF_PROG_LOAD failed: {error}; verifier log:\n{log}")
            }
            KernelError::TestRun { error } => write!(f, "BPF_PROG_TEST_RUN failed: {error}"),
            KernelError::PacketTooShort { len } => write!(
                f,
                "a {len}-byte packet is shorter than the 14 bytes BPF_PROG_TEST_RUN needs"
            ),
        }
    }
}

impl std::error::Error for KernelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KernelError::Load { error, .. } | KernelError::TestRun { error } => Some(error),
            KernelError::PacketTooShort { .. } => None,
        }
    }
}

/// A program loaded into the kernel (closed on drop).
#[derive(Debug)]
pub struct LoadedProgram {
    fd: OwnedFd,
    program_type: ProgramType,
}

/// The outcome of a test run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestRun {
    /// The program's return value.
    pub retval: u32,
    /// Average run time per repetition in nanoseconds, as the kernel measured it.
    pub duration_ns: u32,
}

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, exclusively borrowed #[repr(C)] bpf_attr prefix of the given
    // size; every pointer field in it points to memory that outlives this call (checked by
    // the callers, which keep the buffers borrowed across it). The kernel reads at most `size`
    // bytes of it and writes back only fields inside it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Loads `program` (the program name is truncated to the kernel's 15 characters).
pub fn load(program: &Program, name: &str) -> Result<LoadedProgram, KernelError> {
    match load_with_log(program, name, false) {
        Ok(p) => Ok(p),
        // Again with the verifier's log, which is only worth its cost on failure.
        Err(KernelError::Load { error, .. }) if error.raw_os_error() != Some(libc::EPERM) => {
            load_with_log(program, name, true)
        }
        Err(e) => Err(e),
    }
}

fn load_with_log(
    program: &Program,
    name: &str,
    with_log: bool,
) -> Result<LoadedProgram, KernelError> {
    let code = program.to_bytes();
    let license = CString::new(crate::elf::DEFAULT_LICENSE).unwrap_or_default();
    let mut log = vec![0u8; if with_log { 1 << 22 } else { 0 }];
    let mut attr = ProgLoadAttr {
        prog_type: program.program_type.kernel_type(),
        insn_cnt: program.insns.len() as u32,
        insns: code.as_ptr() as u64,
        license: license.as_ptr() as u64,
        ..ProgLoadAttr::default()
    };
    if with_log {
        attr.log_level = 1;
        attr.log_size = log.len() as u32;
        attr.log_buf = log.as_mut_ptr() as u64;
    }
    for (dst, src) in attr.prog_name[..15].iter_mut().zip(
        name.bytes()
            .filter(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.'),
    ) {
        *dst = src;
    }
    match bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => {
            // SAFETY: on success BPF_PROG_LOAD returns a new file descriptor that nothing else
            // owns; OwnedFd takes ownership and closes it once.
            let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
            Ok(LoadedProgram {
                fd,
                program_type: program.program_type,
            })
        }
        Err(error) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            Err(KernelError::Load {
                error,
                log: String::from_utf8_lossy(&log[..end]).into_owned(),
            })
        }
    }
}

/// A dummy Ethernet header that `eth_type_trans` pulls off before a socket filter runs.
const PULLED_HEADER: [u8; 14] = [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0x88, 0xb5];

/// The Ethernet header length the test run insists on for XDP and tc.
pub const MIN_PACKET: usize = 14;

/// Whether `BPF_PROG_TEST_RUN` takes `packet` for a program of this type: XDP and tc need an
/// Ethernet header, and tc (whose socket buffer starts at the Ethernet header) an IPv4 or IPv6
/// header complete after it when the EtherType says IPv4 or IPv6 (kernel 6.x refuses the
/// packet with `EINVAL` otherwise). Sizes beyond a page are not checked here.
pub fn test_run_accepts(program_type: ProgramType, packet: &[u8]) -> bool {
    if program_type == ProgramType::SocketFilter {
        return true;
    }
    if packet.len() < MIN_PACKET {
        return false;
    }
    let network = packet.len() - MIN_PACKET;
    match (program_type, packet[12], packet[13]) {
        (ProgramType::SchedCls, 0x08, 0x00) => network >= 20,
        (ProgramType::SchedCls, 0x86, 0xdd) => network >= 40,
        _ => true,
    }
}

impl LoadedProgram {
    pub fn program_type(&self) -> ProgramType {
        self.program_type
    }

    /// Runs the program once on `packet` (the bytes the program should see from its first).
    pub fn run(&self, packet: &[u8]) -> Result<u32, KernelError> {
        self.run_repeated(packet, 1).map(|r| r.retval)
    }

    /// Runs the program `repeat` times on `packet` in the kernel (with its JIT when enabled)
    /// and returns the last return value and the average time per run.
    pub fn run_repeated(&self, packet: &[u8], repeat: u32) -> Result<TestRun, KernelError> {
        let data: std::borrow::Cow<'_, [u8]> = match self.program_type {
            ProgramType::SocketFilter => {
                let mut d = PULLED_HEADER.to_vec();
                d.extend_from_slice(packet);
                d.into()
            }
            _ if packet.len() < MIN_PACKET => {
                return Err(KernelError::PacketTooShort { len: packet.len() })
            }
            _ => packet.into(),
        };
        let mut attr = TestRunAttr {
            prog_fd: self.fd.as_raw_fd() as u32,
            data_size_in: data.len() as u32,
            data_in: data.as_ptr() as u64,
            repeat,
            ..TestRunAttr::default()
        };
        bpf(BPF_PROG_TEST_RUN, &mut attr).map_err(|error| KernelError::TestRun { error })?;
        Ok(TestRun {
            retval: attr.retval,
            duration_ns: attr.duration,
        })
    }
}

/// Whether the kernel's JIT is enabled (`/proc/sys/net/core/bpf_jit_enable` is 1 or 2), or
/// `None` when that file cannot be read.
pub fn jit_enabled() -> Option<bool> {
    let s = std::fs::read_to_string("/proc/sys/net/core/bpf_jit_enable").ok()?;
    Some(s.trim() != "0")
}
