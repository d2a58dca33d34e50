//! The human-readable report of a run's summary.

use super::*;

pub(super) fn print_report(summary: &Value) {
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    let mib = |v: &Value| {
        v.as_f64()
            .map_or("?".to_owned(), |k| format!("{:.1}", k / 1024.0))
    };
    println!(
        "mosaic-load: {} clients x {:.1} s: {} operations, {:.0} ops/s, {} errors",
        summary["clients"],
        f(&summary["duration_s"]),
        summary["operations"],
        f(&summary["per_second"]),
        summary["errors"]
    );
    for op in ["propose", "recall", "health"] {
        let s = &summary[op];
        println!(
            "  {op:<8} {:>8} ops {:>8.0}/s  p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>8.2} ms  errors {}{}",
            s["count"],
            f(&s["per_second"]),
            f(&s["p50_ms"]),
            f(&s["p99_ms"]),
            f(&s["max_ms"]),
            s["errors"],
            match s["refused"].as_u64() {
                Some(n) if n > 0 => format!(" (refused by the gate {n})"),
                _ => String::new(),
            }
        );
    }
    let d = &summary["deletion"];
    if d.is_object() {
        for (what, label) in [
            ("acknowledged", "revoke -> every index acknowledged"),
            ("unrecallable", "revoke -> not recalled on the last replica"),
        ] {
            let s = &d[what];
            println!(
                "  deletion {label}: {} deletions  p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
                s["count"],
                f(&s["p50_ms"]),
                f(&s["p99_ms"]),
                f(&s["max_ms"])
            );
        }
        println!(
            "  deletion: recalls still selecting a revoked memory after its revoke answered: {}; revokes retried after 409: {} {}",
            d["selected_after_revoke"], d["revoke_conflicts_retried"], d["revoke_conflict_codes"]
        );
        if let Some(servers) = d["server_index_ack_seconds"].as_array() {
            for (idx, h) in servers.iter().enumerate() {
                let buckets: Vec<String> = h["buckets"]
                    .as_array()
                    .map(|b| {
                        b.iter()
                            .filter(|p| p[0] != "+Inf")
                            .map(|p| format!("<={}s:{}", p[0].as_str().unwrap_or("?"), p[1]))
                            .collect()
                    })
                    .unwrap_or_default();
                println!(
                    "  replica {idx} ineligible commit -> last index ack (server histogram): {} observations, mean {:.2} ms; {}",
                    h["count"],
                    f(&h["mean_ms"]),
                    buckets.join(" ")
                );
            }
        }
    }
    let then = &summary["then_recall"];
    if then.is_object() {
        let s = &then["recall"];
        let rss = &then["rss_kib"];
        println!(
            "  then recalls only for {:.1} s: {} recalls {:.0}/s  p50 {:.2} ms  p99 {:.2} ms  errors {}; server RSS MiB at the last write {}, then min {} max {} end {}",
            f(&then["seconds"]),
            s["count"],
            f(&s["per_second"]),
            f(&s["p50_ms"]),
            f(&s["p99_ms"]),
            s["errors"],
            mib(&rss["writes_end"]),
            mib(&rss["min"]),
            mib(&rss["max"]),
            mib(&rss["end"]),
        );
    }
    if let Some(e) = summary["first_error"].as_str() {
        println!("  first error: {e}");
    }
    let rss = &summary["rss_kib"];
    println!(
        "  server RSS MiB: before load {}, max {}, end {}",
        mib(&rss["before_load"]),
        mib(&rss["max"]),
        mib(&rss["end"])
    );
    if let Some(samples) = summary["rss_samples"].as_array() {
        // About ten evenly spaced points of the time series.
        let step = samples.len().div_ceil(10).max(1);
        let last = samples.len().saturating_sub(1);
        let points: Vec<String> = samples
            .iter()
            .enumerate()
            .filter(|(i, _)| i % step == 0 || *i == last)
            .map(|(_, s)| format!("{}s {} MiB", s[0], mib(&s[1])))
            .collect();
        println!("  RSS over time: {}", points.join(", "));
    }
}
