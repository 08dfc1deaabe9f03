//! Logging setup and the summaries printed after a run.

use floe_pipeline::sources::backfill::BackfillStop;
use floe_pipeline::sources::queue::PollStop;
use floe_pipeline::{BackfillReport, CommitReport, Outcome, PollReport, RunReport};
use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// Logs go to stderr; RUST_LOG-style filter.
pub fn init_logging(filter: &str, format: LogFormat) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// The listing's lines: where each prefix stands.
pub fn print_backfill(b: &BackfillReport) {
    let state = match b.stop {
        BackfillStop::Done => "done",
        BackfillStop::Deadline => "stopped before the deadline; the next run resumes",
        BackfillStop::Failures => "stopped at a page whose objects failed; the next run retries it",
        BackfillStop::NotListing => "nothing to list (the listing finished earlier)",
    };
    println!(
        "backfill: {state} | this run: {} pages, {} objects | dead letters: {}",
        b.pages, b.listed, b.dead_lettered
    );
    for p in &b.prefixes {
        let prefix = if p.prefix.is_empty() {
            "(all)"
        } else {
            &p.prefix
        };
        println!(
            "  {prefix}: {} objects{}",
            p.listed,
            if p.done { ", done" } else { "" }
        );
    }
    for f in &b.failures {
        println!("  not done: {f}");
    }
}

/// The queue's line.
pub fn print_queue(q: &PollReport) {
    let state = match q.stop {
        PollStop::Drained => "drained",
        PollStop::Deadline => "stopped before the deadline",
        PollStop::Listing => "waiting for the INITIAL listing",
        PollStop::Snapshot => "not read (SNAPSHOT)",
    };
    println!(
        "queue: {state} | received: {} messages, {} changes | deleted: {} | skipped (before the start): {} | nothing to land: {} | dead-lettered: {} | left for redelivery: {} | delete failures: {}",
        q.received,
        q.changes,
        q.deleted,
        q.skipped,
        q.ignored,
        q.dead_lettered,
        q.left,
        q.delete_failures
    );
}

/// One paragraph about a pass.
pub fn print_report(r: &RunReport) {
    if let Some(b) = &r.backfill {
        print_backfill(b);
    }
    if let Some(q) = &r.queue {
        print_queue(q);
    }
    let staged = r.count(|o| matches!(o, Outcome::Staged));
    let dups = r.count(|o| matches!(o, Outcome::Duplicate | Outcome::Stale));
    let ignored = r.count(|o| matches!(o, Outcome::Ignored(_)));
    let dead = r.count(|o| matches!(o, Outcome::DeadLettered(_)));
    let busy = r.count(|o| matches!(o, Outcome::Busy));
    let failures = r.failures();
    if r.changes > 0 || !r.commits.commits.is_empty() {
        println!(
            "scanned: {} changed, {} unchanged | landed: {staged} objects, {} rows | duplicates: {dups} | ignored: {ignored} | bad records: {} | dead letters: {} (objects: {dead}) | busy: {busy} | failed: {}",
            r.changes,
            r.unchanged,
            r.rows(),
            r.bad_records(),
            r.dead_letters(),
            failures.len()
        );
    } else {
        println!("scanned: nothing changed ({} unchanged)", r.unchanged);
    }
    for f in &failures {
        println!("  failed: {f}");
    }
    print_commits(&r.commits);
}

/// The commit pass's lines.
pub fn print_commits(commits: &CommitReport) {
    for c in &commits.commits {
        println!(
            "committed {}: {} batches, {} files, {} rows{}, snapshot {} (commit {}){}",
            c.target.rsplit(':').next().unwrap_or(&c.target),
            c.batches,
            c.files,
            c.rows,
            if c.bad_rows > 0 {
                format!(" ({} bad rows set aside)", c.bad_rows)
            } else {
                String::new()
            },
            c.snapshot_id.map_or("-".to_string(), |s| s.to_string()),
            c.commit_id,
            if c.recovered { " [recovered]" } else { "" }
        );
    }
    for t in &commits.waiting {
        println!("staged, not yet due: {t}");
    }
    for t in &commits.busy {
        println!("another committer holds {t}");
    }
}
