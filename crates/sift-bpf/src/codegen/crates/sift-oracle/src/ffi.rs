//! Raw declarations of the libpcap functions the oracle uses (see `pcap/pcap.h`, `pcap/bpf.h`).

use std::os::raw::{c_char, c_int, c_uint};

/// One classic BPF instruction, laid out exactly as libpcap's `struct bpf_insn`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BpfInsn {
    /// Opcode (class | size | mode, etc.).
    pub code: u16,
    /// Jump offset if true (conditional jumps only).
    pub jt: u8,
    /// Jump offset if false (conditional jumps only).
    pub jf: u8,
    /// Generic field: constant, offset, or memory slot.
    pub k: u32,
}

/// libpcap's `struct bpf_program`.
#[repr(C)]
pub struct BpfProgram {
    pub bf_len: c_uint,
    pub bf_insns: *mut BpfInsn,
}

/// Opaque `pcap_t`.
#[repr(C)]
pub struct PcapT {
    _private: [u8; 0],
}

/// Opaque C `FILE`.
#[repr(C)]
pub struct CFile {
    _private: [u8; 0],
}

/// `PCAP_ERRBUF_SIZE`.
pub const PCAP_ERRBUF_SIZE: usize = 256;

extern "C" {
    pub fn fmemopen(buf: *mut std::os::raw::c_void, size: usize, mode: *const c_char)
        -> *mut CFile;
    pub fn fclose(f: *mut CFile) -> c_int;
    pub fn pcap_fopen_offline(f: *mut CFile, errbuf: *mut c_char) -> *mut PcapT;
    pub fn pcap_open_dead(linktype: c_int, snaplen: c_int) -> *mut PcapT;
    pub fn pcap_close(p: *mut PcapT);
    pub fn pcap_compile(
        p: *mut PcapT,
        fp: *mut BpfProgram,
        s: *const c_char,
        optimize: c_int,
        netmask: u32,
    ) -> c_int;
    pub fn pcap_geterr(p: *mut PcapT) -> *mut c_char;
    pub fn pcap_freecode(fp: *mut BpfProgram);
    pub fn pcap_lib_version() -> *const c_char;
    pub fn bpf_filter(pc: *const BpfInsn, p: *const u8, wirelen: c_uint, buflen: c_uint) -> c_uint;
    pub fn bpf_validate(f: *const BpfInsn, len: c_int) -> c_int;
    pub fn bpf_image(f: *const BpfInsn, n: c_int) -> *mut c_char;
}
