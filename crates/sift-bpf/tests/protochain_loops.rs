//! `protochain` as a classic BPF loop: sift's loop code (libpcap dialect) run by sift's
//! interpreter and by libpcap's `bpf_filter` agrees with the IR interpreter, over generated
//! packets with 0..40 extension headers, AH chains (cyclic ones included) and every truncation;
//! the kernel form (unrolled) agrees on chains of at most 32 headers; libpcap's own protochain
//! programs pass sift's validator, lift to `Inst::Protochain` and agree with libpcap.
//!
//! Packets whose walk is a cycle never go to `bpf_filter` (it would never return): they are
//! exactly those on which sift's interpreter reports [`interp::Endless`].

mod common;

use common::*;
use sift_bpf::{compile, compile_for, interp, lift, validate, Dialect, Program, ValidProgram};
use sift_ir::{Cache, Function, Interpreter};
use sift_oracle::{Oracle, DEFAULT_SNAPLEN};
use sift_testgen::Rng;

const EXPRESSIONS: [&str; 8] = [
    "ip6 protochain 6",
    "protochain 17",
    "ip protochain 51",
    "ip6 protochain 44 and tcp",
    "protochain 6 or udp port 53",
    "ip6 protochain 59",
    "ip6 protochain 0 or ip protochain 6",
    "not ip6 protochain 17",
];

/// Link-layer header for `lt` (Ethernet with an optional VLAN tag, raw IP, Linux SLL, SLL2).
fn link_header(lt: u32, vlan: bool, ethertype: u16) -> Vec<u8> {
    let et = ethertype.to_be_bytes();
    match lt {
        1 => {
            let mut h = vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
            if vlan {
                h.extend([0x81, 0x00, 0x00, 0x07]);
            }
            h.extend(et);
            h
        }
        101 => vec![],
        113 => {
            let mut h = vec![0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0];
            h.extend(et);
            h
        }
        276 => {
            let mut h = et.to_vec();
            h.extend([0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0]);
            h
        }
        _ => unreachable!("link type {lt}"),
    }
}

const EXTENSIONS: [u8; 4] = [0, 60, 43, 44];
const LAST: [u8; 6] = [6, 17, 59, 1, 58, 132];

/// A header chain after a network header of `first_offset` bytes: `headers` headers (IPv6
/// extensions when `ip6`, and AH headers) laid out where libpcap's walk looks for them, ending in
/// a random transport protocol; sometimes an AH header points back to an earlier header (a
/// cycle). Returns (first protocol, bytes after the network header).
fn chain(rng: &mut Rng, ip6: bool, first_offset: usize, headers: usize) -> (u8, Vec<u8>) {
    let mut body = vec![0u8; 0];
    let mut offsets = vec![];
    let mut protos = vec![];
    let mut off = first_offset;
    // When the last AH header points back to an earlier header: that header's protocol.
    let mut back_to = None;
    for i in 0..headers {
        let ah = !ip6 || rng.chance(1, 4);
        let proto = if ah { 51 } else { *rng.pick(&EXTENSIONS) };
        protos.push(proto);
        offsets.push(off);
        let need = off + 8 - first_offset;
        if body.len() < need {
            body.resize(need, 0);
        }
        let last = i + 1 == headers;
        if ah {
            // The walk goes to (len + 2) * 4 from the network header.
            let cycle = !last && rng.chance(1, 12) && !offsets.is_empty();
            let next = if cycle {
                let j = rng.index(offsets.len());
                back_to = Some(protos[j]);
                offsets[j]
            } else {
                let min = (off + 8).div_ceil(4) * 4;
                min + 4 * rng.index(3)
            };
            if next / 4 < 2 || next / 4 - 2 > 255 {
                break;
            }
            body[off - first_offset + 1] = (next / 4 - 2) as u8;
            if cycle {
                break;
            }
            off = next;
        } else {
            let len = rng.index(3);
            body[off - first_offset + 1] = len as u8;
            off += (len + 1) * 8;
        }
    }
    // Next-header bytes: each header names the following one.
    for (i, &o) in offsets.iter().enumerate() {
        let next = protos
            .get(i + 1)
            .copied()
            .or(back_to)
            .unwrap_or(*rng.pick(&LAST));
        body[o - first_offset] = next;
    }
    let end = off + 20 - first_offset;
    if body.len() < end {
        body.resize(end, 0);
    }
    let first = protos.first().copied().unwrap_or(*rng.pick(&LAST));
    (first, body)
}

fn packet(rng: &mut Rng, lt: u32) -> Vec<u8> {
    let ip6 = rng.chance(1, 2);
    let vlan = lt == 1 && rng.chance(1, 4);
    let headers = match rng.below(4) {
        0 => 0,
        1 => rng.index(4),
        2 => rng.index(41),
        _ => 28 + rng.index(8),
    };
    let mut p = link_header(lt, vlan, if ip6 { 0x86dd } else { 0x0800 });
    let (first, body) = if ip6 {
        let (first, body) = chain(rng, true, 40, headers);
        let mut h = vec![0x60, 0, 0, 0, 0, 0, first, 64];
        h.extend([0u8; 32]);
        (h, body)
    } else {
        let ihl = if rng.chance(1, 5) { 6 } else { 5 };
        let (first, body) = chain(rng, false, ihl * 4, headers.min(12));
        let mut h = vec![0x40 | ihl as u8, 0, 0, 0, 0, 0, 0, 0, 64, first, 0, 0];
        h.extend([10, 0, 0, 1, 10, 0, 0, 2]);
        h.resize(ihl * 4, 0);
        (h, body)
    };
    p.extend(first);
    p.extend(body);
    // Sometimes a mutated byte in the chain (random lengths and protocols, new cycles).
    if rng.chance(1, 4) && p.len() > 2 {
        let i = rng.index(p.len());
        p[i] = rng.byte();
    }
    p
}

struct Engines {
    expr: String,
    ir: Interpreter,
    libpcap_form: ValidProgram,
    linux_form: ValidProgram,
}

fn engines(expr: &str, lt: u32) -> Engines {
    let filter = sift::Filter::compile(expr, lt, DEFAULT_SNAPLEN).unwrap();
    let f: &Function = filter.optimized_ir();
    let libpcap_form = compile(f).unwrap_or_else(|e| panic!("{expr}: {e}"));
    assert!(
        !libpcap_form.loops().is_empty(),
        "{expr}: no loop\n{}",
        sift_bpf::disasm::disassemble(&libpcap_form.to_program())
    );
    assert!(
        libpcap_validate(libpcap_form.insns()),
        "{expr}: bpf_validate"
    );
    let linux_form = compile_for(f, Dialect::Linux).unwrap_or_else(|e| panic!("{expr}: {e}"));
    assert!(linux_form.loops().is_empty());
    Engines {
        expr: expr.to_string(),
        ir: Interpreter::new(f.clone()).unwrap(),
        libpcap_form,
        linux_form,
    }
}

/// The longest walk the packet's chain takes on `pkt` (for the kernel form's 32-header bound):
/// a walk of the IR on the IPv6 chain with no target, counted by hand.
fn chain_headers(pkt: &[u8], lt: u32) -> usize {
    let vlan = lt == 1 && pkt.get(12..14) == Some(&[0x81, 0x00]);
    let base = match lt {
        1 if vlan => 18,
        1 => 14,
        101 => 0,
        113 => 16,
        _ => 20,
    };
    let Some(&v) = pkt.get(base) else { return 0 };
    let (mut proto, mut off) = if v >> 4 == 6 {
        (pkt.get(base + 6).copied().unwrap_or(0), 40usize)
    } else {
        (
            pkt.get(base + 9).copied().unwrap_or(0),
            usize::from(v & 15) * 4,
        )
    };
    let mut n = 0;
    while (EXTENSIONS.contains(&proto) && v >> 4 == 6) || proto == 51 {
        n += 1;
        if n > 64 {
            break;
        }
        let (Some(&next), Some(&len)) = (pkt.get(base + off), pkt.get(base + off + 1)) else {
            break;
        };
        off = if proto == 51 {
            (usize::from(len) + 2) * 4
        } else {
            off + (usize::from(len) + 1) * 8
        };
        proto = next;
    }
    n
}

#[test]
fn loop_code_agrees_with_ir_and_bpf_filter_on_every_truncation() {
    let (mut runs, mut endless, mut by_libpcap, mut accepted) = (0u64, 0u64, 0u64, 0u64);
    for lt in [1u32, 101, 113, 276] {
        let mut exprs: Vec<String> = EXPRESSIONS.iter().map(|e| e.to_string()).collect();
        if lt == 1 {
            exprs.push("vlan and ip6 protochain 6".into());
            exprs.push("vlan and protochain 17 or ip6 protochain 60".into());
        }
        let all: Vec<Engines> = exprs.iter().map(|e| engines(e, lt)).collect();
        let mut rng = Rng::new(0x9c0c4a1 ^ u64::from(lt));
        for _ in 0..120 {
            let full = packet(&mut rng, lt);
            let long_chain = chain_headers(&full, lt) > 32;
            for cut in 0..=full.len() {
                let pkt = &full[..cut];
                let wire = full.len() as u32;
                for e in &all {
                    let want = e.ir.run(&mut Cache::new(), pkt, wire);
                    let got = interp::try_run(&e.libpcap_form, pkt, wire);
                    runs += 1;
                    accepted += u64::from(want != 0);
                    match got {
                        Ok(v) => {
                            assert_eq!(v, want, "{} on {pkt:02x?}", e.expr);
                            let theirs = libpcap_filter_valid(&e.libpcap_form, pkt, wire);
                            assert_eq!(theirs, want, "{} (bpf_filter) on {pkt:02x?}", e.expr);
                            by_libpcap += 1;
                        }
                        Err(_) => {
                            // A cycle: the IR rejects, libpcap would never return.
                            assert_eq!(want, 0, "{} on {pkt:02x?}", e.expr);
                            assert_eq!(interp::run(&e.libpcap_form, pkt, wire), 0);
                            endless += 1;
                        }
                    }
                    if !long_chain {
                        let linux = interp::run(&e.linux_form, pkt, wire);
                        assert_eq!(linux, want, "{} (linux form) on {pkt:02x?}", e.expr);
                    }
                }
            }
        }
    }
    eprintln!(
        "protochain loops: {runs} runs agree ({accepted} accepted), {by_libpcap} also in \
         bpf_filter, {endless} endless walks rejected"
    );
    assert!(endless > 0 && accepted > 1000, "{endless} {accepted}");
}

#[test]
fn libpcap_protochain_programs_validate_lift_and_agree() {
    let mut lifted = 0;
    for lt in [1u32, 101, 113, 276] {
        let o = Oracle::new(lt, DEFAULT_SNAPLEN).unwrap();
        let mut rng = Rng::new(0x11f7 ^ u64::from(lt));
        let packets: Vec<Vec<u8>> = (0..150).map(|_| packet(&mut rng, lt)).collect();
        for e in EXPRESSIONS {
            let theirs = o.compile(e, true, 0).unwrap();
            assert!(theirs.has_backward_jumps(), "{e}");
            let insns = from_c(theirs.instructions());
            let valid = validate(&Program(insns.clone()), Dialect::Libpcap)
                .unwrap_or_else(|err| panic!("{e}: {err}"));
            assert!(validate(&Program(insns), Dialect::Linux).is_err());
            let f = lift(&valid);
            sift_ir::verify(&f).unwrap_or_else(|err| panic!("{e}: {err}\n{f}"));
            let ir = Interpreter::new(f.clone()).unwrap();
            let again = compile(&f).unwrap_or_else(|err| panic!("{e}: {err}\n{f}"));
            for full in &packets {
                for cut in [full.len(), full.len() / 2, full.len().saturating_sub(3)] {
                    let pkt = &full[..cut];
                    let wire = full.len() as u32;
                    let want = ir.run(&mut Cache::new(), pkt, wire);
                    let libpcap = theirs.run_bounded(pkt, wire, 1 << 22);
                    // libpcap's loop never ends exactly where the lifted walk rejects a cycle.
                    match libpcap {
                        Some(v) => assert_eq!(v, want, "{e} on {pkt:02x?}\n{f}"),
                        None => assert_eq!(want, 0, "{e} on {pkt:02x?}"),
                    }
                    assert_eq!(interp::run(&valid, pkt, wire), want, "{e} (sift interp)");
                    assert_eq!(interp::run(&again, pkt, wire), want, "{e} (recompiled)");
                }
            }
            lifted += 1;
        }
    }
    assert_eq!(lifted, 4 * EXPRESSIONS.len());
}

#[test]
fn loops_are_smaller_than_libpcaps() {
    for (lt, e) in [
        (1, "ip6 protochain 6"),
        (1, "ip protochain 51"),
        (1, "protochain 17"),
    ] {
        let filter = sift::Filter::compile(e, lt, DEFAULT_SNAPLEN).unwrap();
        let ours = compile(filter.optimized_ir()).unwrap().len();
        let theirs = Oracle::new(lt, DEFAULT_SNAPLEN)
            .unwrap()
            .compile(e, true, 0)
            .unwrap()
            .len();
        assert!(ours < theirs, "{e}: sift {ours}, libpcap {theirs}");
    }
}
