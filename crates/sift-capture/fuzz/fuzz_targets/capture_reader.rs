//! Reads arbitrary bytes as a capture file to the end, and writes every record
//! back out: must never panic, whatever the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sift_capture::{CaptureReader, PcapWriter};

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = CaptureReader::new(data) else {
        return;
    };
    let _ = (reader.linktype(), reader.snaplen(), reader.format());
    let mut writer = PcapWriter::tcpdump_compatible(Vec::new(), &reader).ok();
    let mut last_offset = reader.offset();
    loop {
        match reader.next_record() {
            Ok(Some(rec)) => {
                assert!(reader.offset() > last_offset, "no progress");
                assert!(reader.offset() <= data.len() as u64);
                last_offset = reader.offset();
                let _ = (
                    rec.timestamp.secs(),
                    rec.timestamp.nanos(),
                    rec.timestamp.to_micros(),
                );
                if let Some(w) = writer.as_mut() {
                    w.write_record(&rec).unwrap();
                }
            }
            Ok(None) => break,
            Err(e) => {
                assert!(e.offset() <= data.len() as u64, "offset past the end: {e}");
                let _ = e.to_string();
                break;
            }
        }
    }
    assert!(reader.next_record().unwrap().is_none());
});
