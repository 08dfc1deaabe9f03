//! [`SqsConsumer`]: the [`QueueConsumer`] over `aws-sdk-sqs`.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::config::retry::RetryConfig;
use aws_sdk_sqs::config::timeout::TimeoutConfig;
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName};
use floe_core::{Error, ErrorKind, Result};
use floe_signing::aws::AwsConfigBuilder;

use super::config::SqsConfig;
use super::error::{STALE_RECEIPT_CODES, kind_of, map};
use crate::consumer::{DeleteOutcome, QueueConsumer, QueueMessage, copy_error};

/// Most messages per ReceiveMessage or DeleteMessageBatch call.
pub const MAX_BATCH: usize = 10;
/// Longest long-poll wait SQS accepts, in seconds.
pub const MAX_WAIT_SECS: u64 = 20;

/// An SQS queue behind the consumer trait; cheap to clone.
#[derive(Debug, Clone)]
pub struct SqsConsumer {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsConsumer {
    /// Check `config` and build the client. Reads the environment (default credential chain,
    /// region) but sends no request.
    pub async fn new(config: SqsConfig) -> Result<Self> {
        config.validate()?;
        let mut loader = AwsConfigBuilder::new()
            .region(config.region.clone())
            .endpoint(config.endpoint.clone());
        if let (Some(id), Some(secret)) = (&config.access_key_id, &config.secret_access_key) {
            loader = loader.static_keys(id, secret, config.session_token.as_ref());
        }
        let sdk = loader.load_with_region().await?;
        let builder = aws_sdk_sqs::config::Builder::from(&sdk)
            .retry_config(RetryConfig::standard().with_max_attempts(config.max_attempts))
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
                    .build(),
            );
        Ok(SqsConsumer {
            client: aws_sdk_sqs::Client::from_conf(builder.build()),
            queue_url: config.queue_url,
        })
    }

    /// The SDK client (queue administration in tools and tests).
    pub fn sdk_client(&self) -> &aws_sdk_sqs::Client {
        &self.client
    }

    fn to_message(&self, m: &Message) -> Result<QueueMessage> {
        let missing = |what: &str| {
            Error::new(
                ErrorKind::Protocol,
                format!("sqs queue {} sent a message without {what}", self.queue_url),
            )
        };
        let attr = |name: MessageSystemAttributeName| {
            m.attributes()
                .and_then(|a| a.get(&name))
                .and_then(|v| v.parse::<i64>().ok())
        };
        Ok(QueueMessage {
            id: m
                .message_id()
                .ok_or_else(|| missing("a MessageId"))?
                .to_owned(),
            receipt: m
                .receipt_handle()
                .ok_or_else(|| missing("a ReceiptHandle"))?
                .to_owned(),
            body: m.body().unwrap_or_default().as_bytes().to_vec(),
            enqueue_time_ms: attr(MessageSystemAttributeName::SentTimestamp)
                .ok_or_else(|| missing("a SentTimestamp"))?,
            receive_count: attr(MessageSystemAttributeName::ApproximateReceiveCount)
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(1),
        })
    }

    async fn delete_chunk(
        &self,
        chunk: &[QueueMessage],
        out: &mut Vec<DeleteOutcome>,
    ) -> Result<()> {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(&m.receipt)
                    .build()
                    .map_err(|e| Error::unexpected("failed to build a delete entry").with_source(e))
            })
            .collect::<Result<Vec<_>>>()?;
        let resp = self
            .client
            .delete_message_batch()
            .queue_url(&self.queue_url)
            .set_entries(Some(entries))
            .send()
            .await;
        let resp = match resp {
            Ok(r) => r,
            Err(e) => {
                let e = map("delete messages", &self.queue_url, e);
                out.extend(chunk.iter().map(|_| DeleteOutcome::Failed(copy_error(&e))));
                return Ok(());
            }
        };
        for (i, m) in chunk.iter().enumerate() {
            let id = i.to_string();
            let failed = resp.failed().iter().find(|f| f.id() == id);
            out.push(match failed {
                None if resp.successful().iter().any(|s| s.id() == id) => DeleteOutcome::Deleted,
                None => DeleteOutcome::Failed(Error::new(
                    ErrorKind::Protocol,
                    format!(
                        "sqs queue {} did not report on deleting message {}",
                        self.queue_url, m.id
                    ),
                )),
                Some(f) => {
                    let code = f.code();
                    let kind = if f.sender_fault() {
                        kind_of(400, code)
                    } else {
                        kind_of(500, code)
                    };
                    let e = Error::new(
                        kind,
                        format!(
                            "failed to delete message {} from sqs queue {}: {code}: {}",
                            m.id,
                            self.queue_url,
                            f.message().unwrap_or("")
                        ),
                    )
                    .with_context(super::error::CODE_CONTEXT, code);
                    if STALE_RECEIPT_CODES.contains(&code) {
                        DeleteOutcome::Stale(e)
                    } else {
                        DeleteOutcome::Failed(e)
                    }
                }
            });
        }
        Ok(())
    }
}

#[async_trait]
impl QueueConsumer for SqsConsumer {
    fn queue(&self) -> &str {
        &self.queue_url
    }

    fn max_batch(&self) -> usize {
        MAX_BATCH
    }

    fn max_wait(&self) -> Duration {
        Duration::from_secs(MAX_WAIT_SECS)
    }

    async fn check(&self) -> Result<()> {
        self.client
            .get_queue_attributes()
            .queue_url(&self.queue_url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| map("get queue attributes", &self.queue_url, e))?;
        Ok(())
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<QueueMessage>> {
        if !(1..=MAX_BATCH).contains(&max) {
            return Err(Error::invalid_input(format!(
                "sqs receives 1..={MAX_BATCH} messages at a time, got {max}"
            )));
        }
        if wait.subsec_nanos() != 0 || wait.as_secs() > MAX_WAIT_SECS {
            return Err(Error::invalid_input(format!(
                "sqs long-poll wait must be whole seconds up to {MAX_WAIT_SECS} s, got {wait:?}"
            )));
        }
        let out = self
            .client
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(max as i32)
            .wait_time_seconds(wait.as_secs() as i32)
            .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(|e| map("receive messages", &self.queue_url, e))?;
        out.messages().iter().map(|m| self.to_message(m)).collect()
    }

    async fn delete(&self, batch: &[QueueMessage]) -> Result<Vec<DeleteOutcome>> {
        let mut out = Vec::with_capacity(batch.len());
        for chunk in batch.chunks(MAX_BATCH) {
            self.delete_chunk(chunk, &mut out).await?;
        }
        Ok(out)
    }

    async fn extend_visibility(&self, msg: &QueueMessage, secs: u32) -> Result<String> {
        self.client
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(&msg.receipt)
            .visibility_timeout(i32::try_from(secs).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(|e| {
                map("change message visibility", &self.queue_url, e)
                    .with_context("message_id", msg.id.clone())
            })?;
        Ok(msg.receipt.clone())
    }
}
