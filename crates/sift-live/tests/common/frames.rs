//! Ethernet frames for the tests: IPv4/IPv6 with TCP or UDP, ARP, 802.1Q, all from a marker
//! source address so that nothing the kernel sends by itself can be mistaken for them.

/// Source address of every test frame.
pub const MARK: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// Source address of the frame that ends a test run.
pub const TERM: [u8; 6] = [0x02, 0, 0, 0, 0, 0xff];
/// Destination of unicast test frames: not the capturing interface's address, so the host's
/// stack drops them (they are "other host" frames).
pub const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
pub const BROADCAST: [u8; 6] = [0xff; 6];

/// `ether src 02:00:00:00:00:ff`, the terminator's filter.
pub const TERM_EXPR: &str = "ether src 02:00:00:00:00:ff";

pub fn ethernet(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

pub fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], l4: &[u8]) -> Vec<u8> {
    let total = (20 + l4.len()) as u16;
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0x12, 0x34, 0x40, 0, 64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    let c = checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(l4);
    h
}

pub fn ipv6(next: u8, l4: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    h.extend_from_slice(l4);
    h
}

pub fn tcp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0x20, 0, 0, 0, 0, 0]);
    h.extend_from_slice(payload);
    h
}

pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(payload);
    h
}

const SRC4: [u8; 4] = [198, 51, 100, 1];
const DST4: [u8; 4] = [198, 51, 100, 2];

pub fn tcp4(dport: u16, payload_len: usize) -> Vec<u8> {
    let payload = vec![0xab; payload_len];
    ethernet(
        DST,
        MARK,
        0x0800,
        &ipv4(6, SRC4, DST4, &tcp(40000, dport, &payload)),
    )
}

pub fn udp4(dport: u16, payload_len: usize) -> Vec<u8> {
    let payload = vec![0xcd; payload_len];
    ethernet(
        DST,
        MARK,
        0x0800,
        &ipv4(17, SRC4, DST4, &udp(40000, dport, &payload)),
    )
}

pub fn tcp6(dport: u16) -> Vec<u8> {
    ethernet(DST, MARK, 0x86dd, &ipv6(6, &tcp(40000, dport, b"v6")))
}

pub fn udp6(dport: u16) -> Vec<u8> {
    ethernet(DST, MARK, 0x86dd, &ipv6(17, &udp(40000, dport, b"v6")))
}

/// An ARP request for 198.51.100.2 (the lab also turns ARP answers off).
pub fn arp() -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4, 0, 1];
    a.extend_from_slice(&MARK);
    a.extend_from_slice(&SRC4);
    a.extend_from_slice(&[0; 6]);
    a.extend_from_slice(&DST4);
    ethernet(BROADCAST, MARK, 0x0806, &a)
}

/// `frame` with an 802.1Q tag (VLAN `vid`) after the addresses.
pub fn vlan_tagged(frame: &[u8], vid: u16) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&0x8100u16.to_be_bytes());
    f.extend_from_slice(&vid.to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

/// The frame that ends a run: matches [`TERM_EXPR`] and nothing the tests look for.
pub fn terminator() -> Vec<u8> {
    ethernet(DST, TERM, 0x88b5, b"end of test run, padded to the minimum")
}

/// A mix of everything, with a known position for each kind.
pub fn mix() -> Vec<Vec<u8>> {
    vec![
        tcp4(80, 10),    // 0
        udp4(53, 20),    // 1
        arp(),           // 2
        tcp4(22, 0),     // 3
        tcp6(80),        // 4
        udp6(53),        // 5
        udp4(5353, 300), // 6
        tcp4(80, 1400),  // 7
        tcp4(8080, 5),   // 8
        udp4(80, 1),     // 9
    ]
}
