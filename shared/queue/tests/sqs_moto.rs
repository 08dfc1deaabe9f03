//! The SQS consumer against moto (SQS and S3 on one port): batch receive and delete with a
//! partial failure, visibility extension, poison messages, and S3 bucket notifications
//! delivered to the queue and parsed with floe's event parser.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_s3::types::{
    Event, FilterRule, FilterRuleName, NotificationConfiguration, NotificationConfigurationFilter,
    QueueConfiguration, S3KeyFilter,
};
use aws_sdk_sqs::types::QueueAttributeName;
use bytes::Bytes;
use floe_core::event::{ParseOptions, parse_payload};
use floe_core::{Operation, Provider};
use floe_queue::sqs::{SqsConfig, SqsConsumer};
use floe_queue::{DeleteOutcome, Poller, QueueConsumer, QueueOptions, VisibilityKeeper};
use floe_storage::{ObjectStore, PutMode, S3Store, S3StoreConfig};
use floe_testbed::servers::MotoServer;

async fn moto() -> MotoServer {
    MotoServer::start().await.expect("start moto_server")
}

/// A queue with the given visibility timeout, and a consumer for it.
async fn queue(moto: &MotoServer, name: &str, visibility_secs: u32) -> (SqsConsumer, String) {
    let admin = SqsConsumer::new(
        SqsConfig::new(format!(
            "{}/{}/{name}",
            moto.endpoint(),
            MotoServer::ACCOUNT_ID
        ))
        .with_endpoint(moto.endpoint())
        .with_region(MotoServer::REGION)
        .with_keys(
            MotoServer::ACCESS_KEY_ID,
            MotoServer::SECRET_ACCESS_KEY,
            None,
        ),
    )
    .await
    .unwrap();
    let url = admin
        .sdk_client()
        .create_queue()
        .queue_name(name)
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            visibility_secs.to_string(),
        )
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_owned();
    let consumer = SqsConsumer::new(
        SqsConfig::new(&url)
            .with_endpoint(moto.endpoint())
            .with_region(MotoServer::REGION)
            .with_keys(
                MotoServer::ACCESS_KEY_ID,
                MotoServer::SECRET_ACCESS_KEY,
                None,
            ),
    )
    .await
    .unwrap();
    (consumer, url)
}

async fn send(c: &SqsConsumer, url: &str, body: &str) {
    c.sdk_client()
        .send_message()
        .queue_url(url)
        .message_body(body)
        .send()
        .await
        .unwrap();
}

fn options(batch_size: usize) -> QueueOptions {
    QueueOptions {
        batch_size,
        polling_wait: Duration::ZERO,
        ..QueueOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_are_received_and_deleted_with_a_partial_failure() {
    let moto = moto().await;
    let (c, url) = queue(&moto, "batches", 30).await;
    for i in 0..15 {
        send(&c, &url, &format!("{{\"n\":{i}}}")).await;
    }
    let c: Arc<dyn QueueConsumer> = Arc::new(c);
    let poller = Poller::new(c.clone(), options(10)).unwrap();
    let first = poller.poll().await.unwrap().messages;
    assert_eq!(first.len(), 10);
    for m in &first {
        assert_eq!(m.receive_count, 1);
        assert!(
            m.enqueue_time_ms > 1_600_000_000_000,
            "SentTimestamp in ms: {m:?}"
        );
    }
    let mut batch = first.clone();
    batch[4].receipt = "not-a-receipt-handle".into();
    let outcomes = poller.delete(&batch).await.unwrap();
    for (i, o) in outcomes.iter().enumerate() {
        match (i, o) {
            (4, DeleteOutcome::Stale(e)) => {
                assert!(e.to_string().contains("ReceiptHandleIsInvalid"), "{e}")
            }
            (4, other) => panic!("the bad receipt gave {other:?}"),
            (_, o) => assert!(o.is_deleted(), "message {i}: {o:?}"),
        }
    }
    let rest = poller.poll().await.unwrap().messages;
    assert_eq!(rest.len(), 5);
    assert!(
        poller
            .delete(&rest)
            .await
            .unwrap()
            .iter()
            .all(DeleteOutcome::is_deleted)
    );
    // The one whose delete failed is still there (inactive until its visibility runs out).
    let e = c.receive(11, Duration::ZERO).await.unwrap_err();
    assert!(e.to_string().contains("1..=10"), "{e}");
    let e = c.receive(1, Duration::from_secs(21)).await.unwrap_err();
    assert!(e.to_string().contains("20 s"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visibility_is_extended_while_work_runs_and_poison_is_reported() {
    let moto = moto().await;
    let (c, url) = queue(&moto, "slow", 1).await;
    send(&c, &url, "{\"big\":true}").await;
    let c: Arc<dyn QueueConsumer> = Arc::new(c);
    let poller = Poller::new(
        c.clone(),
        QueueOptions {
            max_deliveries: 1,
            ..options(1)
        },
    )
    .unwrap();
    let msg = poller.poll().await.unwrap().messages.remove(0);
    let keeper = VisibilityKeeper::start(c.clone(), msg.clone(), Duration::from_secs(2));
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let polled = poller.poll().await.unwrap();
        assert!(
            polled.messages.is_empty() && polled.poison.is_empty(),
            "the message reappeared while it was being worked on"
        );
    }
    assert!(
        keeper.extensions() >= 2,
        "{} extensions",
        keeper.extensions()
    );
    let latest = keeper.stop().await.unwrap();
    assert_eq!(latest.receipt, msg.receipt, "sqs keeps the receipt");

    // The work "failed": the message is handed back (visibility 0) instead of deleted. It
    // comes again with a receive count of 2 > max-deliveries = 1, so it is poison.
    c.extend_visibility(&latest, 0).await.unwrap();
    let again = poller.poll().await.unwrap();
    assert!(again.messages.is_empty());
    assert_eq!(again.poison.len(), 1, "{again:?}");
    assert_eq!(again.poison[0].receive_count, 2);
    assert!(poller.delete(&again.poison).await.unwrap()[0].is_deleted());
}

/// Objects written with `S3Store` into a bucket whose notifications go to an SQS queue: the
/// queue delivers moto's test event first, then one event per object, which floe's parser
/// turns into object changes naming the same keys, sizes and ETags.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_notifications_arrive_through_sqs_and_parse_into_object_changes() {
    let moto = moto().await;
    let (c, _url) = queue(&moto, "bucket-events", 30).await;
    let store = S3Store::new(
        S3StoreConfig::new(Provider::S3, "landing")
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
    s3.create_bucket().bucket("landing").send().await.unwrap();
    let arn = format!(
        "arn:aws:sqs:{}:{}:bucket-events",
        MotoServer::REGION,
        MotoServer::ACCOUNT_ID
    );
    s3.put_bucket_notification_configuration()
        .bucket("landing")
        .notification_configuration(
            NotificationConfiguration::builder()
                .queue_configurations(
                    QueueConfiguration::builder()
                        .id("floe")
                        .queue_arn(arn)
                        .events(Event::S3ObjectCreated)
                        .filter(
                            NotificationConfigurationFilter::builder()
                                .key(
                                    S3KeyFilter::builder()
                                        .filter_rules(
                                            FilterRule::builder()
                                                .name(FilterRuleName::Prefix)
                                                .value("in/")
                                                .build(),
                                        )
                                        .build(),
                                )
                                .build(),
                        )
                        .build()
                        .unwrap(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();

    let keys = [
        "in/a.json",
        "in/dir/with space+plus.json",
        "in/日本/語.json",
    ];
    let mut etags = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let body = format!("{{\"i\":{i}}}");
        let etag = store
            .put(k, Bytes::from(body), PutMode::Overwrite)
            .await
            .unwrap()
            .unwrap();
        etags.push(etag);
    }
    store
        .put(
            "out/ignored.json",
            Bytes::from_static(b"{}"),
            PutMode::Overwrite,
        )
        .await
        .unwrap();

    let c: Arc<dyn QueueConsumer> = Arc::new(c);
    let poller = Poller::new(c, options(10)).unwrap();
    let mut messages = Vec::new();
    for _ in 0..5 {
        let polled = poller.poll().await.unwrap();
        messages.extend(polled.messages);
        // The test event and one event per key.
        if messages.len() > keys.len() {
            break;
        }
    }
    messages.sort_by_key(|m| m.enqueue_time_ms);
    let mut changes = Vec::new();
    let mut test_events = 0;
    for m in &messages {
        let parsed = parse_payload(&m.body, &ParseOptions::default()).unwrap();
        for msg in parsed.messages {
            test_events += msg
                .ignored
                .iter()
                .filter(|(name, _)| name.contains("TestEvent"))
                .count();
            changes.extend(msg.changes.unwrap());
        }
    }
    assert_eq!(test_events, 1, "moto's first message is an s3:TestEvent");
    assert_eq!(changes.len(), keys.len(), "{changes:?}");
    for (k, etag) in keys.iter().zip(&etags) {
        let ch = changes
            .iter()
            .find(|c| c.key == *k)
            .unwrap_or_else(|| panic!("no change for {k}: {changes:?}"));
        assert_eq!(ch.operation, Operation::Created);
        assert_eq!(ch.provider, Provider::S3);
        assert_eq!(ch.bucket, "landing");
        assert_eq!(ch.etag.as_deref(), Some(etag.as_str()));
        let head = store.head(k).await.unwrap().unwrap();
        assert_eq!(ch.size, Some(head.size));
        assert_eq!(ch.url(), store.url(k));
    }
    assert!(
        poller
            .delete(&messages)
            .await
            .unwrap()
            .iter()
            .all(DeleteOutcome::is_deleted)
    );
}
