//! [`MnsConsumer`]: the [`QueueConsumer`] over [`MnsClient`].

use std::time::Duration;

use async_trait::async_trait;
use floe_core::{Error, ErrorKind, Result};

use super::client::{MAX_BATCH, MAX_WAIT_SECS, MnsClient};
use super::error::{codes, is_stale_receipt_handle};
use super::message::ReceivedMessage;
use crate::consumer::{DeleteOutcome, QueueConsumer, QueueMessage, copy_error};

/// An MNS queue behind the consumer trait.
#[derive(Debug, Clone)]
pub struct MnsConsumer {
    client: MnsClient,
    label: String,
}

impl MnsConsumer {
    /// Consume the client's queue.
    pub fn new(client: MnsClient) -> Self {
        let label = format!("mns://{}", client.queue());
        MnsConsumer { client, label }
    }

    /// The client.
    pub fn client(&self) -> &MnsClient {
        &self.client
    }
}

fn to_message(m: ReceivedMessage) -> QueueMessage {
    QueueMessage {
        id: m.message_id,
        receipt: m.receipt_handle,
        body: m.body.into_bytes(),
        enqueue_time_ms: m.enqueue_time_ms,
        receive_count: m.dequeue_count,
    }
}

fn whole_secs(wait: Duration) -> Result<u32> {
    if wait.subsec_nanos() != 0 || wait.as_secs() > u64::from(MAX_WAIT_SECS) {
        return Err(Error::invalid_input(format!(
            "mns long-poll wait must be whole seconds up to {MAX_WAIT_SECS} s, got {wait:?}"
        )));
    }
    Ok(wait.as_secs() as u32)
}

#[async_trait]
impl QueueConsumer for MnsConsumer {
    fn queue(&self) -> &str {
        &self.label
    }

    fn max_batch(&self) -> usize {
        MAX_BATCH
    }

    fn max_wait(&self) -> Duration {
        Duration::from_secs(u64::from(MAX_WAIT_SECS))
    }

    async fn check(&self) -> Result<()> {
        self.client.get_queue_attributes().await
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<QueueMessage>> {
        let wait = whole_secs(wait)?;
        let got = self.client.batch_receive_message(max, Some(wait)).await?;
        Ok(got.into_iter().map(to_message).collect())
    }

    async fn delete(&self, batch: &[QueueMessage]) -> Result<Vec<DeleteOutcome>> {
        let mut out = Vec::with_capacity(batch.len());
        for chunk in batch.chunks(MAX_BATCH) {
            let handles: Vec<&str> = chunk.iter().map(|m| m.receipt.as_str()).collect();
            match self.client.batch_delete_message(&handles).await {
                Ok(failures) => {
                    for m in chunk {
                        let failure = failures.iter().find(|f| f.receipt_handle == m.receipt);
                        out.push(match failure {
                            None => DeleteOutcome::Deleted,
                            Some(f) => {
                                let stale = f.error_code == codes::MESSAGE_NOT_EXIST
                                    || f.error_code == codes::RECEIPT_HANDLE_ERROR;
                                let e = Error::new(
                                    if stale {
                                        ErrorKind::NotFound
                                    } else {
                                        ErrorKind::InvalidInput
                                    },
                                    format!(
                                        "failed to delete message {} from {}: {}: {}",
                                        m.id, self.label, f.error_code, f.error_message
                                    ),
                                )
                                .with_context("mns_code", f.error_code.clone());
                                if stale {
                                    DeleteOutcome::Stale(e)
                                } else {
                                    DeleteOutcome::Failed(e)
                                }
                            }
                        });
                    }
                }
                Err(e) => {
                    for _ in chunk {
                        out.push(if is_stale_receipt_handle(&e) {
                            DeleteOutcome::Stale(copy_error(&e))
                        } else {
                            DeleteOutcome::Failed(copy_error(&e))
                        });
                    }
                }
            }
        }
        Ok(out)
    }

    async fn extend_visibility(&self, msg: &QueueMessage, secs: u32) -> Result<String> {
        let changed = self
            .client
            .change_message_visibility(&msg.receipt, secs)
            .await?;
        Ok(changed.receipt_handle)
    }
}
