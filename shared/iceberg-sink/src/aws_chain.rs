//! The AWS default credentials chain for floe's own SigV4 signers (the SigV4 REST catalog and
//! the S3 Tables control-plane client): environment (`AWS_ACCESS_KEY_ID` / `_SECRET_ACCESS_KEY`
//! / `AWS_SESSION_TOKEN`, what Lambda sets), profile files, web identity, container credentials
//! (`AWS_CONTAINER_CREDENTIALS_FULL_URI` or `_RELATIVE_URI` with
//! `AWS_CONTAINER_AUTHORIZATION_TOKEN`, as ECS and EKS set them) and EC2 instance metadata, in
//! that order: the chain the aws-sdk clients (S3, SQS) use, loaded by the same
//! [`floe_signing::aws::AwsConfigBuilder`].
//!
//! One chain per process, built on first use, shared by every signer; its keys are cached by
//! [`CredentialSource`] and fetched again shortly before they expire, so a `floe run --watch`
//! that lives longer than its container's keys keeps signing with valid ones.

use std::sync::OnceLock;

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider, future};
use floe_signing::CredentialSource;
use floe_signing::aws::AwsConfigBuilder;
use tokio::sync::OnceCell;

/// The process's AWS default chain (see the module doc).
pub fn default_chain() -> CredentialSource {
    static CHAIN: OnceLock<CredentialSource> = OnceLock::new();
    CHAIN
        .get_or_init(|| CredentialSource::aws(SharedCredentialsProvider::new(LazyChain::default())))
        .clone()
}

/// The default chain, built when it is first asked (building it reads the environment and the
/// profile files, which needs the async runtime).
#[derive(Debug, Default)]
struct LazyChain {
    chain: OnceCell<Option<SharedCredentialsProvider>>,
}

impl ProvideCredentials for LazyChain {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(async move {
            let chain = self
                .chain
                .get_or_init(|| async {
                    AwsConfigBuilder::new().load().await.credentials_provider()
                })
                .await;
            match chain {
                Some(chain) => chain.provide_credentials().await,
                None => Err(
                    aws_credential_types::provider::error::CredentialsError::not_loaded_no_source(),
                ),
            }
        })
    }
}
