//! A moment as the history records it: UTC, millisecond precision. Stored
//! as RFC 3339 text (`2026-12-05T08:19:41.123Z`, which sorts as it reads)
//! and parsed once, at the database edge; the engine compares and adds
//! moments, never text.

use chrono::{DateTime, Utc};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Timestamp(DateTime<Utc>);

impl Timestamp {
    /// The clock, to the millisecond stored.
    pub fn now() -> Timestamp {
        Timestamp::from_ms(Utc::now().timestamp_millis())
    }

    /// Unix milliseconds (out of chrono's range: the epoch).
    pub fn from_ms(ms: i64) -> Timestamp {
        Timestamp(DateTime::from_timestamp_millis(ms).unwrap_or_default())
    }

    pub fn ms(self) -> i64 {
        self.0.timestamp_millis()
    }

    pub fn to_chrono(self) -> DateTime<Utc> {
        self.0
    }

    /// Reads stored text: RFC 3339 with any offset and precision (what `wf`
    /// writes is the common case, read without chrono's general parser).
    pub fn parse(s: &str) -> Option<Timestamp> {
        fast_parse(s).or_else(|| {
            DateTime::parse_from_rfc3339(s)
                .ok()
                .map(|t| Timestamp::from_ms(t.timestamp_millis()))
        })
    }

    /// The stored text.
    pub fn text(self) -> String {
        self.to_string()
    }

    /// Later by `d` (saturating at chrono's range).
    pub fn plus(self, d: std::time::Duration) -> Timestamp {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Timestamp::from_ms(self.ms().saturating_add(ms))
    }

    /// How long after `earlier` (zero if it is not after).
    pub fn since(self, earlier: Timestamp) -> std::time::Duration {
        std::time::Duration::from_millis(u64::try_from(self.ms() - earlier.ms()).unwrap_or(0))
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(t: DateTime<Utc>) -> Timestamp {
        Timestamp::from_ms(t.timestamp_millis())
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`, exactly: what [`Timestamp`] writes.
fn fast_parse(s: &str) -> Option<Timestamp> {
    let b = s.as_bytes();
    if b.len() != 24
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
        || b[23] != b'Z'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<u32> {
        b[from..to].iter().try_fold(0u32, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    };
    let date =
        chrono::NaiveDate::from_ymd_opt(i32::try_from(num(0, 4)?).ok()?, num(5, 7)?, num(8, 10)?)?;
    let time = chrono::NaiveTime::from_hms_milli_opt(
        num(11, 13)?,
        num(14, 16)?,
        num(17, 19)?,
        num(20, 23)?,
    )?;
    Some(Timestamp(date.and_time(time).and_utc()))
}

impl fmt::Display for Timestamp {
    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`, written field by field: chrono's
    /// `format` parses its pattern on every call, and a step writes several
    /// times.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use chrono::{Datelike as _, Timelike as _};
        let t = &self.0;
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            t.year(),
            t.month(),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.timestamp_subsec_millis().min(999)
        )
    }
}

impl std::str::FromStr for Timestamp {
    type Err = super::UnknownWord;
    fn from_str(s: &str) -> Result<Timestamp, super::UnknownWord> {
        Timestamp::parse(s).ok_or_else(|| super::UnknownWord {
            what: "timestamp",
            word: s.to_string(),
        })
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_reads_back_and_matches_chrono() {
        for s in [
            "2026-12-05T08:19:41.123Z",
            "1970-01-01T00:00:00.000Z",
            "2024-02-29T23:59:59.999Z",
        ] {
            let t = Timestamp::parse(s).unwrap();
            assert_eq!(t.to_string(), s);
            let c = DateTime::parse_from_rfc3339(s).unwrap();
            assert_eq!(t.ms(), c.timestamp_millis());
            assert_eq!(
                c.with_timezone(&Utc)
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                s
            );
        }
        // Other offsets and precisions go through chrono.
        let t = Timestamp::parse("2026-12-05T09:19:41.1234+01:00").unwrap();
        assert_eq!(t.to_string(), "2026-12-05T08:19:41.123Z");
        assert_eq!(
            Timestamp::parse("2026-12-05T08:19:41Z")
                .unwrap()
                .to_string(),
            "2026-12-05T08:19:41.000Z"
        );
        for bad in [
            "",
            "2026-13-05T08:19:41.123Z",
            "2026-02-30T00:00:00.000Z",
            "x",
        ] {
            assert_eq!(Timestamp::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn arithmetic() {
        let t = Timestamp::from_ms(1_000);
        assert_eq!(t.plus(std::time::Duration::from_millis(500)).ms(), 1_500);
        assert_eq!(
            t.plus(std::time::Duration::from_secs(2)).since(t),
            std::time::Duration::from_secs(2)
        );
        assert_eq!(
            t.since(t.plus(std::time::Duration::from_secs(1))),
            std::time::Duration::ZERO
        );
        assert!(Timestamp::from_ms(1) < Timestamp::from_ms(2));
    }
}
