//! A test-only fault hook: crash at a named step of the protocol.
//!
//! `FLOE_FAULT=ingest.after-stage` (a comma-separated list of points; `point@N` crashes at the
//! N-th hit) makes [`Faults::hit`] exit the process with status 86 at that point, without
//! cleanup, the way a killed function instance stops. Tests run `floe run` with a fault, then
//! again without, and check that every row landed exactly once.
//!
//! The hook is armed only in builds with the `fault-injection` feature (the test builds: the
//! `floe` crate's dev-dependencies turn it on) or in this crate's own unit tests; a release
//! build never reads `FLOE_FAULT`, and its [`Faults`] is always empty.
//!
//! In-process tests use `Faults::halt_at` instead: the hit never returns, so the caller drops
//! the pipeline's future at that await point (nothing after it runs, as after a kill) and opens
//! another pipeline on the same checkpoint table and catalog to recover.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Exit status of a process stopped by an injected fault.
pub const FAULT_EXIT_CODE: i32 = 86;

/// Every named point, in protocol order (see the crate doc's diagram).
pub const POINTS: &[&str] = &[
    "ingest.after-batch-open",
    "ingest.after-claim",
    "ingest.after-write",
    "ingest.after-dead-letter",
    "ingest.after-stage",
    "ingest.after-mark",
    "commit.after-lease",
    "commit.after-record",
    "commit.mc.after-save-modes",
    "commit.mc.after-session",
    "commit.mc.after-blocks",
    "commit.mc.after-commit",
    "commit.after-replaced-rows",
    "commit.after-batch-snapshot",
    "commit.after-append",
    "commit.after-done",
    "commit.after-settle",
    "commit.after-batches",
    "maintain.after-record",
    "maintain.after-commit",
    "maintain.after-move",
    "maintain.after-orphan",
    "backfill.after-ingest",
    "backfill.after-page",
];

/// The armed fault points.
#[derive(Debug, Default)]
pub struct Faults {
    armed: Mutex<HashMap<String, u32>>,
    /// Set: halt in place and signal it here, instead of exiting the process.
    halt: Option<Arc<Notify>>,
}

impl Faults {
    /// Faults from `FLOE_FAULT` (with the `fault-injection` feature; none without it).
    pub fn from_env() -> Self {
        #[cfg(feature = "fault-injection")]
        if let Ok(spec) = std::env::var("FLOE_FAULT") {
            return Self::parse(&spec);
        }
        Faults::default()
    }

    /// Faults from a spec like `ingest.after-stage,commit.after-append@2`.
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn parse(spec: &str) -> Self {
        let armed = spec
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| match s.split_once('@') {
                Some((p, n)) => (p.to_owned(), n.parse().unwrap_or(1)),
                None => (s.to_owned(), 1),
            })
            .collect();
        Faults {
            armed: Mutex::new(armed),
            halt: None,
        }
    }

    /// Faults from a spec that halt in place instead of exiting: see the module doc.
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn halt_at(spec: &str) -> Self {
        Faults {
            halt: Some(Arc::new(Notify::new())),
            ..Self::parse(spec)
        }
    }

    /// Resolves once a halting fault was hit (never for faults that exit, or none).
    pub async fn halted(&self) {
        match &self.halt {
            Some(n) => n.notified().await,
            None => std::future::pending().await,
        }
    }

    /// Stop here if this point is armed (and its count is reached).
    pub async fn hit(&self, point: &str) {
        debug_assert!(POINTS.contains(&point), "unknown fault point {point}");
        let fire = {
            let mut armed = self.armed.lock().unwrap_or_else(|e| e.into_inner());
            match armed.get_mut(point) {
                Some(n) if *n <= 1 => true,
                Some(n) => {
                    *n -= 1;
                    false
                }
                None => false,
            }
        };
        if !fire {
            return;
        }
        if let Some(n) = &self.halt {
            n.notify_one();
            std::future::pending::<()>().await;
        }
        eprintln!("floe: injected fault at {point}: stopping");
        std::process::exit(FAULT_EXIT_CODE);
    }
}
