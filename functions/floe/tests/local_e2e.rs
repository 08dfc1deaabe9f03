//! `floe run` end to end on the local folder source, checked with pyiceberg: typed values,
//! nulls, partition layout, commit ids, dead letters, replays, and a crash at every step of the
//! exactly-once protocol.

use std::path::{Path, PathBuf};
use std::process::Command;

use floe_testbed::pyiceberg::{read_sql_table, read_sql_tables};
use serde_json::Value;

const CONFIG: &str = r#"
[source]
type = "local"
folder = "bucket"
bucket = "fixtures"

[iceberg]
catalog.type = "sql"
catalog.uri = "catalog.db"
catalog.warehouse = "warehouse"

[checkpoint]
path = "checkpoint.db"

[dead-letter]
path = "dead-letter"

[[routes]]
name = "events"
prefix = "events/"
table = "test.events"
schema = "events.schema.json"
partition-by = ["day(ts)"]

[[routes]]
name = "orders"
prefix = "csv/"
table = "test.orders"

[[routes]]
name = "misc"
table = "test.objects"
mode = "metadata"
"#;

const EVENTS_SCHEMA: &str = r#"{"iceberg":{"schema":{"fields":[
  {"name":"id","type":"long","required":true},
  {"name":"ts","type":"timestamptz","required":true},
  {"name":"level","type":"string"},
  {"name":"amount","type":"double"},
  {"name":"user","type":"struct<id:long,name:string>"}
]}}}"#;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/local-bucket")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A fresh working folder with the fixture bucket and the configuration.
fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixtures(), &dir.path().join("bucket"));
    std::fs::write(dir.path().join("floe.toml"), CONFIG).unwrap();
    std::fs::write(dir.path().join("events.schema.json"), EVENTS_SCHEMA).unwrap();
    dir
}

/// Run `floe run`; returns (exit code, stdout).
fn floe(dir: &Path, fault: Option<&str>) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_floe"));
    cmd.arg("run").arg("--config").arg(dir.join("floe.toml"));
    match fault {
        Some(f) => cmd.env("FLOE_FAULT", f),
        None => cmd.env_remove("FLOE_FAULT"),
    };
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let code = out.status.code().unwrap_or(-1);
    if fault.is_none() {
        assert_eq!(
            code,
            0,
            "floe run failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (code, stdout)
}

fn read(dir: &Path, table: &str) -> Value {
    let root = dir.canonicalize().unwrap();
    read_sql_table(
        "floe",
        &root.join("catalog.db"),
        &root.join("warehouse"),
        table,
    )
}

fn rows(t: &Value) -> &Vec<Value> {
    t["rows"].as_array().unwrap()
}

fn dead_letters(dir: &Path) -> Vec<Value> {
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

/// Every table holds exactly the expected rows, once each, with one commit id per snapshot.
fn assert_exactly_once(dir: &Path, context: &str) {
    let root = dir.canonicalize().unwrap();
    let mut tables = read_sql_tables(
        "floe",
        &root.join("catalog.db"),
        &root.join("warehouse"),
        &["test.events", "test.orders", "test.objects"],
    );
    let events = tables.remove("test.events").unwrap();
    assert_eq!(events["count"], 80, "{context}: events");
    let mut ids: Vec<i64> = rows(&events)
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 80, "{context}: event ids unique");
    let orders = tables.remove("test.orders").unwrap();
    assert_eq!(orders["count"], 6, "{context}: orders");
    let objects = tables.remove("test.objects").unwrap();
    assert_eq!(objects["count"], 2, "{context}: objects");
    for t in [&events, &orders, &objects] {
        let ids: Vec<&str> = t["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                s["summary"]["floe.commit-id"]
                    .as_str()
                    .expect("snapshot without floe.commit-id")
            })
            .collect();
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(
            ids.len(),
            unique.len(),
            "{context}: a commit id appears twice"
        );
    }
}

#[test]
fn lands_typed_rows_partitions_and_dead_letters_then_replays_as_no_op() {
    let dir = setup();
    let (_, out) = floe(dir.path(), None);
    assert!(out.contains("landed: 7 objects"), "{out}");

    // Events: declared schema, day partitions, longs, timestamps, nulls, structs.
    let events = read(dir.path(), "test.events");
    assert_eq!(events["count"], 80);
    let by_id = |id: i64| {
        rows(&events)
            .iter()
            .find(|r| r["id"] == id)
            .cloned()
            .unwrap()
    };
    let first = by_id(1_000_000_000_001);
    assert_eq!(first["ts"], "2025-01-15T01:01:01.001000+00:00");
    assert_eq!(first["level"], "warn");
    assert_eq!(first["amount"], 1.25);
    assert_eq!(first["user"]["name"], "u1");
    let fifth = by_id(1_000_000_000_020);
    assert_eq!(fifth["level"], Value::Null);
    assert_eq!(fifth["amount"], Value::Null);
    let nulls = rows(&events)
        .iter()
        .filter(|r| r["level"].is_null())
        .count();
    assert_eq!(nulls, 16);
    let from_gzip = by_id(1_000_000_000_050);
    assert_eq!(from_gzip["ts"], "2025-01-16T02:50:50.050000+00:00");
    assert!(
        events["spec"].as_str().unwrap().contains("day"),
        "{}",
        events["spec"]
    );
    let mut days: Vec<String> = events["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let p = f["path"].as_str().unwrap();
            p.split('/')
                .find(|s| s.starts_with("ts_day="))
                .unwrap()
                .to_owned()
        })
        .collect();
    days.sort();
    days.dedup();
    assert_eq!(
        days,
        [
            "ts_day=2025-01-15",
            "ts_day=2025-01-16",
            "ts_day=2025-01-17"
        ]
    );
    let snaps = events["snapshots"].as_array().unwrap();
    assert_eq!(snaps.len(), 1);
    let commit_id = snaps[0]["summary"]["floe.commit-id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(commit_id.len(), 36, "a uuid: {commit_id}");
    assert!(
        snaps[0]["summary"]["floe.checkpoint"]
            .as_str()
            .unwrap()
            .contains("batches")
    );

    // Orders: schema inferred from the Parquet object (first in key order), CSV cast to it.
    let orders = read(dir.path(), "test.orders");
    assert_eq!(orders["count"], 6);
    let carol = rows(&orders)
        .iter()
        .find(|r| r["customer"] == "carol")
        .unwrap();
    assert_eq!(carol["amount"], Value::Null);
    assert_eq!(carol["placed_at"], "2025-01-15T10:00:00+00:00");
    assert!(
        rows(&orders)
            .iter()
            .any(|r| r["customer"] == "bob, the builder")
    );

    // Metadata rows for everything else, keys as they are.
    let objects = read(dir.path(), "test.objects");
    let keys: Vec<&str> = rows(&objects)
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert!(
        keys.contains(&"misc/deep/er/data with spaces+plus.bin"),
        "{keys:?}"
    );
    let bin = rows(&objects)
        .iter()
        .find(|r| r["fileName"] == "data with spaces+plus.bin")
        .unwrap();
    assert_eq!(bin["size"], 256);
    assert_eq!(bin["bucket"], "fixtures");
    assert_eq!(bin["operation"], "created");

    // Dead letters: three bad event lines and one bad order, with line numbers and reasons.
    let mut dl = dead_letters(dir.path());
    dl.sort_by_key(|d| (d["key"].as_str().unwrap().to_owned(), d["line"].as_u64()));
    let got: Vec<(String, u64)> = dl
        .iter()
        .map(|d| {
            (
                d["key"].as_str().unwrap().to_owned(),
                d["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("csv/orders.csv".into(), 5),
            ("events/2025-01-15/part-0001.ndjson".into(), 11),
            ("events/2025-01-15/part-0001.ndjson".into(), 21),
            ("events/2025-01-15/part-0001.ndjson".into(), 31),
        ]
    );
    assert!(
        dl[0]["reason"].as_str().unwrap().contains("amount"),
        "{}",
        dl[0]
    );
    assert!(
        dl[3]["reason"]
            .as_str()
            .unwrap()
            .contains("required field `id`"),
        "{}",
        dl[3]
    );
    assert_exactly_once(dir.path(), "first run");

    // The same input again: nothing changes.
    let (_, out) = floe(dir.path(), None);
    assert!(out.contains("nothing changed (7 unchanged)"), "{out}");
    assert_exactly_once(dir.path(), "second run");
    assert_eq!(
        read(dir.path(), "test.events")["snapshots"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(dead_letters(dir.path()).len(), 4);

    // A changed file's new version replaces its rows (10 rows become 1: records mode's
    // on-change = replace); a removed one becomes a metadata row (metadata mode appends).
    let bucket = dir.path().join("bucket");
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(
        bucket.join("events/2025-01-17/batch.json"),
        r#"[{"id": 5, "ts": "2025-01-17T00:00:00Z"}]"#,
    )
    .unwrap();
    std::fs::remove_file(bucket.join("misc/readme.txt")).unwrap();
    let (_, out) = floe(dir.path(), None);
    assert!(out.contains("scanned: 2 changed"), "{out}");
    let events = read(dir.path(), "test.events");
    assert_eq!(events["count"], 71);
    let from_the_new_version: Vec<&Value> = rows(&events)
        .iter()
        .filter(|r| {
            r["ts"]
                .as_str()
                .is_some_and(|t| t.starts_with("2025-01-17"))
        })
        .collect();
    assert_eq!(from_the_new_version.len(), 1, "{from_the_new_version:?}");
    assert_eq!(events["snapshots"].as_array().unwrap().len(), 2);
    let objects = read(dir.path(), "test.objects");
    let removed: Vec<&Value> = rows(&objects)
        .iter()
        .filter(|r| r["operation"] == "removed")
        .collect();
    assert_eq!(removed.len(), 1);
    assert_eq!(removed[0]["key"], "misc/readme.txt");
}

#[test]
fn a_crash_at_every_protocol_step_then_a_rerun_lands_every_row_once() {
    let points = [
        "ingest.after-batch-open",
        "ingest.after-claim",
        "ingest.after-write",
        "ingest.after-dead-letter",
        "ingest.after-stage",
        "ingest.after-mark",
        "commit.after-lease",
        "commit.after-record",
        "commit.after-append",
        "commit.after-done",
        "commit.after-batches",
        // Crashes while committing the second and third tables of the pass.
        "commit.after-append@2",
        "commit.after-record@3",
    ];
    for point in points {
        let dir = setup();
        let (code, out) = floe(dir.path(), Some(point));
        assert_eq!(code, 86, "{point}: the fault did not fire:\n{out}");
        let (_, out) = floe(dir.path(), None);
        assert_exactly_once(dir.path(), point);
        // A third run changes nothing.
        let (_, again) = floe(dir.path(), None);
        assert!(
            again.contains("nothing changed") || again.contains("landed: 0 objects"),
            "{point}: {again}"
        );
        assert_exactly_once(dir.path(), &format!("{point}, third run"));
        drop(out);
    }
}
