//! Durations as workflow files write them (`250ms`, `10s`, `5m`, `2h`, `3d`, or a
//! sequence such as `1h30m`), parsed once at load time so a bad one is a
//! definition error rather than a surprise halfway through a run; and as an
//! API request gives them (`?since=1h`), exactly the pattern its document
//! says ([`parse_request`]).

use std::time::Duration;

/// The milliseconds in one `unit` (`ms`, `s`, `m`, `h`, `d`).
fn unit_ms(unit: &str) -> Option<u64> {
    Some(match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    })
}

/// The `<digits><unit>` groups of `text`, in order, as (digits, unit):
/// either may be empty where `text` is not a duration.
fn groups(text: &str) -> impl Iterator<Item = (&str, &str)> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (num, after) = rest.split_at(digits);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        rest = next;
        Some((num, unit))
    })
}

/// A century: the longest duration a file may write (anything longer is
/// certainly a typo; it also keeps later arithmetic safe), and where a
/// request's saturates.
const CENTURY_MS: u64 = 100 * 365 * 86_400_000;

/// Parses a duration written as one or more `<number><unit>` groups.
pub fn parse(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration (expected e.g. 250ms, 10s, 5m, 2h, 3d)".into());
    }
    let mut total: u128 = 0;
    for (num, unit) in groups(s) {
        if num.is_empty() {
            return Err(format!(
                "invalid duration `{text}` (expected e.g. 250ms, 10s, 5m, 2h, 3d)"
            ));
        }
        let value: u128 = num
            .parse()
            .map_err(|_| format!("invalid duration `{text}`: number too large"))?;
        let per = match (unit_ms(unit), unit) {
            (Some(ms), _) => u128::from(ms),
            (None, "") => {
                return Err(format!(
                    "invalid duration `{text}`: missing unit (ms, s, m, h or d)"
                ));
            }
            (None, other) => {
                return Err(format!(
                    "invalid duration `{text}`: unknown unit `{other}` (use ms, s, m, h or d)"
                ));
            }
        };
        total = total
            .checked_add(value.saturating_mul(per))
            .ok_or_else(|| format!("invalid duration `{text}`: too large"))?;
    }
    if total > u128::from(CENTURY_MS) {
        return Err(format!("invalid duration `{text}`: longer than 100 years"));
    }
    Ok(Duration::from_millis(total as u64))
}

/// A duration as a request's parameter gives it (`?since=`, `?wait=`):
/// exactly one or more `<digits><unit>` groups (no blank, no sign), as the
/// API's document says, and a duration past a century is a century (a
/// window or a wait that long means "all"; the caller bounds it further).
pub fn parse_request(text: &str) -> Result<Duration, String> {
    let bad = || format!("`{text}` is not a duration (e.g. 250ms, 10s, 5m, 2h, 3d, or 1h30m)");
    if text.is_empty() {
        return Err(bad());
    }
    let mut total: u64 = 0;
    for (num, unit) in groups(text) {
        let per = unit_ms(unit).ok_or_else(bad)?;
        if num.is_empty() {
            return Err(bad());
        }
        // Past a century each group saturates: the digits need not fit.
        let value: u64 = num.parse().unwrap_or(u64::MAX);
        total = total
            .saturating_add(value.saturating_mul(per))
            .min(CENTURY_MS);
    }
    Ok(Duration::from_millis(total))
}

/// Writes `ms` milliseconds exactly, the way a workflow file would
/// (`30s`, `1h30m`, `1500ms`): `parse` reads it back to the same value.
pub fn format(ms: u64) -> String {
    if ms == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    let mut rest = ms;
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if rest >= size && (rest.is_multiple_of(1_000) || size > 1_000) {
            out.push_str(&format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    if rest > 0 {
        out.push_str(&format!("{rest}ms"));
    }
    out
}

/// Formats a duration compactly for tables (`1.2s`, `3m04s`, `250ms`).
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1_000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_s_duration_is_exactly_groups_and_saturates_at_a_century() {
        assert_eq!(parse_request("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_request("250ms"), Ok(Duration::from_millis(250)));
        let century = Duration::from_millis(100 * 365 * 86_400_000);
        assert_eq!(
            parse_request("99999999999999999999999999999999999999999d"),
            Ok(century)
        );
        assert_eq!(parse_request("0d90s47d50h750766600m97h"), Ok(century));
        for bad in ["", " 1h", "1h ", "h", "1", "1y", "-1s", "1h-", "1.5h"] {
            assert!(parse_request(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn parses_units_and_sequences() {
        assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse("3d").unwrap(), Duration::from_secs(3 * 86400));
        assert_eq!(parse("1h30m").unwrap(), Duration::from_secs(5400));
    }

    #[test]
    fn rejects_bad_durations() {
        for bad in [
            "",
            "10",
            "s",
            "10x",
            "1.5s",
            "-1s",
            "99999999999999999999999d",
            "200y",
        ] {
            assert!(parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn format_round_trips() {
        for ms in [
            1, 999, 1_000, 1_500, 30_000, 90_000, 5_400_000, 86_400_000, 90_061_001,
        ] {
            let text = format(ms);
            assert_eq!(parse(&text).unwrap().as_millis() as u64, ms, "{text}");
        }
        assert_eq!(format(30_000), "30s");
        assert_eq!(format(5_400_000), "1h30m");
    }

    #[test]
    fn human_formats() {
        assert_eq!(human(Duration::from_millis(12)), "12ms");
        assert_eq!(human(Duration::from_millis(1500)), "1.5s");
        assert_eq!(human(Duration::from_secs(184)), "3m04s");
    }
}
