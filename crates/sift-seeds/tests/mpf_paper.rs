//! The MPF paper's examples: figure 3 (TCP sessions that collapse into one program and one key
//! table) and appendix B (dispatching IP fragments through per-filter state), over Ethernet.

mod common;

use std::collections::BTreeSet;

use common::Engines;
use sift_ir::{Function, Inst};
use sift_seeds::mpf::{self, interp, EndpointId, Limits, Program, Session};
use sift_testgen::generate_packets;

/// This host: the destination address every session shares (`dst_addr`).
const DST: u32 = 0x0a00_0002;

fn figure_3(src: u32, sport: u16, dport: u16) -> String {
    format!(
        "\
; Figure 3 of the MPF paper: the filter of one TCP/IP session (Ethernet; this host is 10.0.0.2)
; Part (A): TCP/IP to this host, not a fragment
        ldh [12]                  ; A = ethertype
        jeq #0x800, l1, fail      ; if not IP, fail
l1:     ld [30]                   ; A = dst IP address
        jeq #{DST:#x}, l2, fail   ; if not to dst_addr, fail
l2:     ldb [23]                  ; A = protocol
        jeq #6, l3, fail          ; if not TCP, fail
l3:     ldh [20]                  ; A = flags | fragment offset
        and #0xbfff               ; clear the Don't Fragment bit
        jeq #0, l4, fail          ; if fragmented, fail
; Part (B): the session's identity into the scratch memory
l4:     ld [26]                   ; A = src IP address
        st M[0]
        ldxb 4*([14]&0xf)         ; X = offset to the TCP header
        ldh [x + 14]              ; A = src TCP port
        st M[1]
        ldh [x + 16]              ; A = dst TCP port
        st M[2]
; Part (C): compare M[0..2] with this session's keys
        ret_match_imm #ALL, 3
        key #{src:#x}             ; src_addr
        key #{sport}              ; src_port
        key #{dport}              ; dst_port
fail:   ret #0
"
    )
}

fn appendix_b(src: u32, sport: u16, dport: u16, timeout_ms: u32) -> String {
    format!(
        "\
; Appendix B of the MPF paper: a TCP session's filter that also dispatches IP fragments
        ldh [12]
        jeq #0x800, ip, fail           ; if (P[proto] == IP)
ip:     ld [30]
        jeq #{DST:#x}, me, fail        ; not to me: FAILURE
me:     ldb [23]
        jeq #6, tcp, fail              ; not TCP: FAILURE
tcp:    ldh [20]
        jset #0x1fff, later, first     ; fragment offset != 0: 2nd or later fragment
first:  ld [26]
        st M[0]                        ; M[0] = P[src_addr]
        ldxb 4*([14]&0xf)
        ldh [x + 14]
        st M[1]                        ; M[1] = P[src_port]
        ldh [x + 16]
        st M[2]                        ; M[2] = P[dst_port]
        ldh [20]
        jset #0x2000, first_frag, whole ; more fragments: the 1st fragment
first_frag:
        jmp_match_imm #3, register, fail
        key #{src:#x}
        key #{sport}
        key #{dport}
register:
        ldh [18]
        st M[1]                        ; M[1] = P[fragment_ID]
        register_data #2, #{timeout_ms}
        ret #ALL
whole:  ret_match_imm #3, #ALL         ; not fragmented
        key #{src:#x}
        key #{sport}
        key #{dport}
later:  ld [26]
        st M[0]                        ; M[0] = P[src_addr]
        ldh [18]
        st M[1]                        ; M[1] = P[fragment_ID]
        ret_match_data #2, #ALL        ; registered: deliver
        postpone #{timeout_ms}         ; otherwise wait for the 1st fragment
fail:   ret #0
"
    )
}

/// An Ethernet/IPv4 packet; with `frag_offset == 0` it carries a TCP header.
#[derive(Clone, Copy)]
struct Ip {
    src: u32,
    dst: u32,
    proto: u8,
    ihl: u8,
    id: u16,
    /// Flags and fragment offset (0x2000 = more fragments, 0x4000 = don't fragment).
    frag: u16,
    sport: u16,
    dport: u16,
}

impl Ip {
    fn tcp(src: u32, sport: u16, dport: u16) -> Ip {
        Ip {
            src,
            dst: DST,
            proto: 6,
            ihl: 5,
            id: 0x1234,
            frag: 0,
            sport,
            dport,
        }
    }

    fn bytes(self) -> Vec<u8> {
        let mut p = vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00];
        let options = 4 * usize::from(self.ihl.max(5) - 5);
        let payload = 28;
        let total = (4 * usize::from(self.ihl.max(5)) + payload) as u16;
        p.push(0x40 | self.ihl);
        p.push(0);
        p.extend(total.to_be_bytes());
        p.extend(self.id.to_be_bytes());
        p.extend(self.frag.to_be_bytes());
        p.extend([64, self.proto, 0, 0]);
        p.extend(self.src.to_be_bytes());
        p.extend(self.dst.to_be_bytes());
        p.extend(std::iter::repeat_n(1, options));
        p.extend(self.sport.to_be_bytes());
        p.extend(self.dport.to_be_bytes());
        p.extend([0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        p.extend(*b"payload!");
        p
    }
}

/// The constants where two functions differ, if they differ in nothing else.
fn constant_differences(a: &Function, b: &Function) -> Option<Vec<(u32, u32)>> {
    if a.blocks != b.blocks || a.values.len() != b.values.len() {
        return None;
    }
    let mut out = Vec::new();
    for (x, y) in a.values.iter().zip(&b.values) {
        match (x, y) {
            (Inst::Const(p), Inst::Const(q)) if p != q => out.push((*p, *q)),
            _ if x == y => {}
            _ => return None,
        }
    }
    Some(out)
}

fn sessions(n: u32) -> Vec<(u32, u16, u16)> {
    (0..n)
        .map(|i| {
            (
                0xc00c_4501 + i / 2,
                1024 + i as u16,
                [4321, 80, 443][i as usize % 3],
            )
        })
        .collect()
}

#[test]
fn figure_3_programs_differ_only_in_their_keys() {
    let sessions = sessions(100);
    let programs: Vec<Program> = sessions
        .iter()
        .map(|&(s, sp, dp)| mpf::parse(&figure_3(s, sp, dp)).unwrap())
        .collect();
    let first = mpf::lift(&programs[0]).unwrap();
    for (p, &(s, sp, dp)) in programs.iter().zip(&sessions) {
        assert_eq!(p.shape(), programs[0].shape());
        assert_eq!(p.keys(), vec![s, u32::from(sp), u32::from(dp)]);
        let f = mpf::lift(p).unwrap();
        let diff = constant_differences(&first, &f).expect("same instruction sequence");
        // Every differing constant is one of the keys, in the key order.
        let (mine, theirs): (Vec<u32>, Vec<u32>) = diff.into_iter().unzip();
        assert!(mine.iter().all(|k| programs[0].keys().contains(k)));
        assert!(theirs.iter().all(|k| p.keys().contains(k)), "{theirs:?}");
    }
    println!(
        "{} figure-3 programs: one shape, lifted IR of {} values differing only in key constants",
        programs.len(),
        first.values.len()
    );
}

#[test]
fn figure_3_sessions_dispatch_to_their_own_filter() {
    let sessions = sessions(60);
    let programs: Vec<Program> = sessions
        .iter()
        .map(|&(s, sp, dp)| mpf::parse(&figure_3(s, sp, dp)).unwrap())
        .collect();
    let mut engines: Vec<Engines> = programs
        .iter()
        .map(|p| Engines::new(&mpf::lift(p).unwrap()))
        .collect();
    let mut group = Session::new(Limits::default());
    for p in &programs {
        group.install(p).unwrap();
    }
    // Each session's packets, variants that must be refused, and unrelated traffic.
    let mut packets: Vec<(Vec<u8>, Option<usize>)> = Vec::new();
    for (i, &(s, sp, dp)) in sessions.iter().enumerate() {
        let base = Ip::tcp(s, sp, dp);
        packets.push((base.bytes(), Some(i)));
        packets.push((Ip { ihl: 7, ..base }.bytes(), Some(i)));
        packets.push((
            Ip {
                frag: 0x4000,
                ..base
            }
            .bytes(),
            Some(i),
        ));
        packets.push((
            Ip {
                frag: 0x2000,
                ..base
            }
            .bytes(),
            None,
        ));
        packets.push((
            Ip {
                frag: 0x0010,
                ..base
            }
            .bytes(),
            None,
        ));
        packets.push((
            Ip {
                dst: DST + 1,
                ..base
            }
            .bytes(),
            None,
        ));
        packets.push((Ip { proto: 17, ..base }.bytes(), None));
        packets.push((
            Ip {
                sport: sp ^ 0x8000,
                ..base
            }
            .bytes(),
            None,
        ));
        packets.push((base.bytes()[..37].to_vec(), None));
    }
    for p in generate_packets(1, 1994, 1500) {
        packets.push((p.data, None));
    }
    let mut delivered = 0;
    for (n, (pkt, owner)) in packets.iter().enumerate() {
        let wire = pkt.len() as u32;
        let got: BTreeSet<u32> = group
            .filter(pkt, wire, n as u64)
            .iter()
            .map(|d| d.endpoint.0)
            .collect();
        let mut alone = BTreeSet::new();
        for (i, (p, e)) in programs.iter().zip(engines.iter_mut()).enumerate() {
            let v = e.run(pkt, wire);
            assert_eq!(v, interp::run(p, pkt, wire), "reference vs IR, session {i}");
            if v != 0 {
                alone.insert(i as u32);
            }
        }
        assert_eq!(got, alone, "collapsed vs separate filters on packet {n}");
        if let Some(i) = owner {
            assert_eq!(got, BTreeSet::from([*i as u32]), "packet {n}");
        }
        delivered += got.len();
    }
    println!(
        "{} packets, {} sessions collapsed into one program: {delivered} deliveries, each to the \
         filter that accepts it alone (4 engines per filter agreeing)",
        packets.len(),
        sessions.len()
    );
    assert_eq!(delivered, 3 * sessions.len());
}

#[test]
fn figure_3_agrees_with_libpcap() {
    let (s, sp, dp) = (0xc00c_4501, 1234, 4321);
    let program = mpf::parse(&figure_3(s, sp, dp)).unwrap();
    let mut engines = Engines::new(&mpf::lift_with(&program, 262144).unwrap());
    let expr = "ip dst 10.0.0.2 and ip src 192.12.69.1 and ip proto 6 and ip[6:2] & 0xbfff = 0 \
                and tcp src port 1234 and tcp dst port 4321";
    let oracle = sift_oracle::Oracle::new(1, 262144).unwrap();
    let pcap = oracle.compile(expr, true, 0).unwrap();
    let base = Ip::tcp(s, sp, dp);
    let mut packets = Vec::new();
    for ihl in [4, 5, 6, 15] {
        for frag in [0, 0x4000, 0x2000, 0x0001, 0x8000] {
            for proto in [6, 17] {
                let p = Ip {
                    ihl,
                    frag,
                    proto,
                    ..base
                }
                .bytes();
                for cut in [p.len(), 40, 38, 37, 34, 30, 23, 13] {
                    packets.push(p[..cut.min(p.len())].to_vec());
                }
            }
        }
    }
    packets.extend(generate_packets(1, 3, 2000).into_iter().map(|p| p.data));
    let mut accepted = 0;
    for pkt in &packets {
        let wire = pkt.len() as u32;
        let ours = engines.run(pkt, wire);
        assert_eq!(
            ours != 0,
            pcap.run(pkt, wire) != 0,
            "figure 3 vs libpcap on {pkt:02x?}"
        );
        accepted += usize::from(ours != 0);
    }
    println!(
        "figure 3 vs libpcap `{expr}`: {} packets, {accepted} accepted by both",
        packets.len()
    );
    assert!(accepted >= 10);
}

/// Fragments of one datagram: the first carries the TCP header.
fn fragments(src: u32, sport: u16, dport: u16, id: u16) -> [Vec<u8>; 3] {
    let first = Ip {
        id,
        frag: 0x2000,
        ..Ip::tcp(src, sport, dport)
    };
    let middle = Ip {
        frag: 0x2000 | 6,
        sport: 0xdead,
        dport: 0xbeef,
        ..first
    };
    let last = Ip { frag: 12, ..middle };
    [first.bytes(), middle.bytes(), last.bytes()]
}

const TIMEOUT: u32 = 2000;

fn appendix_b_session(n: u32) -> (Session, Vec<(u32, u16, u16)>) {
    let mut s = Session::new(Limits::default());
    let sessions = sessions(n);
    for &(a, sp, dp) in &sessions {
        let text = appendix_b(a, sp, dp, TIMEOUT);
        let p = mpf::parse(&text).unwrap_or_else(|e| panic!("{}", e.render(&text)));
        s.install(&p).unwrap();
    }
    (s, sessions)
}

fn to(deliveries: &[mpf::Delivery]) -> Vec<(u64, u32)> {
    deliveries
        .iter()
        .map(|d| (d.packet, d.endpoint.0))
        .collect()
}

#[test]
fn appendix_b_fragments_in_order() {
    let (mut s, sessions) = appendix_b_session(5);
    let (a, sp, dp) = sessions[3];
    let [first, middle, last] = fragments(a, sp, dp, 77);
    assert_eq!(to(&s.filter(&first, 62, 0)), vec![(0, 3)]);
    assert_eq!(to(&s.filter(&middle, 62, 1)), vec![(1, 3)]);
    assert_eq!(to(&s.filter(&last, 62, 2)), vec![(2, 3)]);
    // An unfragmented packet of the session goes through ret_match_imm.
    assert_eq!(
        to(&s.filter(&Ip::tcp(a, sp, dp).bytes(), 62, 3)),
        vec![(3, 3)]
    );
    let st = s.stats();
    assert_eq!((st.registered, st.postponed, s.pending()), (1, 0, 0));
}

#[test]
fn appendix_b_out_of_order_fragments_are_postponed_then_delivered() {
    let (mut s, sessions) = appendix_b_session(5);
    let (a, sp, dp) = sessions[1];
    let [first, middle, last] = fragments(a, sp, dp, 78);
    assert!(s.filter(&last, 62, 0).is_empty());
    assert!(s.filter(&middle, 62, 5).is_empty());
    assert_eq!(s.pending(), 2);
    // The first fragment registers the datagram; both waiting fragments follow it, in order.
    assert_eq!(to(&s.filter(&first, 62, 10)), vec![(2, 1), (0, 1), (1, 1)]);
    assert_eq!(s.pending(), 0);
    let st = s.stats();
    assert_eq!((st.postponed, st.released, st.expired), (2, 2, 0));
}

#[test]
fn appendix_b_duplicates_are_delivered_again() {
    let (mut s, sessions) = appendix_b_session(3);
    let (a, sp, dp) = sessions[2];
    let [first, middle, _] = fragments(a, sp, dp, 79);
    s.filter(&first, 62, 0);
    assert_eq!(to(&s.filter(&middle, 62, 1)), vec![(1, 2)]);
    assert_eq!(to(&s.filter(&middle, 62, 2)), vec![(2, 2)]);
    // A repeated first fragment renews the registration rather than adding one.
    assert_eq!(to(&s.filter(&first, 62, 1500)), vec![(3, 2)]);
    assert_eq!((s.entries(), s.stats().registered), (1, 1));
    assert_eq!(to(&s.filter(&middle, 62, 3000)), vec![(4, 2)]); // 1500 + 2000 > 3000
    assert!(s.filter(&middle, 62, 3500).is_empty()); // expired: waits again
    assert_eq!(s.stats().entries_expired, 1);
}

#[test]
fn appendix_b_missing_first_fragment_times_out() {
    let (mut s, sessions) = appendix_b_session(3);
    let (a, sp, dp) = sessions[0];
    let [first, middle, last] = fragments(a, sp, dp, 80);
    s.filter(&middle, 62, 0);
    s.filter(&last, 62, 100);
    // Other traffic (another session's unfragmented packets) does not release them.
    let (b, bsp, bdp) = sessions[1];
    assert_eq!(
        to(&s.filter(&Ip::tcp(b, bsp, bdp).bytes(), 62, 1000)),
        vec![(2, 1)]
    );
    assert_eq!(s.pending(), 2);
    s.expire(2000); // the first one's deadline
    assert_eq!((s.pending(), s.stats().expired), (1, 1));
    s.expire(2100);
    assert_eq!((s.pending(), s.stats().expired), (0, 2));
    // The first fragment, too late: only itself is delivered.
    assert_eq!(to(&s.filter(&first, 62, 2200)), vec![(3, 0)]);
    assert_eq!(s.stats().released, 0);
}

#[test]
fn appendix_b_interleaved_datagrams_and_queue_limit() {
    let limits = Limits {
        max_postponed: 3,
        ..Limits::default()
    };
    let mut s = Session::new(limits);
    let sessions = sessions(4);
    for &(a, sp, dp) in &sessions {
        s.install(&mpf::parse(&appendix_b(a, sp, dp, TIMEOUT)).unwrap())
            .unwrap();
    }
    // Sessions 0 and 1 share a source address; the fragment ID tells their datagrams apart.
    assert_eq!(sessions[0].0, sessions[1].0);
    let f0 = fragments(sessions[0].0, sessions[0].1, sessions[0].2, 500);
    let f1 = fragments(sessions[1].0, sessions[1].1, sessions[1].2, 501);
    let f2 = fragments(sessions[2].0, sessions[2].1, sessions[2].2, 500);
    let mut all = Vec::new();
    for (t, pkt) in [
        &f0[1], &f1[2], &f2[1], &f1[1], &f1[0], &f0[0], &f0[2], &f2[0],
    ]
    .into_iter()
    .enumerate()
    {
        all.extend(to(&s.filter(pkt, 62, t as u64)));
    }
    // Four later fragments arrived before their first: the queue holds three, the oldest (f0[1])
    // was dropped.
    assert_eq!(s.stats().dropped, 1);
    let for_endpoint = |e: u32| -> Vec<u64> {
        let mut v: Vec<u64> = all.iter().filter(|d| d.1 == e).map(|d| d.0).collect();
        v.sort();
        v
    };
    assert_eq!(for_endpoint(1), vec![1, 3, 4]);
    assert_eq!(for_endpoint(0), vec![5, 6]);
    assert_eq!(for_endpoint(2), vec![2, 7]);
    assert_eq!(for_endpoint(3), Vec::<u64>::new());
    assert_eq!(s.pending(), 0);
}

#[test]
fn appendix_b_is_stateful_and_refused_by_the_lifting() {
    let text = appendix_b(1, 2, 3, 10);
    let p = mpf::parse(&text).unwrap();
    let e = mpf::lift(&p).unwrap_err();
    assert!(
        e.render(&text).contains("register_data"),
        "{}",
        e.render(&text)
    );
    let _ = EndpointId(0);
}
