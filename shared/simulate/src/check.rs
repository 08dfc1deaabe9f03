//! The invariant a drained run must hold.

use crate::world::World;

/// Every version of every object in its table once or not at all (a version overwritten before
/// it was read is skipped), the latest version of every object exactly once, no message
/// dead-lettered (the simulation has no bad objects).
pub fn invariant(w: &World) -> Result<(), String> {
    let mut wrong = Vec::new();
    for (key, versions) in &w.bucket {
        let target = crate::ingest::target_of(key);
        let table = &w.tables[&target];
        for (i, v) in versions.iter().enumerate() {
            let n = i as u64 + 1;
            let landed = table.rows.get(&(key.clone(), n)).copied().unwrap_or(0);
            let latest = n == versions.len() as u64;
            let ok = landed == v.rows || (landed == 0 && !latest);
            if !ok {
                wrong.push(format!(
                    "{key} version {n}{}: {landed} rows in the table, {} in the object",
                    if latest { " (latest)" } else { "" },
                    v.rows
                ));
            }
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

/// What the world holds, for a failure message.
pub fn describe(w: &World) -> String {
    let open: Vec<String> = w
        .queue
        .iter()
        .filter(|m| !m.gone)
        .map(|m| format!("{}:{}", m.id, m.change.key))
        .collect();
    let records: Vec<String> = ["batch/", "commit/", "lease/"]
        .iter()
        .flat_map(|p| w.scan(p))
        .map(|(k, v, _)| format!("{k} = {v:?}"))
        .collect();
    format!(
        "clock {} ms, messages open [{}], records [{}], stats {:?}",
        w.now,
        open.join(", "),
        records.join(" | "),
        w.stats
    )
}
