//! The signed HTTP transport shared by the REST client and the tunnel: one request in, the
//! status, headers and body out, with ODPS signatures and the v4 → classic fallback.
//!
//! What is signed is exactly what is sent: the path and query are percent-encoded here (strict
//! RFC 3986 unreserved set), so the URL parser has nothing left to change.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use floe_core::{Error, ErrorKind, Result};
use floe_signing::CredentialSource;
use floe_signing::odps::{self, OdpsSignature};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::error;

/// Everything but RFC 3986 unreserved characters.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encode one path segment or query component.
pub(crate) fn encode(s: &str) -> String {
    utf8_percent_encode(s, COMPONENT).to_string()
}

/// Messages with which the service refuses a v4 signature it does not support (pyodps then
/// falls back to the classic one, and so do we).
const V4_FALLBACK_MESSAGES: [&str; 4] = [
    "need ak v3 support",
    "accesskey acl denied",
    "odps-0410051",
    "invalid or missing",
];

/// One request: method, path relative to the endpoint (segments already encoded), query pairs
/// (raw; encoded here, an empty value sent as a bare name), extra headers, body.
#[derive(Debug)]
pub(crate) struct OdpsRequest {
    pub method: Method,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

impl OdpsRequest {
    pub fn new(method: Method, path: impl Into<String>) -> Self {
        OdpsRequest {
            method,
            path: path.into(),
            query: Vec::new(),
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    pub fn query(mut self, k: &str, v: impl Into<String>) -> Self {
        self.query.push((k.to_owned(), v.into()));
        self
    }

    pub fn header(mut self, k: &str, v: impl Into<String>) -> Self {
        self.headers.push((k.to_owned(), v.into()));
        self
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// `path?k=v&k2` exactly as sent and signed.
    fn path_and_query(&self) -> String {
        if self.query.is_empty() {
            return self.path.clone();
        }
        let q: Vec<String> = self
            .query
            .iter()
            .map(|(k, v)| {
                if v.is_empty() {
                    encode(k)
                } else {
                    format!("{}={}", encode(k), encode(v))
                }
            })
            .collect();
        format!("{}?{}", self.path, q.join("&"))
    }
}

/// A response of any status.
#[derive(Debug)]
pub(crate) struct OdpsResponse {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl OdpsResponse {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The error for this (failed) response to `op` on `what`.
    pub fn error(&self, op: &str, what: &str) -> Error {
        error::settle(error::from_response(
            op,
            what,
            self.status,
            &self.body,
            self.header("x-odps-request-id"),
        ))
    }

    pub fn text(&self) -> Result<&str> {
        std::str::from_utf8(&self.body)
            .map_err(|e| Error::new(ErrorKind::Protocol, "response is not utf-8").with_source(e))
    }
}

/// A signing HTTP client bound to one endpoint (the REST `…/api` or a tunnel host).
#[derive(Clone, Debug)]
pub(crate) struct OdpsHttp {
    http: reqwest::Client,
    endpoint: String,
    credentials: CredentialSource,
    region: Option<String>,
    /// Set once the service refused a v4 signature; shared by clones.
    classic_only: Arc<AtomicBool>,
    timeout: Duration,
    extra_headers: Vec<(String, String)>,
}

impl OdpsHttp {
    pub fn new(
        http: reqwest::Client,
        endpoint: &str,
        credentials: CredentialSource,
        region: Option<String>,
        timeout: Duration,
    ) -> Self {
        OdpsHttp {
            http,
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            credentials,
            region,
            classic_only: Arc::new(AtomicBool::new(false)),
            timeout,
            extra_headers: Vec::new(),
        }
    }

    /// The same client for another endpoint (sharing the connection pool and credentials).
    pub fn with_endpoint(&self, endpoint: &str) -> Self {
        OdpsHttp {
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            classic_only: Arc::new(AtomicBool::new(self.classic_only.load(Ordering::Relaxed))),
            ..self.clone()
        }
    }

    /// Headers sent with every request (the tunnel's version headers).
    pub fn with_headers(mut self, headers: Vec<(String, String)>) -> Self {
        self.extra_headers = headers;
        self
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn signature(&self) -> OdpsSignature {
        match &self.region {
            Some(region) if !self.classic_only.load(Ordering::Relaxed) => OdpsSignature::V4 {
                region: region.clone(),
            },
            _ => OdpsSignature::Classic,
        }
    }

    /// Send `req`; a transport failure is an [`ErrorKind::Io`] error naming `op` and `what`.
    pub async fn send(&self, req: &OdpsRequest, op: &str, what: &str) -> Result<OdpsResponse> {
        let first = self.send_once(req, op, what).await?;
        if self.region.is_some()
            && !self.classic_only.load(Ordering::Relaxed)
            && !first.is_success()
            && refuses_v4(&first)
        {
            tracing::info!(endpoint = %self.endpoint, "maxcompute refused a v4 signature, falling back to classic");
            self.classic_only.store(true, Ordering::Relaxed);
            return self.send_once(req, op, what).await;
        }
        Ok(first)
    }

    async fn send_once(&self, req: &OdpsRequest, op: &str, what: &str) -> Result<OdpsResponse> {
        let path_and_query = req.path_and_query();
        let mut headers: Vec<(String, String)> = self.extra_headers.clone();
        headers.extend(req.headers.iter().cloned());
        let borrowed: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let credentials = self.credentials.current().await?;
        let signed = odps::sign_now(
            &credentials,
            &self.signature(),
            req.method.as_str(),
            &path_and_query,
            &borrowed,
        )?;
        let mut map = HeaderMap::new();
        for (k, v) in headers.iter().chain(signed.headers()) {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| {
                Error::invalid_input(format!("bad header name `{k}`")).with_source(e)
            })?;
            let value = HeaderValue::from_str(v).map_err(|e| {
                Error::invalid_input(format!("bad value for header `{k}`")).with_source(e)
            })?;
            map.append(name, value);
        }
        let url = format!("{}{}", self.endpoint, path_and_query);
        let response = self
            .http
            .request(req.method.clone(), &url)
            .headers(map)
            .body(req.body.clone())
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| error::from_transport(op, what, e))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .bytes()
            .await
            .map_err(|e| error::from_transport(op, what, e))?;
        Ok(OdpsResponse {
            status,
            headers,
            body,
        })
    }
}

fn refuses_v4(resp: &OdpsResponse) -> bool {
    let text = String::from_utf8_lossy(&resp.body).to_ascii_lowercase();
    V4_FALLBACK_MESSAGES.iter().any(|m| text.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_is_encoded_once_and_bare_names_have_no_equals() {
        let r = OdpsRequest::new(Method::POST, "/projects/p/tables/t")
            .query("uploads", "1")
            .query("partition", "ds=2025 01,hh=08")
            .query("service", "");
        assert_eq!(
            r.path_and_query(),
            "/projects/p/tables/t?uploads=1&partition=ds%3D2025%2001%2Chh%3D08&service"
        );
    }
}
