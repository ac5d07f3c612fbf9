//! C integer constants, as both text syntaxes write them.

/// A C integer constant (decimal, `0x` hexadecimal, `0` octal; `u`/`l` suffixes ignored) that fits
/// 32 bits, or `None`.
pub fn c_number(s: &str) -> Option<u32> {
    let digits = s.trim_end_matches(['u', 'U', 'l', 'L']);
    let (radix, body) = if let Some(h) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        (16, h)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    if body.is_empty() || !body.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u32::from_str_radix(body, radix).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_c_syntax() {
        assert_eq!(c_number("0x1F"), Some(31));
        assert_eq!(c_number("0XffffFFFF"), Some(u32::MAX));
        assert_eq!(c_number("017"), Some(15));
        assert_eq!(c_number("0"), Some(0));
        assert_eq!(c_number("100u"), Some(100));
        assert_eq!(c_number("08"), None);
        assert_eq!(c_number("0x"), None);
        assert_eq!(c_number("1a"), None);
        assert_eq!(c_number("99999999999"), None);
    }
}
