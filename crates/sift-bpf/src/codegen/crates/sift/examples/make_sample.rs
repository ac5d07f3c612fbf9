//! Regenerates `samples/sample.pcap`, the Ethernet capture the README's first command filters:
//! `cargo run -p sift --example make_sample`.

use sift_capture::{PcapWriter, Resolution, Timestamp};

fn main() -> std::io::Result<()> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/sample.pcap");
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut w = PcapWriter::new(file, 1, 262144, Resolution::Micro)?;
    for (i, p) in sift_testgen::generate_packets(1, 2026, 2000)
        .iter()
        .enumerate()
    {
        let ts = Timestamp::new(
            1_700_000_000 + i as i64 / 100,
            (i as u32 % 100) * 10_000_000,
        );
        w.write_packet(&ts, p.wire_len, &p.data)?;
    }
    w.flush()
}
