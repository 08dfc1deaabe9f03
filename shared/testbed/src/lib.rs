//! Test support: local servers, protocol emulators and independent read-back checks.
//!
//! - [`mns`]: an MNS queue emulator serving real HTTP on 127.0.0.1.
//! - [`pyiceberg`]: reading tables back with pyiceberg.

pub mod mns;
pub mod pyiceberg;
