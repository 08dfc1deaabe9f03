//! The two time formats the schemes put on the wire, computed from a passed-in [`SystemTime`].
//!
//! Signers never read the clock themselves; only the `*_now` wrappers do.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// RFC 1123 in GMT, as in the `Date` header: `Wed, 15 Jan 2025 08:30:45 GMT`.
pub fn http_date(time: SystemTime) -> String {
    httpdate::fmt_http_date(time)
}

/// ISO 8601 basic format in UTC, as in `x-oss-date` / `x-amz-date`: `20250115T083045Z`.
///
/// Times before the Unix epoch are clamped to it (no signer has a use for them).
pub fn iso8601_basic(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// `YYYYMMDD` in UTC: the date part of a V4 credential scope.
pub fn scope_date(time: SystemTime) -> String {
    let mut s = iso8601_basic(time);
    s.truncate(8);
    s
}

/// Proleptic Gregorian (year, month, day) of a day count since 1970-01-01
/// (Howard Hinnant's `civil_from_days`, restricted to non-negative day counts).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        for (secs, http, iso) in [
            (
                1_736_929_845,
                "Wed, 15 Jan 2025 08:30:45 GMT",
                "20250115T083045Z",
            ),
            (0, "Thu, 01 Jan 1970 00:00:00 GMT", "19700101T000000Z"),
            (
                951_782_400,
                "Tue, 29 Feb 2000 00:00:00 GMT",
                "20000229T000000Z",
            ),
            (
                4_102_444_799,
                "Thu, 31 Dec 2099 23:59:59 GMT",
                "20991231T235959Z",
            ),
        ] {
            let t = UNIX_EPOCH + Duration::from_secs(secs);
            assert_eq!(http_date(t), http, "{secs}");
            assert_eq!(iso8601_basic(t), iso, "{secs}");
            assert_eq!(scope_date(t), &iso[..8], "{secs}");
        }
    }
}
