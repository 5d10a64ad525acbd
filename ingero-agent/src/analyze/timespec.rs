//! Parsing the times users type for `--from`, `--to` and `--at`: `HH:MM[:SS[.frac]]`, full
//! dates (`YYYY-MM-DD[ T]HH:MM[:SS]`, or a date alone for midnight), in local time unless a
//! zone is given (`Z`, `UTC`, `+02:00`, `-0500`), or `+DURATION` after the recording's start.
//!
//! Parsing only produces a [`TimeSpec`]; turning it into a point on the trace clock needs the
//! recording's wall-clock mapping and happens in `clock.rs`.

use anyhow::{Context, Result, bail};

/// A zone given with the time: seconds east of UTC.
pub type ZoneOffset = i64;

/// A point in time as the user wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSpec {
    /// A time of day; the date is the recording's (local or in the given zone).
    TimeOfDay {
        secs_of_day: u32,
        nanos: u32,
        zone: Option<ZoneOffset>,
    },
    /// A full civil date and time.
    DateTime {
        year: i32,
        month: u32,
        day: u32,
        secs_of_day: u32,
        nanos: u32,
        zone: Option<ZoneOffset>,
    },
    /// `+DURATION`: nanoseconds after the recording's first record.
    Offset(u64),
}

/// Parses one user-supplied time.
pub fn parse(text: &str) -> Result<TimeSpec> {
    let t = text.trim();
    if let Some(rest) = t.strip_prefix('+') {
        let d = humantime::parse_duration(rest.trim())
            .with_context(|| format!("`{t}`: expected +DURATION such as +90s"))?;
        return Ok(TimeSpec::Offset(
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
        ));
    }
    let (body, zone) = split_zone(t)?;
    let body = body.trim();
    let (date, time) = match body.split_once(['T', 't', ' ']) {
        Some((d, tm)) => (Some(d), Some(tm.trim())),
        None if body.contains(':') => (None, Some(body)),
        None => (Some(body), None),
    };
    let (secs_of_day, nanos) = match time {
        Some(tm) => parse_clock(tm).with_context(|| format!("`{t}`: bad time of day"))?,
        None => (0, 0),
    };
    match date {
        None => Ok(TimeSpec::TimeOfDay {
            secs_of_day,
            nanos,
            zone,
        }),
        Some(d) => {
            let (year, month, day) = parse_date(d).with_context(|| {
                format!("`{t}`: expected HH:MM[:SS], YYYY-MM-DD[ HH:MM[:SS]] or +DURATION")
            })?;
            Ok(TimeSpec::DateTime {
                year,
                month,
                day,
                secs_of_day,
                nanos,
                zone,
            })
        }
    }
}

/// Splits a trailing zone (`Z`, `UTC`, `±HH:MM`, `±HHMM`) off the text.
fn split_zone(t: &str) -> Result<(&str, Option<ZoneOffset>)> {
    if let Some(b) = t.strip_suffix(['Z', 'z']) {
        return Ok((b, Some(0)));
    }
    if let Some(b) = t.strip_suffix("UTC") {
        return Ok((b, Some(0)));
    }
    // A sign after the time part (a date's own dashes come before the time's colon).
    let Some(colon) = t.find(':') else {
        return Ok((t, None));
    };
    if let Some(pos) = t[colon..].rfind(['+', '-']).map(|p| p + colon) {
        let zone = &t[pos + 1..];
        let digits: String = zone.chars().filter(|c| *c != ':').collect();
        if digits.len() != 4 || !digits.chars().all(|c| c.is_ascii_digit()) {
            bail!("`{t}`: a zone is ±HH:MM or ±HHMM");
        }
        let h: i64 = digits[..2].parse()?;
        let m: i64 = digits[2..].parse()?;
        let sign = if &t[pos..=pos] == "-" { -1 } else { 1 };
        return Ok((&t[..pos], Some(sign * (h * 3600 + m * 60))));
    }
    Ok((t, None))
}

fn parse_clock(t: &str) -> Result<(u32, u32)> {
    let (hms, frac) = match t.split_once('.') {
        Some((a, f)) => (a, Some(f)),
        None => (t, None),
    };
    let parts: Vec<&str> = hms.split(':').collect();
    if !(2..=3).contains(&parts.len()) {
        bail!("expected HH:MM or HH:MM:SS");
    }
    let num = |s: &str, max: u32| -> Result<u32> {
        let v: u32 = s
            .parse()
            .with_context(|| format!("`{s}` is not a number"))?;
        if v > max {
            bail!("{v} is out of range");
        }
        Ok(v)
    };
    let h = num(parts[0], 23)?;
    let m = num(parts[1], 59)?;
    let s = match parts.get(2) {
        Some(s) => num(s, 60)?,
        None => 0,
    };
    let nanos = match frac {
        Some(f) if !f.is_empty() && f.len() <= 9 && f.chars().all(|c| c.is_ascii_digit()) => {
            let padded = format!("{f:0<9}");
            padded.parse()?
        }
        Some(_) => bail!("bad fraction of a second"),
        None => 0,
    };
    Ok((h * 3600 + m * 60 + s, nanos))
}

fn parse_date(d: &str) -> Result<(i32, u32, u32)> {
    let parts: Vec<&str> = d.split('-').collect();
    if parts.len() != 3 {
        bail!("expected YYYY-MM-DD");
    }
    let y: i32 = parts[0].parse().context("year")?;
    let m: u32 = parts[1].parse().context("month")?;
    let day: u32 = parts[2].parse().context("day")?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        bail!("month or day out of range");
    }
    Ok((y, m, day))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's `days_from_civil`).
pub fn days_from_civil(y: i32, m: u32, d: u32) -> i64 {
    let y = i64::from(y) - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01 (inverse of [`days_from_civil`]).
pub fn civil_from_days(z: i64) -> (i32, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y as i32, m, d)
}

/// Seconds east of UTC of local time at `unix_secs` (the `TZ` rules of this machine).
pub fn local_offset_at(unix_secs: i64) -> i64 {
    let t: libc::time_t = unix_secs as libc::time_t;
    // SAFETY: all-zero is a valid `tm` (plain integers and a null zone pointer).
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: `t` and `tm` are valid for the call; localtime_r is the thread-safe variant and
    // writes only into `tm`. A null return leaves `tm` zeroed and we fall back to UTC.
    let ok = unsafe { !libc::localtime_r(&t, &mut tm).is_null() };
    if ok { tm.tm_gmtoff } else { 0 }
}

/// Unix seconds of a local civil time (`mktime`, which resolves daylight saving itself).
pub fn local_to_unix(y: i32, m: u32, d: u32, secs_of_day: u32) -> Result<i64> {
    // SAFETY: all-zero is a valid `tm`.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = y - 1900;
    tm.tm_mon = m as i32 - 1;
    tm.tm_mday = d as i32;
    tm.tm_hour = (secs_of_day / 3600) as i32;
    tm.tm_min = (secs_of_day / 60 % 60) as i32;
    tm.tm_sec = (secs_of_day % 60) as i32;
    tm.tm_isdst = -1;
    // SAFETY: `tm` is a valid, initialised struct that mktime may normalise in place.
    let t = unsafe { libc::mktime(&mut tm) };
    if t == -1 {
        bail!("{y:04}-{m:02}-{d:02} is not a representable local time");
    }
    Ok(t as i64)
}

/// Unix nanoseconds of a civil time on a date, in `zone` or local time.
pub fn civil_to_unix_ns(
    (y, m, d): (i32, u32, u32),
    secs_of_day: u32,
    nanos: u32,
    zone: Option<ZoneOffset>,
) -> Result<i128> {
    let secs = match zone {
        Some(off) => days_from_civil(y, m, d) * 86_400 + i64::from(secs_of_day) - off,
        None => local_to_unix(y, m, d, secs_of_day)?,
    };
    Ok(i128::from(secs) * 1_000_000_000 + i128::from(nanos))
}

/// The civil date at `unix_ns` in `zone` (or local time).
pub fn date_at(unix_ns: i128, zone: Option<ZoneOffset>) -> (i32, u32, u32) {
    let secs = (unix_ns.div_euclid(1_000_000_000)) as i64;
    let off = zone.unwrap_or_else(|| local_offset_at(secs));
    civil_from_days((secs + off).div_euclid(86_400))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_time_of_day_dates_zones_and_offsets() {
        assert_eq!(
            parse("14:23").ok(),
            Some(TimeSpec::TimeOfDay {
                secs_of_day: 14 * 3600 + 23 * 60,
                nanos: 0,
                zone: None
            })
        );
        assert_eq!(
            parse("14:23:07.5Z").ok(),
            Some(TimeSpec::TimeOfDay {
                secs_of_day: 14 * 3600 + 23 * 60 + 7,
                nanos: 500_000_000,
                zone: Some(0)
            })
        );
        assert_eq!(
            parse("2026-03-14 09:26:53+02:00").ok(),
            Some(TimeSpec::DateTime {
                year: 2026,
                month: 3,
                day: 14,
                secs_of_day: 9 * 3600 + 26 * 60 + 53,
                nanos: 0,
                zone: Some(7200)
            })
        );
        assert!(matches!(
            parse("2026-03-14T09:26-0530"),
            Ok(TimeSpec::DateTime {
                zone: Some(-19800),
                ..
            })
        ));
        assert!(matches!(
            parse("2026-03-14"),
            Ok(TimeSpec::DateTime {
                secs_of_day: 0,
                zone: None,
                ..
            })
        ));
        assert_eq!(parse("+1.5s").ok(), Some(TimeSpec::Offset(1_500_000_000)));
        assert_eq!(parse("+2m").ok(), Some(TimeSpec::Offset(120_000_000_000)));
        for bad in ["25:00", "12:61", "2026-13-01", "soon", "12:00+5", "+later"] {
            assert!(parse(bad).is_err(), "{bad} should not parse");
        }
    }

    #[test]
    fn civil_days_round_trip() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        for z in [-1000, 0, 11_017, 20_000, 30_000] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
        let ns = civil_to_unix_ns((2026, 3, 14), 3600, 7, Some(3600)).unwrap_or(0);
        assert_eq!(
            ns,
            i128::from(days_from_civil(2026, 3, 14)) * 86_400_000_000_000 + 7
        );
        assert_eq!(date_at(ns, Some(0)), (2026, 3, 14));
    }

    #[test]
    fn local_time_round_trips_through_the_offset() {
        let secs = local_to_unix(2026, 6, 1, 12 * 3600).unwrap_or(0);
        let off = local_offset_at(secs);
        let utc_noon = days_from_civil(2026, 6, 1) * 86_400 + 12 * 3600;
        assert_eq!(secs + off, utc_noon);
    }
}
