//! Every crash point of the protocol (see [`crate::protocol`]), in-process: a pipeline halts at
//! the point (its future is dropped there, nothing after it runs), another pipeline on the same
//! SQLite checkpoint table and the same in-memory Iceberg catalog recovers, and every row is in
//! the table exactly once; the MaxCompute session points run against the MaxCompute emulator.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::Int64Array;
use floe_iceberg::FloeCatalog;
use futures::TryStreamExt;
use iceberg::TableIdent;

use crate::config::{FloeConfig, parse};
use crate::fault::Faults;
use crate::passes::RunReport;
use crate::pipeline::Pipeline;
use crate::protocol::Outcome;

pub(crate) const CONFIG: &str = r#"
[source]
folder = "bucket"
bucket = "b"

[checkpoint]
path = "checkpoint.db"

[dead-letter]
path = "dead-letter"

[ingest]
batch-objects = 2

[[routes]]
table = "t.events"
suffix = ".ndjson"
"#;

/// How long the crashed instance's claims last (set below the options' minimum: the recovering
/// pipeline waits them out).
const TIMEOUT_MS: u64 = 40;

/// How long a commit lease lasts: longer than the steps of a commit take on a loaded machine
/// (a committer renews its lease before it touches a target and stops when the lease ran out,
/// and a checkpoint write that waits for SQLite's lock eats into the lease it writes).
const LEASE_MS: u64 = 2000;

/// Three objects of three rows each (ids 1..=9), one with a bad line (dead-lettered).
pub(crate) fn write_bucket(dir: &Path) {
    let bucket = dir.join("bucket");
    std::fs::create_dir_all(&bucket).unwrap();
    for (name, first) in [("a.ndjson", 1), ("b.ndjson", 4), ("c.ndjson", 7)] {
        let mut text: String = (first..first + 3)
            .map(|id| format!("{{\"id\":{id},\"v\":\"x{id}\"}}\n"))
            .collect();
        if name == "b.ndjson" {
            text.push_str("{not json\n");
        }
        std::fs::write(bucket.join(name), text).unwrap();
    }
}

/// Add `line` to the end of object `name` of the bucket in `dir`.
fn append_line(dir: &Path, name: &str, line: &str) {
    let path = dir.join("bucket").join(name);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(line);
    text.push('\n');
    std::fs::write(&path, text).unwrap();
}

/// The embedded SQL catalog in `dir` (`catalog.db`, `warehouse/`), as floe opens it.
pub(crate) async fn local_catalog(dir: &Path) -> Arc<dyn FloeCatalog> {
    let props = HashMap::from([
        ("uri".to_owned(), "catalog.db".to_owned()),
        ("warehouse".to_owned(), "warehouse".to_owned()),
    ]);
    let config = floe_iceberg::CatalogConfig::from_props("floe", props, dir).unwrap();
    floe_iceberg::open_catalog(&config).await.unwrap()
}

async fn pipeline(dir: &Path, catalog: &Arc<dyn FloeCatalog>, faults: Faults) -> Pipeline {
    pipeline_of(CONFIG, dir, catalog, faults).await
}

async fn pipeline_of(
    text: &str,
    dir: &Path,
    catalog: &Arc<dyn FloeCatalog>,
    faults: Faults,
) -> Pipeline {
    let raw = parse(text, false).unwrap();
    let mut config = FloeConfig::from_raw(raw, dir).unwrap();
    config.ingest.claim_timeout_ms = TIMEOUT_MS;
    config.commit.lease_ms = LEASE_MS;
    Pipeline::builder(config)
        .catalog(catalog.clone())
        .faults(faults)
        .build()
        .await
        .unwrap()
}

/// The ids in `t.events`, sorted.
pub(crate) async fn ids(catalog: &Arc<dyn FloeCatalog>) -> Vec<i64> {
    ids_of(catalog, &TableIdent::from_strs(["t", "events"]).unwrap()).await
}

/// The ids in `ident`, sorted: read by iceberg-rust, or on a format v3 table by floe (whose
/// read applies deletion vectors, which iceberg-rust's does not).
pub(crate) async fn ids_of(catalog: &Arc<dyn FloeCatalog>, ident: &TableIdent) -> Vec<i64> {
    let table = catalog.load_table(ident).await.unwrap();
    let scan = table.scan().select(["id"]).build().unwrap();
    scanned_ids(&table, &scan).await
}

/// The ids `scan` of `table` reads, sorted (by floe's read on a format v3 table, see
/// [`ids_of`]).
async fn scanned_ids(table: &iceberg::table::Table, scan: &iceberg::scan::TableScan) -> Vec<i64> {
    let stream = if table.metadata().format_version() >= iceberg::spec::FormatVersion::V3 {
        floe_iceberg::scan::read(table, scan).await.unwrap()
    } else {
        scan.to_arrow().await.unwrap()
    };
    let batches: Vec<_> = stream.try_collect().await.unwrap();
    let mut out: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            let col = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            col.values().to_vec()
        })
        .collect();
    out.sort_unstable();
    out
}

/// Whether a pass failed, and only because a committer found its lease ran out.
fn only_lease_ran_out(failures: &[String]) -> bool {
    !failures.is_empty() && failures.iter().all(|f| f.contains("ran out"))
}

/// Halt a pass of the pipeline of `text` at `point`, run `meanwhile`, wait out the crashed
/// instance's claims and lease, then recover with a fresh pipeline: its first pass fails nothing
/// (a pass stopped only by its own lease running out on a loaded machine is run again), a
/// second one commits nothing, nothing is left staged. Returns that second pass.
async fn halt_then_recover(
    text: &str,
    dir: &Path,
    catalog: &Arc<dyn FloeCatalog>,
    point: &str,
    meanwhile: impl FnOnce(),
) -> RunReport {
    {
        let crashed = pipeline_of(text, dir, catalog, Faults::halt_at(point)).await;
        for tries in 1.. {
            tokio::select! {
                r = crashed.run_once(true) => {
                    // Stopped short of the point by its own lease running out (see below):
                    // the next pass gets there.
                    let lease_only = r.as_ref().is_ok_and(|r| only_lease_ran_out(&r.failures()));
                    if !lease_only || tries >= 3 {
                        panic!("{point}: the pass ended without reaching the point: {r:?}");
                    }
                }
                () = crashed.faults().halted() => break,
            }
        }
    }
    meanwhile();
    // A crash in a commit leaves its lease behind, one in an ingest its claims.
    let held = if point.starts_with("commit.") {
        LEASE_MS
    } else {
        TIMEOUT_MS
    };
    tokio::time::sleep(Duration::from_millis(held + 10)).await;
    let p = pipeline_of(text, dir, catalog, Faults::default()).await;
    let mut first = p.run_once(true).await.unwrap();
    // A committer that finds its lease ran out stops before touching the target, as it must;
    // on a loaded machine a recovering pass can take longer than `LEASE_MS` between two
    // renewals. The next pass takes the lease again and finishes; any other failure fails.
    for _ in 0..3 {
        if !only_lease_ran_out(&first.failures()) {
            break;
        }
        first = p.run_once(true).await.unwrap();
    }
    assert!(
        first.failures().is_empty(),
        "{point}: {:?}",
        first.failures()
    );
    let again = p.run_once(true).await.unwrap();
    assert!(
        again.commits.commits.is_empty(),
        "{point}: {:?}",
        again.commits
    );
    assert!(
        p.staged_summary().await.unwrap().is_empty(),
        "{point}: nothing left staged"
    );
    again
}

/// Halt a pass at `point`, recover with a fresh pipeline, check every row once.
async fn crash_and_recover(point: &str) {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    let again = halt_then_recover(CONFIG, dir.path(), &catalog, point, || {}).await;
    assert_eq!(again.rows(), 0, "{point}: a second pass lands nothing");
    assert_eq!(ids(&catalog).await, (1..=9).collect::<Vec<_>>(), "{point}");
}

/// Points reached only by a configuration of their own, each with its own test below.
const OWN_TESTS: &[&str] = &[
    "commit.after-batch-snapshot",
    "commit.after-replaced-rows",
    "commit.after-settle",
    "maintain.after-record",
    "maintain.after-commit",
    "maintain.after-move",
    "maintain.after-orphan",
];

/// Objects that change replace their rows (`on-change = replace`, the default): a first pass
/// lands a, b and c (ids 1..=9, b's bad line dead-lettered); then a is overwritten (ids 11 and
/// 12) and c removed, and the pass landing that halts at `point`. After the recovery the table
/// holds exactly a's new rows and b's: none of a's old rows or c's come back, none is lost.
async fn replace_crash_and_recover(point: &str) {
    replace_crash_and_recover_with(CONFIG, point).await;
}

/// [`replace_crash_and_recover`] under configuration `text`; with a commit branch, the rows
/// are read on the branch, and `main` must hold none.
async fn replace_crash_and_recover_with(text: &str, point: &str) {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    let branch = branch_of(text);
    let read = async |catalog: &Arc<dyn FloeCatalog>| match &branch {
        Some(b) => ids_on(catalog, b).await,
        None => ids(catalog).await,
    };
    let first = pipeline_of(text, dir.path(), &catalog, Faults::default()).await;
    let report = first.run_once(true).await.unwrap();
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert_eq!(read(&catalog).await, (1..=9).collect::<Vec<_>>());
    drop(first);
    let bucket = dir.path().join("bucket");
    tokio::time::sleep(Duration::from_millis(20)).await;
    std::fs::write(
        bucket.join("a.ndjson"),
        "{\"id\":11,\"v\":\"new\"}\n{\"id\":12,\"v\":\"new\"}\n",
    )
    .unwrap();
    std::fs::remove_file(bucket.join("c.ndjson")).unwrap();
    halt_then_recover(text, dir.path(), &catalog, point, || {}).await;
    assert_eq!(read(&catalog).await, [4, 5, 6, 11, 12], "{point}");
    if branch.is_some() {
        assert!(ids(&catalog).await.is_empty(), "{point}: main untouched");
    }
}

/// The commit branch `text` gives `t.events`, if any.
fn branch_of(text: &str) -> Option<String> {
    let config = FloeConfig::from_raw(parse(text, false).unwrap(), Path::new("/")).unwrap();
    config.commit_branches.of("t.events").map(str::to_owned)
}

/// The ids on `branch` of `t.events`, sorted.
async fn ids_on(catalog: &Arc<dyn FloeCatalog>, branch: &str) -> Vec<i64> {
    let ident = TableIdent::from_strs(["t", "events"]).unwrap();
    let table = catalog.load_table(&ident).await.unwrap();
    let Some(head) = table.metadata().snapshot_for_ref(branch) else {
        return Vec::new();
    };
    let scan = (table.scan().snapshot_id(head.snapshot_id()))
        .select(["id"])
        .build()
        .unwrap();
    scanned_ids(&table, &scan).await
}

/// [`replace_crash_and_recover`] on a table whose commits go to a branch: the branch holds
/// exactly the current rows, `main` nothing.
async fn branch_crash_and_recover(point: &str) {
    let text = CONFIG.replace(
        "[ingest]",
        "[iceberg]\ntables.default-commit-branch = \"audit\"\n\n[ingest]",
    );
    replace_crash_and_recover_with(&text, point).await;
}

macro_rules! branch_crash_tests {
    ($($name:ident => $point:literal,)*) => {
        $(
            #[tokio::test]
            async fn $name() {
                branch_crash_and_recover($point).await;
            }
        )*
    };
}

branch_crash_tests! {
    branch_replace_after_stage => "ingest.after-stage",
    branch_replace_after_record => "commit.after-record",
    branch_replace_after_replaced_rows => "commit.after-replaced-rows",
    branch_replace_after_append => "commit.after-append",
    branch_replace_after_done => "commit.after-done",
    branch_replace_after_settle => "commit.after-settle",
}

/// One test per crash point, each running `$run(point)`.
macro_rules! point_tests {
    ($run:ident: $($name:ident => $point:literal,)*) => {
        $(
            #[tokio::test]
            async fn $name() {
                $run($point).await;
            }
        )*
    };
}

point_tests! {
    replace_crash_and_recover:
    replace_after_batch_open => "ingest.after-batch-open",
    replace_after_claim => "ingest.after-claim",
    replace_after_write => "ingest.after-write",
    replace_after_stage => "ingest.after-stage",
    replace_after_mark => "ingest.after-mark",
    replace_after_record => "commit.after-record",
    replace_after_replaced_rows => "commit.after-replaced-rows",
    replace_after_append => "commit.after-append",
    replace_after_done => "commit.after-done",
    replace_after_settle => "commit.after-settle",
    replace_after_batches => "commit.after-batches",
}

/// Upserts by key (row deltas, one snapshot per batch): halted after the first batch's
/// snapshot of a two-batch commit, the recovery makes the second one only. Object c also
/// writes key 1, which a.ndjson wrote: whichever batch's snapshot comes last, key 1 is in the
/// table once.
#[tokio::test]
async fn a_crash_between_the_snapshots_of_an_upsert_commit_lands_each_key_once() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    append_line(dir.path(), "c.ndjson", "{\"id\":1,\"v\":\"again\"}");
    let catalog = local_catalog(dir.path()).await;
    let config = format!(
        "[iceberg]\ntables.upsert-mode-enabled = true\ntables.default-id-columns = \"id\"\n{CONFIG}"
    );
    halt_then_recover(
        &config,
        dir.path(),
        &catalog,
        "commit.after-batch-snapshot",
        || {},
    )
    .await;
    assert_eq!(ids(&catalog).await, (1..=9).collect::<Vec<_>>());
    let table = catalog
        .load_table(&TableIdent::from_strs(["t", "events"]).unwrap())
        .await
        .unwrap();
    let snapshots = table.metadata().snapshots().count();
    assert_eq!(snapshots, 2, "one snapshot per batch, none made twice");
}

macro_rules! crash_point_tests {
    ($($name:ident => $point:literal,)*) => {
        $(
            #[tokio::test]
            async fn $name() {
                crash_and_recover($point).await;
            }
        )*

        #[test]
        fn every_iceberg_and_ingest_point_has_a_test() {
            let tested = [$($point),*];
            let mc = maxcompute::POINTS_TESTED;
            for p in crate::fault::POINTS {
                let elsewhere = p.starts_with("backfill.");
                assert!(
                    elsewhere || tested.contains(p) || mc.contains(p) || OWN_TESTS.contains(p),
                    "no in-process test for {p}"
                );
            }
        }
    };
}

crash_point_tests! {
    after_batch_open => "ingest.after-batch-open",
    after_claim => "ingest.after-claim",
    after_write => "ingest.after-write",
    after_dead_letter => "ingest.after-dead-letter",
    after_stage => "ingest.after-stage",
    after_mark => "ingest.after-mark",
    after_lease => "commit.after-lease",
    after_record => "commit.after-record",
    after_append => "commit.after-append",
    after_done => "commit.after-done",
    after_batches => "commit.after-batches",
    second_batch_after_stage => "ingest.after-stage@2",
}

/// `iceberg.tables.auto-create-enabled = false` (Kafka Connect's name): floe does not create a
/// missing table; its objects are given back with an error naming the option, and land once
/// someone else creates the table.
#[tokio::test]
async fn with_auto_create_off_a_missing_table_is_not_created_and_its_objects_wait() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    let text = format!("[iceberg]\ntables.auto-create-enabled = false\n{CONFIG}");
    let p = pipeline_of(&text, dir.path(), &catalog, Faults::default()).await;
    let report = p.run_once(true).await.unwrap();
    let ident = TableIdent::from_strs(["t", "events"]).unwrap();
    assert!(
        !catalog.table_exists(&ident).await.unwrap(),
        "floe created the table"
    );
    let failed: Vec<String> = (report.batches.iter())
        .flat_map(|b| b.outcomes.iter())
        .filter_map(|o| match o {
            Outcome::Failed(e) if e.is_retryable() => Some(e.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 3, "every object is given back: {report:?}");
    assert!(
        failed[0].contains("auto-create-enabled") && failed[0].contains("t.events"),
        "{failed:?}"
    );

    // Created by someone else (here: as floe would), the objects land on the next pass.
    let definition = floe_iceberg::TableDefinition {
        schema: floe_decode::TableSchema::from_json(
            r#"{"fields":[{"name":"id","type":"long"},{"name":"v","type":"string"}]}"#,
        )
        .unwrap(),
        partition_by: vec![],
        properties: Default::default(),
    };
    floe_iceberg::ensure_table(catalog.as_ref(), &ident, &definition)
        .await
        .unwrap();
    p.run_once(true).await.unwrap();
    assert_eq!(ids(&catalog).await, (1..=9).collect::<Vec<i64>>());
}

/// A batch's tables are loaded, or created, while its objects are claimed; only for changes
/// that will write rows. A removal under `on-change = replace` writes none (the committer
/// deletes what the object landed), and an object over `max-object-bytes` is set aside
/// unread: a batch of such changes alone creates no table, as when tables were had object by
/// object.
#[tokio::test]
async fn changes_that_write_no_rows_create_no_table_ahead() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    std::fs::write(
        dir.path().join("events.schema.json"),
        r#"{"fields":[{"name":"id","type":"long"},{"name":"v","type":"string"}]}"#,
    )
    .unwrap();
    let catalog = local_catalog(dir.path()).await;
    let text = CONFIG
        .replace("[ingest]\n", "[ingest]\nmax-object-bytes = 10\n")
        .replace(
            "suffix = \".ndjson\"",
            "suffix = \".ndjson\"\nschema = \"events.schema.json\"",
        );
    let p = pipeline_of(&text, dir.path(), &catalog, Faults::default()).await;
    let ident = TableIdent::from_strs(["t", "events"]).unwrap();
    let removed = floe_core::ObjectChange {
        operation: floe_core::Operation::Removed,
        event_name: "ObjectRemoved:Delete".into(),
        ..floe_core::ObjectChange::created(floe_core::Provider::Local, "b", "gone.ndjson")
    };
    let too_large = floe_core::ObjectChange {
        size: Some(
            std::fs::metadata(dir.path().join("bucket/a.ndjson"))
                .unwrap()
                .len(),
        ),
        ..floe_core::ObjectChange::created(floe_core::Provider::Local, "b", "a.ndjson")
    };
    let report = p.ingest(&[removed, too_large]).await.unwrap();
    assert!(
        matches!(report.outcomes[0], Outcome::Staged),
        "the removal is staged for the committer: {report:?}"
    );
    assert!(
        matches!(report.outcomes[1], Outcome::DeadLettered(_)),
        "the large object is set aside: {report:?}"
    );
    assert!(
        !catalog.table_exists(&ident).await.unwrap(),
        "a table was created for changes that write no rows"
    );

    // An object that writes rows has its table created, ahead, and lands in it.
    let small = floe_core::ObjectChange {
        size: Some(5),
        ..floe_core::ObjectChange::created(floe_core::Provider::Local, "b", "c.ndjson")
    };
    let report = p.ingest(&[small]).await.unwrap();
    assert!(matches!(report.outcomes[0], Outcome::Staged), "{report:?}");
    p.commit(true).await.unwrap();
    assert_eq!(ids(&catalog).await, vec![7, 8, 9]);
}

/// `iceberg.tables.auto-create-props.*` and `iceberg.tables.schema-force-optional` (Kafka
/// Connect's names) shape the table floe creates.
#[tokio::test]
async fn a_created_table_takes_the_auto_create_props_and_forced_optional_columns() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    std::fs::write(
        dir.path().join("events.schema.json"),
        r#"{"fields":[{"name":"id","type":"long","required":true},{"name":"v","type":"string"}]}"#,
    )
    .unwrap();
    let catalog = local_catalog(dir.path()).await;
    let text = format!(
        "[iceberg]\ntables.auto-create-props.write.parquet.compression-codec = \"zstd\"\n\
         tables.auto-create-props.owner = \"floe-test\"\ntables.schema-force-optional = true\n{}",
        CONFIG.replace(
            "suffix = \".ndjson\"",
            "suffix = \".ndjson\"\nschema = \"events.schema.json\""
        )
    );
    let p = pipeline_of(&text, dir.path(), &catalog, Faults::default()).await;
    p.run_once(true).await.unwrap();
    let table = catalog
        .load_table(&TableIdent::from_strs(["t", "events"]).unwrap())
        .await
        .unwrap();
    let props = table.metadata().properties();
    assert_eq!(props.get("owner").map(String::as_str), Some("floe-test"));
    assert_eq!(
        props
            .get("write.parquet.compression-codec")
            .map(String::as_str),
        Some("zstd")
    );
    let id = table
        .metadata()
        .current_schema()
        .field_by_name("id")
        .unwrap();
    assert!(
        !id.required,
        "schema-force-optional leaves no required column"
    );
    assert_eq!(ids(&catalog).await, (1..=9).collect::<Vec<i64>>());
}

#[tokio::test]
async fn an_object_that_fails_is_named_and_the_rest_of_its_batch_lands() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    // Not gzip at all: the decoder fails on the first bytes.
    std::fs::write(dir.path().join("bucket/broken.ndjson.gz"), b"not gzip").unwrap();
    let catalog = local_catalog(dir.path()).await;
    let text = CONFIG.replace(
        "suffix = \".ndjson\"",
        "suffix = [\".ndjson\", \".gz\"]\non-error = \"fail\"",
    );
    let p = pipeline_of(&text, dir.path(), &catalog, Faults::default()).await;
    let report = p.run_once(true).await.unwrap();
    let failed: Vec<String> = report
        .batches
        .iter()
        .flat_map(|b| b.outcomes.iter())
        .filter_map(|o| match o {
            Outcome::Failed(e) => Some(format!("{e:?}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        failed.len(),
        2,
        "the bad line under fail, and the broken object: {failed:?}"
    );
    assert!(
        failed
            .iter()
            .any(|e| e.contains("broken.ndjson.gz") && !e.contains("retryable")),
        "the decoder's error names the object and is final: {failed:?}"
    );
    assert!(
        failed
            .iter()
            .any(|e| e.contains("b.ndjson") && e.contains("line 4")),
        "the rejected record names the object and line: {failed:?}"
    );
    let mut want: Vec<i64> = (1..=3).chain(7..=9).collect();
    want.sort_unstable();
    assert_eq!(
        ids(&catalog).await,
        want,
        "the other objects of the batch land"
    );
}

#[tokio::test]
async fn a_pass_without_faults_lands_every_row_once() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    let p = pipeline(dir.path(), &catalog, Faults::default()).await;
    let report = p.run_once(true).await.unwrap();
    assert_eq!(report.rows(), 9);
    assert_eq!(report.dead_letters(), 1);
    assert_eq!(ids(&catalog).await, (1..=9).collect::<Vec<_>>());
}

/// The MaxCompute session protocol's crash points, against the MaxCompute emulator (REST and
/// tunnel over HTTP, in this process): a route into MaxCompute only, one upload session per
/// commit; recovery resumes the recorded session, or redoes an expired one.
mod maxcompute {
    use floe_signing::Credentials;
    use floe_testbed::maxcompute::{MaxComputeEmulator, MaxComputeEmulatorConfig};
    use floe_tunnel_codec::Value;

    use super::*;

    pub(super) const POINTS_TESTED: &[&str] = &[
        "commit.mc.after-save-modes",
        "commit.mc.after-session",
        "commit.mc.after-blocks",
        "commit.mc.after-commit",
    ];

    const ACCESS_ID: &str = "LTAI5tTestAccessKeyId01";
    const SECRET: &str = "test-secret";

    /// The crash-point configuration with its route going to MaxCompute only.
    fn config(emu: &MaxComputeEmulator) -> String {
        let iceberg_route = "[[routes]]\ntable = \"t.events\"\nsuffix = \".ndjson\"\n";
        assert!(CONFIG.ends_with(iceberg_route));
        format!(
            r#"{}[maxcompute]
endpoint = "{}"
tunnel_endpoint = "{}"
project = "proj"
accessId = "{ACCESS_ID}"
accesskey = "{SECRET}"
table_name = "events"

[[routes]]
suffix = ".ndjson"
targets = ["maxcompute"]
schema = '{{"fields":[{{"name":"id","type":"long","required":true}},{{"name":"v","type":"string"}}]}}'
"#,
            CONFIG.strip_suffix(iceberg_route).unwrap_or(CONFIG),
            emu.endpoint(),
            emu.tunnel_endpoint()
        )
    }

    fn ids(emu: &MaxComputeEmulator) -> Vec<i64> {
        let mut ids: Vec<i64> = emu
            .rows("proj.events", None)
            .unwrap()
            .iter()
            .map(|r| match &r[0] {
                Value::BigInt(n) => *n,
                other => panic!("id {other:?}"),
            })
            .collect();
        ids.sort_unstable();
        ids
    }

    async fn crash_and_recover(point: &str, expire: bool) {
        let mut emu_config = MaxComputeEmulatorConfig::new(Credentials::new(ACCESS_ID, SECRET));
        emu_config.sql_running_polls = 0;
        emu_config.upsert_commit_polls = 0;
        let emu = MaxComputeEmulator::start(emu_config).await.unwrap();
        let text = config(&emu);
        let dir = tempfile::tempdir().unwrap();
        write_bucket(dir.path());
        let catalog = local_catalog(dir.path()).await;
        halt_then_recover(&text, dir.path(), &catalog, point, || {
            if expire {
                emu.advance_clock(Duration::from_secs(25 * 3600));
            }
        })
        .await;
        assert_eq!(
            ids(&emu),
            (1..=9).collect::<Vec<_>>(),
            "{point} (expired: {expire})"
        );
    }

    macro_rules! session_point_tests {
        ($($name:ident => $point:literal, expired: $expire:literal,)*) => {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    crash_and_recover($point, $expire).await;
                }
            )*
        };
    }

    /// An upsert session gone (purged by the service) after its commit was asked but before
    /// it was sent: whether it committed cannot be read from the session, and upserts by
    /// primary key are idempotent, so recovery writes the commit again in a new session. Before,
    /// a gone upsert session with `commit_requested` was taken as committed and its rows lost.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_upsert_session_gone_after_its_commit_was_asked_is_written_again() {
        let mut emu_config = MaxComputeEmulatorConfig::new(Credentials::new(ACCESS_ID, SECRET));
        emu_config.sql_running_polls = 0;
        emu_config.upsert_commit_polls = 0;
        let emu = MaxComputeEmulator::start(emu_config).await.unwrap();
        let text = config(&emu)
            .replace(
                "table_name = \"events\"",
                "table_name = \"events\"\ninsert_strategy = \"upsert\"\nsave_mode_create_template = '''CREATE TABLE IF NOT EXISTS `${table}` (\n${rowtype_fields},\nPRIMARY KEY (${rowtype_primary_key})\n) TBLPROPERTIES (\"transactional\"=\"true\");'''",
            )
            .replace(
                "{\"name\":\"v\",\"type\":\"string\"}]}",
                "{\"name\":\"v\",\"type\":\"string\"}],\"identifierFields\":[\"id\"]}",
            );
        assert!(text.contains("identifierFields") && text.contains("upsert"));
        let dir = tempfile::tempdir().unwrap();
        write_bucket(dir.path());
        let catalog = local_catalog(dir.path()).await;
        halt_then_recover(
            &text,
            dir.path(),
            &catalog,
            "commit.mc.after-blocks",
            || emu.forget_sessions(),
        )
        .await;
        assert_eq!(ids(&emu), (1..=9).collect::<Vec<_>>());
    }

    /// An upload session gone (expired, or cleaned up) after its commit was asked: before, the
    /// commit stopped for good with "whether it committed is unknown". The table's record count
    /// now says: unchanged since the session was created, the commit never reached the service
    /// and is written again; grown by what the commit sent, it committed and is done. Both land
    /// every row once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_upload_session_gone_after_its_commit_was_asked_is_judged_by_the_record_count() {
        for point in ["commit.mc.after-blocks", "commit.mc.after-commit"] {
            let mut emu_config = MaxComputeEmulatorConfig::new(Credentials::new(ACCESS_ID, SECRET));
            emu_config.sql_running_polls = 0;
            let emu = MaxComputeEmulator::start(emu_config).await.unwrap();
            let dir = tempfile::tempdir().unwrap();
            write_bucket(dir.path());
            let catalog = local_catalog(dir.path()).await;
            halt_then_recover(&config(&emu), dir.path(), &catalog, point, || {
                emu.forget_sessions()
            })
            .await;
            assert_eq!(ids(&emu), (1..=9).collect::<Vec<_>>(), "{point}");
        }
    }

    /// Files under the staging tables.
    fn staged_files(dir: &Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        let mut dirs = vec![dir.join("warehouse/floe_staging")];
        while let Some(d) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries {
                let path = e.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    out.push(path);
                }
            }
        }
        out
    }

    /// A batch that died after writing its files (its objects taken over and landed by the
    /// next pass) leaves them in the staging table, where no commit will ever delete them:
    /// maintenance removes them, keeps the files of a batch staged but not yet committed, and
    /// that batch then lands in MaxCompute.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn maintenance_removes_a_dead_batchs_staged_files_and_keeps_a_staged_batchs() {
        let mut emu_config = MaxComputeEmulatorConfig::new(Credentials::new(ACCESS_ID, SECRET));
        emu_config.sql_running_polls = 0;
        let emu = MaxComputeEmulator::start(emu_config).await.unwrap();
        let text = config(&emu);
        let dir = tempfile::tempdir().unwrap();
        write_bucket(dir.path());
        let catalog = local_catalog(dir.path()).await;
        halt_then_recover(&text, dir.path(), &catalog, "ingest.after-write", || {}).await;
        assert_eq!(ids(&emu), (1..=9).collect::<Vec<_>>());
        let dead = staged_files(dir.path());
        assert!(!dead.is_empty(), "the dead batch's files stay behind");

        std::fs::write(
            dir.path().join("bucket/d.ndjson"),
            "{\"id\":41,\"v\":\"x41\"}\n",
        )
        .unwrap();
        {
            let crashed = pipeline_of(
                &text,
                dir.path(),
                &catalog,
                Faults::halt_at("commit.after-lease"),
            )
            .await;
            tokio::select! {
                r = crashed.run_once(true) => panic!("not halted: {:?}", r.map(|r| r.failures().to_vec())),
                () = crashed.faults().halted() => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(LEASE_MS + 10)).await;
        assert_eq!(staged_files(dir.path()).len(), dead.len() + 1);

        let p = pipeline_of(&text, dir.path(), &catalog, Faults::default()).await;
        let mut opts = maintain_options();
        opts.remove_orphans_older_than = Some(Duration::ZERO);
        let done = p.maintain_all(&opts).await.unwrap();
        let staging = (done.iter())
            .find(|t| t.table == "staging floe_staging.events")
            .unwrap_or_else(|| panic!("{done:?}"));
        let orphans = staging.orphans.clone().unwrap();
        assert_eq!(
            (orphans.removed, orphans.protected),
            (dead.len(), 1),
            "{done:?}"
        );
        let left = staged_files(dir.path());
        assert_eq!(left.len(), 1, "{left:?}");
        assert!(dead.iter().all(|f| !f.exists()));

        let report = p.run_once(true).await.unwrap();
        assert!(report.failures().is_empty(), "{:?}", report.failures());
        assert_eq!(ids(&emu), [1, 2, 3, 4, 5, 6, 7, 8, 9, 41]);
        assert!(
            staged_files(dir.path()).is_empty(),
            "landed files are the committer's to delete"
        );
    }

    session_point_tests! {
        after_save_modes => "commit.mc.after-save-modes", expired: false,
        after_session => "commit.mc.after-session", expired: false,
        after_session_expired => "commit.mc.after-session", expired: true,
        after_blocks => "commit.mc.after-blocks", expired: false,
        after_blocks_expired => "commit.mc.after-blocks", expired: true,
        after_commit => "commit.mc.after-commit", expired: false,
    }
}

/// A checkpoint table whose next compare-and-set of an object record lands but loses its
/// answer (a timeout after the write was applied), passing everything else through.
#[derive(Debug)]
struct LosesClaimAnswer {
    inner: Arc<dyn floe_checkpoint::CheckpointStore>,
    armed: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl floe_checkpoint::CheckpointStore for LosesClaimAnswer {
    async fn get(&self, key: &str) -> floe_core::Result<Option<floe_checkpoint::Entry>> {
        self.inner.get(key).await
    }
    async fn put_if_absent(
        &self,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> floe_core::Result<Option<floe_checkpoint::Version>> {
        self.inner.put_if_absent(key, value, ttl).await
    }
    async fn put_if_version(
        &self,
        key: &str,
        value: &[u8],
        expected: &floe_checkpoint::Version,
        ttl: Option<Duration>,
    ) -> floe_core::Result<Option<floe_checkpoint::Version>> {
        let written = self.inner.put_if_version(key, value, expected, ttl).await?;
        if key.starts_with("obj/") && self.armed.swap(false, std::sync::atomic::Ordering::SeqCst) {
            return Err(floe_core::Error::new(
                floe_core::ErrorKind::StateUnknown,
                format!("PUT {key}: timed out (the write landed)"),
            )
            .with_retryable(true));
        }
        Ok(written)
    }
    async fn delete_if_version(
        &self,
        key: &str,
        expected: &floe_checkpoint::Version,
    ) -> floe_core::Result<bool> {
        self.inner.delete_if_version(key, expected).await
    }
    async fn scan(&self, prefix: &str) -> floe_core::Result<Vec<floe_checkpoint::Entry>> {
        self.inner.scan(prefix).await
    }
    async fn purge_expired(&self, prefix: &str) -> floe_core::Result<u64> {
        self.inner.purge_expired(prefix).await
    }
}

/// An instance crashed after claiming; the next one takes its objects over, and the write of
/// one takeover claim lands but its answer is lost. Before, the batch went on without that
/// object and staged: the object's record named a staged batch that never held its rows, so
/// every later delivery took it for landed and its rows were lost (found by the protocol
/// simulation, seed 98). Now the batch ends there, and a later one lands the object.
#[tokio::test]
async fn a_takeover_claim_whose_answer_was_lost_does_not_lose_the_object() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    {
        let crashed = pipeline(dir.path(), &catalog, Faults::halt_at("ingest.after-claim")).await;
        tokio::select! {
            r = crashed.run_once(true) => panic!("the pass ended before the point: {r:?}"),
            () = crashed.faults().halted() => {}
        }
    }
    tokio::time::sleep(Duration::from_millis(TIMEOUT_MS + 10)).await;
    let sqlite = floe_checkpoint::SqliteStore::open(&dir.path().join("checkpoint.db"))
        .await
        .unwrap();
    let losing = Arc::new(LosesClaimAnswer {
        inner: Arc::new(sqlite),
        armed: std::sync::atomic::AtomicBool::new(true),
    });
    let raw = parse(CONFIG, false).unwrap();
    let mut config = FloeConfig::from_raw(raw, dir.path()).unwrap();
    config.ingest.claim_timeout_ms = TIMEOUT_MS;
    config.commit.lease_ms = LEASE_MS;
    let p = Pipeline::builder(config)
        .catalog(catalog.clone())
        .checkpoint(losing.clone())
        .build()
        .await
        .unwrap();
    let _ = p.run_once(true).await;
    assert!(
        !losing.armed.load(std::sync::atomic::Ordering::SeqCst),
        "a takeover claim was written"
    );
    tokio::time::sleep(Duration::from_millis(TIMEOUT_MS + 10)).await;
    p.run_once(true).await.unwrap();
    assert_eq!(ids(&catalog).await, [1, 2, 3, 4, 5, 6, 7, 8, 9]);
}

/// Stage every batch, then land them with a committer that halts right after its append (its
/// commit record pending, the batches unmarked), and write a second pending commit record
/// naming the same batches under an id that sorts first, as a committer whose lease ran out while
/// it planned leaves one (it stops at its next renewal, but its record stays). `between` runs
/// after the append, before the stray record is written.
async fn land_beside_a_stray_record(
    dir: &Path,
    catalog: &Arc<dyn FloeCatalog>,
    between: impl std::future::Future<Output = ()>,
) {
    use crate::protocol::records::{BatchRecord, commit_prefix};
    use floe_checkpoint::StoreExt;
    let stager = pipeline(dir, catalog, Faults::default()).await;
    let staged = stager.run_once(false).await.unwrap();
    assert!(staged.commits.commits.is_empty(), "{:?}", staged.commits);
    let batches = (stager.checkpoint().scan_json::<BatchRecord>("batch/"))
        .await
        .unwrap();
    let target = batches[0].1.targets.keys().next().unwrap().clone();
    let ids: Vec<String> = batches.iter().map(|(_, b, _)| b.id.clone()).collect();
    {
        let crashed = pipeline(dir, catalog, Faults::halt_at("commit.after-append")).await;
        tokio::select! {
            r = crashed.run_once(true) => panic!("the pass ended before the point: {r:?}"),
            () = crashed.faults().halted() => {}
        }
    }
    between.await;
    let stray = "00000000-0000-7000-8000-000000000000";
    let record = crate::protocol::commit::begin(stray, &target, ids, floe_checkpoint::now_ms());
    let key = format!("{}{stray}", commit_prefix(&target));
    (stager.checkpoint().insert_json(&key, &record, None))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(LEASE_MS + 10)).await;
}

/// Recover with a fresh pipeline: nothing fails, `want` is the table, nothing is left staged.
async fn recover_to(dir: &Path, catalog: &Arc<dyn FloeCatalog>, want: &[i64]) {
    let p = pipeline(dir, catalog, Faults::default()).await;
    let run = p.run_once(true).await.unwrap();
    assert!(run.failures().is_empty(), "{:?}", run.failures());
    assert_eq!(ids(catalog).await, want);
    assert!(p.staged_summary().await.unwrap().is_empty());
}

/// A committer landed its commit and stopped before marking the batches, and a stray commit
/// record names the same batches. The next committer finishes the records in key order, the
/// stray one first: before, that appended the batches a second time (found by the protocol
/// simulation, seed 643). Now the append leaves out batches the table already took, whatever
/// the commit id.
#[tokio::test]
async fn a_stray_commit_record_does_not_append_batches_another_commit_landed() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    land_beside_a_stray_record(dir.path(), &catalog, async {}).await;
    recover_to(dir.path(), &catalog, &[1, 2, 3, 4, 5, 6, 7, 8, 9]).await;
}

/// As above, but another writer committed after the landed commit and table maintenance expired
/// its snapshot: no snapshot summary says which batches that commit took. Recovery finishes the
/// commits already in the table (found by commit id) first, so their batches are marked before
/// the stray record is looked at (and the table's `floe.batch-ids` names them as well).
#[tokio::test]
async fn a_stray_commit_record_recovered_after_the_landed_one_expired_appends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    let expire = async {
        // Another writer appends a row (id 100), then every snapshot but the current one expires.
        use iceberg::transaction::{ApplyTransactionAction, Transaction};
        let ident = TableIdent::from_strs(["t", "events"]).unwrap();
        let table = catalog.load_table(&ident).await.unwrap();
        let options = floe_iceberg::WriterOptions::default();
        let mut writer = floe_iceberg::TableWriter::new(&table, &options)
            .await
            .unwrap();
        let line = std::io::Cursor::new(b"{\"id\":100,\"v\":\"x100\"}\n".to_vec());
        let mut reader = arrow_json::ReaderBuilder::new(writer.arrow_schema().clone())
            .build(line)
            .unwrap();
        writer.write(reader.next().unwrap().unwrap()).await.unwrap();
        let other = floe_iceberg::AppendRequest {
            table: ident.clone(),
            files: writer.close().await.unwrap(),
            commit_id: "another-writer".into(),
            summary: HashMap::new(),
            deadline: std::time::Instant::now() + Duration::from_secs(30),
            file_batches: Vec::new(),
            branch: None,
            deletes_on: None,
        };
        floe_iceberg::append_exactly_once(catalog.as_ref(), &other)
            .await
            .unwrap();
        let table = catalog.load_table(&ident).await.unwrap();
        let tx = Transaction::new(&table);
        let tx = (tx.expire_snapshots())
            .expire_older_than_ms(i64::MAX)
            .retain_last(1)
            .apply(tx)
            .unwrap();
        let table = tx.commit(catalog.as_ref()).await.unwrap();
        assert_eq!(table.metadata().snapshots().count(), 1);
    };
    land_beside_a_stray_record(dir.path(), &catalog, expire).await;
    recover_to(dir.path(), &catalog, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 100]).await;
}

/// An instance stopped right after opening its batch (✗1): nothing refers to the batch, so no
/// claim taker ever judges it. Before, its `running` record stayed for ever and every commit
/// pass read it (the soak left 83 of them after 1,000 kills); now the next commit pass after
/// `claim-timeout-ms` declares it abandoned, and it expires.
#[tokio::test]
async fn a_batch_left_open_by_a_stopped_instance_is_cleared_by_a_commit_pass() {
    use crate::protocol::records::{BatchRecord, BatchState};
    use floe_checkpoint::StoreExt;
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    {
        let crashed = pipeline(
            dir.path(),
            &catalog,
            Faults::halt_at("ingest.after-batch-open"),
        )
        .await;
        tokio::select! {
            r = crashed.run_once(true) => panic!("the pass ended before the point: {r:?}"),
            () = crashed.faults().halted() => {}
        }
    }
    let p = pipeline(dir.path(), &catalog, Faults::default()).await;
    let open = p
        .checkpoint()
        .scan_json::<BatchRecord>("batch/")
        .await
        .unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].1.state, BatchState::Running);
    tokio::time::sleep(Duration::from_millis(TIMEOUT_MS + 10)).await;
    p.commit(true).await.unwrap();
    let left = p
        .checkpoint()
        .scan_json::<BatchRecord>("batch/")
        .await
        .unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].1.state, BatchState::Abandoned);
    tokio::time::sleep(Duration::from_millis(4 * TIMEOUT_MS + 10)).await;
    assert!(p.checkpoint().scan("batch/").await.unwrap().is_empty());
}

/// Data files and delete files of `t.events`' current snapshot.
async fn files_and_deletes(catalog: &Arc<dyn FloeCatalog>) -> (usize, usize) {
    let ident = TableIdent::from_strs(["t", "events"]).unwrap();
    let table = catalog.load_table(&ident).await.unwrap();
    let tasks: Vec<_> = (table.scan().build().unwrap().plan_files().await.unwrap())
        .try_collect()
        .await
        .unwrap();
    let deletes: std::collections::BTreeSet<String> = (tasks.iter())
        .flat_map(|t| t.deletes.iter().map(|d| d.file_path.clone()))
        .collect();
    (tasks.len(), deletes.len())
}

/// Overwrite `name` in the bucket with rows `ids` (the file's time moves on first).
async fn overwrite(dir: &Path, name: &str, ids: &[i64]) {
    tokio::time::sleep(Duration::from_millis(20)).await;
    let text: String = (ids.iter())
        .map(|id| format!("{{\"id\":{id},\"v\":\"x{id}\"}}\n"))
        .collect();
    std::fs::write(dir.join("bucket").join(name), text).unwrap();
}

fn maintain_options() -> crate::targets::maintain::MaintainOptions {
    crate::targets::maintain::MaintainOptions {
        compact: true,
        expire_older_than: Some(Duration::ZERO),
        keep_snapshots: 1,
        remove_orphans_older_than: None,
    }
}

/// A replacing table after three passes (a, b, c, then a overwritten twice): several small
/// files, and position deletes of a's earlier rows. Returns the pipeline that made it.
async fn replaced_twice(dir: &Path, catalog: &Arc<dyn FloeCatalog>) -> Pipeline {
    replaced_twice_with(CONFIG, dir, catalog).await
}

/// [`replaced_twice`] under configuration `text`.
async fn replaced_twice_with(text: &str, dir: &Path, catalog: &Arc<dyn FloeCatalog>) -> Pipeline {
    write_bucket(dir);
    let p = pipeline_of(text, dir, catalog, Faults::default()).await;
    for ids in [&[][..], &[11, 12], &[21, 22, 23]] {
        if !ids.is_empty() {
            overwrite(dir, "a.ndjson", ids).await;
        }
        let report = p.run_once(true).await.unwrap();
        assert!(report.failures().is_empty(), "{:?}", report.failures());
    }
    assert_eq!(ids(catalog).await, [4, 5, 6, 7, 8, 9, 21, 22, 23]);
    p
}

/// `floe maintain` on a replacing table: the small files and their position deletes become one
/// file, the old snapshots go, the rows stay; and a's next version still replaces its rows
/// (its record moved to the new file).
#[tokio::test]
async fn maintenance_compacts_expires_and_keeps_replacing_rows() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = local_catalog(dir.path()).await;
    let p = replaced_twice(dir.path(), &catalog).await;
    let (files, deletes) = files_and_deletes(&catalog).await;
    assert!(
        files >= 3 && deletes >= 2,
        "{files} files, {deletes} deletes"
    );
    let done = p
        .maintain(&["t.events".to_owned()], &maintain_options())
        .await
        .unwrap();
    assert_eq!(done[0].files_written, 1, "{done:?}");
    assert!(done[0].records_moved >= 2, "{done:?}");
    assert!(done[0].snapshots_expired >= 3, "{done:?}");
    assert_eq!(files_and_deletes(&catalog).await, (1, 0));
    assert_eq!(ids(&catalog).await, [4, 5, 6, 7, 8, 9, 21, 22, 23]);
    let ident = TableIdent::from_strs(["t", "events"]).unwrap();
    let table = catalog.load_table(&ident).await.unwrap();
    assert_eq!(table.metadata().snapshots().count(), 1);

    overwrite(dir.path(), "a.ndjson", &[31]).await;
    std::fs::remove_file(dir.path().join("bucket/c.ndjson")).unwrap();
    let report = p.run_once(true).await.unwrap();
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert_eq!(ids(&catalog).await, [4, 5, 6, 31]);
    // Nothing committed twice after the history went.
    assert!(p.run_once(true).await.unwrap().commits.commits.is_empty());
}

/// The live data files of `t.events`: path, partition spec and size.
async fn live_data_files(catalog: &Arc<dyn FloeCatalog>) -> Vec<(String, i32, u64)> {
    let ident = TableIdent::from_strs(["t", "events"]).unwrap();
    let table = catalog.load_table(&ident).await.unwrap();
    let snapshot = table.metadata().current_snapshot().unwrap();
    let list = table.manifest_list_reader(snapshot).load().await.unwrap();
    let mut out = Vec::new();
    for m in list.entries() {
        let manifest = m.load_manifest(table.file_io()).await.unwrap();
        for e in manifest.entries().iter().filter(|e| e.is_alive()) {
            if e.content_type() == iceberg::spec::DataContentType::Data {
                let path = e.file_path().to_owned();
                out.push((path, m.partition_spec_id, e.file_size_in_bytes()));
            }
        }
    }
    out.sort();
    out
}

/// Compaction takes a partition's small files and the files of an earlier partition spec
/// (rewritten into the current one), and leaves a large file alone: a replacing table written
/// bucketed by id, then unpartitioned (each old bucket goes whole into the one new partition,
/// so the rows keep their order), gets one large object and two small ones.
#[tokio::test]
async fn compaction_leaves_large_files_and_moves_earlier_spec_files_to_the_current_spec() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = local_catalog(dir.path()).await;
    let text = CONFIG
        .replace("[ingest]\n", "[ingest]\ntarget-file-size-bytes = 1048576\n")
        .replace(
            "suffix = \".ndjson\"\n",
            // Small row groups: the rolling writer counts the open one before compression,
            // so with few of them flushed a file stops well short of the target.
            "suffix = \".ndjson\"\npartition-by = [\"bucket(2, id)\"]\n\
             write-props = { \"write.parquet.row-group-limit\" = \"2048\" }\n",
        );
    write_bucket(dir.path());
    let p = pipeline_of(&text, dir.path(), &catalog, Faults::default()).await;
    let report = p.run_once(true).await.unwrap();
    assert!(report.failures().is_empty(), "{:?}", report.failures());

    // Unpartitioned from now on (spec 1).
    let ident = TableIdent::from_strs(["t", "events"]).unwrap();
    let table = catalog.load_table(&ident).await.unwrap();
    let spec = iceberg::spec::UnboundPartitionSpec::builder().build();
    catalog
        .commit_updates(
            &ident,
            vec![iceberg::TableRequirement::DefaultSpecIdMatch {
                default_spec_id: table.metadata().default_partition_spec_id(),
            }],
            vec![
                iceberg::TableUpdate::AddSpec { spec },
                iceberg::TableUpdate::SetDefaultSpec { spec_id: -1 },
            ],
        )
        .await
        .unwrap();
    // A large object (rows that do not compress: more than the target in Parquet) and two
    // small ones.
    let mut big = String::new();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for id in 1000..61_000 {
        let mut v = String::new();
        for _ in 0..4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.push_str(&format!("{x:016x}"));
        }
        big.push_str(&format!("{{\"id\":{id},\"v\":\"{v}\"}}\n"));
    }
    std::fs::write(dir.path().join("bucket/big.ndjson"), big).unwrap();
    overwrite(dir.path(), "d.ndjson", &[101, 102]).await;
    overwrite(dir.path(), "e.ndjson", &[103, 104]).await;
    let report = p.run_once(true).await.unwrap();
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    let want = ids(&catalog).await;
    assert_eq!(want.len(), 9 + 60_000 + 4, "b's bad line is not a row");

    let before = live_data_files(&catalog).await;
    let large: Vec<&String> = (before.iter())
        .filter(|(_, spec, size)| *spec == 1 && *size >= 786_432)
        .map(|(path, _, _)| path)
        .collect();
    assert!(!large.is_empty(), "a large file: {before:?}");
    assert!(before.iter().any(|(_, spec, _)| *spec == 0), "{before:?}");
    let done = p
        .maintain(&["t.events".to_owned()], &maintain_options())
        .await
        .unwrap();
    let after = live_data_files(&catalog).await;
    assert!(
        after.iter().all(|(_, spec, _)| *spec == 1),
        "every file in the current spec: {after:?}"
    );
    for path in &large {
        assert!(
            after.iter().any(|(p, _, _)| p == *path),
            "{path} is large and has no deletes: left as it is ({done:?})"
        );
    }
    // (The new files come out below the target: the rolling writer counts the open row
    // group's pages before compression.)
    assert!(
        after.len() < before.len(),
        "fewer files: {before:?} -> {after:?}"
    );
    for (path, _, _) in &after {
        assert!(
            large.contains(&path) || path.contains("/maint-"),
            "every other file was rewritten: {after:?}"
        );
    }
    assert_eq!(ids(&catalog).await, want);
    let read = floe_testbed::pyiceberg::read_sql_table(
        "floe",
        &dir.path().join("catalog.db"),
        &dir.path().join("warehouse"),
        "t.events",
    );
    assert_eq!(read["count"], want.len(), "pyiceberg");
    // a's next version still replaces its rows, wherever compaction moved them.
    overwrite(dir.path(), "a.ndjson", &[31]).await;
    let report = p.run_once(true).await.unwrap();
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    let now = ids(&catalog).await;
    assert!(
        now.contains(&31) && !now.contains(&1) && !now.contains(&2),
        "{:?}",
        &now[..8]
    );
    assert_eq!(now.len(), want.len() - 2);
}

/// `t.events`' maintenance with `opts` under configuration `text`, halted at `point`; returns
/// once the halted instance's lease has run out.
async fn halt_maintenance(
    text: &str,
    dir: &Path,
    catalog: &Arc<dyn FloeCatalog>,
    point: &str,
    opts: &crate::targets::maintain::MaintainOptions,
) {
    {
        let crashed = pipeline_of(text, dir, catalog, Faults::halt_at(point)).await;
        let tables = ["t.events".to_owned()];
        tokio::select! {
            r = crashed.maintain(&tables, opts) => panic!("{point}: not reached: {r:?}"),
            () = crashed.faults().halted() => {}
        }
    }
    tokio::time::sleep(Duration::from_millis(LEASE_MS + 10)).await;
}

/// `floe maintain` halted at `point`; the next pass (a's next version, c removed) finishes or
/// drops the compaction before it works out what a's version replaces: no row comes back,
/// none is lost; a second maintenance then compacts.
async fn maintain_crash_and_recover(point: &str) {
    maintain_crash_and_recover_with(CONFIG, point).await;
}

/// [`maintain_crash_and_recover`] under configuration `text`.
async fn maintain_crash_and_recover_with(text: &str, point: &str) {
    let dir = tempfile::tempdir().unwrap();
    let catalog = local_catalog(dir.path()).await;
    drop(replaced_twice_with(text, dir.path(), &catalog).await);
    halt_maintenance(text, dir.path(), &catalog, point, &maintain_options()).await;
    overwrite(dir.path(), "a.ndjson", &[31]).await;
    std::fs::remove_file(dir.path().join("bucket/c.ndjson")).unwrap();
    let p = pipeline_of(text, dir.path(), &catalog, Faults::default()).await;
    let report = p.run_once(true).await.unwrap();
    assert!(
        report.failures().is_empty(),
        "{point}: {:?}",
        report.failures()
    );
    assert_eq!(ids(&catalog).await, [4, 5, 6, 31], "{point}");
    p.maintain(&["t.events".to_owned()], &maintain_options())
        .await
        .unwrap();
    assert_eq!(files_and_deletes(&catalog).await, (1, 0), "{point}");
    assert_eq!(ids(&catalog).await, [4, 5, 6, 31], "{point}");
}

#[tokio::test]
async fn maintenance_halted_after_its_record() {
    maintain_crash_and_recover("maintain.after-record").await;
}

#[tokio::test]
async fn maintenance_halted_after_its_commit() {
    maintain_crash_and_recover("maintain.after-commit").await;
}

#[tokio::test]
async fn maintenance_halted_after_moving_the_records() {
    maintain_crash_and_recover("maintain.after-move").await;
}

/// Every file under `t.events`' location, as paths.
fn files_under_table(dir: &Path) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut dirs = vec![dir.join("warehouse")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                dirs.push(e.path());
            } else {
                out.insert(
                    e.path()
                        .canonicalize()
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    out
}

/// What `t.events`' metadata reaches, as paths.
async fn referenced(catalog: &Arc<dyn FloeCatalog>) -> std::collections::BTreeSet<String> {
    let ident = TableIdent::from_strs(["t", "events"]).unwrap();
    let table = catalog.load_table(&ident).await.unwrap();
    (floe_iceberg::orphans::referenced_files(&table)
        .await
        .unwrap())
    .into_iter()
    .map(|p| {
        Path::new(&p)
            .canonicalize()
            .unwrap_or_else(|e| panic!("{p} is referenced but unreadable: {e}"))
            .to_string_lossy()
            .into_owned()
    })
    .collect()
}

/// A replacing table compacted with its history expired (the old files and metadata now
/// unreferenced), a file of a batch that died, and a batch staged but not committed: orphan
/// removal takes the unreferenced files and the dead batch's, keeps every file the table or the
/// staged batch names, and the staged batch then commits with all its rows.
#[tokio::test]
async fn orphan_removal_keeps_what_the_table_and_staged_batches_name() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = local_catalog(dir.path()).await;
    let p = replaced_twice(dir.path(), &catalog).await;
    p.maintain(&["t.events".to_owned()], &maintain_options())
        .await
        .unwrap();
    let data = dir.path().join("warehouse/t/events/data");
    std::fs::create_dir_all(&data).unwrap();
    let dead = data.join("00000-0-dead-batch.parquet");
    std::fs::write(&dead, b"PAR1 a batch that died").unwrap();
    // d staged, its commit never ran.
    std::fs::write(
        dir.path().join("bucket/d.ndjson"),
        "{\"id\":41,\"v\":\"x41\"}\n",
    )
    .unwrap();
    {
        let crashed = pipeline(dir.path(), &catalog, Faults::halt_at("commit.after-lease")).await;
        tokio::select! {
            r = crashed.run_once(true) => panic!("not halted: {:?}", r.map(|r| r.failures().to_vec())),
            () = crashed.faults().halted() => {}
        }
    }
    tokio::time::sleep(Duration::from_millis(LEASE_MS + 10)).await;
    let before = files_under_table(dir.path());
    let live = referenced(&catalog).await;
    let unreferenced: Vec<&String> = before.iter().filter(|f| !live.contains(*f)).collect();
    assert!(unreferenced.len() >= 6, "{unreferenced:?}");

    let mut opts = maintain_options();
    opts.compact = false;
    opts.remove_orphans_older_than = Some(Duration::ZERO);
    let done = p.maintain(&["t.events".to_owned()], &opts).await.unwrap();
    let orphans = done[0].orphans.clone().expect("orphan removal ran");
    assert_eq!(orphans.protected, 1, "d's staged file: {done:?}");
    assert_eq!(orphans.removed, unreferenced.len() - 1, "{done:?}");
    let after = files_under_table(dir.path());
    assert!(!dead.exists());
    assert!(live.is_subset(&after), "a referenced file went");
    assert_eq!(
        after.len(),
        live.len() + 1,
        "only d's staged file is unreferenced"
    );

    let report = p.run_once(true).await.unwrap();
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert_eq!(ids(&catalog).await, [4, 5, 6, 7, 8, 9, 21, 22, 23, 41]);
    // Expiring nothing more, a second removal finds nothing: the commit left no orphans.
    opts.expire_older_than = None;
    let again = p.maintain(&["t.events".to_owned()], &opts).await.unwrap();
    assert_eq!(again[0].orphans.as_ref().unwrap().removed, 0, "{again:?}");
    assert_eq!(files_under_table(dir.path()), referenced(&catalog).await);
}

/// Orphan removal halted after its first deletion: the table reads the same, and the next
/// maintenance removes the rest.
#[tokio::test]
async fn orphan_removal_halted_midway_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = local_catalog(dir.path()).await;
    drop(replaced_twice(dir.path(), &catalog).await);
    let mut opts = maintain_options();
    opts.remove_orphans_older_than = Some(Duration::ZERO);
    halt_maintenance(CONFIG, dir.path(), &catalog, "maintain.after-orphan", &opts).await;
    assert_eq!(ids(&catalog).await, [4, 5, 6, 7, 8, 9, 21, 22, 23]);
    assert!(files_under_table(dir.path()).len() > referenced(&catalog).await.len());
    let p = pipeline(dir.path(), &catalog, Faults::default()).await;
    let done = p.maintain(&["t.events".to_owned()], &opts).await.unwrap();
    assert!(done[0].orphans.as_ref().unwrap().removed > 0, "{done:?}");
    assert_eq!(files_under_table(dir.path()), referenced(&catalog).await);
    assert_eq!(ids(&catalog).await, [4, 5, 6, 7, 8, 9, 21, 22, 23]);
    overwrite(dir.path(), "a.ndjson", &[31]).await;
    let report = p.run_once(true).await.unwrap();
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert_eq!(ids(&catalog).await, [4, 5, 6, 7, 8, 9, 31]);
}

/// An upsert table (equality deletes) after two passes: ids 1..=9 inserted, then key 1
/// updated, key 5 deleted and key 2 updated twice in one object (a position delete of the first
/// update's row, in the snapshot that adds both). `iceberg` (lines of the `[iceberg]` section)
/// is added to the configuration, which is returned.
async fn upserted_twice(iceberg: &str, dir: &Path, catalog: &Arc<dyn FloeCatalog>) -> String {
    std::fs::create_dir_all(dir.join("bucket")).unwrap();
    for (name, first) in [("a.ndjson", 1), ("b.ndjson", 4), ("c.ndjson", 7)] {
        let text: String = (first..first + 3)
            .map(|id| format!("{{\"id\":{id},\"v\":\"x{id}\",\"op\":\"I\"}}\n"))
            .collect();
        std::fs::write(dir.join("bucket").join(name), text).unwrap();
    }
    let config = format!(
        "[iceberg]\ntables.upsert-mode-enabled = true\ntables.default-id-columns = \"id\"\n\
         tables.cdc-field = \"op\"\n{iceberg}{CONFIG}"
    );
    let p = pipeline_of(&config, dir, catalog, Faults::default()).await;
    p.run_once(true).await.unwrap();
    std::fs::write(
        dir.join("bucket/d.ndjson"),
        "{\"id\":1,\"v\":\"again\",\"op\":\"U\"}\n{\"id\":5,\"op\":\"D\"}\n\
         {\"id\":2,\"v\":\"b\",\"op\":\"U\"}\n{\"id\":2,\"v\":\"c\",\"op\":\"U\"}\n",
    )
    .unwrap();
    let report = p.run_once(true).await.unwrap();
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert_eq!(ids(catalog).await, [1, 2, 3, 4, 6, 7, 8, 9]);
    config
}

/// Compaction of an upsert table applies its equality deletes and drops them, through a crash
/// at each step: no deleted key comes back, none is lost, and a later delete still lands.
#[tokio::test]
async fn maintenance_of_an_upsert_table_applies_its_equality_deletes_through_crashes() {
    upsert_maintenance_through_crashes("").await;
}

/// Compaction of an upsert table through a crash at each step, under `iceberg` (lines of the
/// `[iceberg]` section); see the test above.
async fn upsert_maintenance_through_crashes(iceberg: &str) {
    for point in [
        "maintain.after-record",
        "maintain.after-commit",
        "maintain.after-move",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let catalog = local_catalog(dir.path()).await;
        let config = upserted_twice(iceberg, dir.path(), &catalog).await;
        assert!(files_and_deletes(&catalog).await.1 >= 1, "{point}");
        if iceberg.contains("format-version") {
            assert_eq!(vectors(&catalog).await.0.len(), 1, "{point}: key 2's");
        }
        halt_maintenance(&config, dir.path(), &catalog, point, &maintain_options()).await;
        assert_eq!(ids(&catalog).await, [1, 2, 3, 4, 6, 7, 8, 9], "{point}");
        let p = pipeline_of(&config, dir.path(), &catalog, Faults::default()).await;
        p.maintain(&["t.events".to_owned()], &maintain_options())
            .await
            .unwrap();
        assert_eq!(files_and_deletes(&catalog).await, (1, 0), "{point}");
        assert_eq!(ids(&catalog).await, [1, 2, 3, 4, 6, 7, 8, 9], "{point}");
        std::fs::write(
            dir.path().join("bucket/e.ndjson"),
            "{\"id\":2,\"op\":\"D\"}\n",
        )
        .unwrap();
        let report = p.run_once(true).await.unwrap();
        assert!(
            report.failures().is_empty(),
            "{point}: {:?}",
            report.failures()
        );
        assert_eq!(ids(&catalog).await, [1, 3, 4, 6, 7, 8, 9], "{point}");
    }
}

/// Records that choose their table (`route-field`): each of the nine ids names its own table
/// (`t.x<id>`), and a crash at each step of ingest and commit still leaves every id in its
/// table exactly once.
#[tokio::test]
async fn records_routed_by_a_field_land_once_in_each_table_through_crashes() {
    let config =
        format!("[iceberg]\ntables.dynamic-enabled = true\ntables.route-field = \"v\"\n{CONFIG}");
    for point in [
        "ingest.after-write",
        "ingest.after-stage",
        "commit.after-record",
        "commit.after-append",
        "commit.after-done",
    ] {
        let dir = tempfile::tempdir().unwrap();
        write_bucket(dir.path());
        let catalog = local_catalog(dir.path()).await;
        let again = halt_then_recover(&config, dir.path(), &catalog, point, || {}).await;
        assert_eq!(again.rows(), 0, "{point}: a second pass lands nothing");
        for id in 1..=9i64 {
            let ident = TableIdent::from_strs(["t", &format!("x{id}")]).unwrap();
            assert_eq!(ids_of(&catalog, &ident).await, [id], "{point}: t.x{id}");
        }
    }
}

/// `[iceberg]` lines making the tables floe creates format v3 (deletes are deletion vectors).
const V3: &str = "tables.auto-create-props.format-version = \"3\"\n";

/// Per data file, the live deletion vectors of `t.events`' current snapshot, and how many
/// vectors it marks deleted (replaced by merged ones); a v3 table gets no Parquet position
/// delete files.
async fn vectors(
    catalog: &Arc<dyn FloeCatalog>,
) -> (std::collections::BTreeMap<String, usize>, usize) {
    let ident = TableIdent::from_strs(["t", "events"]).unwrap();
    let table = catalog.load_table(&ident).await.unwrap();
    assert_eq!(
        table.metadata().format_version(),
        iceberg::spec::FormatVersion::V3
    );
    let mut live = std::collections::BTreeMap::new();
    let mut replaced = 0;
    let Some(snapshot) = table.metadata().current_snapshot() else {
        return (live, replaced);
    };
    let list = table.manifest_list_reader(snapshot).load().await.unwrap();
    for m in list.entries() {
        let loaded = m.load_manifest(table.file_io()).await.unwrap();
        for e in loaded.entries() {
            if e.content_type() != iceberg::spec::DataContentType::PositionDeletes {
                continue;
            }
            assert!(
                floe_iceberg::dv::is_vector(e.data_file()),
                "{}",
                e.file_path()
            );
            if e.is_alive() {
                let data_file = e.data_file().referenced_data_file().unwrap();
                *live.entry(data_file).or_insert(0) += 1;
            } else {
                replaced += 1;
            }
        }
    }
    (live, replaced)
}

/// The ids in `t.events` as pyiceberg (the independent reader, which applies deletion
/// vectors) reads them, sorted.
fn ids_by_pyiceberg(dir: &Path) -> Vec<i64> {
    let root = dir.canonicalize().unwrap();
    let read = floe_testbed::pyiceberg::read_sql_table(
        "floe",
        &root.join("catalog.db"),
        &root.join("warehouse"),
        "t.events",
    );
    let mut ids: Vec<i64> = (read["rows"].as_array().unwrap().iter())
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

/// Objects that change replace their rows on a format v3 table, through a crash at `point`:
/// a first pass lands a, b and c (a and b in one batch, so in one data file), a second
/// overwrites a (a deletion vector on that file); the pass that halts overwrites a again and
/// removes b, whose rows are in the file that has a's first vector, so the new vector is merged
/// with it. After the recovery floe's read and pyiceberg see a's newest rows and c's, and each
/// data file has at most one vector.
async fn v3_replace_crash_and_recover(point: &str) {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = local_catalog(dir.path()).await;
    let config = format!("[iceberg]\n{V3}{CONFIG}");
    let first = pipeline_of(&config, dir.path(), &catalog, Faults::default()).await;
    for ids in [&[][..], &[11, 12]] {
        if !ids.is_empty() {
            overwrite(dir.path(), "a.ndjson", ids).await;
        }
        let report = first.run_once(true).await.unwrap();
        assert!(report.failures().is_empty(), "{:?}", report.failures());
    }
    assert_eq!(ids(&catalog).await, [4, 5, 6, 7, 8, 9, 11, 12]);
    assert_eq!(vectors(&catalog).await.0.len(), 1, "a's first rows' file");
    drop(first);
    overwrite(dir.path(), "a.ndjson", &[21, 22]).await;
    std::fs::remove_file(dir.path().join("bucket/b.ndjson")).unwrap();
    halt_then_recover(&config, dir.path(), &catalog, point, || {}).await;
    let want = [7, 8, 9, 21, 22];
    assert_eq!(ids(&catalog).await, want, "{point}");
    assert_eq!(ids_by_pyiceberg(dir.path()), want, "{point}: pyiceberg");
    let (live, replaced) = vectors(&catalog).await;
    assert!(live.values().all(|n| *n == 1), "{point}: {live:?}");
    assert_eq!(
        live.len(),
        2,
        "{point}: a's and b's first file, a's second: {live:?}"
    );
    assert_eq!(replaced, 1, "{point}: the vector merged into b's");
}

point_tests! {
    v3_replace_crash_and_recover:
    v3_replace_after_batch_open => "ingest.after-batch-open",
    v3_replace_after_write => "ingest.after-write",
    v3_replace_after_stage => "ingest.after-stage",
    v3_replace_after_record => "commit.after-record",
    v3_replace_after_replaced_rows => "commit.after-replaced-rows",
    v3_replace_after_append => "commit.after-append",
    v3_replace_after_done => "commit.after-done",
    v3_replace_after_settle => "commit.after-settle",
    v3_replace_after_batches => "commit.after-batches",
}

/// `floe maintain` on a format v3 replacing table, halted at each of its points: compaction
/// applies the deletion vectors (iceberg-rust's reader does not) and drops them with the files
/// they deleted from; no row comes back, none is lost, and a's next version still replaces its
/// rows.
#[tokio::test]
async fn maintenance_of_a_v3_table_applies_its_deletion_vectors_through_crashes() {
    let config = format!("[iceberg]\n{V3}{CONFIG}");
    for point in [
        "maintain.after-record",
        "maintain.after-commit",
        "maintain.after-move",
    ] {
        maintain_crash_and_recover_with(&config, point).await;
    }
}

/// Upserts on a format v3 table: key 1 twice in one object (the first row deleted by a
/// deletion vector on the batch's own file), and again in another batch of the same commit
/// (an equality delete, as on v2). A crash at each step of the commit still leaves each key
/// once, as floe's read sees it (pyiceberg refuses equality deletes until maintenance has
/// applied them).
#[tokio::test]
async fn v3_upserts_land_each_key_once_through_crashes() {
    for point in [
        "commit.after-record",
        "commit.after-replaced-rows",
        "commit.after-batch-snapshot",
        "commit.after-append",
        "commit.after-done",
    ] {
        let dir = tempfile::tempdir().unwrap();
        write_bucket(dir.path());
        append_line(dir.path(), "a.ndjson", "{\"id\":1,\"v\":\"twice\"}");
        append_line(dir.path(), "c.ndjson", "{\"id\":1,\"v\":\"again\"}");
        let catalog = local_catalog(dir.path()).await;
        let config = format!(
            "[iceberg]\ntables.upsert-mode-enabled = true\ntables.default-id-columns = \"id\"\n\
             {V3}{CONFIG}"
        );
        halt_then_recover(&config, dir.path(), &catalog, point, || {}).await;
        assert_eq!(ids(&catalog).await, (1..=9).collect::<Vec<_>>(), "{point}");
        let (live, _) = vectors(&catalog).await;
        assert_eq!(live.len(), 1, "{point}: a's batch's file: {live:?}");
    }
}

/// Compaction of a format v3 upsert table applies its equality deletes and its deletion
/// vectors together, through a crash at each step.
#[tokio::test]
async fn maintenance_of_a_v3_upsert_table_applies_both_kinds_of_deletes_through_crashes() {
    upsert_maintenance_through_crashes(V3).await;
}
