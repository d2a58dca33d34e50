//! Prometheus text-format metrics: counters and latency histograms.
//!
//! Labels are route templates, methods, status codes, decisions and index
//! targets only: never memory content, never principal or tenant ids.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

/// Upper bounds (seconds) of the latency histogram buckets.
pub const LATENCY_BUCKETS: [f64; 10] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];

type Labels = Vec<(String, String)>;

#[derive(Default)]
struct Histogram {
    buckets: [u64; LATENCY_BUCKETS.len()],
    count: u64,
    sum: f64,
}

#[derive(Default)]
struct Registry {
    counters: BTreeMap<(String, Labels), u64>,
    histograms: BTreeMap<(String, Labels), Histogram>,
}

/// The metrics registry.
#[derive(Default)]
pub struct Metrics {
    registry: Mutex<Registry>,
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn render_labels(labels: &Labels, extra: Option<(&str, String)>) -> String {
    let mut parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    if let Some((k, v)) = extra {
        parts.push(format!("{k}=\"{v}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

impl Metrics {
    /// Adds one to a counter.
    pub fn incr(&self, name: &str, pairs: &[(&str, &str)]) {
        self.add(name, pairs, 1);
    }

    /// Adds `n` to a counter.
    pub fn add(&self, name: &str, pairs: &[(&str, &str)], n: u64) {
        if let Ok(mut r) = self.registry.lock() {
            *r.counters
                .entry((name.to_owned(), labels(pairs)))
                .or_default() += n;
        }
    }

    /// Records one observation (seconds) in a histogram.
    pub fn observe(&self, name: &str, pairs: &[(&str, &str)], seconds: f64) {
        if let Ok(mut r) = self.registry.lock() {
            let h = r
                .histograms
                .entry((name.to_owned(), labels(pairs)))
                .or_default();
            for (idx, bound) in LATENCY_BUCKETS.iter().enumerate() {
                if seconds <= *bound {
                    h.buckets[idx] += 1;
                }
            }
            h.count += 1;
            h.sum += seconds;
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let Ok(r) = self.registry.lock() else {
            return out;
        };
        let mut last = String::new();
        for ((name, labels), value) in &r.counters {
            if *name != last {
                let _ = writeln!(out, "# TYPE {name} counter");
                last.clone_from(name);
            }
            let _ = writeln!(out, "{name}{} {value}", render_labels(labels, None));
        }
        last.clear();
        for ((name, labels), h) in &r.histograms {
            if *name != last {
                let _ = writeln!(out, "# TYPE {name} histogram");
                last.clone_from(name);
            }
            for (idx, bound) in LATENCY_BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "{name}_bucket{} {}",
                    render_labels(labels, Some(("le", bound.to_string()))),
                    h.buckets[idx]
                );
            }
            let _ = writeln!(
                out,
                "{name}_bucket{} {}",
                render_labels(labels, Some(("le", "+Inf".to_owned()))),
                h.count
            );
            let _ = writeln!(out, "{name}_sum{} {}", render_labels(labels, None), h.sum);
            let _ = writeln!(
                out,
                "{name}_count{} {}",
                render_labels(labels, None),
                h.count
            );
        }
        out
    }
}
