//! A MaxCompute emulator: REST (`/api/…`) and Tunnel (`/…`) on one real HTTP server on
//! `127.0.0.1`, for testing the MaxCompute client and sink over the wire.
//!
//! ```text
//! test ──MaxComputeEmulator::start(config)──▶ axum server (127.0.0.1:<port>)
//!   │ create_table / insert_rows                 │ every request: ODPS signature (floe-signing)
//!   │ rows / partitions / table / sql_log        │ REST  GET  /api/projects/p/tables/t[?extended|partitions|partition=]
//!   │ inject(FaultPoint, FaultAction)            │       GET  /api/projects/p/tunnel?service
//!   │ advance_clock / move_upsert_bucket         │       POST /api/projects/p/instances (SQL), GET …/<id>[?taskstatus|result]
//!   └ requests()                                 │ Tunnel POST|GET|PUT /projects/p/tables/t?uploads|uploadid[&blockid]
//!                                                │       POST|GET|PUT|DELETE /projects/p/tables/t/upserts?…
//! ```
//! What it models: tables (columns, partitions, primary key, transactional flag) and their rows;
//! upload sessions (24 h life, status, block list, overwrite, atomic commit); upsert sessions
//! (buckets on slots, routing header with 308 on a moved bucket, hash routing check, upsert and
//! delete applied by primary key at commit, `COMMITTING` for a configurable number of reloads);
//! SQL jobs (the save modes' statements) that report `Running` before
//! `Terminated`; blocks decoded with `floe-tunnel-codec` (compression and CRCs checked), in the
//! record format or, with the `arrow` query parameter, the Arrow format (`arrow.rs`).
//!
//! Choices where the service's behaviour is not documented (tests should not lean on more):
//! writing to or committing a session that is not open answers 409 `StatusConflict`; an unknown
//! upload id answers 404 `NoSuchUpload`; a bad block answers 400 `MalformedDataStream`.
//!
//! Time: the clock is the system clock plus [`MaxComputeEmulator::advance_clock`]'s offset, so
//! session expiry is tested without waiting.

mod arrow;
mod faults;
mod model;
mod rest;
mod server;
mod sql;
mod tunnel;

pub use faults::{Fault, FaultAction, FaultPoint};
pub use model::TableDef;
pub use server::{MaxComputeEmulator, MaxComputeEmulatorConfig, RecordedRequest};
