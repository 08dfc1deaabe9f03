//! MNS (Simple Message Queue) request signing: `Authorization: MNS <AccessKeyId>:<Signature>`.
//!
//! ```text
//! Signature    = base64(HMAC-SHA1(AccessKeySecret, StringToSign))
//! StringToSign = VERB "\n" Content-MD5 "\n" Content-Type "\n" Date "\n"
//!                CanonicalizedMNSHeaders CanonicalizedResource
//! ```
//! - `CanonicalizedMNSHeaders`: every `x-mns-*` header, lowercase, sorted, `name:value\n` each.
//! - `CanonicalizedResource`: the path plus the query exactly as sent (not sorted, not re-encoded).
//! - `Content-MD5`, as the official SDKs send it, is base64 of the 32-character lowercase *hex*
//!   MD5 string, not of the 16 digest bytes ([`content_md5`]).
//! - The STS token travels in `security-token`, added after signing and not signed.
//!
//! [`sign`] is the client side; [`verify`] is the server side (used by the test emulator).

use std::time::SystemTime;

use floe_core::{Error, ErrorKind, Result};

use crate::credentials::Credentials;
use crate::crypto;
use crate::query::header;
use crate::signed::SignedHeaders;
use crate::time::http_date;

/// The API version every request names in `x-mns-version`.
pub const MNS_VERSION: &str = "2015-06-06";

/// The `Content-Type` of request bodies (XML).
pub const XML_CONTENT_TYPE: &str = "text/xml;charset=UTF-8";

/// The header that carries the STS token (unsigned).
pub const SECURITY_TOKEN_HEADER: &str = "security-token";

/// The SDKs' `Content-MD5`: base64 of the lowercase hex MD5 string of `body`.
pub fn content_md5(body: &[u8]) -> String {
    crypto::base64(crypto::md5_hex(body).as_bytes())
}

/// The string to sign for a request with these headers (names in any case).
///
/// `resource` is the request path plus the query exactly as sent, e.g.
/// `/queues/q/messages?numOfMessages=16&waitseconds=30`.
pub fn string_to_sign(method: &str, resource: &str, headers: &[(&str, &str)]) -> String {
    let mut mns: Vec<(String, &str)> = headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), *v))
        .filter(|(k, _)| k.starts_with("x-mns-"))
        .collect();
    mns.sort_by(|a, b| a.0.cmp(&b.0));
    let mut s = format!(
        "{method}\n{}\n{}\n{}\n",
        header(headers, "content-md5").unwrap_or(""),
        header(headers, "content-type").unwrap_or(""),
        header(headers, "date").unwrap_or(""),
    );
    for (k, v) in mns {
        s.push_str(&k);
        s.push(':');
        s.push_str(v);
        s.push('\n');
    }
    s.push_str(resource);
    s
}

/// Sign an MNS request sent at `time`.
///
/// `extra_headers` are other headers the caller sends (for example `x-mns-user-request-id`);
/// `x-mns-*` ones are signed. The result holds the headers to add: `Date`, `x-mns-version`,
/// `Content-Type` and `Content-MD5` when `body` is not empty, `Authorization`, and
/// `security-token` for STS credentials.
pub fn sign(
    credentials: &Credentials,
    method: &str,
    resource: &str,
    body: &[u8],
    extra_headers: &[(&str, &str)],
    time: SystemTime,
) -> Result<SignedHeaders> {
    let mut added: Vec<(String, String)> = vec![
        ("Date".into(), http_date(time)),
        ("x-mns-version".into(), MNS_VERSION.into()),
    ];
    if !body.is_empty() {
        added.push(("Content-Type".into(), XML_CONTENT_TYPE.into()));
        added.push(("Content-MD5".into(), content_md5(body)));
    }
    let all: Vec<(&str, &str)> = extra_headers
        .iter()
        .copied()
        .filter(|(k, _)| !added.iter().any(|(a, _)| a.eq_ignore_ascii_case(k)))
        .chain(added.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .collect();
    let sts = string_to_sign(method, resource, &all);
    let signature = crypto::hmac_sha1_base64(
        credentials.access_key_secret().expose().as_bytes(),
        sts.as_bytes(),
    )?;
    added.push((
        "Authorization".into(),
        format!("MNS {}:{signature}", credentials.access_key_id()),
    ));
    if let Some(token) = credentials.security_token() {
        added.push((SECURITY_TOKEN_HEADER.into(), token.expose().into()));
    }
    Ok(SignedHeaders::new(added, sts, None))
}

/// [`sign`] at the current time.
pub fn sign_now(
    credentials: &Credentials,
    method: &str,
    resource: &str,
    body: &[u8],
    extra_headers: &[(&str, &str)],
) -> Result<SignedHeaders> {
    sign(
        credentials,
        method,
        resource,
        body,
        extra_headers,
        SystemTime::now(),
    )
}

/// Split an `Authorization: MNS <AccessKeyId>:<Signature>` value.
pub fn parse_authorization(value: &str) -> Option<(&str, &str)> {
    let rest = value.strip_prefix("MNS ")?;
    let (id, sig) = rest.rsplit_once(':')?;
    (!id.is_empty() && !sig.is_empty()).then_some((id, sig))
}

/// Check a received request's `Authorization` against `credentials` (server side).
///
/// `headers` are all the request's headers. Fails with [`ErrorKind::Auth`] when the header is
/// missing or malformed, names another access key, or the signature does not match; the
/// signature is compared in constant time.
pub fn verify(
    credentials: &Credentials,
    method: &str,
    resource: &str,
    headers: &[(&str, &str)],
) -> Result<()> {
    let auth = header(headers, "authorization")
        .ok_or_else(|| Error::new(ErrorKind::Auth, "mns request has no authorization header"))?;
    let (id, signature) = parse_authorization(auth)
        .ok_or_else(|| Error::new(ErrorKind::Auth, "mns authorization header is malformed"))?;
    if id != credentials.access_key_id() {
        return Err(
            Error::new(ErrorKind::Auth, "mns access key id is unknown").with_context("id", id)
        );
    }
    let sts = string_to_sign(method, resource, headers);
    if crypto::verify_hmac_sha1_base64(
        credentials.access_key_secret().expose().as_bytes(),
        sts.as_bytes(),
        signature,
    ) {
        Ok(())
    } else {
        Err(Error::new(ErrorKind::Auth, "mns signature does not match")
            .with_context("string_to_sign", sts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_md5_is_base64_of_the_hex_string() {
        // md5("") = d41d8cd98f00b204e9800998ecf8427e; base64 of those 32 ASCII characters.
        assert_eq!(
            content_md5(b""),
            "ZDQxZDhjZDk4ZjAwYjIwNGU5ODAwOTk4ZWNmODQyN2U="
        );
    }

    #[test]
    fn sign_then_verify_round_trips_and_tampering_fails() {
        let creds = Credentials::new("AK", "secret").with_security_token("tok");
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_736_929_845);
        let extra = [("x-mns-user-request-id", "r-1")];
        let signed = sign(&creds, "DELETE", "/queues/q/messages", b"<x/>", &extra, t).unwrap();
        let mut headers: Vec<(&str, &str)> = signed
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        headers.extend(extra);
        assert!(
            signed
                .string_to_sign()
                .contains("x-mns-user-request-id:r-1\n")
        );
        assert_eq!(signed.get("security-token"), Some("tok"));
        verify(&creds, "DELETE", "/queues/q/messages", &headers).unwrap();
        for (what, method, resource, creds) in [
            ("method", "PUT", "/queues/q/messages", creds.clone()),
            ("resource", "DELETE", "/queues/q/messages?x", creds.clone()),
            (
                "secret",
                "DELETE",
                "/queues/q/messages",
                Credentials::new("AK", "other"),
            ),
            (
                "key id",
                "DELETE",
                "/queues/q/messages",
                Credentials::new("AK2", "secret"),
            ),
        ] {
            let e = verify(&creds, method, resource, &headers).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Auth, "{what}");
        }
        assert!(parse_authorization("MNS :x").is_none());
        assert!(parse_authorization("OSS a:b").is_none());
    }
}
