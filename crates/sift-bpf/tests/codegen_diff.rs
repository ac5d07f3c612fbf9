//! Code generation against the IR interpreter and libpcap: for the shared and random
//! expressions on four link types, sift's IR compiled to classic BPF must give the IR
//! interpreter's verdict both in sift's cBPF interpreter and in libpcap's `bpf_filter`, and
//! pass libpcap's `bpf_validate`. Also cBPF -> IR -> cBPF round trips of libpcap's programs.

mod common;

use common::*;
use sift_bpf::{compile, compile_for, interp, lift, validate, CodegenError, Dialect, Program};
use sift_ir::{Cache, Interpreter};
use sift_oracle::{Oracle, DEFAULT_SNAPLEN};

const LINKTYPES: [u32; 4] = [1, 101, 113, 276];

fn packets(lt: u32) -> Vec<(Vec<u8>, u32)> {
    sift_testgen::generate_packets(lt, 4242, 80)
        .into_iter()
        .map(|p| (p.data, p.wire_len))
        .collect()
}

#[test]
fn compiled_expressions_agree_with_ir_and_bpf_filter() {
    let mut pkts = std::collections::HashMap::new();
    let (mut compiled, mut too_many, mut linux_ok, mut pairs) = (0, 0, 0, 0u64);
    for (lt, e) in expressions(&LINKTYPES, 200, 0xc0de) {
        let Ok(filter) = sift::Filter::compile(&e, lt, DEFAULT_SNAPLEN) else {
            continue;
        };
        let f = filter.ir();
        let prog = match compile(f) {
            Ok(p) => p,
            Err(CodegenError::TooManyLiveValues { .. }) => {
                too_many += 1;
                continue;
            }
            Err(err) => panic!("{e}: {err}\n{f}"),
        };
        compiled += 1;
        assert!(libpcap_validate(prog.insns()), "{e}: bpf_validate refuses");
        if validate(&prog.to_program(), Dialect::Linux).is_ok() {
            linux_ok += 1;
        }
        let for_linux = compile_for(f, Dialect::Linux).unwrap_or_else(|err| panic!("{e}: {err}"));
        assert!(libpcap_validate(for_linux.insns()));
        let ir = Interpreter::new(f.clone()).unwrap();
        let mut cache = Cache::new();
        let packets = pkts.entry(lt).or_insert_with(|| packets(lt));
        for (pkt, wire) in packets.iter() {
            let want = ir.run(&mut cache, pkt, *wire);
            assert_eq!(interp::run(&prog, pkt, *wire), want, "{e} on {pkt:02x?}");
            assert_eq!(
                interp::run(&for_linux, pkt, *wire),
                want,
                "{e} (linux) on {pkt:02x?}"
            );
            // Scratch words are always stored before they are read in generated code, so
            // bpf_filter's uninitialised memory is never observed.
            assert_eq!(
                libpcap_filter_valid(&prog, pkt, *wire),
                want,
                "{e} (bpf_filter)"
            );
            pairs += 1;
        }
    }
    eprintln!(
        "codegen: {compiled} expressions compiled ({too_many} need more than 16 scratch words), \
         {linux_ok} pass the Linux rules as they are (all with compile_for), {pairs} (program, packet) pairs agree"
    );
    assert!(compiled > 1000, "{compiled}");
}

#[test]
fn libpcap_programs_survive_lift_and_codegen() {
    let (mut n, mut pairs) = (0, 0u64);
    for lt in LINKTYPES {
        let o = Oracle::new(lt, DEFAULT_SNAPLEN).unwrap();
        let packets = packets(lt);
        for e in expressions(&[lt], 150, 0xfeed)
            .into_iter()
            .filter(|(l, _)| *l == lt)
            .map(|(_, e)| e)
        {
            for optimize in [true, false] {
                let Ok(p) = o.compile(&e, optimize, 0) else {
                    continue;
                };
                let Ok(valid) = validate(&Program(from_c(p.instructions())), Dialect::Libpcap)
                else {
                    continue; // protochain
                };
                let back = compile(&lift(&valid)).unwrap_or_else(|err| panic!("{e}: {err}"));
                n += 1;
                for (pkt, wire) in &packets {
                    assert_eq!(interp::run(&back, pkt, *wire), p.run(pkt, *wire), "{e}");
                    pairs += 1;
                }
            }
        }
    }
    eprintln!("round trip: {n} libpcap programs lifted and recompiled, {pairs} pairs agree");
    assert!(n > 500);
}

#[test]
fn random_programs_survive_lift_and_codegen() {
    let mut rng = sift_testgen::Rng::new(5);
    let opcodes = valid_opcodes();
    for _ in 0..2_000 {
        let insns = random_valid_program(&mut rng, &opcodes);
        let valid = validate(&Program(insns.clone()), Dialect::Libpcap).unwrap();
        let back = compile(&lift(&valid)).unwrap();
        for (pkt, wire) in random_packets(&mut rng, 20) {
            assert_eq!(
                interp::run(&back, &pkt, wire),
                libpcap_filter(&insns, &pkt, wire),
                "{insns:?}"
            );
        }
    }
}

/// Instruction counts of sift's output for the optimized IR against libpcap's optimizer (a
/// report; `examples/size_report.rs` covers the whole suite). Run with `--nocapture`.
#[test]
fn instruction_counts_against_libpcap() {
    let exprs = [
        "ip",
        "tcp",
        "tcp port 80",
        "host 10.0.0.1",
        "src net 192.168.0.0/16",
        "udp dst port 53",
        "tcp port 80 or tcp port 443",
        "ip6",
        "ip6 and tcp",
        "arp",
        "vlan 100",
        "icmp[icmptype] = icmp-echo",
        "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0",
        "port 22 and not host 10.0.0.2",
        "ether host 00:11:22:33:44:55",
        "portrange 1000-2000",
        "less 100",
        "ip[2:2] - ((ip[0]&0xf)<<2) - ((tcp[12]&0xf0)>>2) != 0",
        "mpls 100 and ip",
        "host 10.0.0.1 or host 10.0.0.2 or host 10.0.0.3 or host 10.0.0.4",
    ];
    let o = Oracle::new(1, DEFAULT_SNAPLEN).unwrap();
    let (mut ours_total, mut theirs_total) = (0, 0);
    eprintln!(
        "{:<60} {:>6} {:>8}",
        "expression (EN10MB)", "sift", "libpcap"
    );
    for e in exprs {
        let f = sift::Filter::compile(e, 1, DEFAULT_SNAPLEN).unwrap();
        let ours = compile(f.optimized_ir()).unwrap().len();
        let theirs = o.compile(e, true, 0).unwrap().len();
        eprintln!("{e:<60} {ours:>6} {theirs:>8}");
        ours_total += ours;
        theirs_total += theirs;
    }
    eprintln!("{:<60} {ours_total:>6} {theirs_total:>8}", "total");
}
