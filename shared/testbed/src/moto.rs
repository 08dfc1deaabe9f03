//! moto 5.2's server as the S3, SQS and S3 Tables stand-in, from the floe venv.
//!
//! One port serves every service; moto picks the service from the SigV4 credential scope, so
//! clients sign as usual (any keys, any region moto knows). S3 Tables' control plane works
//! (buckets, namespaces, tables, metadata location with versionToken); maintenance calls do
//! not exist in moto, and it writes no Iceberg metadata file for a new table.

use std::process::Command;
use std::time::Duration;

use floe_core::{Error, ErrorKind, Result};
use tempfile::TempDir;

use crate::process::{ManagedProcess, free_port, http_call};
use crate::venv::tool;

/// What to install when moto is missing.
pub const MOTO_REQUIREMENT: &str = "moto[server]>=5.2,<5.3";

/// A running `moto_server` on 127.0.0.1; stopped on drop.
#[derive(Debug)]
pub struct MotoServer {
    process: ManagedProcess,
    port: u16,
    _dir: TempDir,
}

impl MotoServer {
    /// Start on a free port and wait until it answers.
    pub fn start() -> Result<Self> {
        let bin = tool("moto_server", MOTO_REQUIREMENT)?;
        let dir = tempfile::tempdir()
            .map_err(|e| Error::from(e).while_doing("failed to create a temp dir for moto"))?;
        let port = free_port()?;
        let mut cmd = Command::new(bin);
        cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
        let mut process = ManagedProcess::spawn("moto_server", cmd, &dir.path().join("moto.log"))?;
        process.wait_ready(Duration::from_secs(60), || {
            matches!(
                http_call(port, "GET", "/moto-api/data.json", &[], b""),
                Ok((200, _))
            )
        })?;
        Ok(MotoServer {
            process,
            port,
            _dir: dir,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Forget every resource (`POST /moto-api/reset`).
    pub fn reset(&self) -> Result<()> {
        let (status, body) = http_call(self.port, "POST", "/moto-api/reset", &[], b"")?;
        if status != 200 {
            return Err(Error::new(
                ErrorKind::Unexpected,
                format!(
                    "moto reset failed: http {status}: {}",
                    String::from_utf8_lossy(&body)
                ),
            ));
        }
        Ok(())
    }

    /// The server's recent output.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }
}
