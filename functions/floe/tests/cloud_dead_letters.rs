//! Dead letters in the state bucket, end to end on s3s-fs: `[dead-letter] path =
//! "s3://state/floe/dead-letter/"` puts them there and nowhere on local disk; `floe dead-letters
//! list` names them; a fixed object replays once (twice lands nothing more); an object with only
//! bad records is left out of `replay --all` so its good rows do not land twice.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};

use common::{floe_async, read_async};
use floe_testbed::servers::S3sFs;

const BUCKET: &str = "landing";

fn config(s3s: &S3sFs) -> String {
    format!(
        r#"
[source]
type = "s3"
bucket = "{BUCKET}"
path = "events/"
s3.endpoint = "{ep}"
s3.region = "{region}"
s3.path-style-access = true
s3.access-key-id = "{key}"
s3.secret-access-key = "{secret}"

[iceberg]
catalog.type = "sql"
catalog.uri = "catalog.db"
catalog.warehouse = "warehouse"

[dead-letter]
path = "s3://state/floe/dead-letter/"

[[routes]]
table = "lake.events"
mode = "records"
on-error = "dead-letter"
schema = '{{"fields":[{{"name":"id","type":"long","required":true}},{{"name":"v","type":"string"}}]}}'
"#,
        ep = s3s.endpoint(),
        region = S3sFs::REGION,
        key = S3sFs::ACCESS_KEY_ID,
        secret = S3sFs::SECRET_ACCESS_KEY,
    )
}

fn put(s3s: &S3sFs, key: &str, body: &[u8]) {
    let path = s3s.root().join(BUCKET).join(key);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
}

fn gzip(text: &str) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(text.as_bytes()).unwrap();
    enc.finish().unwrap()
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

async fn rows_by_floe(dir: &Path) -> String {
    floe_async(dir, &["tables", "list", "--config", "floe.toml"], &[])
        .await
        .expect_code(0, "tables list")
        .stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_live_in_the_state_bucket_and_fixed_objects_replay_once() {
    let s3s = S3sFs::start().await.expect("start s3s-fs");
    s3s.create_bucket(BUCKET).unwrap();
    s3s.create_bucket("state").unwrap();
    put(
        &s3s,
        "events/good.ndjson",
        b"{\"id\":1,\"v\":\"a\"}\n{\"id\":2,\"v\":\"b\"}\n{\"id\":3,\"v\":\"c\"}\n",
    );
    // One bad record among good ones: a record-level letter; the good rows land.
    put(
        &s3s,
        "events/mixed.ndjson",
        b"{\"id\":10,\"v\":\"x\"}\nthis is not json\n{\"id\":11,\"v\":\"y\"}\n",
    );
    // Not gzip at all: the whole object is set aside.
    put(&s3s, "events/broken.ndjson.gz", b"definitely not gzip");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("floe.toml"), config(&s3s)).unwrap();

    let r = floe_async(dir, &["backfill", "--config", "floe.toml"], &[])
        .await
        .expect_code(0, "backfill");
    assert!(r.stdout.contains("backfill: done"), "{}", r.stdout);
    assert_eq!(
        read_async(dir, "lake.events").await["count"],
        5,
        "good + mixed's good"
    );

    // The letters are objects in the state bucket under the prefix, and nothing is on disk.
    let letter_files = files_under(&s3s.root().join("state/floe/dead-letter"));
    assert!(
        !letter_files.is_empty(),
        "no dead letters in the state bucket"
    );
    assert!(
        letter_files
            .iter()
            .all(|p| p.to_string_lossy().ends_with(".ndjson")),
        "{letter_files:?}"
    );
    let text: String = letter_files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(text.contains("events/broken.ndjson.gz"), "{text}");
    assert!(text.contains("this is not json"), "{text}");
    assert!(
        files_under(dir)
            .iter()
            .all(|p| !p.to_string_lossy().contains("dead-letter")),
        "dead letters on local disk: {:?}",
        files_under(dir)
    );

    // `list` names both objects, whole and partial, with reasons.
    let r = floe_async(dir, &["dead-letters", "list", "--config", "floe.toml"], &[])
        .await
        .expect_code(0, "list");
    assert!(
        r.stdout
            .contains("dead letters at s3://state/floe/dead-letter/"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("s3://landing/events/broken.ndjson.gz (whole)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("s3://landing/events/mixed.ndjson (1 records)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(
            "total: 1 files, 2 letters, 2 objects (1 set aside whole, 1 with bad records only)"
        ),
        "{}",
        r.stdout
    );
    let r = floe_async(
        dir,
        &["dead-letters", "list", "--config", "floe.toml", "--json"],
        &[],
    )
    .await
    .expect_code(0, "list --json");
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["totals"]["letters"], 2);
    let key = doc["files"][0]["key"].as_str().unwrap().to_owned();
    assert!(key.ends_with("-0000.ndjson"), "{key}");

    // `show` prints the letters with line, reason and raw text.
    let r = floe_async(
        dir,
        &["dead-letters", "show", "--config", "floe.toml", &key],
        &[],
    )
    .await
    .expect_code(0, "show");
    assert!(
        r.stdout
            .contains("s3://landing/events/mixed.ndjson line 2 [route route0]"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("raw: this is not json"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("s3://landing/events/broken.ndjson.gz whole object"),
        "{}",
        r.stdout
    );

    // Replaying before the fix lands nothing: that version was already dead-lettered.
    let r = floe_async(
        dir,
        &["dead-letters", "replay", "--config", "floe.toml", "--all"],
        &[],
    )
    .await
    .expect_code(0, "replay before the fix");
    assert!(
        r.stdout.contains("is the one that was dead-lettered"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("left out: s3://landing/events/mixed.ndjson"),
        "{}",
        r.stdout
    );
    assert_eq!(read_async(dir, "lake.events").await["count"], 5);

    // Fixed: the new version lands, once; mixed.ndjson is left out (its good rows are in).
    put(
        &s3s,
        "events/broken.ndjson.gz",
        &gzip("{\"id\":20,\"v\":\"p\"}\n{\"id\":21,\"v\":\"q\"}\n"),
    );
    let r = floe_async(
        dir,
        &["dead-letters", "replay", "--config", "floe.toml", "--all"],
        &[],
    )
    .await
    .expect_code(0, "replay");
    assert!(
        r.stdout
            .contains("s3://landing/events/broken.ndjson.gz: landed (version "),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("1 landed (2 rows)"), "{}", r.stdout);
    assert!(r.stdout.contains("committed lake.events"), "{}", r.stdout);
    let table = read_async(dir, "lake.events").await;
    assert_eq!(table["count"], 7);
    common::assert_commit_ids_unique(&table);

    // Again: a duplicate, nothing lands.
    let r = floe_async(
        dir,
        &[
            "dead-letters",
            "replay",
            "--config",
            "floe.toml",
            "s3://landing/events/broken.ndjson.gz",
        ],
        &[],
    )
    .await
    .expect_code(0, "replay again");
    assert!(r.stdout.contains("already landed"), "{}", r.stdout);
    assert!(r.stdout.contains("0 landed"), "{}", r.stdout);
    assert_eq!(read_async(dir, "lake.events").await["count"], 7);
    let listed = rows_by_floe(dir).await;
    assert!(
        listed
            .lines()
            .any(|l| l.contains("events") && l.contains("\t7 rows\t")),
        "{listed}"
    );

    // The letters were not touched by the replays, and still nothing on local disk.
    assert_eq!(
        files_under(&s3s.root().join("state/floe/dead-letter")),
        letter_files
    );
    assert!(
        files_under(dir)
            .iter()
            .all(|p| !p.to_string_lossy().contains("dead-letter"))
    );
}
