//! The placement of values after `geneve` ([`super::recompute`], [`super::select`]'s edge
//! copies, [`super::coalesce`], [`super::deadregs`]) on the optimized IR of `geneve && arp src
//! net 10.0.0 or (arp src and dst host 10.0.0.4)` on Ethernet, where sift was larger than
//! libpcap (79 instructions against 70), run against the IR interpreter on Geneve packets.

use super::tests::check;
use crate::disasm::disassemble;
use crate::interp;

/// The optimized IR of the expression. The Geneve offset `v23` arrives as the constant 40
/// (IPv6) or the IPv4 header length (in `X`); `v30` and `v31` are its sums, read once each.
const GENEVE_ARP: &str = "\
block0:
    v0 = const 0x800
    v1 = const 17
    v2 = const 0x17c1
    v3 = const 192
    v4 = const 0
    v5 = const 0x806
    v6 = const 0xa000004
    v7 = load.h [12]
    br eq v7, v0, block5, block1
block1:
    v8 = const 0x86dd
    br eq v7, v8, block2, block13(v4, v4)
block2:
    v9 = load.b [20]
    br eq v9, v1, block3, block13(v4, v4)
block3:
    v10 = load.h [56]
    br eq v10, v2, block4, block13(v4, v4)
block4:
    v11 = const 40
    v12 = load.b [62]
    br set v12, v3, block13(v4, v4), block9(v11)
block5:
    v13 = load.b [23]
    br eq v13, v1, block6, block13(v4, v4)
block6:
    v14 = const 0x1fff
    v15 = load.h [20]
    br set v15, v14, block13(v4, v4), block7
block7:
    v16 = const 15
    v17 = const 2
    v18 = load.b [14]
    v19 = and v18, v16
    v20 = shl v19, v17
    v21 = load.h [v20+16]
    br eq v21, v2, block8, block13(v4, v4)
block8:
    v22 = load.b [v20+22]
    br set v22, v3, block13(v4, v4), block9(v20)
block9(v23):
    v24 = const 22
    v25 = const 24
    v26 = const 63
    v27 = const 4
    v28 = const 8
    v29 = const 0x6558
    v30 = add v23, v24
    v31 = add v23, v25
    v32 = load.b [v23+22]
    v33 = and v32, v26
    v34 = mul v33, v27
    v35 = add v34, v28
    v36 = add v35, v30
    v37 = load.h [v23+24]
    br eq v37, v29, block10, block11(v31, v36)
block10:
    v38 = const 12
    v39 = const 14
    v40 = add v36, v38
    v41 = add v36, v39
    jump block11(v40, v41)
block11(v42, v43):
    v44 = load.h [v42+0]
    br eq v44, v5, block12, block13(v42, v43)
block12:
    v45 = const 0xffffff00
    v46 = const 0xa000000
    v47 = load.w [v43+14]
    v48 = and v47, v45
    br eq v48, v46, block17, block13(v42, v43)
block13(v49, v50):
    v51 = load.h [v49+0]
    br eq v51, v5, block14, block16
block14:
    v52 = load.w [v50+14]
    br eq v52, v6, block15, block16
block15:
    v53 = load.w [v50+24]
    br eq v53, v6, block17, block16
block16:
    ret 0
block17:
    ret 262144
";

/// Ethernet, IPv4 (header length 20 or 24) or IPv6, UDP to 6081, Geneve (with 0 or 1 option
/// words, a valid or reserved version) carrying Ethernet or ARP directly, then ARP with
/// addresses in and out of 10.0.0; each also cut short.
fn geneve_packets() -> Vec<Vec<u8>> {
    let mut out = vec![vec![0u8; 14], vec![0u8; 100]];
    for l3 in [None, Some(5u8), Some(6)] {
        for version in [0u8, 0x40] {
            for options in [0u8, 1] {
                for (proto, inner) in [
                    (0x6558u16, Some(0x806u16)),
                    (0x6558, Some(0x800)),
                    (0x806, None),
                ] {
                    for (spa, tpa) in [
                        ([10, 0, 0, 4], [10, 0, 0, 4]),
                        ([10, 0, 0, 9], [11, 0, 0, 4]),
                        ([11, 0, 0, 4], [10, 0, 0, 4]),
                    ] {
                        let mut p = vec![0u8; 12];
                        match l3 {
                            None => {
                                p.extend([0x86, 0xdd, 0x60]);
                                p.resize(14 + 40, 0);
                                p[14 + 6] = 17;
                            }
                            Some(ihl) => {
                                p.extend([0x08, 0x00, 0x40 | ihl]);
                                p.resize(14 + 4 * ihl as usize, 0);
                                p[14 + 9] = 17;
                            }
                        }
                        p.extend([0, 1, 0x17, 0xc1, 0, 0, 0, 0]);
                        p.extend([version | options, 0]);
                        p.extend(proto.to_be_bytes());
                        p.extend([0; 4]);
                        p.extend(vec![7; 4 * options as usize]);
                        if let Some(t) = inner {
                            p.extend([2; 12]);
                            p.extend(t.to_be_bytes());
                        }
                        p.extend([0, 1, 8, 0, 6, 4, 0, 1, 2, 2, 2, 2, 2, 2]);
                        p.extend(spa);
                        p.extend([3; 6]);
                        p.extend(tpa);
                        out.push(p[..p.len() - 1].to_vec());
                        out.push(p[..p.len() - 12].to_vec());
                        out.push(p);
                    }
                }
            }
        }
    }
    out
}

#[test]
fn geneve_offsets_stay_in_registers_and_share_words() {
    let packets = geneve_packets();
    let p = check(GENEVE_ARP, &packets);
    let listing = disassemble(&p.to_program());
    // Both outcomes are exercised (on all three network layers).
    let accepted = packets
        .iter()
        .filter(|pkt| interp::run(&p, pkt, pkt.len() as u32) != 0)
        .count();
    assert!(
        accepted >= 20 && accepted < packets.len() - 100,
        "{accepted}"
    );
    // libpcap: 70 instructions.
    assert_eq!(p.len(), 60, "{listing}");
}

#[test]
fn deferred_load_copied_into_an_index_parameter() {
    // v2 is only read as block1's jump argument, so it is loaded at the copy; v4 is read first
    // as an index, so the copy puts it in `X`.
    let text = "\
block0:
    v0 = load.b [0]
    v1 = const 1
    br eq v0, v1, block1, block2
block1:
    v2 = load.b [3]
    jump block3(v2)
block2:
    v3 = const 5
    jump block3(v3)
block3(v4):
    v5 = load.b [v4+0]
    ret v5
";
    let mut packets = vec![vec![], vec![1], vec![1, 0, 0, 2], vec![0; 6]];
    for at in [1u8, 2, 7] {
        packets.push(vec![1, 9, 8, at, 6, 5, 4, 3]);
    }
    check(text, &packets);
}
