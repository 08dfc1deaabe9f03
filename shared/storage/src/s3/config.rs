//! The configuration of an [`S3Store`](super::S3Store).

use floe_core::{Error, Provider, Result, Secret};

/// How the client treats the newer default checksums (CRC32 trailers on uploads, checksum
/// validation on downloads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChecksumPolicy {
    /// Calculate request checksums and validate response checksums whenever the operation
    /// supports them (the AWS SDK's default; right for AWS S3).
    WhenSupported,
    /// Only when the operation requires them. OSS's S3-compatible endpoint rejects the newer
    /// default checksums, so this is the policy for OSS (the seed's
    /// `-Daws.requestChecksumCalculation=when_required` flags).
    WhenRequired,
}

/// Where an [`S3Store`](super::S3Store) reads and writes, and with which keys.
///
/// Credentials: when `access_key_id` and `secret_access_key` are both set they are used as
/// they are (with `session_token` if set). Otherwise:
/// - provider `S3`: the AWS default chain (`AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` /
///   `AWS_SESSION_TOKEN`, which Lambda sets; profile files; web identity; ECS and EC2
///   metadata);
/// - provider `Oss`: `ALIBABA_CLOUD_ACCESS_KEY_ID` / `ALIBABA_CLOUD_ACCESS_KEY_SECRET` /
///   `ALIBABA_CLOUD_SECURITY_TOKEN` (Function Compute's STS credentials), replaced on FC by the
///   keys of the latest invocation before each request
///   ([`floe_signing::CredentialSource::Alibaba`]); then `OSS_ACCESS_KEY_ID` /
///   `OSS_ACCESS_KEY_SECRET` / `OSS_SESSION_TOKEN` (the OSS SDKs' names), used as they are.
#[derive(Clone, Debug)]
pub struct S3StoreConfig {
    /// `Provider::S3` (AWS S3 or any S3-compatible server; `s3://` URLs) or `Provider::Oss`
    /// (Alibaba OSS through its S3-compatible endpoint; `oss://` URLs). Default `S3`.
    pub provider: Provider,
    /// The bucket; no default.
    pub bucket: String,
    /// Endpoint URL, e.g. `https://oss-cn-hangzhou.aliyuncs.com` or `http://127.0.0.1:9000`.
    /// Default none: AWS's regional endpoint. Required for OSS.
    pub endpoint: Option<String>,
    /// Signing region, e.g. `us-east-1` or `cn-hangzhou`. Default none: for S3 the AWS region
    /// chain (`AWS_REGION`, profile); required for OSS.
    pub region: Option<String>,
    /// Address buckets as `endpoint/bucket/key` instead of `bucket.endpoint/key`. Default
    /// false; local servers (s3s-fs, moto) need true; OSS supports only false.
    pub path_style: bool,
    /// Access key id; default none (see the struct doc).
    pub access_key_id: Option<String>,
    /// Secret access key; default none.
    pub secret_access_key: Option<Secret>,
    /// Session / STS token for temporary keys; default none.
    pub session_token: Option<Secret>,
    /// Where the keys come from, when a caller has one already (tests, embedders); default none:
    /// the keys above, else the providers' defaults (see the struct doc). Wins over the keys.
    pub credential_source: Option<floe_signing::CredentialSource>,
    /// Checksum behaviour; default none: `WhenSupported` for S3, `WhenRequired` for OSS.
    pub checksums: Option<ChecksumPolicy>,
    /// Attempts per call, the first included (the SDK's standard retry with backoff for
    /// throttling, 5xx and timeouts). Default 3; at least 1.
    pub max_attempts: u32,
    /// Time allowed to open a connection, in milliseconds. Default 5,000.
    pub connect_timeout_ms: u64,
    /// Time allowed between two reads of a response (headers or body), in milliseconds.
    /// Default 60,000.
    pub read_timeout_ms: u64,
}

impl S3StoreConfig {
    /// Defaults for `provider` and `bucket`.
    pub fn new(provider: Provider, bucket: impl Into<String>) -> Self {
        S3StoreConfig {
            provider,
            bucket: bucket.into(),
            endpoint: None,
            region: None,
            path_style: false,
            access_key_id: None,
            secret_access_key: None,
            session_token: None,
            credential_source: None,
            checksums: None,
            max_attempts: 3,
            connect_timeout_ms: 5_000,
            read_timeout_ms: 60_000,
        }
    }

    /// Set the endpoint.
    pub fn with_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Set the region.
    pub fn with_region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Use path-style addressing.
    pub fn with_path_style(mut self, path_style: bool) -> Self {
        self.path_style = path_style;
        self
    }

    /// Use these keys instead of the default chain.
    pub fn with_keys(
        mut self,
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<Secret>,
        session_token: Option<Secret>,
    ) -> Self {
        self.access_key_id = Some(access_key_id.into());
        self.secret_access_key = Some(secret_access_key.into());
        self.session_token = session_token.filter(|t| !t.is_empty());
        self
    }

    /// Take the keys from `source` before each request.
    pub fn with_credential_source(mut self, source: floe_signing::CredentialSource) -> Self {
        self.credential_source = Some(source);
        self
    }

    /// The checksum policy in force.
    pub fn checksum_policy(&self) -> ChecksumPolicy {
        self.checksums.unwrap_or(match self.provider {
            Provider::Oss => ChecksumPolicy::WhenRequired,
            _ => ChecksumPolicy::WhenSupported,
        })
    }

    /// Check the configuration; the error names the field.
    pub fn validate(&self) -> Result<()> {
        if !matches!(self.provider, Provider::S3 | Provider::Oss) {
            return Err(Error::config(
                "provider",
                "an s3 store serves s3 or oss, not a local folder",
            ));
        }
        if self.bucket.is_empty() || self.bucket.contains('/') {
            return Err(Error::config(
                "bucket",
                format!("`{}` is not a bucket name", self.bucket),
            ));
        }
        if let Some(ep) = &self.endpoint
            && !(ep.starts_with("http://") || ep.starts_with("https://"))
        {
            return Err(Error::config(
                "endpoint",
                format!("`{ep}` must start with http:// or https://"),
            ));
        }
        if self.provider == Provider::Oss {
            if self.endpoint.is_none() {
                return Err(Error::config(
                    "endpoint",
                    "oss needs its s3-compatible endpoint, e.g. https://oss-cn-hangzhou.aliyuncs.com",
                ));
            }
            if self.region.is_none() {
                return Err(Error::config("region", "oss needs the bucket's region"));
            }
        }
        if self.access_key_id.is_some() != self.secret_access_key.is_some() {
            return Err(Error::config(
                "access-key-id",
                "an access key id and a secret access key go together",
            ));
        }
        if self.max_attempts == 0 {
            return Err(Error::config("max-attempts", "must be at least 1"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_configs_name_the_field() {
        let base = || S3StoreConfig::new(Provider::S3, "b");
        let cases: Vec<(S3StoreConfig, &str)> = vec![
            (S3StoreConfig::new(Provider::Local, "b"), "provider"),
            (S3StoreConfig::new(Provider::S3, ""), "bucket"),
            (base().with_endpoint("localhost:9000"), "endpoint"),
            (S3StoreConfig::new(Provider::Oss, "b"), "endpoint"),
            (
                S3StoreConfig::new(Provider::Oss, "b").with_endpoint("https://oss"),
                "region",
            ),
            (
                S3StoreConfig {
                    access_key_id: Some("AK".into()),
                    ..base()
                },
                "access-key-id",
            ),
            (
                S3StoreConfig {
                    max_attempts: 0,
                    ..base()
                },
                "max-attempts",
            ),
        ];
        for (config, field) in cases {
            let e = config.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{field}: {e}");
        }
        assert!(base().validate().is_ok());
    }

    #[test]
    fn oss_defaults_to_checksums_when_required_and_secrets_stay_hidden() {
        let oss = S3StoreConfig::new(Provider::Oss, "b").with_keys(
            "AK",
            "very-secret",
            Some("tok".into()),
        );
        assert_eq!(oss.checksum_policy(), ChecksumPolicy::WhenRequired);
        assert_eq!(
            S3StoreConfig::new(Provider::S3, "b").checksum_policy(),
            ChecksumPolicy::WhenSupported
        );
        let d = format!("{oss:?}");
        assert!(!d.contains("very-secret") && !d.contains("tok\""), "{d}");
    }
}
