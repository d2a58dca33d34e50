//! Instants as people and agents read them: the JSON API speaks Unix
//! milliseconds, while the mem0-compatible routes and the MCP tools answer
//! in RFC 3339 UTC.

/// An RFC 3339 UTC instant of a Unix time in milliseconds.
pub fn rfc3339(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60,
        unix_ms % 1000
    )
}

/// When a memory expires, as an answer states it: its RFC 3339 instant,
/// or `never` for a record without an expiry.
pub fn expiry(expires_at_unix_ms: Option<u64>) -> String {
    expires_at_unix_ms.map_or_else(|| "never".to_owned(), rfc3339)
}

#[cfg(test)]
mod tests {
    use super::{expiry, rfc3339};

    #[test]
    fn instants_print_as_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_798_761_599_999), "2026-12-31T23:59:59.999Z");
    }

    #[test]
    fn an_expiry_is_an_instant_or_never() {
        assert_eq!(expiry(Some(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(expiry(None), "never");
    }
}
