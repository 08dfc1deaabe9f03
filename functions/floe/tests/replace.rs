//! Objects that change replace their rows (`on-change = replace`, records mode's default),
//! through `floe run` on a local folder: one object overwritten three times (with more rows,
//! then fewer, then more again), another removed, a third left alone, on a partitioned table
//! and in batches of two objects, then `floe maintain` (compaction, expiry) and one more
//! version. After each step both pyiceberg and DuckDB read exactly the rows of the objects as
//! they are now; the same on format v3 tables, whose deletes are deletion vectors. A route set
//! to `on-change = "append"` keeps every version's rows, and a metadata route asking for current
//! state keeps one row per live object.

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

[checkpoint]
path = "checkpoint.db"

[dead-letter]
path = "dead-letter"

[ingest]
batch-objects = 2
batch-rows = 7

[[routes]]
name = "items"
prefix = "items/"
table = "demo.items"
partition-by = ["region"]

[[routes]]
name = "log"
prefix = "log/"
table = "demo.log"
on-change = "append"

[[routes]]
name = "listing"
prefix = "docs/"
mode = "metadata"
table = "demo.listing"
on-change = "replace"
"#;

/// Run `floe run` in `dir`, which must succeed.
fn floe_run(dir: &Path) {
    common::floe(dir, &["run", "--config", "floe.toml"], &[]).expect_code(0, "floe run");
}

/// Write `rows` rows of object `name` (version `v`) under `bucket/<folder>/`, spread over three
/// regions; each row says which object and version it came from. Sleeps first, so the file's
/// modification time (its version for a local folder) moves on.
fn put(dir: &Path, folder: &str, name: &str, v: u32, rows: u32) {
    std::thread::sleep(std::time::Duration::from_millis(20));
    let text: String = (0..rows)
        .map(|i| {
            let region = ["eu", "us", "ap"][(i % 3) as usize];
            format!("{{\"object\":\"{name}\",\"version\":{v},\"n\":{i},\"region\":\"{region}\"}}\n")
        })
        .collect();
    let folder = dir.join("bucket").join(folder);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join(format!("{name}.ndjson")), text).unwrap();
}

/// Rows per (object, version), as both readers see table `table`; they must agree.
fn read_back(dir: &Path, table: &str) -> BTreeMap<(String, i64), usize> {
    let root = dir.canonicalize().unwrap();
    let count = |rows: &serde_json::Value| {
        let mut out = BTreeMap::new();
        for r in rows.as_array().unwrap() {
            let key = (
                r["object"].as_str().unwrap().to_owned(),
                r["version"].as_i64().unwrap(),
            );
            *out.entry(key).or_insert(0) += 1;
        }
        out
    };
    let duck = floe_testbed::duckdb::read_sql_table(&root.join("catalog.db"), table, None);
    let py = floe_testbed::pyiceberg::read_sql_table(
        "floe",
        &root.join("catalog.db"),
        &root.join("warehouse"),
        table,
    );
    let (duck, py) = (count(&duck["rows"]), count(&py["rows"]));
    assert_eq!(duck, py, "DuckDB and pyiceberg disagree on {table}");
    duck
}

fn want(pairs: &[(&str, i64, usize)]) -> BTreeMap<(String, i64), usize> {
    pairs
        .iter()
        .map(|(o, v, n)| (((*o).to_owned(), *v), *n))
        .collect()
}

/// The kind of the delete files `table`'s current snapshot applies (`parquet` position
/// deletes, `puffin` deletion vectors), as pyiceberg plans them, and the table's format version.
fn delete_formats(dir: &Path, table: &str) -> (std::collections::BTreeSet<String>, i64) {
    let root = dir.canonicalize().unwrap();
    let read = floe_testbed::pyiceberg::read_sql_table(
        "floe",
        &root.join("catalog.db"),
        &root.join("warehouse"),
        table,
    );
    let formats = (read["deletes"].as_array().unwrap().iter())
        .map(|d| d["format"].as_str().unwrap().to_owned())
        .collect();
    (formats, read["format_version"].as_i64().unwrap())
}

#[test]
fn an_object_overwritten_three_times_and_another_removed_read_back_as_they_are_now() {
    replace_objects(CONFIG, 2, "parquet");
}

/// The same on format v3 tables (`tables.auto-create-props.format-version = "3"`), where the
/// rows are deleted by deletion vectors, at most one per data file: pyiceberg and DuckDB both
/// read them, before and after `floe maintain`, and `floe tables show` reads the table too.
#[test]
fn on_v3_tables_deletion_vectors_replace_the_rows_and_both_readers_read_them() {
    let config = CONFIG.replace(
        "[iceberg]\n",
        "[iceberg]\ntables.auto-create-props.format-version = \"3\"\n",
    );
    replace_objects(&config, 3, "puffin");
}

/// One object overwritten three times and another removed, then maintenance, orphan removal
/// and more versions, under `config`; the tables are format `version` and their position
/// deletes are files of `format`.
fn replace_objects(config: &str, version: i64, format: &str) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("bucket")).unwrap();
    std::fs::write(root.join("floe.toml"), config).unwrap();

    put(root, "items", "a", 1, 40);
    put(root, "items", "b", 1, 25);
    put(root, "items", "c", 1, 10);
    put(root, "log", "a", 1, 5);
    floe_run(root);
    assert_eq!(
        read_back(root, "demo.items"),
        want(&[("a", 1, 40), ("b", 1, 25), ("c", 1, 10)])
    );

    // a, second version: more rows. The old 40 go in the snapshot that adds the new 41.
    put(root, "items", "a", 2, 41);
    put(root, "log", "a", 2, 3);
    floe_run(root);
    assert_eq!(
        read_back(root, "demo.items"),
        want(&[("a", 2, 41), ("b", 1, 25), ("c", 1, 10)])
    );

    // a, third version (fewer rows), and b removed, in one run.
    put(root, "items", "a", 3, 4);
    std::fs::remove_file(root.join("bucket/items/b.ndjson")).unwrap();
    floe_run(root);
    assert_eq!(
        read_back(root, "demo.items"),
        want(&[("a", 3, 4), ("c", 1, 10)])
    );
    let (formats, at) = delete_formats(root, "demo.items");
    assert_eq!(at, version);
    assert_eq!(formats, [format.to_owned()].into(), "delete files");
    let show = "tables show demo.items --rows 100 --config floe.toml";
    let show: Vec<&str> = show.split(' ').collect();
    let shown = common::floe(root, &show, &[]).expect_code(0, "floe tables show");
    let rows = (shown.stdout.lines())
        .filter(|l| l.contains("| a ") || l.contains("| c "))
        .count();
    assert_eq!(rows, 14, "floe's own read: {}", shown.stdout);

    // a, fourth version, written after a new object that shares its batch and files.
    put(root, "items", "d", 1, 9);
    put(root, "items", "a", 4, 30);
    floe_run(root);
    assert_eq!(
        read_back(root, "demo.items"),
        want(&[("a", 4, 30), ("c", 1, 10), ("d", 1, 9)])
    );

    // Nothing changed: nothing is committed again.
    floe_run(root);
    assert_eq!(
        read_back(root, "demo.items"),
        want(&[("a", 4, 30), ("c", 1, 10), ("d", 1, 9)])
    );

    // `floe maintain`: the small files and their position deletes become one file per
    // partition, the old snapshots go; both readers still see the same rows, and a's next
    // version still replaces its rows (their record moved to the new files).
    let said = common::maintain_now(root);
    assert!(said.contains("demo.items:"), "{said}");
    assert_eq!(
        read_back(root, "demo.items"),
        want(&[("a", 4, 30), ("c", 1, 10), ("d", 1, 9)])
    );
    let root_c = root.canonicalize().unwrap();
    let read = floe_testbed::pyiceberg::read_sql_table(
        "floe",
        &root_c.join("catalog.db"),
        &root_c.join("warehouse"),
        "demo.items",
    );
    assert_eq!(read["snapshots"].as_array().unwrap().len(), 1, "{said}");
    put(root, "items", "a", 5, 2);
    floe_run(root);
    assert_eq!(
        read_back(root, "demo.items"),
        want(&[("a", 5, 2), ("c", 1, 10), ("d", 1, 9)])
    );

    // Orphan files: after compaction and expiry the old files are unreferenced. Too young an
    // age is refused; files older than the age go, the table's own stay, and both readers
    // still see the same rows.
    let refused = common::floe(
        root,
        &[
            "maintain",
            "--orphans-older-than-hours",
            "1",
            "--config",
            "floe.toml",
        ],
        &[],
    )
    .expect_code(2, "an age below a day");
    assert!(
        refused.stderr.contains("--orphans-older-than-hours"),
        "{}",
        refused.stderr
    );
    let table_dir = root.join("warehouse/demo/items");
    let stray = table_dir.join("data/00000-0-of-a-batch-that-died.parquet");
    std::fs::write(&stray, b"PAR1").unwrap();
    let files_before = age_files(&table_dir, 48);
    let fresh = table_dir.join("data/00000-0-still-being-written.parquet");
    std::fs::write(&fresh, b"PAR1").unwrap();
    let said = common::floe(
        root,
        &[
            "maintain",
            "--expire-older-than-hours",
            "0",
            "--orphans-older-than-hours",
            "24",
            "--config",
            "floe.toml",
        ],
        &[],
    )
    .expect_code(0, "floe maintain")
    .stdout;
    assert!(said.contains("orphan files removed"), "{said}");
    assert!(!stray.exists(), "{said}");
    assert!(fresh.exists(), "a file younger than the age stays");
    let files_after = age_files(&table_dir, 0);
    assert!(
        files_after < files_before - 1,
        "{files_before} -> {files_after}: {said}"
    );
    assert_eq!(
        read_back(root, "demo.items"),
        want(&[("a", 5, 2), ("c", 1, 10), ("d", 1, 9)])
    );
    std::fs::remove_file(&fresh).unwrap();
    put(root, "items", "c", 2, 3);
    floe_run(root);
    assert_eq!(
        read_back(root, "demo.items"),
        want(&[("a", 5, 2), ("c", 2, 3), ("d", 1, 9)])
    );

    // on-change = append: both versions' rows.
    assert_eq!(
        read_back(root, "demo.log"),
        want(&[("a", 1, 5), ("a", 2, 3)])
    );
}

#[test]
fn a_metadata_route_asking_for_current_state_keeps_one_row_per_live_object() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("bucket/docs")).unwrap();
    std::fs::write(root.join("floe.toml"), CONFIG).unwrap();
    let write = |name: &str, text: &str| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(root.join("bucket/docs").join(name), text).unwrap();
    };
    let keys = || {
        let root = root.canonicalize().unwrap();
        let read =
            floe_testbed::duckdb::read_sql_table(&root.join("catalog.db"), "demo.listing", None);
        let mut keys: Vec<(String, i64)> = (read["rows"].as_array().unwrap().iter())
            .map(|r| {
                (
                    r["key"].as_str().unwrap().to_owned(),
                    r["size"].as_i64().unwrap(),
                )
            })
            .collect();
        keys.sort();
        let py = floe_testbed::pyiceberg::read_sql_table(
            "floe",
            &root.join("catalog.db"),
            &root.join("warehouse"),
            "demo.listing",
        );
        assert_eq!(py["count"], keys.len(), "pyiceberg disagrees");
        keys
    };
    write("x.txt", "one");
    write("y.txt", "two!");
    write("z.txt", "three");
    floe_run(root);
    assert_eq!(
        keys(),
        [
            ("docs/x.txt".to_owned(), 3),
            ("docs/y.txt".to_owned(), 4),
            ("docs/z.txt".to_owned(), 5)
        ]
    );
    write("x.txt", "one, longer");
    std::fs::remove_file(root.join("bucket/docs/y.txt")).unwrap();
    floe_run(root);
    assert_eq!(
        keys(),
        [("docs/x.txt".to_owned(), 11), ("docs/z.txt".to_owned(), 5)]
    );
}

/// Set back the modification time of every file under `dir` by `hours`; returns how many.
fn age_files(dir: &Path, hours: u64) -> usize {
    let mut n = 0;
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let f = std::fs::File::options().write(true).open(&path).unwrap();
            let at = std::time::SystemTime::now() - std::time::Duration::from_secs(hours * 3600);
            f.set_modified(at).unwrap();
            n += 1;
        }
    }
    n
}

/// A replacing route whose table commits to a branch (Kafka Connect's
/// `iceberg.tables.default-commit-branch`): an overwritten object's old rows are deleted on the
/// branch, a removed object's rows go, `floe maintain` compacts the branch (where floe's
/// records of each object's rows point) and expires its history, and a version after that
/// still replaces its rows. `main` is never touched. pyiceberg reads the branch at its head;
/// DuckDB's iceberg extension reads `main` only, so it is not asked.
#[test]
fn a_replacing_route_on_a_branch_keeps_the_branch_current_and_main_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let config = CONFIG.replace(
        "catalog.warehouse = \"warehouse\"\n",
        "catalog.warehouse = \"warehouse\"\ntables.default-commit-branch = \"audit\"\n",
    );
    std::fs::write(dir.path().join("floe.toml"), config).unwrap();
    let branch = |dir: &Path| {
        let t = common::read(dir, "demo.items");
        assert_eq!(t["count"], 0, "main has nothing: {t}");
        let mut out = BTreeMap::new();
        for r in t["branches"]["audit"]["rows"].as_array().unwrap() {
            let key = (
                r["object"].as_str().unwrap().to_owned(),
                r["version"].as_i64().unwrap(),
            );
            *out.entry(key).or_insert(0) += 1;
        }
        (out, t)
    };
    put(dir.path(), "items", "a", 1, 5);
    put(dir.path(), "items", "b", 1, 3);
    floe_run(dir.path());
    put(dir.path(), "items", "a", 2, 2);
    std::fs::remove_file(dir.path().join("bucket/items/b.ndjson")).unwrap();
    floe_run(dir.path());
    let (rows, _) = branch(dir.path());
    assert_eq!(rows, want(&[("a", 2, 2)]));

    let out = common::maintain_now(dir.path());
    assert!(out.contains("demo.items"), "{out}");
    let (rows, t) = branch(dir.path());
    assert_eq!(rows, want(&[("a", 2, 2)]), "compaction keeps the rows");
    assert!(t["refs"].get("main").is_none(), "{t}");
    let head = t["refs"]["audit"].as_i64().unwrap();
    let snapshots = t["snapshots"].as_array().unwrap();
    let newest = snapshots.iter().find(|s| s["id"] == head).unwrap();
    assert_eq!(
        newest["operation"], "replace",
        "compacted on the branch: {t}"
    );
    assert_eq!(snapshots.len(), 1, "the branch's history expired: {t}");

    put(dir.path(), "items", "a", 3, 4);
    floe_run(dir.path());
    let (rows, t) = branch(dir.path());
    assert_eq!(rows, want(&[("a", 3, 4)]), "{t}");
    common::assert_commit_ids_unique(&t);
}
