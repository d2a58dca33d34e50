//! Prometheus text-format metrics: counters, gauges and latency histograms.
//!
//! Labels are route templates, methods, status codes, decisions and index
//! targets only: never memory content, never principal or tenant ids.
//!
//! Backed by `metrics-exporter-prometheus`'s recorder, one per service (not
//! the process-global one, so two services in one process keep apart):
//! recording takes no global lock, since the recorder's registry is sharded
//! and a series, once created, is an atomic counter or a lock-free bucket.
//! Histogram samples wait in their bucket until the next upkeep, which a
//! render runs and a background thread runs every few seconds, so memory
//! stays bounded when nobody scrapes.

use std::sync::{Arc, Weak};
use std::time::Duration;

use metrics::{Key, Label, Metadata, Recorder};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

/// Upper bounds (seconds) of the latency histogram buckets.
pub const LATENCY_BUCKETS: [f64; 10] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];

/// How often histogram samples are folded into their buckets when nobody
/// renders.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

struct Shared {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
}

/// The metrics of one service.
pub struct Metrics {
    shared: Arc<Shared>,
}

impl Default for Metrics {
    fn default() -> Self {
        // `set_buckets` refuses only an empty list, and the buckets are a
        // fixed, non-empty one: the fallback (summaries) is never taken.
        let builder = PrometheusBuilder::new()
            .set_buckets(&LATENCY_BUCKETS)
            .unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        let shared = Arc::new(Shared { recorder, handle });
        let weak: Weak<Shared> = Arc::downgrade(&shared);
        // Ends with the service: the thread holds no strong reference.
        let _ = std::thread::Builder::new()
            .name("mosaic-metrics".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(UPKEEP_EVERY);
                    match weak.upgrade() {
                        Some(shared) => shared.handle.run_upkeep(),
                        None => return,
                    }
                }
            });
        Metrics { shared }
    }
}

fn key(name: &str, pairs: &[(&str, &str)]) -> Key {
    let labels: Vec<Label> = pairs
        .iter()
        .map(|(k, v)| Label::new((*k).to_owned(), (*v).to_owned()))
        .collect();
    Key::from_parts(name.to_owned(), labels)
}

impl Metrics {
    /// Adds one to a counter.
    pub fn incr(&self, name: &str, pairs: &[(&str, &str)]) {
        self.add(name, pairs, 1);
    }

    /// Adds `n` to a counter.
    pub fn add(&self, name: &str, pairs: &[(&str, &str)], n: u64) {
        self.shared
            .recorder
            .register_counter(&key(name, pairs), &METADATA)
            .increment(n);
    }

    /// Sets a gauge.
    pub fn set(&self, name: &str, pairs: &[(&str, &str)], value: f64) {
        self.shared
            .recorder
            .register_gauge(&key(name, pairs), &METADATA)
            .set(value);
    }

    /// Records one observation (seconds) in a histogram.
    pub fn observe(&self, name: &str, pairs: &[(&str, &str)], seconds: f64) {
        self.shared
            .recorder
            .register_histogram(&key(name, pairs), &METADATA)
            .record(seconds);
    }

    /// The Prometheus text exposition, metric families sorted by name so
    /// the same counts always render as the same text (the recorder
    /// renders its families in hash order).
    pub fn render(&self) -> String {
        self.shared.handle.run_upkeep();
        let text = self.shared.handle.render();
        let mut families: Vec<&str> = text
            .split("\n\n")
            .map(str::trim)
            .filter(|family| !family.is_empty())
            .collect();
        families.sort_unstable();
        let mut out = families.join("\n\n");
        out.push('\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_histograms_render_in_the_text_format() {
        let m = Metrics::default();
        m.incr("mosaic_things_total", &[("route", "/v1/recall")]);
        m.add("mosaic_things_total", &[("route", "/v1/recall")], 2);
        m.incr("mosaic_other_total", &[]);
        m.observe("mosaic_took_seconds", &[("route", "/x")], 0.003);
        m.observe("mosaic_took_seconds", &[("route", "/x")], 2.0);
        let text = m.render();
        assert!(
            text.contains("mosaic_things_total{route=\"/v1/recall\"} 3"),
            "{text}"
        );
        assert!(text.contains("mosaic_other_total 1"), "{text}");
        assert!(
            text.contains("mosaic_took_seconds_bucket{route=\"/x\",le=\"0.005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("mosaic_took_seconds_bucket{route=\"/x\",le=\"+Inf\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("mosaic_took_seconds_count{route=\"/x\"} 2"),
            "{text}"
        );
        // Rendering twice loses nothing, and families come sorted.
        assert_eq!(m.render(), text);
        let other = text.find("mosaic_other_total").unwrap_or(usize::MAX);
        let things = text.find("mosaic_things_total").unwrap_or(0);
        assert!(other < things, "{text}");
    }

    #[test]
    fn a_gauge_renders_its_last_value() {
        let m = Metrics::default();
        m.set("mosaic_level", &[], 3.0);
        m.set("mosaic_level", &[], 2.0);
        let text = m.render();
        assert!(text.contains("mosaic_level 2\n"), "{text}");
    }

    #[test]
    fn two_services_keep_their_metrics_apart() {
        let (a, b) = (Metrics::default(), Metrics::default());
        a.incr("mosaic_only_a_total", &[]);
        assert!(a.render().contains("mosaic_only_a_total 1"));
        assert!(!b.render().contains("mosaic_only_a_total"));
    }
}
