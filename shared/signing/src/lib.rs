//! Request signing for AWS SigV4, OSS V1/V4 (and OSS Tables), MNS and MaxCompute.
//!
//! The crate is pure: it does no IO, reads no clock except in the `*_now` convenience wrappers,
//! and pulls in no async runtime or HTTP client. Every signer takes the request's method, path or
//! URL, headers (and body where the scheme needs it) plus the signing time, and returns a
//! [`SignedHeaders`]: the headers the caller adds to the request, and the canonical string that
//! was signed (for tests and for debugging signature mismatches).
//!
//! | module | scheme | `Authorization` |
//! |---|---|---|
//! | [`sigv4`] | AWS SigV4, any service (wraps the `aws-sigv4` crate) | `AWS4-HMAC-SHA256 Credential=…` |
//! | [`oss`] | OSS V1, OSS V4 (product `oss`), OSS Tables V4 (product `osstables`) | `OSS AK:sig`, `OSS4-HMAC-SHA256 …` |
//! | [`mns`] | MNS queues (also [`mns::verify`] for servers) | `MNS AK:sig` |
//! | [`rpc`] | Alibaba Cloud RPC APIs (STS `AssumeRole`), signature version 1.0 | `Signature` parameter, HMAC-SHA1 |
//! | [`odps`] | MaxCompute REST and Tunnel, classic and v4 | `ODPS AK:sig`, `ODPS AK/date/region/odps/aliyun_v4_request:sig` |
//!
//! The `aws` feature adds `aws`, where every AWS SDK client of floe gets its configuration
//! (that module does read the environment, as the AWS SDKs do). The `alibaba` feature adds
//! `alibaba`, the Alibaba Cloud credential chain (environment, OIDC, profile files, the
//! instance's RAM role), which reads the environment and files and calls STS and the metadata
//! service over reqwest. Nothing else here does IO.
//!
//! Credentials are a [`Credentials`] whose secret and token are [`floe_core::Secret`]s, so
//! neither shows up in `Debug` output or logs.

#[cfg(feature = "alibaba")]
pub mod alibaba;
#[cfg(feature = "aws")]
pub mod aws;
pub mod credentials;
mod crypto;
pub mod mns;
pub mod odps;
pub mod oss;
pub mod query;
pub mod rpc;
pub mod signed;
pub mod sigv4;
pub mod time;

pub use credentials::{CredentialSource, Credentials};
pub use signed::SignedHeaders;
