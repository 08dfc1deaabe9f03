//! Test support: local servers, protocol emulators and independent read-back checks.
//!
//! - [`mns`]: an MNS queue emulator serving real HTTP on 127.0.0.1.
//! - [`servers`]: launchers for real local servers (`s3s-fs`, `moto_server`) on free ports,
//!   and the one-request-at-a-time front used before `s3s-fs` for compare-and-set tests.

pub mod mns;
pub mod servers;
