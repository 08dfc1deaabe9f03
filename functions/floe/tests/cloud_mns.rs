//! `floe run` with an MNS source end to end: OSS-shaped event notifications in the MNS emulator
//! (raw and base64 bodies), objects served by s3s-fs standing in for OSS's S3-compatible
//! endpoint, an Iceberg SQL catalog in a temp dir read back with pyiceberg.
//!
//! One test per startup mode shows what the mode skips and what it lands, on the same story:
//!
//! | object | in `path` (`data/`) | its message enqueued |
//! |---|---|---|
//! | `data/a.ndjson` (ids 1, 2) | yes | an hour before the first run |
//! | `data/b.ndjson` (ids 3, 4) | yes | ten minutes before |
//! | `data/quiet.ndjson` (id 5) | yes | never (only a listing finds it) |
//! | `other/c.ndjson` (id 6) | no | five minutes before |
//! | `data/d.ndjson` (id 7) | yes | between the first and the second run |
//!
//! Then: a message that keeps failing is dead-lettered with its error after `max-deliveries`,
//! and a crash after staging (before the delete) lands every row once after redelivery.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use common::{Ran, counts, dead_letters, floe_async, read_async};
use floe_core::Provider;
use floe_signing::Credentials;
use floe_storage::{ObjectStore, PutMode, S3Store, S3StoreConfig};
use floe_testbed::mns::{MnsEmulator, MnsEmulatorConfig};
use floe_testbed::servers::S3sFs;

const QUEUE: &str = "oss-events";
const BUCKET: &str = "landing";
const REGION: &str = "cn-hangzhou";
const MNS_KEY_ID: &str = "LTAI5tFloeMnsTestKey";
const MNS_SECRET: &str = "floe-mns-test-secret-0123456789";
const MINUTE: i64 = 60_000;

struct Bed {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    _s3s: S3sFs,
    mns: MnsEmulator,
    store: S3Store,
    /// When the test started (the messages' clock).
    t0: i64,
}

fn creds() -> Credentials {
    Credentials::new(MNS_KEY_ID, MNS_SECRET)
}

/// s3s-fs with the bucket, the MNS emulator with the queue, and a configuration whose
/// `[source]` ends with `source_extra`.
async fn bed(source_extra: &str, visibility: Duration) -> Bed {
    let s3s = S3sFs::start().await.expect("start s3s-fs");
    s3s.create_bucket(BUCKET).unwrap();
    let store = S3Store::new(
        S3StoreConfig::new(Provider::Oss, BUCKET)
            .with_endpoint(s3s.endpoint())
            .with_region(REGION)
            .with_path_style(true)
            .with_keys(S3sFs::ACCESS_KEY_ID, S3sFs::SECRET_ACCESS_KEY, None),
    )
    .await
    .unwrap();
    let mns = MnsEmulator::start(
        MnsEmulatorConfig::new(creds())
            .with_queue(QUEUE)
            .with_visibility_timeout(visibility),
    )
    .await
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_owned();
    let config = format!(
        r#"
[source]
type = "mns"
endpoint = "{mns}"
region = "{REGION}"
queue-name = "{QUEUE}"
access-key-id = "{MNS_KEY_ID}"
access-key-secret = "${{env:FLOE_TEST_MNS_SECRET}}"
batch-size = 16
polling-wait-time = "0s"
oss-bucket = "{BUCKET}"
s3.endpoint = "{s3}"
s3.path-style-access = true
s3.access-key-id = "{s3_key}"
s3.secret-access-key = "{s3_secret}"
{source_extra}

[iceberg]
catalog.type = "sql"
catalog.uri = "catalog.db"
catalog.warehouse = "warehouse"

[[routes]]
name = "events"
table = "lake.events"
schema = '{{"fields":[{{"name":"id","type":"long","required":true}},{{"name":"key","type":"string"}}]}}'
on-error = "fail"
"#,
        mns = mns.endpoint(),
        s3 = s3s.endpoint(),
        s3_key = S3sFs::ACCESS_KEY_ID,
        s3_secret = S3sFs::SECRET_ACCESS_KEY,
    );
    std::fs::write(dir.join("floe.toml"), config).unwrap();
    let t0 = mns.now_ms();
    Bed {
        _tmp: tmp,
        dir,
        _s3s: s3s,
        mns,
        store,
        t0,
    }
}

impl Bed {
    /// Put an NDJSON object of `ids`; returns its ETag as OSS reports it (uppercase hex).
    async fn put(&self, key: &str, ids: &[i64]) -> (String, u64) {
        let body: String = ids
            .iter()
            .map(|i| format!("{{\"id\":{i},\"key\":\"{key}\"}}\n"))
            .collect();
        let size = body.len() as u64;
        let etag = self
            .store
            .put(key, Bytes::from(body), PutMode::Overwrite)
            .await
            .unwrap()
            .unwrap();
        (etag.to_ascii_uppercase(), size)
    }

    /// Enqueue an OSS `ObjectCreated:PutObject` event for `key`, base64-encoded as OSS does
    /// (every other message raw, as some producers send them).
    fn notify(&self, key: &str, etag: &str, size: u64, enqueue_ms: i64) {
        let event = floe_testbed::mns::oss_put_event(REGION, BUCKET, key, etag, size, enqueue_ms);
        let body = if key.len().is_multiple_of(2) {
            base64::engine::general_purpose::STANDARD.encode(event)
        } else {
            event
        };
        self.mns.send_message_at(QUEUE, &body, enqueue_ms).unwrap();
    }

    /// The story's objects and messages before the first run.
    async fn before_first_run(&self) {
        let (a, a_size) = self.put("data/a.ndjson", &[1, 2]).await;
        let (b, b_size) = self.put("data/b.ndjson", &[3, 4]).await;
        self.put("data/quiet.ndjson", &[5]).await;
        let (c, c_size) = self.put("other/c.ndjson", &[6]).await;
        self.notify("data/a.ndjson", &a, a_size, self.t0 - 60 * MINUTE);
        self.notify("data/b.ndjson", &b, b_size, self.t0 - 10 * MINUTE);
        self.notify("other/c.ndjson", &c, c_size, self.t0 - 5 * MINUTE);
    }

    /// The story's object and message between the runs.
    async fn between_runs(&self) {
        let (d, d_size) = self.put("data/d.ndjson", &[7]).await;
        self.notify("data/d.ndjson", &d, d_size, self.mns.now_ms());
    }

    /// Rewrite `floe.toml` with `edit` (given its current text).
    fn edit_config(&self, edit: impl FnOnce(&str) -> String) {
        let path = self.dir.join("floe.toml");
        let config = std::fs::read_to_string(&path).unwrap();
        std::fs::write(path, edit(&config)).unwrap();
    }

    async fn run(&self) -> Ran {
        self.run_with(&[]).await
    }

    async fn run_with(&self, env: &[(&str, &str)]) -> Ran {
        let mut all = vec![("FLOE_TEST_MNS_SECRET", MNS_SECRET)];
        all.extend_from_slice(env);
        floe_async(&self.dir, &["run", "--config", "floe.toml"], &all).await
    }

    /// Rows per object key in `lake.events`, each id checked to land once.
    async fn landed(&self) -> BTreeMap<String, usize> {
        let t = read_async(&self.dir, "lake.events").await;
        let ids = counts(&t, "id");
        assert!(ids.values().all(|n| *n == 1), "an id landed twice: {ids:?}");
        common::assert_commit_ids_unique(&t);
        counts(&t, "key")
    }

    fn queue_len(&self) -> usize {
        self.mns.queue_len(QUEUE)
    }
}

fn keys(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

fn dir(b: &Bed) -> &Path {
    &b.dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earliest_offset_takes_every_message_in_the_queue() {
    let b = bed(
        "scan.startup.mode = \"EARLIEST_OFFSET\"",
        Duration::from_secs(30),
    )
    .await;
    b.before_first_run().await;
    let r = b.run().await.expect_code(0, "first run");
    assert!(
        r.stdout.contains("skipped (before the start): 0"),
        "{}",
        r.stdout
    );
    assert_eq!(
        b.landed().await,
        keys(&[
            ("data/a.ndjson", 2),
            ("data/b.ndjson", 2),
            ("other/c.ndjson", 1)
        ]),
        "every message, however old; quiet.ndjson has none"
    );
    assert_eq!(b.queue_len(), 0);
    b.between_runs().await;
    b.run().await.expect_code(0, "second run");
    assert_eq!(b.landed().await["data/d.ndjson"], 1);
    assert_eq!(b.queue_len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_offset_skips_what_was_enqueued_before_the_first_start() {
    let b = bed(
        "scan.startup.mode = \"LATEST_OFFSET\"",
        Duration::from_secs(30),
    )
    .await;
    b.before_first_run().await;
    let r = b.run().await.expect_code(0, "first run");
    assert!(
        r.stdout.contains("skipped (before the start): 3"),
        "{}",
        r.stdout
    );
    assert_eq!(b.queue_len(), 0, "skipped messages are deleted");
    b.between_runs().await;
    b.run().await.expect_code(0, "second run");
    assert_eq!(b.landed().await, keys(&[("data/d.ndjson", 1)]));
    assert_eq!(b.queue_len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_offset_starts_as_latest_then_resumes_and_refuses_another_mode() {
    // The default mode: nothing configured.
    let b = bed("", Duration::from_secs(30)).await;
    b.before_first_run().await;
    let r = b.run().await.expect_code(0, "first run");
    assert!(
        r.stdout.contains("skipped (before the start): 3"),
        "{}",
        r.stdout
    );
    // While floe is stopped, d arrives; the next start resumes the stored decision and takes it.
    b.between_runs().await;
    b.run().await.expect_code(0, "second run");
    assert_eq!(b.landed().await, keys(&[("data/d.ndjson", 1)]));

    // Switching a started source to another mode would change what it skips: refused.
    b.edit_config(|config| {
        config.replace(
            "polling-wait-time = \"0s\"",
            "polling-wait-time = \"0s\"\nscan.startup.mode = \"EARLIEST_OFFSET\"",
        )
    });
    let r = b.run().await.expect_code(2, "mode changed");
    assert!(r.stderr.contains("scan.startup.mode"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_skips_what_was_enqueued_before_the_timestamp() {
    let b = bed("", Duration::from_secs(30)).await;
    let t = b.t0 - 30 * MINUTE;
    b.edit_config(|config| {
    config.replace(
        "polling-wait-time = \"0s\"",
        &format!(
            "polling-wait-time = \"0s\"\nscan.startup.mode = \"TIMESTAMP\"\nscan.startup.timestamp-millis = {t}"
        ),
    )
    });
    b.before_first_run().await;
    let r = b.run().await.expect_code(0, "first run");
    assert!(
        r.stdout.contains("skipped (before the start): 1"),
        "{}",
        r.stdout
    );
    assert_eq!(
        b.landed().await,
        keys(&[("data/b.ndjson", 2), ("other/c.ndjson", 1)]),
        "a (an hour old) is before the timestamp; b and c are after it"
    );
    b.between_runs().await;
    b.run().await.expect_code(0, "second run");
    assert_eq!(b.landed().await["data/d.ndjson"], 1);
    assert_eq!(b.queue_len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_lists_the_path_then_takes_the_queue_from_the_listing_start() {
    let b = bed(
        "scan.startup.mode = \"INITIAL\"\npath = \"data/\"",
        Duration::from_secs(30),
    )
    .await;
    b.before_first_run().await;
    // A late notification of b's same version, enqueued after the listing starts: b is seen by
    // the listing and by the queue, and lands once (the event's uppercase OSS ETag equals the
    // listing's lowercase one).
    let (b_etag, b_size) = (
        b.store
            .head("data/b.ndjson")
            .await
            .unwrap()
            .unwrap()
            .etag
            .unwrap()
            .to_ascii_uppercase(),
        b.store.head("data/b.ndjson").await.unwrap().unwrap().size,
    );
    b.notify("data/b.ndjson", &b_etag, b_size, b.t0 + 60 * MINUTE);
    let r = b.run().await.expect_code(0, "first run");
    assert!(r.stdout.contains("backfill: done"), "{}", r.stdout);
    assert!(
        r.stdout.contains("skipped (before the start): 3"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("duplicates: 1"), "{}", r.stdout);
    assert_eq!(
        b.landed().await,
        keys(&[
            ("data/a.ndjson", 2),
            ("data/b.ndjson", 2),
            ("data/quiet.ndjson", 1)
        ]),
        "the listing of data/ (quiet.ndjson included); other/ is outside the path and its \
         message predates the listing"
    );
    assert_eq!(b.queue_len(), 0);
    b.between_runs().await;
    let r = b.run().await.expect_code(0, "second run");
    assert!(r.stdout.contains("nothing to list"), "{}", r.stdout);
    assert_eq!(b.landed().await["data/d.ndjson"], 1);
    assert_eq!(b.queue_len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_lists_the_path_and_never_touches_the_queue() {
    let b = bed(
        "scan.startup.mode = \"SNAPSHOT\"\npath = \"data/\"",
        Duration::from_secs(30),
    )
    .await;
    b.before_first_run().await;
    let r = b.run().await.expect_code(0, "first run");
    assert!(r.stdout.contains("backfill: done"), "{}", r.stdout);
    let landed = keys(&[
        ("data/a.ndjson", 2),
        ("data/b.ndjson", 2),
        ("data/quiet.ndjson", 1),
    ]);
    assert_eq!(b.landed().await, landed);
    assert_eq!(b.queue_len(), 3, "the queue is not read");
    b.between_runs().await;
    b.run().await.expect_code(0, "second run");
    assert_eq!(b.landed().await, landed, "a snapshot is taken once");
    assert_eq!(b.queue_len(), 4);
    assert!(
        b.mns.requests().is_empty(),
        "SNAPSHOT sent requests to the queue: {:?}",
        b.mns.requests()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_keeps_failing_is_dead_lettered_with_its_error() {
    let b = bed(
        "scan.startup.mode = \"EARLIEST_OFFSET\"\nmax-deliveries = 2",
        Duration::from_secs(30),
    )
    .await;
    // A record the declared schema refuses (id is required) under on-error = fail.
    let body = "{\"id\":1,\"key\":\"data/bad.ndjson\"}\n{\"key\":\"no id\"}\n";
    let etag = b
        .store
        .put("data/bad.ndjson", Bytes::from(body), PutMode::Overwrite)
        .await
        .unwrap()
        .unwrap();
    b.notify("data/bad.ndjson", &etag, body.len() as u64, b.t0);
    // An unreadable body goes at once.
    b.mns
        .send_message(QUEUE, "neither json nor base64 !!")
        .unwrap();

    for delivery in 1..=2 {
        let r = b.run().await.expect_code(3, "a failing object");
        assert!(
            r.stdout.contains("left for redelivery: 1"),
            "{delivery}: {}",
            r.stdout
        );
        b.mns.advance_clock(Duration::from_secs(31));
    }
    assert_eq!(b.queue_len(), 1);
    let r = b.run().await.expect_code(0, "the third delivery is poison");
    assert!(r.stdout.contains("dead-lettered: 1"), "{}", r.stdout);
    assert_eq!(b.queue_len(), 0);
    let letters = dead_letters(dir(&b));
    assert_eq!(letters.len(), 2, "{letters:?}");
    let unreadable = letters
        .iter()
        .find(|l| {
            l["reason"]
                .as_str()
                .unwrap()
                .starts_with("unreadable message")
        })
        .expect("the unreadable message");
    assert_eq!(unreadable["raw"], "neither json nor base64 !!");
    let poison = letters
        .iter()
        .find(|l| l["key"] == "data/bad.ndjson")
        .expect("the poison message");
    let reason = poison["reason"].as_str().unwrap();
    assert!(
        reason.contains("max-deliveries = 2") && reason.contains("required field `id`"),
        "{reason}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_staging_before_the_delete_lands_every_row_once() {
    let b = bed(
        "scan.startup.mode = \"EARLIEST_OFFSET\"",
        Duration::from_secs(30),
    )
    .await;
    b.before_first_run().await;
    let r = b
        .run_with(&[("FLOE_FAULT", "ingest.after-mark")])
        .await
        .expect_code(86, "the fault fires");
    drop(r);
    assert_eq!(b.queue_len(), 3, "nothing was deleted");
    // The messages come back after their visibility timeout: duplicates, deleted.
    b.mns.advance_clock(Duration::from_secs(31));
    let r = b.run().await.expect_code(0, "after the crash");
    assert!(r.stdout.contains("duplicates: 3"), "{}", r.stdout);
    assert_eq!(b.queue_len(), 0);
    assert_eq!(
        b.landed().await,
        keys(&[
            ("data/a.ndjson", 2),
            ("data/b.ndjson", 2),
            ("other/c.ndjson", 1)
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_keeps_polling_and_commits_before_it_stops() {
    let b = bed(
        "scan.startup.mode = \"EARLIEST_OFFSET\"",
        Duration::from_secs(30),
    )
    .await;
    b.edit_config(|config| format!("{config}\n[commit]\ninterval-ms = 1000\n"));
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_floe"))
        .current_dir(dir(&b))
        .args(["run", "--config", "floe.toml", "--watch"])
        .env("FLOE_TEST_MNS_SECRET", MNS_SECRET)
        .env_remove("FLOE_FAULT")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Objects arrive while it runs; each lands within a commit interval or two.
    let mut want = BTreeMap::new();
    for (i, key) in ["data/w1.ndjson", "data/w2.ndjson"].iter().enumerate() {
        let (etag, size) = b.put(key, &[100 + i as i64]).await;
        b.notify(key, &etag, size, b.mns.now_ms());
        want.insert(key.to_string(), 1);
        let mut landed = BTreeMap::new();
        for _ in 0..40 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            if let Some(t) = common::try_read_async(dir(&b), "lake.events").await {
                landed = counts(&t, "key");
                if landed == want {
                    break;
                }
            }
        }
        assert_eq!(landed, want, "landed while watching");
    }
    // Ctrl-C: it stops between rounds and commits what is staged.
    let pid = child.id().to_string();
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(status.success());
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(b.queue_len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redeliveries_while_a_crashed_claim_lives_do_not_use_up_max_deliveries() {
    let b = bed(
        "scan.startup.mode = \"EARLIEST_OFFSET\"\nmax-deliveries = 2",
        Duration::from_secs(30),
    )
    .await;
    b.edit_config(|config| format!("{config}\n[ingest]\nclaim-timeout-ms = 10000\n"));
    b.before_first_run().await;
    // An instance on another host claims the objects and stops: its claims look live until
    // claim-timeout-ms passes (no process of this host to find gone).
    let crashed = std::time::Instant::now();
    b.run_with(&[
        ("FLOE_FAULT", "ingest.after-claim"),
        ("HOSTNAME", "another-instance"),
    ])
    .await
    .expect_code(86, "the fault fires");
    // Meanwhile the messages come back, more often than max-deliveries allows: each delivery
    // finds the objects busy, and none of those deliveries counts toward the budget.
    for delivery in 2..=4 {
        b.mns.advance_clock(Duration::from_secs(31));
        let r = b.run().await;
        assert!(
            r.stdout.contains("left for redelivery: 3") && r.stdout.contains("dead-lettered: 0"),
            "delivery {delivery}: {}",
            r.stdout
        );
    }
    // (The claim's clock started after `crashed`, when the batch opened.)
    assert!(
        crashed.elapsed() < Duration::from_secs(10),
        "the runs outlasted the claim; the test proves nothing"
    );
    tokio::time::sleep(Duration::from_secs(12).saturating_sub(crashed.elapsed())).await;
    b.mns.advance_clock(Duration::from_secs(31));
    let r = b
        .run()
        .await
        .expect_code(0, "the claims ran out: taken over");
    assert_eq!(b.queue_len(), 0, "{}", r.stdout);
    assert!(dead_letters(dir(&b)).is_empty());
    assert_eq!(
        b.landed().await,
        keys(&[
            ("data/a.ndjson", 2),
            ("data/b.ndjson", 2),
            ("other/c.ndjson", 1)
        ])
    );
}
