//! The seed papers' languages on the facade's engines: every CSPF, DPF and MPF program file of
//! sift-seeds, lifted to IR, runs as native code (or bytecode), as bytecode, as the IR it was
//! lifted to, and alone in a demultiplexer, with one answer; and MPF's figure 3 sessions, which
//! differ only in their keys, collapse into one shape of the demultiplexer and dispatch each
//! packet to its own session.

#[path = "../../sift-seeds/tests/common/expectations.rs"]
mod expectations;

use std::path::Path;

use sift::{Delivery, Demux, Filter, Matches};
use sift_seeds::{cspf, dpf, mpf};

const SNAPLEN: u32 = 262_144;

/// Each lifted program with the packets its file names.
fn lifted_programs() -> Vec<(String, sift_ir::Function, Vec<Vec<u8>>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sift-seeds/tests/programs");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let ir = match path.extension().and_then(|e| e.to_str()) {
            Some("cspf") => cspf::parse(&text)
                .ok()
                .map(|p| cspf::lift_with(&p, SNAPLEN)),
            Some("dpf") => dpf::parse(&text).ok().map(|f| dpf::lift_with(&f, SNAPLEN)),
            Some("mpf") => mpf::parse(&text)
                .ok()
                .and_then(|p| mpf::lift_with(&p, SNAPLEN).ok()),
            _ => None,
        };
        if let Some(ir) = ir {
            out.push((name, ir, expectations::packets(&path, &text)));
        }
    }
    out
}

fn packets() -> Vec<(Vec<u8>, u32)> {
    let mut out = Vec::new();
    for p in sift_testgen::generate_packets(1, 0x5eed5, 400) {
        let wire = p.wire_len;
        // Every eighth packet also at every truncation, for the out-of-bounds rules.
        if out.len() % 8 == 0 {
            for cut in 0..p.data.len() {
                out.push((p.data[..cut].to_vec(), wire));
            }
        }
        out.push((p.data, wire));
    }
    out
}

#[test]
fn every_program_agrees_on_every_engine_and_in_the_demultiplexer() {
    let programs = lifted_programs();
    assert!(
        programs.len() >= 6,
        "only {} programs lifted",
        programs.len()
    );
    let generated = packets();
    let mut m = Matches::new();
    for (name, ir, own) in programs {
        let mut packets = generated.clone();
        for p in own {
            for cut in 0..=p.len() {
                packets.push((p[..cut].to_vec(), p.len() as u32));
            }
        }
        let filter = Filter::from_ir(ir).unwrap();
        let mut demux = Demux::new(1, SNAPLEN);
        let id = demux
            .insert_filter(&filter, 0, Delivery::Exclusive)
            .unwrap();
        let reader = demux.reader();
        let mut accepted = 0;
        for (data, wire) in &packets {
            let reference = filter.run_reference(data, *wire);
            assert_eq!(
                filter.run(data, *wire),
                reference,
                "{name}: {}",
                filter.engine()
            );
            assert_eq!(filter.run_interpreted(data, *wire), reference, "{name}");
            reader.match_packet(data, *wire, &mut m);
            let want = (reference != 0).then_some(id);
            assert_eq!(m.exclusive(), want, "{name}: demultiplexer");
            accepted += usize::from(reference != 0);
        }
        eprintln!("{name}: {accepted} of {} packets accepted", packets.len());
    }
}

/// MPF figure 3 with this session's keys (source address and ports; the destination is this
/// host, 10.0.0.2).
fn figure_3(src: u32, sport: u16, dport: u16) -> String {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../sift-seeds/tests/programs/figure3.mpf"),
    )
    .unwrap();
    text.replace("#0xc00c4501", &format!("#{src:#x}"))
        .replace("key #1234", &format!("key #{sport}"))
        .replace("key #4321", &format!("key #{dport}"))
}

fn session_packet(src: u32, sport: u16, dport: u16) -> Vec<u8> {
    let mut p = vec![0u8; 64];
    p[12..14].copy_from_slice(&[0x08, 0x00]);
    p[14] = 0x45;
    p[16..18].copy_from_slice(&50u16.to_be_bytes());
    p[23] = 6;
    p[26..30].copy_from_slice(&src.to_be_bytes());
    p[30..34].copy_from_slice(&[10, 0, 0, 2]);
    p[34..36].copy_from_slice(&sport.to_be_bytes());
    p[36..38].copy_from_slice(&dport.to_be_bytes());
    p
}

#[test]
fn mpf_sessions_collapse_into_one_shape() {
    const SESSIONS: u32 = 200;
    let mut demux = Demux::new(1, SNAPLEN);
    let mut ids = Vec::new();
    for i in 0..SESSIONS {
        let (src, sport, dport) = (0xc00c_4500 + i, 1000 + i as u16, 4321);
        let program = mpf::parse(&figure_3(src, sport, dport)).unwrap();
        let ir = mpf::lift_with(&program, SNAPLEN).unwrap();
        ids.push(demux.insert_ir(&ir, 0, Delivery::Exclusive).unwrap());
    }
    let stats = demux.stats();
    assert_eq!(stats.filters, SESSIONS as usize);
    assert_eq!(stats.residuals, 0, "{stats:?}");
    assert_eq!(stats.shapes, 1, "{stats:?}");
    let reader = demux.reader();
    let mut m = Matches::new();
    for i in 0..SESSIONS {
        let (src, sport) = (0xc00c_4500 + i, 1000 + i as u16);
        reader.match_packet(&session_packet(src, sport, 4321), 64, &mut m);
        assert_eq!(m.exclusive(), Some(ids[i as usize]), "session {i}");
        // Another port, or another destination port: no session.
        reader.match_packet(&session_packet(src, sport + 5000, 4321), 64, &mut m);
        assert_eq!(m.exclusive(), None);
        reader.match_packet(&session_packet(src, sport, 4322), 64, &mut m);
        assert_eq!(m.exclusive(), None);
    }
}
