//! Every crash point of the protocol (see [`crate::protocol`]), in-process: a pipeline halts at
//! the point (its future is dropped there, nothing after it runs), another pipeline on the same
//! SQLite checkpoint table and the same in-memory Iceberg catalog recovers, and every row is in
//! the table exactly once.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::Int64Array;
use futures::TryStreamExt;
use iceberg::io::LocalFsStorageFactory;
use iceberg::memory::MemoryCatalogBuilder;
use iceberg::{Catalog, CatalogBuilder, TableIdent};

use crate::config::{FloeConfig, parse};
use crate::fault::Faults;
use crate::pipeline::Pipeline;

const CONFIG: &str = r#"
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

/// How long the crashed instance's claims and lease last (set below the options' minimum: the
/// recovering pipeline waits them out).
const TIMEOUT_MS: u64 = 40;

/// Three objects of three rows each (ids 1..=9), one with a bad line (dead-lettered).
fn write_bucket(dir: &Path) {
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

async fn memory_catalog(dir: &Path) -> Arc<dyn Catalog> {
    let warehouse = dir.join("warehouse");
    std::fs::create_dir_all(&warehouse).unwrap();
    let props = HashMap::from([(
        "warehouse".to_owned(),
        format!("file://{}", warehouse.display()),
    )]);
    let catalog = MemoryCatalogBuilder::default()
        .with_storage_factory(Arc::new(LocalFsStorageFactory))
        .load("floe", props)
        .await
        .unwrap();
    Arc::new(catalog)
}

async fn pipeline(dir: &Path, catalog: &Arc<dyn Catalog>, faults: Faults) -> Pipeline {
    let raw = parse(CONFIG, false).unwrap();
    let mut config = FloeConfig::from_raw(raw, dir).unwrap();
    config.ingest.claim_timeout_ms = TIMEOUT_MS;
    config.commit.lease_ms = TIMEOUT_MS;
    Pipeline::builder(config)
        .catalog(catalog.clone())
        .faults(faults)
        .build()
        .await
        .unwrap()
}

/// The ids in `t.events`, sorted.
async fn ids(catalog: &Arc<dyn Catalog>) -> Vec<i64> {
    let ident = TableIdent::from_strs(["t", "events"]).unwrap();
    let table = catalog.load_table(&ident).await.unwrap();
    let scan = table.scan().select(["id"]).build().unwrap();
    let batches: Vec<_> = scan.to_arrow().await.unwrap().try_collect().await.unwrap();
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

/// Halt a pass at `point`, recover with a fresh pipeline, check every row once.
async fn crash_and_recover(point: &str) {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = memory_catalog(dir.path()).await;
    {
        let crashed = pipeline(dir.path(), &catalog, Faults::halt_at(point)).await;
        tokio::select! {
            r = crashed.run_once(true) => panic!("{point}: the pass ended without reaching the point: {r:?}"),
            () = crashed.faults().halted() => {}
        }
    }
    tokio::time::sleep(Duration::from_millis(TIMEOUT_MS + 10)).await;
    let p = pipeline(dir.path(), &catalog, Faults::default()).await;
    let first = p.run_once(true).await.unwrap();
    assert!(
        first.failures().is_empty(),
        "{point}: {:?}",
        first.failures()
    );
    let again = p.run_once(true).await.unwrap();
    assert_eq!(again.rows(), 0, "{point}: a second pass lands nothing");
    assert!(
        again.commits.commits.is_empty(),
        "{point}: {:?}",
        again.commits
    );
    assert_eq!(ids(&catalog).await, (1..=9).collect::<Vec<_>>(), "{point}");
    assert!(
        p.staged_summary().await.unwrap().is_empty(),
        "{point}: nothing left staged"
    );
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
            for p in crate::fault::POINTS {
                let elsewhere = p.starts_with("commit.mc.") || p.starts_with("backfill.");
                assert!(elsewhere || tested.contains(p), "no in-process test for {p}");
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

#[tokio::test]
async fn a_pass_without_faults_lands_every_row_once() {
    let dir = tempfile::tempdir().unwrap();
    write_bucket(dir.path());
    let catalog = memory_catalog(dir.path()).await;
    let p = pipeline(dir.path(), &catalog, Faults::default()).await;
    let report = p.run_once(true).await.unwrap();
    assert_eq!(report.rows(), 9);
    assert_eq!(report.dead_letters(), 1);
    assert_eq!(ids(&catalog).await, (1..=9).collect::<Vec<_>>());
}
