//! Upserts and deletes by key into Iceberg, as the Kafka Connect sink configures them
//! (`iceberg.tables.cdc-field`, `iceberg.tables.default-id-columns`,
//! `iceberg.tables.upsert-mode-enabled`), through `floe run` on a local folder: 10,000 keys
//! inserted, then 30% updated and 5% deleted, some keys changed twice within one object, and
//! one key changed by two batches of one commit. The current rows are read back with DuckDB; pyiceberg 0.12
//! does not read equality deletes, and the test checks that it says so. After `floe maintain`
//! (files rewritten with every delete applied) both readers read the same rows. The same runs on
//! a format v3 table, whose position deletes are deletion vectors.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

const CONFIG: &str = r#"
[source]
type = "local"
folder = "bucket"

[iceberg]
catalog.type = "sql"
catalog.uri = "catalog.db"
catalog.warehouse = "warehouse"
tables.cdc-field = "op"
tables.default-id-columns = "id"

[checkpoint]
path = "checkpoint.db"

[dead-letter]
path = "dead-letter"

[ingest]
batch-objects = 2

[[routes]]
name = "users"
prefix = "cdc/"
table = "demo.users"
"#;

/// Run `floe run` in `dir`, which must succeed.
fn floe_run(dir: &Path) {
    common::floe(dir, &["run", "--config", "floe.toml"], &[]).expect_code(0, "floe run");
}

/// One NDJSON line.
fn line(op: &str, id: u64, value: &str) -> String {
    format!("{{\"op\":\"{op}\",\"id\":{id},\"value\":\"{value}\"}}\n")
}

/// Apply `lines` (in order) to `state`, as the table must: a delete removes the key, anything
/// else sets it.
fn apply(state: &mut BTreeMap<u64, String>, lines: &[(String, u64, String)]) {
    for (op, id, value) in lines {
        if op == "D" {
            state.remove(id);
        } else {
            state.insert(*id, value.clone());
        }
    }
}

/// Write `lines` as the object `bucket/cdc/<name>`.
fn put(dir: &Path, name: &str, lines: &[(String, u64, String)]) {
    let text: String = lines.iter().map(|(o, i, v)| line(o, *i, v)).collect();
    std::fs::write(dir.join("bucket/cdc").join(name), text).unwrap();
}

/// The current rows as DuckDB reads them, and the same check of pyiceberg.
fn read_back(dir: &Path) -> BTreeMap<u64, String> {
    let root = dir.canonicalize().unwrap();
    let read = floe_testbed::duckdb::read_sql_table(&root.join("catalog.db"), "demo.users", None);
    by_key(&read, "DuckDB")
}

/// The rows a reader (`who`) read, by key; a key seen twice fails.
fn by_key(read: &serde_json::Value, who: &str) -> BTreeMap<u64, String> {
    let mut rows = BTreeMap::new();
    for r in read["rows"].as_array().unwrap() {
        let id = r["id"].as_u64().unwrap();
        let value = r["value"].as_str().unwrap().to_owned();
        assert!(rows.insert(id, value).is_none(), "key {id} twice for {who}");
    }
    rows
}

#[test]
fn ten_thousand_keys_upserted_and_deleted_read_back_as_the_latest_rows() {
    upsert_keys(CONFIG, "parquet");
}

/// The same on a format v3 table: the position deletes of the keys object 0 changes twice
/// are deletion vectors (the equality deletes stay as they are); DuckDB reads both, and after
/// `floe maintain` (which applies both) pyiceberg reads the table.
#[test]
fn on_a_v3_table_keys_changed_twice_in_a_batch_are_deleted_by_deletion_vectors() {
    let config = CONFIG.replace(
        "[iceberg]\n",
        "[iceberg]\ntables.auto-create-props.format-version = \"3\"\n",
    );
    upsert_keys(&config, "puffin");
}

/// Rounds of inserts, updates and deletes under `config`; see the module doc. The position
/// deletes of the keys changed twice in one object are files named `*.<deletes>`.
fn upsert_keys(config: &str, deletes: &str) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("bucket/cdc")).unwrap();
    std::fs::write(root.join("floe.toml"), config).unwrap();
    let mut want = BTreeMap::new();

    // Round 1: 10,000 inserts in five objects.
    for part in 0..5u64 {
        let lines: Vec<(String, u64, String)> = (part * 2000..(part + 1) * 2000)
            .map(|id| ("I".to_owned(), id, format!("v1-{id}")))
            .collect();
        apply(&mut want, &lines);
        put(root, &format!("r1-{part}.ndjson"), &lines);
    }
    floe_run(root);
    assert_eq!(read_back(root), want, "after the inserts");

    // Round 2: 30% updated (ids ending in 0, 1, 2), 5% deleted (ids ending in 19 mod 20),
    // in four objects (two batches of one commit). Object 0 also updates some of its keys a
    // second time, and inserts then deletes a new key.
    let mut objects: Vec<Vec<(String, u64, String)>> = vec![Vec::new(); 4];
    for id in 0..10_000u64 {
        let o = (id % 4) as usize;
        if id % 10 < 3 {
            objects[o].push(("U".to_owned(), id, format!("v2-{id}")));
        } else if id % 20 == 19 {
            objects[o].push(("D".to_owned(), id, String::new()));
        }
    }
    for id in (0..10_000u64).step_by(40) {
        objects[0].push(("U".to_owned(), id, format!("v3-{id}")));
    }
    objects[0].push(("I".to_owned(), 20_000, "born".to_owned()));
    objects[0].push(("D".to_owned(), 20_000, String::new()));
    for (i, lines) in objects.iter().enumerate() {
        apply(&mut want, lines);
        put(root, &format!("r2-{i}.ndjson"), lines);
    }
    floe_run(root);
    assert_eq!(want.len(), 9_500);
    let got = read_back(root);
    let wrong: Vec<_> = (want.iter())
        .filter(|(k, v)| got.get(k) != Some(v))
        .take(5)
        .collect();
    assert!(
        wrong.is_empty(),
        "{} rows, first wrong: {wrong:?}",
        got.len()
    );
    assert_eq!(got, want, "after the updates and deletes");
    let data = root.join("warehouse/demo/users/data");
    let positions = (std::fs::read_dir(&data).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("floe-d") && n.ends_with(&format!(".{deletes}")))
        .count();
    assert!(positions > 0, "no position deletes in {}", data.display());

    // Round 3: four objects, two batches of one commit, both updating key 7 (and each its
    // own keys). Objects carry no order between them, so either update may win, but only one:
    // the batches' equality deletes must reach each other's rows.
    for i in 0..4u64 {
        let mut lines = vec![("U".to_owned(), 7, format!("r3-{i}"))];
        lines.push(("U".to_owned(), 100 + i * 40, format!("r3-{i}")));
        put(root, &format!("r3-{i}.ndjson"), &lines);
        apply(&mut want, &lines[1..]);
    }
    floe_run(root);
    let mut got = read_back(root);
    let seven = got.remove(&7).expect("key 7 is in the table");
    assert!(seven.starts_with("r3-"), "{seven}");
    want.remove(&7);
    assert_eq!(got, want, "after two batches changed one key in one commit");

    let refused = floe_testbed::pyiceberg::try_read_sql_table(
        "floe",
        &dir.path().canonicalize().unwrap().join("catalog.db"),
        &dir.path().canonicalize().unwrap().join("warehouse"),
        "demo.users",
    );
    let err = refused.expect_err("pyiceberg 0.12 does not read equality deletes");
    assert!(err.to_string().to_lowercase().contains("equality"), "{err}");

    // `floe maintain` rewrites the files with every delete applied and drops the delete files:
    // the same rows, and now pyiceberg reads them too.
    let said = common::maintain_now(root);
    assert!(!said.contains("equality delete files"), "{said}");
    let mut got = read_back(root);
    assert_eq!(got.remove(&7), Some(seven.clone()), "{said}");
    assert_eq!(got, want, "after maintenance: {said}");
    let py = floe_testbed::pyiceberg::read_sql_table(
        "floe",
        &dir.path().canonicalize().unwrap().join("catalog.db"),
        &dir.path().canonicalize().unwrap().join("warehouse"),
        "demo.users",
    );
    let mut by_py = by_key(&py, "pyiceberg");
    assert_eq!(by_py.remove(&7), Some(seven), "pyiceberg: key 7");
    assert_eq!(by_py, want, "pyiceberg after maintenance");

    // Changes after maintenance still reach the rewritten rows.
    let lines = vec![
        ("U".to_owned(), 1, "v4-1".to_owned()),
        ("D".to_owned(), 2, String::new()),
    ];
    apply(&mut want, &lines);
    put(root, "r4-0.ndjson", &lines);
    floe_run(root);
    let mut got = read_back(root);
    got.remove(&7);
    assert_eq!(got, want, "after a change on top of the compacted files");
}
