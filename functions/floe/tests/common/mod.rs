//! Helpers of the cloud end-to-end tests: running the `floe` binary, and reading what landed
//! with pyiceberg.

#![allow(dead_code)] // each test file uses some of them

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// What one `floe` invocation did.
#[derive(Debug)]
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// Panic with the output unless the exit status is `code`.
    pub fn expect_code(self, code: i32, what: &str) -> Self {
        assert_eq!(
            self.code, code,
            "{what}: exit {}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        );
        self
    }
}

/// Run `floe args…` in `dir` with `env` (a blocking call: async tests go through
/// [`floe_async`] so the emulators in their runtime keep answering).
pub fn floe(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_floe"));
    cmd.current_dir(dir).args(args).env_remove("FLOE_FAULT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run floe");
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `floe maintain --expire-older-than-hours 0` on `floe.toml` in `dir`, which must succeed;
/// its stdout.
pub fn maintain_now(dir: &Path) -> String {
    floe(
        dir,
        &[
            "maintain",
            "--expire-older-than-hours",
            "0",
            "--config",
            "floe.toml",
        ],
        &[],
    )
    .expect_code(0, "floe maintain")
    .stdout
}

/// [`floe`] on a blocking thread.
pub async fn floe_async(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let dir = dir.to_owned();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        floe(&dir, &args, &env)
    })
    .await
    .expect("floe thread")
}

/// Read a table of the SQL catalog `catalog.db` / `warehouse` in `dir` (catalog name `floe`).
pub fn read(dir: &Path, table: &str) -> Value {
    let root = dir.canonicalize().unwrap();
    floe_testbed::pyiceberg::read_sql_table(
        "floe",
        &root.join("catalog.db"),
        &root.join("warehouse"),
        table,
    )
}

/// [`read`] on a blocking thread.
pub async fn read_async(dir: &Path, table: &str) -> Value {
    let dir = dir.to_owned();
    let table = table.to_owned();
    tokio::task::spawn_blocking(move || read(&dir, &table))
        .await
        .expect("pyiceberg thread")
}

/// [`read_async`], `None` while the table does not exist.
pub async fn try_read_async(dir: &Path, table: &str) -> Option<Value> {
    let root = dir.canonicalize().unwrap();
    let table = table.to_owned();
    tokio::task::spawn_blocking(move || {
        floe_testbed::pyiceberg::try_read_sql_table(
            "floe",
            &root.join("catalog.db"),
            &root.join("warehouse"),
            &table,
        )
        .ok()
    })
    .await
    .expect("pyiceberg thread")
}

/// How many rows each value of `column` has.
pub fn counts(table: &Value, column: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in table["rows"].as_array().expect("rows") {
        let v = match &r[column] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        *out.entry(v).or_insert(0) += 1;
    }
    out
}

/// Every snapshot carries a distinct floe commit id.
pub fn assert_commit_ids_unique(table: &Value) {
    let mut ids: Vec<&str> = table["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s["summary"]["floe.commit-id"]
                .as_str()
                .expect("snapshot without floe.commit-id")
        })
        .collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "a commit id appears twice");
}

/// Dead letters written under `dir/dead-letter`.
pub fn dead_letters(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    let Ok(days) = std::fs::read_dir(dir.join("dead-letter")) else {
        return out;
    };
    for day in days {
        for f in std::fs::read_dir(day.unwrap().path()).unwrap() {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
            out.extend(
                text.lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap()),
            );
        }
    }
    out
}
