//! Differential tests against tcpdump on hand-made captures that exercise the
//! corners of the formats: byte orders, nanosecond files, odd snapshot
//! lengths, FCS bits, renumbered link types, old versions, truncation,
//! oversized records, pcapng time stamp options and packet block kinds.
//!
//! Skipped (loudly) when tcpdump is not installed.

use std::path::PathBuf;
use std::process::Command;

use sift_capture::{CaptureReader, PcapWriter};

fn tcpdump() -> Option<PathBuf> {
    ["/usr/bin/tcpdump", "/usr/sbin/tcpdump"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

#[derive(Clone, Copy)]
enum Order {
    Le,
    Be,
}

struct B {
    order: Order,
    out: Vec<u8>,
}

impl B {
    fn new(order: Order) -> B {
        B {
            order,
            out: Vec::new(),
        }
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        let b = match self.order {
            Order::Le => v.to_le_bytes(),
            Order::Be => v.to_be_bytes(),
        };
        self.out.extend(b);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        let b = match self.order {
            Order::Le => v.to_le_bytes(),
            Order::Be => v.to_be_bytes(),
        };
        self.out.extend(b);
        self
    }
    fn bytes(&mut self, d: &[u8]) -> &mut Self {
        self.out.extend_from_slice(d);
        self
    }
    fn pcap(order: Order, magic: u32, ver: (u16, u16), snap: u32, lt: u32) -> B {
        let mut b = B::new(order);
        b.u32(magic)
            .u16(ver.0)
            .u16(ver.1)
            .u32(0)
            .u32(0)
            .u32(snap)
            .u32(lt);
        b
    }
    fn rec(&mut self, s: u32, f: u32, cap: u32, len: u32, d: &[u8]) -> &mut Self {
        self.u32(s).u32(f).u32(cap).u32(len).bytes(d)
    }
    fn block(&mut self, t: u32, body: &[u8]) -> &mut Self {
        let mut body = body.to_vec();
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
        let len = body.len() as u32 + 12;
        self.u32(t).u32(len).bytes(&body).u32(len)
    }
    fn enc(&self, f: impl FnOnce(&mut B)) -> Vec<u8> {
        let mut b = B::new(self.order);
        f(&mut b);
        b.out
    }
    fn shb(&mut self) -> &mut Self {
        let body = self.enc(|b| {
            b.u32(0x1A2B_3C4D).u16(1).u16(0).u32(u32::MAX).u32(u32::MAX);
        });
        self.block(0x0A0D_0D0A, &body)
    }
    fn idb(&mut self, lt: u16, snap: u32, tsresol: Option<u8>, tsoffset: Option<u64>) -> &mut Self {
        let body = self.enc(|b| {
            b.u16(lt).u16(0).u32(snap);
            if let Some(r) = tsresol {
                b.u16(9).u16(1).bytes(&[r, 0, 0, 0]);
            }
            if let Some(o) = tsoffset {
                b.u16(14).u16(8).u32(0);
                // 64-bit value in the section's byte order.
                let n = b.out.len();
                b.out.truncate(n - 4);
                let v = match b.order {
                    Order::Le => o.to_le_bytes(),
                    Order::Be => o.to_be_bytes(),
                };
                b.bytes(&v);
            }
            b.u16(0).u16(0);
        });
        self.block(1, &body)
    }
    fn epb(&mut self, ifid: u32, t: u64, len: u32, d: &[u8]) -> &mut Self {
        let body = self.enc(|b| {
            b.u32(ifid)
                .u32((t >> 32) as u32)
                .u32(t as u32)
                .u32(d.len() as u32)
                .u32(len)
                .bytes(d);
        });
        self.block(6, &body)
    }
    fn spb(&mut self, len: u32, d: &[u8]) -> &mut Self {
        let body = self.enc(|b| {
            b.u32(len).bytes(d);
        });
        self.block(3, &body)
    }
    fn pb(&mut self, ifid: u16, t: u64, len: u32, d: &[u8]) -> &mut Self {
        let body = self.enc(|b| {
            b.u16(ifid)
                .u16(0)
                .u32((t >> 32) as u32)
                .u32(t as u32)
                .u32(d.len() as u32)
                .u32(len)
                .bytes(d);
        });
        self.block(2, &body)
    }
}

const MICRO: u32 = 0xA1B2_C3D4;
const NANO: u32 = 0xA1B2_3C4D;

fn cases() -> Vec<(&'static str, Vec<u8>)> {
    let d: Vec<u8> = (0..60).collect();
    let mut v = Vec::new();
    let mut add = |name, b: &B| v.push((name, b.out.clone()));
    add(
        "nano",
        B::pcap(Order::Le, NANO, (2, 4), 65535, 1)
            .rec(1000, 123_456_789, 60, 60, &d)
            .rec(1001, 999_999_999, 60, 70, &d),
    );
    add(
        "big-endian nano",
        B::pcap(Order::Be, NANO, (2, 4), 65535, 1).rec(1000, 1_000_001, 60, 60, &d),
    );
    add(
        "big-endian",
        B::pcap(Order::Be, MICRO, (2, 4), 65535, 1).rec(1000, 123_456, 60, 60, &d),
    );
    add(
        "caplen over snaplen",
        B::pcap(Order::Le, MICRO, (2, 4), 40, 1)
            .rec(1000, 1, 60, 60, &d)
            .rec(1000, 2, 10, 10, &d[..10]),
    );
    add(
        "snaplen 0",
        B::pcap(Order::Le, MICRO, (2, 4), 0, 1).rec(1000, 1, 60, 60, &d),
    );
    add(
        "snaplen 2^31",
        B::pcap(Order::Le, MICRO, (2, 4), 0x8000_0000, 1).rec(1000, 1, 60, 60, &d),
    );
    add(
        "fcs bits",
        B::pcap(Order::Le, MICRO, (2, 4), 65535, 0x5000_0001).rec(1000, 1, 60, 60, &d),
    );
    add(
        "linktype 12",
        B::pcap(Order::Le, MICRO, (2, 4), 65535, 12).rec(1000, 1, 60, 60, &d),
    );
    add(
        "linktype 300",
        B::pcap(Order::Le, MICRO, (2, 4), 65535, 300).rec(1000, 1, 60, 60, &d),
    );
    add(
        "usec out of range",
        B::pcap(Order::Le, MICRO, (2, 4), 65535, 1)
            .rec(1000, 1_500_000, 60, 60, &d)
            .rec(u32::MAX, u32::MAX, 60, 60, &d),
    );
    add(
        "truncated data",
        B::pcap(Order::Le, MICRO, (2, 4), 65535, 1)
            .rec(1000, 1, 60, 60, &d)
            .rec(1000, 1, 60, 60, &d[..30]),
    );
    add(
        "truncated header",
        B::pcap(Order::Le, MICRO, (2, 4), 65535, 1)
            .rec(1000, 1, 60, 60, &d)
            .bytes(&[1, 2, 3]),
    );
    add(
        "huge caplen",
        B::pcap(Order::Le, MICRO, (2, 4), 300_000, 1)
            .rec(1000, 1, 60, 60, &d)
            .rec(1000, 1, 270_000, 270_000, &d),
    );
    add(
        "version 2.2",
        B::pcap(Order::Le, MICRO, (2, 2), 65535, 1).rec(1000, 1, 70, 60, &d),
    );
    add(
        "version 2.3",
        B::pcap(Order::Le, MICRO, (2, 3), 65535, 1)
            .rec(1000, 1, 70, 60, &d)
            .rec(1000, 1, 60, 70, &d),
    );
    add(
        "version 2.5",
        B::pcap(Order::Le, MICRO, (2, 5), 65535, 1).rec(1000, 1, 60, 60, &d),
    );
    add("header only", &B::pcap(Order::Le, MICRO, (2, 4), 65535, 1));
    let mut short = B::pcap(Order::Le, MICRO, (2, 4), 65535, 1);
    short.out.truncate(20);
    add("short header", &short);
    for (name, o) in [("pcapng le", Order::Le), ("pcapng be", Order::Be)] {
        let dd = [d.clone(), d.clone()].concat();
        add(
            name,
            B::new(o)
                .shb()
                .idb(1, 0, None, None)
                .epb(0, 1_234_567_890_123_456, 60, &d)
                .spb(80, &dd)
                .pb(0, 1_234_567_890_123_457, 60, &d)
                .idb(1, 0, Some(9), Some(100))
                .epb(1, 1_234_567_890_123_456_789, 60, &d)
                .idb(1, 0, Some(0x94), None)
                .epb(2, (1000 << 20) + 12345, 60, &d)
                .idb(1, 0, Some(3), None)
                .epb(3, 1_000_123, 60, &d)
                .idb(1, 0, Some(0), None)
                .epb(4, 1_000_123, 60, &d)
                .block(0x0BAD_0BAD, &[1, 2, 3]),
        );
    }
    add(
        "pcapng snaplen",
        B::new(Order::Le)
            .shb()
            .idb(1, 30, None, None)
            .spb(60, &d)
            .epb(0, 5, 60, &d),
    );
    add(
        "pcapng linktype 12",
        B::new(Order::Le)
            .shb()
            .idb(12, 100, None, None)
            .epb(0, 5, 60, &d),
    );
    let mut cut = B::new(Order::Le);
    cut.shb()
        .idb(1, 100, None, None)
        .epb(0, 5, 60, &d)
        .epb(0, 6, 60, &d);
    cut.out.truncate(cut.out.len() - 7);
    add("pcapng truncated", &cut);
    add(
        "pcapng unknown interface",
        B::new(Order::Le)
            .shb()
            .idb(1, 100, None, None)
            .epb(0, 5, 60, &d)
            .epb(1, 6, 60, &d),
    );
    add(
        "pcapng two sections",
        B::new(Order::Le)
            .shb()
            .idb(1, 100, None, None)
            .epb(0, 5, 60, &d)
            .shb()
            .idb(1, 100, None, None)
            .epb(0, 6, 60, &d),
    );
    add("pcapng no interfaces", B::new(Order::Le).shb());
    v
}

#[test]
fn edge_cases_match_tcpdump() {
    let Some(tcpdump) = tcpdump() else {
        eprintln!("\n*** SKIPPED edge_cases_match_tcpdump: tcpdump not installed ***\n");
        return;
    };
    let dir = std::env::temp_dir().join(format!("sift-capture-edge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut failures = Vec::new();
    for (i, (name, bytes)) in cases().into_iter().enumerate() {
        let path = dir.join(format!("case{i}.cap"));
        std::fs::write(&path, &bytes).unwrap();
        let out = Command::new(&tcpdump)
            .arg("-r")
            .arg(&path)
            .args(["-w", "-"])
            .output()
            .unwrap();
        let mut ours = Vec::new();
        let mut our_err = None;
        match CaptureReader::new(&bytes[..]) {
            Err(e) => our_err = Some(e.to_string()),
            Ok(mut r) => match PcapWriter::tcpdump_compatible(Vec::new(), &r) {
                Err(e) => our_err = Some(e.to_string()),
                Ok(mut w) => {
                    loop {
                        match r.next_record() {
                            Ok(Some(rec)) => w.write_record(&rec).unwrap(),
                            Ok(None) => break,
                            Err(e) => {
                                our_err = Some(e.to_string());
                                break;
                            }
                        }
                    }
                    ours = w.into_inner();
                }
            },
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        if ours != out.stdout {
            failures.push(format!(
                "{name}: ours {} bytes, tcpdump {} bytes\n  ours:    {:02x?}\n  tcpdump: {:02x?}\n  tcpdump said: {}",
                ours.len(),
                out.stdout.len(),
                ours,
                out.stdout,
                stderr.trim()
            ));
        }
        if our_err.is_some() == out.status.success() {
            failures.push(format!(
                "{name}: our error {our_err:?}, tcpdump status {} ({})",
                out.status,
                stderr.trim()
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("compared {} hand-made captures with tcpdump", cases().len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
