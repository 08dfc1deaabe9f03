//! Each startup mode against the MNS emulator (messages enqueued at chosen times with
//! `send_message_at`) and a checkpoint table: what it skips (deleted unprocessed), what it
//! lands, and that a restart keeps the meaning.

use std::sync::Arc;
use std::time::Duration;

use floe_checkpoint::{CheckpointStore, SqliteStore};
use floe_core::ErrorKind;
use floe_queue::mns::{MnsClient, MnsConfig, MnsConsumer};
use floe_queue::{
    Admit, Phase, Poller, QueueOptions, StartupConfig, StartupCursor, StartupDecision, StartupMode,
};
use floe_signing::Credentials;
use floe_testbed::mns::{MnsEmulator, MnsEmulatorConfig};

const QUEUE: &str = "oss-events";
const HOUR: i64 = 3_600_000;

fn creds() -> Credentials {
    Credentials::new(
        "LTAI5tTestAccessKeyId01",
        "TestAccessKeySecret0123456789abcdefXYZ",
    )
}

struct Bed {
    emu: MnsEmulator,
    poller: Poller,
    table: Arc<dyn CheckpointStore>,
}

async fn bed() -> Bed {
    let emu = MnsEmulator::start(MnsEmulatorConfig::new(creds()).with_queue(QUEUE))
        .await
        .unwrap();
    let client = MnsClient::new(MnsConfig::new(emu.endpoint(), QUEUE, creds())).unwrap();
    let poller = Poller::new(
        Arc::new(MnsConsumer::new(client)),
        QueueOptions {
            batch_size: 16,
            polling_wait: Duration::ZERO,
            ..QueueOptions::default()
        },
    )
    .unwrap();
    let table: Arc<dyn CheckpointStore> = Arc::new(SqliteStore::in_memory().await.unwrap());
    Bed { emu, poller, table }
}

impl Bed {
    /// Enqueue `name` with `EnqueueTime = at`.
    fn send_at(&self, name: &str, at: i64) {
        self.emu
            .send_message_at(QUEUE, &format!("{{\"name\":\"{name}\"}}"), at)
            .unwrap();
    }

    fn cursor(&self) -> StartupCursor {
        StartupCursor::new(self.table.clone(), "orders").unwrap()
    }

    /// Consume the queue as the pipeline would in `decision`'s queue phase: admitted messages
    /// "land" (their names are returned) and are deleted, skipped ones are deleted unprocessed.
    async fn drain(&self, decision: &StartupDecision) -> Vec<String> {
        assert_eq!(decision.phase(), Phase::Queue, "{decision:?}");
        let filter = decision.queue_filter().expect("a queue mode");
        let mut landed = Vec::new();
        loop {
            let polled = self.poller.poll().await.unwrap();
            if polled.messages.is_empty() {
                break;
            }
            for m in &polled.messages {
                if filter.admit(m) == Admit::Process {
                    let v: serde_json::Value = serde_json::from_slice(&m.body).unwrap();
                    landed.push(v["name"].as_str().unwrap().to_owned());
                    self.cursor()
                        .advance_committed(m.enqueue_time_ms)
                        .await
                        .unwrap();
                }
            }
            let outcomes = self.poller.delete(&polled.messages).await.unwrap();
            assert!(outcomes.iter().all(|o| o.is_deleted()), "{outcomes:?}");
        }
        assert_eq!(
            self.emu.queue_len(QUEUE),
            0,
            "skipped messages are deleted too"
        );
        landed.sort();
        landed
    }
}

fn config(mode: StartupMode, ts: Option<i64>) -> StartupConfig {
    StartupConfig {
        mode,
        timestamp_millis: ts,
    }
}

#[tokio::test]
async fn earliest_offset_takes_everything_in_the_queue() {
    let b = bed().await;
    let now = b.emu.now_ms();
    b.send_at("two-hours-ago", now - 2 * HOUR);
    b.send_at("an-hour-ago", now - HOUR);
    let d = b
        .cursor()
        .start(&config(StartupMode::EarliestOffset, None), now)
        .await
        .unwrap();
    b.send_at("after-start", now + 1);
    assert_eq!(
        b.drain(&d).await,
        ["after-start", "an-hour-ago", "two-hours-ago"]
    );
}

#[tokio::test]
async fn latest_offset_skips_the_backlog_and_a_restart_keeps_its_start() {
    let b = bed().await;
    let now = b.emu.now_ms();
    b.send_at("backlog", now - HOUR);
    let d = b
        .cursor()
        .start(&config(StartupMode::LatestOffset, None), now)
        .await
        .unwrap();
    assert_eq!(d.start_ms, Some(now));
    b.send_at("new", now + 10);
    assert_eq!(b.drain(&d).await, ["new"]);

    // Stopped for a while; messages arrive meanwhile; a restart an hour later keeps the
    // first start, so they land.
    b.send_at("while-stopped", now + 20);
    let later = now + HOUR;
    let again = b
        .cursor()
        .start(&config(StartupMode::LatestOffset, None), later)
        .await
        .unwrap();
    assert_eq!(again.start_ms, Some(now));
    assert_eq!(b.drain(&again).await, ["while-stopped"]);
}

#[tokio::test]
async fn committed_offset_acts_as_latest_at_first_start_and_resumes_afterwards() {
    let b = bed().await;
    let now = b.emu.now_ms();
    b.send_at("backlog", now - HOUR);
    let d = b
        .cursor()
        .start(&StartupConfig::default(), now)
        .await
        .unwrap();
    assert_eq!(
        (d.mode, d.requested),
        (StartupMode::LatestOffset, StartupMode::CommittedOffset)
    );
    b.send_at("new", now + 5);
    assert_eq!(b.drain(&d).await, ["new"]);
    let stored = b.cursor().load().await.unwrap().unwrap();
    assert_eq!(
        stored.committed_ms,
        Some(now + 5),
        "the watermark follows what landed"
    );

    // A message that failed (still in the queue) is older than the watermark: resuming must
    // not skip it.
    b.send_at("retried", now + 2);
    b.send_at("newer", now + 30);
    let resumed = b
        .cursor()
        .start(&StartupConfig::default(), now + HOUR)
        .await
        .unwrap();
    assert_eq!(resumed.start_ms, Some(now));
    assert_eq!(b.drain(&resumed).await, ["newer", "retried"]);
}

#[tokio::test]
async fn committed_offset_resumes_whatever_was_decided_before() {
    let b = bed().await;
    let now = b.emu.now_ms();
    b.cursor()
        .start(&config(StartupMode::EarliestOffset, None), now)
        .await
        .unwrap();
    b.send_at("old", now - 5 * HOUR);
    let resumed = b
        .cursor()
        .start(&StartupConfig::default(), now + HOUR)
        .await
        .unwrap();
    assert_eq!(resumed.mode, StartupMode::EarliestOffset);
    assert_eq!(b.drain(&resumed).await, ["old"]);
}

#[tokio::test]
async fn timestamp_skips_messages_enqueued_before_it() {
    let b = bed().await;
    let now = b.emu.now_ms();
    let ts = now - HOUR;
    b.send_at("before", ts - 1);
    b.send_at("at", ts);
    b.send_at("after", ts + HOUR / 2);
    let d = b
        .cursor()
        .start(&config(StartupMode::Timestamp, Some(ts)), now)
        .await
        .unwrap();
    assert_eq!(b.drain(&d).await, ["after", "at"]);
    let e = b
        .cursor()
        .start(&config(StartupMode::Timestamp, Some(ts + 1)), now)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config);
    assert!(e.to_string().contains("`scan.startup.mode`"), "{e}");
}

#[tokio::test]
async fn initial_lists_first_then_takes_the_queue_from_when_the_listing_started() {
    let b = bed().await;
    let now = b.emu.now_ms();
    b.send_at("covered-by-listing", now - HOUR);
    let d = b
        .cursor()
        .start(&config(StartupMode::Initial, None), now)
        .await
        .unwrap();
    assert_eq!(d.phase(), Phase::Listing);
    b.send_at("during-listing", now + 1_000);
    // While listing, the queue is not touched.
    let restarted = b
        .cursor()
        .start(&config(StartupMode::Initial, None), now + 2_000)
        .await
        .unwrap();
    assert_eq!(
        restarted.phase(),
        Phase::Listing,
        "a restart resumes the listing"
    );
    assert_eq!(b.emu.queue_len(QUEUE), 2);
    let done = b.cursor().mark_listing_done(now + 3_000).await.unwrap();
    assert_eq!(done.phase(), Phase::Queue);
    b.send_at("after-listing", now + 4_000);
    assert_eq!(b.drain(&done).await, ["after-listing", "during-listing"]);
}

#[tokio::test]
async fn snapshot_never_touches_the_queue() {
    let b = bed().await;
    let now = b.emu.now_ms();
    b.send_at("queued", now - 1);
    let d = b
        .cursor()
        .start(&config(StartupMode::Snapshot, None), now)
        .await
        .unwrap();
    assert_eq!(d.phase(), Phase::Listing);
    assert!(d.queue_filter().is_none());
    let done = b.cursor().mark_listing_done(now + 10).await.unwrap();
    assert_eq!(done.phase(), Phase::Done);
    assert!(done.queue_filter().is_none());
    assert_eq!(b.emu.queue_len(QUEUE), 1);
    assert!(b.emu.requests().is_empty(), "no request reached the queue");
}

#[tokio::test]
async fn a_different_mode_on_a_started_source_is_refused_until_the_cursor_is_reset() {
    let b = bed().await;
    let now = b.emu.now_ms();
    b.cursor()
        .start(&config(StartupMode::LatestOffset, None), now)
        .await
        .unwrap();
    let e = b
        .cursor()
        .start(&config(StartupMode::EarliestOffset, None), now + 1)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config);
    assert!(e.to_string().contains("`scan.startup.mode`"), "{e}");
    assert!(e.to_string().contains("LATEST_OFFSET"), "{e}");

    assert!(b.cursor().reset().await.unwrap());
    let d = b
        .cursor()
        .start(&config(StartupMode::EarliestOffset, None), now + 2)
        .await
        .unwrap();
    assert_eq!(d.mode, StartupMode::EarliestOffset);
}

#[tokio::test]
async fn concurrent_first_starts_agree_on_one_decision() {
    let b = bed().await;
    let now = b.emu.now_ms();
    let mut tasks = Vec::new();
    for i in 0..6 {
        let cursor = b.cursor();
        tasks.push(tokio::spawn(async move {
            cursor
                .start(&StartupConfig::default(), now + i)
                .await
                .unwrap()
        }));
    }
    let mut decisions = Vec::new();
    for t in tasks {
        decisions.push(t.await.unwrap());
    }
    assert!(decisions.windows(2).all(|w| w[0] == w[1]), "{decisions:?}");
}
