//! OSS request signing: V1 (`OSS AK:sig`), V4 (`OSS4-HMAC-SHA256`, product `oss`) and
//! OSS Tables V4 (product `osstables`).
//!
//! ## V1
//! ```text
//! StringToSign = VERB \n Content-MD5 \n Content-Type \n Date \n
//!                CanonicalizedOSSHeaders CanonicalizedResource
//! Authorization: OSS <AK>:base64(HMAC-SHA1(secret, StringToSign))
//! ```
//! The resource is `/bucket/key` with the raw key, then `?` and the *sub-resource* query
//! parameters only ([`V1_SUB_RESOURCES`]), decoded and sorted.
//!
//! ## V4
//! ```text
//! CanonicalRequest = VERB \n URI \n sorted query (as sent) \n
//!                    lowercase name:value \n for x-oss-*, content-type, content-md5, additional
//!                    \n additional header names joined ';' \n x-oss-content-sha256
//! StringToSign     = "OSS4-HMAC-SHA256" \n x-oss-date \n Scope \n hex(SHA256(CanonicalRequest))
//! Scope            = YYYYMMDD/<region>/<product>/aliyun_v4_request
//! Signature        = hex(HMAC-SHA256(kSigning, StringToSign))
//! ```
//! For OSS the URI is `quote("/" + bucket + "/" + key, safe="/")`; for OSS Tables it is
//! `quote("/" + table-bucket ARN + "/" + unquote(path), safe="/")` (see [`OssResource::Tables`]).
//! The two official SDKs write the `Authorization` parts with `,` and with `, `
//! ([`V4Separator`]); both are accepted by the service.

use std::time::SystemTime;

use floe_core::{Error, ErrorKind, Result};

use crate::credentials::Credentials;
use crate::crypto;
use crate::query::{decode, encode_path, header, split_query};
use crate::signed::SignedHeaders;
use crate::time::{http_date, iso8601_basic};

/// Query parameters that V1 signs (the Python v2 SDK's list); all others are left out.
pub const V1_SUB_RESOURCES: &[&str] = &[
    "acl",
    "append",
    "bucketInfo",
    "callback",
    "callback-var",
    "cloudboxes",
    "continuation-token",
    "delete",
    "location",
    "objectMeta",
    "partNumber",
    "position",
    "regionList",
    "resourceGroup",
    "response-cache-control",
    "response-content-disposition",
    "response-content-encoding",
    "response-content-language",
    "response-content-type",
    "response-expires",
    "restore",
    "security-token",
    "sequential",
    "stat",
    "symlink",
    "tagging",
    "uploadId",
    "uploads",
    "versionId",
    "versioning",
    "versions",
];

/// The payload hash V4 requests carry: OSS does not hash bodies.
pub const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";

/// The header that carries the STS token (signed: it is an `x-oss-*` header).
pub const SECURITY_TOKEN_HEADER: &str = "x-oss-security-token";

/// What a request addresses; this decides the canonical resource / URI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OssResource<'a> {
    /// A service-level call (no bucket): `/`.
    Service,
    /// A bucket-level call such as ListObjectsV2: `/bucket/`.
    Bucket(&'a str),
    /// An object: `/bucket/key`, with the raw (not percent-encoded) key.
    Object {
        /// Bucket name.
        bucket: &'a str,
        /// Object key, raw UTF-8.
        key: &'a str,
    },
    /// An OSS Tables call (V4 only). `path` is the request path after the host, without the
    /// leading `/`, as sent (it may be percent-encoded); it is decoded before signing. Without
    /// an ARN the SDK signs with `acs:osstables:<region>::bucket/`.
    Tables {
        /// The table-bucket ARN, e.g. `acs:osstables:cn-hangzhou:123:bucket/name`.
        bucket_arn: Option<&'a str>,
        /// The path after the host, e.g. `tables/<arn>/ns/t/metadata-location`.
        path: &'a str,
    },
}

/// A request to sign.
#[derive(Clone, Copy, Debug)]
pub struct OssRequest<'a> {
    method: &'a str,
    resource: OssResource<'a>,
    query: &'a str,
    headers: &'a [(&'a str, &'a str)],
    additional_headers: &'a [&'a str],
}

impl<'a> OssRequest<'a> {
    /// A request with no query and no headers.
    pub fn new(method: &'a str, resource: OssResource<'a>) -> Self {
        OssRequest {
            method,
            resource,
            query: "",
            headers: &[],
            additional_headers: &[],
        }
    }

    /// The query string as sent (percent-encoded), without the `?`.
    pub fn query(mut self, query: &'a str) -> Self {
        self.query = query;
        self
    }

    /// The request's headers (any case).
    pub fn headers(mut self, headers: &'a [(&'a str, &'a str)]) -> Self {
        self.headers = headers;
        self
    }

    /// V4 only: other headers to sign (listed in `AdditionalHeaders`).
    pub fn additional_headers(mut self, names: &'a [&'a str]) -> Self {
        self.additional_headers = names;
        self
    }
}

/// Sign `request` with V1 at `time`.
///
/// Adds `Date`, `x-oss-security-token` for STS credentials, and `Authorization`.
pub fn sign_v1(
    credentials: &Credentials,
    request: &OssRequest<'_>,
    time: SystemTime,
) -> Result<SignedHeaders> {
    let mut added: Vec<(String, String)> = vec![("Date".into(), http_date(time))];
    if let Some(token) = credentials.security_token() {
        added.push((SECURITY_TOKEN_HEADER.into(), token.expose().into()));
    }
    let all = merge(request.headers, &added);

    let mut resource = match request.resource {
        OssResource::Service => "/".to_owned(),
        OssResource::Bucket(b) => format!("/{b}/"),
        OssResource::Object { bucket, key } => format!("/{bucket}/{key}"),
        OssResource::Tables { .. } => {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "oss tables requests must be signed with v4",
            ));
        }
    };
    let mut subs: Vec<(String, String)> = split_query(request.query)
        .into_iter()
        .map(|(k, v)| (decode(k), decode(v)))
        .filter(|(k, _)| V1_SUB_RESOURCES.contains(&k.as_str()))
        .collect();
    subs.sort();
    if !subs.is_empty() {
        let parts: Vec<String> = subs
            .into_iter()
            .map(|(k, v)| if v.is_empty() { k } else { format!("{k}={v}") })
            .collect();
        resource.push('?');
        resource.push_str(&parts.join("&"));
    }

    let date = header(&all, "x-oss-date")
        .filter(|d| !d.is_empty())
        .or_else(|| header(&all, "date"))
        .unwrap_or("");
    let mut sts = format!(
        "{}\n{}\n{}\n{date}\n",
        request.method,
        header(&all, "content-md5").unwrap_or(""),
        header(&all, "content-type").unwrap_or(""),
    );
    for (k, v) in canonical_headers(&all, |k| k.starts_with("x-oss-")) {
        sts.push_str(&format!("{k}:{v}\n"));
    }
    sts.push_str(&resource);

    let signature = crypto::hmac_sha1_base64(
        credentials.access_key_secret().expose().as_bytes(),
        sts.as_bytes(),
    )?;
    added.push((
        "Authorization".into(),
        format!("OSS {}:{signature}", credentials.access_key_id()),
    ));
    Ok(SignedHeaders::new(added, sts, None))
}

/// How the parts of a V4 `Authorization` are separated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum V4Separator {
    /// `Credential=…,Signature=…` (the Python v2 SDK, Go and Java SDKs).
    #[default]
    Comma,
    /// `Credential=…, Signature=…` (the older `oss2` Python SDK).
    CommaSpace,
}

/// V4 signing parameters: region, product and `Authorization` separator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OssV4Signer {
    region: String,
    product: String,
    separator: V4Separator,
}

impl OssV4Signer {
    /// OSS (product `oss`) in `region` (e.g. `cn-hangzhou`, without `oss-`).
    pub fn oss(region: impl Into<String>) -> Self {
        OssV4Signer {
            region: region.into(),
            product: "oss".into(),
            separator: V4Separator::Comma,
        }
    }

    /// OSS Tables (product `osstables`) in `region`.
    pub fn tables(region: impl Into<String>) -> Self {
        OssV4Signer {
            product: "osstables".into(),
            ..OssV4Signer::oss(region)
        }
    }

    /// Use this separator in `Authorization`.
    pub fn with_separator(mut self, separator: V4Separator) -> Self {
        self.separator = separator;
        self
    }

    /// Sign `request` at `time`.
    ///
    /// Adds `x-oss-date`, `Date`, `x-oss-content-sha256: UNSIGNED-PAYLOAD` (unless the request
    /// already has that header), `x-oss-security-token` for STS credentials, and `Authorization`.
    /// [`SignedHeaders::canonical_request`] holds the canonical request.
    pub fn sign(
        &self,
        credentials: &Credentials,
        request: &OssRequest<'_>,
        time: SystemTime,
    ) -> Result<SignedHeaders> {
        let stamp = iso8601_basic(time);
        let day = &stamp[..8];
        let mut added: Vec<(String, String)> = vec![
            ("x-oss-date".into(), stamp.clone()),
            ("Date".into(), http_date(time)),
        ];
        if header(request.headers, "x-oss-content-sha256").is_none() {
            added.push(("x-oss-content-sha256".into(), UNSIGNED_PAYLOAD.into()));
        }
        if let Some(token) = credentials.security_token() {
            added.push((SECURITY_TOKEN_HEADER.into(), token.expose().into()));
        }
        let all = merge(request.headers, &added);
        let scope = format!("{day}/{}/{}/aliyun_v4_request", self.region, self.product);

        let mut additional: Vec<String> = request
            .additional_headers
            .iter()
            .map(|h| h.to_ascii_lowercase())
            .filter(|h| !is_default_v4_header(h))
            .filter(|h| header(&all, h).is_some_and(|v| !v.is_empty()))
            .collect();
        additional.sort();
        additional.dedup();

        let uri = match request.resource {
            OssResource::Service => "/".to_owned(),
            OssResource::Bucket(b) => encode_path(&format!("/{b}/")),
            OssResource::Object { bucket, key } => encode_path(&format!("/{bucket}/{key}")),
            OssResource::Tables { bucket_arn, path } => {
                let arn = match bucket_arn.filter(|a| !a.is_empty()) {
                    Some(arn) => arn.to_owned(),
                    None => format!("acs:osstables:{}::bucket/", self.region),
                };
                encode_path(&format!("/{arn}/{}", decode(path)))
            }
        };
        let mut pairs = split_query(request.query);
        pairs.sort();
        let query: Vec<String> = pairs
            .into_iter()
            .map(|(k, v)| {
                if v.is_empty() {
                    k.to_owned()
                } else {
                    format!("{k}={v}")
                }
            })
            .collect();
        let mut creq = format!("{}\n{uri}\n{}\n", request.method, query.join("&"));
        for (k, v) in canonical_headers(&all, |k| {
            is_default_v4_header(k) || additional.iter().any(|a| a == k)
        }) {
            creq.push_str(&format!("{k}:{v}\n"));
        }
        creq.push('\n');
        creq.push_str(&additional.join(";"));
        creq.push('\n');
        creq.push_str(header(&all, "x-oss-content-sha256").unwrap_or(UNSIGNED_PAYLOAD));

        let sts = format!(
            "OSS4-HMAC-SHA256\n{stamp}\n{scope}\n{}",
            crypto::sha256_hex(creq.as_bytes())
        );
        let key = crypto::aliyun_v4_signing_key(
            credentials.access_key_secret().expose(),
            day,
            &self.region,
            &self.product,
        )?;
        let signature = hex::encode(crypto::hmac_sha256(&key, sts.as_bytes())?);
        let sep = match self.separator {
            V4Separator::Comma => ",",
            V4Separator::CommaSpace => ", ",
        };
        let mut auth = format!(
            "OSS4-HMAC-SHA256 Credential={}/{scope}",
            credentials.access_key_id()
        );
        if !additional.is_empty() {
            auth.push_str(&format!("{sep}AdditionalHeaders={}", additional.join(";")));
        }
        auth.push_str(&format!("{sep}Signature={signature}"));
        added.push(("Authorization".into(), auth));
        Ok(SignedHeaders::new(added, sts, Some(creq)))
    }

    /// [`OssV4Signer::sign`] at the current time.
    pub fn sign_now(
        &self,
        credentials: &Credentials,
        request: &OssRequest<'_>,
    ) -> Result<SignedHeaders> {
        self.sign(credentials, request, SystemTime::now())
    }
}

/// [`sign_v1`] at the current time.
pub fn sign_v1_now(credentials: &Credentials, request: &OssRequest<'_>) -> Result<SignedHeaders> {
    sign_v1(credentials, request, SystemTime::now())
}

fn is_default_v4_header(lower: &str) -> bool {
    lower.starts_with("x-oss-") || lower == "content-type" || lower == "content-md5"
}

/// The request's headers with the signer's added ones (which win on a name clash).
fn merge<'a>(
    headers: &[(&'a str, &'a str)],
    added: &'a [(String, String)],
) -> Vec<(&'a str, &'a str)> {
    headers
        .iter()
        .copied()
        .filter(|(k, _)| !added.iter().any(|(a, _)| a.eq_ignore_ascii_case(k)))
        .chain(added.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .collect()
}

/// Lowercase `(name, value)` pairs whose name passes `keep`, sorted by name (stable).
fn canonical_headers<'a>(
    headers: &[(&'a str, &'a str)],
    keep: impl Fn(&str) -> bool,
) -> Vec<(String, &'a str)> {
    let mut out: Vec<(String, &str)> = headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), *v))
        .filter(|(k, _)| keep(k))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> SystemTime {
        SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_736_929_845)
    }

    #[test]
    fn v1_signs_the_sts_token_and_rejects_tables() {
        let c = Credentials::new("AK", "s").with_security_token("tok");
        let r = OssRequest::new("GET", OssResource::Bucket("b")).query("acl&prefix=x");
        let s = sign_v1(&c, &r, t()).unwrap();
        assert_eq!(
            s.string_to_sign(),
            "GET\n\n\nWed, 15 Jan 2025 08:30:45 GMT\nx-oss-security-token:tok\n/b/?acl"
        );
        let tables = OssRequest::new(
            "GET",
            OssResource::Tables {
                bucket_arn: None,
                path: "x",
            },
        );
        assert_eq!(
            sign_v1(&c, &tables, t()).unwrap_err().kind(),
            ErrorKind::Unsupported
        );
    }

    #[test]
    fn v4_additional_headers_are_listed_and_signed() {
        let c = Credentials::new("AK", "s");
        let headers = [("Host", "b.oss.example"), ("x-oss-meta-a", "1")];
        let r = OssRequest::new(
            "PUT",
            OssResource::Object {
                bucket: "b",
                key: "k",
            },
        )
        .headers(&headers)
        .additional_headers(&["HOST", "content-type", "absent"]);
        let s = OssV4Signer::oss("cn-hangzhou").sign(&c, &r, t()).unwrap();
        let creq = s.canonical_request().unwrap();
        assert_eq!(
            creq,
            "PUT\n/b/k\n\nhost:b.oss.example\nx-oss-content-sha256:UNSIGNED-PAYLOAD\n\
             x-oss-date:20250115T083045Z\nx-oss-meta-a:1\n\nhost\nUNSIGNED-PAYLOAD"
        );
        let auth = s.authorization().unwrap();
        assert!(
            auth.contains(",AdditionalHeaders=host,Signature="),
            "{auth}"
        );
    }

    #[test]
    fn tables_without_arn_uses_the_sdk_placeholder() {
        let c = Credentials::new("AK", "s");
        let r = OssRequest::new(
            "GET",
            OssResource::Tables {
                bucket_arn: None,
                path: "buckets",
            },
        );
        let s = OssV4Signer::tables("cn-hangzhou")
            .sign(&c, &r, t())
            .unwrap();
        assert!(
            s.canonical_request()
                .unwrap()
                .starts_with("GET\n/acs%3Aosstables%3Acn-hangzhou%3A%3Abucket//buckets\n"),
            "{:?}",
            s.canonical_request()
        );
    }
}
