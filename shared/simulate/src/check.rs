//! The invariant a drained run must hold.

use std::collections::BTreeMap;

use floe_core::Operation;
use floe_pipeline::protocol::claim::normalize_etag;
use floe_pipeline::protocol::records::rows_key;
use floe_pipeline::targets::TargetId;

use crate::world::{Value, World};

/// Where each object version's rows are in a table: (data file, position) of every row its
/// current snapshot reads, by (key, version).
type Landed = BTreeMap<(String, u64), Vec<(String, u64)>>;

/// What each table holds, read as a query reads it (a file it names that is gone is an error).
fn landed(w: &World, target: &TargetId) -> Result<Landed, String> {
    let view = w.load(target);
    let mut out = Landed::new();
    for (path, entries) in view.current.iter().flat_map(|s| &s.data) {
        for (pos, key, version) in w.read_rows(&view, path)? {
            let rows = out.entry((key, version)).or_default();
            rows.extend((0..*entries).map(|_| (path.clone(), pos)));
        }
    }
    Ok(out)
}

/// After draining, for every object of a table that replaces changed objects' rows: its rows in
/// the table are exactly those of its latest version (none when its latest change removed it),
/// and its `rows/` record says where they are (the next change deletes by it). For a table that
/// appends: every version in it once or not at all (a version overwritten or removed before it
/// was read is skipped), the latest version exactly once. For both: every file a table reads is
/// there, no message dead-lettered (the simulation has no bad objects).
pub fn invariant(w: &World) -> Result<(), String> {
    let mut wrong = Vec::new();
    let mut tables = BTreeMap::new();
    for target in w.tables.keys() {
        match landed(w, target) {
            Ok(rows) => {
                tables.insert(target.clone(), rows);
            }
            Err(why) => wrong.push(format!("{target}: {why}")),
        }
    }
    for (key, versions) in &w.bucket {
        let target = crate::ingest::target_of(key);
        let Some(table) = tables.get(&target) else {
            continue;
        };
        let replaces = crate::replaces(&w.opts, &target);
        for (i, v) in versions.iter().enumerate() {
            let n = i as u64 + 1;
            let landed = table.get(&(key.clone(), n)).map_or(0, |r| r.len() as u64);
            let latest = n == versions.len() as u64 && !v.removed;
            let ok = if replaces {
                landed == if latest { v.rows } else { 0 }
            } else {
                landed == v.rows || (landed == 0 && !latest)
            };
            if !ok {
                wrong.push(format!(
                    "{key} version {n}{}: {landed} rows in the table, {} in the object",
                    if v.removed {
                        " (a removal)"
                    } else if latest {
                        " (latest)"
                    } else {
                        ""
                    },
                    v.rows
                ));
            }
        }
        if replaces {
            wrong.extend(record_of(w, &target, key, table));
        }
    }
    let dead: Vec<String> = w
        .queue
        .iter()
        .filter(|m| m.dead_lettered)
        .map(|m| {
            format!(
                "message {} ({}) dead-lettered after {} receives",
                m.id, m.change.key, m.receives
            )
        })
        .collect();
    wrong.extend(dead);
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("{}; {}", wrong.join("; "), describe(w)))
    }
}

/// What is wrong with the `rows/` record of `key` in a replacing table: it must name the
/// version whose rows the table holds, and exactly where they are.
fn record_of(w: &World, target: &TargetId, key: &str, table: &Landed) -> Option<String> {
    let mut held: Vec<(String, u64)> = (table.range((key.to_owned(), 0)..))
        .take_while(|((k, _), _)| k == key)
        .flat_map(|(_, rows)| rows.iter().cloned())
        .collect();
    held.sort();
    let record = match w.get(&rows_key(target, crate::BUCKET, key)) {
        Some((Value::Rows(r), _)) => Some(r),
        _ => None,
    };
    let mut named: Vec<(String, u64)> = (record.iter())
        .filter(|r| r.operation == Operation::Created)
        .flat_map(|r| &r.rows)
        .flat_map(|r| (r.start..r.start + r.rows).map(|p| (r.file.clone(), p)))
        .collect();
    named.sort();
    let versions = &w.bucket[key];
    let version = record.as_ref().map(|r| match &r.etag {
        Some(e) => (versions
            .iter()
            .position(|v| normalize_etag(&v.etag) == normalize_etag(e)))
        .map_or(0, |i| i + 1),
        None => 0,
    });
    let latest = versions.len();
    let right_version = match version {
        Some(n) if n > 0 => n == latest,
        // A removal, or no record: no rows held.
        _ => held.is_empty(),
    };
    (named != held || !right_version).then(|| {
        format!(
            "{key}: its rows/ record ({}) names rows at {named:?}, the table holds them at {held:?}",
            match version {
                Some(0) => "a removal".to_owned(),
                Some(n) => format!("version {n} of {latest}"),
                None => "none".to_owned(),
            }
        )
    })
}

/// What the world holds, for a failure message.
pub fn describe(w: &World) -> String {
    let open: Vec<String> = w
        .queue
        .iter()
        .filter(|m| !m.gone)
        .map(|m| format!("{}:{}", m.id, m.change.key))
        .collect();
    let records: Vec<String> = ["batch/", "commit/", "lease/", "maint/"]
        .iter()
        .flat_map(|p| w.scan(p))
        .map(|(k, v, _)| format!("{k} = {v:?}"))
        .collect();
    let tables: Vec<String> = (w.tables.keys())
        .map(|t| {
            let view = w.load(t);
            let files: Vec<String> = (view.current.iter())
                .flat_map(|s| s.data.keys().chain(&s.deletes))
                .cloned()
                .collect();
            format!(
                "{t} at {:?} reads [{}]",
                view.current_id(),
                files.join(", ")
            )
        })
        .collect();
    format!(
        "clock {} ms, messages open [{}], records [{}], tables [{}], stats {:?}",
        w.now,
        open.join(", "),
        records.join(" | "),
        tables.join("; "),
        w.stats
    )
}
