//! Tests of the if-conversion: which programs lose their branches (listings counted for
//! `brif`), and that the branch-free code agrees with the interpreter on packets and all
//! their truncations.

use super::safe_loads::ZeroReads;
use crate::translate::Plan;
use crate::{JitFilter, Options};

fn filter_ir(text: &str, options: &Options) -> String {
    let program = sift_bytecode::verify(sift_bytecode::assemble(text).unwrap()).unwrap();
    let listing = JitFilter::listing(&program, options).unwrap();
    let end = listing.find("; batch").unwrap_or(listing.len());
    listing[..end].to_string()
}

const AND_CHAIN: &str = "ld.h r0, [12]\n jeq r0, 2048, L2, L6\nL2:\n ld.b r0, [23]\n jeq r0, 6, L4, L6\nL4:\n ld.b r1, [14]\n and r1, r1, 15\n shl r1, r1, 2\n ld.h r0, [r1+16]\n jeq r0, 30, L7, L6\nL6:\n ret 0\nL7:\n ret 96\n";

#[test]
fn a_small_program_has_no_conditional_branch() {
    if !crate::supported() {
        return;
    }
    let ir = filter_ir(AND_CHAIN, &Options::default());
    assert_eq!(branches(&ir), 0, "{ir}");
    assert!(ir.contains("select"), "{ir}");
    let branching = Options {
        branchless: false,
        ..Options::default()
    };
    assert!(filter_ir(AND_CHAIN, &branching).contains("brif"));
}

#[test]
fn a_small_switch_becomes_equalities() {
    if !crate::supported() {
        return;
    }
    let text = "ld.b r0, [0]\n switch r0, T0, L3\nL1:\n ret 1\nL2:\n ret 2\nL3:\n ret 0\n.table T0\n 1 -> L1\n 7 -> L2\n 9 -> L1\n";
    let ir = filter_ir(text, &Options::default());
    assert_eq!(branches(&ir), 0, "{ir}");
}

/// `ip src 10.1.1.1 or ip dst 10.2.2.2`: the destination has a bound of its own (34 bytes,
/// beyond the entry's 30), one compare and select on short packets, cheaper than a branch.
const OR_PAIR: &str = "ld.h r0, [12]\n jeq r0, 2048, L2, L6\nL2:\n ld.w r0, [26]\n jeq r0, 167837953, L7, L4\nL4:\n ld.w r0, [30]\n jeq r0, 167903746, L7, L6\nL6:\n ret 0\nL7:\n ret 96\n";

/// The same pair of addresses as IPv4 source or destination, or ARP sender or target: the
/// loads have three bounds beyond the entry's 30 (32, 34 and 42).
const OR_FOUR: &str = "ld.h r0, [12]\n jeq r0, 2048, L2, L6\nL2:\n ld.w r0, [26]\n jeq r0, 167837953, L12, L4\nL4:\n ld.w r0, [30]\n jeq r0, 167903746, L12, L11\nL6:\n jeq r0, 2054, L7, L11\nL7:\n ld.w r0, [28]\n jeq r0, 167837953, L12, L9\nL9:\n ld.w r0, [38]\n jeq r0, 167903746, L12, L11\nL11:\n ret 0\nL12:\n ret 96\n";

#[test]
fn long_packets_skip_the_bounds_logic_of_several_bounds() {
    if !crate::supported() {
        return;
    }
    assert_eq!(branches(&filter_ir(OR_PAIR, &Options::default())), 0);
    let ir = filter_ir(OR_FOUR, &Options::default());
    assert_eq!(branches(&ir), 1, "{ir}");
    let mut packets = Vec::new();
    for (a, b) in [
        ([10, 1, 1, 1], [0; 4]),
        ([0; 4], [10, 2, 2, 2]),
        ([0; 4], [0; 4]),
    ] {
        let mut p = ipv4_like(a, 6, 5);
        p[30..34].copy_from_slice(&b);
        packets.push(p);
        let mut arp = vec![0u8; 44];
        arp[12..14].copy_from_slice(&[8, 6]);
        arp[28..32].copy_from_slice(&a);
        arp[38..42].copy_from_slice(&b);
        packets.push(arp);
    }
    for text in [OR_PAIR, OR_FOUR] {
        agrees(text, &Options::default(), &packets);
    }
}

/// `OR_FOUR`, and for IPv6 a byte at 54 (`tcp`'s test after a fragment header): its bound,
/// 55 bytes, lies beyond `MAX_LONG`, so the long-packet path is for packets of 42 bytes and
/// more, and that load keeps its check on it. Below 42 bytes, loads that need more read
/// nothing.
const OR_FOUR_AND_IPV6: &str = "ld.h r0, [12]\n jeq r0, 2048, L2, L6\nL2:\n ld.w r0, [26]\n jeq r0, 167837953, L12, L4\nL4:\n ld.w r0, [30]\n jeq r0, 167903746, L12, L11\nL6:\n jeq r0, 2054, L7, L13\nL7:\n ld.w r0, [28]\n jeq r0, 167837953, L12, L9\nL9:\n ld.w r0, [38]\n jeq r0, 167903746, L12, L11\nL13:\n jeq r0, 34525, L14, L11\nL14:\n ld.b r0, [54]\n jeq r0, 6, L12, L11\nL11:\n ret 0\nL12:\n ret 96\n";

#[test]
fn the_long_packet_path_stops_at_common_lengths() {
    if !crate::supported() {
        return;
    }
    let ir = filter_ir(OR_FOUR_AND_IPV6, &Options::default());
    assert_eq!(branches(&ir), 1, "{ir}");
    let split = ir
        .lines()
        .find(|l| l.contains("icmp uge"))
        .unwrap_or_default();
    assert!(split.ends_with("= 42"), "{split}\n{ir}");
    // Six loads on the long-packet path; four on the other, where the ARP target (42 bytes)
    // and the byte at 54 cannot fit and are the constant 0.
    assert_eq!(ir.matches("load").count(), 10, "{ir}");
    let mut packets = Vec::new();
    for last in [6, 17] {
        let mut p = vec![0u8; 60];
        p[12..14].copy_from_slice(&[0x86, 0xdd]);
        p[54] = last;
        packets.push(p);
    }
    let mut ipv4 = ipv4_like([10, 1, 1, 1], 6, 5);
    ipv4.resize(60, 0);
    packets.push(ipv4);
    agrees(OR_FOUR_AND_IPV6, &Options::default(), &packets);
}

/// `ip src 10.1.1.1 or ip dst 10.2.2.2 or ip proto 6`: a destination of 0 goes on to the
/// protocol test, which on a protocol of 0 rejects.
const OR_THEN_PROTO: &str = "ld.h r0, [12]\n jeq r0, 2048, L2, L8\nL2:\n ld.w r0, [26]\n jeq r0, 167837953, L9, L4\nL4:\n ld.w r0, [30]\n jeq r0, 167903746, L9, L6\nL6:\n ld.b r0, [23]\n jeq r0, 6, L9, L8\nL8:\n ret 0\nL9:\n ret 96\n";

/// The same, with the protocol test also reached by packets that are not IPv4: there a
/// failed check at the destination must still reject, since the protocol byte must be read
/// from the packet on the other path.
const OR_THEN_SHARED_PROTO: &str = "ld.h r0, [12]\n jeq r0, 2048, L2, L6\nL2:\n ld.w r0, [26]\n jeq r0, 167837953, L9, L4\nL4:\n ld.w r0, [30]\n jeq r0, 167903746, L9, L6\nL6:\n ld.b r0, [23]\n jeq r0, 6, L9, L8\nL8:\n ret 0\nL9:\n ret 96\n";

/// The destination test followed by a test of the source, loaded before it: that value is not
/// 0 where the destination's check fails.
const OR_THEN_SOURCE_AGAIN: &str = "ld.h r0, [12]\n jeq r0, 2048, L2, L8\nL2:\n ld.w r1, [26]\n jeq r1, 167837953, L9, L4\nL4:\n ld.w r0, [30]\n jeq r0, 167903746, L9, L6\nL6:\n jgt r1, 5, L9, L8\nL8:\n ret 0\nL9:\n ret 96\n";

/// A load at an index (`ip[ether[6]:4] = 8 or icmp`, found by the random expressions): its
/// check counts bytes from the index, so the protocol byte cannot read at its base.
const INDEXED_THEN_PROTO: &str = "ld.h r0, [12]\n jeq r0, 2048, L2, L7\nL2:\n ld.b r1, [6]\n ld.w r0, [r1+14]\n jeq r0, 8, L8, L5\nL5:\n ld.b r0, [23]\n jeq r0, 1, L8, L7\nL7:\n ret 0\nL8:\n ret 96\n";

/// A load whose 0 (what it reads on a packet too short for it) leads only to `ret 0`, with the
/// loads after it reading 0 as well, needs no guard; those loads then read at its base.
#[test]
fn a_load_whose_zero_rejects_needs_no_guard() {
    let zero_reads = |text: &str| {
        let program = sift_bytecode::assemble(text).unwrap();
        let reads = ZeroReads::new(&Plan::new(&program, &Options::default()));
        (reads.unguarded, reads.base_bound)
    };
    let (unguarded, _) = zero_reads(OR_PAIR);
    assert!(unguarded[4]);
    assert!(!unguarded[2]);
    let (unguarded, base_bound) = zero_reads(OR_THEN_PROTO);
    assert!(unguarded[4]);
    assert_eq!(
        base_bound[6], 34,
        "the protocol reads zeros where the destination fails"
    );
    for (text, load) in [
        (OR_THEN_SHARED_PROTO, 4),
        (OR_THEN_SOURCE_AGAIN, 4),
        (INDEXED_THEN_PROTO, 3),
    ] {
        let (unguarded, base_bound) = zero_reads(text);
        assert!(!unguarded[load], "{text}");
        assert!(base_bound.iter().all(|&b| b == 0), "{text}");
    }
    if !crate::supported() {
        return;
    }
    // A packet whose protocol is 6 and whose addresses do not match: with 30 to 33 bytes the
    // destination does not fit, and the interpreter rejects. Not IPv4, the protocol byte
    // alone decides.
    let mut not_ipv4 = ipv4_like([10, 9, 9, 9], 6, 5);
    not_ipv4[12] = 0x86;
    // An index of 255 puts the indexed word beyond every packet here.
    let mut icmp_far_index = ipv4_like([10, 9, 9, 9], 1, 5);
    icmp_far_index[6] = 255;
    let packets = vec![
        ipv4_like([10, 9, 9, 9], 6, 5),
        ipv4_like([10, 1, 1, 1], 17, 5),
        ipv4_like([10, 9, 9, 9], 17, 5),
        not_ipv4,
        icmp_far_index,
    ];
    for text in [
        OR_PAIR,
        OR_THEN_PROTO,
        OR_THEN_SHARED_PROTO,
        OR_THEN_SOURCE_AGAIN,
        INDEXED_THEN_PROTO,
    ] {
        agrees(text, &Options::default(), &packets);
    }
}

/// Conditional branches in a listing.
fn branches(ir: &str) -> usize {
    ir.matches("brif").count() + ir.matches("br_table").count()
}

/// The JIT with `options` against the interpreter on `packets` and all their truncations.
fn agrees(text: &str, options: &Options, packets: &[Vec<u8>]) {
    let program = sift_bytecode::verify(sift_bytecode::assemble(text).unwrap()).unwrap();
    let jit = JitFilter::compile_with(&program, options).unwrap();
    let mut cache = sift_bytecode::Cache::new();
    for p in packets {
        for n in 0..=p.len() {
            let want = program.run(&mut cache, &p[..n], 100);
            assert_eq!(jit.run(&p[..n], 100), want, "{:02x?}", &p[..n]);
        }
    }
}

/// `ld.h [12] = 0x800, ld.w [26] = 10.1.1.1, ld.b [23] = 6, ld.h [20] & 0x1fff = 0`, then
/// a byte at a header-length offset: the address test is rare, so the rest is skipped by
/// one branch.
const ADDRESS_THEN_MORE: &str = "ld.h r0, [12]\n jeq r0, 2048, L2, L12\nL2:\n ld.w r0, [26]\n jeq r0, 167837953, L4, L12\nL4:\n ld.b r0, [23]\n jeq r0, 6, L6, L12\nL6:\n ld.h r0, [20]\n jset r0, 8191, L12, L8\nL8:\n ld.b r1, [14]\n and r1, r1, 15\n shl r1, r1, 2\n ld.b r0, [r1+14]\n jgt r0, 3, L13, L12\nL12:\n ret 0\nL13:\n ret 96\n";

fn ipv4_like(src: [u8; 4], proto: u8, ihl: u8) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[12] = 8;
    p[14] = 0x40 | ihl;
    p[23] = proto;
    p[26..30].copy_from_slice(&src);
    for (k, b) in p.iter_mut().enumerate().skip(34) {
        *b = k as u8;
    }
    p
}

#[test]
fn a_rare_test_opens_an_early_exit() {
    if !crate::supported() {
        return;
    }
    let ir = filter_ir(ADDRESS_THEN_MORE, &Options::default());
    assert_eq!(branches(&ir), 1, "{ir}");
    let no_exits = Options {
        early_exits: false,
        ..Options::default()
    };
    assert_eq!(branches(&filter_ir(ADDRESS_THEN_MORE, &no_exits)), 0);
    // Tests that are not rare (an EtherType, a protocol) open none.
    assert_eq!(branches(&filter_ir(AND_CHAIN, &Options::default())), 0);
    let mut packets = Vec::new();
    for src in [[10, 1, 1, 1], [10, 1, 1, 2]] {
        for proto in [6, 17] {
            for ihl in [0, 2, 5, 6] {
                packets.push(ipv4_like(src, proto, ihl));
            }
        }
    }
    for options in [Options::default(), no_exits] {
        agrees(ADDRESS_THEN_MORE, &options, &packets);
    }
}

#[test]
fn a_large_switch_is_hashed_without_branches() {
    if !crate::supported() {
        return;
    }
    // Ten keys, three targets and a default.
    let text = "ld.b r0, [0]\n switch r0, T0, L4\nL1:\n ret 1\nL2:\n ret 2\nL3:\n ld.w r1, [1]\n ret r1\nL4:\n ret 0\n.table T0\n 1 -> L1\n 7 -> L2\n 9 -> L1\n 20 -> L3\n 33 -> L2\n 60 -> L1\n 61 -> L1\n 99 -> L3\n 200 -> L2\n 255 -> L1\n";
    let ir = filter_ir(text, &Options::default());
    assert_eq!(branches(&ir), 0, "{ir}");
    let packets: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b, 1, 2, 3, 4]).collect();
    agrees(text, &Options::default(), &packets);
}

/// `ip`: a packet of zeros fails the EtherType test, so the result is the test alone, with no
/// compare of the length; `ld.b [20] = 0` accepts zeros, so it keeps the length in the result.
/// Both agree with the interpreter on every truncation.
#[test]
fn the_length_joins_the_result_only_when_zeros_would_pass() {
    if !crate::supported() {
        return;
    }
    let program = |text: &str| sift_bytecode::verify(sift_bytecode::assemble(text).unwrap());
    let ip = "ld.h r0, [12]\n jeq r0, 2048, L3, L2\nL2:\n ret 0\nL3:\n ret 96\n";
    let zero = "ld.b r0, [20]\n jeq r0, 0, L3, L2\nL2:\n ret 0\nL3:\n ret 96\n";
    let options = Options::default();
    for (text, fails) in [(ip, true), (zero, false)] {
        let p = program(text).unwrap();
        let mut plan = crate::translate::Plan::new(p.program(), &options);
        assert!(plan.branchless);
        plan.short_packets_fail = super::short_packets_fail(&p, &plan);
        assert_eq!(plan.short_packets_fail, fails, "{text}");
        let mut packet = ipv4_like([10, 1, 1, 1], 6, 5);
        agrees(text, &options, &[packet.clone()]);
        packet.fill(0);
        agrees(text, &options, &[packet]);
    }
}

/// A host set of ten addresses (source or destination, IPv4 or ARP, each field with a table of
/// its own as sift compiles it) is branch-free: each side of the EtherType test two vector
/// membership tests, shared with the other side ([`super::shared_tests`]): the IPv4 source
/// and the ARP sender are one test of a key the EtherType picks, and so are the destination
/// and the target. An IPv4-only set tests both of its fields.
#[test]
fn a_host_set_of_ten_is_branch_free_with_shared_tests() {
    if !crate::supported() {
        return;
    }
    let hosts: Vec<u32> = (1..=10).map(|k| 0x0a01_0100 + k).collect();
    let tables = |count: usize| {
        let mut text = String::new();
        for t in 0..count {
            text.push_str(&format!(".table T{t}\n"));
            for h in &hosts {
                text.push_str(&format!(" {h} -> L12\n"));
            }
        }
        text
    };
    let host = format!(
        "ld.h r0, [12]\n jeq r0, 2048, L7, L2\nL2:\n jeq r0, 2054, L3, L11\nL3:\n ld.w r0, [28]\n switch r0, T0, L5\nL5:\n ld.w r0, [38]\n switch r0, T1, L11\nL7:\n ld.w r0, [26]\n switch r0, T2, L9\nL9:\n ld.w r0, [30]\n switch r0, T3, L11\nL11:\n ret 0\nL12:\n ret 96\n{}",
        tables(4)
    );
    let ip_host = format!(
        "ld.h r0, [12]\n jeq r0, 2048, L2, L6\nL2:\n ld.w r0, [26]\n switch r0, T0, L4\nL4:\n ld.w r0, [30]\n switch r0, T1, L6\nL6:\n ret 0\nL7:\n ret 96\n{}",
        tables(2).replace("L12", "L7")
    );
    // Machine code tests of "any lane equal": the tests of one outcome share one.
    let any_lane_tests = |ir: &str| {
        let code = &ir[ir.find("machine code").expect("listing has machine code")..];
        code.matches("vptest").count()
    };
    let ir = filter_ir(&host, &Options::default());
    // The long-packet path only.
    assert_eq!(branches(&ir), 1, "{ir}");
    // Two lookups on each of the two paths (long and short packets), one test of their lanes.
    assert_eq!(ir.matches("splat").count(), 4, "{ir}");
    if cfg!(target_arch = "x86_64") {
        assert_eq!(any_lane_tests(&ir), 2, "{ir}");
    }
    let ir = filter_ir(&ip_host, &Options::default());
    assert_eq!(ir.matches("splat").count(), 2, "{ir}");
    if cfg!(target_arch = "x86_64") {
        assert_eq!(any_lane_tests(&ir), 1, "{ir}");
    }
    let mut packets = Vec::new();
    // EtherType 0x0800 (IPv4) or 0x0806 (ARP), an address at each field of the other too.
    for (at, ethertype) in [(26, 0u8), (30, 0), (28, 6), (38, 6), (26, 6), (38, 0)] {
        for h in [hosts[0], hosts[9], hosts[9] + 1] {
            let mut p = ipv4_like([0; 4], 6, 5);
            p.resize(60, 0);
            p[12..14].copy_from_slice(&[8, ethertype]);
            p[at..at + 4].copy_from_slice(&h.to_be_bytes());
            packets.push(p);
        }
    }
    for text in [&host, &ip_host] {
        agrees(text, &Options::default(), &packets);
    }
}

/// Two rare paths survive the early exit and lead to different blocks (a matching source
/// goes on to accept on TCP, a matching destination on UDP with a TTL above 32): past the exit
/// the result must still come from both, not from the block the exit stands before.
const TWO_RARE_PATHS: &str = "ld.h r0, [12]\n jeq r0, 2048, L2, L14\nL2:\n ld.w r0, [26]\n jeq r0, 167837953, L4, L6\nL4:\n ld.b r0, [23]\n jeq r0, 6, L15, L14\nL6:\n ld.w r0, [30]\n jeq r0, 167903746, L8, L14\nL8:\n ld.b r0, [23]\n jeq r0, 17, L10, L14\nL10:\n ld.b r0, [22]\n jgt r0, 32, L12, L14\nL12:\n ld.b r0, [14]\n jset r0, 64, L15, L14\nL14:\n ret 0\nL15:\n ret 96\n";

#[test]
fn an_early_exit_keeps_every_surviving_path() {
    if !crate::supported() {
        return;
    }
    // One branch, the exit (without the long-packet copy, which would double it).
    let one_path = Options {
        long_packet_path: false,
        ..Options::default()
    };
    let ir = filter_ir(TWO_RARE_PATHS, &one_path);
    assert_eq!(branches(&ir), 1, "{ir}");
    let mut packets = Vec::new();
    for src in [[10, 1, 1, 1], [10, 1, 1, 3]] {
        for dst in [[10, 2, 2, 2], [10, 2, 2, 3]] {
            for proto in [6, 17] {
                for ttl in [1, 64] {
                    let mut p = ipv4_like(src, proto, 5);
                    p[30..34].copy_from_slice(&dst);
                    p[22] = ttl;
                    packets.push(p);
                }
            }
        }
    }
    let mut cache = sift_bytecode::Cache::new();
    let program = sift_bytecode::verify(sift_bytecode::assemble(TWO_RARE_PATHS).unwrap()).unwrap();
    let accepted = packets
        .iter()
        .filter(|p| program.run(&mut cache, p, 100) != 0)
        .count();
    assert!(accepted >= 2, "both paths accept some packets");
    agrees(TWO_RARE_PATHS, &Options::default(), &packets);
    agrees(TWO_RARE_PATHS, &one_path, &packets);
}

/// After the early exit of `ADDRESS_THEN_MORE`, the result is the tail's outcome: the tests
/// before the exit (which held) are not combined into it again (machine code after the exit:
/// five `and`s — the header-length mask, the tail's three tests, its bound and the entry
/// bound combined — where combining all of them again took seven).
#[test]
fn past_an_early_exit_the_result_starts_at_the_tail() {
    // The count reads x86-64 machine code (`jnz`, `and`).
    if !crate::supported() || !cfg!(target_arch = "x86_64") {
        return;
    }
    let ir = filter_ir(ADDRESS_THEN_MORE, &Options::default());
    let code = &ir[ir.find("; filter: machine code").expect("machine code")..];
    let after_exit = &code[code.find("jnz").expect("an early exit")..];
    let ands = after_exit
        .lines()
        .filter(|l| l.trim_start().starts_with("and"))
        .count();
    assert!(ands <= 5, "{ands} ands after the exit:\n{code}");
}

/// Three paths join with a different register each (a constant, a header length, another
/// constant), and the join reads at that register's offset and divides by it: the first two
/// paths lie on one side of the EtherType test and the third on the other, so the merge tells
/// the second from the third by that test alone, and the first from both by its whole path.
/// Every packet and truncation agrees with the interpreter, a zero header length included.
#[test]
fn a_join_merges_registers_by_the_branch_that_separates_its_paths() {
    if !crate::supported() {
        return;
    }
    let text = "ld.h r0, [12]\n jeq r0, 2048, L2, L8\nL2:\n ld.b r1, [23]\n jeq r1, 6, L4, L6\nL4:\n mov r2, 20\n jmp L10\nL6:\n ld.b r2, [14]\n and r2, r2, 15\n jmp L10\nL8:\n jeq r0, 2054, L9, L14\nL9:\n mov r2, 8\n jmp L10\nL10:\n ld.b r3, [r2+14]\n div r4, r3, r2\n jgt r4, 1, L15, L14\nL14:\n ret 0\nL15:\n ret 96\n";
    // Bytes that pass the division at some of the three offsets and not at others: a value
    // merged from the wrong path changes the verdict.
    let packet = |ethertype: u16, proto: u8, ihl: u8| {
        let mut p = ipv4_like([10, 1, 1, 1], proto, ihl);
        p[12..14].copy_from_slice(&ethertype.to_be_bytes());
        for k in (15..23).chain(24..26).chain(30..34) {
            p[k] = 100 + k as u8;
        }
        p[22] = 1;
        p[34] = 100;
        p
    };
    let mut packets = Vec::new();
    for ethertype in [0x0800, 0x0806, 0x86dd] {
        for (proto, ihl) in [(6, 5), (17, 5), (17, 0), (17, 15)] {
            packets.push(packet(ethertype, proto, ihl));
        }
    }
    for options in [
        Options::default(),
        Options {
            long_packet_path: false,
            ..Options::default()
        },
    ] {
        assert_eq!(branches(&filter_ir(text, &options)), 0);
        agrees(text, &options, &packets);
    }
}
