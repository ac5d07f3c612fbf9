//! The shapes of the scanner's token rules that are not fixed strings: numbers, MAC
//! addresses, `$xx` host ids, IPv6 addresses, malformed MAC addresses and identifiers, each as
//! the length of its longest match at a position (flex's rules, matched by hand), and the
//! conversions of the matched text.

use std::net::Ipv6Addr;
use std::str::FromStr;

use crate::error::ParseErrorKind;

pub(super) fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// Length of `[0-9A-Fa-f]{1,max}` at `i`: returns every possible end.
pub(super) fn hex_ends(s: &[u8], i: usize, min: usize, max: usize, out: &mut Vec<usize>) {
    let mut n = 0;
    while n < max && i + n < s.len() && is_hex(s[i + n]) {
        n += 1;
        if n >= min {
            out.push(i + n);
        }
    }
}

/// Every end of a match of `N` (`[0-9]+|0[xX][0-9A-Fa-f]+`) starting at `i`.
pub(super) fn num_ends(s: &[u8], i: usize, out: &mut Vec<usize>) {
    let mut j = i;
    while j < s.len() && s[j].is_ascii_digit() {
        j += 1;
        out.push(j);
    }
    if i + 2 < s.len() && s[i] == b'0' && (s[i + 1] == b'x' || s[i + 1] == b'X') {
        let mut j = i + 2;
        while j < s.len() && is_hex(s[j]) {
            j += 1;
            out.push(j);
        }
    }
}

/// The length of the run of bytes satisfying `pred` from `i`.
fn run_len(s: &[u8], i: usize, pred: impl Fn(u8) -> bool) -> usize {
    s.get(i..)
        .map_or(0, |rest| rest.iter().take_while(|&&b| pred(b)).count())
}

/// The last end [`hex_ends`] would return, without listing the others.
pub(super) fn hex_end(s: &[u8], i: usize, min: usize, max: usize) -> Option<usize> {
    let n = run_len(s, i, is_hex).min(max);
    (n >= min).then_some(i + n)
}

/// The farthest end [`num_ends`] would return, without listing the others.
pub(super) fn num_end(s: &[u8], i: usize) -> Option<usize> {
    let decimal = run_len(s, i, |b| b.is_ascii_digit());
    let hex = if i + 2 < s.len() && s[i] == b'0' && (s[i + 1] == b'x' || s[i + 1] == b'X') {
        // Counted after the `0x`: a match needs at least one hex digit there.
        match run_len(s, i + 2, is_hex) {
            0 => 0,
            n => n + 2,
        }
    } else {
        0
    };
    match decimal.max(hex) {
        0 => None,
        n => Some(i + n),
    }
}

/// Pattern elements for the position-set matcher.
#[derive(Clone, Copy)]
pub(super) enum El {
    /// `{W}`: 1 to 4 hex digits.
    W,
    /// `{B}`: 1 or 2 hex digits.
    B,
    /// `{B2}`: exactly 4 hex digits.
    B2,
    /// `{N}`
    N,
    Lit(u8),
}

/// Longest match of the concatenation `pat` at `i` (`None` if no match).
pub(super) fn longest(s: &[u8], i: usize, pat: &[El]) -> Option<usize> {
    // Two buffers for the whole match: the lexer calls this at every address-like token.
    let mut cur = vec![i];
    let mut next = Vec::new();
    for el in pat {
        next.clear();
        for &p in &cur {
            match *el {
                El::W => hex_ends(s, p, 1, 4, &mut next),
                El::B => hex_ends(s, p, 1, 2, &mut next),
                El::B2 => hex_ends(s, p, 4, 4, &mut next),
                El::N => num_ends(s, p, &mut next),
                El::Lit(c) => {
                    if p < s.len() && s[p] == c {
                        next.push(p + 1)
                    }
                }
            }
        }
        next.sort_unstable();
        next.dedup();
        if next.is_empty() {
            return None;
        }
        std::mem::swap(&mut cur, &mut next);
    }
    cur.last().copied()
}

/// What the address-like text at a position holds: the maximal run of characters any address
/// pattern can consume (hex digits, `x`, `:`, `.`, `-`). A pattern can only match where the
/// run holds as many of each separator as the pattern has, and starts with as many hex digits
/// as the pattern starts with, so the lexer skips the others (the 60 IPv6 patterns on every
/// dotted quad and number, the MAC address patterns on every number: most of the lexing time
/// of a long `host` chain).
#[derive(Clone, Copy)]
pub(super) struct AddressRun {
    pub(super) colons: usize,
    pub(super) dots: usize,
    pub(super) dashes: usize,
    /// How many hex digits the run starts with.
    pub(super) leading_hex: usize,
}

impl AddressRun {
    pub(super) fn at(s: &[u8], i: usize) -> AddressRun {
        let run = s[i..]
            .iter()
            .take_while(|&&b| is_hex(b) || matches!(b, b'x' | b'X' | b':' | b'.' | b'-'));
        let mut counts = AddressRun {
            colons: 0,
            dots: 0,
            dashes: 0,
            leading_hex: run_len(s, i, is_hex),
        };
        for &b in run {
            match b {
                b':' => counts.colons += 1,
                b'.' => counts.dots += 1,
                b'-' => counts.dashes += 1,
                _ => {}
            }
        }
        counts
    }
}

pub(super) fn mac_len(s: &[u8], i: usize, run: AddressRun) -> Option<usize> {
    use El::*;
    let mut best: Option<usize> = None;
    // Six bytes with five separators.
    for (sep, count) in [(b':', run.colons), (b'-', run.dashes), (b'.', run.dots)] {
        if count < 5 {
            continue;
        }
        let pat = [
            B,
            Lit(sep),
            B,
            Lit(sep),
            B,
            Lit(sep),
            B,
            Lit(sep),
            B,
            Lit(sep),
            B,
        ];
        best = best.max(longest(s, i, &pat));
    }
    // Three groups of four hex digits, with two dots or none.
    if run.dots >= 2 && run.leading_hex >= 4 {
        best = best.max(longest(s, i, &[B2, Lit(b'.'), B2, Lit(b'.'), B2]));
    }
    if run.leading_hex >= 12 {
        best = best.max(longest(s, i, &[B2, B2, B2]));
    }
    best
}

/// The longest of `N.N`, `N.N.N` and `N.N.N.N` at `i`. Every dotted IPv4 token goes through
/// here, so rather than with the general [`longest`] it is matched greedily, which gives the
/// same end: of the ends of an `N`, only the farthest can be followed by a `.` (the others are
/// followed by a digit, or by the `x` of `0x`).
pub(super) fn hid_len(s: &[u8], i: usize) -> Option<usize> {
    let mut end = num_end(s, i)?;
    let mut best = None;
    for _ in 1..4 {
        if s.get(end) != Some(&b'.') {
            break;
        }
        let Some(part_end) = num_end(s, end + 1) else {
            break;
        };
        end = part_end;
        best = Some(end);
    }
    best
}

/// The 60 IPv6 patterns of scanner.l (`V680` ... `V6004`).
pub(super) fn v6_patterns() -> Vec<Vec<El>> {
    use El::*;
    fn groups(n: usize) -> Vec<El> {
        let mut v = Vec::new();
        for k in 0..n {
            if k > 0 {
                v.push(Lit(b':'));
            }
            v.push(W);
        }
        v
    }
    let ipv4 = [N, Lit(b'.'), N, Lit(b'.'), N, Lit(b'.'), N];
    let mut pats = vec![groups(8)];
    // `::` somewhere, 7 down to 0 groups in all.
    for total in (0..=7).rev() {
        for left in 0..=total {
            let mut p = groups(left);
            p.extend([Lit(b':'), Lit(b':')]);
            p.extend(groups(total - left));
            pats.push(p);
        }
    }
    // Six groups, no `::`, then dotted quad.
    let mut p = groups(6);
    p.push(Lit(b':'));
    p.extend(ipv4);
    pats.push(p);
    // `::` and 5 down to 0 groups, then dotted quad.
    for total in (0..=5).rev() {
        for left in 0..=total {
            let mut p = groups(left);
            p.extend([Lit(b':'), Lit(b':')]);
            let right = total - left;
            p.extend(groups(right));
            if right > 0 {
                p.push(Lit(b':'));
            }
            p.extend(ipv4);
            pats.push(p);
        }
    }
    pats
}

pub(super) fn v6_len(s: &[u8], i: usize, pats: &[Vec<El>]) -> Option<usize> {
    pats.iter().filter_map(|p| longest(s, i, p)).max()
}

/// `{B}:+({B}:+)+`
pub(super) fn bogus_eid_len(s: &[u8], i: usize) -> Option<usize> {
    let step = |starts: &[usize]| -> Vec<usize> {
        let mut out = Vec::new();
        for &p in starts {
            let mut bs = Vec::new();
            hex_ends(s, p, 1, 2, &mut bs);
            for b in bs {
                let mut j = b;
                while j < s.len() && s[j] == b':' {
                    j += 1;
                    out.push(j);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    };
    let mut cur = step(&[i]);
    let mut best = None;
    let mut rounds = 0;
    while !cur.is_empty() {
        cur = step(&cur);
        rounds += 1;
        if let Some(&m) = cur.last() {
            best = best.max(Some(m));
        }
        if rounds > s.len() {
            break;
        }
    }
    best
}

pub(super) fn is_id_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'
}

/// `[A-Za-z0-9]([-_.A-Za-z0-9]*[.A-Za-z0-9])?`
pub(super) fn id_len(s: &[u8], i: usize) -> Option<usize> {
    if i >= s.len() || !s[i].is_ascii_alphanumeric() {
        return None;
    }
    let mut j = i + 1;
    while j < s.len() && is_id_char(s[j]) {
        j += 1;
    }
    // Back off to the last character allowed at the end.
    while j > i + 1 && !(s[j - 1].is_ascii_alphanumeric() || s[j - 1] == b'.') {
        j -= 1;
    }
    Some(j)
}

/// Converts a decimal, `0x` hex or leading-`0` octal number as libpcap's `stou` does.
pub(super) fn convert_number(text: &str) -> Result<u32, ParseErrorKind> {
    let overflow = || ParseErrorKind::NumberOverflow(text.to_string());
    let b = text.as_bytes();
    let (radix, digits) = if b.len() > 1 && b[0] == b'0' && (b[1] == b'x' || b[1] == b'X') {
        (16, &text[2..])
    } else if b[0] == b'0' {
        if digits_non_octal(&text[1..]) {
            return Err(ParseErrorKind::NonOctalDigit(text.to_string()));
        }
        (8, &text[1..])
    } else {
        (10, text)
    };
    let mut n: u32 = 0;
    // Bytes, not chars: the number rule matched ASCII digits only.
    for b in digits.bytes() {
        let d = char::from(b).to_digit(radix).ok_or_else(overflow)?;
        n = n
            .checked_mul(radix)
            .and_then(|n| n.checked_add(d))
            .ok_or_else(overflow)?;
    }
    Ok(n)
}

/// libpcap checks digits left to right and stops at the first problem, but for a leading-`0`
/// number both problems make it a lexical error, so only the kind differs: report the first.
pub(super) fn digits_non_octal(s: &str) -> bool {
    let mut n: u64 = 0;
    for c in s.bytes() {
        if !(b'0'..=b'7').contains(&c) {
            return true;
        }
        n = n * 8 + u64::from(c - b'0');
        if n > u64::from(u32::MAX) {
            return false;
        }
    }
    false
}

/// Whether libc's `getaddrinfo(AI_NUMERICHOST)` would accept this IPv6 text (it has already
/// matched one of the scanner's IPv6 shapes).
pub(super) fn valid_ipv6(text: &str) -> bool {
    Ipv6Addr::from_str(text).is_ok()
}
