//! The event model, routes, configuration and errors shared by every floe crate.
//!
//! This crate is pure: it does no IO and pulls in no async runtime, SDK or HTTP client. The one
//! exception is opt-in: the `tokio` feature gives [`retry::Retry`] tokio's timer as its default
//! clock.

pub mod error;
pub mod event;
pub mod http;
pub mod retry;
pub mod secret;

pub use error::{Error, ErrorKind, Result};
pub use event::{ObjectChange, Operation, Provider, compare_sequencers, compare_sequencers_opt};
pub use secret::Secret;
