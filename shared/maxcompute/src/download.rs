//! Download sessions, used for one thing: how many records a table (or partition) holds.
//!
//! `POST /projects/<p>/tables/<t>?downloads[&partition=…]` opens a session whose answer carries
//! `DownloadID`, `Status` and `RecordCount`; a session still `INITIATING` is asked again with
//! `GET …?downloadid=<id>` until it is `NORMAL`. No data is read. The committer asks it around
//! an upload session whose fate is unknown (see [`crate::session`]).

use std::time::Duration;

use floe_core::{ErrorKind, Result};
use reqwest::Method;
use serde_json::Value as Json;

use crate::meta::TableId;
use crate::partition::PartitionSpec;
use crate::tunnel::{TableTunnel, protocol};

/// How many times an initiating session is asked again before giving up.
const INITIATING_POLLS: u32 = 30;

impl TableTunnel {
    /// The number of records in `table` (in `partition`, when given), as a download session
    /// reports it; a partition that does not exist holds none.
    pub async fn record_count(
        &self,
        table: &TableId,
        partition: Option<&PartitionSpec>,
    ) -> Result<u64> {
        match self.count_records(table, partition).await {
            Err(e) if partition.is_some() && e.kind() == ErrorKind::NotFound => Ok(0),
            counted => counted,
        }
    }

    async fn count_records(
        &self,
        table: &TableId,
        partition: Option<&PartitionSpec>,
    ) -> Result<u64> {
        let what = format!(
            "download session on maxcompute table {table}{}",
            partition.map(|p| format!(" ({p})")).unwrap_or_default()
        );
        let req = self
            .request(Method::POST, table.resource(), partition)
            .query("downloads", "")
            .header("Content-Length", "0");
        let resp = self.http.send(&req, "create", &what).await?;
        if !resp.is_success() {
            return Err(resp.error("create", &what));
        }
        let mut doc = parse(resp.text()?, &what)?;
        let mut pause = Duration::from_millis(100);
        for _ in 0..INITIATING_POLLS {
            if status(&doc) != "INITIATING" {
                break;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
            let id = doc
                .get("DownloadID")
                .and_then(Json::as_str)
                .ok_or_else(|| protocol(&what, "session has no DownloadID"))?
                .to_owned();
            let req = self
                .request(Method::GET, table.resource(), partition)
                .query("downloadid", id);
            let resp = self.http.send(&req, "reload", &what).await?;
            if !resp.is_success() {
                return Err(resp.error("reload", &what));
            }
            doc = parse(resp.text()?, &what)?;
        }
        match status(&doc).as_str() {
            "NORMAL" => {}
            other => return Err(protocol(&what, format!("session is {other}, not NORMAL"))),
        }
        doc.get("RecordCount")
            .and_then(|c| {
                c.as_u64()
                    .or_else(|| c.as_str().and_then(|s| s.parse().ok()))
            })
            .ok_or_else(|| protocol(&what, "session has no RecordCount"))
    }
}

fn parse(body: &str, what: &str) -> Result<Json> {
    serde_json::from_str(body)
        .map_err(|e| protocol(what, "session is not valid json").with_source(e))
}

fn status(doc: &Json) -> String {
    doc.get("Status")
        .and_then(Json::as_str)
        .unwrap_or("")
        .to_ascii_uppercase()
}
