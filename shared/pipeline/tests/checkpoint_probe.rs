//! The object-store checkpoint refuses a store that does not keep conditional writes.
//!
//! moto honours `If-None-Match: *` and `If-Match` on PUT, so a pipeline opens on it. The same
//! moto behind a front that drops those headers (what an old S3-compatible server or a careless
//! proxy does) accepts every write: the pipeline must refuse to start, naming the bucket and what
//! the store did. A state bucket that does not exist is a configuration error too.

use floe_core::{ErrorKind, Provider};
use floe_pipeline::{FloeConfig, Pipeline};
use floe_storage::{S3Store, S3StoreConfig};
use floe_testbed::servers::{Linearizer, MotoServer};

fn config(dir: &std::path::Path, endpoint: &str, state: &str) -> FloeConfig {
    std::fs::create_dir_all(dir.join("bucket")).unwrap();
    let text = format!(
        r#"
[source]
folder = "bucket"

[iceberg]
catalog.uri = "catalog.db"
catalog.warehouse = "warehouse"

[checkpoint]
type = "object-store"
url = "s3://{state}/floe/checkpoint/"
endpoint = "{endpoint}"
region = "{region}"
path-style-access = true
access-key-id = "{key}"
secret-access-key = "{key}"

[[routes]]
table = "lake.t"
"#,
        region = MotoServer::REGION,
        key = MotoServer::ACCESS_KEY_ID,
    );
    let path = dir.join("floe.toml");
    std::fs::write(&path, text).unwrap();
    FloeConfig::load(&path).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_ignores_conditional_writes_is_refused_at_open() {
    let moto = MotoServer::start().await.expect("start moto_server");
    let store = S3Store::new(
        S3StoreConfig::new(Provider::S3, "state")
            .with_endpoint(moto.endpoint())
            .with_region(MotoServer::REGION)
            .with_path_style(true)
            .with_keys(
                MotoServer::ACCESS_KEY_ID,
                MotoServer::SECRET_ACCESS_KEY,
                None,
            ),
    )
    .await
    .unwrap();
    store
        .sdk_client()
        .create_bucket()
        .bucket("state")
        .send()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();

    // moto keeps the conditions: the pipeline opens, and the probe leaves nothing behind.
    Pipeline::open(config(dir.path(), &moto.endpoint(), "state"))
        .await
        .expect("moto honours conditional writes");
    let left = store
        .sdk_client()
        .list_objects_v2()
        .bucket("state")
        .send()
        .await
        .unwrap();
    assert_eq!(left.key_count(), Some(0), "{left:?}");

    // The same store behind a front that drops the conditions.
    let broken = Linearizer::start_dropping(&moto.endpoint(), &["if-none-match", "if-match"])
        .await
        .unwrap();
    let e = Pipeline::open(config(dir.path(), broken.endpoint(), "state"))
        .await
        .expect_err("a store without conditional writes must be refused");
    let shown = e.to_string();
    assert_eq!(e.kind(), ErrorKind::Config, "{shown}");
    assert!(
        shown.contains("s3://state/floe/checkpoint/_probe/"),
        "{shown}"
    );
    assert!(shown.contains("If-None-Match"), "{shown}");

    // A state bucket that is not there.
    let e = Pipeline::open(config(dir.path(), &moto.endpoint(), "no-such-state"))
        .await
        .expect_err("a missing state bucket must be refused");
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert!(e.to_string().contains("no-such-state"), "{e}");
}

#[tokio::test]
async fn a_missing_source_folder_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("floe.toml");
    std::fs::write(
        &path,
        "[source]\nfolder = \"nope\"\n[[routes]]\ntable = \"lake.t\"\n",
    )
    .unwrap();
    let e = Pipeline::open(FloeConfig::load(&path).unwrap())
        .await
        .expect_err("a folder that is not there");
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert!(e.to_string().contains("source.folder"), "{e}");
    assert!(e.to_string().contains("nope"), "{e}");
    assert!(
        !dir.path().join("nope").exists(),
        "no folder is made for it"
    );
}
