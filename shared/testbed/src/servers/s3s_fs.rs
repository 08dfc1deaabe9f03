//! `s3s-fs`: an S3 server over a local folder (each top-level folder is a bucket). It checks
//! SigV4 signatures, paginates ListObjectsV2 and answers `If-None-Match: *` / `If-Match`
//! with 412; it sends no notifications. Path-style requests only.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use floe_core::{Error, Result};

use super::process::{ServerProcess, free_port, require_tool, tool_path};

/// How `.ci/run` installs it.
const INSTALL: &str = "cargo install s3s-fs@0.14.1 --features binary --locked --root ${FLOE_TOOLS:-~/.cache/floe/tools}";

/// A running `s3s-fs`; stopped on drop, its data folder removed.
#[derive(Debug)]
pub struct S3sFs {
    process: ServerProcess,
    root: PathBuf,
}

impl S3sFs {
    /// The access key id it accepts.
    pub const ACCESS_KEY_ID: &'static str = "FLOETESTAKID0S3SFS";
    /// The secret it accepts.
    pub const SECRET_ACCESS_KEY: &'static str = "floe-test-secret-for-s3s-fs-0123456789";
    /// The region clients sign for (s3s-fs accepts any).
    pub const REGION: &'static str = "us-east-1";

    /// Where the binary is looked for: `$FLOE_TOOLS/bin/s3s-fs`, default
    /// `~/.cache/floe/tools/bin/s3s-fs`.
    pub fn binary() -> PathBuf {
        tool_path("FLOE_TOOLS", "tools", "bin/s3s-fs")
    }

    /// Start it on a free port over a fresh temp folder.
    pub async fn start() -> Result<Self> {
        let bin = Self::binary();
        require_tool(&bin, "s3s-fs", INSTALL)?;
        let dir = tempfile::tempdir()
            .map_err(|e| Error::from(e).while_doing("failed to create a temp dir for s3s-fs"))?;
        let root = dir.path().join("data");
        std::fs::create_dir_all(&root)?;
        let port = free_port()?;
        let mut cmd = Command::new(&bin);
        cmd.args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", Self::ACCESS_KEY_ID])
            .args(["--secret-key", Self::SECRET_ACCESS_KEY])
            .arg(&root);
        let process =
            ServerProcess::spawn("s3s-fs", cmd, port, dir, Duration::from_secs(20)).await?;
        Ok(S3sFs { process, root })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        self.process.endpoint()
    }

    /// The folder holding the buckets.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Create a bucket (a folder under the root); no-op if it exists.
    pub fn create_bucket(&self, name: &str) -> Result<()> {
        std::fs::create_dir_all(self.root.join(name))
            .map_err(|e| Error::from(e).while_doing(format!("failed to create bucket {name}")))
    }

    /// The program's recent output, for assertion messages.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }
}
