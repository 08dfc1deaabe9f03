//! The dead-letter writer against a real S3 API (s3s-fs): a `[dead-letter] path =
//! "s3://…/prefix/"` store puts parts under the prefix with `If-None-Match: *`; writing the same
//! letters again (a redo) leaves one object, other letters under a taken name go beside it, and
//! nothing is ever overwritten.

use floe_core::Provider;
use floe_pipeline::config::{DeadLetterConfig, StoreSettings};
use floe_pipeline::deadletter::{DeadLetter, DeadLetterWriter, list_files, read_file};
use floe_pipeline::pipeline::open_dead_letters;
use floe_testbed::servers::S3sFs;

fn letter(key: &str, line: Option<u64>, time: &str) -> DeadLetter {
    DeadLetter {
        time: time.into(),
        batch: "commit-1-0-0".into(),
        route: "events".into(),
        bucket: "landing".into(),
        key: key.into(),
        url: format!("s3://landing/{key}"),
        line,
        reason: "does not fit".into(),
        raw: "{}".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parts_in_a_bucket_are_create_only_and_a_redo_writes_nothing_twice() {
    let s3s = S3sFs::start().await.expect("start s3s-fs");
    s3s.create_bucket("state").unwrap();
    let config = DeadLetterConfig::ObjectStore {
        provider: Provider::S3,
        bucket: "state".into(),
        prefix: "floe/dead-letter/".into(),
        store: StoreSettings {
            endpoint: Some(s3s.endpoint()),
            region: Some(S3sFs::REGION.into()),
            path_style: true,
            access_key_id: Some(S3sFs::ACCESS_KEY_ID.into()),
            secret_access_key: Some(S3sFs::SECRET_ACCESS_KEY.into()),
            session_token: None,
        },
    };
    let store = open_dead_letters(&config).await.unwrap();
    let write = |letters: Vec<DeadLetter>| {
        let store = store.clone();
        async move {
            let mut w = DeadLetterWriter::new(store, "commit-1-0-0").on_day("2026-05-06".into());
            for l in &letters {
                w.add(l).await.unwrap();
            }
            w.flush().await.unwrap();
        }
    };

    let first = vec![
        letter("a.json", Some(4), "t1"),
        letter("b.json", Some(9), "t1"),
    ];
    write(first.clone()).await;
    // The object is in the bucket under the prefix.
    let on_disk = s3s
        .root()
        .join("state/floe/dead-letter/2026-05-06/commit-1-0-0-0000.ndjson");
    assert!(on_disk.is_file(), "{}", s3s.log_tail());
    let bytes = std::fs::read(&on_disk).unwrap();

    // A redo stamps the same letters anew: nothing new, the first write untouched.
    write(
        first
            .iter()
            .map(|l| DeadLetter {
                time: "t2".into(),
                ..l.clone()
            })
            .collect(),
    )
    .await;
    assert_eq!(std::fs::read(&on_disk).unwrap(), bytes);
    let keys: Vec<String> = list_files(store.as_ref())
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.key)
        .collect();
    assert_eq!(keys, ["2026-05-06/commit-1-0-0-0000.ndjson"]);

    // Other letters under the same name go beside it.
    let other = vec![letter("c.json", Some(1), "t3")];
    write(other.clone()).await;
    let keys: Vec<String> = list_files(store.as_ref())
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.key)
        .collect();
    assert_eq!(
        keys,
        [
            "2026-05-06/commit-1-0-0-0000.1.ndjson",
            "2026-05-06/commit-1-0-0-0000.ndjson"
        ]
    );
    assert_eq!(std::fs::read(&on_disk).unwrap(), bytes, "never overwritten");
    let f = read_file(store.as_ref(), &keys[0]).await.unwrap();
    assert_eq!(f.letters, other);
    assert_eq!(
        f.url,
        format!(
            "s3://state/floe/dead-letter/{}",
            "2026-05-06/commit-1-0-0-0000.1.ndjson"
        )
    );
}
