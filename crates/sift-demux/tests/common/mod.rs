//! Shared by the integration tests: packet builders, connection filters, and the oracle (every
//! installed filter run alone by the IR interpreter, in priority order).

#![allow(dead_code)]

use sift_demux::{Delivery, Demux, FilterId};
use sift_ir::{Cache, Function, Interpreter};
use sift_testgen::Rng;

pub const ETHERNET: u32 = 1;
pub const SNAPLEN: u32 = 262144;

/// A TCP or UDP connection: addresses (4 or 16 bytes) and ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conn {
    pub src: Vec<u8>,
    pub dst: Vec<u8>,
    pub sport: u16,
    pub dport: u16,
    pub udp: bool,
}

fn addr_text(a: &[u8]) -> String {
    if a.len() == 4 {
        format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
    } else {
        let words: Vec<String> = a
            .chunks(2)
            .map(|c| format!("{:x}", u16::from_be_bytes([c[0], c[1]])))
            .collect();
        words.join(":")
    }
}

impl Conn {
    pub fn random(rng: &mut Rng, v6: bool) -> Conn {
        // Small pools so that filters collide and packets hit them.
        let a4 = |rng: &mut Rng| vec![10, 0, rng.below(2) as u8, rng.below(4) as u8];
        let a6 = |rng: &mut Rng| {
            let mut a = vec![0u8; 16];
            a[0] = 0x20;
            a[1] = 0x01;
            a[15] = rng.below(4) as u8;
            a
        };
        let (src, dst) = if v6 {
            (a6(rng), a6(rng))
        } else {
            (a4(rng), a4(rng))
        };
        Conn {
            src,
            dst,
            sport: 1000 + rng.below(4) as u16,
            dport: [80u16, 443, 8080][rng.index(3)],
            udp: rng.chance(1, 5),
        }
    }

    /// The per-connection filter of the issue.
    pub fn expr(&self) -> String {
        let (ip, proto) = (
            if self.src.len() == 4 { "ip" } else { "ip6" },
            if self.udp { "udp" } else { "tcp" },
        );
        format!(
            "{ip} src {} and {ip} dst {} and {proto} src port {} and {proto} dst port {}",
            addr_text(&self.src),
            addr_text(&self.dst),
            self.sport,
            self.dport
        )
    }

    /// An Ethernet frame of this connection. `ip_options`: IPv4 header words beyond 5;
    /// `frag`: IPv4 flags+offset field.
    pub fn packet(&self, ip_options: u8, frag: u16, payload: usize) -> Vec<u8> {
        let mut p = vec![0u8; 12];
        let l4len = 20 + payload;
        let proto = if self.udp { 17 } else { 6 };
        if self.src.len() == 4 {
            p.extend_from_slice(&[0x08, 0x00]);
            let ihl = 5 + ip_options;
            let total = usize::from(ihl) * 4 + l4len;
            p.extend_from_slice(&[0x40 | ihl, 0]);
            p.extend_from_slice(&(total as u16).to_be_bytes());
            p.extend_from_slice(&[0x12, 0x34]);
            p.extend_from_slice(&frag.to_be_bytes());
            p.extend_from_slice(&[64, proto, 0, 0]);
            p.extend_from_slice(&self.src);
            p.extend_from_slice(&self.dst);
            p.extend(std::iter::repeat_n(1u8, usize::from(ip_options) * 4));
        } else {
            p.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            p.extend_from_slice(&(l4len as u16).to_be_bytes());
            p.extend_from_slice(&[proto, 64]);
            p.extend_from_slice(&self.src);
            p.extend_from_slice(&self.dst);
        }
        p.extend_from_slice(&self.sport.to_be_bytes());
        p.extend_from_slice(&self.dport.to_be_bytes());
        p.extend(std::iter::repeat_n(0u8, 16 + payload));
        p
    }
}

pub fn compile(expr: &str) -> Option<Function> {
    sift::compile_ir(expr, &sift::Options::new(ETHERNET, SNAPLEN)).ok()
}

/// One installed filter as the oracle sees it.
pub struct Installed {
    pub id: FilterId,
    pub priority: i32,
    pub delivery: Delivery,
    pub interp: Interpreter,
}

/// Inserts `f` into `demux` and records it for the oracle; returns its id.
pub fn install(
    demux: &mut Demux,
    installed: &mut Vec<Installed>,
    f: Function,
    priority: i32,
    delivery: Delivery,
) -> FilterId {
    let id = demux.insert(&f, priority, delivery).unwrap();
    installed.push(Installed {
        id,
        priority,
        delivery,
        interp: Interpreter::new(f).unwrap(),
    });
    id
}

/// CSPF delivery by running every filter alone: (delivered in order, exclusive winner).
pub fn oracle(
    installed: &[Installed],
    pkt: &[u8],
    wire_len: u32,
    all: bool,
    cache: &mut Cache,
) -> (Vec<FilterId>, Option<FilterId>) {
    let mut order: Vec<&Installed> = installed.iter().collect();
    order.sort_by_key(|f| (std::cmp::Reverse(f.priority), f.id));
    let mut delivered = Vec::new();
    let mut winner = None;
    for f in order {
        if f.interp.run(cache, pkt, wire_len) == 0 {
            continue;
        }
        delivered.push(f.id);
        if f.delivery == Delivery::Exclusive {
            if winner.is_none() {
                winner = Some(f.id);
            }
            if !all {
                break;
            }
        }
    }
    (delivered, winner)
}
