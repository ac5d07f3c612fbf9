//! Name resolution the way libpcap does it on Linux: services and protocols from
//! `/etc/services` and `/etc/protocols` (what `getaddrinfo` and `getprotobyname` consult), network
//! names from `/etc/networks`, Ethernet host names from `/etc/ethers`, and host names through the
//! system resolver (`getaddrinfo`, via the standard library).

use std::net::{IpAddr, ToSocketAddrs};

use crate::proto::{IPPROTO_TCP, IPPROTO_UDP};

/// Lines of a netdb-style file without comments, split into words.
fn entries(path: &str) -> Vec<Vec<String>> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .filter(|w| !w.is_empty())
        .collect()
}

fn service_port(name: &str, proto: &str) -> Option<u32> {
    if let Ok(n) = name.parse::<u16>() {
        return Some(u32::from(n));
    }
    entries("/etc/services").into_iter().find_map(|w| {
        let (port, p) = w.get(1)?.split_once('/')?;
        let named = w[0] == name || w[2..].iter().any(|a| a == name);
        (p == proto && named).then(|| port.parse().ok())?
    })
}

/// The transport protocol a port name was found for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortOwner {
    Proto(u32),
    /// Found for both TCP and UDP with the same number.
    Any,
}

/// `pcap_nametoport`: the port of a service name, looked up for TCP and for UDP.
pub(crate) fn port(name: &str) -> Option<(u32, PortOwner)> {
    let tcp = service_port(name, "tcp");
    let udp = service_port(name, "udp");
    match (tcp, udp) {
        (Some(t), Some(u)) if t == u => Some((t, PortOwner::Any)),
        (Some(t), _) => Some((t, PortOwner::Proto(IPPROTO_TCP))),
        (None, Some(u)) => Some((u, PortOwner::Proto(IPPROTO_UDP))),
        (None, None) => None,
    }
}

/// Parses a leading decimal integer like C's `%d` (optional sign, leading blanks).
fn scan_int(s: &str) -> Option<(i64, &str)> {
    let t = s.trim_start();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let v: i64 = t[..digits].parse().unwrap_or(i64::MAX);
    Some((if neg { -v } else { v }, &t[digits..]))
}

/// `pcap_nametoportrange`: `N-M`, or `name-name`.
pub(crate) fn port_range(name: &str) -> Option<(i64, i64, PortOwner)> {
    if let Some((a, rest)) = scan_int(name) {
        if let Some((b, _)) = rest.strip_prefix('-').and_then(scan_int) {
            return Some((a, b, PortOwner::Any));
        }
    }
    let (first, second) = name.split_once('-')?;
    let (p1, o1) = port(first)?;
    let (p2, o2) = port(second)?;
    let owner = if o1 == o2 { o1 } else { PortOwner::Any };
    Some((i64::from(p1), i64::from(p2), owner))
}

/// `getprotobyname`: an IP protocol number by name.
pub(crate) fn ip_protocol(name: &str) -> Option<u32> {
    entries("/etc/protocols").into_iter().find_map(|w| {
        let named = w[0] == name || w[2..].iter().any(|a| a == name);
        named.then(|| w.get(1)?.parse().ok())?
    })
}

/// Link-layer protocol names libpcap knows (`pcap_nametoeproto`, then `pcap_nametollc`).
pub(crate) fn ether_protocol(name: &str) -> Option<u32> {
    Some(match name {
        "aarp" => 0x80f3,
        "arp" => 0x0806,
        "atalk" => 0x809b,
        "decnet" => 0x6003,
        "ip" => 0x0800,
        "ip6" => 0x86dd,
        "lat" => 0x6004,
        "loopback" => 0x9000,
        "mopdl" => 0x6001,
        "moprc" => 0x6002,
        "rarp" => 0x8035,
        "sca" => 0x6007,
        "iso" => 0xfe,
        "stp" => 0x42,
        "ipx" => 0xe0,
        "netbeui" => 0xf0,
        _ => return None,
    })
}

/// `getnetbyname`: a network number from `/etc/networks` (0 if unknown, as libpcap treats it).
pub(crate) fn network(name: &str) -> u32 {
    entries("/etc/networks")
        .into_iter()
        .find_map(|w| {
            let named = w[0] == name || w[2..].iter().any(|a| a == name);
            if !named {
                return None;
            }
            let mut v = 0u32;
            for part in w.get(1)?.split('.') {
                v = (v << 8) | part.parse::<u32>().ok()?;
            }
            Some(v)
        })
        .unwrap_or(0)
}

/// `pcap_ether_hostton`: a MAC address from `/etc/ethers`.
pub(crate) fn ether_host(name: &str) -> Option<[u8; 6]> {
    entries("/etc/ethers").into_iter().find_map(|w| {
        if w.get(1)? != name {
            return None;
        }
        parse_mac(&w[0])
    })
}

/// Parses `xx:xx:xx:xx:xx:xx` (also `-` or `.` separated, and `xxxx.xxxx.xxxx`).
pub(crate) fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let hex: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    let parts: Vec<&str> = s.split([':', '-', '.']).collect();
    let mut out = [0u8; 6];
    if parts.len() == 6 {
        for (o, p) in out.iter_mut().zip(&parts) {
            *o = u8::from_str_radix(p, 16).ok()?;
        }
        return Some(out);
    }
    if parts.len() == 3 && hex.len() == 12 || parts.len() == 1 && hex.len() == 12 {
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
        }
        return Some(out);
    }
    None
}

/// `getaddrinfo(name)`: every address of a host, in the resolver's order.
pub(crate) fn host_addresses(name: &str) -> Vec<IpAddr> {
    match (name, 0u16).to_socket_addrs() {
        Ok(addrs) => addrs.map(|a| a.ip()).collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs() {
        assert_eq!(
            parse_mac("00:11:22:33:44:55"),
            Some([0, 0x11, 0x22, 0x33, 0x44, 0x55])
        );
        assert_eq!(parse_mac("0:1:2:3:4:5"), Some([0, 1, 2, 3, 4, 5]));
        assert_eq!(
            parse_mac("0011.2233.4455"),
            Some([0, 0x11, 0x22, 0x33, 0x44, 0x55])
        );
    }

    #[test]
    fn ranges() {
        assert_eq!(port_range("20-21"), Some((20, 21, PortOwner::Any)));
        assert_eq!(port_range("x"), None);
    }
}
