//! Fragment dispatch on a real capture: tcpdump's `afs.pcap` (AFS over UDP, 601 packets, 51
//! fragmented datagrams: 51 first fragments, 149 later ones), from the shared
//! corpus when it is present. The counts of each filter with fragment dispatch must be
//! libpcap's count of the filter alone (first fragments and whole packets) plus the later
//! fragments of the datagrams whose first fragment libpcap accepts — in capture order, and
//! with every datagram's fragments reversed (everything postponed, then released).

use std::collections::HashMap;
use std::path::Path;

use sift_capture::{CaptureReader, Record};
use sift_demux::{Delivery, Demux, FragmentConfig, FragmentDemux, Matches, Verdict};
use sift_oracle::Oracle;

const CAPTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/corpus/real/tcpdump/afs.pcap"
);

fn records() -> Option<Vec<Record>> {
    if !Path::new(CAPTURE).exists() {
        eprintln!("NOTE: {CAPTURE} not found; the real-capture fragment test is skipped");
        return None;
    }
    let mut reader = CaptureReader::open(CAPTURE).expect("afs.pcap opens");
    let mut out = Vec::new();
    while let Some(r) = reader.next_record().expect("afs.pcap reads") {
        out.push(r);
    }
    Some(out)
}

fn ns(r: &Record) -> u64 {
    r.timestamp.secs() as u64 * 1_000_000_000 + u64::from(r.timestamp.nanos())
}

/// An IPv4 reassembly key: (source and destination, protocol, id).
type Key = ([u8; 8], u8, u16);

/// The IPv4 reassembly key and fragment offset of an Ethernet frame, read at fixed offsets
/// (afs.pcap has no VLAN tags nor IP options on fragments): key, offset, more fragments.
fn ipv4_fragment(frame: &[u8]) -> Option<(Key, u16, bool)> {
    if frame.get(12..14)? != [0x08, 0x00] {
        return None;
    }
    let field = u16::from_be_bytes([frame[20], frame[21]]);
    let (offset, more) = (field & 0x1fff, field & 0x2000 != 0);
    if offset == 0 && !more {
        return None;
    }
    let mut addrs = [0u8; 8];
    addrs.copy_from_slice(&frame[26..34]);
    let key = (addrs, frame[23], u16::from_be_bytes([frame[18], frame[19]]));
    Some((key, offset, more))
}

const FILTERS: &[&str] = &[
    "udp src port 7000 and udp dst port 7001",
    "udp dst port 7001",
    "udp port 7000",
    "ip src 131.151.1.146",
    "udp src port 7001",
];

#[test]
fn afs_fragments_follow_their_first_fragment() {
    let Some(records) = records() else { return };
    assert_eq!(records.len(), 601);
    // Expected per-filter counts, from libpcap.
    let oracle = Oracle::new(1, 262144).unwrap();
    let mut first_of: HashMap<Key, usize> = HashMap::new();
    let (mut firsts, mut laters) = (0, 0);
    for (i, r) in records.iter().enumerate() {
        match ipv4_fragment(&r.data) {
            Some((key, 0, _)) => {
                firsts += 1;
                first_of.insert(key, i);
            }
            Some(_) => laters += 1,
            None => {}
        }
    }
    assert_eq!((firsts, laters), (51, 149));
    let (mut want, mut alone) = (Vec::new(), Vec::new());
    for f in FILTERS {
        let prog = oracle.compile(f, true, 0).unwrap();
        let accepts = |r: &Record| prog.run(&r.data, r.wire_len) != 0;
        let mut n = 0;
        for r in &records {
            n += match ipv4_fragment(&r.data) {
                Some((key, o, _)) if o != 0 => usize::from(accepts(&records[first_of[&key]])),
                _ => usize::from(accepts(r)),
            };
        }
        want.push(n);
        alone.push(records.iter().filter(|r| accepts(r)).count());
    }

    // Every filter a copy filter, so each count is the filter's own.
    let mut demux = Demux::new();
    let ids: Vec<_> = FILTERS
        .iter()
        .map(|f| {
            let ir = sift::compile_ir(f, &sift::Options::new(1, 262144)).unwrap();
            demux.insert(&ir, 0, Delivery::Copy).unwrap()
        })
        .collect();

    for reversed in [false, true] {
        let mut order: Vec<&Record> = records.iter().collect();
        if reversed {
            // Each datagram's fragments (adjacent in afs.pcap) last-to-first.
            let mut i = 0;
            while i < order.len() {
                let Some((key, 0, _)) = ipv4_fragment(&order[i].data) else {
                    i += 1;
                    continue;
                };
                let same = |r: &Record| ipv4_fragment(&r.data).is_some_and(|f| f.0 == key);
                let n = order[i..].iter().take_while(|r| same(r)).count();
                assert!(n >= 2);
                order[i..i + n].reverse();
                i += n;
            }
        }
        let mut frag: FragmentDemux<usize> =
            FragmentDemux::new(&demux.reader(), 1, FragmentConfig::default()).unwrap();
        let mut got = vec![0usize; FILTERS.len()];
        let mut count = |delivered: &[sift_demux::FilterId]| {
            for id in delivered {
                got[ids.iter().position(|x| x == id).unwrap()] += 1;
            }
        };
        let mut m = Matches::new();
        for (i, r) in order.iter().enumerate() {
            let o = frag.dispatch(&r.data, r.wire_len, ns(r), || i, &mut m);
            for rel in frag.releases() {
                let Verdict::Deliver(to) = rel.verdict else {
                    panic!("packet {} dropped", rel.handle)
                };
                count(to.delivered());
            }
            if o.delivers_now() {
                count(m.delivered());
            }
        }
        frag.flush();
        assert_eq!(frag.releases().count(), 0);
        assert_eq!(got, want, "reversed: {reversed}");
        let st = frag.stats();
        assert_eq!((st.first, st.repeated_first, st.dropped()), (51, 0, 0));
        if reversed {
            assert_eq!((st.following, st.postponed, st.released), (0, 149, 149));
        } else {
            assert_eq!((st.following, st.postponed), (149, 0));
        }
        assert_eq!(st.unfragmented, 401);
        eprintln!("reversed {reversed}: per filter {got:?}; {st:?}");
    }
    // Alone, the port filters miss the 149 later fragments; the host filter has them anyway.
    assert_eq!(want[0] - alone[0], 149);
    assert_eq!(want[3], alone[3]);
}
