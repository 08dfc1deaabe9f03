//! The stored side of the startup modes: the decision under `cursor/<source>` in the checkpoint
//! table, written once with put-if-absent and changed only by compare-and-set, so concurrent
//! instances of one source agree on it.

use std::sync::Arc;

use floe_checkpoint::{CheckpointStore, StoreExt};
use floe_core::{Error, ErrorKind, Result};

use super::decision::{StartupConfig, StartupDecision};

/// Compare-and-set rounds before giving up on a cursor that keeps changing.
const MAX_ROUNDS: usize = 16;

/// One source's cursor in the checkpoint table.
#[derive(Debug, Clone)]
pub struct StartupCursor {
    store: Arc<dyn CheckpointStore>,
    source: String,
}

impl StartupCursor {
    /// The cursor of `source` (a name unique per source: letters, digits, `-`, `_`, `.`).
    pub fn new(store: Arc<dyn CheckpointStore>, source: impl Into<String>) -> Result<Self> {
        let source = source.into();
        if source.is_empty()
            || !source
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return Err(Error::config(
                "source",
                format!("`{source}` is not a source name (letters, digits, `-`, `_`, `.`)"),
            ));
        }
        Ok(StartupCursor { store, source })
    }

    /// The checkpoint key: `cursor/<source>`.
    pub fn key(&self) -> String {
        format!("cursor/{}", self.source)
    }

    /// The stored decision, if any.
    pub async fn load(&self) -> Result<Option<StartupDecision>> {
        Ok(self
            .store
            .get_json::<StartupDecision>(&self.key())
            .await?
            .map(|(d, _)| d))
    }

    /// At start: the stored decision if there is one and `config` may resume it, else the
    /// decision `config` makes at `now_ms`, stored. When two instances start at once, the one
    /// whose insert lands decides and the other reads and checks that decision.
    pub async fn start(&self, config: &StartupConfig, now_ms: i64) -> Result<StartupDecision> {
        config.validate()?;
        let key = self.key();
        for _ in 0..MAX_ROUNDS {
            if let Some((stored, _)) = self.store.get_json::<StartupDecision>(&key).await? {
                config.check_resume(&stored)?;
                tracing::info!(source = %self.source, decision = %stored.describe(), "startup: resuming");
                return Ok(stored);
            }
            let decision = config.decide(now_ms);
            if self
                .store
                .insert_json(&key, &decision, None)
                .await?
                .is_some()
            {
                tracing::info!(source = %self.source, decision = %decision.describe(), "startup: decided");
                return Ok(decision);
            }
        }
        Err(self.kept_changing())
    }

    /// Mark the `INITIAL` / `SNAPSHOT` listing done at `now_ms` (idempotent). Returns the
    /// updated decision.
    pub async fn mark_listing_done(&self, now_ms: i64) -> Result<StartupDecision> {
        self.update(|d| match d.listing.as_mut() {
            Some(l) if l.done_ms.is_none() => {
                l.done_ms = Some(now_ms);
                Ok(true)
            }
            Some(_) => Ok(false),
            None => Err(Error::new(
                ErrorKind::InvalidInput,
                format!("source is {}: it has no listing to finish", d.describe()),
            )),
        })
        .await
    }

    /// Raise the committed watermark to `enqueue_time_ms` if it is newer (idempotent, never
    /// moves back).
    pub async fn advance_committed(&self, enqueue_time_ms: i64) -> Result<StartupDecision> {
        self.update(|d| {
            if d.committed_ms.is_some_and(|c| c >= enqueue_time_ms) {
                Ok(false)
            } else {
                d.committed_ms = Some(enqueue_time_ms);
                Ok(true)
            }
        })
        .await
    }

    /// Forget the decision, so the next start decides again from its configuration. Returns
    /// whether there was one.
    pub async fn reset(&self) -> Result<bool> {
        let key = self.key();
        for _ in 0..MAX_ROUNDS {
            match self.store.get(&key).await? {
                None => return Ok(false),
                Some(e) => {
                    if self.store.delete_if_version(&key, &e.version).await? {
                        tracing::info!(source = %self.source, "startup: cursor reset");
                        return Ok(true);
                    }
                }
            }
        }
        Err(self.kept_changing())
    }

    /// Read, change (when `change` says so), compare-and-set; retried on a lost race.
    async fn update(
        &self,
        change: impl Fn(&mut StartupDecision) -> Result<bool>,
    ) -> Result<StartupDecision> {
        let key = self.key();
        for _ in 0..MAX_ROUNDS {
            let (mut d, version) = self
                .store
                .get_json::<StartupDecision>(&key)
                .await?
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::NotFound,
                        format!("source `{}` has no startup decision yet", self.source),
                    )
                })?;
            if !change(&mut d)? {
                return Ok(d);
            }
            if self
                .store
                .update_json(&key, &d, &version, None)
                .await?
                .is_some()
            {
                return Ok(d);
            }
        }
        Err(self.kept_changing())
    }

    fn kept_changing(&self) -> Error {
        Error::new(
            ErrorKind::Conflict,
            format!("the cursor of source `{}` kept changing", self.source),
        )
    }
}
