//! The hand-written 4-tuple demultiplexer the demux bench and the `match_loop` example
//! compare against: Ethernet/IPv4/TCP parsed by hand with exactly the checks libpcap's filter
//! `ip src A and ip dst B and tcp src port P and tcp dst port Q` makes (at least 34 bytes
//! captured, IPv4 ethertype, protocol 6, fragment offset 0, both ports captured after the
//! IHL), then one lookup in a `HashMap` with the same hasher family as sift's tables (seeded
//! foldhash). It has what the demultiplexer cannot have: the fields and checks fixed at
//! compile time, inlined into the caller's loop, no snapshot to load (no concurrent updates)
//! and no copy list to fill.

use std::collections::HashMap;

use sift_demux::FilterId;

pub struct HandWritten {
    map: HashMap<(u32, u32, u16, u16), FilterId, foldhash::fast::RandomState>,
}

impl HandWritten {
    pub fn new() -> HandWritten {
        HandWritten {
            map: HashMap::with_hasher(foldhash::fast::RandomState::default()),
        }
    }

    pub fn insert(&mut self, src: u32, dst: u32, sport: u16, dport: u16, id: FilterId) {
        self.map.insert((src, dst, sport, dport), id);
    }

    #[inline]
    pub fn lookup(&self, p: &[u8]) -> Option<FilterId> {
        if p.len() < 34 || p[12..14] != [0x08, 0x00] || p[23] != 6 {
            return None;
        }
        if u16::from_be_bytes([p[20], p[21]]) & 0x1fff != 0 {
            return None;
        }
        let src = u32::from_be_bytes([p[26], p[27], p[28], p[29]]);
        let dst = u32::from_be_bytes([p[30], p[31], p[32], p[33]]);
        let tcp = 14 + usize::from(p[14] & 15) * 4;
        let ports = p.get(tcp..tcp + 4)?;
        let sport = u16::from_be_bytes([ports[0], ports[1]]);
        let dport = u16::from_be_bytes([ports[2], ports[3]]);
        self.map.get(&(src, dst, sport, dport)).copied()
    }
}
