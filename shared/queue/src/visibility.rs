//! Keeping a message hidden while its (large) object is processed.
//!
//! [`VisibilityKeeper::start`] spawns a task that extends the message's visibility by
//! `extension` every `extension / 2`, so it never reappears while work goes on. MNS gives a new
//! receipt on each extension; the keeper holds the latest, and [`VisibilityKeeper::stop`] ends
//! the task and returns the message with that receipt, ready to delete.
//!
//! ```text
//!  start ──▶ sleep extension/2 ──▶ extend_visibility(extension) ──▶ new receipt ──┐
//!              ▲                                                                  │
//!              └──────────────────────────────────────────────────────────────────┘
//!  stop ──▶ task ends (an extension in flight finishes first) ──▶ message with latest receipt
//! ```
//! A failed extension is logged and tried again at the next tick; a stale receipt (the
//! message was already redelivered) ends the task, and `stop` reports it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use floe_core::{Error, Result};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::consumer::{QueueConsumer, QueueMessage};

/// A running extension task; see the module doc. Dropping it without `stop` ends the task too.
#[derive(Debug)]
pub struct VisibilityKeeper {
    current: Arc<Mutex<QueueMessage>>,
    lost: Arc<Mutex<Option<Error>>>,
    extensions: Arc<Mutex<u32>>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl VisibilityKeeper {
    /// Start extending `msg` by `extension` (whole seconds, ≥ 1 s) every `extension / 2`.
    pub fn start(consumer: Arc<dyn QueueConsumer>, msg: QueueMessage, extension: Duration) -> Self {
        let secs = u32::try_from(extension.as_secs().max(1)).unwrap_or(u32::MAX);
        let period = (extension / 2).max(Duration::from_millis(100));
        let current = Arc::new(Mutex::new(msg));
        let lost = Arc::new(Mutex::new(None));
        let extensions = Arc::new(Mutex::new(0u32));
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn({
            let current = current.clone();
            let lost = lost.clone();
            let extensions = extensions.clone();
            async move {
                loop {
                    tokio::select! {
                        _ = stopped.changed() => return,
                        _ = tokio::time::sleep(period) => {}
                    }
                    let msg = lock(&current).clone();
                    match consumer.extend_visibility(&msg, secs).await {
                        Ok(receipt) => {
                            lock(&current).receipt = receipt;
                            *lock(&extensions) += 1;
                        }
                        Err(e) if e.is_retryable() => {
                            tracing::warn!(queue = consumer.queue(), message_id = %msg.id, error = %e, "visibility extension failed; trying again");
                        }
                        Err(e) => {
                            tracing::warn!(queue = consumer.queue(), message_id = %msg.id, error = %e, "visibility extension failed; the message will be delivered again");
                            *lock(&lost) = Some(e);
                            return;
                        }
                    }
                }
            }
        });
        VisibilityKeeper {
            current,
            lost,
            extensions,
            stop,
            task: Some(task),
        }
    }

    /// How many extensions succeeded so far.
    pub fn extensions(&self) -> u32 {
        *lock(&self.extensions)
    }

    /// Stop extending. Returns the message with its latest receipt, or the error that ended
    /// the extensions early (the receipt went stale: the message was or will be redelivered).
    pub async fn stop(mut self) -> Result<QueueMessage> {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        if let Some(e) = lock(&self.lost).take() {
            return Err(e);
        }
        Ok(lock(&self.current).clone())
    }
}

impl Drop for VisibilityKeeper {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
