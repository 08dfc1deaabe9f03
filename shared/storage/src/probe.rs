//! Checking that a store honours conditional writes before state is kept in it.
//!
//! floe's object-store checkpoint table is correct only if `PUT` with `If-None-Match: *` refuses
//! to replace an object and `PUT` with `If-Match` refuses a stale ETag. A store that ignores the
//! headers (an older S3-compatible server, a proxy that drops them) accepts every write, and two
//! instances would then both "win" a claim: rows double without a single error. So the store is
//! asked once, on a key of its own, before anything is trusted to it:
//!
//! 1. create the probe key: must succeed;
//! 2. create it again: must be refused;
//! 3. update it with an ETag it does not have: must be refused;
//! 4. update it with its real ETag: must succeed;
//! 5. delete it.
//!
//! Any step that goes the wrong way is a configuration error naming the object and what the
//! store did; transport errors are returned as they are.

use bytes::Bytes;
use floe_core::{Error, Result};

use crate::store::{ObjectStore, PutMode};

/// Run the probe on `key` (which must not exist: give it a unique name) of `store`.
pub async fn probe_conditional_writes(store: &dyn ObjectStore, key: &str) -> Result<()> {
    let url = store.url(key);
    let refuse = |what: &str| {
        Error::config(
            "checkpoint",
            format!(
                "the store of {url} does not honour conditional writes ({what}); floe keeps its \
                 checkpoint table only where they hold, so it will not start"
            ),
        )
    };
    let body = |step: &str| Bytes::from(format!("floe conditional-write probe: {step}\n"));
    let first = store
        .put(key, body("create"), PutMode::IfAbsent)
        .await?
        .ok_or_else(|| refuse("a create with If-None-Match: * of a new key was refused"))?;
    let outcome = async {
        if store
            .put(key, body("second create"), PutMode::IfAbsent)
            .await?
            .is_some()
        {
            return Err(refuse(
                "a second create with If-None-Match: * replaced the object",
            ));
        }
        let wrong = format!("{first}-not-it");
        if store
            .put(key, body("stale update"), PutMode::IfMatch(wrong))
            .await?
            .is_some()
        {
            return Err(refuse(
                "an update with a wrong If-Match ETag replaced the object",
            ));
        }
        if store
            .put(key, body("update"), PutMode::IfMatch(first.clone()))
            .await?
            .is_none()
        {
            return Err(refuse(
                "an update with the object's own ETag in If-Match was refused",
            ));
        }
        Ok(())
    }
    .await;
    let cleanup = store.delete(key).await;
    outcome?;
    cleanup
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LocalStore;

    #[tokio::test]
    async fn a_local_folder_passes_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path(), "b").unwrap();
        probe_conditional_writes(&store, "state/_probe/1")
            .await
            .unwrap();
        assert!(store.head("state/_probe/1").await.unwrap().is_none());
    }
}
