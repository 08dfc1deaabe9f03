//! Reading tables back with pyiceberg, the independent reader.
//!
//! Runs `tests/py/iceberg_read.py` with the Python of floe's test venv (`$FLOE_VENV`, default
//! `~/.cache/floe/venv`, made by `.ci/run` / `make test-deps`) and returns its JSON. A missing
//! venv is a test failure that says how to make it, never a skipped check.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The test venv.
pub fn venv() -> PathBuf {
    if let Some(v) = std::env::var_os("FLOE_VENV") {
        return PathBuf::from(v);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"));
    home.join(".cache/floe/venv")
}

/// The venv's python, or a panic saying how to install it.
pub fn python() -> PathBuf {
    let py = venv().join("bin/python");
    assert!(
        py.exists(),
        "no python venv at {}: run `make test-deps` (or .ci/run) to create it with pyiceberg",
        venv().display()
    );
    py
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/py/iceberg_read.py")
}

/// Run the reader with `args`; panics with its stderr on failure.
pub fn read_table(args: &[String]) -> serde_json::Value {
    let out = Command::new(python())
        .arg(script())
        .args(args)
        .output()
        .expect("failed to run python");
    assert!(
        out.status.success(),
        "pyiceberg read failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("pyiceberg reader printed invalid json")
}

/// Read a table of a SQLite catalog (`catalog` is the catalog name floe used).
pub fn read_sql_table(
    catalog: &str,
    sqlite: &Path,
    warehouse: &Path,
    table: &str,
) -> serde_json::Value {
    read_table(&[
        "--catalog".into(),
        catalog.into(),
        "--uri".into(),
        format!("sqlite:///{}", sqlite.display()),
        "--warehouse".into(),
        format!("file://{}", warehouse.display()),
        "--table".into(),
        table.into(),
    ])
}
