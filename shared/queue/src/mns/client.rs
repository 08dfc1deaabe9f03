//! The MNS queue client: receive (one or a batch, with long polling), delete (one or a batch)
//! and change visibility, over HTTP(S) with MNS signatures.

use std::time::Duration;

use floe_core::{Error, ErrorKind, Result};
use floe_signing::{CredentialSource, mns as sign};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::{Method, StatusCode, Url};

use super::error::{self, codes};
use super::message::{BatchDeleteFailure, ChangedVisibility, ReceivedMessage};
use super::xml::{self, FailureBody};

/// Most messages one BatchReceiveMessage or BatchDeleteMessage call may name.
pub const MAX_BATCH: usize = 16;
/// Longest long-poll wait the service accepts, in seconds.
pub const MAX_WAIT_SECS: u32 = 30;
/// Longest visibility timeout the service accepts, in seconds (12 hours).
pub const MAX_VISIBILITY_TIMEOUT_SECS: u32 = 43_200;

/// Receipt handles go into the query as the SDKs send them (raw base64 with `+/=`); anything
/// else is percent-encoded so it cannot break the URL. What is sent is what is signed.
const HANDLE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'+')
    .remove(b'/')
    .remove(b'=');

/// Where and how to reach one MNS queue.
#[derive(Clone, Debug)]
pub struct MnsConfig {
    /// Account endpoint, `https://<account-id>.mns.<region>.aliyuncs.com`; no default.
    pub endpoint: String,
    /// Queue name (letters, digits and `-`); no default.
    pub queue: String,
    /// Where the access keys come from, asked before every request; an STS token is sent as
    /// `security-token`.
    pub credentials: CredentialSource,
    /// Time allowed for one call on top of its long-poll wait, in seconds; default 10.
    pub request_timeout_secs: u64,
}

impl MnsConfig {
    /// A configuration with the default timeout.
    pub fn new(
        endpoint: impl Into<String>,
        queue: impl Into<String>,
        credentials: impl Into<CredentialSource>,
    ) -> Self {
        MnsConfig {
            endpoint: endpoint.into(),
            queue: queue.into(),
            credentials: credentials.into(),
            request_timeout_secs: 10,
        }
    }
}

/// A client for one queue; cheap to clone (the HTTP connection pool is shared).
#[derive(Clone, Debug)]
pub struct MnsClient {
    http: reqwest::Client,
    endpoint: String,
    queue: String,
    credentials: CredentialSource,
    request_timeout: Duration,
}

impl MnsClient {
    /// Check `config` and build the client (no request is made).
    pub fn new(config: MnsConfig) -> Result<Self> {
        let endpoint = config.endpoint.trim_end_matches('/').to_owned();
        let url = Url::parse(&endpoint)
            .map_err(|e| Error::config("endpoint", format!("`{endpoint}` is not a url: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(Error::config(
                "endpoint",
                format!("`{endpoint}` must be an http(s) url with a host"),
            ));
        }
        if url.path() != "/" || url.query().is_some() {
            return Err(Error::config(
                "endpoint",
                format!("`{endpoint}` must not have a path or query"),
            ));
        }
        let q = &config.queue;
        if q.is_empty()
            || q.len() > 256
            || !q.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(Error::config(
                "queue",
                format!("`{q}` is not a queue name (letters, digits and `-`)"),
            ));
        }
        let http = reqwest::Client::builder().build().map_err(|e| {
            Error::new(ErrorKind::Io, "failed to build the http client").with_source(e)
        })?;
        Ok(MnsClient {
            http,
            endpoint,
            queue: config.queue,
            credentials: config.credentials,
            request_timeout: Duration::from_secs(config.request_timeout_secs),
        })
    }

    /// The queue name.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// GetQueueAttributes (`GET /queues/<queue>`): succeeds when the queue exists and the keys
    /// may read it; `QueueNotExist` is `NotFound`. The attributes themselves are not needed.
    pub async fn get_queue_attributes(&self) -> Result<()> {
        let resource = format!("/queues/{}", self.queue);
        match self
            .call(
                "get queue attributes",
                Method::GET,
                &resource,
                Vec::new(),
                None,
            )
            .await?
        {
            Response::Ok(_) => Ok(()),
            Response::Failed(e) => Err(e),
        }
    }

    /// ReceiveMessage: at most one message, waiting up to `wait_secs` (0..=30) for one to
    /// arrive; `None` uses the queue's own polling wait. `Ok(None)` when none arrived.
    pub async fn receive_message(&self, wait_secs: Option<u32>) -> Result<Option<ReceivedMessage>> {
        let wait = check_wait(wait_secs)?;
        let mut resource = self.messages_path();
        if let Some(w) = wait {
            resource.push_str(&format!("?waitseconds={w}"));
        }
        let resp = self
            .call("receive message", Method::GET, &resource, Vec::new(), wait)
            .await?;
        match resp {
            Response::Ok(body) => xml::parse_message(&body).map(Some).map_err(|e| {
                e.while_doing(format!(
                    "failed to read a message from mns queue {}",
                    self.queue
                ))
            }),
            Response::Failed(e) if error::mns_code(&e) == Some(codes::MESSAGE_NOT_EXIST) => {
                Ok(None)
            }
            Response::Failed(e) => Err(e),
        }
    }

    /// BatchReceiveMessage: up to `max_messages` (1..=16) messages, waiting up to `wait_secs`
    /// (0..=30) for the first; `None` uses the queue's own polling wait. An empty poll gives
    /// an empty vector. The service may return fewer messages than are waiting.
    pub async fn batch_receive_message(
        &self,
        max_messages: usize,
        wait_secs: Option<u32>,
    ) -> Result<Vec<ReceivedMessage>> {
        if !(1..=MAX_BATCH).contains(&max_messages) {
            return Err(Error::invalid_input(format!(
                "mns batch size must be 1..={MAX_BATCH}, got {max_messages}"
            )));
        }
        let wait = check_wait(wait_secs)?;
        let mut resource = format!("{}?numOfMessages={max_messages}", self.messages_path());
        if let Some(w) = wait {
            resource.push_str(&format!("&waitseconds={w}"));
        }
        let resp = self
            .call(
                "batch receive messages",
                Method::GET,
                &resource,
                Vec::new(),
                wait,
            )
            .await?;
        match resp {
            Response::Ok(body) => xml::parse_messages(&body).map_err(|e| {
                e.while_doing(format!(
                    "failed to read messages from mns queue {}",
                    self.queue
                ))
            }),
            Response::Failed(e) if error::mns_code(&e) == Some(codes::MESSAGE_NOT_EXIST) => {
                Ok(Vec::new())
            }
            Response::Failed(e) => Err(e),
        }
    }

    /// DeleteMessage. A stale handle fails with `MessageNotExist` or `ReceiptHandleError`
    /// (see [`error::is_stale_receipt_handle`]).
    pub async fn delete_message(&self, receipt_handle: &str) -> Result<()> {
        let resource = format!(
            "{}?ReceiptHandle={}",
            self.messages_path(),
            encode_handle(receipt_handle)?
        );
        match self
            .call(
                "delete message",
                Method::DELETE,
                &resource,
                Vec::new(),
                None,
            )
            .await?
        {
            Response::Ok(_) => Ok(()),
            Response::Failed(e) => Err(e.with_context("receipt_handle", receipt_handle)),
        }
    }

    /// BatchDeleteMessage for 1..=16 handles. Handles that could not be deleted come back
    /// one by one (an expired handle is harmless: the message will be received again); an
    /// empty vector means all were deleted.
    pub async fn batch_delete_message(
        &self,
        receipt_handles: &[&str],
    ) -> Result<Vec<BatchDeleteFailure>> {
        if !(1..=MAX_BATCH).contains(&receipt_handles.len()) {
            return Err(Error::invalid_input(format!(
                "mns batch delete takes 1..={MAX_BATCH} receipt handles, got {}",
                receipt_handles.len()
            )));
        }
        let body = xml::receipt_handles_body(receipt_handles).into_bytes();
        let resource = self.messages_path();
        let op = "batch delete messages";
        match self
            .call_raw(op, Method::DELETE, &resource, body, None)
            .await?
        {
            (status, _, _) if status.is_success() => Ok(Vec::new()),
            (status, rid, body) => match xml::parse_failure(&body) {
                Ok(FailureBody::BatchDelete(failures)) => Ok(failures),
                Ok(FailureBody::Error(b)) => Err(error::from_response(
                    op,
                    &self.queue,
                    status.as_u16(),
                    Some(&b),
                    rid.as_deref(),
                )),
                Err(_) => Err(error::from_response(
                    op,
                    &self.queue,
                    status.as_u16(),
                    None,
                    rid.as_deref(),
                )),
            },
        }
    }

    /// ChangeMessageVisibility: make the message invisible for `visibility_timeout_secs`
    /// (0..=43200) from now. Returns the new receipt handle; the old one stops working.
    pub async fn change_message_visibility(
        &self,
        receipt_handle: &str,
        visibility_timeout_secs: u32,
    ) -> Result<ChangedVisibility> {
        if visibility_timeout_secs > MAX_VISIBILITY_TIMEOUT_SECS {
            return Err(Error::invalid_input(format!(
                "mns visibility timeout must be 0..={MAX_VISIBILITY_TIMEOUT_SECS} s, got {visibility_timeout_secs}"
            )));
        }
        let resource = format!(
            "{}?ReceiptHandle={}&VisibilityTimeout={visibility_timeout_secs}",
            self.messages_path(),
            encode_handle(receipt_handle)?
        );
        match self
            .call(
                "change message visibility",
                Method::PUT,
                &resource,
                Vec::new(),
                None,
            )
            .await?
        {
            Response::Ok(body) => xml::parse_change_visibility(&body).map_err(|e| {
                e.while_doing(format!(
                    "failed to change visibility on mns queue {}",
                    self.queue
                ))
            }),
            Response::Failed(e) => Err(e.with_context("receipt_handle", receipt_handle)),
        }
    }

    fn messages_path(&self) -> String {
        format!("/queues/{}/messages", self.queue)
    }

    /// Send a request; a non-success status becomes a `Response::Failed` carrying the error.
    async fn call(
        &self,
        op: &str,
        method: Method,
        resource: &str,
        body: Vec<u8>,
        wait: Option<u32>,
    ) -> Result<Response> {
        let (status, rid, bytes) = self.call_raw(op, method, resource, body, wait).await?;
        if status.is_success() {
            return Ok(Response::Ok(bytes));
        }
        let parsed = xml::parse_error(&bytes).ok();
        Ok(Response::Failed(error::from_response(
            op,
            &self.queue,
            status.as_u16(),
            parsed.as_ref(),
            rid.as_deref(),
        )))
    }

    /// Sign and send; returns the status, `x-mns-request-id` and body.
    async fn call_raw(
        &self,
        op: &str,
        method: Method,
        resource: &str,
        body: Vec<u8>,
        wait: Option<u32>,
    ) -> Result<(StatusCode, Option<String>, Vec<u8>)> {
        let url = Url::parse(&format!("{}{resource}", self.endpoint)).map_err(|e| {
            Error::unexpected(format!("failed to build the mns url for {op}")).with_source(e)
        })?;
        // Sign exactly the path and query that go on the wire.
        let signed_resource = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_owned(),
        };
        let credentials = self.credentials.current().await?;
        let signed = sign::sign_now(&credentials, method.as_str(), &signed_resource, &body, &[])?;
        // Without `waitseconds` the queue's own wait (at most 30 s) applies.
        let wait = Duration::from_secs(u64::from(wait.unwrap_or(MAX_WAIT_SECS)));
        let mut req = self
            .http
            .request(method, url)
            .timeout(self.request_timeout + wait)
            .body(body);
        for (k, v) in signed.headers() {
            req = req.header(k.as_str(), v.as_str());
        }
        tracing::debug!(queue = %self.queue, op, resource = %signed_resource, "mns call");
        let resp = req
            .send()
            .await
            .map_err(|e| error::from_transport(op, &self.queue, e))?;
        let status = resp.status();
        let rid = resp
            .headers()
            .get("x-mns-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| error::from_transport(op, &self.queue, e))?;
        tracing::debug!(queue = %self.queue, op, status = status.as_u16(), request_id = rid.as_deref().unwrap_or(""), "mns reply");
        Ok((status, rid, bytes.to_vec()))
    }
}

enum Response {
    Ok(Vec<u8>),
    Failed(Error),
}

fn check_wait(wait_secs: Option<u32>) -> Result<Option<u32>> {
    match wait_secs {
        Some(w) if w > MAX_WAIT_SECS => Err(Error::invalid_input(format!(
            "mns long-poll wait must be 0..={MAX_WAIT_SECS} s, got {w}"
        ))),
        other => Ok(other),
    }
}

fn encode_handle(handle: &str) -> Result<String> {
    if handle.is_empty() {
        return Err(Error::invalid_input("mns receipt handle is empty"));
    }
    Ok(utf8_percent_encode(handle, HANDLE).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(endpoint: &str, queue: &str) -> MnsConfig {
        MnsConfig::new(
            endpoint,
            queue,
            floe_signing::Credentials::new("AK", "secret"),
        )
    }

    #[test]
    fn config_is_checked() {
        for (endpoint, queue, option) in [
            ("not a url", "q", "endpoint"),
            ("ftp://h", "q", "endpoint"),
            ("https://h/path", "q", "endpoint"),
            ("https://h", "", "queue"),
            ("https://h", "a/b", "queue"),
        ] {
            let e = MnsClient::new(config(endpoint, queue)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Config, "{endpoint} {queue}");
            assert!(e.to_string().contains(option), "{e}");
        }
        assert!(
            MnsClient::new(config(
                "https://1.mns.cn-hangzhou.aliyuncs.com/",
                "oss-events"
            ))
            .is_ok()
        );
    }

    #[tokio::test]
    async fn limits_are_checked_before_any_request() {
        // Port 9 (discard) on localhost: nothing is sent because validation fails first.
        let c = MnsClient::new(config("http://127.0.0.1:9", "q")).unwrap();
        for e in [
            c.batch_receive_message(0, None).await.unwrap_err(),
            c.batch_receive_message(17, None).await.unwrap_err(),
            c.batch_receive_message(1, Some(31)).await.unwrap_err(),
            c.receive_message(Some(31)).await.unwrap_err(),
            c.batch_delete_message(&[]).await.unwrap_err(),
            c.batch_delete_message(&["h"; 17]).await.unwrap_err(),
            c.change_message_visibility("h", 43_201).await.unwrap_err(),
            c.delete_message("").await.unwrap_err(),
        ] {
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        }
    }

    #[test]
    fn handles_stay_raw_base64() {
        assert_eq!(
            encode_handle("1-ODU4OTkzNDU5My0xNDMy+/==").unwrap(),
            "1-ODU4OTkzNDU5My0xNDMy+/=="
        );
        assert_eq!(encode_handle("a&b c").unwrap(), "a%26b%20c");
    }
}
