//! `protochain` against libpcap 1.10 on hand-built header chains: IPv6 with 0 to 120 extension
//! headers (past the 32 an unrolled walk would cover), AH headers in IPv4 and IPv6, chains that
//! end in `IPPROTO_NONE`, and every truncation of a few of them. The JIT, the bytecode
//! interpreter and the lowered IR must agree on every packet, and with libpcap wherever
//! libpcap's loop terminates. Where it does not (an AH header whose length points back at
//! itself; libpcap 1.10 computes the next offset from the network header), sift rejects.

use sift_oracle::{Oracle, DEFAULT_SNAPLEN};

const ETHERTYPE_IP: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;

fn ethernet(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
    p.extend(ethertype.to_be_bytes());
    p.extend_from_slice(payload);
    p
}

/// IPv6 whose header chain is `chain` (each entry: a header type and its 8-byte units beyond the
/// first), ending in `last` with an 8-byte body.
fn ipv6(chain: &[(u8, u8)], last: u8) -> Vec<u8> {
    let mut ip = vec![0u8; 40];
    ip[0] = 0x60;
    ip[6] = chain.first().map_or(last, |h| h.0);
    ip[7] = 64;
    for (i, &(kind, units)) in chain.iter().enumerate() {
        let next = chain.get(i + 1).map_or(last, |h| h.0);
        let mut h = vec![0u8; 8 * (usize::from(units) + 1)];
        h[0] = next;
        // AH counts its length in 4-byte units minus 2; the others in 8-byte units minus 1.
        h[1] = if kind == 51 { 2 * units } else { units };
        ip.extend(h);
    }
    ip.extend([0u8; 8]);
    ethernet(ETHERTYPE_IPV6, &ip)
}

/// IPv4 (with `options` 4-byte words of options) carrying `proto`, then `rest`.
fn ipv4(options: u8, proto: u8, rest: &[u8]) -> Vec<u8> {
    let mut ip = vec![0u8; 20 + 4 * usize::from(options)];
    ip[0] = 0x45 + options;
    ip[8] = 64;
    ip[9] = proto;
    ip.extend_from_slice(rest);
    ethernet(ETHERTYPE_IP, &ip)
}

fn packets() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let kinds = [0u8, 60, 43, 44, 51];
    for n in 0..=120usize {
        let chain: Vec<(u8, u8)> = (0..n)
            .map(|i| (kinds[(i * 7 + n) % kinds.len()], (i % 3) as u8))
            .collect();
        for last in [6u8, 17, 59, 58] {
            out.push(ipv6(&chain, last));
        }
    }
    // AH in IPv4: the offset after AH is (len + 2) * 4 from the IP header, so an AH whose
    // length lands on a TCP-announcing byte walks on; one landing on itself never ends.
    for ihl_options in [0u8, 1] {
        let ah_at = 20 + 4 * u32::from(ihl_options);
        for len in 0u8..12 {
            let mut rest = vec![0u8; 64];
            rest[0] = 6;
            rest[1] = len;
            let next = (u32::from(len) + 2) * 4;
            if let Some(b) = next
                .checked_sub(ah_at)
                .and_then(|i| rest.get_mut(i as usize))
            {
                *b = 51;
            }
            out.push(ipv4(ihl_options, 51, &rest));
        }
    }
    // Every truncation of a few chains.
    for p in [
        ipv6(&[(0, 0), (43, 1), (44, 0)], 6),
        ipv6(&[(51, 1), (60, 2)], 17),
        ipv4(0, 51, &[6, 4, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0]),
    ] {
        for len in 0..p.len() {
            out.push(p[..len].to_vec());
        }
    }
    out
}

const EXPRESSIONS: &[&str] = &[
    "ip6 protochain 6",
    "ip6 protochain 17",
    "ip6 protochain 59",
    "ip6 protochain 44",
    "ip6 protochain 51",
    "ip protochain 6",
    "ip protochain 51",
    "protochain 6",
    "protochain 58 or udp",
    "ip6 protochain 43 and ip6 protochain 6",
    "not ip6 protochain 6",
];

#[test]
fn agrees_with_libpcap_on_header_chains() {
    let oracle = Oracle::new(1, DEFAULT_SNAPLEN).expect("libpcap");
    let packets = packets();
    let (mut compared, mut looping) = (0u64, 0u64);
    for expr in EXPRESSIONS {
        let f = sift::Filter::compile(expr, 1, DEFAULT_SNAPLEN).expect(expr);
        let reference = oracle.compile(expr, true, 0).expect(expr);
        for p in &packets {
            let wire = p.len() as u32;
            let got = f.run(p, wire);
            let (interpreted, lowered) = (f.run_interpreted(p, wire), f.run_reference(p, wire));
            assert!(
                got == interpreted && got == lowered,
                "engines disagree on `{expr}` for {p:02x?}: {got} {interpreted} {lowered}"
            );
            match reference.run_bounded(p, wire, sift_oracle::diff::MAX_STEPS) {
                Some(want) => {
                    assert_eq!(got, want, "`{expr}` on {p:02x?}");
                    compared += 1;
                }
                None => {
                    assert_eq!(got, 0, "`{expr}`: libpcap loops forever on {p:02x?}");
                    looping += 1;
                }
            }
        }
    }
    eprintln!("{compared} pairs agree with libpcap; {looping} pairs where libpcap never ends");
    assert!(compared > 4_000 && looping > 0);
}
