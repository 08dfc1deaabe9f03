//! [`S3Store`]: the [`ObjectStore`] over `aws-sdk-s3`.

use async_trait::async_trait;
use aws_sdk_s3::primitives::{ByteStream as SdkByteStream, DateTime as SdkDateTime};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use floe_core::{Error, Provider, Result};

use super::client;

/// OSS's create-only header on PUT (`x-oss-forbid-overwrite: true`).
const OSS_FORBID_OVERWRITE: &str = "x-oss-forbid-overwrite";
use super::config::S3StoreConfig;
use super::error::{Op, map};
use crate::store::{ByteStream, GetResult, ListPage, ObjectMeta, ObjectStore, PutMode};

/// Most keys one ListObjectsV2 page returns.
const MAX_LIST_KEYS: usize = 1000;

/// An S3 or OSS bucket through the S3 API; cheap to clone (the connection pool is shared).
#[derive(Clone, Debug)]
pub struct S3Store {
    client: aws_sdk_s3::Client,
    provider: Provider,
    bucket: String,
}

impl S3Store {
    /// Check `config` and build the client. Reads the environment (default credential chain,
    /// region) but sends no request.
    pub async fn new(config: S3StoreConfig) -> Result<Self> {
        let client = client::build(&config).await?;
        Ok(S3Store {
            client,
            provider: config.provider,
            bucket: config.bucket,
        })
    }

    /// The same client and credentials for another bucket of the same store (buckets named by
    /// events are bound this way, without building a client per bucket).
    pub fn with_bucket(&self, bucket: impl Into<String>) -> Result<Self> {
        let bucket = bucket.into();
        if bucket.is_empty() || bucket.contains('/') {
            return Err(Error::invalid_input(format!(
                "`{bucket}` is not a bucket name"
            )));
        }
        Ok(S3Store {
            client: self.client.clone(),
            provider: self.provider,
            bucket,
        })
    }

    /// The SDK client, for calls the trait does not cover (bucket administration in tools and
    /// tests).
    pub fn sdk_client(&self) -> &aws_sdk_s3::Client {
        &self.client
    }

    fn scheme(&self) -> &'static str {
        match self.provider {
            Provider::Oss => "oss",
            _ => "s3",
        }
    }
}

/// An ETag as floe keeps it: without the quotes S3 sends.
fn unquote(etag: &str) -> String {
    etag.trim_matches('"').to_owned()
}

/// An ETag as `If-Match` wants it: quoted.
fn quote(etag: &str) -> String {
    if etag.starts_with('"') || etag.starts_with("W/") {
        etag.to_owned()
    } else {
        format!("\"{etag}\"")
    }
}

fn to_chrono(t: &SdkDateTime) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.secs(), t.subsec_nanos())
}

fn size(len: Option<i64>) -> u64 {
    len.and_then(|n| u64::try_from(n).ok()).unwrap_or(0)
}

/// The SDK's body as floe's stream: chunks as they arrive from the socket (memory stays flat
/// however large the object), the first error ends it.
fn body_stream(body: SdkByteStream, url: String) -> ByteStream {
    let stream = futures::stream::unfold(Some(body), move |state| {
        let url = url.clone();
        async move {
            let mut body = state?;
            match body.try_next().await {
                Ok(Some(chunk)) => Some((Ok(chunk), Some(body))),
                Ok(None) => None,
                Err(e) => Some((
                    Err(Error::new(
                        floe_core::ErrorKind::Io,
                        format!("failed to read the body of {url}"),
                    )
                    .with_context("url", url)
                    .with_source(e)),
                    None,
                )),
            }
        }
    });
    Box::pin(stream)
}

#[async_trait]
impl ObjectStore for S3Store {
    fn provider(&self) -> Provider {
        self.provider
    }

    fn bucket(&self) -> &str {
        &self.bucket
    }

    fn url(&self, key: &str) -> String {
        format!("{}://{}/{key}", self.scheme(), self.bucket)
    }

    async fn list(&self, prefix: &str, token: Option<&str>, max_keys: usize) -> Result<ListPage> {
        let max = i32::try_from(max_keys.clamp(1, MAX_LIST_KEYS)).unwrap_or(1000);
        let mut req = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .max_keys(max);
        if !prefix.is_empty() {
            req = req.prefix(prefix);
        }
        if let Some(t) = token {
            req = req.continuation_token(t);
        }
        let out = req
            .send()
            .await
            .map_err(|e| map("list", &self.url(prefix), Op::Read, e))?;
        let objects = out
            .contents()
            .iter()
            .filter_map(|o| {
                Some(ObjectMeta {
                    key: o.key()?.to_owned(),
                    size: size(o.size()),
                    etag: o.e_tag().map(unquote),
                    last_modified: o.last_modified().and_then(to_chrono),
                    version_id: None,
                    content_type: None,
                    content_encoding: None,
                })
            })
            .collect();
        let next_token = if out.is_truncated().unwrap_or(false) {
            match out.next_continuation_token() {
                Some(t) => Some(t.to_owned()),
                None => {
                    return Err(Error::new(
                        floe_core::ErrorKind::Protocol,
                        format!(
                            "failed to list {}: a truncated page has no continuation token",
                            self.url(prefix)
                        ),
                    ));
                }
            }
        } else {
            None
        };
        Ok(ListPage {
            objects,
            next_token,
        })
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
        let out = match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                let e = map("head", &self.url(key), Op::Read, e);
                return match e.kind() {
                    floe_core::ErrorKind::NotFound => Ok(None),
                    _ => Err(e),
                };
            }
        };
        Ok(Some(ObjectMeta {
            key: key.to_owned(),
            size: size(out.content_length()),
            etag: out.e_tag().map(unquote),
            last_modified: out.last_modified().and_then(to_chrono),
            version_id: out.version_id().map(str::to_owned),
            content_type: out.content_type().map(str::to_owned),
            content_encoding: out.content_encoding().map(str::to_owned),
        }))
    }

    async fn get(&self, key: &str) -> Result<GetResult> {
        let url = self.url(key);
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| map("get", &url, Op::Read, e))?;
        let meta = ObjectMeta {
            key: key.to_owned(),
            size: size(out.content_length()),
            etag: out.e_tag().map(unquote),
            last_modified: out.last_modified().and_then(to_chrono),
            version_id: out.version_id().map(str::to_owned),
            content_type: out.content_type().map(str::to_owned),
            content_encoding: out.content_encoding().map(str::to_owned),
        };
        Ok(GetResult {
            meta,
            body: body_stream(out.body, url),
        })
    }

    async fn get_range(&self, key: &str, start: u64, end: u64) -> Result<Bytes> {
        if end <= start {
            return Ok(Bytes::new());
        }
        let url = self.url(key);
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .range(format!("bytes={start}-{}", end - 1))
            .send()
            .await
            .map_err(|e| map("get a range of", &url, Op::Read, e))?;
        let bytes = out
            .body
            .collect()
            .await
            .map_err(|e| {
                Error::new(
                    floe_core::ErrorKind::Io,
                    format!("failed to read bytes {start}..{end} of {url}"),
                )
                .with_source(e)
            })?
            .into_bytes();
        let want = end - start;
        if bytes.len() as u64 != want {
            return Err(Error::new(
                floe_core::ErrorKind::InvalidInput,
                format!(
                    "failed to read bytes {start}..{end} of {url}: got {} bytes (the object is shorter)",
                    bytes.len()
                ),
            ));
        }
        Ok(bytes)
    }

    async fn put(&self, key: &str, body: Bytes, mode: PutMode) -> Result<Option<String>> {
        let url = self.url(key);
        let mut req = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(SdkByteStream::from(body));
        match &mode {
            PutMode::Overwrite => {}
            PutMode::IfAbsent => req = req.if_none_match("*"),
            PutMode::IfMatch(etag) => req = req.if_match(quote(etag)),
        }
        // OSS has its own create-only header; sent beside `If-None-Match` so a create holds on
        // either reading of the request.
        let sent = if mode == PutMode::IfAbsent && self.provider == Provider::Oss {
            req.customize()
                .mutate_request(|r| {
                    r.headers_mut().insert(OSS_FORBID_OVERWRITE, "true");
                })
                .send()
                .await
        } else {
            req.send().await
        };
        match sent {
            Ok(out) => Ok(Some(out.e_tag().map(unquote).unwrap_or_default())),
            Err(e) => {
                // 412: the condition did not hold. S3 answers an `If-Match` on a missing key
                // with 404, which means the same thing here; OSS refuses a forbidden overwrite
                // with 409 `FileAlreadyExists`.
                let status = e.raw_response().map(|r| r.status().as_u16());
                let code = e.as_service_error().and_then(|s| s.meta().code());
                let lost = match mode {
                    PutMode::Overwrite => false,
                    PutMode::IfAbsent => {
                        status == Some(412)
                            || (status == Some(409) && code == Some("FileAlreadyExists"))
                    }
                    PutMode::IfMatch(_) => matches!(status, Some(412 | 404)),
                };
                if lost {
                    Ok(None)
                } else {
                    Err(map("put", &url, Op::Write, e))
                }
            }
        }
    }

    async fn delete(&self, key: &str) -> Result<()> {
        let url = self.url(key);
        match self
            .client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                let e = map("delete", &url, Op::Write, e);
                match e.kind() {
                    floe_core::ErrorKind::NotFound => Ok(()),
                    _ => Err(e),
                }
            }
        }
    }

    async fn delete_if_match(&self, key: &str, etag: &str) -> Result<bool> {
        let url = self.url(key);
        match self
            .client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .if_match(quote(etag))
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) => match e.raw_response().map(|r| r.status().as_u16()) {
                Some(412 | 404) => Ok(false),
                _ => Err(map("delete", &url, Op::Write, e)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_lose_quotes_and_regain_them_for_if_match() {
        assert_eq!(unquote("\"abc\""), "abc");
        assert_eq!(unquote("abc-2"), "abc-2");
        assert_eq!(quote("abc"), "\"abc\"");
        assert_eq!(quote("\"abc\""), "\"abc\"");
    }
}
