//! The local folder source: a folder treated as a bucket.
//!
//! A scan lists the folder and compares it with the object records of the checkpoint table:
//! a file never seen, or whose ETag (modification time and size) changed, is a created change; a
//! file seen before and gone is a removed change. The first run of a new checkpoint table sees
//! every file (a snapshot); later runs see what changed since (incremental). A file whose last
//! claim belongs to a batch that never staged (a crash) is offered again.

use std::collections::HashMap;

use chrono::Utc;
use floe_checkpoint::StoreExt;
use floe_core::{ObjectChange, Operation, Provider, Result};

use crate::config::SourceConfig;
use crate::pipeline::Pipeline;
use crate::protocol::records::{ObjRecord, ObjState, obj_prefix};

/// What a scan found.
#[derive(Debug, Default)]
pub struct Scan {
    /// Changes to land, in key order.
    pub changes: Vec<ObjectChange>,
    /// Files already landed as they are.
    pub unchanged: usize,
}

impl Pipeline {
    /// Scan the local folder source for changes since the last run.
    pub async fn scan_local(&self) -> Result<Scan> {
        let SourceConfig::Local {
            bucket, prefixes, ..
        } = &self.config.source
        else {
            return Err(floe_core::Error::config(
                "source.type",
                "scanning needs a local folder source",
            ));
        };
        let probe = ObjectChange::created(Provider::Local, bucket.clone(), "");
        let store = self.stores.store(&probe)?;
        // The records of what was seen before and the listing of what is there now are read
        // at the same time: one waits on the checkpoint table, the other on the folder.
        let records = async {
            let records = (self.checkpoint)
                .scan_json::<ObjRecord>(&obj_prefix(bucket))
                .await?;
            Ok::<HashMap<String, ObjRecord>, floe_core::Error>(
                records
                    .into_iter()
                    .map(|(_, r, _)| (r.key.clone(), r))
                    .collect(),
            )
        };
        let listing = async {
            let scanned: Vec<&str> = if prefixes.is_empty() {
                vec![""]
            } else {
                prefixes.iter().map(String::as_str).collect()
            };
            let mut objects = Vec::new();
            for prefix in scanned {
                let mut token = None;
                loop {
                    // A local listing walks the whole folder per page: ask for everything at
                    // once.
                    let page = store.list(prefix, token.as_deref(), usize::MAX).await?;
                    objects.extend(page.objects);
                    match page.next_token {
                        Some(t) => token = Some(t),
                        None => break,
                    }
                }
            }
            Ok(objects)
        };
        let (mut known, listed) = tokio::try_join!(records, listing)?;
        let mut scan = Scan::default();
        for meta in listed {
            let seen = known.remove(&meta.key);
            let landed = seen.as_ref().is_some_and(|r| {
                r.operation == Operation::Created
                    && r.etag == meta.etag
                    && !matches!(r.state, ObjState::Claimed { .. })
            });
            if landed {
                scan.unchanged += 1;
                continue;
            }
            scan.changes.push(ObjectChange {
                event_time: meta.last_modified,
                size: Some(meta.size),
                etag: meta.etag.clone(),
                key: meta.key.clone(),
                event_name: "ObjectCreated:Put".into(),
                ..probe.clone()
            });
        }
        // Seen before, gone now: removed (unless already recorded as removed, or outside the
        // scanned prefixes). A removal whose claim never staged (a crash) is offered again.
        let mut gone: Vec<ObjRecord> = known
            .into_values()
            .filter(|r| {
                r.operation == Operation::Created || matches!(r.state, ObjState::Claimed { .. })
            })
            .filter(|r| {
                prefixes.is_empty() || prefixes.iter().any(|p| r.key.starts_with(p.as_str()))
            })
            .collect();
        gone.sort_by(|a, b| a.key.cmp(&b.key));
        for r in gone {
            scan.changes.push(ObjectChange {
                operation: Operation::Removed,
                key: r.key,
                event_time: Some(Utc::now()),
                event_name: "ObjectRemoved:Delete".into(),
                ..probe.clone()
            });
        }
        scan.changes.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(scan)
    }
}
