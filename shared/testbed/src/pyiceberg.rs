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

/// Read several tables of a SQLite catalog in one reader process (one Python start).
pub fn read_sql_tables(
    catalog: &str,
    sqlite: &Path,
    warehouse: &Path,
    tables: &[&str],
) -> std::collections::HashMap<String, serde_json::Value> {
    let mut args = vec![
        "--catalog".to_owned(),
        catalog.to_owned(),
        "--uri".to_owned(),
        format!("sqlite:///{}", sqlite.display()),
        "--warehouse".to_owned(),
        format!("file://{}", warehouse.display()),
    ];
    for t in tables {
        args.push("--table".into());
        args.push((*t).to_owned());
    }
    let v = read_table(&args);
    if tables.len() == 1 {
        return std::collections::HashMap::from([(tables[0].to_owned(), v)]);
    }
    serde_json::from_value(v).expect("reader printed a map of tables")
}
