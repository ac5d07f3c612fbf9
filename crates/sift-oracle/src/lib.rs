//! libpcap 1.10, through FFI, as sift's test oracle.
//!
//! sift's filter language must agree packet for packet with libpcap 1.10. This crate wraps the few
//! libpcap entry points needed to ask libpcap what an expression means:
//!
//! * [`Oracle`] is a libpcap handle for one link type and snapshot length, used to compile
//!   expressions with `pcap_compile`. By default it is a *savefile* handle (an empty in-memory pcap
//!   file opened with `pcap_fopen_offline`), because that is what `tcpdump -r` compiles against and
//!   libpcap's code generator differs between savefiles and `pcap_open_dead` handles (see below);
//!   [`Oracle::new_dead`] gives the `pcap_open_dead` flavour;
//! * [`Program`] is the compiled classic BPF program; [`Program::run`] evaluates it on a packet with
//!   libpcap's own interpreter (`bpf_filter`), and [`Program::instructions`] exposes the code for
//!   instruction-count comparisons;
//! * [`diff`] is an engine-agnostic differential harness that runs expressions over packets with an
//!   engine under test and with libpcap, and reports every disagreement;
//! * [`linktype`] maps libpcap DLT names (`EN10MB`, `RAW`, ...) to LINKTYPE numbers and LINKTYPE
//!   numbers to the DLT values `pcap_open_dead` expects.
//!
//! It is meant for tests and benchmarks only; it is never part of sift itself.
//!
//! # Netmask: `0` is what `tcpdump -r` uses
//!
//! `tcpdump -r FILE -w OUT EXPR` compiles with netmask `0` (it has no interface to ask). That is
//! *not* the same as [`NETMASK_UNKNOWN`] (`PCAP_NETMASK_UNKNOWN = 0xffffffff`): with the latter,
//! `ip broadcast` fails to compile ("netmask not known, so 'ip broadcast' not supported"), while
//! with `0` it compiles (and only the all-ones and all-zeroes addresses count as broadcast).
//! The differential harness uses netmask `0` and `optimize = true`, like tcpdump.
//!
//! # Savefile vs `pcap_open_dead`
//!
//! libpcap 1.10's `gencode.c` looks at whether the handle reads a file (`p->rfile != NULL`):
//!
//! * on NULL/LOOP/ENC links, `ip6` tests the BSD `AF_INET6` values 24, 28 and 30 for a savefile,
//!   but the *compiling host's* `AF_INET6` (10 on Linux) for a dead handle;
//! * `inbound`/`outbound` and `ifindex` on links without that metadata in the header (Ethernet,
//!   raw IP, ...) are rejected for savefiles ("not supported ... when reading savefiles") but compile
//!   for a dead handle on Linux (into Linux-kernel-only `SKF_AD_*` loads, which user-space
//!   `bpf_filter` treats as out of bounds).
//!
//! [`Oracle::new`] therefore opens a savefile, like `tcpdump -r`.
//!
//! # "expression rejects all packets"
//!
//! When the optimizer reduces a program to `ret #0`, libpcap 1.10 refuses it with the message
//! "expression rejects all packets" (only when optimizing). Callers usually treat that as a valid
//! filter that matches nothing, so it has its own [`OracleError::RejectsAll`] variant.
//!
//! # Thread safety
//!
//! libpcap 1.10 documents `pcap_compile` as thread-safe, but older versions were not, and
//! `bpf_image` formats into a static buffer; every call into those goes through one global mutex.
//! [`Program`] is `Send + Sync` (running it only reads the instructions).
//!
//! # Building
//!
//! `build.rs` links `-lpcap` and fails with a clear message (`apt-get install libpcap-dev`) when
//! the library is absent.

#![warn(missing_docs)]

pub mod diff;
mod ffi;
mod interp;
pub mod linktype;
pub mod raw;
pub mod scratch;

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::c_int;
use std::sync::{Mutex, MutexGuard};

pub use ffi::BpfInsn;

/// `PCAP_NETMASK_UNKNOWN`: makes `ip broadcast` fail to compile. `tcpdump -r` uses `0` instead.
pub const NETMASK_UNKNOWN: u32 = 0xffff_ffff;

/// The snapshot length tcpdump uses by default (`MAXIMUM_SNAPLEN`).
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// libpcap's message when the optimizer proves that a filter matches nothing.
pub const REJECTS_ALL_MESSAGE: &str = "expression rejects all packets";

/// Serializes every call into libpcap that touches shared state (`pcap_compile`, `bpf_image`).
static PCAP_LOCK: Mutex<()> = Mutex::new(());

fn pcap_lock() -> MutexGuard<'static, ()> {
    // A panic while holding the lock cannot leave libpcap in a bad state that we could repair,
    // and the guarded data is `()`, so poisoning is ignored.
    PCAP_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The version string of the libpcap that is linked in (e.g. `libpcap version 1.10.3 (...)`).
pub fn lib_version() -> String {
    // SAFETY: pcap_lib_version returns a pointer to a static NUL-terminated string.
    unsafe { CStr::from_ptr(ffi::pcap_lib_version()) }
        .to_string_lossy()
        .into_owned()
}

/// Why libpcap could not give a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OracleError {
    /// libpcap could not open a handle (unknown link type for a savefile, out of memory, or
    /// arguments that do not fit in a C `int`).
    Open {
        /// The LINKTYPE requested.
        linktype: u32,
        /// The snapshot length requested.
        snaplen: u32,
    },
    /// The expression contains a NUL byte, which cannot cross into C.
    InteriorNul {
        /// Byte offset of the first NUL.
        position: usize,
    },
    /// libpcap compiled the expression, and its optimizer proved that it matches no packet
    /// ("expression rejects all packets"). Usually to be treated as a filter matching nothing.
    RejectsAll,
    /// libpcap rejected the expression; the message is libpcap's (`pcap_geterr`).
    Compile {
        /// libpcap's error message, e.g. `syntax error` or `unknown host 'foo'`.
        message: String,
    },
}

impl OracleError {
    /// libpcap's message, or a description for errors that did not come from libpcap.
    pub fn message(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for OracleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OracleError::Open { linktype, snaplen } => write!(
                f,
                "libpcap could not open a handle for linktype {linktype}, snaplen {snaplen}"
            ),
            OracleError::InteriorNul { position } => {
                write!(f, "expression contains a NUL byte at offset {position}")
            }
            OracleError::RejectsAll => f.write_str(REJECTS_ALL_MESSAGE),
            OracleError::Compile { message } => f.write_str(message),
        }
    }
}

impl std::error::Error for OracleError {}

/// A libpcap handle for one link type and snapshot length, used to compile expressions.
pub struct Oracle {
    handle: *mut ffi::PcapT,
    /// Backing store of the in-memory savefile (read by libpcap through the FILE it owns).
    _savefile: Option<Box<[u8]>>,
    savefile: bool,
    linktype: u32,
    dlt: u32,
    snaplen: u32,
}

// SAFETY: the pcap_t is owned exclusively by this Oracle; it is only mutated inside
// pcap_compile/pcap_geterr, which run under the global PCAP_LOCK, and freed once in Drop.
unsafe impl Send for Oracle {}
// SAFETY: every use of the handle through &self happens while holding PCAP_LOCK.
unsafe impl Sync for Oracle {}

impl fmt::Debug for Oracle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Oracle")
            .field("linktype", &self.linktype)
            .field("dlt", &self.dlt)
            .field("snaplen", &self.snaplen)
            .finish()
    }
}

impl Oracle {
    /// Opens a savefile handle, exactly as `tcpdump -r` would have for a capture file with this
    /// `linktype` (a LINKTYPE value as found in pcap file headers, e.g. 1 for Ethernet, 101 for
    /// raw IP; libpcap maps it to its DLT value) and `snaplen`. The file is an empty pcap file in
    /// memory (`fmemopen` + `pcap_fopen_offline`).
    pub fn new(linktype: u32, snaplen: u32) -> Result<Oracle, OracleError> {
        let err = OracleError::Open { linktype, snaplen };
        // LINKTYPE 12/14 are not valid in files; use LINKTYPE_RAW for them.
        let file_linktype = if matches!(linktype, 12 | 14) {
            101
        } else {
            linktype
        };
        let mut header = Vec::with_capacity(24);
        header.extend_from_slice(&0xa1b2_c3d4u32.to_ne_bytes());
        header.extend_from_slice(&2u16.to_ne_bytes());
        header.extend_from_slice(&4u16.to_ne_bytes());
        header.extend_from_slice(&0i32.to_ne_bytes());
        header.extend_from_slice(&0u32.to_ne_bytes());
        header.extend_from_slice(&snaplen.to_ne_bytes());
        header.extend_from_slice(&file_linktype.to_ne_bytes());
        let mut buf = header.into_boxed_slice();
        let mut errbuf = [0 as std::os::raw::c_char; ffi::PCAP_ERRBUF_SIZE];
        let _guard = pcap_lock();
        // SAFETY: buf is a live 24-byte buffer that the Oracle keeps (boxed, never moved in memory)
        // until after pcap_close has closed the FILE; the mode string is NUL-terminated.
        let file = unsafe { ffi::fmemopen(buf.as_mut_ptr().cast(), buf.len(), c"rb".as_ptr()) };
        if file.is_null() {
            return Err(err);
        }
        // SAFETY: file is a valid FILE*; errbuf has PCAP_ERRBUF_SIZE bytes. On success the handle
        // owns the FILE (pcap_close closes it); on failure we close it ourselves.
        let handle = unsafe { ffi::pcap_fopen_offline(file, errbuf.as_mut_ptr()) };
        if handle.is_null() {
            // SAFETY: file is still ours and open.
            unsafe { ffi::fclose(file) };
            return Err(err);
        }
        Ok(Oracle {
            handle,
            _savefile: Some(buf),
            savefile: true,
            linktype,
            dlt: linktype::linktype_to_dlt(linktype),
            snaplen,
        })
    }

    /// Opens a `pcap_open_dead` handle instead of a savefile (see the crate docs for how libpcap's
    /// code generation differs). `linktype` is converted to the DLT value `pcap_open_dead` wants.
    pub fn new_dead(linktype: u32, snaplen: u32) -> Result<Oracle, OracleError> {
        let dlt = linktype::linktype_to_dlt(linktype);
        let err = OracleError::Open { linktype, snaplen };
        let (Ok(c_dlt), Ok(c_snap)) = (c_int::try_from(dlt), c_int::try_from(snaplen)) else {
            return Err(err);
        };
        let _guard = pcap_lock();
        // SAFETY: pcap_open_dead takes plain integers and returns either NULL or a fresh handle
        // that we own and close in Drop.
        let handle = unsafe { ffi::pcap_open_dead(c_dlt, c_snap) };
        if handle.is_null() {
            return Err(err);
        }
        Ok(Oracle {
            handle,
            _savefile: None,
            savefile: false,
            linktype,
            dlt,
            snaplen,
        })
    }

    /// The LINKTYPE this oracle was opened with.
    pub fn linktype(&self) -> u32 {
        self.linktype
    }

    /// Whether this is a savefile handle ([`Oracle::new`]) rather than a dead one.
    pub fn is_savefile(&self) -> bool {
        self.savefile
    }

    /// The DLT value libpcap uses for this link type.
    pub fn dlt(&self) -> u32 {
        self.dlt
    }

    /// The snapshot length this oracle was opened with.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// Compiles `expr` with `pcap_compile(p, &prog, expr, optimize, netmask)`.
    ///
    /// Use `netmask = 0` to match `tcpdump -r` (see the crate docs). A program that the optimizer
    /// reduces to "reject everything" comes back as [`OracleError::RejectsAll`].
    pub fn compile(
        &self,
        expr: &str,
        optimize: bool,
        netmask: u32,
    ) -> Result<Program, OracleError> {
        let c_expr = CString::new(expr).map_err(|e| OracleError::InteriorNul {
            position: e.nul_position(),
        })?;
        let mut prog = ffi::BpfProgram {
            bf_len: 0,
            bf_insns: std::ptr::null_mut(),
        };
        let _guard = pcap_lock();
        // SAFETY: self.handle is a live pcap_t (closed only in Drop); prog is a valid out
        // parameter; c_expr is NUL-terminated and outlives the call. PCAP_LOCK is held.
        let rc = unsafe {
            ffi::pcap_compile(
                self.handle,
                &mut prog,
                c_expr.as_ptr(),
                c_int::from(optimize),
                netmask,
            )
        };
        if rc != 0 {
            // SAFETY: pcap_geterr returns the handle's NUL-terminated error buffer, valid while
            // the handle lives; we copy it out before releasing the lock.
            let message = unsafe { CStr::from_ptr(ffi::pcap_geterr(self.handle)) }
                .to_string_lossy()
                .into_owned();
            return Err(if message == REJECTS_ALL_MESSAGE {
                OracleError::RejectsAll
            } else {
                OracleError::Compile { message }
            });
        }
        let mut program = Program { prog, zeroed: None };
        let insns = program.instructions();
        if scratch::reads_unstored_scratch(insns) {
            program.zeroed = Some(scratch::with_zeroed_scratch(insns).into());
        }
        Ok(program)
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _guard = pcap_lock();
        // SAFETY: handle came from pcap_open_dead, is non-null, and is closed exactly once.
        unsafe { ffi::pcap_close(self.handle) };
    }
}

/// A classic BPF program compiled by libpcap; freed with `pcap_freecode` on drop.
pub struct Program {
    prog: ffi::BpfProgram,
    /// For a program that may read scratch memory it never stored, the program behind a
    /// prologue zeroing that memory (see [`scratch`]): what [`Program::run`] runs.
    zeroed: Option<Box<[BpfInsn]>>,
}

// SAFETY: the program owns its malloc'ed instruction array exclusively; nothing else refers to it,
// and freeing it from another thread is fine (plain free()).
unsafe impl Send for Program {}
// SAFETY: after construction the instructions are only read (bpf_filter, bpf_validate, slices).
unsafe impl Sync for Program {}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Program")
            .field("instructions", &self.instructions())
            .finish()
    }
}

impl Program {
    /// Runs the program on `packet` with libpcap's interpreter: `bpf_filter(insns, packet,
    /// wire_len, packet.len())`. Returns the BPF return value (0 = no match, otherwise the number of
    /// bytes to keep, normally the snapshot length).
    ///
    /// Scratch memory starts zeroed where the program could read it before storing it (libpcap
    /// leaves it uninitialized; see [`scratch`]).
    ///
    /// **May never return** for programs with backward jumps (`protochain`) on some packets; use
    /// [`Program::run_bounded`] on untrusted or generated traffic.
    pub fn run(&self, packet: &[u8], wire_len: u32) -> u32 {
        // Never claim more captured bytes than the slice holds.
        let caplen = u32::try_from(packet.len()).unwrap_or(u32::MAX);
        if let Some(zeroed) = &self.zeroed {
            // SAFETY: `zeroed` is libpcap's program behind a straight-line prologue, so it is
            // as well formed as that program; bpf_filter reads at most `caplen` bytes of
            // `packet` and checks every load against caplen.
            return unsafe { ffi::bpf_filter(zeroed.as_ptr(), packet.as_ptr(), wire_len, caplen) };
        }
        // SAFETY: bf_insns/bf_len describe the program libpcap compiled (or NULL, which
        // bpf_filter treats as "accept"); bpf_filter reads at most `caplen` bytes of `packet`,
        // which are in bounds, and checks every load against caplen.
        unsafe { ffi::bpf_filter(self.prog.bf_insns, packet.as_ptr(), wire_len, caplen) }
    }

    /// Whether the program contains a backward jump (`ja` with a negative offset), as libpcap's
    /// `protochain` code does. Such programs may not terminate in `bpf_filter` (see
    /// [`Program::run_bounded`]). Note that libpcap 1.10's `bpf_validate` accepts them (its jump
    /// check `from + k >= len` wraps around for negative offsets).
    pub fn has_backward_jumps(&self) -> bool {
        self.instructions()
            .iter()
            .any(|i| i.code == 0x05 && (i.k as i32) < 0)
    }

    /// Like [`Program::run`], but safe against non-termination: programs without backward jumps
    /// run in libpcap's `bpf_filter`; the others run in a step-bounded Rust copy of it, which
    /// returns `None` after `max_steps` instructions.
    ///
    /// libpcap 1.10's `protochain` loop over an AH header sets `X = (P[X + 1] + 2) * 4` (dropping
    /// the current offset), so crafted or mutated packets make `bpf_filter` loop forever.
    pub fn run_bounded(&self, packet: &[u8], wire_len: u32, max_steps: u64) -> Option<u32> {
        if self.has_backward_jumps() {
            interp::run(self.instructions(), packet, wire_len, max_steps)
        } else {
            Some(self.run(packet, wire_len))
        }
    }

    /// Runs the step-bounded Rust copy of `bpf_filter` regardless of the program's shape (for
    /// checking that copy against libpcap).
    pub fn run_interpreted(&self, packet: &[u8], wire_len: u32, max_steps: u64) -> Option<u32> {
        interp::run(self.instructions(), packet, wire_len, max_steps)
    }

    /// Whether the program accepts the packet (`run(..) != 0`).
    pub fn matches(&self, packet: &[u8], wire_len: u32) -> bool {
        self.run(packet, wire_len) != 0
    }

    /// The instructions, as libpcap emitted them.
    pub fn instructions(&self) -> &[BpfInsn] {
        if self.prog.bf_insns.is_null() || self.prog.bf_len == 0 {
            return &[];
        }
        // SAFETY: libpcap allocated bf_len instructions at bf_insns; they live until Drop, which
        // needs &mut self, so they outlive the returned borrow.
        unsafe { std::slice::from_raw_parts(self.prog.bf_insns, self.prog.bf_len as usize) }
    }

    /// Number of instructions.
    pub fn len(&self) -> usize {
        self.instructions().len()
    }

    /// Whether the program has no instructions (never the case for a compiled program).
    pub fn is_empty(&self) -> bool {
        self.instructions().is_empty()
    }

    /// libpcap's own verifier (`bpf_validate`).
    pub fn validate(&self) -> bool {
        let insns = self.instructions();
        let Ok(n) = c_int::try_from(insns.len()) else {
            return false;
        };
        // SAFETY: insns points to n valid instructions; bpf_validate only reads them.
        unsafe { ffi::bpf_validate(insns.as_ptr(), n) != 0 }
    }

    /// The program in `tcpdump -d` form, one `bpf_image` line per instruction.
    pub fn dump(&self) -> String {
        let insns = self.instructions();
        let mut out = String::new();
        let _guard = pcap_lock();
        for (i, insn) in insns.iter().enumerate() {
            let Ok(n) = c_int::try_from(i) else { break };
            // SAFETY: insn is a valid instruction; bpf_image formats it (n is only used for jump
            // targets) into a static buffer, which is why PCAP_LOCK is held until we copy it.
            let line = unsafe { CStr::from_ptr(ffi::bpf_image(insn, n)) };
            out.push_str(&line.to_string_lossy());
            out.push('\n');
        }
        out
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: prog was filled by a successful pcap_compile and is freed exactly once;
        // pcap_freecode resets the fields afterwards.
        unsafe { ffi::pcap_freecode(&mut self.prog) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet + IPv4 + TCP SYN 10.0.0.1:1234 -> 10.0.0.2:80.
    fn eth_ipv4_tcp() -> Vec<u8> {
        let mut p = vec![
            0x00, 0x11, 0x22, 0x33, 0x44, 0x01, // dst
            0x00, 0x11, 0x22, 0x33, 0x44, 0x00, // src
            0x08, 0x00, // IPv4
        ];
        p.extend_from_slice(&[
            0x45, 0x00, 0x00, 40, 0x00, 0x01, 0x40, 0x00, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        p.extend_from_slice(&[
            0x04, 0xd2, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
        ]);
        p
    }

    fn eth_arp() -> Vec<u8> {
        let mut p = vec![0xff; 6];
        p.extend_from_slice(&[0x00, 0x11, 0x22, 0x33, 0x44, 0x00, 0x08, 0x06]);
        p.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        p.extend_from_slice(&[0x00, 0x11, 0x22, 0x33, 0x44, 0x00, 10, 0, 0, 1]);
        p.extend_from_slice(&[0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
        p
    }

    #[test]
    fn version_is_1_10() {
        assert!(
            lib_version().contains("libpcap version 1."),
            "{}",
            lib_version()
        );
    }

    #[test]
    fn compile_and_run() {
        let o = Oracle::new(1, DEFAULT_SNAPLEN).unwrap();
        let tcp = eth_ipv4_tcp();
        let arp = eth_arp();
        let cases: &[(&str, bool, bool)] = &[
            ("", true, true),
            ("ip", true, false),
            ("arp", false, true),
            ("tcp dst port 80", true, false),
            ("tcp src port 80", false, false),
            (
                "host 10.0.0.2 and tcp[tcpflags] & tcp-syn != 0",
                true,
                false,
            ),
            ("ether broadcast", false, true),
            ("arp host 10.0.0.2", false, true),
            ("len >= 54", true, false),
            ("ip broadcast", false, false),
        ];
        for &(expr, want_tcp, want_arp) in cases {
            for optimize in [false, true] {
                let p = o.compile(expr, optimize, 0).unwrap();
                assert!(p.validate(), "{expr}");
                assert!(!p.is_empty());
                assert_eq!(p.matches(&tcp, tcp.len() as u32), want_tcp, "{expr} on tcp");
                assert_eq!(p.matches(&arp, arp.len() as u32), want_arp, "{expr} on arp");
            }
        }
        let p = o.compile("ip", true, 0).unwrap();
        assert_eq!(p.run(&tcp, tcp.len() as u32), DEFAULT_SNAPLEN);
    }

    #[test]
    fn truncated_packet_rejects_out_of_bounds_load() {
        let o = Oracle::new(1, DEFAULT_SNAPLEN).unwrap();
        let p = o.compile("tcp dst port 80", true, 0).unwrap();
        let tcp = eth_ipv4_tcp();
        assert!(p.matches(&tcp, 54));
        assert!(!p.matches(&tcp[..36], 54));
        assert!(!p.matches(&[], 54));
    }

    #[test]
    fn instructions_and_dump() {
        let o = Oracle::new(1, DEFAULT_SNAPLEN).unwrap();
        let p = o.compile("ip", true, 0).unwrap();
        let insns = p.instructions();
        assert_eq!(insns.len(), 4);
        assert_eq!(
            insns[0],
            BpfInsn {
                code: 0x28,
                jt: 0,
                jf: 0,
                k: 12
            }
        );
        assert_eq!(insns[3].code, 0x06);
        let dump = p.dump();
        assert!(dump.starts_with("(000) ldh      [12]"), "{dump}");
        assert_eq!(dump.lines().count(), 4);
    }

    #[test]
    fn errors() {
        let o = Oracle::new(1, DEFAULT_SNAPLEN).unwrap();
        match o.compile("tcp and", true, 0) {
            Err(OracleError::Compile { message }) => assert!(message.contains("syntax error")),
            other => panic!("{other:?}"),
        }
        match o.compile("port 99999", true, 0) {
            Err(OracleError::Compile { message }) => assert!(message.contains("port"), "{message}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            o.compile("ip\0", true, 0).unwrap_err(),
            OracleError::InteriorNul { position: 2 }
        );
        // PCAP_NETMASK_UNKNOWN makes `ip broadcast` fail; netmask 0 (tcpdump -r) does not.
        assert!(matches!(
            o.compile("ip broadcast", true, NETMASK_UNKNOWN),
            Err(OracleError::Compile { .. })
        ));
        assert!(o.compile("ip broadcast", true, 0).is_ok());
    }

    #[test]
    fn rejects_all_only_when_optimizing() {
        let o = Oracle::new(1, DEFAULT_SNAPLEN).unwrap();
        for expr in ["ip and not ip", "ip and arp", "tcp and udp"] {
            assert_eq!(
                o.compile(expr, true, 0).unwrap_err(),
                OracleError::RejectsAll,
                "{expr}"
            );
            let p = o.compile(expr, false, 0).unwrap();
            let tcp = eth_ipv4_tcp();
            assert!(!p.matches(&tcp, tcp.len() as u32));
        }
        assert_eq!(OracleError::RejectsAll.to_string(), REJECTS_ALL_MESSAGE);
    }

    #[test]
    fn raw_linktype_is_mapped_to_dlt_raw() {
        let o = Oracle::new(101, DEFAULT_SNAPLEN).unwrap();
        assert_eq!(o.dlt(), 12);
        assert_eq!(Oracle::new_dead(101, DEFAULT_SNAPLEN).unwrap().dlt(), 12);
        let p = o.compile("ip and tcp", true, 0).unwrap();
        let tcp = eth_ipv4_tcp();
        assert!(p.matches(&tcp[14..], 40));
        assert!(matches!(
            o.compile("ether host 00:11:22:33:44:00", true, 0),
            Err(OracleError::Compile { .. })
        ));
    }

    /// IPv6 packet: next header = destination options (len 0) -> AH whose length byte (4) makes
    /// libpcap 1.10's protochain jump back to offset 24, whose bytes chain to the same AH again.
    fn protochain_loop_packet() -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 24, 60, 64];
        p.extend_from_slice(&[0; 16]); // src
                                       // dst: at offset 24 (= (4 + 2) * 4) sits "next header 60, len 0" again -> offset 32 ...
        p.extend_from_slice(&[60, 0, 0, 0, 0, 0, 0, 0, 51, 1, 0, 0, 0, 0, 0, 0]);
        p.extend_from_slice(&[51, 0, 0, 0, 0, 0, 0, 0]); // dst opts at 40 -> AH at 48
        p.extend_from_slice(&[60, 4, 0, 0, 0, 0, 0, 0]); // AH at 48: X = (4 + 2) * 4 = 24
        p
    }

    #[test]
    fn protochain_can_loop_forever_and_run_bounded_catches_it() {
        let o = Oracle::new(229, DEFAULT_SNAPLEN).unwrap();
        let p = o.compile("ip6 protochain 6", true, 0).unwrap();
        assert!(p.has_backward_jumps());
        // bpf_validate accepts the backward jump: its `from + k >= len` check wraps around.
        assert!(p.validate());
        let pkt = protochain_loop_packet();
        assert_eq!(p.run_bounded(&pkt, pkt.len() as u32, 100_000), None);
        // A well-formed chain ends normally.
        let mut ok = vec![0x60, 0, 0, 0, 0, 28, 0, 64];
        ok.extend_from_slice(&[0; 32]);
        ok.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]);
        ok.extend_from_slice(&[0; 20]);
        assert_eq!(
            p.run_bounded(&ok, ok.len() as u32, 100_000),
            Some(DEFAULT_SNAPLEN)
        );
        assert_eq!(p.run(&ok, ok.len() as u32), DEFAULT_SNAPLEN);
        let plain = o.compile("ip6", true, 0).unwrap();
        assert!(!plain.has_backward_jumps());
    }

    #[test]
    fn interpreter_copy_agrees_with_bpf_filter() {
        let mut pairs = 0;
        for lt in [1u32, 101, 113] {
            let o = Oracle::new(lt, DEFAULT_SNAPLEN).unwrap();
            let packets = sift_testgen::generate_packets(lt, 77, 300);
            for e in sift_testgen::random_expressions(77, lt, 300) {
                for optimize in [true, false] {
                    let Ok(p) = o.compile(&e, optimize, 0) else {
                        continue;
                    };
                    if p.has_backward_jumps() {
                        continue;
                    }
                    for pk in &packets {
                        let want = p.run(&pk.data, pk.wire_len);
                        let got = p.run_interpreted(&pk.data, pk.wire_len, 1_000_000);
                        assert_eq!(
                            got,
                            Some(want),
                            "{e} (optimize={optimize}) on {:02x?}",
                            pk.data
                        );
                        pairs += 1;
                    }
                }
            }
        }
        assert!(pairs > 100_000, "{pairs}");
    }

    #[test]
    fn savefile_and_dead_handles_differ_like_libpcap_says() {
        let file = Oracle::new(108, DEFAULT_SNAPLEN).unwrap();
        let dead = Oracle::new_dead(108, DEFAULT_SNAPLEN).unwrap();
        assert!(file.is_savefile() && !dead.is_savefile());
        let mut pkt = 24u32.to_be_bytes().to_vec();
        pkt.extend_from_slice(&[0x60, 0, 0, 0, 0, 0, 59, 64]);
        pkt.extend_from_slice(&[0; 32]);
        let n = pkt.len() as u32;
        assert!(file.compile("ip6", true, 0).unwrap().matches(&pkt, n));
        assert!(!dead.compile("ip6", true, 0).unwrap().matches(&pkt, n));
        let eth_file = Oracle::new(1, DEFAULT_SNAPLEN).unwrap();
        let eth_dead = Oracle::new_dead(1, DEFAULT_SNAPLEN).unwrap();
        for expr in ["inbound", "ifindex 1"] {
            assert!(
                matches!(
                    eth_file.compile(expr, true, 0),
                    Err(OracleError::Compile { .. })
                ),
                "{expr}"
            );
            assert!(eth_dead.compile(expr, true, 0).is_ok(), "{expr}");
        }
        // On SLL the packet type is in the header: fine either way.
        let sll_file = Oracle::new(113, DEFAULT_SNAPLEN).unwrap();
        assert!(sll_file.compile("inbound", true, 0).is_ok());
    }

    #[test]
    fn program_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Program>();
        assert_send_sync::<Oracle>();
        let o = Oracle::new(1, DEFAULT_SNAPLEN).unwrap();
        let p = o.compile("ip", true, 0).unwrap();
        let tcp = eth_ipv4_tcp();
        let h = std::thread::spawn(move || p.matches(&tcp, 54));
        assert!(h.join().unwrap());
    }
}
