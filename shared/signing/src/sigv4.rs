//! AWS Signature Version 4 for any service and region, through the `aws-sigv4` crate.
//!
//! [`SigV4Signer::new`] gives the settings every non-S3 service uses (S3 Tables, Glue, …): the
//! path is percent-encoded a second time in the canonical URI (`%3A` → `%253A`), dot segments
//! are normalized, and no `x-amz-content-sha256` header is added (the payload hash is only in
//! the canonical request). [`SigV4Signer::s3`] gives S3's: single encoding, no normalization,
//! and the `x-amz-content-sha256` header. Either can be adjusted.
//!
//! The signer returns the headers to add: `x-amz-date`, `authorization`, optionally
//! `x-amz-content-sha256`, and `x-amz-security-token` for session credentials.
//!
//! `aws-sigv4` does not return its canonical request or string to sign. It logs the canonical
//! request (sensitive header values redacted) as the `canonical_request` field of a `trace`
//! event from target `aws_sigv4::http_request::sign`; the vector tests capture that event.

use std::time::SystemTime;

use aws_credential_types::Credentials as AwsCredentials;
use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use floe_core::{Error, ErrorKind, Result};

use crate::credentials::Credentials;
use crate::signed::SignedHeaders;

/// The request body, or what stands for it in the canonical request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload<'a> {
    /// The body bytes (empty for none); their SHA-256 is signed.
    Bytes(&'a [u8]),
    /// `UNSIGNED-PAYLOAD` (S3 streaming uploads).
    Unsigned,
    /// A precomputed lowercase hex SHA-256 of the body.
    Sha256Hex(&'a str),
}

/// How the canonical URI encodes the (already encoded) request path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UriEncoding {
    /// Encode each segment again: every service except S3.
    Double,
    /// Use the path as sent: S3.
    Single,
}

/// SigV4 settings for one service and region; see the module doc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SigV4Signer {
    service: String,
    region: String,
    uri_encoding: UriEncoding,
    normalize_path: bool,
    content_sha256_header: bool,
}

impl SigV4Signer {
    /// A non-S3 service, e.g. `("s3tables", "us-east-1")`.
    pub fn new(service: impl Into<String>, region: impl Into<String>) -> Self {
        SigV4Signer {
            service: service.into(),
            region: region.into(),
            uri_encoding: UriEncoding::Double,
            normalize_path: true,
            content_sha256_header: false,
        }
    }

    /// S3 in `region`.
    pub fn s3(region: impl Into<String>) -> Self {
        SigV4Signer {
            uri_encoding: UriEncoding::Single,
            normalize_path: false,
            content_sha256_header: true,
            ..SigV4Signer::new("s3", region)
        }
    }

    /// Whether to add `x-amz-content-sha256` (Iceberg's Java signer does; botocore does not for
    /// non-S3 services).
    pub fn with_content_sha256_header(mut self, add: bool) -> Self {
        self.content_sha256_header = add;
        self
    }

    /// How to encode the path in the canonical URI.
    pub fn with_uri_encoding(mut self, encoding: UriEncoding) -> Self {
        self.uri_encoding = encoding;
        self
    }

    /// The signing name, e.g. `s3tables`.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// The region, e.g. `us-east-1`.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// Sign a request at `time`.
    ///
    /// `url` is absolute and already percent-encoded as it will be sent. `headers` are the
    /// other headers to sign (any case; `host` comes from the URL unless given); they must not
    /// include the headers this signer adds.
    pub fn sign(
        &self,
        credentials: &Credentials,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        payload: Payload<'_>,
        time: SystemTime,
    ) -> Result<SignedHeaders> {
        check_url(url)?;
        for (name, _) in headers {
            if [
                "x-amz-date",
                "x-amz-content-sha256",
                "x-amz-security-token",
                "authorization",
            ]
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h))
            {
                return Err(Error::invalid_input(format!(
                    "header `{name}` is added by the sigv4 signer and must not be passed in"
                )));
            }
        }
        let identity = AwsCredentials::new(
            credentials.access_key_id(),
            credentials.access_key_secret().expose(),
            credentials.security_token().map(|t| t.expose().to_owned()),
            None,
            "floe",
        )
        .into();
        let mut settings = SigningSettings::default();
        settings.percent_encoding_mode = match self.uri_encoding {
            UriEncoding::Double => PercentEncodingMode::Double,
            UriEncoding::Single => PercentEncodingMode::Single,
        };
        settings.uri_path_normalization_mode = if self.normalize_path {
            UriPathNormalizationMode::Enabled
        } else {
            UriPathNormalizationMode::Disabled
        };
        settings.payload_checksum_kind = if self.content_sha256_header {
            PayloadChecksumKind::XAmzSha256
        } else {
            PayloadChecksumKind::NoHeader
        };
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(&self.service)
            .time(time)
            .settings(settings)
            .build()
            .map_err(|e| {
                Error::unexpected("failed to build sigv4 signing parameters").with_source(e)
            })?
            .into();
        let body = match payload {
            Payload::Bytes(b) => SignableBody::Bytes(b),
            Payload::Unsigned => SignableBody::UnsignedPayload,
            Payload::Sha256Hex(h) => SignableBody::Precomputed(h.to_owned()),
        };
        let request = SignableRequest::new(method, url, headers.iter().copied(), body)
            .map_err(|e| sign_error(url, e))?;
        let (instructions, _signature) = sign(request, &params)
            .map_err(|e| sign_error(url, e))?
            .into_parts();
        let added = instructions
            .headers()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Ok(SignedHeaders::new(added, String::new(), None))
    }

    /// [`SigV4Signer::sign`] at the current time.
    pub fn sign_now(
        &self,
        credentials: &Credentials,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        payload: Payload<'_>,
    ) -> Result<SignedHeaders> {
        self.sign(
            credentials,
            method,
            url,
            headers,
            payload,
            SystemTime::now(),
        )
    }
}

fn sign_error(url: &str, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::new(
        ErrorKind::InvalidInput,
        format!("failed to sign request to {url}"),
    )
    .with_source(e)
}

/// The signer needs an absolute http(s) URL with a host (`aws-sigv4` panics without one).
fn check_url(url: &str) -> Result<()> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| {
            Error::invalid_input(format!("sigv4 url `{url}` is not absolute http(s)"))
        })?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    if host.is_empty() || host.starts_with(':') {
        return Err(Error::invalid_input(format!(
            "sigv4 url `{url}` has no host"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> SystemTime {
        SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_736_929_845)
    }

    #[test]
    fn adds_session_token_and_optional_content_sha256() {
        let c = Credentials::new("AKID", "secret").with_security_token("session");
        let plain = SigV4Signer::new("s3tables", "us-east-1")
            .sign(
                &c,
                "GET",
                "https://h.example/x",
                &[],
                Payload::Bytes(b""),
                t(),
            )
            .unwrap();
        assert_eq!(plain.get("x-amz-security-token"), Some("session"));
        assert_eq!(plain.get("x-amz-date"), Some("20250115T083045Z"));
        assert!(plain.get("x-amz-content-sha256").is_none());
        assert!(
            plain
                .authorization()
                .unwrap()
                .contains("SignedHeaders=host;x-amz-date;x-amz-security-token,")
        );
        let with = SigV4Signer::new("s3tables", "us-east-1")
            .with_content_sha256_header(true)
            .sign(
                &c,
                "GET",
                "https://h.example/x",
                &[],
                Payload::Bytes(b""),
                t(),
            )
            .unwrap();
        assert_eq!(
            with.get("x-amz-content-sha256"),
            Some("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        );
        let s3 = SigV4Signer::s3("us-east-1")
            .sign(
                &c,
                "PUT",
                "https://b.s3.example/k",
                &[],
                Payload::Unsigned,
                t(),
            )
            .unwrap();
        assert_eq!(s3.get("x-amz-content-sha256"), Some("UNSIGNED-PAYLOAD"));
    }

    #[test]
    fn rejects_bad_urls_and_reserved_headers() {
        let c = Credentials::new("AKID", "secret");
        let s = SigV4Signer::new("svc", "r");
        for url in ["/relative", "https://", "https:///x", "ftp://h/x"] {
            let e = s
                .sign(&c, "GET", url, &[], Payload::Bytes(b""), t())
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{url}");
        }
        let e = s
            .sign(
                &c,
                "GET",
                "https://h/x",
                &[("X-Amz-Date", "x")],
                Payload::Bytes(b""),
                t(),
            )
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
    }
}
