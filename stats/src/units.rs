//! Quantities in the unit a reader takes in at a glance.

/// A duration given in nanoseconds, with four significant digits from one
/// microsecond up (`1.500 us`, `14.75 us`, `147.5 us`, `2.000 ms`, `1.250 s`)
/// and three below (`950 ns`, `46.5 ns`, `1.23 ns`: a fourth digit of a
/// sub-microsecond time is below what one clock reading resolves; the
/// hundredths stay because probe latencies are means over many loads).
pub fn ns(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v} ns");
    }
    const UNITS: [(f64, &str, usize); 4] = [
        (1.0, "ns", 3),
        (1e3, "us", 4),
        (1e6, "ms", 4),
        (1e9, "s", 4),
    ];
    let mut unit = UNITS
        .iter()
        .rposition(|&(scale, _, _)| v.abs() >= scale)
        .unwrap_or(0);
    loop {
        let (scale, name, digits) = UNITS[unit];
        let text = significant(v / scale, digits);
        // 999.96 ns rounds to "1000 ns": say "1.000 us" instead.
        let rounded: f64 = text.parse().unwrap_or(0.0);
        if unit + 1 < UNITS.len() && rounded.abs() >= 1000.0 {
            unit += 1;
            continue;
        }
        return format!("{text} {name}");
    }
}

/// `v` with `digits` significant digits, but never in exponent form and
/// never with fewer than zero decimals (1234.5 with 3 digits is "1235").
fn significant(v: f64, digits: usize) -> String {
    let magnitude = if v == 0.0 {
        0
    } else {
        v.abs().log10().floor() as i64
    };
    let decimals = (digits as i64 - 1 - magnitude).max(0) as usize;
    let text = format!("{v:.decimals$}");
    // Rounding can add a digit (9.996 -> "10.00"): one decimal fewer then.
    let integer_digits = text
        .trim_start_matches('-')
        .split('.')
        .next()
        .map_or(0, str::len);
    if decimals > 0 && integer_digits as i64 > magnitude + 1 {
        format!("{v:.prec$}", prec = decimals - 1)
    } else {
        text
    }
}

/// A size in bytes, in binary units: `608 B`, `2.0 KiB`, `22.9 MiB`,
/// `512 KiB` (one decimal below 100 of the unit, whole units from 100, so
/// two to three significant digits and a column of sizes lines up).
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{b} B")
    } else if v >= 99.95 {
        // round() rather than {:.0}: half a unit goes up, as readers expect.
        format!("{} {}", v.round() as u64, UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanoseconds_keep_three_to_four_significant_digits() {
        assert_eq!(ns(950.0), "950 ns");
        assert_eq!(ns(1_500.0), "1.500 us");
        assert_eq!(ns(2_000_000.0), "2.000 ms");
        assert_eq!(ns(14_752.4), "14.75 us");
        assert_eq!(ns(147_524.0), "147.5 us");
        assert_eq!(ns(1.234), "1.23 ns");
        assert_eq!(ns(46.54), "46.5 ns");
        assert_eq!(ns(0.0), "0.00 ns");
        assert_eq!(ns(1.25e9), "1.250 s");
        assert_eq!(ns(3_600e9), "3600 s");
        assert_eq!(ns(-2_500.0), "-2.500 us");
    }

    #[test]
    fn rounding_up_to_the_next_unit_or_digit_changes_it() {
        assert_eq!(ns(999.7), "1.000 us");
        assert_eq!(ns(999_990.0), "1.000 ms");
        assert_eq!(ns(9.996), "10.0 ns");
        assert_eq!(ns(99_996.0), "100.0 us");
        assert_eq!(ns(f64::NAN), "NaN ns");
    }

    #[test]
    fn bytes_in_binary_units() {
        assert_eq!(bytes(608), "608 B");
        assert_eq!(bytes(2048), "2.0 KiB");
        assert_eq!(bytes(512 * 1024), "512 KiB");
        assert_eq!(bytes(800_000), "781 KiB");
        assert_eq!(bytes(24_000_000), "22.9 MiB");
        assert_eq!(bytes(1536 * 1024), "1.5 MiB");
        assert_eq!(bytes(102_300), "99.9 KiB");
        assert_eq!(bytes(102_360), "100 KiB");
        assert_eq!(bytes(u64::MAX), "16777216 TiB");
    }
}
