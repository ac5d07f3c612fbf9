//! A step-bounded copy of libpcap 1.10's `bpf_filter` interpreter.
//!
//! libpcap's `protochain` code contains a backward jump (`ja` with a negative offset), so its
//! programs are not guaranteed to terminate. Worse, in libpcap 1.10 the AH step of the loop computes
//! `X = (P[X + 1] + 2) * 4` instead of the `X = X + (P[X + 1] + 2) * 4` its comment promises, so a
//! packet whose AH length points back into an earlier header makes `bpf_filter` spin forever.
//! [`Program::run_bounded`](crate::Program::run_bounded) evaluates such programs here instead, with
//! a step limit, mirroring `bpf_filter` instruction for instruction (bounds checks included).

use crate::BpfInsn;

const BPF_MEMWORDS: usize = 16;

/// Runs `insns` like libpcap's `bpf_filter(insns, packet, wire_len, packet.len())`, giving up (None)
/// after `max_steps` instructions. Unknown opcodes (where libpcap would `abort()`) return `None`.
pub(crate) fn run(insns: &[BpfInsn], packet: &[u8], wire_len: u32, max_steps: u64) -> Option<u32> {
    if insns.is_empty() {
        return Some(u32::MAX);
    }
    let buflen = u32::try_from(packet.len()).unwrap_or(u32::MAX);
    let byte = |k: u32| u32::from(packet[k as usize]);
    let half = |k: u32| {
        u32::from(u16::from_be_bytes([
            packet[k as usize],
            packet[k as usize + 1],
        ]))
    };
    let word = |k: u32| {
        let i = k as usize;
        u32::from_be_bytes([packet[i], packet[i + 1], packet[i + 2], packet[i + 3]])
    };
    let (mut a, mut x) = (0u32, 0u32);
    let mut mem = [0u32; BPF_MEMWORDS];
    let mut pc: usize = 0;
    for _ in 0..max_steps {
        let ins = insns.get(pc)?;
        let k = ins.k;
        pc += 1;
        let jump = |cond: bool| usize::from(if cond { ins.jt } else { ins.jf });
        match ins.code {
            0x06 => return Some(k),
            0x16 => return Some(a),
            0x20 => {
                if k > buflen || 4 > buflen - k {
                    return Some(0);
                }
                a = word(k);
            }
            0x28 => {
                if k > buflen || 2 > buflen - k {
                    return Some(0);
                }
                a = half(k);
            }
            0x30 => {
                if k >= buflen {
                    return Some(0);
                }
                a = byte(k);
            }
            0x80 => a = wire_len,
            0x81 => x = wire_len,
            0x40 => {
                if k > buflen || x > buflen - k || 4 > buflen - x.wrapping_add(k) {
                    return Some(0);
                }
                a = word(x + k);
            }
            0x48 => {
                if x > buflen || k > buflen - x || 2 > buflen - x.wrapping_add(k) {
                    return Some(0);
                }
                a = half(x + k);
            }
            0x50 => {
                if k >= buflen || x >= buflen - k {
                    return Some(0);
                }
                a = byte(x + k);
            }
            0xb1 => {
                if k >= buflen {
                    return Some(0);
                }
                x = (byte(k) & 0xf) << 2;
            }
            0x00 => a = k,
            0x01 => x = k,
            0x60 => a = *mem.get(k as usize)?,
            0x61 => x = *mem.get(k as usize)?,
            0x02 => *mem.get_mut(k as usize)? = a,
            0x03 => *mem.get_mut(k as usize)? = x,
            0x05 => pc = pc.checked_add_signed(k as i32 as isize)?,
            0x25 => pc += jump(a > k),
            0x35 => pc += jump(a >= k),
            0x15 => pc += jump(a == k),
            0x45 => pc += jump(a & k != 0),
            0x2d => pc += jump(a > x),
            0x3d => pc += jump(a >= x),
            0x1d => pc += jump(a == x),
            0x4d => pc += jump(a & x != 0),
            0x0c => a = a.wrapping_add(x),
            0x1c => a = a.wrapping_sub(x),
            0x2c => a = a.wrapping_mul(x),
            0x3c => match a.checked_div(x) {
                Some(v) => a = v,
                None => return Some(0),
            },
            0x9c => match a.checked_rem(x) {
                Some(v) => a = v,
                None => return Some(0),
            },
            0x5c => a &= x,
            0x4c => a |= x,
            0xac => a ^= x,
            0x6c => a = if x < 32 { a << x } else { 0 },
            0x7c => a = if x < 32 { a >> x } else { 0 },
            0x04 => a = a.wrapping_add(k),
            0x14 => a = a.wrapping_sub(k),
            0x24 => a = a.wrapping_mul(k),
            // Division by a zero constant is rejected by pcap_compile; never reached.
            0x34 => a = a.checked_div(k)?,
            0x94 => a = a.checked_rem(k)?,
            0x54 => a &= k,
            0x44 => a |= k,
            0xa4 => a ^= k,
            // x86 semantics of C's (undefined) over-wide shift, as libpcap's interpreter has there.
            0x64 => a = a.wrapping_shl(k),
            0x74 => a = a.wrapping_shr(k),
            0x84 => a = a.wrapping_neg(),
            0x07 => x = a,
            0x87 => a = x,
            _ => return None,
        }
    }
    None
}
