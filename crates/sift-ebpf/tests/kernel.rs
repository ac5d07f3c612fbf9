//! sift's eBPF in the running kernel: every program is loaded with `bpf(BPF_PROG_LOAD)` (so
//! the verifier accepts it) and run with `BPF_PROG_TEST_RUN` as a socket filter, an XDP program
//! and a tc classifier; each verdict is compared with libpcap 1.10's for the same expression.
//! Without privilege the tests fail loudly (or skip loudly with `SIFT_SKIP_KERNEL_TESTS=1`).

#![cfg(target_os = "linux")]

mod common;

use common::*;
use sift_ebpf::{kernel, Options, ProgramType};

fn check(suite: &str, tally: &Tally) {
    eprintln!("[{suite}] {tally}");
    assert!(
        tally.mismatches.is_empty(),
        "[{suite}] verdicts differ from libpcap:\n{}",
        tally
            .mismatches
            .iter()
            .filter(|m| !m.is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(tally.runs > 0, "[{suite}] nothing ran");
    assert!(
        tally.ir_divergences.is_empty(),
        "[{suite}] the IR and libpcap disagree:\n{}",
        tally.ir_divergences[..tally.ir_divergences.len().min(10)].join("\n")
    );
}

#[test]
fn shared_expressions_on_shared_corpus() {
    if !kernel_available() {
        return;
    }
    let Some(shared) = shared_dir() else {
        eprintln!("NOTE: ../shared not found; the shared-corpus kernel test is skipped");
        return;
    };
    let packets = capture_packets(&shared.join("corpus/synthetic/eth.pcap"));
    let mut exprs: Vec<String> = sift_oracle::diff::load_shared_exprs(shared.join("exprs"))
        .unwrap()
        .into_iter()
        .filter(|(lt, _)| lt == "EN10MB")
        .map(|(_, e)| e)
        .collect();
    exprs.extend(
        std::fs::read_to_string(shared.join("exprs/random.txt"))
            .unwrap()
            .lines()
            .map(str::to_owned),
    );
    let oracle = sift_oracle::Oracle::new(ETHERNET, SNAPLEN).unwrap();
    let mut tally = Tally::default();
    for e in &exprs {
        compare(&oracle, e, true, &packets, &mut tally);
    }
    check("shared corpus", &tally);
}

#[test]
fn random_expressions_on_generated_packets() {
    if !kernel_available() {
        return;
    }
    let packets = usable(
        sift_testgen::generate_packets(ETHERNET, 0xeb9f, 600)
            .into_iter()
            .map(|p| p.data)
            .collect(),
    );
    let oracle = sift_oracle::Oracle::new(ETHERNET, SNAPLEN).unwrap();
    let mut tally = Tally::default();
    for e in sift_testgen::random_expressions(0xeb9f, ETHERNET, 300) {
        compare(&oracle, &e, true, &packets, &mut tally);
    }
    check("generated", &tally);
}

/// The lowered IR before optimization has other shapes (no tables, more values live).
#[test]
fn unoptimized_ir_on_generated_packets() {
    if !kernel_available() {
        return;
    }
    let packets = usable(
        sift_testgen::generate_packets(ETHERNET, 0x0e0f, 300)
            .into_iter()
            .map(|p| p.data)
            .collect(),
    );
    let oracle = sift_oracle::Oracle::new(ETHERNET, SNAPLEN).unwrap();
    let mut tally = Tally::default();
    for e in sift_testgen::random_expressions(0x0e0f, ETHERNET, 200) {
        compare(&oracle, &e, false, &packets, &mut tally);
    }
    check("unoptimized", &tally);
}

fn ipv6_chain(next_headers: &[u8], last: u8) -> Vec<u8> {
    let mut p = vec![0u8; 14];
    p[12] = 0x86;
    p[13] = 0xdd;
    let mut ip6 = vec![0u8; 40];
    ip6[0] = 0x60;
    ip6[6] = next_headers.first().copied().unwrap_or(last);
    ip6[7] = 64;
    p.extend(ip6);
    for (i, _) in next_headers.iter().enumerate() {
        // Hop-by-hop/routing/destination options: next header, length 0 (8 bytes).
        let next = next_headers.get(i + 1).copied().unwrap_or(last);
        p.extend([next, 0, 0, 0, 0, 0, 0, 0]);
    }
    p.extend([0u8; 20]);
    p
}

fn chains(lengths: &[usize]) -> Vec<Vec<u8>> {
    let mut packets = Vec::new();
    for &n in lengths {
        for last in [6u8, 17, 58] {
            let headers: Vec<u8> = (0..n).map(|i| [0u8, 43, 60][i % 3]).collect();
            let p = ipv6_chain(&headers, last);
            packets.push(p.clone());
            packets.push(p[..p.len() - 25].to_vec());
        }
    }
    usable(packets)
}

const PROTOCHAIN: [&str; 4] = [
    "ip6 protochain 6",
    "ip6 protochain 58",
    "protochain 17",
    "ip6 protochain 6 or ip6 protochain 17",
];

/// `ip6 protochain` is a loop in libpcap; the lowering unrolls it to 32 headers. The verifier
/// must accept the unrolled program, and chains of up to 31 extension headers must be judged
/// as libpcap does.
#[test]
fn ip6_protochain_unrolled() {
    if !kernel_available() {
        return;
    }
    let packets = chains(&[0, 1, 2, 5, 20, 31]);
    let oracle = sift_oracle::Oracle::new(ETHERNET, SNAPLEN).unwrap();
    let mut tally = Tally::default();
    for e in PROTOCHAIN {
        for optimize in [true, false] {
            compare(&oracle, e, optimize, &packets, &mut tally);
        }
    }
    check("protochain", &tally);
}

/// Longer chains are where the unrolled walk stops (it rejects, libpcap keeps walking): the
/// kernel must still do exactly what the unrolled IR does.
#[test]
fn ip6_protochain_past_the_unrolling() {
    if !kernel_available() {
        return;
    }
    let packets = chains(&[32, 33, 40]);
    let oracle = sift_oracle::Oracle::new(ETHERNET, SNAPLEN).unwrap();
    let mut tally = Tally::default();
    for e in PROTOCHAIN {
        compare(&oracle, e, true, &packets, &mut tally);
    }
    eprintln!("[long protochains] {tally}");
    assert!(tally.mismatches.is_empty(), "{:#?}", tally.mismatches);
    assert!(
        tally.ir_divergences.iter().all(|d| d.contains(": IR 0,")),
        "{:#?}",
        tally.ir_divergences
    );
}

fn host_set(n: usize) -> String {
    (0..n)
        .map(|i| format!("host 10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256))
        .collect::<Vec<_>>()
        .join(" or ")
}

fn ipv4_packet(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut p = vec![0u8; 54];
    p[12] = 0x08;
    p[14] = 0x45;
    p[23] = 6;
    p[26..30].copy_from_slice(&src);
    p[30..34].copy_from_slice(&dst);
    p
}

/// Large host sets become lookup tables in the optimizer and binary searches here; the
/// verifier must accept them and they must find every member.
#[test]
fn large_host_sets() {
    if !kernel_available() {
        return;
    }
    let oracle = sift_oracle::Oracle::new(ETHERNET, SNAPLEN).unwrap();
    for n in [10usize, 100, 1000] {
        let expr = host_set(n);
        let mut packets = Vec::new();
        for i in (0..n + 5).step_by((n / 50).max(1)) {
            let a = [
                10,
                (i / 65536) as u8,
                (i / 256 % 256) as u8,
                (i % 256) as u8,
            ];
            packets.push(ipv4_packet(a, [192, 168, 0, 1]));
            packets.push(ipv4_packet([192, 168, 0, 1], a));
        }
        let mut tally = Tally::default();
        // Complete packets only: libpcap's (slow) optimizer would not change its verdicts.
        compare_with(&oracle, &expr, true, false, &packets, &mut tally);
        check(&format!("{n} hosts"), &tally);
        assert!(tally.matches > 0);
    }
}

/// Sets (sift's extension), whose lookups eBPF writes as binary searches over the ranges
/// (`sift::loop_free`): the verifier accepts them, and in the kernel they answer as the IR's
/// reference lookup does, on keys at and beside every range's ends.
#[test]
fn sets_written_as_comparisons() {
    if !kernel_available() {
        return;
    }
    let options = sift::Options {
        extensions: true,
        ..sift::Options::new(ETHERNET, SNAPLEN)
    };
    let ports: Vec<u16> = vec![0, 1, 22, 53, 80, 443, 1000, 1003, 8000, 8100, 65534, 65535];
    let sets = [
        "port in {0, 22, 53, 80, 443, 1000-1003, 8000-8100, 65535}".to_string(),
        "tcp and dst port in {1, 53, 65534}".to_string(),
        "host in {10.0.0.1, 10.0.0.3, 10.1.0.0/16, 255.255.255.255}".to_string(),
        format!(
            "src net in {{{}}}",
            (0..300)
                .map(|i| format!("10.{}.{}.0/24", i / 256, i % 256))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ];
    let mut packets = Vec::new();
    for &port in &ports {
        for probe in [port.wrapping_sub(1), port, port.wrapping_add(1)] {
            for (ip6, proto) in [(false, 6), (false, 17), (true, 6)] {
                packets.push(sift_testgen::ethernet_ports(ip6, proto, probe, 7).data);
                packets.push(sift_testgen::ethernet_ports(ip6, proto, 7, probe).data);
            }
        }
    }
    for a in [
        [10, 0, 0, 0],
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        [10, 0, 0, 3],
        [10, 0, 255, 255],
        [10, 1, 0, 0],
        [10, 1, 43, 9],
        [10, 1, 255, 255],
        [10, 2, 0, 0],
        [255, 255, 255, 254],
        [255, 255, 255, 255],
    ] {
        packets.push(ipv4_packet(a, [192, 168, 0, 1]));
        packets.push(ipv4_packet([192, 168, 0, 1], a));
    }
    for expr in &sets {
        let mut f = sift::compile_ir(expr, &options).unwrap();
        sift_opt::optimize(&mut f);
        let reference = sift_ir::Interpreter::new(f.clone()).unwrap();
        let comparisons = sift::loop_free(&f).unwrap();
        assert!(comparisons.first_call().is_none(), "{expr}");
        let programs = load_all(&comparisons, expr);
        let (mut cache, mut accepted) = (sift_ir::Cache::new(), 0);
        for pkt in &packets {
            let want = reference.run(&mut cache, pkt, pkt.len() as u32);
            accepted += usize::from(want != 0);
            for (t, prog) in &programs {
                if !kernel::test_run_accepts(*t, pkt) {
                    continue;
                }
                let got = prog.run(pkt).unwrap();
                assert_eq!(got, expected(*t, want), "{expr} as {t} on {pkt:02x?}");
            }
        }
        assert!(
            accepted > 0 && accepted < packets.len(),
            "{expr}: {accepted}"
        );
    }
}

/// Port lists written out are lookup tables whose keys come in runs, searched run by run with
/// range tests: packets on every run's ends and their neighbours agree with libpcap.
#[test]
fn port_lists() {
    if !kernel_available() {
        return;
    }
    let oracle = sift_oracle::Oracle::new(ETHERNET, SNAPLEN).unwrap();
    let lists: [Vec<u16>; 3] = [
        (1000..1040).collect(),
        (0..4)
            .chain([25, 53])
            .chain(110..113)
            .chain(65533..=65535)
            .collect(),
        (0..12u16).flat_map(|r| r * 100..r * 100 + 3).collect(),
    ];
    for ports in &lists {
        let expr = ports
            .iter()
            .map(|p| format!("port {p}"))
            .collect::<Vec<_>>()
            .join(" or ");
        let mut packets = Vec::new();
        for &port in ports {
            for probe in [port.wrapping_sub(1), port, port.wrapping_add(1)] {
                for (ip6, proto) in [(false, 6), (false, 17), (true, 6), (true, 17)] {
                    packets.push(sift_testgen::ethernet_ports(ip6, proto, probe, 7).data);
                    packets.push(sift_testgen::ethernet_ports(ip6, proto, 7, probe).data);
                }
            }
        }
        let mut tally = Tally::default();
        compare_with(&oracle, &expr, true, true, &packets, &mut tally);
        check(&format!("{} ports", ports.len()), &tally);
        assert!(tally.matches > 0);
    }
}

/// Arithmetic corner cases: division by zero rejects, shifts by 32 or more give 0, constants
/// with the top bit set compare as unsigned, `len` is the packet's length.
#[test]
fn arithmetic_corner_cases() {
    if !kernel_available() {
        return;
    }
    let mut packets = Vec::new();
    for b in [0u8, 1, 2, 31, 32, 33, 64, 0x80, 0xff] {
        let mut p = ipv4_packet([10, 0, 0, b], [b, 0, 0, 1]);
        p[14 + 9] = b;
        packets.push(p.clone());
        p.extend(std::iter::repeat_n(b, usize::from(b)));
        packets.push(p);
    }
    let oracle = sift_oracle::Oracle::new(ETHERNET, SNAPLEN).unwrap();
    let mut tally = Tally::default();
    for e in [
        "ip[29] / ip[9] = 0",
        "ip[29] % ip[9] = 1",
        "ip[9] != 0 and 100 / ip[9] > 2",
        "1 << ip[29] = 0",
        "0xffffffff >> ip[29] = 1",
        "ip[12:4] > 0x80000000",
        "ip[12:4] & 0x80000000 != 0",
        "ip[16:4] = 0xff000001",
        "len > 100",
        "len - ip[29] = 54",
        "ip[ip[29] & 3] = 0x45",
        "ip[ip[29]:2] > 1000",
        "-ip[9] = 0xffffff00",
        "ether[60000] = 1",
        "ether[ip[9] * 1000] = 0",
    ] {
        for optimize in [true, false] {
            compare(&oracle, e, optimize, &packets, &mut tally);
        }
    }
    check("arithmetic", &tally);
}

/// XDP and tc return the configured actions.
#[test]
fn configurable_verdicts() {
    if !kernel_available() {
        return;
    }
    let f = ir("tcp", true).unwrap();
    let tcp = ipv4_packet([1, 1, 1, 1], [2, 2, 2, 2]);
    let mut udp = tcp.clone();
    udp[23] = 17;
    for t in [ProgramType::Xdp, ProgramType::SchedCls] {
        let opts = Options {
            on_match: 3,
            on_no_match: 0,
            ..Options::new(t)
        };
        let p = kernel::load(&sift_ebpf::compile(&f, &opts).unwrap(), "verdicts").unwrap();
        assert_eq!(p.run(&tcp).unwrap(), 3, "{t}");
        assert_eq!(p.run(&udp).unwrap(), 0, "{t}");
    }
}

/// A function with more values live at once than there are registers: the rest live in stack
/// slots, and the verifier must accept the spills and fills.
#[test]
fn many_live_values_spill_to_the_stack() {
    if !kernel_available() {
        return;
    }
    // v0..v23 = the packet's bytes 0..23, all live until they are summed in reverse order.
    let n = 24u32;
    let mut text = String::from("block0:\n");
    for i in 0..n {
        text += &format!("    v{i} = load.b [{i}]\n");
    }
    let mut acc = n - 1;
    let mut next = n;
    for i in (0..n - 1).rev() {
        text += &format!("    v{next} = add v{acc}, v{i}\n");
        acc = next;
        next += 1;
    }
    text += &format!(
        "    v{next} = const 1\n    v{} = or v{acc}, v{next}\n",
        next + 1
    );
    text += &format!("    ret v{}\n", next + 1);
    let f = sift_ir::parse_function(&text).unwrap();
    let reference = sift_ir::Interpreter::new(f.clone()).unwrap();
    let programs = load_all(&f, "many live values");
    for len in [14usize, 23, 24, 60] {
        let pkt: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
        let want = reference.run(&mut sift_ir::Cache::new(), &pkt, len as u32);
        for (t, p) in &programs {
            assert_eq!(p.run(&pkt).unwrap(), expected(*t, want), "{t}, {len} bytes");
        }
    }
}

/// Runs a command, returning whether it succeeded, with its output on failure.
fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{cmd} {}: {text}", args.join(" ")))
    }
}

/// A network namespace with a veth pair, deleted on drop.
struct Netns(String);

impl Netns {
    fn new() -> Result<Netns, String> {
        let name = format!("sift-ebpf-{}", std::process::id());
        run("ip", &["netns", "add", &name])?;
        let ns = Netns(name);
        ns.ip(&[
            "link", "add", "veth0", "type", "veth", "peer", "name", "veth1",
        ])?;
        ns.ip(&["link", "set", "veth0", "up"])?;
        ns.ip(&["link", "set", "veth1", "up"])?;
        Ok(ns)
    }

    fn ip(&self, args: &[&str]) -> Result<String, String> {
        let mut all = vec!["-n", self.0.as_str()];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    fn tc(&self, args: &[&str]) -> Result<String, String> {
        let mut all = vec!["-n", self.0.as_str()];
        all.extend_from_slice(args);
        run("tc", &all)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run("ip", &["netns", "del", &self.0]);
    }
}

/// The ELF objects load through iproute2 (libbpf): `ip link set dev veth0 xdp obj FILE sec xdp`
/// and `tc filter add dev veth0 ingress bpf da obj FILE sec tc`, on a veth pair in a network
/// namespace the test creates.
#[test]
fn elf_objects_load_with_iproute2() {
    if !kernel_available() {
        return;
    }
    let ns = match Netns::new() {
        Ok(ns) => ns,
        Err(e) if std::env::var("SIFT_SKIP_KERNEL_TESTS").as_deref() == Ok("1") => {
            eprintln!("\n*** SKIPPED: cannot create a network namespace: {e} ***\n");
            return;
        }
        Err(e) => panic!("cannot create a network namespace with a veth pair: {e}"),
    };
    let dir = std::env::temp_dir().join(format!("sift-ebpf-elf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = ir("tcp port 80 or (ip6 and udp) or ip[ip[0] & 0xf] = 4", true).unwrap();
    let object = |t: ProgramType| {
        let p = sift_ebpf::compile(&f, &Options::new(t)).unwrap();
        let path = dir.join(format!("{t}.o"));
        std::fs::write(&path, sift_ebpf::to_elf(&p, "sift_filter").unwrap()).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let xdp = object(ProgramType::Xdp);
    ns.ip(&[
        "link", "set", "dev", "veth0", "xdp", "obj", &xdp, "sec", "xdp",
    ])
    .unwrap();
    let shown = ns.ip(&["link", "show", "dev", "veth0"]).unwrap();
    assert!(shown.contains("prog/xdp"), "{shown}");
    ns.ip(&["link", "set", "dev", "veth0", "xdp", "off"])
        .unwrap();

    let tc = object(ProgramType::SchedCls);
    ns.tc(&["qdisc", "add", "dev", "veth0", "clsact"]).unwrap();
    ns.tc(&[
        "filter", "add", "dev", "veth0", "ingress", "bpf", "da", "obj", &tc, "sec", "tc",
    ])
    .unwrap();
    let shown = ns
        .tc(&["filter", "show", "dev", "veth0", "ingress"])
        .unwrap();
    assert!(shown.contains("sift_filter"), "{shown}");
    assert!(shown.contains("jited"), "{shown}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two namespaces joined by a veth pair (`veth-a` 10.9.9.1 in the first, `veth-b` 10.9.9.2
/// in the second), deleted on drop.
struct Link {
    a: Netns,
    b: Netns,
}

impl Link {
    fn new() -> Result<Link, String> {
        let pid = std::process::id();
        let (na, nb) = (format!("sift-ebpf-a-{pid}"), format!("sift-ebpf-b-{pid}"));
        run("ip", &["netns", "add", &na])?;
        let a = Netns(na);
        run("ip", &["netns", "add", &nb])?;
        let b = Netns(nb);
        a.ip(&[
            "link", "add", "veth-a", "type", "veth", "peer", "name", "veth-b", "netns", &b.0,
        ])?;
        a.ip(&["addr", "add", "10.9.9.1/24", "dev", "veth-a"])?;
        b.ip(&["addr", "add", "10.9.9.2/24", "dev", "veth-b"])?;
        a.ip(&["link", "set", "veth-a", "up"])?;
        b.ip(&["link", "set", "veth-b", "up"])?;
        Ok(Link { a, b })
    }

    /// Sends UDP datagrams from b to a (which needs ARP first) and returns b's neighbour
    /// entry for a once it is resolved, or the last entry seen after a few seconds.
    fn resolve_from_b(&self) -> String {
        let mut last = String::new();
        for _ in 0..10 {
            let _ = run(
                "ip",
                &[
                    "netns",
                    "exec",
                    &self.b.0,
                    "bash",
                    "-c",
                    "echo sift > /dev/udp/10.9.9.1/9",
                ],
            );
            std::thread::sleep(std::time::Duration::from_millis(300));
            last = self
                .b
                .ip(&["neigh", "show", "10.9.9.1"])
                .unwrap_or_default();
            if last.contains("lladdr") {
                break;
            }
        }
        last
    }
}

/// The XDP object attached with iproute2 decides real traffic: with `arp` the ARP request
/// from the peer passes and the address resolves; with `not arp` it is dropped and never does.
#[test]
fn xdp_object_filters_live_traffic() {
    if !kernel_available() {
        return;
    }
    if run("bash", &["-c", "true"]).is_err() {
        eprintln!("\n*** SKIPPED: bash is needed to send datagrams from the namespace ***\n");
        return;
    }
    let dir = std::env::temp_dir().join(format!("sift-ebpf-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (expr, resolves) in [("arp", true), ("not arp", false)] {
        let link = Link::new().unwrap_or_else(|e| panic!("cannot build the veth link: {e}"));
        let p =
            sift_ebpf::compile(&ir(expr, true).unwrap(), &Options::new(ProgramType::Xdp)).unwrap();
        let path = dir.join("filter.o");
        std::fs::write(&path, sift_ebpf::to_elf(&p, "sift_filter").unwrap()).unwrap();
        let path = path.to_str().unwrap();
        link.a
            .ip(&[
                "link", "set", "dev", "veth-a", "xdp", "obj", path, "sec", "xdp",
            ])
            .unwrap();
        let neigh = link.resolve_from_b();
        assert_eq!(neigh.contains("lladdr"), resolves, "{expr}: {neigh}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
