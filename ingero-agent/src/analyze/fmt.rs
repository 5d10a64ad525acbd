//! How numbers read in the text output: durations with a unit that keeps three significant
//! digits, byte counts in binary units, and times as offsets from the recording's start (so
//! archived traces read the same anywhere; JSON carries the wall clock too).

/// `950ns`, `12.3us`, `4.56ms`, `1.234s`.
pub fn dur(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        format!("{:.1}us", f / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2}ms", f / 1e6)
    } else {
        format!("{:.3}s", f / 1e9)
    }
}

/// `+12.345678s` after `origin`.
pub fn offset(ts_ns: u64, origin: u64) -> String {
    let d = ts_ns.saturating_sub(origin);
    format!("+{}.{:06}s", d / 1_000_000_000, d % 1_000_000_000 / 1_000)
}

/// `512B`, `4.0KiB`, `1.5MiB`, `2.00GiB`.
pub fn bytes(b: u64) -> String {
    let f = b as f64;
    if b < 1024 {
        format!("{b}B")
    } else if b < 1 << 20 {
        format!("{:.1}KiB", f / 1024.0)
    } else if b < 1 << 30 {
        format!("{:.1}MiB", f / (1u64 << 20) as f64)
    } else {
        format!("{:.2}GiB", f / (1u64 << 30) as f64)
    }
}

/// A ratio such as `4.2x`.
pub fn ratio(r: f64) -> String {
    format!("{r:.1}x")
}

/// A share such as `37%`.
pub fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "0%".into();
    }
    format!("{:.0}%", part as f64 * 100.0 / whole as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_read_naturally() {
        assert_eq!(dur(950), "950ns");
        assert_eq!(dur(12_345), "12.3us");
        assert_eq!(dur(4_560_000), "4.56ms");
        assert_eq!(dur(1_234_000_000), "1.234s");
        assert_eq!(offset(2_500_001_000, 1_000), "+2.500000s");
        assert_eq!(bytes(4096), "4.0KiB");
        assert_eq!(bytes(3 << 29), "1.50GiB");
        assert_eq!(pct(1, 3), "33%");
        assert_eq!(ratio(4.25), "4.2x");
    }
}
