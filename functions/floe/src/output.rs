//! Logging setup and the summaries printed after a run.

use floe_pipeline::{Outcome, RunReport};
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

/// One paragraph about a pass.
pub fn print_report(r: &RunReport) {
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
    for c in &r.commits.commits {
        println!(
            "committed {}: {} batches, {} files, {} rows, snapshot {} (commit {}){}",
            c.target.rsplit(':').next().unwrap_or(&c.target),
            c.batches,
            c.files,
            c.rows,
            c.snapshot_id.map_or("-".to_string(), |s| s.to_string()),
            c.commit_id,
            if c.recovered { " [recovered]" } else { "" }
        );
    }
    for t in &r.commits.waiting {
        println!("staged, not yet due: {t}");
    }
    for t in &r.commits.busy {
        println!("another committer holds {t}");
    }
}
