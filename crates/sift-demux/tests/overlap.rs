//! The exclusivity check (`Demux::overlaps`).

mod common;

use common::*;
use sift_demux::{Delivery, Demux};

fn conn(src: &str, sport: u16) -> String {
    format!("ip src {src} and ip dst 10.9.9.9 and tcp src port {sport} and tcp dst port 80")
}

#[test]
fn connection_filters_overlap_iff_same_tuple() {
    let mut d = Demux::new();
    let a = d
        .insert(
            &compile(&conn("10.0.0.1", 1000)).unwrap(),
            0,
            Delivery::Exclusive,
        )
        .unwrap();
    let b = d
        .insert(
            &compile(&conn("10.0.0.2", 1000)).unwrap(),
            0,
            Delivery::Exclusive,
        )
        .unwrap();
    assert_eq!(
        d.overlaps(&compile(&conn("10.0.0.1", 1000)).unwrap())
            .unwrap(),
        vec![a]
    );
    assert_eq!(
        d.overlaps(&compile(&conn("10.0.0.2", 1000)).unwrap())
            .unwrap(),
        vec![b]
    );
    assert!(d
        .overlaps(&compile(&conn("10.0.0.3", 1000)).unwrap())
        .unwrap()
        .is_empty());
    assert!(d
        .overlaps(&compile(&conn("10.0.0.1", 1001)).unwrap())
        .unwrap()
        .is_empty());
    // A listener on port 80 overlaps both; one on port 81 neither.
    assert_eq!(
        d.overlaps(&compile("tcp dst port 80").unwrap()).unwrap(),
        vec![a, b]
    );
    assert!(d
        .overlaps(&compile("tcp dst port 81").unwrap())
        .unwrap()
        .is_empty());
    assert!(d.overlaps(&compile("udp").unwrap()).unwrap().is_empty());
    assert!(d.overlaps(&compile("ip6").unwrap()).unwrap().is_empty());
    // Ranges and negations against keys.
    assert_eq!(
        d.overlaps(&compile("tcp src portrange 900-1000").unwrap())
            .unwrap(),
        vec![a, b]
    );
    assert!(d
        .overlaps(&compile("tcp src portrange 1001-2000").unwrap())
        .unwrap()
        .is_empty());
    assert_eq!(
        d.overlaps(&compile("ip and not src host 10.0.0.1").unwrap())
            .unwrap(),
        vec![b]
    );
    // Removed filters no longer overlap.
    assert!(d.remove(a));
    assert!(d
        .overlaps(&compile(&conn("10.0.0.1", 1000)).unwrap())
        .unwrap()
        .is_empty());
}

#[test]
fn overlap_reports_are_never_missed() {
    // Conservative direction: whenever a packet is accepted by both filters, the overlap is
    // reported.
    let exprs = sift_testgen::random_expressions(11, ETHERNET, 80);
    let filters: Vec<_> = exprs.iter().filter_map(|e| compile(e)).collect();
    let packets = sift_testgen::generate_packets(ETHERNET, 11, 400);
    let mut d = Demux::new();
    let installed: Vec<_> = filters[..20]
        .iter()
        .map(|f| {
            (
                d.insert(f, 0, Delivery::Exclusive).unwrap(),
                sift_ir::Interpreter::new(f.clone()).unwrap(),
            )
        })
        .collect();
    let mut cache = sift_ir::Cache::new();
    let mut reported = 0;
    for f in &filters[20..] {
        let overlaps = d.overlaps(f).unwrap();
        reported += overlaps.len();
        let new = sift_ir::Interpreter::new(f.clone()).unwrap();
        for p in &packets {
            if new.run(&mut cache, &p.data, p.wire_len) == 0 {
                continue;
            }
            for (id, old) in &installed {
                if old.run(&mut cache, &p.data, p.wire_len) != 0 {
                    assert!(overlaps.contains(id), "missed overlap with {id}");
                }
            }
        }
    }
    assert!(reported > 0);
}
