//! The HTTP layer under the catalogs: builds a request (JSON body, extra headers), authenticates
//! it, sends it, and returns the status and body. A 401 with OAuth2 fetches a new token and
//! retries once; everything else is left to the caller, which knows what a status means.

use std::time::Duration;

use iceberg::{Error, ErrorKind, Result};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::Method;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use super::auth::Authenticator;
use super::error::{Op, http_error, transport_error};

/// Characters kept as they are in a path segment: RFC 3986's unreserved set.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encode one path segment (so `/` and `:` are encoded too).
pub(crate) fn encode_segment(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

/// The HTTP client used when the caller gives none: rustls, 10 s to connect, 60 s per request.
pub(crate) fn default_http_client() -> floe_core::Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| floe_core::Error::unexpected("failed to build the http client").with_source(e))
}

/// An HTTP answer: status and body.
#[derive(Debug)]
pub(crate) struct Answer {
    /// HTTP status.
    pub status: u16,
    /// The body (empty for none).
    pub body: Vec<u8>,
}

impl Answer {
    /// Whether the status is 2xx.
    pub(crate) fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body of a 2xx answer, or the error for `op`.
    pub(crate) fn ok(self, op: Op, what: &str) -> Result<Vec<u8>> {
        if self.is_success() {
            Ok(self.body)
        } else {
            Err(http_error(op, what, self.status, &self.body))
        }
    }
}

/// Parse a JSON answer body as `T`.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| {
        Error::new(
            ErrorKind::DataInvalid,
            format!("{what}: the answer is not the expected json"),
        )
        .with_source(e)
    })
}

/// Sends authenticated requests; see the module doc.
#[derive(Debug)]
pub(crate) struct HttpClient {
    http: reqwest::Client,
    auth: Authenticator,
    headers: HeaderMap,
}

impl HttpClient {
    /// A client sending `headers` on every request, authenticated by `auth`.
    pub(crate) fn new(
        http: reqwest::Client,
        auth: Authenticator,
        headers: &[(String, String)],
    ) -> floe_core::Result<Self> {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let n = HeaderName::try_from(name.as_str()).map_err(|_| {
                floe_core::Error::config(&format!("header.{name}"), "not a valid header name")
            })?;
            let mut v = HeaderValue::try_from(value.as_str()).map_err(|_| {
                floe_core::Error::config(&format!("header.{name}"), "not a valid header value")
            })?;
            v.set_sensitive(true);
            map.insert(n, v);
        }
        Ok(HttpClient {
            http,
            auth,
            headers: map,
        })
    }

    /// Send `method url` with an optional JSON `body`; `op` and `what` name it in errors.
    pub(crate) async fn send(
        &self,
        op: Op,
        what: &str,
        method: Method,
        url: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Answer> {
        let mut answer = self
            .send_once(op, what, method.clone(), url, body.clone())
            .await?;
        if answer.status == 401 && self.auth.invalidate().await {
            answer = self.send_once(op, what, method, url, body).await?;
        }
        Ok(answer)
    }

    async fn send_once(
        &self,
        op: Op,
        what: &str,
        method: Method,
        url: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Answer> {
        let mut builder = self.http.request(method.clone(), url);
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        if let Some(body) = body {
            builder = builder
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(body);
        }
        let mut request = builder.build().map_err(|e| {
            Error::new(
                ErrorKind::DataInvalid,
                format!("{what}: bad request url `{url}`"),
            )
            .with_source(e)
        })?;
        self.auth.apply(&self.http, &mut request).await?;
        tracing::debug!(%method, url, "catalog request");
        let response = self
            .http
            .execute(request)
            .await
            .map_err(|e| transport_error(op, what, e))?;
        let status = response.status().as_u16();
        let body = response
            .bytes()
            .await
            .map_err(|e| transport_error(op, what, e))?;
        tracing::debug!(%method, url, status, "catalog answer");
        Ok(Answer {
            status,
            body: body.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_encode_everything_but_unreserved() {
        assert_eq!(
            encode_segment("arn:aws:s3tables:us-east-1:111122223333:bucket/my-table-bucket"),
            "arn%3Aaws%3As3tables%3Aus-east-1%3A111122223333%3Abucket%2Fmy-table-bucket"
        );
        assert_eq!(encode_segment("a\u{1f}b c~d_e.f"), "a%1Fb%20c~d_e.f");
    }
}
