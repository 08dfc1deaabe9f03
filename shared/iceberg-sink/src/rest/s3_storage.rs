//! Iceberg's `Storage` for `s3://` (`s3a://`, `s3n://`) and `oss://` locations, on floe's own S3
//! client ([`floe_storage::S3Store`], aws-sdk-s3 on rustls with ring): the client every function
//! already carries to read objects, so a table's files go through the same HTTP and TLS stack,
//! the same retries and the same credential rules as the objects floe lands, and no second
//! client (OpenDAL with its own reqwest and TLS provider) is linked.
//!
//! | FileIO property | meaning |
//! |---|---|
//! | `s3.endpoint` | the endpoint URL (for `oss://`, OSS's S3-compatible endpoint) |
//! | `s3.region`, then `client.region` | the signing region; with an endpoint and neither set, `us-east-1` |
//! | `s3.path-style-access` | `true` / `false`: `endpoint/bucket/key` addressing |
//! | `s3.access-key-id`, `s3.secret-access-key`, `s3.session-token` | keys; without them S3's default chain (Lambda's role), and for `oss://` the Alibaba chain (on Function Compute the latest invocation's keys) |
//!
//! `s3.sse.*`, `s3.assume-role.*` and `s3.allow-anonymous = true` are refused by name: this
//! storage does not implement them, and a table written without the encryption or role its
//! properties ask for must not happen silently.
//!
//! Reads are ranged GETs (a Parquet footer, then its column chunks); writes of metadata and
//! manifests are one PUT; data files stream through [`floe_storage::s3::Upload`], a multipart
//! upload holding one 8 MiB part in memory. OSS gets S3's API with checksums only when an
//! operation requires them (what OSS accepts; see [`floe_storage::ChecksumPolicy`]).

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use floe_core::Provider;
use floe_storage::s3::Upload;
use floe_storage::{ObjectStore, PutMode, S3Store, S3StoreConfig};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::io::{
    FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage, StorageConfig,
    StorageFactory,
};
use iceberg::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};
use tokio::sync::OnceCell;

use super::file_io::{S3_ENDPOINT, S3_PATH_STYLE_ACCESS, is_local_endpoint, oss_endpoint};

/// Deletes in flight at once (orphan removal, a dropped table's files).
const DELETE_CONCURRENCY: usize = 16;

/// Most clients a [`StoreCache`] keeps (vended keys change from load to load; the oldest go).
const CACHED_CLIENTS: usize = 8;

/// The clients the FileIOs of one catalog have built, by endpoint, region, addressing and keys:
/// the FileIO of every table load (each commit pass loads its tables) reuses the client, so its
/// connections, instead of building a new one. Kept per catalog, not per process: a client's
/// pooled connections belong to the tokio runtime that opened them.
#[derive(Clone, Default)]
pub struct StoreCache(Arc<std::sync::Mutex<Vec<(String, S3Store)>>>);

impl StoreCache {
    /// How many clients are kept.
    pub fn len(&self) -> usize {
        self.0.lock().map_or(0, |c| c.len())
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn get(&self, key: &str) -> Option<S3Store> {
        let clients = self.0.lock().ok()?;
        clients
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, s)| s.clone())
    }

    fn put(&self, key: String, store: S3Store) {
        if let Ok(mut clients) = self.0.lock() {
            if clients.len() >= CACHED_CLIENTS {
                clients.remove(0);
            }
            clients.push((key, store));
        }
    }
}

impl fmt::Debug for StoreCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreCache({} clients)", self.len())
    }
}

/// What tells two clients apart: everything of the configuration but the bucket (a client
/// serves every bucket of its endpoint). Holds the keys: kept in memory, never printed.
fn client_key(c: &S3StoreConfig) -> String {
    let secret = |s: &Option<floe_core::Secret>| s.as_ref().map(|s| s.expose().to_owned());
    format!(
        "{:?}|{:?}|{:?}|{}|{:?}|{:?}|{:?}",
        c.provider,
        c.endpoint,
        c.region,
        c.path_style,
        c.access_key_id,
        secret(&c.secret_access_key),
        secret(&c.session_token)
    )
}

/// Builds an [`S3Storage`] from a FileIO's properties.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct S3StorageFactory {
    /// `oss://` locations (Alibaba OSS through its S3-compatible API) rather than S3's.
    pub oss: bool,
    /// The clients to reuse (a deserialized factory starts with none).
    #[serde(skip)]
    pub stores: StoreCache,
}

#[typetag::serde]
impl StorageFactory for S3StorageFactory {
    fn build(&self, config: &StorageConfig) -> Result<Arc<dyn Storage>> {
        let spec = Spec {
            oss: self.oss,
            props: config.props().clone(),
        };
        spec.store_config("bucket")?;
        Ok(Arc::new(S3Storage {
            stores: self.stores.clone(),
            ..S3Storage::from(spec)
        }))
    }
}

/// What an [`S3Storage`] is made from (and what it serializes to).
#[derive(Clone, Serialize, Deserialize)]
struct Spec {
    oss: bool,
    props: HashMap<String, String>,
}

impl Spec {
    /// The store configuration for `bucket` ([`store_config`]).
    fn store_config(&self, bucket: &str) -> Result<S3StoreConfig> {
        store_config(self.oss, bucket, &self.props).map_err(|e| to_iceberg(e, "configure"))
    }
}

/// The store configuration for `bucket` from FileIO properties (see the module doc), or an
/// error naming the property that is wrong. An `oss://` location with no `s3.endpoint` gets
/// OSS's regional endpoint, and an endpoint on an IP address or `localhost` path style unless
/// the properties say otherwise, as [`table_file_io`](super::file_io::table_file_io) decides.
/// Orphan removal reaches a table's bucket through the same mapping.
pub fn store_config(
    oss: bool,
    bucket: &str,
    props: &HashMap<String, String>,
) -> floe_core::Result<S3StoreConfig> {
    let prop = |k: &str| props.get(k).map(String::as_str).filter(|v| !v.is_empty());
    if let Some(key) = props.keys().find(|k| {
        k.starts_with("s3.sse.")
            || k.starts_with("s3.assume-role.")
            || (k.as_str() == "s3.allow-anonymous" && prop(k) == Some("true"))
    }) {
        return Err(floe_core::Error::new(
            floe_core::ErrorKind::Unsupported,
            format!("FileIO property `{key}` is not supported by floe's s3 storage"),
        ));
    }
    let provider = if oss { Provider::Oss } else { Provider::S3 };
    let region = (prop("s3.region").or_else(|| prop("client.region"))).map(str::to_owned);
    let endpoint = match (prop(S3_ENDPOINT), &region) {
        (Some(e), _) => Some(e.to_owned()),
        (None, Some(r)) if oss => Some(oss_endpoint(r)),
        (None, None) if oss => {
            return Err(floe_core::Error::config(
                S3_ENDPOINT,
                "an oss:// table location needs s3.endpoint (or client.region)",
            ));
        }
        (None, _) => None,
    };
    let mut c = S3StoreConfig::new(provider, bucket);
    c.path_style = match prop(S3_PATH_STYLE_ACCESS) {
        None => endpoint.as_deref().is_some_and(is_local_endpoint),
        Some(v) if v.eq_ignore_ascii_case("true") => true,
        Some(v) if v.eq_ignore_ascii_case("false") => false,
        Some(v) => {
            return Err(floe_core::Error::config(
                S3_PATH_STYLE_ACCESS,
                format!("FileIO property `{S3_PATH_STYLE_ACCESS}` is `{v}`: true or false"),
            ));
        }
    };
    c.region = region.or_else(|| endpoint.as_ref().map(|_| "us-east-1".to_owned()));
    c.endpoint = endpoint;
    if let (Some(id), Some(secret)) = (prop("s3.access-key-id"), prop("s3.secret-access-key")) {
        let token = prop("s3.session-token").map(floe_core::Secret::new);
        c = c.with_keys(id, secret, token);
    }
    c.validate()?;
    Ok(c)
}

/// Iceberg file IO on S3 or OSS; see the module doc. Clones share one client.
#[derive(Clone, Serialize, Deserialize)]
#[serde(from = "Spec", into = "Spec")]
pub struct S3Storage {
    spec: Arc<Spec>,
    /// The client, built on first use (building it may read the credential chain).
    store: Arc<OnceCell<S3Store>>,
    /// Where the client is looked up before one is built.
    stores: StoreCache,
}

impl From<Spec> for S3Storage {
    fn from(spec: Spec) -> Self {
        S3Storage {
            spec: Arc::new(spec),
            store: Arc::default(),
            stores: StoreCache::default(),
        }
    }
}

impl From<S3Storage> for Spec {
    fn from(s: S3Storage) -> Self {
        (*s.spec).clone()
    }
}

impl fmt::Debug for S3Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let props: Vec<(&str, &str)> = (self.spec.props.iter())
            .map(|(k, v)| {
                let v = if crate::catalog::is_secret_prop(k) {
                    "***"
                } else {
                    v.as_str()
                };
                (k.as_str(), v)
            })
            .collect();
        f.debug_struct("S3Storage")
            .field("oss", &self.spec.oss)
            .field("props", &props)
            .finish()
    }
}

impl S3Storage {
    /// The store of `path`'s bucket and the key in it.
    async fn locate(&self, path: &str) -> Result<(S3Store, String)> {
        let (scheme, rest) = path.split_once("://").ok_or_else(|| invalid_path(path))?;
        let scheme = scheme.to_ascii_lowercase();
        let ours = if self.spec.oss {
            scheme == "oss"
        } else {
            matches!(scheme.as_str(), "s3" | "s3a" | "s3n")
        };
        let (bucket, key) = rest.split_once('/').ok_or_else(|| invalid_path(path))?;
        if !ours || bucket.is_empty() || key.is_empty() {
            return Err(invalid_path(path));
        }
        let base = self
            .store
            .get_or_try_init(|| async {
                let config = self.spec.store_config(bucket)?;
                let key = client_key(&config);
                if let Some(store) = self.stores.get(&key) {
                    return Ok::<_, Error>(store);
                }
                let store = S3Store::new(config)
                    .await
                    .map_err(|e| to_iceberg(e, "open the store of"))?;
                self.stores.put(key, store.clone());
                Ok(store)
            })
            .await?;
        let store = if base.bucket() == bucket {
            base.clone()
        } else {
            base.with_bucket(bucket)
                .map_err(|e| to_iceberg(e, "open"))?
        };
        Ok((store, key.to_owned()))
    }
}

fn invalid_path(path: &str) -> Error {
    Error::new(
        ErrorKind::DataInvalid,
        format!("`{path}` is not a location of this file IO (scheme://bucket/key)"),
    )
}

/// A floe storage error as iceberg's, keeping the message (it names the object) and whether a
/// retry may help.
fn to_iceberg(e: floe_core::Error, doing: &str) -> Error {
    use floe_core::ErrorKind as F;
    let kind = match e.kind() {
        F::Config | F::InvalidInput | F::NotFound => ErrorKind::DataInvalid,
        F::Unsupported => ErrorKind::FeatureUnsupported,
        F::Conflict => ErrorKind::PreconditionFailed,
        _ => ErrorKind::Unexpected,
    };
    let retryable = e.is_retryable();
    Error::new(kind, format!("failed to {doing}: {e}"))
        .with_retryable(retryable)
        .with_source(e)
}

#[async_trait]
#[typetag::serde]
impl Storage for S3Storage {
    async fn exists(&self, path: &str) -> Result<bool> {
        let (store, key) = self.locate(path).await?;
        let meta = store
            .head(&key)
            .await
            .map_err(|e| to_iceberg(e, "look up"))?;
        Ok(meta.is_some())
    }

    async fn metadata(&self, path: &str) -> Result<FileMetadata> {
        let (store, key) = self.locate(path).await?;
        match store
            .head(&key)
            .await
            .map_err(|e| to_iceberg(e, "look up"))?
        {
            Some(meta) => Ok(FileMetadata { size: meta.size }),
            None => Err(Error::new(
                ErrorKind::DataInvalid,
                format!("{path} does not exist"),
            )),
        }
    }

    async fn read(&self, path: &str) -> Result<Bytes> {
        let (store, key) = self.locate(path).await?;
        let got = store.get(&key).await.map_err(|e| to_iceberg(e, "read"))?;
        let chunks: Vec<Bytes> = got
            .body
            .try_collect()
            .await
            .map_err(|e| to_iceberg(e, "read"))?;
        Ok(match chunks.len() {
            1 => chunks.into_iter().next().unwrap_or_default(),
            _ => Bytes::from(chunks.concat()),
        })
    }

    async fn reader(&self, path: &str) -> Result<Box<dyn FileRead>> {
        let (store, key) = self.locate(path).await?;
        Ok(Box::new(RangeReader { store, key }))
    }

    async fn write(&self, path: &str, bs: Bytes) -> Result<()> {
        let (store, key) = self.locate(path).await?;
        store
            .put(&key, bs, PutMode::Overwrite)
            .await
            .map_err(|e| to_iceberg(e, "write"))?;
        Ok(())
    }

    async fn writer(&self, path: &str) -> Result<Box<dyn FileWrite>> {
        let (store, key) = self.locate(path).await?;
        Ok(Box::new(StreamingWriter {
            upload: Some(store.upload(&key)),
        }))
    }

    async fn delete(&self, path: &str) -> Result<()> {
        let (store, key) = self.locate(path).await?;
        store
            .delete(&key)
            .await
            .map_err(|e| to_iceberg(e, "delete"))
    }

    async fn delete_prefix(&self, path: &str) -> Result<()> {
        let (store, key) = self.locate(path).await?;
        let prefix = if key.ends_with('/') {
            key
        } else {
            format!("{key}/")
        };
        let mut token: Option<String> = None;
        loop {
            let page = store
                .list(&prefix, token.as_deref(), 1000)
                .await
                .map_err(|e| to_iceberg(e, "list"))?;
            let store = &store;
            futures::stream::iter(
                page.objects
                    .into_iter()
                    .map(|o| async move { store.delete(&o.key).await }),
            )
            .buffer_unordered(DELETE_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await
            .map_err(|e| to_iceberg(e, "delete"))?;
            match page.next_token {
                Some(t) => token = Some(t),
                None => return Ok(()),
            }
        }
    }

    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> Result<()> {
        paths
            .map(|path| async move { self.delete(&path).await })
            .buffer_unordered(DELETE_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }

    fn new_input(&self, path: &str) -> Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_owned()))
    }

    fn new_output(&self, path: &str) -> Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_owned()))
    }
}

/// Ranged reads of one object.
struct RangeReader {
    store: S3Store,
    key: String,
}

#[async_trait]
impl FileRead for RangeReader {
    async fn read(&self, range: Range<u64>) -> Result<Bytes> {
        self.store
            .get_range(&self.key, range.start, range.end)
            .await
            .map_err(|e| to_iceberg(e, "read"))
    }
}

/// A data file written as it is encoded (a multipart upload of 8 MiB parts).
struct StreamingWriter {
    upload: Option<Upload>,
}

#[async_trait]
impl FileWrite for StreamingWriter {
    async fn write(&mut self, bs: Bytes) -> Result<()> {
        let upload = self
            .upload
            .as_mut()
            .ok_or_else(|| Error::new(ErrorKind::Unexpected, "write after close"))?;
        upload.write(&bs).await.map_err(|e| to_iceberg(e, "write"))
    }

    async fn close(&mut self) -> Result<()> {
        let upload = self
            .upload
            .take()
            .ok_or_else(|| Error::new(ErrorKind::Unexpected, "closed twice"))?;
        upload.finish().await.map_err(|e| to_iceberg(e, "write"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pairs: &[(&str, &str)]) -> Spec {
        Spec {
            oss: false,
            props: (pairs.iter())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn properties_become_the_store_configuration_or_an_error_naming_them() {
        let c = spec(&[
            ("s3.endpoint", "http://127.0.0.1:9000"),
            ("s3.path-style-access", "true"),
            ("s3.access-key-id", "AK"),
            ("s3.secret-access-key", "SK"),
        ])
        .store_config("b")
        .unwrap();
        assert_eq!(c.region.as_deref(), Some("us-east-1"));
        assert!(c.path_style);
        assert_eq!(c.access_key_id.as_deref(), Some("AK"));
        let c = spec(&[("client.region", "eu-west-1")])
            .store_config("b")
            .unwrap();
        assert_eq!(c.region.as_deref(), Some("eu-west-1"));
        assert!(c.endpoint.is_none() && !c.path_style);
        for (key, value) in [
            ("s3.sse.type", "kms"),
            ("s3.assume-role.arn", "arn:aws:iam::1:role/r"),
            ("s3.allow-anonymous", "true"),
            ("s3.path-style-access", "yes"),
        ] {
            let e = spec(&[(key, value)]).store_config("b").unwrap_err();
            assert!(e.message().contains(key), "{key}: {e}");
        }
        let oss = Spec {
            oss: true,
            ..spec(&[])
        };
        let e = oss.store_config("b").unwrap_err();
        assert!(e.to_string().contains("endpoint"), "{e}");
    }

    #[tokio::test]
    async fn paths_of_another_scheme_or_without_a_key_are_refused() {
        let s = S3Storage::from(spec(&[("s3.endpoint", "http://127.0.0.1:9")]));
        for path in ["oss://b/k", "s3://b", "s3:///k", "b/k"] {
            let e = s.exists(path).await.unwrap_err();
            assert!(e.message().contains(path), "{path}: {e}");
        }
    }

    #[test]
    fn secrets_stay_out_of_debug_and_the_storage_round_trips_through_serde() {
        let s = S3Storage::from(spec(&[
            ("s3.secret-access-key", "very-secret"),
            ("s3.region", "r"),
        ]));
        let d = format!("{s:?}");
        assert!(!d.contains("very-secret") && d.contains("s3.region"), "{d}");
        let json = serde_json::to_string(&Spec::from(s.clone())).unwrap();
        let back: S3Storage = serde_json::from_str(&json).unwrap();
        assert_eq!(back.spec.props, s.spec.props);
    }
}
