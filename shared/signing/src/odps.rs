//! MaxCompute (ODPS) REST and Tunnel signing, classic and regional v4.
//!
//! ```text
//! Canonical = METHOD \n content-md5 \n content-type \n Date \n
//!             { x-odps-* headers and x-odps-* query params: "name:value" \n, sorted }
//!             CanonicalResource
//! CanonicalResource = decoded path [ "?" params sorted by name, "k=v" or "k", joined "&" ]
//! classic: Authorization: ODPS <AK>:base64(HMAC-SHA1(secret, Canonical))
//! v4:      Authorization: ODPS <AK>/<YYYYMMDD>/<region>/odps/aliyun_v4_request:
//!                              base64(HMAC-SHA1(kSigning, Canonical))
//! ```
//! `kSigning` is the Alibaba V4 key chain (`"aliyun_v4" + secret`, date, region, `odps`,
//! `aliyun_v4_request`); only the final MAC differs from OSS V4 (SHA-1 and base64). The v4 date
//! is the signing time's UTC date. STS tokens go in `authorization-sts-token`, unsigned.
//!
//! Facts kept from pyodps: the whole path-and-query is percent-decoded before it is split, the
//! query is then parsed as a form (`+` is a space), `odps-tunnel-*` headers are not signed (they
//! lack the `x-` prefix) while `x-odps-tunnel-version` is, and every query name must be unique.

use std::time::SystemTime;

use floe_core::{Error, ErrorKind, Result};

use crate::credentials::Credentials;
use crate::crypto;
use crate::query::{decode, header};
use crate::signed::SignedHeaders;
use crate::time::{http_date, scope_date};

/// The header that carries the STS token (unsigned).
pub const STS_TOKEN_HEADER: &str = "authorization-sts-token";

/// Which signature to produce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OdpsSignature {
    /// The classic `ODPS <AK>:<sig>` form.
    Classic,
    /// The regional v4 form, scoped to this region (e.g. `cn-hangzhou`).
    V4 {
        /// Region id, e.g. `cn-hangzhou`.
        region: String,
    },
}

/// The canonical string for a request.
///
/// `path_and_query` is relative to the endpoint (`/projects/p/tables/t?uploads=1`), as sent;
/// `headers` are the request's headers in any case and must include `Date`.
pub fn canonical_string(
    method: &str,
    path_and_query: &str,
    headers: &[(&str, &str)],
) -> Result<String> {
    let decoded = decode(path_and_query);
    let (path, query) = decoded.split_once('?').unwrap_or((&decoded, ""));
    let params = parse_form(query);
    for (i, (k, _)) in params.iter().enumerate() {
        if params[..i].iter().any(|(p, _)| p == k) {
            return Err(Error::invalid_input(format!(
                "odps query parameter `{k}` appears twice"
            )));
        }
    }
    let mut resource = path.to_owned();
    if !params.is_empty() {
        resource.push('?');
        let joined: Vec<String> = params
            .iter()
            .map(|(k, v)| {
                if v.is_empty() {
                    k.clone()
                } else {
                    format!("{k}={v}")
                }
            })
            .collect();
        resource.push_str(&joined.join("&"));
    }

    // name -> value; later entries replace earlier ones, as in a dict.
    let mut to_sign: Vec<(String, String)> = vec![
        ("content-type".into(), String::new()),
        ("content-md5".into(), String::new()),
    ];
    let mut put = |k: String, v: String| match to_sign.iter_mut().find(|(n, _)| *n == k) {
        Some(slot) => slot.1 = v,
        None => to_sign.push((k, v)),
    };
    for (k, v) in headers {
        let k = k.to_ascii_lowercase();
        if k == "content-type" || k == "content-md5" || k.starts_with("x-odps") {
            put(k, (*v).to_owned());
        }
    }
    put(
        "date".into(),
        header(headers, "date").unwrap_or("").to_owned(),
    );
    for (k, v) in &params {
        if k.starts_with("x-odps-") {
            put(k.clone(), v.clone());
        }
    }
    to_sign.sort_by(|a, b| a.0.cmp(&b.0));

    let mut lines = vec![method.to_owned()];
    for (k, v) in to_sign {
        if k.starts_with("x-odps-") {
            lines.push(format!("{k}:{v}"));
        } else {
            lines.push(v);
        }
    }
    lines.push(resource);
    Ok(lines.join("\n"))
}

/// Sign a MaxCompute request at `time`.
///
/// Adds `Date` (when `headers` has none), `Authorization`, and `authorization-sts-token` for
/// STS credentials. The v4 scope date is `time`'s UTC date.
pub fn sign(
    credentials: &Credentials,
    signature: &OdpsSignature,
    method: &str,
    path_and_query: &str,
    headers: &[(&str, &str)],
    time: SystemTime,
) -> Result<SignedHeaders> {
    let mut added: Vec<(String, String)> = Vec::new();
    let date = http_date(time);
    let mut all: Vec<(&str, &str)> = headers.to_vec();
    if header(headers, "date").is_none() {
        all.push(("Date", &date));
        added.push(("Date".into(), date.clone()));
    }
    let canonical = canonical_string(method, path_and_query, &all)?;
    let secret = credentials.access_key_secret().expose();
    let authorization = match signature {
        OdpsSignature::Classic => format!(
            "ODPS {}:{}",
            credentials.access_key_id(),
            crypto::hmac_sha1_base64(secret.as_bytes(), canonical.as_bytes())?
        ),
        OdpsSignature::V4 { region } => {
            let day = scope_date(time);
            let key = crypto::aliyun_v4_signing_key(secret, &day, region, "odps")?;
            format!(
                "ODPS {}/{day}/{region}/odps/aliyun_v4_request:{}",
                credentials.access_key_id(),
                crypto::hmac_sha1_base64(&key, canonical.as_bytes())?
            )
        }
    };
    added.push(("Authorization".into(), authorization));
    if let Some(token) = credentials.security_token() {
        added.push((STS_TOKEN_HEADER.into(), token.expose().into()));
    }
    Ok(SignedHeaders::new(added, canonical, None))
}

/// [`sign`] at the current time.
pub fn sign_now(
    credentials: &Credentials,
    signature: &OdpsSignature,
    method: &str,
    path_and_query: &str,
    headers: &[(&str, &str)],
) -> Result<SignedHeaders> {
    sign(
        credentials,
        signature,
        method,
        path_and_query,
        headers,
        SystemTime::now(),
    )
}

/// The parts of an `Authorization: ODPS …` value: the access key id, the v4 scope (date and
/// region) when present, and the base64 signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OdpsAuthorization<'a> {
    /// The access key id.
    pub access_key_id: &'a str,
    /// `(YYYYMMDD, region)` for a v4 signature; `None` for a classic one.
    pub v4_scope: Option<(&'a str, &'a str)>,
    /// The base64 MAC.
    pub signature: &'a str,
}

/// Split an `ODPS <AK>:<sig>` or `ODPS <AK>/<date>/<region>/odps/aliyun_v4_request:<sig>` value.
pub fn parse_authorization(value: &str) -> Option<OdpsAuthorization<'_>> {
    let rest = value.strip_prefix("ODPS ")?;
    let (credential, signature) = rest.rsplit_once(':')?;
    if credential.is_empty() || signature.is_empty() {
        return None;
    }
    let mut parts = credential.split('/');
    let access_key_id = parts.next()?;
    let scope: Vec<&str> = parts.collect();
    let v4_scope = match scope.as_slice() {
        [] => None,
        [date, region, "odps", "aliyun_v4_request"] if !date.is_empty() && !region.is_empty() => {
            Some((*date, *region))
        }
        _ => return None,
    };
    (!access_key_id.is_empty()).then_some(OdpsAuthorization {
        access_key_id,
        v4_scope,
        signature,
    })
}

/// Check a received request's `Authorization` against `credentials` (server side).
///
/// `path_and_query` is the request target relative to the service's endpoint, as received;
/// `headers` are all the request's headers (they must include the `Date` that was signed).
/// Either signature form is accepted; a v4 one is checked with the date and region of its
/// own scope. When `credentials` carry an STS token, the request must send the same token in
/// `authorization-sts-token`. Fails with [`ErrorKind::Auth`]; MACs are compared in constant time.
pub fn verify(
    credentials: &Credentials,
    method: &str,
    path_and_query: &str,
    headers: &[(&str, &str)],
) -> Result<()> {
    let auth = |m: &str| Error::new(ErrorKind::Auth, m.to_owned());
    let value = header(headers, "authorization")
        .ok_or_else(|| auth("odps request has no authorization header"))?;
    let parsed =
        parse_authorization(value).ok_or_else(|| auth("odps authorization header is malformed"))?;
    if parsed.access_key_id != credentials.access_key_id() {
        return Err(auth("odps access key id is unknown")
            .with_context("access_key_id", parsed.access_key_id));
    }
    if let Some(expected) = credentials.security_token() {
        let sent = header(headers, STS_TOKEN_HEADER);
        if sent != Some(expected.expose()) {
            return Err(auth("odps sts token is missing or does not match"));
        }
    }
    let canonical = canonical_string(method, path_and_query, headers)?;
    let secret = credentials.access_key_secret().expose();
    let key: Vec<u8> = match parsed.v4_scope {
        None => secret.as_bytes().to_vec(),
        Some((day, region)) => crypto::aliyun_v4_signing_key(secret, day, region, "odps")?.to_vec(),
    };
    if crypto::verify_hmac_sha1_base64(&key, canonical.as_bytes(), parsed.signature) {
        Ok(())
    } else {
        Err(auth("odps signature does not match").with_context("canonical_string", canonical))
    }
}

/// Form-decode a query, keeping blank values, in order, sorted by name (stable).
fn parse_form(query: &str) -> Vec<(String, String)> {
    let mut params: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(&k.replace('+', " ")), decode(&v.replace('+', " ")))
        })
        .collect();
    params.sort_by(|a, b| a.0.cmp(&b.0));
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_params_named_x_odps_are_signed_like_headers() {
        let c = canonical_string(
            "POST",
            "/projects/p/instances?x-odps-option=on&curr_project=p&empty=",
            &[
                ("Date", "D"),
                ("Content-MD5", "m"),
                ("x-odps-test", "v"),
                ("odps-tunnel-date-transform", "v1"),
            ],
        )
        .unwrap();
        assert_eq!(
            c,
            "POST\nm\n\nD\nx-odps-option:on\nx-odps-test:v\n\
             /projects/p/instances?curr_project=p&empty&x-odps-option=on"
        );
        assert!(canonical_string("GET", "/p?a=1&a=2", &[]).is_err());
    }

    #[test]
    fn sts_token_is_added_unsigned() {
        let t = SystemTime::UNIX_EPOCH;
        let plain = Credentials::new("AK", "s");
        let sts = plain.clone().with_security_token("tok");
        let a = sign(&plain, &OdpsSignature::Classic, "GET", "/p", &[], t).unwrap();
        let b = sign(&sts, &OdpsSignature::Classic, "GET", "/p", &[], t).unwrap();
        assert_eq!(a.authorization(), b.authorization());
        assert_eq!(b.get(STS_TOKEN_HEADER), Some("tok"));
        assert_eq!(a.get("date"), Some("Thu, 01 Jan 1970 00:00:00 GMT"));
    }

    #[test]
    fn verify_accepts_both_forms_and_refuses_tampering() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_736_929_845);
        let creds = Credentials::new("AK", "secret");
        let path = "/projects/p/tables/t?uploadid=u&blockid=0";
        for sig in [
            OdpsSignature::Classic,
            OdpsSignature::V4 {
                region: "cn-hangzhou".into(),
            },
        ] {
            let signed = sign(
                &creds,
                &sig,
                "PUT",
                path,
                &[("x-odps-tunnel-version", "6")],
                t,
            )
            .unwrap();
            let mut headers: Vec<(&str, &str)> = vec![("x-odps-tunnel-version", "6")];
            headers.extend(
                signed
                    .headers()
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            );
            verify(&creds, "PUT", path, &headers).unwrap();
            let e = verify(
                &creds,
                "PUT",
                "/projects/p/tables/t?uploadid=u&blockid=1",
                &headers,
            )
            .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Auth, "{sig:?}");
            let other = Credentials::new("AK", "other");
            assert!(verify(&other, "PUT", path, &headers).is_err());
            let sts = creds.clone().with_security_token("tok");
            assert!(
                verify(&sts, "PUT", path, &headers).is_err(),
                "token required"
            );
        }
        assert!(parse_authorization("ODPS AK/20250115/r/odps:x").is_none());
        assert!(parse_authorization("MNS AK:x").is_none());
        assert_eq!(
            parse_authorization("ODPS AK/20250115/cn-hangzhou/odps/aliyun_v4_request:c2ln")
                .unwrap()
                .v4_scope,
            Some(("20250115", "cn-hangzhou"))
        );
    }
}
