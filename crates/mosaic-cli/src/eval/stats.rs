//! The figures of a report: percentiles, rounding, and the server's own
//! account read from its `/metrics` histograms and counters.

use std::collections::HashMap;

/// `[sum, count]` of a histogram series of `/metrics` (`name{labels}` as
/// the server prints it).
pub(super) fn histogram(samples: &HashMap<String, f64>, series: &str) -> Option<(f64, f64)> {
    let (name, labels) = match series.find('{') {
        Some(at) => series.split_at(at),
        None => (series, ""),
    };
    Some((
        *samples.get(&format!("{name}_sum{labels}"))?,
        *samples.get(&format!("{name}_count{labels}"))?,
    ))
}

/// A histogram's mean over what happened between two readings, in ms;
/// none when the server does not export it or nothing was observed.
pub(super) fn server_mean(
    before: &HashMap<String, f64>,
    after: &HashMap<String, f64>,
    series: &str,
) -> Option<f64> {
    server_mean_over(&[(before, after)], series)
}

/// A reading of the server's `/metrics` (`name{labels}` -> value).
pub(super) type Metrics = HashMap<String, f64>;

/// A histogram's mean over what happened within several windows (pairs of
/// readings that do not overlap), in ms; none when the server does not
/// export it or nothing was observed in any.
pub(super) fn server_mean_over(windows: &[(&Metrics, &Metrics)], series: &str) -> Option<f64> {
    let (mut sum, mut count) = (0.0, 0.0);
    for (before, after) in windows {
        let (s0, c0) = histogram(before, series).unwrap_or((0.0, 0.0));
        let Some((s1, c1)) = histogram(after, series) else {
            continue;
        };
        if c1 > c0 {
            sum += s1 - s0;
            count += c1 - c0;
        }
    }
    (count > 0.0).then(|| round(sum / count * 1e3))
}

/// How many observations a histogram gained between two readings.
pub(super) fn server_count(
    before: &HashMap<String, f64>,
    after: &HashMap<String, f64>,
    series: &str,
) -> Option<u64> {
    let (_, c0) = histogram(before, series).unwrap_or((0.0, 0.0));
    let (_, c1) = histogram(after, series)?;
    Some((c1 - c0).max(0.0) as u64)
}

/// The `q` quantile (nearest rank) of sorted figures; 0 for none.
pub(super) fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

pub(super) fn list_suffix(items: &[String]) -> String {
    if items.is_empty() {
        String::new()
    } else {
        format!(" ({})", items.join(", "))
    }
}

/// Six decimals: stable JSON figures.
pub(super) fn round(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_account_skips_what_it_does_not_export() {
        let series = r#"mosaic_write_phase_seconds{phase="commit"}"#;
        let reading = |sum: f64, count: f64| -> HashMap<String, f64> {
            HashMap::from([
                (
                    r#"mosaic_write_phase_seconds_sum{phase="commit"}"#.to_owned(),
                    sum,
                ),
                (
                    r#"mosaic_write_phase_seconds_count{phase="commit"}"#.to_owned(),
                    count,
                ),
            ])
        };
        let (before, after) = (reading(1.0, 10.0), reading(1.5, 15.0));
        // 0.5 s over 5 observations: 100 ms each.
        assert_eq!(server_mean(&before, &after, series), Some(100.0));
        assert_eq!(server_count(&before, &after, series), Some(5));
        // A series first exported after the first reading counts from zero.
        assert_eq!(server_mean(&HashMap::new(), &after, series), Some(100.0));
        // Not exported, or nothing observed: no figure.
        assert_eq!(server_mean(&before, &HashMap::new(), series), None);
        assert_eq!(server_count(&before, &HashMap::new(), series), None);
        assert_eq!(server_mean(&after, &after, series), None);
        assert_eq!(
            server_mean(&before, &after, "mosaic_query_embedding_seconds"),
            None
        );
    }
}
