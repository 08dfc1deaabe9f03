//! The MNS (Simple Message Queue) consumer: [`MnsClient`] over HTTP(S), signed with
//! `floe-signing`.
//!
//! - [`client`]: the calls (receive, batch receive, delete, batch delete, change visibility).
//! - [`message`]: what they return, and [`decode_body`] for bodies that may be base64.
//! - [`xml`]: the response parser and the one request body.
//! - [`MnsConsumer`]: the client behind [`crate::QueueConsumer`].
//! - [`error`]: MNS error codes as [`floe_core::Error`] kinds and retry flags.
//!
//! A message's life, as the client sees it:
//! ```text
//!  enqueued ──receive──▶ inactive (handle H1 valid until NextVisibleTime)
//!     ▲                     │ change visibility ─▶ inactive, new handle H2 (H1 now stale)
//!     │                     │ delete(H) ─────────▶ gone
//!     └── NextVisibleTime ──┘ (handle stale, DequeueCount +1 on the next receive)
//! ```
//! An empty long poll is HTTP 404 `MessageNotExist`; the client returns no messages for it.

pub mod client;
mod consumer;
pub mod error;
pub mod message;
pub mod xml;

pub use client::{MnsClient, MnsConfig};
pub use consumer::MnsConsumer;
pub use error::{is_stale_receipt_handle, mns_code};
pub use message::{BatchDeleteFailure, ChangedVisibility, ReceivedMessage, decode_body};
