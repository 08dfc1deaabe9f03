//! `floe backfill` end to end on s3s-fs: several thousand objects over several prefixes, the
//! process stopped midway (after a page was landed and its token saved, and after a page was
//! landed but before its token was saved) and started again, every object landing once;
//! and a backfill whose checkpoint table lives in a bucket (`[checkpoint] type =
//! "object-store"`).

mod common;

use std::path::Path;

use common::{counts, floe_async, read_async};
use floe_testbed::servers::S3sFs;

const BUCKET: &str = "bulk";
const PREFIXES: [&str; 3] = ["logs/", "metrics/", "traces/"];
const PER_PREFIX: usize = 1200;

/// Write `n` small objects under `prefix` straight into s3s-fs's folder (it serves what is
/// there; its listing has no ETags, so floe asks for them).
fn make_objects(s3s: &S3sFs, prefix: &str, n: usize) {
    let root = s3s.root().join(BUCKET).join(prefix);
    for i in 0..n {
        let dir = root.join(format!("part-{:02}", i % 7));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{i:05}.json")), format!("{{\"i\":{i}}}")).unwrap();
    }
}

fn config(s3s: &S3sFs, path: &str, checkpoint: &str) -> String {
    format!(
        r#"
[source]
type = "s3"
bucket = "{BUCKET}"
path = "{path}"
page-size = 500
s3.endpoint = "{ep}"
s3.region = "{region}"
s3.path-style-access = true
s3.access-key-id = "{key}"
s3.secret-access-key = "{secret}"

{checkpoint}

[iceberg]
catalog.type = "sql"
catalog.uri = "catalog.db"
catalog.warehouse = "warehouse"

[[routes]]
table = "lake.objects"
mode = "metadata"
columns = ["key", "url", "bucket", "size", "eTag"]
"#,
        ep = s3s.endpoint(),
        region = S3sFs::REGION,
        key = S3sFs::ACCESS_KEY_ID,
        secret = S3sFs::SECRET_ACCESS_KEY,
    )
}

async fn backfill(dir: &Path, fault: Option<&str>) -> common::Ran {
    let mut env = Vec::new();
    if let Some(f) = fault {
        env.push(("FLOE_FAULT", f));
    }
    floe_async(
        dir,
        &["backfill", "--config", "floe.toml", "--progress"],
        &env,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_stopped_midway_resumes_and_lands_every_object_once() {
    let s3s = S3sFs::start().await.expect("start s3s-fs");
    s3s.create_bucket(BUCKET).unwrap();
    for p in PREFIXES {
        make_objects(&s3s, p, PER_PREFIX);
    }
    make_objects(&s3s, "elsewhere/", 10); // outside `path`
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("floe.toml"),
        config(
            &s3s,
            &PREFIXES.join(","),
            "[checkpoint]\npath = \"checkpoint.db\"",
        ),
    )
    .unwrap();

    // Stopped after the fourth page (the first of metrics/) was landed and its token saved.
    let r = backfill(dir, Some("backfill.after-page@4"))
        .await
        .expect_code(86, "the first fault fires");
    assert!(
        r.stderr.contains("logs/: 500 objects landed\n")
            && r.stderr.contains("logs/: 1200 objects landed, done\n"),
        "progress lines: {}",
        r.stderr
    );
    // Stopped after a page was landed but before its token was saved: it is listed again.
    backfill(dir, Some("backfill.after-ingest@2"))
        .await
        .expect_code(86, "the second fault fires");
    let r = backfill(dir, None)
        .await
        .expect_code(0, "the resumed backfill");
    assert!(r.stdout.contains("backfill: done"), "{}", r.stdout);
    for p in PREFIXES {
        assert!(
            r.stdout
                .contains(&format!("{p}: {PER_PREFIX} objects, done")),
            "{p}: {}",
            r.stdout
        );
    }
    assert!(
        r.stdout.contains("duplicates: 200"),
        "the page listed twice: {}",
        r.stdout
    );

    let table = read_async(dir, "lake.objects").await;
    let keys = counts(&table, "key");
    assert_eq!(keys.len(), PREFIXES.len() * PER_PREFIX, "every object");
    assert!(keys.values().all(|n| *n == 1), "every object once");
    assert!(keys.keys().all(|k| !k.starts_with("elsewhere/")));
    let row = &table["rows"].as_array().unwrap()[0];
    assert_eq!(row["bucket"], BUCKET);
    assert!(
        row["url"].as_str().unwrap().starts_with("s3://bulk/"),
        "{row}"
    );
    assert_eq!(row["eTag"].as_str().unwrap().len(), 32, "{row}");
    common::assert_commit_ids_unique(&table);

    // A SNAPSHOT is taken once.
    let r = backfill(dir, None).await.expect_code(0, "again");
    assert!(r.stdout.contains("nothing to list"), "{}", r.stdout);
    assert_eq!(
        read_async(dir, "lake.objects").await["count"],
        PREFIXES.len() * PER_PREFIX
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checkpoint_table_can_live_in_a_bucket() {
    let s3s = S3sFs::start().await.expect("start s3s-fs");
    s3s.create_bucket(BUCKET).unwrap();
    s3s.create_bucket("state").unwrap();
    make_objects(&s3s, "logs/", 30);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("floe.toml"),
        config(
            &s3s,
            "logs/",
            "[checkpoint]\ntype = \"object-store\"\nbucket = \"state\"\nprefix = \"floe/\"",
        ),
    )
    .unwrap();
    let r = floe_async(dir, &["run", "--config", "floe.toml"], &[])
        .await
        .expect_code(0, "run");
    assert!(r.stdout.contains("backfill: done"), "{}", r.stdout);
    assert_eq!(read_async(dir, "lake.objects").await["count"], 30);
    // The entries are objects in the state bucket (the startup decision among them).
    let names: Vec<String> = std::fs::read_dir(s3s.root().join("state/floe"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n == "cursor%2Fs3-bulk"), "{names:?}");
    assert!(!dir.join("checkpoint.db").exists());
}
