//! Queue consumers (MNS, SQS) behind one trait, with the startup modes.
//!
//! - [`mns`]: the Alibaba MNS queue client.

pub mod mns;
