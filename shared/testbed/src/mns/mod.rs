//! An MNS queue emulator: a real HTTP server on `127.0.0.1` (ephemeral port) that speaks the
//! consumer side of the MNS queue API closely enough to test a client over the wire.
//!
//! ```text
//! test ──MnsEmulator::start(config)──▶ axum server (127.0.0.1:<port>)
//!   │  send_message / send_message_at         │ verify MNS signature (floe-signing)
//!   │  advance_clock                          │ GET    …/messages[?numOfMessages&waitseconds]
//!   └─ requests() (what clients sent)         │ DELETE …/messages[?ReceiptHandle] (batch: XML body)
//!                                             │ PUT    …/messages?ReceiptHandle&VisibilityTimeout
//! ```
//! What it models: per-queue visibility timeouts, `DequeueCount`, receipt handles that
//! expire at `NextVisibleTime` and are replaced by ChangeMessageVisibility, long polls that
//! return as soon as a message becomes available, batch limits (1..=16 messages, 0..=30 s),
//! 404 `MessageNotExist` for an empty poll, 404 `QueueNotExist`, 403 `SignatureDoesNotMatch`,
//! the `<Error>` body with an `x-mns-request-id` header, and BatchDeleteMessage's `<Errors>`.
//!
//! Choices where the public docs are silent (so tests should not depend on more than
//! "stale"): a handle replaced by ChangeMessageVisibility gives 400 `ReceiptHandleError`; an
//! expired handle, or one of a deleted message, gives 404 `MessageNotExist`; a handle the
//! emulator never issued gives 400 `ReceiptHandleError`; a partial BatchDeleteMessage answers
//! 404 with `<Errors>`.
//!
//! Time: the emulator's clock is the system clock plus an offset that
//! [`MnsEmulator::advance_clock`] moves forward, so visibility expiry can be tested without
//! waiting; short visibility timeouts (milliseconds) work too.

mod queue;
mod server;
mod xml;

pub use server::{MnsEmulator, MnsEmulatorConfig, RecordedRequest};
