//! Metrics, named in one place, written as CloudWatch Embedded Metric Format (EMF) lines.
//!
//! A handler records what its invocation did on [`Invocation::metrics`](crate::Invocation);
//! the adapter writes one EMF line per invocation to stdout when it ends (on success and on
//! failure). On Lambda, CloudWatch Logs turns the line into metrics in the `floe` namespace,
//! dimension `function`; on FC the same line is a structured log record that Simple Log Service
//! can index and chart.
//!
//! ```json
//! {"_aws":{"Timestamp":1736930000000,"CloudWatchMetrics":[{"Namespace":"floe",
//!   "Dimensions":[["function"]],"Metrics":[{"Name":"objects","Unit":"Count"},…]}]},
//!  "function":"ingest","request_id":"…","objects":3,"rows":120,…}
//! ```
//!
//! `conflicts` counts commit attempts retried after a conflict or an unknown outcome. The
//! committer reports them only through its log event (`floe_iceberg`'s "commit conflict or
//! unknown outcome; checking history before retrying"), so [`ConflictCounter`], a tracing layer,
//! counts those events; each invocation reports the difference over its run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// The EMF namespace.
pub const NAMESPACE: &str = "floe";

/// Every metric floe's functions report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Object changes finished with (staged, duplicate, stale, ignored, dead-lettered).
    Objects,
    /// Rows staged.
    Rows,
    /// Object bytes read.
    Bytes,
    /// Snapshots committed (one per table per commit).
    Commits,
    /// Commit attempts retried after a conflict or an unknown outcome.
    Conflicts,
    /// Dead letters written (bad records and unreadable objects).
    DeadLetters,
    /// Age of the oldest change handled: now minus its event time.
    Lag,
    /// Queue messages (or trigger events) received.
    Messages,
    /// Messages or object changes that failed and will be delivered again.
    Failed,
    /// Invocations that ended in an error.
    Errors,
}

impl Metric {
    /// Every metric, in the order lines carry them.
    pub const ALL: [Metric; 10] = [
        Metric::Objects,
        Metric::Rows,
        Metric::Bytes,
        Metric::Commits,
        Metric::Conflicts,
        Metric::DeadLetters,
        Metric::Lag,
        Metric::Messages,
        Metric::Failed,
        Metric::Errors,
    ];

    /// The metric's name in CloudWatch and in the log line.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Objects => "objects",
            Metric::Rows => "rows",
            Metric::Bytes => "bytes",
            Metric::Commits => "commits",
            Metric::Conflicts => "conflicts",
            Metric::DeadLetters => "dead_letters",
            Metric::Lag => "lag_ms",
            Metric::Messages => "messages",
            Metric::Failed => "failed",
            Metric::Errors => "errors",
        }
    }

    /// The CloudWatch unit.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Bytes => "Bytes",
            Metric::Lag => "Milliseconds",
            _ => "Count",
        }
    }

    /// How two recordings in one invocation combine: lag keeps the largest, the rest add up.
    fn combine(self, old: f64, new: f64) -> f64 {
        match self {
            Metric::Lag => old.max(new),
            _ => old + new,
        }
    }
}

/// What one invocation recorded.
#[derive(Debug, Default)]
pub struct Metrics(Mutex<Vec<(Metric, f64)>>);

impl Metrics {
    /// Record `value` for `metric` (added to earlier values; the largest for lag).
    pub fn record(&self, metric: Metric, value: f64) {
        let mut values = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match values.iter_mut().find(|(m, _)| *m == metric) {
            Some((_, v)) => *v = metric.combine(*v, value),
            None => values.push((metric, value)),
        }
    }

    /// Record a count.
    pub fn count(&self, metric: Metric, n: u64) {
        self.record(metric, n as f64);
    }

    /// The value recorded for `metric`, if any.
    pub fn get(&self, metric: Metric) -> Option<f64> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(m, _)| *m == metric)
            .map(|(_, v)| *v)
    }

    /// The EMF line for these values (metrics never recorded are left out).
    pub fn emf_line(&self, function: &str, request_id: &str) -> String {
        let values = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut defs = Vec::new();
        let mut doc = Map::new();
        for metric in Metric::ALL {
            if let Some((_, v)) = values.iter().find(|(m, _)| *m == metric) {
                defs.push(json!({"Name": metric.name(), "Unit": metric.unit()}));
                doc.insert(metric.name().into(), number(*v));
            }
        }
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        doc.insert(
            "_aws".into(),
            json!({
                "Timestamp": timestamp,
                "CloudWatchMetrics": [{
                    "Namespace": NAMESPACE,
                    "Dimensions": [["function"]],
                    "Metrics": defs,
                }],
            }),
        );
        doc.insert("function".into(), Value::from(function));
        doc.insert("request_id".into(), Value::from(request_id));
        Value::Object(doc).to_string()
    }
}

/// Whole numbers print without a fraction.
fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        Value::from(v as i64)
    } else {
        Value::from(v)
    }
}

/// Commit conflicts counted since the process started (see the module doc).
static CONFLICTS: AtomicU64 = AtomicU64::new(0);

/// The message of the committer's conflict event, as `floe_iceberg` logs it.
pub const CONFLICT_EVENT_PREFIX: &str = "commit conflict";

/// Conflicts counted so far; an invocation reports the difference between its end and start.
pub fn conflicts_so_far() -> u64 {
    CONFLICTS.load(Ordering::Relaxed)
}

/// A tracing layer counting the committer's conflict events (see the module doc).
#[derive(Clone, Copy, Debug, Default)]
pub struct ConflictCounter;

impl<S: Subscriber> Layer<S> for ConflictCounter {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() != Level::WARN || !meta.target().starts_with("floe_iceberg") {
            return;
        }
        let mut visitor = MessageStartsWith(false);
        event.record(&mut visitor);
        if visitor.0 {
            CONFLICTS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

struct MessageStartsWith(bool);

impl Visit for MessageStartsWith {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = value.starts_with(CONFLICT_EVENT_PREFIX);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}").starts_with(CONFLICT_EVENT_PREFIX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn emf_line_declares_what_it_carries() {
        let m = Metrics::default();
        m.count(Metric::Objects, 2);
        m.count(Metric::Objects, 1);
        m.count(Metric::Bytes, 4096);
        m.record(Metric::Lag, 1500.0);
        m.record(Metric::Lag, 700.0);
        let line: Value = serde_json::from_str(&m.emf_line("ingest", "req-1")).unwrap();
        assert_eq!(line["objects"], 3);
        assert_eq!(line["bytes"], 4096);
        assert_eq!(line["lag_ms"], 1500);
        assert_eq!(line["function"], "ingest");
        assert_eq!(line["request_id"], "req-1");
        assert!(line.get("rows").is_none());
        let cw = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(cw["Namespace"], "floe");
        assert_eq!(cw["Dimensions"], json!([["function"]]));
        assert_eq!(
            cw["Metrics"],
            json!([
                {"Name": "objects", "Unit": "Count"},
                {"Name": "bytes", "Unit": "Bytes"},
                {"Name": "lag_ms", "Unit": "Milliseconds"},
            ])
        );
        assert!(line["_aws"]["Timestamp"].as_u64().unwrap() > 1_700_000_000_000);
    }

    #[test]
    fn conflict_events_of_the_committer_are_counted() {
        let subscriber = tracing_subscriber::registry().with(ConflictCounter);
        let before = conflicts_so_far();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(target: "floe_iceberg::commit", attempt = 1, "commit conflict or unknown outcome; checking history before retrying");
            tracing::warn!(target: "floe_iceberg::commit", "something else");
            tracing::info!(target: "floe_iceberg::commit", "commit conflict at info level is not counted");
            tracing::warn!(target: "floe_pipeline", "commit conflict from another crate");
        });
        assert_eq!(conflicts_so_far() - before, 1);
    }

    /// The committer's log line is the source of the `conflicts` metric: keep them in step.
    #[test]
    fn the_committer_still_logs_the_counted_event() {
        let src = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../iceberg-sink/src/commit.rs"
        ))
        .unwrap();
        assert!(
            src.contains(&format!("\"{CONFLICT_EVENT_PREFIX} or unknown outcome")),
            "floe_iceberg's conflict log message changed: update metrics::CONFLICT_EVENT_PREFIX"
        );
    }
}
