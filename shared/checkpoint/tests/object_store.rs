//! The object-store backend against the conformance suite over real HTTP: `S3Store` talking
//! to `s3s-fs` (SigV4 checked, `If-None-Match: *` / `If-Match` answered with 412), with
//! several store handles (separate connection pools, as separate function instances hold)
//! contending for the same keys. Also once over a local folder, which needs no server.

use std::sync::Arc;
use std::time::Duration;

use floe_checkpoint::{CheckpointStore, ObjectStoreCheckpoint, conformance};
use floe_core::Provider;
use floe_storage::{LocalStore, ObjectStore, S3Store, S3StoreConfig};
use floe_testbed::servers::{Linearizer, S3sFs};

const BUCKET: &str = "state";

/// `s3s-fs` checks a condition and then writes without a lock in between (see
/// `floe_testbed::servers::Linearizer`): the front makes each request atomic, as S3 and OSS
/// are per key. The requests and their 412 answers are s3s-fs's own.
struct Server {
    _s3s: S3sFs,
    front: Linearizer,
}

async fn server() -> Server {
    let s3s = S3sFs::start().await.expect("start s3s-fs");
    s3s.create_bucket(BUCKET).unwrap();
    let front = Linearizer::start(&s3s.endpoint()).await.unwrap();
    Server { _s3s: s3s, front }
}

/// A new handle: its own S3 client and connection pool.
async fn handle(server: &Server, prefix: &str) -> Arc<dyn CheckpointStore> {
    let store = S3Store::new(
        S3StoreConfig::new(Provider::S3, BUCKET)
            .with_endpoint(server.front.endpoint())
            .with_region(S3sFs::REGION)
            .with_path_style(true)
            .with_keys(S3sFs::ACCESS_KEY_ID, S3sFs::SECRET_ACCESS_KEY, None),
    )
    .await
    .unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(store);
    Arc::new(ObjectStoreCheckpoint::new(store, prefix))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3s_fs_passes_the_suite_and_separate_handles_never_lose_an_update() {
    let server = server().await;
    let store = handle(&server, "floe/checkpoint").await;
    conformance::run_all(store.clone(), "suite").await.unwrap();

    let mut handles = vec![store];
    for _ in 0..3 {
        handles.push(handle(&server, "floe/checkpoint").await);
    }
    conformance::concurrent_counter(&handles, "handles", 8, 15)
        .await
        .unwrap();
}

/// Several instances reviving one expired entry at once: exactly one wins (the dead object is
/// replaced with `If-Match`, not overwritten).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_several_writers_revives_an_expired_entry() {
    let server = server().await;
    let first = handle(&server, "p").await;
    first
        .put_if_absent("obj/x", b"old", Some(Duration::from_millis(30)))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(80)).await;
    let mut tasks = Vec::new();
    for i in 0..6 {
        let h = handle(&server, "p").await;
        tasks.push(tokio::spawn(async move {
            h.put_if_absent("obj/x", format!("claim-{i}").as_bytes(), None)
                .await
                .unwrap()
                .map(|v| (i, v))
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        if let Some(w) = t.await.unwrap() {
            winners.push(w);
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let (i, version) = winners.pop().unwrap();
    let entry = first.get("obj/x").await.unwrap().unwrap();
    assert_eq!(entry.value, format!("claim-{i}").as_bytes());
    assert_eq!(entry.version, version);
}

/// Deleted entries leave a tombstone that reads as absent and is purged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_leave_tombstones_that_purge_removes() {
    let server = server().await;
    let store = handle(&server, "t").await;
    let v = store
        .put_if_absent("stage/a/1", b"x", None)
        .await
        .unwrap()
        .unwrap();
    assert!(store.delete_if_version("stage/a/1", &v).await.unwrap());
    assert!(store.get("stage/a/1").await.unwrap().is_none());
    assert!(store.scan("stage/").await.unwrap().is_empty());
    assert!(!store.delete_if_version("stage/a/1", &v).await.unwrap());
    assert_eq!(store.purge_expired("").await.unwrap(), 1);
    assert_eq!(store.purge_expired("").await.unwrap(), 0);
    assert!(
        store
            .put_if_absent("stage/a/1", b"y", None)
            .await
            .unwrap()
            .is_some()
    );
}

/// The same backend over a local folder: keys that are prefixes of each other (`s`, `s/a`)
/// live side by side because object names are flat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_folder_passes_the_single_writer_checks() {
    let dir = tempfile::tempdir().unwrap();
    let folder: Arc<dyn ObjectStore> = Arc::new(LocalStore::new(dir.path(), "local").unwrap());
    let store = ObjectStoreCheckpoint::new(folder, "checkpoint");
    conformance::basic_cas(&store, "local").await.unwrap();
    conformance::scan_prefix(&store, "local").await.unwrap();
    conformance::ttl(&store, "local").await.unwrap();
}
