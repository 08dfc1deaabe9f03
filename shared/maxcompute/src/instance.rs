//! SQL jobs through the instances API: submit one SQL task, poll until the instance is
//! `Terminated`, then read the task's status and result.
//!
//! ```text
//! POST /projects/<p>/instances   <Instance><Job><Tasks><SQL>…<Query>CDATA</Query></SQL>…
//!   ← 201, Location: …/instances/<id>
//! GET  …/instances/<id>               <Instance><Status>Running|Suspended|Terminated</Status>
//! GET  …/instances/<id>?taskstatus    <Instance><Tasks><Task><Name/><Status>Success|Failed…</Status>
//! GET  …/instances/<id>?result        <Instance><Tasks><Task><Name/><Result>text or error</Result>
//! ```
//! A failed task's result text is the service's error (`ODPS-0130131:… Table not found`); it is
//! mapped to an error kind like a REST error code.

use std::time::Duration;

use floe_core::retry::RetryPolicy;
use floe_core::{Error, ErrorKind, Result};
use reqwest::Method;

use crate::client::MaxComputeClient;
use crate::http::encode;
use crate::xml::{self, Element};

/// The task name pyodps gives anonymous SQL tasks.
const TASK_NAME: &str = "AnonymousSQLTask";
/// Longest wait between two looks at a running instance (the first is `sql_poll_interval`,
/// doubled at each look).
const SQL_POLL_MAX: Duration = Duration::from_secs(5);

/// An instance's overall status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceStatus {
    /// Queued or running.
    Running,
    /// Suspended.
    Suspended,
    /// Finished (successfully or not: see the task status).
    Terminated,
}

/// One task's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskResult {
    /// Task name.
    pub name: String,
    /// Task status as the service spells it, upper-cased (`SUCCESS`, `FAILED`, `CANCELLED`…).
    pub status: String,
    /// The result text: CSV rows for a query, the error for a failure.
    pub result: String,
}

/// The outcome of [`MaxComputeClient::run_sql`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlOutput {
    /// The instance id.
    pub instance_id: String,
    /// The result text (CSV with a header line for a query; usually empty for DDL).
    pub result: String,
}

impl SqlOutput {
    /// The result's first data cell as an integer (for `SELECT COUNT(*)`).
    pub fn single_integer(&self) -> Result<i64> {
        let cell = self
            .result
            .lines()
            .nth(1)
            .and_then(|l| l.split(',').next())
            .map(|c| c.trim().trim_matches('"'))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Protocol,
                    format!("sql instance {} returned no rows", self.instance_id),
                )
            })?;
        cell.parse().map_err(|_| {
            Error::new(
                ErrorKind::Protocol,
                format!(
                    "sql instance {} returned `{cell}`, not an integer",
                    self.instance_id
                ),
            )
        })
    }
}

/// The job document for one SQL statement, with task settings as a JSON object.
pub(crate) fn job_xml(sql: &str, settings: &serde_json::Map<String, serde_json::Value>) -> String {
    let uuid = uuid::Uuid::new_v4().to_string();
    let mut all = serde_json::Map::new();
    all.insert("odps.sql.udf.strict.mode".into(), "true".into());
    all.extend(settings.clone());
    let settings = serde_json::Value::Object(all).to_string();
    format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<Instance><Job><Priority>9</Priority><Tasks><SQL>\
         <Name>{TASK_NAME}</Name><Config>\
         <Property><Name>uuid</Name><Value>{uuid}</Value></Property>\
         <Property><Name>settings</Name><Value>{}</Value></Property>\
         </Config><Query>{}</Query></SQL></Tasks><DAG><RunMode>Sequence</RunMode></DAG></Job></Instance>",
        xml::text(&settings),
        xml::cdata(sql)
    )
}

impl MaxComputeClient {
    fn instances_path(&self) -> String {
        format!("/projects/{}/instances", encode(&self.project))
    }

    /// Submit `sql` as one SQL task (with task `settings`, e.g. `odps.sql.allow.fullscan`);
    /// returns the instance id.
    pub async fn submit_sql(
        &self,
        sql: &str,
        settings: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<String> {
        let what = format!("sql job in maxcompute project {}", self.project);
        let req = self
            .request(Method::POST, self.instances_path())
            .header("Content-Type", "application/xml")
            .body(job_xml(sql, settings));
        let resp = self.http.send(&req, "submit", &what).await?;
        if !resp.is_success() {
            return Err(resp.error("submit", &what));
        }
        let location = resp.header("location").unwrap_or_default();
        let id = location
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or("");
        if id.is_empty() {
            return Err(Error::new(
                ErrorKind::Protocol,
                format!("maxcompute accepted a {what} but named no instance (no Location header)"),
            ));
        }
        Ok(id.to_owned())
    }

    async fn instance_get(&self, id: &str, action: Option<&str>) -> Result<Element> {
        let what = format!("sql instance {id} in maxcompute project {}", self.project);
        let mut req = self.request(
            Method::GET,
            format!("{}/{}", self.instances_path(), encode(id)),
        );
        if let Some(a) = action {
            req = req.query(a, "");
        }
        let resp = self.http.send(&req, "read", &what).await?;
        if !resp.is_success() {
            return Err(resp.error("read", &what));
        }
        Element::parse(resp.text()?)
    }

    /// The instance's status.
    pub async fn instance_status(&self, id: &str) -> Result<InstanceStatus> {
        let doc = self.instance_get(id, None).await?;
        let status = doc.child_text("Status").unwrap_or_default();
        match status.trim().to_ascii_lowercase().as_str() {
            "running" => Ok(InstanceStatus::Running),
            "suspended" => Ok(InstanceStatus::Suspended),
            "terminated" => Ok(InstanceStatus::Terminated),
            other => Err(Error::new(
                ErrorKind::Protocol,
                format!("sql instance {id} has unknown status `{other}`"),
            )),
        }
    }

    /// Every task's status and result text.
    pub async fn task_results(&self, id: &str) -> Result<Vec<TaskResult>> {
        let statuses = self.instance_get(id, Some("taskstatus")).await?;
        let results = self.instance_get(id, Some("result")).await?;
        let tasks = |doc: &Element| -> Vec<Element> {
            doc.child("Tasks")
                .map(|t| t.children_named("Task").cloned().collect())
                .unwrap_or_default()
        };
        let results = tasks(&results);
        Ok(tasks(&statuses)
            .into_iter()
            .map(|t| {
                let name = t.child_text("Name").unwrap_or_default();
                let result = results
                    .iter()
                    .find(|r| r.child_text("Name").as_deref() == Some(name.as_str()))
                    .and_then(|r| r.child("Result"))
                    .map(result_text)
                    .unwrap_or_default();
                TaskResult {
                    status: t
                        .child_text("Status")
                        .unwrap_or_default()
                        .trim()
                        .to_ascii_uppercase(),
                    name,
                    result,
                }
            })
            .collect())
    }

    /// Run `sql` and wait for it: submit, poll until terminated, then fail with the task's
    /// error unless every task succeeded.
    pub async fn run_sql(&self, sql: &str) -> Result<SqlOutput> {
        self.run_sql_with(sql, &serde_json::Map::new()).await
    }

    /// [`MaxComputeClient::run_sql`] with task settings.
    pub async fn run_sql_with(
        &self,
        sql: &str,
        settings: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<SqlOutput> {
        let id = self.submit_sql(sql, settings).await?;
        tracing::debug!(instance = %id, sql = %first_line(sql), "maxcompute sql submitted");
        self.wait_sql(&id, sql).await
    }

    /// Wait for submitted instance `id` (running `sql`, named in errors) to finish, then fail
    /// with its task's error unless every task succeeded. A caller that must not run a
    /// statement twice keeps the id of [`MaxComputeClient::submit_sql`] and, after a restart,
    /// waits here instead of submitting again.
    pub async fn wait_sql(&self, id: &str, sql: &str) -> Result<SqlOutput> {
        let id = id.to_owned();
        let started = tokio::time::Instant::now();
        let poll = RetryPolicy::new(self.sql_poll_interval, SQL_POLL_MAX);
        let mut delays = poll.delays();
        while self.instance_status(&id).await? != InstanceStatus::Terminated {
            if started.elapsed() > self.sql_timeout {
                return Err(Error::new(
                    ErrorKind::Deadline,
                    format!(
                        "sql instance {id} did not finish within {} s: {}",
                        self.sql_timeout.as_secs(),
                        first_line(sql)
                    ),
                ));
            }
            tokio::time::sleep(delays.next().unwrap_or(SQL_POLL_MAX)).await;
        }
        let tasks = self.task_results(&id).await?;
        if let Some(failed) = tasks.iter().find(|t| t.status != "SUCCESS") {
            return Err(task_error(&id, sql, failed));
        }
        Ok(SqlOutput {
            instance_id: id,
            result: tasks
                .into_iter()
                .map(|t| t.result)
                .collect::<Vec<_>>()
                .join("\n"),
        })
    }
}

fn result_text(r: &Element) -> String {
    if r.attribute("Transform") == Some("Base64") {
        use base64_decode::decode;
        decode(r.text.trim()).unwrap_or_else(|| r.text.clone())
    } else {
        r.text.clone()
    }
}

/// A tiny base64 decoder for the rare Base64-transformed result (no extra dependency).
mod base64_decode {
    pub(super) fn decode(s: &str) -> Option<String> {
        let val = |c: u8| -> Option<u32> {
            Some(match c {
                b'A'..=b'Z' => u32::from(c - b'A'),
                b'a'..=b'z' => u32::from(c - b'a') + 26,
                b'0'..=b'9' => u32::from(c - b'0') + 52,
                b'+' => 62,
                b'/' => 63,
                _ => return None,
            })
        };
        let bytes: Vec<u8> = s
            .bytes()
            .filter(|b| *b != b'=' && !b.is_ascii_whitespace())
            .collect();
        let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
        for chunk in bytes.chunks(4) {
            let mut acc = 0u32;
            for (i, &c) in chunk.iter().enumerate() {
                acc |= val(c)? << (18 - 6 * i);
            }
            let n = chunk.len().saturating_sub(1);
            for i in 0..n {
                out.push((acc >> (16 - 8 * i)) as u8);
            }
        }
        String::from_utf8(out).ok()
    }
}

fn first_line(sql: &str) -> String {
    let line = sql.trim().lines().next().unwrap_or("");
    line.chars().take(120).collect()
}

/// The error of a failed task: the kind follows the ODPS code in its text.
fn task_error(id: &str, sql: &str, task: &TaskResult) -> Error {
    let text = task.result.split_whitespace().collect::<Vec<_>>().join(" ");
    let code = text.split(':').next().unwrap_or("").trim();
    let lower = text.to_ascii_lowercase();
    let kind = if code == "ODPS-0130131"
        || lower.contains("not found")
        || lower.contains("does not exist")
    {
        ErrorKind::NotFound
    } else if code == "ODPS-0130013" || lower.contains("permission") {
        ErrorKind::Auth
    } else if lower.contains("already exist") {
        ErrorKind::Conflict
    } else {
        ErrorKind::InvalidInput
    };
    Error::new(
        kind,
        format!(
            "sql instance {id} {}: {}: {}",
            task.status.to_ascii_lowercase(),
            first_line(sql),
            text.chars().take(400).collect::<String>()
        ),
    )
    .with_retryable(false)
    .with_context("instance_id", id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_document_carries_query_and_settings() {
        let mut s = serde_json::Map::new();
        s.insert("odps.sql.allow.fullscan".into(), "true".into());
        let x = job_xml("SELECT 1 WHERE a < b;", &s);
        let doc = Element::parse(&x).unwrap();
        let sql = doc
            .child("Job")
            .unwrap()
            .child("Tasks")
            .unwrap()
            .child("SQL")
            .unwrap();
        assert_eq!(sql.child_text("Query").unwrap(), "SELECT 1 WHERE a < b;");
        let props: Vec<_> = sql
            .child("Config")
            .unwrap()
            .children_named("Property")
            .collect();
        let settings = props[1].child_text("Value").unwrap();
        assert!(
            settings.contains("\"odps.sql.allow.fullscan\":\"true\""),
            "{settings}"
        );
        assert_eq!(base64_decode::decode("aGVsbG8="), Some("hello".into()));
        let out = SqlOutput {
            instance_id: "i".into(),
            result: "\"_c0\"\n42\n".into(),
        };
        assert_eq!(out.single_integer().unwrap(), 42);
    }
}
