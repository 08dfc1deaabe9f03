//! Child server processes for tests: a free port, a log file, waiting until the server answers,
//! and killing it on drop; plus a tiny blocking HTTP/1.0 client for readiness checks and setup
//! calls (the testbed needs no HTTP client crate for that).

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use floe_core::{Error, ErrorKind, Result};

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| Error::from(e).while_doing("failed to find a free port"))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::from(e).while_doing("failed to find a free port"))?
        .port();
    Ok(port)
}

/// One HTTP/1.0 request to `127.0.0.1:port`; returns the status and body.
pub fn http_call(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<(u16, Vec<u8>)> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let what = format!("{method} http://127.0.0.1:{port}{path}");
    let io = |e: std::io::Error| Error::from(e).while_doing(format!("failed {what}"));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(io)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(io)?;
    let mut request = format!(
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).map_err(io)?;
    stream.write_all(body).map_err(io)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(io)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| Error::new(ErrorKind::Protocol, format!("{what}: no http header end")))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| Error::new(ErrorKind::Protocol, format!("{what}: bad status line")))?;
    Ok((status, raw[split + 4..].to_vec()))
}

/// A server process, killed when dropped.
#[derive(Debug)]
pub struct ManagedProcess {
    name: String,
    child: Child,
    log: PathBuf,
}

impl ManagedProcess {
    /// Start `command` with stdout and stderr going to `log`.
    pub fn spawn(name: &str, mut command: Command, log: &Path) -> Result<Self> {
        let out = File::create(log).map_err(|e| {
            Error::from(e).while_doing(format!("failed to create {}", log.display()))
        })?;
        let err = out
            .try_clone()
            .map_err(|e| Error::from(e).while_doing(format!("failed to open {}", log.display())))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| Error::from(e).while_doing(format!("failed to start {name}")))?;
        Ok(ManagedProcess {
            name: name.to_owned(),
            child,
            log: log.to_owned(),
        })
    }

    /// The last lines of the process's output.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Poll `ready` until it says yes, the process exits, or `timeout` passes.
    pub fn wait_ready(&mut self, timeout: Duration, mut ready: impl FnMut() -> bool) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if ready() {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(Error::new(
                    ErrorKind::Unexpected,
                    format!(
                        "{} exited ({status}) before it was ready:\n{}",
                        self.name,
                        self.log_tail()
                    ),
                ));
            }
            if Instant::now() >= deadline {
                return Err(Error::new(
                    ErrorKind::Deadline,
                    format!(
                        "{} was not ready after {timeout:?}:\n{}",
                        self.name,
                        self.log_tail()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
