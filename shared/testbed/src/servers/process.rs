//! Spawning a server program, waiting for its port, and killing it on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use floe_core::{Error, ErrorKind, Result};
use tokio::time::Instant;

/// A free TCP port on `127.0.0.1` (bound, read, released: another process may still take it
/// before the server binds it, which then fails at start with a clear error).
pub fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| Error::from(e).while_doing("failed to find a free port"))?;
    Ok(listener.local_addr()?.port())
}

/// A running server program; killed (and waited for) on drop.
#[derive(Debug)]
pub struct ServerProcess {
    name: String,
    child: Child,
    port: u16,
    /// Holds the log file (and anything else the launcher puts there) until drop.
    dir: tempfile::TempDir,
}

impl ServerProcess {
    /// Spawn `command` (already given its arguments), logging to a file in a fresh temp dir,
    /// and wait until `127.0.0.1:port` accepts connections.
    pub async fn spawn(
        name: &str,
        mut command: Command,
        port: u16,
        dir: tempfile::TempDir,
        timeout: Duration,
    ) -> Result<Self> {
        let log_path = dir.path().join(format!("{name}.log"));
        let log = std::fs::File::create(&log_path)
            .map_err(|e| Error::from(e).while_doing(format!("failed to create the {name} log")))?;
        let log2 = log
            .try_clone()
            .map_err(|e| Error::from(e).while_doing(format!("failed to open the {name} log")))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log2))
            .spawn()
            .map_err(|e| Error::from(e).while_doing(format!("failed to start {name}")))?;
        let mut server = ServerProcess {
            name: name.to_owned(),
            child,
            port,
            dir,
        };
        server.wait_ready(timeout).await?;
        Ok(server)
    }

    async fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!(
                        "{} exited before it listened on port {} ({status}); its log ends with: {}",
                        self.name,
                        self.port,
                        self.log_tail()
                    ),
                ));
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!(
                        "{} did not listen on port {} within {timeout:?}; its log ends with: {}",
                        self.name,
                        self.port,
                        self.log_tail()
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The temp dir the launcher owns (logs, data).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The last 2,000 bytes of the program's output, on one line.
    pub fn log_tail(&self) -> String {
        let path = self.dir.path().join(format!("{}.log", self.name));
        let text = std::fs::read(&path).unwrap_or_default();
        let tail = &text[text.len().saturating_sub(2000)..];
        String::from_utf8_lossy(tail).replace('\n', " | ")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where a tool lives: `$<env>/<rel>` when the variable is set, else `~/.cache/floe/<default_dir>/<rel>`.
pub(crate) fn tool_path(env: &str, default_dir: &str, rel: &str) -> PathBuf {
    match std::env::var_os(env).filter(|v| !v.is_empty()) {
        Some(base) => PathBuf::from(base).join(rel),
        None => {
            let home = std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "/root".into());
            PathBuf::from(home)
                .join(".cache/floe")
                .join(default_dir)
                .join(rel)
        }
    }
}

/// Fail with an install hint when `path` is not an executable file.
pub(crate) fn require_tool(path: &Path, what: &str, install: &str) -> Result<()> {
    if path.is_file() {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "{what} is not installed at {}: install it with `{install}` (or point the variable at another install)",
                path.display()
            ),
        ))
    }
}
