//! The Iceberg sink on the embedded SQL catalog: create a partitioned table, write batches into
//! data files, stage them as the checkpoint table would, append exactly once (also when the
//! commit's answer is lost, and when two attempts of one commit race), and read everything back
//! with pyiceberg.

mod common;

use iceberg::TableIdent;
use iceberg::table::Table;
use iceberg::transaction::ApplyTransactionAction;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use floe_decode::TableSchema;
use floe_decode::partition::PartitionField;
use floe_iceberg::commit::append_with_hook;
use floe_iceberg::{
    AppendOutcome, AppendRequest, CatalogConfig, StagedFile, TableDefinition, TableWriter,
    WriterOptions, ensure_table, open_catalog, parse_ident,
};

/// The embedded SQL catalog in `dir` (catalog.db, warehouse/), and `dir` canonicalised.
async fn sql_catalog(dir: &Path) -> (std::path::PathBuf, Arc<dyn floe_iceberg::FloeCatalog>) {
    let root = dir.canonicalize().unwrap();
    let props = HashMap::from([
        ("type".to_owned(), "sql".to_owned()),
        ("uri".to_owned(), "catalog.db".to_owned()),
        ("warehouse".to_owned(), "warehouse".to_owned()),
    ]);
    let config = CatalogConfig::from_props("floe", props, &root).unwrap();
    (root, open_catalog(&config).await.unwrap())
}

/// The tests' table schema: id (required), name, ts.
fn schema() -> TableSchema {
    TableSchema::from_json(
        r#"{"fields":[{"name":"id","type":"long","required":true},{"name":"name","type":"string"},{"name":"ts","type":"timestamptz"}]}"#,
    )
    .unwrap()
}

fn batch(schema: &arrow_schema::SchemaRef, ids: &[i64], day: i64) -> RecordBatch {
    let ts: Vec<i64> = ids
        .iter()
        .map(|i| day * 86_400_000_000 + i * 1_000_000)
        .collect();
    RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(
                ids.iter()
                    .map(|i| Some(format!("n{i}")))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("+00:00")),
        ],
    )
    .unwrap()
}

/// A fresh table `demo.<name>` (unpartitioned, [`schema`]) in a SQL catalog under `dir`.
async fn fresh_table(
    dir: &Path,
    name: &str,
) -> (Arc<dyn floe_iceberg::FloeCatalog>, TableIdent, Table) {
    fresh_table_with(dir, name, HashMap::new()).await
}

/// [`fresh_table`] with table properties `properties` (`format-version` picks the version).
async fn fresh_table_with(
    dir: &Path,
    name: &str,
    properties: HashMap<String, String>,
) -> (Arc<dyn floe_iceberg::FloeCatalog>, TableIdent, Table) {
    let (_, catalog) = sql_catalog(dir).await;
    let ident = parse_ident(&format!("demo.{name}")).unwrap();
    let definition = TableDefinition {
        schema: schema(),
        partition_by: vec![],
        properties,
    };
    let table = ensure_table(catalog.as_ref(), &ident, &definition)
        .await
        .unwrap();
    (catalog, ident, table)
}

/// Data files holding `ids`, written for `table`.
async fn files_of(table: &Table, ids: &[i64]) -> Vec<iceberg::spec::DataFile> {
    files_of_day(table, ids, 20_100).await
}

/// Data files holding `ids` on `day`, written for `table` under names no other call uses (a
/// writer numbers its files from 0 after its prefix, as a batch does).
async fn files_of_day(table: &Table, ids: &[i64], day: i64) -> Vec<iceberg::spec::DataFile> {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let options = WriterOptions {
        file_prefix: format!("files-{call}"),
        ..Default::default()
    };
    let mut writer = TableWriter::new(table, &options).await.unwrap();
    let schema = writer.arrow_schema().clone();
    writer.write(batch(&schema, ids, day)).await.unwrap();
    writer.close().await.unwrap()
}

/// How many snapshots of `table` carry floe's commit id `commit_id`.
fn carrying(table: &Table, commit_id: &str) -> usize {
    (table.metadata().snapshots())
        .filter(|s| {
            s.summary().additional_properties.get("floe.commit-id") == Some(&commit_id.to_owned())
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_stage_commit_once_and_read_back_with_pyiceberg() {
    let dir = tempfile::tempdir().unwrap();
    let (root, catalog) = sql_catalog(dir.path()).await;
    let ident = parse_ident("demo.events").unwrap();
    let definition = TableDefinition {
        schema: schema(),
        partition_by: vec![PartitionField::parse("day(ts)").unwrap()],
        properties: HashMap::new(),
    };
    let table = ensure_table(catalog.as_ref(), &ident, &definition)
        .await
        .unwrap();
    // A second ensure loads the same table.
    let again = ensure_table(catalog.as_ref(), &ident, &definition)
        .await
        .unwrap();
    assert_eq!(table.metadata().uuid(), again.metadata().uuid());

    let mut writer = TableWriter::new(
        &table,
        &WriterOptions {
            file_prefix: "batch-1".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let schema = writer.arrow_schema().clone();
    writer
        .write(batch(&schema, &[1, 2, 3], 20_100))
        .await
        .unwrap();
    writer.write(batch(&schema, &[4, 5], 20_101)).await.unwrap();
    let files = writer.close().await.unwrap();
    assert_eq!(files.len(), 2, "one file per day partition");

    // Through the checkpoint table's JSON form and back.
    let staged: Vec<StagedFile> = files
        .into_iter()
        .map(|f| StagedFile::new(&table, f).unwrap())
        .collect();
    let json = serde_json::to_string(&staged).unwrap();
    let staged: Vec<StagedFile> = serde_json::from_str(&json).unwrap();
    assert_eq!(staged.iter().map(|s| s.rows).sum::<u64>(), 5);
    let files: Vec<_> = staged
        .iter()
        .map(|s| s.to_data_file(&table).unwrap())
        .collect();

    let req = AppendRequest {
        table: ident.clone(),
        files,
        commit_id: "commit-0001".into(),
        summary: HashMap::from([(
            "floe.checkpoint".to_owned(),
            "{\"batches\":[\"batch-1\"]}".to_owned(),
        )]),
        deadline: Instant::now() + Duration::from_secs(30),
        file_batches: Vec::new(),
        branch: None,
        deletes_on: None,
    };
    // The catalog applies the commit but its answer is "lost": the retry must find the commit in
    // the table history and not append the files again.
    commit_losing_the_first_answer(catalog.as_ref(), &req).await;
    // And a plain retry of the same commit id is a no-op too.
    let outcome = floe_iceberg::append_exactly_once(catalog.as_ref(), &req)
        .await
        .unwrap();
    assert!(
        matches!(outcome, AppendOutcome::AlreadyCommitted { .. }),
        "{outcome:?}"
    );

    let read = floe_testbed::pyiceberg::read_sql_table(
        "floe",
        &root.join("catalog.db"),
        &root.join("warehouse"),
        "demo.events",
    );
    assert_eq!(read["count"], 5, "{read}");
    let snapshots = read["snapshots"].as_array().unwrap();
    assert_eq!(snapshots.len(), 1, "exactly one snapshot: {read}");
    assert_eq!(snapshots[0]["summary"]["floe.commit-id"], "commit-0001");
    assert_eq!(snapshots[0]["operation"], "append");
    let mut ids: Vec<i64> = read["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, [1, 2, 3, 4, 5]);
    let ts = read["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == 4)
        .unwrap()["ts"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(ts, "2025-01-13T00:00:04+00:00");
    assert!(read["spec"].as_str().unwrap().contains("day"), "{read}");
    let mut paths: Vec<&str> = read["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    paths.sort();
    assert!(
        paths[0].contains("/data/ts_day=2025-01-12/batch-1-"),
        "{paths:?}"
    );
    assert!(
        paths[1].contains("/data/ts_day=2025-01-13/batch-1-"),
        "{paths:?}"
    );
    assert!(Path::new(paths[0].trim_start_matches("file://")).exists());
}

/// Two attempts of one commit (an attempt whose answer timed out while it was still landing,
/// and its retry; or two committers finishing one commit record) both load the table before
/// either lands. The loser's 409 must send it back to floe's history check, not into
/// iceberg's own retry, which would re-apply the append on the new table: one snapshot per
/// commit id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_attempts_of_one_commit_racing_land_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident, table) = fresh_table(dir.path(), "race").await;
    let files = files_of(&table, &[1, 2, 3, 4]).await;
    let req = AppendRequest {
        table: ident.clone(),
        files,
        commit_id: "commit-race".into(),
        summary: HashMap::new(),
        deadline: Instant::now() + Duration::from_secs(30),
        file_batches: Vec::new(),
        branch: None,
        deletes_on: None,
    };
    let (a, b, conflicts) = common::RacingCatalog::pair(catalog.clone(), catalog.clone());
    let (ra, rb) = tokio::join!(
        floe_iceberg::append_exactly_once(&a, &req),
        floe_iceberg::append_exactly_once(&b, &req)
    );
    let outcomes = [ra.unwrap(), rb.unwrap()];
    assert_eq!(conflicts.load(std::sync::atomic::Ordering::SeqCst), 1);
    let table = catalog.load_table(&ident).await.unwrap();
    assert_eq!(
        carrying(&table, "commit-race"),
        1,
        "one snapshot per commit id: {outcomes:?}"
    );
    assert_eq!(common::total_records(&table), 4, "{outcomes:?}");
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| matches!(o, AppendOutcome::AlreadyCommitted { .. }))
            .count(),
        1,
        "{outcomes:?}"
    );
}

/// Another attempt of the same commit lands between floe's history check and its own attempt.
/// iceberg's transaction reloads the table when it commits and would re-apply the append on
/// top of the other attempt's snapshot: the attempt must be made on the table that was checked,
/// so the catalog refuses it and the next history check finds the commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_landed_between_the_check_and_the_attempt_is_not_applied_again() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident, table) = fresh_table(dir.path(), "between").await;
    let req = AppendRequest {
        table: ident.clone(),
        files: files_of(&table, &[1, 2, 3]).await,
        commit_id: "commit-between".into(),
        summary: HashMap::new(),
        deadline: Instant::now() + Duration::from_secs(30),
        file_batches: Vec::new(),
        branch: None,
        deletes_on: None,
    };
    let racing = common::LandsAfterCheck::new(catalog.clone(), req.clone());
    let outcome = floe_iceberg::append_exactly_once(&racing, &req)
        .await
        .unwrap();
    let table = catalog.load_table(&ident).await.unwrap();
    assert_eq!(
        carrying(&table, "commit-between"),
        1,
        "one snapshot per commit id: {outcome:?}"
    );
    assert_eq!(common::total_records(&table), 3, "{outcome:?}");
    assert!(
        matches!(outcome, AppendOutcome::AlreadyCommitted { .. }),
        "{outcome:?}"
    );
}

/// A batch appended under one commit id must not be appended under another (a commit record
/// written by a committer whose lease had run out names batches another commit took), even once
/// the snapshot that took it has been expired: the table keeps the recent batch ids beside the
/// recent commit ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_taken_by_an_expired_snapshot_is_not_appended_again() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident, table) = fresh_table(dir.path(), "batches").await;
    let taken = files_of(&table, &[1, 2]).await;
    let request = |commit_id: &str, files: Vec<iceberg::spec::DataFile>, batch: Option<&str>| {
        let file_batches = batch.map_or(Vec::new(), |b| vec![b.to_owned(); files.len()]);
        AppendRequest {
            table: ident.clone(),
            files,
            commit_id: commit_id.into(),
            summary: HashMap::from([(
                floe_iceberg::CHECKPOINT_PROP.to_owned(),
                serde_json::json!({"batches": batch.into_iter().collect::<Vec<_>>()}).to_string(),
            )]),
            deadline: Instant::now() + Duration::from_secs(30),
            file_batches,
            branch: None,
            deletes_on: None,
        }
    };
    let first = request("commit-a", taken.clone(), Some("batch-1"));
    floe_iceberg::append_exactly_once(catalog.as_ref(), &first)
        .await
        .unwrap();
    let table = catalog.load_table(&ident).await.unwrap();
    let other = request("commit-other", files_of(&table, &[3]).await, None);
    floe_iceberg::append_exactly_once(catalog.as_ref(), &other)
        .await
        .unwrap();
    let table = catalog.load_table(&ident).await.unwrap();
    let tx = iceberg::transaction::Transaction::new(&table);
    let tx = (tx.expire_snapshots())
        .expire_older_than_ms(i64::MAX)
        .retain_last(1)
        .apply(tx)
        .unwrap();
    tx.commit(catalog.as_ref()).await.unwrap();

    let again = request("commit-b", taken, Some("batch-1"));
    let outcome = floe_iceberg::append_exactly_once(catalog.as_ref(), &again)
        .await
        .unwrap();
    let table = catalog.load_table(&ident).await.unwrap();
    assert_eq!(common::total_records(&table), 3, "{outcome:?}");
    assert!(
        matches!(outcome, AppendOutcome::AlreadyCommitted { .. }),
        "{outcome:?}"
    );
}

/// A commit whose snapshot was expired (S3 Tables and OSS Tables expire snapshots on their own)
/// must still be found: a pending commit record recovered after the expiry would otherwise be
/// appended a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_snapshot_expired_is_still_found() {
    let dir = tempfile::tempdir().unwrap();
    let (_, catalog) = sql_catalog(dir.path()).await;
    let ident = parse_ident("demo.expiring").unwrap();
    let definition = TableDefinition {
        schema: schema(),
        partition_by: vec![],
        properties: HashMap::new(),
    };
    let mut table = ensure_table(catalog.as_ref(), &ident, &definition)
        .await
        .unwrap();
    let append = |commit_id: &'static str, ids: &'static [i64], table: iceberg::table::Table| {
        let catalog = catalog.clone();
        let ident = ident.clone();
        async move {
            let mut writer = TableWriter::new(&table, &WriterOptions::default())
                .await
                .unwrap();
            let schema = writer.arrow_schema().clone();
            writer.write(batch(&schema, ids, 20_100)).await.unwrap();
            let req = AppendRequest {
                table: ident,
                files: writer.close().await.unwrap(),
                commit_id: commit_id.into(),
                summary: HashMap::new(),
                deadline: Instant::now() + Duration::from_secs(30),
                file_batches: Vec::new(),
                branch: None,
                deletes_on: None,
            };
            floe_iceberg::append_exactly_once(catalog.as_ref(), &req)
                .await
                .unwrap()
        }
    };
    append("commit-old", &[1, 2], table.clone()).await;
    table = catalog.load_table(&ident).await.unwrap();
    append("commit-new", &[3], table.clone()).await;
    table = catalog.load_table(&ident).await.unwrap();
    let old = floe_iceberg::find_commit(&table, "commit-old").expect("in the history");
    assert!(old.snapshot_id.is_some());

    // Expire every snapshot but the current one.
    let tx = iceberg::transaction::Transaction::new(&table);
    let tx = tx
        .expire_snapshots()
        .expire_older_than_ms(i64::MAX)
        .retain_last(1)
        .apply(tx)
        .unwrap();
    table = tx.commit(catalog.as_ref()).await.unwrap();
    assert_eq!(table.metadata().snapshots().count(), 1);

    let found = floe_iceberg::find_commit(&table, "commit-old").expect("found after expiry");
    assert_eq!(found.snapshot_id, None, "its snapshot is gone");
    let again = append("commit-old", &[1, 2], table.clone()).await;
    assert!(
        matches!(again, AppendOutcome::AlreadyCommitted { .. }),
        "{again:?}"
    );
    let table = catalog.load_table(&ident).await.unwrap();
    assert_eq!(common::total_records(&table), 3);
}

/// A commit of `files` under `commit_id` into `ident`, with no batch check.
fn request(
    ident: &TableIdent,
    files: Vec<iceberg::spec::DataFile>,
    commit_id: &str,
) -> AppendRequest {
    AppendRequest {
        table: ident.clone(),
        files,
        commit_id: commit_id.into(),
        summary: HashMap::new(),
        deadline: Instant::now() + Duration::from_secs(30),
        file_batches: Vec::new(),
        branch: None,
        deletes_on: None,
    }
}

/// The `(id, day)` of every row iceberg-rust's scan returns (deletes applied), sorted.
async fn scanned(catalog: &dyn floe_iceberg::FloeCatalog, ident: &TableIdent) -> Vec<(i64, i64)> {
    let table = catalog.load_table(ident).await.unwrap();
    let stream = table
        .scan()
        .select_all()
        .build()
        .unwrap()
        .to_arrow()
        .await
        .unwrap();
    rows_of(stream).await
}

/// The `(id, day)` of every row of `stream`, sorted.
async fn rows_of(stream: iceberg::scan::ArrowRecordBatchStream) -> Vec<(i64, i64)> {
    use futures::TryStreamExt;
    let batches: Vec<RecordBatch> = stream.try_collect().await.unwrap();
    let mut rows = Vec::new();
    for b in batches {
        let ids = b
            .column_by_name("id")
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        let ts = (b.column_by_name("ts").unwrap().as_any())
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        rows.extend((0..b.num_rows()).map(|i| (ids.value(i), ts.value(i) / 86_400_000_000)));
    }
    rows.sort();
    rows
}

/// The `(id, day)` of every row of a reader's JSON answer (`ts` in ISO 8601), sorted.
fn read_rows(read: &serde_json::Value) -> Vec<(i64, i64)> {
    let mut rows: Vec<(i64, i64)> = (read["rows"].as_array().unwrap().iter())
        .map(|r| {
            let ts = r["ts"].as_str().unwrap();
            let date = chrono::DateTime::parse_from_rfc3339(&ts.replace(' ', "T")).unwrap();
            (r["id"].as_i64().unwrap(), date.timestamp() / 86_400)
        })
        .collect();
    rows.sort();
    rows
}

/// The current metadata file of `ident`.
async fn metadata_location(catalog: &dyn floe_iceberg::FloeCatalog, ident: &TableIdent) -> String {
    let table = catalog.load_table(ident).await.unwrap();
    table.metadata_location().unwrap().to_owned()
}

/// iceberg-rust's scan and DuckDB both read exactly the rows `want` (`(id, day)`, sorted).
async fn assert_read_by_iceberg_rust_and_duckdb(
    catalog: &dyn floe_iceberg::FloeCatalog,
    ident: &TableIdent,
    want: &[(i64, i64)],
) {
    assert_eq!(scanned(catalog, ident).await, want, "iceberg-rust");
    let location = metadata_location(catalog, ident).await;
    let duck = floe_testbed::duckdb::read_metadata(&location, Some("id"));
    assert_eq!(read_rows(&duck), want, "duckdb: {duck}");
}

/// Commit `req`, the catalog's answer to its first attempt lost: the retry finds the commit in
/// the table's history and does not apply it again.
async fn commit_losing_the_first_answer(
    catalog: &dyn floe_iceberg::FloeCatalog,
    req: &AppendRequest,
) {
    let lose_first = std::sync::atomic::AtomicBool::new(true);
    let outcome = append_with_hook(catalog, req, &|ok| {
        ok && lose_first.swap(false, std::sync::atomic::Ordering::SeqCst)
    })
    .await
    .unwrap();
    assert!(
        matches!(outcome, AppendOutcome::AlreadyCommitted { .. }),
        "{outcome:?}"
    );
}

/// A fresh table `demo.<name>` under `dir` holding ids `first` (day 20_100), committed as
/// `c1`.
async fn table_holding(
    dir: &Path,
    name: &str,
    first: &[i64],
) -> (
    Arc<dyn floe_iceberg::FloeCatalog>,
    TableIdent,
    Vec<iceberg::spec::DataFile>,
) {
    table_holding_with(dir, name, first, HashMap::new()).await
}

/// [`table_holding`] with table properties `properties`.
async fn table_holding_with(
    dir: &Path,
    name: &str,
    first: &[i64],
    properties: HashMap<String, String>,
) -> (
    Arc<dyn floe_iceberg::FloeCatalog>,
    TableIdent,
    Vec<iceberg::spec::DataFile>,
) {
    let (catalog, ident, table) = fresh_table_with(dir, name, properties).await;
    let files = files_of(&table, first).await;
    floe_iceberg::append_exactly_once(catalog.as_ref(), &request(&ident, files.clone(), "c1"))
        .await
        .unwrap();
    (catalog, ident, files)
}

/// A row delta adds new rows and deletes older ones by position in one snapshot, exactly once
/// when its answer is lost; pyiceberg, DuckDB and iceberg-rust all read the same current rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_delta_deletes_by_position_in_the_snapshot_that_adds_rows() {
    use floe_iceberg::delta::{PositionDeletes, write_position_deletes};
    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident, first) = table_holding(dir.path(), "mirror", &[1, 2, 3, 4]).await;
    assert_eq!(first.len(), 1);

    // Rows 1 and 3 of the first file (ids 2 and 4) go; ids 5 and 6 come, in one snapshot.
    let table = catalog.load_table(&ident).await.unwrap();
    let deletes = write_position_deletes(&table, &PositionDeletes::of(&first[0], vec![3, 1]))
        .await
        .unwrap();
    let mut files = files_of(&table, &[5, 6]).await;
    files.push(deletes);
    commit_losing_the_first_answer(catalog.as_ref(), &request(&ident, files, "c2")).await;

    let want = vec![(1, 20_100), (3, 20_100), (5, 20_100), (6, 20_100)];
    assert_eq!(scanned(catalog.as_ref(), &ident).await, want);
    let root = dir.path().canonicalize().unwrap();
    let read = floe_testbed::pyiceberg::read_sql_table(
        "floe",
        &root.join("catalog.db"),
        &root.join("warehouse"),
        "demo.mirror",
    );
    assert_eq!(read_rows(&read), want, "pyiceberg: {read}");
    let snapshots = read["snapshots"].as_array().unwrap();
    assert_eq!(snapshots.len(), 2, "one snapshot per commit: {read}");
    let delta = (snapshots.iter())
        .find(|s| s["summary"]["floe.commit-id"] == "c2")
        .unwrap();
    assert_eq!(delta["operation"], "overwrite", "{read}");
    let summary = &delta["summary"];
    assert_eq!(summary["added-position-deletes"], "2", "{read}");
    assert_eq!(summary["total-data-files"], "2", "{read}");
    let location = metadata_location(catalog.as_ref(), &ident).await;
    let duck = floe_testbed::duckdb::read_metadata(&location, Some("id"));
    assert_eq!(read_rows(&duck), want, "duckdb: {duck}");
}

/// Position deletes are added to a table that moved since they were worked out only while the
/// data files they name are still in it: after an append they go through; after a compaction,
/// which rewrote those files, the append fails as a conflict and adds nothing (the deletes
/// would reach no row, and the rows they meant would stay).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn position_deletes_are_not_added_after_a_compaction_rewrote_their_files() {
    use floe_iceberg::delta::{PositionDeletes, write_position_deletes};
    use floe_iceberg::maintain::{CompactOptions, compact, rewrite_updates};
    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident, first) = table_holding(dir.path(), "moved", &[1, 2, 3, 4]).await;
    // A commit adding `add` and deleting row `pos` of the first file, worked out on `table`.
    async fn delta(
        table: &Table,
        ident: &TableIdent,
        first: &iceberg::spec::DataFile,
        (pos, add, id): (i64, i64, &str),
    ) -> AppendRequest {
        let deletes = write_position_deletes(table, &PositionDeletes::of(first, vec![pos]))
            .await
            .unwrap();
        let mut files = files_of(table, &[add]).await;
        files.push(deletes);
        AppendRequest {
            deletes_on: table.metadata().current_snapshot_id(),
            ..request(ident, files, id)
        }
    }
    // Id 2 (row 1) is to go and id 7 to come; another commit adds id 8 first.
    let table = catalog.load_table(&ident).await.unwrap();
    let req = delta(&table, &ident, &first[0], (1, 7, "c2")).await;
    let more = request(&ident, files_of(&table, &[8]).await, "other");
    floe_iceberg::append_exactly_once(catalog.as_ref(), &more)
        .await
        .unwrap();
    floe_iceberg::append_exactly_once(catalog.as_ref(), &req)
        .await
        .unwrap();
    let want: Vec<(i64, i64)> = [1, 3, 4, 7, 8].iter().map(|id| (*id, 20_100)).collect();
    assert_eq!(scanned(catalog.as_ref(), &ident).await, want);

    // Id 3 (row 2) is to go; a compaction lands first, rewriting the first file.
    let table = catalog.load_table(&ident).await.unwrap();
    let req = delta(&table, &ident, &first[0], (2, 9, "c3")).await;
    let options = CompactOptions {
        target_file_size_bytes: 1 << 30,
        file_prefix: "maint-test".into(),
        branch: "main".into(),
        tracks_rows: true,
    };
    let rewrite = compact(&table, &options).await.unwrap();
    assert!(rewrite.moved.contains_key(first[0].file_path()));
    let (requirements, updates) = rewrite_updates(&table, "main", &rewrite, HashMap::new())
        .await
        .unwrap();
    catalog
        .commit_updates(&ident, requirements, updates)
        .await
        .unwrap();
    let err = floe_iceberg::append_exactly_once(catalog.as_ref(), &req)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), floe_core::ErrorKind::Conflict, "{err}");
    assert_eq!(
        scanned(catalog.as_ref(), &ident).await,
        want,
        "nothing added"
    );
}

/// An equality delete deletes a key's rows of earlier snapshots and leaves the rows its own
/// snapshot adds: an upsert. DuckDB and iceberg-rust read it; pyiceberg refuses equality
/// deletes, and the test checks that it says so rather than reading the deleted rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_equality_delete_replaces_a_keys_earlier_rows_only() {
    use iceberg::writer::base_writer::equality_delete_writer::{
        EqualityDeleteFileWriterBuilder, EqualityDeleteWriterConfig,
    };
    use iceberg::writer::file_writer::ParquetWriterBuilder;
    use iceberg::writer::file_writer::location_generator::{
        DefaultFileNameGenerator, DefaultLocationGenerator,
    };
    use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
    use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};

    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident, _) = table_holding(dir.path(), "upserts", &[1, 2, 3, 4]).await;

    // Keys 2 and 4 are written again (day 20_200) and deleted by equality in the same snapshot.
    let table = catalog.load_table(&ident).await.unwrap();
    let schema = table.metadata().current_schema().clone();
    let id_field = schema.field_by_name("id").unwrap().id;
    let config = EqualityDeleteWriterConfig::new(vec![id_field], schema.clone()).unwrap();
    let delete_schema =
        iceberg::arrow::arrow_schema_to_schema(config.projected_arrow_schema_ref()).unwrap();
    let rolling = RollingFileWriterBuilder::new_with_default_file_size(
        ParquetWriterBuilder::new(Default::default(), Arc::new(delete_schema)),
        table.file_io().clone(),
        DefaultLocationGenerator::new(table.metadata()).unwrap(),
        DefaultFileNameGenerator::new("eq".into(), None, iceberg::spec::DataFileFormat::Parquet),
    );
    let key_schema = config.projected_arrow_schema_ref().clone();
    let mut writer = EqualityDeleteFileWriterBuilder::new(rolling, config)
        .build(None)
        .await
        .unwrap();
    let keys =
        RecordBatch::try_new(key_schema, vec![Arc::new(Int64Array::from(vec![2, 4]))]).unwrap();
    writer.write(keys).await.unwrap();
    let mut files = writer.close().await.unwrap();
    files.extend(files_of_day(&table, &[2, 4, 5], 20_200).await);
    floe_iceberg::append_exactly_once(catalog.as_ref(), &request(&ident, files, "c2"))
        .await
        .unwrap();

    let want = vec![
        (1, 20_100),
        (2, 20_200),
        (3, 20_100),
        (4, 20_200),
        (5, 20_200),
    ];
    assert_read_by_iceberg_rust_and_duckdb(catalog.as_ref(), &ident, &want).await;
    let root = dir.path().canonicalize().unwrap();
    let refused = floe_testbed::pyiceberg::try_read_sql_table(
        "floe",
        &root.join("catalog.db"),
        &root.join("warehouse"),
        "demo.upserts",
    );
    let err = refused.expect_err("pyiceberg 0.12 does not read equality deletes");
    assert!(err.to_string().to_lowercase().contains("equality"), "{err}");
}

/// A writer in upsert mode: keys written before are replaced (equality deletes), a key written
/// twice in the batch keeps its last row (position delete), and a partitioned table whose
/// partition source is not a key column is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upsert_writer_keeps_the_latest_row_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident, _) = table_holding(dir.path(), "latest", &[1, 2, 3, 4]).await;

    let table = catalog.load_table(&ident).await.unwrap();
    let options = WriterOptions {
        file_prefix: "upsert".into(),
        changes: Some(floe_iceberg::RowChanges {
            id_columns: vec!["id".into()],
            cdc_field: None,
            upsert: true,
        }),
        ..Default::default()
    };
    let mut writer = TableWriter::new(&table, &options).await.unwrap();
    let arrow = writer.arrow_schema().clone();
    writer.write(batch(&arrow, &[2, 5], 20_150)).await.unwrap();
    writer.write(batch(&arrow, &[2], 20_200)).await.unwrap();
    writer.write(batch(&arrow, &[5], 20_200)).await.unwrap();
    let files = writer.close().await.unwrap();
    let kinds: Vec<_> = files.iter().map(|f| f.content_type()).collect();
    assert_eq!(
        files.len(),
        3,
        "data, equality deletes, position deletes: {kinds:?}"
    );
    floe_iceberg::append_exactly_once(catalog.as_ref(), &request(&ident, files, "c2"))
        .await
        .unwrap();

    let want = vec![
        (1, 20_100),
        (2, 20_200),
        (3, 20_100),
        (4, 20_100),
        (5, 20_200),
    ];
    assert_read_by_iceberg_rust_and_duckdb(catalog.as_ref(), &ident, &want).await;

    // Partitioned by day(ts), keyed by id alone: a key could move to another day.
    let (_, catalog) = sql_catalog(dir.path()).await;
    let daily = TableDefinition {
        schema: schema(),
        partition_by: vec![PartitionField::parse("day(ts)").unwrap()],
        properties: HashMap::new(),
    };
    let ident = parse_ident("demo.daily").unwrap();
    let table = ensure_table(catalog.as_ref(), &ident, &daily)
        .await
        .unwrap();
    let err = TableWriter::new(&table, &options).await.unwrap_err();
    assert!(err.to_string().contains("partitioned by `ts`"), "{err}");
}

/// The ids in data file `path` of `table`, in file order.
async fn ids_in_file(table: &Table, path: &str) -> Vec<i64> {
    let bytes = table
        .file_io()
        .new_input(path)
        .unwrap()
        .read()
        .await
        .unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .unwrap()
        .build()
        .unwrap();
    let mut out = Vec::new();
    for b in reader {
        let b = b.unwrap();
        let ids = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        out.extend(ids.values().iter().copied());
    }
    out
}

/// Where each source's rows went, on a partitioned table whose files roll after every write:
/// runs name the right file and positions even when one source's rows span files and
/// partitions, and rows written with no source are in no run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_says_where_each_sources_rows_went_across_partitions_and_rolled_files() {
    let dir = tempfile::tempdir().unwrap();
    let (_, catalog) = sql_catalog(dir.path()).await;
    let daily = TableDefinition {
        schema: schema(),
        partition_by: vec![PartitionField::parse("day(ts)").unwrap()],
        properties: HashMap::new(),
    };
    let ident = parse_ident("demo.sources").unwrap();
    let table = ensure_table(catalog.as_ref(), &ident, &daily)
        .await
        .unwrap();
    let options = WriterOptions {
        file_prefix: "sources".into(),
        // Every write after the first of a partition opens a new file.
        target_file_size_bytes: 1,
        ..Default::default()
    };
    let mut writer = TableWriter::new(&table, &options).await.unwrap();
    let arrow = writer.arrow_schema().clone();
    let (d1, d2) = (20_100, 20_101);
    writer.set_source(Some(7));
    writer.write(batch(&arrow, &[1, 2, 3], d1)).await.unwrap();
    writer.write(batch(&arrow, &[4, 5], d2)).await.unwrap();
    writer.write(batch(&arrow, &[6, 7], d1)).await.unwrap();
    writer.set_source(None);
    writer.write(batch(&arrow, &[8], d1)).await.unwrap();
    writer.set_source(Some(9));
    writer.write(batch(&arrow, &[9, 10], d1)).await.unwrap();
    writer.write(batch(&arrow, &[11], d2)).await.unwrap();
    writer.set_source(None);
    let (files, sources) = writer.close_with_sources().await.unwrap();
    assert!(files.len() >= 4, "the files rolled: {}", files.len());
    assert_eq!(sources.keys().copied().collect::<Vec<_>>(), [7, 9]);
    let mut seen = HashMap::new();
    for (source, runs) in &sources {
        let mut ids = Vec::new();
        for run in runs {
            let file = seen.entry(run.file.clone()).or_insert_with(Vec::new);
            if file.is_empty() {
                *file = ids_in_file(&table, &run.file).await;
            }
            let (start, end) = (run.start as usize, (run.start + run.rows) as usize);
            assert!(end <= file.len(), "{run:?} past the end of its file");
            ids.extend_from_slice(&file[start..end]);
        }
        ids.sort_unstable();
        let want: &[i64] = if *source == 7 {
            &[1, 2, 3, 4, 5, 6, 7]
        } else {
            &[9, 10, 11]
        };
        assert_eq!(ids, want, "source {source}: {runs:?}");
    }
}

/// A fresh format v3 table `demo.<name>` under `dir` holding ids `first` (day 20_100) in one
/// data file, committed as `c1`.
async fn v3_table_holding(
    dir: &Path,
    name: &str,
    first: &[i64],
) -> (
    Arc<dyn floe_iceberg::FloeCatalog>,
    TableIdent,
    iceberg::spec::DataFile,
) {
    let props = HashMap::from([("format-version".to_owned(), "3".to_owned())]);
    let (catalog, ident, mut files) = table_holding_with(dir, name, first, props).await;
    let table = catalog.load_table(&ident).await.unwrap();
    assert_eq!(
        table.metadata().format_version(),
        iceberg::spec::FormatVersion::V3
    );
    assert_eq!(files.len(), 1);
    (catalog, ident, files.remove(0))
}

/// The `(id, day)` of every row floe's own read returns (deletion vectors applied), sorted.
async fn read_by_floe(
    catalog: &dyn floe_iceberg::FloeCatalog,
    ident: &TableIdent,
) -> Vec<(i64, i64)> {
    let table = catalog.load_table(ident).await.unwrap();
    let scan = table.scan().select_all().build().unwrap();
    rows_of(floe_iceberg::scan::read(&table, &scan).await.unwrap()).await
}

/// floe's read, pyiceberg and DuckDB read exactly the rows `want` of `demo.<name>`; returns
/// pyiceberg's answer.
async fn assert_three_readers_agree(
    dir: &Path,
    catalog: &dyn floe_iceberg::FloeCatalog,
    ident: &TableIdent,
    want: &[(i64, i64)],
) -> serde_json::Value {
    assert_eq!(read_by_floe(catalog, ident).await, want, "floe");
    let root = dir.canonicalize().unwrap();
    let read = floe_testbed::pyiceberg::read_sql_table(
        "floe",
        &root.join("catalog.db"),
        &root.join("warehouse"),
        &ident.to_string(),
    );
    assert_eq!(read_rows(&read), want, "pyiceberg: {read}");
    let location = metadata_location(catalog, ident).await;
    // DuckDB refuses a snapshot with two deletion vectors for one data file.
    let duck = floe_testbed::duckdb::read_metadata(&location, Some("id"));
    assert_eq!(read_rows(&duck), want, "duckdb: {duck}");
    read
}

/// A format v3 table (`format-version = "3"` among the properties of the table floe creates)
/// takes floe's appends (iceberg-rust's fast append) with row lineage: each snapshot numbers
/// its rows from the table's next row id, which moves on by the rows added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v3_table_takes_appends_with_row_lineage() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident, _) = v3_table_holding(dir.path(), "lineage", &[1, 2, 3, 4]).await;
    let table = catalog.load_table(&ident).await.unwrap();
    let first = table.metadata().current_snapshot().unwrap();
    assert_eq!(first.row_range(), Some((0, 4)));
    assert_eq!(table.metadata().next_row_id(), 4);
    let files = files_of(&table, &[5, 6]).await;
    floe_iceberg::append_exactly_once(catalog.as_ref(), &request(&ident, files, "c2"))
        .await
        .unwrap();
    let table = catalog.load_table(&ident).await.unwrap();
    assert_eq!(
        table.metadata().current_snapshot().unwrap().row_range(),
        Some((4, 2))
    );
    assert_eq!(table.metadata().next_row_id(), 6);
    let want: Vec<(i64, i64)> = (1..=6).map(|i| (i, 20_100)).collect();
    let read = assert_three_readers_agree(dir.path(), catalog.as_ref(), &ident, &want).await;
    assert_eq!(read["format_version"], 3, "{read}");
    assert_eq!(read["next_row_id"], 6, "{read}");
    let mut lineage: Vec<(i64, i64)> = (read["snapshots"].as_array().unwrap().iter())
        .map(|s| {
            (
                s["first_row_id"].as_i64().unwrap(),
                s["added_rows"].as_i64().unwrap(),
            )
        })
        .collect();
    lineage.sort();
    assert_eq!(lineage, [(0, 4), (4, 2)], "{read}");
}

/// Position deletes on a v3 table are deletion vectors, at most one per data file in a
/// snapshot: a second commit deleting from a file that has one, with two vectors of its own for
/// that file, lands one vector holding all four positions and marks the old one deleted. Each
/// commit lands once when its answer is lost; floe's read, pyiceberg and DuckDB read the same
/// rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_vectors_delete_rows_of_a_v3_table_one_per_data_file() {
    use floe_iceberg::delta::{PositionDeletes, write_position_deletes};
    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident, first) = v3_table_holding(dir.path(), "dvs", &[1, 2, 3, 4, 5, 6]).await;

    // Rows 1 and 3 (ids 2 and 4) go, id 7 comes: one snapshot, its answer lost once.
    let table = catalog.load_table(&ident).await.unwrap();
    let dv = write_position_deletes(&table, &PositionDeletes::of(&first, vec![3, 1]))
        .await
        .unwrap();
    assert_eq!(dv.file_format(), iceberg::spec::DataFileFormat::Puffin);
    assert_eq!(
        dv.referenced_data_file().as_deref(),
        Some(first.file_path())
    );
    assert_eq!(dv.record_count(), 2);
    let mut files = files_of(&table, &[7]).await;
    files.push(dv.clone());
    commit_losing_the_first_answer(catalog.as_ref(), &request(&ident, files, "c2")).await;
    let want = [
        (1, 20_100),
        (3, 20_100),
        (5, 20_100),
        (6, 20_100),
        (7, 20_100),
    ];
    assert_three_readers_agree(dir.path(), catalog.as_ref(), &ident, &want).await;

    // Rows 0 and 5 (ids 1 and 6), as two vectors of one commit: merged with the first.
    let table = catalog.load_table(&ident).await.unwrap();
    let mut files = Vec::new();
    for pos in [0, 5] {
        let deletes = PositionDeletes::of(&first, vec![pos]);
        files.push(write_position_deletes(&table, &deletes).await.unwrap());
    }
    floe_iceberg::append_exactly_once(catalog.as_ref(), &request(&ident, files, "c3"))
        .await
        .unwrap();
    let want = [(3, 20_100), (5, 20_100), (7, 20_100)];
    let read = assert_three_readers_agree(dir.path(), catalog.as_ref(), &ident, &want).await;

    // One live vector for the file, of four positions; the first one marked deleted.
    let table = catalog.load_table(&ident).await.unwrap();
    let snapshot = table.metadata().current_snapshot().unwrap();
    let list = table.manifest_list_reader(snapshot).load().await.unwrap();
    let (mut live, mut deleted) = (Vec::new(), Vec::new());
    for m in list.entries() {
        let loaded = m.load_manifest(table.file_io()).await.unwrap();
        for e in loaded.entries() {
            if e.content_type() != iceberg::spec::DataContentType::PositionDeletes {
                continue;
            }
            let key = (e.file_path().to_owned(), e.data_file().content_offset());
            if e.is_alive() {
                live.push((key, e.record_count()));
            } else {
                deleted.push(key);
            }
        }
    }
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!(live[0].1, 4);
    assert_eq!(deleted, [(dv.file_path().to_owned(), dv.content_offset())]);
    // Row lineage: 6 rows, then 1, then none.
    assert_one_vector(&read, first.file_path(), 4, "c3", (7, 0));
    assert_eq!(table.metadata().next_row_id(), 7);
}

/// The deletion vectors floe writes are what pyiceberg decodes: the positions of each data
/// file, from blobs whose offset and length are what the manifest entries say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyiceberg_decodes_the_deletion_vectors_floe_writes() {
    use floe_iceberg::dv::{Vector, read_vector, write_vectors};
    let dir = tempfile::tempdir().unwrap();
    let props = HashMap::from([("format-version".to_owned(), "3".to_owned())]);
    let (_, _, table) = fresh_table_with(dir.path(), "codec", props).await;
    let vectors = [
        ("file:///a.parquet", vec![1u64, 5, 9]),
        ("file:///b.parquet", vec![0, 70_000, 200_000, (1 << 32) + 3]),
    ]
    .map(|(f, p)| Vector {
        data_file: f.to_owned(),
        partition: iceberg::spec::Struct::empty(),
        spec_id: 0,
        positions: p.into_iter().collect(),
    });
    let files = write_vectors(&table, &vectors).await.unwrap();
    assert_eq!(files.len(), 2);
    assert_eq!(
        files[0].file_path(),
        files[1].file_path(),
        "one Puffin file"
    );
    for (f, v) in files.iter().zip(&vectors) {
        assert_eq!(read_vector(table.file_io(), f).await.unwrap(), v.positions);
    }
    let path = files[0].file_path().trim_start_matches("file://");
    let decoded = floe_testbed::pyiceberg::read_deletion_vectors(Path::new(path));
    for v in &vectors {
        let want: Vec<u64> = v.positions.iter().collect();
        assert_eq!(
            decoded["vectors"][&v.data_file],
            serde_json::json!(want),
            "{decoded}"
        );
    }
    let blobs = decoded["blobs"].as_array().unwrap();
    for (b, f) in blobs.iter().zip(&files) {
        assert_eq!(b["type"], "deletion-vector-v1", "{decoded}");
        assert_eq!(b["fields"], serde_json::json!([2_147_483_645]), "{decoded}");
        assert_eq!(b["snapshot_id"], -1, "{decoded}");
        assert_eq!(b["sequence_number"], -1, "{decoded}");
        assert_eq!(b["compression"], serde_json::Value::Null, "{decoded}");
        assert_eq!(b["offset"].as_i64(), f.content_offset(), "{decoded}");
        assert_eq!(b["length"].as_i64(), f.content_size_in_bytes(), "{decoded}");
        let props = &b["properties"];
        assert_eq!(
            props["referenced-data-file"],
            f.referenced_data_file().unwrap()
        );
        assert_eq!(props["cardinality"], f.record_count().to_string());
    }
}

/// A damaged deletion vector is refused, with an error naming its file, rather than read as
/// some other set of rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_deletion_vector_is_refused_naming_its_file() {
    use floe_iceberg::delta::{PositionDeletes, write_position_deletes};
    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident, first) = v3_table_holding(dir.path(), "damaged", &[1, 2, 3]).await;
    let table = catalog.load_table(&ident).await.unwrap();
    let dv = write_position_deletes(&table, &PositionDeletes::of(&first, vec![1]))
        .await
        .unwrap();
    floe_iceberg::append_exactly_once(catalog.as_ref(), &request(&ident, vec![dv.clone()], "c2"))
        .await
        .unwrap();
    assert_eq!(
        read_by_floe(catalog.as_ref(), &ident).await,
        [(1, 20_100), (3, 20_100)]
    );
    let path = dv.file_path().trim_start_matches("file://").to_owned();
    let mut bytes = std::fs::read(&path).unwrap();
    let at = dv.content_offset().unwrap() as usize + 12;
    bytes[at] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();
    let table = catalog.load_table(&ident).await.unwrap();
    let scan = table.scan().select_all().build().unwrap();
    let err = match floe_iceberg::scan::read(&table, &scan).await {
        Ok(_) => panic!("a damaged deletion vector was read"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains(dv.file_path()) && err.contains("checksum"),
        "{err}"
    );
}

/// Compaction of a v3 table applies its deletion vectors (iceberg-rust's reader does not):
/// the rows stay, the vectors go with the data files they deleted from, the replacing snapshot
/// carries row lineage, and the Puffin file stays referenced while an older snapshot holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_of_a_v3_table_applies_its_deletion_vectors() {
    use floe_iceberg::delta::{PositionDeletes, write_position_deletes};
    use floe_iceberg::maintain::{CompactOptions, compact, rewrite_updates};
    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident, first) =
        v3_table_holding(dir.path(), "compacted", &[1, 2, 3, 4, 5, 6]).await;
    let table = catalog.load_table(&ident).await.unwrap();
    let dv = write_position_deletes(&table, &PositionDeletes::of(&first, vec![1, 3]))
        .await
        .unwrap();
    let mut files = files_of(&table, &[7]).await;
    files.push(dv.clone());
    floe_iceberg::append_exactly_once(catalog.as_ref(), &request(&ident, files, "c2"))
        .await
        .unwrap();
    let want = [
        (1, 20_100),
        (3, 20_100),
        (5, 20_100),
        (6, 20_100),
        (7, 20_100),
    ];

    let table = catalog.load_table(&ident).await.unwrap();
    let next_row_id = table.metadata().next_row_id();
    let opts = CompactOptions {
        target_file_size_bytes: 64 << 20,
        file_prefix: "maint".into(),
        branch: "main".into(),
        tracks_rows: true,
    };
    let rewrite = compact(&table, &opts).await.unwrap();
    assert!(rewrite.skipped.is_empty(), "{:?}", rewrite.skipped);
    assert_eq!(rewrite.added.len(), 1);
    assert_eq!(rewrite.moved[first.file_path()].deleted, [1, 3]);
    let (requirements, updates) = rewrite_updates(&table, "main", &rewrite, HashMap::new())
        .await
        .unwrap();
    catalog
        .commit_updates(&ident, requirements, updates)
        .await
        .unwrap();
    let read = assert_three_readers_agree(dir.path(), catalog.as_ref(), &ident, &want).await;
    assert_eq!(read["files"].as_array().unwrap().len(), 1, "{read}");
    assert_eq!(read["deletes"], serde_json::json!([]), "{read}");
    let table = catalog.load_table(&ident).await.unwrap();
    let snapshot = table.metadata().current_snapshot().unwrap();
    assert_eq!(snapshot.first_row_id(), Some(next_row_id));
    assert!(table.metadata().next_row_id() >= next_row_id + 5);
    let referenced = floe_iceberg::orphans::referenced_files(&table)
        .await
        .unwrap();
    let puffin = floe_iceberg::orphans::normal(dv.file_path());
    assert!(
        referenced.contains(&puffin),
        "{puffin} not in {referenced:?}"
    );
}

/// A v2 table upgraded to v3 keeps its Parquet position deletes; the first deletion vector for
/// a data file that has one holds its positions too and replaces it (the spec: a vector must
/// hold every earlier delete of its file), and the first v3 snapshot gives the rows already
/// there their row ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_vector_on_an_upgraded_table_takes_over_its_position_deletes() {
    use floe_iceberg::delta::{PositionDeletes, write_position_deletes};
    let dir = tempfile::tempdir().unwrap();
    let (catalog, ident, first) = table_holding(dir.path(), "upgraded", &[1, 2, 3, 4, 5, 6]).await;
    let table = catalog.load_table(&ident).await.unwrap();
    let parquet = write_position_deletes(&table, &PositionDeletes::of(&first[0], vec![1]))
        .await
        .unwrap();
    assert_eq!(
        parquet.file_format(),
        iceberg::spec::DataFileFormat::Parquet
    );
    floe_iceberg::append_exactly_once(
        catalog.as_ref(),
        &request(&ident, vec![parquet.clone()], "c2"),
    )
    .await
    .unwrap();
    let upgrade = iceberg::TableUpdate::UpgradeFormatVersion {
        format_version: iceberg::spec::FormatVersion::V3,
    };
    catalog
        .commit_updates(&ident, Vec::new(), vec![upgrade])
        .await
        .unwrap();

    let table = catalog.load_table(&ident).await.unwrap();
    assert_eq!(
        table.metadata().format_version(),
        iceberg::spec::FormatVersion::V3
    );
    let dv = write_position_deletes(&table, &PositionDeletes::of(&first[0], vec![3]))
        .await
        .unwrap();
    assert_eq!(dv.file_format(), iceberg::spec::DataFileFormat::Puffin);
    floe_iceberg::append_exactly_once(catalog.as_ref(), &request(&ident, vec![dv], "c3"))
        .await
        .unwrap();
    let want = [(1, 20_100), (3, 20_100), (5, 20_100), (6, 20_100)];
    let read = assert_three_readers_agree(dir.path(), catalog.as_ref(), &ident, &want).await;
    // The upgrade starts row ids at 0; the six rows there get theirs in this snapshot.
    assert_one_vector(&read, first[0].file_path(), 2, "c3", (0, 6));
}

/// In pyiceberg's `read`, `data_file` has one delete file, a deletion vector of `positions`
/// positions, and the snapshot of `commit_id` counts it as the table's only one and has row
/// range `lineage` (first row id, added rows). (pyiceberg 0.12 plans a vector for every data
/// file of its partition, ignoring `referenced_data_file`, and then applies each blob to the
/// file its blob properties name.)
fn assert_one_vector(
    read: &serde_json::Value,
    data_file: &str,
    positions: u64,
    commit_id: &str,
    lineage: (i64, i64),
) {
    let deletes: Vec<&serde_json::Value> = (read["deletes"].as_array().unwrap().iter())
        .filter(|d| d["data_file"] == data_file)
        .collect();
    assert_eq!(deletes.len(), 1, "pyiceberg applies one vector: {read}");
    assert_eq!(deletes[0]["format"], "puffin", "{read}");
    assert_eq!(deletes[0]["record_count"], positions, "{read}");
    let snapshot = (read["snapshots"].as_array().unwrap().iter())
        .find(|s| s["summary"]["floe.commit-id"] == commit_id)
        .unwrap();
    let summary = &snapshot["summary"];
    assert_eq!(summary["total-delete-files"], "1", "{read}");
    assert_eq!(
        summary["total-position-deletes"],
        positions.to_string(),
        "{read}"
    );
    let range = (
        snapshot["first_row_id"].as_i64(),
        snapshot["added_rows"].as_i64(),
    );
    assert_eq!(range, (Some(lineage.0), Some(lineage.1)), "{read}");
}
