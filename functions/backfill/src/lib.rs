//! The backfill function: lists bucket prefixes and lands every object found (SNAPSHOT), or
//! does so and then leaves the queue to the poll function (INITIAL), continuing across
//! invocations when a listing outlives one.
//!
//! Request (an HTTP request: function URL, FC HTTP trigger; or the same JSON as an event):
//!
//! ```text
//! POST /  {"bucket":"b","prefixes":["logs/","events/"],"mode":"SNAPSHOT"}
//! POST /?bucket=b&prefix=logs/&prefix=events/&mode=INITIAL
//! ```
//!
//! Every field is optional: the bucket and prefixes default to the configured source's
//! (`path`), the mode to `SNAPSHOT`. The handler knows the lister only as a
//! [`BackfillSource`]; [`Pipeline`] implements it by the kind of `[source]`:
//!
//! | source | what a backfill does |
//! |---|---|
//! | `local` (a folder) | lists the prefixes and lands what is not landed yet |
//! | S3 / OSS bucket (`s3`, `oss`, or a queue source with `oss-bucket`) | lists the configured `path` prefixes page by page, resumable from the continuation kept in the checkpoint table, rate limited (`Pipeline::backfill`); the configured `scan.startup.mode` decides, a request may only restate the bucket and prefixes |
//!
//! No batch starts within [`Deps::stop_margin`] of the deadline. Answer: [`BackfillReport`]
//! as JSON, HTTP 200 when the listing is complete, 202 when it is not: invoke again to continue
//! (objects already landed are recognised and skipped).

use std::time::Duration;

use floe_core::{Error, ErrorKind, Result};
use floe_pipeline::config::SourceConfig;
use floe_pipeline::sources::backfill::BackfillStop;
use floe_pipeline::{BackfillReport as Listing, BatchTotals, Pipeline, RunReport};
use floe_runtime::{Deadline, Event, Function, HttpResponse, Input, Metric, Metrics, Output};
use serde_json::{Value, json};

/// `SNAPSHOT` or `INITIAL`, as in `scan.startup.mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackfillMode {
    /// The listing only.
    #[default]
    Snapshot,
    /// The listing, then the queue from where the listing began (an object seen by both is
    /// landed once).
    Initial,
}

impl BackfillMode {
    /// Parse `SNAPSHOT` / `INITIAL` (any case).
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_uppercase().as_str() {
            "SNAPSHOT" => Ok(BackfillMode::Snapshot),
            "INITIAL" => Ok(BackfillMode::Initial),
            _ => Err(Error::invalid_input(format!(
                "backfill mode `{s}`: expected SNAPSHOT or INITIAL"
            ))),
        }
    }

    /// `SNAPSHOT` / `INITIAL`.
    pub fn as_str(self) -> &'static str {
        match self {
            BackfillMode::Snapshot => "SNAPSHOT",
            BackfillMode::Initial => "INITIAL",
        }
    }
}

/// What to backfill.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackfillRequest {
    /// The bucket (default: the configured source's).
    pub bucket: Option<String>,
    /// Key prefixes (default: the configured source's `path`, else everything).
    pub prefixes: Vec<String>,
    /// SNAPSHOT (default) or INITIAL.
    pub mode: BackfillMode,
}

impl BackfillRequest {
    /// Read the request from an event: query parameters of an HTTP request, then its JSON body
    /// (or the event payload), whose fields win.
    pub fn from_event(event: &Event) -> Result<Self> {
        let mut req = BackfillRequest::default();
        if let Input::Http(r) = &event.input {
            for (k, v) in r.query_pairs() {
                match k.as_str() {
                    "bucket" => req.bucket = Some(v),
                    "prefix" | "prefixes" => req
                        .prefixes
                        .extend(v.split(',').filter(|p| !p.is_empty()).map(str::to_owned)),
                    "mode" => req.mode = BackfillMode::parse(&v)?,
                    other => {
                        return Err(Error::invalid_input(format!(
                            "unknown backfill parameter `{other}`: expected bucket, prefix, mode"
                        )));
                    }
                }
            }
        }
        let doc = event.json_body()?;
        let Some(obj) = doc.as_object() else {
            // No body (or `null`), or an event that is not a request (a schedule): defaults.
            return Ok(req);
        };
        if let Some(b) = obj.get("bucket") {
            req.bucket = Some(
                b.as_str()
                    .ok_or_else(|| Error::invalid_input("backfill `bucket` must be a string"))?
                    .to_owned(),
            );
        }
        if let Some(p) = obj.get("prefixes").or_else(|| obj.get("prefix")) {
            req.prefixes = match p {
                Value::String(s) => s
                    .split(',')
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned)
                    .collect(),
                Value::Array(items) => items
                    .iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| Error::invalid_input("backfill `prefixes` must be strings"))?,
                _ => {
                    return Err(Error::invalid_input(
                        "backfill `prefixes` must be a string or a list of strings",
                    ));
                }
            };
        }
        if let Some(m) = obj.get("mode") {
            req.mode = BackfillMode::parse(
                m.as_str()
                    .ok_or_else(|| Error::invalid_input("backfill `mode` must be a string"))?,
            )?;
        }
        Ok(req)
    }
}

/// Something that can list and land prefixes until a deadline: see the crate doc.
#[async_trait::async_trait]
pub trait BackfillSource: Send + Sync + 'static {
    /// Continue (or start) the backfill `req` until `stop_at`; report what was done and
    /// whether the listing is complete.
    async fn backfill_until(
        &self,
        req: &BackfillRequest,
        stop_at: Deadline,
    ) -> Result<BackfillReport>;
}

/// What one backfill invocation did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackfillReport {
    /// Objects listed that needed landing.
    pub listed: u64,
    /// Objects finished with (staged, duplicate, ignored, dead-lettered).
    pub objects: u64,
    /// Objects that failed or were not reached (the next invocation retries them).
    pub failed: u64,
    /// Rows staged.
    pub rows: u64,
    /// Object bytes read.
    pub bytes: u64,
    /// Dead letters written.
    pub dead_letters: u64,
    /// Whether the listing is complete and every object in it finished.
    pub complete: bool,
}

impl BackfillReport {
    /// The report of a local-folder pass.
    pub fn from_run(run: &RunReport, complete: bool) -> Self {
        let t = BatchTotals::of(&run.batches);
        BackfillReport {
            listed: run.changes as u64,
            objects: t.done,
            failed: run.changes as u64 - t.done,
            rows: t.rows,
            bytes: t.bytes,
            dead_letters: t.dead_letters,
            complete: complete && t.done == run.changes as u64,
        }
    }

    /// The report of a bucket listing ([`Pipeline::backfill`]); a listing finished earlier
    /// (or a startup mode that does not list) is complete.
    pub fn from_listing(b: &Listing) -> Self {
        let t = BatchTotals::of(&b.batches);
        BackfillReport {
            listed: b.listed,
            objects: t.done,
            failed: b.failures.len() as u64,
            rows: t.rows,
            bytes: t.bytes,
            dead_letters: t.dead_letters + b.dead_lettered as u64,
            complete: matches!(b.stop, BackfillStop::Done | BackfillStop::NotListing),
        }
    }

    fn record(&self, m: &Metrics) {
        m.count(Metric::Objects, self.objects);
        m.count(Metric::Failed, self.failed);
        m.count(Metric::Rows, self.rows);
        m.count(Metric::Bytes, self.bytes);
        m.count(Metric::DeadLetters, self.dead_letters);
    }
}

#[async_trait::async_trait]
impl BackfillSource for Pipeline {
    async fn backfill_until(
        &self,
        req: &BackfillRequest,
        stop_at: Deadline,
    ) -> Result<BackfillReport> {
        match &self.config().source {
            SourceConfig::Local { bucket, .. } => {
                if let Some(b) = &req.bucket
                    && b != bucket
                {
                    return Err(Error::invalid_input(format!(
                        "bucket `{b}` is not this deployment's source (`{bucket}`)"
                    )));
                }
                // A folder has no queue behind it: INITIAL is the listing alone.
                let (run, complete) = self
                    .ingest_local_until(stop_at.instant(), &req.prefixes)
                    .await?;
                Ok(BackfillReport::from_run(&run, complete))
            }
            SourceConfig::Cloud(cfg) => {
                // The listing is the configured one: its progress (per prefix, in the checkpoint
                // table) and the INITIAL hand-over to the queue belong to it.
                let Some(listing) = &cfg.listing else {
                    return Err(Error::config(
                        "source.oss-bucket",
                        "this source lists no bucket: nothing to backfill",
                    ));
                };
                if let Some(b) = &req.bucket
                    && b != &listing.bucket
                {
                    return Err(Error::invalid_input(format!(
                        "bucket `{b}` is not this deployment's listed bucket (`{}`)",
                        listing.bucket
                    )));
                }
                if !req.prefixes.is_empty() && req.prefixes != listing.prefixes {
                    return Err(Error::invalid_input(format!(
                        "prefixes {:?} differ from the configured `path` {:?}: a bucket source backfills its configured prefixes",
                        req.prefixes, listing.prefixes
                    )));
                }
                let b = self.backfill(stop_at.instant()).await?;
                Ok(BackfillReport::from_listing(&b))
            }
        }
    }
}

/// What the backfill function needs, built once per process.
#[derive(Debug)]
pub struct Deps<S = Pipeline> {
    /// What lists and lands.
    pub source: S,
    /// No batch starts this long before the deadline (default 10 s).
    pub stop_margin: Duration,
}

impl<S> Deps<S> {
    /// Defaults around `source`.
    pub fn new(source: S) -> Self {
        Deps {
            source,
            stop_margin: Duration::from_secs(10),
        }
    }
}

#[async_trait::async_trait]
impl<S: BackfillSource> Function for Deps<S> {
    async fn call(&self, event: Event) -> Result<Output> {
        handle(event, self).await
    }
}

/// Handle one invocation; see the crate doc.
pub async fn handle<S: BackfillSource>(event: Event, deps: &Deps<S>) -> Result<Output> {
    let req = BackfillRequest::from_event(&event)?;
    let ctx = &event.context;
    let stop_at = ctx.deadline.with_margin(deps.stop_margin);
    if stop_at.remaining().is_zero() {
        return Err(Error::new(
            ErrorKind::Deadline,
            "too little time left to start a backfill",
        )
        .with_retryable(true));
    }
    tracing::info!(bucket = req.bucket.as_deref().unwrap_or("-"), prefixes = ?req.prefixes, mode = req.mode.as_str(), "backfill started");
    let report = deps.source.backfill_until(&req, stop_at).await?;
    report.record(&ctx.metrics);
    tracing::info!(
        listed = report.listed,
        objects = report.objects,
        rows = report.rows,
        complete = report.complete,
        "backfill stopped"
    );
    let body = json!({
        "mode": req.mode.as_str(),
        "bucket": req.bucket,
        "prefixes": req.prefixes,
        "listed": report.listed,
        "objects": report.objects,
        "failed": report.failed,
        "rows": report.rows,
        "bytes": report.bytes,
        "dead_letters": report.dead_letters,
        "complete": report.complete,
    });
    Ok(match event.input {
        Input::Http(_) => Output::Http(HttpResponse::json(
            if report.complete { 200 } else { 202 },
            &body,
        )),
        Input::Payload(_) => Output::Json(body),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use floe_runtime::{HttpRequest, Invocation};

    struct Fake {
        seen: Mutex<Vec<BackfillRequest>>,
        complete: bool,
    }

    #[async_trait::async_trait]
    impl BackfillSource for Fake {
        async fn backfill_until(
            &self,
            req: &BackfillRequest,
            _stop_at: Deadline,
        ) -> Result<BackfillReport> {
            self.seen.lock().unwrap().push(req.clone());
            Ok(BackfillReport {
                listed: 10,
                objects: if self.complete { 10 } else { 6 },
                failed: if self.complete { 0 } else { 4 },
                rows: 100,
                complete: self.complete,
                ..Default::default()
            })
        }
    }

    fn ctx() -> Invocation {
        Invocation::new("r", "backfill", Deadline::after(Duration::from_secs(60)))
    }

    fn http(query: &str, body: &str) -> Event {
        Event {
            input: Input::Http(HttpRequest {
                method: "POST".into(),
                path: "/".into(),
                query: query.into(),
                headers: vec![],
                body: body.to_owned().into(),
            }),
            context: ctx(),
        }
    }

    #[test]
    fn requests_come_from_query_and_body() {
        for (event, want) in [
            (http("", ""), BackfillRequest::default()),
            (
                http("bucket=b&prefix=a%2F&prefix=c/&mode=initial", ""),
                BackfillRequest {
                    bucket: Some("b".into()),
                    prefixes: vec!["a/".into(), "c/".into()],
                    mode: BackfillMode::Initial,
                },
            ),
            (
                http(
                    "mode=INITIAL",
                    r#"{"bucket":"x","prefixes":["p/"],"mode":"SNAPSHOT"}"#,
                ),
                BackfillRequest {
                    bucket: Some("x".into()),
                    prefixes: vec!["p/".into()],
                    mode: BackfillMode::Snapshot,
                },
            ),
            (
                Event::payload(r#"{"prefix":"a/,b/"}"#, ctx()),
                BackfillRequest {
                    prefixes: vec!["a/".into(), "b/".into()],
                    ..Default::default()
                },
            ),
        ] {
            assert_eq!(BackfillRequest::from_event(&event).unwrap(), want);
        }
        for bad in [
            http("mode=FULL", ""),
            http("limit=3", ""),
            http("", r#"{"prefixes":[1]}"#),
            http("", "{not json"),
        ] {
            let e = BackfillRequest::from_event(&bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        }
    }

    #[tokio::test]
    async fn http_status_says_whether_to_invoke_again() {
        for (complete, status) in [(true, 200), (false, 202)] {
            let d = Deps::new(Fake {
                seen: Mutex::new(vec![]),
                complete,
            });
            let Output::Http(r) = handle(http("prefix=logs/", ""), &d).await.unwrap() else {
                panic!("expected an http answer")
            };
            assert_eq!(r.status, status);
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            assert_eq!(body["complete"], complete);
            assert_eq!(body["prefixes"], json!(["logs/"]));
            assert_eq!(d.source.seen.lock().unwrap()[0].prefixes, vec!["logs/"]);
        }
    }

    #[tokio::test]
    async fn a_bad_request_fails_before_listing() {
        let d = Deps::new(Fake {
            seen: Mutex::new(vec![]),
            complete: true,
        });
        let e = handle(http("mode=nope", ""), &d).await.unwrap_err();
        assert!(!e.is_retryable());
        assert!(d.source.seen.lock().unwrap().is_empty());
    }
}
