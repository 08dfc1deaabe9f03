//! [`Upload`]: an object written as its bytes come, in parts (S3's multipart upload, which OSS's
//! S3-compatible API also serves), so that memory holds one part and not the object: a Parquet
//! file is written this way while its row groups are encoded.
//!
//! ```text
//!  write ─▶ buffer ≥ part size? ─ no ─▶ keep
//!                  └─ yes ─▶ (first part: CreateMultipartUpload) ─▶ UploadPart n
//!  finish ─▶ no part sent ─▶ one PutObject of the buffer (a small file costs one request)
//!        └─▶ parts sent   ─▶ UploadPart (the rest) ─▶ CompleteMultipartUpload
//!  a failed part or completion ─▶ AbortMultipartUpload (best effort), the error returned
//! ```
//!
//! An upload dropped before `finish` leaves no object; its parts stay until the bucket's
//! lifecycle rule for incomplete multipart uploads removes them (as with any S3 client).

use aws_sdk_s3::primitives::ByteStream as SdkByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use bytes::{Bytes, BytesMut};
use floe_core::Result;

use super::S3Store;
use super::error::{Op, map};
use crate::{ObjectStore, PutMode};

/// Bytes sent per part: 8 MiB. S3 and OSS need at least 5 MiB in every part but the last, and
/// allow 10,000 parts: objects up to 78 GiB.
pub const PART_SIZE: usize = 8 << 20;

/// An object being written; see the module doc.
#[derive(Debug)]
pub struct Upload {
    store: S3Store,
    key: String,
    part_size: usize,
    buffer: BytesMut,
    /// The multipart upload, once the first part is sent.
    upload_id: Option<String>,
    parts: Vec<CompletedPart>,
}

impl S3Store {
    /// Start writing `key` (nothing is sent before a part is full or [`Upload::finish`]).
    pub fn upload(&self, key: &str) -> Upload {
        self.upload_in_parts_of(key, PART_SIZE)
    }

    /// [`S3Store::upload`] with another part size (tests; at least 5 MiB on S3 and OSS).
    pub fn upload_in_parts_of(&self, key: &str, part_size: usize) -> Upload {
        Upload {
            store: self.clone(),
            key: key.to_owned(),
            part_size: part_size.max(1),
            buffer: BytesMut::new(),
            upload_id: None,
            parts: Vec::new(),
        }
    }
}

impl Upload {
    /// Append `bytes`; sends every part that is full.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.buffer.extend_from_slice(bytes);
        while self.buffer.len() >= self.part_size {
            let part = self.buffer.split_to(self.part_size).freeze();
            if let Err(e) = self.send_part(part).await {
                self.abort().await;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Write what is left and make the object visible.
    pub async fn finish(mut self) -> Result<()> {
        let rest = std::mem::take(&mut self.buffer).freeze();
        if self.upload_id.is_none() {
            self.store.put(&self.key, rest, PutMode::Overwrite).await?;
            return Ok(());
        }
        let done = async {
            if !rest.is_empty() {
                self.send_part(rest).await?;
            }
            self.complete().await
        }
        .await;
        if done.is_err() {
            self.abort().await;
        }
        done
    }

    fn url(&self) -> String {
        self.store.url(&self.key)
    }

    async fn send_part(&mut self, body: Bytes) -> Result<()> {
        let client = self.store.sdk_client();
        let upload_id = match &self.upload_id {
            Some(id) => id.clone(),
            None => {
                let out = client
                    .create_multipart_upload()
                    .bucket(self.store.bucket())
                    .key(&self.key)
                    .send()
                    .await
                    .map_err(|e| map("start the upload of", &self.url(), Op::Write, e))?;
                let id = out.upload_id().unwrap_or_default().to_owned();
                if id.is_empty() {
                    return Err(floe_core::Error::new(
                        floe_core::ErrorKind::Protocol,
                        format!("starting the upload of {}: no upload id", self.url()),
                    ));
                }
                self.upload_id = Some(id.clone());
                id
            }
        };
        let number = i32::try_from(self.parts.len() + 1).unwrap_or(i32::MAX);
        let out = client
            .upload_part()
            .bucket(self.store.bucket())
            .key(&self.key)
            .upload_id(&upload_id)
            .part_number(number)
            .body(SdkByteStream::from(body))
            .send()
            .await
            .map_err(|e| {
                map(
                    &format!("upload part {number} of"),
                    &self.url(),
                    Op::Write,
                    e,
                )
            })?;
        self.parts.push(
            CompletedPart::builder()
                .part_number(number)
                .set_e_tag(out.e_tag().map(str::to_owned))
                .build(),
        );
        Ok(())
    }

    async fn complete(&mut self) -> Result<()> {
        let Some(upload_id) = &self.upload_id else {
            return Ok(());
        };
        self.store
            .sdk_client()
            .complete_multipart_upload()
            .bucket(self.store.bucket())
            .key(&self.key)
            .upload_id(upload_id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(std::mem::take(&mut self.parts)))
                    .build(),
            )
            .send()
            .await
            .map_err(|e| map("complete the upload of", &self.url(), Op::Write, e))?;
        self.upload_id = None;
        Ok(())
    }

    /// Drop the parts sent so far (best effort: a failure leaves them to the bucket's lifecycle).
    async fn abort(&mut self) {
        let Some(upload_id) = self.upload_id.take() else {
            return;
        };
        let sent = self
            .store
            .sdk_client()
            .abort_multipart_upload()
            .bucket(self.store.bucket())
            .key(&self.key)
            .upload_id(&upload_id)
            .send()
            .await;
        if let Err(e) = sent {
            let e = map("abort the upload of", &self.url(), Op::Write, e);
            tracing::warn!(error = %e, "an unfinished upload's parts are left to the bucket's lifecycle");
        }
    }
}
