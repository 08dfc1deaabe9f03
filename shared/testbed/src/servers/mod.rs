//! Real local servers for tests: each launcher starts a process on a free `127.0.0.1` port,
//! waits until the port answers, hands out the endpoint and credentials, and kills the
//! process when dropped.
//!
//! | launcher | program | found at |
//! |---|---|---|
//! | [`S3sFs`] | `s3s-fs` 0.14.1 (S3 over a folder; SigV4 and conditional writes checked) | `$FLOE_TOOLS/bin/s3s-fs`, default `~/.cache/floe/tools/bin/s3s-fs` |
//! | [`MotoServer`] | `moto_server` 5.2 (S3 with notifications to SQS, SQS, S3 Tables) | `$FLOE_VENV/bin/moto_server`, default `~/.cache/floe/venv/bin/moto_server` |
//! | [`LakanaServer`] | `lakana-server` 0.20 (an Iceberg REST catalog; bearer tokens) | `$FLOE_VENV/bin/lakana-server` |
//! | [`Linearizer`] | floe's own: an HTTP front that passes one request at a time to a server | in process |
//! | [`ContainerCredentials`] | floe's own: an ECS-style container credentials endpoint | in process |
//!
//! A missing program is an error whose message says how to install it: tests fail with it
//! instead of skipping.
//!
//! ```text
//!  start() ── spawn program (stdout+stderr → log file in a temp dir)
//!     │
//!     ├── poll 127.0.0.1:<port> every 50 ms ── program exited? → error with its log tail
//!     │                                      └─ no answer within the timeout → error
//!     ▼
//!  running (endpoint, credentials) ── drop → kill + wait, temp dir removed
//! ```

mod container_credentials;
mod lakana;
mod linearizer;
mod moto;
mod process;
mod s3s_fs;

pub use container_credentials::{CONTAINER_CREDENTIALS_PATH, ContainerCredentials};
pub use lakana::{LAKANA_REQUIREMENT, LakanaServer};
pub use linearizer::{Linearizer, SigV4Gate};
pub use moto::{MOTO_REQUIREMENT, MotoServer};
pub use process::{ServerProcess, free_port};
pub use s3s_fs::S3sFs;
