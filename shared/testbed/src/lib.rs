//! Test support: local servers, protocol emulators and independent read-back checks.
//!
//! - [`alibaba_auth`]: STS and the ECS metadata service as the Alibaba credential chain calls them.
//! - [`mns`]: an MNS queue emulator serving real HTTP on 127.0.0.1.
//! - [`functions`]: running a function binary under the Lambda emulator or as an FC server.
//! - [`lambda`]: a Lambda Runtime API emulator serving real HTTP on 127.0.0.1.
//! - [`maxcompute`]: a MaxCompute REST and Tunnel emulator serving real HTTP on 127.0.0.1.
//! - [`pyiceberg`]: reading tables back with pyiceberg.
//! - [`duckdb`]: reading tables back with DuckDB's iceberg extension (it reads equality deletes).
//! - [`templates`]: the environment `template.yaml` and `s.yaml` give each function, rendered.
//! - [`recorder`]: an HTTP server that records requests and answers as a test says.
//! - [`venv`]: finding the venv's tools and running its python (pyiceberg read-back scripts).
//! - [`servers`]: launchers for real local servers on free ports, killed on drop: `s3s-fs`,
//!   `moto_server` (S3 / SQS / S3 Tables), `lakana-server` (Iceberg REST); and the
//!   one-request-at-a-time front used before `s3s-fs` for compare-and-set tests.

pub mod alibaba_auth;
pub mod duckdb;
pub mod functions;
pub mod lambda;
pub mod maxcompute;
pub mod mns;
pub mod pyiceberg;
pub mod recorder;
pub mod servers;
pub mod templates;
pub mod venv;
