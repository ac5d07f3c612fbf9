//! Differential test against tcpdump: for every capture in the shared corpus,
//! reading all records with `CaptureReader` and writing them with
//! `PcapWriter::tcpdump_compatible` must give exactly the bytes that
//! `tcpdump -r IN -w -` writes (no filter), and the same number of records.
//!
//! Skipped (loudly, not failed) when the corpus (`../shared/corpus` next to the
//! repository, or `$SIFT_CORPUS`) or tcpdump is not available.

use std::path::{Path, PathBuf};
use std::process::Command;

use sift_capture::{CaptureError, CaptureReader, PcapWriter};

fn corpus_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SIFT_CORPUS") {
        return Some(PathBuf::from(dir));
    }
    // crates/sift-capture -> repository root -> its sibling `shared`.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = root.join("../shared/corpus");
    dir.is_dir().then_some(dir)
}

fn tcpdump() -> Option<PathBuf> {
    let mut candidates = vec![
        PathBuf::from("/usr/bin/tcpdump"),
        PathBuf::from("/usr/sbin/tcpdump"),
    ];
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|p| p.join("tcpdump")));
    }
    candidates.into_iter().find(|p| p.is_file())
}

fn captures(corpus: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if matches!(
                p.extension().and_then(|x| x.to_str()),
                Some("pcap" | "pcapng")
            ) {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&corpus.join("real"), &mut out);
    if let Ok(entries) = std::fs::read_dir(corpus.join("synthetic")) {
        out.extend(
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().and_then(|x| x.to_str()) == Some("pcap")),
        );
    }
    out.sort();
    out
}

/// What our side produced: output bytes (None if the writer could not even be
/// set up), number of records, and the error that stopped reading.
struct Ours {
    output: Option<Vec<u8>>,
    records: usize,
    error: Option<String>,
}

fn ours(path: &Path) -> Ours {
    let mut reader = match CaptureReader::open(path) {
        Ok(r) => r,
        Err(e) => {
            return Ours {
                output: None,
                records: 0,
                error: Some(e.to_string()),
            }
        }
    };
    let mut writer = match PcapWriter::tcpdump_compatible(Vec::new(), &reader) {
        Ok(w) => w,
        Err(e) => {
            return Ours {
                output: None,
                records: 0,
                error: Some(e.to_string()),
            }
        }
    };
    let mut records = 0;
    let error = loop {
        match reader.next_record() {
            Ok(Some(r)) => {
                writer.write_record(&r).unwrap();
                records += 1;
            }
            Ok(None) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    Ours {
        output: Some(writer.into_inner()),
        records,
        error,
    }
}

/// Counts the records of a pcap file written by tcpdump (native byte order).
fn count_records(pcap: &[u8]) -> usize {
    let mut at = 24;
    let mut n = 0;
    while at + 16 <= pcap.len() {
        let caplen = u32::from_ne_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + caplen;
        n += 1;
    }
    n
}

/// `file -> npkts` from the corpus manifest, when there is one.
fn manifest_counts(corpus: &Path) -> Vec<(String, usize)> {
    let Ok(text) = std::fs::read_to_string(corpus.join("real/MANIFEST.tsv")) else {
        return Vec::new();
    };
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let cols: Vec<&str> = header.split('\t').collect();
    let (Some(fi), Some(ni)) = (
        cols.iter().position(|c| *c == "file"),
        cols.iter().position(|c| *c == "npkts"),
    ) else {
        return Vec::new();
    };
    lines
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Some((f.get(fi)?.to_string(), f.get(ni)?.parse().ok()?))
        })
        .collect()
}

#[test]
fn output_matches_tcpdump() {
    let Some(corpus) = corpus_dir() else {
        eprintln!("\n*** SKIPPED output_matches_tcpdump: corpus not found (../shared/corpus or $SIFT_CORPUS) ***\n");
        return;
    };
    let Some(tcpdump) = tcpdump() else {
        eprintln!("\n*** SKIPPED output_matches_tcpdump: tcpdump not installed ***\n");
        return;
    };
    let files = captures(&corpus);
    assert!(!files.is_empty(), "no captures under {}", corpus.display());
    let manifest = manifest_counts(&corpus);
    let mut failures = Vec::new();
    let mut compared = 0;
    for path in &files {
        let out = Command::new(&tcpdump)
            .arg("-r")
            .arg(path)
            .args(["-w", "-"])
            .output()
            .expect("run tcpdump");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let theirs_failed = !out.status.success();
        let ours = ours(path);
        let name = path
            .strip_prefix(&corpus)
            .unwrap_or(path)
            .display()
            .to_string();

        match &ours.output {
            None => {
                if !out.stdout.is_empty() || !theirs_failed {
                    failures.push(format!(
                        "{name}: we refused ({:?}) but tcpdump wrote {} bytes",
                        ours.error,
                        out.stdout.len()
                    ));
                }
                continue;
            }
            Some(bytes) => {
                let theirs_n = count_records(&out.stdout);
                if ours.records != theirs_n {
                    failures.push(format!(
                        "{name}: we read {} records, tcpdump {theirs_n} (our error: {:?}; tcpdump: {})",
                        ours.records,
                        ours.error,
                        stderr.trim()
                    ));
                } else if *bytes != out.stdout {
                    let at = bytes
                        .iter()
                        .zip(&out.stdout)
                        .position(|(a, b)| a != b)
                        .unwrap_or(bytes.len().min(out.stdout.len()));
                    failures.push(format!(
                        "{name}: output differs from tcpdump's at byte {at} (ours {} bytes, theirs {})",
                        bytes.len(),
                        out.stdout.len()
                    ));
                }
                if ours.error.is_some() != theirs_failed {
                    failures.push(format!(
                        "{name}: our error {:?} vs tcpdump status {} ({})",
                        ours.error,
                        out.status,
                        stderr.trim()
                    ));
                }
                if let Some((_, n)) = manifest.iter().find(|(f, _)| name.ends_with(f.as_str())) {
                    if *n != ours.records {
                        failures.push(format!(
                            "{name}: manifest says {n} packets, we read {}",
                            ours.records
                        ));
                    }
                }
            }
        }
        compared += 1;
    }
    eprintln!(
        "compared {compared} of {} captures with {}",
        files.len(),
        tcpdump.display()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The reader must never panic on the corpus cut at arbitrary points, and
/// must deliver a prefix of the records before reporting the cut.
#[test]
fn corpus_truncations() {
    let Some(corpus) = corpus_dir() else {
        eprintln!("\n*** SKIPPED corpus_truncations: corpus not found ***\n");
        return;
    };
    for path in captures(&corpus) {
        let bytes = std::fs::read(&path).unwrap();
        let full: Vec<_> = match CaptureReader::new(&bytes[..]) {
            Ok(r) => r.collect::<Result<Vec<_>, _>>().unwrap(),
            Err(_) => continue,
        };
        // A spread of cut points, always including the last few bytes.
        let step = (bytes.len() / 97).max(1);
        let cuts = (0..bytes.len())
            .step_by(step)
            .chain(bytes.len().saturating_sub(5)..bytes.len());
        for cut in cuts {
            let mut got = Vec::new();
            let mut err: Option<CaptureError> = None;
            match CaptureReader::new(&bytes[..cut]) {
                Ok(mut r) => loop {
                    match r.next_record() {
                        Ok(Some(rec)) => got.push(rec),
                        Ok(None) => break,
                        Err(e) => {
                            err = Some(e);
                            break;
                        }
                    }
                },
                Err(e) => err = Some(e),
            }
            assert!(got.len() <= full.len());
            assert_eq!(got[..], full[..got.len()], "{}: cut {cut}", path.display());
            if let Some(e) = err {
                assert!(
                    e.offset() <= cut as u64,
                    "{}: cut {cut}: {e}",
                    path.display()
                );
            }
        }
    }
}
