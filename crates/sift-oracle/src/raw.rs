//! libpcap's `bpf_validate`, `bpf_filter` and `bpf_image` on instruction arrays that libpcap did
//! not compile itself (classic BPF read from files, produced by sift's code generators, or
//! generated at random), for differential tests of other classic BPF implementations.

use std::ffi::CStr;
use std::os::raw::c_int;

use crate::{ffi, pcap_lock, BpfInsn};

/// The 49 opcodes `bpf_filter` executes (it aborts on any other).
const EXECUTED_OPCODES: [u16; 49] = [
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x0c, 0x14, 0x15, 0x16, 0x1c, 0x1d, 0x20, 0x24,
    0x25, 0x28, 0x2c, 0x2d, 0x30, 0x34, 0x35, 0x3c, 0x3d, 0x40, 0x44, 0x45, 0x48, 0x4c, 0x4d, 0x50,
    0x54, 0x5c, 0x60, 0x61, 0x64, 0x6c, 0x74, 0x7c, 0x80, 0x81, 0x84, 0x87, 0x94, 0x9c, 0xa4, 0xac,
    0xb1,
];

/// libpcap's `bpf_validate` (false for arrays longer than `c_int` can count).
pub fn validate_insns(insns: &[BpfInsn]) -> bool {
    let Ok(n) = c_int::try_from(insns.len()) else {
        return false;
    };
    // SAFETY: `insns` holds `n` instructions; bpf_validate only reads them.
    unsafe { ffi::bpf_validate(insns.as_ptr(), n) != 0 }
}

/// libpcap's `bpf_filter`, or `None` when running it would be unsafe or undefined: the program
/// fails `bpf_validate`, jumps backward (it may never stop), or holds an opcode `bpf_filter`
/// aborts on. Callers must also avoid programs that read a scratch word before storing it (or
/// run [`crate::scratch::with_zeroed_scratch`] of them): libpcap leaves scratch memory
/// uninitialised, so their result is not defined.
pub fn run_insns(insns: &[BpfInsn], packet: &[u8], wire_len: u32) -> Option<u32> {
    let backward = insns.iter().any(|i| i.code == 0x05 && (i.k as i32) < 0);
    if insns.is_empty() || backward || !validate_insns(insns) {
        return None;
    }
    if !insns.iter().all(|i| EXECUTED_OPCODES.contains(&i.code)) {
        return None;
    }
    let caplen = u32::try_from(packet.len()).unwrap_or(u32::MAX);
    // SAFETY: the program is non-empty, validated, forward-only and made of opcodes bpf_filter
    // executes, so it terminates and reads only `insns` and at most `caplen` bytes of `packet`.
    Some(unsafe { ffi::bpf_filter(insns.as_ptr(), packet.as_ptr(), wire_len, caplen) })
}

/// libpcap's `bpf_image` of one instruction at index `n` (one `tcpdump -d` line).
pub fn image(insn: &BpfInsn, n: usize) -> String {
    let n = c_int::try_from(n).unwrap_or(c_int::MAX);
    let _guard = pcap_lock();
    // SAFETY: `insn` is one instruction; bpf_image formats it into a static buffer, copied
    // before the lock (shared with every other bpf_image caller in this crate) is released.
    unsafe { CStr::from_ptr(ffi::bpf_image(insn, n)) }
        .to_string_lossy()
        .into_owned()
}
