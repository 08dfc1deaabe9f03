//! `moto_server`: AWS services in one Python process (S3 with bucket notifications delivered
//! to SQS, SQS, S3 Tables), from the floe venv. The service is chosen by the SigV4 credential
//! scope, so one port serves them all; signatures are not checked. S3 Tables' control plane
//! works (buckets, namespaces, tables, metadata location with versionToken); maintenance calls
//! do not exist in moto, and it writes no Iceberg metadata file for a new table.

use std::process::Command;
use std::time::Duration;

use floe_core::{Error, ErrorKind, Result};

use super::process::{ServerProcess, free_port};
use crate::venv::tool;

/// What to install when moto is missing (the version `tests/requirements.txt` pins).
pub const MOTO_REQUIREMENT: &str = "moto[server]==5.2.5";

/// A running `moto_server`; stopped on drop.
#[derive(Debug)]
pub struct MotoServer {
    process: ServerProcess,
}

impl MotoServer {
    /// The access key id clients use (moto accepts any).
    pub const ACCESS_KEY_ID: &'static str = "testing";
    /// The secret clients use.
    pub const SECRET_ACCESS_KEY: &'static str = "testing";
    /// The region clients use.
    pub const REGION: &'static str = "us-east-1";
    /// The account id moto reports (in queue URLs and ARNs).
    pub const ACCOUNT_ID: &'static str = "123456789012";

    /// Start it on a free port (Python start-up takes a second or two).
    pub async fn start() -> Result<Self> {
        let bin = tool("moto_server", MOTO_REQUIREMENT)?;
        let dir = tempfile::tempdir()
            .map_err(|e| Error::from(e).while_doing("failed to create a temp dir for moto"))?;
        let port = free_port()?;
        let mut cmd = Command::new(&bin);
        cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
        let process =
            ServerProcess::spawn("moto_server", cmd, port, dir, Duration::from_secs(60)).await?;
        Ok(MotoServer { process })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        self.process.endpoint()
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.process.port()
    }

    /// Forget every bucket, queue and table (`POST /moto-api/reset`).
    pub async fn reset(&self) -> Result<()> {
        let url = format!("{}/moto-api/reset", self.endpoint());
        let resp = reqwest::Client::new()
            .post(&url)
            .send()
            .await
            .map_err(|e| Error::new(ErrorKind::Io, "failed to reset moto").with_source(e))?;
        if !resp.status().is_success() {
            return Err(Error::new(
                ErrorKind::Io,
                format!("failed to reset moto: http {}", resp.status().as_u16()),
            ));
        }
        Ok(())
    }

    /// The program's recent output, for assertion messages.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }
}
