//! `sift run`: pipelines of rules over a capture of crafted packets with payloads, checked
//! against each rule's filter run alone (`sift filter --ext`), a naive reading of the packets,
//! and a plain model of the actions (tests/support).

mod support;

use std::net::IpAddr;
use std::path::Path;

use support::*;

/// Runs `sift run`, expecting success; returns the table.
fn run(rules: &Path, capture: &Path, out_dir: &Path) -> String {
    let out = sift(&[
        "run",
        rules.to_str().unwrap(),
        "-r",
        capture.to_str().unwrap(),
        "--out-dir",
        out_dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs a rules file on a capture and checks the table and every written file against the
/// model fed with each rule's filter run alone.
fn check_against_filters_alone(
    name: &str,
    rules_path: &Path,
    packets: &[sift_capture::Record],
) -> std::collections::HashMap<String, Row> {
    let dir = scratch(name);
    let capture = dir.join("in.pcap");
    write_pcap(&capture, packets);
    let rules = read_rules(&std::fs::read_to_string(rules_path).unwrap());
    // Set files are relative to the rules file; `sift filter` reads them from the current
    // directory, so give it the rules file's directory.
    let base = rules_path.parent().unwrap();
    let verdicts: Vec<Vec<bool>> = rules
        .iter()
        .map(|r| {
            let filter = r.filter.replace(" @", &format!(" @{}/", base.display()));
            let mut v = vec![false; packets.len()];
            for i in filter_alone(&capture, &filter, &dir) {
                v[i] = true;
            }
            v
        })
        .collect();
    let out_dir = dir.join("out");
    let table = parse_table(&run(rules_path, &capture, &out_dir));
    let (expected, files) = model(&rules, &verdicts, packets);
    for rule in &rules {
        assert_eq!(
            table[&rule.name], expected[&rule.name],
            "rule {}",
            rule.name
        );
    }
    for (file, written) in &files {
        check_written(&out_dir.join(file), written, packets);
    }
    table
}

#[test]
fn actions_stop_sample_truncate_and_tag() {
    let dir = scratch("actions");
    let rules_path = dir.join("actions.rules");
    std::fs::write(
        &rules_path,
        "# every action, plain filters\n\
         rule all-tcp: tcp => tag t, count\n\
         rule web: tcp port 80 or tcp port 8080 => sample 3, truncate 60, write web.pcap, \\\n\
         \x20   tag web, write web.pcapng, stop\n\
         rule after-web: tcp => write after.pcapng, truncate 0, write after-empty.pcap\n\
         rule dns: udp port 53 => tag dns, write dns.pcapng, stop\n\
         rule quiet: udp => sample 4, count, sample 2, count, write quiet.pcapng\n\
         rule rest: => count, write rest.pcapng\n",
    )
    .unwrap();
    let packets = capture(7, 3000);
    let table = check_against_filters_alone("actions-run", &rules_path, &packets);
    // The counts are not trivial, and are what the semantics say.
    let web = &table["web"];
    assert!(
        web.matched > 100 && web.sampled_out > 50 && web.stopped > 50,
        "{web:?}"
    );
    assert_eq!(web.stopped, web.matched.div_ceil(3));
    assert!(table["after-web"].tags.starts_with("t="));
    // Packets tagged `dns` or `web` were stopped right after: no later rule sees those tags.
    assert_eq!(
        table["rest"].tags,
        format!("t={}", table["after-web"].matched)
    );
    let quiet = &table["quiet"];
    let (first, second) = (
        quiet.matched.div_ceil(4),
        quiet.matched.div_ceil(4).div_ceil(2),
    );
    assert_eq!(quiet.counted, Some(first + second));
    assert_eq!(quiet.sampled_out, quiet.matched - second);
    assert_eq!(quiet.written, second);
}

#[test]
fn ids_rules_agree_with_each_filter_alone() {
    let packets = capture(2026, 4000);
    let rules = repo().join("examples/ids.rules");
    check_against_filters_alone("ids", &rules, &packets);
}

/// The IDS rules' filters, read naively from the packets (headers are always captured whole
/// in this capture; payloads may be cut short).
fn naive_ids(rule: &str, p: &Parsed) -> bool {
    let blocked = |a: &IpAddr| match a {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            o == [203, 0, 113, 66] || (o[..3] == [198, 51, 100] && o[3] < 16)
        }
        IpAddr::V6(v6) => v6.segments()[..3] == [0x2001, 0xdb8, 0xbad],
    };
    let payload = p.payload.as_deref();
    let dport = p.ports.map(|(_, d)| d);
    let web = |ports: &[u16]| p.tcp && dport.is_some_and(|d| ports.contains(&d));
    let admin_ports = dport.is_some_and(|d| d == 80 || d == 8080 || (8000..=8100).contains(&d));
    let has = |s: &[u8]| payload.is_some_and(|b| contains(b, s));
    let has_nocase = |s: &[u8]| payload.is_some_and(|b| contains_nocase(b, s));
    let at = |off: usize, s: &[u8]| payload.is_some_and(|b| b.get(off..off + s.len()) == Some(s));
    match rule {
        "blocklisted" => p.addrs.iter().any(blocked),
        "admin-probe" => {
            p.tcp
                && admin_ports
                && (has(b"GET /admin") || has(b"GET /wp-admin") || has_nocase(b"/phpmyadmin"))
        }
        "sql-injection" => {
            p.tcp && admin_ports && (has_nocase(b"UNION SELECT") || has(b"' OR '1'='1"))
        }
        "shell-download" => p.tcp && (has(b"wget http") || has(b"curl http")),
        "http-request" => web(&[80, 8080]) && at(0, b"GET ") && has(b"HTTP/1.1\r\n"),
        "dns-off-port" => {
            p.udp && p.ports.is_some_and(|(s, d)| s != 53 && d != 53) && at(2, &[1, 0, 0, 1])
        }
        "tls-handshake" => p.tcp && at(0, &[0x16]) && at(1, &[0x03]),
        "rest" => true,
        other => panic!("no naive reading of rule {other}"),
    }
}

#[test]
fn ids_rules_agree_with_a_naive_payload_check() {
    let packets = capture(99, 4000);
    let dir = scratch("ids-naive");
    let capture = dir.join("in.pcap");
    write_pcap(&capture, &packets);
    let rules_path = repo().join("examples/ids.rules");
    let rules = read_rules(&std::fs::read_to_string(&rules_path).unwrap());
    let parsed: Vec<Parsed> = packets.iter().map(|r| parse_packet(&r.data)).collect();
    let verdicts: Vec<Vec<bool>> = rules
        .iter()
        .map(|r| parsed.iter().map(|p| naive_ids(&r.name, p)).collect())
        .collect();
    let out_dir = dir.join("out");
    let table = parse_table(&run(&rules_path, &capture, &out_dir));
    let (expected, files) = model(&rules, &verdicts, &packets);
    for rule in &rules {
        let got = &table[&rule.name];
        assert_eq!(got, &expected[&rule.name], "rule {}", rule.name);
        assert!(got.matched > 0, "rule {} matched nothing", rule.name);
    }
    for (file, written) in &files {
        check_written(&out_dir.join(file), written, &packets);
    }
}

#[test]
fn a_rule_that_writes_everything_writes_what_sift_filter_writes() {
    let dir = scratch("identical");
    let capture = dir.join("in.pcap");
    write_pcap(&capture, &capture_packets());
    let rules_path = dir.join("r.rules");
    std::fs::write(&rules_path, "rule web: tcp dst port 80 => write web.pcap\n").unwrap();
    run(&rules_path, &capture, &dir);
    let alone = dir.join("alone.pcap");
    let out = sift(&[
        "filter",
        "-r",
        capture.to_str().unwrap(),
        "-w",
        alone.to_str().unwrap(),
        "tcp dst port 80",
    ]);
    assert!(out.status.success());
    assert_eq!(
        std::fs::read(dir.join("web.pcap")).unwrap(),
        std::fs::read(alone).unwrap()
    );
}

fn capture_packets() -> Vec<sift_capture::Record> {
    capture(5, 500)
}

/// `sift run` on a rules file; the exit status and standard error.
fn run_rules_text(name: &str, text: &str) -> (bool, String) {
    let dir = scratch(name);
    let capture = dir.join("in.pcap");
    write_pcap(&capture, &support::capture(3, 50));
    let rules_path = dir.join("bad.rules");
    std::fs::write(&rules_path, text).unwrap();
    let out = sift(&[
        "run",
        rules_path.to_str().unwrap(),
        "-r",
        capture.to_str().unwrap(),
        "--out-dir",
        dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.success(), stderr)
}

#[test]
fn errors_point_at_the_rules_file_line_and_column() {
    let cases: &[(&str, &str)] = &[
        // An unknown action.
        (
            "rule a: tcp\nrule b: udp => count, jump\n",
            "bad.rules:2:23: unknown action",
        ),
        // A syntax error inside a filter, on a continuation line.
        ("rule a: tcp \\\n   and and\n", "bad.rules:2:8:"),
        // A semantic error in a filter (port out of range), after the filter's start.
        (
            "\n  rule web:  tcp port 99999 => count\n",
            "bad.rules:2:23: illegal port number 99999",
        ),
        // A missing set file: at the `@`.
        (
            "rule a: host in @missing.txt => stop\n",
            "bad.rules:1:17: cannot read set file",
        ),
        // An extension-language error: an unterminated string.
        (
            "rule a: payload contains \"abc => count\n",
            "bad.rules:1:26:",
        ),
        ("rule a: tcp => sample 0\n", "bad.rules:1:23:"),
        ("rule a: tcp => write\n", "bad.rules:1:16:"),
        ("rule a: tcp\nrule a: udp\n", "bad.rules:2:6:"),
        ("tcp port 80\n", "bad.rules:1:1:"),
        ("", "bad.rules:1:1: the rules file has no rules"),
    ];
    for (i, (text, wanted)) in cases.iter().enumerate() {
        let (ok, stderr) = run_rules_text(&format!("error-{i}"), text);
        assert!(!ok, "{text:?} was accepted");
        assert!(
            stderr.contains(wanted),
            "{text:?}: wanted {wanted:?} in\n{stderr}"
        );
    }
}

#[test]
fn garbage_rules_files_are_errors_not_panics() {
    let mut rng = Rng::new(11);
    let alphabet: Vec<char> = "rule :=>,#\\\"@{}()[]ab0x9é\n\t .-".chars().collect();
    for i in 0..60 {
        let text: String = (0..rng.below(60)).map(|_| *rng.pick(&alphabet)).collect();
        let text = if i % 2 == 0 {
            format!("rule x: {text}")
        } else {
            text
        };
        run_rules_text("garbage", &text);
    }
}

#[test]
fn captures_of_several_link_types_go_into_pcapng_not_pcap() {
    let dir = scratch("linktypes");
    let packets = support::capture(21, 600);
    let ethernet = dir.join("ethernet.pcap");
    write_pcap(&ethernet, &packets);
    // The same packets as raw IP (link type 101): the Ethernet header dropped; ARP left out.
    let raw: Vec<sift_capture::Record> = packets
        .iter()
        .filter(|r| r.data[12..14] != [0x08, 0x06])
        .map(|r| sift_capture::Record {
            data: r.data[14..].to_vec(),
            wire_len: r.wire_len - 14,
            linktype: 101,
            ..r.clone()
        })
        .collect();
    let raw_path = dir.join("raw.pcap");
    let file = std::fs::File::create(&raw_path).unwrap();
    let mut w =
        sift_capture::PcapWriter::new(file, 101, 65535, sift_capture::Resolution::Micro).unwrap();
    for r in &raw {
        w.write_record(r).unwrap();
    }
    w.flush().unwrap();
    let filter = "tcp and payload contains \"GET\"";
    let alone = |path: &Path| filter_alone(path, filter, &dir);
    let (from_ethernet, from_raw) = (alone(&ethernet), alone(&raw_path));
    assert!(!from_ethernet.is_empty() && from_ethernet.len() == from_raw.len());

    let rules = dir.join("r.rules");
    std::fs::write(&rules, format!("rule get: {filter} => write get.pcapng\n")).unwrap();
    let args = |rules: &Path| {
        sift(&[
            "run",
            rules.to_str().unwrap(),
            "-r",
            ethernet.to_str().unwrap(),
            "-r",
            raw_path.to_str().unwrap(),
            "--out-dir",
            dir.to_str().unwrap(),
        ])
    };
    let out = args(&rules);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = records(&dir.join("get.pcapng"));
    let linktypes: Vec<u32> = written.iter().map(|r| r.linktype).collect();
    let mut expected = vec![1; from_ethernet.len()];
    expected.extend(vec![101; from_raw.len()]);
    assert_eq!(linktypes, expected);

    std::fs::write(&rules, format!("rule get: {filter} => write get.pcap\n")).unwrap();
    let out = args(&rules);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("get.pcap: a pcap file holds packets of one link type"),
        "{stderr}"
    );
    // A run that fails prints no statistics.
    assert!(out.stdout.is_empty());
}
