//! Running a function binary (`floe-ingest`, `floe-commit`, …) the way each platform runs it:
//! under the [`LambdaRuntimeApi`] emulator with Lambda's environment, or as an FC custom
//! runtime HTTP server on a free port. The function reads its configuration from
//! `FLOE_CONFIG` in a [`FunctionDir`].

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use floe_core::{Error, ErrorKind, Result};

use crate::lambda::LambdaRuntimeApi;
use crate::servers::free_port;

/// The head of a function test's configuration: the local folder source `bucket/` (rows carry
/// the bucket name `floe-src`), the SQL catalog and the checkpoint table in the folder. A test
/// appends its routes (and any other section).
pub const LOCAL_CONFIG: &str = r#"
[source]
type = "local"
folder = "bucket"
bucket = "floe-src"

[iceberg]
catalog.type = "sql"
catalog.uri = "catalog.db"
catalog.warehouse = "warehouse"

[checkpoint]
path = "checkpoint.db"
"#;

/// An event of `tests/fixtures/events` (panics when it is missing: for tests).
pub fn event_fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/events")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

/// A working folder for a function: `floe.toml`, a `bucket/` folder (the local source), and
/// whatever the configuration puts there (catalog, warehouse, checkpoint table, logs).
pub struct FunctionDir {
    dir: tempfile::TempDir,
}

impl FunctionDir {
    /// A new folder with `config` as `floe.toml`.
    pub fn new(config: &str) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("floe.toml"), config)?;
        std::fs::create_dir_all(dir.path().join("bucket"))?;
        Ok(FunctionDir { dir })
    }

    /// A folder for a function configured only by its environment, as the deployment
    /// templates configure it (`FLOE_CONFIG_TOML`): no `floe.toml` is written, and a process
    /// started here inherits nothing but `PATH`: what it sees is what the platform and the
    /// template give it.
    pub fn deployed() -> Result<Self> {
        Ok(FunctionDir {
            dir: tempfile::tempdir()?,
        })
    }

    /// The folder (canonical, as the SQL catalog records paths).
    pub fn path(&self) -> PathBuf {
        self.dir
            .path()
            .canonicalize()
            .unwrap_or_else(|_| self.dir.path().to_owned())
    }

    /// `floe.toml`.
    pub fn config(&self) -> PathBuf {
        self.path().join("floe.toml")
    }

    /// Write an object of the local bucket.
    pub fn put(&self, key: &str, body: &[u8]) -> Result<()> {
        let path = self.path().join("bucket").join(key);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, body)?;
        Ok(())
    }

    /// Write an NDJSON object of the local bucket with one `{"id": …}` row per id.
    pub fn put_ids(&self, key: &str, ids: &[i64]) -> Result<()> {
        let body: String = ids.iter().map(|id| format!("{{\"id\":{id}}}\n")).collect();
        self.put(key, body.as_bytes())
    }

    /// The `id` column of a table, sorted, and how many snapshots the table has (read with
    /// pyiceberg; panics on a table without those: for tests).
    pub fn ids(&self, table: &str) -> (Vec<i64>, usize) {
        let t = self.read_table(table);
        (
            crate::pyiceberg::row_ids(&t),
            t["snapshots"].as_array().map_or(0, Vec::len),
        )
    }

    /// Read a table of the folder's SQL catalog (`catalog.db`, `warehouse/`) with pyiceberg.
    pub fn read_table(&self, table: &str) -> serde_json::Value {
        crate::pyiceberg::read_sql_table(
            "floe",
            &self.path().join("catalog.db"),
            &self.path().join("warehouse"),
            table,
        )
    }

    /// A command for `bin` with `FLOE_CONFIG` set, nothing inherited that would change the
    /// platform it picks, and `extra` variables.
    fn command(&self, bin: &Path, extra: &[(String, String)]) -> Command {
        let mut cmd = Command::new(bin);
        cmd.current_dir(self.path());
        if !self.config().exists() {
            // `deployed`: the environment is the platform's and the template's, nothing else.
            cmd.env_clear();
            if let Some(path) = std::env::var_os("PATH") {
                cmd.env("PATH", path);
            }
        }
        if self.config().exists() {
            cmd.env("FLOE_CONFIG", self.config());
        }
        cmd.env_remove("FLOE_CONFIG_TOML")
            .env_remove("AWS_LAMBDA_RUNTIME_API")
            .env_remove("FC_SERVER_PORT")
            .env_remove("FLOE_FAULT")
            .env("FLOE_LOG", "info");
        for (k, v) in extra {
            cmd.env(k, v);
        }
        cmd
    }

    /// Start `bin` as a Lambda function served by `api`. Its output goes to `<name>.log`.
    pub fn spawn_lambda(
        &self,
        bin: &Path,
        api: &LambdaRuntimeApi,
        extra: &[(String, String)],
    ) -> Result<FunctionProcess> {
        let name = file_name(bin);
        let mut env = api.function_env(&name);
        env.extend(extra.iter().cloned());
        let log = self.path().join(format!("{name}.lambda.log"));
        let process = ManagedProcess::spawn(&name, self.command(bin, &env), &log)?;
        Ok(FunctionProcess {
            process,
            log,
            port: None,
        })
    }

    /// Start `bin` as an FC custom runtime on a free port; returns once the port accepts
    /// connections. Its output goes to `<name>.fc.log`.
    pub fn spawn_fc(&self, bin: &Path, extra: &[(String, String)]) -> Result<FunctionProcess> {
        let name = file_name(bin);
        let port = free_port()?;
        let mut env = vec![("FC_SERVER_PORT".to_owned(), port.to_string())];
        env.extend(extra.iter().cloned());
        let log = self.path().join(format!("{name}.fc.log"));
        let mut process = ManagedProcess::spawn(&name, self.command(bin, &env), &log)?;
        process.wait_ready(Duration::from_secs(30), || {
            TcpStream::connect_timeout(
                &SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
                Duration::from_millis(200),
            )
            .is_ok()
        })?;
        Ok(FunctionProcess {
            process,
            log,
            port: Some(port),
        })
    }

    /// Run `bin` as a Lambda function until it exits (a start-up failure); returns its exit code.
    pub fn run_lambda_to_exit(
        &self,
        bin: &Path,
        api: &LambdaRuntimeApi,
        extra: &[(String, String)],
    ) -> Result<(Option<i32>, String)> {
        let name = file_name(bin);
        let mut env = api.function_env(&name);
        env.extend(extra.iter().cloned());
        let out = self.command(bin, &env).output()?;
        Ok((
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        ))
    }
}

fn file_name(bin: &Path) -> String {
    bin.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "function".into())
}

/// A running function binary, killed on drop.
pub struct FunctionProcess {
    process: ManagedProcess,
    log: PathBuf,
    /// The FC server's port (FC mode).
    pub port: Option<u16>,
}

impl FunctionProcess {
    /// Everything the process printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last lines of the output (for assertion messages).
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    /// The CPU time the process has used so far (user and system, from `/proc/<pid>/stat`, in
    /// clock ticks of 10 ms as Linux reports them); `None` where there is no such file.
    pub fn cpu_time(&self) -> Option<Duration> {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.process.child.id())).ok()?;
        // Fields after the parenthesised name: state is the 3rd field, utime the 14th.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(Duration::from_millis(ticks * 10))
    }

    /// The process's peak resident memory so far (`VmHWM` of `/proc/<pid>/status`), in KiB;
    /// `None` where there is no such file or the process has exited.
    pub fn peak_rss_kb(&self) -> Option<u64> {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.process.child.id())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// One request to the FC server.
    pub fn fc(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<HttpAnswer> {
        let port = self
            .port
            .ok_or_else(|| Error::unexpected("the function was not started as an fc server"))?;
        http_request(port, method, path, headers, body)
    }
}

/// An HTTP answer with its headers.
#[derive(Clone, Debug)]
pub struct HttpAnswer {
    /// The status.
    pub status: u16,
    /// Headers, names lowercase.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl HttpAnswer {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (panics otherwise: for tests).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "answer is not json ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// One HTTP/1.1 request (`Connection: close`) to `127.0.0.1:port`.
pub fn http_request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<HttpAnswer> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let what = format!("{method} http://127.0.0.1:{port}{path}");
    let io = |e: std::io::Error| Error::from(e).while_doing(format!("failed {what}"));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(io)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(io)?;
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
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
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| Error::new(ErrorKind::Protocol, format!("{what}: bad status line")))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok(HttpAnswer {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    })
}

/// A child process with its output in a log file, killed (and waited for) on drop. Function
/// binaries need this rather than [`crate::servers::ServerProcess`]: under the Lambda emulator
/// they listen on no port, so readiness is the caller's to judge.
#[derive(Debug)]
struct ManagedProcess {
    name: String,
    child: Child,
    log: PathBuf,
}

impl ManagedProcess {
    /// Start `command` with stdout and stderr going to `log`.
    fn spawn(name: &str, mut command: Command, log: &Path) -> Result<Self> {
        let failed = |e: std::io::Error, what: String| Error::from(e).while_doing(what);
        let out = File::create(log)
            .map_err(|e| failed(e, format!("failed to create {}", log.display())))?;
        let err = out
            .try_clone()
            .map_err(|e| failed(e, format!("failed to open {}", log.display())))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| failed(e, format!("failed to start {name}")))?;
        Ok(ManagedProcess {
            name: name.to_owned(),
            child,
            log: log.to_owned(),
        })
    }

    /// The last 20 lines of the output.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Poll `ready` until it says yes, the process exits, or `timeout` passes.
    fn wait_ready(&mut self, timeout: Duration, mut ready: impl FnMut() -> bool) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if ready() {
                return Ok(());
            }
            let (kind, what) = match self.child.try_wait() {
                Ok(Some(status)) => (
                    ErrorKind::Unexpected,
                    format!("exited ({status}) before it was ready"),
                ),
                _ if Instant::now() >= deadline => (
                    ErrorKind::Deadline,
                    format!("was not ready after {timeout:?}"),
                ),
                _ => {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            return Err(Error::new(
                kind,
                format!("{} {what}:\n{}", self.name, self.log_tail()),
            ));
        }
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
