//! The one place floe loads an AWS SDK configuration (feature `aws`): the S3 store, the SQS
//! consumer and the default credentials chain of floe's own SigV4 signers all start here, so
//! they share the HTTP client (hyper with rustls on ring: no aws-lc, no second TLS stack) and the
//! way the region, endpoint and keys are chosen.
//!
//! [`AwsConfigBuilder::load`] goes through `aws_config`'s loader, so what is not given comes
//! from the environment and profile as in every AWS SDK: `AWS_REGION`, `AWS_ENDPOINT_URL` (and
//! `AWS_ENDPOINT_URL_<SERVICE>`), and the default credentials chain (environment, profile, web
//! identity, container, instance metadata) with its refresh. An endpoint given here wins over
//! those variables. Keys given here replace the chain, and the SDK's identity cache is turned off
//! for them: a [`crate::CredentialSource`] answers at once and follows the platform's rotating
//! keys, which a cache would hold past their replacement.
//!
//! The SDK's retry and timeout settings, and service-specific ones (S3 addressing and checksums,
//! say), stay with the service's own config builder, made `from(&sdk_config)` (which takes the
//! HTTP client, region, endpoint and keys from it): set on the loader, the timeouts would also
//! apply to the credential providers' own calls.

use aws_config::identity::IdentityCache;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use floe_core::{Error, Result, Secret};

/// What to load an [`SdkConfig`] with; see the module doc. Everything is optional.
#[derive(Clone, Debug, Default)]
pub struct AwsConfigBuilder {
    region: Option<String>,
    endpoint: Option<String>,
    credentials: Option<SharedCredentialsProvider>,
}

impl AwsConfigBuilder {
    /// Nothing given: region, endpoint and keys from the environment.
    pub fn new() -> Self {
        AwsConfigBuilder::default()
    }

    /// The region, when one is configured.
    pub fn region(mut self, region: Option<String>) -> Self {
        self.region = region;
        self
    }

    /// The endpoint URL for every service built from the config, when one is configured (a
    /// trailing `/` is dropped).
    pub fn endpoint(mut self, endpoint: Option<String>) -> Self {
        self.endpoint = endpoint.map(|e| e.trim_end_matches('/').to_owned());
        self
    }

    /// Sign with `provider` instead of the default chain, without the SDK's identity cache.
    pub fn credentials(mut self, provider: impl ProvideCredentials + 'static) -> Self {
        self.credentials = Some(SharedCredentialsProvider::new(provider));
        self
    }

    /// Sign with fixed keys (and an optional session token) instead of the default chain.
    pub fn static_keys(self, access_key_id: &str, secret: &Secret, token: Option<&Secret>) -> Self {
        self.credentials(aws_credential_types::Credentials::new(
            access_key_id,
            secret.expose(),
            token.map(|t| t.expose().to_owned()),
            None,
            "floe-config",
        ))
    }

    /// Load the config: reads the environment and profile files, sends no request.
    pub async fn load(self) -> SdkConfig {
        let mut loader = aws_config::defaults(BehaviorVersion::latest()).http_client(
            aws_smithy_http_client::Builder::new()
                .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
                .build_https(),
        );
        if let Some(region) = self.region {
            loader = loader.region(Region::new(region));
        }
        if let Some(endpoint) = self.endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        if let Some(provider) = self.credentials {
            loader = loader
                .credentials_provider(provider)
                .identity_cache(IdentityCache::no_cache());
        }
        loader.load().await
    }

    /// [`AwsConfigBuilder::load`], failing with a configuration error (option `region`) when
    /// neither the builder, `AWS_REGION` nor the profile names a region.
    pub async fn load_with_region(self) -> Result<SdkConfig> {
        let sdk = self.load().await;
        if sdk.region().is_none() {
            return Err(Error::config(
                "region",
                "no region configured and none found in AWS_REGION or the profile",
            ));
        }
        Ok(sdk)
    }
}
