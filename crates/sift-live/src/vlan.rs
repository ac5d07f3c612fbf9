//! VLAN tags the kernel stripped, and filters that must see them.
//!
//! Linux takes the outer 802.1Q tag off a received Ethernet frame (in the driver, or in software
//! when offloading is off) and keeps it beside the frame: socket filters run on the untagged
//! bytes and the ring reports the tag in `tp_vlan_tci`. A filter that tests `vlan` can therefore
//! never match in the kernel; libpcap compiles such filters with Linux's ancillary loads instead.
//!
//! sift gives those filters the frame as it is written to the capture file, tag put back
//! ([`TagView::Restored`]): the kernel program gets a three-instruction prefix that accepts
//! every frame carrying a stripped tag (`SKF_AD_VLAN_TAG_PRESENT`) and runs the filter on the
//! others, and the capture then runs the same program in user space on each tagged frame with
//! its tag restored. The filter's answer is the one it gives on the saved packet, which is what
//! `tcpdump -r` on that file says too. Untagged frames cost nothing extra.

use sift_bpf::{code, Insn, Program};

use crate::block::Frame;

/// Where an Ethernet frame's VLAN tag goes back (after the two MAC addresses).
pub(crate) const TAG_OFFSET: usize = 12;
const ETH_P_8021Q: u16 = 0x8100;
/// Linux's `SKF_AD_VLAN_TAG_PRESENT`: 1 when the kernel stripped a tag from the frame.
const SKF_AD_VLAN_TAG_PRESENT: u32 = 48;

/// Which bytes a capture's filter sees for a frame whose VLAN tag the kernel stripped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TagView {
    /// The frame as the kernel holds it, without its tag: what libpcap's filters see when they
    /// do not test `vlan` (so `ip` matches IPv4 frames of every VLAN).
    #[default]
    Stripped,
    /// The frame with its tag put back, as written to the capture file: for filters that test
    /// `vlan`. Tagged frames are accepted in the kernel and filtered in user space.
    Restored,
}

/// The tag (TPID, TCI) the kernel stripped from `frame`, if any.
pub(crate) fn stripped_tag(frame: &Frame) -> Option<(u16, u16)> {
    let valid = frame.vlan_tci != 0 || frame.status & libc::TP_STATUS_VLAN_VALID != 0;
    if !valid {
        return None;
    }
    let tpid_valid = frame.vlan_tpid != 0 || frame.status & libc::TP_STATUS_VLAN_TPID_VALID != 0;
    let tpid = if tpid_valid {
        frame.vlan_tpid
    } else {
        ETH_P_8021Q
    };
    Some((tpid, frame.vlan_tci))
}

/// Writes `data` with the tag `(tpid, tci)` inserted after the MAC addresses into `out`, or
/// returns false (leaving `out` alone) when `data` is too short to hold them.
pub(crate) fn restore(data: &[u8], (tpid, tci): (u16, u16), out: &mut Vec<u8>) -> bool {
    if data.len() < TAG_OFFSET {
        return false;
    }
    out.clear();
    out.extend_from_slice(&data[..TAG_OFFSET]);
    out.extend_from_slice(&tpid.to_be_bytes());
    out.extend_from_slice(&tci.to_be_bytes());
    out.extend_from_slice(&data[TAG_OFFSET..]);
    true
}

/// The kernel's half of a [`TagView::Restored`] filter: accepts frames with a stripped tag
/// (returning `snaplen`, as an accepting filter does) and runs `program` on the rest. Jumps in
/// classic BPF are relative, so `program` is unchanged behind the prefix.
pub(crate) fn kernel_program(program: &Program, snaplen: u32) -> Program {
    let mut insns = vec![
        Insn::stmt(
            code::LD | code::B | code::ABS,
            code::SKF_AD_OFF + SKF_AD_VLAN_TAG_PRESENT,
        ),
        // No tag stripped: skip the `ret` and run the filter.
        Insn::jump(code::JMP | code::JEQ | code::K, 0, 1, 0),
        Insn::stmt(code::RET | code::K, snaplen),
    ];
    insns.extend_from_slice(program.insns());
    Program(insns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_bpf::{validate, Dialect};

    #[test]
    fn restoring_puts_the_tag_after_the_mac_addresses() {
        let data: Vec<u8> = (0..20).collect();
        let mut out = Vec::new();
        assert!(restore(&data, (0x8100, 0x002a), &mut out));
        assert_eq!(&out[..12], &data[..12]);
        assert_eq!(&out[12..16], &[0x81, 0x00, 0x00, 0x2a]);
        assert_eq!(&out[16..], &data[12..]);
        assert!(!restore(&data[..11], (0x8100, 1), &mut out));
    }

    #[test]
    fn the_prefix_passes_the_kernel_rules_and_keeps_the_filter_whole() {
        // `ether[0] = 1`: ldb [0]; jeq #1, ret 96, ret 0.
        let filter = Program(vec![
            Insn::stmt(code::LD | code::B | code::ABS, 0),
            Insn::jump(code::JMP | code::JEQ | code::K, 1, 0, 1),
            Insn::stmt(code::RET | code::K, 96),
            Insn::stmt(code::RET | code::K, 0),
        ]);
        let kernel = validate(&kernel_program(&filter, 96), Dialect::Linux).expect("valid");
        assert_eq!(kernel.insns().len(), filter.len() + 3);
        assert_eq!(&kernel.insns()[3..], filter.insns());
    }
}
