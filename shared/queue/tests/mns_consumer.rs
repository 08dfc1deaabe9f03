//! The MNS consumer (through the trait and the poller) against the MNS emulator over real
//! HTTP: batch receive and delete, a partial delete failure, visibility extension while work
//! runs, and poison messages after `max-deliveries`.

use std::sync::Arc;
use std::time::Duration;

use floe_queue::mns::{MnsClient, MnsConfig, MnsConsumer};
use floe_queue::{DeleteOutcome, Poller, QueueConsumer, QueueOptions};
use floe_signing::Credentials;
use floe_testbed::mns::{MnsEmulator, MnsEmulatorConfig};

const QUEUE: &str = "oss-events";

fn creds() -> Credentials {
    Credentials::new(
        "LTAI5tTestAccessKeyId01",
        "TestAccessKeySecret0123456789abcdefXYZ",
    )
}

async fn emulator(visibility: Duration) -> MnsEmulator {
    MnsEmulator::start(
        MnsEmulatorConfig::new(creds())
            .with_queue(QUEUE)
            .with_visibility_timeout(visibility),
    )
    .await
    .unwrap()
}

fn consumer(emu: &MnsEmulator) -> Arc<dyn QueueConsumer> {
    let client = MnsClient::new(MnsConfig::new(emu.endpoint(), QUEUE, creds())).unwrap();
    Arc::new(MnsConsumer::new(client))
}

fn options(batch_size: usize) -> QueueOptions {
    QueueOptions {
        batch_size,
        polling_wait: Duration::ZERO,
        ..QueueOptions::default()
    }
}

#[tokio::test]
async fn batches_are_received_and_deleted_with_per_message_outcomes() {
    let emu = emulator(Duration::from_secs(30)).await;
    for i in 0..20 {
        emu.send_message(QUEUE, &format!("{{\"n\":{i}}}")).unwrap();
    }
    let poller = Poller::new(consumer(&emu), options(16)).unwrap();
    let first = poller.poll().await.unwrap();
    assert_eq!(first.messages.len(), 16);
    assert!(first.poison.is_empty());
    let m = &first.messages[0];
    assert_eq!(m.body, b"{\"n\":0}");
    assert_eq!(m.receive_count, 1);
    assert!(m.enqueue_time_ms > 0 && !m.id.is_empty() && !m.receipt.is_empty());

    let outcomes = poller.delete(&first.messages).await.unwrap();
    assert!(
        outcomes.iter().all(DeleteOutcome::is_deleted),
        "{outcomes:?}"
    );
    assert_eq!(emu.queue_len(QUEUE), 4);

    // The rest, plus one message whose receipt is no longer valid.
    let mut rest = poller.poll().await.unwrap().messages;
    assert_eq!(rest.len(), 4);
    rest.insert(1, first.messages[3].clone());
    let outcomes = poller.delete(&rest).await.unwrap();
    assert_eq!(outcomes.len(), 5);
    for (i, o) in outcomes.iter().enumerate() {
        match (i, o) {
            (1, DeleteOutcome::Stale(e)) => {
                assert!(e.to_string().contains("MessageNotExist"), "{e}");
                assert!(!e.is_retryable());
            }
            (1, other) => panic!("the stale receipt gave {other:?}"),
            (_, o) => assert!(o.is_deleted(), "message {i}: {o:?}"),
        }
    }
    assert_eq!(emu.queue_len(QUEUE), 0);
    assert!(poller.poll().await.unwrap().messages.is_empty());
}

#[tokio::test]
async fn a_message_stays_hidden_while_its_work_runs_and_is_deleted_with_the_latest_receipt() {
    // A 1 s visibility timeout: without the keeper the message would come back during the
    // 2.5 s of "work".
    let emu = emulator(Duration::from_secs(1)).await;
    emu.send_message(QUEUE, "{\"big\":true}").unwrap();
    let poller = Poller::new(
        consumer(&emu),
        QueueOptions {
            visibility_extension: Duration::from_secs(1),
            ..options(1)
        },
    )
    .unwrap();
    let msg = poller.poll().await.unwrap().messages.remove(0);
    let keeper = poller.keep_visible(msg.clone());
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            poller.poll().await.unwrap().messages.is_empty(),
            "the message reappeared while it was being worked on"
        );
    }
    assert!(
        keeper.extensions() >= 3,
        "{} extensions",
        keeper.extensions()
    );
    let latest = keeper.stop().await.unwrap();
    assert_ne!(
        latest.receipt, msg.receipt,
        "mns issues a new receipt per extension"
    );
    let outcomes = poller.delete(std::slice::from_ref(&latest)).await.unwrap();
    assert!(outcomes[0].is_deleted(), "{outcomes:?}");
    assert_eq!(emu.queue_len(QUEUE), 0);
}

#[tokio::test]
async fn a_message_received_more_than_max_deliveries_times_is_poison() {
    let emu = emulator(Duration::from_secs(30)).await;
    emu.send_message(QUEUE, "{\"bad\":true}").unwrap();
    emu.send_message(QUEUE, "{\"good\":true}").unwrap();
    let poller = Poller::new(
        consumer(&emu),
        QueueOptions {
            max_deliveries: 2,
            ..options(16)
        },
    )
    .unwrap();
    // Two deliveries that "fail" (not deleted; the visibility timeout runs out).
    for delivery in 1..=2 {
        let polled = poller.poll().await.unwrap();
        assert_eq!(
            polled.messages.len(),
            2 - (delivery - 1),
            "delivery {delivery}"
        );
        assert!(polled.poison.is_empty());
        let good: Vec<_> = polled
            .messages
            .iter()
            .filter(|m| m.body == b"{\"good\":true}")
            .cloned()
            .collect();
        poller.delete(&good).await.unwrap();
        emu.advance_clock(Duration::from_secs(31));
    }
    let third = poller.poll().await.unwrap();
    assert!(third.messages.is_empty());
    assert_eq!(third.poison.len(), 1);
    assert_eq!(third.poison[0].receive_count, 3);
    assert_eq!(third.poison[0].body, b"{\"bad\":true}");
    // The caller dead-letters it, then deletes it.
    assert!(poller.delete(&third.poison).await.unwrap()[0].is_deleted());
    assert_eq!(emu.queue_len(QUEUE), 0);
}

#[tokio::test]
async fn out_of_range_options_are_refused_for_the_consumer() {
    let emu = emulator(Duration::from_secs(30)).await;
    let e = Poller::new(consumer(&emu), options(17)).unwrap_err();
    assert!(e.to_string().contains("`batch-size`"), "{e}");
    let e = Poller::new(
        consumer(&emu),
        QueueOptions {
            polling_wait: Duration::from_secs(31),
            ..options(1)
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("`polling-wait-time`"), "{e}");
}
