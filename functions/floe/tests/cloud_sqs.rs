//! `floe run` with an SQS source end to end on moto: objects put into a bucket whose
//! notification configuration sends `s3:ObjectCreated:*` to an SQS queue, `floe run` reading
//! the objects back from moto's S3 into an Iceberg SQL catalog in a temp dir, pyiceberg
//! reading the table. moto's quirks are part of the story: the first message is an
//! `s3:TestEvent`, keys are form-encoded (`%2F`, `+`), event times have no zone, and a
//! multipart upload gives two created events. Duplicate deliveries land once.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    CompletedMultipartUpload, CompletedPart, Event, NotificationConfiguration, QueueConfiguration,
};
use aws_sdk_sqs::types::QueueAttributeName;
use bytes::Bytes;
use common::{counts, floe_async, read_async};
use floe_core::Provider;
use floe_queue::sqs::{SqsConfig, SqsConsumer};
use floe_storage::{ObjectStore, PutMode, S3Store, S3StoreConfig};
use floe_testbed::servers::MotoServer;

const BUCKET: &str = "landing";
const QUEUE: &str = "landing-events";

async fn sqs(moto: &MotoServer, url: &str) -> SqsConsumer {
    SqsConsumer::new(
        SqsConfig::new(url)
            .with_endpoint(moto.endpoint())
            .with_region(MotoServer::REGION)
            .with_keys(
                MotoServer::ACCESS_KEY_ID,
                MotoServer::SECRET_ACCESS_KEY,
                None,
            ),
    )
    .await
    .unwrap()
}

/// Messages still in the queue, visible or not.
async fn in_queue(q: &SqsConsumer, url: &str) -> usize {
    let attrs = q
        .sdk_client()
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap();
    let a = attrs.attributes().unwrap();
    [
        QueueAttributeName::ApproximateNumberOfMessages,
        QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
    ]
    .iter()
    .map(|k| a.get(k).and_then(|v| v.parse::<usize>().ok()).unwrap_or(0))
    .sum()
}

fn ndjson(key: &str, ids: std::ops::Range<i64>) -> String {
    ids.map(|i| format!("{{\"id\":{i},\"key\":\"{key}\"}}\n"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_notifications_through_sqs_land_once_each() {
    let moto = MotoServer::start().await.expect("start moto_server");
    let admin = sqs(
        &moto,
        &format!("{}/{}/{QUEUE}", moto.endpoint(), MotoServer::ACCOUNT_ID),
    )
    .await;
    let url = admin
        .sdk_client()
        .create_queue()
        .queue_name(QUEUE)
        .attributes(QueueAttributeName::VisibilityTimeout, "3")
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_owned();
    let store = S3Store::new(
        S3StoreConfig::new(Provider::S3, BUCKET)
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
    let s3 = store.sdk_client();
    s3.create_bucket().bucket(BUCKET).send().await.unwrap();
    s3.put_bucket_notification_configuration()
        .bucket(BUCKET)
        .notification_configuration(
            NotificationConfiguration::builder()
                .queue_configurations(
                    QueueConfiguration::builder()
                        .id("floe")
                        .queue_arn(format!(
                            "arn:aws:sqs:{}:{}:{QUEUE}",
                            MotoServer::REGION,
                            MotoServer::ACCOUNT_ID
                        ))
                        .events(Event::S3ObjectCreated)
                        .build()
                        .unwrap(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();

    // Objects: plain, with a space, a plus and unicode in the key, and a multipart upload.
    let keys = [
        "in/a.ndjson",
        "in/dir/with space+plus.ndjson",
        "in/日本/語.ndjson",
    ];
    for (i, k) in keys.iter().enumerate() {
        let ids = (i as i64 * 10)..(i as i64 * 10 + 3);
        store
            .put(k, Bytes::from(ndjson(k, ids)), PutMode::Overwrite)
            .await
            .unwrap();
    }
    let big = "in/multipart.ndjson";
    let upload = s3
        .create_multipart_upload()
        .bucket(BUCKET)
        .key(big)
        .send()
        .await
        .unwrap();
    let upload_id = upload.upload_id().unwrap();
    let part = s3
        .upload_part()
        .bucket(BUCKET)
        .key(big)
        .upload_id(upload_id)
        .part_number(1)
        .body(ByteStream::from(ndjson(big, 100..105).into_bytes()))
        .send()
        .await
        .unwrap();
    s3.complete_multipart_upload()
        .bucket(BUCKET)
        .key(big)
        .upload_id(upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .parts(
                    CompletedPart::builder()
                        .part_number(1)
                        .e_tag(part.e_tag().unwrap())
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("floe.toml"),
        format!(
            r#"
[source]
type = "sqs"
queue-url = "{url}"
endpoint = "{ep}"
region = "{region}"
access-key-id = "{key}"
access-key-secret = "${{env:FLOE_TEST_AWS_SECRET}}"
scan.startup.mode = "EARLIEST_OFFSET"
batch-size = 10
polling-wait-time = "1s"
visibility-extension = "2s"
s3.endpoint = "{ep}"
s3.path-style-access = true

[iceberg]
catalog.type = "sql"
catalog.uri = "catalog.db"
catalog.warehouse = "warehouse"

[[routes]]
prefix = "in/"
table = "lake.events"
"#,
            ep = moto.endpoint(),
            region = MotoServer::REGION,
            key = MotoServer::ACCESS_KEY_ID,
        ),
    )
    .unwrap();
    let env = [("FLOE_TEST_AWS_SECRET", MotoServer::SECRET_ACCESS_KEY)];
    let run = || floe_async(dir, &["run", "--config", "floe.toml"], &env);

    let r = run().await.expect_code(0, "first run");
    assert!(r.stdout.contains("queue: drained"), "{}", r.stdout);
    assert!(
        r.stdout.contains("nothing to land: 1"),
        "the s3:TestEvent: {}",
        r.stdout
    );
    assert!(
        r.stdout.contains("duplicates: 1"),
        "the multipart double event: {}",
        r.stdout
    );
    let table = read_async(dir, "lake.events").await;
    let ids = counts(&table, "id");
    assert_eq!(ids.len(), 14, "{ids:?}");
    assert!(ids.values().all(|n| *n == 1), "{ids:?}");
    let by_key = counts(&table, "key");
    let want: BTreeMap<String, usize> = [
        ("in/a.ndjson", 3),
        ("in/dir/with space+plus.ndjson", 3),
        ("in/日本/語.ndjson", 3),
        ("in/multipart.ndjson", 5),
    ]
    .iter()
    .map(|(k, n)| (k.to_string(), *n))
    .collect();
    assert_eq!(by_key, want);
    common::assert_commit_ids_unique(&table);
    assert_eq!(in_queue(&admin, &url).await, 0, "every message was deleted");

    // Deliveries again (S3 is at-least-once): the same versions are duplicates.
    let etag = store
        .head("in/a.ndjson")
        .await
        .unwrap()
        .unwrap()
        .etag
        .unwrap();
    let again = serde_json::json!({"Records": [{
        "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": MotoServer::REGION,
        "eventTime": "2025-01-15T08:30:45.123456", "eventName": "ObjectCreated:Put",
        "s3": {"s3SchemaVersion": "1.0", "configurationId": "floe",
               "bucket": {"name": BUCKET, "arn": format!("arn:aws:s3:::{BUCKET}")},
               "object": {"key": "in%2Fa.ndjson", "size": 1, "eTag": format!("\"{etag}\"")}}
    }]})
    .to_string();
    for _ in 0..2 {
        admin
            .sdk_client()
            .send_message()
            .queue_url(&url)
            .message_body(&again)
            .send()
            .await
            .unwrap();
    }
    // And a crash after staging a new object, before its message is deleted: the message comes
    // back after its visibility timeout and is recognised.
    store
        .put(
            "in/late.ndjson",
            Bytes::from(ndjson("in/late.ndjson", 200..202)),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    floe_async(
        dir,
        &["run", "--config", "floe.toml"],
        &[env[0], ("FLOE_FAULT", "ingest.after-stage")],
    )
    .await
    .expect_code(86, "the fault fires");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let r = run().await.expect_code(0, "after the crash");
    assert!(r.stdout.contains("queue: drained"), "{}", r.stdout);
    let table = read_async(dir, "lake.events").await;
    let ids = counts(&table, "id");
    assert_eq!(ids.len(), 16, "{ids:?}");
    assert!(ids.values().all(|n| *n == 1), "{ids:?}");
    assert_eq!(counts(&table, "key")["in/late.ndjson"], 2);
    common::assert_commit_ids_unique(&table);
    assert_eq!(in_queue(&admin, &url).await, 0);
}
