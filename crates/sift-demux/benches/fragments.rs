//! The cost of fragment dispatch: ns/packet of `FragmentDemux::dispatch` against the plain
//! `LocalReader` match, with 1,000 per-connection filters (`udp`), on unfragmented packets
//! (MPF's claim: essentially no overhead for them), on fragmented datagrams in order (first
//! fragment, then three later ones: state lookups) and in reverse (three postponed, released by
//! the first). Run with `cargo bench -p sift-demux --bench fragments`.

use std::hint::black_box;
use std::time::Instant;

use sift_demux::{Delivery, Demux, FragmentConfig, FragmentDemux, Matches};

const CONNS: u32 = 1000;

fn frame(conn: u32, id: u16, offset: u16, more: bool) -> Vec<u8> {
    let mut p = vec![0u8; 12];
    p.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 60]);
    p.extend_from_slice(&id.to_be_bytes());
    p.extend_from_slice(&(offset | if more { 0x2000 } else { 0 }).to_be_bytes());
    p.extend_from_slice(&[64, 17, 0, 0, 10, 0, 0, 1]);
    p.extend_from_slice(&(0x0a01_0000 + conn).to_be_bytes());
    p.extend_from_slice(&4000u16.to_be_bytes());
    p.extend_from_slice(&(1000 + (conn % 60000) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 40, 0, 0]);
    p.resize(14 + 60, 0xab);
    p
}

fn main() {
    let mut demux = Demux::new();
    {
        let mut batch = demux.batch();
        for c in 0..CONNS {
            let a = 0x0a01_0000 + c;
            let e = format!(
                "ip src 10.0.0.1 and ip dst {}.{}.{}.{} and udp src port 4000 and udp dst port {}",
                a >> 24,
                (a >> 16) & 255,
                (a >> 8) & 255,
                a & 255,
                1000 + c
            );
            let f = sift::compile_ir(&e, &sift::Options::new(1, 262144)).unwrap();
            batch.insert(&f, 0, Delivery::Exclusive).unwrap();
        }
    }
    let reader = demux.reader();
    let whole: Vec<Vec<u8>> = (0..CONNS).map(|c| frame(c, c as u16, 0, false)).collect();
    let mut datagrams: Vec<Vec<u8>> = Vec::new();
    for (i, c) in (0..CONNS).cycle().take(4 * CONNS as usize).enumerate() {
        let id = i as u16;
        datagrams.push(frame(c, id, 0, true));
        for k in 1..4u16 {
            datagrams.push(frame(c, id, 8 * k, k < 3));
        }
    }
    let reversed: Vec<Vec<u8>> = datagrams
        .chunks(4)
        .flat_map(|d| d.iter().rev().cloned())
        .collect();
    let rounds = 200;
    let mut m = Matches::new();

    let mut local = reader.local();
    let plain = time(rounds * whole.len(), || {
        for _ in 0..rounds {
            for p in &whole {
                local.match_packet(black_box(p), p.len() as u32, &mut m);
                black_box(m.exclusive());
            }
        }
    });
    let mut run = |packets: &[Vec<u8>]| {
        // 1 ms: a round (16,000 packets 1 us apart) outlives every datagram of the previous
        // one, so ids reused by the next round start afresh.
        let config = FragmentConfig {
            timeout_ns: 1_000_000,
            ..FragmentConfig::default()
        };
        let mut frag: FragmentDemux<u32> = FragmentDemux::new(&reader, 1, config).unwrap();
        let mut now = 0u64;
        let mut delivered = 0usize;
        let ns = time(rounds * packets.len(), || {
            for _ in 0..rounds {
                for p in packets {
                    now += 1000;
                    let o = frag.dispatch(black_box(p), p.len() as u32, now, || 0, &mut m);
                    delivered += usize::from(o.delivers_now() && m.exclusive().is_some());
                    delivered += frag.releases().count();
                }
            }
        });
        assert_eq!(
            delivered,
            rounds * packets.len(),
            "every packet reaches its filter"
        );
        let st = frag.stats();
        assert_eq!((st.repeated_first, st.dropped()), (0, 0));
        (ns, st.postponed)
    };
    let (unfragmented, _) = run(&whole);
    let (in_order, held) = run(&datagrams);
    assert_eq!(held, 0);
    let (backwards, held) = run(&reversed);
    assert_eq!(held as usize, rounds * reversed.len() * 3 / 4);
    println!("{CONNS} filters; ns/packet");
    println!("  match_packet, whole packets        {plain:7.1}");
    println!("  dispatch, whole packets            {unfragmented:7.1}");
    println!("  dispatch, fragments in order       {in_order:7.1}");
    println!("  dispatch, fragments last-to-first  {backwards:7.1}");
}

fn time(iters: usize, f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_nanos() as f64 / iters as f64
}
