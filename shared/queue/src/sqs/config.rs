//! The configuration of an [`SqsConsumer`](super::SqsConsumer).

use floe_core::{Error, Result, Secret};

/// Where the SQS queue is and which keys read it.
///
/// Credentials: `access_key_id` + `secret_access_key` (+ `session_token`) when both are set;
/// otherwise the AWS default chain (`AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` /
/// `AWS_SESSION_TOKEN` as Lambda sets them, profile files, web identity, ECS and EC2
/// metadata).
#[derive(Clone, Debug)]
pub struct SqsConfig {
    /// The queue URL, e.g. `https://sqs.us-east-1.amazonaws.com/123456789012/floe-events`;
    /// no default.
    pub queue_url: String,
    /// Signing region; default none: the AWS region chain (`AWS_REGION`, profile).
    pub region: Option<String>,
    /// Endpoint URL override (a local server); default none: AWS's regional endpoint.
    pub endpoint: Option<String>,
    /// Access key id; default none (the default chain).
    pub access_key_id: Option<String>,
    /// Secret access key; default none.
    pub secret_access_key: Option<Secret>,
    /// Session token for temporary keys; default none.
    pub session_token: Option<Secret>,
    /// Attempts per call, the first included (the SDK's standard retry). Default 3.
    pub max_attempts: u32,
    /// Time allowed to open a connection, in milliseconds. Default 5,000.
    pub connect_timeout_ms: u64,
}

impl SqsConfig {
    /// Defaults for `queue_url`.
    pub fn new(queue_url: impl Into<String>) -> Self {
        SqsConfig {
            queue_url: queue_url.into(),
            region: None,
            endpoint: None,
            access_key_id: None,
            secret_access_key: None,
            session_token: None,
            max_attempts: 3,
            connect_timeout_ms: 5_000,
        }
    }

    /// Set the region.
    pub fn with_region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Set the endpoint.
    pub fn with_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
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

    /// Check the configuration; the error names the field.
    pub fn validate(&self) -> Result<()> {
        let url = &self.queue_url;
        if !(url.starts_with("https://") || url.starts_with("http://")) || url.ends_with('/') {
            return Err(Error::config(
                "queue-url",
                format!(
                    "`{url}` is not an sqs queue url (https://sqs.<region>.amazonaws.com/<account>/<queue>)"
                ),
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
