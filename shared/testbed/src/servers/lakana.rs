//! lakana-server 0.20.0 as the Iceberg REST catalog stand-in, from the floe venv.
//!
//! ```text
//! LakanaServer::start().await
//!   tempdir/{lakana.db, wh/, lakana-server.log}
//!   lakana-server migrate                     (LAKANA_DATABASE__URL=sqlite:////…/lakana.db)
//!   lakana-server                             (LAKANA_PORT=<free port>, bootstrap PAT)
//!   wait: GET /v1/config with the bearer → 200
//!   POST /api/v1/environments {"name":"dev","storage":{"scheme":"file","root":"file:///…/wh"}}
//! ```
//! Clients use `uri()`, the bearer `token()` and the prefix `dev` (lakana's config answer names
//! no prefix). Tables may only live in the top-level namespaces `bronze`, `silver`, `gold`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use floe_core::{Error, ErrorKind, Result};

use super::process::{ServerProcess, free_port};
use crate::venv::tool;

/// The version the testbed is checked with.
pub const LAKANA_REQUIREMENT: &str = "lakana-server==0.20.0";

const KEY_ID: &str = "floetest";
const SECRET: &str = "f1oe0test0secret0f1oe0test0secr3"; // 32 characters, as lakana requires

/// A running lakana-server with a `dev` environment on a local warehouse; stopped on drop.
#[derive(Debug)]
pub struct LakanaServer {
    process: ServerProcess,
}

impl LakanaServer {
    /// Migrate a fresh database, start the server on a free port, create `dev`.
    pub async fn start() -> Result<Self> {
        let bin = tool("lakana-server", LAKANA_REQUIREMENT)?;
        let dir = tempfile::tempdir()
            .map_err(|e| Error::from(e).while_doing("failed to create a temp dir for lakana"))?;
        let port = free_port()?;
        let env = |cmd: &mut Command| {
            cmd.env(
                "LAKANA_DATABASE__URL",
                format!("sqlite:///{}", dir.path().join("lakana.db").display()),
            )
            .env("LAKANA_BOOTSTRAP_PAT_KEY_ID", KEY_ID)
            .env("LAKANA_BOOTSTRAP_PAT_SECRET", SECRET)
            .env("LAKANA_PORT", port.to_string())
            .env("LAKANA_LOG__LEVEL", "WARNING");
        };
        let mut migrate = Command::new(&bin);
        migrate.arg("migrate");
        env(&mut migrate);
        let out = tokio::task::spawn_blocking(move || migrate.output())
            .await
            .map_err(|e| Error::unexpected("lakana-server migrate did not finish").with_source(e))?
            .map_err(|e| Error::from(e).while_doing("failed to run lakana-server migrate"))?;
        if !out.status.success() {
            return Err(Error::new(
                ErrorKind::Unexpected,
                format!(
                    "lakana-server migrate failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ),
            ));
        }
        let mut serve = Command::new(&bin);
        env(&mut serve);
        let process =
            ServerProcess::spawn("lakana-server", serve, port, dir, Duration::from_secs(60))
                .await?;
        let server = LakanaServer { process };
        server.wait_answering(Duration::from_secs(60)).await?;
        server.create_environment("dev").await?;
        Ok(server)
    }

    /// The port accepts connections before the app answers: wait for `GET /v1/config` = 200.
    async fn wait_answering(&self, timeout: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        let client = reqwest::Client::new();
        loop {
            let answer = client
                .get(format!("{}/v1/config", self.uri()))
                .bearer_auth(self.token())
                .send()
                .await;
            if answer.is_ok_and(|r| r.status().is_success()) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::new(
                    ErrorKind::Deadline,
                    format!(
                        "lakana-server did not answer /v1/config within {timeout:?}: {}",
                        self.log_tail()
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn create_environment(&self, name: &str) -> Result<()> {
        let wh = self.warehouse_dir();
        std::fs::create_dir_all(&wh).map_err(|e| {
            Error::from(e).while_doing(format!("failed to create {}", wh.display()))
        })?;
        let body = serde_json::json!({
            "name": name,
            "storage": {"scheme": "file", "root": format!("file://{}", wh.display())},
        });
        let resp = reqwest::Client::new()
            .post(format!("{}/api/v1/environments", self.uri()))
            .bearer_auth(self.token())
            .json(&body)
            .send()
            .await
            .map_err(|e| Error::new(ErrorKind::Io, "failed to reach lakana").with_source(e))?;
        let status = resp.status();
        if !status.is_success() {
            let answer = resp.text().await.unwrap_or_default();
            return Err(Error::new(
                ErrorKind::Unexpected,
                format!(
                    "lakana refused environment {name}: http {}: {answer}\n{}",
                    status.as_u16(),
                    self.log_tail()
                ),
            ));
        }
        Ok(())
    }

    /// The REST catalog base URL, `http://127.0.0.1:<port>`.
    pub fn uri(&self) -> String {
        self.process.endpoint()
    }

    /// The bearer token every call needs.
    pub fn token(&self) -> String {
        token()
    }

    /// The REST path prefix of the `dev` environment.
    pub fn prefix(&self) -> &'static str {
        "dev"
    }

    /// The local folder the `dev` environment keeps its tables in.
    pub fn warehouse_dir(&self) -> PathBuf {
        self.process.dir().join("wh")
    }

    /// The server's working folder (database, warehouse, log).
    pub fn dir(&self) -> &Path {
        self.process.dir()
    }

    /// Catalog properties for floe's REST catalog (Kafka Connect names).
    pub fn catalog_props(&self) -> Vec<(String, String)> {
        vec![
            ("uri".into(), self.uri()),
            ("token".into(), self.token()),
            ("prefix".into(), self.prefix().into()),
        ]
    }

    /// The server's recent output.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }
}

fn token() -> String {
    format!("lakana_pat_{KEY_ID}_{SECRET}")
}
