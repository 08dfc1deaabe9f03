//! Building the `aws-sdk-s3` client from an [`S3StoreConfig`]: the shared SDK config of
//! [`floe_signing::aws`] (HTTP client, region, endpoint, credentials), then addressing,
//! checksums, retries and timeouts.

use std::time::Duration;

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{RequestChecksumCalculation, ResponseChecksumValidation};
use floe_core::{Provider, Result};
use floe_signing::aws::AwsConfigBuilder;
use floe_signing::{CredentialSource, Credentials};

use super::config::{ChecksumPolicy, S3StoreConfig};

/// Keys from the configuration (static), or for OSS the platform's (Function Compute's latest
/// per-invocation keys, else `ALIBABA_CLOUD_*` read now), else the OSS SDKs' variables
/// (`OSS_ACCESS_KEY_*`, static), else the rest of the Alibaba credential chain
/// ([`floe_signing::alibaba`]); `None` means "use the AWS default chain".
pub(crate) fn credential_source(
    config: &S3StoreConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<CredentialSource>> {
    if let Some(source) = &config.credential_source {
        return Ok(Some(source.clone()));
    }
    if let (Some(id), Some(secret)) = (&config.access_key_id, &config.secret_access_key) {
        let c = Credentials::new(id, secret.clone());
        return Ok(Some(CredentialSource::fixed(match &config.session_token {
            Some(t) => c.with_security_token(t.clone()),
            None => c,
        })));
    }
    if config.provider != Provider::Oss {
        return Ok(None);
    }
    let alibaba = floe_signing::alibaba::default_source(&env);
    if matches!(alibaba, CredentialSource::Alibaba(_)) {
        // FC's role keys follow each invocation's.
        return Ok(Some(alibaba));
    }
    let nonempty = |v: &str| env(v).filter(|s| !s.is_empty());
    if let (Some(id), Some(secret)) = (
        nonempty("OSS_ACCESS_KEY_ID"),
        nonempty("OSS_ACCESS_KEY_SECRET"),
    ) {
        // Keys a user set under the OSS SDKs' names are theirs and stay as they are.
        return Ok(Some(CredentialSource::fixed(
            Credentials::new(id, secret)
                .with_security_token(nonempty("OSS_SESSION_TOKEN").unwrap_or_default()),
        )));
    }
    Ok(Some(alibaba))
}

/// Build the SDK client. Reads the environment (credentials, region) but makes no request.
pub(crate) async fn build(config: &S3StoreConfig) -> Result<aws_sdk_s3::Client> {
    config.validate()?;
    let creds = credential_source(config, |v| std::env::var(v).ok())?;
    let mut loader = AwsConfigBuilder::new()
        .region(config.region.clone())
        .endpoint(config.endpoint.clone());
    if let Some(source) = creds {
        // Skip the default chain entirely: the keys are given, or are the platform's. The source
        // answers at once and follows the platform's keys; the SDK's cache (off for given keys)
        // would keep keys that carry no expiry for 15 minutes, past an STS token's replacement.
        loader = loader.credentials(source);
    }
    let sdk = loader.load_with_region().await?;
    let (request, response) = match config.checksum_policy() {
        ChecksumPolicy::WhenSupported => (
            RequestChecksumCalculation::WhenSupported,
            ResponseChecksumValidation::WhenSupported,
        ),
        ChecksumPolicy::WhenRequired => (
            RequestChecksumCalculation::WhenRequired,
            ResponseChecksumValidation::WhenRequired,
        ),
    };
    let builder = aws_sdk_s3::config::Builder::from(&sdk)
        .force_path_style(config.path_style)
        .request_checksum_calculation(request)
        .response_checksum_validation(response)
        .retry_config(RetryConfig::standard().with_max_attempts(config.max_attempts))
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
                .read_timeout(Duration::from_millis(config.read_timeout_ms))
                .build(),
        );
    Ok(aws_sdk_s3::Client::from_conf(builder.build()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oss_keys_come_from_fc_variables_then_oss_sdk_variables() {
        let oss = S3StoreConfig::new(Provider::Oss, "b");
        let fc = |v: &str| match v {
            "ALIBABA_CLOUD_ACCESS_KEY_ID" => Some("STS.id".to_owned()),
            "ALIBABA_CLOUD_ACCESS_KEY_SECRET" => Some("sts-secret".to_owned()),
            "ALIBABA_CLOUD_SECURITY_TOKEN" => Some("sts-token".to_owned()),
            "OSS_ACCESS_KEY_ID" => Some("other".to_owned()),
            _ => None,
        };
        let source = credential_source(&oss, fc).unwrap().unwrap();
        assert!(matches!(source, CredentialSource::Alibaba(_)), "{source:?}");
        let c = source.configured().unwrap();
        assert_eq!(c.access_key_id(), "STS.id");
        assert_eq!(
            c.security_token().map(floe_core::Secret::expose),
            Some("sts-token")
        );

        let sdk_vars = |v: &str| match v {
            "OSS_ACCESS_KEY_ID" => Some("LTAI".to_owned()),
            "OSS_ACCESS_KEY_SECRET" => Some("s".to_owned()),
            "ALIBABA_CLOUD_ACCESS_KEY_ID" => Some(String::new()),
            _ => None,
        };
        let source = credential_source(&oss, sdk_vars).unwrap().unwrap();
        let c = source.configured().unwrap();
        assert_eq!((c.access_key_id(), c.security_token()), ("LTAI", None));

        // No keys anywhere: the rest of the Alibaba chain, asked at the first request.
        let source = credential_source(&oss, |_| None).unwrap().unwrap();
        assert!(
            matches!(source, CredentialSource::AlibabaChain(_)),
            "{source:?}"
        );
        // S3 without keys: the AWS default chain.
        let s3 = S3StoreConfig::new(Provider::S3, "b");
        assert!(credential_source(&s3, fc).unwrap().is_none());
        // Keys in the config win, and stay what they are.
        let given = oss.with_keys("AK", "SK", None);
        let source = credential_source(&given, fc).unwrap().unwrap();
        assert!(matches!(source, CredentialSource::Static(_)), "{source:?}");
        assert_eq!(source.configured().unwrap().access_key_id(), "AK");
    }
}
