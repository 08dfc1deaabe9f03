//! Test support: local servers, protocol emulators and independent read-back checks.
//!
//! - [`mns`]: an MNS queue emulator serving real HTTP on 127.0.0.1.
//! - [`maxcompute`]: a MaxCompute REST and Tunnel emulator serving real HTTP on 127.0.0.1.

pub mod maxcompute;
pub mod mns;
