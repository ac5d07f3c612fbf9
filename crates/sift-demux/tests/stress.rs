//! Readers match on several threads while a writer inserts and removes filters: stable filters
//! (never removed) must always receive their packets, and a removed filter must never be
//! reported by a match that started after its removal returned.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use common::*;
use sift_demux::{Delivery, Demux, FilterId, Matches};
use sift_testgen::{random_expressions, Rng};

fn tcp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Conn {
    Conn {
        src: src.to_vec(),
        dst: dst.to_vec(),
        sport,
        dport,
        udp: false,
    }
}

#[test]
fn readers_see_consistent_sets_during_updates() {
    let mut demux = Demux::new();
    // Stable connections: 10.1.x.y -> 10.2.0.1.
    let stable: Vec<(Conn, FilterId)> = (0..200u16)
        .map(|i| {
            let c = tcp(
                [10, 1, (i >> 8) as u8, i as u8],
                [10, 2, 0, 1],
                2000 + i,
                80,
            );
            let id = demux
                .insert(&compile(&c.expr()).unwrap(), 0, Delivery::Exclusive)
                .unwrap();
            (c, id)
        })
        .collect();
    // Churn connections use other addresses: they never accept a stable packet.
    let churn: Vec<Conn> = (0..400u16)
        .map(|i| {
            tcp(
                [10, 3, (i >> 8) as u8, i as u8],
                [10, 2, 0, 1],
                3000 + i,
                80,
            )
        })
        .collect();
    let churn_filters: Vec<sift_ir::Function> =
        churn.iter().map(|c| compile(&c.expr()).unwrap()).collect();
    // Copy filters at a higher priority (some run whole) that also see stable packets: they must
    // not take them away from their owners.
    let monitors: Vec<sift_ir::Function> = random_expressions(3, ETHERNET, 40)
        .iter()
        .filter_map(|e| compile(e))
        .chain([compile("tcp dst port 80").unwrap()])
        .collect();

    let reader = demux.reader();
    // Churn filters are inserted with increasing ids and removed in the same order; after
    // removing the filter with id X the writer stores X here.
    let removed_up_to = Arc::new(AtomicU64::new(0));
    let churn_ids_from = Arc::new(AtomicU64::new(u64::MAX));
    let done = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for t in 0..2u64 {
        let reader = reader.clone();
        let stable = stable.clone();
        let churn = churn.clone();
        let removed_up_to = removed_up_to.clone();
        let churn_ids_from = churn_ids_from.clone();
        let done = done.clone();
        handles.push(thread::spawn(move || {
            let mut rng = Rng::new(t + 100);
            let mut m = Matches::new();
            let stable_packets: Vec<Vec<u8>> =
                stable.iter().map(|(c, _)| c.packet(0, 0, 8)).collect();
            let churn_packets: Vec<Vec<u8>> = churn.iter().map(|c| c.packet(0, 0, 8)).collect();
            let mut checked = 0u64;
            while !done.load(Ordering::Acquire) || checked < 20_000 {
                let i = rng.index(stable.len());
                let p = &stable_packets[i];
                reader.match_packet(p, p.len() as u32, &mut m);
                assert_eq!(
                    m.exclusive(),
                    Some(stable[i].1),
                    "stable packet misdelivered"
                );
                assert_eq!(m.delivered().last(), Some(&stable[i].1));

                let j = rng.index(churn.len());
                let floor = removed_up_to.load(Ordering::Acquire);
                let first_churn = churn_ids_from.load(Ordering::Acquire);
                let p = &churn_packets[j];
                reader.match_packet(p, p.len() as u32, &mut m);
                if let Some(id) = m.exclusive() {
                    assert!(
                        id.0 >= first_churn,
                        "churn packet went to a stable filter {id}"
                    );
                    assert!(
                        id.0 > floor,
                        "removed filter {id} still matched (removed up to {floor})"
                    );
                }
                checked += 2;
            }
            checked
        }));
    }

    let mut rng = Rng::new(99);
    let mut live: std::collections::VecDeque<FilterId> = Default::default();
    let mut monitor_ids = Vec::new();
    for step in 0..6000 {
        if rng.chance(1, 20) {
            let f = rng.pick(&monitors);
            monitor_ids.push(demux.insert(f, 10, Delivery::Copy).unwrap());
            if monitor_ids.len() > 8 {
                let id = monitor_ids.remove(0);
                assert!(demux.remove(id));
            }
        }
        if live.len() < 300 && (live.is_empty() || rng.chance(1, 2)) {
            let k = rng.index(churn.len());
            let id = demux
                .insert(&churn_filters[k], 0, Delivery::Exclusive)
                .unwrap();
            if step == 0 {
                churn_ids_from.store(id.0, Ordering::Release);
            }
            live.push_back(id);
        } else if let Some(id) = live.pop_front() {
            assert!(demux.remove(id));
            removed_up_to.store(id.0, Ordering::Release);
        }
    }
    done.store(true, Ordering::Release);
    let checked: u64 = handles
        .into_iter()
        .map(|h| h.join().expect("reader panicked"))
        .sum();
    eprintln!("{checked} matches checked during 6000 updates");
    assert!(checked >= 40_000);
}
