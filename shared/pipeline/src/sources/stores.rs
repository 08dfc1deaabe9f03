//! Object stores for cloud buckets: one [`S3Store`] per bucket, bound on first use and shared,
//! and the object-store checkpoint table.
//!
//! Events name their bucket, and a queue may carry events of several buckets; they all share
//! the source's endpoint, region and keys. The SDK client is built once per provider when the
//! pipeline opens (that is where the environment is read); a bucket seen for the first time
//! gets the same client bound to its name ([`S3Store::with_bucket`]), which needs no IO, so the
//! resolver stays synchronous.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use floe_checkpoint::{CheckpointStore, ObjectStoreCheckpoint};
use floe_core::{Error, ErrorKind, ObjectChange, Provider, Result};
use floe_storage::{ObjectStore, S3Store, S3StoreConfig, probe_conditional_writes};

use crate::config::StoreSettings;

/// The bucket name the template client is built with when no bucket is known yet (it is only
/// ever used through [`S3Store::with_bucket`]).
const UNBOUND: &str = "floe-unbound";

/// Finds the object store holding a changed object.
pub trait StoreResolver: Send + Sync + fmt::Debug {
    /// The store for `change`'s bucket.
    fn store(&self, change: &ObjectChange) -> Result<Arc<dyn ObjectStore>>;
}

/// One store for every change (a local folder, or a single-bucket source).
#[derive(Debug)]
pub struct SingleStore(pub Arc<dyn ObjectStore>);

impl StoreResolver for SingleStore {
    fn store(&self, _change: &ObjectChange) -> Result<Arc<dyn ObjectStore>> {
        Ok(self.0.clone())
    }
}

/// Build an [`S3Store`] for `bucket` with `settings`.
pub async fn open_s3(
    provider: Provider,
    bucket: &str,
    settings: &StoreSettings,
) -> Result<S3Store> {
    S3Store::new(store_config(provider, bucket, settings)).await
}

/// The store configuration of `bucket` with `settings` (endpoint, region, addressing, keys).
pub fn store_config(provider: Provider, bucket: &str, settings: &StoreSettings) -> S3StoreConfig {
    let mut config = S3StoreConfig::new(provider, bucket).with_path_style(settings.path_style);
    if let Some(e) = &settings.endpoint {
        config = config.with_endpoint(e);
    }
    if let Some(r) = &settings.region {
        config = config.with_region(r);
    }
    if let (Some(id), Some(secret)) = (&settings.access_key_id, &settings.secret_access_key) {
        config = config.with_keys(id, secret.clone(), settings.session_token.clone());
    }
    config
}

/// The checkpoint table as objects under `prefix` in `bucket`.
pub async fn open_object_store_checkpoint(
    provider: Provider,
    bucket: &str,
    prefix: &str,
    settings: &StoreSettings,
) -> Result<Arc<dyn CheckpointStore>> {
    let store = open_s3(provider, bucket, settings)
        .await
        .map_err(|e| e.while_doing(format!("failed to open the checkpoint bucket {bucket}")))?;
    // Claims and leases are conditional writes: make sure the store keeps them before any
    // state is trusted to it (and that the bucket is there and writable).
    let probe = format!("{prefix}_probe/{}", uuid::Uuid::now_v7());
    probe_conditional_writes(&store, &probe)
        .await
        .map_err(|e| {
            let e = e.while_doing(format!(
                "failed to check the checkpoint bucket {bucket} (writing {})",
                store.url(&probe)
            ));
            // A bucket that is not there or that the credentials cannot write is a deployment
            // mistake, not a passing fault: report it as configuration.
            match e.kind() {
                ErrorKind::NotFound | ErrorKind::Auth => {
                    Error::config("checkpoint.bucket", e.to_string())
                }
                _ => e,
            }
        })?;
    Ok(Arc::new(ObjectStoreCheckpoint::new(
        Arc::new(store),
        prefix,
    )))
}

/// A [`StoreResolver`] for cloud buckets: one store per (provider, bucket), created lazily and
/// shared.
#[derive(Debug)]
pub struct BucketStores {
    provider: Provider,
    template: S3Store,
    bound: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
}

impl BucketStores {
    /// Build the client for `provider` with `settings`; `first_bucket` (the listing's bucket,
    /// when there is one) is bound at once.
    pub async fn open(
        provider: Provider,
        settings: &StoreSettings,
        first_bucket: Option<&str>,
    ) -> Result<Self> {
        let template = open_s3(provider, first_bucket.unwrap_or(UNBOUND), settings)
            .await
            .map_err(|e| e.while_doing("failed to set up the source's object store"))?;
        Ok(BucketStores {
            provider,
            template,
            bound: Mutex::new(HashMap::new()),
        })
    }

    /// The store of `bucket`.
    pub fn bucket(&self, bucket: &str) -> Result<Arc<dyn ObjectStore>> {
        let mut bound = self.bound.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = bound.get(bucket) {
            return Ok(s.clone());
        }
        let store: Arc<dyn ObjectStore> = Arc::new(self.template.with_bucket(bucket)?);
        bound.insert(bucket.to_owned(), store.clone());
        Ok(store)
    }

    /// The provider its stores serve.
    pub fn provider(&self) -> Provider {
        self.provider
    }
}

impl StoreResolver for BucketStores {
    fn store(&self, change: &ObjectChange) -> Result<Arc<dyn ObjectStore>> {
        if change.provider != self.provider {
            return Err(Error::new(
                ErrorKind::Config,
                format!(
                    "{} names a {:?} bucket, but the source reads {:?} buckets",
                    change.url(),
                    change.provider,
                    self.provider
                ),
            )
            .with_retryable(false));
        }
        self.bucket(&change.bucket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(provider: Provider, bucket: &str) -> ObjectChange {
        ObjectChange::created(provider, bucket, "k")
    }

    #[tokio::test]
    async fn one_store_per_bucket_shared_and_the_provider_checked() {
        let settings = StoreSettings {
            endpoint: Some("http://127.0.0.1:9".into()),
            region: Some("us-east-1".into()),
            path_style: true,
            access_key_id: Some("AK".into()),
            secret_access_key: Some("SK".into()),
            session_token: None,
        };
        let stores = BucketStores::open(Provider::S3, &settings, Some("first"))
            .await
            .unwrap();
        let a = stores.store(&change(Provider::S3, "a")).unwrap();
        let a2 = stores.store(&change(Provider::S3, "a")).unwrap();
        assert!(Arc::ptr_eq(&a, &a2));
        assert_eq!(a.url("x/y"), "s3://a/x/y");
        assert_eq!(stores.bucket("first").unwrap().bucket(), "first");
        let e = stores.store(&change(Provider::Oss, "a")).unwrap_err();
        assert!(e.to_string().contains("oss://a/k"), "{e}");
        assert!(stores.store(&change(Provider::S3, "a/b")).is_err());
    }
}
