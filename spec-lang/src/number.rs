//! How a spec writes an integer: decimal, or hexadecimal after `0x`. The
//! parser reads literals so, and so does every value given in the spec's
//! words elsewhere (a `--code-offset` on the command line).

/// The integer `s` writes, if it is one.
pub fn parse_int(s: &str) -> Option<i64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()
    } else {
        s.parse::<i64>().ok()
    }
}
