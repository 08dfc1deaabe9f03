//! Where a run's time goes, per object: the small objects, and one object holding the same
//! bytes, each run with its log at `info` in JSON; the phases are cut at the run's own log
//! lines, and what the small objects pay over the one object, phase by phase, is their
//! per-object cost (same rows, same bytes: only the number of objects differs).
//!
//! These runs log every object, so they are a little slower than the measured ones; they are
//! never the runs the targets are judged by.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use floe_core::{Error, Result};

use super::{floe_config, fresh, io};

/// The log lines that end each phase (the first of each, the last for `object ingested`), and
/// what the phase holds. The table (a fresh one each run) is created while the objects are
/// claimed, so it has no phase of its own: what of it outlasts the claims, the first object's
/// write waits for.
const PHASES: [(&str, &str); 6] = [
    (
        "objects claimed",
        "start, config, checkpoint, catalog, list, claims (and table)",
    ),
    (
        "object ingested",
        "objects read, decoded, routed and written",
    ),
    ("batch staged", "files closed, the batch staged"),
    (
        "snapshot committed",
        "objects marked staged, lease, commit record, table commit",
    ),
    (
        "commit finished",
        "after the commit: rows ledger, batch marks, record removed",
    ),
    ("", "purge of dead entries, exit"),
];

/// The end of each phase, ms from the process start.
type Ends = [f64; PHASES.len()];

/// Run the phase breakdown: `small` (the objects) against one object of their bytes, `runs`
/// rounds, medians per phase.
pub(super) fn per_object_phases(
    exe: &Path,
    root: &Path,
    small: &[PathBuf],
    runs: u32,
) -> Result<()> {
    if small.len() < 2 {
        return Ok(());
    }
    let joined_dir = root.join("data/small-joined");
    joined(small, &joined_dir.join("all.ndjson"))?;
    let small_dir = small[0].parent().map(Path::to_path_buf).unwrap_or_default();
    let (mut ones, mut manys) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        ones.push(logged_run(exe, &root.join("runs/phases-one"), &joined_dir)?);
        manys.push(logged_run(exe, &root.join("runs/phases-many"), &small_dir)?);
    }
    let (one, many) = (durations(&ones), durations(&manys));
    let n = small.len();
    println!(
        "\n{:<60} {:>12} {:>12} {:>14}",
        format!("where the time goes (logged runs, medians of {runs})"),
        "1 object",
        format!("{n} objects"),
        "per object"
    );
    for (i, (_, what)) in PHASES.iter().enumerate() {
        println!(
            "{what:<60} {:>9.1} ms {:>9.1} ms {:>11.0} us",
            one[i],
            many[i],
            per_object_us(one[i], many[i], n)
        );
    }
    let (t1, tn) = (one.iter().sum::<f64>(), many.iter().sum::<f64>());
    println!(
        "{:<60} {t1:>9.1} ms {tn:>9.1} ms {:>11.0} us",
        "the whole run",
        per_object_us(t1, tn, n)
    );
    Ok(())
}

/// What each of `n` objects adds to a phase over one object of the same bytes.
fn per_object_us(one_ms: f64, many_ms: f64, n: usize) -> f64 {
    (many_ms - one_ms) * 1e3 / (n.max(2) - 1) as f64
}

/// `small`'s bytes, in order, as the one object at `path` (made once, reused).
fn joined(small: &[PathBuf], path: &Path) -> Result<()> {
    let total: u64 = (small.iter())
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    if std::fs::metadata(path).is_ok_and(|m| m.len() == total) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io("failed to create bench data folder"))?;
    }
    let mut out = std::fs::File::create(path).map_err(io("failed to create bench data"))?;
    for p in small {
        let mut f = std::fs::File::open(p).map_err(io("failed to open bench data"))?;
        std::io::copy(&mut f, &mut out).map_err(io("failed to write bench data"))?;
    }
    Ok(())
}

/// One `floe run` over `folder` with its log at `info` in JSON: each phase's end.
fn logged_run(exe: &Path, dir: &Path, folder: &Path) -> Result<Ends> {
    fresh(dir)?;
    let config = floe_config(dir, folder)?;
    let started = SystemTime::now();
    let out = Command::new(exe)
        .args(["--log", "info", "--log-format", "json", "run", "--config"])
        .arg(&config)
        .env_remove("FLOE_FAULT")
        .env_remove("FLOE_LOG")
        .env_remove("RUST_LOG")
        .output()
        .map_err(io("failed to start a benchmark process"))?;
    let ended = SystemTime::now();
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(Error::unexpected(format!(
            "logged floe run failed ({}):\n{log}",
            out.status
        )));
    }
    let ms = |t: SystemTime| {
        t.duration_since(started)
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    ends(&log, ms(ended), |at| ms(SystemTime::from(at)))
}

/// Each phase's end in `log` (JSON lines), `end_ms` for the last; a marker that is missing
/// ends its phase where the one before ended.
fn ends(
    log: &str,
    end_ms: f64,
    offset: impl Fn(chrono::DateTime<chrono::Utc>) -> f64,
) -> Result<Ends> {
    let mut found: Vec<Option<f64>> = vec![None; PHASES.len()];
    for line in log.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let (Some(message), Some(at)) = (
            v.pointer("/fields/message").and_then(|m| m.as_str()),
            v.get("timestamp").and_then(|t| t.as_str()),
        ) else {
            continue;
        };
        let Some(i) = PHASES
            .iter()
            .position(|(m, _)| !m.is_empty() && *m == message)
        else {
            continue;
        };
        let at = chrono::DateTime::parse_from_rfc3339(at)
            .map_err(|e| Error::unexpected(format!("bad log timestamp {at}: {e}")))?;
        let t = offset(at.to_utc());
        // Each marker's first line, but the last object's for the objects' phase.
        if found[i].is_none() || message == "object ingested" {
            found[i] = Some(t);
        }
    }
    if found[..PHASES.len() - 1].iter().all(Option::is_none) {
        return Err(Error::unexpected(format!(
            "the logged run printed none of the lines its phases end at:\n{log}"
        )));
    }
    let mut out = [0.0; PHASES.len()];
    let mut last = 0.0f64;
    for (i, f) in found.iter().enumerate() {
        let t = if i == PHASES.len() - 1 {
            end_ms
        } else {
            f.unwrap_or(last)
        };
        out[i] = t.max(last);
        last = out[i];
    }
    Ok(out)
}

/// The median length of each phase over `runs` (phase ends to lengths, run by run).
fn durations(runs: &[Ends]) -> [f64; PHASES.len()] {
    let mut out = [0.0; PHASES.len()];
    for (i, slot) in out.iter_mut().enumerate() {
        let mut v: Vec<f64> = (runs.iter())
            .map(|e| e[i] - if i == 0 { 0.0 } else { e[i - 1] })
            .collect();
        v.sort_by(f64::total_cmp);
        *slot = v.get(v.len() / 2).copied().unwrap_or(0.0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(at: &str, message: &str) -> String {
        format!(r#"{{"timestamp":"{at}","level":"INFO","fields":{{"message":"{message}"}}}}"#)
    }

    #[test]
    fn phases_end_at_their_log_lines_and_the_objects_at_the_last_one() {
        let base = chrono::DateTime::parse_from_rfc3339("2026-12-06T00:00:00Z")
            .unwrap()
            .to_utc();
        let log = [
            "not json".to_owned(),
            line("2026-12-06T00:00:00.010Z", "objects claimed"),
            line("2026-12-06T00:00:00.008Z", "table created"),
            line("2026-12-06T00:00:00.016Z", "object ingested"),
            line("2026-12-06T00:00:00.040Z", "object ingested"),
            line("2026-12-06T00:00:00.045Z", "batch staged"),
            line("2026-12-06T00:00:00.060Z", "snapshot committed"),
            line("2026-12-06T00:00:00.066Z", "commit finished"),
        ]
        .join("\n");
        let ms = |at: chrono::DateTime<chrono::Utc>| {
            (at - base).num_microseconds().unwrap() as f64 / 1e3
        };
        let e = ends(&log, 70.0, ms).unwrap();
        assert_eq!(e, [10.0, 40.0, 45.0, 60.0, 66.0, 70.0]);
        assert_eq!(durations(&[e]), [10.0, 30.0, 5.0, 15.0, 6.0, 4.0]);
    }

    #[test]
    fn a_missing_marker_ends_its_phase_with_the_one_before_and_no_marker_is_an_error() {
        let base = chrono::DateTime::parse_from_rfc3339("2026-12-06T00:00:00Z")
            .unwrap()
            .to_utc();
        let ms = |at: chrono::DateTime<chrono::Utc>| {
            (at - base).num_microseconds().unwrap() as f64 / 1e3
        };
        // No `batch staged`.
        let log = [
            line("2026-12-06T00:00:00.010Z", "objects claimed"),
            line("2026-12-06T00:00:00.020Z", "object ingested"),
            line("2026-12-06T00:00:00.040Z", "snapshot committed"),
            line("2026-12-06T00:00:00.050Z", "commit finished"),
        ]
        .join("\n");
        let e = ends(&log, 55.0, ms).unwrap();
        assert_eq!(e, [10.0, 20.0, 20.0, 40.0, 50.0, 55.0]);
        let err = ends("nothing here", 5.0, ms).unwrap_err();
        assert!(err.to_string().contains("none of the lines"), "{err}");
    }

    #[test]
    fn each_object_pays_what_the_many_add_over_the_one() {
        assert_eq!(per_object_us(10.0, 59.9, 500), 100.0);
        assert_eq!(per_object_us(10.0, 10.0, 1), 0.0);
    }
}
