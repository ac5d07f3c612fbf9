//! The core proof: for random filter sets under random insert/remove sequences, the
//! demultiplexer delivers every packet exactly as running every installed filter alone (the IR
//! interpreter) in priority order does, with native and with interpreted extractors.

mod common;

use common::*;
use sift_demux::{Delivery, Demux, FilterId, Matches, Placement};
use sift_ir::{Cache, Interpreter};
use sift_testgen::{generate_packets, random_expressions, truncate_packet, Packet, Rng};

struct Pool {
    filters: Vec<(String, sift_ir::Function)>,
    packets: Vec<Packet>,
}

fn pool(seed: u64) -> Pool {
    let mut rng = Rng::new(seed);
    let mut filters = Vec::new();
    let mut packets = generate_packets(ETHERNET, seed, 300);
    for i in 0..60 {
        let c = Conn::random(&mut rng, i % 4 == 3);
        let f = compile(&c.expr()).expect("connection filters compile");
        filters.push((c.expr(), f));
        // Packets that hit it, and near misses: IP options, fragments, truncations.
        let options = if rng.chance(1, 4) { 2 } else { 0 };
        let frag = *rng.pick(&[0u16, 0, 0, 0x4000, 0x2000, 0x0010]);
        let full = Packet::new(c.packet(options, frag, rng.index(20)));
        packets.push(truncate_packet(&mut rng, &full));
        packets.push(full);
        let mut other = c.clone();
        other.dport = other.dport.wrapping_add(1);
        packets.push(Packet::new(other.packet(0, 0, 0)));
    }
    let exprs = random_expressions(seed, ETHERNET, 120);
    for e in exprs {
        if let Some(f) = compile(&e) {
            filters.push((e, f));
        }
    }
    // Some filters as the optimizer leaves them (different graphs, same meaning).
    for (_, f) in filters.iter_mut() {
        if rng.chance(1, 3) {
            sift_opt::optimize(f);
        }
    }
    Pool { filters, packets }
}

#[derive(Default)]
struct Tally {
    checks: usize,
    delivered: usize,
    keyed: usize,
    residual: usize,
    max_shapes: usize,
    native_shapes: usize,
}

fn run_seed(seed: u64, tally: &mut Tally) {
    let pool = pool(seed);
    let mut rng = Rng::new(seed ^ 0xdead_beef);
    // Odd seeds: native extractors where the host has a JIT; even seeds: interpreted.
    let mut demux = if !seed.is_multiple_of(2) {
        Demux::new()
    } else {
        Demux::interpreted()
    };
    let reader = demux.reader();
    let mut local = reader.local();
    let mut installed: Vec<Installed> = Vec::new();
    let mut m = Matches::new();
    let mut cache = Cache::new();
    for step in 0..240 {
        if installed.is_empty() || rng.chance(7, 10) {
            let (expr, f) = rng.pick(&pool.filters);
            let priority = rng.range(0, 4) as i32 - 1;
            let delivery = if rng.chance(3, 10) {
                Delivery::Copy
            } else {
                Delivery::Exclusive
            };
            let id = demux
                .insert(f, priority, delivery)
                .unwrap_or_else(|e| panic!("{expr}: {e}"));
            match demux.placement(id) {
                Some(Placement::Keyed { .. }) => tally.keyed += 1,
                _ => tally.residual += 1,
            }
            installed.push(Installed {
                id,
                priority,
                delivery,
                interp: Interpreter::new(f.clone()).unwrap(),
            });
        } else {
            let i = rng.index(installed.len());
            let gone = installed.swap_remove(i);
            assert!(demux.remove(gone.id));
            assert!(!demux.remove(gone.id));
        }
        let stats = demux.stats();
        tally.max_shapes = tally.max_shapes.max(stats.shapes);
        tally.native_shapes += stats.native_shapes;
        if seed.is_multiple_of(2) {
            assert_eq!(stats.native_shapes, 0);
        }
        if step % 12 != 11 {
            continue;
        }
        for p in &pool.packets {
            for all in [false, true] {
                let (want, winner) = oracle(&installed, &p.data, p.wire_len, all, &mut cache);
                if all {
                    reader.match_all(&p.data, p.wire_len, &mut m);
                } else if step % 24 == 11 {
                    local.match_packet(&p.data, p.wire_len, &mut m);
                } else {
                    reader.match_packet(&p.data, p.wire_len, &mut m);
                }
                if m.delivered() != want.as_slice() || m.exclusive() != winner {
                    let show = |ids: &[FilterId]| -> Vec<String> {
                        ids.iter()
                            .map(|id| {
                                let f = installed.iter().find(|f| f.id == *id);
                                let expr = pool
                                    .filters
                                    .iter()
                                    .find(|(_, g)| Some(g) == f.map(|f| f.interp.function()));
                                format!(
                                    "{id} prio {:?} {:?} {:?}: {}",
                                    f.map(|f| f.priority),
                                    f.map(|f| f.delivery),
                                    demux.placement(*id),
                                    expr.map_or("?", |e| e.0.as_str())
                                )
                            })
                            .collect()
                    };
                    panic!(
                        "seed {seed} step {step} all={all}: packet {:02x?} (wire {})\n got {:#?} winner {:?}\nwant {:#?} winner {:?}",
                        p.data, p.wire_len, show(m.delivered()), m.exclusive(), show(&want), winner
                    );
                }
                tally.checks += 1;
                tally.delivered += want.len();
            }
        }
        // The batch interface agrees with one-at-a-time matching.
        let batch: Vec<(&[u8], u32)> = pool
            .packets
            .iter()
            .take(50)
            .map(|p| (&p.data[..], p.wire_len))
            .collect();
        let mut scratch = Matches::new();
        reader.match_batch(batch.iter().copied(), &mut scratch, |i, got| {
            let (want, winner) = oracle(&installed, batch[i].0, batch[i].1, false, &mut cache);
            assert_eq!(got.delivered(), want.as_slice());
            assert_eq!(got.exclusive(), winner);
        });
    }
}

#[test]
fn demux_equals_filters_run_alone_in_priority_order() {
    let mut tally = Tally::default();
    for seed in 1..=6 {
        run_seed(seed, &mut tally);
    }
    eprintln!(
        "{} packet checks, {} deliveries; inserts: {} keyed, {} residual; up to {} shapes \
         ({} native shapes summed over steps)",
        tally.checks,
        tally.delivered,
        tally.keyed,
        tally.residual,
        tally.max_shapes,
        tally.native_shapes
    );
    assert!(
        tally.delivered > 1000,
        "the packets must actually hit filters"
    );
    assert!(
        tally.keyed > 4 * tally.residual,
        "most filters must decompose"
    );
}

#[test]
fn connection_filters_share_one_shape() {
    let mut demux = Demux::new();
    let mut rng = Rng::new(7);
    let mut conns = Vec::new();
    let mut batch = demux.batch();
    for i in 0..500u32 {
        let mut c = Conn::random(&mut rng, false);
        c.udp = false;
        c.src = vec![10, (i >> 8) as u8, i as u8, 1];
        let id = batch
            .insert(&compile(&c.expr()).unwrap(), 0, Delivery::Exclusive)
            .unwrap();
        conns.push((c, id));
    }
    drop(batch);
    let stats = demux.stats();
    assert_eq!(
        (stats.shapes, stats.keys, stats.residuals),
        (1, 500, 0),
        "{stats:?}"
    );
    let reader = demux.reader();
    let mut m = Matches::new();
    for (c, id) in &conns {
        let p = c.packet(0, 0, 4);
        reader.match_packet(&p, p.len() as u32, &mut m);
        assert_eq!(m.exclusive(), Some(*id));
        // With IP options the TCP header moves; the filter follows it.
        let p = c.packet(3, 0x4000, 0);
        reader.match_packet(&p, p.len() as u32, &mut m);
        assert_eq!(m.exclusive(), Some(*id));
        // A later fragment has no TCP header: libpcap's filter rejects it.
        let p = c.packet(0, 0x0004, 0);
        reader.match_packet(&p, p.len() as u32, &mut m);
        assert_eq!(m.exclusive(), None);
    }
}
